// Package tooldeny is tool_deny, a transform for caddy-llm-transform that
// lives in a module of its own. It is written only against the exported API
// of github.com/llmtransform/caddy-llm-transform/transforms, as any transform
// from another module must be, and is built into Caddy with xcaddy, here
// from the root of a caddy-llm-transform checkout:
//
//	xcaddy build v2.11.9 \
//		--with github.com/llmtransform/caddy-llm-transform@v0.0.0=. \
//		--with example.com/tooldeny@v0.0.0=./examples/tooldeny
//
// docs/writing-a-transform.md in the caddy-llm-transform repository walks
// through it.
package tooldeny

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

func init() {
	caddy.RegisterModule(ToolDeny{})
}

// ToolDeny takes tools the operator does not want a model to see out of
// requests before they reach the upstream: by the tool's name, or by the
// namespace it sits in. It works on Responses and Chat Completions requests
// alike, on the request only: nothing it does needs undoing in the
// response.
//
// A namespace left without tools goes too, and when no tool is left at the
// top level, tools, tool_choice and parallel_tool_calls are not sent at all
// (several upstreams refuse an empty tools list). A tool_choice that forces
// a denied tool is refused with a 400 tool_denied, and so is "required"
// when every tool went; allowed_tools loses the denied entries, and is
// refused when none is left. The history's calls to a denied tool are the
// conversation's record and stay as they are.
type ToolDeny struct {
	// Globs matched against the name of every tool definition, wherever it
	// is declared: at the top level, inside namespace tools at any depth,
	// and in additional_tools history items. A tool without a name
	// (web_search) is matched by its type. `*` matches any run of
	// characters and `?` one; the glob must match the whole name.
	Tools []string `json:"tools,omitempty"`

	// Globs matched against namespaces: a namespace tool whose name matches
	// is removed with everything inside it, and so is a tool that names a
	// matching namespace of its own.
	Namespaces []string `json:"namespaces,omitempty"`

	tools, namespaces matcher
}

// matcher holds a list of globs compiled for lookups: names without a
// wildcard in a set, the others in order. Operators often list hundreds of
// plain names.
type matcher struct {
	exact map[string]bool
	globs []string
}

func compile(list []string) matcher {
	m := matcher{exact: map[string]bool{}}
	for _, g := range list {
		if strings.ContainsAny(g, "*?") {
			m.globs = append(m.globs, g)
		} else {
			m.exact[g] = true
		}
	}
	return m
}

// match returns the glob that matches s, or "".
func (m *matcher) match(s string) string {
	if m.exact[s] {
		return s
	}
	for _, g := range m.globs {
		if transforms.GlobMatch(g, s) {
			return g
		}
	}
	return ""
}

// CaddyModule returns the Caddy module information.
func (ToolDeny) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  transforms.ModuleID("tool_deny"),
		New: func() caddy.Module { return new(ToolDeny) },
	}
}

// UnmarshalCaddyfile sets up the transform from its rule block. Both
// options may be given more than once; their globs add up. Syntax:
//
//	rule tool_deny {
//		tools      <glob>...
//		namespaces <glob>...
//	}
func (t *ToolDeny) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	b := transforms.NewRuleBlock(d, "tools", "namespaces")
	for {
		more, err := b.Next()
		if !more || err != nil {
			return err
		}
		var globs []string
		if err := b.List(&globs); err != nil {
			return err
		}
		switch b.Opt {
		case "tools":
			t.Tools = append(t.Tools, globs...)
		case "namespaces":
			t.Namespaces = append(t.Namespaces, globs...)
		default:
			return b.Unknown()
		}
	}
}

// Provision compiles the globs.
func (t *ToolDeny) Provision(caddy.Context) error {
	t.tools = compile(t.Tools)
	t.namespaces = compile(t.Namespaces)
	return nil
}

// Validate refuses a rule that could deny nothing, and empty globs.
func (t *ToolDeny) Validate() error {
	if len(t.Tools) == 0 && len(t.Namespaces) == 0 {
		return fmt.Errorf("tool_deny: no tools or namespaces to deny")
	}
	for _, g := range t.Tools {
		if g == "" {
			return fmt.Errorf("tools: empty glob")
		}
	}
	for _, g := range t.Namespaces {
		if g == "" {
			return fmt.Errorf("namespaces: empty glob")
		}
	}
	return nil
}

// RewriteRequest implements transforms.RequestRewriter.
func (t *ToolDeny) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	w := transforms.WalkTools(x, body)
	if w == nil {
		// Not a Responses or Chat body, or not JSON: it goes on as it came.
		return body, nil
	}
	if where, ok := w.Repeated(); ok {
		// The walk reads the first of two "name" keys, the upstream the
		// last: a filter by name must not guess.
		return nil, transforms.BadRequest("ambiguous_tool", where,
			"%s repeats a key that names a tool: the gateway cannot tell which tool the upstream would see", where)
	}
	gone := t.judge(x, w)

	// The top-level tools list, and whether this rule empties it.
	kept, removed := 0, 0
	var choice *transforms.ToolNode
	var entries []*transforms.ToolNode // allowed_tools entries
	for i := range w.Nodes {
		n := &w.Nodes[i]
		switch {
		case n.Kind == transforms.NodeDefinition && n.Parent() < 0 && w.Lists()[n.List()] == "tools":
			if gone[i] {
				removed++
			} else {
				kept++
			}
		case n.Kind == transforms.NodeChoice && n.Allowed:
			entries = append(entries, n)
		case n.Kind == transforms.NodeChoice:
			choice = n
		}
	}
	emptied := removed > 0 && kept == 0

	var goneEntries []*transforms.ToolNode
	if choice != nil {
		var err error
		if goneEntries, err = t.checkChoice(x, w, choice, entries, emptied); err != nil {
			return nil, err
		}
	}

	// Plan the edits: one per run of removed elements, none overlapping.
	var cuts []*transforms.ToolNode
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if !gone[i] || (n.Parent() >= 0 && gone[n.Parent()]) {
			continue // kept, or removed with its namespace
		}
		if emptied && n.Parent() < 0 && w.Lists()[n.List()] == "tools" {
			continue // the whole member goes below
		}
		cuts = append(cuts, n)
	}
	removeElements(w, cuts)
	if emptied {
		x.Decide("tools", "remove", "tool_deny: no tool is left; tools, tool_choice and parallel_tool_calls are not sent")
		w.RemoveTopMembers("tools", "tool_choice", "parallel_tool_calls")
	} else {
		removeElements(w, goneEntries)
	}
	// Rewrite returns body itself when nothing was planned.
	return w.Rewrite(), nil
}

// judge decides, for every node of the walk, whether the rule removes it:
// definitions only; the tools of a removed namespace are removed with it.
func (t *ToolDeny) judge(x *transforms.Exchange, w *transforms.ToolWalk) []bool {
	gone := make([]bool, len(w.Nodes))
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind != transforms.NodeDefinition {
			continue
		}
		if p := n.Parent(); p >= 0 && gone[p] {
			gone[i] = true // the namespace's decision speaks for it
			continue
		}
		if why := t.denies(n); why != "" {
			gone[i] = true
			if x.Deciding() {
				x.Decide(display(n), "remove", "tool_deny: "+why)
			}
		}
	}
	// Backwards, so that nested namespaces are settled before the ones
	// holding them: a namespace none of whose tools is left goes too.
	for i := len(w.Nodes) - 1; i >= 0; i-- {
		n := &w.Nodes[i]
		if n.Kind != transforms.NodeDefinition || n.Type != "namespace" || gone[i] || n.Next() == i+1 {
			continue
		}
		left := false
		for j := i + 1; j < n.Next(); j = w.Nodes[j].Next() {
			left = left || !gone[j]
		}
		if !left {
			gone[i] = true
			if x.Deciding() {
				x.Decide(display(n), "remove", "tool_deny: every tool of the namespace was removed")
			}
		}
	}
	return gone
}

// denies says why the rule denies the tool a definition or a tool_choice
// names, or returns "".
func (t *ToolDeny) denies(n *transforms.ToolNode) string {
	if n.Type == "namespace" {
		if g := t.namespaces.match(n.Name); g != "" {
			return fmt.Sprintf("namespace matches %q", g)
		}
		return ""
	}
	if n.Namespace != "" {
		if g := t.namespaces.match(n.Namespace); g != "" {
			return fmt.Sprintf("namespace %s matches %q", n.Namespace, g)
		}
	}
	name := n.Name
	if name == "" {
		name = n.Type // web_search and other hosted tools have no name
	}
	if g := t.tools.match(name); g != "" {
		return fmt.Sprintf("name matches %q", g)
	}
	return ""
}

// checkChoice refuses a tool_choice that cannot hold without the denied
// tools, and returns the allowed_tools entries to remove.
func (t *ToolDeny) checkChoice(x *transforms.Exchange, w *transforms.ToolWalk, choice *transforms.ToolNode, entries []*transforms.ToolNode, emptied bool) ([]*transforms.ToolNode, error) {
	switch choice.Type {
	case "":
		// A string: "auto", "none" or "required".
		var mode string
		_ = json.Unmarshal(w.Doc[choice.Start:choice.End], &mode)
		if emptied && mode == "required" {
			return nil, transforms.BadRequest("tool_denied", "tool_choice",
				"tool_choice is \"required\" but the gateway removed every tool of the request")
		}
		return nil, nil
	case "allowed_tools":
		var gone, names []string
		var nodes []*transforms.ToolNode
		for _, e := range entries {
			if why := t.denies(e); why != "" {
				gone = append(gone, display(e)+" ("+why+")")
				nodes = append(nodes, e)
			} else {
				names = append(names, display(e))
			}
		}
		if len(nodes) > 0 && len(names) == 0 {
			return nil, transforms.BadRequest("tool_denied", "tool_choice",
				"tool_choice allows only tools the gateway removed: %s", strings.Join(gone, ", "))
		}
		if emptied {
			return nil, transforms.BadRequest("tool_denied", "tool_choice",
				"tool_choice restricts the tools with allowed_tools, but the gateway removed every tool of the request")
		}
		if len(nodes) > 0 {
			x.Decide("tool_choice", "remove_allowed", "tool_deny: "+strings.Join(gone, ", "))
		}
		return nodes, nil
	}
	// A choice that forces one tool: {"type":"function","name":…}, Chat's
	// nested {"type":"function","function":{"name":…}}, or a hosted tool
	// by its type.
	if why := t.denies(choice); why != "" {
		return nil, transforms.BadRequest("tool_denied", "tool_choice",
			"tool_choice forces %s, which the gateway does not offer (%s)", display(choice), why)
	}
	if emptied {
		return nil, transforms.BadRequest("tool_denied", "tool_choice",
			"tool_choice forces %s, but the gateway removed every tool of the request", display(choice))
	}
	return nil, nil
}

// display names a node for decisions and messages: namespace/name, or the
// type of a tool without a name.
func display(n *transforms.ToolNode) string {
	return transforms.ToolID{Type: n.Type, Namespace: n.Namespace, Name: n.Name}.Display()
}

// removeElements plans the removal of nodes that are elements of JSON
// arrays (definitions in their list, or allowed_tools entries), with the
// commas that separate them, so that what is left is still valid JSON.
// Nodes that follow each other in one array with only a comma between
// them form a run, and each run is one edit: its elements and the comma
// after it, or the comma before it when it ends the array. Edits of one
// walk must not overlap; runs never do.
//
// The transforms package exports no helper for this, and its JSON toolkit
// is internal, so the bytes between elements are read here: between two
// elements of an array there is only whitespace and one comma.
func removeElements(w *transforms.ToolWalk, nodes []*transforms.ToolNode) {
	doc := w.Doc
	slices.SortFunc(nodes, func(a, b *transforms.ToolNode) int { return a.Start - b.Start })
	for i := 0; i < len(nodes); {
		first, last := nodes[i], nodes[i]
		for i++; i < len(nodes) && bytes.Equal(bytes.TrimSpace(doc[last.End:nodes[i].Start]), comma); i++ {
			last = nodes[i]
		}
		if after := skipSpace(doc, last.End); doc[after] == ',' {
			// Up to the next element, whatever it is.
			w.Edit(first.Start, skipSpace(doc, after+1), nil, true)
			continue
		}
		// The run ends the array: take the comma before it, if any.
		before := first.Start - 1
		for isSpace(doc[before]) {
			before--
		}
		if doc[before] == ',' {
			w.Edit(before, last.End, nil, true)
		} else {
			w.Edit(first.Start, last.End, nil, true) // the array's only run
		}
	}
}

var comma = []byte(",")

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && isSpace(doc[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Interface guards
var (
	_ caddy.Provisioner          = (*ToolDeny)(nil)
	_ caddy.Validator            = (*ToolDeny)(nil)
	_ caddyfile.Unmarshaler      = (*ToolDeny)(nil)
	_ transforms.RequestRewriter = (*ToolDeny)(nil)
)
