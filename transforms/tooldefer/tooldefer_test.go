package tooldefer_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	tt "github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	_ "github.com/llmtransform/caddy-llm-transform/transforms/tooldefer"
	_ "github.com/llmtransform/caddy-llm-transform/transforms/toolsplan"
)

// tools returns n Responses function tools: a few with telling names and
// descriptions, the rest filler.
func tools(n int, chat bool) string {
	named := []struct{ name, desc, param string }{
		{"create_issue", "Create a new issue in a GitHub repository.", "title"},
		{"list_pull_requests", "List pull requests of a repository.", "state"},
		{"send_email", "Send an email message to a recipient.", "to"},
		{"read_file", "Read a file from the workspace.", "path"},
	}
	var b []string
	for i := 0; i < n; i++ {
		name, desc, param := fmt.Sprintf("filler_tool_%03d", i), fmt.Sprintf("Does filler thing number %d.", i), "value"
		if i < len(named) {
			name, desc, param = named[i].name, named[i].desc, named[i].param
		}
		params := `{"type":"object","properties":{"` + param + `":{"type":"string"}},"required":["` + param + `"]}`
		if chat {
			b = append(b, `{"type":"function","function":{"name":"`+name+`","description":"`+desc+`","parameters":`+params+`}}`)
		} else {
			b = append(b, `{"type":"function","name":"`+name+`","description":"`+desc+`","parameters":`+params+`}`)
		}
	}
	return "[" + strings.Join(b, ",") + "]"
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func seqSSE(events ...string) string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = strings.Replace(e, `"SEQ"`, fmt.Sprint(i), 1)
	}
	return tt.SSE(out...)
}

// callAnswer is a Responses stream whose answer is one call.
func callAnswer(id, name, callID, args string) string {
	item := `{"type":"function_call","id":"fc_` + id + `","call_id":"` + callID + `","name":"` + name + `","arguments":` + jsonString(args) + `,"status":"completed"}`
	return seqSSE(
		`{"type":"response.created","sequence_number":"SEQ","response":{"id":"resp_`+id+`","object":"response","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":"SEQ","output_index":0,"item":{"type":"function_call","id":"fc_`+id+`","call_id":"`+callID+`","name":"`+name+`","arguments":"","status":"in_progress"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":"SEQ","item_id":"fc_`+id+`","output_index":0,"delta":`+jsonString(args)+`}`,
		`{"type":"response.function_call_arguments.done","sequence_number":"SEQ","item_id":"fc_`+id+`","output_index":0,"arguments":`+jsonString(args)+`}`,
		`{"type":"response.output_item.done","sequence_number":"SEQ","output_index":0,"item":`+item+`}`,
		`{"type":"response.completed","sequence_number":"SEQ","response":{"id":"resp_`+id+`","object":"response","status":"completed","output":[`+item+`],"usage":{"input_tokens":10,"output_tokens":2,"total_tokens":12}}}`,
	)
}

func TestStreamSearchIsAnsweredByTheGateway(t *testing.T) {
	req := `{"model":"m","stream":true,"input":"open an issue about the crash","tools":` + tools(200, false) + `}`
	rules := `[{"transform":"tools_defer"},{"transform":"tools_plan","config":{"profile":"openai_chat"}}]`
	for _, n := range tt.ChunkSizes {
		answers := []string{
			callAnswer("1", "tool_search", "call_s", `{"query":"create github issue"}`),
			callAnswer("2", "create_issue", "call_c", `{"title":"Crash"}`),
		}
		var sent [][]byte
		x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolResponses, []byte(req))
		out, _ := tt.RunStream(t, x, []byte(req), func(b []byte) (int, string) {
			sent = append(sent, b)
			if k := len(gjson.GetBytes(b, "tools").Array()); k > 128 {
				return 400, `{"error":{"message":"Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length ` + fmt.Sprint(k) + ` instead.","type":"invalid_request_error","param":"tools","code":"array_above_max_length"}}`
			}
			return 200, answers[len(sent)-1]
		}, n)
		if len(sent) != 2 {
			t.Fatalf("upstream got %d requests", len(sent))
		}
		first := gjson.GetBytes(sent[0], "tools.#.name").Array()
		if len(first) != 1 || first[0].String() != "tool_search" {
			t.Fatalf("first request's tools %v", first)
		}
		second := gjson.GetBytes(sent[1], "tools.#.name").String()
		if !strings.Contains(second, `"create_issue"`) || !strings.Contains(second, `"tool_search"`) {
			t.Fatalf("second request's tools %s", second)
		}
		in := gjson.GetBytes(sent[1], "input").Array()
		if len(in) != 3 || in[1].Get("name").String() != "tool_search" || in[2].Get("type").String() != "function_call_output" ||
			!strings.Contains(in[2].Get("output").String(), "create_issue") {
			t.Fatalf("second request's input %s", gjson.GetBytes(sent[1], "input").Raw)
		}
		if strings.Contains(out, "tool_search") || strings.Contains(out, "call_s") {
			t.Fatalf("the client saw the search:\n%s", out)
		}
		evs := tt.Events(t, out)
		var types []string
		for _, e := range evs {
			types = append(types, e["type"].(string))
		}
		if strings.Join(types, ",") != "response.created,response.output_item.added,response.function_call_arguments.delta,response.function_call_arguments.done,response.output_item.done,response.completed" {
			t.Fatalf("events %v\n%s", types, out)
		}
		item, _ := json.Marshal(evs[4]["item"])
		tt.JSONEqual(t, item, `{"type":"function_call","id":"fc_2","call_id":"call_c","name":"create_issue","arguments":"{\"title\":\"Crash\"}","status":"completed"}`)
		final := evs[5]["response"].(map[string]any)
		if final["id"] != "resp_1" || len(final["output"].([]any)) != 1 || final["usage"].(map[string]any)["input_tokens"] != float64(20) {
			t.Fatalf("final %v", final)
		}
	}
}

func chatCallAnswer(id, name, callID, args string) string {
	head := `{"id":"chatcmpl-` + id + `","object":"chat.completion.chunk","created":1,"model":"m",`
	return tt.ChatSSE(
		head+`"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		head+`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"`+callID+`","type":"function","function":{"name":"`+name+`","arguments":""}}]},"finish_reason":null}]}`,
		head+`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`+jsonString(args)+`}}]},"finish_reason":null}]}`,
		head+`"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	)
}

func TestChatStreamSearchIsAnsweredByTheGateway(t *testing.T) {
	req := `{"model":"m","stream":true,"messages":[{"role":"user","content":"open an issue"}],"tools":` + tools(200, true) + `}`
	for _, n := range tt.ChunkSizes {
		answers := []string{
			chatCallAnswer("1", "tool_search", "call_s", `{"query":"create github issue"}`),
			chatCallAnswer("2", "create_issue", "call_c", `{"title":"Crash"}`),
		}
		var sent [][]byte
		x := tt.Begin(t, tt.Chain(t, `[{"transform":"tools_defer"}]`), transforms.ProtocolChat, []byte(req))
		out, _ := tt.RunStream(t, x, []byte(req), func(b []byte) (int, string) {
			sent = append(sent, b)
			return 200, answers[len(sent)-1]
		}, n)
		if len(sent) != 2 {
			t.Fatalf("%d requests", len(sent))
		}
		if names := gjson.GetBytes(sent[0], "tools.#.function.name").String(); names != `["tool_search"]` {
			t.Fatalf("first request's tools %s", names)
		}
		msgs := gjson.GetBytes(sent[1], "messages").Array()
		if len(msgs) != 3 || msgs[1].Get("tool_calls.0.function.name").String() != "tool_search" || msgs[2].Get("role").String() != "tool" ||
			!strings.Contains(msgs[2].Get("content").String(), "create_issue") {
			t.Fatalf("second request's messages %s", gjson.GetBytes(sent[1], "messages").Raw)
		}
		if !strings.Contains(gjson.GetBytes(sent[1], "tools.#.function.name").String(), `"create_issue"`) {
			t.Fatalf("create_issue not loaded")
		}
		chunks, done := tt.ChatChunks(t, out)
		if !done || strings.Contains(out, "tool_search") || strings.Contains(out, "call_s") {
			t.Fatalf("client stream:\n%s", out)
		}
		var calls []string
		finish := ""
		for _, c := range chunks {
			if c["id"] != "chatcmpl-1" {
				t.Fatalf("chunk id %v", c["id"])
			}
			for _, ch := range c["choices"].([]any) {
				ch := ch.(map[string]any)
				if tc, ok := ch["delta"].(map[string]any)["tool_calls"].([]any); ok {
					for _, e := range tc {
						b, _ := json.Marshal(e)
						calls = append(calls, string(b))
					}
				}
				if f, ok := ch["finish_reason"].(string); ok {
					finish += f
				}
			}
		}
		if finish != "tool_calls" || len(calls) != 2 || !strings.Contains(calls[0], `"name":"create_issue"`) || !strings.Contains(calls[0], `"index":0`) {
			t.Fatalf("calls %v finish %q\n%s", calls, finish, out)
		}
	}
}

func TestJSONSearchIsAnsweredByTheGateway(t *testing.T) {
	req := `{"model":"m","input":"open an issue","tools":` + tools(200, false) + `}`
	answers := []string{
		`{"id":"resp_1","object":"response","status":"completed","output":[{"type":"function_call","id":"fc_1","call_id":"call_s","name":"tool_search","arguments":"{\"query\":\"create issue\"}","status":"completed"}],"usage":{"input_tokens":10,"output_tokens":2,"total_tokens":12}}`,
		`{"id":"resp_2","object":"response","status":"completed","output":[{"type":"function_call","id":"fc_2","call_id":"call_c","name":"create_issue","arguments":"{\"title\":\"Crash\"}","status":"completed"}],"usage":{"input_tokens":30,"output_tokens":3,"total_tokens":33}}`,
	}
	x := tt.Begin(t, tt.Chain(t, `[{"transform":"tools_defer"}]`), transforms.ProtocolResponses, []byte(req))
	n := 0
	out, sent, err := tt.RunJSON(t, x, []byte(req), func([]byte) (int, string) { n++; return 200, answers[n-1] })
	if err != nil || len(sent) != 2 {
		t.Fatalf("%v %d", err, len(sent))
	}
	tt.JSONEqual(t, out, `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"function_call","id":"fc_2","call_id":"call_c","name":"create_issue","arguments":"{\"title\":\"Crash\"}","status":"completed"}],"usage":{"input_tokens":40,"output_tokens":5,"total_tokens":45}}`)
}

// TestNextTurnLoadsWhatTheHistoryCalls: a fresh exchange (a restarted
// gateway) declares the tool the history called, without a search.
func TestNextTurnLoadsWhatTheHistoryCalls(t *testing.T) {
	req := `{"model":"m","input":[{"role":"user","content":"open an issue"},` +
		`{"type":"function_call","call_id":"call_c","name":"create_issue","arguments":"{\"title\":\"Crash\"}"},` +
		`{"type":"function_call_output","call_id":"call_c","output":"#12"}],"tools":` + tools(200, false) + `}`
	x := tt.Begin(t, tt.Chain(t, `[{"transform":"tools_defer"}]`), transforms.ProtocolResponses, []byte(req))
	body, err := x.RewriteRequest([]byte(req))
	if err != nil {
		t.Fatal(err)
	}
	if names := gjson.GetBytes(body, "tools.#.name").String(); names != `["create_issue","tool_search"]` {
		t.Fatalf("tools %s", names)
	}
}

func TestClientSearchWins(t *testing.T) {
	req := `{"model":"m","input":"hi","tools":` + strings.Replace(tools(200, false), `[`, `[{"type":"tool_search"},`, 1) + `}`
	x := tt.Begin(t, tt.Chain(t, `[{"transform":"tools_defer"}]`), transforms.ProtocolResponses, []byte(req))
	body, err := x.RewriteRequest([]byte(req))
	if err != nil || string(body) != req {
		t.Fatalf("the request changed: %v", err)
	}
}

func TestUnderTheThresholdNothingChanges(t *testing.T) {
	req := `{"model":"m","input":"hi","tools":` + tools(128, false) + `}`
	x := tt.Begin(t, tt.Chain(t, `[{"transform":"tools_defer"}]`), transforms.ProtocolResponses, []byte(req))
	body, err := x.RewriteRequest([]byte(req))
	if err != nil || string(body) != req || x.WantsResponse() {
		t.Fatalf("the request changed: %v", err)
	}
}

func TestAfterToolsPlanFailsToLoad(t *testing.T) {
	rules, err := transforms.Compile(tt.Context(t), []transforms.RuleConfig{{Transform: "tools_plan"}, {Transform: "tools_defer"}}, transforms.ScopeProvider, "")
	if err != nil {
		t.Fatal(err)
	}
	err = transforms.NewChain(rules).CheckOrder()
	if err == nil || !strings.Contains(err.Error(), "rule 1 (tools_defer) must come before rule 0 (tools_plan)") {
		t.Fatalf("err %v", err)
	}
}
