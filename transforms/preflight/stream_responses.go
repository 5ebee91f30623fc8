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
		return &responsesStage{p: p, x: x, rec: rec, round: -1, markup: p.markup(x)}
	case transforms.ProtocolChat:
		return &chatStage{p: p, x: x, rec: rec, round: -1, markup: p.markup(x)}
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
	p      *Preflight
	x      *transforms.Exchange
	rec    *record
	a      *answer
	round  int  // the rounds sent when the answer being streamed began
	markup bool // text is searched for leaked calls

	held map[int]*heldCall // by the upstream's output_index
	// passing are the custom calls that go on as they stream (see passes).
	passing map[int]bool
	// heldCustom: a custom call was held, and the stage handles custom
	// input events from then on.
	heldCustom bool
	// Text that may be a call's markup: the hold, the message it is in,
	// and, once the text is done, what markup it held.
	hold    markupHold
	holding bool
	holdAt  int
	// The held part's item_id (a JSON literal) and content_index.
	holdItem, holdPart []byte
	leak               *leak
	synth              int          // calls made from markup so far
	hidden             map[int]bool // a re-ask's items other than calls
	items              [][]byte     // the answer's items, done, for a re-ask
	calls              []*heldCall  // the answer's calls, checked, in order
	asked              []*heldCall  // the invalid calls a re-ask waits on
}

// heldCall is one call's events, held until it is checked.
type heldCall struct {
	events []transforms.Event // copies, from output_item.added on
	copies blocks             // where they are copied
	done   []byte             // the item, done
	f      fields
	v      verdict
}

// hold keeps a copy of one of the call's events (the stream's buffer is
// reused).
func (h *heldCall) hold(ev *transforms.Event) {
	name := h.copies.copy(ev.Name, len(ev.Name)+len(ev.Data))
	h.events = append(h.events, transforms.Event{Name: name, Data: h.copies.copy(ev.Data, len(ev.Data))})
}

// Handles tells the engine which events the stage needs: calls and the
// answer's end; text too when it is searched for markup, and everything
// of a re-ask's answer, whose text the client does not see. Other events
// (a long answer's text deltas) keep the engine's fast way.
func (s *responsesStage) Handles(typ []byte) bool {
	s.sync()
	if s.a.repair {
		return true
	}
	switch string(typ) {
	case `"response.output_item.added"`, `"response.output_item.done"`,
		`"response.completed"`, `"response.incomplete"`, `"response.failed"`,
		`"response.function_call_arguments.delta"`, `"response.function_call_arguments.done"`:
		return true
	case `"response.custom_tool_call_input.delta"`, `"response.custom_tool_call_input.done"`:
		// Only a held custom call's input (see passes): most go on as
		// they stream, unseen.
		return s.heldCustom
	case `"response.output_text.delta"`, `"response.output_text.done"`, `"response.content_part.done"`:
		return s.markup
	}
	return false
}

// sync starts the next answer when a round's begins.
func (s *responsesStage) sync() {
	if n := len(s.x.Rounds()); n != s.round && s.x.LastRoundAnswered() {
		s.begin(n)
	}
}

func (s *responsesStage) Event(ev *transforms.Event, emit transforms.Emit) error {
	s.sync()
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
	case `"response.output_text.delta"`:
		if s.markup && (s.holding || mayOpen(d)) {
			var err error
			if ev, err = s.holdText(ev, emit); ev == nil || err != nil {
				return err
			}
			d = ev.Data
		}
	case `"response.output_text.done"`:
		if s.leak != nil || s.holding {
			var err error
			if ev, err = s.textDone(ev, emit); ev == nil || err != nil {
				return err
			}
			d = ev.Data
		}
	case `"response.content_part.done"`:
		if s.leak != nil {
			ev = s.partDone(ev)
			d = ev.Data
		}
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
		h.hold(ev)
		return nil
	}
	return emit(ev)
}

// begin starts the stream's next answer: the first, or a round's.
func (s *responsesStage) begin(n int) {
	s.round = n
	s.a = s.p.beginAnswer(s.x, s.rec)
	s.held, s.hidden, s.items, s.calls, s.passing = nil, nil, nil, nil, nil
	s.hold, s.holding, s.leak = markupHold{}, false, nil
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
	case typ == "custom_tool_call" && s.passes(d, it):
		if s.passing == nil {
			s.passing = map[int]bool{}
		}
		s.passing[o] = true
		return emit(ev)
	case typ == "function_call" || typ == "custom_tool_call":
		if typ == "custom_tool_call" && !s.heldCustom {
			s.heldCustom = true
			s.x.FiltersChanged()
		}
		if s.held == nil {
			s.held = map[int]*heldCall{}
		}
		h := &heldCall{}
		h.hold(ev)
		s.held[o] = h
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

// passes reports whether a custom tool's call, announced by the added
// event d with its item at it, goes to the client as it streams: a custom
// call is checked by its name alone, which the added event already
// carries, so one that names a declared custom tool exactly is valid
// whatever its input. Only while no call before it is held (the client
// gets the items in order) and not in a re-ask's answer (whose calls wait
// for the verdict on the whole answer).
func (s *responsesStage) passes(d []byte, it jsonspan.Span) bool {
	if s.a.repair || len(s.held) > 0 {
		return false
	}
	var sp [2]jsonspan.Span
	jsonspan.ObjectFields(d, it.Start, []string{"namespace", "name"}, sp[:])
	ns, _ := jsonspan.StringValue(d, sp[0])
	name, ok := jsonspan.StringValue(d, sp[1])
	return ok && s.rec.index().kinds[key(ns, name)] == kindCustom
}

func (s *responsesStage) itemDone(ev *transforms.Event, emit transforms.Emit) error {
	d := ev.Data
	o, ok := eventIndex(d)
	it := jsonspan.Lookup(d, 0, "item")
	if !ok || it.Start < 0 || d[it.Start] != '{' {
		return emit(ev)
	}
	if s.passing[o] {
		// A custom call that streamed on: judged now for the answer's
		// counts and a re-ask's history, as it is done.
		delete(s.passing, o)
		h := &heldCall{done: bytes.Clone(d[it.Start:it.End])}
		h.f = callFields(h.done, 0)
		h.v = s.a.judge(h.f.ns, h.f.name, nil)
		s.items = append(s.items, h.done)
		s.calls = append(s.calls, h)
		return emit(ev)
	}
	if s.hidden[o] {
		delete(s.hidden, o)
		return nil
	}
	h := s.held[o]
	if h == nil {
		if lk := s.leak; lk != nil && lk.at == o {
			ev = lk.itemDone(ev)
			d = ev.Data
			it = jsonspan.Lookup(d, 0, "item")
		}
		s.items = append(s.items, bytes.Clone(d[it.Start:it.End]))
		if err := emit(ev); err != nil {
			return err
		}
		if lk := s.leak; lk != nil && lk.at == o {
			s.leak = nil
			return s.leakedCalls(lk, emit)
		}
		return nil
	}
	delete(s.held, o)
	h.done = bytes.Clone(d[it.Start:it.End])
	return s.checkCall(h, o, ev, emit)
}

// checkCall judges a call whose item is done and hands it on, repaired,
// or holds it to the answer's end; done is its done event as it came (nil
// for a call the stage made).
func (s *responsesStage) checkCall(h *heldCall, o int, ev *transforms.Event, emit transforms.Emit) error {
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
	var evs []transforms.Event
	if h.f.typ == "function_call" {
		evs = s.callEvents(item, o)
	} else {
		evs = []transforms.Event{addedEvent(item, o)}
	}
	for i := range evs {
		if err := emit(&evs[i]); err != nil {
			return err
		}
	}
	return s.emitDone(h, item, emit)
}

// addedEvent is the output_item.added event of a call item the stage
// hands on repaired or made: the item, every member kept (a namespace
// too), in progress, its input or arguments empty.
func addedEvent(item []byte, o int) transforms.Event {
	added := []byte(`{"type":"response.output_item.added","sequence_number":0,"output_index":`)
	added = strconv.AppendInt(added, int64(o), 10)
	added = append(added, `,"item":`...)
	w := jsonspan.NewObj(added)
	jsonspan.EachMember(item, 0, func(m jsonspan.Member) bool {
		switch {
		case m.KeyIs(item, "input"):
			w.Key("input")
			w.B = append(w.B, `""`...)
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
	return transforms.Event{Name: []byte("response.output_item.added"), Data: append(w.Close(), '}')}
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
	ids := true // a re-ask answers each call by its id
	for _, h := range s.calls {
		if h.f.callID == "" {
			ids = false
		}
	}
	if len(invalid) > 0 && s.a.reaskable && completed && ids {
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
	if len(s.asked) > 0 {
		// The re-ask failed, or its answer ended before its terminal
		// event: the calls it was for are settled as after the last
		// re-ask.
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

// leak is what the markup hold found in one text part of a message.
type leak struct {
	at    int    // the message's output_index
	text  []byte // the part's text without the markup
	calls []leakedCall
}

// holdText passes a text delta through the markup hold: the delta event
// with the text that may go now (nil: none may).
func (s *responsesStage) holdText(ev *transforms.Event, emit transforms.Emit) (*transforms.Event, error) {
	d := ev.Data
	o, _ := eventIndex(d)
	if s.holding && o != s.holdAt {
		// A new message began while text of another was held: that
		// text was not markup the model finished.
		if err := s.flushHold(emit); err != nil {
			return nil, err
		}
	}
	sp := jsonspan.Lookup(d, 0, "delta")
	if sp.Start < 0 || d[sp.Start] != '"' {
		return ev, nil
	}
	if id := jsonspan.Lookup(d, 0, "item_id"); id.Start >= 0 {
		s.holdItem = append(s.holdItem[:0], d[id.Start:id.End]...)
	}
	if ci := jsonspan.Lookup(d, 0, "content_index"); ci.Start >= 0 {
		s.holdPart = append(s.holdPart[:0], d[ci.Start:ci.End]...)
	}
	text := jsonspan.Unescape(nil, d[sp.Start+1:sp.End-1])
	release, holding := s.hold.feed(text)
	s.holding, s.holdAt = holding, o
	if !holding && len(release) == len(text) {
		return ev, nil
	}
	if len(release) == 0 {
		return nil, nil
	}
	return &transforms.Event{Name: ev.Name, Data: replaceSpan(d, sp, jsonspan.AppendString(nil, release))}, nil
}

// flushHold releases held text that never became markup.
func (s *responsesStage) flushHold(emit transforms.Emit) error {
	sec := s.hold.section()
	rest := s.hold.flush()
	s.holding = false
	if sec != nil {
		rest = sec
	}
	if len(rest) == 0 {
		return nil
	}
	return emit(s.textDelta(s.holdAt, rest))
}

func (s *responsesStage) textDelta(o int, text []byte) *transforms.Event {
	d := []byte(`{"type":"response.output_text.delta","sequence_number":0,"output_index":`)
	d = strconv.AppendInt(d, int64(o), 10)
	if len(s.holdItem) > 0 {
		d = append(d, `,"item_id":`...)
		d = append(d, s.holdItem...)
	}
	d = append(d, `,"content_index":`...)
	if len(s.holdPart) > 0 {
		d = append(d, s.holdPart...)
	} else {
		d = append(d, '0')
	}
	d = append(d, `,"delta":`...)
	d = jsonspan.AppendString(d, text)
	return &transforms.Event{Name: []byte("response.output_text.delta"), Data: append(d, '}')}
}

// textDone settles the hold at the end of a text part: markup becomes the
// part's calls, and the part's text loses it; held text that was not
// markup goes on first.
func (s *responsesStage) textDone(ev *transforms.Event, emit transforms.Emit) (*transforms.Event, error) {
	d := ev.Data
	o, _ := eventIndex(d)
	if !s.holding || o != s.holdAt {
		return ev, nil
	}
	sec := s.hold.section()
	rest := s.hold.flush()
	s.holding = false
	if sec != nil {
		before, calls, after, found := extractMarkup(sec, s.rec.index().paramType)
		if found {
			sp := jsonspan.Lookup(d, 0, "text")
			full := jsonspan.Unescape(nil, d[sp.Start+1:sp.End-1])
			cut := bytes.LastIndex(full, sec)
			if sp.Start >= 0 && cut >= 0 {
				text := append(append(append([]byte(nil), full[:cut]...), before...), after...)
				s.leak = &leak{at: o, text: text, calls: calls}
				s.x.Tally("preflight_invalid", "markup")
				s.x.Tally("preflight_repaired", "markup")
				s.x.RewroteItems()
				if len(before)+len(after) > 0 {
					if err := emit(s.textDelta(o, append(append([]byte(nil), before...), after...))); err != nil {
						return nil, err
					}
				}
				return &transforms.Event{Name: ev.Name, Data: replaceSpan(d, sp, jsonspan.AppendString(nil, text))}, nil
			}
		}
		rest = sec
	}
	if len(rest) > 0 {
		if err := emit(s.textDelta(o, rest)); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

// partDone gives a content part's done event the text without markup.
func (s *responsesStage) partDone(ev *transforms.Event) *transforms.Event {
	d := ev.Data
	if o, _ := eventIndex(d); o != s.leak.at {
		return ev
	}
	part := jsonspan.Lookup(d, 0, "part")
	if part.Start < 0 || d[part.Start] != '{' {
		return ev
	}
	sp := jsonspan.Lookup(d, part.Start, "text")
	if sp.Start < 0 {
		return ev
	}
	return &transforms.Event{Name: ev.Name, Data: replaceSpan(d, sp, jsonspan.AppendString(nil, s.leak.text))}
}

// itemDone gives the message's done item the text without markup (in
// its last output_text part, where the markup was).
func (lk *leak) itemDone(ev *transforms.Event) *transforms.Event {
	d := ev.Data
	it := jsonspan.Lookup(d, 0, "item")
	content := jsonspan.Lookup(d, it.Start, "content")
	if content.Start < 0 || d[content.Start] != '[' {
		return ev
	}
	var last jsonspan.Span
	jsonspan.EachElement(d, content.Start, func(el jsonspan.Span) bool {
		if d[el.Start] == '{' && jsonspan.IsString(d, jsonspan.Lookup(d, el.Start, "type"), "output_text") {
			last = jsonspan.Lookup(d, el.Start, "text")
		}
		return true
	})
	if last.End == 0 {
		return ev
	}
	return &transforms.Event{Name: ev.Name, Data: replaceSpan(d, last, jsonspan.AppendString(nil, lk.text))}
}

// leakedCalls turns the calls of a message's markup into call items after
// it, checked as the upstream's own are.
func (s *responsesStage) leakedCalls(lk *leak, emit transforms.Emit) error {
	for _, lc := range lk.calls {
		s.synth++
		o := 1<<20 + s.synth // after every index the upstream uses; the joiner numbers it
		id := leakedID()
		item := []byte(`{"type":"function_call","id":"fc_`)
		item = append(item, id[len("call_"):]...)
		item = append(item, `","call_id":`...)
		item = jsonspan.AppendStringStr(item, id)
		item = append(item, `,"name":`...)
		item = jsonspan.AppendStringStr(item, lc.Name)
		item = append(item, `,"arguments":`...)
		item = jsonspan.AppendString(item, lc.Args)
		item = append(item, `,"status":"completed"}`...)
		h := &heldCall{done: item}
		h.events = s.callEvents(item, o)
		if err := s.checkCall(h, o, nil, emit); err != nil {
			return err
		}
	}
	return nil
}

// callEvents are the added and argument events of a call item the stage
// made, for the client to follow as any call.
func (s *responsesStage) callEvents(item []byte, o int) []transforms.Event {
	f := callFields(item, 0)
	id, _ := jsonspan.StringValue(item, jsonspan.Lookup(item, 0, "id"))
	evs := []transforms.Event{addedEvent(item, o)}
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
		e = jsonspan.AppendString(e, f.args)
		evs = append(evs, transforms.Event{Name: []byte("response.function_call_arguments." + kind), Data: append(e, '}')})
	}
	return evs
}
