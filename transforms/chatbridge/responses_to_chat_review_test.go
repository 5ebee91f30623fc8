package chatbridge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// Regression tests for a review of responses_to_chat: each case failed
// before its fix.

// chatInvariants checks what strict Chat providers enforce: one system
// message, first; every tool message answers a call of the assistant
// message just before the run of tool messages; every call is answered;
// no empty assistant message.
func chatInvariants(t *testing.T, body string) {
	t.Helper()
	if !json.Valid([]byte(body)) {
		t.Fatalf("not JSON: %s", body)
	}
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	var open map[string]bool
	for i, m := range req.Messages {
		if m.Role == "system" && i != 0 {
			t.Fatalf("messages[%d] is a second system message: %s", i, body)
		}
		if m.Role == "tool" {
			if !open[m.ToolCallID] {
				t.Fatalf("messages[%d] answers %q, not a call of the assistant message before it: %s", i, m.ToolCallID, body)
			}
			delete(open, m.ToolCallID)
			continue
		}
		if len(open) > 0 {
			t.Fatalf("messages[%d] comes before every call was answered (%v): %s", i, open, body)
		}
		if m.Role == "assistant" {
			if len(m.ToolCalls) == 0 && (m.Content == nil || m.Content == "") {
				t.Fatalf("messages[%d] is an empty assistant message: %s", i, body)
			}
			open = map[string]bool{}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		}
	}
	if len(open) > 0 {
		t.Fatalf("calls %v are never answered: %s", open, body)
	}
}

func TestResponsesToChatReviewHistoryOrder(t *testing.T) {
	img := `{"type":"function_call_output","call_id":"a","output":[{"type":"input_image","image_url":"data:image/png;base64,AA=="}]}`
	for name, items := range map[string][]string{
		"parallel calls, the first output an image": {rcMsg("user", "q"), rcCall("a", "view_image", `{}`), rcCall("b", "f", `{}`), img, rcOutput("b", "B")},
		"reasoning between calls":                   {rcMsg("user", "q"), rcReasoning(envDeepSeek, "r1"), rcCall("a", "f", `{}`), rcReasoning(envDeepSeek, "r2"), rcCall("b", "f", `{}`), rcOutput("a", "A"), rcOutput("b", "B")},
		"calls and outputs interleaved":             {rcMsg("user", "q"), rcCall("a", "f", `{}`), rcCall("b", "f", `{}`), rcOutput("a", "A"), rcCall("c", "f", `{}`), rcOutput("b", "B"), rcOutput("c", "C")},
		"an output before its call":                 {rcMsg("user", "q"), rcOutput("a", "A"), rcCall("a", "f", `{}`), rcMsg("user", "next")},
		"a message between a call and its output":   {rcMsg("user", "q"), rcCall("a", "f", `{}`), rcMsg("developer", "context"), rcOutput("a", "A")},
	} {
		t.Run(name, func(t *testing.T) {
			out, _, err := rcRequest(t, rcRules(`{"profile":"deepseek"}`), rcInput(items...))
			if err != nil {
				t.Fatal(err)
			}
			chatInvariants(t, out)
		})
	}
	// Reasoning between calls of one turn stays on the one message.
	out, _, err := rcRequest(t, rcRules(`{"profile":"deepseek"}`), rcInput(rcMsg("user", "q"), rcReasoning(envDeepSeek, "r1"), rcCall("a", "f", `{}`), rcReasoning(envDeepSeek, "r2"), rcCall("b", "f", `{}`), rcOutput("a", "A"), rcOutput("b", "B")))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(out), rcChat(`,"max_tokens":32768`, `{"role":"user","content":"q"}`,
		`{"role":"assistant","content":"","reasoning_content":"r1\nr2","tool_calls":[`+rcToolCall("a", "f", `{}`)+`,`+rcToolCall("b", "f", `{}`)+`]}`,
		`{"role":"tool","tool_call_id":"a","content":"A"}`, `{"role":"tool","tool_call_id":"b","content":"B"}`))
	// Consecutive assistant messages keep apart; no tool_choice without tools.
	out, _, err = rcRequest(t, rcRules(`{"profile":"deepseek"}`), `{"model":"gpt-5.5","tools":[],"tool_choice":"auto","input":[`+rcMsg("assistant", "Hello.")+`,`+rcMsg("assistant", "World.")+`]}`)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(out), rcChat(`,"max_tokens":32768`, `{"role":"assistant","content":"Hello.\n\nWorld."}`))
}

// streamOutput runs a Chat stream through the bridge and returns the
// texts of the final response's items by type, checking every event.
func streamOutput(t *testing.T, config, upstream string) (map[string]string, string) {
	t.Helper()
	out := rcNorm(transformtest.Replay(t, rcStreamExchange(t, rcRules(config)), upstream, 4096))
	if _, err := rcEventsProblem(out, true); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var final struct {
		Type     string `json:"type"`
		Response struct {
			Output []struct {
				Type      string `json:"type"`
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
				Content   []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		} `json:"response"`
	}
	for _, block := range strings.Split(out, "\n\n") {
		if _, data, ok := strings.Cut(block, "data: "); ok && strings.Contains(data, `"response":{`) {
			if err := json.Unmarshal([]byte(data), &final); err != nil {
				t.Fatalf("%v: %s", err, data)
			}
		}
	}
	got := map[string]string{"terminal": final.Type}
	for _, it := range final.Response.Output {
		switch it.Type {
		case "function_call":
			got["call "+it.Name] = it.Arguments
		default:
			for _, c := range it.Content {
				got[it.Type] += c.Text
			}
		}
	}
	return got, out
}

func TestResponsesToChatReviewStreams(t *testing.T) {
	for _, tc := range []struct {
		name, config, upstream string
		want                   map[string]string
	}{
		{
			name:     "finish_reason before the delta it ends (MiniMax's order)",
			upstream: "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"Hello \"}}]}\n\ndata: {\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"delta\":{\"content\":\"world\"}}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.completed", "message": "Hello world"},
		},
		{
			name:     "a call in the finishing chunk",
			upstream: "data: {\"choices\":[{\"finish_reason\":\"tool_calls\",\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"t1\",\"function\":{\"name\":\"bash\",\"arguments\":\"{}\"}}]}}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.completed", "call bash": "{}"},
		},
		{
			name:     "calls without index (Gemini)",
			upstream: "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"g\",\"arguments\":\"{\\\"y\\\":2}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.completed", "call f": `{"x":1}`, "call g": `{"y":2}`},
		},
		{
			name:     "an unknown finish reason fails",
			upstream: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"},\"finish_reason\":\"insufficient_system_resource\"}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.failed", "message": "half"},
		},
		{
			name:     "an error in the choice fails",
			upstream: "data: {\"choices\":[{\"index\":0,\"delta\":{},\"error\":{\"message\":\"boom\"},\"finish_reason\":\"error\"}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.failed"},
		},
		{
			name:     "an escaped backslash before an escaped closing tag is not the tag",
			upstream: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\u003cthink\\u003ex\\\\u003c/think\\u003ey\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.completed", "reasoning": `x\u003c/think>y`},
		},
		{
			name:     "white space after </think> in its own delta",
			upstream: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"<think>r</think>\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\n\\n\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"text\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.completed", "reasoning": "r", "message": "text"},
		},
		{
			name:     "a refusal is the answer's text",
			upstream: "data: {\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\"I can't help with that.\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.completed", "message": "I can't help with that."},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config := tc.config
			if config == "" {
				config = `{"profile":"function_only"}`
			}
			got, out := streamOutput(t, config, tc.upstream)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v\n%s", got, tc.want, out)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("%s: got %q, want %q (all %v)\n%s", k, got[k], v, got, out)
				}
			}
		})
	}
	// Leading white space is not looked at again on every delta.
	var up strings.Builder
	for range 100000 {
		up.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" \"}}]}\n\n")
	}
	up.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	got, _ := streamOutput(t, `{"profile":"function_only"}`, up.String())
	if got["message"] != strings.Repeat(" ", 100000)+"x" {
		t.Fatalf("the white space and the text: %d bytes", len(got["message"]))
	}
}

func TestResponsesToChatReviewErrors(t *testing.T) {
	x := rcStreamExchange(t, rcRules(`{"profile":"kimi"}`))
	for _, tc := range []struct {
		status int
		body   string
	}{
		{429, `{"error":{"message":"You exceeded your token limit for the minute, try again in 20s","code":"rate_limit_exceeded"}}`},
		{500, `{"error":{"message":"context window full on the server","code":null}}`},
		{400, `{"error":{"message":"max_tokens is above the output token limit","code":null}}`},
		{400, `{"error":{"message":"maximum context length is 8192","code":"model_not_found"}}`},
	} {
		if got := string(x.RewriteError(tc.status, []byte(tc.body))); got != tc.body {
			t.Errorf("%d %s became %s", tc.status, tc.body, got)
		}
	}
}
