package toolsplan

import (
	"bytes"
	"slices"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

var namespaceKey = []byte(`"namespace"`)

// --- definitions -------------------------------------------------------------

// writeDefinitions rewrites every definition list that the plan changes,
// each as one edit of the array's contents, and counts what the upstream
// gets.
func (p *toolPlan) writeDefinitions() error {
	w := p.w
	lists := make([][]int, len(w.Lists()))
	for i := range w.Nodes {
		if n := &w.Nodes[i]; n.Kind == transforms.NodeDefinition && n.Parent() < 0 {
			lists[n.List()] = append(lists[n.List()], i)
		}
	}
	wroteTop := false
	for r, list := range lists {
		sp := w.ListSpan(r)
		if sp.Start < 0 {
			continue
		}
		top := w.Lists()[r] == "tools"
		if p.noTools() {
			if !top && len(list) > 0 {
				// The top-level list goes whole; these lists are emptied.
				w.Edit(sp.Start+1, sp.End-1, nil, true)
			}
			continue
		}
		out, changed := p.entries(make([]byte, 0, sp.End-sp.Start+sp.End/8+64), 0, list)
		if p.strays(sp, list) {
			p.x.Decide(w.Lists()[r], "drop", "entries that are not tool objects")
			changed = true
		}
		if top {
			wroteTop = true
			if len(p.loaded) > 0 {
				out = p.writeLoaded(out, 0)
				changed = true
			}
			if len(out) == 0 && changed {
				// Nothing is left to send: the member goes, not an empty
				// list some upstreams refuse.
				p.emptyTop = true
				continue
			}
		}
		if changed {
			w.Edit(sp.Start+1, sp.End-1, out, true)
		}
	}
	if !wroteTop && len(p.loaded) > 0 && !p.noTools() {
		// No top-level list to add them to: the member is created.
		out := append(p.writeLoaded([]byte(`"tools":[`), len(`"tools":[`)), ']')
		at := jsonspan.SkipSpace(w.Doc, 0) + 1
		if next := jsonspan.SkipSpace(w.Doc, at); next < len(w.Doc) && w.Doc[next] != '}' {
			out = append(out, ',')
		}
		w.Edit(at, at, out, true)
	}
	return nil
}

// strays reports anything in the array sp besides the definitions of
// list (a null, a string): it is not sent on.
func (p *toolPlan) strays(sp jsonspan.Span, list []int) bool {
	doc := p.w.Doc
	gap := func(a, b int) bool {
		for _, c := range doc[a:b] {
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != ',' {
				return true
			}
		}
		return false
	}
	at := sp.Start + 1
	for _, i := range list {
		if gap(at, p.w.Nodes[i].Start) {
			return true
		}
		at = p.w.Nodes[i].End
	}
	return gap(at, sp.End-1)
}

// writeLoaded appends the definitions earlier tool searches loaded: as
// functions, or, where the upstream keeps namespaces, inside their
// namespace.
func (p *toolPlan) writeLoaded(out []byte, base int) []byte {
	native := p.t.Namespaces == "native"
	for i := 0; i < len(p.loaded); {
		l := p.loaded[i]
		if !native || l.ns == "" {
			i++
			if p.only != nil && !p.only[codecKey{"function", l.ns, l.name}] {
				continue
			}
			out = p.sep(out, base)
			out = p.function(out, l.doc, jsonspan.Span{Start: 0, End: len(l.doc)}, codecKey{"function", l.ns, l.name}, false)
			p.count++
			continue
		}
		// The tools of one loaded namespace, together.
		j := i
		var tools []byte
		for ; j < len(p.loaded) && jsonspan.SameSlice(p.loaded[j].nsDoc, l.nsDoc); j++ {
			c := p.loaded[j]
			if p.only != nil && !p.only[codecKey{"function", c.ns, c.name}] {
				continue
			}
			tools = p.sep(tools, 0)
			tools = p.function(tools, c.doc, jsonspan.Span{Start: 0, End: len(c.doc)}, codecKey{"function", c.ns, c.name}, false)
			p.count++
		}
		i = j
		if len(tools) == 0 {
			continue
		}
		out = p.sep(out, base)
		ow := jsonspan.NewObj(out)
		jsonspan.EachMember(l.nsDoc, 0, func(m jsonspan.Member) bool {
			switch {
			case m.KeyIs(l.nsDoc, "tools"):
				ow.Key("tools")
				ow.B = append(ow.B, '[')
				ow.B = append(ow.B, tools...)
				ow.B = append(ow.B, ']')
			case m.KeyIs(l.nsDoc, "defer_loading"):
			default:
				ow.Raw(l.nsDoc, m)
			}
			return true
		})
		out = ow.Close()
	}
	return out
}

// noTools reports a plan that sends no tools at all (tool_choice "none"
// where the upstream has no such mode).
func (p *toolPlan) noTools() bool { return p.only != nil && len(p.only) == 0 }

// sep separates an entry from the ones written since base.
func (p *toolPlan) sep(out []byte, base int) []byte {
	if len(out) > base {
		out = append(out, ',')
	}
	return out
}

// entries writes the planned definitions of the sibling nodes list,
// joined by commas, and reports whether anything differs from the
// original bytes.
func (p *toolPlan) entries(out []byte, base int, list []int) ([]byte, bool) {
	w := p.w
	doc := w.Doc
	changed := false
	for _, i := range list {
		n := &w.Nodes[i]
		d := p.defs[i]
		if d == nil {
			out = p.sep(out, base)
			out = append(out, doc[n.Start:n.End]...)
			continue
		}
		if p.only != nil && p.notChosen(n, d) {
			if d.action != "drop" {
				name := d.client.String()
				if d.client.typ == "" {
					name = n.Type
				}
				p.x.Decide(name, "drop", "tool_choice names another tool, imitated by sending only that one")
			}
			changed = true
			continue
		}
		switch d.action {
		case "drop":
			changed = true
		case "flatten":
			out, _ = p.entries(out, base, p.children(i))
			changed = true
		case "degrade":
			out = p.sep(out, base)
			out = p.degraded(out, n, d.client)
			w.MarkConverted(n)
			p.count++
			changed = true
		case "rename":
			up := p.codec.name(d.client)
			flat := d.client.ns != "" && p.t.Namespaces == "flatten"
			strip := p.t.action("tool_search") != actNative && d.deferred
			if up == n.Name && !flat && !strip {
				out = p.sep(out, base)
				out = append(out, doc[n.Start:n.End]...)
			} else {
				out = p.sep(out, base)
				out = p.function(out, doc, n.Span(), d.client, w.Protocol == transforms.ProtocolChat)
				w.MarkConverted(n)
				changed = true
			}
			p.count++
		default: // keep: a native type, or a native namespace
			if n.Type != "namespace" {
				out = p.sep(out, base)
				out = append(out, doc[n.Start:n.End]...)
				p.count++
				continue
			}
			children := p.children(i)
			c, ch := p.entries(nil, 0, children)
			if len(c) == 0 && len(children) > 0 {
				// Every tool of it stays back: a namespace without tools
				// is not sent.
				p.x.Decide(n.Name, "drop", "none of its tools is sent")
				changed = true
				continue
			}
			out = p.sep(out, base)
			stripDefer := d.deferred && p.t.action("tool_search") != actNative
			if !ch && !stripDefer {
				out = append(out, doc[n.Start:n.End]...)
				continue
			}
			changed = true
			ow := jsonspan.NewObj(out)
			jsonspan.EachMember(doc, n.Start, func(m jsonspan.Member) bool {
				if stripDefer && m.KeyIs(doc, "defer_loading") {
					return true
				}
				if m.KeyIs(doc, "tools") {
					ow.Key("tools")
					ow.B = append(ow.B, '[')
					ow.B = append(ow.B, c...)
					ow.B = append(ow.B, ']')
				} else {
					ow.Raw(doc, m)
				}
				return true
			})
			out = ow.Close()
		}
	}
	return out, changed
}

// notChosen reports a definition an imitated choice leaves out: tools are
// chosen by identity, native hosted tools by type.
func (p *toolPlan) notChosen(n *transforms.ToolNode, d *defDecision) bool {
	switch {
	case d.client.typ != "":
		return !p.only[d.client]
	case d.action == "keep" && n.Type != "namespace":
		return !p.onlyTypes[n.Type]
	}
	return false
}

// children lists the direct definitions of the namespace at node i.
func (p *toolPlan) children(i int) []int {
	w := p.w
	var c []int
	end := int(w.Nodes[i].Next())
	for j := i + 1; j < end; j = int(w.Nodes[j].Next()) {
		c = append(c, j)
	}
	return c
}

// function writes a function definition from the one at obj in doc under
// its upstream name: the namespace member goes when namespaces are
// flattened, defer_loading when the upstream cannot defer. Chat's nested
// shape is renamed inside.
func (p *toolPlan) function(out, doc []byte, obj jsonspan.Span, k codecKey, chat bool) []byte {
	up := p.codec.name(k)
	stripDefer := p.t.action("tool_search") != actNative
	flat := p.t.Namespaces == "flatten"
	def := doc[obj.Start:obj.End]
	if !chat && !(flat && bytes.Contains(def, namespaceKey)) && !(stripDefer && bytes.Contains(def, deferLoading)) {
		// Only the name changes: splice it in; the name sits near the
		// start, so the schema after it is not parsed.
		if v := jsonspan.Lookup(doc, obj.Start, "name"); v.Start >= 0 {
			out = append(out, doc[obj.Start:v.Start]...)
			out = jsonspan.AppendStringStr(out, up)
			return append(out, doc[v.End:obj.End]...)
		}
	}
	ow := jsonspan.NewObj(out)
	jsonspan.EachMember(doc, obj.Start, func(m jsonspan.Member) bool {
		switch {
		case m.KeyIs(doc, "name") && !chat:
			ow.Key("name")
			ow.B = jsonspan.AppendStringStr(ow.B, up)
		case m.KeyIs(doc, "namespace") && flat && !chat:
		case m.KeyIs(doc, "defer_loading") && stripDefer:
		case m.KeyIs(doc, "function") && chat && doc[m.Value.Start] == '{':
			ow.Key("function")
			ow.B = p.function(ow.B, doc, m.Value, k, false)
		default:
			ow.Raw(doc, m)
		}
		return true
	})
	return ow.Close()
}

// degraded writes the function that stands in for a built-in tool.
func (p *toolPlan) degraded(out []byte, n *transforms.ToolNode, k codecKey) []byte {
	ow := jsonspan.NewObj(out)
	ow.Key("type")
	ow.B = append(ow.B, `"function"`...)
	if p.w.Protocol == transforms.ProtocolChat {
		// Chat nests the function under its type.
		ow.Key("function")
		fw := jsonspan.NewObj(ow.B)
		p.degradedBody(&fw, n, k)
		ow.B = fw.Close()
		return ow.Close()
	}
	p.degradedBody(&ow, n, k)
	return ow.Close()
}

// degradedBody writes the name, description, parameters and strict of a
// degraded built-in.
func (p *toolPlan) degradedBody(ow *jsonspan.ObjWriter, n *transforms.ToolNode, k codecKey) {
	doc := p.w.Doc
	obj := n.Start
	if n.InnerStart >= 0 {
		obj = n.InnerStart
	}
	ow.Key("name")
	ow.B = jsonspan.AppendStringStr(ow.B, p.codec.name(k))
	var f [2]jsonspan.Span
	jsonspan.ObjectFields(doc, obj, []string{"description", "parameters"}, f[:])
	desc, schema := builtinSchema(k.typ)
	ow.Key("description")
	if d, ok := jsonspan.StringValue(doc, f[0]); ok && d != "" && k.typ == "tool_search" {
		ow.B = append(ow.B, doc[f[0].Start:f[0].End]...)
	} else {
		ow.B = jsonspan.AppendStringStr(ow.B, desc)
	}
	ow.Key("parameters")
	if k.typ == "tool_search" && f[1].Start >= 0 && doc[f[1].Start] == '{' {
		ow.B = append(ow.B, doc[f[1].Start:f[1].End]...) // the client's own search parameters
	} else {
		ow.B = append(ow.B, schema...)
	}
	ow.Key("strict")
	ow.B = append(ow.B, "false"...)
}

// --- tool_choice ---------------------------------------------------------------

// planChoice plans tool_choice for the upstream's modes in this request's
// thinking state. A supported choice passes, renamed where its tool was; a
// named choice the upstream cannot take is imitated by sending only that
// tool; "required" becomes "auto" (or a 400 with unsupported_choice
// reject); "none" without the mode sends no tools. Never silently dropped.
// It returns the edit to make once the definitions are written.
func (p *toolPlan) planChoice() (func(), error) {
	w := p.w
	doc := w.Doc
	var top *transforms.ToolNode
	var allowed []*transforms.ToolNode
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind != transforms.NodeChoice {
			continue
		}
		if n.Allowed {
			allowed = append(allowed, n)
		} else {
			top = n
		}
	}
	if top == nil {
		return nil, nil
	}
	p.choiceNode = top
	modes := p.t.choiceModes[0]
	state := "without thinking"
	if p.thinking {
		modes = p.t.choiceModes[1]
		state = "while thinking"
	}
	chat := w.Protocol == transforms.ProtocolChat
	replace := func(repl string) func() {
		return func() {
			w.Edit(top.Start, top.End, []byte(repl), true)
		}
	}
	if top.Type == "" {
		mode, _ := jsonspan.StringValue(doc, top.Span())
		switch {
		case modes[mode]:
			return nil, nil
		case mode == choiceNone:
			p.only = map[codecKey]bool{}
			p.x.Decide("tool_choice", "degrade", "the upstream has no tool_choice none: no tools are sent")
			return p.removeTools(), nil
		case mode == choiceRequired && p.t.UnsupportedChoice == actReject:
			return nil, planError("unsupported_tool_choice", "tool_choice", "tool_choice \"required\" is not supported by the upstream %s (tools_plan profile %s)", state, p.t.Profile)
		case mode == choiceRequired && modes[choiceAuto]:
			p.x.Decide("tool_choice", "degrade", "required is not supported "+state+": sent as auto")
			return replace(`"auto"`), nil
		case mode == choiceAuto || mode == choiceRequired:
			p.x.Decide("tool_choice", "degrade", mode+" is not supported "+state+": left to the upstream's default")
			return p.removeChoice(top), nil
		}
		return nil, nil
	}
	if top.Type == "allowed_tools" {
		return p.planAllowed(top, allowed, modes, state, chat)
	}
	if err := p.ambiguous(top); err != nil {
		return nil, err
	}
	k, ok := p.choiceTarget(top)
	if !ok {
		if a := p.t.action(top.Type); a == actNative {
			return nil, nil // a native tool type's own choice
		}
		return nil, planError("unsupported_tool_choice", "tool_choice", "tool_choice names a %s tool, which the upstream does not have (tools_plan profile %s)", top.Type, p.t.Profile)
	}
	if why, dropped := p.dropped[k]; dropped || !p.declared[k] {
		if !dropped {
			why = "it is not declared"
		}
		return nil, planError("unsupported_tool_choice", "tool_choice", "tool_choice names tool %q, which cannot be sent to the upstream: %s", clashName(k), why)
	}
	up := p.codec.name(k)
	if modes[choiceNamed] {
		if up == top.Name && top.Type == "function" && (k.ns == "" || p.t.Namespaces == "native") {
			return nil, nil
		}
		return replace(p.namedChoice(k, chat)), nil
	}
	p.only = map[codecKey]bool{k: true}
	switch {
	case modes[choiceRequired]:
		p.x.Decide(k.String(), "degrade_tool_choice", "a named choice is not supported "+state+": only this tool is sent, with required")
		return replace(`"required"`), nil
	case modes[choiceAuto]:
		p.x.Decide(k.String(), "degrade_tool_choice", "a named choice is not supported "+state+": only this tool is sent, with auto")
		return replace(`"auto"`), nil
	}
	p.x.Decide(k.String(), "degrade_tool_choice", "a named choice is not supported "+state+": only this tool is sent")
	return p.removeChoice(top), nil
}

// planAllowed plans an allowed_tools choice: kept with its entries renamed
// where the upstream takes it, else imitated by sending only those tools.
func (p *toolPlan) planAllowed(top *transforms.ToolNode, entries []*transforms.ToolNode, modes map[string]bool, state string, chat bool) (func(), error) {
	doc := p.w.Doc
	var keys []codecKey
	var native int
	var sel [][]byte // the entries the upstream gets, in order
	var unsent []string
	for _, e := range entries {
		if err := p.ambiguous(e); err != nil {
			return nil, err
		}
		k, ok := p.choiceTarget(e)
		if !ok {
			if p.t.action(e.Type) == actNative {
				// A native tool's selector stays as it is.
				sel = append(sel, doc[e.Start:e.End])
				native++
				if p.onlyTypes == nil {
					p.onlyTypes = map[string]bool{}
				}
				p.onlyTypes[e.Type] = true
				continue
			}
			unsent = append(unsent, e.Type)
			p.x.Decide(e.Type, "drop", "allowed_tools names a tool type the upstream does not have")
			continue
		}
		if _, dropped := p.dropped[k]; dropped || !p.declared[k] {
			unsent = append(unsent, clashName(k))
			p.x.Decide(k.String(), "drop", "allowed_tools names a tool that is not sent")
			continue
		}
		keys = append(keys, k)
		sel = append(sel, []byte(p.namedChoice(k, chat)))
	}
	if len(keys) == 0 && native == 0 {
		return nil, planError("unsupported_tool_choice", "tool_choice", "none of the tools tool_choice allows can be sent to the upstream (tools_plan profile %s): %s", p.t.Profile, strings.Join(unsent, ", "))
	}
	mode := "auto"
	if sp := p.allowedMode(top); sp.Start >= 0 {
		mode, _ = jsonspan.StringValue(doc, sp)
	}
	if modes[choiceAllowed] {
		return func() {
			b := []byte(`{"type":"allowed_tools",`)
			if chat {
				b = append(b, `"allowed_tools":{`...)
			}
			b = append(b, `"mode":`...)
			b = jsonspan.AppendStringStr(b, mode)
			b = append(b, `,"tools":[`...)
			for i, e := range sel {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, e...)
			}
			b = append(b, ']', '}')
			if chat {
				b = append(b, '}')
			}
			p.w.Edit(top.Start, top.End, b, true)
		}, nil
	}
	p.only = map[codecKey]bool{}
	for _, k := range keys {
		p.only[k] = true
	}
	p.x.Decide("tool_choice", "degrade_tool_choice", "allowed_tools is not supported "+state+": only the allowed tools are sent")
	switch {
	case mode == choiceRequired && modes[choiceRequired]:
		return func() { p.w.Edit(top.Start, top.End, []byte(`"required"`), true) }, nil
	case mode == choiceRequired && p.t.UnsupportedChoice == actReject:
		return nil, planError("unsupported_tool_choice", "tool_choice", "tool_choice allowed_tools with mode required is not supported by the upstream %s (tools_plan profile %s)", state, p.t.Profile)
	case modes[choiceAuto]:
		return func() { p.w.Edit(top.Start, top.End, []byte(`"auto"`), true) }, nil
	}
	return p.removeChoice(top), nil
}

func (p *toolPlan) allowedMode(top *transforms.ToolNode) jsonspan.Span {
	doc := p.w.Doc
	if inner := jsonspan.Lookup(doc, top.Start, "allowed_tools"); inner.Start >= 0 && doc[inner.Start] == '{' {
		return jsonspan.Lookup(doc, inner.Start, "mode")
	}
	return jsonspan.Lookup(doc, top.Start, "mode")
}

// bareNames indexes the declared namespaced functions by their name alone,
// once per request.
func (p *toolPlan) bareNames() map[string][]codecKey {
	if p.bare == nil {
		p.bare = map[string][]codecKey{}
		for d := range p.declared {
			if d.typ == "function" && d.ns != "" {
				p.bare[d.name] = append(p.bare[d.name], d)
			}
		}
	}
	return p.bare
}

// ambiguous reports a selector that names, by its name alone, tools of
// several namespaces.
func (p *toolPlan) ambiguous(n *transforms.ToolNode) error {
	if n.Type != "function" || n.Namespace != "" || p.declared[codecKey{"function", "", n.Name}] {
		return nil
	}
	if c := p.bareNames()[n.Name]; len(c) > 1 {
		ns := make([]string, len(c))
		for i, k := range c {
			ns[i] = k.ns
		}
		slices.Sort(ns)
		return planError("ambiguous_tool_choice", n.Where(), "tool_choice names %q without a namespace, and the namespaces %s each have a tool of that name", n.Name, strings.Join(ns, ", "))
	}
	return nil
}

// choiceTarget is the identity a selector names.
func (p *toolPlan) choiceTarget(n *transforms.ToolNode) (codecKey, bool) {
	switch {
	case n.Type == "function" && n.Name != "":
		k := codecKey{"function", n.Namespace, n.Name}
		if n.Namespace == "" && !p.declared[k] {
			// A selector may name a namespaced tool by its name alone,
			// when only one namespace has a tool of that name.
			if c := p.bareNames()[n.Name]; len(c) == 1 {
				return c[0], true
			}
		}
		return k, true
	case n.Type != "" && p.t.action(n.Type) == actDegrade:
		b := builtinName(n.Type)
		return codecKey{b, "", b}, true
	}
	return codecKey{}, false
}

// namedChoice is a selector of one planned tool, in its namespace when the
// upstream keeps namespaces.
func (p *toolPlan) namedChoice(k codecKey, chat bool) string {
	q := string(jsonspan.AppendStringStr(nil, p.codec.name(k)))
	if chat {
		return `{"type":"function","function":{"name":` + q + `}}`
	}
	if k.ns != "" && p.t.Namespaces == "native" {
		return `{"type":"function","namespace":` + string(jsonspan.AppendStringStr(nil, k.ns)) + `,"name":` + q + `}`
	}
	return `{"type":"function","name":` + q + `}`
}

// removeChoice deletes the tool_choice member.
func (p *toolPlan) removeChoice(top *transforms.ToolNode) func() {
	return func() {
		e := jsonspan.RemoveMember(p.w.Doc, top.Span())
		p.w.Edit(e.Start, e.End, nil, true)
	}
}

// removeTools deletes tools and tool_choice: the request must not call
// tools and the upstream cannot be told so.
func (p *toolPlan) removeTools() func() {
	return func() { p.w.RemoveTopMembers("tools", "tool_choice") }
}
