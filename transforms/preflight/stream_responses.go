package preflight

import (
	"bytes"
	"strconv"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// NewStream returns the stage that checks a stream's calls.
func (p *Preflight) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	rec := p.record(x)
	if rec.body == nil {
		return nil
	}
	switch x.Protocol() {
	case transforms.ProtocolResponses:
		return &responsesStage{p: p, x: x, rec: rec, round: -1}
	case transforms.ProtocolChat:
		return &chatStage{p: p, x: x, rec: rec, round: -1}
	}
	return nil
}

// responsesStage checks the calls of a Responses stream. A call's events
// are held from its output_item.added to its output_item.done, then
// checked: a call that passes goes on as it came, a repaired one as
// repaired, an invalid one waits for the answer's end, where it is asked
// for again (a round) or handed on per on_failure. Every other item
// streams as it comes, unless the answer is a re-ask's.
type responsesStage struct {
	p     *Preflight
	x     *transforms.Exchange
	rec   *record
	a     *answer
	round int // the rounds sent when the answer being streamed began

	held   map[int]*heldCall // by the upstream's output_index
	hidden map[int]bool      // a re-ask's items other than calls
	items  [][]byte          // the answer's items, done, for a re-ask
	calls  []*heldCall       // the answer's calls, checked, in order
	asked  []*heldCall       // the invalid calls a re-ask waits on
}

// heldCall is one call's events, held until it is checked.
type heldCall struct {
	events []transforms.Event // copies, from output_item.added on
	done   []byte             // the item, done
	f      fields
	v      verdict
}

func copyEvent(ev *transforms.Event) transforms.Event {
	return transforms.Event{Name: bytes.Clone(ev.Name), Data: bytes.Clone(ev.Data)}
}

func (s *responsesStage) Event(ev *transforms.Event, emit transforms.Emit) error {
	if n := len(s.x.Rounds()); n != s.round {
		s.begin(n)
	}
	d := ev.Data
	if d == nil {
		return emit(ev)
	}
	typ := transforms.EventType(d)
	if typ.Start < 0 {
		return emit(ev)
	}
	t := d[typ.Start:typ.End]
	switch string(t) {
	case `"response.output_item.added"`:
		return s.added(ev, emit)
	case `"response.output_item.done"`:
		return s.itemDone(ev, emit)
	case `"response.completed"`, `"response.incomplete"`, `"response.failed"`:
		return s.terminal(ev, string(t) == `"response.completed"`, emit)
	}
	if len(s.held) == 0 && len(s.hidden) == 0 {
		return emit(ev)
	}
	o, ok := eventIndex(d)
	switch {
	case !ok:
		return emit(ev)
	case s.hidden[o]:
		return nil
	case s.held[o] != nil:
		h := s.held[o]
		h.events = append(h.events, copyEvent(ev))
		return nil
	}
	return emit(ev)
}

// begin starts the stream's next answer: the first, or a round's.
func (s *responsesStage) begin(n int) {
	s.round = n
	s.a = s.p.beginAnswer(s.x, s.rec)
	s.held, s.hidden, s.items, s.calls = nil, nil, nil, nil
}

func eventIndex(d []byte) (int, bool) {
	sp := jsonspan.Lookup(d, 0, "output_index")
	if sp.Start < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(string(d[sp.Start:sp.End]))
	return n, err == nil
}

func (s *responsesStage) added(ev *transforms.Event, emit transforms.Emit) error {
	d := ev.Data
	o, ok := eventIndex(d)
	it := jsonspan.Lookup(d, 0, "item")
	if !ok || it.Start < 0 || d[it.Start] != '{' {
		return emit(ev)
	}
	typ, _ := jsonspan.StringValue(d, jsonspan.Lookup(d, it.Start, "type"))
	switch {
	case typ == "function_call" || typ == "custom_tool_call":
		if s.held == nil {
			s.held = map[int]*heldCall{}
		}
		s.held[o] = &heldCall{events: []transforms.Event{copyEvent(ev)}}
		return nil
	case s.a.repair:
		if s.hidden == nil {
			s.hidden = map[int]bool{}
		}
		s.hidden[o] = true
		return nil
	}
	return emit(ev)
}

func (s *responsesStage) itemDone(ev *transforms.Event, emit transforms.Emit) error {
	d := ev.Data
	o, ok := eventIndex(d)
	it := jsonspan.Lookup(d, 0, "item")
	if !ok || it.Start < 0 || d[it.Start] != '{' {
		return emit(ev)
	}
	if s.hidden[o] {
		delete(s.hidden, o)
		return nil
	}
	h := s.held[o]
	if h == nil {
		s.items = append(s.items, bytes.Clone(d[it.Start:it.End]))
		return emit(ev)
	}
	delete(s.held, o)
	h.done = bytes.Clone(d[it.Start:it.End])
	h.f = callFields(h.done, 0)
	if h.f.typ == "custom_tool_call" {
		h.v = s.a.judge(h.f.ns, h.f.name, nil)
	} else {
		h.v = s.a.judge(h.f.ns, h.f.name, h.f.args)
	}
	if !h.v.dup {
		s.items = append(s.items, h.done)
		s.calls = append(s.calls, h)
	}
	switch {
	case h.v.dup:
		s.x.RewroteItems()
		return nil
	case !h.v.valid():
		// Held to the answer's end.
		s.x.RewroteItems()
		return nil
	case h.v.changed:
		s.x.RewroteItems()
		return s.emitRepaired(h, o, emit)
	}
	return s.release(h, ev, emit)
}

// release hands on a held call as it came, done event last (nil: from
// the copy).
func (s *responsesStage) release(h *heldCall, done *transforms.Event, emit transforms.Emit) error {
	for i := range h.events {
		if err := emit(&h.events[i]); err != nil {
			return err
		}
	}
	if done == nil {
		return s.emitDone(h, h.done, emit)
	}
	return emit(done)
}

func (s *responsesStage) emitDone(h *heldCall, item []byte, emit transforms.Emit) error {
	o := 0
	if len(h.events) > 0 {
		o, _ = eventIndex(h.events[0].Data)
	}
	d := []byte(`{"type":"response.output_item.done","sequence_number":0,"output_index":`)
	d = strconv.AppendInt(d, int64(o), 10)
	d = append(d, `,"item":`...)
	d = append(d, item...)
	d = append(d, '}')
	return emit(&transforms.Event{Name: []byte("response.output_item.done"), Data: d})
}

// emitRepaired hands on a call whose name or arguments were repaired:
// its added event under the name, its arguments in one delta, its done
// events.
func (s *responsesStage) emitRepaired(h *heldCall, o int, emit transforms.Emit) error {
	item := rewriteItem(h.done, &h.v)
	id, _ := jsonspan.StringValue(item, jsonspan.Lookup(item, 0, "id"))
	added := []byte(`{"type":"response.output_item.added","sequence_number":0,"output_index":`)
	added = strconv.AppendInt(added, int64(o), 10)
	added = append(added, `,"item":`...)
	w := jsonspan.NewObj(added)
	jsonspan.EachMember(item, 0, func(m jsonspan.Member) bool {
		switch {
		case m.KeyIs(item, "arguments"):
			w.Key("arguments")
			w.B = append(w.B, `""`...)
		case m.KeyIs(item, "status"):
			w.Key("status")
			w.B = append(w.B, `"in_progress"`...)
		default:
			w.Raw(item, m)
		}
		return true
	})
	added = append(w.Close(), '}')
	evs := [][]byte{added}
	if h.f.typ == "function_call" {
		for _, kind := range []string{"delta", "done"} {
			e := []byte(`{"type":"response.function_call_arguments.` + kind + `","sequence_number":0,"item_id":`)
			e = jsonspan.AppendStringStr(e, id)
			e = append(e, `,"output_index":`...)
			e = strconv.AppendInt(e, int64(o), 10)
			if kind == "delta" {
				e = append(e, `,"delta":`...)
			} else {
				e = append(e, `,"arguments":`...)
			}
			e = jsonspan.AppendString(e, h.v.args)
			evs = append(evs, append(e, '}'))
		}
	}
	for _, e := range evs {
		typ := transforms.EventType(e)
		if err := emit(&transforms.Event{Name: e[typ.Start+1 : typ.End-1], Data: e}); err != nil {
			return err
		}
	}
	return s.emitDone(h, item, emit)
}

// terminal ends the answer: its invalid calls are asked for again, or
// handed on per on_failure, before the terminal event goes on (the engine
// holds it while a round runs).
func (s *responsesStage) terminal(ev *transforms.Event, completed bool, emit transforms.Emit) error {
	// A re-ask's answer came: the calls it was asked for are settled.
	s.asked = nil
	var invalid []*heldCall
	for _, h := range s.calls {
		if !h.v.valid() {
			invalid = append(invalid, h)
		}
	}
	if len(invalid) > 0 && s.a.reaskable && completed {
		var outs []callOutput
		for _, h := range s.calls {
			text := validNote
			if !h.v.valid() {
				text = h.v.message
			}
			outs = append(outs, callOutput{callID: h.f.callID, custom: h.f.typ == "custom_tool_call", text: text})
		}
		items := s.items
		if s.a.repair {
			items = nil
			for _, h := range s.calls {
				items = append(items, h.done)
			}
		}
		if req, err := reaskResponses(s.rec.reaskBase(), items, outs); err == nil {
			if s.a.reask(req) {
				s.asked = invalid
				return emit(ev)
			}
		} else {
			s.x.Decide("preflight", "no_reask", err.Error())
		}
	}
	if err := s.settle(invalid, emit); err != nil {
		return err
	}
	return emit(ev)
}

// settle hands on invalid calls per on_failure.
func (s *responsesStage) settle(invalid []*heldCall, emit transforms.Emit) error {
	for _, h := range invalid {
		s.a.outcome(&h.v)
		switch s.p.onFailure {
		case failPass:
			if err := s.release(h, nil, emit); err != nil {
				return err
			}
		case failError:
			return &transforms.StreamAbort{Code: "tool_call_invalid", Message: invalidError(&h.v).Message}
		}
	}
	return nil
}

// End settles what the answer still holds: the calls a failed re-ask was
// for, per on_failure; calls cut before their done event are dropped,
// never completed.
func (s *responsesStage) End(emit transforms.Emit) error {
	if s.x.PendingRound() != nil {
		return nil
	}
	if rd := s.rec.round; rd != nil && rd.Err != nil && !s.rec.failHandled && len(s.asked) > 0 {
		s.rec.failHandled = true
		asked := s.asked
		s.asked = nil
		s.a = &answer{p: s.p, x: s.x, rec: s.rec, failed: true}
		return s.settle(asked, emit)
	}
	for o := range s.held {
		s.x.Decide("preflight", "drop_partial_call", "the stream ended before the call was complete")
		delete(s.held, o)
	}
	return nil
}
