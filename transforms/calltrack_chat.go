package transforms

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Chat Completions shapes of the call tracker. Calls are keyed by choice
// index and tool_calls index. A restored call's first fragment goes out as
// {"index","id","type":<client type>,<client type>:{"name",<text field>:""}}
// and later fragments as {"index",<client type>:{<text field>:<text>}}, as
// soon as the handler reveals text. First fragments without a name are held
// until the name shows whose call it is.

type chatCalls struct {
	p     CallPolicy
	x     *Exchange
	table ChatCalls[chatState]
	// live counts the calls restored or held and not yet finished, and
	// dropped is set once one was abandoned: until then a chunk without
	// tool_calls passes without a walk.
	live    int
	dropped bool
	meta    []byte // id/created/model of the last chunk, for synthesized chunks
	buf     []byte
}

// chatState is what the tracker does with one call's fragments.
type chatState struct {
	kind chatKind
	call *chatCall // chatRestored
	held []byte    // chatHeld: the arguments so far, decoded
}

type chatKind uint8

const (
	chatUnseen   chatKind = iota // no fragment told whose call it is yet
	chatHeld                     // first fragments came without a name: held until it shows
	chatRestored                 // the policy's: restored fragment by fragment
	chatNative                   // not the policy's: its fragments pass
	chatDropped                  // abandoned or finished: its fragments are swallowed
)

type chatCall struct {
	client  ToolID
	h       CallHandler
	emitted sentText
}

func newChatCalls(x *Exchange, p CallPolicy) *chatCalls {
	return &chatCalls{p: p, x: x}
}

// textField is the member of a client entry that holds the call's text.
func textField(client ToolID) string {
	if client.Type == "custom" {
		return "input"
	}
	return "arguments"
}

func entryType(client ToolID) string {
	if client.Type == "custom" {
		return "custom"
	}
	return "function"
}

func (s *chatCalls) Event(ev *Event, emit Emit) error {
	d := bytes.TrimSpace(ev.Data)
	if bytes.Equal(d, doneData) {
		if err := s.flushAll(emit); err != nil {
			return err
		}
		return emit(ev)
	}
	if len(d) == 0 || d[0] != '{' {
		return emit(ev)
	}
	if e := jsonspan.Lookup(d, 0, "error"); e.Start >= 0 && !jsonspan.IsNull(d, e) {
		s.abandon("upstream error object")
		return emit(ev)
	}
	if s.live == 0 && !s.dropped && !bytes.Contains(d, []byte(`"tool_calls"`)) {
		return emit(ev)
	}
	return s.chunk(ev, d, emit)
}

func (s *chatCalls) End(emit Emit) error {
	if s.live > 0 {
		s.abandon("stream ended before the calls completed")
	}
	return nil
}

func (s *chatCalls) abandon(reason string) {
	s.dropped = true
	for _, choice := range s.table.Choices() {
		for _, c := range s.table.Of(choice) {
			st := &c.State
			switch st.kind {
			case chatRestored:
				abandonCall(s.x, st.call.client, st.call.h, reason)
				releaseCall(st.call.h)
			case chatHeld:
			default:
				continue
			}
			*st = chatState{kind: chatDropped}
		}
	}
	s.live = 0
}

func parseIndex(doc []byte, sp jsonspan.Span) (int64, bool) {
	if sp.Start < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(doc[sp.Start:sp.End]), 10, 64)
	return n, err == nil
}

// Members of a chunk and of its choices that the tracker reads.
var (
	chunkFields  = []string{"choices", "id", "created", "model"}
	choiceFields = []string{"index", "delta", "finish_reason"}
)

const (
	choiceIndex = iota
	choiceDelta
	choiceFinish
)

// chunk rewrites one chunk. A choice's delta is rebuilt only when one of
// its tool_calls entries belongs to a restored or held call, or when the
// choice finishes with restored calls open. A chunk whose rebuilt deltas
// all came out empty, and that carries nothing else, is dropped.
func (s *chatCalls) chunk(ev *Event, d []byte, emit Emit) error {
	var top [4]jsonspan.Span
	jsonspan.ObjectFields(d, 0, chunkFields, top[:])
	s.rememberMeta(d, top[1:])
	if top[0].Start < 0 || d[top[0].Start] != '[' {
		return emit(ev)
	}
	var edits []jsonspan.Edit
	var err error
	onlyHeld := true // every choice was rebuilt into an empty delta
	touched := false
	jsonspan.EachElement(d, top[0].Start, func(ch jsonspan.Span) bool {
		var f [3]jsonspan.Span
		jsonspan.ObjectFields(d, ch.Start, choiceFields, f[:])
		choice, _ := parseIndex(d, f[choiceIndex])
		fin := f[choiceFinish]
		finish := fin.Start >= 0 && !jsonspan.IsNull(d, fin)
		length := jsonspan.IsString(d, fin, "length")
		ds := f[choiceDelta]
		if ds.Start < 0 || d[ds.Start] != '{' {
			// No delta object (absent or null): only a finishing choice has
			// anything to add, the rest of its restored calls.
			onlyHeld = false
			if !finish {
				return true
			}
			rest, any := s.finishChoice(choice, length)
			touched = touched || any
			if len(rest) == 0 {
				return true
			}
			obj := appendToolCalls([]byte(`{`), rest)
			obj = append(obj, '}')
			if ds.Start >= 0 {
				edits = append(edits, jsonspan.Edit{Start: ds.Start, End: ds.End, Repl: obj})
			} else {
				member := append([]byte(`"delta":`), obj...)
				edits = append(edits, jsonspan.Edit{Start: ch.Start + 1, End: ch.Start + 1, Repl: append(member, ',')})
			}
			return true
		}
		var delta []byte
		var changed bool
		delta, changed, err = s.delta(d, ds, choice, finish, length)
		if err != nil {
			return false
		}
		if !changed {
			onlyHeld = false
			return true
		}
		touched = true
		if finish || !bytes.Equal(delta, []byte("{}")) {
			onlyHeld = false
		}
		edits = append(edits, jsonspan.Edit{Start: ds.Start, End: ds.End, Repl: delta})
		return true
	})
	if err != nil {
		return err
	}
	if !touched {
		return emit(ev)
	}
	usage := jsonspan.Lookup(d, 0, "usage")
	if onlyHeld && (usage.Start < 0 || jsonspan.IsNull(d, usage)) {
		return nil // the chunk only carried fragments we hold back
	}
	return emit(&Event{Name: ev.Name, Data: jsonspan.Apply(d, edits)})
}

func (s *chatCalls) rememberMeta(d []byte, f []jsonspan.Span) {
	w := s.meta[:0]
	for k, name := range chunkFields[1:] {
		if f[k].Start < 0 {
			continue
		}
		w = append(w, ',', '"')
		w = append(w, name...)
		w = append(w, '"', ':')
		w = append(w, d[f[k].Start:f[k].End]...)
	}
	s.meta = w
}

// delta rebuilds a choice's delta object. finish says the choice ends in
// this chunk: restored calls of the choice are then completed, unless the
// upstream stopped for length, which leaves a call cut short.
func (s *chatCalls) delta(d []byte, ds jsonspan.Span, choice int64, finish, length bool) ([]byte, bool, error) {
	tc := jsonspan.Lookup(d, ds.Start, "tool_calls")
	var entries [][]byte
	changed := false
	if tc.Start >= 0 && d[tc.Start] == '[' {
		var err error
		jsonspan.EachElement(d, tc.Start, func(el jsonspan.Span) bool {
			var out []byte
			var mine bool
			out, mine, err = s.entry(d, el, choice)
			if err != nil {
				return false
			}
			if mine {
				changed = true
				if out != nil {
					entries = append(entries, out)
				}
			} else {
				entries = append(entries, d[el.Start:el.End])
			}
			return true
		})
		if err != nil {
			return nil, false, err
		}
	}
	if finish {
		rest, any := s.finishChoice(choice, length)
		if any {
			changed = true
			entries = append(entries, rest...)
		}
	}
	if !changed {
		return nil, false, nil
	}
	w := jsonspan.NewObj(nil)
	jsonspan.EachMember(d, ds.Start, func(m jsonspan.Member) bool {
		if !m.KeyIs(d, "tool_calls") {
			w.Raw(d, m)
		}
		return true
	})
	if len(entries) > 0 {
		w.Sep()
		w.B = appendToolCalls(w.B, entries)
	}
	return w.Close(), true, nil
}

// appendToolCalls appends a "tool_calls" member holding entries.
func appendToolCalls(b []byte, entries [][]byte) []byte {
	b = append(b, `"tool_calls":[`...)
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
}

// entry handles one tool_calls fragment. mine reports that the fragment
// belongs to a restored or held call; out is then its replacement (nil:
// drop it for now).
func (s *chatCalls) entry(d []byte, el jsonspan.Span, choice int64) (out []byte, mine bool, err error) {
	if d[el.Start] != '{' {
		return nil, false, nil
	}
	f, _ := ReadChatFragment(d, el.Start)
	if !f.HasIndex {
		return nil, false, nil
	}
	c, _ := s.table.Place(choice, &f)
	st := &c.State
	var frag []byte
	if f.Args != nil && !f.Custom {
		s.buf = jsonspan.Unescape(s.buf[:0], f.Args)
		frag = s.buf
	}
	switch st.kind {
	case chatDropped:
		return nil, true, nil
	case chatNative:
		return nil, false, nil
	case chatRestored:
		return s.fragment(c, frag, nil, false)
	case chatHeld:
		st.held = append(st.held, frag...)
		if err := s.checkHeld(st.held); err != nil {
			return nil, true, err
		}
		if c.Name == "" {
			return nil, true, nil
		}
		return s.open(c, c.ID, st.held, true)
	}
	if f.Custom {
		st.kind = chatNative // the upstream's own custom call
		return nil, false, nil
	}
	if c.Name == "" {
		if !f.Call && !f.Typed || c.ID == nil {
			return nil, false, nil // not a function fragment, or nothing to hold by
		}
		// A first fragment without a name: hold it until the name shows
		// which tool it is.
		st.kind, st.held = chatHeld, append([]byte(nil), frag...)
		s.live++
		return nil, true, s.checkHeld(st.held)
	}
	return s.open(c, f.ID, frag, false)
}

// checkHeld applies max_call_buffer to fragments held without a name.
func (s *chatCalls) checkHeld(held []byte) error {
	limit := s.x.Limits.MaxCallBuffer
	if limit <= 0 || len(held) <= limit {
		return nil
	}
	s.abandon("held arguments exceed max_call_buffer")
	return &StreamAbort{Code: "max_call_buffer_exceeded",
		Message: "the arguments of an unnamed tool call exceed the gateway's max_call_buffer of " + strconv.Itoa(limit) + " bytes"}
}

// open starts a restored call once its name is known. A call that is not
// the policy's passes: untouched when it came named, or, when fragments
// were held for it, as one ordinary fragment merging what was held.
func (s *chatCalls) open(c *ChatCall[chatState], rawID, args []byte, held bool) ([]byte, bool, error) {
	st := &c.State
	client, h, ok := s.p.OpenCall(s.x, ToolID{Type: "function", Name: c.Name})
	if !ok {
		if !held {
			st.kind = chatNative
			return nil, false, nil
		}
		s.live--
		out := heldFragment(c.Key, c.ID, args, c.Name)
		*st = chatState{kind: chatNative}
		return out, true, nil
	}
	if !held {
		s.live++
	}
	*st = chatState{kind: chatRestored, call: &chatCall{client: client, h: h}}
	s.x.Decide(client.String(), "restore_call", "chat stream header of a call to restore")
	return s.fragment(c, args, rawID, true)
}

// fragment decodes argument text; first renders the call's first entry,
// otherwise a text fragment (nil when nothing is decodable yet).
func (s *chatCalls) fragment(cc *ChatCall[chatState], frag, rawID []byte, first bool) ([]byte, bool, error) {
	c, key := cc.State.call, cc.Key
	var text []byte
	if len(frag) > 0 {
		var err error
		if text, err = c.h.Delta(frag); err != nil {
			s.abandon("call arguments exceed max_call_buffer")
			return nil, true, overLimit(s.x, c.client)
		}
		c.emitted.add(text)
	}
	if first {
		b := entryHead(key, rawID)
		b = append(b, `,"type":"`...)
		b = append(b, entryType(c.client)...)
		b = append(b, `","`...)
		b = append(b, entryType(c.client)...)
		b = append(b, `":{"name":`...)
		b = jsonspan.AppendStringStr(b, c.client.Name)
		b = append(b, `,"`...)
		b = append(b, textField(c.client)...)
		b = append(b, `":`...)
		b = jsonspan.AppendString(b, text)
		return append(b, "}}"...), true, nil
	}
	if len(text) == 0 {
		return nil, true, nil
	}
	return textFragment(key, c.client, text), true, nil
}

// entryHead starts a tool_calls entry: its index, and its id when known.
func entryHead(key ChatCallKey, rawID []byte) []byte {
	b := []byte(`{"index":`)
	b = strconv.AppendInt(b, key.Index, 10)
	if len(rawID) > 0 {
		b = append(b, `,"id":`...)
		b = append(b, rawID...)
	}
	return b
}

func textFragment(key ChatCallKey, client ToolID, text []byte) []byte {
	b := entryHead(key, nil)
	b = append(b, `,"`...)
	b = append(b, entryType(client)...)
	b = append(b, `":{"`...)
	b = append(b, textField(client)...)
	b = append(b, `":`...)
	b = jsonspan.AppendString(b, text)
	return append(b, "}}"...)
}

// heldFragment hands out fragments held for a call that turned out not to
// be the policy's, merged into one ordinary fragment.
func heldFragment(key ChatCallKey, rawID, args []byte, name string) []byte {
	b := entryHead(key, rawID)
	b = append(b, `,"type":"function","function":{`...)
	if name != "" {
		b = append(b, `"name":`...)
		b = jsonspan.AppendStringStr(b, name)
		b = append(b, ',')
	}
	b = append(b, `"arguments":`...)
	b = jsonspan.AppendString(b, args)
	return append(b, "}}"...)
}

// finishChoice completes the restored calls of a choice: the part of the
// final text the client has not seen goes out as one more fragment. A
// choice cut short by length keeps only what was already sent.
func (s *chatCalls) finishChoice(choice int64, length bool) ([][]byte, bool) {
	var out [][]byte
	any := false
	var held []*ChatCall[chatState]
	for _, cc := range s.table.Of(choice) {
		st := &cc.State
		switch st.kind {
		case chatHeld:
			held = append(held, cc)
			continue
		case chatRestored:
		default:
			continue
		}
		any = true
		s.live--
		c := st.call
		*st = chatState{kind: chatDropped}
		if length {
			abandonCall(s.x, c.client, c.h, "finish_reason length cut the call short")
			releaseCall(c.h)
			continue
		}
		s.x.CallBuffered(len(c.h.Raw()))
		countRestored(s.x, c.h)
		final := c.h.Finish(c.h.Raw())
		if rest, ok := c.emitted.rest(final); ok && len(rest) > 0 {
			out = append(out, textFragment(cc.Key, c.client, rest))
		} else if !ok {
			s.x.Decide(c.client.String(), "input_mismatch", "final arguments differ from the streamed ones")
		}
		releaseCall(c.h)
	}
	// Held fragments that never got a name are handed out as they came,
	// merged, in index order: they were never shown to be the policy's.
	slices.SortFunc(held, func(a, b *ChatCall[chatState]) int { return cmp.Compare(a.Key.Index, b.Key.Index) })
	for _, cc := range held {
		out = append(out, heldFragment(cc.Key, cc.ID, cc.State.held, ""))
		cc.State = chatState{kind: chatNative}
		s.live--
		any = true
	}
	return out, any
}

// flushAll completes whatever is still open when [DONE] arrives without a
// finish_reason, in a chunk of its own.
func (s *chatCalls) flushAll(emit Emit) error {
	if s.live == 0 {
		return nil
	}
	choices := s.table.Choices()
	slices.Sort(choices)
	for _, choice := range choices {
		rest, _ := s.finishChoice(choice, false)
		if len(rest) == 0 {
			continue
		}
		b := []byte(`{"object":"chat.completion.chunk"`)
		b = append(b, s.meta...)
		b = append(b, `,"choices":[{"index":`...)
		b = strconv.AppendInt(b, choice, 10)
		b = append(b, `,"delta":{`...)
		b = appendToolCalls(b, rest)
		b = append(b, `},"finish_reason":null}]}`...)
		if err := emit(&Event{Data: b}); err != nil {
			return err
		}
	}
	return nil
}

// restoreChatMessage restores the policy's calls in a complete Chat
// response: choices[].message.tool_calls[].
func restoreChatMessage(x *Exchange, p CallPolicy, body []byte) []jsonspan.Edit {
	choices := jsonspan.Lookup(body, jsonspan.SkipSpace(body, 0), "choices")
	if choices.Start < 0 || body[choices.Start] != '[' {
		return nil
	}
	var edits []jsonspan.Edit
	jsonspan.EachElement(body, choices.Start, func(ch jsonspan.Span) bool {
		msg := jsonspan.Lookup(body, ch.Start, "message")
		if msg.Start < 0 || body[msg.Start] != '{' {
			return true
		}
		calls := jsonspan.Lookup(body, msg.Start, "tool_calls")
		if calls.Start < 0 || body[calls.Start] != '[' {
			return true
		}
		jsonspan.EachElement(body, calls.Start, func(el jsonspan.Span) bool {
			if body[el.Start] != '{' || !jsonspan.IsString(body, jsonspan.Lookup(body, el.Start, "type"), "function") {
				return true
			}
			fn := jsonspan.Lookup(body, el.Start, "function")
			if fn.Start < 0 || body[fn.Start] != '{' {
				return true
			}
			var f [2]jsonspan.Span
			jsonspan.ObjectFields(body, fn.Start, []string{"name", "arguments"}, f[:])
			name, _ := jsonspan.StringValue(body, f[0])
			client, h, ok := p.OpenCall(x, ToolID{Type: "function", Name: name})
			if !ok {
				return true
			}
			var args []byte
			if f[1].Start >= 0 && body[f[1].Start] == '"' {
				args = jsonspan.Unescape(nil, body[f[1].Start+1:f[1].End-1])
			}
			edits = append(edits, jsonspan.Edit{Start: el.Start, End: el.End, Repl: chatEntry(nil, body, el, client, h.Finish(args))})
			countRestored(x, h)
			releaseCall(h)
			x.Decide(client.String(), "restore_call", "chat function call to restore")
			return true
		})
		return true
	})
	return edits
}

// chatEntry rewrites a function tool_calls entry as the client's call,
// keeping the entry's other members (id, index, extensions).
func chatEntry(dst, doc []byte, el jsonspan.Span, client ToolID, text []byte) []byte {
	w := jsonspan.NewObj(dst)
	typ := entryType(client)
	jsonspan.Retype(&w, doc, el, typ, func(w *jsonspan.ObjWriter, m jsonspan.Member) bool {
		if !m.KeyIs(doc, "function") {
			return false
		}
		w.Key(typ)
		w.B = append(w.B, `{"name":`...)
		w.B = jsonspan.AppendStringStr(w.B, client.Name)
		w.B = append(w.B, `,"`...)
		w.B = append(w.B, textField(client)...)
		w.B = append(w.B, `":`...)
		w.B = jsonspan.AppendString(w.B, text)
		w.B = append(w.B, '}')
		return true
	})
	return w.Close()
}
