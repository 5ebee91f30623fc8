package preflight

import (
	"bytes"
	"strconv"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// chatStage checks the calls of a Chat stream's first choice. A call's
// chunks are held until the call is complete (the next call starts, or the
// choice finishes), then checked: a call that passes goes on as it came,
// a repaired one in one chunk, an invalid one waits for the finish, where
// it is asked for again (a round) or handed on per on_failure. Text
// streams as it comes, unless the answer is a re-ask's.
type chatStage struct {
	p      *Preflight
	x      *transforms.Exchange
	rec    *record
	a      *answer
	round  int
	markup bool // text is searched for leaked calls

	head     []byte // the first chunk's members before "choices", for chunks the stage writes
	reader   transforms.ChatChunkReader
	hold     markupHold
	holding  bool // the hold keeps text back
	calls    []*chatHeld
	open     *chatHeld
	released int64 // the calls the client got of this answer
	decided  bool  // the answer's finish was handled
	text     []byte
	thought  []byte
	asked    []*chatHeld
}

// chatHeld is one call of a Chat stream, held until it is checked.
type chatHeld struct {
	idx     int64
	id      string
	name    string
	custom  bool     // a custom tool's call: its input is freeform
	args    []byte   // escaped, as streamed
	chunks  [][]byte // the chunks that carry it, as they came
	copies  blocks   // where they are copied
	v       verdict
	checked bool
	out     bool // handed to the client
}

var doneData = []byte("[DONE]")

func (s *chatStage) Event(ev *transforms.Event, emit transforms.Emit) error {
	if n := len(s.x.Rounds()); n != s.round && s.x.LastRoundAnswered() {
		s.begin(n)
	}
	d := ev.Data
	if d == nil {
		return emit(ev)
	}
	if bytes.Equal(bytes.TrimSpace(d), doneData) {
		if !s.decided {
			if err := s.finish(false, emit); err != nil {
				return err
			}
		}
		return emit(ev)
	}
	c := s.reader.Read(d)
	if s.head == nil && c.Choices.Start > 0 {
		s.head = bytes.Clone(d[:jsonspan.KeyStart(d, c.Choices)])
	}
	if c.Others {
		return emit(ev) // n > 1: not checked
	}
	if s.markup && c.Content.Start >= 0 && d[c.Content.Start] == '"' &&
		(s.holding || mayOpen(d[c.Content.Start:c.Content.End])) {
		// Text that may be a call's markup is held until the answer's
		// end shows what it is.
		if nd, changed := s.holdText(d, c); changed {
			d, c = nd, transforms.ReadChatChunk(nd)
			ev = &transforms.Event{Data: d}
		}
	}
	if !s.a.repair {
		if c.Content.Start >= 0 && d[c.Content.Start] == '"' {
			s.text = append(s.text, d[c.Content.Start+1:c.Content.End-1]...)
		}
		if c.Reasoning.Start >= 0 && d[c.Reasoning.Start] == '"' {
			s.thought = append(s.thought, d[c.Reasoning.Start+1:c.Reasoning.End-1]...)
		}
	}
	if c.Calls.Start < 0 && c.Finish.Start < 0 {
		if s.a.repair && c.Usage.Start < 0 {
			return nil // a re-ask's text is not shown again
		}
		if s.a.repair && c.First {
			return emit(&transforms.Event{Data: s.bare(d, c)})
		}
		return emit(ev)
	}
	pure := c.Calls.Start >= 0 && c.Finish.Start < 0 && c.Usage.Start < 0 &&
		(c.Content.Start < 0 || string(d[c.Content.Start:c.Content.End]) == "null" || string(d[c.Content.Start:c.Content.End]) == `""`) &&
		c.Reasoning.Start < 0
	if c.Calls.Start >= 0 {
		if err := s.fragments(d, c, pure, emit); err != nil {
			return err
		}
	}
	if c.Finish.Start >= 0 {
		if err := s.finish(jsonspan.IsString(d, c.Finish, "length"), emit); err != nil {
			return err
		}
	}
	if pure {
		return nil
	}
	// The rest of the chunk: its text (not a re-ask's), finish and usage.
	if s.a.repair {
		return emit(&transforms.Event{Data: s.bare(d, c)})
	}
	rest := d
	if c.Calls.Start >= 0 {
		rest = jsonspan.Apply(d, []jsonspan.Edit{jsonspan.RemoveMember(d, c.Calls)})
	}
	switch {
	case c.Finish.Start < 0 || s.x.PendingRound() != nil:
	case s.released == 0 && len(s.calls) > 0 && jsonspan.IsString(d, c.Finish, "tool_calls"):
		// Every call of the answer went: it ends as a plain one.
		f := transforms.ReadChatChunk(rest).Finish
		rest = replaceSpan(rest, f, []byte(`"stop"`))
	case s.released > 0 && jsonspan.IsString(d, c.Finish, "stop"):
		// Calls recovered from the text: the answer ends with calls.
		f := transforms.ReadChatChunk(rest).Finish
		rest = replaceSpan(rest, f, []byte(`"tool_calls"`))
	}
	return emit(&transforms.Event{Data: rest})
}

// CallsShown tells the engine's joiner how many calls of this answer the
// client got: out numbers them 0 to released-1.
func (s *chatStage) CallsShown() (int, int64) { return s.round, s.released }

// begin starts the stream's next answer.
func (s *chatStage) begin(n int) {
	s.round = n
	s.a = s.p.beginAnswer(s.x, s.rec)
	s.calls, s.open, s.released, s.decided = nil, nil, 0, false
	s.text, s.thought = nil, nil
	s.hold, s.holding = markupHold{}, false
}

// bare is a chunk without its text or calls: its finish and usage.
func (s *chatStage) bare(d []byte, c transforms.ChatChunk) []byte {
	out := append([]byte(nil), s.head...)
	out = append(out, `"choices":[{"index":0,"delta":{},"finish_reason":`...)
	if c.Finish.Start >= 0 {
		out = append(out, d[c.Finish.Start:c.Finish.End]...)
	} else {
		out = append(out, "null"...)
	}
	out = append(out, "}]"...)
	if c.Usage.Start >= 0 {
		out = append(out, `,"usage":`...)
		out = append(out, d[c.Usage.Start:c.Usage.End]...)
	}
	return append(out, '}')
}

// fragments places the chunk's tool_calls entries at their calls. A
// chunk that carries one call's entry and nothing else is held as it
// came; the entries of any other chunk are held as chunks of their own.
func (s *chatStage) fragments(d []byte, c transforms.ChatChunk, pure bool, emit transforms.Emit) error {
	type frag struct {
		el jsonspan.Span
		f  transforms.ChatFragment
	}
	var one [1]frag
	frags := one[:0]
	n := 0
	jsonspan.WalkElements(d, c.Calls.Start, func(at int) int {
		n++
		if d[at] != '{' {
			return jsonspan.SkipValue(d, at)
		}
		f, end := transforms.ReadChatFragment(d, at)
		if end > at {
			frags = append(frags, frag{jsonspan.Span{Start: at, End: end}, f})
		}
		return end
	})
	if n != 1 {
		pure = false
	}
	for _, fr := range frags {
		el, f := fr.el, fr.f
		h := s.open
		if f.HasIndex && (h == nil || h.idx != f.Index) {
			h = nil
			for _, k := range s.calls {
				if k.idx == f.Index {
					h = k
				}
			}
		}
		if h == nil {
			if s.open != nil {
				// The call before is complete.
				if err := s.complete(s.open, emit); err != nil {
					return err
				}
			}
			h = &chatHeld{idx: f.Index}
			s.calls = append(s.calls, h)
		}
		s.open = h
		if f.ID != nil {
			h.id, _ = jsonspan.StringValue(f.ID, jsonspan.Span{Start: 0, End: len(f.ID)})
		}
		if f.HasName {
			h.name += f.Name
		}
		h.custom = h.custom || f.Custom
		h.args = append(h.args, f.Args...)
		if pure {
			h.hold(d)
		} else {
			h.hold(s.fragmentChunk(d[el.Start:el.End]))
		}
	}
	return nil
}

// hold keeps a chunk of the call, copied: the stream's buffer is reused.
func (h *chatHeld) hold(chunk []byte) {
	h.chunks = append(h.chunks, h.copies.copy(chunk, len(chunk)))
}

// blocks copies what a stage holds into blocks of 16 KiB rather than
// taking an allocation a copy: a call streams in thousands of small
// chunks or deltas.
type blocks struct{ cur []byte }

// copy copies b, making room for need bytes (b and what is copied with
// it) at once; nil stays nil.
func (k *blocks) copy(b []byte, need int) []byte {
	if b == nil {
		return nil
	}
	if cap(k.cur)-len(k.cur) < need {
		k.cur = make([]byte, 0, max(16<<10, need))
	}
	n := len(k.cur)
	k.cur = append(k.cur, b...)
	return k.cur[n:len(k.cur):len(k.cur)]
}

// fragmentChunk is a chunk that carries one tool_calls entry.
func (s *chatStage) fragmentChunk(frag []byte) []byte {
	out := append([]byte(nil), s.head...)
	out = append(out, `"choices":[{"index":0,"delta":{"tool_calls":[`...)
	out = append(out, frag...)
	return append(out, `]},"finish_reason":null}]}`...)
}

// complete checks a call whose entries have all come, and hands it on at
// once when it passes.
func (s *chatStage) complete(h *chatHeld, emit transforms.Emit) error {
	if h.checked {
		return nil
	}
	h.checked = true
	args := jsonspan.Unescape(nil, h.args)
	if h.custom {
		args = nil // freeform input: the name is checked, not the input
	}
	h.v = s.a.judge("", h.name, args)
	if h.custom {
		h.v.args = jsonspan.Unescape(nil, h.args)
	}
	switch {
	case h.v.dup:
		return nil
	case !h.v.valid():
		return nil
	case h.v.changed:
		return s.out(h, [][]byte{s.fragmentChunk(s.repairedEntry(h))}, emit)
	}
	return s.out(h, h.chunks, emit)
}

// repairedEntry is the one tool_calls entry of a repaired call.
func (s *chatStage) repairedEntry(h *chatHeld) []byte {
	e := []byte(`{"index":`)
	e = strconv.AppendInt(e, h.idx, 10)
	e = append(e, `,"id":`...)
	e = jsonspan.AppendStringStr(e, h.id)
	if h.custom {
		e = append(e, `,"type":"custom","custom":{"name":`...)
		e = jsonspan.AppendStringStr(e, h.v.name)
		e = append(e, `,"input":`...)
	} else {
		e = append(e, `,"type":"function","function":{"name":`...)
		e = jsonspan.AppendStringStr(e, h.v.name)
		e = append(e, `,"arguments":`...)
	}
	e = jsonspan.AppendString(e, h.v.args)
	return append(e, `}}`...)
}

// out hands a call's chunks to the client at its next call index.
func (s *chatStage) out(h *chatHeld, chunks [][]byte, emit transforms.Emit) error {
	h.out = true
	at := s.released
	s.released++
	for _, ch := range chunks {
		if at != h.idx {
			ch = setCallIndex(ch, at)
		}
		if err := emit(&transforms.Event{Data: ch}); err != nil {
			return err
		}
	}
	return nil
}

// setCallIndex renumbers the tool_calls entries of a chunk that carries
// one call.
func setCallIndex(d []byte, n int64) []byte {
	c := transforms.ReadChatChunk(d)
	if c.Calls.Start < 0 {
		return d
	}
	var edits []jsonspan.Edit
	jsonspan.EachElement(d, c.Calls.Start, func(el jsonspan.Span) bool {
		if idx := jsonspan.Lookup(d, el.Start, "index"); idx.Start >= 0 {
			edits = append(edits, jsonspan.Edit{Start: idx.Start, End: idx.End, Repl: strconv.AppendInt(nil, n, 10)})
		}
		return true
	})
	return jsonspan.Apply(d, edits)
}

// finish ends the answer's calls at its finish or [DONE]: the invalid
// ones are asked for again (unless the answer was cut at its length
// limit, which a re-ask would hit again), or handed on per on_failure.
func (s *chatStage) finish(length bool, emit transforms.Emit) error {
	s.decided = true
	if err := s.resolveText(emit); err != nil {
		return err
	}
	s.asked = nil // a re-ask's answer settles the calls it was asked for
	for _, h := range s.calls {
		if err := s.complete(h, emit); err != nil {
			return err
		}
	}
	s.open = nil
	var invalid []*chatHeld
	for _, h := range s.calls {
		if !h.v.valid() {
			invalid = append(invalid, h)
		}
	}
	if len(invalid) == 0 {
		return nil
	}
	if s.a.reaskable && !length {
		turn := chatTurn{}
		if len(s.text) > 0 {
			turn.content = append(append([]byte{'"'}, s.text...), '"')
		}
		if len(s.thought) > 0 {
			turn.reasoning = append(append([]byte{'"'}, s.thought...), '"')
		}
		var outs []callOutput
		for k, h := range s.calls {
			if h.v.dup {
				continue
			}
			id := h.id
			if id == "" {
				id = reaskCallID(k)
			}
			turn.calls = append(turn.calls, chatCall{id: id, name: h.name, args: jsonspan.Unescape(nil, h.args)})
			text := validNote
			if !h.v.valid() {
				text = h.v.message
			}
			outs = append(outs, callOutput{callID: id, text: text})
		}
		if req, err := reaskChat(s.rec.reaskBase(), turn, outs); err == nil {
			if s.a.reask(req) {
				s.asked = invalid
				return nil
			}
		} else {
			s.x.Decide("preflight", "no_reask", err.Error())
		}
	}
	return s.settle(invalid, emit)
}

// settle hands on invalid calls per on_failure.
func (s *chatStage) settle(invalid []*chatHeld, emit transforms.Emit) error {
	for _, h := range invalid {
		s.a.outcome(&h.v)
		switch s.p.onFailure {
		case failPass:
			if err := s.out(h, h.chunks, emit); err != nil {
				return err
			}
		case failError:
			return &transforms.StreamAbort{Code: "tool_call_invalid", Message: invalidError(&h.v).Message}
		}
	}
	return nil
}

// End settles the calls a failed re-ask was for; calls of a stream cut
// before its finish are dropped, never completed.
func (s *chatStage) End(emit transforms.Emit) error {
	if s.x.PendingRound() != nil {
		return nil
	}
	if len(s.asked) > 0 {
		// The re-ask failed, or its answer ended before its finish: the
		// calls it was for are settled as after the last re-ask.
		if len(s.x.Rounds()) != s.round && s.x.LastRoundAnswered() {
			// Its answer never reached the stage: the joiner numbers
			// what comes as that round's, after the client's calls.
			s.released = 0
		}
		s.rec.failHandled = true
		asked := s.asked
		s.asked = nil
		s.a = &answer{p: s.p, x: s.x, rec: s.rec, failed: true}
		return s.settle(asked, emit)
	}
	if !s.decided && len(s.calls) > 0 {
		s.x.Decide("preflight", "drop_partial_call", "the stream ended before the answer finished")
	}
	return nil
}

// holdText passes a chunk's content through the markup hold: the chunk
// with the text that may go now, and whether that changed it.
func (s *chatStage) holdText(d []byte, c transforms.ChatChunk) ([]byte, bool) {
	raw := d[c.Content.Start+1 : c.Content.End-1]
	text := raw
	if bytes.IndexByte(raw, '\\') >= 0 {
		text = jsonspan.Unescape(nil, raw)
	}
	release, holding := s.hold.feed(text)
	s.holding = holding
	if !holding && len(release) == len(text) {
		return d, false
	}
	return replaceSpan(d, c.Content, jsonspan.AppendString(nil, release)), true
}

// resolveText settles the text the hold kept at the answer's end: calls
// leaked as markup become calls of the answer, anything else goes on as
// text.
func (s *chatStage) resolveText(emit transforms.Emit) error {
	sec := s.hold.section()
	rest := s.hold.flush()
	s.holding = false
	if sec != nil {
		before, calls, after, found := extractMarkup(sec, s.rec.index().paramType)
		if !found {
			rest = sec
		} else {
			s.x.Tally("preflight_invalid", "markup")
			s.x.Tally("preflight_repaired", "markup")
			s.x.Decide("preflight", "markup_calls", strconv.Itoa(len(calls))+" call(s) recovered from the text")
			rest = append(append([]byte(nil), before...), after...)
			next := int64(0)
			for _, h := range s.calls {
				next = max(next, h.idx+1)
			}
			for k, lc := range calls {
				esc := jsonspan.AppendString(nil, lc.Args)
				h := &chatHeld{idx: next + int64(k), id: leakedID(), name: lc.Name, args: esc[1 : len(esc)-1]}
				h.hold(s.fragmentChunk(s.leakedEntry(h)))
				s.calls = append(s.calls, h)
			}
		}
	}
	if len(rest) == 0 || s.a.repair {
		return nil
	}
	out := append([]byte(nil), s.head...)
	out = append(out, `"choices":[{"index":0,"delta":{"content":`...)
	out = jsonspan.AppendString(out, rest)
	out = append(out, `},"finish_reason":null}]}`...)
	return emit(&transforms.Event{Data: out})
}

// leakedEntry is the tool_calls entry of a call recovered from markup.
func (s *chatStage) leakedEntry(h *chatHeld) []byte {
	e := []byte(`{"index":`)
	e = strconv.AppendInt(e, h.idx, 10)
	e = append(e, `,"id":`...)
	e = jsonspan.AppendStringStr(e, h.id)
	e = append(e, `,"type":"function","function":{"name":`...)
	e = jsonspan.AppendStringStr(e, h.name)
	e = append(e, `,"arguments":"`...)
	e = append(e, h.args...)
	return append(e, `"}}`...)
}

// mayOpen reports whether a JSON string literal holds a '<', with which
// every markup opener starts, as is or escaped.
func mayOpen(lit []byte) bool {
	return bytes.IndexByte(lit, '<') >= 0 || bytes.Contains(lit, []byte(`\u003c`)) || bytes.Contains(lit, []byte(`\u003C`))
}
