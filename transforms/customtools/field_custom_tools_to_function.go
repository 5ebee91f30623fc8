// Package customtools is the field_custom_tools_to_function transform: it
// declares freeform custom tools (Codex CLI's apply_patch) to the upstream
// as JSON functions, and gives the upstream's calls to them back to the
// client as custom tool calls, in JSON bodies and streams, repairing
// apply_patch patches on the way (patchfmt).
package customtools

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"net/http"
	"strings"
	"sync"
	"unsafe"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/patchfmt"
	"github.com/llmtransform/caddy-llm-transform/streambuf"
)

func init() {
	caddy.RegisterModule(CustomToolsToFunction{})
}

// CustomToolsToFunction lets clients that use freeform ("custom") tools,
// such as Codex CLI's apply_patch, talk to upstreams that only know JSON
// function tools. Requests get function definitions with a single string
// parameter "input"; history and tool_choice follow. Responses turn the
// upstream's function calls back into custom calls, in JSON and in streams,
// but only for tools this very request converted, so a native function that
// happens to share a name is never touched. apply_patch input is normalised
// on the way back (see patchfmt).
type CustomToolsToFunction struct {
	// The custom tools to convert, by name; "*" selects every custom tool.
	// Default: ["apply_patch"]. An empty list converts nothing.
	Names []string `json:"names,omitempty"`

	all   bool
	names map[string]bool
}

// CaddyModule returns the Caddy module information.
func (CustomToolsToFunction) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  transforms.ModuleID("field_custom_tools_to_function"),
		New: func() caddy.Module { return new(CustomToolsToFunction) },
	}
}

// Provision compiles the name list.
func (t *CustomToolsToFunction) Provision(caddy.Context) error {
	if t.Names == nil {
		t.Names = []string{"apply_patch"}
	}
	t.names = make(map[string]bool, len(t.Names))
	for _, n := range t.Names {
		switch n {
		case "":
			return fmt.Errorf("names: empty tool name")
		case "*":
			t.all = true
		default:
			t.names[n] = true
		}
	}
	return nil
}

// UnmarshalCaddyfile sets up the transform from its rule block. Syntax:
//
//	rule field_custom_tools_to_function {
//		names <name>...
//	}
func (t *CustomToolsToFunction) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // transform name
	for d.NextBlock(0) {
		switch d.Val() {
		case "names":
			if t.Names != nil {
				return d.Err("names already specified")
			}
			t.Names = d.RemainingArgs()
			if len(t.Names) == 0 {
				return d.ArgErr()
			}
		default:
			return d.Errf("unrecognized option %q", d.Val())
		}
	}
	return nil
}

// PairedPhases implements PairedPhases.
func (*CustomToolsToFunction) PairedPhases() string {
	return "the request phase converts custom tools and only the response phase of the same rule turns the calls back into custom calls"
}

func (t *CustomToolsToFunction) selects(name string) bool {
	return name != "" && (t.all || t.names[name])
}

// ident is a tool identity as the client declared it: its effective
// namespace and its name.
type ident struct{ ns, name string }

func (i ident) String() string { return transforms.ToolID{Namespace: i.ns, Name: i.name}.String() }

// customRecord is what one rule's request phase learnt, for its response
// phase. What it converted is in the exchange's tool map.
type customRecord struct {
	converted      int
	fromDescriptor map[ident]bool     // converted identities whose definition was converted
	known          map[string][]ident // identities by name, for calls without a namespace
	seen           map[ident]bool     // what known holds, so adding is constant time
	calls          map[string]ident   // history call_id -> converted identity
	checked        map[uint64]bool    // patches already checked against the grammar
}

// patchSeed seeds the hashes of checked patches, compared within one
// process.
var patchSeed = maphash.MakeSeed()

// firstCheck reports whether patch is seen for the first time: a streamed
// call's patch is finished once for its events and may be again for the
// final response object, and must be counted once.
func (r *customRecord) firstCheck(patch []byte) bool {
	h := maphash.Bytes(patchSeed, patch)
	if r.checked[h] {
		return false
	}
	if r.checked == nil {
		r.checked = map[uint64]bool{}
	}
	r.checked[h] = true
	return true
}

func (t *CustomToolsToFunction) record(x *transforms.Exchange) *customRecord {
	return x.Record(t, func() any {
		return &customRecord{fromDescriptor: map[ident]bool{}, known: map[string][]ident{}, seen: map[ident]bool{}, calls: map[string]ident{}}
	}).(*customRecord)
}

func (r *customRecord) addKnown(id ident) {
	if !r.seen[id] {
		r.seen[id] = true
		r.known[id.name] = append(r.known[id.name], id)
	}
}

func (t *CustomToolsToFunction) converted(x *transforms.Exchange, id ident) bool {
	_, ok := x.Tools().Client(t, transforms.ToolID{Type: "function", Namespace: id.ns, Name: id.name})
	return ok
}

// resolve decides whether a function call coming back from the upstream is
// one this rule converted, and returns the client-side identity. A call
// without a namespace is restored only when its name is unambiguous.
func (t *CustomToolsToFunction) resolve(x *transforms.Exchange, ns, name string) (ident, bool) {
	r := t.record(x)
	if r.converted == 0 || !t.selects(name) {
		return ident{}, false
	}
	if ns != "" {
		id := ident{ns, name}
		return id, t.converted(x, id)
	}
	cands := r.known[name]
	if len(cands) == 1 {
		return cands[0], t.converted(x, cands[0])
	}
	// History items may carry a tool without the namespace its definition
	// sits in (Codex's Responses-lite puts every tool in "functions"). Then
	// the definitions decide: exactly one converted definition of that name,
	// and no native tool sharing it.
	var def ident
	defs := 0
	for _, c := range cands {
		if !t.converted(x, c) {
			return ident{}, false
		}
		if r.fromDescriptor[c] {
			def, defs = c, defs+1
		}
	}
	return def, defs == 1
}

// --- request side ---------------------------------------------------------

// customPlan is one request's conversion, planned over the tool nodes
// before any byte changes, so a rejected request is never half converted.
type customPlan struct {
	t      *CustomToolsToFunction
	x      *transforms.Exchange
	w      *transforms.ToolWalk
	rec    *customRecord
	native map[ident]int // native function definitions, by their node
	picked map[ident]int // identities to convert, by the first node that named them
	// sized, while historyCallSize measures a call, adds up what the
	// quoted inputs, written empty, will take.
	sized *int
}

// historyCallSize returns the exact length historyCall writes for n: the
// call written with its input empty, plus the quoted input's length, which
// is counted, not escaped twice.
func (p *customPlan) historyCallSize(n *transforms.ToolNode) int {
	extra := 0
	p.sized = &extra
	size := p.w.Measure(func(dst []byte) []byte { return p.historyCall(dst, n) })
	p.sized = nil
	return size + extra
}

// RewriteRequest implements RequestRewriter.
func (t *CustomToolsToFunction) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	if !t.all && len(t.names) == 0 {
		return body, nil
	}
	w := transforms.WalkTools(x, body)
	if w == nil {
		return body, nil
	}
	p := &customPlan{t: t, x: x, w: w, rec: t.record(x), native: map[ident]int{}, picked: map[ident]int{}}
	var outs, choices []int
	for i := range w.Nodes {
		n := &w.Nodes[i]
		id := ident{n.Namespace, n.Name}
		switch {
		case n.Kind == transforms.NodeDefinition && (n.Type == "function" || (n.Type == "" && n.InnerStart >= 0)):
			// (A Chat tool without a type is a function to the servers
			// that take it.)
			p.rec.addKnown(id)
			p.native[id] = i
		case n.Kind == transforms.NodeDefinition && n.Type == "custom":
			p.rec.addKnown(id)
			if t.selects(n.Name) {
				p.pick(id, i)
				p.rec.fromDescriptor[id] = true
				x.Decide(id.String(), "convert_definition", "custom tool selected by names")
				w.Replace(n, p.definition(n))
			}
		case n.Kind == transforms.NodeCall && w.Protocol == transforms.ProtocolChat && n.InnerStart < 0:
			// an entry without its function or custom object: not ours
		case n.Kind == transforms.NodeCall && (n.Type == "function_call" || n.Type == "function"):
			// A function call in the history never conflicts: it may be
			// one of ours that a client kept unrestored, and refusing it
			// would refuse every later turn of the conversation.
			p.rec.addKnown(id)
		case n.Kind == transforms.NodeCall && (n.Type == "custom_tool_call" || n.Type == "custom"):
			p.rec.addKnown(id)
			if t.selects(n.Name) {
				p.pick(id, i)
				if n.CallID != "" {
					p.rec.calls[n.CallID] = id
				}
				// Patches are most of a Codex request: each is written
				// straight into the new body.
				w.ReplaceWithExact(n, p.historyCallSize(n), func(dst []byte) []byte { return p.historyCall(dst, n) })
			}
		case n.Kind == transforms.NodeOutput && n.Type == "custom_tool_call_output":
			outs = append(outs, i)
		case n.Kind == transforms.NodeChoice && n.Type == "custom":
			choices = append(choices, i)
		}
	}
	// Only definitions decide conflicts: a custom and a native function
	// definition of one identity leave no way to tell their calls apart.
	// The first in the document is reported.
	clash, clashAt := ident{}, -1
	for id, at := range p.picked {
		if _, native := p.native[id]; native && p.rec.fromDescriptor[id] && (clashAt < 0 || at < clashAt) {
			clash, clashAt = id, at
		}
	}
	if clashAt >= 0 {
		return nil, &transforms.Error{
			Status: http.StatusBadRequest,
			Type:   "invalid_request_error",
			Code:   "custom_tool_conflict",
			Param:  w.Nodes[clashAt].Where(),
			Message: fmt.Sprintf("custom tool %q cannot be converted to a function: a native function with the same namespace and name is declared at %s",
				clash, w.Nodes[p.native[clash]].Where()),
		}
	}
	for _, i := range outs {
		p.output(&w.Nodes[i])
	}
	for _, i := range choices {
		p.choice(&w.Nodes[i])
	}
	if w.Edits() == 0 {
		return body, nil
	}
	for id := range p.picked {
		if _, native := p.native[id]; native {
			// A custom call in the history of a tool now declared as a
			// function: the upstream gets it as a function call, and the
			// function's calls stay functions.
			x.Decide(id.String(), "convert_history_only", "a native function of this name is declared")
			continue
		}
		x.Tools().Link(t, transforms.ToolID{Type: "custom", Namespace: id.ns, Name: id.name}, transforms.ToolID{Type: "function", Namespace: id.ns, Name: id.name})
		p.rec.converted++
	}
	return w.Rewrite(), nil
}

func (p *customPlan) pick(id ident, node int) {
	if _, ok := p.picked[id]; !ok {
		p.picked[id] = node
	}
}

func (p *customPlan) definition(n *transforms.ToolNode) []byte {
	if p.w.Protocol == transforms.ProtocolChat {
		return p.chatDefinition(n)
	}
	return p.functionBody(nil, n.Span(), n.Name, true)
}

func (p *customPlan) historyCall(dst []byte, n *transforms.ToolNode) []byte {
	if p.w.Protocol == transforms.ProtocolChat {
		return p.chatHistoryCall(dst, n)
	}
	return p.responsesHistoryCall(dst, n)
}

// functionBody writes the function definition made from the custom tool
// object at obj: Responses' flat tool (flat: its "type" becomes "function")
// or Chat's inner "custom" object. The grammar cannot be expressed as a JSON
// schema, so format goes and the generated schema and strict:false replace
// it; every other member stays.
func (p *customPlan) functionBody(dst []byte, obj jsonspan.Span, name string, flat bool) []byte {
	doc := p.w.Doc
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

// responsesHistoryCall turns a custom_tool_call into a function_call. The
// input is wrapped exactly once, even when it already looks like JSON, and
// the custom item id is dropped: Responses upstreams reject ctc_ ids on
// function items, and call_id is what correlates the pair.
func (p *customPlan) responsesHistoryCall(dst []byte, n *transforms.ToolNode) []byte {
	doc := p.w.Doc
	w := jsonspan.NewObj(dst)
	// The walk found the input already: its end is known, so the patch is
	// not scanned a second time to copy the members around it.
	jsonspan.WalkMembers(doc, n.Start, func(k jsonspan.Span, v int) int {
		if input := n.InputSpan(); v == input.Start {
			return input.End
		}
		e := jsonspan.SkipValue(doc, v)
		switch {
		case jsonspan.KeyIs(doc, k, "type"):
			w.Key("type")
			w.B = append(w.B, `"function_call"`...)
		case jsonspan.KeyIs(doc, k, "id"), jsonspan.KeyIs(doc, k, "input"):
		default:
			w.Raw(doc, jsonspan.Member{Key: k, Value: jsonspan.Span{Start: v, End: e}})
		}
		return e
	})
	wrapInput(&w, doc, n.InputSpan(), p.sized)
	return w.Close()
}

// wrapInput writes "arguments" as {"input": <the raw input value>}, wrapped
// exactly once; an absent input becomes the empty string. With sized set
// it writes "" and adds what the wrapped input would take beyond it.
func wrapInput(w *jsonspan.ObjWriter, doc []byte, v jsonspan.Span, sized *int) {
	w.Key("arguments")
	switch {
	case v.Start < 0:
		w.B = append(w.B, `"{\"input\":\"\"}"`...)
	case sized != nil:
		w.B = append(w.B, `""`...)
		if lit := doc[v.Start:v.End]; lit[0] == '"' {
			// The walk validated it: quotes and backslashes are all
			// there is to count.
			*sized += wrapLen + jsonspan.LiteralQuotedLen(lit) - len(`""`)
		} else {
			*sized += jsonspan.QuotedLen(inputOpen, lit, inputClose) - len(`""`)
		}
	default:
		w.B = jsonspan.AppendQuoted(w.B, inputOpen, doc[v.Start:v.End], inputClose)
	}
}

var inputOpen, inputClose = []byte(`{"input":`), []byte("}")

// wrapLen is what the quoted wrapping adds around the input.
var wrapLen = jsonspan.QuotedLen(inputOpen, inputClose)

// output converts a custom_tool_call_output whose call was converted, or
// which names a converted definition explicitly.
func (p *customPlan) output(n *transforms.ToolNode) {
	_, owned := p.rec.calls[n.CallID]
	if !owned {
		id := ident{n.Namespace, n.Name}
		_, picked := p.picked[id]
		owned = p.t.selects(n.Name) && p.rec.fromDescriptor[id] && picked
	}
	if !owned {
		return
	}
	// Two small edits: an output can be large, and nothing else in it
	// changes.
	p.w.EditNode(n, n.TypeSpan().Start, n.TypeSpan().End, functionCallOutput)
	if n.IDSpan().Start >= 0 {
		e := jsonspan.RemoveMember(p.w.Doc, n.IDSpan())
		p.w.EditNode(n, e.Start, e.End, nil)
	}
}

var functionCallOutput = []byte(`"function_call_output"`)

// choice rewrites a {"type":"custom",…} selector, alone or inside
// allowed_tools, when this rule converted the tool's definition. A nested
// "custom" object is renamed "function" with its contents untouched.
func (p *customPlan) choice(n *transforms.ToolNode) {
	doc := p.w.Doc
	id := ident{n.Namespace, n.Name}
	if _, picked := p.picked[id]; !picked || !p.rec.fromDescriptor[id] {
		return
	}
	w := jsonspan.NewObj(nil)
	jsonspan.Retype(&w, doc, n.Span(), "function", func(w *jsonspan.ObjWriter, m jsonspan.Member) bool {
		if !m.KeyIs(doc, "custom") {
			return false
		}
		w.Key("function")
		w.B = append(w.B, doc[m.Value.Start:m.Value.End]...)
		return true
	})
	p.x.Decide(id.String(), "convert_tool_choice", "tool_choice names a converted custom tool")
	p.w.Replace(n, w.Close())
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

// --- response side ----------------------------------------------------------

// WantsResponse implements ResponseRewriter.
func (t *CustomToolsToFunction) WantsResponse(x *transforms.Exchange) bool {
	return t.record(x).converted > 0
}

// RewriteResponse implements ResponseRewriter.
func (t *CustomToolsToFunction) RewriteResponse(x *transforms.Exchange, body []byte) ([]byte, error) {
	if !t.WantsResponse(x) {
		return body, nil
	}
	return transforms.RestoreCalls(x, t, body), nil
}

// NewStream implements ResponseRewriter.
func (t *CustomToolsToFunction) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	if !t.WantsResponse(x) {
		return nil
	}
	return transforms.NewCallStream(x, t)
}

// OpenCall implements CallPolicy: a function call of a tool this rule
// converted comes back as a custom call of the client's identity.
func (t *CustomToolsToFunction) OpenCall(x *transforms.Exchange, up transforms.ToolID) (transforms.ToolID, transforms.CallHandler, bool) {
	id, ok := t.resolve(x, up.Namespace, up.Name)
	if !ok {
		return transforms.ToolID{}, nil, false
	}
	dec, _ := decoderPool.Get().(*streambuf.ArgsDecoder)
	if dec == nil {
		dec = new(streambuf.ArgsDecoder)
	}
	dec.Reset()
	dec.Limit = x.Limits.MaxCallBuffer
	h := &customArgs{id: id, x: x, rec: t.record(x), dec: dec}
	if id.name == "apply_patch" {
		h.norm = new(patchfmt.Normalizer)
	}
	return transforms.ToolID{Type: "custom", Namespace: id.ns, Name: id.name}, h, true
}

// customArgs reveals a custom call's input from its function arguments as
// they stream: the "input" string is decoded as it arrives, and apply_patch
// text is normalised line by line.
type customArgs struct {
	id   ident
	x    *transforms.Exchange
	rec  *customRecord
	out  []byte
	dec  *streambuf.ArgsDecoder
	norm *patchfmt.Normalizer
	// sent is every byte Delta returned: when the complete arguments are
	// the ones streamed, it is the input, and Finish need not decode and
	// normalise the call a second time.
	sent []byte
	// arena holds the decoded text handed to the normaliser, which keeps
	// pieces of it (a partial line, a hunk under review): bytes once
	// written there are never written again, so they may back strings.
	arena []byte
	// fed is how much of the arena the normaliser has been given. The
	// text after it is a partial line that the normaliser would only
	// hold: it waits, in place, for the delta that ends the line, and the
	// line's deltas then cost the normaliser one call instead of one each.
	fed int
}

// arenaChunk is the size of the arena's chunks: a few hundred deltas each.
const arenaChunk = 4 << 10

func (c *customArgs) Delta(frag []byte) ([]byte, error) {
	if c.norm == nil {
		return c.appendSent(c.dec.Write(frag))
	}
	start := c.arenaFor(len(frag))
	arena, err := c.dec.AppendWrite(c.arena, frag)
	if err != nil {
		return nil, err
	}
	return c.appendSent(c.normalise(arena, start), nil)
}

// QuotedDelta implements quotedDeltaHandler: Delta for a fragment still
// quoted as the event carried it.
func (c *customArgs) QuotedDelta(doc []byte, at int) ([]byte, int, error) {
	if c.norm == nil {
		out, end, err := c.dec.AppendWriteQuoted(c.out[:0], doc, at)
		if err != nil || end < 0 {
			return nil, end, err
		}
		c.out = out
		text, err := c.appendSent(out, nil)
		return text, end, err
	}
	// The literal's length bounds the fragment's.
	start := c.arenaFor(len(doc) - at)
	arena, end, err := c.dec.AppendWriteQuoted(c.arena, doc, at)
	if err != nil || end < 0 {
		return nil, end, err
	}
	text, err := c.appendSent(c.normalise(arena, start), nil)
	return text, end, err
}

// arenaFor makes room in the arena for decoding a fragment of n bytes and
// returns where its text will start. The normaliser keeps pieces of what
// it is given: the decoder writes them straight into the arena, where
// bytes are never written twice. Decoding can turn a byte into three
// (U+FFFD) and finish an escape of up to 11 bytes held from the fragment
// before: with that much room append never moves the arena (were it to,
// what the normaliser keeps would still be intact, in the old array, only
// copied for nothing). It starts a delta's output in c.out.
func (c *customArgs) arenaFor(n int) int {
	c.out = c.out[:0]
	if room := 3*(n+11) + 16; cap(c.arena)-len(c.arena) < room {
		// What waits for its line's end must go before the text it
		// joins stops being next to it.
		c.feedHeld()
		c.arena, c.fed = make([]byte, 0, max(room, arenaChunk)), 0
	}
	return len(c.arena)
}

// normalise takes the arena the decoder extended, passes the text it
// decoded from start to the normaliser, unless the normaliser would only
// hold it, and returns what that releases, valid until the next delta.
func (c *customArgs) normalise(arena []byte, start int) []byte {
	c.arena = arena
	if !c.norm.Holds(arena[start:]) {
		c.feedHeld()
	}
	return c.out
}

// feedHeld gives the normaliser the arena's text it has not had yet and
// appends what that releases to c.out.
func (c *customArgs) feedHeld() {
	if held := c.arena[c.fed:]; len(held) > 0 {
		c.out = c.norm.AppendWrite(c.out, unsafe.String(unsafe.SliceData(held), len(held)))
		c.fed = len(c.arena)
	}
}

// appendSent records what Delta returns.
func (c *customArgs) appendSent(text []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	c.sent = jsonspan.AppendPooled(c.sent, text)
	return text, nil
}

func (c *customArgs) Raw() []byte { return c.dec.Raw() }

// decoderPool recycles argument decoders and the raw arguments they hold:
// a stream's calls each grow one to their size.
var decoderPool sync.Pool // of *streambuf.ArgsDecoder

// Release implements CallReleaser.
func (c *customArgs) Release() {
	if c.dec != nil && cap(c.dec.Raw()) <= maxPooledDecoder {
		decoderPool.Put(c.dec)
	}
	c.dec = nil
	jsonspan.PutPooled(c.sent)
	c.sent = nil
	// The normaliser's views of the arena go with the handler.
	c.arena, c.norm = nil, nil
}

// maxPooledDecoder keeps a freak call's buffer out of the pool.
const maxPooledDecoder = 1 << 20

func (c *customArgs) Finish(raw []byte) []byte {
	var in []byte
	if c.streamedWhole(raw) {
		// The stream may keep the text a while: a copy of its own size,
		// and the pooled buffer it streamed into goes back.
		var tail string
		if c.norm != nil {
			c.out = c.out[:0]
			c.feedHeld()
			tail = string(c.out) + c.norm.Finish()
		}
		in = make([]byte, len(c.sent)+len(tail))
		copy(in[copy(in, c.sent):], tail)
		jsonspan.PutPooled(c.sent)
		c.sent = nil
	} else {
		in = finalInput(c.id, raw)
	}
	if c.id.name == "apply_patch" && c.rec.firstCheck(in) {
		// Normalising repairs what models habitually get wrong; what it
		// cannot repair still goes to the client, whose apply_patch reports
		// it, but operators should see how often that happens.
		// in is not written again: Validate may read it without a copy.
		if err := patchfmt.Validate(unsafe.String(unsafe.SliceData(in), len(in))); err != nil {
			c.x.CountPatchInvalid()
			c.x.Decide(c.id.String(), "patch_invalid", err.Error())
		}
	}
	return in
}

// streamedWhole reports whether raw, the complete arguments, are exactly
// the ones streamed and their "input" string was decoded to its end: what
// Delta returned is then the whole input, as finalInput would find it.
func (c *customArgs) streamedWhole(raw []byte) bool {
	d := c.dec
	if d == nil || len(raw) == 0 || !d.InputComplete() || d.Failed() || !bytes.Equal(raw, d.Raw()) {
		return false
	}
	// raw must be valid JSON too, or finalInput takes it as the input. The
	// decoder checked the input string as it went; what surrounds it is
	// checked with the string emptied, a few bytes rather than the whole
	// patch once more.
	start, end := d.InputSpan()
	var buf [64]byte
	around := append(buf[:0], raw[:start]...)
	around = append(around, '"', '"')
	around = append(around, raw[end:]...)
	return jsonspan.Valid(bytes.TrimSpace(around))
}

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
		return jsonspan.Unescape(make([]byte, 0, len(t)), t[1:len(t)-1])
	case '{':
		var f [4]jsonspan.Span
		jsonspan.ObjectFields(t, 0, []string{"input", "patch", "command", "content"}, f[:])
		for k, sp := range f {
			if sp.Start < 0 || t[sp.Start] != '"' {
				continue
			}
			v := jsonspan.Unescape(make([]byte, 0, sp.End-sp.Start), t[sp.Start+1:sp.End-1])
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
	if len(in) > 0 && len(args) > 0 && &in[0] == &args[0] {
		// Arguments that are not JSON come back as they are: a copy, since
		// they may sit in a decoder that goes back to its pool.
		in = bytes.Clone(in)
	}
	return in
}

// Interface guards
var (
	_ caddy.Provisioner           = (*CustomToolsToFunction)(nil)
	_ caddyfile.Unmarshaler       = (*CustomToolsToFunction)(nil)
	_ transforms.RequestRewriter  = (*CustomToolsToFunction)(nil)
	_ transforms.ResponseRewriter = (*CustomToolsToFunction)(nil)
	_ transforms.PairedPhases     = (*CustomToolsToFunction)(nil)
	_ transforms.CallPolicy       = (*CustomToolsToFunction)(nil)
)
