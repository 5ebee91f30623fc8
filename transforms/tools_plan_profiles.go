package transforms

// The presets of tools_plan. Each value carries its source; where the
// sources found give no number, the comment says so and the value is the
// safe choice (the strictest rule seen elsewhere). The README's profile
// table lists the same values with links.
//
// Sources (see ../shared/reference/provider-limits-and-tool-loop.md §A.1):
//   - OpenAI: 128 tools ("Expected an array with maximum length 128",
//     array_above_max_length); names ^[a-zA-Z0-9_-]+$, at most 64
//     characters on Chat; tool_choice none, auto, required, named,
//     allowed_tools.
//   - DeepSeek: names a-z A-Z 0-9 _ -, at most 64 (ds-api tool.rs); no
//     tool cap published (GodeX uses 128); tool_choice none, auto,
//     required, named; V4 thinking with required answers 400 "Thinking mode
//     does not support this tool_choice" (litellm PR#37470), and
//     deepseek-reasoner rejects tool_choice.
//   - Kimi: at most 128 functions; names ^[a-zA-Z_][a-zA-Z0-9-_]{2,63}$
//     (platform.kimi.ai tool-use); tool_choice modes not stated.
//   - GLM (z.ai): at most 128 functions; tool_choice "auto" only
//     (docs.z.ai function-calling); name rule not found.
//   - Qwen (DashScope): OpenAI-compatible tool_choice; thinking with
//     required or an object answers 400 "The tool_choice parameter does
//     not support being set to required or object in thinking mode"
//     (eino#994, qwen-code#7659); cap and name rule not found.
//   - MiniMax: tool_choice accepted (secondary source); cap and name rule
//     not found.
//   - Gemini: 128 function declarations (Vertex v1beta1); names start with
//     a letter or '_', then [a-zA-Z0-9_.:-], at most 64; modes AUTO, ANY,
//     NONE and allowedFunctionNames.
//   - Bedrock Converse: names [a-zA-Z0-9_-]+, 1 to 64 (ToolSpecification);
//     toolChoice auto, any, tool and no "none"; Claude refuses a forced
//     choice while thinking; no cap found.

// safeMaxTools is used where no source gives a cap: OpenAI's 128, which
// every provider that publishes a cap shares.
const safeMaxTools = 128

// safeNamePattern is used where no source gives a name rule: OpenAI's Chat
// rule, the strictest common one.
const safeNamePattern = `^[a-zA-Z0-9_-]{1,64}$`

// Choice modes a profile lists.
const (
	choiceNone     = "none"
	choiceAuto     = "auto"
	choiceRequired = "required"
	choiceNamed    = "named"
	choiceAllowed  = "allowed_tools"
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

// preset is what one provider's profile sets; every preset also degrades
// what can be degraded, drops web search and unknown types, and flattens
// namespaces (see plan).
type preset struct {
	native           []string // types taken as they are, besides function
	choice, thinking []string // tool_choice modes without and while thinking
	maxTools         int
	pattern          string
	thinkingModels   []string
	thinkingFields   []string
}

// plan is the preset as a config, with fresh maps and slices the config's
// own fields may be merged into.
func (p preset) plan() ToolsPlan {
	return ToolsPlan{
		NativeTypes:        p.native,
		Types:              functionOnlyTypes(),
		UnknownTypes:       actDrop,
		Namespaces:         "flatten",
		ToolChoice:         p.choice,
		ThinkingToolChoice: p.thinking,
		MaxTools:           intp(p.maxTools),
		NamePattern:        p.pattern,
		ThinkingModels:     p.thinkingModels,
		ThinkingFields:     p.thinkingFields,
	}
}

var (
	modesAll      = []string{choiceNone, choiceAuto, choiceRequired, choiceNamed}
	modesUnforced = []string{choiceNone, choiceAuto}
)

// presets are the profiles by name.
var presets = map[string]preset{
	// A Responses or Chat upstream that takes function tools and nothing
	// else, with OpenAI's limits (128: OpenAI's validator).
	"function_only": {choice: modesAll, thinking: modesAll, maxTools: 128, pattern: `^[a-zA-Z0-9_-]{1,64}$`},
	// OpenAI Chat Completions: function and custom tools.
	"openai_chat": {native: []string{"custom"}, choice: append(modesAll[:4:4], choiceAllowed), thinking: append(modesAll[:4:4], choiceAllowed),
		maxTools: 128, pattern: `^[a-zA-Z0-9_-]{1,64}$`},
	// No cap published (GodeX uses 128); no forced choice while thinking.
	"deepseek": {choice: modesAll, thinking: modesUnforced, maxTools: safeMaxTools, pattern: `^[a-zA-Z0-9_-]{1,64}$`,
		thinkingModels: []string{"deepseek-reasoner"}, thinkingFields: []string{"thinking.type=enabled", "reasoning_effort", "reasoning.effort"}},
	// Modes not stated: the two every API has.
	"kimi": {choice: modesUnforced, thinking: modesUnforced, maxTools: 128, pattern: `^[a-zA-Z_][a-zA-Z0-9_-]{2,63}$`,
		thinkingModels: []string{"kimi-*-thinking*"}, thinkingFields: []string{"thinking.type=enabled"}},
	// "auto" only; name rule not found.
	"glm": {choice: []string{choiceAuto}, thinking: []string{choiceAuto}, maxTools: 128, pattern: safeNamePattern,
		thinkingFields: []string{"thinking.type=enabled"}},
	// Cap and name rule not found.
	"qwen": {choice: modesAll, thinking: modesUnforced, maxTools: safeMaxTools, pattern: safeNamePattern,
		thinkingModels: []string{"qwq*", "*-thinking*"}, thinkingFields: []string{"enable_thinking=true"}},
	// Cap and name rule not found.
	"minimax": {choice: modesAll, thinking: modesAll, maxTools: safeMaxTools, pattern: safeNamePattern},
	"gemini":  {choice: modesAll, thinking: modesAll, maxTools: 128, pattern: `^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`},
	// No "none"; Claude refuses a forced choice while thinking; no cap found.
	"bedrock": {choice: []string{choiceAuto, choiceRequired, choiceNamed}, thinking: []string{choiceAuto}, maxTools: safeMaxTools, pattern: `^[a-zA-Z0-9_-]{1,64}$`,
		thinkingFields: []string{"thinking.type=enabled", "additionalModelRequestFields.thinking.type=enabled"}},
}

func intp(n int) *int { return &n }
