package toolsfilter

import (
	"bytes"
	"slices"
	"strconv"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"go.uber.org/zap"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// The response side of tools_filter watches the upstream's calls. A call to
// a tool the request never offered (a model inventing one, or one a rule
// filtered) would reach a client that cannot run it: each is counted and
// logged, and with drop_undeclared_calls removed, in JSON and in streams.
// A streamed call is judged on its first event, so nothing is held back;
// once one is removed, later output indexes (Responses) or tool call
// indexes (Chat) close the gap, as clients index their accumulators by
// them.

// WantsResponse implements ResponseRewriter.
func (t *ToolsFilter) WantsResponse(x *transforms.Exchange) bool { return t.record(x).active }

// judgeCall says whether the upstream may call the tool: "" when it was
// offered, else "undeclared" or the reason it was filtered.
func (rec *filterRecord) judgeCall(id transforms.ToolID) string {
	if rec.declared[nameKey(id)] {
		return ""
	}
	if r, ok := rec.filtered[nameKey(id)]; ok {
		return r
	}
	if id.Name == "" {
		// A built-in call answers its tool type, and also a custom tool
		// of that name (Codex's apply_patch).
		alt := nameKey(transforms.ToolID{Type: "custom", Name: id.Type})
		if rec.declared[alt] || (id.Type == "computer" && rec.declared[nameKey(transforms.ToolID{Type: "computer_use_preview"})]) {
			return ""
		}
		if r, ok := rec.filtered[alt]; ok {
			return r
		}
	}
	return "undeclared"
}

// unexpected counts and logs one call the upstream should not have made,
// and reports whether to remove it.
func (t *ToolsFilter) unexpected(x *transforms.Exchange, key string, id transforms.ToolID, reason string) bool {
	t.count(x, key, id, reason, t.DropUndeclaredCalls)
	return t.DropUndeclaredCalls
}

// count records one unexpected call, removed or not. key is the call's
// id: when a rule nearer the upstream counted the same call already (as
// undeclared: it never saw the tool this rule filtered), this rule's
// reason replaces that count rather than adding a second.
func (t *ToolsFilter) count(x *transforms.Exchange, key string, id transforms.ToolID, reason string, dropped bool) {
	if key != "" {
		if prev, ok := x.NoteUnexpected(key, reason); ok {
			if prev == "undeclared" {
				x.UndeclaredCalls--
			} else {
				x.FilteredCalls--
			}
		}
	}
	if reason == "undeclared" {
		x.UndeclaredCalls++
	} else {
		x.FilteredCalls++
	}
	action := "pass_unexpected_call"
	if dropped {
		x.DroppedCalls++
		action = "drop_unexpected_call"
	}
	x.Decide(id.Display(), action, reason)
	if x.Logger != nil {
		x.Logger.Warn("llm_transform: upstream called a tool the request did not offer",
			zap.String("tool", id.Display()), zap.String("reason", reason), zap.Bool("dropped", dropped))
	}
}

// callKeyOf is the key a call is counted under once per exchange.
func callKeyOf(callID, itemID string) string {
	if callID != "" {
		return callID
	}
	return itemID
}

// responsesCallID reads the identity of a Responses output item that is a
// call the client runs, or ok false.
func responsesCallID(doc []byte, item jsonspan.Span) (id transforms.ToolID, itemID, callID string, ok bool) {
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
		id.Name, _ = jsonspan.StringValue(doc, f[1])
		id.Namespace, _ = jsonspan.StringValue(doc, f[2])
	case "custom_tool_call":
		id.Type = "custom"
		id.Name, _ = jsonspan.StringValue(doc, f[1])
		id.Namespace, _ = jsonspan.StringValue(doc, f[2])
	default:
		if !bytes.HasSuffix([]byte(typ), []byte("_call")) {
			return id, "", "", false
		}
		// Only the calls the client runs: hosted ones (web_search_call)
		// are the upstream's own business.
		if id.Type = transforms.BuiltinOfItem(typ); id.Type == "" {
			return id, "", "", false
		}
	}
	return id, itemID, callID, true
}

// RewriteResponse implements ResponseRewriter.
func (t *ToolsFilter) RewriteResponse(x *transforms.Exchange, body []byte) ([]byte, error) {
	rec := t.record(x)
	if !rec.active || !jsonspan.Valid(body) {
		return body, nil
	}
	root := jsonspan.SkipSpace(body, 0)
	if root >= len(body) || body[root] != '{' {
		return body, nil
	}
	var edits []jsonspan.Edit
	switch x.Protocol() {
	case transforms.ProtocolResponses:
		if out := jsonspan.Lookup(body, root, "output"); out.Start >= 0 && body[out.Start] == '[' {
			if repl, changed := t.filterOutput(x, rec, body, out, nil); changed {
				edits = append(edits, jsonspan.Edit{Start: out.Start, End: out.End, Repl: repl})
			}
		}
	case transforms.ProtocolChat:
		choices := jsonspan.Lookup(body, root, "choices")
		if choices.Start < 0 || body[choices.Start] != '[' {
			return body, nil
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
						if r := rec.judgeCall(id); r != "" && t.unexpected(x, key, id, r) {
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
					edits = append(edits, jsonspan.Edit{Start: calls.Start, End: calls.End, Repl: joinSpans(body, kept)})
				default:
					gone = append(gone, calls)
				}
			}
			if legacy.Start >= 0 && body[legacy.Start] == '{' {
				// The legacy single call (a request with functions).
				name, _ := jsonspan.StringValue(body, jsonspan.Lookup(body, legacy.Start, "name"))
				id := transforms.ToolID{Type: "function", Name: name}
				if r := rec.judgeCall(id); r != "" && t.unexpected(x, "", id, r) {
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
	}
	if len(edits) == 0 {
		return body, nil
	}
	return x.ApplyEdits(body, edits), nil
}

// filterOutput judges the calls of a Responses output array; judged, when
// set, skips the items a stream already judged and records the rest. It
// returns the array without the removed calls.
func (t *ToolsFilter) filterOutput(x *transforms.Exchange, rec *filterRecord, doc []byte, out jsonspan.Span, judged map[string]bool) ([]byte, bool) {
	var kept []jsonspan.Span
	changed := false
	jsonspan.EachElement(doc, out.Start, func(el jsonspan.Span) bool {
		id, itemID, callID, ok := responsesCallID(doc, el)
		if ok {
			drop, seen := judged[itemID], itemID != "" && judgedHas(judged, itemID)
			if !seen && callID != "" {
				drop, seen = judged[callID], judgedHas(judged, callID)
			}
			if !seen {
				if r := rec.judgeCall(id); r != "" {
					drop = t.unexpected(x, callKeyOf(callID, itemID), id, r)
				}
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
	return joinSpans(doc, kept), true
}

func judgedHas(m map[string]bool, k string) bool {
	_, ok := m[k]
	return ok
}

// joinSpans writes the values at spans as a JSON array.
func joinSpans(doc []byte, spans []jsonspan.Span) []byte {
	out := []byte{'['}
	for i, sp := range spans {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, doc[sp.Start:sp.End]...)
	}
	return append(out, ']')
}

// chatCallID reads the identity of a Chat tool_calls entry.
func chatCallID(doc []byte, el jsonspan.Span) (transforms.ToolID, bool) {
	if doc[el.Start] != '{' {
		return transforms.ToolID{}, false
	}
	var g [3]jsonspan.Span
	jsonspan.ObjectFields(doc, el.Start, []string{"type", "function", "custom"}, g[:])
	inner, typ := g[1], "function"
	if jsonspan.IsString(doc, g[0], "custom") {
		inner, typ = g[2], "custom"
	}
	if inner.Start < 0 || doc[inner.Start] != '{' {
		return transforms.ToolID{}, false
	}
	name := jsonspan.Lookup(doc, inner.Start, "name")
	if name.Start < 0 {
		return transforms.ToolID{}, false
	}
	n, _ := jsonspan.StringValue(doc, name)
	return transforms.ToolID{Type: typ, Name: n}, true
}

// NewStream implements ResponseRewriter.
func (t *ToolsFilter) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	rec := t.record(x)
	if !rec.active {
		return nil
	}
	switch x.Protocol() {
	case transforms.ProtocolResponses:
		return &filterResponsesStream{t: t, x: x, rec: rec, judged: map[string]bool{}}
	case transforms.ProtocolChat:
		return &filterChatStream{t: t, x: x, rec: rec, calls: map[[2]int]int{}}
	}
	return nil
}

// filterResponsesStream is the Responses stream stage.
type filterResponsesStream struct {
	t      *ToolsFilter
	x      *transforms.Exchange
	rec    *filterRecord
	judged map[string]bool // item and call ids -> removed
	gone   indexSet        // output indexes removed
	goneID map[string]bool // item ids removed
	buf    []byte
	ev     transforms.Event
}

func (s *filterResponsesStream) Event(ev *transforms.Event, emit transforms.Emit) error {
	d := bytes.TrimSpace(ev.Data)
	if len(d) == 0 || d[0] != '{' {
		return emit(ev)
	}
	typ := transforms.EventType(d)
	if typ.Start < 0 {
		return emit(ev)
	}
	switch string(d[typ.Start:typ.End]) {
	case `"response.output_item.added"`:
		item := jsonspan.Lookup(d, 0, "item")
		if id, itemID, callID, ok := responsesCallID(d, item); ok {
			drop := false
			if r := s.rec.judgeCall(id); r != "" {
				drop = s.t.unexpected(s.x, callKeyOf(callID, itemID), id, r)
			}
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
		if repl, changed := s.t.filterOutput(s.x, s.rec, d, out, s.judged); changed {
			s.buf = jsonspan.Apply(d, []jsonspan.Edit{{Start: out.Start, End: out.End, Repl: repl}})
			s.ev = transforms.Event{Name: ev.Name, Data: s.buf}
			return emit(&s.ev)
		}
		return emit(ev)
	}
	if s.gone.empty() && len(s.goneID) == 0 {
		return emit(ev)
	}
	return s.shift(ev, d, emit)
}

// shift removes the events of removed calls and closes the gap they left
// in the output indexes of the others.
func (s *filterResponsesStream) shift(ev *transforms.Event, d []byte, emit transforms.Emit) error {
	item := jsonspan.Lookup(d, 0, "item")
	var itemID string
	if item.Start >= 0 && d[item.Start] == '{' {
		itemID, _ = jsonspan.StringValue(d, jsonspan.Lookup(d, item.Start, "id"))
	} else {
		itemID, _ = jsonspan.StringValue(d, jsonspan.Lookup(d, 0, "item_id"))
	}
	oi := jsonspan.Lookup(d, 0, "output_index")
	n, err := strconv.Atoi(string(d[max(oi.Start, 0):max(oi.End, 0)]))
	switch {
	case s.goneID[itemID]:
		return nil
	case err != nil:
		return emit(ev)
	case itemID == "":
		if s.gone.has(n) {
			return nil
		}
	}
	below := s.gone.below(n)
	if below == 0 {
		return emit(ev)
	}
	s.buf = jsonspan.Apply(d, []jsonspan.Edit{{Start: oi.Start, End: oi.End, Repl: strconv.AppendInt(nil, int64(n-below), 10)}})
	s.ev = transforms.Event{Name: ev.Name, Data: s.buf}
	return emit(&s.ev)
}

func (s *filterResponsesStream) End(transforms.Emit) error { return nil }

// filterChatStream is the Chat stream stage.
type filterChatStream struct {
	t   *ToolsFilter
	x   *transforms.Exchange
	rec *filterRecord
	// calls maps (choice, upstream index) to the index the client sees,
	// or -1 for a removed call.
	calls map[[2]int]int
	// next is the next client index per choice; kept counts the calls a
	// choice kept, removed those it lost.
	next    map[int]int
	removed map[int]int
	unnamed map[[2]int]bool   // calls passed before a fragment named them
	ids     map[[2]int]string // their call ids
	// legacyGone marks choices whose legacy function_call is removed;
	// legacySeen those whose call was judged.
	legacyGone, legacySeen map[int]bool
	buf                    []byte
	ev                     transforms.Event
}

func (s *filterChatStream) Event(ev *transforms.Event, emit transforms.Emit) error {
	d := ev.Data
	if !bytes.Contains(d, []byte(`"tool_calls"`)) && !bytes.Contains(d, []byte(`"function_call"`)) && !bytes.Contains(d, []byte(`\u`)) {
		// (An escape could spell the key: such chunks take the walk.)
		return emit(ev)
	}
	root := jsonspan.SkipSpace(d, 0)
	if root >= len(d) || d[root] != '{' {
		return emit(ev)
	}
	choices := jsonspan.Lookup(d, root, "choices")
	if choices.Start < 0 || d[choices.Start] != '[' {
		return emit(ev)
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
		return emit(ev)
	}
	s.buf = jsonspan.Apply(d, edits)
	s.ev = transforms.Event{Name: ev.Name, Data: s.buf}
	return emit(&s.ev)
}

// legacy judges a choice's legacy function_call on the fragment that
// names it and reports whether its fragments go.
func (s *filterChatStream) legacy(choice int, d []byte, fc jsonspan.Span) bool {
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
	id := transforms.ToolID{Type: "function", Name: n}
	if r := s.rec.judgeCall(id); r != "" && s.t.unexpected(s.x, "", id, r) {
		s.legacyGone[choice] = true
	}
	return s.legacyGone[choice]
}

// entries judges and renumbers one chunk's tool_calls fragments of a
// choice, returning the edits.
func (s *filterChatStream) entries(edits []jsonspan.Edit, d []byte, choice int, calls jsonspan.Span) ([]jsonspan.Edit, bool) {
	var kept []jsonspan.Span
	var renum [][]byte
	changed := false
	jsonspan.EachElement(d, calls.Start, func(el jsonspan.Span) bool {
		if d[el.Start] != '{' {
			kept, renum = append(kept, el), append(renum, nil)
			return true
		}
		idx := jsonspan.Lookup(d, el.Start, "index")
		n, err := strconv.Atoi(string(d[max(idx.Start, 0):max(idx.End, 0)]))
		if err != nil {
			kept, renum = append(kept, el), append(renum, nil)
			return true
		}
		key := [2]int{choice, n}
		to, known := s.calls[key]
		if known && s.unnamed[key] {
			if id, named := chatCallID(d, el); named {
				// Named after its first fragment, which the client has: it
				// can only be counted now, not taken back.
				delete(s.unnamed, key)
				if r := s.rec.judgeCall(id); r != "" {
					s.t.count(s.x, s.ids[key], id, r, false)
				}
			}
		}
		if !known {
			id, named := chatCallID(d, el)
			if !named {
				// No name yet: the call passes, numbered in its turn, and
				// is judged once a fragment names it.
				if s.next == nil {
					s.next = map[int]int{}
				}
				if s.unnamed == nil {
					s.unnamed = map[[2]int]bool{}
				}
				to = s.next[choice]
				s.next[choice]++
				s.calls[key], s.unnamed[key] = to, true
				if s.ids == nil {
					s.ids = map[[2]int]string{}
				}
				if callID, _ := jsonspan.StringValue(d, jsonspan.Lookup(d, el.Start, "id")); callID != "" {
					s.ids[key] = strconv.Itoa(choice) + ":" + callID
				}
				if to != n {
					changed = true
					kept = append(kept, el)
					renum = append(renum, jsonspan.Apply(d[:idx.End], []jsonspan.Edit{{Start: idx.Start, End: idx.End, Repl: strconv.AppendInt(nil, int64(to), 10)}})[el.Start:])
				} else {
					kept, renum = append(kept, el), append(renum, nil)
				}
				return true
			}
			to = -1
			callKey, _ := jsonspan.StringValue(d, jsonspan.Lookup(d, el.Start, "id"))
			if callKey != "" {
				callKey = strconv.Itoa(choice) + ":" + callKey
			}
			if r := s.rec.judgeCall(id); r == "" || !s.t.unexpected(s.x, callKey, id, r) {
				if s.next == nil {
					s.next = map[int]int{}
				}
				to = s.next[choice]
				s.next[choice]++
			} else {
				if s.removed == nil {
					s.removed = map[int]int{}
				}
				s.removed[choice]++
			}
			s.calls[key] = to
		}
		switch {
		case to < 0:
			changed = true
		case to != n:
			changed = true
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

func (s *filterChatStream) End(transforms.Emit) error { return nil }

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
