package customtools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

const patchRequest = `{"model":"gpt-5.5","tools":[{"type":"custom","name":"apply_patch"},{"type":"function","name":"exec_command","parameters":{}}],"tool_choice":"auto","stream":true}`

func TestStreamRestoresPatchProgressively(t *testing.T) {
	upstream := transformtest.SSE(
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[],"tools":[{"type":"function","name":"apply_patch"}],"tool_choice":"auto"}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`,
		`{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"On it","logprobs":[],"obfuscation":"xyz"}`,
		`{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"On it"}]}}`,
		`{"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_B","name":"apply_patch"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_1","output_index":1,"delta":"{\"input\":\"*** Begin Patch\\n","obfuscation":"ab"}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_1","output_index":1,"delta":"*** Add File: a.txt\\nh"}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_1","output_index":1,"delta":"i\\n*** End Patch\"}"}`,
		`{"type":"response.function_call_arguments.done","sequence_number":8,"item_id":"fc_1","output_index":1,"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** Add File: a.txt\\nhi\\n*** End Patch\"}"}`,
		`{"type":"response.output_item.done","sequence_number":9,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"input\":\"*** Begin Patch\\n*** Add File: a.txt\\nhi\\n*** End Patch\"}","call_id":"call_B","name":"apply_patch"}}`,
		`{"type":"response.completed","sequence_number":10,"response":{"id":"resp_1","status":"completed","output":[{"id":"msg_1","type":"message"},{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"input\":\"*** Begin Patch\\n*** Add File: a.txt\\nhi\\n*** End Patch\"}","call_id":"call_B","name":"apply_patch"}],"tools":[{"type":"function","name":"apply_patch"}],"tool_choice":"auto","usage":{"input_tokens":3}}}`,
	)
	want := "" +
		"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[],\"tools\":[{\"type\":\"custom\",\"name\":\"apply_patch\"},{\"type\":\"function\",\"name\":\"exec_command\",\"parameters\":{}}],\"tool_choice\":\"auto\"}}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"On it\",\"logprobs\":[],\"obfuscation\":\"xyz\"}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":3,\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"On it\"}]}}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":4,\"output_index\":1,\"item\":{\"id\":\"fc_1\",\"type\":\"custom_tool_call\",\"status\":\"in_progress\",\"input\":\"\",\"call_id\":\"call_B\",\"name\":\"apply_patch\"}}\n\n" +
		"event: response.custom_tool_call_input.delta\ndata: {\"type\":\"response.custom_tool_call_input.delta\",\"sequence_number\":5,\"item_id\":\"fc_1\",\"output_index\":1,\"delta\":\"*** Begin Patch\\n\"}\n\n" +
		"event: response.custom_tool_call_input.delta\ndata: {\"type\":\"response.custom_tool_call_input.delta\",\"sequence_number\":6,\"item_id\":\"fc_1\",\"output_index\":1,\"delta\":\"*** Add File: a.txt\\n\"}\n\n" +
		"event: response.custom_tool_call_input.delta\ndata: {\"type\":\"response.custom_tool_call_input.delta\",\"sequence_number\":7,\"item_id\":\"fc_1\",\"output_index\":1,\"delta\":\"+hi\\n\"}\n\n" +
		"event: response.custom_tool_call_input.delta\ndata: {\"type\":\"response.custom_tool_call_input.delta\",\"sequence_number\":8,\"item_id\":\"fc_1\",\"output_index\":1,\"delta\":\"*** End Patch\\n\"}\n\n" +
		"event: response.custom_tool_call_input.done\ndata: {\"type\":\"response.custom_tool_call_input.done\",\"sequence_number\":9,\"item_id\":\"fc_1\",\"output_index\":1,\"input\":\"*** Begin Patch\\n*** Add File: a.txt\\n+hi\\n*** End Patch\\n\"}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":10,\"output_index\":1,\"item\":{\"id\":\"fc_1\",\"type\":\"custom_tool_call\",\"status\":\"completed\",\"input\":\"*** Begin Patch\\n*** Add File: a.txt\\n+hi\\n*** End Patch\\n\",\"call_id\":\"call_B\",\"name\":\"apply_patch\"}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":11,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[{\"id\":\"msg_1\",\"type\":\"message\"},{\"id\":\"fc_1\",\"type\":\"custom_tool_call\",\"status\":\"completed\",\"input\":\"*** Begin Patch\\n*** Add File: a.txt\\n+hi\\n*** End Patch\\n\",\"call_id\":\"call_B\",\"name\":\"apply_patch\"}],\"tools\":[{\"type\":\"custom\",\"name\":\"apply_patch\"},{\"type\":\"function\",\"name\":\"exec_command\",\"parameters\":{}}],\"tool_choice\":\"auto\",\"usage\":{\"input_tokens\":3}}}\n\n"
	got := transformtest.StreamCase(t, `[{"transform":"field_custom_tools_to_function"}]`, patchRequest, upstream)
	if got != want {
		t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, want)
	}
}

func types(evs []map[string]any) []string {
	var ts []string
	for _, e := range evs {
		ts = append(ts, e["type"].(string))
	}
	return ts
}

const customInput = "first line\n中文 \"quoted\" \\ second line 🦀"

func TestStreamFragmentedCustomAndNativeCalls(t *testing.T) {
	req := `{"model":"m","tools":[{"type":"custom","name":"grammar_tool","format":{"type":"text"}},{"type":"function","name":"native_tool","parameters":{}}]}`
	args, _ := json.Marshal(map[string]string{"input": customInput})
	var up []string
	up = append(up, `{"type":"response.created","sequence_number":0,"response":{"id":"r","output":[]}}`)
	up = append(up, transformtest.FunctionCallStream(1, 0, "fc_c", "call_c", "grammar_tool", string(args), 1, true)...)
	nat := transformtest.FunctionCallStream(len(up), 1, "fc_n", "call_n", "native_tool", `{"input":"native function input"}`, 5, true)
	up = append(up, nat...)
	up = append(up, `{"type":"response.completed","sequence_number":`+transformtest.Itoa(len(up))+`,"response":{"id":"r","output":[{"id":"fc_c","type":"function_call","arguments":`+transformtest.JSONString(string(args))+`,"call_id":"call_c","name":"grammar_tool"},{"id":"fc_n","type":"function_call","arguments":"{\"input\":\"native function input\"}","call_id":"call_n","name":"native_tool"}]}}`)
	got := transformtest.StreamCase(t, wildcard, req, transformtest.SSE(up...))
	evs := transformtest.Events(t, got)
	if d := transformtest.ConcatDeltas(evs, "response.custom_tool_call_input.delta"); d != customInput {
		t.Fatalf("custom deltas = %q", d)
	}
	if d := transformtest.ConcatDeltas(evs, "response.function_call_arguments.delta"); d != `{"input":"native function input"}` {
		t.Fatalf("native deltas = %q", d)
	}
	// The native call's events are byte-identical to what the upstream sent.
	for _, e := range nat {
		if !strings.Contains(got, "data: "+e+"\n") {
			var m map[string]any
			_ = json.Unmarshal([]byte(e), &m)
			// sequence numbers may have moved; compare without them
			delete(m, "sequence_number")
			found := false
			for _, g := range evs {
				delete(g, "sequence_number")
				if jsonSame(g, m) {
					found = true
				}
			}
			if !found {
				t.Fatalf("native event changed: %s", e)
			}
		}
	}
	for _, e := range evs {
		if e["type"] == "response.custom_tool_call_input.delta" {
			if _, ok := e["obfuscation"]; ok {
				t.Fatal("rewritten delta kept obfuscation")
			}
		}
		if e["type"] == "response.completed" {
			out := e["response"].(map[string]any)["output"].([]any)
			c := out[0].(map[string]any)
			if c["type"] != "custom_tool_call" || c["input"] != customInput {
				t.Fatalf("completed output: %v", c)
			}
			if n := out[1].(map[string]any); n["type"] != "function_call" {
				t.Fatalf("native output changed: %v", n)
			}
		}
	}
}

func jsonSame(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestStreamNonInputArgumentsAreHeldToTheEnd(t *testing.T) {
	args := `{"patch":"*** Begin Patch\n*** Add File: p\nx\n*** End Patch\n"}`
	up := transformtest.FunctionCallStream(0, 0, "fc_1", "c1", "apply_patch", args, 3, true)
	got := transformtest.StreamCase(t, `[{"transform":"field_custom_tools_to_function"}]`, patchRequest, transformtest.SSE(up...))
	evs := transformtest.Events(t, got)
	wantTypes := []string{"response.output_item.added", "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done", "response.output_item.done"}
	if strings.Join(types(evs), ",") != strings.Join(wantTypes, ",") {
		t.Fatalf("types = %v", types(evs))
	}
	const want = "*** Begin Patch\n*** Add File: p\n+x\n*** End Patch\n"
	if evs[1]["delta"] != want || evs[2]["input"] != want || evs[3]["item"].(map[string]any)["input"] != want {
		t.Fatalf("unexpected input: %v", evs)
	}
}

func TestStreamWithoutArgumentEvents(t *testing.T) {
	// Only added and done: the input is sent whole before the done events.
	up := []string{
		`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"","call_id":"c1","name":"x"}}`,
		`{"type":"response.output_item.done","sequence_number":1,"output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"{\"input\":\"whole\"}","call_id":"c1","name":"x"}}`,
	}
	got := transformtest.StreamCase(t, wildcard, `{"tools":[{"type":"custom","name":"x"}]}`, transformtest.SSE(up...))
	want := "" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":0,\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"custom_tool_call\",\"input\":\"\",\"call_id\":\"c1\",\"name\":\"x\"}}\n\n" +
		"event: response.custom_tool_call_input.delta\ndata: {\"type\":\"response.custom_tool_call_input.delta\",\"sequence_number\":1,\"item_id\":\"fc_1\",\"output_index\":0,\"delta\":\"whole\"}\n\n" +
		"event: response.custom_tool_call_input.done\ndata: {\"type\":\"response.custom_tool_call_input.done\",\"sequence_number\":2,\"item_id\":\"fc_1\",\"output_index\":0,\"input\":\"whole\"}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":3,\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"custom_tool_call\",\"input\":\"whole\",\"call_id\":\"c1\",\"name\":\"x\"}}\n\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestStreamCompletedOnlyCallIsDeliveredAsItems(t *testing.T) {
	up := []string{
		`{"type":"response.created","sequence_number":0,"response":{"id":"r","output":[]}}`,
		`{"type":"response.completed","sequence_number":1,"response":{"id":"r","output":[{"id":"fc_9","type":"function_call","arguments":"{\"input\":\"late\"}","call_id":"c9","name":"x"}]}}`,
	}
	got := transformtest.StreamCase(t, wildcard, `{"tools":[{"type":"custom","name":"x"}]}`, transformtest.SSE(up...))
	evs := transformtest.Events(t, got)
	if strings.Join(types(evs), ",") != "response.created,response.output_item.added,response.custom_tool_call_input.delta,response.custom_tool_call_input.done,response.output_item.done,response.completed" {
		t.Fatalf("types = %v", types(evs))
	}
	item := evs[4]["item"].(map[string]any)
	if item["type"] != "custom_tool_call" || item["input"] != "late" || evs[4]["output_index"] != float64(0) {
		t.Fatalf("item = %v", evs[4])
	}
}

func TestStreamInterruptionsNeverFabricateCalls(t *testing.T) {
	head := []string{
		`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"","call_id":"c1","name":"x"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":1,"item_id":"fc_1","output_index":0,"delta":"{\"input\":\"par"}`,
	}
	tail := []string{
		`{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"tial\"}"}`,
		`{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"{\"input\":\"partial\"}","call_id":"c1","name":"x"}}`,
	}
	for _, tc := range []struct {
		name, terminal string
	}{
		{"error", `{"type":"error","sequence_number":2,"code":"server_error","message":"boom","param":null}`},
		{"failed", `{"type":"response.failed","sequence_number":2,"response":{"id":"r","status":"failed","error":{"code":"server_error","message":"boom"},"output":[{"id":"fc_1","type":"function_call","arguments":"{\"input\":\"par","call_id":"c1","name":"x"}]}}`},
		{"incomplete", `{"type":"response.incomplete","sequence_number":2,"response":{"id":"r","status":"incomplete","output":[]}}`},
		{"eof", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := append([]string{}, head...)
			if tc.terminal != "" {
				up = append(up, tc.terminal)
				up = append(up, tail...)
			}
			got := transformtest.StreamCase(t, wildcard, `{"tools":[{"type":"custom","name":"x"}]}`, transformtest.SSE(up...))
			evs := transformtest.Events(t, got)
			want := []string{"response.output_item.added", "response.custom_tool_call_input.delta"}
			if tc.terminal != "" {
				var m map[string]any
				_ = json.Unmarshal([]byte(tc.terminal), &m)
				want = append(want, m["type"].(string))
			}
			if strings.Join(types(evs), ",") != strings.Join(want, ",") {
				t.Fatalf("types = %v, want %v", types(evs), want)
			}
			if tc.name == "failed" {
				// The upstream's own partial item is reported as it was, not
				// turned into a custom call.
				out := evs[2]["response"].(map[string]any)["output"].([]any)
				if out[0].(map[string]any)["type"] != "function_call" {
					t.Fatalf("partial call restored: %v", out)
				}
			}
		})
	}
}

func TestStreamCallBufferLimit(t *testing.T) {
	c := transformtest.Chain(t, wildcard)
	req := `{"tools":[{"type":"custom","name":"x"}]}`
	x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{MaxCallBuffer: 16}, nil)
	c.Begin(x, "")
	if _, err := x.RewriteRequest([]byte(req)); err != nil {
		t.Fatal(err)
	}
	up := transformtest.SSE(append(transformtest.FunctionCallStream(0, 0, "fc_1", "c1", "x", `{"input":"0123456789abcdefghij"}`, 6, true),
		`{"type":"response.completed","sequence_number":99,"response":{"id":"r","output":[]}}`)...)
	got := transformtest.Replay(t, x, up, 4096)
	evs := transformtest.Events(t, got)
	last := evs[len(evs)-1]
	if last["type"] != "error" || last["code"] != "max_call_buffer_exceeded" {
		t.Fatalf("last event = %v\n%s", last, got)
	}
	if !strings.Contains(last["message"].(string), "16 bytes") {
		t.Fatalf("message = %v", last["message"])
	}
	if strings.Contains(got, "response.completed") {
		t.Fatal("stream continued after the abort")
	}
}

func TestStreamDataOnlyFraming(t *testing.T) {
	up := "data: {\"type\":\"response.output_item.added\",\"sequence_number\":0,\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"arguments\":\"\",\"call_id\":\"c1\",\"name\":\"x\"}}\n\n" +
		": keep-alive\n\n" +
		"data: {\"type\":\"response.output_item.done\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"function_call\",\"arguments\":\"{\\\"input\\\":\\\"é\\\"}\",\"call_id\":\"c1\",\"name\":\"x\"}}\n\n"
	got := transformtest.StreamCase(t, wildcard, `{"tools":[{"type":"custom","name":"x"}]}`, up)
	if strings.Contains(got, "event:") {
		t.Fatalf("event lines added to a data-only stream:\n%s", got)
	}
	if !strings.Contains(got, ": keep-alive\n\n") {
		t.Fatal("comment was not passed through")
	}
	evs := transformtest.Events(t, got)
	if len(evs) != 4 || evs[3]["item"].(map[string]any)["input"] != "é" {
		t.Fatalf("events = %v", evs)
	}
}

func TestStreamUntouchedEventsKeepTheirBytes(t *testing.T) {
	// CRLF framing, multi-line data, comments and unknown events all pass
	// verbatim when no converted call is involved.
	up := "event: response.created\r\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"r\"}}\r\n\r\n" +
		": ping\n\n" +
		"event: response.web_search_call.searching\ndata: {\"type\":\"response.web_search_call.searching\",\ndata: \"sequence_number\":1}\n\n" +
		"id: 7\nretry: 10\n\n"
	got := transformtest.StreamCase(t, wildcard, `{"tools":[{"type":"custom","name":"x"}]}`, up)
	if got != up {
		t.Fatalf("got %q\nwant %q", got, up)
	}
}

// An upstream that skips output_item.done: the open call is completed from
// response.completed before it, with the input it streamed.
func TestStreamCompletedWithoutItemDone(t *testing.T) {
	up := []string{
		`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"","call_id":"c1","name":"x"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":1,"item_id":"fc_1","output_index":0,"delta":"{\"input\":\"ab"}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"c\"}"}`,
		`{"type":"response.completed","sequence_number":3,"response":{"id":"r","output":[{"id":"fc_1","type":"function_call","arguments":"{\"input\":\"abc\"}","call_id":"c1","name":"x"}]}}`,
	}
	got := transformtest.StreamCase(t, wildcard, `{"tools":[{"type":"custom","name":"x"}]}`, transformtest.SSE(up...))
	evs := transformtest.Events(t, got)
	if strings.Join(types(evs), ",") != "response.output_item.added,response.custom_tool_call_input.delta,response.custom_tool_call_input.delta,response.custom_tool_call_input.done,response.output_item.done,response.completed" {
		t.Fatalf("types = %v", types(evs))
	}
	if transformtest.ConcatDeltas(evs, "response.custom_tool_call_input.delta") != "abc" || evs[4]["item"].(map[string]any)["input"] != "abc" {
		t.Fatalf("events = %v", evs)
	}
	out := evs[5]["response"].(map[string]any)["output"].([]any)[0].(map[string]any)
	if out["type"] != "custom_tool_call" || out["input"] != "abc" {
		t.Fatalf("completed output = %v", out)
	}
}

// Upstreams omit or repeat item ids; calls are still told apart by output
// index, each delivered once with its own input.
func TestStreamCallsWithoutOrWithRepeatedIDs(t *testing.T) {
	req := `{"tools":[{"type":"custom","name":"shell"}]}`
	// Two calls only in response.completed, neither with an id.
	got := transformtest.StreamCase(t, wildcard, req, transformtest.SSE(
		`{"type":"response.completed","sequence_number":0,"response":{"output":[{"type":"function_call","call_id":"a","name":"shell","arguments":"{\"input\":\"ls\"}"},{"type":"function_call","call_id":"b","name":"shell","arguments":"{\"input\":\"pwd\"}"}]}}`))
	evs := transformtest.Events(t, got)
	var items []string
	for _, e := range evs {
		if e["type"] == "response.output_item.done" {
			items = append(items, e["item"].(map[string]any)["input"].(string))
		}
	}
	out := evs[len(evs)-1]["response"].(map[string]any)["output"].([]any)
	if strings.Join(items, ",") != "ls,pwd" || out[0].(map[string]any)["input"] != "ls" || out[1].(map[string]any)["input"] != "pwd" {
		t.Fatalf("items %v, completed %v", items, out)
	}
	// Two sequential calls sharing an id.
	up := append(transformtest.FunctionCallStream(0, 1, "fc", "a", "shell", `{"input":"ls"}`, 4, true), transformtest.FunctionCallStream(10, 2, "fc", "b", "shell", `{"input":"pwd"}`, 4, true)...)
	up = append(up, `{"type":"response.completed","sequence_number":20,"response":{"output":[{"type":"message"},{"id":"fc","type":"function_call","call_id":"a","name":"shell","arguments":"{\"input\":\"ls\"}"},{"id":"fc","type":"function_call","call_id":"b","name":"shell","arguments":"{\"input\":\"pwd\"}"}]}}`)
	evs = transformtest.Events(t, transformtest.StreamCase(t, wildcard, req, transformtest.SSE(up...)))
	out = evs[len(evs)-1]["response"].(map[string]any)["output"].([]any)
	if out[1].(map[string]any)["input"] != "ls" || out[2].(map[string]any)["input"] != "pwd" {
		t.Fatalf("completed %v", out)
	}
}

func TestStreamOddEventOrders(t *testing.T) {
	req := `{"tools":[{"type":"custom","name":"x"}]}`
	// output_item.done with no added before it, then argument events after
	// it, one naming only the output index: no raw function event leaks,
	// and response.completed does not deliver the call a second time.
	got := transformtest.StreamCase(t, wildcard, req, transformtest.SSE(
		`{"type":"response.output_item.done","sequence_number":0,"output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"{\"input\":\"v\"}","call_id":"c","name":"x"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":1,"output_index":0,"delta":"late"}`,
		`{"type":"response.function_call_arguments.done","sequence_number":2,"item_id":"fc_1","output_index":0,"arguments":"{\"input\":\"v\"}"}`,
		`{"type":"response.completed","sequence_number":3,"response":{"output":[{"id":"fc_1","type":"function_call","arguments":"{\"input\":\"v\"}","call_id":"c","name":"x"}]}}`))
	evs := transformtest.Events(t, got)
	if strings.Join(types(evs), ",") != "response.output_item.added,response.custom_tool_call_input.delta,response.custom_tool_call_input.done,response.output_item.done,response.completed" {
		t.Fatalf("types = %v", types(evs))
	}
	// Leading white space inside data does not switch conversion off.
	got = transformtest.StreamCase(t, wildcard, req, "data:   {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"fc\",\"type\":\"function_call\",\"arguments\":\"\",\"call_id\":\"c\",\"name\":\"x\"}}\n\n")
	if !strings.Contains(got, `"type":"custom_tool_call"`) {
		t.Fatalf("not converted: %s", got)
	}
}

// TestStreamWithoutSequenceNumbers: an upstream that numbers no event and
// sends no arguments' done event gets the done event built from its
// finished item, unnumbered too, and valid JSON.
func TestStreamWithoutSequenceNumbers(t *testing.T) {
	upstream := transformtest.SSE(
		`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_B","name":"apply_patch"}}`,
		`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"input\":\"*** Begin Patch\\n*** Add File: a.txt\\n+hi\\n*** End Patch\\n\"}"}`,
		`{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"input\":\"*** Begin Patch\\n*** Add File: a.txt\\n+hi\\n*** End Patch\\n\"}","call_id":"call_B","name":"apply_patch"}}`,
	)
	want := "" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"custom_tool_call\",\"status\":\"in_progress\",\"input\":\"\",\"call_id\":\"call_B\",\"name\":\"apply_patch\"}}\n\n" +
		"event: response.custom_tool_call_input.delta\ndata: {\"type\":\"response.custom_tool_call_input.delta\",\"item_id\":\"fc_1\",\"output_index\":0,\"delta\":\"*** Begin Patch\\n*** Add File: a.txt\\n+hi\\n*** End Patch\\n\"}\n\n" +
		"event: response.custom_tool_call_input.done\ndata: {\"type\":\"response.custom_tool_call_input.done\",\"item_id\":\"fc_1\",\"output_index\":0,\"input\":\"*** Begin Patch\\n*** Add File: a.txt\\n+hi\\n*** End Patch\\n\"}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"id\":\"fc_1\",\"type\":\"custom_tool_call\",\"status\":\"completed\",\"input\":\"*** Begin Patch\\n*** Add File: a.txt\\n+hi\\n*** End Patch\\n\",\"call_id\":\"call_B\",\"name\":\"apply_patch\"}}\n\n"
	got := transformtest.StreamCase(t, `[{"transform":"field_custom_tools_to_function"}]`, patchRequest, upstream)
	if got != want {
		t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, want)
	}
}

// TestStreamFindsACallOpenedAfterAMiss: deltas of an item no call is open
// for pass on as they came, and once a converted call opens under the same
// keys, its deltas are restored: a lookup that found nothing is not kept
// past a call's opening.
func TestStreamFindsACallOpenedAfterAMiss(t *testing.T) {
	stray := `{"type":"response.function_call_arguments.delta","sequence_number":0,"item_id":"fc_1","output_index":0,"delta":"stray"}`
	up := transformtest.SSE(stray, stray,
		`{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","arguments":"","call_id":"c1","name":"x"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"{\"input\":\"hi"}`)
	got := transformtest.StreamCase(t, wildcard, `{"tools":[{"type":"custom","name":"x"}]}`, up)
	want := transformtest.SSE(stray,
		`{"type":"response.function_call_arguments.delta","sequence_number":1,"item_id":"fc_1","output_index":0,"delta":"stray"}`,
		`{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"custom_tool_call","input":"","call_id":"c1","name":"x"}}`,
		`{"type":"response.custom_tool_call_input.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"hi"}`)
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
