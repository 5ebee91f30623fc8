package messagesbridge

import (
	"slices"
	"testing"
)

// TestMessagesToChatClaudeCodeFirstTurnPerProfile is §14 scenario 1,
// Claude Code's first request, sent to each Chat profile besides DeepSeek
// (TestMessagesToChatClaudeCodeFirstTurn). The request asks for
// max_tokens 128000, adaptive thinking at output_config.effort medium,
// and streams; what differs by profile is the output cap's field and
// value (providers.go OutputCaps, MaxTokensField) and the thinking knob
// (each profile's Effort, handed "medium": request_params.go readThinking).
func TestMessagesToChatClaudeCodeFirstTurnPerProfile(t *testing.T) {
	for _, tc := range []struct {
		profile, model string
		// The output cap's field and value, and whether 128000 was
		// clamped to get it.
		maxField string
		max      int
		clamped  bool
		// The thinking knob's members.
		knob map[string]any
	}{
		// K2.x's cap is its 256K window: 128000 fits. Kimi's knob only
		// switches thinking off; on is K2.6's default, so nothing is sent.
		{profile: "kimi", model: "kimi-k2.6", maxField: "max_tokens", max: 128000},
		// GLM-4.6 writes up to 128K (131072): 128000 fits. Thinking on,
		// earlier reasoning kept (preserved thinking).
		{profile: "glm", model: "glm-4.6", maxField: "max_tokens", max: 128000,
			knob: map[string]any{"thinking": map[string]any{"type": "enabled", "clear_thinking": false}}},
		// qwen3-max writes up to 64K. The request streams, so DashScope
		// may think: enable_thinking on (false only on a non-streaming
		// call).
		{profile: "qwen", model: "qwen3-max", maxField: "max_tokens", max: 65536, clamped: true,
			knob: map[string]any{"enable_thinking": true}},
		// M2's window is 204800: 128000 fits. Thinking apart from the
		// content, and on (adaptive for any effort but none).
		{profile: "minimax", model: "MiniMax-M2", maxField: "max_tokens", max: 128000,
			knob: map[string]any{"reasoning_split": true, "thinking": map[string]any{"type": "adaptive"}}},
		// No cap known for OpenAI's models; their field is
		// max_completion_tokens, the effort goes as it is.
		{profile: "openai_chat", model: "gpt-5.5", maxField: "max_completion_tokens", max: 128000,
			knob: map[string]any{"reasoning_effort": "medium"}},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			req, got, want, decisions := rqClaudeCode(t, "messages-first-request.json", tc.profile, tc.model)
			// The fixture as the expectations read it.
			if s := rqDecode[bool](t, req["stream"]); !s {
				t.Fatalf("the fixture changed: stream %v", s)
			}
			if n := rqDecode[int](t, req["max_tokens"]); n != 128000 {
				t.Fatalf("the fixture changed: max_tokens %d", n)
			}
			if th := rqDecode[struct{ Type string }](t, req["thinking"]); th.Type != "adaptive" {
				t.Fatalf("the fixture changed: thinking %q", th.Type)
			}
			if oc := rqDecode[struct{ Effort string }](t, req["output_config"]); oc.Effort != "medium" {
				t.Fatalf("the fixture changed: effort %q", oc.Effort)
			}
			msgs := rqDecode[[]struct {
				Role    string
				Content []ccBlock
			}](t, req["messages"])
			if len(msgs) != 2 || msgs[1].Role != "system" {
				t.Fatalf("the fixture changed: %d messages", len(msgs))
			}

			want["messages"] = append(want["messages"].([]any),
				map[string]any{"role": "user", "content": rqTexts(msgs[0].Content)},
				map[string]any{"role": "user", "content": "<system>\n" + rqTexts(msgs[1].Content) + "\n</system>"})
			want[tc.maxField] = tc.max
			for k, v := range tc.knob {
				want[k] = v
			}
			rqEqual(t, got, want)
			if n := len(want["tools"].([]any)); n != 11 {
				t.Errorf("%d tools sent, want the 11 not deferred", n)
			}
			// The request's metadata.user_id is Claude Code's JSON
			// document, too long for user: no profile gets it.
			if _, ok := got["user"]; ok {
				t.Errorf("user sent: %v", got["user"])
			}

			for _, d := range []string{"context_management drop", "output_config drop", "metadata.user_id drop",
				"DeferredToolPlaceholder defer", "system[0] drop", "cache_control drop"} {
				if !slices.Contains(decisions, d) {
					t.Errorf("no decision %q in %q", d, decisions)
				}
			}
			if c := slices.Contains(decisions, "max_tokens clamp"); c != tc.clamped {
				t.Errorf("max_tokens clamp decided: %v, want %v (%q)", c, tc.clamped, decisions)
			}
		})
	}
}
