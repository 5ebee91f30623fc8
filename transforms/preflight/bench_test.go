package preflight_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	tt "github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// chatJSONCase is a Chat request with Codex's function tools and a
// completion with text and two valid calls, one with a large patch.
func chatJSONCase(b *testing.B) (req, resp []byte) {
	codex := tt.CodexRequest(b)
	var tools []string
	gjson.GetBytes(codex, "tools").ForEach(func(_, t gjson.Result) bool {
		if t.Get("type").String() == "function" {
			tools = append(tools, `{"type":"function","function":{"name":`+t.Get("name").Raw+`,"parameters":`+t.Get("parameters").Raw+`}}`)
		}
		return true
	})
	tools = append(tools, `{"type":"function","function":{"name":"apply_patch","parameters":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"],"additionalProperties":false}}}`)
	req = []byte(`{"model":"m","messages":[{"role":"user","content":"Edit"}],"tools":[` + strings.Join(tools, ",") + `]}`)
	patch := "*** Begin Patch\n*** Add File: a.go\n" + strings.Repeat("+\tfmt.Println(\"hello, \\\"world\\\"\")\n", 400) + "*** End Patch\n"
	args1, _ := json.Marshal(map[string]string{"input": patch})
	text, _ := json.Marshal(strings.Repeat("I will edit the file now. ", 300))
	resp = []byte(`{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + string(text) +
		`,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"apply_patch","arguments":` + jsonString(string(args1)) + `}},` +
		`{"id":"call_2","type":"function","function":{"name":"exec_command","arguments":` + jsonString(`{"cmd":"go test ./...","workdir":"/tmp"}`) + `}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	return req, resp
}

func BenchmarkCheckChatJSON(b *testing.B) {
	req, resp := chatJSONCase(b)
	chain := tt.Chain(b, rules)
	b.SetBytes(int64(len(resp)))
	b.ReportAllocs()
	for b.Loop() {
		x := tt.Begin(b, chain, transforms.ProtocolChat, req)
		if _, err := x.RewriteRequest(req); err != nil {
			b.Fatal(err)
		}
		out, err := x.RewriteResponse(resp)
		if err != nil || string(out) != string(resp) {
			b.Fatalf("%v %d", err, len(out))
		}
	}
}

// BenchmarkCheckResponsesJSON: the Codex request's tools and a Responses
// answer with text and a valid exec_command call.
func BenchmarkCheckResponsesJSON(b *testing.B) {
	req := tt.CodexRequest(b)
	text, _ := json.Marshal(strings.Repeat("I will run the tests now. ", 300))
	resp := []byte(`{"id":"r1","object":"response","status":"completed","output":[{"type":"message","id":"m1","status":"completed","role":"assistant","content":[{"type":"output_text","text":` + string(text) + `,"annotations":[]}]},` +
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"exec_command","arguments":` + jsonString(`{"cmd":"go test ./...","workdir":"/tmp","yield_time_ms":1000}`) + `,"status":"completed"}],"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`)
	chain := tt.Chain(b, rules)
	b.SetBytes(int64(len(resp)))
	b.ReportAllocs()
	for b.Loop() {
		x := tt.Begin(b, chain, transforms.ProtocolResponses, req)
		if _, err := x.RewriteRequest(req); err != nil {
			b.Fatal(err)
		}
		out, err := x.RewriteResponse(resp)
		if err != nil || string(out) != string(resp) {
			b.Fatalf("%v %s", err, out)
		}
	}
}
