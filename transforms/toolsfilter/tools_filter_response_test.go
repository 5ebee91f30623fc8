package toolsfilter

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// The response side of tools_filter: calls to tools the request did not
// offer, because the client never declared them or the rule filtered
// them, are counted and passed on, or removed with drop_undeclared_calls,
// in JSON bodies and in streams, with the indexes after them closing the
// gap.

// tfExchange runs the request phase of one tools_filter rule, decisions
// kept, and returns the exchange with the number of request decisions.
func tfExchange(t testing.TB, p transforms.Protocol, cfg, request string) (*transforms.Exchange, int) {
	t.Helper()
	c := transformtest.Chain(t, tfRules(cfg))
	x := transformtest.Begin(t, c, p, []byte(request))
	x.Explain = true
	if _, err := x.RewriteRequest([]byte(request)); err != nil {
		t.Fatal(err)
	}
	return x, len(x.Decisions())
}

// tfCounts wants the exchange's call counters.
func tfCounts(t testing.TB, x *transforms.Exchange, undeclared, filtered, dropped int) {
	t.Helper()
	if x.Counts().UndeclaredCalls != undeclared || x.Counts().FilteredCalls != filtered || x.Counts().DroppedCalls != dropped {
		t.Errorf("undeclared %d filtered %d dropped %d, want %d %d %d",
			x.Counts().UndeclaredCalls, x.Counts().FilteredCalls, x.Counts().DroppedCalls, undeclared, filtered, dropped)
	}
}

// tfResponseDecisions wants the decisions recorded after the request's.
func tfResponseDecisions(t testing.TB, x *transforms.Exchange, from int, want []transforms.Decision) {
	t.Helper()
	got := x.Decisions()[from:]
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("response decisions\n got %+v\nwant %+v", got, want)
	}
}

// The request of the Responses cases: read_file, local_shell and
// mcp/read_issue are offered; write_file and mcp/delete_issue filtered.
var tfRespRequest = tfResp(`,"tool_choice":"auto"`, tfRead, tfWrite, tfShell, tfNS)

const tfRespDeny = `"deny":["write_file","mcp/delete_*"]`

// Output items of the Responses cases.
const (
	tfMsgItem      = `{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[]}]}`
	tfReadItem     = `{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"p\":\"a\"}","call_id":"call_1","name":"read_file"}`
	tfInventedItem = `{"id":"fc_2","type":"function_call","status":"completed","arguments":"{}","call_id":"call_2","name":"invented"}`
	tfWriteItem    = `{"id":"fc_3","type":"function_call","status":"completed","arguments":"{}","call_id":"call_3","name":"write_file"}`
	tfSearchItem   = `{"id":"ws_1","type":"web_search_call","status":"completed","action":{"type":"search","query":"q"}}`
	tfShellItem    = `{"id":"lsc_1","type":"local_shell_call","status":"completed","call_id":"call_4","action":{"type":"exec","command":["ls"],"env":{}}}`
	tfNSReadItem   = `{"id":"fc_5","type":"function_call","status":"completed","arguments":"{}","call_id":"call_5","namespace":"mcp","name":"read_issue"}`
	tfNSDelItem    = `{"id":"fc_6","type":"function_call","status":"completed","arguments":"{}","call_id":"call_6","namespace":"mcp","name":"delete_issue"}`
	tfBareReadItem = `{"id":"fc_7","type":"function_call","status":"completed","arguments":"{}","call_id":"call_7","name":"read_issue"}`
)

func tfResponse(items ...string) string {
	return `{"id":"resp_1","object":"response","status":"completed","model":"m","output":[` + strings.Join(items, ",") + `],"tool_choice":"auto"}`
}

// TestToolsFilterResponseJSON: declared calls pass, undeclared and
// filtered ones are counted, and removed with drop_undeclared_calls;
// hosted calls are never judged; a namespaced call is judged as
// namespace/name, a built-in call against its tool type.
func TestToolsFilterResponseJSON(t *testing.T) {
	all := tfResponse(tfMsgItem, tfReadItem, tfInventedItem, tfWriteItem, tfSearchItem, tfShellItem, tfNSReadItem, tfNSDelItem, tfBareReadItem)
	judged := func(action string) []transforms.Decision {
		return []transforms.Decision{
			{Tool: "invented", Action: action, Reason: "undeclared"},
			{Tool: "write_file", Action: action, Reason: "denied"},
			{Tool: "mcp/delete_issue", Action: action, Reason: "denied"},
			{Tool: "read_issue", Action: action, Reason: "undeclared"},
		}
	}

	// Counted and passed.
	x, n := tfExchange(t, transforms.ProtocolResponses, `{`+tfRespDeny+`}`, tfRespRequest)
	if !x.WantsResponse() {
		t.Fatal("the response side is not active")
	}
	out, err := x.RewriteResponse([]byte(all))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != all {
		t.Errorf("the response changed without drop_undeclared_calls:\n%s", out)
	}
	tfCounts(t, x, 2, 2, 0)
	tfResponseDecisions(t, x, n, judged("pass_unexpected_call"))

	// Removed.
	x, n = tfExchange(t, transforms.ProtocolResponses, `{`+tfRespDeny+`,"drop_undeclared_calls":true}`, tfRespRequest)
	out, err = x.RewriteResponse([]byte(all))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, tfResponse(tfMsgItem, tfReadItem, tfSearchItem, tfShellItem, tfNSReadItem))
	tfCounts(t, x, 2, 2, 4)
	tfResponseDecisions(t, x, n, judged("drop_unexpected_call"))

	// The echoed tools are the client's, whatever the upstream saw.
	x, _ = tfExchange(t, transforms.ProtocolResponses, `{`+tfRespDeny+`,"drop_undeclared_calls":true}`, tfRespRequest)
	echo := `{"id":"resp_1","object":"response","status":"completed","output":[` + tfReadItem + `],"tools":[` + tfRead + `,` + tfShell + `,` + tfNSRead + `],"tool_choice":"auto"}`
	out, err = x.RewriteResponse([]byte(echo))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"id":"resp_1","object":"response","status":"completed","output":[`+tfReadItem+`],"tools":[`+tfRead+`,`+tfWrite+`,`+tfShell+`,`+tfNS+`],"tool_choice":"auto"}`)
	tfCounts(t, x, 0, 0, 0)

	// Nothing to judge: the same bytes.
	x, _ = tfExchange(t, transforms.ProtocolResponses, `{`+tfRespDeny+`,"drop_undeclared_calls":true}`, tfRespRequest)
	clean := tfResponse(tfMsgItem, tfReadItem, tfSearchItem)
	if out, err = x.RewriteResponse([]byte(clean)); err != nil || string(out) != clean {
		t.Errorf("a clean response changed: %v\n%s", err, out)
	}
}

// TestToolsFilterResponseBuiltins: a built-in call is declared by its
// tool type (or Codex's custom tool of that name); hosted calls are the
// upstream's own and never counted.
func TestToolsFilterResponseBuiltins(t *testing.T) {
	patchItem := `{"id":"apc_1","type":"apply_patch_call","status":"completed","call_id":"call_8","operation":{"type":"delete_file","path":"a"}}`
	for _, tc := range []struct {
		name, request string
		items         []string
		kept          []string
		undeclared    int
	}{
		{"local_shell declared", tfResp(``, tfShell), []string{tfShellItem, tfSearchItem}, []string{tfShellItem, tfSearchItem}, 0},
		{"local_shell undeclared", tfResp(``, tfRead), []string{tfShellItem, tfSearchItem}, []string{tfSearchItem}, 1},
		{"apply_patch as Codex's custom tool", tfResp(``, `{"type":"custom","name":"apply_patch"}`), []string{patchItem}, []string{patchItem}, 0},
		{"apply_patch undeclared", tfResp(``, tfRead), []string{patchItem, tfReadItem}, []string{tfReadItem}, 1},
		{"hosted calls without their tool", tfResp(``, tfRead), []string{tfSearchItem, `{"id":"ig_1","type":"image_generation_call","status":"completed","result":"AAAA"}`}, []string{tfSearchItem, `{"id":"ig_1","type":"image_generation_call","status":"completed","result":"AAAA"}`}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, _ := tfExchange(t, transforms.ProtocolResponses, `{"drop_undeclared_calls":true}`, tc.request)
			out, err := x.RewriteResponse([]byte(tfResponse(tc.items...)))
			if err != nil {
				t.Fatal(err)
			}
			transformtest.JSONEqual(t, out, tfResponse(tc.kept...))
			tfCounts(t, x, tc.undeclared, 0, tc.undeclared)
		})
	}

	// A built-in filtered by the rule counts as filtered.
	x, _ := tfExchange(t, transforms.ProtocolResponses, `{"deny":["local_shell"]}`, tfResp(``, tfRead, tfShell))
	if _, err := x.RewriteResponse([]byte(tfResponse(tfShellItem))); err != nil {
		t.Fatal(err)
	}
	tfCounts(t, x, 0, 1, 0)
}

// The Chat cases: read_file offered, write_file filtered.
var tfChatRequest = tfChat(`,"tool_choice":"auto"`, tfReadC, tfWriteC)

const (
	tfReadCall     = `{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"p\":\"a\"}"}}`
	tfInventedCall = `{"id":"call_2","type":"function","function":{"name":"invented","arguments":"{}"}}`
	tfWriteCall    = `{"id":"call_3","type":"function","function":{"name":"write_file","arguments":"{}"}}`
)

func tfCompletion(finish string, calls ...string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		strings.Join(calls, ",") + `]},"finish_reason":"` + finish + `"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`
}

// TestToolsFilterResponseChatJSON: the same for Chat; a message whose
// every call went is an answer: no tool_calls, finish_reason stop.
func TestToolsFilterResponseChatJSON(t *testing.T) {
	const deny = `"deny":["write_file"]`
	body := tfCompletion("tool_calls", tfReadCall, tfInventedCall, tfWriteCall)

	x, n := tfExchange(t, transforms.ProtocolChat, `{`+deny+`}`, tfChatRequest)
	out, err := x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != body {
		t.Errorf("the response changed without drop_undeclared_calls:\n%s", out)
	}
	tfCounts(t, x, 1, 1, 0)
	tfResponseDecisions(t, x, n, []transforms.Decision{{Tool: "invented", Action: "pass_unexpected_call", Reason: "undeclared"}, {Tool: "write_file", Action: "pass_unexpected_call", Reason: "denied"}})

	x, n = tfExchange(t, transforms.ProtocolChat, `{`+deny+`,"drop_undeclared_calls":true}`, tfChatRequest)
	out, err = x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, tfCompletion("tool_calls", tfReadCall))
	tfCounts(t, x, 1, 1, 2)
	tfResponseDecisions(t, x, n, []transforms.Decision{{Tool: "invented", Action: "drop_unexpected_call", Reason: "undeclared"}, {Tool: "write_file", Action: "drop_unexpected_call", Reason: "denied"}})

	// No call left.
	x, _ = tfExchange(t, transforms.ProtocolChat, `{`+deny+`,"drop_undeclared_calls":true}`, tfChatRequest)
	out, err = x.RewriteResponse([]byte(tfCompletion("tool_calls", tfInventedCall, tfWriteCall)))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	tfCounts(t, x, 1, 1, 2)

	// Two choices: each is judged on its own.
	x, _ = tfExchange(t, transforms.ProtocolChat, `{`+deny+`,"drop_undeclared_calls":true}`, tfChatRequest)
	two := `{"id":"chatcmpl-1","object":"chat.completion","choices":[` +
		`{"index":0,"message":{"role":"assistant","content":"x","tool_calls":[` + tfInventedCall + `]},"finish_reason":"tool_calls"},` +
		`{"index":1,"message":{"role":"assistant","content":null,"tool_calls":[` + tfInventedCall + `,` + tfReadCall + `]},"finish_reason":"tool_calls"}]}`
	out, err = x.RewriteResponse([]byte(two))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"id":"chatcmpl-1","object":"chat.completion","choices":[`+
		`{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"},`+
		`{"index":1,"message":{"role":"assistant","content":null,"tool_calls":[`+tfReadCall+`]},"finish_reason":"tool_calls"}]}`)
	tfCounts(t, x, 2, 0, 2)
}

// The events of the Responses stream: a message at output index 0, an
// undeclared call at 1, a declared one at 2.
const (
	tfFC1Done = `{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"a\":1}","call_id":"call_1","name":"invented"}`
	tfFC2Done = `{"id":"fc_2","type":"function_call","status":"completed","arguments":"{\"p\":\"a\"}","call_id":"call_2","name":"read_file"}`
)

func tfStreamUpstream() string {
	return transformtest.SSE(
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`,
		`{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","logprobs":[]}`,
		`{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":`+tfMsgItem+`}`,
		`{"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"invented"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_1","output_index":1,"delta":"{\"a\":"}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_1","output_index":1,"delta":"1}"}`,
		`{"type":"response.function_call_arguments.done","sequence_number":7,"item_id":"fc_1","output_index":1,"arguments":"{\"a\":1}"}`,
		`{"type":"response.output_item.done","sequence_number":8,"output_index":1,"item":`+tfFC1Done+`}`,
		`{"type":"response.output_item.added","sequence_number":9,"output_index":2,"item":{"id":"fc_2","type":"function_call","status":"in_progress","arguments":"","call_id":"call_2","name":"read_file"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":10,"item_id":"fc_2","output_index":2,"delta":"{\"p\":\"a\"}"}`,
		`{"type":"response.function_call_arguments.done","sequence_number":11,"item_id":"fc_2","output_index":2,"arguments":"{\"p\":\"a\"}"}`,
		`{"type":"response.output_item.done","sequence_number":12,"output_index":2,"item":`+tfFC2Done+`}`,
		`{"type":"response.completed","sequence_number":13,"response":{"id":"resp_1","object":"response","status":"completed","output":[`+tfMsgItem+`,`+tfFC1Done+`,`+tfFC2Done+`]}}`,
	)
}

// TestToolsFilterResponseStream: with drop_undeclared_calls the
// undeclared call's events vanish, the later call moves to output index
// 1, the completed response lacks it and the sequence numbers stay dense,
// whatever the chunking.
func TestToolsFilterResponseStream(t *testing.T) {
	request := tfResp(`,"stream":true`, tfRead)
	want := transformtest.SSE(
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`,
		`{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","logprobs":[]}`,
		`{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":`+tfMsgItem+`}`,
		`{"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{"id":"fc_2","type":"function_call","status":"in_progress","arguments":"","call_id":"call_2","name":"read_file"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_2","output_index":1,"delta":"{\"p\":\"a\"}"}`,
		`{"type":"response.function_call_arguments.done","sequence_number":6,"item_id":"fc_2","output_index":1,"arguments":"{\"p\":\"a\"}"}`,
		`{"type":"response.output_item.done","sequence_number":7,"output_index":1,"item":`+tfFC2Done+`}`,
		`{"type":"response.completed","sequence_number":8,"response":{"id":"resp_1","object":"response","status":"completed","output":[`+tfMsgItem+`,`+tfFC2Done+`]}}`,
	)
	for _, n := range transformtest.ChunkSizes {
		x, from := tfExchange(t, transforms.ProtocolResponses, `{"drop_undeclared_calls":true}`, request)
		got := transformtest.Replay(t, x, tfStreamUpstream(), n)
		if got != want {
			t.Fatalf("chunk size %d:\n%s\n--- want\n%s", n, got, want)
		}
		transformtest.Events(t, got) // sequence numbers 0, 1, 2…
		tfCounts(t, x, 1, 0, 1)
		tfResponseDecisions(t, x, from, []transforms.Decision{{Tool: "invented", Action: "drop_unexpected_call", Reason: "undeclared"}})
	}

	// Without drop_undeclared_calls the stream is untouched, the call
	// counted once.
	for _, n := range transformtest.ChunkSizes {
		x, from := tfExchange(t, transforms.ProtocolResponses, `{}`, request)
		if got := transformtest.Replay(t, x, tfStreamUpstream(), n); got != tfStreamUpstream() {
			t.Fatalf("chunk size %d: the stream changed:\n%s", n, got)
		}
		tfCounts(t, x, 1, 0, 0)
		tfResponseDecisions(t, x, from, []transforms.Decision{{Tool: "invented", Action: "pass_unexpected_call", Reason: "undeclared"}})
	}
}

// TestToolsFilterResponseStreamNamespaced: a streamed namespaced call is
// judged against namespace/name.
func TestToolsFilterResponseStreamNamespaced(t *testing.T) {
	request := tfResp(`,"stream":true`, tfNS)
	up := transformtest.SSE(
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"read_issue"}}`,
		`{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{}","call_id":"call_1","name":"read_issue"}}`,
		`{"type":"response.output_item.added","sequence_number":3,"output_index":1,"item":{"id":"fc_2","type":"function_call","status":"in_progress","arguments":"","call_id":"call_2","namespace":"mcp","name":"read_issue"}}`,
		`{"type":"response.output_item.done","sequence_number":4,"output_index":1,"item":{"id":"fc_2","type":"function_call","status":"completed","arguments":"{}","call_id":"call_2","namespace":"mcp","name":"read_issue"}}`,
		`{"type":"response.completed","sequence_number":5,"response":{"id":"resp_1","status":"completed","output":[{"id":"fc_1","type":"function_call","status":"completed","arguments":"{}","call_id":"call_1","name":"read_issue"},{"id":"fc_2","type":"function_call","status":"completed","arguments":"{}","call_id":"call_2","namespace":"mcp","name":"read_issue"}]}}`,
	)
	want := transformtest.SSE(
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"fc_2","type":"function_call","status":"in_progress","arguments":"","call_id":"call_2","namespace":"mcp","name":"read_issue"}}`,
		`{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":{"id":"fc_2","type":"function_call","status":"completed","arguments":"{}","call_id":"call_2","namespace":"mcp","name":"read_issue"}}`,
		`{"type":"response.completed","sequence_number":3,"response":{"id":"resp_1","status":"completed","output":[{"id":"fc_2","type":"function_call","status":"completed","arguments":"{}","call_id":"call_2","namespace":"mcp","name":"read_issue"}]}}`,
	)
	for _, n := range transformtest.ChunkSizes {
		x, _ := tfExchange(t, transforms.ProtocolResponses, `{"drop_undeclared_calls":true}`, request)
		if got := transformtest.Replay(t, x, up, n); got != want {
			t.Fatalf("chunk size %d:\n%s\n--- want\n%s", n, got, want)
		}
		tfCounts(t, x, 1, 0, 1)
	}
}

// tfChunk is one Chat stream chunk of choice 0.
func tfChunk(delta, finish string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
}

const tfUsageChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`

// TestToolsFilterResponseChatStream: the undeclared call at tool index 0
// vanishes, the declared one's fragments come out at index 0;
// finish_reason tool_calls stays while a call is left, and becomes stop
// when none is.
func TestToolsFilterResponseChatStream(t *testing.T) {
	request := tfChat(`,"stream":true`, tfReadC)
	up := transformtest.ChatSSE(
		tfChunk(`{"role":"assistant","content":null}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"invented","arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"read_file","arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{\"p\":\"a\"}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
		tfUsageChunk,
	)
	// The undeclared call's chunks lose their tool_calls: an empty list
	// would leave a client's accumulated message with "tool_calls":[],
	// which the API refuses when the message is sent back.
	want := transformtest.ChatSSE(
		tfChunk(`{"role":"assistant","content":null}`, `null`),
		tfChunk(`{}`, `null`),
		tfChunk(`{}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"id":"call_2","type":"function","function":{"name":"read_file","arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"p\":\"a\"}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
		tfUsageChunk,
	)
	for _, n := range transformtest.ChunkSizes {
		x, from := tfExchange(t, transforms.ProtocolChat, `{"drop_undeclared_calls":true}`, request)
		got := transformtest.Replay(t, x, up, n)
		tfSameChunks(t, got, want)
		tfCounts(t, x, 1, 0, 1)
		tfResponseDecisions(t, x, from, []transforms.Decision{{Tool: "invented", Action: "drop_unexpected_call", Reason: "undeclared"}})
	}

	// Only the undeclared call: the choice ends as an answer.
	up = transformtest.ChatSSE(
		tfChunk(`{"role":"assistant","content":"Let me see."}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"invented","arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	want = transformtest.ChatSSE(
		tfChunk(`{"role":"assistant","content":"Let me see."}`, `null`),
		tfChunk(`{}`, `null`),
		tfChunk(`{}`, `"stop"`),
	)
	for _, n := range transformtest.ChunkSizes {
		x, _ := tfExchange(t, transforms.ProtocolChat, `{"drop_undeclared_calls":true}`, request)
		tfSameChunks(t, transformtest.Replay(t, x, up, n), want)
		tfCounts(t, x, 1, 0, 1)
	}

	// Both calls start in one chunk.
	up2 := transformtest.ChatSSE(
		tfChunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"invented","arguments":"{}"}},{"index":1,"id":"call_2","type":"function","function":{"name":"read_file","arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}},{"index":0,"function":{"arguments":" "}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	want2 := transformtest.ChatSSE(
		tfChunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_2","type":"function","function":{"name":"read_file","arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	for _, n := range transformtest.ChunkSizes {
		x, _ := tfExchange(t, transforms.ProtocolChat, `{"drop_undeclared_calls":true}`, request)
		tfSameChunks(t, transformtest.Replay(t, x, up2, n), want2)
		tfCounts(t, x, 1, 0, 1)
	}

	// Without drop_undeclared_calls: untouched, counted.
	x, _ := tfExchange(t, transforms.ProtocolChat, `{}`, request)
	if got := transformtest.Replay(t, x, up, 7); got != up {
		t.Errorf("the stream changed:\n%s", got)
	}
	tfCounts(t, x, 1, 0, 0)
}

// tfSameChunks compares two Chat streams chunk by chunk, as JSON.
func tfSameChunks(t *testing.T, got, want string) {
	t.Helper()
	g, gdone := transformtest.ChatChunks(t, got)
	w, wdone := transformtest.ChatChunks(t, want)
	if len(g) != len(w) || gdone != wdone {
		t.Fatalf("%d chunks (done %v), want %d (done %v):\n%s", len(g), gdone, len(w), wdone, got)
	}
	for i := range g {
		if !reflect.DeepEqual(g[i], w[i]) {
			t.Fatalf("chunk %d:\n got %v\nwant %v\n%s", i, g[i], w[i], got)
		}
	}
}

// TestToolsFilterResponseFunctionCallingOff: with function calling off no
// tool was offered: a call to one the client declared counts as filtered
// (incompatible), any other as undeclared.
func TestToolsFilterResponseFunctionCallingOff(t *testing.T) {
	x, n := tfExchange(t, transforms.ProtocolResponses, `{"function_calling":"off","drop_undeclared_calls":true}`, tfResp(``, tfRead))
	out, err := x.RewriteResponse([]byte(tfResponse(tfMsgItem, tfReadItem, tfInventedItem)))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, tfResponse(tfMsgItem))
	tfCounts(t, x, 1, 1, 2)
	tfResponseDecisions(t, x, n, []transforms.Decision{{Tool: "read_file", Action: "drop_unexpected_call", Reason: "incompatible"}, {Tool: "invented", Action: "drop_unexpected_call", Reason: "undeclared"}})

	x, _ = tfExchange(t, transforms.ProtocolChat, `{"function_calling":"off"}`, tfChat(``, tfReadC))
	body := tfCompletion("tool_calls", tfReadCall)
	if out, err = x.RewriteResponse([]byte(body)); err != nil || string(out) != body {
		t.Errorf("passed call changed: %v\n%s", err, out)
	}
	tfCounts(t, x, 0, 1, 0)
}

// --- legacy function_call and chained rules ------------------------------------------------------

// TestToolsFilterLegacyFunctionCallResponse: an answer in the legacy
// function_call form (to a request with functions) is judged like
// tool_calls, in JSON and in streams; a removed one leaves an answer that
// finished with stop.
func TestToolsFilterLegacyFunctionCallResponse(t *testing.T) {
	req := `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"read_file","parameters":{}}]}`
	cfg := `{"drop_undeclared_calls":true}`
	json := func(name string) string {
		return `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"function_call":{"name":"` + name + `","arguments":"{}"}},"finish_reason":"function_call"}]}`
	}
	x, _ := tfExchange(t, transforms.ProtocolChat, cfg, req)
	out, err := x.RewriteResponse([]byte(json("wipe_disk")))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}`)
	tfCounts(t, x, 1, 0, 1)

	x, _ = tfExchange(t, transforms.ProtocolChat, cfg, req)
	if out, err = x.RewriteResponse([]byte(json("read_file"))); err != nil || string(out) != json("read_file") {
		t.Fatalf("a declared legacy call changed: %s %v", out, err)
	}
	tfCounts(t, x, 0, 0, 0)

	up := transformtest.ChatSSE(
		tfChunk(`{"role":"assistant","content":null,"function_call":{"name":"wipe_disk","arguments":""}}`, `null`),
		tfChunk(`{"function_call":{"arguments":"{}"}}`, `null`),
		tfChunk(`{}`, `"function_call"`),
	)
	x, _ = tfExchange(t, transforms.ProtocolChat, cfg, strings.Replace(req, `"messages"`, `"stream":true,"messages"`, 1))
	got := transformtest.Replay(t, x, up, 4096)
	want := transformtest.ChatSSE(
		tfChunk(`{"role":"assistant","content":null}`, `null`),
		tfChunk(`{}`, `null`),
		tfChunk(`{}`, `"stop"`),
	)
	if got != want {
		t.Fatalf("stream:\n got %s\nwant %s", got, want)
	}
	tfCounts(t, x, 1, 0, 1)
}

// TestToolsFilterTwoRulesCountACallOnce: with two filter rules, the one
// nearer the upstream never saw the tool the other filtered and calls it
// undeclared; the nearer-the-client rule's reason replaces that count, so
// the call is counted once, as filtered.
func TestToolsFilterTwoRulesCountACallOnce(t *testing.T) {
	rules := `[{"transform":"tools_filter","config":{"deny":["write_file"]}},{"transform":"tools_filter","config":{"deny":["web_search"]}}]`
	c := transformtest.Chain(t, rules)
	req := tfResp(``, tfRead, tfWrite, tfWeb)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(req))
	if _, err := x.RewriteRequest([]byte(req)); err != nil {
		t.Fatal(err)
	}
	if _, err := x.RewriteResponse([]byte(tfResponse(tfWriteItem))); err != nil {
		t.Fatal(err)
	}
	tfCounts(t, x, 0, 1, 0)

	chatReq := tfChat(``, `{"type":"function","function":{"name":"read_file"}}`, `{"type":"function","function":{"name":"write_file"}}`)
	x = transformtest.Begin(t, c, transforms.ProtocolChat, []byte(chatReq))
	if _, err := x.RewriteRequest([]byte(chatReq)); err != nil {
		t.Fatal(err)
	}
	if _, err := x.RewriteResponse([]byte(tfCompletion("tool_calls", tfWriteCall))); err != nil {
		t.Fatal(err)
	}
	tfCounts(t, x, 0, 1, 0)
}

// --- streams -------------------------------------------------------------------------------------

// TestStreamDropsCallAddedWithoutOutputIndex: when a dropped call's
// response.output_item.added carries no output_index (compatible servers
// omit it), every event of the item, by item_id or item.id, vanishes: the
// client never gets the events of a call it never saw added.
func TestStreamDropsCallAddedWithoutOutputIndex(t *testing.T) {
	up := transformtest.SSE(
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"invented"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","delta":"{}"}`,
		`{"type":"response.output_item.done","sequence_number":3,"item":`+tfFC1Done+`}`,
		`{"type":"response.completed","sequence_number":4,"response":{"id":"resp_1","status":"completed","output":[`+tfFC1Done+`]}}`,
	)
	want := transformtest.SSE(
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}`,
		`{"type":"response.completed","sequence_number":1,"response":{"id":"resp_1","status":"completed","output":[]}}`,
	)
	x, _ := tfExchange(t, transforms.ProtocolResponses, `{"drop_undeclared_calls":true}`, tfResp(`,"stream":true`, tfRead))
	got := transformtest.Replay(t, x, up, 4096)
	if got != want {
		t.Errorf("got\n%s\n--- want\n%s", got, want)
	}
	tfCounts(t, x, 1, 0, 1)
}

// TestStreamDropsPerChoiceAndByItemID: a Chat stream with two choices
// renumbers and finishes each on its own, and a Responses stream whose
// later events carry only item_id (no output_index) still loses the dropped
// call's events.
func TestStreamDropsPerChoiceAndByItemID(t *testing.T) {
	up := transformtest.ChatSSE(
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a0","type":"function","function":{"name":"invented","arguments":"{}"}}]},"finish_reason":null},{"index":1,"delta":{"tool_calls":[{"index":0,"id":"b0","type":"function","function":{"name":"invented","arguments":"{}"}},{"index":1,"id":"b1","type":"function","function":{"name":"read_file","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"},{"index":1,"delta":{},"finish_reason":"tool_calls"}]}`,
	)
	want := transformtest.ChatSSE(
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":null},{"index":1,"delta":{"tool_calls":[{"index":0,"id":"b1","type":"function","function":{"name":"read_file","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":"tool_calls"}]}`,
	)
	for _, n := range transformtest.ChunkSizes {
		x, _ := tfExchange(t, transforms.ProtocolChat, `{"drop_undeclared_calls":true}`, tfChat(`,"stream":true`, tfReadC))
		tfSameChunks(t, transformtest.Replay(t, x, up, n), want)
		tfCounts(t, x, 2, 0, 2)
	}

	upR := transformtest.SSE(
		`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"invented"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":1,"item_id":"fc_1","delta":"{}"}`,
		`{"type":"response.output_item.added","sequence_number":2,"output_index":1,"item":{"id":"fc_2","type":"function_call","status":"in_progress","arguments":"","call_id":"call_2","name":"read_file"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_2","delta":"{}"}`,
		`{"type":"response.completed","sequence_number":4,"response":{"id":"resp_1","status":"completed","output":[`+tfFC1Done+`,`+tfFC2Done+`]}}`,
	)
	wantR := transformtest.SSE(
		`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"id":"fc_2","type":"function_call","status":"in_progress","arguments":"","call_id":"call_2","name":"read_file"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":1,"item_id":"fc_2","delta":"{}"}`,
		`{"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","status":"completed","output":[`+tfFC2Done+`]}}`,
	)
	x, _ := tfExchange(t, transforms.ProtocolResponses, `{"drop_undeclared_calls":true}`, tfResp(`,"stream":true`, tfRead))
	if got := transformtest.Replay(t, x, upR, 4096); got != wantR {
		t.Errorf("got\n%s\n--- want\n%s", got, wantR)
	}
	tfCounts(t, x, 1, 0, 1)
}

// TestChatStreamJudgesEscapedToolCallsKey: a chunk whose key is escaped
// ("tool\u005fcalls", which clients decode as tool_calls) is judged like
// the plain key, as the JSON path is, so drop_undeclared_calls removes its
// undeclared call.
func TestChatStreamJudgesEscapedToolCallsKey(t *testing.T) {
	up := transformtest.ChatSSE(
		tfChunk(`{"tool\u005fcalls":[{"index":0,"id":"call_1","type":"function","function":{"name":"invented","arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"stop"`),
	)
	x, _ := tfExchange(t, transforms.ProtocolChat, `{"drop_undeclared_calls":true}`, tfChat(`,"stream":true`, tfReadC))
	got := transformtest.Replay(t, x, up, 4096)
	if strings.Contains(got, "invented") {
		t.Errorf("the undeclared call passed:\n%s", got)
	}
	tfCounts(t, x, 1, 0, 1)
}

// TestChatStreamPassesCallNamedInLaterFragment: a call whose first fragment
// went out before any fragment named it cannot be taken back: it is counted
// and passed whole, never cut in half (a client would merge call_1's id
// with the next call's fragments).
func TestChatStreamPassesCallNamedInLaterFragment(t *testing.T) {
	up := transformtest.ChatSSE(
		tfChunk(`{"role":"assistant","content":null}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"name":"invented","arguments":"{}"}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"read_file","arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	x, _ := tfExchange(t, transforms.ProtocolChat, `{"drop_undeclared_calls":true}`, tfChat(`,"stream":true`, tfReadC))
	got := transformtest.Replay(t, x, up, 4096)
	chunks, _ := transformtest.ChatChunks(t, got)
	var ids []string
	for _, ch := range chunks {
		for _, c := range ch["choices"].([]any) {
			delta, _ := c.(map[string]any)["delta"].(map[string]any)
			calls, _ := delta["tool_calls"].([]any)
			for _, tc := range calls {
				m := tc.(map[string]any)
				if id, ok := m["id"].(string); ok {
					ids = append(ids, fmt.Sprintf("%v:%s", m["index"], id))
				}
			}
		}
	}
	// The first fragment went out before any fragment named the call:
	// it cannot be taken back, so the call is counted and passed whole
	// rather than cut in half (a client would merge the halves).
	if strings.Join(ids, ",") != "0:call_1,1:call_2" {
		t.Errorf("calls the client sees (index:id) %v, want [0:call_1 1:call_2]\n%s", ids, got)
	}
	tfCounts(t, x, 1, 0, 0)
}

// TestChatStreamUnnamedCallKeepsItsIndex: after a dropped call at index 0,
// a call whose first fragment has no name passes numbered 0, keeps that
// number when a later fragment names it, and the choice still ends with
// tool_calls. An unnamed call later named after an undeclared tool is
// counted, not dropped.
func TestChatStreamUnnamedCallKeepsItsIndex(t *testing.T) {
	request := tfChat(`,"stream":true`, tfReadC)
	up := transformtest.ChatSSE(
		tfChunk(`{"tool_calls":[{"index":0,"id":"c0","type":"function","function":{"name":"invented","arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"id":"c1","type":"function","function":{"arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"function":{"name":"read_file"}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	want := transformtest.ChatSSE(
		tfChunk(`{}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"name":"read_file"}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	for _, n := range transformtest.ChunkSizes {
		x, _ := tfExchange(t, transforms.ProtocolChat, `{"drop_undeclared_calls":true}`, request)
		tfSameChunks(t, transformtest.Replay(t, x, up, n), want)
		tfCounts(t, x, 1, 0, 1)
	}

	up = transformtest.ChatSSE(
		tfChunk(`{"tool_calls":[{"index":0,"id":"c0","type":"function","function":{"arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"name":"invented","arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	for _, n := range transformtest.ChunkSizes {
		x, _ := tfExchange(t, transforms.ProtocolChat, `{"drop_undeclared_calls":true}`, request)
		tfSameChunks(t, transformtest.Replay(t, x, up, n), up)
		tfCounts(t, x, 1, 0, 0)
	}
}
