package transforms

import (
	"strconv"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// The bookkeeping of a Chat stream's tool calls, written once for every
// stage that follows them (the call tracker, a call judge, a protocol
// bridge): each streamed tool_calls entry is read in one walk, and placed
// at the call it belongs to.

// ChatFragment is one streamed tool_calls entry as the upstream wrote it.
// Its byte slices alias the chunk it was read from.
type ChatFragment struct {
	// Index is the entry's "index", when HasIndex.
	Index    int64
	HasIndex bool
	// ID is the entry's "id" value as written (a JSON string literal,
	// quotes included), nil when absent.
	ID []byte
	// Custom is set for a custom tool's entry ("type":"custom", a
	// "custom" object); Typed is set when the entry says its type at all.
	Custom, Typed bool
	// Name is the piece of the tool's name this entry carries, when
	// HasName.
	Name    string
	HasName bool
	// Args is the piece of the arguments (a custom call's input) this
	// entry carries, escaped as the upstream wrote it and without the
	// quotes; nil when the entry carries none.
	Args []byte
	// Call is set when the entry has a function or custom object.
	Call bool
}

// ReadChatFragment reads the tool_calls entry at d[at] in one walk. It
// returns the index just past the entry, or -1 when d is malformed there.
func ReadChatFragment(d []byte, at int) (ChatFragment, int) {
	var f ChatFragment
	call := func(k jsonspan.Span, v int) int {
		e := jsonspan.SkipValue(d, v)
		if e < 0 {
			return e
		}
		switch jsonspan.KeyName(d, k) {
		case "name":
			if n, ok := jsonspan.StringValue(d, jsonspan.Span{Start: v, End: e}); ok {
				f.Name, f.HasName = n, true
			}
		case "arguments", "input":
			if d[v] == '"' {
				f.Args = d[v+1 : e-1]
			}
		}
		return e
	}
	end := jsonspan.WalkMembers(d, at, func(k jsonspan.Span, v int) int {
		if v >= len(d) {
			return -1
		}
		switch name := jsonspan.KeyName(d, k); name {
		case "function", "custom":
			if d[v] != '{' {
				break
			}
			f.Call = true
			f.Custom = f.Custom || name == "custom"
			return jsonspan.WalkMembers(d, v, call)
		case "index":
			e := jsonspan.SkipValue(d, v)
			if e > v {
				n, err := strconv.ParseInt(string(d[v:e]), 10, 64)
				f.Index, f.HasIndex = n, err == nil
			}
			return e
		case "id":
			e := jsonspan.SkipValue(d, v)
			if e > v && d[v] == '"' {
				f.ID = d[v:e]
			}
			return e
		case "type":
			e := jsonspan.SkipValue(d, v)
			if e > v {
				f.Typed = true
				f.Custom = f.Custom || string(d[v:e]) == `"custom"`
			}
			return e
		}
		return jsonspan.SkipValue(d, v)
	})
	return f, end
}

// ChatCallKey is where a call stands in a Chat stream: its choice and its
// tool_calls index.
type ChatCallKey struct{ Choice, Index int64 }

// ChatCall is one call of a Chat stream, with what a stage keeps for it.
type ChatCall[T any] struct {
	Key ChatCallKey
	// Seq is the call's place among the stream's calls, from 0.
	Seq int
	// ID is the first id a fragment gave it, as written (quotes
	// included); nil until one did.
	ID []byte
	// Name is its name as streamed so far: some upstreams send it in
	// pieces, some repeat it in every fragment.
	Name  string
	State T
}

// ChatCalls places a Chat stream's tool_calls fragments at their calls:
// by choice and index, or, for an upstream that numbers no entry (Gemini's
// OpenAI API, some converters), by id: an entry with a new id is a new
// call, one without continues the choice's last. The zero value is ready.
type ChatCalls[T any] struct {
	byKey map[ChatCallKey]*ChatCall[T]
	order map[int64][]*ChatCall[T] // each choice's calls, in arrival order
	n     int
}

// Place finds the call of choice that fragment f belongs to, opening a
// new one (opened true) for a fragment that starts a call. The call's ID
// and Name take in what f adds.
func (t *ChatCalls[T]) Place(choice int64, f *ChatFragment) (c *ChatCall[T], opened bool) {
	if t.byKey == nil {
		t.byKey, t.order = map[ChatCallKey]*ChatCall[T]{}, map[int64][]*ChatCall[T]{}
	}
	var key ChatCallKey
	if f.HasIndex {
		key = ChatCallKey{choice, f.Index}
		c = t.byKey[key]
	} else {
		calls := t.order[choice]
		if n := len(calls); n > 0 {
			if last := calls[n-1]; f.ID == nil || last.ID == nil || string(f.ID) == string(last.ID) {
				c = last
			}
		}
		// Unnumbered calls take the indexes after the choice's last.
		key = ChatCallKey{choice, int64(len(calls))}
		for t.byKey[key] != nil && c == nil {
			key.Index++
		}
	}
	if c == nil {
		c = &ChatCall[T]{Key: key, Seq: t.n}
		t.n++
		t.byKey[key] = c
		t.order[choice] = append(t.order[choice], c)
		opened = true
	}
	if c.ID == nil && f.ID != nil {
		c.ID = append([]byte(nil), f.ID...)
	}
	switch {
	case !f.HasName || f.Name == "":
	case strings.HasPrefix(f.Name, c.Name):
		// The whole name again, or the name so far and more: some
		// upstreams repeat it in every fragment.
		c.Name = f.Name
	default:
		c.Name += f.Name // the next piece
	}
	return c, opened
}

// Get returns the call at key, or nil.
func (t *ChatCalls[T]) Get(key ChatCallKey) *ChatCall[T] { return t.byKey[key] }

// Of returns choice's calls in the order they came.
func (t *ChatCalls[T]) Of(choice int64) []*ChatCall[T] { return t.order[choice] }

// Choices returns the choices that have calls, in no set order.
func (t *ChatCalls[T]) Choices() []int64 {
	out := make([]int64, 0, len(t.order))
	for ch := range t.order {
		out = append(out, ch)
	}
	return out
}

// Len is the number of calls placed so far.
func (t *ChatCalls[T]) Len() int { return t.n }
