package transforms

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/patchfmt"
	"github.com/llmtransform/caddy-llm-transform/streambuf"
)

// field_custom_tools_to_function lets clients that use freeform ("custom")
// tools, such as Codex CLI's apply_patch, talk to upstreams that only know
// JSON function tools. Requests get function definitions with a single
// string parameter "input"; history and tool_choice follow. Responses turn
// the upstream's function calls back into custom calls, but only for tools
// this very request converted, so a native function that happens to share a
// name is never touched.

const customToolsID = "field_custom_tools_to_function"

func init() {
	Register(Definition{
		ID:      customToolsID,
		Phases:  PhaseBoth,
		Scopes:  AllScopes,
		Options: map[string]OptionKind{"names": OptionStrings},
		New:     newCustomTools,
	})
}

type customToolsConfig struct {
	// Names selects the custom tools to convert by name; "*" selects every
	// custom tool. Absent means ["apply_patch"]; an empty list converts
	// nothing.
	Names []string `json:"names"`
}

type customTools struct {
	all   bool
	names map[string]bool
}

func newCustomTools(raw json.RawMessage) (Transform, error) {
	var cfg customToolsConfig
	if err := DecodeConfig(raw, &cfg); err != nil {
		return nil, err
	}
	if cfg.Names == nil {
		cfg.Names = []string{"apply_patch"}
	}
	t := &customTools{names: make(map[string]bool, len(cfg.Names))}
	for _, n := range cfg.Names {
		switch n {
		case "":
			return nil, fmt.Errorf("names: empty tool name")
		case "*":
			t.all = true
		default:
			t.names[n] = true
		}
	}
	return t, nil
}

func (t *customTools) selects(name string) bool {
	return name != "" && (t.all || t.names[name])
}

// ident is a tool identity: its effective namespace and its name.
type ident struct{ ns, name string }

func (i ident) String() string {
	if i.ns == "" {
		return i.name
	}
	return i.ns + "." + i.name
}

type recordKey struct{}

// customRecord is what the request phase learnt, shared by every rule of
// this transform and by both phases of one request.
type customRecord struct {
	converted      map[ident]bool // custom identities turned into functions
	fromDescriptor map[ident]bool // ... of which a definition was converted
	known          map[string][]ident
	calls          map[string]ident // history call_id -> converted identity
	origTools      []byte           // the client's tools, echoed back verbatim
	origChoice     []byte
}

func record(x *Exchange) *customRecord {
	return x.Record(recordKey{}, func() any {
		return &customRecord{
			converted:      map[ident]bool{},
			fromDescriptor: map[ident]bool{},
			known:          map[string][]ident{},
			calls:          map[string]ident{},
		}
	}).(*customRecord)
}

func (r *customRecord) addKnown(id ident) {
	for _, k := range r.known[id.name] {
		if k == id {
			return
		}
	}
	r.known[id.name] = append(r.known[id.name], id)
}

// resolve decides whether a function call coming back from the upstream is
// one this request converted, and returns the client-side identity. A call
// without a namespace is restored only when its name is unambiguous.
func (t *customTools) resolve(r *customRecord, ns, name string) (ident, bool) {
	if r == nil || !t.selects(name) {
		return ident{}, false
	}
	if ns != "" {
		id := ident{ns, name}
		return id, r.converted[id]
	}
	cands := r.known[name]
	if len(cands) == 1 {
		return cands[0], r.converted[cands[0]]
	}
	// History items may carry a tool without the namespace its definition
	// sits in (Codex's Responses-lite puts every tool in "functions"). Then
	// the definitions decide: exactly one converted definition of that name,
	// and no native tool sharing it.
	var def ident
	defs := 0
	for _, c := range cands {
		if !r.converted[c] {
			return ident{}, false
		}
		if r.fromDescriptor[c] {
			def, defs = c, defs+1
		}
	}
	return def, defs == 1
}

// --- request side ---------------------------------------------------------

// A request rewrite first plans every edit and checks for identity
// conflicts, and only then builds the new body, so a rejected request is
// never half converted.
type requestPlan struct {
	t      *customTools
	x      *Exchange
	doc    []byte
	rec    *customRecord
	edits  []jsonspan.Edit
	chat   bool
	native map[ident]string // native function identities and where they were seen
	picked []pickedCustom
	outs   []jsonspan.Span // custom_tool_call_output items, decided after all calls are known
	choice jsonspan.Span
}

type pickedCustom struct {
	id    ident
	where string
}

func (t *customTools) RewriteRequest(x *Exchange, body []byte) ([]byte, error) {
	if x.Protocol != ProtocolResponses && x.Protocol != ProtocolChat {
		return body, nil
	}
	if !t.all && len(t.names) == 0 {
		return body, nil
	}
	p := &requestPlan{t: t, x: x, doc: body, rec: record(x), chat: x.Protocol == ProtocolChat, native: map[ident]string{}}
	// One walk over the top level validates the whole body and visits
	// tools, history and tool_choice as it passes them; a body that is not
	// valid JSON goes upstream exactly as it came.
	var tools, choice jsonspan.Span = jsonspan.NoSpan(), jsonspan.NoSpan()
	end := jsonspan.WalkMembers(body, 0, func(k jsonspan.Span, v int) int {
		var e int
		switch {
		case jsonspan.KeyIs(body, k, "tools"):
			e = p.walkTools(v, "", "tools")
			tools = jsonspan.Span{Start: v, End: e}
		case jsonspan.KeyIs(body, k, "input") && !p.chat:
			e = p.walkInput(v)
		case jsonspan.KeyIs(body, k, "messages") && p.chat:
			e = p.walkMessages(v)
		case jsonspan.KeyIs(body, k, "tool_choice"):
			e = jsonspan.SkipValue(body, v)
			choice = jsonspan.Span{Start: v, End: e}
		default:
			e = jsonspan.SkipValue(body, v)
		}
		return e
	})
	if end < 0 || jsonspan.SkipSpace(body, end) != len(body) {
		p.x.Invalid = true
		return body, nil
	}
	for _, pc := range p.picked {
		if where, clash := p.native[pc.id]; clash {
			return nil, &Error{
				Status: http.StatusBadRequest,
				Type:   "invalid_request_error",
				Code:   "custom_tool_conflict",
				Param:  pc.where,
				Message: fmt.Sprintf("custom tool %q cannot be converted to a function: a native function with the same namespace and name is declared at %s",
					pc.id, where),
			}
		}
	}
	for _, sp := range p.outs {
		p.planOutput(sp)
	}
	if choice.Start >= 0 {
		p.planChoice(choice)
	}
	if len(p.edits) == 0 {
		return body, nil
	}
	for _, pc := range p.picked {
		p.rec.converted[pc.id] = true
	}
	if p.rec.origTools == nil && tools.Start >= 0 {
		p.rec.origTools = bytes.Clone(body[tools.Start:tools.End])
	}
	if p.rec.origChoice == nil && choice.Start >= 0 {
		p.rec.origChoice = bytes.Clone(body[choice.Start:choice.End])
	}
	x.Converted += len(p.edits)
	return x.applyEdits(body, p.edits), nil
}

func (p *requestPlan) pick(id ident, where string) {
	for _, pc := range p.picked {
		if pc.id == id {
			return // one entry per identity keeps conflict checks linear
		}
	}
	p.picked = append(p.picked, pickedCustom{id, where})
}

// walkTools visits tool definitions, recursing into namespaces. enclosing is
// the namespace name inherited by leaves that do not name their own.
// It returns the end of the value at start, or -1 when it is malformed.
func (p *requestPlan) walkTools(start int, enclosing, where string) int {
	if start >= len(p.doc) || p.doc[start] != '[' {
		return jsonspan.SkipValue(p.doc, start) // not a list of tools: nothing of ours
	}
	i := 0
	return jsonspan.EachElement(p.doc, start, func(el jsonspan.Span) bool {
		path := where + "[" + strconv.Itoa(i) + "]"
		i++
		var f [5]jsonspan.Span
		jsonspan.ObjectFields(p.doc, el.Start, []string{"type", "name", "namespace", "tools", "custom"}, f[:])
		typ, _ := jsonspan.StringValue(p.doc, f[0])
		name, _ := jsonspan.StringValue(p.doc, f[1])
		ns, _ := jsonspan.StringValue(p.doc, f[2])
		if ns == "" {
			ns = enclosing
		}
		switch typ {
		case "namespace":
			if f[3].Start >= 0 {
				return p.walkTools(f[3].Start, name, path+".tools") >= 0
			}
		case "function":
			if p.chat {
				name = nestedString(p.doc, el.Start, "function", "name")
			}
			id := ident{ns, name}
			p.rec.addKnown(id)
			p.native[id] = path
		case "custom":
			if p.chat {
				name = nestedString(p.doc, el.Start, "custom", "name")
			}
			id := ident{ns, name}
			p.rec.addKnown(id)
			if !p.t.selects(name) {
				return true
			}
			p.pick(id, path)
			p.rec.fromDescriptor[id] = true
			p.x.Decide(id.String(), "convert_definition", "custom tool selected by names")
			var repl []byte
			if p.chat {
				repl = p.chatDescriptor(el, name)
			} else {
				repl = p.descriptor(el, name)
			}
			p.edits = append(p.edits, jsonspan.Edit{Start: el.Start, End: el.End, Repl: repl})
		}
		return true
	})
}

// descriptor rewrites a flat Responses custom tool into a function tool.
func (p *requestPlan) descriptor(el jsonspan.Span, name string) []byte {
	return p.functionBody(nil, el, name, true)
}

// functionBody writes the function definition made from the custom tool
// object at obj: Responses' flat tool (flat: its "type" becomes "function")
// or Chat's inner "custom" object. The grammar cannot be expressed as a JSON
// schema, so format goes and the generated schema and strict:false replace
// it; every other member stays.
func (p *requestPlan) functionBody(dst []byte, obj jsonspan.Span, name string, flat bool) []byte {
	doc := p.doc
	patch := name == "apply_patch"
	w := jsonspan.NewObj(dst)
	hasDesc := false
	jsonspan.EachMember(doc, obj.Start, func(m jsonspan.Member) bool {
		switch {
		case flat && m.KeyIs(doc, "type"):
			w.Key("type")
			w.B = append(w.B, `"function"`...)
		case m.KeyIs(doc, "format"), m.KeyIs(doc, "strict"), m.KeyIs(doc, "parameters"), flat && m.KeyIs(doc, "custom"):
		case m.KeyIs(doc, "description") && patch:
			hasDesc = true
			w.Key("description")
			w.B = appendPatchDescription(w.B, doc, m.Value)
		default:
			w.Raw(doc, m)
		}
		return true
	})
	if patch && !hasDesc {
		w.Key("description")
		w.B = jsonspan.AppendStringStr(w.B, patchUsage)
	}
	w.Key("parameters")
	w.B = appendSchema(w.B, patch)
	w.Key("strict")
	w.B = append(w.B, "false"...)
	return w.Close()
}

var inputFields = []string{"type", "name", "namespace", "call_id", "tools"}

// walkInput visits Responses history items, scanning each item once.
func (p *requestPlan) walkInput(start int) int {
	doc := p.doc
	if start >= len(doc) || doc[start] != '[' {
		return jsonspan.SkipValue(doc, start) // a plain string prompt
	}
	var f [5]jsonspan.Span
	i := -1
	return jsonspan.EachObject(doc, start, inputFields, f[:], func(el jsonspan.Span, f []jsonspan.Span) bool {
		i++
		typ := f[0]
		switch {
		case jsonspan.IsString(doc, typ, "additional_tools"):
			if f[4].Start >= 0 {
				return p.walkTools(f[4].Start, "", "input["+strconv.Itoa(i)+"].tools") >= 0
			}
		case jsonspan.IsString(doc, typ, "function_call"):
			name, _ := jsonspan.StringValue(doc, f[1])
			ns, _ := jsonspan.StringValue(doc, f[2])
			id := ident{ns, name}
			p.rec.addKnown(id)
			if _, seen := p.native[id]; !seen {
				p.native[id] = "input[" + strconv.Itoa(i) + "]"
			}
		case jsonspan.IsString(doc, typ, "custom_tool_call"):
			name, _ := jsonspan.StringValue(doc, f[1])
			ns, _ := jsonspan.StringValue(doc, f[2])
			id := ident{ns, name}
			p.rec.addKnown(id)
			if !p.t.selects(name) {
				return true
			}
			if !p.isPicked(id) { // format the location once per identity
				p.pick(id, "input["+strconv.Itoa(i)+"]")
			}
			if callID, ok := jsonspan.StringValue(doc, f[3]); ok {
				p.rec.calls[callID] = id
			}
			p.edits = append(p.edits, jsonspan.Edit{Start: el.Start, End: el.End, Repl: p.historyCall(el)})
		case jsonspan.IsString(doc, typ, "custom_tool_call_output"):
			p.outs = append(p.outs, el)
		}
		return true
	})
}

// historyCall turns a custom_tool_call into a function_call. The input is
// wrapped exactly once, even when it already looks like JSON, and the
// custom item id is dropped: Responses upstreams reject ctc_ ids on
// function items, and call_id is what correlates the pair.
func (p *requestPlan) historyCall(el jsonspan.Span) []byte {
	doc := p.doc
	w := jsonspan.NewObj(make([]byte, 0, el.End-el.Start+64))
	input := jsonspan.NoSpan()
	jsonspan.Retype(&w, doc, el, "function_call", func(w *jsonspan.ObjWriter, m jsonspan.Member) bool {
		switch {
		case m.KeyIs(doc, "id"):
		case m.KeyIs(doc, "input"):
			input = m.Value
		default:
			return false
		}
		return true
	})
	wrapInput(&w, doc, input)
	return w.Close()
}

// wrapInput writes "arguments" as {"input": <the raw input value>}, wrapped
// exactly once; an absent input becomes the empty string.
func wrapInput(w *jsonspan.ObjWriter, doc []byte, v jsonspan.Span) {
	w.Key("arguments")
	if v.Start < 0 {
		w.B = append(w.B, `"{\"input\":\"\"}"`...)
		return
	}
	w.B = jsonspan.AppendQuoted(w.B, []byte(`{"input":`), doc[v.Start:v.End], []byte("}"))
}

// planOutput converts a custom_tool_call_output whose call was converted, or
// which names a converted definition explicitly.
func (p *requestPlan) planOutput(el jsonspan.Span) {
	doc := p.doc
	var f [3]jsonspan.Span
	jsonspan.ObjectFields(doc, el.Start, []string{"call_id", "name", "namespace"}, f[:])
	callID, _ := jsonspan.StringValue(doc, f[0])
	_, owned := p.rec.calls[callID]
	if !owned {
		name, ok := jsonspan.StringValue(doc, f[1])
		ns, _ := jsonspan.StringValue(doc, f[2])
		owned = ok && p.t.selects(name) && p.rec.fromDescriptor[ident{ns, name}] && p.isPicked(ident{ns, name})
	}
	if !owned {
		return
	}
	w := jsonspan.NewObj(nil)
	jsonspan.Retype(&w, doc, el, "function_call_output", jsonspan.DropMember(doc, "id"))
	p.edits = append(p.edits, jsonspan.Edit{Start: el.Start, End: el.End, Repl: w.Close()})
}

func (p *requestPlan) isPicked(id ident) bool {
	for _, pc := range p.picked {
		if pc.id == id {
			return true
		}
	}
	return false
}

// planChoice rewrites a custom tool_choice, or custom entries of an
// allowed_tools choice, when the tool's definition was converted here.
func (p *requestPlan) planChoice(sp jsonspan.Span) {
	doc := p.doc
	if doc[sp.Start] != '{' {
		return // "auto", "required", "none"
	}
	typ := jsonspan.Lookup(doc, sp.Start, "type")
	switch {
	case jsonspan.IsString(doc, typ, "custom"):
		if repl, ok := p.choiceEntry(sp); ok {
			p.edits = append(p.edits, jsonspan.Edit{Start: sp.Start, End: sp.End, Repl: repl})
		}
	case jsonspan.IsString(doc, typ, "allowed_tools"):
		tools := jsonspan.Lookup(doc, sp.Start, "tools")
		if p.chat {
			if inner := jsonspan.Lookup(doc, sp.Start, "allowed_tools"); inner.Start >= 0 && doc[inner.Start] == '{' {
				tools = jsonspan.Lookup(doc, inner.Start, "tools")
			}
		}
		if tools.Start < 0 {
			return
		}
		jsonspan.EachElement(doc, tools.Start, func(el jsonspan.Span) bool {
			if jsonspan.IsString(doc, jsonspan.Lookup(doc, el.Start, "type"), "custom") {
				if repl, ok := p.choiceEntry(el); ok {
					p.edits = append(p.edits, jsonspan.Edit{Start: el.Start, End: el.End, Repl: repl})
				}
			}
			return true
		})
	}
}

// choiceEntry rewrites one {"type":"custom",...} selector. The name may sit
// flat or in a nested "custom" object; the nested object is renamed to
// "function" with its contents untouched.
func (p *requestPlan) choiceEntry(el jsonspan.Span) ([]byte, bool) {
	doc := p.doc
	var f [3]jsonspan.Span
	jsonspan.ObjectFields(doc, el.Start, []string{"name", "namespace", "custom"}, f[:])
	name, _ := jsonspan.StringValue(doc, f[0])
	ns, _ := jsonspan.StringValue(doc, f[1])
	if f[2].Start >= 0 && doc[f[2].Start] == '{' {
		if name == "" {
			name, _ = jsonspan.StringValue(doc, jsonspan.Lookup(doc, f[2].Start, "name"))
		}
		if ns == "" {
			ns, _ = jsonspan.StringValue(doc, jsonspan.Lookup(doc, f[2].Start, "namespace"))
		}
	}
	id := ident{ns, name}
	if !p.rec.fromDescriptor[id] || !p.isPicked(id) {
		return nil, false
	}
	w := jsonspan.NewObj(nil)
	jsonspan.Retype(&w, doc, el, "function", func(w *jsonspan.ObjWriter, m jsonspan.Member) bool {
		if !m.KeyIs(doc, "custom") {
			return false
		}
		w.Key("function")
		w.B = append(w.B, doc[m.Value.Start:m.Value.End]...)
		return true
	})
	p.x.Decide(id.String(), "convert_tool_choice", "tool_choice names a converted custom tool")
	return w.Close(), true
}

func nestedString(doc []byte, start int, obj, key string) string {
	o := jsonspan.Lookup(doc, start, obj)
	if o.Start < 0 || doc[o.Start] != '{' {
		return ""
	}
	s, _ := jsonspan.StringValue(doc, jsonspan.Lookup(doc, o.Start, key))
	return s
}

// --- generated schema -----------------------------------------------------

const genericInputDescription = "The complete input string for this custom tool."

// patchInputDescription explains the envelope; our own wording, written for
// models that only ever see a JSON string parameter.
const patchInputDescription = "The whole patch as plain text. The first line is exactly `*** Begin Patch` and the last line is exactly `*** End Patch`. " +
	"A new file is `*** Add File: <path>` followed by its lines, each starting with `+`. " +
	"A change is `*** Update File: <path>` (optionally followed by `*** Move to: <new path>`) and hunks introduced by `@@` (optionally followed by a nearby line of code); " +
	"inside a hunk, lines that stay start with a space, removed lines with `-` and added lines with `+`. " +
	"A removal is `*** Delete File: <path>`. Do not list a line as removed and added when it does not change, and never re-create an existing file with Add File."

// patchUsage is added to apply_patch's description. Its first sentence
// doubles as the marker that keeps the text from being added twice.
const patchUsage = "Call this function with the patch text in the `input` argument. " +
	"Start with `*** Begin Patch`, end with `*** End Patch`, prefix every line of an added file with `+`, " +
	"and in `*** Update File` hunks mark kept lines with a space, removed lines with `-` and added lines with `+`. " +
	"Example input: \"*** Begin Patch\\n*** Add File: notes.txt\\n+first line\\n*** End Patch\\n\"."

const patchUsageMarker = "Call this function with the patch text in the `input` argument."

func appendPatchDescription(dst, doc []byte, v jsonspan.Span) []byte {
	desc, ok := jsonspan.StringValue(doc, v)
	if !ok {
		return jsonspan.AppendStringStr(dst, patchUsage)
	}
	if strings.Contains(desc, patchUsageMarker) {
		return append(dst, doc[v.Start:v.End]...)
	}
	if strings.TrimSpace(desc) == "" {
		return jsonspan.AppendStringStr(dst, patchUsage)
	}
	return jsonspan.AppendStringStr(dst, desc+"\n\n"+patchUsage)
}

var (
	genericSchema = schemaJSON(genericInputDescription)
	patchSchema   = schemaJSON(patchInputDescription)
)

func schemaJSON(desc string) []byte {
	b := []byte(`{"type":"object","properties":{"input":{"type":"string","description":`)
	b = jsonspan.AppendStringStr(b, desc)
	return append(b, `}},"required":["input"],"additionalProperties":false}`...)
}

func appendSchema(dst []byte, patch bool) []byte {
	if patch {
		return append(dst, patchSchema...)
	}
	return append(dst, genericSchema...)
}

// --- response side: shared helpers -----------------------------------------

// unwrapArgs recovers the custom input from function arguments. An object
// yields its "input" string; failing that, the first of patch, command or
// content whose string value holds a patch. A JSON string is decoded one
// level. Anything else, invalid JSON included, is the input as it stands.
func unwrapArgs(args []byte) []byte {
	t := bytes.TrimSpace(args)
	if len(t) == 0 || !jsonspan.Valid(t) {
		return args
	}
	switch t[0] {
	case '"':
		return jsonspan.Unescape(nil, t[1:len(t)-1])
	case '{':
		var f [4]jsonspan.Span
		jsonspan.ObjectFields(t, 0, []string{"input", "patch", "command", "content"}, f[:])
		for k, sp := range f {
			if sp.Start < 0 || t[sp.Start] != '"' {
				continue
			}
			v := jsonspan.Unescape(nil, t[sp.Start+1:sp.End-1])
			if k == 0 || bytes.Contains(v, []byte("Begin Patch")) {
				return v
			}
		}
	}
	return args
}

// finalInput is the custom input the client gets for a converted call.
func finalInput(id ident, args []byte) []byte {
	in := unwrapArgs(args)
	if id.name == "apply_patch" {
		return []byte(patchfmt.Normalize(string(in)))
	}
	return in
}

// restoredItem rewrites a function_call item into a custom_tool_call with the
// given input (nil input: taken from the item's arguments).
func restoredItem(dst, doc []byte, el jsonspan.Span, id ident, input []byte) []byte {
	if input == nil {
		if a := jsonspan.Lookup(doc, el.Start, "arguments"); a.Start >= 0 && doc[a.Start] == '"' {
			input = finalInput(id, jsonspan.Unescape(nil, doc[a.Start+1:a.End-1]))
		} else {
			input = finalInput(id, nil)
		}
	}
	w := jsonspan.NewObj(dst)
	sawNS := false
	jsonspan.Retype(&w, doc, el, "custom_tool_call", func(w *jsonspan.ObjWriter, m jsonspan.Member) bool {
		switch {
		case m.KeyIs(doc, "arguments"):
			w.Key("input")
			w.B = jsonspan.AppendString(w.B, input)
			return true
		case m.KeyIs(doc, "namespace"):
			sawNS = true
		}
		return false
	})
	if !sawNS && id.ns != "" {
		w.Key("namespace")
		w.B = jsonspan.AppendStringStr(w.B, id.ns)
	}
	return w.Close()
}

// restoreResponseObject rewrites a Responses response object: converted
// output items, and the echoed tools and tool_choice. On a stream, done
// gives the inputs the stream already settled, by output position and item
// id; with onlyDone, calls the stream did not complete stay as they are.
func (t *customTools) restoreResponseObject(x *Exchange, doc []byte, obj jsonspan.Span, done func(callID, itemID string, pos int) ([]byte, bool), onlyDone bool) []jsonspan.Edit {
	r := record(x)
	var f [3]jsonspan.Span
	jsonspan.ObjectFields(doc, obj.Start, []string{"output", "tools", "tool_choice"}, f[:])
	var edits []jsonspan.Edit
	if f[0].Start >= 0 {
		pos := -1
		jsonspan.EachElement(doc, f[0].Start, func(el jsonspan.Span) bool {
			pos++
			if !jsonspan.IsString(doc, jsonspan.Lookup(doc, el.Start, "type"), "function_call") {
				return true
			}
			var g [4]jsonspan.Span
			jsonspan.ObjectFields(doc, el.Start, []string{"name", "namespace", "id", "call_id"}, g[:])
			name, _ := jsonspan.StringValue(doc, g[0])
			ns, _ := jsonspan.StringValue(doc, g[1])
			id, ok := t.resolve(r, ns, name)
			if !ok {
				return true
			}
			var input []byte
			if done != nil {
				itemID, _ := jsonspan.StringValue(doc, g[2])
				callID, _ := jsonspan.StringValue(doc, g[3])
				var seen bool
				if input, seen = done(callID, itemID, pos); !seen && onlyDone {
					return true // never build a call the stream did not complete
				}
			} else {
				x.Restored++
				x.Decide(id.String(), "restore_call", "function call of a converted custom tool")
			}
			edits = append(edits, jsonspan.Edit{Start: el.Start, End: el.End, Repl: restoredItem(nil, doc, el, id, input)})
			return true
		})
	}
	if r.origTools != nil && f[1].Start >= 0 {
		edits = append(edits, jsonspan.Edit{Start: f[1].Start, End: f[1].End, Repl: r.origTools})
	}
	if r.origChoice != nil && f[2].Start >= 0 {
		edits = append(edits, jsonspan.Edit{Start: f[2].Start, End: f[2].End, Repl: r.origChoice})
	}
	return edits
}

func (t *customTools) RewriteResponse(x *Exchange, body []byte) ([]byte, error) {
	if x.Protocol == ProtocolChat {
		return t.chatResponse(x, body)
	}
	if x.Protocol != ProtocolResponses || !record(x).active() || !jsonspan.Valid(body) {
		return body, nil
	}
	return x.applyEdits(body, t.restoreResponseObject(x, body, jsonspan.Span{Start: jsonspan.SkipSpace(body, 0), End: len(body)}, nil, false)), nil
}

func (r *customRecord) active() bool { return len(r.converted) > 0 }

func (t *customTools) WantsResponse(x *Exchange) bool { return record(x).active() }

// --- response side: Responses SSE -------------------------------------------

// customStream restores converted calls in a Responses event stream. Text,
// reasoning and native calls pass through untouched; a converted call's
// header goes out at once as a custom_tool_call, and its input follows as
// soon as the argument JSON reveals it.
//
// Events name a call by output_index, item id, or both, and upstreams have
// been seen to omit or repeat ids, so calls are found by output index
// first and by item id second.
type customStream struct {
	t      *customTools
	x      *Exchange
	rec    *customRecord
	open   map[string]*customCall // calls in progress, under each of their keys
	done   map[string][]byte      // settled inputs of completed calls, under each key
	closed map[string]bool        // completed or dropped calls: later argument events are swallowed
	failed bool
	buf    []byte
	evbuf  []byte
	ev     Event
}

type customCall struct {
	id          ident
	itemID      string
	callID      string
	outputIndex []byte
	dec         streambuf.ArgsDecoder
	norm        *patchfmt.Normalizer
	emitted     []byte
	final       []byte
	inputDone   bool // custom_tool_call_input.done went out
}

func (t *customTools) NewStream(x *Exchange) StreamTransform {
	r := record(x)
	if !r.active() {
		return nil
	}
	if x.Protocol == ProtocolChat {
		return t.newChatStream(x, r)
	}
	if x.Protocol != ProtocolResponses {
		return nil
	}
	return &customStream{t: t, x: x, rec: r, open: map[string]*customCall{}, done: map[string][]byte{}, closed: map[string]bool{}}
}

// callKeys returns the keys a call is known by: its output index, its item
// id and its call id, when present.
func callKeys(itemID string, outputIndex []byte, callID string) []string {
	keys := make([]string, 0, 3)
	if len(outputIndex) > 0 {
		keys = append(keys, "i:"+string(outputIndex))
	}
	if itemID != "" {
		keys = append(keys, "id:"+itemID)
	}
	if callID != "" {
		keys = append(keys, "c:"+callID)
	}
	return keys
}

// findItem looks up the call of a finished item: by call_id, which is
// unique per call, when the stream has seen it; by position and id
// otherwise.
func (s *customStream) findItem(callID, itemID string, outputIndex []byte) (*customCall, bool) {
	if callID != "" {
		k := "c:" + callID
		if c := s.open[k]; c != nil {
			return c, false
		}
		if s.closed[k] {
			return nil, true
		}
	}
	return s.find(itemID, outputIndex)
}

// where reads the item id and output index an event refers to; item says
// where the item object is, for output_item events.
func where(d []byte, item jsonspan.Span) (itemID string, outputIndex []byte) {
	var f [2]jsonspan.Span
	jsonspan.ObjectFields(d, 0, []string{"item_id", "output_index"}, f[:])
	if item.Start >= 0 {
		itemID, _ = jsonspan.StringValue(d, jsonspan.Lookup(d, item.Start, "id"))
	} else {
		itemID, _ = jsonspan.StringValue(d, f[0])
	}
	if f[1].Start >= 0 {
		outputIndex = d[f[1].Start:f[1].End]
	}
	return itemID, outputIndex
}

// find looks a call up by output index, then by item id. An id only
// stands in for an index the call was not registered under, since ids may
// repeat across calls while output indexes do not.
func (s *customStream) find(itemID string, outputIndex []byte) (c *customCall, closed bool) {
	if len(outputIndex) > 0 {
		k := "i:" + string(outputIndex)
		if c := s.open[k]; c != nil {
			return c, false
		}
		if s.closed[k] {
			return nil, true
		}
	}
	if itemID == "" {
		return nil, false
	}
	k := "id:" + itemID
	if c := s.open[k]; c != nil && (c.outputIndex == nil || len(outputIndex) == 0) {
		return c, false
	}
	return nil, len(outputIndex) == 0 && s.closed[k]
}

// close moves a call from open to closed, keeping its final input.
func (s *customStream) close(c *customCall, final []byte) {
	for _, k := range callKeys(c.itemID, c.outputIndex, c.callID) {
		if s.open[k] == c {
			delete(s.open, k)
		}
		s.closed[k] = true
		if final != nil {
			s.done[k] = final
		}
	}
}

func (s *customStream) Event(ev *Event, emit Emit) error {
	d := bytes.TrimSpace(ev.Data)
	if len(d) == 0 || d[0] != '{' {
		return emit(ev)
	}
	typ := jsonspan.Lookup(d, 0, "type")
	if typ.Start < 0 {
		return emit(ev)
	}
	switch string(d[typ.Start:typ.End]) {
	case `"response.output_item.added"`:
		return s.itemAdded(ev, d, emit)
	case `"response.function_call_arguments.delta"`:
		c, closed := s.find(where(d, jsonspan.NoSpan()))
		switch {
		case c != nil:
			return s.argsDelta(c, d, emit)
		case closed:
			return nil
		}
	case `"response.function_call_arguments.done"`:
		c, closed := s.find(where(d, jsonspan.NoSpan()))
		switch {
		case c != nil:
			args := jsonspan.Lookup(d, 0, "arguments")
			var full []byte
			if args.Start >= 0 && d[args.Start] == '"' {
				full = jsonspan.Unescape(nil, d[args.Start+1:args.End-1])
			}
			return s.finishInput(c, full, d, emit)
		case closed:
			return nil
		}
	case `"response.output_item.done"`:
		return s.itemDone(ev, d, emit)
	case `"response.completed"`, `"response.created"`, `"response.in_progress"`, `"response.queued"`:
		return s.responseEvent(ev, d, emit, false)
	case `"response.failed"`, `"response.incomplete"`:
		s.abandon("terminal " + string(d[typ.Start+1:typ.End-1]))
		return s.responseEvent(ev, d, emit, true)
	case `"error"`:
		s.abandon("upstream error event")
		return emit(ev)
	}
	return emit(ev)
}

// abandon drops partial calls: an interrupted call must not be completed
// from the fragments we happened to receive.
func (s *customStream) abandon(reason string) {
	seen := map[*customCall]bool{}
	for _, c := range s.open {
		if seen[c] {
			continue
		}
		seen[c] = true
		s.x.Decide(c.id.String(), "drop_partial_call", reason)
		s.x.CallBuffered(len(c.dec.Raw()))
		s.close(c, nil)
	}
	s.failed = true
}

func (s *customStream) End(emit Emit) error {
	if len(s.open) > 0 {
		s.abandon("stream ended before the call completed")
	}
	return nil
}

// converted resolves the function_call item at item to the identity this
// request converted, if any.
func (s *customStream) converted(d []byte, item jsonspan.Span) (ident, bool) {
	if item.Start < 0 || d[item.Start] != '{' || !jsonspan.IsString(d, jsonspan.Lookup(d, item.Start, "type"), "function_call") {
		return ident{}, false
	}
	var g [2]jsonspan.Span
	jsonspan.ObjectFields(d, item.Start, []string{"name", "namespace"}, g[:])
	name, _ := jsonspan.StringValue(d, g[0])
	ns, _ := jsonspan.StringValue(d, g[1])
	return s.t.resolve(s.rec, ns, name)
}

func (s *customStream) newCall(id ident, itemID string, outputIndex []byte, callID string) *customCall {
	c := &customCall{id: id, itemID: itemID, callID: callID, outputIndex: bytes.Clone(outputIndex)}
	c.dec.Limit = s.x.Limits.MaxCallBuffer
	if id.name == "apply_patch" {
		c.norm = new(patchfmt.Normalizer)
	}
	for _, k := range callKeys(itemID, c.outputIndex, callID) {
		s.open[k] = c
		delete(s.closed, k)
		delete(s.done, k)
	}
	return c
}

func (s *customStream) itemAdded(ev *Event, d []byte, emit Emit) error {
	if s.failed {
		return emit(ev)
	}
	item := jsonspan.Lookup(d, 0, "item")
	id, ok := s.converted(d, item)
	if !ok {
		return emit(ev)
	}
	itemID, oi := where(d, item)
	callID, _ := jsonspan.StringValue(d, jsonspan.Lookup(d, item.Start, "call_id"))
	s.newCall(id, itemID, oi, callID)
	s.x.Decide(id.String(), "restore_call", "stream header of a converted custom tool")
	repl := restoredItem(nil, d, item, id, []byte{})
	return emit(&Event{Name: ev.Name, Data: spliceOne(d, item, repl)})
}

func spliceOne(doc []byte, sp jsonspan.Span, repl []byte) []byte {
	out := make([]byte, 0, len(doc)-(sp.End-sp.Start)+len(repl))
	out = append(out, doc[:sp.Start]...)
	out = append(out, repl...)
	return append(out, doc[sp.End:]...)
}

func (s *customStream) argsDelta(c *customCall, d []byte, emit Emit) error {
	sp := jsonspan.Lookup(d, 0, "delta")
	if sp.Start < 0 || d[sp.Start] != '"' || c.inputDone {
		return nil
	}
	s.buf = jsonspan.Unescape(s.buf[:0], d[sp.Start+1:sp.End-1])
	text, err := c.dec.Write(s.buf)
	if err != nil {
		return s.overLimit(c)
	}
	if c.norm != nil && len(text) > 0 {
		text = []byte(c.norm.Write(string(text)))
	}
	if len(text) == 0 {
		return nil
	}
	c.emitted = append(c.emitted, text...)
	return emit(s.inputEvent(c, d, "response.custom_tool_call_input.delta", "delta", text))
}

func (s *customStream) overLimit(c *customCall) error {
	s.abandon("call arguments exceed max_call_buffer")
	return &StreamAbort{
		Code: "max_call_buffer_exceeded",
		Message: fmt.Sprintf("the arguments of tool call %q exceed the gateway's max_call_buffer of %d bytes",
			c.id.String(), s.x.Limits.MaxCallBuffer),
	}
}

var (
	nameInputDelta = []byte("response.custom_tool_call_input.delta")
	nameInputDone  = []byte("response.custom_tool_call_input.done")
)

// inputEvent builds a custom_tool_call_input event. Rewritten deltas carry
// no obfuscation padding: it was sized for the function-call text. The
// event lives in buffers reused for the next one; stages downstream copy
// what they keep, as for every event.
func (s *customStream) inputEvent(c *customCall, src []byte, typ, field string, text []byte) *Event {
	b := s.evbuf[:0]
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, '"')
	if jsonspan.Lookup(src, 0, "sequence_number").Start >= 0 {
		b = append(b, `,"sequence_number":0`...)
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
	b = jsonspan.AppendString(b, text)
	b = append(b, '}')
	s.evbuf = b
	s.ev = Event{Name: nameInputDone, Data: b}
	if field == "delta" {
		s.ev.Name = nameInputDelta
	}
	return &s.ev
}

// finishInput settles a call's input from the complete arguments (from the
// .done event or the finished item; nil falls back to what was streamed),
// sends whatever part of it the client has not seen, then the .done event.
func (s *customStream) finishInput(c *customCall, args []byte, src []byte, emit Emit) error {
	if c.inputDone {
		return nil
	}
	if args == nil {
		args = c.dec.Raw()
	} else if s.x.Limits.MaxCallBuffer > 0 && len(args) > s.x.Limits.MaxCallBuffer {
		return s.overLimit(c)
	}
	c.final = finalInput(c.id, args)
	c.inputDone = true
	s.x.CallBuffered(len(args))
	if rest, ok := bytes.CutPrefix(c.final, c.emitted); ok && len(rest) > 0 {
		if err := emit(s.inputEvent(c, src, "response.custom_tool_call_input.delta", "delta", rest)); err != nil {
			return err
		}
	} else if !ok {
		s.x.Decide(c.id.String(), "input_mismatch", "final arguments differ from the streamed ones; the done events carry the final input")
	}
	c.emitted = nil
	return emit(s.inputEvent(c, src, "response.custom_tool_call_input.done", "input", c.final))
}

func itemArgs(d []byte, item jsonspan.Span) []byte {
	if a := jsonspan.Lookup(d, item.Start, "arguments"); a.Start >= 0 && d[a.Start] == '"' {
		return jsonspan.Unescape(nil, d[a.Start+1:a.End-1])
	}
	return nil
}

func (s *customStream) itemDone(ev *Event, d []byte, emit Emit) error {
	item := jsonspan.Lookup(d, 0, "item")
	if item.Start < 0 || d[item.Start] != '{' {
		return emit(ev)
	}
	itemID, oi := where(d, item)
	callID, _ := jsonspan.StringValue(d, jsonspan.Lookup(d, item.Start, "call_id"))
	c, closed := s.findItem(callID, itemID, oi)
	if closed {
		return nil
	}
	if c == nil {
		// A finished item whose header never came: deliver it whole, so the
		// client never sees the raw function call.
		id, ok := s.converted(d, item)
		if !ok || s.failed {
			return emit(ev)
		}
		return s.deliver(d, item, id, itemID, oi, callID, emit)
	}
	if !c.inputDone {
		if err := s.finishInput(c, itemArgs(d, item), d, emit); err != nil {
			return err
		}
	}
	s.close(c, c.final)
	s.x.Restored++
	repl := restoredItem(nil, d, item, c.id, c.final)
	return emit(&Event{Name: ev.Name, Data: spliceOne(d, item, repl)})
}

// deliver sends a converted call that the stream never opened, or opened
// but never finished, as the item events a client expects: added (unless
// already sent), the input, its done event, and output_item.done.
func (s *customStream) deliver(d []byte, item jsonspan.Span, id ident, itemID string, oi []byte, callID string, emit Emit) error {
	c := s.newCall(id, itemID, oi, callID)
	s.x.Decide(id.String(), "restore_call", "finished item of a converted custom tool")
	if err := emit(s.itemEvent(d, "response.output_item.added", c.outputIndex, restoredItem(nil, d, item, id, []byte{}))); err != nil {
		return err
	}
	return s.complete(c, d, item, emit)
}

func (s *customStream) complete(c *customCall, d []byte, item jsonspan.Span, emit Emit) error {
	if err := s.finishInput(c, itemArgs(d, item), d, emit); err != nil {
		return err
	}
	s.close(c, c.final)
	s.x.Restored++
	return emit(s.itemEvent(d, "response.output_item.done", c.outputIndex, restoredItem(nil, d, item, c.id, c.final)))
}

// responseEvent rewrites the response object carried by lifecycle events.
// On response.completed, converted calls the stream never delivered as items
// are completed from the final output first, so the client, which takes
// items from output_item.done, does not lose them.
func (s *customStream) responseEvent(ev *Event, d []byte, emit Emit, terminalFailure bool) error {
	resp := jsonspan.Lookup(d, 0, "response")
	if resp.Start < 0 || d[resp.Start] != '{' {
		return emit(ev)
	}
	if !terminalFailure && jsonspan.IsString(d, jsonspan.Lookup(d, 0, "type"), "response.completed") {
		if err := s.completeMissing(d, resp, emit); err != nil {
			return err
		}
	}
	done := func(callID, itemID string, pos int) ([]byte, bool) {
		keys := callKeys(itemID, []byte(strconv.Itoa(pos)), callID)
		slices.Reverse(keys) // call id first: it is the one key unique per call
		for _, k := range keys {
			if in, ok := s.done[k]; ok {
				return in, true
			}
		}
		return nil, false
	}
	edits := s.t.restoreResponseObject(s.x, d, resp, done, terminalFailure)
	if len(edits) == 0 {
		return emit(ev)
	}
	return emit(&Event{Name: ev.Name, Data: jsonspan.Apply(d, edits)})
}

// completeMissing emits the item events for converted calls that appear in
// response.completed's output but were never finished on the stream. The
// output position is the call's output_index.
func (s *customStream) completeMissing(d []byte, resp jsonspan.Span, emit Emit) error {
	out := jsonspan.Lookup(d, resp.Start, "output")
	if out.Start < 0 {
		return nil
	}
	pos := -1
	var err error
	jsonspan.EachElement(d, out.Start, func(el jsonspan.Span) bool {
		pos++
		id, ok := s.converted(d, el)
		if !ok {
			return true
		}
		var g [2]jsonspan.Span
		jsonspan.ObjectFields(d, el.Start, []string{"id", "call_id"}, g[:])
		itemID, _ := jsonspan.StringValue(d, g[0])
		callID, _ := jsonspan.StringValue(d, g[1])
		oi := []byte(strconv.Itoa(pos))
		switch c, closed := s.findItem(callID, itemID, oi); {
		case closed:
			// settled, or dropped: nothing to add
		case c != nil:
			err = s.complete(c, d, el, emit)
		default:
			err = s.deliver(d, el, id, itemID, oi, callID, emit)
		}
		return err == nil
	})
	return err
}

func (s *customStream) itemEvent(src []byte, typ string, outputIndex, item []byte) *Event {
	b := make([]byte, 0, len(item)+96)
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, '"')
	if jsonspan.Lookup(src, 0, "sequence_number").Start >= 0 {
		b = append(b, `,"sequence_number":0`...)
	}
	b = append(b, `,"output_index":`...)
	b = append(b, outputIndex...)
	b = append(b, `,"item":`...)
	b = append(b, item...)
	b = append(b, '}')
	return &Event{Name: []byte(typ), Data: b}
}
