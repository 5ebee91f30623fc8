package messagesbridge

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// The requests Claude Code 2.1.332 sent, recorded in the shared fixtures
// beside the repository; their prompt text is read from there, never
// copied here.
const rqFixtureDir = "../../../shared/fixtures/claude-code"

// rqFixture reads a recorded request: skipped where the fixtures are not
// checked out, a failure in CI, which has them.
func rqFixture(t *testing.T, name string) map[string]json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(rqFixtureDir, name))
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("fixture: %v", err)
		}
		t.Skipf("fixture not here: %v", err)
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	return req
}

// ccBlock is a text block of Claude Code's system or messages.
type ccBlock struct {
	Type, Text string
}

// ccTool is one of Claude Code's tool definitions.
type ccTool struct {
	Name, Description string
	InputSchema       json.RawMessage `json:"input_schema"`
	DeferLoading      bool            `json:"defer_loading"`
}

func rqDecode[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func rqTexts(blocks []ccBlock) string {
	var s []string
	for _, b := range blocks {
		s = append(s, b.Text)
	}
	return strings.Join(s, "\n\n")
}

// rqClaudeCode runs a recorded request, routed to model, through the
// bridge under profile, and returns the upstream body parsed, the
// expected one begun from the fixture, and the decisions.
func rqClaudeCode(t *testing.T, name, profile, model string) (req map[string]json.RawMessage, got map[string]any, want map[string]any, decisions []string) {
	t.Helper()
	req = rqFixture(t, name)
	req["model"], _ = json.Marshal(model)
	body, _ := json.Marshal(req)
	out, x, err := rqRun(t, rqRules(`{"profile":"`+profile+`"}`), string(body))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.NoDuplicateKeys(t, []byte(out))
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if p := x.UpstreamPath(); p != "/v1/chat/completions" {
		t.Errorf("path %q", p)
	}
	system := rqDecode[[]ccBlock](t, req["system"])
	if !strings.HasPrefix(system[0].Text, billingPrefix) {
		t.Fatalf("the fixture's first system block is not the billing line")
	}
	var tools []any
	for _, tl := range rqDecode[[]ccTool](t, req["tools"]) {
		if tl.DeferLoading {
			continue // no tool_reference loaded it
		}
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": tl.Name, "description": tl.Description, "parameters": rqDecode[any](t, tl.InputSchema)}})
	}
	want = map[string]any{
		"model": model,
		// One system message, without the billing line: the identity
		// line and the instructions.
		"messages": []any{map[string]any{"role": "system", "content": rqTexts(system[1:])}},
		"stream":   true, "stream_options": map[string]any{"include_usage": true},
	}
	if len(tools) > 0 {
		want["tools"] = tools
	}
	return req, got, want, rqDecisions(x)
}

// rqEqual compares parsed bodies as JSON.
func rqEqual(t *testing.T, got, want map[string]any) {
	t.Helper()
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	transformtest.JSONEqual(t, g, string(w))
}

// TestMessagesToChatClaudeCodeFirstTurn is §14 scenario 1: Claude Code's
// first request, sent to DeepSeek.
func TestMessagesToChatClaudeCodeFirstTurn(t *testing.T) {
	req, got, want, decisions := rqClaudeCode(t, "messages-first-request.json", "deepseek", "deepseek-reasoner")
	msgs := rqDecode[[]struct {
		Role    string
		Content []ccBlock
	}](t, req["messages"])
	if len(msgs) != 2 || msgs[1].Role != "system" {
		t.Fatalf("the fixture changed: %d messages", len(msgs))
	}
	want["messages"] = append(want["messages"].([]any),
		// The prompt's two text blocks, joined.
		map[string]any{"role": "user", "content": rqTexts(msgs[0].Content)},
		// The environment, a system message after the first user one:
		// a marked user message, so the cached prefix stays put.
		map[string]any{"role": "user", "content": "<system>\n" + rqTexts(msgs[1].Content) + "\n</system>"})
	// 128000 asked, the model takes 64K.
	want["max_tokens"] = 65536
	// Adaptive thinking at effort medium: DeepSeek's thinking, at high
	// (its lowest effort).
	want["thinking"] = map[string]any{"type": "enabled"}
	want["reasoning_effort"] = "high"
	rqEqual(t, got, want)
	if n := len(want["tools"].([]any)); n != 11 {
		t.Errorf("%d tools sent, want the 11 not deferred", n)
	}
	for _, d := range []string{"context_management drop", "output_config drop", "max_tokens clamp", "metadata.user_id drop",
		"DeferredToolPlaceholder defer", "system[0] drop", "cache_control drop"} {
		if !slices.Contains(decisions, d) {
			t.Errorf("no decision %q in %q", d, decisions)
		}
	}
}

// TestMessagesToChatClaudeCodeToolResult is Claude Code's second turn:
// the Write call and its result.
func TestMessagesToChatClaudeCodeToolResult(t *testing.T) {
	req, got, want, _ := rqClaudeCode(t, "messages-tool-result-request.json", "deepseek", "deepseek-v4-pro")
	msgs := rqDecode[[]struct {
		Role    string
		Content json.RawMessage
	}](t, req["messages"])
	if len(msgs) != 4 {
		t.Fatalf("the fixture changed: %d messages", len(msgs))
	}
	call := rqDecode[[]struct {
		ID, Name string
		Input    json.RawMessage
	}](t, msgs[2].Content)[0]
	result := rqDecode[[]struct {
		ToolUseID string `json:"tool_use_id"`
		Content   string
	}](t, msgs[3].Content)[0]
	var args bytes.Buffer
	if err := json.Compact(&args, call.Input); err != nil {
		t.Fatal(err)
	}
	want["messages"] = append(want["messages"].([]any),
		map[string]any{"role": "user", "content": rqTexts(rqDecode[[]ccBlock](t, msgs[0].Content))},
		map[string]any{"role": "user", "content": "<system>\n" + rqDecode[string](t, msgs[1].Content) + "\n</system>"},
		// No thinking came with the call: DeepSeek still wants the
		// member on a tool-call turn.
		map[string]any{"role": "assistant", "content": "", "reasoning_content": "", "tool_calls": []any{
			map[string]any{"id": call.ID, "type": "function", "function": map[string]any{"name": call.Name, "arguments": args.String()}}}},
		map[string]any{"role": "tool", "tool_call_id": result.ToolUseID, "content": result.Content})
	want["max_tokens"] = 128000 // under V4's cap
	want["thinking"] = map[string]any{"type": "enabled"}
	want["reasoning_effort"] = "high"
	rqEqual(t, got, want)
}

// TestMessagesToChatClaudeCodeTitle is the title request: no tools, no
// thinking, a JSON schema for the answer.
func TestMessagesToChatClaudeCodeTitle(t *testing.T) {
	req, got, want, _ := rqClaudeCode(t, "title-request.json", "openai_chat", "gpt-5.5")
	msgs := rqDecode[[]struct{ Content []ccBlock }](t, req["messages"])
	format := rqDecode[struct {
		Format struct{ Schema any }
	}](t, req["output_config"])
	want["messages"] = append(want["messages"].([]any), map[string]any{"role": "user", "content": rqTexts(msgs[0].Content)})
	want["max_completion_tokens"] = 128000
	want["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "response", "strict": true, "schema": format.Format.Schema}}
	rqEqual(t, got, want)
}
