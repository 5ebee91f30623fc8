// Package toolsfilter is the tools_filter transform: it decides which
// tools a caller and model see (allow and deny by name, namespace and
// type, conditions on Caddy placeholders, default tools), can turn
// function calling off by retelling the tool history as text, and counts
// or removes the upstream's calls to tools the request did not offer.
package toolsfilter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

func init() {
	caddy.RegisterModule(ToolsFilter{})
}

// ToolsFilter decides which of a request's tools the upstream sees, by
// selectors on their names, namespaces and types, for the callers and
// models the rule's conditions pick. It can add default tools, and turn
// function calling off altogether for a model that has none: the tools go
// and the conversation's tool history is retold as plain text. On the way
// back it counts calls to tools the client never declared or the rule
// filtered, and can remove them.
//
// Place it before tools_plan and tools_normalize_schema in a chain: it
// speaks of the tools as the client declared them.
type ToolsFilter struct {
	// Allow lists selectors; when it is set, a tool no selector matches is
	// filtered with the reason not_allowed. A selector is a name glob
	// (`*` any run, `?` one character) matched against a tool's name, or
	// against the type of a tool without a name (web_search); a
	// namespace/name pair of globs matched against the tools inside
	// namespaces; or type:<glob> matched against the tool's type. A
	// selector that matches a namespace tool covers every tool inside it.
	Allow []string `json:"allow,omitempty"`

	// Deny lists selectors, as Allow; a tool any of them matches is
	// filtered with the reason denied, even when Allow matches it too.
	Deny []string `json:"deny,omitempty"`

	// When lists conditions on the request, all of which must hold for
	// the rule to apply: "<value> <op> <value>", where values may hold
	// Caddy placeholders such as {http.request.header.X-Team} and op is
	// == (equal), != (not equal), ~ (glob match) or !~ (no glob match).
	// Empty means every request.
	//
	// A caller sets request headers, the host, URI, cookies and body to
	// anything, and {http.request.remote.host} is a proxy's address behind
	// one: a condition that tells callers apart must read what the caller
	// cannot forge, such as a header an authentication layer in front sets
	// after deleting the caller's copy, {http.auth.user.id}, or
	// {http.vars.client_ip} with trusted_proxies set. Rules bound to an API
	// key need no condition. The README's tools_filter section lists them.
	When []string `json:"when,omitempty"`

	// FunctionCalling "off" is for models without function calling: every
	// tool is filtered with the reason incompatible, tools, tool_choice and
	// parallel_tool_calls are not sent, and the history's tool calls and
	// their outputs become plain assistant and user text. Default: "on".
	FunctionCalling string `json:"function_calling,omitempty"`

	// Defaults are tool declarations added to every request that does not
	// declare a tool of the same name (or, for a tool without a name, of
	// the same type). Each is one tool object in the Responses shape
	// ({"type":"function","name":…}) or the Chat shape
	// ({"type":"function","function":{"name":…}}); it is sent in the
	// request's own. Allow and Deny apply to them as to the client's.
	Defaults []json.RawMessage `json:"defaults,omitempty"`

	// DropUndeclaredCalls removes from responses, JSON and streamed, the
	// calls to tools the client never declared or this rule filtered.
	// Without it such calls are counted (a metric and a log line) and
	// passed on.
	DropUndeclaredCalls bool `json:"drop_undeclared_calls,omitempty"`

	allow, deny []selector
	conds       []Condition
	off         bool
	defaults    []defaultTool
}

// selector is one compiled allow or deny entry.
type selector struct {
	raw      string
	typ      string // type:<glob>
	ns, name string // namespace/name globs; ns is set only for that form
	scoped   bool   // the namespace/name form
}

// defaultTool is a configured default in both protocols' shapes.
type defaultTool struct {
	id        transforms.ToolID
	responses []byte
	chat      []byte // nil: Chat has no such tool type
}

// Reasons a tool is filtered, as decisions report them.
const (
	reasonDenied       = "denied"
	reasonNotAllowed   = "not_allowed"
	reasonIncompatible = "incompatible"
	reasonDuplicate    = "duplicate"
)

// CaddyModule returns the Caddy module information.
func (ToolsFilter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  transforms.ModuleID("tools_filter"),
		New: func() caddy.Module { return new(ToolsFilter) },
	}
}

// Provision compiles the selectors, conditions and defaults.
func (t *ToolsFilter) Provision(caddy.Context) error {
	var err error
	if t.allow, err = compileSelectors("allow", t.Allow); err != nil {
		return err
	}
	if t.deny, err = compileSelectors("deny", t.Deny); err != nil {
		return err
	}
	if t.conds, err = parseConditions(t.When); err != nil {
		return err
	}
	switch t.FunctionCalling {
	case "", "on":
	case "off":
		t.off = true
	default:
		return fmt.Errorf("function_calling: %q (want on or off)", t.FunctionCalling)
	}
	t.defaults = t.defaults[:0]
	seen := map[string]bool{}
	for i, raw := range t.Defaults {
		d, err := compileDefault(raw)
		if err != nil {
			return fmt.Errorf("defaults[%d]: %v", i, err)
		}
		k := nameKey(d.id)
		if seen[k] {
			return fmt.Errorf("defaults[%d]: a second default named %q", i, d.id)
		}
		seen[k] = true
		t.defaults = append(t.defaults, d)
	}
	return nil
}

func compileSelectors(field string, list []string) ([]selector, error) {
	out := make([]selector, 0, len(list))
	for _, s := range list {
		sel := selector{raw: s}
		switch {
		case s == "":
			return nil, fmt.Errorf("%s: empty selector", field)
		case strings.HasPrefix(s, "type:"):
			sel.typ = strings.TrimPrefix(s, "type:")
			if sel.typ == "" {
				return nil, fmt.Errorf("%s: %q names no type", field, s)
			}
		case strings.Contains(s, "/"):
			ns, name, _ := strings.Cut(s, "/")
			if ns == "" || name == "" || strings.Contains(name, "/") {
				return nil, fmt.Errorf("%s: %q is not namespace/name", field, s)
			}
			sel.ns, sel.name, sel.scoped = ns, name, true
		default:
			sel.name = s
		}
		out = append(out, sel)
	}
	return out, nil
}

// matches reports whether the selector picks the definition n, which
// sits in namespace ns ("" at the top level). ns is the namespace that
// holds the tool, whatever namespace member the tool writes itself.
func (s *selector) matches(n *transforms.ToolNode, ns string) bool {
	switch {
	case s.typ != "":
		return transforms.GlobMatch(s.typ, n.Type)
	case s.scoped:
		return ns != "" && transforms.GlobMatch(s.ns, ns) && transforms.GlobMatch(s.name, n.Name)
	case n.Name == "":
		return transforms.GlobMatch(s.name, n.Type)
	}
	return transforms.GlobMatch(s.name, n.Name)
}

// compileDefault reads one default declaration in either shape and keeps
// it compact in both.
func compileDefault(raw json.RawMessage) (defaultTool, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return defaultTool{}, err
	}
	doc := buf.Bytes()
	if len(doc) == 0 || doc[0] != '{' {
		return defaultTool{}, fmt.Errorf("not a JSON object")
	}
	var f [5]jsonspan.Span
	jsonspan.ObjectFields(doc, 0, []string{"type", "name", "namespace", "function", "custom"}, f[:])
	typ, _ := jsonspan.StringValue(doc, f[0])
	if typ == "" {
		return defaultTool{}, fmt.Errorf("no type")
	}
	d := defaultTool{id: transforms.ToolID{Type: typ}}
	d.id.Name, _ = jsonspan.StringValue(doc, f[1])
	d.id.Namespace, _ = jsonspan.StringValue(doc, f[2])
	inner := f[3]
	if typ == "custom" {
		inner = f[4]
	}
	if (typ == "function" || typ == "custom") && inner.Start >= 0 && doc[inner.Start] == '{' {
		// The Chat shape: the Responses one has the inner members flat.
		d.chat = bytes.Clone(doc)
		d.id.Name, _ = jsonspan.StringValue(doc, jsonspan.Lookup(doc, inner.Start, "name"))
		ow := jsonspan.NewObj(nil)
		ow.Key("type")
		ow.B = jsonspan.AppendStringStr(ow.B, typ)
		jsonspan.EachMember(doc, inner.Start, func(m jsonspan.Member) bool {
			ow.Raw(doc, m)
			return true
		})
		d.responses = ow.Close()
	} else {
		d.responses = bytes.Clone(doc)
		if typ == "function" || typ == "custom" {
			// Chat nests everything but the type under a key named
			// after it.
			ow := jsonspan.NewObj(nil)
			ow.Key("type")
			ow.B = jsonspan.AppendStringStr(ow.B, typ)
			ow.Key(typ)
			inner := jsonspan.NewObj(ow.B)
			jsonspan.EachMember(doc, 0, func(m jsonspan.Member) bool {
				if !m.KeyIs(doc, "type") {
					inner.Raw(doc, m)
				}
				return true
			})
			ow.B = inner.Close()
			d.chat = ow.Close()
		}
	}
	if (typ == "function" || typ == "custom" || typ == "namespace") && d.id.Name == "" {
		return defaultTool{}, fmt.Errorf("a %s tool needs a name", typ)
	}
	return d, nil
}

// nameKey is how the filter tells tools apart: by namespace and name, or
// by type for a tool without a name (two web_search tools are one too
// many), as the upstream refuses two tools of one name whatever their
// types.
func nameKey(id transforms.ToolID) string {
	if id.Name == "" {
		return "\x02" + id.Type
	}
	if id.Type == "namespace" {
		return "\x01" + id.Name
	}
	return id.Namespace + "\x00" + id.Name
}

// UnmarshalCaddyfile sets up the transform from its rule block. Syntax:
//
//	rule tools_filter {
//		allow <selector>...
//		deny <selector>...
//		when <value> ==|!=|~|!~ <value>
//		function_calling on|off
//		default <tool JSON>
//		drop_undeclared_calls
//	}
//
// A selector is a name glob, <namespace glob>/<name glob> or
// type:<glob>. when may be repeated (every condition must hold), and so
// may default (one tool per line, best written in backticks); every other
// option appears once.
func (t *ToolsFilter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	b := transforms.NewRuleBlock(d, "when", "default")
	for {
		more, err := b.Next()
		if !more || err != nil {
			return err
		}
		switch b.Opt {
		case "allow":
			err = b.List(&t.Allow)
		case "deny":
			err = b.List(&t.Deny)
		case "when":
			if len(b.Args) < 3 {
				return d.Errf("when: want <value> <op> <value>, got %d tokens", len(b.Args))
			}
			cond := strings.Join(b.Args, " ")
			if _, err := ParseCondition(cond); err != nil {
				return d.Err(err.Error())
			}
			t.When = append(t.When, cond)
		case "function_calling":
			err = b.One(&t.FunctionCalling)
		case "default":
			if len(b.Args) != 1 {
				return d.Errf("default: want one tool as JSON (in backticks), got %d tokens", len(b.Args))
			}
			if !json.Valid([]byte(b.Args[0])) {
				return d.Errf("default: %q is not valid JSON", b.Args[0])
			}
			t.Defaults = append(t.Defaults, json.RawMessage(b.Args[0]))
		case "drop_undeclared_calls":
			if len(b.Args) != 0 {
				return d.ArgErr()
			}
			t.DropUndeclaredCalls = true
		default:
			return b.Unknown()
		}
		if err != nil {
			return err
		}
	}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*ToolsFilter)(nil)
	_ caddyfile.Unmarshaler       = (*ToolsFilter)(nil)
	_ transforms.RequestRewriter  = (*ToolsFilter)(nil)
	_ transforms.ResponseRewriter = (*ToolsFilter)(nil)
)
