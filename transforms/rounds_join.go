package transforms

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// The joiners make the rounds of one request one answer for the rules on
// the client's side of the rule that takes them. A joiner stands right
// after that rule's stage and sees what it emits: before any round and
// while nothing was hidden it passes every event as it came, having only
// counted what the client saw; once a round was asked it holds the
// round's terminal event, and in the rounds after it drops the second
// lifecycle, numbers output items (calls) on from the client's last, and
// sums usage into the one terminal event.

// RewroteItems tells the engine that the running round-taking rule
// changed or removed items of the answer the upstream wrote: the terminal
// event of a Responses stream then gets its output rebuilt from the items
// the client saw, as after rounds.
func (x *Exchange) RewroteItems() { x.itemsRewritten = true }

// newJoiner returns the joiner of the rounds rule i takes, in protocol p
// (the rule's client side); nil for a protocol without one.
func newJoiner(x *Exchange, i int, p Protocol) StreamTransform {
	switch p {
	case ProtocolResponses:
		return &responsesJoin{x: x, rule: i}
	case ProtocolChat:
		return &chatJoin{x: x, rule: i, base: map[int64]int64{}, seen: map[int64]int64{}}
	}
	return nil
}

// CallsShown is what the Chat stream stage of a rule that takes rounds
// may implement when it numbers the calls it hands the client itself
// (0 to n-1 in each answer): how many calls of the current answer the
// client got so far, and which answer that is (the rounds sent before it
// began: 0 for the upstream's first answer). The joiner then takes the
// count from the stage rather than reading every chunk for its calls'
// indexes.
type CallsShown interface {
	CallsShown() (answer int, calls int64)
}

// FiltersChanged tells the engine that the running stage's Handles (see
// the stream engine's type filters) now handles a type it left alone
// before, say the input deltas of a call it has begun to hold: the stream
// asks the stages again for the types it was passing on unasked.
func (x *Exchange) FiltersChanged() { x.filterGen++ }

// asked reports whether rule i asked for a round not yet sent.
func (x *Exchange) asked(i int) bool { return x.round != nil && x.round.rule == i }

// responsesJoin joins the rounds of a Responses stream.
type responsesJoin struct {
	x     *Exchange
	rule  int
	round int // rounds sent when the current events' round began

	next  int         // the client's next output_index
	remap bool        // output indexes are being renumbered
	idx   map[int]int // this round: the upstream's output_index -> the client's
	items [][]byte    // the items the client saw done, in order

	respID []byte
	usage  []byte // usage of the earlier rounds, summed
	held   *Event // the terminal event of a round that asked for another
	// heldCounted: held's usage is in usage (the round after it began).
	heldCounted bool
}

func (j *responsesJoin) Event(ev *Event, emit Emit) error {
	d := ev.Data
	if d == nil {
		return emit(ev)
	}
	if n := len(j.x.rounds); n != j.round && j.x.answered() {
		j.newRound(n)
	}
	typ := EventType(d)
	if typ.Start < 0 {
		return emit(ev)
	}
	switch t := d[typ.Start:typ.End]; string(t) {
	case `"response.created"`, `"response.in_progress"`, `"response.queued"`:
		if j.round > 0 {
			return nil
		}
		if j.respID == nil {
			if r := jsonspan.Lookup(d, 0, "response"); r.Start >= 0 {
				if id := jsonspan.Lookup(d, r.Start, "id"); id.Start >= 0 {
					j.respID = bytes.Clone(d[id.Start:id.End])
				}
			}
		}
		return emit(ev)
	case `"response.output_item.added"`:
		o, sp := outputIndex(d)
		if sp.Start < 0 {
			return emit(ev)
		}
		if !j.remap && o == j.next {
			j.next++
			return emit(ev)
		}
		j.startRemap()
		if j.idx == nil {
			j.idx = map[int]int{}
		}
		c := j.next
		j.idx[o] = c
		j.next++
		return emit(j.reindex(ev, c, sp))
	case `"response.output_item.done"`:
		ev = j.reindexed(ev)
		if it := jsonspan.Lookup(ev.Data, 0, "item"); it.Start >= 0 {
			j.items = append(j.items, bytes.Clone(ev.Data[it.Start:it.End]))
		}
		return emit(ev)
	case `"response.completed"`, `"response.incomplete"`, `"response.failed"`:
		if j.x.asked(j.rule) {
			c := Event{Name: bytes.Clone(ev.Name), Data: bytes.Clone(d)}
			j.held, j.heldCounted = &c, false
			return nil
		}
		j.held = nil
		return j.final(ev, j.usage, emit)
	}
	return emit(j.reindexed(ev))
}

// Handles implements typeFilter: before any round and while the client's
// output indexes are the upstream's, only the lifecycle and the items'
// added and done events need the joiner, and text deltas keep the
// engine's fast way.
func (j *responsesJoin) Handles(typ []byte) bool {
	if j.remap || len(j.x.rounds) > 0 {
		return true
	}
	switch string(typ) {
	case `"response.created"`, `"response.in_progress"`, `"response.queued"`,
		`"response.output_item.added"`, `"response.output_item.done"`,
		`"response.completed"`, `"response.incomplete"`, `"response.failed"`:
		return true
	}
	return false
}

// startRemap turns renumbering on: from now the joiner handles every
// event, and the engine must stop passing events it did not.
func (j *responsesJoin) startRemap() {
	if !j.remap {
		j.remap = true
		j.x.filterGen++
	}
}

// newRound starts round n: the held terminal event only lends its usage.
func (j *responsesJoin) newRound(n int) {
	j.round, j.idx = n, map[int]int{}
	j.startRemap()
	if j.held != nil && !j.heldCounted {
		// The held event stays, to end the answer should this round be
		// cut; its usage counts now.
		j.usage = addUsage(j.usage, responseUsage(j.held.Data))
		j.heldCounted = true
	}
}

func (j *responsesJoin) End(emit Emit) error {
	if j.held != nil && !j.x.asked(j.rule) {
		// The round asked for never answered, or broke off: the held
		// terminal event ends the answer.
		ev, usage := j.held, j.usage
		if j.heldCounted {
			// Its usage is in j.usage already.
			usage = nil
			ev = &Event{Name: ev.Name, Data: withUsage(ev.Data, j.usage)}
		}
		j.held = nil
		return j.final(ev, usage, emit)
	}
	return nil
}

// withUsage returns a terminal event's data with the response's usage
// replaced by u.
func withUsage(d, u []byte) []byte {
	r := jsonspan.Lookup(d, 0, "response")
	if r.Start < 0 || len(u) == 0 {
		return d
	}
	sp := jsonspan.Lookup(d, r.Start, "usage")
	if sp.Start < 0 {
		return d
	}
	return jsonspan.Apply(d, []jsonspan.Edit{{Start: sp.Start, End: sp.End, Repl: u}})
}

// answered reports whether the round sent last answered: the events after
// a failed one are the rule's settling of the answer before it.
func (x *Exchange) answered() bool { return x.LastRoundAnswered() }

// AnswerEnded reports whether a stream's joined answer has had its end
// (its one terminal event, or [DONE]) handed on toward the client: a round
// whose copy breaks after that, the client having left at the end, still
// answered.
func (x *Exchange) AnswerEnded() bool { return x.answerEnded }

// LastRoundAnswered reports whether the round sent last, if any, did not
// fail: a stage that sees the round count change starts a new answer only
// then (after a failed round, what comes is its own settling of the
// answer before).
func (x *Exchange) LastRoundAnswered() bool {
	rd := x.lastRound()
	return rd == nil || rd.Err == nil
}

// final writes the answer's one terminal event: as it came when nothing
// was joined, else with the items the client saw and the usage of every
// round.
func (j *responsesJoin) final(ev *Event, usage []byte, emit Emit) error {
	j.x.answerEnded = true
	if j.round == 0 && !j.remap && !j.x.itemsRewritten && len(usage) == 0 {
		return emit(ev)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		return emit(ev)
	}
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(m["response"], &resp); err != nil || resp == nil {
		return emit(ev)
	}
	out := []byte{'['}
	for i, it := range j.items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	resp["output"] = append(out, ']')
	if j.respID != nil {
		resp["id"] = j.respID
	}
	if len(usage) > 0 {
		resp["usage"] = addUsage(usage, resp["usage"])
	}
	rb, err := json.Marshal(resp)
	if err != nil {
		return emit(ev)
	}
	m["response"] = rb
	d, err := json.Marshal(m)
	if err != nil {
		return emit(ev)
	}
	return emit(&Event{Name: ev.Name, Data: d})
}

// reindexed gives an event of the current round the client's
// output_index, when indexes are being renumbered.
func (j *responsesJoin) reindexed(ev *Event) *Event {
	if !j.remap {
		return ev
	}
	o, sp := outputIndex(ev.Data)
	if sp.Start < 0 {
		return ev
	}
	c, ok := j.idx[o]
	if !ok || c == o {
		return ev
	}
	return j.reindex(ev, c, sp)
}

func (j *responsesJoin) reindex(ev *Event, c int, sp jsonspan.Span) *Event {
	d := make([]byte, 0, len(ev.Data)+4)
	d = append(d, ev.Data[:sp.Start]...)
	d = strconv.AppendInt(d, int64(c), 10)
	d = append(d, ev.Data[sp.End:]...)
	return &Event{Name: ev.Name, Data: d}
}

// outputIndex reads an event's top-level output_index.
func outputIndex(d []byte) (int, jsonspan.Span) {
	sp := jsonspan.Lookup(d, 0, "output_index")
	if sp.Start < 0 {
		return 0, sp
	}
	n, err := strconv.Atoi(string(d[sp.Start:sp.End]))
	if err != nil {
		return 0, jsonspan.NoSpan()
	}
	return n, sp
}

// responseUsage is the usage of a Responses terminal event.
func responseUsage(d []byte) []byte {
	r := jsonspan.Lookup(d, 0, "response")
	if r.Start < 0 {
		return nil
	}
	u := jsonspan.Lookup(d, r.Start, "usage")
	if u.Start < 0 {
		return nil
	}
	return d[u.Start:u.End]
}

// addUsage sums two usage objects member by member: numbers add up,
// objects (token details) are summed the same way, anything else keeps
// the later value. Every provider's usage members, known or not, are
// counted over the rounds.
func addUsage(acc, u []byte) []byte {
	if len(bytes.TrimSpace(u)) == 0 || bytes.Equal(bytes.TrimSpace(u), []byte("null")) {
		return acc
	}
	if len(acc) == 0 {
		return bytes.Clone(u)
	}
	var a, b map[string]json.RawMessage
	if json.Unmarshal(acc, &a) != nil || json.Unmarshal(u, &b) != nil || a == nil {
		return bytes.Clone(u)
	}
	for k, v := range b {
		a[k] = addValue(a[k], v)
	}
	out, err := json.Marshal(a)
	if err != nil {
		return acc
	}
	return out
}

func addValue(a, b json.RawMessage) json.RawMessage {
	if a == nil {
		return b
	}
	var x, y json.Number
	if json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil {
		if i, err := x.Int64(); err == nil {
			if k, err := y.Int64(); err == nil {
				return strconv.AppendInt(nil, i+k, 10)
			}
		}
		if f, err := x.Float64(); err == nil {
			if g, err := y.Float64(); err == nil {
				return strconv.AppendFloat(nil, f+g, 'g', -1, 64)
			}
		}
	}
	if t := bytes.TrimSpace(a); len(t) > 0 && t[0] == '{' {
		return addUsage(a, b)
	}
	return b
}

// chatJoin joins the rounds of a Chat stream.
type chatJoin struct {
	x     *Exchange
	rule  int
	round int

	id   []byte
	head []byte          // the first chunk's members before "choices"
	base map[int64]int64 // per choice: the calls the client saw in earlier rounds
	seen map[int64]int64 // per choice: this round's calls (highest index + 1)

	usage     []byte // usage of the rounds that asked for another, summed
	usageSent bool
	calls     bool // the client saw a call
	roleSent  bool // the client got the role
	shown     CallsShown
	// What a round that asked for another left out, owed to the client
	// if no later round answers: its finish_reason and [DONE].
	owedFinish []byte
	owedDone   bool
}

func (j *chatJoin) Event(ev *Event, emit Emit) error {
	d := ev.Data
	if d == nil {
		return emit(ev)
	}
	if n := len(j.x.rounds); n != j.round && j.x.answered() {
		// A new round's answer; what the one before owed stays owed
		// until this one finishes.
		j.round = n
		for c, k := range j.seen {
			j.base[c] += k
		}
		clear(j.seen)
	}
	if j.shown != nil && j.round == 0 {
		// The stage's count of the first answer's calls (later answers'
		// chunks are read in rewrite).
		if answer, n := j.shown.CallsShown(); answer == 0 && n > j.seen[0] {
			j.seen[0], j.calls = n, true
		}
	}
	if bytes.Equal(bytes.TrimSpace(d), doneData) {
		if j.x.asked(j.rule) {
			j.owedDone = true
			return nil
		}
		if j.round > 0 && len(j.usage) > 0 && !j.usageSent {
			j.usageSent = true
			if err := emit(&Event{Data: j.usageChunk()}); err != nil {
				return err
			}
		}
		j.owedDone = false
		j.x.answerEnded = true
		return emit(ev)
	}
	if j.id == nil {
		if id := jsonspan.Lookup(d, 0, "id"); id.Start >= 0 {
			j.id = bytes.Clone(d[id.Start:id.End])
		}
		if ch := jsonspan.Lookup(d, 0, "choices"); ch.Start > 0 {
			j.head = bytes.Clone(d[:jsonspan.KeyStart(d, ch)])
		}
	}
	if j.round == 0 && !j.x.asked(j.rule) {
		if j.shown == nil && bytes.Contains(d, []byte(`"tool_calls"`)) {
			j.count(d)
		}
		if !j.roleSent && bytes.Contains(d, []byte(`"role"`)) {
			j.roleSent = true
		}
		return emit(ev)
	}
	out, keep := j.rewrite(d)
	if !keep {
		return nil
	}
	return emit(&Event{Data: out})
}

// count notes the highest call index of the first choice in a chunk:
// the calls a later round's are numbered after.
func (j *chatJoin) count(d []byte) {
	c := ReadChatChunk(d)
	if c.Calls.Start < 0 || d[c.Calls.Start] != '[' {
		return
	}
	jsonspan.WalkElements(d, c.Calls.Start, func(at int) int {
		if d[at] != '{' {
			return jsonspan.SkipValue(d, at)
		}
		f, end := ReadChatFragment(d, at)
		j.calls = true
		if f.HasIndex && f.Index+1 > j.seen[0] {
			j.seen[0] = f.Index + 1
		}
		return end
	})
}

// rewrite makes a chunk of a joined answer: in a round that asked for
// another, without its finish and usage; in a later round, under the first
// round's id, without the role, its calls numbered on from the client's
// last, its usage summed with the earlier rounds'. keep false drops it.
func (j *chatJoin) rewrite(d []byte) ([]byte, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(d, &m) != nil {
		return d, true
	}
	asked := j.x.asked(j.rule)
	var choices []map[string]json.RawMessage
	_ = json.Unmarshal(m["choices"], &choices)
	content := false
	for _, ch := range choices {
		var idx int64
		_ = json.Unmarshal(ch["index"], &idx)
		var delta map[string]json.RawMessage
		_ = json.Unmarshal(ch["delta"], &delta)
		if _, ok := delta["role"]; ok {
			if j.round > 0 && j.roleSent {
				delete(delta, "role")
			} else {
				j.roleSent = true
			}
		}
		if tcs, ok := delta["tool_calls"]; ok {
			var calls []map[string]json.RawMessage
			if json.Unmarshal(tcs, &calls) == nil {
				for _, tc := range calls {
					var n int64
					_ = json.Unmarshal(tc["index"], &n)
					if n+1 > j.seen[idx] {
						j.seen[idx] = n + 1
					}
					tc["index"] = strconv.AppendInt(nil, n+j.base[idx], 10)
				}
				delta["tool_calls"], _ = json.Marshal(calls)
				j.calls = true
			}
		}
		for k, v := range delta {
			if k == "role" || !bytes.Equal(bytes.TrimSpace(v), []byte("null")) && string(v) != `""` {
				content = true
			}
		}
		ch["delta"], _ = json.Marshal(delta)
		if fr, ok := ch["finish_reason"]; ok && !bytes.Equal(fr, []byte("null")) {
			switch {
			case asked:
				j.owedFinish = bytes.Clone(fr)
				ch["finish_reason"] = json.RawMessage("null")
			case j.calls && string(fr) == `"stop"`:
				// The client got calls in an earlier round.
				ch["finish_reason"] = json.RawMessage(`"tool_calls"`)
				content = true
			case !j.calls && string(fr) == `"tool_calls"`:
				// None of the calls reached the client.
				ch["finish_reason"] = json.RawMessage(`"stop"`)
				content = true
			default:
				content = true
			}
			if !asked {
				j.owedFinish = nil
			}
		}
	}
	if len(choices) > 0 {
		m["choices"], _ = json.Marshal(choices)
	}
	if u, ok := m["usage"]; ok && !bytes.Equal(bytes.TrimSpace(u), []byte("null")) {
		if asked {
			j.usage = addUsage(j.usage, u)
			delete(m, "usage")
		} else {
			m["usage"] = addUsage(j.usage, u)
			j.usageSent = true
			content = true
		}
	}
	if j.round > 0 && j.id != nil {
		m["id"] = j.id
	}
	if !content && (asked || j.round > 0 && len(choices) == 0) {
		return nil, false
	}
	if !content && j.round > 0 {
		// A later round's opening chunk: only the role, already sent.
		return nil, false
	}
	out, err := json.Marshal(m)
	if err != nil {
		return d, true
	}
	return out, true
}

// chunkHead is the first chunk's members before its choices (id, object,
// created, model…), for the chunks the joiner writes.
func (j *chatJoin) chunkHead() []byte {
	if j.head != nil {
		return append([]byte(nil), j.head...)
	}
	h := append([]byte(`{"id":`), j.id...)
	return append(h, `,"object":"chat.completion.chunk",`...)
}

func (j *chatJoin) usageChunk() []byte {
	u := append(j.chunkHead(), `"choices":[],"usage":`...)
	return append(append(u, j.usage...), '}')
}

// End gives the client what a round that never answered left out: the
// finish, the usage, [DONE].
func (j *chatJoin) End(emit Emit) error {
	if j.x.asked(j.rule) || j.owedFinish == nil && !j.owedDone {
		return nil
	}
	if j.owedFinish != nil {
		fr := j.owedFinish
		switch {
		case j.calls:
			fr = []byte(`"tool_calls"`)
		case string(fr) == `"tool_calls"`:
			// The calls of that finish never reached the client.
			fr = []byte(`"stop"`)
		}
		c := append(j.chunkHead(), `"choices":[{"index":0,"delta":{},"finish_reason":`...)
		c = append(append(c, fr...), "}]}"...)
		if err := emit(&Event{Data: c}); err != nil {
			return err
		}
	}
	if len(j.usage) > 0 && !j.usageSent {
		j.usageSent = true
		if err := emit(&Event{Data: j.usageChunk()}); err != nil {
			return err
		}
	}
	if j.owedDone {
		return emit(&Event{Data: []byte("[DONE]")})
	}
	return nil
}

// joinJSON joins the bodies a round-taking rule returned for the rounds of
// a non-streaming answer, in the rule's client-side protocol.
func joinJSON(p Protocol, parts [][]byte) []byte {
	last := parts[len(parts)-1]
	if len(parts) == 1 {
		return last
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(last, &m) != nil {
		return last
	}
	var first map[string]json.RawMessage
	_ = json.Unmarshal(parts[0], &first)
	if id, ok := first["id"]; ok {
		m["id"] = id
	}
	var usage []byte
	for _, b := range parts {
		var pm map[string]json.RawMessage
		if json.Unmarshal(b, &pm) == nil {
			usage = addUsage(usage, pm["usage"])
		}
	}
	if usage != nil {
		m["usage"] = usage
	}
	switch p {
	case ProtocolResponses:
		var all []json.RawMessage
		for _, b := range parts {
			var pm struct {
				Output []json.RawMessage `json:"output"`
			}
			_ = json.Unmarshal(b, &pm)
			all = append(all, pm.Output...)
		}
		if all == nil {
			all = []json.RawMessage{}
		}
		m["output"], _ = json.Marshal(all)
	case ProtocolChat:
		m["choices"] = joinChoices(parts)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return last
	}
	return out
}

// joinChoices joins the first choice of Chat answers: the text the client
// is to see in order, every call, the last finish ("tool_calls" once a
// call was made).
func joinChoices(parts [][]byte) json.RawMessage {
	type choice = map[string]json.RawMessage
	var final choice
	var text, thought string
	hasText, hasThought := false, false
	var calls []json.RawMessage
	for _, b := range parts {
		var pm struct {
			Choices []choice `json:"choices"`
		}
		if json.Unmarshal(b, &pm) != nil || len(pm.Choices) == 0 {
			continue
		}
		final = pm.Choices[0]
		var msg map[string]json.RawMessage
		_ = json.Unmarshal(final["message"], &msg)
		var s string
		if json.Unmarshal(msg["content"], &s) == nil && s != "" {
			text += s
			hasText = true
		}
		var r string
		if json.Unmarshal(msg["reasoning_content"], &r) == nil && r != "" {
			thought += r
			hasThought = true
		}
		var cs []json.RawMessage
		if json.Unmarshal(msg["tool_calls"], &cs) == nil {
			calls = append(calls, cs...)
		}
	}
	if final == nil {
		return json.RawMessage("[]")
	}
	var msg map[string]json.RawMessage
	_ = json.Unmarshal(final["message"], &msg)
	if msg == nil {
		msg = map[string]json.RawMessage{}
	}
	if hasText {
		msg["content"], _ = json.Marshal(text)
	}
	if hasThought {
		msg["reasoning_content"], _ = json.Marshal(thought)
	}
	if len(calls) > 0 {
		msg["tool_calls"], _ = json.Marshal(calls)
		final["finish_reason"] = json.RawMessage(`"tool_calls"`)
	} else {
		delete(msg, "tool_calls")
		if string(final["finish_reason"]) == `"tool_calls"` {
			final["finish_reason"] = json.RawMessage(`"stop"`)
		}
	}
	final["message"], _ = json.Marshal(msg)
	out, _ := json.Marshal([]choice{final})
	return out
}
