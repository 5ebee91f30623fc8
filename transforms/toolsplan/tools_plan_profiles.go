package toolsplan

import "github.com/llmtransform/caddy-llm-transform/internal/providers"

// The profiles of tools_plan come from internal/providers, the one table
// of provider facts; this file holds what tools_plan adds to them.

// Choice modes a profile lists.
const (
	choiceNone     = providers.ChoiceNone
	choiceAuto     = providers.ChoiceAuto
	choiceRequired = providers.ChoiceRequired
	choiceNamed    = providers.ChoiceNamed
	choiceAllowed  = providers.ChoiceAllowed
)

// The actions for a tool type the upstream does not take natively.
const (
	actNative  = "native"
	actDegrade = "degrade"
	actDrop    = "drop"
	actReject  = "reject"
)

// degradable lists the types tools_plan can turn into functions, and what
// a web search may be told to do.
var degradable = map[string]bool{
	"custom": true, "local_shell": true, "shell": true, "apply_patch": true,
	"computer": true, "computer_use_preview": true, "tool_search": true,
}

// isWebSearch reports the web search tool types and their dated variants.
func isWebSearch(typ string) bool {
	switch typ {
	case "web_search", "web_search_preview", "web_search_2025_08_26", "web_search_preview_2025_03_11":
		return true
	}
	return false
}

// functionOnlyTypes degrades everything that can be degraded, and drops web
// search and every other hosted tool.
func functionOnlyTypes() map[string]string {
	return map[string]string{
		"custom": actDegrade, "local_shell": actDegrade, "shell": actDegrade, "apply_patch": actDegrade,
		"computer": actDegrade, "computer_use_preview": actDegrade, "tool_search": actDegrade,
		"web_search": actDrop,
	}
}

// presetPlan is a provider's profile as a config, with fresh maps and
// slices the config's own fields may be merged into. Every profile also
// degrades what can be degraded, drops web search and unknown types, and
// flattens namespaces (see plan).
func presetPlan(p providers.Profile) ToolsPlan {
	return ToolsPlan{
		NativeTypes:        p.NativeTypes,
		Types:              functionOnlyTypes(),
		UnknownTypes:       actDrop,
		Namespaces:         "flatten",
		ToolChoice:         p.ToolChoice,
		ThinkingToolChoice: p.ThinkingToolChoice,
		MaxTools:           intp(p.MaxTools),
		NamePattern:        p.NamePattern,
		ThinkingModels:     p.ThinkingModels,
		ThinkingFields:     p.ThinkingFields,
	}
}

func intp(n int) *int { return &n }
