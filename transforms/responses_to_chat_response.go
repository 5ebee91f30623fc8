package transforms

import (
	"bytes"
	"strconv"
	"time"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// WantsResponse implements ResponseRewriter.
func (t *ResponsesToChat) WantsResponse(x *Exchange) bool { return t.record(x).bridged }

// chatMessage is what a Chat completion's first choice says.
type chatMessage struct {
	content, reasoning []byte // decoded text
	calls              []bridgeCall
	finish             string
}

type bridgeCall struct {
	id, name string
	args     []byte // decoded
}

// RewriteResponse implements ResponseRewriter: a Chat completion becomes
// a Responses object.
func (t *ResponsesToChat) RewriteResponse(x *Exchange, body []byte) ([]byte, error) {
	rec := t.record(x)
	if !rec.bridged || !jsonspan.Valid(body) {
		return body, nil
	}
	start := jsonspan.SkipSpace(body, 0)
	if body[start] != '{' {
		return body, nil
	}
	var f [4]jsonspan.Span
	jsonspan.ObjectFields(body, start, []string{"choices", "usage", "created", "error"}, f[:])
	if f[0].Start < 0 || body[f[0].Start] != '[' {
		return body, nil // an error object or something else: as it came
	}
	var m chatMessage
	jsonspan.EachElement(body, f[0].Start, func(c jsonspan.Span) bool {
		var g [2]jsonspan.Span
		jsonspan.ObjectFields(body, c.Start, []string{"message", "finish_reason"}, g[:])
		m.finish, _ = jsonspan.StringValue(body, g[1])
		msg := g[0]
		if msg.Start < 0 || body[msg.Start] != '{' {
			return false
		}
		var h [4]jsonspan.Span
		jsonspan.ObjectFields(body, msg.Start, []string{"content", "reasoning_content", "reasoning", "tool_calls"}, h[:])
		m.content = stringBytes(body, h[0])
		m.reasoning = stringBytes(body, h[1])
		if len(m.reasoning) == 0 {
			m.reasoning = stringBytes(body, h[2])
		}
		if h[3].Start >= 0 && body[h[3].Start] == '[' {
			jsonspan.EachElement(body, h[3].Start, func(tc jsonspan.Span) bool {
				var k [2]jsonspan.Span
				jsonspan.ObjectFields(body, tc.Start, []string{"id", "function"}, k[:])
				var c bridgeCall
				c.id, _ = jsonspan.StringValue(body, k[0])
				if k[1].Start >= 0 && body[k[1].Start] == '{' {
					var n [2]jsonspan.Span
					jsonspan.ObjectFields(body, k[1].Start, []string{"name", "arguments"}, n[:])
					c.name, _ = jsonspan.StringValue(body, n[0])
					c.args = stringBytes(body, n[1])
				}
				m.calls = append(m.calls, c)
				return true
			})
		}
		return false // the first choice: a Responses object has one answer
	})
	b := bridgeOut{t: t, rec: rec}
	var items [][]byte
	if len(m.reasoning) > 0 {
		items = append(items, b.reasoningItem(nil, m.reasoning))
	}
	if len(m.content) > 0 {
		items = append(items, b.messageItem(nil, m.content))
	}
	for i, c := range m.calls {
		items = append(items, b.callItem(nil, i, c.id, c.name, c.args, "completed"))
	}
	status, reason := finishStatus(m.finish)
	created := int64(0)
	if f[2].Start >= 0 {
		created, _ = strconv.ParseInt(string(body[f[2].Start:f[2].End]), 10, 64)
	}
	return b.response(nil, status, reason, created, items, body, f[1]), nil
}

// stringBytes decodes a JSON string value; anything else is nil.
func stringBytes(doc []byte, v jsonspan.Span) []byte {
	if v.Start < 0 || doc[v.Start] != '"' {
		return nil
	}
	return jsonspan.Unescape(make([]byte, 0, v.End-v.Start), doc[v.Start+1:v.End-1])
}

// finishStatus maps a finish_reason to a response status and, for an
// incomplete one, the reason.
func finishStatus(finish string) (status, reason string) {
	switch finish {
	case "length", "model_context_window_exceeded":
		return "incomplete", "max_output_tokens"
	case "content_filter", "sensitive":
		return "incomplete", "content_filter"
	}
	return "completed", ""
}

// bridgeOut writes the Responses shapes of one exchange.
type bridgeOut struct {
	t   *ResponsesToChat
	rec *bridgeRecord
}

func (b *bridgeOut) reasoningItem(dst, text []byte) []byte {
	dst = append(dst, `{"id":"rs_`+b.rec.id+`","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":`...)
	dst = jsonspan.AppendString(dst, text)
	dst = append(dst, `}],"encrypted_content":`...)
	dst = jsonspan.AppendStringStr(dst, reasoningEnvelope(b.t.Profile))
	return append(dst, '}')
}

func (b *bridgeOut) messageItem(dst, text []byte) []byte {
	dst = append(dst, `{"id":"msg_`+b.rec.id+`","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":`...)
	dst = jsonspan.AppendString(dst, text)
	return append(dst, `,"annotations":[],"logprobs":[]}]}`...)
}

func (b *bridgeOut) callID(i int) string { return "fc_" + b.rec.id + "_" + strconv.Itoa(i) }

func (b *bridgeOut) callItem(dst []byte, i int, callID, name string, args []byte, status string) []byte {
	if callID == "" {
		callID = "call_" + b.rec.id + "_" + strconv.Itoa(i)
	}
	dst = append(dst, `{"id":"`+b.callID(i)+`","type":"function_call","status":"`+status+`","call_id":`...)
	dst = jsonspan.AppendStringStr(dst, callID)
	dst = append(dst, `,"name":`...)
	dst = jsonspan.AppendStringStr(dst, name)
	dst = append(dst, `,"arguments":`...)
	dst = jsonspan.AppendString(dst, args)
	return append(dst, '}')
}

// response writes the Responses object: status, output items and usage
// from the Chat usage at u in doc.
func (b *bridgeOut) response(dst []byte, status, reason string, created int64, items [][]byte, doc []byte, u jsonspan.Span) []byte {
	if created == 0 {
		created = time.Now().Unix()
	}
	dst = append(dst, `{"id":"resp_`+b.rec.id+`","object":"response","created_at":`+strconv.FormatInt(created, 10)+`,"status":"`+status+`","model":`...)
	if b.rec.model != nil {
		dst = append(dst, b.rec.model...)
	} else {
		dst = append(dst, `""`...)
	}
	dst = append(dst, `,"output":[`...)
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, it...)
	}
	dst = append(dst, `],"usage":`...)
	dst = appendUsage(dst, doc, u)
	dst = append(dst, `,"error":null,"incomplete_details":`...)
	if reason != "" {
		dst = append(dst, `{"reason":"`+reason+`"}`...)
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, '}')
}

// appendUsage maps Chat usage to Responses usage, with both details
// objects always present: Codex refuses usage without them.
func appendUsage(dst, doc []byte, u jsonspan.Span) []byte {
	if u.Start < 0 || doc[u.Start] != '{' {
		return append(dst, "null"...)
	}
	num := func(sp jsonspan.Span) int64 {
		if sp.Start < 0 {
			return 0
		}
		n, _ := strconv.ParseInt(string(doc[sp.Start:sp.End]), 10, 64)
		return n
	}
	var f [6]jsonspan.Span
	jsonspan.ObjectFields(doc, u.Start, []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details", "prompt_cache_hit_tokens"}, f[:])
	in, out, total := num(f[0]), num(f[1]), num(f[2])
	if total == 0 {
		total = in + out
	}
	cached := num(f[5])
	if d := f[3]; d.Start >= 0 && doc[d.Start] == '{' {
		if c := num(jsonspan.Lookup(doc, d.Start, "cached_tokens")); c > 0 {
			cached = c
		}
	}
	var reasoning int64
	if d := f[4]; d.Start >= 0 && doc[d.Start] == '{' {
		reasoning = num(jsonspan.Lookup(doc, d.Start, "reasoning_tokens"))
	}
	i := strconv.AppendInt
	dst = append(dst, `{"input_tokens":`...)
	dst = i(dst, in, 10)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = i(dst, cached, 10)
	dst = append(dst, `},"output_tokens":`...)
	dst = i(dst, out, 10)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":`...)
	dst = i(dst, reasoning, 10)
	dst = append(dst, `},"total_tokens":`...)
	dst = i(dst, total, 10)
	return append(dst, '}')
}

// --- streams -----------------------------------------------------------------

// NewStream implements ResponseRewriter.
func (t *ResponsesToChat) NewStream(x *Exchange) StreamTransform {
	rec := t.record(x)
	if !rec.bridged {
		return nil
	}
	return &chatToResponses{out: bridgeOut{t: t, rec: rec}, x: x, calls: map[int]*streamCall{}}
}

// chatToResponses turns a Chat chunk stream into the Responses event
// stream strict clients accept: response.created and in_progress first,
// items opened and closed with dense output_index, a content part before
// text, reasoning before what it led to, call arguments live but their
// done events only after finish_reason, and exactly one terminal event
// once the stream ends, so the trailing usage chunk is in it. Events carry
// a placeholder sequence_number the engine numbers.
type chatToResponses struct {
	out     bridgeOut
	x       *Exchange
	started bool
	ended   bool
	created int64
	next    int // the next output_index

	// The open reasoning or message item, if any (at most one of them).
	open     byte // 0, 'r' or 'm'
	openIdx  int
	openText []byte

	calls     map[int]*streamCall // by Chat tool call index
	callOrder []int
	items     [][]byte // finished items, in output order, for the final object
	itemIdx   []int

	finish string
	usage  []byte
	n      int // items opened, for their ids
}

type streamCall struct {
	idx      int // output_index once added, else -1
	id, name string
	args     []byte
	pending  []byte // argument bytes before the call could be announced
	seq      int
}

func (s *chatToResponses) emit(emit Emit, b []byte) error {
	return emit(&Event{Data: b})
}

// ev starts an event of type typ with its placeholder sequence number.
func ev(typ string) []byte {
	return []byte(`{"type":"` + typ + `","sequence_number":0`)
}

func (s *chatToResponses) start(emit Emit) error {
	if s.started {
		return nil
	}
	s.started = true
	if s.created == 0 {
		s.created = time.Now().Unix()
	}
	for _, typ := range []string{"response.created", "response.in_progress"} {
		b := ev(typ)
		b = append(b, `,"response":`...)
		b = s.out.response(b, "in_progress", "", s.created, nil, nil, jsonspan.NoSpan())
		if err := s.emit(emit, append(b, '}')); err != nil {
			return err
		}
	}
	return nil
}

func (s *chatToResponses) Event(e *Event, emit Emit) error {
	d := bytes.TrimSpace(e.Data)
	if s.ended {
		return nil
	}
	if bytes.Equal(d, doneData) {
		return s.terminal(emit)
	}
	if len(d) == 0 || d[0] != '{' {
		return emit(e) // a comment or keep-alive
	}
	var f [4]jsonspan.Span
	jsonspan.ObjectFields(d, 0, []string{"choices", "usage", "created", "error"}, f[:])
	if f[3].Start >= 0 && d[f[3].Start] == '{' {
		return s.fail(emit, d, f[3])
	}
	if !s.started && f[2].Start >= 0 {
		s.created, _ = strconv.ParseInt(string(d[f[2].Start:f[2].End]), 10, 64)
	}
	if err := s.start(emit); err != nil {
		return err
	}
	if f[1].Start >= 0 && d[f[1].Start] == '{' {
		s.usage = append(s.usage[:0], d[f[1].Start:f[1].End]...)
	}
	if f[0].Start < 0 || d[f[0].Start] != '[' {
		return nil
	}
	var err error
	jsonspan.EachElement(d, f[0].Start, func(c jsonspan.Span) bool {
		var g [3]jsonspan.Span
		jsonspan.ObjectFields(d, c.Start, []string{"delta", "finish_reason", "index"}, g[:])
		if g[2].Start >= 0 && string(d[g[2].Start:g[2].End]) != "0" {
			return true // a Responses object holds one answer
		}
		if delta := g[0]; delta.Start >= 0 && d[delta.Start] == '{' {
			if err = s.delta(emit, d, delta); err != nil {
				return false
			}
		}
		if fr, ok := jsonspan.StringValue(d, g[1]); ok && fr != "" {
			s.finish = fr
			err = s.settle(emit)
		}
		return err == nil
	})
	return err
}

// delta handles one choice delta: reasoning, text and tool call pieces.
func (s *chatToResponses) delta(emit Emit, d []byte, delta jsonspan.Span) error {
	var f [4]jsonspan.Span
	jsonspan.ObjectFields(d, delta.Start, []string{"reasoning_content", "reasoning", "content", "tool_calls"}, f[:])
	r := f[0]
	if r.Start < 0 || d[r.Start] != '"' {
		r = f[1]
	}
	if text := stringBytes(d, r); len(text) > 0 {
		if err := s.text(emit, 'r', text); err != nil {
			return err
		}
	}
	if text := stringBytes(d, f[2]); len(text) > 0 {
		if err := s.text(emit, 'm', text); err != nil {
			return err
		}
	}
	if tc := f[3]; tc.Start >= 0 && d[tc.Start] == '[' {
		var err error
		jsonspan.EachElement(d, tc.Start, func(el jsonspan.Span) bool {
			err = s.callDelta(emit, d, el)
			return err == nil
		})
		return err
	}
	return nil
}

// text adds reasoning ('r') or message ('m') text, opening its item and
// closing the other kind first.
func (s *chatToResponses) text(emit Emit, kind byte, text []byte) error {
	if s.open != kind {
		if err := s.closeOpen(emit); err != nil {
			return err
		}
		s.open, s.openIdx, s.openText = kind, s.next, s.openText[:0]
		s.next++
		s.n++
		b := ev("response.output_item.added")
		b = append(b, `,"output_index":`+strconv.Itoa(s.openIdx)+`,"item":`...)
		part := `{"type":"output_text","text":"","annotations":[],"logprobs":[]}`
		if kind == 'r' {
			b = append(b, `{"id":"`+s.itemID(kind)+`","type":"reasoning","summary":[],"content":[],"encrypted_content":`...)
			b = jsonspan.AppendStringStr(b, reasoningEnvelope(s.out.t.Profile))
			b = append(b, '}')
			part = `{"type":"reasoning_text","text":""}`
		} else {
			b = append(b, `{"id":"`+s.itemID(kind)+`","type":"message","status":"in_progress","role":"assistant","content":[]}`...)
		}
		if err := s.emit(emit, append(b, '}')); err != nil {
			return err
		}
		b = ev("response.content_part.added")
		b = append(b, `,"item_id":"`+s.itemID(kind)+`","output_index":`+strconv.Itoa(s.openIdx)+`,"content_index":0,"part":`+part+`}`...)
		if err := s.emit(emit, b); err != nil {
			return err
		}
	}
	s.openText = append(s.openText, text...)
	typ := "response.output_text.delta"
	if kind == 'r' {
		typ = "response.reasoning_text.delta"
	}
	b := ev(typ)
	b = append(b, `,"item_id":"`+s.itemID(kind)+`","output_index":`+strconv.Itoa(s.openIdx)+`,"content_index":0,"delta":`...)
	b = jsonspan.AppendString(b, text)
	if kind == 'm' {
		b = append(b, `,"logprobs":[]`...)
	}
	return s.emit(emit, append(b, '}'))
}

// itemID is the id of the open item of a kind: ids are per item, so a
// reasoning item that opens again after text gets a new one.
func (s *chatToResponses) itemID(kind byte) string {
	p := "msg_"
	if kind == 'r' {
		p = "rs_"
	}
	return p + s.out.rec.id + "_" + strconv.Itoa(s.n)
}

// closeOpen finishes the open reasoning or message item.
func (s *chatToResponses) closeOpen(emit Emit) error {
	if s.open == 0 {
		return nil
	}
	kind, id, idx := s.open, s.itemID(s.open), strconv.Itoa(s.openIdx)
	s.open = 0
	text := jsonspan.AppendString(nil, s.openText)
	doneTyp, partTyp := "response.output_text.done", "output_text"
	if kind == 'r' {
		doneTyp, partTyp = "response.reasoning_text.done", "reasoning_text"
	}
	b := ev(doneTyp)
	b = append(b, `,"item_id":"`+id+`","output_index":`+idx+`,"content_index":0,"text":`...)
	b = append(append(b, text...), '}')
	if err := s.emit(emit, b); err != nil {
		return err
	}
	part := []byte(`{"type":"` + partTyp + `","text":`)
	part = append(part, text...)
	if kind == 'm' {
		part = append(part, `,"annotations":[],"logprobs":[]`...)
	}
	part = append(part, '}')
	b = ev("response.content_part.done")
	b = append(b, `,"item_id":"`+id+`","output_index":`+idx+`,"content_index":0,"part":`...)
	b = append(append(b, part...), '}')
	if err := s.emit(emit, b); err != nil {
		return err
	}
	var item []byte
	if kind == 'r' {
		item = append(item, `{"id":"`+id+`","type":"reasoning","summary":[],"content":[`...)
		item = append(item, part...)
		item = append(item, `],"encrypted_content":`...)
		item = jsonspan.AppendStringStr(item, reasoningEnvelope(s.out.t.Profile))
		item = append(item, '}')
	} else {
		item = append(item, `{"id":"`+id+`","type":"message","status":"completed","role":"assistant","content":[`...)
		item = append(item, part...)
		item = append(item, "]}"...)
	}
	s.items, s.itemIdx = append(s.items, item), append(s.itemIdx, s.openIdx)
	b = ev("response.output_item.done")
	b = append(b, `,"output_index":`+idx+`,"item":`...)
	b = append(append(b, item...), '}')
	return s.emit(emit, b)
}

// callDelta handles one tool_calls fragment, keyed by its index: the call
// is announced once its name is known; argument bytes stream live.
func (s *chatToResponses) callDelta(emit Emit, d []byte, el jsonspan.Span) error {
	var f [3]jsonspan.Span
	jsonspan.ObjectFields(d, el.Start, []string{"index", "id", "function"}, f[:])
	key := 0
	if f[0].Start >= 0 {
		key, _ = strconv.Atoi(string(d[f[0].Start:f[0].End]))
	}
	c := s.calls[key]
	if c == nil {
		c = &streamCall{idx: -1, seq: len(s.callOrder)}
		s.calls[key] = c
		s.callOrder = append(s.callOrder, key)
	}
	if id, ok := jsonspan.StringValue(d, f[1]); ok && id != "" && c.id == "" {
		c.id = id
	}
	var args []byte
	if fn := f[2]; fn.Start >= 0 && d[fn.Start] == '{' {
		var g [2]jsonspan.Span
		jsonspan.ObjectFields(d, fn.Start, []string{"name", "arguments"}, g[:])
		if name, ok := jsonspan.StringValue(d, g[0]); ok && name != "" {
			c.name += name // some upstreams stream the name in pieces
		}
		args = stringBytes(d, g[1])
	}
	if c.idx < 0 {
		c.pending = append(c.pending, args...)
		if c.name == "" {
			return nil // not announced before the name is known
		}
		if err := s.closeOpen(emit); err != nil {
			return err
		}
		c.idx = s.next
		s.next++
		b := ev("response.output_item.added")
		b = append(b, `,"output_index":`+strconv.Itoa(c.idx)+`,"item":`...)
		b = s.out.callItem(b, c.idx, s.callIDOf(c), c.name, nil, "in_progress")
		if err := s.emit(emit, append(b, '}')); err != nil {
			return err
		}
		args, c.pending = c.pending, nil
	}
	if len(args) == 0 {
		return nil
	}
	c.args = append(c.args, args...)
	b := ev("response.function_call_arguments.delta")
	b = append(b, `,"item_id":"`+s.out.callID(c.idx)+`","output_index":`+strconv.Itoa(c.idx)+`,"delta":`...)
	b = jsonspan.AppendString(b, args)
	return s.emit(emit, append(b, '}'))
}

func (s *chatToResponses) callIDOf(c *streamCall) string {
	if c.id != "" {
		return c.id
	}
	return "call_" + s.out.rec.id + "_" + strconv.Itoa(c.seq)
}

// settle runs at finish_reason: the open item closes, and every announced
// call gets its done events, in output order. The terminal event waits
// for the end of the stream, which carries the usage.
func (s *chatToResponses) settle(emit Emit) error {
	if err := s.closeOpen(emit); err != nil {
		return err
	}
	if s.finish == "length" || s.finish == "content_filter" || s.finish == "sensitive" {
		// A call cut short is never delivered.
		for _, k := range s.callOrder {
			if c := s.calls[k]; c.idx >= 0 {
				s.x.Decide(c.name, "drop_partial_call", "finish_reason "+s.finish+" cut the call short")
			}
		}
		s.calls, s.callOrder = map[int]*streamCall{}, nil
		return nil
	}
	for _, k := range s.callOrder {
		c := s.calls[k]
		if c.idx < 0 {
			s.x.Decide("tool call", "drop", "a tool call without a name")
			continue
		}
		if len(c.args) == 0 {
			c.args = append(c.args, "{}"...)
		}
		b := ev("response.function_call_arguments.done")
		b = append(b, `,"item_id":"`+s.out.callID(c.idx)+`","output_index":`+strconv.Itoa(c.idx)+`,"name":`...)
		b = jsonspan.AppendStringStr(b, c.name)
		b = append(b, `,"arguments":`...)
		b = jsonspan.AppendString(b, c.args)
		if err := s.emit(emit, append(b, '}')); err != nil {
			return err
		}
		item := s.out.callItem(nil, c.idx, s.callIDOf(c), c.name, c.args, "completed")
		s.items, s.itemIdx = append(s.items, item), append(s.itemIdx, c.idx)
		b = ev("response.output_item.done")
		b = append(b, `,"output_index":`+strconv.Itoa(c.idx)+`,"item":`...)
		if err := s.emit(emit, append(append(b, item...), '}')); err != nil {
			return err
		}
	}
	s.calls, s.callOrder = map[int]*streamCall{}, nil
	return nil
}

// ordered returns the finished items in output_index order.
func (s *chatToResponses) ordered() [][]byte {
	out := make([][]byte, len(s.items))
	copy(out, s.items)
	idx := append([]int(nil), s.itemIdx...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && idx[j] < idx[j-1]; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// terminal emits the one terminal event: completed, incomplete, or failed
// when the upstream never said how the answer ended.
func (s *chatToResponses) terminal(emit Emit) error {
	if s.ended {
		return nil
	}
	if err := s.start(emit); err != nil {
		return err
	}
	if s.finish == "" {
		return s.failWith(emit, "server_error", "the upstream's stream ended without a finish_reason")
	}
	s.ended = true
	status, reason := finishStatus(s.finish)
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	b := ev(typ)
	b = append(b, `,"response":`...)
	u := jsonspan.NoSpan()
	if len(s.usage) > 0 {
		u = jsonspan.Span{Start: 0, End: len(s.usage)}
	}
	b = s.out.response(b, status, reason, s.created, s.ordered(), s.usage, u)
	return s.emit(emit, append(b, '}'))
}

// fail turns an upstream error chunk into response.failed.
func (s *chatToResponses) fail(emit Emit, d []byte, e jsonspan.Span) error {
	code, _ := jsonspan.StringValue(d, jsonspan.Lookup(d, e.Start, "code"))
	msg, _ := jsonspan.StringValue(d, jsonspan.Lookup(d, e.Start, "message"))
	if code == "" {
		code = "server_error"
	}
	if bytes.Contains(bytes.ToLower([]byte(msg)), []byte("context length")) || bytes.Contains(bytes.ToLower([]byte(msg)), []byte("maximum context")) {
		code = "context_length_exceeded"
	}
	return s.failWith(emit, code, msg)
}

func (s *chatToResponses) failWith(emit Emit, code, msg string) error {
	if err := s.start(emit); err != nil {
		return err
	}
	// Text already streamed is real; calls not yet settled are dropped.
	if err := s.closeOpen(emit); err != nil {
		return err
	}
	for _, k := range s.callOrder {
		if c := s.calls[k]; c.idx >= 0 {
			s.x.Decide(c.name, "drop_partial_call", "the upstream's stream failed before the call completed")
		}
	}
	s.calls, s.callOrder = map[int]*streamCall{}, nil
	s.ended = true
	s.x.streamErr = code
	b := ev("response.failed")
	b = append(b, `,"response":`...)
	r := s.out.response(nil, "failed", "", s.created, s.ordered(), nil, jsonspan.NoSpan())
	// The error goes where the object says null.
	e := []byte(`{"code":`)
	e = jsonspan.AppendStringStr(e, code)
	e = append(e, `,"message":`...)
	e = jsonspan.AppendStringStr(e, msg)
	e = append(e, '}')
	r = bytes.Replace(r, []byte(`"error":null`), append([]byte(`"error":`), e...), 1)
	b = append(b, r...)
	return s.emit(emit, append(b, '}'))
}

// End implements StreamTransform: a stream that ends without [DONE] still
// gets its terminal event.
func (s *chatToResponses) End(emit Emit) error { return s.terminal(emit) }
