// Package toolsplan is the tools_plan transform: it fits every tool of a
// request to one provider's profile (internal/providers): built-in tools
// degraded to functions, namespaces flattened, names made to the
// provider's rule through a reversible codec, tool_choice mapped to the
// modes the provider takes while thinking or not, the tool cap enforced;
// and it gives every upstream call back in the shape the client declared.
// Custom tools are converted by customtools, run inside its own phases.
package toolsplan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/customtools"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmtransform/caddy-llm-transform/internal/providers"
)

func init() {
	caddy.RegisterModule(ToolsPlan{})
}

// ToolsPlan fits every request's tools to what the upstream accepts, by a
// provider profile: each tool is kept, degraded to a function, dropped or
// rejected; names are encoded to the provider's rule through a reversible
// identity map; namespaces are flattened where the provider has none;
// tool_choice is planned for the provider and its thinking mode; the tool
// count is capped. On the way back every call the plan changed is given its
// client shape again: a custom, local_shell, shell, apply_patch, computer or
// tool_search call, or a function call under its own name and namespace.
//
// A preset profile gives every field; fields set in the config override
// it.
type ToolsPlan struct {
	// Profile names the preset the other fields start from: function_only
	// (the default), openai_chat, deepseek, kimi, glm, qwen, minimax,
	// gemini or bedrock. docs/providers.md gives each preset's
	// values and their sources.
	Profile string `json:"profile,omitempty"`

	// NativeTypes lists tool types, besides function, that the upstream
	// takes as they are (e.g. "custom" for OpenAI Chat, "web_search").
	NativeTypes []string `json:"native_types,omitempty"`

	// Types says what happens to a tool type the upstream does not take
	// natively: "degrade" (turned into a function; custom, local_shell,
	// shell, apply_patch, computer, computer_use_preview and tool_search
	// can be), "drop" or "reject" (the request gets a 400). web_search
	// takes "native", "drop" or "reject". Entries override the profile's
	// one type at a time.
	Types map[string]string `json:"types,omitempty"`

	// UnknownTypes is the action for types neither native nor in Types:
	// "drop" or "reject". Default: the profile's, "drop" for every preset.
	UnknownTypes string `json:"unknown_types,omitempty"`

	// Namespaces is "native" when the upstream takes namespace tools, or
	// "flatten" to turn each tool of a namespace into a function named
	// namespace, separator and name.
	Namespaces string `json:"namespaces,omitempty"`

	// NamespaceSeparator joins a namespace and a tool name when flattening.
	// Default: "__".
	NamespaceSeparator string `json:"namespace_separator,omitempty"`

	// ToolChoice lists the tool_choice modes the upstream takes without
	// thinking: none, auto, required, named (a choice of one tool) and
	// allowed_tools.
	ToolChoice []string `json:"tool_choice,omitempty"`

	// ThinkingToolChoice lists the tool_choice modes the upstream takes
	// while the model thinks.
	ThinkingToolChoice []string `json:"thinking_tool_choice,omitempty"`

	// UnsupportedChoice decides a forced choice (required) that the
	// upstream cannot take in the request's mode: "degrade" sends "auto"
	// and records the change, "reject" answers 400. Default: "degrade". A
	// named choice is always imitated by sending only that tool when the
	// upstream cannot name one.
	UnsupportedChoice string `json:"unsupported_choice,omitempty"`

	// MaxTools is the most tool definitions the upstream takes after
	// planning; more is a 400 that names the limit and the count. 0 means
	// no limit.
	MaxTools *int `json:"max_tools,omitempty"`

	// NamePattern is the upstream's rule for tool names, in the form
	// ^[first][rest]{min,max}$, ^[rest]{min,max}$ or ^[rest]+$.
	NamePattern string `json:"name_pattern,omitempty"`

	// MaxNameLength lowers the pattern's maximum name length. 0 keeps it.
	MaxNameLength int `json:"max_name_length,omitempty"`

	// ThinkingModels are globs of models that always think.
	ThinkingModels []string `json:"thinking_models,omitempty"`

	// ThinkingFields are request fields that turn thinking on: "path"
	// (present, and not false, null, "", "none" or "disabled") or
	// "path=value" (equal to value). Paths use dots.
	ThinkingFields []string `json:"thinking_fields,omitempty"`

	actions     map[string]string
	rule        *nameRule
	thinking    []thinkingField
	choiceModes [2]map[string]bool // the tool_choice modes taken, [0] without thinking, [1] while thinking
	maxTools    int
	custom      *customtools.CustomToolsToFunction
}

type thinkingField struct {
	path  string
	value string
	eq    bool
}

// CaddyModule returns the Caddy module information.
func (ToolsPlan) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  transforms.ModuleID("tools_plan"),
		New: func() caddy.Module { return new(ToolsPlan) },
	}
}

// PairedPhases implements PairedPhases.
func (*ToolsPlan) PairedPhases() string {
	return "the request phase renames, degrades and flattens tools, and only the response phase of the same rule gives their calls back to the client"
}

// Provision fills the fields the config leaves unset from the profile and
// compiles the plan.
func (t *ToolsPlan) Provision(ctx caddy.Context) error {
	if t.Profile == "" {
		t.Profile = "function_only"
	}
	p, ok := providers.Lookup(t.Profile)
	if !ok {
		return providers.Unknown("profile", t.Profile)
	}
	base := presetPlan(p)
	if t.NativeTypes == nil {
		t.NativeTypes = base.NativeTypes
	}
	if t.UnknownTypes == "" {
		t.UnknownTypes = base.UnknownTypes
	}
	if t.Namespaces == "" {
		t.Namespaces = base.Namespaces
	}
	if t.NamespaceSeparator == "" {
		t.NamespaceSeparator = "__"
	}
	if t.ToolChoice == nil {
		t.ToolChoice = base.ToolChoice
	}
	if t.ThinkingToolChoice == nil {
		t.ThinkingToolChoice = base.ThinkingToolChoice
	}
	if t.UnsupportedChoice == "" {
		t.UnsupportedChoice = actDegrade
	}
	if t.MaxTools == nil {
		t.MaxTools = base.MaxTools
	}
	if t.NamePattern == "" {
		t.NamePattern = base.NamePattern
	}
	if t.ThinkingModels == nil {
		t.ThinkingModels = base.ThinkingModels
	}
	if t.ThinkingFields == nil {
		t.ThinkingFields = base.ThinkingFields
	}
	// The preset's, then native_types, then the config's own lines per
	// type: the most specific setting wins.
	t.actions = base.Types
	for _, typ := range t.NativeTypes {
		t.actions[typ] = actNative
	}
	for typ, a := range t.Types {
		t.actions[typ] = a
	}
	if err := t.compile(); err != nil {
		return err
	}
	if t.actions["custom"] == actDegrade {
		// The same conversion as field_custom_tools_to_function: one
		// implementation, and a chain holding both converts once.
		t.custom = &customtools.CustomToolsToFunction{Names: []string{"*"}}
		if err := t.custom.Provision(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (t *ToolsPlan) compile() error {
	for typ, a := range t.actions {
		switch {
		case typ == "" || typ == "function":
			return fmt.Errorf("types: %q is not a type the plan decides", typ)
		case typ == "namespace":
			return fmt.Errorf("types: namespaces are set with namespaces native|flatten")
		case a == actNative, a == actDrop, a == actReject:
		case a == actDegrade && degradable[typ]:
		case a == actDegrade && isWebSearch(typ):
			return fmt.Errorf("types: %s cannot be degraded to a function (the upstream cannot search): use native, drop or reject", typ)
		case a == actDegrade:
			return fmt.Errorf("types: %s cannot be degraded to a function; degradable types are custom, local_shell, shell, apply_patch, computer, computer_use_preview and tool_search", typ)
		default:
			return fmt.Errorf("types: %s: unknown action %q (want native, degrade, drop or reject)", typ, a)
		}
	}
	switch t.UnknownTypes {
	case actDrop, actReject:
	default:
		return fmt.Errorf("unknown_types: %q (want drop or reject)", t.UnknownTypes)
	}
	switch t.Namespaces {
	case "native", "flatten":
	default:
		return fmt.Errorf("namespaces: %q (want native or flatten)", t.Namespaces)
	}
	switch t.UnsupportedChoice {
	case actDegrade, actReject:
	default:
		return fmt.Errorf("unsupported_choice: %q (want degrade or reject)", t.UnsupportedChoice)
	}
	for i, modes := range [][]string{t.ToolChoice, t.ThinkingToolChoice} {
		t.choiceModes[i] = map[string]bool{}
		for _, m := range modes {
			switch m {
			case choiceNone, choiceAuto, choiceRequired, choiceNamed, choiceAllowed:
				t.choiceModes[i][m] = true
			default:
				return fmt.Errorf("tool_choice: unknown mode %q (want none, auto, required, named or allowed_tools)", m)
			}
		}
	}
	if t.MaxTools != nil {
		if *t.MaxTools < 0 {
			return fmt.Errorf("max_tools: %d is negative", *t.MaxTools)
		}
		t.maxTools = *t.MaxTools
	}
	if t.MaxNameLength < 0 {
		return fmt.Errorf("max_name_length: %d is negative", t.MaxNameLength)
	}
	rule, err := compileNameRule(t.NamePattern, t.MaxNameLength)
	if err != nil {
		return err
	}
	t.rule = rule
	if t.NamespaceSeparator != "" {
		for _, c := range t.NamespaceSeparator {
			if !rule.allowed(c, 1) {
				return fmt.Errorf("namespace_separator %q: %q is not allowed in names by %s", t.NamespaceSeparator, c, t.NamePattern)
			}
		}
	}
	for _, g := range t.ThinkingModels {
		if g == "" {
			return fmt.Errorf("thinking_models: empty glob")
		}
	}
	t.thinking = t.thinking[:0]
	for _, f := range t.ThinkingFields {
		path, value, eq := strings.Cut(f, "=")
		if path == "" {
			return fmt.Errorf("thinking_fields: %q has no path", f)
		}
		t.thinking = append(t.thinking, thinkingField{path: path, value: value, eq: eq})
	}
	return nil
}

// action is what the plan does with a tool type: native, degrade, drop or
// reject.
func (t *ToolsPlan) action(typ string) string {
	if a, ok := t.actions[typ]; ok {
		return a
	}
	if isWebSearch(typ) {
		if a, ok := t.actions["web_search"]; ok {
			return a
		}
	}
	if typ == "computer_use_preview" {
		if a, ok := t.actions["computer"]; ok {
			return a
		}
	}
	return t.UnknownTypes
}

// UnmarshalCaddyfile sets up the transform from its rule block. Syntax:
//
//	rule tools_plan {
//		profile <name>
//		native_types <type>...
//		<type> native|degrade|drop|reject
//		unknown_types drop|reject
//		namespaces native|flatten
//		namespace_separator <text>
//		tool_choice <mode>...
//		thinking_tool_choice <mode>...
//		unsupported_choice degrade|reject
//		max_tools <n>
//		name_pattern <pattern>
//		max_name_length <n>
//		thinking_models <glob>...
//		thinking_fields <path[=value]>...
//	}
//
// Modes are none, auto, required, named and allowed_tools. Each option may
// appear once; a type line once per type.
func (t *ToolsPlan) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	b := transforms.NewRuleBlock(d)
	for {
		more, err := b.Next()
		if !more || err != nil {
			return err
		}
		switch b.Opt {
		case "profile":
			err = b.One(&t.Profile)
		case "native_types":
			err = b.List(&t.NativeTypes)
		case "unknown_types":
			err = b.One(&t.UnknownTypes)
		case "namespaces":
			err = b.One(&t.Namespaces)
		case "namespace_separator":
			err = b.One(&t.NamespaceSeparator)
		case "tool_choice":
			err = b.List(&t.ToolChoice)
		case "thinking_tool_choice":
			err = b.List(&t.ThinkingToolChoice)
		case "unsupported_choice":
			err = b.One(&t.UnsupportedChoice)
		case "max_tools":
			var n int
			if n, err = b.Number(); err == nil {
				t.MaxTools = &n
			}
		case "name_pattern":
			err = b.One(&t.NamePattern)
		case "max_name_length":
			t.MaxNameLength, err = b.Number()
		case "thinking_models":
			err = b.List(&t.ThinkingModels)
		case "thinking_fields":
			err = b.List(&t.ThinkingFields)
		default:
			// A tool type and its action: "web_search drop".
			if len(b.Args) != 1 || !slices.Contains([]string{actNative, actDegrade, actDrop, actReject}, b.Args[0]) {
				return d.Errf("unrecognized option %q (a tool type takes one of native, degrade, drop, reject)", b.Opt)
			}
			if t.Types == nil {
				t.Types = map[string]string{}
			}
			t.Types[b.Opt] = b.Args[0]
		}
		if err != nil {
			return err
		}
	}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*ToolsPlan)(nil)
	_ caddyfile.Unmarshaler       = (*ToolsPlan)(nil)
	_ transforms.RequestRewriter  = (*ToolsPlan)(nil)
	_ transforms.ResponseRewriter = (*ToolsPlan)(nil)
	_ transforms.PairedPhases     = (*ToolsPlan)(nil)
	_ transforms.CallPolicy       = (*ToolsPlan)(nil)
)
