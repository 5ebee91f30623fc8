package preflight_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	tt "github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// chatText streams content in pieces of n bytes and finishes with stop.
func chatText(text string, n int) string {
	head := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",`
	chunks := []string{head + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`}
	for len(text) > 0 {
		k := min(n, len(text))
		for k < len(text) && !utf8.RuneStart(text[k]) {
			k++ // upstreams split text between characters
		}
		chunks = append(chunks, head+`"choices":[{"index":0,"delta":{"content":`+jsonString(text[:k])+`},"finish_reason":null}]}`)
		text = text[k:]
	}
	chunks = append(chunks, head+`"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	return tt.ChatSSE(chunks...)
}

func TestChatStreamMarkupBecomesCalls(t *testing.T) {
	cases := map[string]string{
		"glm":   "<tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>a.txt</arg_value>\n<arg_key>limit</arg_key>\n<arg_value>10</arg_value>\n</tool_call>",
		"dsml":  "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"read_file\">\n<｜DSML｜parameter name=\"path\" string=\"true\">a.txt</｜DSML｜parameter>\n<｜DSML｜parameter name=\"limit\" string=\"false\">10</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		"hermes": "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\", \"limit\": 10}}\n</tool_call>",
	}
	for name, markup := range cases {
		for _, piece := range []int{1, 5, 1000} {
			up, _ := script(chatText("Let me read it.\n"+markup, piece))
			x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolChat, []byte(chatReq))
			out, sent := tt.RunStream(t, x, []byte(chatReq), up, 7)
			if len(sent) != 1 {
				t.Fatalf("%s: %d upstream requests", name, len(sent))
			}
			chunks, done := tt.ChatChunks(t, out)
			if !done {
				t.Fatalf("%s: no [DONE]", name)
			}
			var text strings.Builder
			var calls []any
			finish := ""
			for _, c := range chunks {
				for _, ch := range c["choices"].([]any) {
					ch := ch.(map[string]any)
					d := ch["delta"].(map[string]any)
					if s, ok := d["content"].(string); ok {
						text.WriteString(s)
					}
					if tc, ok := d["tool_calls"].([]any); ok {
						calls = append(calls, tc...)
					}
					if f, ok := ch["finish_reason"].(string); ok {
						finish += f
					}
				}
			}
			if text.String() != "Let me read it.\n" || finish != "tool_calls" || len(calls) != 1 {
				t.Fatalf("%s/%d: text %q finish %q calls %v\n%s", name, piece, text.String(), finish, calls, out)
			}
			c := calls[0].(map[string]any)
			fn := c["function"].(map[string]any)
			var args map[string]any
			_ = json.Unmarshal([]byte(fn["arguments"].(string)), &args)
			if fn["name"] != "read_file" || args["path"] != "a.txt" || args["limit"] != float64(10) || c["index"] != float64(0) ||
				!strings.HasPrefix(c["id"].(string), "call_") {
				t.Fatalf("%s: call %v", name, c)
			}
		}
	}
}

func TestChatStreamTextMentioningMarkupStaysText(t *testing.T) {
	text := "Use <tool_call> tags? No: here is <b>bold</b> and a < b."
	for _, piece := range []int{1, 4, 1000} {
		up, _ := script(chatText(text, piece))
		x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolChat, []byte(chatReq))
		out, _ := tt.RunStream(t, x, []byte(chatReq), up, 4096)
		chunks, _ := tt.ChatChunks(t, out)
		var got strings.Builder
		for _, c := range chunks {
			for _, ch := range c["choices"].([]any) {
				if s, ok := ch.(map[string]any)["delta"].(map[string]any)["content"].(string); ok {
					got.WriteString(s)
				}
			}
		}
		if got.String() != text {
			t.Fatalf("piece %d: text %q, want %q", piece, got.String(), text)
		}
	}
}
