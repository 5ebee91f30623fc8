// Package integration runs a real Caddy in process (caddytest) with the
// llm_transform module in front of httptest upstreams. All tests share one
// Caddy instance, so none of them runs in parallel.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	_ "github.com/llmtransform/caddy-llm-transform" // the module as xcaddy builds it
	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

const (
	adminAddr  = "localhost:2999"
	gatewayURL = "http://127.0.0.1:9080"
)

// globalOptions keep the admin endpoint where caddytest expects it; every
// config loaded during the test binary's life must repeat them.
const globalOptions = `{
	skip_install_trust
	admin ` + adminAddr + `
	http_port 9080
	https_port 9443
	grace_period 1ns
}
`

// normalisedDemoPatch is what the demo upstream's sloppy patch must become.
const normalisedDemoPatch = "*** Begin Patch\n*** Add File: hello.txt\n+Hello from caddy-llm-transform\n*** End Patch\n"

func startGateway(t *testing.T, rules, upstream string) *caddytest.Tester {
	t.Helper()
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(globalOptions+`
:9080 {
	llm_transform {
`+rules+`
	}
	reverse_proxy `+upstream+`
}
`, "caddyfile")
	return tester
}

func strictUpstream(t *testing.T) (*fakeprovider.Provider, string) {
	t.Helper()
	demo := &fakeprovider.Provider{}
	srv := httptest.NewServer(demo)
	t.Cleanup(srv.Close)
	return demo, strings.TrimPrefix(srv.URL, "http://")
}

// sdkClient is the official SDK pointed at the gateway. Tests reload Caddy
// between them, which closes idle connections, so it never reuses one.
func sdkClient() openai.Client {
	return openai.NewClient(option.WithBaseURL(gatewayURL+"/v1/"), option.WithAPIKey("test-key"), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}))
}

func codexLikeParams() responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model: "gpt-5.5",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Create hello.txt")},
		Tools: []responses.ToolUnionParam{
			responses.ToolParamOfFunction("exec_command", map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}, false),
			responses.ToolParamOfCustom("apply_patch"),
		},
	}
}

// assertUpstreamSawFunctions checks the last request that reached the strict
// upstream carried no custom shapes (it would have answered 400 otherwise,
// but the assertion pins down what was sent).
func assertUpstreamSawFunctions(t *testing.T, demo *fakeprovider.Provider) {
	t.Helper()
	reqs := demo.Requests()
	if len(reqs) == 0 {
		t.Fatal("upstream received nothing")
	}
	last := gjson.ParseBytes(reqs[len(reqs)-1])
	for _, tool := range last.Get("tools").Array() {
		if tool.Get("type").String() != "function" {
			t.Fatalf("upstream saw a non-function tool: %s", tool.Raw)
		}
	}
	ap := last.Get(`tools.#(name=="apply_patch")`)
	if ap.Get("parameters.required.0").String() != "input" || ap.Get("strict").Raw != "false" {
		t.Fatalf("apply_patch definition: %s", ap.Raw)
	}
}

func TestResponsesNonStreamingWithSDK(t *testing.T) {
	demo, up := strictUpstream(t)
	startGateway(t, `		rule field_custom_tools_to_function {
			names apply_patch
		}`, up)
	client := sdkClient()
	resp, err := client.Responses.New(context.Background(), codexLikeParams())
	if err != nil {
		t.Fatal(err)
	}
	var calls []responses.ResponseCustomToolCall
	for _, item := range resp.Output {
		if item.Type == "custom_tool_call" {
			calls = append(calls, item.AsCustomToolCall())
		}
		if item.Type == "function_call" {
			t.Fatalf("client saw a function call: %s", item.RawJSON())
		}
	}
	if len(calls) != 1 || calls[0].Name != "apply_patch" || calls[0].Input != normalisedDemoPatch {
		t.Fatalf("custom calls = %+v", calls)
	}
	// The echoed tools are the client's, custom apply_patch included.
	if resp.Tools[1].Type != "custom" {
		t.Fatalf("echoed tools: %s", resp.RawJSON())
	}
	assertUpstreamSawFunctions(t, demo)
}

func TestResponsesStreamingWithSDK(t *testing.T) {
	demo, up := strictUpstream(t)
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(`{
	"admin": {"listen": "`+adminAddr+`"},
	"apps": {"http": {"http_port": 9080, "https_port": 9443, "grace_period": 1, "servers": {"gw": {
		"listen": [":9080"],
		"automatic_https": {"disable": true},
		"routes": [{"handle": [
			{"handler": "llm_transform", "rules": [{"transform": "field_custom_tools_to_function", "enabled": true, "config": {"names": ["*"]}}]},
			{"handler": "reverse_proxy", "upstreams": [{"dial": "`+up+`"}]}
		]}]
	}}}, "pki": {"certificate_authorities": {"local": {"install_trust": false}}}}
}`, "json")
	client := sdkClient()
	stream := client.Responses.NewStreaming(context.Background(), codexLikeParams())
	var deltas strings.Builder
	var doneItem responses.ResponseCustomToolCall
	var completed responses.Response
	var sawText bool
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			sawText = true
		case "response.custom_tool_call_input.delta":
			if !sawText {
				t.Fatal("custom input arrived before the text that precedes it")
			}
			deltas.WriteString(ev.AsResponseCustomToolCallInputDelta().Delta)
		case "response.function_call_arguments.delta":
			t.Fatal("client saw function-call argument deltas")
		case "response.output_item.done":
			if it := ev.AsResponseOutputItemDone().Item; it.Type == "custom_tool_call" {
				doneItem = it.AsCustomToolCall()
			}
		case "response.completed":
			completed = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if deltas.String() != normalisedDemoPatch {
		t.Fatalf("input deltas = %q", deltas.String())
	}
	if doneItem.Input != normalisedDemoPatch || doneItem.CallID == "" {
		t.Fatalf("output_item.done = %+v", doneItem)
	}
	var found bool
	for _, it := range completed.Output {
		if it.Type == "custom_tool_call" && it.AsCustomToolCall().Input == normalisedDemoPatch {
			found = true
		}
	}
	if !found {
		t.Fatalf("response.completed output: %s", completed.RawJSON())
	}
	assertUpstreamSawFunctions(t, demo)
}

// TestStreamIsFlushedPerEvent holds the upstream after its first text event
// until the client has read that event: a gateway that buffers deadlocks
// here and the test times out instead of passing.
func TestStreamIsFlushedPerEvent(t *testing.T) {
	received := make(chan struct{})
	// The sloppy patch, as the upstream's function arguments in an SSE data
	// line: JSON text inside a JSON string.
	args, _ := json.Marshal(map[string]string{"input": fakeprovider.DefaultPatch})
	argsJSON, _ := json.Marshal(string(args))
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		write := func(typ, data string) {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data)
			_ = rc.Flush()
		}
		write("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"r","output":[]}}`)
		write("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":1,"item_id":"m","output_index":0,"content_index":0,"delta":"first"}`)
		select {
		case <-received:
		case <-time.After(10 * time.Second):
			return
		}
		write("response.output_item.added", `{"type":"response.output_item.added","sequence_number":2,"output_index":1,"item":{"id":"fc_1","type":"function_call","arguments":"","call_id":"c","name":"apply_patch"}}`)
		write("response.output_item.done", `{"type":"response.output_item.done","sequence_number":3,"output_index":1,"item":{"id":"fc_1","type":"function_call","arguments":`+string(argsJSON)+`,"call_id":"c","name":"apply_patch"}}`)
		write("response.completed", `{"type":"response.completed","sequence_number":4,"response":{"id":"r","output":[]}}`)
	}))
	defer upstream.Close()
	tester := startGateway(t, `		rule field_custom_tools_to_function`, strings.TrimPrefix(upstream.URL, "http://"))

	req, _ := http.NewRequest(http.MethodPost, gatewayURL+"/v1/responses", strings.NewReader(`{"model":"m","stream":true,"tools":[{"type":"custom","name":"apply_patch"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := tester.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	deadline := time.AfterFunc(5*time.Second, func() { resp.Body.Close() })
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("first text event never arrived: %v", err)
		}
		if strings.Contains(line, `"delta":"first"`) {
			break
		}
	}
	deadline.Stop()
	close(received)
	rest, _ := io.ReadAll(br)
	// The rest holds exactly one item, the restored call, with the patch
	// normalised.
	var items []string
	for _, line := range strings.Split(string(rest), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || gjson.Get(data, "type").String() != "response.output_item.done" {
			continue
		}
		it := gjson.Get(data, "item")
		items = append(items, it.Get("type").String()+":"+it.Get("name").String()+":"+it.Get("input").String())
	}
	if want := "custom_tool_call:apply_patch:" + normalisedDemoPatch; len(items) != 1 || items[0] != want {
		t.Fatalf("output_item.done items %q, want [%q]\nrest of stream: %s", items, want, rest)
	}
}

func jsonConfig(up string, names ...string) string {
	n, _ := json.Marshal(names)
	return `{
	"admin": {"listen": "` + adminAddr + `"},
	"apps": {"http": {"http_port": 9080, "https_port": 9443, "grace_period": 1, "servers": {"gw": {
		"listen": [":9080"],
		"automatic_https": {"disable": true},
		"routes": [{"handle": [
			{"handler": "llm_transform", "@id": "llm_rules", "rules": [{"transform": "field_custom_tools_to_function", "config": {"names": ` + string(n) + `}}]},
			{"handler": "reverse_proxy", "upstreams": [{"dial": "` + up + `"}]}
		]}]
	}}}, "pki": {"certificate_authorities": {"local": {"install_trust": false}}}}
}`
}

func adminPost(t *testing.T, path, contentType, body string) {
	t.Helper()
	adminDo(t, http.MethodPost, path, contentType, body)
}

// adminDo sends an admin request and fails on anything but 200. Each
// successful load restarts Caddy's admin server; a request that races the
// old one's shutdown is refused at the transport level and sent again.
func adminDo(t *testing.T, method, path, contentType, body string) {
	t.Helper()
	var resp *http.Response
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		req, _ := http.NewRequest(method, "http://"+adminAddr+path, strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		if resp, err = http.DefaultClient.Do(req); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("admin %s: %d %s", path, resp.StatusCode, b)
	}
}

func TestHotReloadChangesConvertedTools(t *testing.T) {
	demo, up := strictUpstream(t)
	tester := caddytest.NewTester(t)
	// A reload closes the old server's idle connections; a POST on a kept-
	// alive one would fail in the client, so every request dials anew.
	tester.Client.Transport.(*http.Transport).DisableKeepAlives = true
	tester.InitServer(jsonConfig(up, "apply_patch"), "json")

	// The strict upstream refuses the first custom tool it finds, in its
	// error shape, which the gateway passes through; with none left, it
	// calls apply_patch, which comes back as the client's custom tool.
	rejected := func(param string) string {
		return `{"error":{"message":"unknown variant ` + "`custom`, expected `function`" + `","type":"invalid_request_error","param":"` + param + `","code":null}}` + "\n"
	}
	body := `{"model":"m","tools":[{"type":"custom","name":"apply_patch"},{"type":"custom","name":"exec"}]}`
	send := func(status int, want string) []string {
		t.Helper()
		if status != http.StatusOK {
			tester.AssertPostResponseBody(gatewayURL+"/v1/responses", []string{"Content-Type: application/json"}, bytes.NewBufferString(body), status, want)
		} else {
			req, _ := http.NewRequest(http.MethodPost, gatewayURL+"/v1/responses", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp := tester.AssertResponseCode(req, status)
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			call := gjson.GetBytes(got, `output.#(type=="custom_tool_call")`)
			if err != nil || call.Get("name").String() != "apply_patch" || call.Get("input").String() != normalisedDemoPatch {
				t.Fatalf("reply (%v): %s", err, got)
			}
		}
		reqs := demo.Requests()
		var types []string
		for _, tool := range gjson.ParseBytes(reqs[len(reqs)-1]).Get("tools").Array() {
			types = append(types, tool.Get("name").String()+":"+tool.Get("type").String())
		}
		return types
	}
	if got := strings.Join(send(http.StatusBadRequest, rejected("tools[1].type")), ","); got != "apply_patch:function,exec:custom" {
		t.Fatalf("before reload: %s", got)
	}
	adminPost(t, "/load", "application/json", jsonConfig(up, "*"))
	if got := strings.Join(send(http.StatusOK, ""), ","); got != "apply_patch:function,exec:function" {
		t.Fatalf("after POST /load: %s", got)
	}
	// A PATCH through the handler's @id swaps only its rules.
	adminDo(t, http.MethodPatch, "/id/llm_rules/rules", "application/json", `[{"transform":"field_custom_tools_to_function","config":{"names":["exec"]}}]`)
	if got := strings.Join(send(http.StatusBadRequest, rejected("tools[0].type")), ","); got != "apply_patch:custom,exec:function" {
		t.Fatalf("after PATCH: %s", got)
	}
}

func TestErrorsAndPassthrough(t *testing.T) {
	upstreamErr := `{"error":{"message":"rate limited","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(b), "trigger-429"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, upstreamErr)
		default:
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(b) // echo
		}
	}))
	defer upstream.Close()
	tester := caddytest.NewTester(t)
	tester.InitServer(globalOptions+`
:9080 {
	llm_transform {
		max_body_size 2KiB
		rule field_custom_tools_to_function {
			names *
		}
	}
	reverse_proxy `+strings.TrimPrefix(upstream.URL, "http://")+`
}
`, "caddyfile")
	post := func(path, body string, status int, want string) {
		t.Helper()
		tester.AssertPostResponseBody(gatewayURL+path, []string{"Content-Type: application/json"}, bytes.NewBufferString(body), status, want)
	}
	// Too large: 413 in the OpenAI error shape.
	post("/v1/responses", `{"model":"m","input":"`+strings.Repeat("x", 3000)+`"}`, 413,
		`{"error":{"message":"request body exceeds the gateway's max_body_size of 2048 bytes","type":"invalid_request_error","param":null,"code":"request_too_large"}}`)
	// Conflict: 400 before anything is forwarded.
	post("/v1/responses", `{"model":"m","tools":[{"type":"custom","name":"x"},{"type":"function","name":"x"}]}`, 400,
		`{"error":{"message":"custom tool \"x\" cannot be converted to a function: a native function with the same namespace and name is declared at tools[1]","type":"invalid_request_error","param":"tools[0]","code":"custom_tool_conflict"}}`)
	// Upstream errors pass through untouched, even for converted requests.
	post("/v1/responses", `{"model":"trigger-429","tools":[{"type":"custom","name":"x"}]}`, 429, upstreamErr)
	// Not JSON is refused before anything is forwarded; unknown paths
	// pass through byte for byte.
	post("/v1/responses", `{"model": not json`, 400,
		`{"error":{"message":"the request body is not JSON the gateway reads: invalid character 'o' in literal null (expecting 'u') at byte offset 11","type":"invalid_request_error","param":null,"code":"invalid_json"}}`)
	post("/v1/embeddings", `{"model":"m","tools":[{"type":"custom","name":"x"}]}`, 200, `{"model":"m","tools":[{"type":"custom","name":"x"}]}`)
}

func TestCaddyfileConfigErrors(t *testing.T) {
	for _, tc := range []struct{ rule, want string }{
		{"rule nope", `rule 0 (nope): unknown transform \"nope\"`},
		{"rule field_custom_tools_to_function {\n\t\t\tnmaes x\n\t\t}", `rule 0 (field_custom_tools_to_function): unrecognized option \"nmaes\"`},
		{"rule field_custom_tools_to_function {\n\t\t\tnames \"\"\n\t\t}", `rule 0 (field_custom_tools_to_function): provision llm_transform.transforms.field_custom_tools_to_function: names: empty tool name`},
		{"rule field_custom_tools_to_function sideways", `unknown phase \"sideways\"`},
	} {
		caddytest.AssertLoadError(t, globalOptions+`
:9080 {
	llm_transform {
		`+tc.rule+`
	}
	respond "x"
}
`, "caddyfile", tc.want)
	}
}

// TestLargeRewrittenRequestThroughReverseProxy: a 600 kB request whose
// history holds hundreds of custom calls goes upstream built as
// reverse_proxy's transport reads it. The strict upstream gets exactly the
// rewrite's bytes, under a Content-Length that matches them, and accepts it
// (it keeps the first MiB of each body, so the rewrite stays below that).
func TestLargeRewrittenRequestThroughReverseProxy(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-5.5","tools":[{"type":"custom","name":"apply_patch"}],"input":[`)
	for i := 0; b.Len() < 600<<10; i++ {
		fmt.Fprintf(&b, `{"type":"custom_tool_call","id":"ctc_%d","call_id":"call_%d","name":"apply_patch","input":"*** Begin Patch\n*** Update File: a.py\n@@\n-print(\"Hallo \\\"%d\\\"\")\n+print(\"Grüße — r\\\"C:\\\\temp\\\" 🦀\")\n*** End Patch\n"},`, i, i, i)
		fmt.Fprintf(&b, `{"type":"custom_tool_call_output","call_id":"call_%d","output":"Done!"},`, i)
	}
	b.WriteString(`{"type":"message","role":"user","content":"next"}]}`)
	body := b.String()

	demo, up := strictUpstream(t)
	tester := startGateway(t, "rule field_custom_tools_to_function {\n\tnames *\n}", up)
	resp, err := tester.Client.Post(gatewayURL+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, answer)
	}
	reqs := demo.Requests()
	if len(reqs) == 0 {
		t.Fatal("upstream received nothing")
	}
	got := reqs[len(reqs)-1]
	want := rewriteLocally(t, `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`, body)
	if !bytes.Equal(got, want) {
		t.Fatalf("upstream got %d bytes, the rewrite is %d", len(got), len(want))
	}
	if n := gjson.GetBytes(got, `input.#(type=="function_call")#`).Array(); len(n) < 500 || bytes.Contains(got, []byte(`"custom_tool_call`)) {
		t.Fatalf("%d function calls upstream; custom items left: %v", len(n), bytes.Contains(got, []byte(`"custom_tool_call`)))
	}
}

// rewriteLocally is what the rules make of a Responses request in this
// process, built whole: what the gateway's upstream must receive.
func rewriteLocally(t *testing.T, rulesJSON, body string) []byte {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	var cfgs []transforms.RuleConfig
	if err := json.Unmarshal([]byte(rulesJSON), &cfgs); err != nil {
		t.Fatal(err)
	}
	rules, err := transforms.Compile(ctx, cfgs, transforms.ScopeProvider, "")
	if err != nil {
		t.Fatal(err)
	}
	x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
	transforms.NewChain(rules).Begin(x, gjson.Get(body, "model").String())
	out, err := x.RewriteRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return out
}
