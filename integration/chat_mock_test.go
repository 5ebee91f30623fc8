package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// mockCustomInput has a newline, CJK, quotes and a backslash: everything
// that must survive two levels of JSON.
const mockCustomInput = "first line\n中文 \"quoted\" \\ second line"

// chatScript answers, behind fakeprovider's strict checks, with text, a
// call of grammar_tool (sent one character of arguments per chunk when
// streaming) and a native call: two calls interleaved, which the scripted
// provider never sends.
func chatScript(w http.ResponseWriter, req gjson.Result) {
	customArgs, _ := json.Marshal(map[string]string{"input": mockCustomInput})
	nativeArgs := `{"input":"native function input"}`
	if !req.Get("stream").Bool() {
		w.Header().Set("Content-Type", "application/json")
		resp := map[string]any{
			"id": "chatcmpl-mock", "object": "chat.completion", "created": 1, "model": "mock",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{
				"role": "assistant", "content": "text remains live",
				"tool_calls": []any{
					map[string]any{"id": "custom-call", "type": "function", "function": map[string]any{"name": "grammar_tool", "arguments": string(customArgs)}},
					map[string]any{"id": "native-call", "type": "function", "function": map[string]any{"name": "native_tool", "arguments": nativeArgs}},
				}}}},
			"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22},
		}
		_ = json.NewEncoder(w).Encode(resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	chunk := func(choices string) {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"mock\",\"choices\":[%s]}\n\n", choices)
		_ = rc.Flush()
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	chunk(`{"index":0,"delta":{"role":"assistant","content":"text remains live"},"finish_reason":null}`)
	chunk(`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"custom-call","type":"function","function":{"name":"grammar_tool","arguments":""}},{"index":1,"id":"native-call","type":"function","function":{"name":"native_tool","arguments":""}}]},"finish_reason":null}`)
	for i, r := range []rune(string(customArgs)) {
		chunk(`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":` + q(string(r)) + `}}]},"finish_reason":null}`)
		if i == 0 {
			chunk(`{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":` + q(nativeArgs) + `}}]},"finish_reason":null}`)
		}
	}
	chunk(`{"index":0,"delta":{},"finish_reason":"tool_calls"}`)
	fmt.Fprint(w, "data: {\"id\":\"chatcmpl-mock\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"mock\",\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":12,\"total_tokens\":22}}\n\n")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

const mockClientRequest = `{"model":"mock","messages":[` +
	`{"role":"assistant","content":null,"tool_calls":[{"id":"history-custom","type":"custom","custom":{"name":"grammar_tool","input":"{\"input\":\"literal custom bytes\"}"}}]},` +
	`{"role":"tool","tool_call_id":"history-custom","content":"done"},` +
	`{"role":"user","content":"go on"}],` +
	`"tools":[{"type":"custom","custom":{"name":"grammar_tool","format":{"type":"text"}}},{"type":"function","function":{"name":"native_tool","parameters":{"type":"object"}}}],` +
	`"tool_choice":{"type":"custom","custom":{"name":"grammar_tool"}}`

func TestChatMockUpstreamRoundTrip(t *testing.T) {
	mock := &fakeprovider.Provider{Reply: chatScript}
	srv := httptest.NewServer(mock)
	defer srv.Close()
	startGateway(t, `		rule field_custom_tools_to_function {
			names *
		}`, strings.TrimPrefix(srv.URL, "http://"))
	client := sdkClient()

	// Non-streaming: the SDK sees the custom call and the native one.
	var resp openai.ChatCompletion
	if err := client.Post(context.Background(), "chat/completions", json.RawMessage(mockClientRequest+`}`), &resp); err != nil {
		t.Fatal(err)
	}
	calls := resp.Choices[0].Message.ToolCalls
	if len(calls) != 2 || calls[0].Type != "custom" || calls[0].AsCustom().Custom.Input != mockCustomInput || calls[0].ID != "custom-call" {
		t.Fatalf("custom call: %s", resp.RawJSON())
	}
	if calls[1].Type != "function" || calls[1].Function.Arguments != `{"input":"native function input"}` {
		t.Fatalf("native call: %s", calls[1].RawJSON())
	}

	// What the upstream received.
	reqs := mock.Requests()
	up := gjson.ParseBytes(reqs[len(reqs)-1])
	for _, tool := range up.Get("tools").Array() {
		if tool.Get("type").String() != "function" {
			t.Fatalf("upstream tool %s", tool.Raw)
		}
	}
	if up.Get("tool_choice").Raw != `{"type":"function","function":{"name":"grammar_tool"}}` {
		t.Fatalf("tool_choice %s", up.Get("tool_choice").Raw)
	}
	if up.Get(`tools.0.function.parameters.required.0`).String() != "input" {
		t.Fatalf("schema %s", up.Get("tools.0").Raw)
	}
	hist := up.Get("messages.0.tool_calls.0")
	if hist.Get("type").String() != "function" || hist.Get("id").String() != "history-custom" ||
		gjson.Get(hist.Get("function.arguments").String(), "input").String() != `{"input":"literal custom bytes"}` {
		t.Fatalf("history call %s", hist.Raw)
	}
	if up.Get("messages.1.role").String() != "tool" || up.Get("messages.1.tool_call_id").String() != "history-custom" {
		t.Fatalf("tool message %s", up.Get("messages.1").Raw)
	}

	// Streaming: custom input deltas add up, the native arguments arrive
	// intact, the text comes first, one finish_reason, one [DONE].
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{},
		option.WithRequestBody("application/json", []byte(mockClientRequest+`,"stream":true,"stream_options":{"include_usage":true}}`)))
	var custom, native strings.Builder
	var finishes []string
	var sawText, textFirst bool
	for stream.Next() {
		ch := stream.Current()
		for _, c := range ch.Choices {
			if c.Delta.Content != "" {
				sawText = true
			}
			if c.FinishReason != "" {
				finishes = append(finishes, c.FinishReason)
			}
			for _, tc := range c.Delta.ToolCalls {
				raw := gjson.Parse(tc.RawJSON())
				if in := raw.Get("custom.input"); in.Exists() {
					if custom.Len() == 0 && in.String() != "" {
						textFirst = sawText
					}
					custom.WriteString(in.String())
				}
				native.WriteString(raw.Get("function.arguments").String())
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if custom.String() != mockCustomInput || native.String() != `{"input":"native function input"}` || !textFirst || strings.Join(finishes, ",") != "tool_calls" {
		t.Fatalf("custom %q native %q textFirst %v finishes %v", custom.String(), native.String(), textFirst, finishes)
	}
}
