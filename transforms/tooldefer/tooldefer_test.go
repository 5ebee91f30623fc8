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
