// Package providers is the one table of what the gateway knows about each
// upstream provider: its tool limits and name rule, the tool_choice modes
// it takes with and without thinking, how to tell a thinking request, and
// the Chat knobs for output tokens and reasoning. tools_plan and the
// protocol bridges read their profiles from it, so a provider is added or
// corrected in one row. docs/providers.md gives the sources.
package providers

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// tool_choice modes a profile lists.
const (
	ChoiceNone     = "none"
	ChoiceAuto     = "auto"
	ChoiceRequired = "required"
	ChoiceNamed    = "named"
	ChoiceAllowed  = "allowed_tools"
)

// SafeMaxTools is the cap used where no source gives one: OpenAI's 128,
// which every provider that publishes a cap shares.
const SafeMaxTools = 128

// SafeNamePattern is the name rule used where no source gives one:
// OpenAI's Chat rule, the strictest common one.
const SafeNamePattern = `^[a-zA-Z0-9_-]{1,64}$`

// Reasoning says what a provider wants of earlier turns' reasoning.
const (
	// ReasoningStrip: the provider ignores or refuses it.
	ReasoningStrip = "strip"
	// ReasoningReplay: every assistant turn carries its reasoning back.
	ReasoningReplay = "replay"
	// ReasoningToolCalls: turns with tool calls carry it back (Kimi).
	ReasoningToolCalls = "tool_calls"
)

// Profile is one provider's facts.
type Profile struct {
	// NativeTypes are the tool types taken as they are, besides function.
	NativeTypes []string
	// ToolChoice and ThinkingToolChoice are the tool_choice modes taken
	// without and while thinking.
	ToolChoice, ThinkingToolChoice []string
	// MaxTools is the most tools one request may declare.
	MaxTools int
	// NamePattern is the rule tool names must match.
	NamePattern string
	// ThinkingModels are model globs that always think; ThinkingFields are
	// request fields (path or path=value) that switch thinking on.
	ThinkingModels, ThinkingFields []string
	// DefaultThinkingModels are model globs that think unless the
	// request switches thinking off (DeepSeek V4): a request that says
	// nothing of thinking gets the thinking mode's tool_choice rules.
	DefaultThinkingModels []string

	// MaxTokensField is the Chat field for the output cap, and MaxTokens
	// the cap sent when the client gives none (0: send none).
	MaxTokensField string
	MaxTokens      int
	// Reasoning is what the provider wants of earlier turns' reasoning.
	Reasoning string
	// Effort appends the Chat fields for a Responses reasoning effort
	// ("" when the client sent none); nil when the provider has no knob.
	Effort func(dst []byte, effort string) []byte
	// StreamThinking: the provider thinks only on streams and refuses a
	// non-streaming call with thinking on (DashScope).
	StreamThinking bool
	// Verbosity: the provider takes OpenAI's verbosity field.
	Verbosity bool
	// NoJSONSchema: the provider's response_format takes json_object but
	// not json_schema.
	NoJSONSchema bool
	// OutputCaps are the most output tokens a request may ask of the
	// models matching each glob, first match first; a model none matches
	// has no known cap.
	OutputCaps []ModelCap

	// VisionModels are globs of the models that read images (Chat
	// image_url parts); TextOnlyModels, checked first, are those among
	// them that do not. A model neither list names is taken to read text
	// only: an image sent to it is a 400 or, worse, silently ignored, so
	// the bridge puts a placeholder in its place. Documents (PDF) are no
	// capability here: no Chat upstream of the table takes file parts.
	VisionModels, TextOnlyModels []string
	// NoImageURLs: the upstream takes images as base64 data URLs only and
	// refuses an http(s) URL.
	NoImageURLs bool
}

// Vision reports whether model reads images, matched lower-cased as
// OutputCap.
func (p Profile) Vision(model string) bool {
	m := strings.ToLower(model)
	match := func(g string) bool { return globMatch(g, m) }
	return !slices.ContainsFunc(p.TextOnlyModels, match) && slices.ContainsFunc(p.VisionModels, match)
}

// ModelCap is the output cap of the models whose lower-cased name matches
// Glob (`*` any run, `?` one character).
type ModelCap struct {
	Glob string
	Max  int
}

// OutputCap returns the output cap of model, 0 when none is known. Names
// are matched lower-cased: providers spell them both ways (MiniMax-M2,
// minimax-m2) and take either.
func (p Profile) OutputCap(model string) int {
	m := strings.ToLower(model)
	for _, c := range p.OutputCaps {
		if globMatch(c.Glob, m) {
			return c.Max
		}
	}
	return 0
}

// globMatch reports whether the whole of s matches pattern: `*` any run of
// bytes, `?` one byte (the globs and names here are ASCII). It backtracks
// to the last star only, so it stays linear in practice.
func globMatch(pattern, s string) bool {
	p, i, starP, starI := 0, 0, -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			starP, starI = p, i
			p++
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p, i = p+1, i+1
		case starP >= 0:
			starI++
			p, i = starP+1, starI
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

var (
	modesAll      = []string{ChoiceNone, ChoiceAuto, ChoiceRequired, ChoiceNamed}
	modesUnforced = []string{ChoiceNone, ChoiceAuto}
	modesOpenAI   = []string{ChoiceNone, ChoiceAuto, ChoiceRequired, ChoiceNamed, ChoiceAllowed}
)

// effortField is OpenAI's reasoning_effort.
func effortField(dst []byte, effort string) []byte {
	if effort == "" {
		return dst
	}
	dst = append(dst, `,"reasoning_effort":`...)
	return jsonspan.AppendStringStr(dst, effort)
}

// thinkingSwitch is the providers' thinking:{type} knob: "none" turns
// thinking off, another effort on.
func thinkingSwitch(on string) func([]byte, string) []byte {
	return func(dst []byte, effort string) []byte {
		switch effort {
		case "":
			return dst
		case "none":
			return append(dst, `,"thinking":{"type":"disabled"}`...)
		}
		return append(dst, `,"thinking":{"type":"`+on+`"}`...)
	}
}

// profiles are the providers by profile name. Where the sources give no
// number, the value is the safe one and the comment says so.
var profiles = map[string]Profile{
	// A Responses or Chat upstream that takes function tools and nothing
	// else, with OpenAI's limits.
	"function_only": {ToolChoice: modesAll, ThinkingToolChoice: modesAll, MaxTools: 128, NamePattern: `^[a-zA-Z0-9_-]{1,64}$`,
		MaxTokensField: "max_tokens", MaxTokens: 32768, Reasoning: ReasoningStrip, Effort: effortField},
	// OpenAI Chat Completions: function and custom tools.
	"openai_chat": {NativeTypes: []string{"custom"}, ToolChoice: modesOpenAI, ThinkingToolChoice: modesOpenAI, MaxTools: 128, NamePattern: `^[a-zA-Z0-9_-]{1,64}$`,
		MaxTokensField: "max_completion_tokens", Reasoning: ReasoningStrip, Effort: effortField, Verbosity: true,
		// OpenAI's current models read images; the ones whose model
		// pages say "Input: text" only do not (platform.openai.com/docs/
		// models: gpt-3.5-turbo, gpt-4 and its dated 0314/0613 and 32k
		// snapshots, o1-mini, o3-mini; the open-weight gpt-oss models).
		VisionModels:   []string{"*"},
		TextOnlyModels: []string{"gpt-3.5*", "gpt-4", "gpt-4-0314", "gpt-4-0613", "gpt-4-32k*", "o1-mini*", "o3-mini*", "gpt-oss*"}},
	// No cap published (others use 128); no forced choice while thinking.
	// DeepSeek V4 wants reasoning_content back on every tool-call turn,
	// thinking is on unless switched off, and effort is high or max.
	"deepseek": {ToolChoice: modesAll, ThinkingToolChoice: modesUnforced, MaxTools: SafeMaxTools, NamePattern: `^[a-zA-Z0-9_-]{1,64}$`,
		ThinkingModels: []string{"deepseek-reasoner"}, ThinkingFields: []string{"thinking.type=enabled", "reasoning_effort", "reasoning.effort"},
		// V4 thinks by default (docs.agno.com DeepSeek thinking mode;
		// AIHubMix's V4 report: "thinks by default").
		DefaultThinkingModels: []string{"deepseek-v4*"},
		MaxTokensField:        "max_tokens", MaxTokens: 32768, Reasoning: ReasoningReplay, Effort: func(dst []byte, effort string) []byte {
			switch effort {
			case "":
				return dst
			case "none":
				return append(dst, `,"thinking":{"type":"disabled"}`...)
			case "xhigh", "max":
				return append(dst, `,"thinking":{"type":"enabled"},"reasoning_effort":"max"`...)
			}
			return append(dst, `,"thinking":{"type":"enabled"},"reasoning_effort":"high"`...)
		},
		// V4 answers a larger value with "the valid range of max_tokens is
		// [1, 393216]" (anthropic-messages-bridge.md §4); the V3 aliases
		// take 8K (deepseek-chat, CLIProxyAPI#599) and 64K
		// (deepseek-reasoner), api-docs.deepseek.com/quick_start/pricing.
		// JSON output is response_format json_object alone
		// (api-docs.deepseek.com/guides/json_mode).
		NoJSONSchema: true,
		OutputCaps:   []ModelCap{{"deepseek-v4*", 393216}, {"deepseek-chat", 8192}, {"deepseek-reasoner", 65536}},
		// No vision models: DeepSeek's API reads text only (its
		// chat/completions reference types message content as text; the
		// DeepSeek-VL models are open weights, not served by the API).
	},
	// tool_choice modes not stated: the two every API has. Kimi refuses
	// tool-call messages without reasoning_content while thinking (code
	// 20015).
	"kimi": {ToolChoice: modesUnforced, ThinkingToolChoice: modesUnforced, MaxTools: 128, NamePattern: `^[a-zA-Z_][a-zA-Z0-9_-]{2,63}$`,
		ThinkingModels: []string{"kimi-*-thinking*"}, ThinkingFields: []string{"thinking.type=enabled"},
		MaxTokensField: "max_tokens", MaxTokens: 32768, Reasoning: ReasoningToolCalls, Effort: func(dst []byte, effort string) []byte {
			if effort == "none" {
				return append(dst, `,"thinking":{"type":"disabled"}`...)
			}
			return dst
		},
		// Kimi counts the input and max_tokens against the window, 256K
		// for K2.x (platform.kimi.ai model list; anthropic-messages-
		// bridge.md §4): no request may ask more. The moonshot-v1 names
		// give their window.
		OutputCaps: []ModelCap{{"kimi-k2*", 262144}, {"moonshot-v1-8k*", 8192}, {"moonshot-v1-32k*", 32768}, {"moonshot-v1-128k*", 131072}},
		// platform.kimi.ai "Use the Kimi Vision Model": the
		// moonshot-v1-*-vision-preview models and kimi-k2.5 on; K2.6,
		// K2.7-code and K3 are image-text models too (their Hugging Face
		// cards; Alibaba Model Studio's Kimi page: "text, image, or video
		// input"); kimi-latest and kimi-thinking-preview read images
		// (LobeChat's Moonshot model cards). kimi-k2 (0711, 0905, turbo,
		// thinking) reads text only. The same page: "URL-formatted
		// images: Not supported", base64 only (OpenHands
		// software-agent-sdk#3219 hit "unsupported image url").
		VisionModels: []string{"kimi-k2.5*", "kimi-k2.6*", "kimi-k2.7*", "kimi-k3*", "kimi-latest*", "kimi-thinking-preview*", "moonshot-v1-*-vision*"},
		NoImageURLs:  true},
	// "auto" only; name rule not found. GLM drops earlier turns' reasoning
	// unless clear_thinking is false ("preserved thinking"); then it wants
	// it back, complete and in order.
	"glm": {ToolChoice: []string{ChoiceAuto}, ThinkingToolChoice: []string{ChoiceAuto}, MaxTools: 128, NamePattern: SafeNamePattern,
		ThinkingFields: []string{"thinking.type=enabled"},
		MaxTokensField: "max_tokens", MaxTokens: 32768, Reasoning: ReasoningReplay, Effort: func(dst []byte, effort string) []byte {
			if effort == "none" {
				return append(dst, `,"thinking":{"type":"disabled"}`...)
			}
			return append(dst, `,"thinking":{"type":"enabled","clear_thinking":false}`...)
		},
		// docs.z.ai model pages: GLM-4.5 and 4.5-Air 96K output, GLM-4.6
		// 128K; the later models no less, so 4.6's cap is kept for them.
		OutputCaps: []ModelCap{{"glm-4.5*", 98304}, {"glm-4.6*", 131072}, {"glm-4.7*", 131072}, {"glm-5*", 131072}},
		// The V models read images (docs.z.ai GLM-4.5V and GLM-4.6V pages;
		// Vercel AI Gateway's model pages: "Vision (Image)"); GLM-4.5,
		// 4.6, 4.7 and 5 read text only.
		VisionModels: []string{"glm-4v*", "glm-4.1v*", "glm-4.5v*", "glm-4.6v*"}},
	// Cap and name rule not found; thinks on streams only.
	"qwen": {ToolChoice: modesAll, ThinkingToolChoice: modesUnforced, MaxTools: SafeMaxTools, NamePattern: SafeNamePattern,
		ThinkingModels: []string{"qwq*", "*-thinking*"}, ThinkingFields: []string{"enable_thinking=true"},
		MaxTokensField: "max_tokens", MaxTokens: 32768, Reasoning: ReasoningStrip, StreamThinking: true, Effort: func(dst []byte, effort string) []byte {
			if effort == "" {
				return dst
			}
			return append(dst, `,"enable_thinking":`+strconv.FormatBool(effort != "none")...)
		},
		// Alibaba Model Studio's model list: qwen3-max and qwen3-coder-plus
		// 64K output (also Vercel AI Gateway's qwen3-max page), qwen-max 8K.
		OutputCaps: []ModelCap{{"qwen3-max*", 65536}, {"qwen3-coder-plus*", 65536}, {"qwen-max", 8192}, {"qwen-max-*", 8192}},
		// The VL, QVQ and Omni models read images through DashScope's
		// OpenAI-compatible image_url (help.aliyun.com "OpenAI Vision接口
		// 兼容", the Qwen-VL model list); qwen-max, qwen-plus, qwen3-max
		// and the coders read text only.
		VisionModels: []string{"qwen-vl*", "qwen2-vl*", "qwen2.5-vl*", "qwen3-vl*", "qvq*", "qwen*-omni*"}},
	// Cap and name rule not found. MiniMax keeps thinking apart from
	// content only when asked to.
	"minimax": {ToolChoice: modesAll, ThinkingToolChoice: modesAll, MaxTools: SafeMaxTools, NamePattern: SafeNamePattern,
		MaxTokensField: "max_tokens", MaxTokens: 32768, Reasoning: ReasoningReplay, Effort: func(dst []byte, effort string) []byte {
			dst = append(dst, `,"reasoning_split":true`...)
			return thinkingSwitch("adaptive")(dst, effort)
		},
		// M2's window is 204,800 tokens, output included (platform.minimax.io
		// model list; Vercel AI Gateway's MiniMax M2 page gives the same
		// for output); M2.1's lightning variant 131,072.
		OutputCaps: []ModelCap{{"minimax-m2.1-lightning*", 131072}, {"minimax-m2*", 204800}},
		// No vision models: M2 to M2.7 read text only (MiniMax's
		// Anthropic-compatible API docs, as cited in openclaw/openclaw
		// PR #65453; Gitlawb/openclaude PR #2068; MiniMax-AI/MiniMax-M2
		// #107: images need their MCP tool). M3 is reported to read
		// images, unconfirmed by MiniMax's docs: left out until it is.
	},
	"gemini": {ToolChoice: modesAll, ThinkingToolChoice: modesAll, MaxTools: 128, NamePattern: `^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`,
		MaxTokensField: "max_tokens", MaxTokens: 32768, Reasoning: ReasoningStrip, Effort: effortField,
		// Every Gemini model reads images (ai.google.dev models page).
		VisionModels: []string{"*"}},
	// No "none"; Claude refuses a forced choice while thinking; no cap
	// found.
	"bedrock": {ToolChoice: []string{ChoiceAuto, ChoiceRequired, ChoiceNamed}, ThinkingToolChoice: []string{ChoiceAuto}, MaxTools: SafeMaxTools, NamePattern: `^[a-zA-Z0-9_-]{1,64}$`,
		ThinkingFields: []string{"thinking.type=enabled", "additionalModelRequestFields.thinking.type=enabled"},
		MaxTokensField: "max_tokens", MaxTokens: 32768, Reasoning: ReasoningStrip},
}

// Lookup returns the profile named name. Its slices are shared: copy
// before changing them.
func Lookup(name string) (Profile, bool) {
	p, ok := profiles[name]
	return p, ok
}

// Unknown is the error for a profile name not in the table, naming the
// option (field) and listing the profiles.
func Unknown(field, name string) error { return UnknownName(field, name, profiles) }

// UnknownName is the error for a preset name (a profile, a dialect) not
// among names' keys, listing them; field names the option.
func UnknownName[V any](field, name string, names map[string]V) error {
	have := slices.Sorted(maps.Keys(names))
	return fmt.Errorf("%s %q: unknown; have %s", field, name, strings.Join(have, ", "))
}

// Names are the profiles' names, sorted.
func Names() []string { return slices.Sorted(maps.Keys(profiles)) }

// Bridged is the profile name's row with a protocol bridge's overrides of
// its Chat knobs: the token limit field ("" keeps the profile's) and what
// earlier reasoning goes back ("" keeps the profile's).
func Bridged(name, maxTokensField, reasoning string) (Profile, error) {
	k, ok := Lookup(name)
	if !ok {
		return k, Unknown("profile", name)
	}
	switch maxTokensField {
	case "":
	case "max_tokens", "max_completion_tokens":
		k.MaxTokensField = maxTokensField
	default:
		return k, fmt.Errorf("max_tokens_field %q: want max_tokens or max_completion_tokens", maxTokensField)
	}
	switch reasoning {
	case "":
	case ReasoningReplay, ReasoningToolCalls, ReasoningStrip:
		k.Reasoning = reasoning
	default:
		return k, fmt.Errorf("reasoning %q: want replay, tool_calls or strip", reasoning)
	}
	return k, nil
}
