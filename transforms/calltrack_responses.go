package transforms

import (
	"bytes"
	"strconv"
	"sync"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Responses shapes of the call tracker. Events name a call by output_index,
// item id, or both, and upstreams have been seen to omit or repeat ids, so
// a call is found by its call_id when the event carries one, then by output
// index, then by item id.

// callKey is one of the keys a call is known by.
type callKey struct {
	by  keyKind
	key string
}

type keyKind uint8

const (
	byCallID keyKind = iota
	byOutputIndex
	byItemID
)

// callKeys returns the keys of a call, the one unique per call first.
func callKeys(itemID string, outputIndex []byte, callID string) []callKey {
	keys := make([]callKey, 0, 3)
	if callID != "" {
		keys = append(keys, callKey{byCallID, callID})
	}
	if len(outputIndex) > 0 {
		keys = append(keys, callKey{byOutputIndex, string(outputIndex)})
	}
	if itemID != "" {
		keys = append(keys, callKey{byItemID, itemID})
	}
	return keys
}

type responsesCalls struct {
	p    CallPolicy
	x    *Exchange
	open map[callKey]*trackedCall // calls in progress, under each of their keys
	// Completed calls, and dropped ones (nil), under each key: later
	// argument events are swallowed, and only completed ones are restored
	// in the final response object.
	closed map[callKey]*trackedCall
	// A completed call keeps its text for the final response object only
	// while the texts kept add up to no more than the largest call: a
	// stream holds at most about twice its largest call, however many it
	// finishes, and an evicted text is worked out again from the
	// arguments the final object carries.
	kept      []*trackedCall
	keptBytes int
	largest   int
	failed    bool
	buf       []byte
	idbuf     []byte
	evbuf     []byte
	ev        Event
	esc       []byte       // the escaped final text of escFor's done event
	last      *trackedCall // the open call find found last, by item id
	// The keys find found no call for last, while no call opened or
	// closed since.
	missKnown         bool
	missID, missIndex []byte
	// A delta laid out the OpenAI way holds its call's keys between its
	// sequence number and its value, the same bytes in every delta of a
	// call: runBytes is them as the delta find answered last held them,
	// and runCall that answer (nil: none of the rule's calls), good while
	// runKnown, until a call opens or closes. A delta of the same run is
	// then placed with one comparison.
	runKnown bool
	runBytes []byte
	runCall  *trackedCall
	itembuf  []byte       // the last finished item's event
	items    []outputItem // the output items of the response event being handled
	escFor   *trackedCall
	refsBuf  eventRefs // the argument event being handled
	// argsDone is the call whose done event matched its deltas last: its
	// escaped arguments are kept for its finished item.
	argsDone *trackedCall
	// The kind Handles found for the type literal at kindOf, which Event
	// takes over: the engine asks Handles right before it.
	kindOf *byte
	kind   trackedKind
}

// maxKeptEscape bounds the escape buffer kept from call to call.
const maxKeptEscape = 64 << 10

// escaped returns c's final text as the JSON string its done event carried,
// or nil.
func (s *responsesCalls) escaped(c *trackedCall) []byte {
	if s.escFor != c || c == nil {
		return nil
	}
	return s.esc
}

type trackedCall struct {
	client      ToolID
	h           CallHandler
	itemID      string
	callID      string
	outputIndex []byte
	emitted     sentText
	final       []byte
	textDone    bool // the client's done event for the text went out
	// item builds a built-in client item; its events wait for the
	// complete arguments, which args holds once the done event came.
	item ItemBuilder
	args []byte
	// relay: a later stage of the rule restores and counts the call.
	relay bool
	// built: final is the whole client item of a built-in call.
	built bool
	// escArgs are the argument deltas as the upstream escaped them, and
	// escSent the text deltas as we escaped them for the client: when the
	// done event repeats what streamed, neither the arguments are decoded
	// nor the text escaped a second time. dropEsc stops keeping them for
	// text that escaping would blow up.
	escArgs, escSent []byte
	dropEsc          bool
	quoted           quotedDeltaHandler // h, when it takes deltas still quoted
}

// quotedDeltaHandler is a CallHandler that decodes a delta's JSON string
// itself, straight into the arguments it keeps, which spares each delta a
// pass through the tracker's buffer. QuotedDelta is Delta for the string
// literal at doc[at]; it also returns the index just after the literal, -1
// when doc ends inside it and nothing was taken.
type quotedDeltaHandler interface {
	QuotedDelta(doc []byte, at int) (text []byte, end int, err error)
}

// releaseEsc gives a call's escape buffers back; nothing may use them
// after.
func (c *trackedCall) releaseEsc() {
	jsonspan.PutPooled(c.escArgs)
	jsonspan.PutPooled(c.escSent)
	c.escArgs, c.escSent = nil, nil
}

func newResponsesCalls(x *Exchange, p CallPolicy) *responsesCalls {
	s := &responsesCalls{p: p, x: x, open: map[callKey]*trackedCall{}, closed: map[callKey]*trackedCall{}}
	if b, ok := scratchPool.Get().(*callScratch); ok {
		s.buf, s.idbuf, s.evbuf, s.esc, s.itembuf = b.buf[:0], b.idbuf[:0], b.evbuf[:0], b.esc[:0], b.itembuf[:0]
	}
	return s
}

// callScratch is a stream's reusable buffers, recycled from stream to
// stream: each grows to the size of the stream's largest call.
type callScratch struct{ buf, idbuf, evbuf, esc, itembuf []byte }

var scratchPool sync.Pool // of *callScratch

func (s *responsesCalls) Release() {
	for _, b := range [...][]byte{s.buf, s.evbuf, s.esc, s.itembuf} {
		if cap(b) > jsonspan.MaxPooled {
			return // a freak stream's buffers stay out of the pool
		}
	}
	scratchPool.Put(&callScratch{s.buf, s.idbuf, s.evbuf, s.esc, s.itembuf})
	s.buf, s.idbuf, s.evbuf, s.esc, s.itembuf = nil, nil, nil, nil, nil
}

// outputItem is what the tracker reads of a response's output item, in
// one walk of it: a call's arguments can be megabytes, and looking its
// members up one by one crossed them again for each.
type outputItem struct {
	el                                jsonspan.Span
	typ, name, ns, id, callID, status jsonspan.Span
	args                              jsonspan.Span
}

var outputItemFields = []string{"type", "name", "namespace", "id", "call_id", "status", "arguments"}

// readOutput reads the items of the output array at out, each in one
// walk.
func readOutput(doc []byte, out jsonspan.Span, items []outputItem) []outputItem {
	if out.Start < 0 || doc[out.Start] != '[' {
		return items
	}
	jsonspan.WalkElements(doc, out.Start, func(v int) int {
		if v >= len(doc) || doc[v] != '{' {
			e := jsonspan.SkipValue(doc, v)
			if e >= 0 {
				items = append(items, outputItem{el: jsonspan.Span{Start: v, End: e}, typ: jsonspan.NoSpan()})
			}
			return e
		}
		var f [7]jsonspan.Span
		e := jsonspan.ObjectFieldsEnd(doc, v, outputItemFields, f[:])
		if e >= 0 {
			items = append(items, outputItem{el: jsonspan.Span{Start: v, End: e}, typ: f[0], name: f[1], ns: f[2], id: f[3], callID: f[4], status: f[5], args: f[6]})
		}
		return e
	})
	return items
}

// call asks the policy about the item when it is a function_call.
func (it *outputItem) call(x *Exchange, p CallPolicy, doc []byte) (ToolID, CallHandler, bool) {
	if !jsonspan.IsString(doc, it.typ, "function_call") {
		return ToolID{}, nil, false
	}
	name, _ := jsonspan.StringValue(doc, it.name)
	ns, _ := jsonspan.StringValue(doc, it.ns)
	return p.OpenCall(x, ToolID{Type: "function", Namespace: ns, Name: name})
}

// argsText is the item's arguments, decoded.
func (it *outputItem) argsText(doc []byte) []byte {
	if a := it.args; a.Start >= 0 && doc[a.Start] == '"' {
		return jsonspan.Unescape(make([]byte, 0, a.End-a.Start), doc[a.Start+1:a.End-1])
	}
	return nil
}

// ref is what the item says about itself.
func (it *outputItem) ref(doc []byte) CallRef {
	var r CallRef
	r.ItemID, _ = jsonspan.StringValue(doc, it.id)
	r.CallID, _ = jsonspan.StringValue(doc, it.callID)
	r.Status, _ = jsonspan.StringValue(doc, it.status)
	return r
}

// openCall asks the policy about the function_call item at item.
func openCall(x *Exchange, p CallPolicy, d []byte, item jsonspan.Span) (ToolID, CallHandler, bool) {
	if item.Start < 0 || d[item.Start] != '{' || !jsonspan.IsString(d, jsonspan.Lookup(d, item.Start, "type"), "function_call") {
		return ToolID{}, nil, false
	}
	var g [2]jsonspan.Span
	jsonspan.ObjectFields(d, item.Start, []string{"name", "namespace"}, g[:])
	name, _ := jsonspan.StringValue(d, g[0])
	ns, _ := jsonspan.StringValue(d, g[1])
	return p.OpenCall(x, ToolID{Type: "function", Namespace: ns, Name: name})
}

// findItem looks up the call of a finished item: by call_id, which is
// unique per call, when the stream has seen it; by position and id
// otherwise.
func (s *responsesCalls) findItem(callID, itemID string, outputIndex []byte) (*trackedCall, bool) {
	if callID != "" {
		k := callKey{byCallID, callID}
		// A call id is unique per call, unless an upstream repeats it:
		// then the item id must agree too.
		agrees := func(c *trackedCall) bool { return itemID == "" || c.itemID == "" || c.itemID == itemID }
		if c := s.open[k]; c != nil && agrees(c) {
			return c, false
		}
		if c, closed := s.closed[k]; closed && (c == nil || agrees(c)) {
			return nil, true
		}
	}
	return s.find([]byte(itemID), outputIndex)
}

// outputItemRefs are what the tracker reads of an output_item event.
type outputItemRefs struct {
	item           jsonspan.Span // the item, validated; NoSpan when absent or malformed
	args           jsonspan.Span // the item's first "arguments" value, or NoSpan
	itemID, callID string
	outputIndex    []byte
	incomplete     bool // the item's status says the upstream cut it short
}

// readItem reads an output_item event in one walk: the first "item" and
// "output_index", and the item's id and call_id collected while the item
// is validated. A finished call's item carries its whole arguments, which
// a lookup per member would cross again each time. known, when not nil, is
// what the item's arguments likely are, as its deltas escaped them.
func readItem(d, known []byte) outputItemRefs {
	r := outputItemRefs{item: jsonspan.NoSpan(), args: jsonspan.NoSpan()}
	var f [4]jsonspan.Span
	jsonspan.WalkMembers(d, 0, func(k jsonspan.Span, v int) int {
		var e int
		switch {
		case r.item.Start < 0 && jsonspan.KeyIs(d, k, "item"):
			if v < len(d) && d[v] == '{' {
				e = finishedItemFields(d, v, known, &f)
			} else {
				e = jsonspan.SkipValue(d, v)
			}
			if e >= 0 {
				r.item = jsonspan.Span{Start: v, End: e}
			}
		case r.outputIndex == nil && jsonspan.KeyIs(d, k, "output_index"):
			if e = jsonspan.SkipValue(d, v); e >= 0 {
				r.outputIndex = d[v:e]
			}
		default:
			return jsonspan.SkipValue(d, v)
		}
		if e >= 0 && r.item.Start >= 0 && r.outputIndex != nil {
			return jsonspan.StopWalk
		}
		return e
	})
	if r.item.Start >= 0 && d[r.item.Start] == '{' {
		r.itemID, _ = jsonspan.StringValue(d, f[0])
		r.callID, _ = jsonspan.StringValue(d, f[1])
		r.args = f[2]
		r.incomplete = jsonspan.IsString(d, f[3], "incomplete")
	}
	return r
}

// finishedItemFields is jsonspan.ObjectFieldsEnd for itemIDFields over the item at
// d[v], except that arguments that are the literal known are passed over
// by one comparison instead of escape by escape: they were read as they
// streamed, and crossing them again was most of the finished item's cost.
func finishedItemFields(d []byte, v int, known []byte, f *[4]jsonspan.Span) int {
	if known == nil {
		return jsonspan.ObjectFieldsEnd(d, v, itemIDFields, f[:])
	}
	*f = [4]jsonspan.Span{jsonspan.NoSpan(), jsonspan.NoSpan(), jsonspan.NoSpan(), jsonspan.NoSpan()}
	return jsonspan.WalkMembers(d, v, func(k jsonspan.Span, v int) int {
		var e int
		if f[2].Start < 0 && isLiteral(d, v, known) && jsonspan.KeyIs(d, k, "arguments") {
			e = v + len(known) + 2
		} else if e = jsonspan.SkipValue(d, v); e < 0 {
			return e
		}
		for i, name := range itemIDFields {
			if f[i].Start < 0 && jsonspan.KeyIs(d, k, name) {
				f[i] = jsonspan.Span{Start: v, End: e}
			}
		}
		return e
	})
}

// isLiteral reports whether the string literal at d[v] has the content
// esc, the escaped deltas of a call. Each delta held whole escapes, so a
// quote right after esc is not escaped and ends the literal.
func isLiteral(d []byte, v int, esc []byte) bool {
	end := v + 1 + len(esc)
	return end < len(d) && d[v] == '"' && d[end] == '"' && bytes.Equal(d[v+1:end], esc)
}

var itemIDFields = []string{"id", "call_id", "arguments", "status"}

// find looks a call up by item id, then by output index. Either may be
// missing, ids have been seen repeated across calls and two calls have
// been seen at one output index, so a key only counts when the other one,
// where both are known, agrees.
//
// The keys are looked up as the event holds them, without allocating: a
// stream looks up a call once per argument delta.
func (s *responsesCalls) find(itemID, outputIndex []byte) (c *trackedCall, closed bool) {
	// Deltas come in runs of one call: the call found last is asked
	// first, without hashing its keys.
	if l := s.last; l != nil && len(itemID) > 0 && string(itemID) == l.itemID &&
		(len(outputIndex) == 0 || l.outputIndex == nil || bytes.Equal(l.outputIndex, outputIndex)) {
		return l, false
	}
	// So are the deltas of a call the rule does not restore (a native
	// function's): the keys that found nothing last time find nothing
	// again until a call opens or closes.
	if s.missKnown && bytes.Equal(itemID, s.missID) && bytes.Equal(outputIndex, s.missIndex) {
		return nil, false
	}
	c, closed = s.findMapped(itemID, outputIndex)
	if c == nil && !closed {
		s.missKnown = true
		s.missID = append(s.missID[:0], itemID...)
		s.missIndex = append(s.missIndex[:0], outputIndex...)
	}
	return c, closed
}

// findMapped is find through the maps of open and closed calls.
func (s *responsesCalls) findMapped(itemID, outputIndex []byte) (c *trackedCall, closed bool) {
	if len(itemID) > 0 {
		c := s.open[callKey{byItemID, string(itemID)}]
		if c != nil && (len(outputIndex) == 0 || c.outputIndex == nil || bytes.Equal(c.outputIndex, outputIndex)) {
			s.last = c
			return c, false
		}
	}
	if len(outputIndex) > 0 {
		c := s.open[callKey{byOutputIndex, string(outputIndex)}]
		if c != nil && (len(itemID) == 0 || c.itemID == "" || c.itemID == string(itemID)) {
			return c, false
		}
	}
	if len(itemID) > 0 {
		if _, closed = s.closed[callKey{byItemID, string(itemID)}]; closed {
			return nil, true
		}
	}
	if len(outputIndex) > 0 {
		_, closed = s.closed[callKey{byOutputIndex, string(outputIndex)}]
	}
	return nil, closed
}

// close moves a call from open to closed; completed says it was
// delivered whole rather than dropped.
func (s *responsesCalls) close(c *trackedCall, completed bool) {
	s.last, s.missKnown, s.runKnown = nil, false, false
	if s.argsDone == c {
		s.argsDone = nil
	}
	if c.h != nil {
		releaseCall(c.h)
		c.h, c.quoted = nil, nil // the arguments' buffers go now
	}
	c.releaseEsc()
	var as *trackedCall
	if completed {
		as = c
		s.keep(c)
	}
	for _, k := range callKeys(c.itemID, c.outputIndex, c.callID) {
		if s.open[k] == c {
			delete(s.open, k)
		}
		s.closed[k] = as
	}
}

// keep holds on to a completed call's text within the budget, letting the
// oldest texts go first.
func (s *responsesCalls) keep(c *trackedCall) {
	s.largest = max(s.largest, len(c.final))
	s.kept = append(s.kept, c)
	s.keptBytes += len(c.final)
	for len(s.kept) > 0 && s.keptBytes > s.largest {
		old := s.kept[0]
		s.kept = s.kept[1:]
		s.keptBytes -= len(old.final)
		old.final = nil
	}
}

// trackedKind is what the tracker does with an event, by its type.
type trackedKind uint8

const (
	passOn trackedKind = iota // any other type: passed on as it came
	itemAddedKind
	argsDeltaKind
	argsDoneKind
	itemDoneKind
	lifecycleKind // created, in_progress, queued, completed
	terminalKind  // failed, incomplete
	errorKind
)

// trackedKindOf classifies an event's "type", the JSON string literal as
// the event wrote it: Event acts on it, Handles tells the engine.
func trackedKindOf(typ []byte) trackedKind {
	// A switch on the literal: the compiler dispatches on the length and
	// compares words, which measured faster than checking the last eight
	// bytes first (4-5 ns against 5-9 per event).
	switch string(typ) {
	case `"response.output_item.added"`:
		return itemAddedKind
	case `"response.function_call_arguments.delta"`:
		return argsDeltaKind
	case `"response.function_call_arguments.done"`:
		return argsDoneKind
	case `"response.output_item.done"`:
		return itemDoneKind
	case `"response.completed"`, `"response.created"`, `"response.in_progress"`, `"response.queued"`:
		return lifecycleKind
	case `"response.failed"`, `"response.incomplete"`:
		return terminalKind
	case `"error"`:
		return errorKind
	}
	return passOn
}

// Handles implements typeFilter: Event passes every event it does not
// classify on as it came.
func (s *responsesCalls) Handles(typ []byte) bool {
	k := trackedKindOf(typ)
	if k == passOn || len(typ) == 0 {
		return false
	}
	// The engine calls Event with this event next.
	s.kind, s.kindOf = k, &typ[0]
	return true
}

// kindAt classifies the type literal at typ, taking over what Handles
// found when it was just asked about the same bytes.
func (s *responsesCalls) kindAt(typ []byte) trackedKind {
	at := s.kindOf
	s.kindOf = nil
	if len(typ) > 0 && at == &typ[0] {
		return s.kind
	}
	return trackedKindOf(typ)
}

func (s *responsesCalls) Event(ev *Event, emit Emit) error {
	d := ev.Data
	if len(d) == 0 || d[0] != '{' || d[len(d)-1] != '}' {
		d = bytes.TrimSpace(d)
	}
	if len(d) == 0 || d[0] != '{' {
		return emit(ev)
	}
	typ, seq, fast := s.x.openAIHead(d)
	if !fast {
		typ, seq = s.x.headOf(d)
	}
	if typ.Start < 0 {
		return emit(ev)
	}
	switch s.kindAt(d[typ.Start:typ.End]) {
	case itemAddedKind:
		return s.itemAdded(ev, d, emit)
	case argsDeltaKind:
		r := &s.refsBuf
		if s.runKnown && fast && seq.Start >= 0 && len(d)-seq.End > len(s.runBytes) &&
			string(d[seq.End:seq.End+len(s.runBytes)]) == string(s.runBytes) {
			if s.runCall == nil {
				return emit(ev)
			}
			return s.runDelta(d, seq, emit)
		}
		// The head was read once already; the fast path goes on from it.
		laidOut := openAIArgsAfter(d, seq, fast, valueDelta, r)
		if !laidOut {
			s.namedRefs(d, deltaEventFields, r)
		}
		c, closed := s.find(r.itemID, r.outputIndex)
		if laidOut && !closed {
			s.runKnown, s.runCall = true, c
			s.runBytes = append(s.runBytes[:0], d[seq.End:r.value.Start+1]...)
		}
		switch {
		case c != nil:
			return s.argsDelta(c, d, r, emit)
		case closed:
			return nil
		}
	case argsDoneKind:
		r := &s.refsBuf
		s.refs(d, doneEventFields, valueArguments, r)
		c, closed := s.find(r.itemID, r.outputIndex)
		switch {
		case c != nil:
			var full []byte
			if c.item == nil && !c.dropEsc && r.streamedArgs(d, c.escArgs) {
				full = c.h.Raw() // what streamed, already decoded
				s.argsDone = c
			} else if v := r.valueSpan(d); v.Start >= 0 && d[v.Start] == '"' {
				full = jsonspan.Unescape(make([]byte, 0, v.End-v.Start), d[v.Start+1:v.End-1])
			}
			if c.item != nil {
				c.args = full
				return nil
			}
			return s.finishText(c, full, r.seq, emit)
		case closed:
			return nil
		}
	case itemDoneKind:
		return s.itemDone(ev, d, emit)
	case lifecycleKind:
		return s.responseEvent(ev, d, emit, false)
	case terminalKind:
		s.abandon("terminal " + string(d[typ.Start+1:typ.End-1]))
		return s.responseEvent(ev, d, emit, true)
	case errorKind:
		s.abandon("upstream error event")
		return emit(ev)
	}
	return emit(ev)
}

// runKey implements runTaker.
func (s *responsesCalls) runKey() ([]byte, bool) {
	if !s.runKnown {
		return nil, false
	}
	return s.runBytes, s.runCall != nil
}

// runDelta implements runTaker.
func (s *responsesCalls) runDelta(d []byte, seq jsonspan.Span, emit Emit) error {
	r := &s.refsBuf
	r.itemID, r.outputIndex, r.seq = nil, nil, d[seq.Start:seq.End]
	r.value = jsonspan.Span{Start: seq.End + len(s.runBytes) - 1, End: -1}
	return s.argsDelta(s.runCall, d, r, emit)
}

// abandon drops partial calls: an interrupted call must not be completed
// from the fragments we happened to receive.
func (s *responsesCalls) abandon(reason string) {
	seen := map[*trackedCall]bool{}
	for _, c := range s.open {
		if seen[c] {
			continue
		}
		seen[c] = true
		abandonCall(s.x, c.client, c.h, reason)
		s.close(c, false)
	}
	s.failed = true
}

func (s *responsesCalls) End(emit Emit) error {
	if len(s.open) > 0 {
		s.abandon("stream ended before the call completed")
	}
	return nil
}

func (s *responsesCalls) newCall(client ToolID, h CallHandler, itemID string, outputIndex []byte, callID string) *trackedCall {
	s.last, s.missKnown, s.runKnown = nil, false, false // a new call may take the keys of the last one, or those that found none
	c := &trackedCall{client: client, h: h, itemID: itemID, callID: callID, outputIndex: bytes.Clone(outputIndex)}
	_, c.relay = h.(CallRelayer)
	c.quoted, _ = h.(quotedDeltaHandler)
	for _, k := range callKeys(itemID, c.outputIndex, callID) {
		s.open[k] = c
		delete(s.closed, k)
	}
	return c
}

func (s *responsesCalls) itemAdded(ev *Event, d []byte, emit Emit) error {
	if s.failed {
		return emit(ev)
	}
	r := readItem(d, nil)
	client, h, ok := openCall(s.x, s.p, d, r.item)
	if !ok {
		return emit(ev)
	}
	c := s.newCall(client, h, r.itemID, r.outputIndex, r.callID)
	s.x.Decide(client.String(), "restore_call", "stream header of a call to restore")
	if ib, ok := h.(ItemBuilder); ok {
		c.item = ib // its events wait for the whole arguments
		return nil
	}
	return emit(&Event{Name: ev.Name, Data: withItem(d, r.item, r.args, client, []byte{}, nil)})
}

// withItem returns the event d with its item at item rewritten as the
// client's call, built in one buffer.
func withItem(d []byte, item, args jsonspan.Span, client ToolID, text, esc []byte) []byte {
	return appendWithItem(nil, d, item, args, client, text, esc)
}

// appendWithItem is withItem into out's buffer; args is the item's
// arguments value, or NoSpan (see clientItemEsc).
func appendWithItem(out, d []byte, item, args jsonspan.Span, client ToolID, text, esc []byte) []byte {
	if need := len(d) + len(text) + len(text)/8 + 32; cap(out) < need {
		out = make([]byte, 0, need)
	}
	out = out[:0]
	out = append(out, d[:item.Start]...)
	out = clientItemEsc(out, d, item, args, client, text, esc)
	return append(out, d[item.End:]...)
}

func (s *responsesCalls) argsDelta(c *trackedCall, d []byte, r *eventRefs, emit Emit) error {
	if c.textDone {
		return nil
	}
	sp := r.value
	if sp.Start < 0 || d[sp.Start] != '"' {
		return nil
	}
	var text []byte
	var err error
	switch {
	case sp.End < 0 && c.quoted != nil:
		text, sp.End, err = c.quoted.QuotedDelta(d, sp.Start)
		if r.value.End = sp.End; sp.End < 0 && err == nil {
			return nil
		}
	case sp.End < 0:
		// A delta is short: it is decoded on the way to its end.
		s.buf, sp.End = jsonspan.AppendUnquoted(s.buf[:0], d, sp.Start)
		if r.value.End = sp.End; sp.End < 0 {
			return nil
		}
		text, err = c.h.Delta(s.buf)
	default:
		s.buf = jsonspan.Unescape(s.buf[:0], d[sp.Start+1:sp.End-1])
		text, err = c.h.Delta(s.buf)
	}
	if err != nil {
		s.abandon("call arguments exceed max_call_buffer")
		return overLimit(s.x, c.client)
	}
	if c.item != nil {
		return nil
	}
	if !c.dropEsc {
		c.escArgs = jsonspan.AppendPooled(c.escArgs, d[sp.Start+1:sp.End-1])
		c.dropEsc = len(c.escArgs) > 2*len(c.h.Raw())+4096
	}
	if len(text) == 0 {
		return nil
	}
	c.emitted.add(text)
	return emit(s.textEvent(c, r.seq, false, text, nil))
}

// seqOf returns an event's sequence_number as written, or nil when it has
// none: the events built from it are numbered only if it is.
func seqOf(d []byte) []byte {
	if _, seq, ok := openAIHead(d); ok {
		if seq.Start < 0 {
			return nil // an empty number would break the built events' JSON
		}
		return d[seq.Start:seq.End]
	}
	if v := jsonspan.Lookup(d, 0, "sequence_number"); v.Start >= 0 {
		return d[v.Start:v.End]
	}
	return nil
}

// eventRefs are what the tracker reads of an argument event, found in one
// scan of it.
type eventRefs struct {
	itemID      []byte // item_id as written (decoded when it has escapes)
	outputIndex []byte
	// value is "delta" or "arguments". The fast read leaves End at -1,
	// the string not crossed yet: see valueSpan.
	value jsonspan.Span
	// seq is the event's sequence_number as written, nil when it has
	// none. An event that stands in for this one takes it over: in a
	// stream nothing was dropped from, it is the right number already, and
	// the engine need not renumber a copy.
	seq []byte
}

// valueSpan returns the value's span, crossing the string now when the
// fast read left it open (NoSpan when it is unterminated). An event of a
// call the rule does not restore never needs it, and a done event whose
// arguments are the ones streamed is matched without it.
func (r *eventRefs) valueSpan(d []byte) jsonspan.Span {
	if r.value.Start >= 0 && r.value.End < 0 {
		if end := jsonspan.StringEnd(d, r.value.Start); end >= 0 {
			r.value.End = end
		} else {
			r.value = jsonspan.NoSpan()
		}
	}
	return r.value
}

// streamedArgs reports whether the value of a done event is the string
// esc, the call's deltas as escaped. Read the fast way, its end is not
// known yet: the bytes after its opening quote are compared with esc,
// where finding the end would cross megabytes of escapes first.
func (r *eventRefs) streamedArgs(d, esc []byte) bool {
	sp := r.value
	if sp.Start < 0 || d[sp.Start] != '"' {
		return false
	}
	if sp.End >= 0 {
		return sp.End-sp.Start-2 == len(esc) && bytes.Equal(d[sp.Start+1:sp.End-1], esc)
	}
	if !isLiteral(d, sp.Start, esc) {
		return false
	}
	r.value.End = sp.Start + len(esc) + 2
	return true
}

// The members of an argument delta and of its done event, in the order
// OpenAI writes them, so the scan ends at the value.
var (
	deltaEventFields = []string{"sequence_number", "item_id", "output_index", "delta"}
	doneEventFields  = []string{"sequence_number", "item_id", "output_index", "arguments"}
)

// openAIArgs reads an argument event laid out the way OpenAI writes it,
// {"type":…,"sequence_number":N,"item_id":"…","output_index":N,"<value>":"…",
// with byte tests, and crosses the value by its quotes alone: it is text the
// tracker decodes anyway. Any other layout reports false. valueAt is the
// value's member up to its opening quote, valueDelta or valueArguments.
func openAIArgs(d []byte, valueAt string, r *eventRefs) bool {
	_, seq, ok := openAIHead(d)
	return openAIArgsAfter(d, seq, ok, valueAt, r)
}

// The value members openAIArgs is given, up to the value's opening quote.
const (
	valueDelta     = `,"delta":"`
	valueArguments = `,"arguments":"`
)

// openAIArgsAfter is openAIArgs for a head already read. It fills r in
// place: the refs are a few slices, copied on every delta otherwise.
func openAIArgsAfter(d []byte, seq jsonspan.Span, ok bool, valueAt string, r *eventRefs) bool {
	if !ok || seq.Start < 0 {
		return false
	}
	// The literals are compared in place, not through a helper: compared
	// with a constant of up to 16 bytes, the compiler loads words instead
	// of calling memequal.
	i := seq.End
	if len(d)-i < len(`,"item_id":"`) || string(d[i:i+len(`,"item_id":"`)]) != `,"item_id":"` {
		return false
	}
	i += len(`,"item_id":"`)
	// Item ids are short: one byte loop finds the closing quote and any
	// escape, where two searches would each pay their setup.
	n := i
	for n < len(d) && d[n] != '"' && d[n] != '\\' {
		n++
	}
	if n == len(d) || d[n] != '"' {
		return false
	}
	itemID := d[i:n]
	i = n + 1
	if len(d)-i < len(`,"output_index":`) || string(d[i:i+len(`,"output_index":`)]) != `,"output_index":` {
		return false
	}
	i += len(`,"output_index":`)
	j := digitsEnd(d, i)
	if j == i {
		return false
	}
	var v int
	switch {
	case valueAt == valueDelta && len(d)-j >= len(valueDelta) && string(d[j:j+len(valueDelta)]) == valueDelta:
		v = j + len(valueDelta) - 1
	case valueAt == valueArguments && len(d)-j >= len(valueArguments) && string(d[j:j+len(valueArguments)]) == valueArguments:
		v = j + len(valueArguments) - 1
	default:
		return false
	}
	r.itemID, r.outputIndex, r.seq = itemID, d[i:j], d[seq.Start:seq.End]
	r.value = jsonspan.Span{Start: v, End: -1}
	return true
}

// refs reads an argument event into r: the fast way when it is laid out
// the OpenAI way, else by its member names.
func (s *responsesCalls) refs(d []byte, names []string, valueAt string, r *eventRefs) {
	if openAIArgs(d, valueAt, r) {
		return
	}
	s.namedRefs(d, names, r)
}

// namedRefs reads an argument event laid out any way into r.
func (s *responsesCalls) namedRefs(d []byte, names []string, r *eventRefs) {
	const seq, itemID, outputIndex, value = 0, 1, 2, 3
	var f [4]jsonspan.Span
	s.x.eventFields(d, names, f[:])
	*r = eventRefs{value: f[value]}
	if f[seq].Start >= 0 {
		r.seq = d[f[seq].Start:f[seq].End]
	}
	if id := f[itemID]; id.Start >= 0 && d[id.Start] == '"' {
		r.itemID = d[id.Start+1 : id.End-1]
		if bytes.IndexByte(r.itemID, '\\') >= 0 {
			s.idbuf = jsonspan.Unescape(s.idbuf[:0], r.itemID)
			r.itemID = s.idbuf
		}
	}
	if oi := f[outputIndex]; oi.Start >= 0 {
		r.outputIndex = d[oi.Start:oi.End]
	}
}

// Client event names per call type.
var (
	nameInputDelta = []byte("response.custom_tool_call_input.delta")
	nameInputDone  = []byte("response.custom_tool_call_input.done")
	nameArgsDelta  = []byte("response.function_call_arguments.delta")
	nameArgsDone   = []byte("response.function_call_arguments.done")
)

// textEvent builds the delta or done event of a call's text in the
// client's shape. Rebuilt deltas carry no obfuscation padding: it was
// sized for the upstream's text. The event lives in buffers reused for the
// next one; stages downstream copy what they keep, as for every event, and
// the engine renumbers the placeholder sequence_number.
// esc, when not nil, is text already escaped for a JSON string, without
// its quotes.
func (s *responsesCalls) textEvent(c *trackedCall, seq []byte, done bool, text, esc []byte) *Event {
	name, field := nameArgsDelta, "delta"
	switch {
	case c.client.Type == "custom" && done:
		name, field = nameInputDone, "input"
	case c.client.Type == "custom":
		name = nameInputDelta
	case done:
		name, field = nameArgsDone, "arguments"
	}
	b := s.evbuf[:0]
	need := len(text) + len(text)/8 + 160
	if esc != nil {
		need = len(esc) + 160
	}
	if cap(b) < need {
		b = make([]byte, 0, need)
	}
	b = append(b, `{"type":"`...)
	b = append(b, name...)
	b = append(b, '"')
	if seq != nil {
		b = append(b, `,"sequence_number":`...)
		b = append(b, seq...)
	}
	b = append(b, `,"item_id":`...)
	b = jsonspan.AppendStringStr(b, c.itemID)
	if c.outputIndex != nil {
		b = append(b, `,"output_index":`...)
		b = append(b, c.outputIndex...)
	}
	b = append(b, `,"`...)
	b = append(b, field...)
	b = append(b, `":`...)
	start := len(b)
	if esc != nil {
		b = append(b, '"')
		b = append(b, esc...)
		b = append(b, '"')
	} else {
		b = jsonspan.AppendString(b, text)
	}
	if !done && !c.dropEsc {
		c.escSent = jsonspan.AppendPooled(c.escSent, b[start+1:len(b)-1]) // without the quotes
	}
	if done {
		// The finished item carries the same text: it is escaped once.
		s.esc = append(s.esc[:0], b[start:]...)
		s.escFor = c
	}
	b = append(b, '}')
	s.evbuf = b
	s.ev = Event{Name: name, Data: b}
	return &s.ev
}

// finishText settles a call's text from the complete arguments (from the
// .done event or the finished item; nil falls back to what was streamed),
// sends whatever part of it the client has not seen, then the done event.
func (s *responsesCalls) finishText(c *trackedCall, args []byte, seq []byte, emit Emit) error {
	if c.textDone {
		return nil
	}
	if len(args) == 0 {
		// Upstreams have been seen to send "" in the finished item after
		// complete deltas: what streamed is the call.
		args = c.h.Raw()
	} else if s.x.Limits.MaxCallBuffer > 0 && len(args) > s.x.Limits.MaxCallBuffer {
		s.abandon("call arguments exceed max_call_buffer")
		return overLimit(s.x, c.client)
	}
	c.final = c.h.Finish(args)
	c.textDone = true
	s.x.CallBuffered(len(args))
	rest, ok := c.emitted.rest(c.final)
	if ok && len(rest) > 0 {
		if err := emit(s.textEvent(c, seq, false, rest, nil)); err != nil {
			return err
		}
	} else if !ok {
		s.x.Decide(c.client.String(), "input_mismatch", "final arguments differ from the streamed ones; the done events carry the final input")
	}
	c.emitted = sentText{}
	var esc []byte
	if ok && !c.dropEsc && (len(c.escSent) > 0 || len(c.final) == 0) {
		esc = c.escSent // the deltas, escaped, are the final text escaped
	}
	err := emit(s.textEvent(c, seq, true, c.final, esc))
	// The event copied what it needed; the escaped arguments stay for the
	// finished item, which repeats them.
	jsonspan.PutPooled(c.escSent)
	c.escSent = nil
	return err
}

func itemArgs(d []byte, item jsonspan.Span) []byte {
	if a := jsonspan.Lookup(d, item.Start, "arguments"); a.Start >= 0 && d[a.Start] == '"' {
		return jsonspan.Unescape(make([]byte, 0, a.End-a.Start), d[a.Start+1:a.End-1])
	}
	return nil
}

func (s *responsesCalls) itemDone(ev *Event, d []byte, emit Emit) error {
	// The finished item of the call whose arguments just finished, most
	// likely: it repeats them.
	var known []byte
	if c := s.argsDone; c != nil && !c.dropEsc {
		known = c.escArgs
	}
	s.argsDone = nil
	r := readItem(d, known)
	item, itemID, oi, callID := r.item, r.itemID, r.outputIndex, r.callID
	if item.Start < 0 || d[item.Start] != '{' {
		return emit(ev)
	}
	c, closed := s.findItem(callID, itemID, oi)
	if closed {
		return nil
	}
	if r.incomplete {
		return s.incompleteItem(c, ev, d, item, emit)
	}
	if c == nil {
		// A finished item whose header never came: deliver it whole, so the
		// client never sees the upstream's shape of the call.
		client, h, ok := openCall(s.x, s.p, d, item)
		if !ok || s.failed {
			return emit(ev)
		}
		return s.deliver(d, item, client, h, itemID, oi, callID, emit)
	}
	if c.item != nil {
		return s.finishItem(c, d, item, emit)
	}
	if !c.textDone {
		if err := s.finishText(c, itemArgs(d, item), seqOf(d), emit); err != nil {
			return err
		}
	}
	s.close(c, true)
	if !c.relay {
		s.x.counts.Restored++
	}
	// Into a buffer of the stream's: the event is valid only during emit.
	s.itembuf = appendWithItem(s.itembuf, d, item, r.args, c.client, c.final, s.escaped(c))
	ev = &Event{Name: ev.Name, Data: s.itembuf}
	s.escFor = nil
	if cap(s.itembuf) > maxKeptEscape {
		s.itembuf = nil
	}
	if cap(s.esc) > maxKeptEscape {
		s.esc = nil // a large call's text is not kept for the next one
	}
	return emit(ev)
}

// incompleteItem closes a call the upstream finished as incomplete (cut by
// its output limit): its arguments are partial, so it is never restored as
// if whole. A call whose header reached the client is closed in the
// client's shape, marked incomplete, without the partial text; one that
// never showed (a built-in held back, or no header) is not sent at all.
func (s *responsesCalls) incompleteItem(c *trackedCall, ev *Event, d []byte, item jsonspan.Span, emit Emit) error {
	if c == nil {
		if _, h, ok := openCall(s.x, s.p, d, item); ok {
			releaseCall(h)
			s.x.Decide("tool call", "drop_partial_call", "the upstream finished the call as incomplete")
			return nil
		}
		return emit(ev)
	}
	abandonCall(s.x, c.client, c.h, "the upstream finished the call as incomplete")
	s.close(c, false)
	if c.item != nil {
		return nil // its added event was held back too
	}
	return emit(s.itemEvent(d, "response.output_item.done", c.outputIndex, clientItem(nil, d, item, c.client, []byte{})))
}

// deliver sends a call that the stream never opened, or opened but never
// finished, as the item events a client expects: added (unless already
// sent), the text, its done event, and output_item.done.
func (s *responsesCalls) deliver(d []byte, item jsonspan.Span, client ToolID, h CallHandler, itemID string, oi []byte, callID string, emit Emit) error {
	c := s.newCall(client, h, itemID, oi, callID)
	s.x.Decide(client.String(), "restore_call", "finished item of a call to restore")
	if ib, ok := h.(ItemBuilder); ok {
		c.item = ib
		return s.finishItem(c, d, item, emit)
	}
	if err := emit(s.itemEvent(d, "response.output_item.added", c.outputIndex, clientItem(nil, d, item, client, []byte{}))); err != nil {
		return err
	}
	return s.complete(c, d, item, emit)
}

func (s *responsesCalls) complete(c *trackedCall, d []byte, item jsonspan.Span, emit Emit) error {
	if c.item != nil {
		return s.finishItem(c, d, item, emit)
	}
	if err := s.finishText(c, itemArgs(d, item), seqOf(d), emit); err != nil {
		return err
	}
	s.close(c, true)
	if !c.relay {
		s.x.counts.Restored++
	}
	return emit(s.itemEvent(d, "response.output_item.done", c.outputIndex, clientItem(nil, d, item, c.client, c.final)))
}

// finishItem delivers a built-in call from its complete arguments (the
// finished item's, else the done event's, else those streamed): its added
// and done events, whose added event was held back. Arguments that do not
// fit the item go out as a function_call, with its argument events.
func (s *responsesCalls) finishItem(c *trackedCall, d []byte, item jsonspan.Span, emit Emit) error {
	// The finished item's arguments, else the done event's, else those
	// streamed: upstreams have been seen to send an empty string in the
	// finished item after complete deltas.
	raw := itemArgs(d, item)
	if len(raw) == 0 {
		raw = c.args
	}
	if len(raw) == 0 {
		raw = c.h.Raw()
	}
	if lim := s.x.Limits.MaxCallBuffer; lim > 0 && len(raw) > lim {
		s.abandon("call arguments exceed max_call_buffer")
		return overLimit(s.x, c.client)
	}
	s.x.CallBuffered(len(raw))
	built, ok := c.item.BuildItem(nil, raw, itemRef(d, item))
	if !ok {
		s.x.Decide(c.client.String(), "restore_as_function", "the arguments do not fit a "+c.client.Type+" call")
		c.client = ToolID{Type: "function", Namespace: c.client.Namespace, Name: c.client.Name}
		c.item = nil
		if err := emit(s.itemEvent(d, "response.output_item.added", c.outputIndex, clientItem(nil, d, item, c.client, []byte{}))); err != nil {
			return err
		}
		if err := s.finishText(c, raw, seqOf(d), emit); err != nil {
			return err
		}
		s.close(c, true)
		if !c.relay {
			s.x.counts.Restored++
		}
		return emit(s.itemEvent(d, "response.output_item.done", c.outputIndex, clientItem(nil, d, item, c.client, c.final)))
	}
	ref := itemRef(d, item)
	ref.Status = "in_progress"
	added, _ := c.item.BuildItem(nil, raw, ref)
	c.final, c.built = built, true
	s.close(c, true)
	if !c.relay {
		s.x.counts.Restored++
	}
	if err := emit(s.itemEvent(d, "response.output_item.added", c.outputIndex, added)); err != nil {
		return err
	}
	return emit(s.itemEvent(d, "response.output_item.done", c.outputIndex, built))
}

// itemRef reads what a call item says about itself.
func itemRef(d []byte, item jsonspan.Span) CallRef {
	var g [3]jsonspan.Span
	jsonspan.ObjectFields(d, item.Start, []string{"id", "call_id", "status"}, g[:])
	var r CallRef
	r.ItemID, _ = jsonspan.StringValue(d, g[0])
	r.CallID, _ = jsonspan.StringValue(d, g[1])
	r.Status, _ = jsonspan.StringValue(d, g[2])
	return r
}

// responseEvent rewrites the output of the response object carried by
// lifecycle events. On response.completed, calls the stream never
// delivered as items are completed from the final output first, so the
// client, which takes items from output_item.done, does not lose them.
func (s *responsesCalls) responseEvent(ev *Event, d []byte, emit Emit, terminalFailure bool) error {
	resp := jsonspan.Lookup(d, 0, "response")
	if resp.Start < 0 || d[resp.Start] != '{' {
		return emit(ev)
	}
	// The output's items are read once, for both steps below.
	s.items = readOutput(d, jsonspan.Lookup(d, resp.Start, "output"), s.items[:0])
	if !terminalFailure && jsonspan.IsString(d, jsonspan.Lookup(d, 0, "type"), "response.completed") {
		if err := s.completeMissing(d, s.items, emit); err != nil {
			return err
		}
	}
	done := func(callID, itemID string, pos int) (*trackedCall, bool) {
		// The ids first: a position is only as good as the upstream's
		// numbering.
		for _, k := range []callKey{{byCallID, callID}, {byItemID, itemID}, {byOutputIndex, strconv.Itoa(pos)}} {
			if k.key == "" {
				continue
			}
			if c, ok := s.closed[k]; ok {
				if c != nil && k.by == byCallID && itemID != "" && c.itemID != "" && c.itemID != itemID {
					continue // a repeated call id: the item id decides
				}
				return c, c != nil
			}
		}
		return nil, false
	}
	edits := restoreOutput(s.x, s.p, d, s.items, done, terminalFailure)
	if len(edits) == 0 {
		return emit(ev)
	}
	return emit(&Event{Name: ev.Name, Data: jsonspan.Apply(d, edits)})
}

// completeMissing emits the item events for calls that appear in
// response.completed's output but were never finished on the stream. The
// output position is the call's output_index.
func (s *responsesCalls) completeMissing(d []byte, items []outputItem, emit Emit) error {
	for pos := range items {
		it := &items[pos]
		if !jsonspan.IsString(d, it.typ, "function_call") {
			continue
		}
		itemID, _ := jsonspan.StringValue(d, it.id)
		callID, _ := jsonspan.StringValue(d, it.callID)
		oi := []byte(strconv.Itoa(pos))
		var err error
		switch c, closed := s.findItem(callID, itemID, oi); {
		case closed:
			// settled, or dropped: nothing to add
		case c != nil:
			err = s.complete(c, d, it.el, emit)
		default:
			client, h, ok := it.call(s.x, s.p, d)
			if ok {
				err = s.deliver(d, it.el, client, h, itemID, oi, callID, emit)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *responsesCalls) itemEvent(src []byte, typ string, outputIndex, item []byte) *Event {
	b := make([]byte, 0, len(item)+96)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, '"')
	if seq := seqOf(src); seq != nil {
		b = append(b, `,"sequence_number":`...)
		b = append(b, seq...)
	}
	b = append(b, `,"output_index":`...)
	b = append(b, outputIndex...)
	b = append(b, `,"item":`...)
	b = append(b, item...)
	b = append(b, '}')
	return &Event{Name: []byte(typ), Data: b}
}

// restoreOutput rewrites the policy's calls among the output items of the
// Responses object at obj. On a stream, done tells the calls the stream
// completed, by call id, output position and item id; with onlyDone, calls
// the stream did not complete stay as they are.
func restoreOutput(x *Exchange, p CallPolicy, doc []byte, items []outputItem, done func(callID, itemID string, pos int) (*trackedCall, bool), onlyDone bool) []jsonspan.Edit {
	var edits []jsonspan.Edit
	for pos := range items {
		it := &items[pos]
		el := it.el
		if edit, ok := restoreItem(x, p, doc, it, pos, done, onlyDone); ok {
			edits = append(edits, jsonspan.Edit{Start: el.Start, End: el.End, Repl: edit})
		}
	}
	return edits
}

// restoreItem is restoreOutput for one item: its replacement, or ok false
// to leave it.
func restoreItem(x *Exchange, p CallPolicy, doc []byte, it *outputItem, pos int, done func(callID, itemID string, pos int) (*trackedCall, bool), onlyDone bool) (repl []byte, ok bool) {
	el := it.el
	client, h, ok := it.call(x, p, doc)
	if !ok {
		return nil, false
	}
	var delivered *trackedCall
	if done == nil {
		countRestored(x, h)
		x.Decide(client.String(), "restore_call", "function call to restore")
	} else {
		itemID, _ := jsonspan.StringValue(doc, it.id)
		callID, _ := jsonspan.StringValue(doc, it.callID)
		var completed bool
		if delivered, completed = done(callID, itemID, pos); !completed && onlyDone {
			releaseCall(h)
			return nil, false // never build a call the stream did not complete
		}
	}
	if c := delivered; c != nil && c.final != nil {
		// What the stream delivered, whatever this copy of the item
		// carries.
		releaseCall(h)
		if c.built {
			return c.final, true
		}
		return clientItemEsc(nil, doc, el, it.args, c.client, c.final, nil), true
	}
	raw := it.argsText(doc)
	if ib, ok := h.(ItemBuilder); ok {
		// Built again from the item's own arguments: the same arguments
		// give the item the stream delivered.
		releaseCall(h)
		built, ok := ib.BuildItem(nil, raw, it.ref(doc))
		if !ok {
			x.Decide(client.String(), "restore_as_function", "the arguments do not fit a "+client.Type+" call")
			built = clientItemEsc(nil, doc, el, it.args, ToolID{Type: "function", Namespace: client.Namespace, Name: client.Name}, raw, nil)
		}
		return built, true
	}
	text := h.Finish(raw)
	releaseCall(h)
	return clientItemEsc(nil, doc, el, it.args, client, text, nil), true
}

// clientItem rewrites a function_call item into the client's call: a
// custom_tool_call whose input is text, or a function_call whose arguments
// are text; name and namespace become the client's.
func clientItem(dst, doc []byte, el jsonspan.Span, client ToolID, text []byte) []byte {
	return clientItemEsc(dst, doc, el, jsonspan.NoSpan(), client, text, nil)
}

// clientItemEsc is clientItem with the text already escaped as a JSON
// string (esc), when the done event has just written it. args, when not
// NoSpan, is the item's "arguments" value as a validating walk found it:
// the rewrite steps over it instead of crossing a call's whole arguments
// again.
func clientItemEsc(dst, doc []byte, el, args jsonspan.Span, client ToolID, text, esc []byte) []byte {
	typ, field := "function_call", "arguments"
	if client.Type == "custom" {
		typ, field = "custom_tool_call", "input"
	}
	if dst == nil {
		// One allocation the size of the result: the item's other members
		// and the text, escaped.
		dst = make([]byte, 0, el.End-el.Start+len(text)+len(text)/8+32)
	}
	w := jsonspan.NewObj(dst)
	sawNS := false
	jsonspan.RetypeKnown(&w, doc, el, args, typ, func(w *jsonspan.ObjWriter, m jsonspan.Member) bool {
		switch {
		case m.KeyIs(doc, "arguments"):
			w.Key(field)
			if esc != nil {
				w.B = append(w.B, esc...)
			} else {
				w.B = jsonspan.AppendString(w.B, text)
			}
		case m.KeyIs(doc, "name"):
			if s, _ := jsonspan.StringValue(doc, m.Value); s == client.Name {
				return false
			}
			w.Key("name")
			w.B = jsonspan.AppendStringStr(w.B, client.Name)
		case m.KeyIs(doc, "namespace"):
			sawNS = true
			if s, _ := jsonspan.StringValue(doc, m.Value); s == client.Namespace || client.Namespace == "" {
				return false
			}
			w.Key("namespace")
			w.B = jsonspan.AppendStringStr(w.B, client.Namespace)
		default:
			return false
		}
		return true
	})
	if !sawNS && client.Namespace != "" {
		w.Key("namespace")
		w.B = jsonspan.AppendStringStr(w.B, client.Namespace)
	}
	return w.Close()
}
