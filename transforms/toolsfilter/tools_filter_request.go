package toolsfilter

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// filterRecord is what one request's filtering leaves for its response.
type filterRecord struct {
	active bool
	// declared holds the nameKeys of the tools the upstream was offered;
	// filtered those the rule took out, with the reason.
	declared map[string]bool
	filtered map[string]string
}

func (t *ToolsFilter) record(x *transforms.Exchange) *filterRecord {
	return x.Record(t, func() any { return &filterRecord{} }).(*filterRecord)
}

// RewriteRequest implements RequestRewriter.
func (t *ToolsFilter) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	if !allHold(x, t.conds) {
		return body, nil
	}
	if p := x.Protocol(); p != transforms.ProtocolResponses && p != transforms.ProtocolChat {
		return body, nil
	}
	rec := t.record(x)
	if t.off {
		out, err := t.withoutTools(x, body)
		if err == nil {
			rec.active = true
		}
		return out, err
	}
	w := transforms.WalkTools(x, body)
	if w == nil {
		return body, nil
	}
	if where, ok := w.Repeated(); ok && (len(t.allow) > 0 || len(t.deny) > 0) {
		return nil, transforms.BadRequest("ambiguous_tool", where,
			"%s repeats a key that names tools (type, name, namespace or tools): the gateway cannot tell which tool the upstream would see", where)
	}
	rec.active = true
	f := &filterRun{t: t, x: x, w: w, rec: rec, status: make([]filterStatus, len(w.Nodes)), legacyList: jsonspan.NoSpan()}
	return f.run()
}

// filterStatus is the outcome for one definition node.
type filterStatus struct {
	reason  string // "" kept, else why the tool was filtered
	denied  bool   // a namespace's deny covers its tools
	allowed bool   // a namespace's allow covers its tools
	changed bool   // a namespace some of whose tools were filtered
	kept    bool   // a namespace: at least one of its tools was kept
	own     bool   // filtered by its own match, which covers its tools
	list    int32  // the top-level list (walk root) the tool is in, nested or not
}

type filterRun struct {
	t      *ToolsFilter
	x      *transforms.Exchange
	w      *transforms.ToolWalk
	rec    *filterRecord
	status []filterStatus // by node index; definitions only
	// keptTop counts the top-level definitions left, defaults included.
	keptTop  int
	goneTop  int      // top-level definitions the rule took out
	dropKeys []string // top-level members that go
	// legacyList is Chat's functions list, when the request has one.
	legacyList jsonspan.Span
	err        *transforms.Error
	anyTop     bool // the request has a top-level tools list
	defaults   [][]byte
}

func (f *filterRun) run() ([]byte, error) {
	w := f.w
	f.rec.declared = make(map[string]bool, len(w.Nodes))
	f.rec.filtered = map[string]string{}
	f.judge()
	f.addDefaults()
	// What the upstream may call, for the response phase.
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind != transforms.NodeDefinition || n.Type == "namespace" {
			continue
		}
		id := transforms.ToolID{Type: n.Type, Namespace: n.Namespace, Name: n.Name}
		if r := f.status[i].reason; r == "" {
			f.rec.declared[nameKey(id)] = true
		} else if r != reasonDuplicate {
			f.rec.filtered[nameKey(id)] = r
		}
	}
	// A tool both filtered and kept under one name (a duplicate that
	// differs) counts as declared.
	for k := range f.rec.declared {
		delete(f.rec.filtered, k)
	}
	if w.Top("functions").Start >= 0 {
		if err := f.legacyFunctions(); err != nil {
			return nil, err
		}
	}
	choiceEdits, err := f.planChoice()
	if err != nil {
		return nil, err
	}
	// Only a list this rule emptied goes: a client's own empty list is
	// the client's business.
	noTools := f.anyTop && f.keptTop == 0 && f.goneTop > 0
	f.writeLists(noTools)
	if noTools {
		// Never an empty list: an upstream without tools gets none, and no
		// choice among them either.
		f.x.Decide("tools", "drop", "no tool is left: tools, tool_choice and parallel_tool_calls are not sent")
		f.dropKeys = append(f.dropKeys, "tools", "tool_choice", "parallel_tool_calls")
	} else {
		for _, e := range choiceEdits {
			w.Edit(e.Start, e.End, e.Repl, true)
		}
	}
	if f.err != nil {
		return nil, f.err
	}
	// One removal for every member that goes, so neighbours never claim
	// the same comma.
	if len(f.dropKeys) > 0 {
		w.RemoveTopMembers(f.dropKeys...)
	}
	return w.Rewrite(), nil
}

// legacyFunctions filters Chat's deprecated functions list and refuses a
// function_call that forces one it filtered: the old spelling of tools
// must not be a way around them.
func (f *filterRun) legacyFunctions() error {
	doc := f.w.Doc
	list, forced := f.w.Top("functions"), f.w.Top("function_call")
	if list.Start < 0 || doc[list.Start] != '[' {
		return nil
	}
	f.legacyList = list
	var keep []jsonspan.Span
	gone := 0
	ambiguous := ""
	jsonspan.EachElement(doc, list.Start, func(el jsonspan.Span) bool {
		if doc[el.Start] != '{' {
			keep = append(keep, el)
			return true
		}
		names, nameAt := 0, jsonspan.NoSpan()
		jsonspan.EachMember(doc, el.Start, func(m jsonspan.Member) bool {
			if m.KeyIs(doc, "name") {
				if names++; names == 1 {
					nameAt = m.Value
				}
			}
			return true
		})
		if names > 1 && ambiguous == "" {
			ambiguous = "functions"
		}
		name, _ := jsonspan.StringValue(doc, nameAt)
		n := transforms.ToolNode{Kind: transforms.NodeDefinition, Type: "function", Name: name}
		id := transforms.ToolID{Type: "function", Name: name}
		reason := ""
		switch {
		case f.matches(f.t.deny, &n, ""):
			reason = reasonDenied
		case len(f.t.allow) > 0 && !f.matches(f.t.allow, &n, ""):
			reason = reasonNotAllowed
		}
		if reason == "" {
			f.rec.declared[nameKey(id)] = true
			keep = append(keep, el)
			return true
		}
		gone++
		f.rec.filtered[nameKey(id)] = reason
		f.x.Decide(id.Display(), "drop", reason)
		return true
	})
	if ambiguous != "" {
		return transforms.BadRequest("ambiguous_tool", ambiguous,
			"a function of %s repeats its name: the gateway cannot tell which one the upstream would see", ambiguous)
	}
	if forced.Start >= 0 && doc[forced.Start] == '{' {
		name, _ := jsonspan.StringValue(doc, jsonspan.Lookup(doc, forced.Start, "name"))
		if r, ok := f.rec.filtered[nameKey(transforms.ToolID{Type: "function", Name: name})]; ok {
			return transforms.BadRequest("tool_filtered", "function_call",
				"function_call forces function %q, which the gateway filtered from this request (%s)", name, r)
		}
	}
	switch {
	case gone == 0:
	case len(keep) == 0:
		f.dropKeys = append(f.dropKeys, "functions", "function_call")
	default:
		f.w.Edit(list.Start, list.End, jsonspan.AppendArray(nil, doc, keep), true)
	}
	return nil
}

// judge decides every definition, namespaces after the tools inside them.
func (f *filterRun) judge() {
	w := f.w
	seen := map[string]bool{}
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind != transforms.NodeDefinition {
			continue
		}
		st := &f.status[i]
		ns, list := n.Namespace, n.List()
		if n.Parent() >= 0 {
			ns, list = w.Nodes[n.Parent()].Name, int(f.status[n.Parent()].list)
		}
		st.list = int32(list)
		st.denied, st.allowed = f.matches(f.t.deny, n, ns), len(f.t.allow) == 0 || f.matches(f.t.allow, n, ns)
		if n.Parent() >= 0 {
			p := &f.status[n.Parent()]
			st.denied = st.denied || p.denied
			st.allowed = st.allowed || p.allowed
		}
		switch {
		case st.denied:
			st.reason = reasonDenied
			st.own = true
		case !st.allowed && n.Type != "namespace":
			st.reason = reasonNotAllowed
		case n.Type != "namespace" && (n.Name != "" || n.Type != "mcp"):
			// The first of two tools of one name wins, as in LobeHub's
			// engine; the upstream would refuse both. A tool without a
			// name is one of its type, except MCP servers, which their
			// labels tell apart.
			k := nameKey(transforms.ToolID{Type: n.Type, Namespace: ns, Name: n.Name}) + "\x00" + strconv.Itoa(int(list))
			if seen[k] {
				st.reason = reasonDuplicate
			}
			seen[k] = true
		}
	}
	// Backwards, so a namespace hears from its tools (nested ones first).
	for i := len(w.Nodes) - 1; i >= 0; i-- {
		n := &w.Nodes[i]
		if n.Kind != transforms.NodeDefinition {
			continue
		}
		st := &f.status[i]
		if n.Type == "namespace" && st.reason == "" {
			empty := n.Next() == i+1
			switch {
			case st.kept || (empty && st.allowed):
			case !st.allowed && empty:
				st.reason = reasonNotAllowed
			default:
				// Every tool inside was filtered: an empty namespace is
				// no tool at all.
				st.reason = reasonNotAllowed
				switch {
				case st.changed && f.allBecause(i, reasonDenied):
					st.reason = reasonDenied
				case st.changed && f.allBecause(i, reasonDuplicate):
					st.reason = reasonDuplicate
				}
			}
		}
		if n.Parent() >= 0 {
			p := &f.status[n.Parent()]
			if st.reason == "" {
				p.kept = true
				// A kept namespace that lost tools is rewritten, and so is
				// every namespace around it.
				p.changed = p.changed || st.changed
			} else {
				p.changed = true
			}
		}
	}
	// Decisions in document order. A namespace a selector filtered speaks
	// for its tools; one its tools' filtering emptied is told after them.
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind == transforms.NodeDefinition && f.status[i].reason != "" && (n.Parent() < 0 || !f.status[n.Parent()].own) {
			f.x.Decide(transforms.ToolID{Type: n.Type, Namespace: n.Namespace, Name: n.Name}.Display(), "drop", f.status[i].reason)
		}
	}
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind == transforms.NodeDefinition && n.Parent() < 0 && w.Lists()[n.List()] == "tools" {
			f.anyTop = true
			if f.status[i].reason == "" {
				f.keptTop++
			} else {
				f.goneTop++
			}
		}
	}
	if !f.anyTop && w.Top("tools").Start >= 0 {
		f.anyTop = true // an empty or odd list: defaults may still join it
	}
}

// allBecause reports whether every tool inside namespace node i was
// filtered for reason.
func (f *filterRun) allBecause(i int, reason string) bool {
	w := f.w
	for j := i + 1; j < int(w.Nodes[i].Next()); j = int(w.Nodes[j].Next()) {
		if f.status[j].reason != reason {
			return false
		}
	}
	return true
}

func (f *filterRun) matches(list []selector, n *transforms.ToolNode, ns string) bool {
	for i := range list {
		if list[i].matches(n, ns) {
			return true
		}
	}
	return false
}

// addDefaults picks the defaults the request lacks and the selectors let
// through.
func (f *filterRun) addDefaults() {
	if len(f.t.defaults) == 0 {
		return
	}
	declared := map[string]bool{}
	for i := range f.w.Nodes {
		n := &f.w.Nodes[i]
		if n.Kind == transforms.NodeDefinition && n.Parent() < 0 {
			declared[nameKey(transforms.ToolID{Type: n.Type, Namespace: n.Namespace, Name: n.Name})] = true
		}
	}
	for i := range f.t.defaults {
		d := &f.t.defaults[i]
		if declared[nameKey(d.id)] {
			continue // the client's own declaration stands
		}
		probe := transforms.ToolNode{Kind: transforms.NodeDefinition, Type: d.id.Type, Namespace: d.id.Namespace, Name: d.id.Name}
		reason := ""
		switch {
		case f.w.Top("tools").Start >= 0 && f.w.ListSpan(f.topRoot()).Start < 0 && !jsonspan.IsNull(f.w.Doc, f.w.Top("tools")):
			// tools is neither a list nor null: nothing can join it.
			reason = "tools_not_a_list"
		case f.matches(f.t.deny, &probe, d.id.Namespace):
			reason = reasonDenied
		case len(f.t.allow) > 0 && !f.matches(f.t.allow, &probe, d.id.Namespace):
			reason = reasonNotAllowed
		case f.w.Protocol == transforms.ProtocolChat && d.chat == nil:
			reason = reasonIncompatible
		}
		if reason != "" {
			f.x.Decide(d.id.Display(), "skip_default", reason)
			continue
		}
		f.x.Decide(d.id.Display(), "add_default", "the request does not declare it")
		f.rec.declared[nameKey(d.id)] = true
		if f.w.Protocol == transforms.ProtocolChat {
			f.defaults = append(f.defaults, d.chat)
		} else {
			f.defaults = append(f.defaults, d.responses)
		}
		f.keptTop++
	}
}

// topRoot is the walk's root of the top-level tools list, or -1.
func (f *filterRun) topRoot() int {
	for r, name := range f.w.Lists() {
		if name == "tools" && f.w.ListSpan(r).Start >= 0 {
			return r
		}
	}
	return -1
}

// writeLists rewrites every definition list that lost a tool, and the
// top-level one when defaults join it, unless it goes altogether
// (dropTop). Kept tools keep their bytes.
func (f *filterRun) writeLists(dropTop bool) {
	w := f.w
	firsts := map[int]int{} // root list -> its first node
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind != transforms.NodeDefinition || n.Parent() >= 0 {
			continue
		}
		if _, ok := firsts[n.List()]; !ok {
			firsts[n.List()] = i
		}
	}
	touched := map[int]bool{}
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind == transforms.NodeDefinition && n.Parent() < 0 && (f.status[i].reason != "" || f.status[i].changed) {
			touched[n.List()] = true
		}
	}
	topRoot := -1
	for r, name := range w.Lists() {
		if name == "tools" && w.ListSpan(r).Start >= 0 {
			topRoot = r
		}
	}
	for r := range touched {
		if r == topRoot || (dropTop && w.Lists()[r] == "tools") {
			continue
		}
		sp := w.ListSpan(r)
		w.Edit(sp.Start, sp.End, f.writeList(make([]byte, 0, sp.End-sp.Start), sp, firsts[r], nil), true)
	}
	size := 0
	for _, d := range f.defaults {
		size += len(d) + 1
	}
	switch {
	case dropTop:
	case topRoot >= 0 && (touched[topRoot] || len(f.defaults) > 0):
		sp := w.ListSpan(topRoot)
		first, ok := firsts[topRoot]
		if !ok {
			first = len(w.Nodes)
		}
		w.Edit(sp.Start, sp.End, f.writeList(make([]byte, 0, sp.End-sp.Start+size), sp, first, f.defaults), true)
	case topRoot < 0 && len(f.defaults) > 0 && w.Top("tools").Start >= 0:
		// "tools":null, as SDKs write no tools: the defaults are the list.
		// (Any other non-list value kept the defaults out.)
		w.Edit(w.Top("tools").Start, w.Top("tools").End, f.writeList(nil, jsonspan.NoSpan(), len(w.Nodes), f.defaults), true)
	case topRoot < 0 && len(f.defaults) > 0 && f.legacyList.Start >= 0 && slices.Contains(f.dropKeys, "functions"):
		// The legacy list goes and the defaults come: the new member takes
		// its place, so no comma is left without a neighbour.
		list := f.writeList(nil, jsonspan.NoSpan(), len(w.Nodes), f.defaults)
		f.dropKeys = slices.DeleteFunc(f.dropKeys, func(k string) bool { return k == "functions" })
		w.Edit(jsonspan.KeyStart(w.Doc, f.legacyList), f.legacyList.End, append([]byte(`"tools":`), list...), true)
	case topRoot < 0 && len(f.defaults) > 0:
		list := f.writeList(nil, jsonspan.NoSpan(), len(w.Nodes), f.defaults)
		insertMember(w, "tools", list)
	}
}

// writeList writes the array at sp without the filtered tools, recursing
// into namespaces that lost some, then extra. first is the node of the
// array's first definition.
func (f *filterRun) writeList(out []byte, sp jsonspan.Span, first int, extra [][]byte) []byte {
	w := f.w
	doc := w.Doc
	out = append(out, '[')
	n := 0
	sep := func() {
		if n > 0 {
			out = append(out, ',')
		}
		n++
	}
	j := first
	if sp.Start >= 0 {
		end := jsonspan.EachElement(doc, sp.Start, func(el jsonspan.Span) bool {
			if j >= len(w.Nodes) || w.Nodes[j].Start != el.Start {
				sep() // not a tool object: not ours to judge
				out = append(out, doc[el.Start:el.End]...)
				return true
			}
			node, st := &w.Nodes[j], f.status[j]
			at := j
			j = int(node.Next())
			switch {
			case st.reason != "":
			case st.changed:
				sep()
				out = f.writeNamespace(out, at)
			default:
				sep()
				out = append(out, doc[el.Start:el.End]...)
			}
			return true
		})
		if end < 0 && f.err == nil {
			// Deeper than the scanner goes: no half-written list leaves.
			f.err = transforms.BadRequest("tools_too_deep", "tools", "the tools nest deeper than the gateway reads")
		}
	}
	for _, e := range extra {
		sep()
		out = append(out, e...)
	}
	return append(out, ']')
}

// writeNamespace writes namespace node i with only its kept tools.
func (f *filterRun) writeNamespace(out []byte, i int) []byte {
	doc := f.w.Doc
	n := &f.w.Nodes[i]
	ow := jsonspan.NewObj(out)
	done := false
	ok := jsonspan.EachMember(doc, n.Start, func(m jsonspan.Member) bool {
		if !done && m.KeyIs(doc, "tools") && doc[m.Value.Start] == '[' {
			done = true
			ow.Key("tools")
			ow.B = f.writeList(ow.B, m.Value, i+1, nil)
			return true
		}
		ow.Raw(doc, m)
		return true
	})
	if !ok && f.err == nil {
		// Deeper than the scanner goes: no half-written namespace leaves.
		f.err = transforms.BadRequest("tools_too_deep", n.Where(), "%s nests namespaces deeper than the gateway reads", n.Where())
	}
	return ow.Close()
}

// planChoice checks tool_choice against what was filtered: a choice that
// forces a filtered tool is refused, and allowed_tools loses the filtered
// ones. It returns the edits to make when the tools stay.
func (f *filterRun) planChoice() ([]jsonspan.Edit, error) {
	w := f.w
	doc := w.Doc
	var top *transforms.ToolNode
	var entries []*transforms.ToolNode
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind != transforms.NodeChoice {
			continue
		}
		if n.Allowed {
			entries = append(entries, n)
		} else {
			top = n
		}
	}
	if top == nil {
		return nil, nil
	}
	noTools := f.anyTop && f.keptTop == 0 && f.goneTop > 0
	switch {
	case top.Type == "":
		if noTools && jsonspan.IsString(doc, top.Span(), "required") {
			return nil, transforms.BadRequest("tool_filtered", "tool_choice",
				"tool_choice is \"required\" but every tool of the request was filtered by the gateway (%s)", f.why())
		}
		return nil, nil
	case top.Type == "allowed_tools":
		var keep []jsonspan.Span
		var gone []string
		for _, e := range entries {
			id := transforms.ToolID{Type: e.Type, Namespace: e.Namespace, Name: e.Name}
			if r, ok := f.rec.filtered[nameKey(id)]; ok {
				gone = append(gone, id.Display()+" ("+r+")")
				continue
			}
			keep = append(keep, e.Span())
		}
		if len(gone) == 0 {
			return nil, nil
		}
		if len(keep) == 0 {
			return nil, transforms.BadRequest("tool_filtered", "tool_choice",
				"tool_choice allows only tools the gateway filtered: %s", strings.Join(gone, ", "))
		}
		f.x.Decide("tool_choice", "filter_allowed_tools", "removed "+strings.Join(gone, ", "))
		list := jsonspan.Lookup(doc, top.Start, "tools")
		if inner := jsonspan.Lookup(doc, top.Start, "allowed_tools"); inner.Start >= 0 && doc[inner.Start] == '{' {
			list = jsonspan.Lookup(doc, inner.Start, "tools")
		}
		out := []byte{'['}
		for i, sp := range keep {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, doc[sp.Start:sp.End]...)
		}
		return []jsonspan.Edit{{Start: list.Start, End: list.End, Repl: append(out, ']')}}, nil
	}
	id := transforms.ToolID{Type: top.Type, Namespace: top.Namespace, Name: top.Name}
	if id.Type == "function" || id.Type == "custom" {
		// A hosted tool is chosen by type alone; a function or custom
		// tool by its name.
	} else {
		id.Name = ""
	}
	if r, ok := f.rec.filtered[nameKey(id)]; ok {
		return nil, transforms.BadRequest("tool_filtered", "tool_choice",
			"tool_choice forces tool %q, which the gateway filtered from this request (%s)", id.Display(), r)
	}
	return nil, nil
}

// why sums up the reasons tools were filtered, for messages.
func (f *filterRun) why() string {
	counts := map[string]int{}
	for _, r := range f.rec.filtered {
		counts[r]++
	}
	var parts []string
	for _, r := range []string{reasonDenied, reasonNotAllowed, reasonIncompatible} {
		if counts[r] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[r], r))
		}
	}
	if len(parts) == 0 {
		return "none declared"
	}
	return strings.Join(parts, ", ")
}

// insertMember plans a new top-level member at the end of the body.
func insertMember(w *transforms.ToolWalk, key string, value []byte) {
	doc := w.Doc
	end := len(doc) - 1
	for end > 0 && doc[end] != '}' {
		end--
	}
	prev := end - 1
	for prev > 0 && (doc[prev] == ' ' || doc[prev] == '\t' || doc[prev] == '\n' || doc[prev] == '\r') {
		prev--
	}
	m := make([]byte, 0, len(key)+len(value)+4)
	if doc[prev] != '{' {
		m = append(m, ',')
	}
	m = jsonspan.AppendStringStr(m, key)
	m = append(m, ':')
	m = append(m, value...)
	w.Edit(end, end, m, true)
}
