package tooldefer

import (
	"bytes"
	"sort"
	"strconv"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// NewStream returns the stage that hides a stream's searches.
func (d *Defer) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	rec := d.record(x)
	if !rec.active {
		return nil
	}
	if x.Protocol() == transforms.ProtocolChat {
		return &chatStage{d: d, x: x, rec: rec, round: -1}
	}
	return &responsesStage{d: d, x: x, rec: rec, round: -1}
}

// responsesStage drops the events of the search calls of a Responses
// stream; every other event goes on as it came. At the answer's terminal
// event, searches that were the answer's only calls are answered in a
// round.
type responsesStage struct {
	d     *Defer
	x     *transforms.Exchange
	rec   *record
	round int

	hidden   map[int]bool // the searches' output indexes
	searches []search
	items    [][]byte // the answer's other items, done, for the round's history
	others   int      // calls other than searches
}

func (s *responsesStage) Event(ev *transforms.Event, emit transforms.Emit) error {
	if n := len(s.x.Rounds()); n != s.round {
		s.round, s.hidden, s.searches, s.items, s.others = n, nil, nil, nil, 0
	}
	d := ev.Data
	if d == nil {
		return emit(ev)
	}
	typ := transforms.EventType(d)
	if typ.Start < 0 {
		return emit(ev)
	}
	switch t := string(d[typ.Start:typ.End]); t {
	case `"response.output_item.added"`, `"response.output_item.done"`:
		o, ok := outputIndex(d)
		it := jsonspan.Lookup(d, 0, "item")
		if !ok || it.Start < 0 || d[it.Start] != '{' {
			return emit(ev)
		}
		if isSearchItem(d, it, s.rec.searchName) {
			if s.hidden == nil {
				s.hidden = map[int]bool{}
			}
			s.hidden[o] = true
			s.x.RewroteItems()
			if t == `"response.output_item.done"` {
				item := d[it.Start:it.End]
				id, _ := jsonspan.StringValue(item, jsonspan.Lookup(item, 0, "call_id"))
				args, _ := jsonspan.StringValue(item, jsonspan.Lookup(item, 0, "arguments"))
				s.searches = append(s.searches, search{callID: id, args: []byte(args)})
			}
			return nil
		}
		if t == `"response.output_item.added"` {
			if it, _ := jsonspan.StringValue(d, jsonspan.Lookup(d, it.Start, "type")); strings.HasSuffix(it, "_call") {
				s.others++
			}
		} else {
			s.items = append(s.items, bytes.Clone(d[it.Start:it.End]))
		}
		return emit(ev)
	case `"response.completed"`:
		if len(s.searches) > 0 && s.others == 0 {
			s.d.takeRound(s.x, s.rec, s.items, nil, nil, s.searches)
		}
		return emit(ev)
	}
	if len(s.hidden) > 0 {
		if o, ok := outputIndex(d); ok && s.hidden[o] {
			return nil
		}
	}
	return emit(ev)
}

func (s *responsesStage) End(transforms.Emit) error { return nil }

func outputIndex(d []byte) (int, bool) {
	sp := jsonspan.Lookup(d, 0, "output_index")
	if sp.Start < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(string(d[sp.Start:sp.End]))
	return n, err == nil
}

// chatStage removes the search calls' entries from a Chat stream's first
// choice, numbering the other calls on without them; at the finish,
// searches that were the answer's only calls are answered in a round.
type chatStage struct {
	d     *Defer
	x     *transforms.Exchange
	rec   *record
	round int

	hidden   map[int64]int // a search's index -> its place in searches
	gone     []int64       // the searches' indexes, sorted
	others   map[int64]bool
	searches []search
	text     []byte
	thought  []byte
	decided  bool
	asked    bool
}

var doneData = []byte("[DONE]")

func (s *chatStage) Event(ev *transforms.Event, emit transforms.Emit) error {
	if n := len(s.x.Rounds()); n != s.round {
		s.round, s.hidden, s.gone, s.others, s.searches = n, nil, nil, nil, nil
		s.text, s.thought, s.decided, s.asked = nil, nil, false, false
	}
	d := ev.Data
	if d == nil {
		return emit(ev)
	}
	if bytes.Equal(bytes.TrimSpace(d), doneData) {
		s.decide()
		return emit(ev)
	}
	c := transforms.ReadChatChunk(d)
	if c.Others || !c.First {
		return emit(ev)
	}
	if c.Content.Start >= 0 && d[c.Content.Start] == '"' {
		s.text = append(s.text, d[c.Content.Start+1:c.Content.End-1]...)
	}
	if c.Reasoning.Start >= 0 && d[c.Reasoning.Start] == '"' {
		s.thought = append(s.thought, d[c.Reasoning.Start+1:c.Reasoning.End-1]...)
	}
	out := d
	if c.Calls.Start >= 0 && d[c.Calls.Start] == '[' {
		out = s.calls(d, c)
		if out == nil {
			out = jsonspan.Apply(d, []jsonspan.Edit{jsonspan.RemoveMember(d, c.Calls)})
			if c.Finish.Start < 0 && c.Usage.Start < 0 && emptyDelta(out) {
				return nil
			}
		}
	}
	if c.Finish.Start >= 0 {
		s.decide()
		if !s.asked && len(s.searches) > 0 && len(s.others) == 0 {
			// Only searches, and no round for them: a plain answer.
			if f := transforms.ReadChatChunk(out).Finish; jsonspan.IsString(out, f, "tool_calls") {
				out = jsonspan.Apply(out, []jsonspan.Edit{{Start: f.Start, End: f.End, Repl: []byte(`"stop"`)}})
			}
		}
	}
	if jsonspan.SameSlice(out, d) {
		return emit(ev)
	}
	return emit(&transforms.Event{Data: out})
}

// emptyDelta reports whether a chunk's first choice says nothing once its
// search entries are out: no role, no text, no other member of note.
func emptyDelta(d []byte) bool {
	empty := true
	choices := jsonspan.Lookup(d, 0, "choices")
	if choices.Start < 0 || d[choices.Start] != '[' {
		return true
	}
	jsonspan.EachElement(d, choices.Start, func(el jsonspan.Span) bool {
		delta := jsonspan.Lookup(d, el.Start, "delta")
		if delta.Start < 0 || d[delta.Start] != '{' {
			return false
		}
		jsonspan.EachMember(d, delta.Start, func(m jsonspan.Member) bool {
			v := d[m.Value.Start:m.Value.End]
			if !jsonspan.IsNull(d, m.Value) && string(v) != `""` {
				empty = false
			}
			return empty
		})
		return false
	})
	return empty
}

// calls returns the chunk with its search entries removed and the other
// calls numbered on without them; d itself when nothing changes, nil when
// no entry is left.
func (s *chatStage) calls(d []byte, c transforms.ChatChunk) []byte {
	var keep [][]byte
	changed := false
	jsonspan.EachElement(d, c.Calls.Start, func(el jsonspan.Span) bool {
		if d[el.Start] != '{' {
			keep = append(keep, d[el.Start:el.End])
			return true
		}
		f, _ := transforms.ReadChatFragment(d, el.Start)
		k := f.Index
		if at, ok := s.hidden[k]; ok {
			s.searches[at].args = append(s.searches[at].args, jsonspan.Unescape(nil, f.Args)...)
			changed = true
			return true
		}
		if !s.others[k] && f.HasName && f.Name == s.rec.searchName {
			if s.hidden == nil {
				s.hidden = map[int64]int{}
			}
			id, _ := jsonspan.StringValue(f.ID, jsonspan.Span{Start: 0, End: len(f.ID)})
			s.hidden[k] = len(s.searches)
			s.searches = append(s.searches, search{callID: id, args: jsonspan.Unescape(nil, f.Args)})
			s.gone = append(s.gone, k)
			sort.Slice(s.gone, func(a, b int) bool { return s.gone[a] < s.gone[b] })
			changed = true
			return true
		}
		if s.others == nil {
			s.others = map[int64]bool{}
		}
		s.others[k] = true
		entry := d[el.Start:el.End]
		if below := sort.Search(len(s.gone), func(i int) bool { return s.gone[i] >= k }); below > 0 && f.HasIndex {
			if idx := jsonspan.Lookup(entry, 0, "index"); idx.Start >= 0 {
				entry = jsonspan.Apply(entry, []jsonspan.Edit{{Start: idx.Start, End: idx.End, Repl: strconv.AppendInt(nil, k-int64(below), 10)}})
				changed = true
			}
		}
		keep = append(keep, entry)
		return true
	})
	if !changed {
		return d
	}
	if len(keep) == 0 {
		return nil
	}
	arr := []byte{'['}
	for i, e := range keep {
		if i > 0 {
			arr = append(arr, ',')
		}
		arr = append(arr, e...)
	}
	return jsonspan.Apply(d, []jsonspan.Edit{{Start: c.Calls.Start, End: c.Calls.End, Repl: append(arr, ']')}})
}

// decide answers the answer's searches with a round, once, when they were
// its only calls.
func (s *chatStage) decide() {
	if s.decided {
		return
	}
	s.decided = true
	if len(s.searches) > 0 && len(s.others) == 0 {
		s.asked = s.d.takeRound(s.x, s.rec, nil, s.text, s.thought, s.searches)
	}
}

func (s *chatStage) End(transforms.Emit) error { return nil }
