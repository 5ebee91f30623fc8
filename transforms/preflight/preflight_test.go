package preflight_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	tt "github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	_ "github.com/llmtransform/caddy-llm-transform/transforms/preflight"
)

// The scripted answers every test plays: a first answer whose call has a
// wrong type (/limit) and misses a required member (path), and the answer
// to the re-ask, valid.

const readFileSchema = `{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"],"additionalProperties":false}`

const responsesReq = `{"model":"m","stream":true,"input":"read a.txt","tools":[{"type":"function","name":"read_file","parameters":` + readFileSchema + `}]}`

const rules = `[{"transform":"tools_preflight"}]`

// seqSSE numbers events 0, 1, 2… and frames them as OpenAI does.
func seqSSE(events ...string) string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = strings.Replace(e, `"SEQ"`, fmt.Sprint(i), 1)
	}
	return tt.SSE(out...)
}

func responsesAnswer(id, text, itemID, callID, args, usage string) string {
	argsJSON, _ := json.Marshal(args)
	msg := `{"type":"message","id":"msg_` + id + `","status":"completed","role":"assistant","content":[{"type":"output_text","text":"` + text + `","annotations":[]}]}`
	call := `{"type":"function_call","id":"` + itemID + `","call_id":"` + callID + `","name":"read_file","arguments":` + string(argsJSON) + `,"status":"completed"}`
	half := len(args) / 2
	d1, _ := json.Marshal(args[:half])
	d2, _ := json.Marshal(args[half:])
	return seqSSE(
		`{"type":"response.created","sequence_number":"SEQ","response":{"id":"resp_`+id+`","object":"response","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":"SEQ","output_index":0,"item":{"type":"message","id":"msg_`+id+`","status":"in_progress","role":"assistant","content":[]}}`,
		`{"type":"response.output_text.delta","sequence_number":"SEQ","item_id":"msg_`+id+`","output_index":0,"content_index":0,"delta":"`+text+`"}`,
		`{"type":"response.output_item.done","sequence_number":"SEQ","output_index":0,"item":`+msg+`}`,
		`{"type":"response.output_item.added","sequence_number":"SEQ","output_index":1,"item":{"type":"function_call","id":"`+itemID+`","call_id":"`+callID+`","name":"read_file","arguments":"","status":"in_progress"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":"SEQ","item_id":"`+itemID+`","output_index":1,"delta":`+string(d1)+`}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":"SEQ","item_id":"`+itemID+`","output_index":1,"delta":`+string(d2)+`}`,
		`{"type":"response.function_call_arguments.done","sequence_number":"SEQ","item_id":"`+itemID+`","output_index":1,"arguments":`+string(argsJSON)+`}`,
		`{"type":"response.output_item.done","sequence_number":"SEQ","output_index":1,"item":`+call+`}`,
		`{"type":"response.completed","sequence_number":"SEQ","response":{"id":"resp_`+id+`","object":"response","status":"completed","output":[`+msg+`,`+call+`],"usage":`+usage+`}}`,
	)
}

const (
	usage1 = `{"input_tokens":100,"input_tokens_details":{"cached_tokens":40},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":5},"total_tokens":120}`
	usage2 = `{"input_tokens":150,"input_tokens_details":{"cached_tokens":100},"output_tokens":10,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":160}`
	sum12  = `{"input_tokens":250,"input_tokens_details":{"cached_tokens":140},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":7},"total_tokens":280}`

	badArgs  = `{"limit":"10"}`
	goodArgs = `{"path":"a.txt","limit":10}`
)

// script answers the n-th request with answers[n].
func script(answers ...string) (tt.Upstream, *[][]byte) {
	var got [][]byte
	return func(req []byte) (int, string) {
		got = append(got, req)
		if len(got) > len(answers) {
			return 500, `{"error":{"message":"no more answers"}}`
		}
		return 200, answers[len(got)-1]
	}, &got
}

// assertReask checks the upstream's second request: the first answer's
// turn with the bad call, and an output naming both problems.
func assertReask(t *testing.T, req []byte) {
	t.Helper()
	in := gjson.GetBytes(req, "input")
	if !in.IsArray() || len(in.Array()) != 4 {
		t.Fatalf("re-ask input = %s", in.Raw)
	}
	items := in.Array()
	if items[0].Get("role").String() != "user" || items[0].Get("content").String() != "read a.txt" {
		t.Errorf("input[0] = %s", items[0].Raw)
	}
	if items[1].Get("type").String() != "message" || items[2].Get("type").String() != "function_call" {
		t.Errorf("the first answer's turn is not replayed: %s", in.Raw)
	}
	if items[2].Get("arguments").String() != badArgs || items[2].Get("call_id").String() != "call_1" {
		t.Errorf("the bad call is not replayed as made: %s", items[2].Raw)
	}
	out := items[3]
	if out.Get("type").String() != "function_call_output" || out.Get("call_id").String() != "call_1" {
		t.Fatalf("no output for the bad call: %s", out.Raw)
	}
	want := "The arguments of the call to tool 'read_file' do not match the tool's parameters schema (2 problems):\n" +
		"- at the root (schema /required): missing property 'path'\n" +
		"- at /limit (schema /properties/limit/type): expected integer, but got string\n" +
		"Call 'read_file' again with corrected arguments."
	if got := out.Get("output").String(); got != want {
		t.Errorf("re-ask output = %q\nwant %q", got, want)
	}
}

func TestStreamReaskShowsOnlyTheRepairedCall(t *testing.T) {
	for _, n := range tt.ChunkSizes {
		up, _ := script(
			responsesAnswer("1", "Reading.", "fc_1", "call_1", badArgs, usage1),
			responsesAnswer("2", "Sorry.", "fc_2", "call_2", goodArgs, usage2),
		)
		x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolResponses, []byte(responsesReq))
		out, sent := tt.RunStream(t, x, []byte(responsesReq), up, n)
		if len(sent) != 2 {
			t.Fatalf("upstream got %d requests, want 2", len(sent))
		}
		assertReask(t, sent[1])
		evs := tt.Events(t, out)
		var types []string
		for _, e := range evs {
			types = append(types, e["type"].(string))
		}
		want := []string{
			"response.created", "response.output_item.added", "response.output_text.delta", "response.output_item.done",
			"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.delta",
			"response.function_call_arguments.done", "response.output_item.done", "response.completed",
		}
		if strings.Join(types, ",") != strings.Join(want, ",") {
			t.Fatalf("chunk %d: client events\n%s\nwant\n%s\n%s", n, strings.Join(types, ","), strings.Join(want, ","), out)
		}
		for _, i := range []int{4, 5, 6, 7, 8} {
			if evs[i]["output_index"].(float64) != 1 {
				t.Errorf("event %d output_index = %v, want 1", i, evs[i]["output_index"])
			}
		}
		b, _ := json.Marshal(evs[8]["item"])
		tt.JSONEqual(t, b, `{"type":"function_call","id":"fc_2","call_id":"call_2","name":"read_file","arguments":`+jsonString(goodArgs)+`,"status":"completed"}`)
		final, _ := json.Marshal(evs[9]["response"])
		tt.JSONEqual(t, final, `{"id":"resp_1","object":"response","status":"completed","output":[`+
			`{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Reading.","annotations":[]}]},`+
			`{"type":"function_call","id":"fc_2","call_id":"call_2","name":"read_file","arguments":`+jsonString(goodArgs)+`,"status":"completed"}],"usage":`+sum12+`}`)
		if strings.Contains(out, "Sorry.") || strings.Contains(out, "fc_1") {
			t.Errorf("the client saw the re-ask's text or the bad call:\n%s", out)
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestStreamValidFirstAnswerPassesUnchanged(t *testing.T) {
	answer := responsesAnswer("1", "Reading.", "fc_1", "call_1", goodArgs, usage1)
	for _, n := range tt.ChunkSizes {
		up, _ := script(answer)
		x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolResponses, []byte(responsesReq))
		out, sent := tt.RunStream(t, x, []byte(responsesReq), up, n)
		if len(sent) != 1 {
			t.Fatalf("upstream got %d requests, want 1", len(sent))
		}
		if out != answer {
			t.Fatalf("chunk %d: the client's bytes differ from the upstream's:\n%s\n--- want\n%s", n, out, answer)
		}
	}
}

func responsesJSON(id, text, itemID, callID, args, usage string) string {
	return `{"id":"resp_` + id + `","object":"response","status":"completed","output":[` +
		`{"type":"message","id":"msg_` + id + `","status":"completed","role":"assistant","content":[{"type":"output_text","text":"` + text + `","annotations":[]}]},` +
		`{"type":"function_call","id":"` + itemID + `","call_id":"` + callID + `","name":"read_file","arguments":` + jsonString(args) + `,"status":"completed"}],"usage":` + usage + `}`
}

func TestJSONReaskShowsOnlyTheRepairedCall(t *testing.T) {
	req := strings.Replace(responsesReq, `"stream":true`, `"stream":false`, 1)
	up, _ := script(
		responsesJSON("1", "Reading.", "fc_1", "call_1", badArgs, usage1),
		responsesJSON("2", "Sorry.", "fc_2", "call_2", goodArgs, usage2),
	)
	x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolResponses, []byte(req))
	out, sent, err := tt.RunJSON(t, x, []byte(req), up)
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 {
		t.Fatalf("upstream got %d requests, want 2", len(sent))
	}
	assertReask(t, sent[1])
	tt.JSONEqual(t, out, `{"id":"resp_1","object":"response","status":"completed","output":[`+
		`{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Reading.","annotations":[]}]},`+
		`{"type":"function_call","id":"fc_2","call_id":"call_2","name":"read_file","arguments":`+jsonString(goodArgs)+`,"status":"completed"}],"usage":`+sum12+`}`)
}

func TestJSONValidFirstAnswerPassesUnchanged(t *testing.T) {
	req := strings.Replace(responsesReq, `"stream":true`, `"stream":false`, 1)
	answer := responsesJSON("1", "Reading.", "fc_1", "call_1", goodArgs, usage1)
	up, _ := script(answer)
	x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolResponses, []byte(req))
	out, sent, err := tt.RunJSON(t, x, []byte(req), up)
	if err != nil || len(sent) != 1 || string(out) != answer {
		t.Fatalf("err %v, %d requests, body\n%s", err, len(sent), out)
	}
}

const chatReq = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"read a.txt"}],"tools":[{"type":"function","function":{"name":"read_file","parameters":` + readFileSchema + `}}]}`

func chatAnswer(id, text, callID, args, usage string) string {
	half := len(args) / 2
	head := `{"id":"chatcmpl-` + id + `","object":"chat.completion.chunk","created":1,"model":"m",`
	return tt.ChatSSE(
		head+`"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		head+`"choices":[{"index":0,"delta":{"content":"`+text+`"},"finish_reason":null}]}`,
		head+`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"`+callID+`","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}`,
		head+`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`+jsonString(args[:half])+`}}]},"finish_reason":null}]}`,
		head+`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`+jsonString(args[half:])+`}}]},"finish_reason":null}]}`,
		head+`"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		head+`"choices":[],"usage":`+usage+`}`,
	)
}

const (
	chatUsage1 = `{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":40}}`
	chatUsage2 = `{"prompt_tokens":150,"completion_tokens":10,"total_tokens":160,"prompt_tokens_details":{"cached_tokens":100}}`
	chatSum    = `{"prompt_tokens":250,"completion_tokens":30,"total_tokens":280,"prompt_tokens_details":{"cached_tokens":140}}`
)

func assertChatReask(t *testing.T, req []byte) {
	t.Helper()
	msgs := gjson.GetBytes(req, "messages").Array()
	if len(msgs) != 3 {
		t.Fatalf("re-ask messages = %s", gjson.GetBytes(req, "messages").Raw)
	}
	tt.JSONEqual(t, []byte(msgs[1].Raw), `{"role":"assistant","content":"Reading.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"read_file","arguments":`+jsonString(badArgs)+`}}]}`)
	if msgs[2].Get("role").String() != "tool" || msgs[2].Get("tool_call_id").String() != "call_1" ||
		!strings.Contains(msgs[2].Get("content").String(), "at /limit (schema /properties/limit/type)") ||
		!strings.Contains(msgs[2].Get("content").String(), "at the root (schema /required): missing property 'path'") {
		t.Errorf("tool message = %s", msgs[2].Raw)
	}
}

func TestChatStreamReaskShowsOnlyTheRepairedCall(t *testing.T) {
	for _, n := range tt.ChunkSizes {
		up, _ := script(chatAnswer("1", "Reading.", "call_1", badArgs, chatUsage1), chatAnswer("2", "Sorry.", "call_2", goodArgs, chatUsage2))
		x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolChat, []byte(chatReq))
		out, sent := tt.RunStream(t, x, []byte(chatReq), up, n)
		if len(sent) != 2 {
			t.Fatalf("upstream got %d requests, want 2", len(sent))
		}
		assertChatReask(t, sent[1])
		chunks, done := tt.ChatChunks(t, out)
		if !done {
			t.Fatalf("no [DONE]:\n%s", out)
		}
		var got []string
		for _, c := range chunks {
			b, _ := json.Marshal(c)
			got = append(got, string(b))
		}
		want := []string{
			`{"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0}],"created":1,"id":"chatcmpl-1","model":"m","object":"chat.completion.chunk"}`,
			`{"choices":[{"delta":{"content":"Reading."},"finish_reason":null,"index":0}],"created":1,"id":"chatcmpl-1","model":"m","object":"chat.completion.chunk"}`,
			`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"","name":"read_file"},"id":"call_2","index":0,"type":"function"}]},"finish_reason":null,"index":0}],"created":1,"id":"chatcmpl-1","model":"m","object":"chat.completion.chunk"}`,
			`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"path\":\"a.tx"},"index":0}]},"finish_reason":null,"index":0}],"created":1,"id":"chatcmpl-1","model":"m","object":"chat.completion.chunk"}`,
			`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"t\",\"limit\":10}"},"index":0}]},"finish_reason":null,"index":0}],"created":1,"id":"chatcmpl-1","model":"m","object":"chat.completion.chunk"}`,
			`{"choices":[{"delta":{},"finish_reason":"tool_calls","index":0}],"created":1,"id":"chatcmpl-1","model":"m","object":"chat.completion.chunk"}`,
			`{"choices":[],"created":1,"id":"chatcmpl-1","model":"m","object":"chat.completion.chunk","usage":{"completion_tokens":30,"prompt_tokens":250,"prompt_tokens_details":{"cached_tokens":140},"total_tokens":280}}`,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("chunk %d: client chunks\n%s\nwant\n%s", n, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func TestChatStreamValidFirstAnswerPassesUnchanged(t *testing.T) {
	answer := chatAnswer("1", "Reading.", "call_1", goodArgs, chatUsage1)
	for _, n := range tt.ChunkSizes {
		up, _ := script(answer)
		x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolChat, []byte(chatReq))
		out, sent := tt.RunStream(t, x, []byte(chatReq), up, n)
		if len(sent) != 1 || out != answer {
			t.Fatalf("chunk %d: %d requests; client bytes\n%s\n--- want\n%s", n, len(sent), out, answer)
		}
	}
}

// TestStreamRepairedCallKeepsItsItem: a call handed on repaired (here a
// namespaced call whose arguments end in a trailing comma) is announced
// with its whole item, namespace included, in progress with empty
// arguments, and completed with the repaired arguments.
func TestStreamRepairedCallKeepsItsItem(t *testing.T) {
	req := `{"model":"m","stream":true,"input":"read a.txt","tools":[{"type":"namespace","name":"mcp__fs","description":"Files","tools":[{"type":"function","name":"read_file","parameters":` + readFileSchema + `}]}]}`
	args := `{"path":"a.txt","limit":10,}`
	call := `{"type":"function_call","id":"fc_1","call_id":"call_1","namespace":"mcp__fs","name":"read_file","arguments":` + jsonString(args) + `,"status":"completed"}`
	answer := seqSSE(
		`{"type":"response.created","sequence_number":"SEQ","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":"SEQ","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","namespace":"mcp__fs","name":"read_file","arguments":"","status":"in_progress"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":"SEQ","item_id":"fc_1","output_index":0,"delta":`+jsonString(args)+`}`,
		`{"type":"response.function_call_arguments.done","sequence_number":"SEQ","item_id":"fc_1","output_index":0,"arguments":`+jsonString(args)+`}`,
		`{"type":"response.output_item.done","sequence_number":"SEQ","output_index":0,"item":`+call+`}`,
		`{"type":"response.completed","sequence_number":"SEQ","response":{"id":"resp_1","object":"response","status":"completed","output":[`+call+`],"usage":`+usage1+`}}`,
	)
	up, _ := script(answer)
	x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolResponses, []byte(req))
	out, sent := tt.RunStream(t, x, []byte(req), up, 4096)
	if len(sent) != 1 {
		t.Fatalf("upstream got %d requests, want 1", len(sent))
	}
	fixed := `{"type":"function_call","id":"fc_1","call_id":"call_1","namespace":"mcp__fs","name":"read_file","arguments":` + jsonString(`{"path":"a.txt","limit":10}`) + `,"status":"completed"}`
	want := seqSSE(
		`{"type":"response.created","sequence_number":"SEQ","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":"SEQ","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","namespace":"mcp__fs","name":"read_file","arguments":"","status":"in_progress"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":"SEQ","item_id":"fc_1","output_index":0,"delta":`+jsonString(`{"path":"a.txt","limit":10}`)+`}`,
		`{"type":"response.function_call_arguments.done","sequence_number":"SEQ","item_id":"fc_1","output_index":0,"arguments":`+jsonString(`{"path":"a.txt","limit":10}`)+`}`,
		`{"type":"response.output_item.done","sequence_number":"SEQ","output_index":0,"item":`+fixed+`}`,
		`{"type":"response.completed","sequence_number":"SEQ","response":{"id":"resp_1","object":"response","status":"completed","output":[`+fixed+`],"usage":`+usage1+`}}`,
	)
	if got, w := tt.Events(t, out), tt.Events(t, want); !reflect.DeepEqual(got, w) {
		t.Fatalf("client stream:\n%s\n--- want\n%s", out, want)
	}
}

// TestStreamCustomCallGoesOnAsItStreams: a custom tool's call is checked
// by its name, which its added event carries, so a call of a declared
// custom tool reaches the client delta by delta, before its item is done;
// one naming no declared tool is held.
func TestStreamCustomCallGoesOnAsItStreams(t *testing.T) {
	req := []byte(`{"model":"m","stream":true,"input":"patch it","tools":[{"type":"custom","name":"apply_patch","description":"Patch"}]}`)
	events := func(name string) []string {
		item := `{"type":"custom_tool_call","id":"ctc_1","call_id":"call_1","name":"` + name + `","input":"*** Begin Patch\n*** End Patch","status":"completed"}`
		return []string{
			`{"type":"response.created","sequence_number":"SEQ","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
			`{"type":"response.output_item.added","sequence_number":"SEQ","output_index":0,"item":{"type":"custom_tool_call","id":"ctc_1","call_id":"call_1","name":"` + name + `","input":"","status":"in_progress"}}`,
			`{"type":"response.custom_tool_call_input.delta","sequence_number":"SEQ","item_id":"ctc_1","output_index":0,"delta":"*** Begin Patch\n"}`,
			`{"type":"response.custom_tool_call_input.delta","sequence_number":"SEQ","item_id":"ctc_1","output_index":0,"delta":"*** End Patch"}`,
			`{"type":"response.custom_tool_call_input.done","sequence_number":"SEQ","item_id":"ctc_1","output_index":0,"input":"*** Begin Patch\n*** End Patch"}`,
			`{"type":"response.output_item.done","sequence_number":"SEQ","output_index":0,"item":` + item + `}`,
			`{"type":"response.completed","sequence_number":"SEQ","response":{"id":"resp_1","object":"response","status":"completed","output":[` + item + `],"usage":` + usage1 + `}}`,
		}
	}
	for _, c := range []struct {
		name    string
		streams bool
	}{{"apply_patch", true}, {"apply_diff", false}} {
		// Fed up to the first input delta's end.
		x := tt.Begin(t, tt.Chain(t, `[{"transform":"tools_preflight","config":{"max_repairs":0}}]`), transforms.ProtocolResponses, req)
		if _, err := x.RewriteRequest(req); err != nil {
			t.Fatal(err)
		}
		up := seqSSE(events(c.name)...)
		s := x.NewStream()
		cut := strings.Index(up, `"*** Begin Patch\n"}`) + len(`"*** Begin Patch\n"}`) + 2
		if err := s.Write([]byte(up[:cut])); err != nil {
			t.Fatal(err)
		}
		got := string(s.Output())
		if streams := strings.Contains(got, `"delta":"*** Begin Patch\n"`); streams != c.streams {
			t.Errorf("%s: the first input delta reached the client before the item was done: %v, want %v\n%s", c.name, streams, c.streams, got)
		}
		if err := s.Write([]byte(up[cut:])); err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
		got += string(s.Output())
		if c.streams && got != up {
			t.Errorf("%s: the client's bytes differ from the upstream's:\n%s", c.name, got)
		}
	}
}

// TestChatReaskNamesCallsThatCameWithoutAnID: a serving stack that sends
// calls without an id still gets its invalid call asked for again; the
// re-ask's history names the call (call_pf_<n>) and its tool message
// answers that name. Streamed and not.
func TestChatReaskNamesCallsThatCameWithoutAnID(t *testing.T) {
	check := func(t *testing.T, sent [][]byte) {
		t.Helper()
		if len(sent) != 2 {
			t.Fatalf("upstream got %d requests, want 2", len(sent))
		}
		msgs := gjson.GetBytes(sent[1], "messages").Array()
		if len(msgs) != 3 {
			t.Fatalf("re-ask messages = %s", gjson.GetBytes(sent[1], "messages").Raw)
		}
		tt.JSONEqual(t, []byte(msgs[1].Raw), `{"role":"assistant","content":"Reading.","tool_calls":[{"id":"call_pf_0","type":"function","function":{"name":"read_file","arguments":`+jsonString(badArgs)+`}}]}`)
		if msgs[2].Get("role").String() != "tool" || msgs[2].Get("tool_call_id").String() != "call_pf_0" ||
			!strings.Contains(msgs[2].Get("content").String(), "at /limit (schema /properties/limit/type)") {
			t.Errorf("tool message = %s", msgs[2].Raw)
		}
	}
	t.Run("stream", func(t *testing.T) {
		up, _ := script(chatAnswer("1", "Reading.", "", badArgs, chatUsage1), chatAnswer("2", "Sorry.", "", goodArgs, chatUsage2))
		x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolChat, []byte(chatReq))
		out, sent := tt.RunStream(t, x, []byte(chatReq), up, 4096)
		check(t, sent)
		if got := tt.CallText(mustChunks(t, out)); len(got) != 2 || got["0/0"] != goodArgs || got["0/0/name"] != "function:read_file" {
			t.Fatalf("the client's calls: %v\n%s", got, out)
		}
	})
	t.Run("json", func(t *testing.T) {
		req := strings.Replace(chatReq, `"stream":true`, `"stream":false`, 1)
		answer := func(id, text, args, usage string) string {
			return `{"id":"c` + id + `","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"` + text + `","tool_calls":[{"type":"function","function":{"name":"read_file","arguments":` + jsonString(args) + `}}]},"finish_reason":"tool_calls"}],"usage":` + usage + `}`
		}
		up, _ := script(answer("1", "Reading.", badArgs, chatUsage1), answer("2", "Sorry.", goodArgs, chatUsage2))
		x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolChat, []byte(req))
		out, sent, err := tt.RunJSON(t, x, []byte(req), up)
		if err != nil {
			t.Fatal(err)
		}
		check(t, sent)
		if got := gjson.GetBytes(out, "choices.0.message.tool_calls.#.function.arguments").Array(); len(got) != 1 || got[0].String() != goodArgs {
			t.Fatalf("the client's calls: %s", out)
		}
	})
}

func mustChunks(t *testing.T, out string) []map[string]any {
	t.Helper()
	chunks, done := tt.ChatChunks(t, out)
	if !done {
		t.Fatalf("no [DONE]:\n%s", out)
	}
	return chunks
}
