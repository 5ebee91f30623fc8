package customtools

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

func rewriteChat(t *testing.T, rules, body string) (string, error) {
	t.Helper()
	c := transformtest.Chain(t, rules)
	x := transformtest.Begin(t, c, transforms.ProtocolChat, []byte(body))
	out, err := x.RewriteRequest([]byte(body))
	return string(out), err
}

const chatGenericFunction = `"parameters":` + genericParams + `,"strict":false`

func TestChatRequest(t *testing.T) {
	for _, tc := range []struct{ name, rules, body, want string }{
		{
			name:  "custom tool becomes nested function; grammar dropped; other fields kept",
			rules: wildcard,
			body:  `{"model":"m","tools":[{"type":"custom","custom":{"name":"run_sql","description":"SQL","format":{"type":"grammar","grammar":{"syntax":"lark","definition":"start: x"}},"defer_loading":true}},{"type":"function","function":{"name":"f","parameters":{}}}]}`,
			want:  `{"model":"m","tools":[{"type":"function","function":{"name":"run_sql","description":"SQL","defer_loading":true,` + chatGenericFunction + `}},{"type":"function","function":{"name":"f","parameters":{}}}]}`,
		},
		{
			name:  "apply_patch gets the patch schema and usage",
			rules: `[{"transform":"field_custom_tools_to_function"}]`,
			body:  `{"tools":[{"type":"custom","custom":{"name":"apply_patch","description":"Edit files."}}]}`,
			want:  `{"tools":[{"type":"function","function":{"name":"apply_patch","description":` + transformtest.JSONString("Edit files.\n\n"+patchUsage) + `,"parameters":` + patchParams() + `,"strict":false}}]}`,
		},
		{
			name:  "assistant custom calls wrapped once, id kept, tool messages unchanged",
			rules: wildcard,
			body: `{"tools":[{"type":"custom","custom":{"name":"grammar_tool"}}],"messages":[` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"history-custom","type":"custom","custom":{"name":"grammar_tool","input":"{\"input\":\"literal custom bytes\"}"}},{"id":"n1","type":"function","function":{"name":"native_tool","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"history-custom","content":"done"},{"role":"user","content":"next"}]}`,
			want: `{"tools":[{"type":"function","function":{"name":"grammar_tool",` + chatGenericFunction + `}}],"messages":[` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"history-custom","type":"function","function":{"name":"grammar_tool","arguments":"{\"input\":\"{\\\"input\\\":\\\"literal custom bytes\\\"}\"}"}},{"id":"n1","type":"function","function":{"name":"native_tool","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"history-custom","content":"done"},{"role":"user","content":"next"}]}`,
		},
		{
			name:  "tool_choice custom",
			rules: wildcard,
			body:  `{"tools":[{"type":"custom","custom":{"name":"grammar_tool"}}],"tool_choice":{"type":"custom","custom":{"name":"grammar_tool"}}}`,
			want:  `{"tools":[{"type":"function","function":{"name":"grammar_tool",` + chatGenericFunction + `}}],"tool_choice":{"type":"function","function":{"name":"grammar_tool"}}}`,
		},
		{
			name:  "nested allowed_tools",
			rules: wildcard,
			body:  `{"tools":[{"type":"custom","custom":{"name":"a"}},{"type":"function","function":{"name":"b"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"custom","custom":{"name":"a"}},{"type":"function","function":{"name":"b"}},{"type":"custom","custom":{"name":"zzz"}}]}}}`,
			want:  `{"tools":[{"type":"function","function":{"name":"a",` + chatGenericFunction + `}},{"type":"function","function":{"name":"b"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}},{"type":"custom","custom":{"name":"zzz"}}]}}}`,
		},
		{
			name:  "string tool_choice and unselected custom tools untouched",
			rules: `[{"transform":"field_custom_tools_to_function","config":{"names":["a"]}}]`,
			body:  `{"tools":[{"type":"custom","custom":{"name":"b"}}],"tool_choice":"auto"}`,
			want:  `{"tools":[{"type":"custom","custom":{"name":"b"}}],"tool_choice":"auto"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := rewriteChat(t, tc.rules, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			transformtest.JSONEqual(t, []byte(out), tc.want)
		})
	}
}

func TestChatConflict(t *testing.T) {
	for _, body := range []string{
		`{"tools":[{"type":"custom","custom":{"name":"x"}},{"type":"function","function":{"name":"x"}}]}`,
	} {
		_, err := rewriteChat(t, wildcard, body)
		e, ok := err.(*transforms.Error)
		if !ok || e.Status != 400 || e.Code != "custom_tool_conflict" {
			t.Fatalf("%s: %v", body, err)
		}
	}
	// A history call never conflicts.
	body := `{"tools":[{"type":"custom","custom":{"name":"x"}}],"messages":[{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"x","arguments":"{}"}}]}]}`
	if _, err := rewriteChat(t, wildcard, body); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
}

const chatRequest = `{"model":"m","stream":true,"tools":[{"type":"custom","custom":{"name":"grammar_tool","format":{"type":"text"}}},{"type":"function","function":{"name":"native_tool","parameters":{}}},{"type":"custom","custom":{"name":"apply_patch"}}]}`

func TestChatNonStreamingResponse(t *testing.T) {
	x := transformtest.ChatExchange(t, wildcard, chatRequest)
	args, _ := json.Marshal(map[string]string{"input": customInput})
	body := `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"text remains live","tool_calls":[` +
		`{"id":"custom-call","type":"function","function":{"name":"grammar_tool","arguments":` + transformtest.JSONString(string(args)) + `}},` +
		`{"id":"native-call","type":"function","function":{"name":"native_tool","arguments":"{\"input\":\"native function input\"}"}},` +
		`{"id":"p","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch ***\\n*** Add File: x\\nhello\\n*** End Patch ***\"}"}}` +
		`]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":12,"total_tokens":22}}`
	out, err := x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	native := `{"id":"native-call","type":"function","function":{"name":"native_tool","arguments":"{\"input\":\"native function input\"}"}}`
	if !strings.Contains(string(out), native) {
		t.Fatalf("native call not byte-identical: %s", out)
	}
	transformtest.JSONEqual(t, out, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"text remains live","tool_calls":[`+
		`{"id":"custom-call","type":"custom","custom":{"name":"grammar_tool","input":`+transformtest.JSONString(customInput)+`}},`+native+`,`+
		`{"id":"p","type":"custom","custom":{"name":"apply_patch","input":"*** Begin Patch\n*** Add File: x\n+hello\n*** End Patch\n"}}`+
		`]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":12,"total_tokens":22}}`)
}

const chunkHead = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[`

func TestChatStreamGolden(t *testing.T) {
	up := transformtest.ChatSSE(
		chunkHead+`{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`,
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_B","type":"function","function":{"name":"apply_patch","arguments":""}}]},"finish_reason":null}]}`,
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"input\":\"*** Begin Patch\\n*** Add"}}]},"finish_reason":null}]}`,
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" File: a\\nhi\\n*** End Patch\"}"}}]},"finish_reason":null}]}`,
		chunkHead+`{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
	)
	want := "" +
		"data: " + chunkHead + `{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}` + "\n\n" +
		"data: " + chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_B","type":"custom","custom":{"name":"apply_patch","input":""}}]},"finish_reason":null}]}` + "\n\n" +
		"data: " + chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"custom":{"input":"*** Begin Patch\n"}}]},"finish_reason":null}]}` + "\n\n" +
		"data: " + chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"custom":{"input":"*** Add File: a\n+hi\n"}}]},"finish_reason":null}]}` + "\n\n" +
		"data: " + chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"custom":{"input":"*** End Patch\n"}}]},"finish_reason":"tool_calls"}]}` + "\n\n" +
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}` + "\n\n" +
		"data: [DONE]\n\n"
	got := transformtest.ChatCase(t, `[{"transform":"field_custom_tools_to_function"}]`, chatRequest, up)
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// The Monoize Chat mock rebuilt: text, one chunk declaring both calls with
// empty arguments, the custom arguments one character per chunk with the
// native arguments whole after the first character, finish_reason, a
// usage-only chunk and [DONE].
func TestChatStreamOneCharacterPerChunk(t *testing.T) {
	args, _ := json.Marshal(map[string]string{"input": customInput})
	chunks := []string{
		chunkHead + `{"index":0,"delta":{"role":"assistant","content":"text remains live"},"finish_reason":null}]}`,
		chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"custom-call","type":"function","function":{"name":"grammar_tool","arguments":""}},{"index":1,"id":"native-call","type":"function","function":{"name":"native_tool","arguments":""}}]},"finish_reason":null}]}`,
	}
	for i, r := range []rune(string(args)) {
		chunks = append(chunks, chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`+transformtest.JSONString(string(r))+`}}]},"finish_reason":null}]}`)
		if i == 0 {
			chunks = append(chunks, chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"input\":\"native function input\"}"}}]},"finish_reason":null}]}`)
		}
	}
	chunks = append(chunks,
		chunkHead+`{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":12,"total_tokens":22}}`)
	got := transformtest.ChatCase(t, wildcard, chatRequest, transformtest.ChatSSE(chunks...))
	cs, done := transformtest.ChatChunks(t, got)
	if !done {
		t.Fatal("no [DONE]")
	}
	calls := transformtest.CallText(cs)
	if calls["0/0"] != customInput || calls["0/0/name"] != "custom:grammar_tool" {
		t.Fatalf("custom call: %q %q", calls["0/0/name"], calls["0/0"])
	}
	if calls["0/1"] != `{"input":"native function input"}` || calls["0/1/name"] != "function:native_tool" {
		t.Fatalf("native call: %q %q", calls["0/1/name"], calls["0/1"])
	}
	// The native fragment is byte-identical, and text comes first.
	if !strings.Contains(got, `{"index":1,"function":{"arguments":"{\"input\":\"native function input\"}"}}`) {
		t.Fatal("native fragment changed")
	}
	if strings.Index(got, "text remains live") > strings.Index(got, `"custom"`) {
		t.Fatal("text was held behind the call")
	}
	var finishes []string
	for _, c := range cs {
		for _, ch := range c["choices"].([]any) {
			if f, ok := ch.(map[string]any)["finish_reason"].(string); ok {
				finishes = append(finishes, f)
			}
		}
	}
	if strings.Join(finishes, ",") != "tool_calls" {
		t.Fatalf("finish reasons %v", finishes)
	}
	if last := cs[len(cs)-1]; len(last["choices"].([]any)) != 0 || last["usage"] == nil {
		t.Fatalf("usage chunk changed: %v", last)
	}
}

func TestChatStreamUnnamedFirstChunk(t *testing.T) {
	up := transformtest.ChatSSE(
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"arguments":"{\"inp"}}]},"finish_reason":null}]}`,
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"grammar_tool","arguments":"ut\":\"ab"}}]},"finish_reason":null}]}`,
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"c\"}"}}]},"finish_reason":"tool_calls"}]}`,
	)
	want := "" +
		"data: " + chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"custom","custom":{"name":"grammar_tool","input":"ab"}}]},"finish_reason":null}]}` + "\n\n" +
		"data: " + chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"custom":{"input":"c"}}]},"finish_reason":"tool_calls"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	if got := transformtest.ChatCase(t, wildcard, chatRequest, up); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// A name that turns out native replays what was held, merged.
	up = transformtest.ChatSSE(
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"arguments":"{\"a"}}]},"finish_reason":null}]}`,
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"native_tool","arguments":"\":1}"}}]},"finish_reason":"tool_calls"}]}`,
	)
	want = "" +
		"data: " + chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"native_tool","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	if got := transformtest.ChatCase(t, wildcard, chatRequest, up); got != want {
		t.Fatalf("native after hold: got\n%s\nwant\n%s", got, want)
	}
	// Without any recorded conversion, unnamed starts pass through 1:1.
	x := transformtest.ChatExchange(t, wildcard, `{"tools":[{"type":"function","function":{"name":"f"}}]}`)
	if s := x.NewStream(); s != nil {
		t.Fatal("stream rule active without conversions")
	}
}

func TestChatStreamParallelChoicesAndLength(t *testing.T) {
	head := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[`
	up := transformtest.ChatSSE(
		head+`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"grammar_tool","arguments":"{\"input\":\"A"}},{"index":1,"id":"b","type":"function","function":{"name":"grammar_tool","arguments":"{\"input\":\"B"}}]},"finish_reason":null},{"index":1,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"grammar_tool","arguments":"{\"input\":\"C"}}]},"finish_reason":null}]}`,
		head+`{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"2\"}"}}]},"finish_reason":null},{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"2\"}"}},{"index":0,"function":{"arguments":"2\"}"}}]},"finish_reason":null}]}`,
		head+`{"index":0,"delta":{},"finish_reason":"tool_calls"},{"index":1,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ignored"}}]},"finish_reason":"length"}]}`,
	)
	got := transformtest.ChatCase(t, wildcard, chatRequest, up)
	cs, _ := transformtest.ChatChunks(t, got)
	calls := transformtest.CallText(cs)
	if calls["0/0"] != "A2" || calls["0/1"] != "B2" || calls["1/0"] != "C2" {
		t.Fatalf("calls: %v", calls)
	}
}

func TestChatStreamErrorAndEOF(t *testing.T) {
	up := "data: " + chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"grammar_tool","arguments":"{\"input\":\"par"}}]},"finish_reason":null}]}` + "\n\n" +
		`data: {"error":{"message":"upstream overloaded","type":"server_error","param":null,"code":null}}` + "\n\n" +
		"data: " + chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"tial\"}"}}]},"finish_reason":"tool_calls"}]}` + "\n\n"
	got := transformtest.ChatCase(t, wildcard, chatRequest, up)
	if !strings.Contains(got, `"upstream overloaded"`) {
		t.Fatal("error object lost")
	}
	cs, _ := transformtest.ChatChunks(t, got)
	if calls := transformtest.CallText(cs); calls["0/0"] != "par" {
		t.Fatalf("call continued after the error: %v", calls)
	}
	// EOF without finish or [DONE]: nothing is completed from partial data.
	up = "data: " + chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"grammar_tool","arguments":"{\"patch\":\"x"}}]},"finish_reason":null}]}` + "\n\n"
	got = transformtest.ChatCase(t, wildcard, chatRequest, up)
	cs, done := transformtest.ChatChunks(t, got)
	if done || transformtest.CallText(cs)["0/0"] != "" {
		t.Fatalf("fabricated: %s", got)
	}
}

func TestChatStreamDoneWithoutFinish(t *testing.T) {
	up := transformtest.ChatSSE(
		chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"grammar_tool","arguments":"{\"patch\":\"held\"}"}}]},"finish_reason":null}]}`,
	)
	got := transformtest.ChatCase(t, wildcard, chatRequest, up)
	want := "" +
		"data: " + chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"custom","custom":{"name":"grammar_tool","input":""}}]},"finish_reason":null}]}` + "\n\n" +
		`data: {"object":"chat.completion.chunk","id":"chatcmpl-1","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"custom":{"input":"{\"patch\":\"held\"}"}}]},"finish_reason":null}]}` + "\n\n" +
		"data: [DONE]\n\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestChatStreamEdgeShapes(t *testing.T) {
	open := chunkHead + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"grammar_tool","arguments":"{\"patch\":\"p\"}"}}]},"finish_reason":null}]}`
	// A finishing choice whose delta is null still gets valid JSON with the
	// rest of the input.
	got := transformtest.ChatCase(t, wildcard, chatRequest, transformtest.ChatSSE(open, chunkHead+`{"index":0,"delta":null,"finish_reason":"tool_calls"}]}`))
	cs, _ := transformtest.ChatChunks(t, got)
	if calls := transformtest.CallText(cs); calls["0/0"] != `{"patch":"p"}` {
		t.Fatalf("calls %v\n%s", calls, got)
	}
	// "error": null is no error.
	got = transformtest.ChatCase(t, wildcard, chatRequest, transformtest.ChatSSE(open, `{"id":"chatcmpl-1","error":null,"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`))
	cs, _ = transformtest.ChatChunks(t, got)
	if calls := transformtest.CallText(cs); calls["0/0"] != `{"patch":"p"}` {
		t.Fatalf("calls %v", calls)
	}
	// A native call that repeats its id on every fragment keeps streaming.
	native := transformtest.ChatSSE(
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"n","type":"function","function":{"name":"native_tool","arguments":"{\"a\""}}]},"finish_reason":null}]}`,
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"n","type":"function","function":{"arguments":":1}"}}]},"finish_reason":null}]}`,
	)
	if got := transformtest.ChatCase(t, wildcard, chatRequest, native); got != native {
		t.Fatalf("native stream changed:\n%s", got)
	}
}

func TestChatHeldFragmentsRespectTheLimit(t *testing.T) {
	c := transformtest.Chain(t, wildcard)
	x := transforms.NewExchange(transforms.ProtocolChat, transforms.Limits{MaxCallBuffer: 10}, nil)
	c.Begin(x, "m")
	if _, err := x.RewriteRequest([]byte(chatRequest)); err != nil {
		t.Fatal(err)
	}
	got := transformtest.Replay(t, x, transformtest.ChatSSE(
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"arguments":"0123456789abcdef"}}]},"finish_reason":null}]}`,
	), 4096)
	if !strings.Contains(got, `"code":"max_call_buffer_exceeded"`) || strings.Contains(got, "[DONE]") {
		t.Fatalf("got %s", got)
	}
}

// TestChatTypelessFunctionConflictsWithCustom: a Chat tool without a type
// is the function vLLM and Ollama read ({"function":{"name":"x"}}), so a
// custom tool x beside it is a 400 custom_tool_conflict, as beside a typed
// function x. Converted instead, the custom tool would become a second
// function x, and every call to x, the typeless function's included, would
// come back as a custom call.
func TestChatTypelessFunctionConflictsWithCustom(t *testing.T) {
	body := `{"model":"m","messages":[],"tools":[{"function":{"name":"x"}},{"type":"custom","custom":{"name":"x"}}]}`
	out, err := rewriteChat(t, `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`, body)
	var e *transforms.Error
	if !errors.As(err, &e) || e.Code != "custom_tool_conflict" {
		t.Fatalf("want 400 custom_tool_conflict, got %v\n%s", err, out)
	}
}
