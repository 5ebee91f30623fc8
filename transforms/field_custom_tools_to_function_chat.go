package transforms

import (
	"bytes"
	"cmp"
	"slices"
	"strconv"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/patchfmt"
	"github.com/llmtransform/caddy-llm-transform/streambuf"
)

// Chat Completions shapes of field_custom_tools_to_function. Chat nests the
// tool under a key named after its type ({"type":"custom","custom":{…}}),
// correlates calls by their id, and streams calls as indexed fragments of
// delta.tool_calls. The request record and the argument decoding are the
// ones the Responses side uses.

// chatDescriptor rewrites {"type":"custom","custom":{name,description,format}}
// into {"type":"function","function":{name,description,parameters,strict}}.
func (p *requestPlan) chatDescriptor(el jsonspan.Span, name string) []byte {
	doc := p.doc
	w := jsonspan.NewObj(nil)
	jsonspan.Retype(&w, doc, el, "function", func(w *jsonspan.ObjWriter, m jsonspan.Member) bool {
		switch {
		case m.KeyIs(doc, "custom") && doc[m.Value.Start] == '{':
			w.Key("function")
			w.B = p.functionBody(w.B, m.Value, name, false)
		case m.KeyIs(doc, "function"):
			// a stray function object would clash with the one we write
		default:
			return false
		}
		return true
	})
	return w.Close()
}

var (
	messageFields  = []string{"role", "tool_calls"}
	toolCallFields = []string{"type", "id", "custom", "function"}
)

// walkMessages visits Chat history: custom entries of assistant tool_calls
// become function calls with their input wrapped once. The id is kept,
// since Chat correlates tool results through it; tool messages need no
// change.
func (p *requestPlan) walkMessages(start int) int {
	doc := p.doc
	if start >= len(doc) || doc[start] != '[' {
		return jsonspan.SkipValue(doc, start)
	}
	var f [2]jsonspan.Span
	i := -1
	return jsonspan.EachObject(doc, start, messageFields, f[:], func(_ jsonspan.Span, f []jsonspan.Span) bool {
		i++
		if f[1].Start < 0 || doc[f[1].Start] != '[' {
			return true
		}
		var g [4]jsonspan.Span
		j := -1
		return jsonspan.EachObject(doc, f[1].Start, toolCallFields, g[:], func(el jsonspan.Span, g []jsonspan.Span) bool {
			j++
			where := func() string { return "messages[" + strconv.Itoa(i) + "].tool_calls[" + strconv.Itoa(j) + "]" }
			switch {
			case jsonspan.IsString(doc, g[0], "function") && g[3].Start >= 0 && doc[g[3].Start] == '{':
				name, _ := jsonspan.StringValue(doc, jsonspan.Lookup(doc, g[3].Start, "name"))
				id := ident{"", name}
				p.rec.addKnown(id)
				if _, seen := p.native[id]; !seen {
					p.native[id] = where()
				}
			case jsonspan.IsString(doc, g[0], "custom") && g[2].Start >= 0 && doc[g[2].Start] == '{':
				name, _ := jsonspan.StringValue(doc, jsonspan.Lookup(doc, g[2].Start, "name"))
				id := ident{"", name}
				p.rec.addKnown(id)
				if !p.t.selects(name) {
					return true
				}
				if !p.isPicked(id) {
					p.pick(id, where())
				}
				if callID, ok := jsonspan.StringValue(doc, g[1]); ok {
					p.rec.calls[callID] = id
				}
				p.edits = append(p.edits, jsonspan.Edit{Start: el.Start, End: el.End, Repl: p.chatHistoryCall(el)})
			}
			return true
		}) >= 0
	})
}

func (p *requestPlan) chatHistoryCall(el jsonspan.Span) []byte {
	doc := p.doc
	w := jsonspan.NewObj(make([]byte, 0, el.End-el.Start+64))
	jsonspan.Retype(&w, doc, el, "function", func(w *jsonspan.ObjWriter, m jsonspan.Member) bool {
		switch {
		case m.KeyIs(doc, "custom") && doc[m.Value.Start] == '{':
			w.Key("function")
			fw := jsonspan.NewObj(w.B)
			input := jsonspan.NoSpan()
			jsonspan.EachMember(doc, m.Value.Start, func(c jsonspan.Member) bool {
				if c.KeyIs(doc, "input") {
					input = c.Value
				} else {
					fw.Raw(doc, c)
				}
				return true
			})
			wrapInput(&fw, doc, input)
			w.B = fw.Close()
		default:
			return false
		}
		return true
	})
	return w.Close()
}

// chatResponse restores converted calls in choices[].message.tool_calls[].
func (t *customTools) chatResponse(x *Exchange, body []byte) ([]byte, error) {
	r := record(x)
	if !r.active() || !jsonspan.Valid(body) {
		return body, nil
	}
	var edits []jsonspan.Edit
	choices := jsonspan.Lookup(body, jsonspan.SkipSpace(body, 0), "choices")
	if choices.Start < 0 || body[choices.Start] != '[' {
		return body, nil
	}
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
			id, ok := t.resolve(r, "", name)
			if !ok {
				return true
			}
			var args []byte
			if f[1].Start >= 0 && body[f[1].Start] == '"' {
				args = jsonspan.Unescape(nil, body[f[1].Start+1:f[1].End-1])
			}
			edits = append(edits, jsonspan.Edit{Start: el.Start, End: el.End, Repl: chatCustomEntry(nil, body, el, id.name, finalInput(id, args))})
			x.Restored++
			x.Decide(id.String(), "restore_call", "chat function call of a converted custom tool")
			return true
		})
		return true
	})
	return x.applyEdits(body, edits), nil
}

// chatCustomEntry rewrites a function tool_calls entry as a custom one,
// keeping the entry's other members (id, index, extensions).
func chatCustomEntry(dst, doc []byte, el jsonspan.Span, name string, input []byte) []byte {
	w := jsonspan.NewObj(dst)
	jsonspan.Retype(&w, doc, el, "custom", func(w *jsonspan.ObjWriter, m jsonspan.Member) bool {
		if !m.KeyIs(doc, "function") {
			return false
		}
		w.Key("custom")
		w.B = append(w.B, `{"name":`...)
		w.B = jsonspan.AppendStringStr(w.B, name)
		w.B = append(w.B, `,"input":`...)
		w.B = jsonspan.AppendString(w.B, input)
		w.B = append(w.B, '}')
		return true
	})
	return w.Close()
}

// --- Chat SSE ---------------------------------------------------------------

// chatStream restores converted calls in a Chat Completions stream. Calls
// are keyed by choice index and tool_calls index. The first fragment of a
// converted call goes out as {"index","id","type":"custom","custom":{"name",
// "input":""}}; later fragments as {"index","custom":{"input":<decoded>}},
// as soon as the argument JSON reveals the input.
type chatStream struct {
	t          *customTools
	x          *Exchange
	rec        *customRecord
	couldMatch bool // an unnamed first fragment might be one of ours
	calls      map[chatKey]*chatCall
	pending    map[chatKey]*chatPending
	order      []chatKey        // open calls in arrival order, for deterministic output
	meta       []byte           // id/created/model of the last chunk, for synthesized chunks
	dropped    map[chatKey]bool // calls abandoned mid-way; their fragments are swallowed
	native     map[chatKey]bool // calls known to be native; their fragments pass
	buf        []byte
}

type chatKey struct{ choice, index int64 }

type chatCall struct {
	id      ident
	dec     streambuf.ArgsDecoder
	norm    *patchfmt.Normalizer
	emitted []byte
}

// chatPending is a first fragment that arrived without a name.
type chatPending struct {
	id   []byte // raw id value
	args []byte
}

func (t *customTools) newChatStream(x *Exchange, r *customRecord) StreamTransform {
	s := &chatStream{t: t, x: x, rec: r, calls: map[chatKey]*chatCall{}, pending: map[chatKey]*chatPending{}}
	for id := range r.converted {
		if t.selects(id.name) {
			s.couldMatch = true
		}
	}
	return s
}

var doneData = []byte("[DONE]")

func (s *chatStream) markNative(key chatKey) {
	if s.native == nil {
		s.native = map[chatKey]bool{}
	}
	s.native[key] = true
}

func (s *chatStream) Event(ev *Event, emit Emit) error {
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
	if len(s.calls) == 0 && len(s.pending) == 0 && len(s.dropped) == 0 && !bytes.Contains(d, []byte(`"tool_calls"`)) {
		return emit(ev)
	}
	return s.chunk(ev, d, emit)
}

func (s *chatStream) End(emit Emit) error {
	if len(s.calls) > 0 || len(s.pending) > 0 {
		s.abandon("stream ended before the calls completed")
	}
	return nil
}

func (s *chatStream) abandon(reason string) {
	if s.dropped == nil {
		s.dropped = map[chatKey]bool{}
	}
	for k, c := range s.calls {
		s.x.Decide(c.id.String(), "drop_partial_call", reason)
		s.x.CallBuffered(len(c.dec.Raw()))
		delete(s.calls, k)
		s.dropped[k] = true
	}
	for k := range s.pending {
		delete(s.pending, k)
		s.dropped[k] = true
	}
	s.order = s.order[:0]
}

func parseIndex(doc []byte, sp jsonspan.Span) (int64, bool) {
	if sp.Start < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(doc[sp.Start:sp.End]), 10, 64)
	return n, err == nil
}

// chunk rewrites one chunk. Each choice's delta is rebuilt only when one of
// its tool_calls entries belongs to a converted or held call, or when the
// choice finishes with converted calls open.
func (s *chatStream) chunk(ev *Event, d []byte, emit Emit) error {
	var top [4]jsonspan.Span
	jsonspan.ObjectFields(d, 0, []string{"choices", "id", "created", "model"}, top[:])
	s.rememberMeta(d, top[1:])
	if top[0].Start < 0 || d[top[0].Start] != '[' {
		return emit(ev)
	}
	var edits []jsonspan.Edit
	var err error
	empty := true // every rebuilt delta came out empty and nothing finished
	touched := false
	jsonspan.EachElement(d, top[0].Start, func(ch jsonspan.Span) bool {
		var f [3]jsonspan.Span
		jsonspan.ObjectFields(d, ch.Start, []string{"index", "delta", "finish_reason"}, f[:])
		choice, _ := parseIndex(d, f[0])
		finish := f[2].Start >= 0 && !jsonspan.IsNull(d, f[2])
		length := jsonspan.IsString(d, f[2], "length")
		if f[1].Start < 0 || d[f[1].Start] != '{' {
			// No delta object (absent or null): only a finishing choice has
			// anything to add, the rest of its converted calls.
			empty = false
			if !finish {
				return true
			}
			rest, any := s.finishChoice(choice, length)
			if !any || len(rest) == 0 {
				touched = touched || any
				return true
			}
			touched = true
			obj := appendToolCalls([]byte(`{`), rest)
			obj = append(obj, '}')
			if f[1].Start >= 0 {
				edits = append(edits, jsonspan.Edit{Start: f[1].Start, End: f[1].End, Repl: obj})
			} else {
				member := append([]byte(`"delta":`), obj...)
				edits = append(edits, jsonspan.Edit{Start: ch.Start + 1, End: ch.Start + 1, Repl: append(member, ',')})
			}
			return true
		}
		var delta []byte
		var changed bool
		delta, changed, err = s.delta(d, f[1], choice, finish, length)
		if err != nil {
			return false
		}
		if !changed {
			empty = false
			return true
		}
		touched = true
		if finish || !bytes.Equal(delta, []byte("{}")) {
			empty = false
		}
		edits = append(edits, jsonspan.Edit{Start: f[1].Start, End: f[1].End, Repl: delta})
		return true
	})
	if err != nil {
		return err
	}
	if !touched {
		return emit(ev)
	}
	usage := jsonspan.Lookup(d, 0, "usage")
	if empty && (usage.Start < 0 || jsonspan.IsNull(d, usage)) {
		return nil // the chunk only carried fragments we hold back
	}
	return emit(&Event{Name: ev.Name, Data: jsonspan.Apply(d, edits)})
}

func (s *chatStream) rememberMeta(d []byte, f []jsonspan.Span) {
	w := s.meta[:0]
	for k, name := range []string{"id", "created", "model"} {
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
// this chunk: converted calls of the choice are then completed, unless the
// upstream stopped for length, which leaves a call cut short.
func (s *chatStream) delta(d []byte, ds jsonspan.Span, choice int64, finish, length bool) ([]byte, bool, error) {
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
		if m.KeyIs(d, "tool_calls") {
			return true
		}
		w.Raw(d, m)
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
// belongs to a converted or held call; out is then its replacement (nil:
// drop it for now).
func (s *chatStream) entry(d []byte, el jsonspan.Span, choice int64) (out []byte, mine bool, err error) {
	if d[el.Start] != '{' {
		return nil, false, nil
	}
	var f [4]jsonspan.Span
	jsonspan.ObjectFields(d, el.Start, []string{"index", "id", "function", "type"}, f[:])
	idx, ok := parseIndex(d, f[0])
	if !ok {
		return nil, false, nil
	}
	key := chatKey{choice, idx}
	if s.dropped[key] {
		return nil, true, nil
	}
	if s.native[key] {
		return nil, false, nil
	}
	var name string
	var frag []byte
	if f[2].Start >= 0 && d[f[2].Start] == '{' {
		var g [2]jsonspan.Span
		jsonspan.ObjectFields(d, f[2].Start, []string{"name", "arguments"}, g[:])
		name, _ = jsonspan.StringValue(d, g[0])
		if g[1].Start >= 0 && d[g[1].Start] == '"' {
			s.buf = jsonspan.Unescape(s.buf[:0], d[g[1].Start+1:g[1].End-1])
			frag = s.buf
		}
	}
	if c := s.calls[key]; c != nil {
		return s.fragment(key, c, frag, nil, "")
	}
	if p := s.pending[key]; p != nil {
		p.args = append(p.args, frag...)
		if err := s.checkHeld(p); err != nil {
			return nil, true, err
		}
		if name == "" {
			return nil, true, nil
		}
		delete(s.pending, key)
		return s.open(key, name, p.id, p.args, p)
	}
	if name == "" {
		if f[2].Start < 0 && !jsonspan.IsString(d, f[3], "function") {
			return nil, false, nil // not a function fragment at all
		}
		if !s.couldMatch || f[1].Start < 0 {
			return nil, false, nil
		}
		// A first fragment without a name: hold it until the name shows
		// which tool it is.
		p := &chatPending{id: bytes.Clone(d[f[1].Start:f[1].End]), args: bytes.Clone(frag)}
		s.pending[key] = p
		return nil, true, s.checkHeld(p)
	}
	var rawID []byte
	if f[1].Start >= 0 {
		rawID = d[f[1].Start:f[1].End]
	}
	if _, conv := s.t.resolve(s.rec, "", name); !conv {
		// Native: its later fragments pass untouched even when they repeat
		// the id without the name.
		s.markNative(key)
		return nil, false, nil
	}
	return s.open(key, name, rawID, frag, nil)
}

// checkHeld applies max_call_buffer to fragments held without a name.
func (s *chatStream) checkHeld(p *chatPending) error {
	limit := s.x.Limits.MaxCallBuffer
	if limit <= 0 || len(p.args) <= limit {
		return nil
	}
	s.abandon("held arguments exceed max_call_buffer")
	return &StreamAbort{Code: "max_call_buffer_exceeded",
		Message: "the arguments of an unnamed tool call exceed the gateway's max_call_buffer of " + strconv.Itoa(limit) + " bytes"}
}

// open starts a converted call, or replays a held fragment as it was when
// the name shows the call is not ours.
func (s *chatStream) open(key chatKey, name string, rawID, args []byte, held *chatPending) ([]byte, bool, error) {
	id, ok := s.t.resolve(s.rec, "", name)
	if !ok {
		// A native call after all: hand out what was held, merged into one
		// ordinary fragment.
		s.markNative(key)
		b := entryHead(key, rawID)
		b = append(b, `,"type":"function","function":{"name":`...)
		b = jsonspan.AppendStringStr(b, name)
		b = append(b, `,"arguments":`...)
		b = jsonspan.AppendString(b, args)
		return append(b, "}}"...), true, nil
	}
	c := &chatCall{id: id}
	c.dec.Limit = s.x.Limits.MaxCallBuffer
	if id.name == "apply_patch" {
		c.norm = new(patchfmt.Normalizer)
	}
	s.calls[key] = c
	s.order = append(s.order, key)
	s.x.Decide(id.String(), "restore_call", "chat stream header of a converted custom tool")
	return s.fragment(key, c, args, rawID, name)
}

// fragment decodes argument text; with a name it renders the call's first
// entry, otherwise an input fragment (nil when nothing is decodable yet).
func (s *chatStream) fragment(key chatKey, c *chatCall, frag, rawID []byte, name string) ([]byte, bool, error) {
	var text []byte
	if len(frag) > 0 {
		var err error
		text, err = c.dec.Write(frag)
		if err != nil {
			s.abandon("call arguments exceed max_call_buffer")
			return nil, true, &StreamAbort{Code: "max_call_buffer_exceeded",
				Message: "the arguments of tool call \"" + c.id.String() + "\" exceed the gateway's max_call_buffer of " + strconv.Itoa(s.x.Limits.MaxCallBuffer) + " bytes"}
		}
		if c.norm != nil && len(text) > 0 {
			text = []byte(c.norm.Write(string(text)))
		}
		c.emitted = append(c.emitted, text...)
	}
	if name != "" {
		b := entryHead(key, rawID)
		b = append(b, `,"type":"custom","custom":{"name":`...)
		b = jsonspan.AppendStringStr(b, name)
		b = append(b, `,"input":`...)
		b = jsonspan.AppendString(b, text)
		return append(b, "}}"...), true, nil
	}
	if len(text) == 0 {
		return nil, true, nil
	}
	return inputFragment(key, text), true, nil
}

// entryHead starts a tool_calls entry: its index, and its id when known.
func entryHead(key chatKey, rawID []byte) []byte {
	b := []byte(`{"index":`)
	b = strconv.AppendInt(b, key.index, 10)
	if len(rawID) > 0 {
		b = append(b, `,"id":`...)
		b = append(b, rawID...)
	}
	return b
}

func inputFragment(key chatKey, text []byte) []byte {
	b := entryHead(key, nil)
	b = append(b, `,"custom":{"input":`...)
	b = jsonspan.AppendString(b, text)
	return append(b, "}}"...)
}

// finishChoice completes the converted calls of a choice: the part of the
// final input the client has not seen goes out as one more fragment. A
// choice cut short by length keeps only what was already sent.
func (s *chatStream) finishChoice(choice int64, length bool) ([][]byte, bool) {
	var out [][]byte
	any := false
	keep := s.order[:0]
	for _, key := range s.order {
		c := s.calls[key]
		if key.choice != choice || c == nil {
			if c != nil {
				keep = append(keep, key)
			}
			continue
		}
		any = true
		delete(s.calls, key)
		s.x.CallBuffered(len(c.dec.Raw()))
		if length {
			s.x.Decide(c.id.String(), "drop_partial_call", "finish_reason length cut the call short")
			continue
		}
		s.x.Restored++
		final := finalInput(c.id, c.dec.Raw())
		if rest, ok := bytes.CutPrefix(final, c.emitted); ok && len(rest) > 0 {
			out = append(out, inputFragment(key, rest))
		} else if !ok {
			s.x.Decide(c.id.String(), "input_mismatch", "final arguments differ from the streamed ones")
		}
	}
	s.order = keep
	// Held fragments that never got a name are handed out as they came,
	// merged, in index order: they were never shown to be ours.
	var held []chatKey
	for key := range s.pending {
		if key.choice == choice {
			held = append(held, key)
		}
	}
	slices.SortFunc(held, func(a, b chatKey) int { return cmp.Compare(a.index, b.index) })
	for _, key := range held {
		p := s.pending[key]
		delete(s.pending, key)
		b := entryHead(key, p.id)
		b = append(b, `,"type":"function","function":{"arguments":`...)
		b = jsonspan.AppendString(b, p.args)
		out = append(out, append(b, "}}"...))
		any = true
	}
	return out, any
}

// flushAll completes whatever is still open when [DONE] arrives without a
// finish_reason, in a chunk of its own.
func (s *chatStream) flushAll(emit Emit) error {
	if len(s.calls) == 0 && len(s.pending) == 0 {
		return nil
	}
	var choices []int64
	for _, k := range s.order {
		choices = append(choices, k.choice)
	}
	for k := range s.pending {
		choices = append(choices, k.choice)
	}
	slices.Sort(choices)
	choices = slices.Compact(choices)
	for _, choice := range choices {
		rest, any := s.finishChoice(choice, false)
		if !any || len(rest) == 0 {
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
