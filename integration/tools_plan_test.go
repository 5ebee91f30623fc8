package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// upstreamName is the name rule of the strict upstream (OpenAI's Chat rule,
// which fakeprovider.Provider enforces with Strict).
var upstreamName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

const (
	// planNamespace and planDotted are an MCP-style namespace and a
	// 70-character dotted function name in it: neither the dots nor the
	// length pass the strict upstream.
	planNamespace = "mcp__weather"
	planDotted    = "weather.now.for.a.very.long.dotted.name.that.goes.over.sixty.four.char"

	// planArgs are the arguments the upstream calls the tool with.
	planArgs = `{"city":"Oslo"}`
)

// serveUpstream serves h as the gateway's upstream and returns its host:port.
func serveUpstream(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// functionOnlyRule is `rule tools_plan { profile function_only }` alone.
const functionOnlyRule = `		rule tools_plan {
			profile function_only
		}`

// namespaceUpstream is the strict upstream that calls whichever tool is not
// exec_command, under the (flattened, encoded) name its request declared:
// the name is read from the request, never written into the test. offered
// collects the names it was asked about.
func namespaceUpstream(t *testing.T) (*fakeprovider.Provider, *[]string) {
	t.Helper()
	var offered []string
	up := &fakeprovider.Provider{Strict: true, CallArguments: planArgs, Tool: func(ns, name string) bool {
		offered = append(offered, ns+"/"+name)
		return name != "exec_command"
	}}
	return up, &offered
}

// namespaceParams declares exec_command and the namespace planNamespace
// holding planDotted, as an MCP client does.
func namespaceParams(input responses.ResponseNewParamsInputUnion) responses.ResponseNewParams {
	schema := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}
	return responses.ResponseNewParams{
		Model: "gpt-5.5",
		Input: input,
		Tools: []responses.ToolUnionParam{
			responses.ToolParamOfFunction("exec_command", map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}, false),
			{OfNamespace: &responses.NamespaceToolParam{
				Name:        planNamespace,
				Description: "Weather tools of an MCP server",
				Tools: []responses.NamespaceToolToolUnionParam{{OfFunction: &responses.NamespaceToolToolFunctionParam{
					Name:        planDotted,
					Description: openai.String("The weather now"),
					Parameters:  schema,
				}}},
			}},
		},
	}
}

// flatName checks the strict upstream's last request declared exactly two
// top-level functions, exec_command and one other whose name the upstream
// accepts, and returns that name.
func flatName(t *testing.T, up *fakeprovider.Provider) string {
	t.Helper()
	reqs := up.Requests()
	if len(reqs) == 0 {
		t.Fatal("upstream received nothing")
	}
	tools := gjson.ParseBytes(reqs[len(reqs)-1]).Get("tools").Array()
	var flat string
	for _, tool := range tools {
		name := tool.Get("name").String()
		if tool.Get("type").String() != "function" || tool.Get("namespace").Exists() || !upstreamName.MatchString(name) {
			t.Errorf("upstream got %s", tool.Raw)
		}
		if name != "exec_command" {
			flat = name
		}
	}
	if len(tools) != 2 || flat == "" || flat == planDotted {
		t.Fatalf("upstream tools: %s", gjson.ParseBytes(reqs[len(reqs)-1]).Get("tools").Raw)
	}
	return flat
}

// TestToolsPlanNamespaceRoundTripJSON: a namespace with a 70-character
// dotted function goes to a strict upstream flattened under a name it
// accepts; the upstream's call to that name comes back to the openai-go
// client as a function_call with the original namespace and name, and the
// next turn, carrying that call and its output, is accepted too.
func TestToolsPlanNamespaceRoundTripJSON(t *testing.T) {
	up, offered := namespaceUpstream(t)
	startGateway(t, functionOnlyRule, serveUpstream(t, up))
	client := sdkClient()

	resp, err := client.Responses.New(context.Background(), namespaceParams(responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Oslo?")}))
	if err != nil {
		t.Fatal(err)
	}
	flat := flatName(t, up)
	t.Logf("%s.%s went upstream as %s", planNamespace, planDotted, flat)
	if want := []string{"/exec_command", "/" + flat}; strings.Join(*offered, ",") != strings.Join(want, ",") {
		t.Errorf("upstream was asked about %q, want %q", *offered, want)
	}
	var calls []responses.ResponseFunctionToolCall
	for _, item := range resp.Output {
		if item.Type == "function_call" {
			calls = append(calls, item.AsFunctionCall())
		}
	}
	if len(calls) != 1 {
		t.Fatalf("function calls: %s", resp.RawJSON())
	}
	call := calls[0]
	if call.Namespace != planNamespace || call.Name != planDotted || call.Arguments != planArgs || call.CallID == "" {
		t.Fatalf("call = namespace %q name %q arguments %q call_id %q, want %q %q %q",
			call.Namespace, call.Name, call.Arguments, call.CallID, planNamespace, planDotted, planArgs)
	}
	if strings.Contains(resp.RawJSON(), flat) {
		t.Errorf("the client saw the upstream name %q: %s", flat, resp.RawJSON())
	}
	// The echoed tools are the client's own.
	if len(resp.Tools) != 2 || resp.Tools[1].Type != "namespace" || resp.Tools[1].Name != planNamespace {
		t.Errorf("echoed tools: %s", gjson.Get(resp.RawJSON(), "tools").Raw)
	}

	// Turn 2: the call as the client got it, and its output. The upstream
	// must see the same flat name again, without a namespace member.
	items := responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Weather in Oslo?", responses.EasyInputMessageRoleUser),
		{OfFunctionCall: &responses.ResponseFunctionToolCallParam{
			Arguments: call.Arguments, CallID: call.CallID, Name: call.Name, Namespace: openai.String(call.Namespace),
		}},
		{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
			CallID: openai.String(call.CallID), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("Sunny, 21°C")},
		}},
	}
	resp, err = client.Responses.New(context.Background(), namespaceParams(responses.ResponseNewParamsInputUnion{OfInputItemList: items}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.OutputText() != "Patch applied." {
		t.Errorf("turn 2 answer: %s", resp.RawJSON())
	}
	if got := flatName(t, up); got != flat {
		t.Errorf("turn 2 declared %q, turn 1 %q", got, flat)
	}
	reqs := up.Requests()
	hist := gjson.ParseBytes(reqs[len(reqs)-1]).Get(`input.#(type=="function_call")`)
	if hist.Get("name").String() != flat || hist.Get("namespace").Exists() || hist.Get("call_id").String() != call.CallID {
		t.Errorf("turn 2 history call reached the upstream as %s, want name %q without a namespace", hist.Raw, flat)
	}

	// A tool_choice naming the function (the SDK's choice has no
	// namespace) reaches the upstream under the flat name.
	params := namespaceParams(responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Oslo?")})
	params.ToolChoice = responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: planDotted}}
	resp, err = client.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	reqs = up.Requests()
	if c := gjson.ParseBytes(reqs[len(reqs)-1]).Get("tool_choice"); c.Get("type").String() != "function" || c.Get("name").String() != flat {
		t.Errorf("tool_choice reached the upstream as %s, want the function %q", c.Raw, flat)
	}
	if c := gjson.Get(resp.RawJSON(), `output.#(type=="function_call")`); c.Get("namespace").String() != planNamespace || c.Get("name").String() != planDotted {
		t.Errorf("call with a named choice: %s", c.Raw)
	}
	if resp.ToolChoice.Name != planDotted {
		t.Errorf("echoed tool_choice: %s", gjson.Get(resp.RawJSON(), "tool_choice").Raw)
	}
}

// TestToolsPlanNamespaceRoundTripStream is the same first turn streamed:
// every event that names the call names it as the client declared it, and
// the upstream's flat name never reaches the client.
func TestToolsPlanNamespaceRoundTripStream(t *testing.T) {
	up, _ := namespaceUpstream(t)
	startGateway(t, functionOnlyRule, serveUpstream(t, up))
	client := sdkClient()

	params := namespaceParams(responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Oslo?")})
	stream := client.Responses.NewStreaming(context.Background(), params)
	var raw strings.Builder
	var added, done, completed []responses.ResponseFunctionToolCall
	var args strings.Builder
	var argsDone string
	for stream.Next() {
		ev := stream.Current()
		raw.WriteString(ev.RawJSON() + "\n")
		switch ev.Type {
		case "response.output_item.added":
			if it := ev.AsResponseOutputItemAdded().Item; it.Type == "function_call" {
				added = append(added, it.AsFunctionCall())
			}
		case "response.output_item.done":
			if it := ev.AsResponseOutputItemDone().Item; it.Type == "function_call" {
				done = append(done, it.AsFunctionCall())
			}
		case "response.function_call_arguments.delta":
			args.WriteString(ev.AsResponseFunctionCallArgumentsDelta().Delta)
		case "response.function_call_arguments.done":
			argsDone = ev.AsResponseFunctionCallArgumentsDone().Arguments
			// Not in the SDK's struct, but sent: the call's name.
			if n := gjson.Get(ev.RawJSON(), "name"); n.Exists() && n.String() != planDotted {
				t.Errorf("function_call_arguments.done names %s", n.Raw)
			}
		case "response.completed":
			for _, it := range ev.AsResponseCompleted().Response.Output {
				if it.Type == "function_call" {
					completed = append(completed, it.AsFunctionCall())
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	flat := flatName(t, up)
	for what, calls := range map[string][]responses.ResponseFunctionToolCall{"output_item.added": added, "output_item.done": done, "response.completed": completed} {
		if len(calls) != 1 || calls[0].Namespace != planNamespace || calls[0].Name != planDotted || calls[0].CallID == "" {
			t.Errorf("%s calls: %+v", what, calls)
		}
	}
	if len(done) == 1 && done[0].Arguments != planArgs {
		t.Errorf("output_item.done arguments %q", done[0].Arguments)
	}
	if args.String() != planArgs || argsDone != planArgs {
		t.Errorf("argument deltas %q, done %q, want %q", args.String(), argsDone, planArgs)
	}
	if strings.Contains(raw.String(), flat) {
		t.Errorf("the client saw the upstream name %q:\n%s", flat, raw.String())
	}
}

// TestToolsPlanRejectsThroughCaddy: a request over max_tools, or with a
// tool_choice the upstream cannot honour, is answered 400 by the gateway in
// the client's protocol error shape, naming the limit or the tool, and the
// upstream receives nothing.
func TestToolsPlanRejectsThroughCaddy(t *testing.T) {
	const fn = `{"type":"function","name":"%s","parameters":{"type":"object"}}`
	const chatFn = `{"type":"function","function":{"name":"%s","parameters":{"type":"object"}}}`
	f := func(tmpl string, names ...string) string {
		var parts []string
		for _, n := range names {
			parts = append(parts, strings.Replace(tmpl, "%s", n, 1))
		}
		return strings.Join(parts, ",")
	}
	for _, tc := range []struct {
		name, rule, path, body string
		code, param            string
		mentions               []string // the message names the limit and count, or the tool
	}{
		{
			name: "responses over max_tools", rule: "profile function_only\n\t\t\tmax_tools 2", path: "/v1/responses",
			body: `{"model":"gpt-5.5","input":"hi","tools":[` + f(fn, "a", "b", "c") + `]}`,
			code: "too_many_tools", param: "tools", mentions: []string{"at most 2", "has 3"},
		},
		{
			// Degraded tools count; a dropped web_search does not.
			name: "responses over max_tools after degrading", rule: "profile function_only\n\t\t\tmax_tools 2", path: "/v1/responses",
			body: `{"model":"gpt-5.5","input":"hi","tools":[` + f(fn, "a", "b") + `,{"type":"local_shell"},{"type":"web_search"}]}`,
			code: "too_many_tools", param: "tools", mentions: []string{"at most 2", "has 3"},
		},
		{
			// A flattened namespace counts its functions.
			name: "responses over max_tools by a namespace", rule: "profile function_only\n\t\t\tmax_tools 2", path: "/v1/responses",
			body: `{"model":"gpt-5.5","input":"hi","tools":[{"type":"namespace","name":"mcp__x","description":"d","tools":[` + f(fn, "a", "b", "c") + `]}]}`,
			code: "too_many_tools", param: "tools", mentions: []string{"at most 2", "has 3"},
		},
		{
			name: "chat over max_tools", rule: "profile function_only\n\t\t\tmax_tools 2", path: "/v1/chat/completions",
			body: `{"model":"gpt-5.5","messages":[{"role":"user","content":"hi"}],"tools":[` + f(chatFn, "a", "b", "c") + `]}`,
			code: "too_many_tools", param: "tools", mentions: []string{"at most 2", "has 3"},
		},
		{
			name: "responses choice of a dropped web_search", rule: "profile function_only", path: "/v1/responses",
			body: `{"model":"gpt-5.5","input":"hi","tools":[` + f(fn, "a") + `,{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`,
			code: "unsupported_tool_choice", param: "tool_choice", mentions: []string{"web_search"},
		},
		{
			name: "responses choice of an undeclared function", rule: "profile function_only", path: "/v1/responses",
			body: `{"model":"gpt-5.5","input":"hi","tools":[` + f(fn, "a") + `],"tool_choice":{"type":"function","name":"get_weather"}}`,
			code: "unsupported_tool_choice", param: "tool_choice", mentions: []string{`"get_weather"`},
		},
		{
			name: "responses allowed_tools of dropped tools only", rule: "profile function_only", path: "/v1/responses",
			body: `{"model":"gpt-5.5","input":"hi","tools":[` + f(fn, "a") + `,{"type":"web_search"}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"web_search"}]}}`,
			// The issue asks for a 400 "that names the tool and the reason".
			code: "unsupported_tool_choice", param: "tool_choice", mentions: []string{"web_search"},
		},
		{
			name: "responses required while thinking, rejected", rule: "profile deepseek\n\t\t\tunsupported_choice reject", path: "/v1/responses",
			body: `{"model":"deepseek-v4","input":"hi","reasoning":{"effort":"high"},"tools":[` + f(fn, "a") + `],"tool_choice":"required"}`,
			code: "unsupported_tool_choice", param: "tool_choice", mentions: []string{`"required"`, "thinking"},
		},
		{
			name: "chat choice of an undeclared function", rule: "profile function_only", path: "/v1/chat/completions",
			body: `{"model":"gpt-5.5","messages":[{"role":"user","content":"hi"}],"tools":[` + f(chatFn, "a") + `],"tool_choice":{"type":"function","function":{"name":"get_weather"}}}`,
			code: "unsupported_tool_choice", param: "tool_choice", mentions: []string{`"get_weather"`},
		},
		{
			name: "chat required on glm, rejected", rule: "profile glm\n\t\t\tunsupported_choice reject", path: "/v1/chat/completions",
			body: `{"model":"glm-4.6","messages":[{"role":"user","content":"hi"}],"tools":[` + f(chatFn, "a") + `],"tool_choice":"required"}`,
			code: "unsupported_tool_choice", param: "tool_choice", mentions: []string{`"required"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &fakeprovider.Provider{Strict: true}
			tester := startGateway(t, "\t\trule tools_plan {\n\t\t\t"+tc.rule+"\n\t\t}", serveUpstream(t, up))
			req, _ := http.NewRequest(http.MethodPost, gatewayURL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			resp := tester.AssertResponseCode(req, http.StatusBadRequest)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q", ct)
			}
			t.Logf("%s", body)
			assertErrorShape(t, body, tc.param, tc.code, tc.mentions...)
			if n := len(up.Requests()); n != 0 {
				t.Errorf("the upstream received %d requests, want none: %s", n, up.Requests())
			}
		})
	}
}

// assertErrorShape checks body is exactly the OpenAI error envelope
// {"error":{"message","type","param","code"}} with these values.
func assertErrorShape(t *testing.T, body []byte, param, code string, mentions ...string) {
	t.Helper()
	var env map[string]map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&env); err != nil || len(env) != 1 || env["error"] == nil {
		t.Fatalf("not an error envelope (%v): %s", err, body)
	}
	e := env["error"]
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	if len(e) != 4 || e["message"] == nil || e["type"] != "invalid_request_error" || e["param"] != param || e["code"] != code {
		t.Fatalf("error %s: want keys message, type, param, code with type invalid_request_error, param %q, code %q (have %q)", body, param, code, keys)
	}
	msg, _ := e["message"].(string)
	for _, m := range mentions {
		if !strings.Contains(msg, m) {
			t.Errorf("message %q does not mention %s", msg, m)
		}
	}
}

// TestToolsPlanRejectionThroughSDK: the openai-go client reads the
// gateway's 400 as an API error with every field set.
func TestToolsPlanRejectionThroughSDK(t *testing.T) {
	up := &fakeprovider.Provider{Strict: true}
	startGateway(t, "\t\trule tools_plan {\n\t\t\tprofile function_only\n\t\t\tmax_tools 1\n\t\t}", serveUpstream(t, up))
	client := sdkClient()
	_, err := client.Responses.New(context.Background(), namespaceParams(responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want an *openai.Error", err)
	}
	if apiErr.StatusCode != http.StatusBadRequest || apiErr.Type != "invalid_request_error" || apiErr.Code != "too_many_tools" ||
		apiErr.Param != "tools" || !strings.Contains(apiErr.Message, "at most 1") || !strings.Contains(apiErr.Message, "has 2") {
		t.Fatalf("error = %d %q %q %q %q", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Param, apiErr.Message)
	}
	if n := len(up.Requests()); n != 0 {
		t.Errorf("the upstream received %d requests, want none", n)
	}
}
