package messagesbridge

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/internal/reasonenv"
)

// NewStream implements ResponseRewriter: a Chat stream becomes a Messages
// event stream.
func (t *MessagesToChat) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	rec := t.record(x)
	if !rec.bridged {
		return nil
	}
	return &chatToMessages{t: t, x: x, rec: rec, msgID: newMessageID()}
}

// chatToMessages turns a Chat chunk stream into the Messages event stream
// the Anthropic SDKs and Claude Code accept (§3): message_start first,
// content blocks indexed densely and opened one at a time, one
// message_delta with the stop reason and cumulative usage, message_stop;
// or, when the upstream fails or stops before its finish_reason, an error
// event after the open block is closed, and nothing after it.
//
// Everything goes out as it arrives, with two exceptions a block's shape
// forces: a tool_use block opens once its name is whole (some upstreams
// stream names in pieces), and a call's arguments wait while another
// call's block is open (upstreams that interleave parallel calls). The
// open call's block closes once its arguments are a whole JSON value and
// the next call is ready, so calls that come one after another stream
// live. Text is never decoded: a delta's JSON string goes out as the
// upstream escaped it.
type chatToMessages struct {
	t     *MessagesToChat
	x     *transforms.Exchange
	rec   *bridgeRecord
	msgID string

	started, ended bool
	completion     string // the upstream's completion id, for minted call ids

	next     int  // the next block index
	open     byte // the open block: 0, 't' thinking, 'x' text, 'c' tool_use
	openIdx  int
	openCall *streamCall
	thought  bool // a thinking block was opened: there is only one
	lateSaid bool // the drop of late reasoning was decided once

	reasoning []byte // the thinking block's text, escaped, for its envelope
	cut       bool   // reasoning past max_reasoning: no longer kept

	think thinkSplit

	calls      transforms.ChatCalls[*streamCall]
	queue      []*streamCall // calls placed, their blocks not opened yet
	settling   bool          // every call is to be opened now
	toolBlocks int

	finish  string
	matched string // the stop string the upstream says it stopped at
	usage   []byte // the last usage object, as written

	buf []byte // the event being built
	evt transforms.Event

	// What the chunk being handled says, collected by read.
	items []chunkItem
	frags []transforms.ChatFragment
	// The members before "choices" of the last chunk walked whole, and
	// the items read from them: a provider repeats them byte for byte in
	// every chunk (id, object, created, model, fingerprint), so a chunk
	// that starts with the same bytes is walked from "choices" on.
	head      []byte
	headItems []chunkItem
}

// streamCall is one call of the answer.
type streamCall struct {
	cc     *transforms.ChatCall[*streamCall]
	idx    int    // its block's index, -1 until opened
	held   []byte // escaped arguments waiting for the block to open
	most   int    // the most bytes held, for the gateway's histogram
	got    bool   // arguments began: the name is whole
	closed bool   // its block is closed (or it was dropped)
	late   bool   // arguments after the close were dropped, decided once
	scan   argScan
}

// Event names, made once.
var (
	evMessageStart = []byte("message_start")
	evBlockStart   = []byte("content_block_start")
	evBlockDelta   = []byte("content_block_delta")
	evBlockStop    = []byte("content_block_stop")
	evMessageDelta = []byte("message_delta")
	evMessageStop  = []byte("message_stop")
	evPing         = []byte("ping")
	evError        = []byte("error")
)

// send emits the event built in b under name. It lives in the reused
// buffer: stages after this one copy what they keep.
func (s *chatToMessages) send(emit transforms.Emit, name, b []byte) error {
	s.buf = b
	s.evt = transforms.Event{Name: name, Data: b}
	return emit(&s.evt)
}

// Release implements transforms.StreamReleaser.
func (s *chatToMessages) Release() {
	s.buf, s.reasoning, s.queue, s.items, s.frags = nil, nil, nil, nil, nil
	s.calls = transforms.ChatCalls[*streamCall]{}
}

func (s *chatToMessages) start(emit transforms.Emit) error {
	if s.started {
		return nil
	}
	s.started = true
	b := append(s.buf[:0], `{"type":"message_start","message":{"id":"`...)
	b = append(b, s.msgID...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = appendModel(b, s.rec)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	b = append(b, zeroUsage...)
	return s.send(emit, evMessageStart, append(b, "}}"...))
}

// Event implements StreamTransform.
func (s *chatToMessages) Event(e *transforms.Event, emit transforms.Emit) error {
	if s.ended {
		return nil
	}
	if e.Data == nil {
		// A keep-alive comment becomes a ping, which Claude Code's idle
		// watch counts; a comment cut off by the end of the stream is
		// nothing.
		if bytes.HasSuffix(e.Raw, []byte("\n\n")) || bytes.HasSuffix(e.Raw, []byte("\r\n\r\n")) || bytes.HasSuffix(e.Raw, []byte("\r\r")) {
			return s.Tick(emit)
		}
		return nil
	}
	d := bytes.TrimSpace(e.Data)
	if string(d) == "[DONE]" {
		return s.end(emit)
	}
	if len(d) == 0 || d[0] != '{' {
		s.x.Decide("stream", "skip", "an upstream data line that is not a chunk")
		return nil
	}
	if !s.read(d) {
		// Nothing of a chunk cut short is used: half a call is not a call.
		s.x.Decide("stream", "skip", "an upstream chunk that is not valid JSON")
		return nil
	}
	if err := s.start(emit); err != nil {
		return err
	}
	hadUsage := false
	finish := ""
	upErr := jsonspan.NoSpan()
	for i := range s.items {
		it := &s.items[i]
		switch it.kind {
		case 'i':
			if s.completion == "" {
				s.completion, _ = jsonspan.StringValue(d, it.v)
			}
		case 'u':
			s.usage = append(s.usage[:0], d[it.v.Start:it.v.End]...)
			hadUsage = true
		case 'e':
			upErr = it.v
		case 'c':
			f, u, err := s.choice(emit, d, it, &upErr)
			hadUsage = hadUsage || u
			if f != "" {
				finish = f
			}
			if err != nil {
				return err
			}
		}
	}
	switch {
	case upErr.Start >= 0:
		return s.upstreamError(emit, d, upErr)
	case finish != "":
		s.finish = finish
		if upstreamFailed(finish) {
			return s.fail(emit, "api_error", "server_error", "the upstream ended the answer with finish_reason "+finish)
		}
		if err := s.settle(emit); err != nil {
			return err
		}
	}
	if s.finish != "" && hadUsage {
		// The usage that follows the finish (or comes with it) is the
		// last thing a Chat stream says: the message ends here.
		return s.end(emit)
	}
	return nil
}

// chunkItem is one thing a chunk says that the bridge acts on, in the
// order the chunk says it: a top-level id, usage or error, or a choice
// with the members of it and of its delta the bridge reads.
type chunkItem struct {
	kind  byte // 'i' id, 'u' usage, 'e' error, 'c' a choice
	v     jsonspan.Span
	f     [6]jsonspan.Span // a choice's members, by choiceField
	df    [6]jsonspan.Span // its delta's, by deltaField, when f[1] is an object
	calls [2]int           // its delta's tool_calls entries: s.frags[calls[0]:calls[1]]
}

// read walks chunk d once, validating it as it goes (what jsonspan.Valid
// checks), and collects what the bridge acts on into s.items and
// s.frags: a chunk is acted on only once it is known to be whole JSON,
// and no byte of it is read twice. It reports whether d is valid.
func (s *chatToMessages) read(d []byte) bool {
	s.items, s.frags = s.items[:0], s.frags[:0]
	choices := -1 // where the "choices" key starts, when walked to
	walk := func(k jsonspan.Span, v int) int {
		if v >= len(d) {
			return -1
		}
		name := jsonspan.KeyName(d, k)
		if name == "choices" && d[v] == '[' {
			if choices < 0 {
				choices = k.Start
			}
			// Walked into, not skipped first: the choices are most of a
			// chunk.
			return jsonspan.WalkElements(d, v, func(c int) int {
				if d[c] != '{' {
					return jsonspan.SkipValue(d, c)
				}
				return s.readChoice(d, c)
			})
		}
		e := jsonspan.SkipValue(d, v)
		if e < 0 {
			return e
		}
		switch name {
		case "id":
			s.items = append(s.items, chunkItem{kind: 'i', v: jsonspan.Span{Start: v, End: e}})
		case "usage", "error":
			if d[v] == '{' {
				s.items = append(s.items, chunkItem{kind: name[0], v: jsonspan.Span{Start: v, End: e}})
			}
		}
		return e
	}
	var end int
	if h := len(s.head); h > 0 && len(d) > h && string(d[:h]) == string(s.head) {
		// The same head as a chunk walked before: valid, and read into
		// the same items at the same offsets.
		s.items = append(s.items, s.headItems...)
		end = jsonspan.WalkMembersAt(d, jsonspan.SkipSpace(d, h), walk)
	} else {
		end = jsonspan.WalkMembers(d, 0, walk)
		if end >= 0 && choices > 0 {
			n := 0
			for n < len(s.items) && s.items[n].kind != 'c' {
				n++
			}
			s.head = append(s.head[:0], d[:choices]...)
			s.headItems = append(s.headItems[:0], s.items[:n]...)
		}
	}
	if end < 0 || jsonspan.SkipSpace(d, end) != len(d) {
		return false
	}
	// The walk counts no depth across the levels it walks into: a chunk
	// nested deeper than the scanner reads (which takes 2,000 bytes) is
	// found here.
	return len(d) <= 2*jsonspan.MaxDepth || jsonspan.DepthOver(d, jsonspan.MaxDepth) < 0
}

// readChoice reads the choice object at d[c] into a new item: the first
// of each member choiceField names, and of its first delta, walked into,
// the first of each member deltaField names, with the entries of its
// tool_calls read.
func (s *chatToMessages) readChoice(d []byte, c int) int {
	s.items = append(s.items, chunkItem{kind: 'c'})
	it := &s.items[len(s.items)-1]
	for k := range it.f {
		it.f[k], it.df[k] = jsonspan.NoSpan(), jsonspan.NoSpan()
	}
	end := jsonspan.WalkMembers(d, c, func(k jsonspan.Span, v int) int {
		if v >= len(d) {
			return -1
		}
		slot := choiceField(jsonspan.KeyName(d, k))
		if slot < 0 || it.f[slot].Start >= 0 {
			return jsonspan.SkipValue(d, v)
		}
		var e int
		if slot == 1 && d[v] == '{' {
			e = s.readDelta(d, v, it)
		} else {
			e = jsonspan.SkipValue(d, v)
		}
		if e >= 0 {
			it.f[slot] = jsonspan.Span{Start: v, End: e}
		}
		return e
	})
	it.v = jsonspan.Span{Start: c, End: end}
	return end
}

// readDelta reads the delta object at d[v] into it.
func (s *chatToMessages) readDelta(d []byte, v int, it *chunkItem) int {
	return jsonspan.WalkMembers(d, v, func(k jsonspan.Span, v int) int {
		if v >= len(d) {
			return -1
		}
		slot := deltaField(jsonspan.KeyName(d, k))
		if slot < 0 || it.df[slot].Start >= 0 {
			return jsonspan.SkipValue(d, v)
		}
		var e int
		if slot == 5 && d[v] == '[' {
			it.calls[0] = len(s.frags)
			e = jsonspan.WalkElements(d, v, func(el int) int {
				if d[el] != '{' {
					return jsonspan.SkipValue(d, el)
				}
				f, end := transforms.ReadChatFragment(d, el)
				if end >= 0 {
					s.frags = append(s.frags, f)
				}
				return end
			})
			it.calls[1] = len(s.frags)
		} else {
			e = jsonspan.SkipValue(d, v)
		}
		if e >= 0 {
			it.df[slot] = jsonspan.Span{Start: v, End: e}
		}
		return e
	})
}

// choiceField is the place of a choice's member in the item's f, or -1.
func choiceField(name string) int {
	switch name {
	case "index":
		return 0
	case "delta":
		return 1
	case "finish_reason":
		return 2
	case "usage":
		return 3
	case "error":
		return 4
	case "stop_reason":
		return 5
	}
	return -1
}

// deltaField is the place of a delta's member in the item's df, or -1.
func deltaField(name string) int {
	switch name {
	case "reasoning_content":
		return 0
	case "reasoning":
		return 1
	case "reasoning_details":
		return 2
	case "content":
		return 3
	case "refusal":
		return 4
	case "tool_calls":
		return 5
	}
	return -1
}

// choice handles one choice of a chunk: only the first counts, as a
// message holds one answer. It returns the choice's finish_reason, which
// is settled once the whole chunk is read (some upstreams write it before
// the delta it ends), and whether it carried usage (Moonshot's place).
func (s *chatToMessages) choice(emit transforms.Emit, d []byte, it *chunkItem, upErr *jsonspan.Span) (finish string, usage bool, err error) {
	f := &it.f
	if f[0].Start >= 0 && string(d[f[0].Start:f[0].End]) != "0" {
		return "", false, nil
	}
	if u := f[3]; u.Start >= 0 && d[u.Start] == '{' {
		s.usage = append(s.usage[:0], d[u.Start:u.End]...)
		usage = true
	}
	if f[4].Start >= 0 && d[f[4].Start] == '{' {
		*upErr = f[4]
		return "", usage, nil
	}
	if f[1].Start >= 0 && d[f[1].Start] == '{' {
		if err := s.delta(emit, d, it); err != nil {
			return "", usage, err
		}
	}
	finish, _ = jsonspan.StringValue(d, f[2])
	if finish != "" {
		// vLLM says which stop string ended the answer, SGLang too.
		m, _ := jsonspan.StringValue(d, f[5])
		if m == "" {
			m, _ = jsonspan.StringValue(d, jsonspan.Lookup(d, it.v.Start, "matched_stop"))
		}
		s.matched = m
	}
	return finish, usage, nil
}

// delta handles one choice delta: reasoning, then text, then calls.
func (s *chatToMessages) delta(emit transforms.Emit, d []byte, it *chunkItem) error {
	f := &it.df
	str := func(sp jsonspan.Span) []byte {
		if sp.Start < 0 || d[sp.Start] != '"' || sp.End-sp.Start <= 2 {
			return nil
		}
		return d[sp.Start+1 : sp.End-1]
	}
	r := str(f[0])
	if r == nil {
		r = str(f[1])
	}
	if r != nil {
		if err := s.reasoningDelta(emit, r); err != nil {
			return err
		}
	} else if dt := f[2]; dt.Start >= 0 && d[dt.Start] == '[' {
		// MiniMax's reasoning_split; OpenRouter sends these beside
		// reasoning, which then said it all.
		var err error
		jsonspan.EachElement(d, dt.Start, func(el jsonspan.Span) bool {
			if d[el.Start] == '{' {
				if t := str(jsonspan.Lookup(d, el.Start, "text")); t != nil {
					err = s.reasoningDelta(emit, t)
				}
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	if c := str(f[3]); c != nil {
		if err := s.content(emit, c); err != nil {
			return err
		}
	}
	if c := str(f[4]); c != nil {
		// A refusal is the answer's text rather than lost.
		if err := s.flushThink(emit); err != nil {
			return err
		}
		s.think.state = 'm'
		if err := s.text(emit, c); err != nil {
			return err
		}
	}
	for i := it.calls[0]; i < it.calls[1]; i++ {
		if err := s.callDelta(emit, &s.frags[i]); err != nil {
			return err
		}
	}
	return nil
}

// --- blocks ------------------------------------------------------------------

// blockStart opens block kind with the content_block_start body head.
func (s *chatToMessages) blockStart(emit transforms.Emit, kind byte, block func([]byte) []byte) error {
	s.open, s.openIdx = kind, s.next
	s.next++
	b := append(s.buf[:0], `{"type":"content_block_start","index":`...)
	b = strconv.AppendInt(b, int64(s.openIdx), 10)
	b = append(b, `,"content_block":`...)
	b = block(b)
	return s.send(emit, evBlockStart, append(b, '}'))
}

// blockDelta emits a delta of the open block: typ is the delta's type,
// field its member, esc the value, escaped, without quotes.
func (s *chatToMessages) blockDelta(emit transforms.Emit, typ, field string, esc []byte) error {
	b := append(s.buf[:0], `{"type":"content_block_delta","index":`...)
	b = strconv.AppendInt(b, int64(s.openIdx), 10)
	b = append(b, `,"delta":{"type":"`...)
	b = append(b, typ...)
	b = append(b, `","`...)
	b = append(b, field...)
	b = append(b, `":"`...)
	b = append(b, esc...)
	return s.send(emit, evBlockDelta, append(b, `"}}`...))
}

// closeOpen closes the open block. A thinking block first gets its
// signature: the envelope of its reasoning, or the cut mark when the
// reasoning is not whole (past the cap, or the stream failing: failed).
func (s *chatToMessages) closeOpen(emit transforms.Emit, failed bool) error {
	switch s.open {
	case 0:
		return nil
	case 't':
		sig := cutSignature(s.t.Profile)
		if !s.cut && !failed {
			sig = reasonenv.Seal(s.t.Profile, [][]byte{s.reasoning})
		}
		s.reasoning = nil
		if err := s.blockDelta(emit, "signature_delta", "signature", []byte(sig)); err != nil {
			return err
		}
	case 'c':
		s.openCall.closed = true
		s.x.CallBuffered(s.openCall.most)
		s.openCall = nil
	}
	s.open = 0
	b := append(s.buf[:0], `{"type":"content_block_stop","index":`...)
	b = strconv.AppendInt(b, int64(s.openIdx), 10)
	return s.send(emit, evBlockStop, append(b, '}'))
}

// reasoningDelta adds reasoning, escaped. The one thinking block opens
// only before any other block: reasoning after text or a call (some
// models think again mid-answer) cannot join a block that is closed, and
// a second thinking block after text breaks Claude Code, so it is dropped.
func (s *chatToMessages) reasoningDelta(emit transforms.Emit, esc []byte) error {
	if s.open != 't' {
		if s.thought || s.next > 0 {
			if !s.lateSaid {
				s.lateSaid = true
				s.x.Decide("reasoning", "drop", "reasoning after the answer's text or calls began has no thinking block to go in")
			}
			return nil
		}
		s.thought = true
		if err := s.blockStart(emit, 't', func(b []byte) []byte {
			return append(b, `{"type":"thinking","thinking":"","signature":"`+signaturePending+`"}`...)
		}); err != nil {
			return err
		}
	}
	s.keep(esc)
	return s.blockDelta(emit, "thinking_delta", "thinking", esc)
}

// reasoningDecoded is reasoningDelta for decoded text (from <think>).
func (s *chatToMessages) reasoningDecoded(emit transforms.Emit, text []byte) error {
	q := jsonspan.AppendString(nil, text)
	return s.reasoningDelta(emit, q[1:len(q)-1])
}

// keep holds reasoning for the envelope, up to max_reasoning for the
// answer; past it the text still streams but is no longer held.
func (s *chatToMessages) keep(esc []byte) {
	if s.cut {
		return
	}
	if len(s.reasoning)+len(esc) > s.t.maxReasoning {
		// Whole deltas only: a cut inside one could split an escape.
		s.cut, s.reasoning = true, nil
		s.x.Decide("reasoning", "truncate", reasoningCutReason(s.t.maxReasoning))
		return
	}
	s.reasoning = append(s.reasoning, esc...)
}

// text adds answer text, escaped. Calls before it are settled first: a
// call's block cannot reopen after text.
func (s *chatToMessages) text(emit transforms.Emit, esc []byte) error {
	if s.open != 'x' {
		if (s.open == 'c' || len(s.queue) > 0) && len(trimEscapedSpace(esc)) == 0 {
			// White space between calls (some models write a newline
			// there) says nothing, and would close the calls early.
			return nil
		}
		if err := s.settleCalls(emit); err != nil {
			return err
		}
		if err := s.closeOpen(emit, false); err != nil {
			return err
		}
		if err := s.blockStart(emit, 'x', func(b []byte) []byte { return append(b, `{"type":"text","text":""}`...) }); err != nil {
			return err
		}
	}
	return s.blockDelta(emit, "text_delta", "text", esc)
}

// textDecoded is text for decoded text (around <think>).
func (s *chatToMessages) textDecoded(emit transforms.Emit, text []byte) error {
	q := jsonspan.AppendString(nil, text)
	return s.text(emit, q[1:len(q)-1])
}

// --- calls -------------------------------------------------------------------

// callDelta handles one tool_calls entry.
func (s *chatToMessages) callDelta(emit transforms.Emit, f *transforms.ChatFragment) error {
	if len(s.think.held) > 0 {
		// Content the splitter held comes before the call.
		if err := s.flushThink(emit); err != nil {
			return err
		}
	}
	cc, opened := s.calls.Place(0, f)
	if opened {
		cc.State = &streamCall{cc: cc, idx: -1}
		s.queue = append(s.queue, cc.State)
	}
	c := cc.State
	args := f.Args
	if c.closed {
		if len(args) > 0 && !c.late {
			c.late = true
			s.x.Decide(cc.Name, "drop_arguments", "arguments for a call whose block was already closed")
		}
		return nil
	}
	if len(args) > 0 {
		c.got = true
		c.scan.feed(args)
		if s.openCall == c {
			if err := s.blockDelta(emit, "input_json_delta", "partial_json", args); err != nil {
				return err
			}
		} else {
			if lim := s.x.Limits.MaxCallBuffer; lim > 0 && len(c.held)+len(args) > lim {
				return s.overLimit(emit, cc.Name, lim)
			}
			c.held = append(c.held, args...)
			c.most = max(c.most, len(c.held))
		}
	}
	return s.advance(emit)
}

// advance opens the blocks of the calls in the queue that may open: the
// first, once its name is whole (its arguments began, another call came,
// or the answer is settling) and no call's block that may still grow is
// open.
func (s *chatToMessages) advance(emit transforms.Emit) error {
	for len(s.queue) > 0 {
		q := s.queue[0]
		if !s.settling {
			if q.cc.Name == "" || !(q.got || len(s.queue) > 1) {
				return nil
			}
			if s.open == 'c' && !s.openCall.scan.whole() {
				return nil // the open call's arguments may go on
			}
		}
		s.queue = s.queue[1:]
		if q.cc.Name == "" {
			q.closed = true
			s.x.CallBuffered(len(q.held))
			s.x.Decide("tool call", "drop", "a tool call without a name")
			continue
		}
		if err := s.closeOpen(emit, false); err != nil {
			return err
		}
		if err := s.openToolBlock(emit, q); err != nil {
			return err
		}
	}
	return nil
}

// openToolBlock opens q's tool_use block and lets out the arguments it
// held.
func (s *chatToMessages) openToolBlock(emit transforms.Emit, q *streamCall) error {
	cc := q.cc
	id := ""
	if cc.ID != nil {
		id, _ = jsonspan.StringValue(cc.ID, jsonspan.Span{Start: 0, End: len(cc.ID)})
	}
	id = callID(id, s.completion, cc.Seq, cc.Name)
	noteUnknownTool(s.x, s.rec, cc.Name)
	if err := s.blockStart(emit, 'c', func(b []byte) []byte {
		b = append(b, `{"type":"tool_use","id":`...)
		b = jsonspan.AppendStringStr(b, id)
		b = append(b, `,"name":`...)
		b = jsonspan.AppendStringStr(b, cc.Name)
		return append(b, `,"input":{}}`...)
	}); err != nil {
		return err
	}
	s.openCall, q.idx = q, s.openIdx
	s.toolBlocks++
	if len(q.held) == 0 {
		return nil
	}
	held := q.held
	q.held = nil
	return s.blockDelta(emit, "input_json_delta", "partial_json", held)
}

// settleCalls opens and closes every call placed so far, in order: text,
// the finish or the end says no call goes on.
func (s *chatToMessages) settleCalls(emit transforms.Emit) error {
	if len(s.queue) == 0 && s.open != 'c' {
		return nil
	}
	s.settling = true
	err := s.advance(emit)
	s.settling = false
	if err != nil {
		return err
	}
	if s.open == 'c' {
		return s.closeOpen(emit, false)
	}
	return nil
}

// settle runs at finish_reason: what the splitter holds goes out, the
// calls settle and the open block closes. The message's end waits for the
// usage that follows.
func (s *chatToMessages) settle(emit transforms.Emit) error {
	if err := s.flushThink(emit); err != nil {
		return err
	}
	if err := s.settleCalls(emit); err != nil {
		return err
	}
	return s.closeOpen(emit, false)
}

// overLimit ends the stream when a call's held arguments outgrow
// max_call_buffer: an error event for the client, and a StreamAbort for
// the engine, which stops reading the upstream and counts the error.
func (s *chatToMessages) overLimit(emit transforms.Emit, name string, lim int) error {
	msg := "the arguments of an unnamed tool call exceed the gateway's max_call_buffer of " + strconv.Itoa(lim) + " bytes"
	if name != "" {
		msg = fmt.Sprintf("the arguments of tool call %q exceed the gateway's max_call_buffer of %d bytes", name, lim)
	}
	const code = "max_call_buffer_exceeded"
	if err := s.fail(emit, "api_error", code, msg+" ("+code+")"); err != nil {
		return err
	}
	return &transforms.StreamAbort{Code: code, Message: msg, Reported: true}
}

// --- the end -----------------------------------------------------------------

// end finishes the message at the usage, [DONE] or the end of the
// stream: one message_delta, message_stop. A stream that never said how
// the answer ended is an error, never an end_turn.
func (s *chatToMessages) end(emit transforms.Emit) error {
	if s.ended {
		return nil
	}
	if err := s.start(emit); err != nil {
		return err
	}
	if s.finish == "" {
		return s.fail(emit, "api_error", "server_error", "the upstream's stream ended before the answer was finished")
	}
	// Anything a chunk after the finish opened is settled too.
	if err := s.settle(emit); err != nil {
		return err
	}
	s.ended = true
	st := stopReason(s.x, s.rec, s.finish, s.toolBlocks, s.matched)
	b := append(s.buf[:0], `{"type":"message_delta","delta":{`...)
	b = appendStop(b, st)
	b = append(b, `},"usage":`...)
	u := jsonspan.NoSpan()
	if len(s.usage) > 0 {
		u = jsonspan.Span{Start: 0, End: len(s.usage)}
	}
	b = appendUsage(b, s.usage, u)
	if err := s.send(emit, evMessageDelta, append(b, '}')); err != nil {
		return err
	}
	return s.send(emit, evMessageStop, append(s.buf[:0], `{"type":"message_stop"}`...))
}

// fail ends the stream with an error event of Anthropic's type typ: an
// open text or thinking block is closed (a thinking block marked cut: its
// reasoning is not whole); an open call is left open, never stopped, so
// that no client takes its partial input for a whole call (a tool_use
// block's stop is when a client may run it); calls not yet opened are
// dropped; nothing follows. code is what the gateway counts the failure
// as.
func (s *chatToMessages) fail(emit transforms.Emit, typ, code, msg string) error {
	if s.ended {
		return nil
	}
	if err := s.start(emit); err != nil {
		return err
	}
	s.think.held = nil
	if s.open == 'c' {
		s.x.CallBuffered(s.openCall.most)
		s.x.Decide(s.openCall.cc.Name, "drop_partial_call", "the stream failed before the call's arguments were complete; its block is left open")
		s.openCall.closed, s.openCall, s.open = true, nil, 0
	} else if err := s.closeOpen(emit, true); err != nil {
		return err
	}
	for _, q := range s.queue {
		s.x.CallBuffered(len(q.held))
		if q.cc.Name != "" {
			s.x.Decide(q.cc.Name, "drop_partial_call", "the stream failed before the call was opened")
		}
	}
	s.queue = nil
	s.ended = true
	s.x.FailStream(code)
	b := append(s.buf[:0], `{"type":"error","error":{"type":`...)
	b = jsonspan.AppendStringStr(b, typ)
	b = append(b, `,"message":`...)
	b = jsonspan.AppendStringStr(b, msg)
	return s.send(emit, evError, append(b, "}}"...))
}

// upstreamError turns an upstream error chunk into the error event.
func (s *chatToMessages) upstreamError(emit transforms.Emit, d []byte, e jsonspan.Span) error {
	typ, msg := streamErrorOf(s.rec, d, e)
	code := "upstream_error"
	if typ == "invalid_request_error" && contextTooLong(msg) {
		code = "context_length_exceeded"
	}
	return s.fail(emit, typ, code, msg)
}

// TickInterval implements transforms.Ticker.
// The rule's ping_interval: Claude Code shows a stall hint after 20 s
// without events and gives up after 5 minutes; pings count as events
// (§3.2).
func (s *chatToMessages) TickInterval() time.Duration { return time.Duration(s.t.PingInterval) }

// Tick implements transforms.Ticker: a ping while the upstream is silent
// (a thinking model may say nothing for minutes), message_start first
// when nothing came yet, nothing once the message ended.
func (s *chatToMessages) Tick(emit transforms.Emit) error {
	if s.ended {
		return nil
	}
	if err := s.start(emit); err != nil {
		return err
	}
	return s.send(emit, evPing, append(s.buf[:0], `{"type":"ping"}`...))
}

// End implements StreamTransform: a stream that ends without [DONE] still
// gets its end, or its error.
func (s *chatToMessages) End(emit transforms.Emit) error { return s.end(emit) }

// Interface guards
var (
	_ transforms.StreamTransform     = (*chatToMessages)(nil)
	_ transforms.StreamReleaser      = (*chatToMessages)(nil)
	_ transforms.ErrorStatusRewriter = (*MessagesToChat)(nil)
	_ transforms.Ticker              = (*chatToMessages)(nil)
)

// --- arguments ---------------------------------------------------------------

// argScan follows a call's arguments, as escaped in the JSON strings they
// stream in, far enough to tell when they form one whole JSON value: the
// arguments of a parallel call can then go out as soon as the call before
// it is whole, rather than at the finish. It reads each byte once.
type argScan struct {
	depth  int
	inStr  bool
	esc    bool // after a backslash inside a string of the arguments
	done   bool // a whole value was read
	broken bool // something other than white space followed it
}

// feed reads the next escaped piece.
func (a *argScan) feed(esc []byte) {
	for i := 0; i < len(esc); i++ {
		c := esc[i]
		if c == '\\' {
			// An escape of the string the arguments travel in: what it
			// stands for is the character of the arguments.
			if i+1 >= len(esc) {
				return // a piece is a whole string: cannot happen
			}
			switch esc[i+1] {
			case 'u':
				r, n := jsonspan.Hex4(esc[i+2:])
				if n != 4 {
					c, i = 0, i+1
				} else {
					c, i = 0, i+5
					if r < 0x80 {
						c = byte(r)
					}
				}
			case 'n', 't', 'r':
				c, i = ' ', i+1
			case '"', '\\', '/':
				c, i = esc[i+1], i+1
			default:
				c, i = 0, i+1
			}
		}
		a.step(c)
	}
}

// step reads one character of the arguments (0 for one that matters not).
func (a *argScan) step(c byte) {
	if a.broken {
		return
	}
	if a.inStr {
		switch {
		case a.esc:
			a.esc = false
		case c == '\\':
			a.esc = true
		case c == '"':
			a.inStr = false
			if a.depth == 0 {
				a.done = true
			}
		}
		return
	}
	if isSpace(c) {
		return
	}
	if a.done {
		a.broken = true // more after a whole value
		return
	}
	switch c {
	case '"':
		a.inStr = true
	case '{', '[':
		a.depth++
	case '}', ']':
		a.depth--
		switch {
		case a.depth == 0:
			a.done = true
		case a.depth < 0:
			a.broken = true
		}
	}
}

// whole reports whether the arguments so far are one whole value: no
// byte the upstream may still send can belong to them.
func (a *argScan) whole() bool { return a.done && !a.broken }
