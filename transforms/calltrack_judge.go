package transforms

import (
	"bytes"
	"slices"
	"strconv"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// CallJudge is implemented by call policies that rule on every call the
// upstream makes, of any type (functions, custom tools, the built-ins a
// client runs), whether or not they restore it: a call the request never
// offered would reach a client that cannot run it. The tracker asks once
// per call, on the first event that names it (a streamed call is judged
// on its header, so nothing is held back), and removes the calls judged
// CallDrop from JSON bodies and streams. Once a call is removed, later
// output indexes (Responses) and tool call indexes (Chat) close the gap,
// as clients index their accumulators by them; a Chat choice whose every
// call went finishes as "stop".
type CallJudge interface {
	JudgeCall(x *Exchange, c JudgedCall) CallVerdict
}

// JudgeOnly is the CallPolicy of a CallJudge that restores no call: the
// tracker then only judges, and passes every call it keeps as it came
// (a Chat call's unnamed first fragment included, which a restoring
// tracker would hold until its name shows).
type JudgeOnly struct{ CallJudge }

// OpenCall implements CallPolicy: no call is restored.
func (JudgeOnly) OpenCall(*Exchange, ToolID) (ToolID, CallHandler, bool) {
	return ToolID{}, nil, false
}

// JudgedCall is the call a CallJudge rules on.
type JudgedCall struct {
	// Tool is the upstream's identity of the called tool.
	Tool ToolID
	// Key identifies the call within the exchange (its call id, or item
	// id; in Chat the choice index and call id), for counting a call once
	// across rules; "" when the call carries none.
	Key string
	// Late is set for a call whose first fragment reached the client
	// before a later one named it (Chat): it can be counted, not removed,
	// and the verdict is ignored.
	Late bool
}

// CallVerdict is what a CallJudge rules for one call.
type CallVerdict uint8

const (
	// CallKeep lets the call through: restored when the policy's
	// OpenCall claims it, as it came otherwise.
	CallKeep CallVerdict = iota
	// CallDrop removes the call from the response.
	CallDrop
)

// judgedStream wraps a tracker stage (nil for JudgeOnly): calls its
// policy's judge drops are removed before the tracker sees the events.
type judgedStream struct {
	judge CallJudge
	x     *Exchange
	inner StreamTransform
	// Responses: item and call ids judged -> removed, the output indexes
	// and item ids removed.
	judged map[string]bool
	gone   indexSet
	goneID map[string]bool
	// Chat: the calls, each with the index the client sees it at; next
	// is each choice's next client index, and removed counts the calls it
	// lost.
	calls      ChatCalls[judgedChat]
	next       map[int]int
	removed    map[int]int
	legacyGone map[int]bool // choices whose legacy function_call is removed
	legacySeen map[int]bool
	buf        []byte
	ev         Event
}

func newJudgedStream(x *Exchange, j CallJudge, inner StreamTransform) *judgedStream {
	return &judgedStream{judge: j, x: x, inner: inner, judged: map[string]bool{}}
}

// judgedChat is what the judge keeps of a Chat call.
type judgedChat struct {
	to      int  // the index the client sees, -1 for a removed call
	unnamed bool // passed before a fragment named it: judged late
}

// Release implements StreamReleaser.
func (s *judgedStream) Release() {
	if r, ok := s.inner.(StreamReleaser); ok {
		r.Release()
	}
}

func (s *judgedStream) End(emit Emit) error {
	if s.inner == nil {
		return nil
	}
	return s.inner.End(emit)
}

func (s *judgedStream) Event(ev *Event, emit Emit) error {
	var out *Event
	if s.x.Protocol() == ProtocolChat {
		out = s.chatEvent(ev)
	} else {
		out = s.responsesEvent(ev)
	}
	switch {
	case out == nil:
		return nil
	case s.inner == nil:
		return emit(out)
	}
	return s.inner.Event(out, emit)
}

// callKeyOf is the key a call is judged under once per exchange.
func callKeyOf(callID, itemID string) string {
	if callID != "" {
		return callID
	}
	return itemID
}

// responsesCallID reads the identity of a Responses output item that is a
// call the client runs, or ok false.
func responsesCallID(doc []byte, item jsonspan.Span) (id ToolID, itemID, callID string, ok bool) {
	if item.Start < 0 || doc[item.Start] != '{' {
		return id, "", "", false
	}
	var f [5]jsonspan.Span
	jsonspan.ObjectFields(doc, item.Start, []string{"type", "name", "namespace", "id", "call_id"}, f[:])
	typ, _ := jsonspan.StringValue(doc, f[0])
	itemID, _ = jsonspan.StringValue(doc, f[3])
	callID, _ = jsonspan.StringValue(doc, f[4])
	switch typ {
	case "function_call":
		id.Type = "function"
	case "custom_tool_call":
		id.Type = "custom"
	default:
		// Only the calls the client runs: hosted ones (web_search_call)
		// are the upstream's own business.
		if id.Type = BuiltinOfItem(typ); id.Type == "" {
			return id, "", "", false
		}
		return id, itemID, callID, true
	}
	id.Name, _ = jsonspan.StringValue(doc, f[1])
	id.Namespace, _ = jsonspan.StringValue(doc, f[2])
	return id, itemID, callID, true
}

func (s *judgedStream) responsesEvent(ev *Event) *Event {
	d := bytes.TrimSpace(ev.Data)
	if len(d) == 0 || d[0] != '{' {
		return ev
	}
	typ, _ := s.x.headOf(d)
	if typ.Start < 0 {
		return ev
	}
	switch string(d[typ.Start:typ.End]) {
	case `"response.output_item.added"`:
		item := jsonspan.Lookup(d, 0, "item")
		if id, itemID, callID, ok := responsesCallID(d, item); ok {
			drop := s.judge.JudgeCall(s.x, JudgedCall{Tool: id, Key: callKeyOf(callID, itemID)}) == CallDrop
			for _, k := range []string{itemID, callID} {
				if k != "" {
					s.judged[k] = drop
				}
			}
			if drop {
				oi := jsonspan.Lookup(d, 0, "output_index")
				if n, err := strconv.Atoi(string(d[max(oi.Start, 0):max(oi.End, 0)])); err == nil {
					s.gone.add(n)
				}
				if itemID != "" {
					if s.goneID == nil {
						s.goneID = map[string]bool{}
					}
					s.goneID[itemID] = true
				}
				return nil
			}
		}
	case `"response.completed"`, `"response.incomplete"`, `"response.failed"`:
		resp := jsonspan.Lookup(d, 0, "response")
		if resp.Start < 0 || d[resp.Start] != '{' {
			break
		}
		out := jsonspan.Lookup(d, resp.Start, "output")
		if out.Start < 0 || d[out.Start] != '[' {
			break
		}
		if repl, changed := judgeOutput(s.x, s.judge, d, out, s.judged); changed {
			s.buf = jsonspan.Apply(d, []jsonspan.Edit{{Start: out.Start, End: out.End, Repl: repl}})
			s.ev = Event{Name: ev.Name, ID: ev.ID, Retry: ev.Retry, Data: s.buf}
			return &s.ev
		}
		return ev
	}
	if s.gone.empty() && len(s.goneID) == 0 {
		return ev
	}
	return s.shift(ev, d)
}

// shift removes the events of removed calls and closes the gap they left
// in the output indexes of the others. The event's output_index and its
// item's id (or item_id) are read in one walk, in any order.
func (s *judgedStream) shift(ev *Event, d []byte) *Event {
	var f [3]jsonspan.Span
	s.x.eventFields(d, shiftFields, f[:])
	oi, itemID := f[0], ""
	if item := f[2]; item.Start >= 0 && d[item.Start] == '{' {
		itemID, _ = jsonspan.StringValue(d, jsonspan.Lookup(d, item.Start, "id"))
	} else {
		itemID, _ = jsonspan.StringValue(d, f[1])
	}
	n, err := strconv.Atoi(string(d[max(oi.Start, 0):max(oi.End, 0)]))
	switch {
	case s.goneID[itemID]:
		return nil
	case err != nil:
		return ev
	case itemID == "":
		if s.gone.has(n) {
			return nil
		}
	}
	below := s.gone.below(n)
	if below == 0 {
		return ev
	}
	s.buf = jsonspan.Apply(d, []jsonspan.Edit{{Start: oi.Start, End: oi.End, Repl: strconv.AppendInt(nil, int64(n-below), 10)}})
	s.ev = Event{Name: ev.Name, ID: ev.ID, Retry: ev.Retry, Data: s.buf}
	return &s.ev
}

var shiftFields = []string{"output_index", "item_id", "item"}

// judgeOutput judges the calls of a Responses output array; judged, when
// set, skips the items a stream already judged and records the rest. It
// returns the array without the removed calls.
func judgeOutput(x *Exchange, j CallJudge, doc []byte, out jsonspan.Span, judged map[string]bool) ([]byte, bool) {
	var kept []jsonspan.Span
	changed := false
	jsonspan.EachElement(doc, out.Start, func(el jsonspan.Span) bool {
		id, itemID, callID, ok := responsesCallID(doc, el)
		if ok {
			drop, seen := judged[itemID]
			seen = seen && itemID != ""
			if !seen && callID != "" {
				drop, seen = judged[callID]
			}
			if !seen {
				drop = j.JudgeCall(x, JudgedCall{Tool: id, Key: callKeyOf(callID, itemID)}) == CallDrop
			}
			if drop {
				changed = true
				return true
			}
		}
		kept = append(kept, el)
		return true
	})
	if !changed {
		return nil, false
	}
	return jsonspan.AppendArray(nil, doc, kept), true
}

// chatCallID reads the identity of a Chat tool_calls entry.
func chatCallID(doc []byte, el jsonspan.Span) (ToolID, bool) {
	if doc[el.Start] != '{' {
		return ToolID{}, false
	}
	var g [3]jsonspan.Span
	jsonspan.ObjectFields(doc, el.Start, []string{"type", "function", "custom"}, g[:])
	inner, typ := g[1], "function"
	if jsonspan.IsString(doc, g[0], "custom") {
		inner, typ = g[2], "custom"
	}
	if inner.Start < 0 || doc[inner.Start] != '{' {
		return ToolID{}, false
	}
	name := jsonspan.Lookup(doc, inner.Start, "name")
	if name.Start < 0 {
		return ToolID{}, false
	}
	n, _ := jsonspan.StringValue(doc, name)
	return ToolID{Type: typ, Name: n}, true
}

// judgeBody removes the calls j drops from a complete response body of
// x's running protocol.
func judgeBody(x *Exchange, j CallJudge, body []byte) []jsonspan.Edit {
	root := jsonspan.SkipSpace(body, 0)
	if root >= len(body) || body[root] != '{' {
		return nil
	}
	var edits []jsonspan.Edit
	if x.Protocol() == ProtocolResponses {
		if out := jsonspan.Lookup(body, root, "output"); out.Start >= 0 && body[out.Start] == '[' {
			if repl, changed := judgeOutput(x, j, body, out, nil); changed {
				edits = append(edits, jsonspan.Edit{Start: out.Start, End: out.End, Repl: repl})
			}
		}
		return edits
	}
	choices := jsonspan.Lookup(body, root, "choices")
	if choices.Start < 0 || body[choices.Start] != '[' {
		return nil
	}
	choiceAt := -1
	jsonspan.EachElement(body, choices.Start, func(ch jsonspan.Span) bool {
		choiceAt++
		if body[ch.Start] != '{' {
			return true
		}
		var f [2]jsonspan.Span
		jsonspan.ObjectFields(body, ch.Start, []string{"message", "finish_reason"}, f[:])
		if f[0].Start < 0 || body[f[0].Start] != '{' {
			return true
		}
		var g [2]jsonspan.Span
		jsonspan.ObjectFields(body, f[0].Start, []string{"tool_calls", "function_call"}, g[:])
		calls, legacy := g[0], g[1]
		var kept []jsonspan.Span
		var gone []jsonspan.Span // members of the message that go
		dropped := 0
		if calls.Start >= 0 && body[calls.Start] == '[' {
			jsonspan.EachElement(body, calls.Start, func(el jsonspan.Span) bool {
				if id, ok := chatCallID(body, el); ok {
					key, _ := jsonspan.StringValue(body, jsonspan.Lookup(body, el.Start, "id"))
					if key != "" {
						key = strconv.Itoa(choiceAt) + ":" + key // one id may stand in several choices
					}
					if j.JudgeCall(x, JudgedCall{Tool: id, Key: key}) == CallDrop {
						dropped++
						return true
					}
				}
				kept = append(kept, el)
				return true
			})
			switch {
			case dropped == 0:
			case len(kept) > 0:
				edits = append(edits, jsonspan.Edit{Start: calls.Start, End: calls.End, Repl: jsonspan.AppendArray(nil, body, kept)})
			default:
				gone = append(gone, calls)
			}
		}
		if legacy.Start >= 0 && body[legacy.Start] == '{' {
			// The legacy single call (a request with functions).
			name, _ := jsonspan.StringValue(body, jsonspan.Lookup(body, legacy.Start, "name"))
			if j.JudgeCall(x, JudgedCall{Tool: ToolID{Type: "function", Name: name}}) == CallDrop {
				gone = append(gone, legacy)
			}
		}
		if len(gone) == 0 {
			return true
		}
		if legacy.Start >= 0 && calls.Start >= 0 && legacy.Start < calls.Start {
			gone[0], gone[len(gone)-1] = gone[len(gone)-1], gone[0]
		}
		edits = append(edits, jsonspan.RemoveMembers(body, gone)...)
		// No call left: the message is an answer, and says so.
		if (len(kept) == 0 || calls.Start < 0) && (jsonspan.IsString(body, f[1], "tool_calls") || jsonspan.IsString(body, f[1], "function_call")) {
			edits = append(edits, jsonspan.Edit{Start: f[1].Start, End: f[1].End, Repl: []byte(`"stop"`)})
		}
		return true
	})
	return edits
}

func (s *judgedStream) chatEvent(ev *Event) *Event {
	d := ev.Data
	if !bytes.Contains(d, []byte(`"tool_calls"`)) && !bytes.Contains(d, []byte(`"function_call"`)) && !bytes.Contains(d, []byte(`\u`)) {
		// (An escape could spell the key: such chunks take the walk.)
		return ev
	}
	root := jsonspan.SkipSpace(d, 0)
	if root >= len(d) || d[root] != '{' {
		return ev
	}
	choices := jsonspan.Lookup(d, root, "choices")
	if choices.Start < 0 || d[choices.Start] != '[' {
		return ev
	}
	var edits []jsonspan.Edit
	jsonspan.EachElement(d, choices.Start, func(ch jsonspan.Span) bool {
		if d[ch.Start] != '{' {
			return true
		}
		var f [3]jsonspan.Span
		jsonspan.ObjectFields(d, ch.Start, []string{"index", "delta", "finish_reason"}, f[:])
		choice, _ := strconv.Atoi(string(d[max(f[0].Start, 0):max(f[0].End, 0)]))
		if f[1].Start >= 0 && d[f[1].Start] == '{' {
			var g [2]jsonspan.Span
			jsonspan.ObjectFields(d, f[1].Start, []string{"tool_calls", "function_call"}, g[:])
			var gone []jsonspan.Span // members of the delta that go
			if calls := g[0]; calls.Start >= 0 && d[calls.Start] == '[' {
				var all bool
				if edits, all = s.entries(edits, d, choice, calls); all {
					gone = append(gone, calls)
				}
			}
			if fc := g[1]; fc.Start >= 0 && d[fc.Start] == '{' && s.legacy(choice, d, fc) {
				// The legacy single call is removed, fragment by fragment.
				gone = append(gone, fc)
			}
			if len(gone) == 2 && gone[1].Start < gone[0].Start {
				gone[0], gone[1] = gone[1], gone[0]
			}
			edits = append(edits, jsonspan.RemoveMembers(d, gone)...)
		}
		if jsonspan.IsString(d, f[2], "tool_calls") && s.removed[choice] > 0 && s.next[choice] == 0 {
			// Every call of the choice was removed: it ends as an answer.
			edits = append(edits, jsonspan.Edit{Start: f[2].Start, End: f[2].End, Repl: []byte(`"stop"`)})
		}
		if jsonspan.IsString(d, f[2], "function_call") && s.legacyGone[choice] {
			edits = append(edits, jsonspan.Edit{Start: f[2].Start, End: f[2].End, Repl: []byte(`"stop"`)})
		}
		return true
	})
	if len(edits) == 0 {
		return ev
	}
	s.buf = jsonspan.Apply(d, edits)
	s.ev = Event{Name: ev.Name, ID: ev.ID, Retry: ev.Retry, Data: s.buf}
	return &s.ev
}

// legacy judges a choice's legacy function_call on the fragment that
// names it and reports whether its fragments go.
func (s *judgedStream) legacy(choice int, d []byte, fc jsonspan.Span) bool {
	if s.legacySeen[choice] {
		return s.legacyGone[choice]
	}
	name := jsonspan.Lookup(d, fc.Start, "name")
	if name.Start < 0 {
		return false // nothing to judge yet
	}
	if s.legacySeen == nil {
		s.legacySeen, s.legacyGone = map[int]bool{}, map[int]bool{}
	}
	s.legacySeen[choice] = true
	n, _ := jsonspan.StringValue(d, name)
	if s.judge.JudgeCall(s.x, JudgedCall{Tool: ToolID{Type: "function", Name: n}}) == CallDrop {
		s.legacyGone[choice] = true
	}
	return s.legacyGone[choice]
}

// chatCallKey is the key a Chat call is judged under: one id may stand in
// several choices.
func chatCallKey(choice int, rawID []byte) string {
	id, _ := jsonspan.StringValue(rawID, jsonspan.Span{Start: 0, End: len(rawID)})
	if id == "" {
		return ""
	}
	return strconv.Itoa(choice) + ":" + id
}

// keep numbers a kept call of choice in its turn.
func (s *judgedStream) keep(choice int) int {
	if s.next == nil {
		s.next = map[int]int{}
	}
	to := s.next[choice]
	s.next[choice]++
	return to
}

// entries judges and renumbers one chunk's tool_calls fragments of a
// choice, returning the edits, and true when none of them is left.
func (s *judgedStream) entries(edits []jsonspan.Edit, d []byte, choice int, calls jsonspan.Span) ([]jsonspan.Edit, bool) {
	var kept []jsonspan.Span
	var renum [][]byte
	changed := false
	jsonspan.EachElement(d, calls.Start, func(el jsonspan.Span) bool {
		var f ChatFragment
		if d[el.Start] == '{' {
			f, _ = ReadChatFragment(d, el.Start)
		}
		if !f.HasIndex {
			kept, renum = append(kept, el), append(renum, nil)
			return true
		}
		c, opened := s.calls.Place(int64(choice), &f)
		st := &c.State
		named := f.Call && c.Name != ""
		id := ToolID{Type: "function", Name: c.Name}
		if f.Custom {
			id.Type = "custom"
		}
		switch {
		case opened && !named:
			// No name yet: the call passes, numbered in its turn, and is
			// judged once a fragment names it.
			st.to, st.unnamed = s.keep(choice), true
		case opened && s.judge.JudgeCall(s.x, JudgedCall{Tool: id, Key: chatCallKey(choice, c.ID)}) == CallDrop:
			st.to = -1
			if s.removed == nil {
				s.removed = map[int]int{}
			}
			s.removed[choice]++
		case opened:
			st.to = s.keep(choice)
		case st.unnamed && named:
			// Named after its first fragment, which the client has: it is
			// judged now, and can no longer be taken back.
			st.unnamed = false
			s.judge.JudgeCall(s.x, JudgedCall{Tool: id, Key: chatCallKey(choice, c.ID), Late: true})
		}
		switch to := st.to; {
		case to < 0:
			changed = true
		case int64(to) != f.Index:
			changed = true
			idx := jsonspan.Lookup(d, el.Start, "index")
			kept = append(kept, el)
			renum = append(renum, jsonspan.Apply(d[:idx.End], []jsonspan.Edit{{Start: idx.Start, End: idx.End, Repl: strconv.AppendInt(nil, int64(to), 10)}})[el.Start:])
		default:
			kept, renum = append(kept, el), append(renum, nil)
		}
		return true
	})
	if !changed {
		return edits, false
	}
	if len(kept) == 0 {
		// Nothing of the chunk's calls is left: the delta goes without
		// tool_calls rather than with an empty list (the caller removes
		// it, with any other member that goes).
		return edits, true
	}
	out := []byte{'['}
	for i, el := range kept {
		if i > 0 {
			out = append(out, ',')
		}
		if r := renum[i]; r != nil {
			// The entry up to its index, rewritten, then the rest.
			out = append(out, r...)
			idx := jsonspan.Lookup(d, el.Start, "index")
			out = append(out, d[idx.End:el.End]...)
			continue
		}
		out = append(out, d[el.Start:el.End]...)
	}
	out = append(out, ']')
	return append(edits, jsonspan.Edit{Start: calls.Start, End: calls.End, Repl: out}), false
}

// indexSet holds the output indexes of removed items and counts those
// below an index, to close the gaps they leave. Upstreams number items in
// order, so an index is appended to the sorted run; one out of order waits
// in a short unsorted tail, merged into the run once the tail outgrows
// the run's square root. Each operation then costs at most about that
// root, so even an upstream that numbers items backwards cannot make a
// stream cost the square of its calls.
type indexSet struct {
	sorted []int // ascending
	tail   []int // out of order, unsorted
}

func (s *indexSet) empty() bool { return len(s.sorted) == 0 && len(s.tail) == 0 }

func (s *indexSet) add(n int) {
	if k := len(s.sorted); k == 0 || s.sorted[k-1] <= n {
		s.sorted = append(s.sorted, n)
		return
	}
	s.tail = append(s.tail, n)
	if len(s.tail)*len(s.tail) > len(s.sorted) {
		s.sorted = append(s.sorted, s.tail...)
		slices.Sort(s.sorted)
		s.tail = s.tail[:0]
	}
}

func (s *indexSet) has(n int) bool {
	if _, found := slices.BinarySearch(s.sorted, n); found {
		return true
	}
	return slices.Contains(s.tail, n)
}

// below counts the indexes under n.
func (s *indexSet) below(n int) int {
	k, _ := slices.BinarySearch(s.sorted, n)
	for _, t := range s.tail {
		if t < n {
			k++
		}
	}
	return k
}
