package toolsplan

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// planRecord is what one request's plan leaves for its response phase. The
// identities themselves are in the exchange's tool map.
type planRecord struct {
	linked int
	// shellEnv is the environment the client's shell tool declared, for
	// the shell_call items the plan restores.
	shellEnv []byte
}

func (t *ToolsPlan) record(x *transforms.Exchange) *planRecord {
	return x.Record(t, func() any { return &planRecord{} }).(*planRecord)
}

// builtinName is the function name a degraded built-in tool gets before the
// name rule applies, and the client type its calls come back as.
func builtinName(typ string) string {
	if typ == "computer_use_preview" {
		return "computer"
	}
	return typ
}

// defDecision is the plan for one definition node.
type defDecision struct {
	action   string // keep, rename, degrade, drop, flatten (a namespace)
	client   codecKey
	reason   string
	deferred bool // marked defer_loading:true
}

// toolPlan is one request's plan, made over the walk's nodes before any
// byte changes.
type toolPlan struct {
	t        *ToolsPlan
	x        *transforms.Exchange
	w        *transforms.ToolWalk
	rec      *planRecord
	codec    *nameCodec
	thinking bool
	defs     map[int]*defDecision // by node index
	// declared identities, kept or degraded, by client key: their upstream
	// type and namespace after planning.
	declared map[codecKey]bool
	dropped  map[codecKey]string   // identity -> why it was dropped
	loaded   []loadedTool          // tool_search_output definitions to append
	only     map[codecKey]bool     // a named choice imitated: only these tools
	bare     map[string][]codecKey // declared namespaced functions by name, on demand
	// onlyTypes are the native tool types an imitated allowed_tools keeps.
	onlyTypes  map[string]bool
	search     bool                 // a client tool_search is degraded here
	emptyTop   bool                 // every top-level tool was dropped
	choiceNode *transforms.ToolNode // the top-level tool_choice, if any
	// anyDeferred: the body mentions defer_loading at all, so definitions
	// are worth looking at one by one.
	anyDeferred bool
	count       int // definitions the upstream gets
	// aliased are the built-ins this request does not declare whose
	// history items stand for calls to a declared tool of the same name
	// (Codex's custom apply_patch beside an apply_patch_call of a turn
	// that used the built-in): that tool's identity.
	aliased map[string]codecKey
}

// loadedTool is a definition a tool_search_output in the history loaded.
type loadedTool struct {
	doc   []byte // the definition's bytes (inside the history item)
	ns    string // its namespace, for the tools of a loaded namespace
	name  string
	nsDoc []byte // that namespace's object
}

// planError is a 400 in the client's protocol shape.
func planError(code, param, format string, a ...any) *transforms.Error {
	return &transforms.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: code, Param: param, Message: fmt.Sprintf(format, a...)}
}

// RewriteRequest implements RequestRewriter.
func (t *ToolsPlan) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	if t.custom != nil && mayHoldCustom(body) {
		b, err := x.RewriteNested(t.custom, body)
		if err != nil {
			return nil, err
		}
		body = b
	}
	w := transforms.WalkTools(x, body)
	if w == nil {
		return body, nil
	}
	p := &toolPlan{t: t, x: x, w: w, rec: t.record(x), codec: newNameCodec(t.rule, len(w.Nodes)), thinking: t.thinks(body),
		defs: make(map[int]*defDecision, len(w.Nodes)), declared: make(map[codecKey]bool, len(w.Nodes)), dropped: map[codecKey]string{}}
	p.codec.scoped = t.Namespaces == "native"
	return p.run()
}

// mayHoldCustom reports whether a body can name a custom tool: the word,
// or an escape that could spell it. Requests without one skip the custom
// conversion's pass.
func mayHoldCustom(body []byte) bool {
	return bytes.Contains(body, []byte("custom")) || bytes.Contains(body, []byte(`\u`))
}

// thinks reports whether the request puts the upstream model in thinking
// mode, by the profile's model globs and fields.
func (t *ToolsPlan) thinks(body []byte) bool {
	if len(t.ThinkingModels) > 0 {
		if m, ok := jsonspan.StringValue(body, jsonspan.LastMember(body, "model")); ok {
			for _, g := range t.ThinkingModels {
				if transforms.GlobMatch(g, m) {
					return true
				}
			}
		}
	}
	for _, f := range t.thinking {
		v := lookupPath(body, f.path)
		if v.Start < 0 {
			continue
		}
		raw := string(body[v.Start:v.End])
		s, isStr := jsonspan.StringValue(body, v)
		if f.eq {
			if (isStr && s == f.value) || (!isStr && raw == f.value) {
				return true
			}
			continue
		}
		switch {
		case isStr && (s == "" || s == "none" || s == "disabled"):
		case !isStr && (raw == "false" || raw == "null"):
		default:
			return true
		}
	}
	return false
}

// lookupPath finds the value at a dotted path of object members.
func lookupPath(doc []byte, path string) jsonspan.Span {
	v := jsonspan.Span{Start: jsonspan.SkipSpace(doc, 0), End: len(doc)}
	for _, key := range strings.Split(path, ".") {
		if v.Start < 0 || v.Start >= len(doc) || doc[v.Start] != '{' {
			return jsonspan.NoSpan()
		}
		v = jsonspan.Lookup(doc, v.Start, key)
	}
	return v
}

func (p *toolPlan) run() ([]byte, error) {
	w := p.w
	p.anyDeferred = bytes.Contains(w.Doc, deferLoading)
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind == transforms.NodeDefinition && n.Type == "tool_search" && p.t.action("tool_search") == actDegrade && p.clientSearch(n) {
			p.search = true
		}
	}
	if err := p.planDefinitions(); err != nil {
		return nil, err
	}
	p.planHistory()
	if clash := p.codec.resolve(); clash != nil {
		return nil, planError("tool_name_conflict", "tools",
			"tools %q and %q both map to the upstream name %q under %s; rename one of them",
			clashName(clash.a), clashName(clash.b), clash.name, p.t.NamePattern)
	}
	if p.x.Deciding() {
		p.decideNames()
	}
	edits := w.Edits()
	choiceEdit, err := p.planChoice()
	if err != nil {
		return nil, err
	}
	if err := p.writeDefinitions(); err != nil {
		return nil, err
	}
	if max := p.t.maxTools; max > 0 && p.count > max {
		return nil, planError("too_many_tools", "tools",
			"the upstream takes at most %d tools (max_tools) and this request has %d after planning", max, p.count)
	}
	switch {
	case p.emptyTop && p.choiceNode != nil:
		p.x.Decide("tools", "drop", "no tool is left for the upstream: tools and tool_choice are not sent")
		p.removeTools()()
	case p.emptyTop:
		p.x.Decide("tools", "drop", "no tool is left for the upstream: tools is not sent")
		e := jsonspan.RemoveMember(w.Doc, w.Top("tools"))
		w.Edit(e.Start, e.End, nil, true)
	case choiceEdit != nil:
		choiceEdit()
	}
	p.writeHistory()
	if w.Edits() == edits {
		return w.Doc, nil
	}
	p.x.Tools().Reserve(len(p.codec.names))
	for k, up := range p.codec.names {
		client := transforms.ToolID{Type: k.typ, Namespace: k.ns, Name: k.name}
		upID := transforms.ToolID{Type: "function", Name: up}
		if k.typ == "function" && p.t.Namespaces == "native" {
			upID.Namespace = k.ns
		}
		if client != upID {
			p.x.Tools().Link(p.t, client, upID)
			p.rec.linked++
		}
	}
	return w.Rewrite(), nil
}

// decideNames records what became of every declared function's name.
func (p *toolPlan) decideNames() {
	for i := range p.w.Nodes {
		d := p.defs[i]
		if d == nil || d.action != "rename" {
			continue
		}
		switch up := p.codec.name(d.client); {
		case up != p.want(d.client):
			p.x.Decide(d.client.String(), "rename", "sent as "+up+": the upstream's names match "+p.t.rule.pattern)
		case up != d.client.name:
			p.x.Decide(d.client.String(), "flatten", "sent as "+up+": the upstream has no namespaces")
		default:
			p.x.Decide(d.client.String(), "keep", "a function the upstream takes as it is")
		}
	}
}

func clashName(k codecKey) string {
	if k.typ != "function" {
		return k.typ + " " + transforms.ToolID{Namespace: k.ns, Name: k.name}.String()
	}
	return transforms.ToolID{Namespace: k.ns, Name: k.name}.String()
}

// want is the name an identity asks for upstream, before the name rule.
func (p *toolPlan) want(k codecKey) string {
	if k.ns != "" && p.t.Namespaces == "flatten" {
		return k.ns + p.t.NamespaceSeparator + k.name
	}
	return k.name
}

func (p *toolPlan) addName(k codecKey) { p.codec.add(k, p.want(k)) }

// deferred reports a definition the client marked defer_loading:true.
func (p *toolPlan) deferred(n *transforms.ToolNode) bool {
	obj := n.Start
	if n.InnerStart >= 0 {
		obj = n.InnerStart
	}
	if !p.anyDeferred || !bytes.Contains(p.w.Doc[n.Start:n.End], deferLoading) {
		return false // the common case, found without parsing
	}
	v := jsonspan.Lookup(p.w.Doc, obj, "defer_loading")
	return v.Start >= 0 && string(p.w.Doc[v.Start:v.End]) == "true"
}

var deferLoading = []byte(`"defer_loading"`)

// planDefinitions decides every definition.
func (p *toolPlan) planDefinitions() error {
	w := p.w
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind != transforms.NodeDefinition {
			continue
		}
		d := &defDecision{deferred: p.deferred(n)}
		p.defs[i] = d
		inNS := n.Parent() >= 0
		if inNS {
			if pd := p.defs[int(n.Parent())]; pd != nil && pd.action == "drop" {
				d.action = "drop"
				continue
			}
		}
		switch {
		case n.Type == "function":
			d.client = codecKey{"function", n.Namespace, n.Name}
			if n.Name == "" {
				return planError("invalid_tool", n.Where(), "the function tool at %s has no name", n.Where())
			}
			if p.search && d.deferred {
				d.action, d.reason = "drop", "deferred: the model loads it through tool_search"
				p.dropped[d.client] = d.reason
				p.x.Decide(d.client.String(), "drop", d.reason)
				continue
			}
			d.action = "rename"
			p.addName(d.client)
			p.declared[d.client] = true
		case n.Type == "namespace" && inNS:
			d.action = "flatten"
		case n.Type == "namespace":
			if p.search && d.deferred {
				d.action, d.reason = "drop", "deferred: the model loads it through tool_search"
				p.x.Decide(n.Name, "drop", d.reason)
				continue
			}
			d.action = "keep"
			if p.t.Namespaces == "flatten" {
				d.action = "flatten"
				p.x.Decide(n.Name, "flatten_namespace", "the upstream has no namespaces")
			}
		default:
			typ := n.Type
			switch a := p.t.action(typ); a {
			case actNative:
				d.action = "keep"
				if inNS && p.t.Namespaces == "flatten" {
					p.x.Decide(n.Namespace+"."+n.Name, "keep", "native on this upstream, which has no namespaces: sent and called back without its namespace")
				} else {
					p.x.Decide(typ, "keep", "native on this upstream")
				}
			case actDegrade:
				d.action = "degrade"
				d.client = codecKey{builtinName(typ), "", builtinName(typ)}
				if typ == "tool_search" && !p.clientSearch(n) {
					d.action, d.reason = "drop", "server-executed tool_search needs the provider's own search"
					p.x.Decide(typ, "drop", d.reason)
					continue
				}
				if typ == "shell" {
					// A client runs a degraded shell itself: only an
					// environment a shell_call can name is kept.
					if env := jsonspan.Lookup(w.Doc, n.Start, "environment"); env.Start >= 0 && w.Doc[env.Start] == '{' &&
						(jsonspan.IsString(w.Doc, jsonspan.Lookup(w.Doc, env.Start, "type"), "local") || jsonspan.IsString(w.Doc, jsonspan.Lookup(w.Doc, env.Start, "type"), "container_reference")) {
						p.rec.shellEnv = append([]byte(nil), w.Doc[env.Start:env.End]...)
					}
				}
				p.addName(d.client)
				p.declared[d.client] = true
				p.x.Decide(typ, "degrade", "the upstream has no "+typ+" tool: declared as a function")
			case actReject:
				return planError("unsupported_tool", n.Where(), "tool type %q at %s is not supported by the upstream (tools_plan profile %s)", typ, n.Where(), p.t.Profile)
			default:
				d.action, d.reason = "drop", "the upstream has no "+typ+" tool"
				if typ == "" {
					d.reason = "a tool without a type"
				}
				p.dropped[codecKey{builtinName(typ), "", builtinName(typ)}] = d.reason
				p.x.Decide(typ, "drop", d.reason)
			}
		}
	}
	return nil
}

// clientSearch reports a tool_search the client executes itself.
func (p *toolPlan) clientSearch(n *transforms.ToolNode) bool {
	return jsonspan.IsString(p.w.Doc, jsonspan.Lookup(p.w.Doc, n.Start, "execution"), "client")
}

// planHistory registers the identities history items name, so the codec
// encodes them as it does declarations, and collects the tools earlier
// searches loaded. A built-in that only the history names, and whose name a
// declared tool already has, is not a second tool of that name: its items
// become calls to the declared one (claimant, aliasedHistoryCall).
func (p *toolPlan) planHistory() {
	w := p.w
	var historyOnly []string // built-ins named by the history alone
	for i := range w.Nodes {
		n := &w.Nodes[i]
		switch {
		case n.Kind != transforms.NodeCall && n.Kind != transforms.NodeOutput:
		case w.Protocol == transforms.ProtocolChat:
			if n.Kind == transforms.NodeCall && n.Type == "function" && n.Name != "" {
				p.addName(p.historyKey("", n.Name))
			}
		case n.Type == "function_call" || (n.Type == "function_call_output" && n.Name != ""):
			if n.Name != "" {
				p.addName(p.historyKey(n.Namespace, n.Name))
			}
		default:
			b := transforms.BuiltinOfItem(n.Type)
			if b == "" || p.t.action(b) != actDegrade {
				continue
			}
			if k := (codecKey{b, "", b}); !p.declared[k] && !slices.Contains(historyOnly, b) {
				historyOnly = append(historyOnly, b)
			}
			if n.Type == "tool_search_output" && p.search {
				p.collectLoaded(n)
			}
		}
	}
	// After the whole history: a tool_search_output may load a tool later.
	for _, b := range historyOnly {
		k := codecKey{b, "", b}
		if d, ok := p.claimant(k); ok {
			if p.aliased == nil {
				p.aliased = map[string]codecKey{}
			}
			p.aliased[b] = d
			if p.x.Deciding() {
				p.x.Decide(b, "convert_history_only", "the history holds "+b+" calls and the request does not declare "+b+
					": they go to the upstream as calls to the declared "+p.declaredKind(d)+" "+d.String())
			}
			continue
		}
		p.addName(k)
	}
}

// claimant is the declared identity, if any, that asks for the upstream
// name a history-only built-in would take: the two would share it.
func (p *toolPlan) claimant(k codecKey) (codecKey, bool) {
	want := p.want(k)
	var found codecKey
	ok := false
	for d := range p.declared {
		if d == k || p.codec.scope(d) != "" || p.want(d) != want {
			continue
		}
		// Two declared identities sharing a name are a conflict resolve
		// reports; pick one deterministically meanwhile.
		if !ok || d.hashKey() < found.hashKey() {
			found, ok = d, true
		}
	}
	return found, ok
}

// declaredKind says what a declared identity was to the client: a custom
// tool the rule converted, a built-in, or a function.
func (p *toolPlan) declaredKind(d codecKey) string {
	switch {
	case d.typ != "function":
		return d.typ + " tool"
	case p.convertedCustom(d):
		return "custom tool"
	}
	return "function"
}

// convertedCustom reports a declared function that is a custom tool a
// custom conversion of this chain (the rule's own, or an earlier
// field_custom_tools_to_function) turned into a function taking
// {"input": <text>}.
func (p *toolPlan) convertedCustom(d codecKey) bool {
	if d.typ != "function" {
		return false
	}
	return p.x.Tools().Origin(transforms.ToolID{Type: "function", Namespace: d.ns, Name: d.name}).Type == "custom"
}

// historyKey is the identity a history function call names. A call named
// after a degraded built-in, with no function of that name declared, is
// that built-in's call given back as a function_call because its
// arguments did not fit the item: it keeps the built-in's upstream name.
func (p *toolPlan) historyKey(ns, name string) codecKey {
	k := codecKey{"function", ns, name}
	if ns != "" || p.declared[k] || !degradable[name] || name == "custom" || p.t.action(name) != actDegrade {
		return k
	}
	return codecKey{builtinName(name), "", builtinName(name)}
}

// collectLoaded reads the definitions a tool_search_output loaded: they go
// to the upstream with the declared tools, so the model can call them.
func (p *toolPlan) collectLoaded(n *transforms.ToolNode) {
	doc := p.w.Doc
	tools := jsonspan.Lookup(doc, n.Start, "tools")
	if tools.Start < 0 || doc[tools.Start] != '[' {
		return
	}
	var add func(el jsonspan.Span, ns string, nsDoc []byte)
	add = func(el jsonspan.Span, ns string, nsDoc []byte) {
		if doc[el.Start] != '{' {
			return
		}
		var f [3]jsonspan.Span
		jsonspan.ObjectFields(doc, el.Start, []string{"type", "name", "tools"}, f[:])
		typ, _ := jsonspan.StringValue(doc, f[0])
		name, _ := jsonspan.StringValue(doc, f[1])
		switch {
		case typ == "namespace" && f[2].Start >= 0 && doc[f[2].Start] == '[':
			jsonspan.EachElement(doc, f[2].Start, func(c jsonspan.Span) bool { add(c, name, doc[el.Start:el.End]); return true })
		case typ == "function" && name != "":
			k := codecKey{"function", ns, name}
			if p.declared[k] {
				return
			}
			p.declared[k] = true
			delete(p.dropped, k)
			p.addName(k)
			p.loaded = append(p.loaded, loadedTool{doc: doc[el.Start:el.End], ns: ns, name: name, nsDoc: nsDoc})
			p.x.Decide(k.String(), "load", "loaded by an earlier tool_search")
		}
	}
	jsonspan.EachElement(doc, tools.Start, func(el jsonspan.Span) bool { add(el, "", nil); return true })
}

func (k codecKey) String() string { return transforms.ToolID{Namespace: k.ns, Name: k.name}.String() }
