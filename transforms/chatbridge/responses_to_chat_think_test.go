package chatbridge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// Content that opens with <think> is split into reasoning and text, on a
// stream at every chunk size (tags and escapes cut anywhere), whether the
// upstream writes the tags plainly or escaped.
func TestResponsesToChatThinkInContent(t *testing.T) {
	rules := rcRules(`{"profile":"function_only"}`)
	for _, tc := range []struct {
		name            string
		pieces          []string // content deltas, as JSON strings
		reasoning, text string
	}{
		{"plain tags", []string{`"<thi"`, `"nk>Plan: \"ls\"\n"`, `"first.</th"`, `"ink>\n\nDone."`}, "Plan: \"ls\"\nfirst.", "Done."},
		{"escaped tags", []string{`"\u003cthink\u003ewhy"`, `" not\u003c/think\u003eanswer"`}, "why not", "answer"},
		{"no think", []string{`"<b>bold</b>"`, `" text"`}, "", "<b>bold</b> text"},
		{"leading space, then think", []string{`"\n "`, `"<think>r</think>t"`}, "r", "t"},
		{"unclosed think", []string{`"<think>only thinking"`}, "only thinking", ""},
		{"a tag later is text", []string{`"text <think>x</think>"`}, "", "text <think>x</think>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var up strings.Builder
			for _, p := range tc.pieces {
				up.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + p + `},"finish_reason":null}]}` + "\n\n")
			}
			up.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
			var out string
			for i, n := range transformtest.ChunkSizes {
				got := rcNorm(transformtest.Replay(t, rcStreamExchange(t, rules), up.String(), n))
				if i > 0 && got != out {
					t.Fatalf("chunk size %d changed the output:\n%s\n--- vs\n%s", n, got, out)
				}
				out = got
			}
			var final struct {
				Response struct {
					Output []struct {
						Type    string `json:"type"`
						Content []struct {
							Text string `json:"text"`
						} `json:"content"`
					} `json:"output"`
				} `json:"response"`
			}
			for _, block := range strings.Split(out, "\n\n") {
				if _, data, ok := strings.Cut(block, "data: "); ok && strings.Contains(data, `"type":"response.completed"`) {
					if err := json.Unmarshal([]byte(data), &final); err != nil {
						t.Fatal(err)
					}
				}
			}
			var reasoning, text string
			for _, it := range final.Response.Output {
				for _, c := range it.Content {
					if it.Type == "reasoning" {
						reasoning += c.Text
					} else {
						text += c.Text
					}
				}
			}
			if reasoning != tc.reasoning || text != tc.text {
				t.Fatalf("reasoning %q, text %q; want %q, %q\n%s", reasoning, text, tc.reasoning, tc.text, out)
			}
			if _, err := rcEventsProblem(out, true); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The same in a JSON answer.
	x := rcExchange(t, rules, "/v1/responses")
	if _, err := x.RewriteRequest([]byte(`{"model":"m","input":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	got, err := x.RewriteResponse([]byte(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"<think>why</think>\n\nanswer"},"finish_reason":"stop"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), `"type":"reasoning_text","text":"why"`) || !strings.Contains(string(got), `"type":"output_text","text":"answer"`) {
		t.Fatalf("%s", got)
	}
}
