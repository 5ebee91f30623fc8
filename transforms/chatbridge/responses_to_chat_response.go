package chatbridge

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// WantsResponse implements ResponseRewriter.
func (t *ResponsesToChat) WantsResponse(x *transforms.Exchange) bool { return t.record(x).bridged }

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
func (t *ResponsesToChat) RewriteResponse(x *transforms.Exchange, body []byte) ([]byte, error) {
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
		var h [6]jsonspan.Span
		jsonspan.ObjectFields(body, msg.Start, []string{"content", "reasoning_content", "reasoning", "tool_calls", "reasoning_details", "refusal"}, h[:])
		m.content = stringBytes(body, h[0])
		if len(m.content) == 0 {
			m.content = stringBytes(body, h[5]) // a refusal is the answer's text
		}
		m.reasoning = stringBytes(body, h[1])
		if len(m.reasoning) == 0 {
			m.reasoning = stringBytes(body, h[2])
		}
		if d := h[4]; len(m.reasoning) == 0 && d.Start >= 0 && body[d.Start] == '[' {
			// MiniMax, asked for reasoning_split, answers in these.
			jsonspan.EachElement(body, d.Start, func(el jsonspan.Span) bool {
				m.reasoning = append(m.reasoning, stringBytes(body, jsonspan.Lookup(body, el.Start, "text"))...)
				return true
			})
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
				if c.name == "" {
					x.Decide("tool call", "drop", "a tool call without a function name")
					return true
				}
				m.calls = append(m.calls, c)
				return true
			})
		}
		return false // the first choice: a Responses object has one answer
	})
	if len(m.reasoning) == 0 {
		m.reasoning, m.content = splitThink(m.content)
	}
	b := bridgeOut{t: t, rec: rec}
	status, reason := finishStatus(m.finish)
	var items [][]byte
	if len(m.reasoning) > 0 {
		cut := len(m.reasoning) > t.maxReasoning
		if cut {
			m.reasoning = m.reasoning[:utf8Cut(m.reasoning, t.maxReasoning)]
			x.Decide("reasoning", "truncate", reasoningCutReason(t.maxReasoning))
		}
		items = append(items, b.reasoningItem(nil, m.reasoning, cut))
	}
	if len(m.content) > 0 {
		ms := status
		if ms == "failed" {
			ms = "completed" // the text itself is whole
		}
		items = append(items, b.messageItem(nil, m.content, ms))
	}
	for i, c := range m.calls {
		if status != "completed" {
			// Cut short: never delivered as if it were whole.
			x.Decide(c.name, "drop_partial_call", "finish_reason "+m.finish+" cut the call short")
			continue
		}
		if len(c.args) == 0 {
			c.args = []byte("{}")
		}
		items = append(items, b.callItem(nil, i, c.id, c.name, c.args, "completed"))
	}
	created := int64(0)
	if f[2].Start >= 0 {
		created, _ = strconv.ParseInt(string(body[f[2].Start:f[2].End]), 10, 64)
	}
	var errObj []byte
	if status == "failed" {
		errObj = errorObject("server_error", "the upstream ended the answer with finish_reason "+m.finish)
	}
	need := 512
	for _, it := range items {
		need += len(it) + 1
	}
	// One allocation for the whole object, rather than growth by
	// quarters through megabytes of items.
	out := b.responseHead(make([]byte, 0, need), status, created)
	for i, it := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	out = b.responseTail(out, reason, errObj, body, f[1])
	return out, nil
}

// RewriteError implements ErrorRewriter: an upstream error about the
// context length gets the code Codex and the SDKs know,
// context_length_exceeded; anything else, and the status, stay as they are.
func (t *ResponsesToChat) RewriteError(x *transforms.Exchange, status int, body []byte) []byte {
	// Only a refused request can be too long; a rate limit or a server
	// error mentioning tokens is something else.
	if !t.record(x).bridged || (status != 400 && status != 413) || !jsonspan.Valid(body) {
		return body
	}
	start := jsonspan.SkipSpace(body, 0)
	if body[start] != '{' {
		return body
	}
	e := jsonspan.Lookup(body, start, "error")
	if e.Start < 0 || body[e.Start] != '{' {
		return body
	}
	msg, _ := jsonspan.StringValue(body, jsonspan.Lookup(body, e.Start, "message"))
	if !contextTooLong(msg) {
		return body
	}
	const code = `"context_length_exceeded"`
	if c := jsonspan.Lookup(body, e.Start, "code"); c.Start >= 0 {
		// A code of the upstream's own that says something else stays.
		switch cur, _ := jsonspan.StringValue(body, c); cur {
		case "context_length_exceeded":
			return body
		case "", "invalid_request_error", "invalid_request", "bad_request", "400":
		default:
			if !jsonspan.IsNull(body, c) {
				return body
			}
		}
		return jsonspan.Apply(body, []jsonspan.Edit{{Start: c.Start, End: c.End, Repl: []byte(code)}})
	}
	at := e.Start + 1
	repl := []byte(`"code":` + code)
	if next := jsonspan.SkipSpace(body, at); next < len(body) && body[next] != '}' {
		repl = append(repl, ',')
	}
	return jsonspan.Apply(body, []jsonspan.Edit{{Start: at, End: at, Repl: repl}})
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
	case "stop", "tool_calls", "function_call", "end_turn", "eos", "":
		return "completed", ""
	case "length", "model_context_window_exceeded":
		return "incomplete", "max_output_tokens"
	case "content_filter", "sensitive":
		return "incomplete", "content_filter"
	}
	// "error", DeepSeek's insufficient_system_resource, anything else: the
	// answer did not end as the model meant it to.
	return "failed", ""
}

// bridgeOut writes the Responses shapes of one exchange.
type bridgeOut struct {
	t   *ResponsesToChat
	rec *bridgeRecord
}

func (b *bridgeOut) reasoningItem(dst, text []byte, cut bool) []byte {
	dst = append(dst, `{"id":"rs_`+b.rec.id+`","type":"reasoning","summary":[`...)
	if b.t.showSummary {
		dst = append(dst, `{"type":"summary_text","text":`...)
		dst = jsonspan.AppendString(dst, text)
		dst = append(dst, '}')
	}
	dst = append(dst, `],"content":[`...)
	if b.t.showRaw {
		dst = append(dst, `{"type":"reasoning_text","text":`...)
		dst = jsonspan.AppendString(dst, text)
		dst = append(dst, '}')
	}
	dst = append(dst, `],"encrypted_content":`...)
	env := b.t.envelopeCut
	if !cut {
		env = textEnvelopeOf(b.t.Profile, text)
	}
	dst = jsonspan.AppendStringStr(dst, env)
	return append(dst, '}')
}

func (b *bridgeOut) messageItem(dst, text []byte, status string) []byte {
	dst = append(dst, `{"id":"msg_`+b.rec.id+`","type":"message","status":"`+status+`","role":"assistant","content":[{"type":"output_text","text":`...)
	dst = jsonspan.AppendString(dst, text)
	return append(dst, `,"annotations":[],"logprobs":[]}]}`...)
}

func (b *bridgeOut) callID(i int) string { return "fc_" + b.rec.id + "_" + strconv.Itoa(i) }

func (b *bridgeOut) callItem(dst []byte, i int, callID, name string, args []byte, status string) []byte {
	dst = b.callHead(dst, i, callID, name, status)
	dst = jsonspan.AppendString(dst, args)
	return append(dst, '}')
}

// callHead writes a function_call item up to its arguments' value.
func (b *bridgeOut) callHead(dst []byte, i int, callID, name string, status string) []byte {
	if callID == "" {
		callID = "call_" + b.rec.id + "_" + strconv.Itoa(i)
	}
	dst = append(dst, `{"id":"`...)
	dst = append(dst, b.callID(i)...)
	dst = append(dst, `","type":"function_call","status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","call_id":`...)
	dst = jsonspan.AppendStringStr(dst, callID)
	dst = append(dst, `,"name":`...)
	dst = jsonspan.AppendStringStr(dst, name)
	return append(dst, `,"arguments":`...)
}

// responseHead writes the Responses object up to its output items.
func (b *bridgeOut) responseHead(dst []byte, status string, created int64) []byte {
	if created == 0 {
		created = time.Now().Unix()
	}
	dst = append(dst, `{"id":"resp_`+b.rec.id+`","object":"response","created_at":`+strconv.FormatInt(created, 10)+`,"status":"`+status+`","model":`...)
	if b.rec.model != nil {
		dst = append(dst, b.rec.model...)
	} else {
		dst = append(dst, `""`...)
	}
	return append(dst, `,"output":[`...)
}

// responseTail ends the output and writes the rest of the object: usage
// from the Chat usage at u in doc, the error object (null when nil) and
// the incomplete reason.
func (b *bridgeOut) responseTail(dst []byte, reason string, errObj, doc []byte, u jsonspan.Span) []byte {
	dst = append(dst, `],"usage":`...)
	dst = appendUsage(dst, doc, u)
	dst = append(dst, `,"error":`...)
	if errObj != nil {
		dst = append(dst, errObj...)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"incomplete_details":`...)
	if reason != "" {
		dst = append(dst, `{"reason":"`+reason+`"}`...)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, b.rec.echo...)
	return append(dst, '}')
}

// errorObject is a response's error.
func errorObject(code, msg string) []byte {
	e := []byte(`{"code":`)
	e = jsonspan.AppendStringStr(e, code)
	e = append(e, `,"message":`...)
	e = jsonspan.AppendStringStr(e, msg)
	return append(e, '}')
}

// reasoningCutReason is the decision's reason when reasoning passes the
// cap.
func reasoningCutReason(max int) string {
	return "reasoning past max_reasoning (" + strconv.Itoa(max) + " bytes) is not kept: the item holds what came before and is marked cut, so it is never sent back"
}

// utf8Cut returns the largest length at most n at which text can be cut
// without splitting a character.
func utf8Cut(text []byte, n int) int {
	for k := n; k > 0 && k > n-utf8.UTFMax; k-- {
		if utf8.RuneStart(text[k]) {
			return k
		}
	}
	return n // not UTF-8 there anyway
}

// usageFields are the members of a Chat usage object appendUsage reads.
var usageFields = []string{"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details", "prompt_cache_hit_tokens", "cached_tokens"}

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
	var f [7]jsonspan.Span
	jsonspan.ObjectFields(doc, u.Start, usageFields, f[:])
	in, out, total := num(f[0]), num(f[1]), num(f[2])
	if total == 0 {
		total = in + out
	}
	// DeepSeek counts cache hits in prompt_cache_hit_tokens, Kimi in a
	// top-level cached_tokens, OpenAI and the others in the details.
	cached := max(num(f[5]), num(f[6]))
	var written int64
	if d := f[3]; d.Start >= 0 && doc[d.Start] == '{' {
		var g [2]jsonspan.Span
		jsonspan.ObjectFields(doc, d.Start, []string{"cached_tokens", "cache_write_tokens"}, g[:])
		if c := num(g[0]); c > 0 {
			cached = c
		}
		written = num(g[1])
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
	dst = append(dst, `,"cache_write_tokens":`...)
	dst = i(dst, written, 10)
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
func (t *ResponsesToChat) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	rec := t.record(x)
	if !rec.bridged {
		return nil
	}
	return &chatToResponses{out: bridgeOut{t: t, rec: rec}, x: x, maxReasoning: t.maxReasoning}
}

// chatToResponses turns a Chat chunk stream into the Responses event
// stream strict clients accept: response.created and in_progress first,
// items opened and closed with dense output_index, a content part before
// text, reasoning before what it led to, call arguments live but their
// done events only after finish_reason, and exactly one terminal event
// once the stream ends, so the trailing usage chunk is in it. Events are
// numbered from 0; the engine renumbers them only if a later stage adds or
// drops events.
//
// Text is never decoded: a delta's JSON string goes to the client as the
// upstream escaped it, and an item's text is the concatenation of its
// deltas' escaped contents, itself a valid JSON string. Each chunk is
// walked once, and events are built in one reused buffer.
type chatToResponses struct {
	out     bridgeOut
	x       *transforms.Exchange
	started bool
	ended   bool
	created int64
	next    int // the next output_index

	// The open reasoning or message item, if any (at most one of them).
	open     byte // 0, 'r' or 'm'
	openID   string
	openIdx  string
	openText rope // escaped, without quotes
	openCut  bool // reasoning past the cap: no longer kept

	// Reasoning kept so far, and the most that may be: past it reasoning
	// still streams but is no longer held.
	reasoningKept, maxReasoning int

	calls   transforms.ChatCalls[*streamCall] // the answer's calls, until settled
	waiting []*streamCall                     // named calls not announced yet
	items   []*doneItem                       // finished items, for the final object

	finish string
	usage  []byte
	n      int // items opened, for their ids

	think thinkSplit // <think> at the head of the content

	buf []byte // the event being built
	evt transforms.Event
	seq int64  // the next event's sequence_number
	typ string // the type of the event being built
}

// doneItem is a finished output item, kept for the final object as its
// parts: its text or arguments are held once, in the rope they grew in,
// and written out into each event that carries them.
type doneItem struct {
	idx    int    // output_index
	kind   byte   // 'r' reasoning, 'm' message, 'c' function call
	cut    bool   // reasoning cut at max_reasoning
	env    string // reasoning: its envelope
	id     string
	status string // a message's
	callID string // a call's, and its name
	name   string
	text   rope // escaped, without quotes
}

// eventNames are the event lines of the types the bridge writes, made once.
var eventNames = func() map[string][]byte {
	m := map[string][]byte{}
	for _, t := range []string{"response.created", "response.in_progress", "response.output_item.added", "response.output_item.done",
		"response.content_part.added", "response.content_part.done", "response.output_text.delta", "response.output_text.done",
		"response.reasoning_text.delta", "response.reasoning_text.done", "response.function_call_arguments.delta",
		"response.function_call_arguments.done", "response.completed", "response.incomplete", "response.failed",
		"response.reasoning_summary_part.added", "response.reasoning_summary_text.delta", "response.reasoning_summary_text.done", "response.reasoning_summary_part.done"} {
		m[t] = []byte(t)
	}
	return m
}()

type streamCall struct {
	idx      int    // output_index once announced, else -1
	idxStr   string // idx, formatted
	itemID   string
	id, name string
	args     rope // escaped, without quotes
	seq      int
	waiting  bool // named, not announced: in chatToResponses.waiting
}

// Release implements transforms.StreamReleaser: nothing the stream built
// outlives it.
func (s *chatToResponses) Release() {
	s.buf = nil
	s.items, s.calls, s.openText = nil, transforms.ChatCalls[*streamCall]{}, rope{}
}

// begin starts an event of type typ, with its sequence number,
// in the reused buffer.
func (s *chatToResponses) begin(typ string) []byte {
	s.typ = typ
	b := append(s.buf[:0], `{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	// The right number already: the engine renumbers only when a stage
	// after this one adds or drops events.
	return strconv.AppendInt(b, s.seq, 10)
}

// send emits the event built in b. It lives in the reused buffer: stages
// after this one copy what they keep.
func (s *chatToResponses) send(emit transforms.Emit, b []byte) error {
	s.buf = b
	s.seq++
	// Named here, so the engine need not look the type up to write the
	// event line.
	name, ok := eventNames[s.typ]
	if !ok {
		name = []byte(s.typ)
	}
	s.evt = transforms.Event{Name: name, Data: b}
	return emit(&s.evt)
}

func (s *chatToResponses) start(emit transforms.Emit) error {
	if s.started {
		return nil
	}
	s.started = true
	if s.created == 0 {
		s.created = time.Now().Unix()
	}
	for _, typ := range []string{"response.created", "response.in_progress"} {
		b := s.begin(typ)
		b = append(b, `,"response":`...)
		b = s.out.responseHead(b, "in_progress", s.created)
		b = s.out.responseTail(b, "", nil, nil, jsonspan.NoSpan())
		if err := s.send(emit, append(b, '}')); err != nil {
			return err
		}
	}
	return nil
}

// Event implements StreamTransform.
func (s *chatToResponses) Event(e *transforms.Event, emit transforms.Emit) error {
	d := bytes.TrimSpace(e.Data)
	if s.ended {
		return nil
	}
	if string(d) == "[DONE]" {
		return s.terminal(emit)
	}
	if e.Data == nil {
		// A comment or keep-alive goes on, when whole: a line the
		// upstream cut off would run into the next event.
		if bytes.HasSuffix(e.Raw, []byte("\n\n")) || bytes.HasSuffix(e.Raw, []byte("\r\n\r\n")) {
			return emit(e)
		}
		return nil
	}
	if len(d) == 0 || d[0] != '{' {
		s.x.Decide("stream", "skip", "an upstream data line that is not a chunk")
		return nil
	}
	var err error
	member := func(k jsonspan.Span, v int) int {
		if err != nil {
			return jsonspan.StopWalk
		}
		if v >= len(d) {
			return -1 // cut off: not a chunk
		}
		switch jsonspan.KeyName(d, k) {
		case "choices":
			if d[v] != '[' {
				break
			}
			if err = s.start(emit); err != nil {
				return jsonspan.StopWalk
			}
			return jsonspan.WalkElements(d, v, func(c int) int {
				if err != nil || d[c] != '{' {
					return jsonspan.SkipValue(d, c)
				}
				var e int
				e, err = s.choice(emit, d, c)
				return e
			})
		case "created":
			e := jsonspan.SkipValue(d, v)
			if e > v && !s.started {
				s.created, _ = strconv.ParseInt(string(d[v:e]), 10, 64)
			}
			return e
		case "usage":
			e := jsonspan.SkipValue(d, v)
			if e > v && d[v] == '{' {
				s.usage = append(s.usage[:0], d[v:e]...)
			}
			return e
		case "error":
			e := jsonspan.SkipValue(d, v)
			if e > v && d[v] == '{' {
				err = s.fail(emit, d, jsonspan.Span{Start: v, End: e})
				return jsonspan.StopWalk
			}
			return e
		}
		return jsonspan.SkipValue(d, v)
	}
	var end int
	if at, ok := s.skipHead(d); ok {
		end = jsonspan.WalkMembersAt(d, at, member)
	} else {
		end = jsonspan.WalkMembers(d, 0, member)
	}
	switch {
	case err != nil:
		return err
	case s.ended:
		return nil // an error chunk ended it
	case end < 0:
		s.x.Decide("stream", "skip", "an upstream chunk that is not valid JSON")
		return nil
	}
	return s.start(emit)
}

// skipHead finds the choices member of a chunk whose members before it are
// flat scalars, as they are in every provider's chunks, reading created on
// the way: one light pass that takes strings by their quotes. A head with
// anything nested, an escaped key, usage or error takes the full walk.
func (s *chatToResponses) skipHead(d []byte) (int, bool) {
	i := 1
	for {
		i = jsonspan.SkipSpace(d, i)
		if i >= len(d) || d[i] != '"' {
			return 0, false
		}
		k := bytes.IndexByte(d[i+1:], '"')
		if k < 0 {
			return 0, false
		}
		keyAt, key := i, d[i+1:i+1+k]
		if bytes.IndexByte(key, '\\') >= 0 {
			return 0, false // an escaped key: the full walk reads it
		}
		i = jsonspan.SkipSpace(d, i+k+2)
		if i >= len(d) || d[i] != ':' {
			return 0, false
		}
		v := jsonspan.SkipSpace(d, i+1)
		switch string(key) {
		case "choices":
			return keyAt, true
		case "usage", "error":
			return 0, false
		}
		if v >= len(d) {
			return 0, false
		}
		switch c := d[v]; {
		case c == '"':
			i = jsonspan.StringEnd(d, v)
		case c == '{' || c == '[':
			return 0, false
		default: // a number, true, false or null
			i = v
			for i < len(d) && d[i] != ',' && d[i] != '}' && d[i] != ' ' {
				i++
			}
			if string(key) == "created" && !s.started {
				s.created, _ = strconv.ParseInt(string(d[v:i]), 10, 64)
			}
		}
		if i < 0 {
			return 0, false
		}
		i = jsonspan.SkipSpace(d, i)
		if i >= len(d) || d[i] != ',' {
			return 0, false
		}
		i++
	}
}

// choice handles one choice of a chunk, in one walk: only the first
// choice counts, as a Responses object holds one answer.
func (s *chatToResponses) choice(emit transforms.Emit, d []byte, c int) (int, error) {
	var err error
	skip := false
	finish, choiceErr := "", jsonspan.NoSpan()
	end := jsonspan.WalkMembers(d, c, func(k jsonspan.Span, v int) int {
		if err != nil {
			return jsonspan.StopWalk
		}
		if v >= len(d) {
			return -1
		}
		switch name := jsonspan.KeyName(d, k); {
		case name == "index":
			e := jsonspan.SkipValue(d, v)
			skip = e > v && string(d[v:e]) != "0"
			return e
		case name == "delta" && d[v] == '{' && !skip:
			var e int
			e, err = s.delta(emit, d, v)
			return e
		case name == "usage" && d[v] == '{':
			// Moonshot puts usage in the choice.
			e := jsonspan.SkipValue(d, v)
			if e > v {
				s.usage = append(s.usage[:0], d[v:e]...)
			}
			return e
		case name == "finish_reason" && d[v] == '"' && !skip:
			// Settled once the whole choice is read: some providers write
			// finish_reason before the delta it ends.
			e := jsonspan.SkipValue(d, v)
			if fr, ok := jsonspan.StringValue(d, jsonspan.Span{Start: v, End: e}); ok && fr != "" {
				finish = fr
			}
			return e
		case name == "error" && d[v] == '{' && !skip:
			e := jsonspan.SkipValue(d, v)
			if e > v {
				choiceErr = jsonspan.Span{Start: v, End: e}
			}
			return e
		}
		return jsonspan.SkipValue(d, v)
	})
	switch {
	case err != nil:
		return -1, err
	case choiceErr.Start >= 0:
		return end, s.fail(emit, d, choiceErr)
	case finish != "":
		s.finish = finish
		if status, _ := finishStatus(finish); status == "failed" {
			return end, s.failWith(emit, "server_error", "the upstream ended the answer with finish_reason "+finish, "the upstream's stream failed before the call completed")
		}
		return end, s.settle(emit)
	}
	return end, nil
}

// delta handles one choice delta: reasoning, text and tool call pieces.
func (s *chatToResponses) delta(emit transforms.Emit, d []byte, v int) (int, error) {
	var err error
	end := jsonspan.WalkMembers(d, v, func(k jsonspan.Span, v int) int {
		if err != nil {
			return jsonspan.StopWalk
		}
		if v >= len(d) {
			return -1
		}
		name := jsonspan.KeyName(d, k)
		if name == "tool_calls" && d[v] == '[' {
			// Walked once, each call in place.
			return jsonspan.WalkElements(d, v, func(c int) int {
				if err != nil || d[c] != '{' {
					return jsonspan.SkipValue(d, c)
				}
				var e int
				e, err = s.callDelta(emit, d, c)
				return e
			})
		}
		e := jsonspan.SkipValue(d, v)
		if e < 0 {
			return e
		}
		switch {
		case d[v] == '"' && (name == "reasoning_content" || name == "reasoning"):
			if e-v > 2 {
				err = s.text(emit, 'r', d[v+1:e-1])
			}
		case d[v] == '"' && name == "content":
			if e-v > 2 {
				err = s.content(emit, d[v+1:e-1])
			}
		case d[v] == '"' && name == "refusal":
			// Kept as the answer's text rather than lost.
			if e-v > 2 {
				err = s.text(emit, 'm', d[v+1:e-1])
			}
		case d[v] == '[' && name == "reasoning_details":
			jsonspan.EachElement(d, v, func(el jsonspan.Span) bool {
				if t := jsonspan.Lookup(d, el.Start, "text"); t.Start >= 0 && d[t.Start] == '"' && t.End-t.Start > 2 {
					err = s.text(emit, 'r', d[t.Start+1:t.End-1])
				}
				return err == nil
			})
		}
		return e
	})
	if err != nil {
		return -1, err
	}
	return end, nil
}

// text adds reasoning ('r') or message ('m') text, escaped as the upstream
// wrote it, opening its item and closing the other kind first.
func (s *chatToResponses) text(emit transforms.Emit, kind byte, esc []byte) error {
	if s.open != kind {
		if err := s.closeOpen(emit); err != nil {
			return err
		}
		s.n++
		s.open, s.openText, s.openCut = kind, rope{}, false
		s.openIdx = strconv.Itoa(s.next)
		s.next++
		prefix := "msg_"
		if kind == 'r' {
			prefix = "rs_"
		}
		s.openID = prefix + s.out.rec.id + "_" + strconv.Itoa(s.n)
		b := s.begin("response.output_item.added")
		b = append(b, `,"output_index":`...)
		b = append(b, s.openIdx...)
		b = append(b, `,"item":{"id":"`...)
		b = append(b, s.openID...)
		part := `{"type":"output_text","text":"","annotations":[],"logprobs":[]}`
		if kind == 'r' {
			// No envelope yet: it seals the text, which the done item
			// carries.
			b = append(b, `","type":"reasoning","summary":[],"content":[]}}`...)
			part = `{"type":"reasoning_text","text":""}`
		} else {
			b = append(b, `","type":"message","status":"in_progress","role":"assistant","content":[]}}`...)
		}
		if err := s.send(emit, b); err != nil {
			return err
		}
		if kind == 'r' && s.out.t.showSummary {
			b = s.begin("response.reasoning_summary_part.added")
			b = s.itemRef(b, s.openID, s.openIdx)
			b = append(b, `,"summary_index":0,"part":{"type":"summary_text","text":""}}`...)
			if err := s.send(emit, b); err != nil {
				return err
			}
		}
		if kind == 'm' || s.out.t.showRaw {
			b = s.begin("response.content_part.added")
			b = s.itemRef(b, s.openID, s.openIdx)
			b = append(b, `,"content_index":0,"part":`...)
			b = append(b, part...)
			if err := s.send(emit, append(b, '}')); err != nil {
				return err
			}
		}
	}
	s.keep(kind, esc)
	if kind == 'r' && s.out.t.showSummary {
		b := s.begin("response.reasoning_summary_text.delta")
		b = s.itemRef(b, s.openID, s.openIdx)
		b = append(b, `,"summary_index":0,"delta":"`...)
		b = append(b, esc...)
		if err := s.send(emit, append(b, `"}`...)); err != nil {
			return err
		}
		if !s.out.t.showRaw {
			return nil
		}
	}
	typ := "response.output_text.delta"
	if kind == 'r' {
		typ = "response.reasoning_text.delta"
	}
	b := s.begin(typ)
	b = s.itemRef(b, s.openID, s.openIdx)
	b = append(b, `,"content_index":0,"delta":"`...)
	b = append(b, esc...)
	b = append(b, '"')
	if kind == 'm' {
		b = append(b, `,"logprobs":[]`...)
	}
	return s.send(emit, append(b, '}'))
}

// itemRef writes an event's item_id and output_index.
func (s *chatToResponses) itemRef(b []byte, id, idx string) []byte {
	b = append(b, `,"item_id":"`...)
	b = append(b, id...)
	b = append(b, `","output_index":`...)
	return append(b, idx...)
}

// keep holds text of the open item for its done events and the final
// object: a message's all of it, reasoning up to max_reasoning for the
// whole answer. Past that the item is cut: the deltas still go out, but
// nothing more is held.
func (s *chatToResponses) keep(kind byte, esc []byte) {
	if kind == 'r' {
		if s.openCut {
			return
		}
		if s.reasoningKept+len(esc) > s.maxReasoning {
			// Whole deltas only: a cut inside one could split an escape
			// or a character.
			s.openCut = true
			s.reasoningKept = s.maxReasoning // later reasoning items are cut at once
			s.x.Decide("reasoning", "truncate", reasoningCutReason(s.maxReasoning))
			return
		}
		s.reasoningKept += len(esc)
	}
	s.openText.add(esc)
}

// closeOpen finishes the open reasoning or message item.
func (s *chatToResponses) closeOpen(emit transforms.Emit) error {
	if s.open == 0 {
		return nil
	}
	it := &doneItem{kind: s.open, id: s.openID, cut: s.openCut, text: s.openText}
	if it.kind == 'r' {
		it.env = s.out.t.envelopeCut
		if !it.cut {
			it.env = textEnvelope(s.out.t.Profile, &it.text)
		}
	}
	it.idx, _ = strconv.Atoi(s.openIdx)
	s.open, s.openText, s.openCut = 0, rope{}, false
	doneTyp := "response.output_text.done"
	if it.kind == 'r' {
		doneTyp = "response.reasoning_text.done"
	} else {
		it.status, _ = finishStatus(s.finish)
		if it.status != "incomplete" {
			it.status = "completed"
		}
	}
	if it.kind == 'r' && s.out.t.showSummary {
		b := s.begin("response.reasoning_summary_text.done")
		b = s.itemRef(b, it.id, s.openIdx)
		b = append(b, `,"summary_index":0,"text":"`...)
		b = it.text.appendTo(grow(b, it.text.n+2))
		if err := s.send(emit, append(b, `"}`...)); err != nil {
			return err
		}
		b = s.begin("response.reasoning_summary_part.done")
		b = s.itemRef(b, it.id, s.openIdx)
		b = append(b, `,"summary_index":0,"part":{"type":"summary_text","text":"`...)
		b = it.text.appendTo(grow(b, it.text.n+2))
		if err := s.send(emit, append(b, `"}}`...)); err != nil {
			return err
		}
	}
	if it.kind == 'm' || s.out.t.showRaw {
		b := s.begin(doneTyp)
		b = s.itemRef(b, it.id, s.openIdx)
		b = append(b, `,"content_index":0,"text":"`...)
		b = it.text.appendTo(grow(b, it.text.n+2))
		if err := s.send(emit, append(b, `"}`...)); err != nil {
			return err
		}
		b = s.begin("response.content_part.done")
		b = s.itemRef(b, it.id, s.openIdx)
		b = append(b, `,"content_index":0,"part":`...)
		b = s.appendPart(grow(b, it.text.n+64), it)
		if err := s.send(emit, append(b, '}')); err != nil {
			return err
		}
	}
	s.items = append(s.items, it)
	return s.itemDone(emit, it)
}

// itemDone emits a finished item's output_item.done.
func (s *chatToResponses) itemDone(emit transforms.Emit, it *doneItem) error {
	b := s.begin("response.output_item.done")
	b = append(b, `,"output_index":`...)
	b = strconv.AppendInt(b, int64(it.idx), 10)
	b = append(b, `,"item":`...)
	b = s.appendItem(grow(b, s.itemSize(it)), it)
	return s.send(emit, append(b, '}'))
}

// appendPart writes the content part of a reasoning or message item.
func (s *chatToResponses) appendPart(dst []byte, it *doneItem) []byte {
	if it.kind == 'r' {
		dst = append(dst, `{"type":"reasoning_text","text":"`...)
		dst = it.text.appendTo(dst)
		return append(dst, `"}`...)
	}
	dst = append(dst, `{"type":"output_text","text":"`...)
	dst = it.text.appendTo(dst)
	return append(dst, `","annotations":[],"logprobs":[]}`...)
}

// appendItem writes a finished item.
func (s *chatToResponses) appendItem(dst []byte, it *doneItem) []byte {
	switch it.kind {
	case 'r':
		dst = append(dst, `{"id":"`...)
		dst = append(dst, it.id...)
		dst = append(dst, `","type":"reasoning","summary":[`...)
		if s.out.t.showSummary {
			dst = append(dst, `{"type":"summary_text","text":"`...)
			dst = it.text.appendTo(dst)
			dst = append(dst, `"}`...)
		}
		dst = append(dst, `],"content":[`...)
		if s.out.t.showRaw {
			dst = s.appendPart(dst, it)
		}
		dst = append(dst, `],"encrypted_content":`...)
		dst = jsonspan.AppendStringStr(dst, it.env)
		return append(dst, '}')
	case 'm':
		dst = append(dst, `{"id":"`...)
		dst = append(dst, it.id...)
		dst = append(dst, `","type":"message","status":"`...)
		dst = append(dst, it.status...)
		dst = append(dst, `","role":"assistant","content":[`...)
		dst = s.appendPart(dst, it)
		return append(dst, "]}"...)
	}
	status := "completed"
	if it.status != "" {
		status = it.status
	}
	dst = s.out.callHead(dst, it.idx, it.callID, it.name, status)
	dst = append(dst, '"')
	dst = it.text.appendTo(dst)
	return append(dst, `"}`...)
}

// grow makes room for n more bytes in the event buffer b. It gives a
// large event an eighth more than it needs, so that the events after it
// that carry the same text (the done events, the item, the final object
// of a one-item answer) fit without a buffer of their own.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	return slices.Grow(b, n+n/8+4096)
}

// itemSize is at least the length appendItem writes, for one allocation
// per event however large the item.
func (s *chatToResponses) itemSize(it *doneItem) int {
	n := it.text.n
	if it.kind == 'r' && s.out.t.showSummary && s.out.t.showRaw {
		n *= 2 // in the summary and in the content
	}
	return n + 6*(len(it.callID)+len(it.name)) + len(it.id) + len(it.env) + len(s.out.rec.id) + 256
}

// callDelta handles one tool_calls fragment, keyed by its index: the call
// is announced once its name is known; argument bytes stream live.
func (s *chatToResponses) callDelta(emit transforms.Emit, d []byte, at int) (int, error) {
	f, end := transforms.ReadChatFragment(d, at)
	if end < 0 {
		return end, nil
	}
	cc, opened := s.calls.Place(0, &f)
	if opened {
		// A new call: the name of any earlier one is whole now.
		if err := s.announceNamed(emit); err != nil {
			return end, err
		}
		cc.State = &streamCall{idx: -1, seq: cc.Seq}
	}
	c := cc.State
	if c.id == "" && cc.ID != nil {
		c.id, _ = jsonspan.StringValue(cc.ID, jsonspan.Span{Start: 0, End: len(cc.ID)})
	}
	if c.idx < 0 {
		c.name = cc.Name // some upstreams stream the name in pieces
	}
	args := f.Args // escaped, without quotes
	if lim := s.x.Limits.MaxCallBuffer; lim > 0 && c.args.n+len(args) > lim {
		return end, s.overLimit(emit, c, lim)
	}
	c.args.add(args)
	if c.idx < 0 {
		// Announced once its name is whole: some upstreams stream the
		// name in pieces, which end when the arguments begin (or another
		// call, or the answer).
		if c.name == "" || c.args.n == 0 {
			if c.name != "" && !c.waiting {
				c.waiting = true
				s.waiting = append(s.waiting, c)
			}
			return end, nil
		}
		return end, s.announce(emit, c)
	}
	if len(args) == 0 {
		return end, nil
	}
	b := s.begin("response.function_call_arguments.delta")
	b = s.itemRef(b, c.itemID, c.idxStr)
	b = append(b, `,"delta":"`...)
	b = append(b, args...)
	return end, s.send(emit, append(b, `"}`...))
}

// announce opens a named call's item, with the arguments held so far.
func (s *chatToResponses) announce(emit transforms.Emit, c *streamCall) error {
	if err := s.closeOpen(emit); err != nil {
		return err
	}
	c.idx = s.next
	c.idxStr = strconv.Itoa(c.idx)
	c.itemID = s.out.callID(c.idx)
	s.next++
	b := s.begin("response.output_item.added")
	b = append(b, `,"output_index":`...)
	b = append(b, c.idxStr...)
	b = append(b, `,"item":`...)
	b = s.out.callHead(b, c.idx, s.callIDOf(c), c.name, "in_progress")
	if err := s.send(emit, append(b, `""}}`...)); err != nil {
		return err
	}
	if c.args.n == 0 {
		return nil
	}
	b = s.begin("response.function_call_arguments.delta")
	b = s.itemRef(b, c.itemID, c.idxStr)
	b = append(b, `,"delta":"`...)
	b = c.args.appendTo(grow(b, c.args.n+2))
	return s.send(emit, append(b, `"}`...))
}

// announceNamed opens the named calls still waiting for their arguments,
// in the order they came.
func (s *chatToResponses) announceNamed(emit transforms.Emit) error {
	for _, c := range s.waiting {
		if c.idx < 0 {
			if err := s.announce(emit, c); err != nil {
				return err
			}
		}
	}
	s.waiting = s.waiting[:0]
	return nil
}

// overLimit ends the stream when a call's arguments outgrow
// max_call_buffer: response.failed for the client, with the code every
// rule's tracker uses, and a StreamAbort for the engine, which stops
// reading the upstream and counts the error; the client needs no error
// event after response.failed.
func (s *chatToResponses) overLimit(emit transforms.Emit, c *streamCall, lim int) error {
	msg := "the arguments of an unnamed tool call exceed the gateway's max_call_buffer of " + strconv.Itoa(lim) + " bytes"
	if c.name != "" {
		msg = fmt.Sprintf("the arguments of tool call %q exceed the gateway's max_call_buffer of %d bytes", c.name, lim)
	}
	const code = "max_call_buffer_exceeded"
	if err := s.failWith(emit, code, msg, "call arguments exceed max_call_buffer"); err != nil {
		return err
	}
	return &transforms.StreamAbort{Code: code, Message: msg, Reported: true}
}

func (s *chatToResponses) callIDOf(c *streamCall) string {
	if c.id != "" {
		return c.id
	}
	return "call_" + s.out.rec.id + "_" + strconv.Itoa(c.seq)
}

// settle runs at finish_reason: the open item closes, and every announced
// call gets its done events, in the order the calls first came. The
// terminal event waits for the end of the stream, which carries the usage.
func (s *chatToResponses) settle(emit transforms.Emit) error {
	if err := s.flushThink(emit); err != nil {
		return err
	}
	if err := s.closeOpen(emit); err != nil {
		return err
	}
	if s.finish == "length" || s.finish == "content_filter" || s.finish == "sensitive" {
		// A call cut short is never delivered as a call to run: one the
		// client saw open is closed as incomplete.
		return s.cutCalls(emit, "finish_reason "+s.finish+" cut the call short")
	}
	// The answer is whole: so are the names of calls without arguments.
	if err := s.announceNamed(emit); err != nil {
		return err
	}
	for _, cc := range s.calls.Of(0) {
		c := cc.State
		s.x.CallBuffered(c.args.n)
		if c.idx < 0 {
			s.x.Decide("tool call", "drop", "a tool call without a name")
			continue
		}
		if c.args.n == 0 {
			c.args.add([]byte("{}"))
		}
		it := &doneItem{kind: 'c', idx: c.idx, id: c.itemID, callID: s.callIDOf(c), name: c.name, text: c.args}
		c.args = rope{}
		b := s.begin("response.function_call_arguments.done")
		b = s.itemRef(b, c.itemID, c.idxStr)
		b = append(b, `,"name":`...)
		b = jsonspan.AppendStringStr(b, c.name)
		b = append(b, `,"arguments":"`...)
		b = it.text.appendTo(grow(b, it.text.n+2))
		if err := s.send(emit, append(b, `"}`...)); err != nil {
			return err
		}
		s.items = append(s.items, it)
		if err := s.itemDone(emit, it); err != nil {
			return err
		}
	}
	s.calls, s.waiting = transforms.ChatCalls[*streamCall]{}, s.waiting[:0]
	return nil
}

// cutCalls closes the calls not yet settled as incomplete: output_item.done
// with the arguments that streamed and status "incomplete", which the final
// object holds too. A call never announced is dropped.
func (s *chatToResponses) cutCalls(emit transforms.Emit, reason string) error {
	for _, cc := range s.calls.Of(0) {
		c := cc.State
		s.x.CallBuffered(c.args.n)
		if c.idx < 0 {
			continue
		}
		s.x.Decide(c.name, "drop_partial_call", reason)
		it := &doneItem{kind: 'c', idx: c.idx, id: c.itemID, callID: s.callIDOf(c), name: c.name, text: c.args, status: "incomplete"}
		c.args = rope{}
		s.items = append(s.items, it)
		if err := s.itemDone(emit, it); err != nil {
			return err
		}
	}
	s.calls, s.waiting = transforms.ChatCalls[*streamCall]{}, s.waiting[:0]
	return nil
}

// dropCalls drops the calls not yet settled.
func (s *chatToResponses) dropCalls(reason string) {
	for _, cc := range s.calls.Of(0) {
		c := cc.State
		s.x.CallBuffered(c.args.n)
		if c.idx >= 0 {
			s.x.Decide(c.name, "drop_partial_call", reason)
		}
	}
	s.calls, s.waiting = transforms.ChatCalls[*streamCall]{}, s.waiting[:0]
}

// ordered returns the finished items in output_index order. Each index
// belongs to one item, so the items are placed rather than sorted.
func (s *chatToResponses) ordered() []*doneItem {
	inOrder := true
	for i := 1; i < len(s.items) && inOrder; i++ {
		inOrder = s.items[i-1].idx < s.items[i].idx
	}
	if inOrder {
		return s.items
	}
	at := make([]*doneItem, s.next)
	for _, it := range s.items {
		at[it.idx] = it
	}
	out := s.items[:0]
	for _, it := range at {
		if it != nil {
			out = append(out, it)
		}
	}
	return out
}

// appendResponse writes the final Responses object, every finished item
// in it. The items are not needed after: each lets go of its text once
// written, so the object does not sit next to a second copy of them.
func (s *chatToResponses) appendResponse(dst []byte, status, reason string, errObj []byte) []byte {
	items := s.ordered()
	need := 1024 + len(s.usage) + len(errObj)
	for _, it := range items {
		need += s.itemSize(it) + 1
	}
	dst = s.out.responseHead(grow(dst, need), status, s.created)
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = s.appendItem(dst, it)
		it.text = rope{}
	}
	s.items = nil
	u := jsonspan.NoSpan()
	if len(s.usage) > 0 {
		u = jsonspan.Span{Start: 0, End: len(s.usage)}
	}
	return s.out.responseTail(dst, reason, errObj, s.usage, u)
}

// terminal emits the one terminal event: completed, incomplete, or failed
// when the upstream never said how the answer ended.
func (s *chatToResponses) terminal(emit transforms.Emit) error {
	if s.ended {
		return nil
	}
	if err := s.start(emit); err != nil {
		return err
	}
	if s.finish == "" {
		return s.failWith(emit, "server_error", "the upstream's stream ended without a finish_reason", "the upstream's stream failed before the call completed")
	}
	// Anything a chunk after finish_reason opened is settled too.
	if err := s.settle(emit); err != nil {
		return err
	}
	s.ended = true
	status, reason := finishStatus(s.finish)
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	b := s.begin(typ)
	b = append(b, `,"response":`...)
	b = s.appendResponse(b, status, reason, nil)
	return s.send(emit, append(b, '}'))
}

// fail turns an upstream error chunk into response.failed.
func (s *chatToResponses) fail(emit transforms.Emit, d []byte, e jsonspan.Span) error {
	code, _ := jsonspan.StringValue(d, jsonspan.Lookup(d, e.Start, "code"))
	msg, _ := jsonspan.StringValue(d, jsonspan.Lookup(d, e.Start, "message"))
	if code == "" {
		code = "server_error"
	}
	if contextTooLong(msg) {
		code = "context_length_exceeded"
	}
	return s.failWith(emit, code, msg, "the upstream's stream failed before the call completed")
}

// failWith ends the stream with response.failed: text already streamed is
// real and stays; calls not yet settled are dropped for dropReason.
func (s *chatToResponses) failWith(emit transforms.Emit, code, msg, dropReason string) error {
	if err := s.start(emit); err != nil {
		return err
	}
	if err := s.flushThink(emit); err != nil {
		return err
	}
	if err := s.closeOpen(emit); err != nil {
		return err
	}
	s.dropCalls(dropReason)
	s.ended = true
	s.x.FailStream(code)
	b := s.begin("response.failed")
	b = append(b, `,"response":`...)
	b = s.appendResponse(b, "failed", "", errorObject(code, msg))
	return s.send(emit, append(b, '}'))
}

// End implements StreamTransform: a stream that ends without [DONE] still
// gets its terminal event.
func (s *chatToResponses) End(emit transforms.Emit) error { return s.terminal(emit) }

// contextTooLong recognises the providers' words for a prompt over the
// model's context: OpenAI and DeepSeek ("maximum context length"), Kimi
// ("exceeded model token limit"), and the generic ones.
func contextTooLong(msg string) bool {
	lower := strings.ToLower(msg)
	if strings.Contains(lower, "output") || strings.Contains(lower, "per minute") || strings.Contains(lower, "rate limit") {
		return false // a limit on what to generate, or on throughput
	}
	for _, w := range []string{"context length", "maximum context", "context window", "exceeded model token limit", "context_length_exceeded", "prompt is too long", "prompt exceeds max length", "range of input length"} {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}
