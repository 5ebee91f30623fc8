package transforms

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

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
	edits  []edit
	chat   bool
	native map[ident]string // native function identities and where they were seen
	picked []pickedCustom
	outs   []span // custom_tool_call_output items, decided after all calls are known
	choice span
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
	var tools, choice span = span{-1, -1}, span{-1, -1}
	end := walkMembers(body, 0, func(k span, v int) int {
		var e int
		switch {
		case keyIs(body, k, "tools"):
			e = p.walkTools(v, "", "tools")
			tools = span{v, e}
		case keyIs(body, k, "input") && !p.chat:
			e = p.walkInput(v)
		case keyIs(body, k, "messages") && p.chat:
			e = p.walkMessages(v)
		case keyIs(body, k, "tool_choice"):
			e = skipValue(body, v)
			choice = span{v, e}
		default:
			e = skipValue(body, v)
		}
		return e
	})
	if end < 0 || skipSpace(body, end) != len(body) {
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
	if choice.start >= 0 {
		p.planChoice(choice)
	}
	if len(p.edits) == 0 {
		return body, nil
	}
	for _, pc := range p.picked {
		p.rec.converted[pc.id] = true
	}
	if p.rec.origTools == nil && tools.start >= 0 {
		p.rec.origTools = bytes.Clone(body[tools.start:tools.end])
	}
	if p.rec.origChoice == nil && choice.start >= 0 {
		p.rec.origChoice = bytes.Clone(body[choice.start:choice.end])
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
		return skipValue(p.doc, start) // not a list of tools: nothing of ours
	}
	i := 0
	return eachElement(p.doc, start, func(el span) bool {
		path := where + "[" + strconv.Itoa(i) + "]"
		i++
		var f [5]span
		objectFields(p.doc, el.start, []string{"type", "name", "namespace", "tools", "custom"}, f[:])
		typ, _ := stringValue(p.doc, f[0])
		name, _ := stringValue(p.doc, f[1])
		ns, _ := stringValue(p.doc, f[2])
		if ns == "" {
			ns = enclosing
		}
		switch typ {
		case "namespace":
			if f[3].start >= 0 {
				return p.walkTools(f[3].start, name, path+".tools") >= 0
			}
		case "function":
			if p.chat {
				name = nestedString(p.doc, el.start, "function", "name")
			}
			id := ident{ns, name}
			p.rec.addKnown(id)
			p.native[id] = path
		case "custom":
			if p.chat {
				name = nestedString(p.doc, el.start, "custom", "name")
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
			p.edits = append(p.edits, edit{el.start, el.end, repl})
		}
		return true
	})
}

// descriptor rewrites a flat Responses custom tool into a function tool.
func (p *requestPlan) descriptor(el span, name string) []byte {
	return p.functionBody(nil, el, name, true)
}

// functionBody writes the function definition made from the custom tool
// object at obj: Responses' flat tool (flat: its "type" becomes "function")
// or Chat's inner "custom" object. The grammar cannot be expressed as a JSON
// schema, so format goes and the generated schema and strict:false replace
// it; every other member stays.
func (p *requestPlan) functionBody(dst []byte, obj span, name string, flat bool) []byte {
	doc := p.doc
	patch := name == "apply_patch"
	w := newObj(dst)
	hasDesc := false
	eachMember(doc, obj.start, func(m member) bool {
		switch {
		case flat && m.keyIs(doc, "type"):
			w.key("type")
			w.b = append(w.b, `"function"`...)
		case m.keyIs(doc, "format"), m.keyIs(doc, "strict"), m.keyIs(doc, "parameters"), flat && m.keyIs(doc, "custom"):
		case m.keyIs(doc, "description") && patch:
			hasDesc = true
			w.key("description")
			w.b = appendPatchDescription(w.b, doc, m.value)
		default:
			w.raw(doc, m)
		}
		return true
	})
	if patch && !hasDesc {
		w.key("description")
		w.b = appendJSONString(w.b, patchUsage)
	}
	w.key("parameters")
	w.b = appendSchema(w.b, patch)
	w.key("strict")
	w.b = append(w.b, "false"...)
	return w.close()
}

var inputFields = []string{"type", "name", "namespace", "call_id", "tools"}

// walkInput visits Responses history items, scanning each item once.
func (p *requestPlan) walkInput(start int) int {
	doc := p.doc
	if start >= len(doc) || doc[start] != '[' {
		return skipValue(doc, start) // a plain string prompt
	}
	var f [5]span
	i := -1
	return eachObject(doc, start, inputFields, f[:], func(el span, f []span) bool {
		i++
		typ := f[0]
		switch {
		case isString(doc, typ, "additional_tools"):
			if f[4].start >= 0 {
				return p.walkTools(f[4].start, "", "input["+strconv.Itoa(i)+"].tools") >= 0
			}
		case isString(doc, typ, "function_call"):
			name, _ := stringValue(doc, f[1])
			ns, _ := stringValue(doc, f[2])
			id := ident{ns, name}
			p.rec.addKnown(id)
			if _, seen := p.native[id]; !seen {
				p.native[id] = "input[" + strconv.Itoa(i) + "]"
			}
		case isString(doc, typ, "custom_tool_call"):
			name, _ := stringValue(doc, f[1])
			ns, _ := stringValue(doc, f[2])
			id := ident{ns, name}
			p.rec.addKnown(id)
			if !p.t.selects(name) {
				return true
			}
			if !p.isPicked(id) { // format the location once per identity
				p.pick(id, "input["+strconv.Itoa(i)+"]")
			}
			if callID, ok := stringValue(doc, f[3]); ok {
				p.rec.calls[callID] = id
			}
			p.edits = append(p.edits, edit{el.start, el.end, p.historyCall(el)})
		case isString(doc, typ, "custom_tool_call_output"):
			p.outs = append(p.outs, el)
		}
		return true
	})
}

// historyCall turns a custom_tool_call into a function_call. The input is
// wrapped exactly once, even when it already looks like JSON, and the
// custom item id is dropped: Responses upstreams reject ctc_ ids on
// function items, and call_id is what correlates the pair.
func (p *requestPlan) historyCall(el span) []byte {
	doc := p.doc
	w := newObj(make([]byte, 0, el.end-el.start+64))
	input := span{-1, -1}
	retype(&w, doc, el, "function_call", func(w *objWriter, m member) bool {
		switch {
		case m.keyIs(doc, "id"):
		case m.keyIs(doc, "input"):
			input = m.value
		default:
			return false
		}
		return true
	})
	wrapInput(&w, doc, input)
	return w.close()
}

// wrapInput writes "arguments" as {"input": <the raw input value>}, wrapped
// exactly once; an absent input becomes the empty string.
func wrapInput(w *objWriter, doc []byte, v span) {
	w.key("arguments")
	if v.start < 0 {
		w.b = append(w.b, `"{\"input\":\"\"}"`...)
		return
	}
	w.b = appendQuotedJSON(w.b, []byte(`{"input":`), doc[v.start:v.end], []byte("}"))
}

// planOutput converts a custom_tool_call_output whose call was converted, or
// which names a converted definition explicitly.
func (p *requestPlan) planOutput(el span) {
	doc := p.doc
	var f [3]span
	objectFields(doc, el.start, []string{"call_id", "name", "namespace"}, f[:])
	callID, _ := stringValue(doc, f[0])
	_, owned := p.rec.calls[callID]
	if !owned {
		name, ok := stringValue(doc, f[1])
		ns, _ := stringValue(doc, f[2])
		owned = ok && p.t.selects(name) && p.rec.fromDescriptor[ident{ns, name}] && p.isPicked(ident{ns, name})
	}
	if !owned {
		return
	}
	w := newObj(nil)
	retype(&w, doc, el, "function_call_output", dropMember(doc, "id"))
	p.edits = append(p.edits, edit{el.start, el.end, w.close()})
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
func (p *requestPlan) planChoice(sp span) {
	doc := p.doc
	if doc[sp.start] != '{' {
		return // "auto", "required", "none"
	}
	typ := lookup(doc, sp.start, "type")
	switch {
	case isString(doc, typ, "custom"):
		if repl, ok := p.choiceEntry(sp); ok {
			p.edits = append(p.edits, edit{sp.start, sp.end, repl})
		}
	case isString(doc, typ, "allowed_tools"):
		tools := lookup(doc, sp.start, "tools")
		if p.chat {
			if inner := lookup(doc, sp.start, "allowed_tools"); inner.start >= 0 && doc[inner.start] == '{' {
				tools = lookup(doc, inner.start, "tools")
			}
		}
		if tools.start < 0 {
			return
		}
		eachElement(doc, tools.start, func(el span) bool {
			if isString(doc, lookup(doc, el.start, "type"), "custom") {
				if repl, ok := p.choiceEntry(el); ok {
					p.edits = append(p.edits, edit{el.start, el.end, repl})
				}
			}
			return true
		})
	}
}

// choiceEntry rewrites one {"type":"custom",...} selector. The name may sit
// flat or in a nested "custom" object; the nested object is renamed to
// "function" with its contents untouched.
func (p *requestPlan) choiceEntry(el span) ([]byte, bool) {
	doc := p.doc
	var f [3]span
	objectFields(doc, el.start, []string{"name", "namespace", "custom"}, f[:])
	name, _ := stringValue(doc, f[0])
	ns, _ := stringValue(doc, f[1])
	if f[2].start >= 0 && doc[f[2].start] == '{' {
		if name == "" {
			name, _ = stringValue(doc, lookup(doc, f[2].start, "name"))
		}
		if ns == "" {
			ns, _ = stringValue(doc, lookup(doc, f[2].start, "namespace"))
		}
	}
	id := ident{ns, name}
	if !p.rec.fromDescriptor[id] || !p.isPicked(id) {
		return nil, false
	}
	w := newObj(nil)
	retype(&w, doc, el, "function", func(w *objWriter, m member) bool {
		if !m.keyIs(doc, "custom") {
			return false
		}
		w.key("function")
		w.b = append(w.b, doc[m.value.start:m.value.end]...)
		return true
	})
	p.x.Decide(id.String(), "convert_tool_choice", "tool_choice names a converted custom tool")
	return w.close(), true
}

func nestedString(doc []byte, start int, obj, key string) string {
	o := lookup(doc, start, obj)
	if o.start < 0 || doc[o.start] != '{' {
		return ""
	}
	s, _ := stringValue(doc, lookup(doc, o.start, key))
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

func appendPatchDescription(dst, doc []byte, v span) []byte {
	desc, ok := stringValue(doc, v)
	if !ok {
		return appendJSONString(dst, patchUsage)
	}
	if strings.Contains(desc, patchUsageMarker) {
		return append(dst, doc[v.start:v.end]...)
	}
	if strings.TrimSpace(desc) == "" {
		return appendJSONString(dst, patchUsage)
	}
	return appendJSONString(dst, desc+"\n\n"+patchUsage)
}

var (
	genericSchema = schemaJSON(genericInputDescription)
	patchSchema   = schemaJSON(patchInputDescription)
)

func schemaJSON(desc string) []byte {
	b := []byte(`{"type":"object","properties":{"input":{"type":"string","description":`)
	b = appendJSONString(b, desc)
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
	if len(t) == 0 || !validDocument(t) {
		return args
	}
	switch t[0] {
	case '"':
		return unescapeJSON(nil, t[1:len(t)-1])
	case '{':
		var f [4]span
		objectFields(t, 0, []string{"input", "patch", "command", "content"}, f[:])
		for k, sp := range f {
			if sp.start < 0 || t[sp.start] != '"' {
				continue
			}
			v := unescapeJSON(nil, t[sp.start+1:sp.end-1])
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
func restoredItem(dst, doc []byte, el span, id ident, input []byte) []byte {
	if input == nil {
		if a := lookup(doc, el.start, "arguments"); a.start >= 0 && doc[a.start] == '"' {
			input = finalInput(id, unescapeJSON(nil, doc[a.start+1:a.end-1]))
		} else {
			input = finalInput(id, nil)
		}
	}
	w := newObj(dst)
	sawNS := false
	retype(&w, doc, el, "custom_tool_call", func(w *objWriter, m member) bool {
		switch {
		case m.keyIs(doc, "arguments"):
			w.key("input")
			w.b = streambuf.AppendJSONString(w.b, input)
			return true
		case m.keyIs(doc, "namespace"):
			sawNS = true
		}
		return false
	})
	if !sawNS && id.ns != "" {
		w.key("namespace")
		w.b = appendJSONString(w.b, id.ns)
	}
	return w.close()
}

// restoreResponseObject rewrites a Responses response object: converted
// output items, and the echoed tools and tool_choice. On a stream, done
// gives the inputs the stream already settled, by output position and item
// id; with onlyDone, calls the stream did not complete stay as they are.
func (t *customTools) restoreResponseObject(x *Exchange, doc []byte, obj span, done func(callID, itemID string, pos int) ([]byte, bool), onlyDone bool) []edit {
	r := record(x)
	var f [3]span
	objectFields(doc, obj.start, []string{"output", "tools", "tool_choice"}, f[:])
	var edits []edit
	if f[0].start >= 0 {
		pos := -1
		eachElement(doc, f[0].start, func(el span) bool {
			pos++
			if !isString(doc, lookup(doc, el.start, "type"), "function_call") {
				return true
			}
			var g [4]span
			objectFields(doc, el.start, []string{"name", "namespace", "id", "call_id"}, g[:])
			name, _ := stringValue(doc, g[0])
			ns, _ := stringValue(doc, g[1])
			id, ok := t.resolve(r, ns, name)
			if !ok {
				return true
			}
			var input []byte
			if done != nil {
				itemID, _ := stringValue(doc, g[2])
				callID, _ := stringValue(doc, g[3])
				var seen bool
				if input, seen = done(callID, itemID, pos); !seen && onlyDone {
					return true // never build a call the stream did not complete
				}
			} else {
				x.Restored++
				x.Decide(id.String(), "restore_call", "function call of a converted custom tool")
			}
			edits = append(edits, edit{el.start, el.end, restoredItem(nil, doc, el, id, input)})
			return true
		})
	}
	if r.origTools != nil && f[1].start >= 0 {
		edits = append(edits, edit{f[1].start, f[1].end, r.origTools})
	}
	if r.origChoice != nil && f[2].start >= 0 {
		edits = append(edits, edit{f[2].start, f[2].end, r.origChoice})
	}
	return edits
}

func (t *customTools) RewriteResponse(x *Exchange, body []byte) ([]byte, error) {
	if x.Protocol == ProtocolChat {
		return t.chatResponse(x, body)
	}
	if x.Protocol != ProtocolResponses || !record(x).active() || !validDocument(body) {
		return body, nil
	}
	return x.applyEdits(body, t.restoreResponseObject(x, body, span{skipSpace(body, 0), len(body)}, nil, false)), nil
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
func where(d []byte, item span) (itemID string, outputIndex []byte) {
	var f [2]span
	objectFields(d, 0, []string{"item_id", "output_index"}, f[:])
	if item.start >= 0 {
		itemID, _ = stringValue(d, lookup(d, item.start, "id"))
	} else {
		itemID, _ = stringValue(d, f[0])
	}
	if f[1].start >= 0 {
		outputIndex = d[f[1].start:f[1].end]
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
	typ := lookup(d, 0, "type")
	if typ.start < 0 {
		return emit(ev)
	}
	switch string(d[typ.start:typ.end]) {
	case `"response.output_item.added"`:
		return s.itemAdded(ev, d, emit)
	case `"response.function_call_arguments.delta"`:
		c, closed := s.find(where(d, span{-1, -1}))
		switch {
		case c != nil:
			return s.argsDelta(c, d, emit)
		case closed:
			return nil
		}
	case `"response.function_call_arguments.done"`:
		c, closed := s.find(where(d, span{-1, -1}))
		switch {
		case c != nil:
			args := lookup(d, 0, "arguments")
			var full []byte
			if args.start >= 0 && d[args.start] == '"' {
				full = unescapeJSON(nil, d[args.start+1:args.end-1])
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
		s.abandon("terminal " + string(d[typ.start+1:typ.end-1]))
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
func (s *customStream) converted(d []byte, item span) (ident, bool) {
	if item.start < 0 || d[item.start] != '{' || !isString(d, lookup(d, item.start, "type"), "function_call") {
		return ident{}, false
	}
	var g [2]span
	objectFields(d, item.start, []string{"name", "namespace"}, g[:])
	name, _ := stringValue(d, g[0])
	ns, _ := stringValue(d, g[1])
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
	item := lookup(d, 0, "item")
	id, ok := s.converted(d, item)
	if !ok {
		return emit(ev)
	}
	itemID, oi := where(d, item)
	callID, _ := stringValue(d, lookup(d, item.start, "call_id"))
	s.newCall(id, itemID, oi, callID)
	s.x.Decide(id.String(), "restore_call", "stream header of a converted custom tool")
	repl := restoredItem(nil, d, item, id, []byte{})
	return emit(&Event{Name: ev.Name, Data: spliceOne(d, item, repl)})
}

func spliceOne(doc []byte, sp span, repl []byte) []byte {
	out := make([]byte, 0, len(doc)-(sp.end-sp.start)+len(repl))
	out = append(out, doc[:sp.start]...)
	out = append(out, repl...)
	return append(out, doc[sp.end:]...)
}

func (s *customStream) argsDelta(c *customCall, d []byte, emit Emit) error {
	sp := lookup(d, 0, "delta")
	if sp.start < 0 || d[sp.start] != '"' || c.inputDone {
		return nil
	}
	s.buf = unescapeJSON(s.buf[:0], d[sp.start+1:sp.end-1])
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
	if lookup(src, 0, "sequence_number").start >= 0 {
		b = append(b, `,"sequence_number":0`...)
	}
	b = append(b, `,"item_id":`...)
	b = appendJSONString(b, c.itemID)
	if c.outputIndex != nil {
		b = append(b, `,"output_index":`...)
		b = append(b, c.outputIndex...)
	}
	b = append(b, `,"`...)
	b = append(b, field...)
	b = append(b, `":`...)
	b = streambuf.AppendJSONString(b, text)
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

func itemArgs(d []byte, item span) []byte {
	if a := lookup(d, item.start, "arguments"); a.start >= 0 && d[a.start] == '"' {
		return unescapeJSON(nil, d[a.start+1:a.end-1])
	}
	return nil
}

func (s *customStream) itemDone(ev *Event, d []byte, emit Emit) error {
	item := lookup(d, 0, "item")
	if item.start < 0 || d[item.start] != '{' {
		return emit(ev)
	}
	itemID, oi := where(d, item)
	callID, _ := stringValue(d, lookup(d, item.start, "call_id"))
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
func (s *customStream) deliver(d []byte, item span, id ident, itemID string, oi []byte, callID string, emit Emit) error {
	c := s.newCall(id, itemID, oi, callID)
	s.x.Decide(id.String(), "restore_call", "finished item of a converted custom tool")
	if err := emit(s.itemEvent(d, "response.output_item.added", c.outputIndex, restoredItem(nil, d, item, id, []byte{}))); err != nil {
		return err
	}
	return s.complete(c, d, item, emit)
}

func (s *customStream) complete(c *customCall, d []byte, item span, emit Emit) error {
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
	resp := lookup(d, 0, "response")
	if resp.start < 0 || d[resp.start] != '{' {
		return emit(ev)
	}
	if !terminalFailure && isString(d, lookup(d, 0, "type"), "response.completed") {
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
	return emit(&Event{Name: ev.Name, Data: applyEdits(d, edits)})
}

// completeMissing emits the item events for converted calls that appear in
// response.completed's output but were never finished on the stream. The
// output position is the call's output_index.
func (s *customStream) completeMissing(d []byte, resp span, emit Emit) error {
	out := lookup(d, resp.start, "output")
	if out.start < 0 {
		return nil
	}
	pos := -1
	var err error
	eachElement(d, out.start, func(el span) bool {
		pos++
		id, ok := s.converted(d, el)
		if !ok {
			return true
		}
		var g [2]span
		objectFields(d, el.start, []string{"id", "call_id"}, g[:])
		itemID, _ := stringValue(d, g[0])
		callID, _ := stringValue(d, g[1])
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
	if lookup(src, 0, "sequence_number").start >= 0 {
		b = append(b, `,"sequence_number":0`...)
	}
	b = append(b, `,"output_index":`...)
	b = append(b, outputIndex...)
	b = append(b, `,"item":`...)
	b = append(b, item...)
	b = append(b, '}')
	return &Event{Name: []byte(typ), Data: b}
}
