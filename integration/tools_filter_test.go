package integration

// tools_filter and tools_normalize_schema through a real Caddy: which tools
// each caller's upstream sees, a model without function calling served the
// real Codex request with a tool history, calls to undeclared tools
// counted and dropped in JSON and streams, and schemas a Gemini-strict
// upstream refuses made acceptable.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// codexRequestFixture is the sanitized turn-1 request of Codex 0.169 with
// gpt-5.5 (stream true, tool_choice auto, ten tools: functions, the custom
// apply_patch, tool_search and web_search).
const codexRequestFixture = "../transforms/transformtest/testdata/codex-request.json"

// filterPost sends body to the gateway with the given "Name: value"
// headers on a connection of its own and returns the status, headers and
// whole body.
func filterPost(t *testing.T, path, body string, headers ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, gatewayURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// toolNames lists the names of a request's tools in order, in either
// protocol's shape.
func toolNames(req gjson.Result) []string {
	var out []string
	for _, tool := range req.Get("tools").Array() {
		name := tool.Get("name")
		if !name.Exists() {
			name = tool.Get("function.name")
		}
		out = append(out, name.String())
	}
	return out
}

// fn is a Responses function tool; chatFn the same in the Chat shape.
func fn(name string) string {
	return `{"type":"function","name":"` + name + `","description":"` + name + ` tool","parameters":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}`
}

func chatFn(name string) string {
	return `{"type":"function","function":{"name":"` + name + `","description":"` + name + ` tool","parameters":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}}`
}

// perCallerRules give the research team web and lookup tools only, and
// everyone else everything but web tools. The second rule uses the
// Caddyfile's {header.*} shorthand for the same placeholder.
const perCallerRules = `		rule tools_filter {
			when {http.request.header.X-Team} == research
			allow web_* lookup_*
		}
		rule tools_filter {
			when {header.X-Team} != research
			deny web_*
		}`

// TestToolsFilterPerCaller: one route, two tools_filter rules with when
// conditions on a request header; the same request gets a different tool
// set upstream depending on the caller, in both protocols.
func TestToolsFilterPerCaller(t *testing.T) {
	up := &fakeprovider.Provider{Strict: true, CallArguments: `{"id":"42"}`, Tool: func(_, name string) bool { return name == "lookup_ticket" }}
	startGateway(t, perCallerRules, serveUpstream(t, up))

	responsesBody := `{"model":"gpt-5.5","input":"What is ticket 42 about?","tools":[` +
		fn("web_fetch") + `,` + fn("lookup_ticket") + `,` + fn("delete_file") + `],"tool_choice":"auto","parallel_tool_calls":true}`
	chatBody := `{"model":"gpt-5.5","messages":[{"role":"user","content":"What is ticket 42 about?"}],"tools":[` +
		chatFn("web_fetch") + `,` + chatFn("lookup_ticket") + `,` + chatFn("delete_file") + `],"tool_choice":"auto","parallel_tool_calls":true}`

	for _, tc := range []struct {
		name, path, body string
		headers          []string
		want             string
	}{
		{"responses research", "/v1/responses", responsesBody, []string{"X-Team: research"}, "web_fetch,lookup_ticket"},
		{"responses support", "/v1/responses", responsesBody, []string{"X-Team: support"}, "lookup_ticket,delete_file"},
		{"responses no header", "/v1/responses", responsesBody, nil, "lookup_ticket,delete_file"},
		// == compares exactly: another spelling is another team.
		{"responses Research", "/v1/responses", responsesBody, []string{"X-Team: Research"}, "lookup_ticket,delete_file"},
		{"chat research", "/v1/chat/completions", chatBody, []string{"X-Team: research"}, "web_fetch,lookup_ticket"},
		{"chat support", "/v1/chat/completions", chatBody, []string{"X-Team: support"}, "lookup_ticket,delete_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := filterPost(t, tc.path, tc.body, tc.headers...)
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			got := lastUpstream(t, up)
			if names := strings.Join(toolNames(got), ","); names != tc.want {
				t.Errorf("upstream tools %q, want %q", names, tc.want)
			}
			if got.Get("tool_choice").Raw != `"auto"` || got.Get("parallel_tool_calls").Raw != "true" {
				t.Errorf("tool_choice %s, parallel_tool_calls %s", got.Get("tool_choice").Raw, got.Get("parallel_tool_calls").Raw)
			}
			// The kept tools go as the client wrote them, byte for byte.
			client := gjson.Parse(tc.body)
			for _, tool := range got.Get("tools").Array() {
				var found bool
				for _, c := range client.Get("tools").Array() {
					found = found || c.Raw == tool.Raw
				}
				if !found {
					t.Errorf("upstream tool %s is not one the client sent", tool.Raw)
				}
			}
			// The upstream called lookup_ticket, which both callers have:
			// the client gets the call.
			call := gjson.GetBytes(body, `output.#(type=="function_call")`)
			if tc.path == "/v1/chat/completions" {
				call = gjson.GetBytes(body, "choices.0.message.tool_calls.0.function")
			}
			if call.Get("name").String() != "lookup_ticket" || call.Get("arguments").String() != `{"id":"42"}` {
				t.Errorf("client got %s", body)
			}
		})
	}

	// Research with only tools it may not have: nothing is left, and then
	// neither tools nor tool_choice nor parallel_tool_calls go upstream.
	t.Run("responses research, nothing left", func(t *testing.T) {
		body := `{"model":"gpt-5.5","input":"hi","tools":[` + fn("delete_file") + `],"tool_choice":"auto","parallel_tool_calls":false}`
		status, _, resp := filterPost(t, "/v1/responses", body, "X-Team: research")
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, resp)
		}
		got := lastUpstream(t, up)
		for _, m := range []string{"tools", "tool_choice", "parallel_tool_calls"} {
			if got.Get(m).Exists() {
				t.Errorf("upstream got %s: %s", m, got.Get(m).Raw)
			}
		}
		if got.Get("input").Raw != `"hi"` || got.Get("model").String() != "gpt-5.5" {
			t.Errorf("upstream body %s", got.Raw)
		}
	})

	// A tool_choice that forces a filtered tool is the gateway's 400, and
	// the upstream hears nothing.
	t.Run("support forcing web_fetch", func(t *testing.T) {
		n := len(up.Requests())
		body := `{"model":"gpt-5.5","input":"hi","tools":[` + fn("web_fetch") + `,` + fn("lookup_ticket") + `],"tool_choice":{"type":"function","name":"web_fetch"}}`
		status, _, resp := filterPost(t, "/v1/responses", body, "X-Team: support")
		if status != http.StatusBadRequest {
			t.Fatalf("status %d: %s", status, resp)
		}
		assertErrorShape(t, resp, "tool_choice", "tool_filtered", `"web_fetch"`, "denied")
		if len(up.Requests()) != n {
			t.Errorf("the upstream received the refused request")
		}
	})
}

// History items appended to the Codex fixture: a function call, a custom
// apply_patch call whose input has quotes, backslashes and non-ASCII text,
// and a local_shell call, each with its output, after a reasoning item,
// then the user's next message.
const (
	histPatch       = "*** Begin Patch\n*** Add File: grüße.txt\n+say \"hi\" \\ C:\\temp\\ — 日本語 ✓\n*** End Patch\n"
	histShellAction = `{"type":"exec","command":["cat","grüße.txt"],"env":{"LANG":"C.UTF-8"},"timeout_ms":1000,"working_directory":"/tmp/w"}`
	histShellOutput = `{"output":"say \"hi\" \\ C:\\temp\\ — 日本語 ✓\n","metadata":{"exit_code":0}}`
)

func codexHistoryItems() []string {
	return []string{
		`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAAAABpZ0notreallyencrypted"}`,
		`{"type":"function_call","id":"fc_1","call_id":"call_exec_1","name":"exec_command","arguments":"{\"cmd\":\"ls -a\"}"}`,
		`{"type":"function_call_output","call_id":"call_exec_1","output":".\n..\nREADME.md"}`,
		`{"type":"custom_tool_call","id":"ctc_1","call_id":"call_patch_1","name":"apply_patch","input":` + jsonString(histPatch) + `}`,
		`{"type":"custom_tool_call_output","call_id":"call_patch_1","output":"Success. Updated the following files:\nA grüße.txt\n"}`,
		`{"type":"local_shell_call","id":"lsh_1","call_id":"call_shell_1","status":"completed","action":` + histShellAction + `}`,
		// A local_shell_call_output names its call by "id" (the call's
		// call_id, in the API's words "the unique ID of the local shell
		// tool call generated by the model"); it has no call_id.
		`{"type":"local_shell_call_output","id":"call_shell_1","output":` + jsonString(histShellOutput) + `}`,
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"Thanks. Now say bye."}]}`,
	}
}

// codexWithHistory is the Codex fixture, its bytes kept, with items added
// at the end of its input.
func codexWithHistory(t *testing.T, items []string) []byte {
	t.Helper()
	b, err := os.ReadFile(codexRequestFixture)
	if err != nil {
		t.Fatal(err)
	}
	input := gjson.GetBytes(b, "input")
	if !input.IsArray() || input.Index == 0 {
		t.Fatalf("fixture input: %.200s", input.Raw)
	}
	raw := strings.TrimRight(strings.TrimSuffix(input.Raw, "]"), " \n\t")
	spliced := raw + ",\n  " + strings.Join(items, ",\n  ") + "\n ]"
	out := append(bytes.Clone(b[:input.Index]), spliced...)
	return append(out, b[input.Index+len(input.Raw):]...)
}

// withoutMembers drops top-level members (key order is not kept).
func withoutMembers(t *testing.T, body []byte, keys ...string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		delete(m, k)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// streamOff sets the fixture's "stream": true to false.
func streamOff(t *testing.T, body []byte) []byte {
	t.Helper()
	if bytes.Count(body, []byte(`"stream": true`)) != 1 {
		t.Fatal(`the fixture no longer says "stream": true once`)
	}
	return bytes.Replace(body, []byte(`"stream": true`), []byte(`"stream": false`), 1)
}

// directAnswer is what the provider answers to body when asked without a
// gateway in between.
func directAnswer(p *fakeprovider.Provider, path string, body []byte) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	return rec
}

// filterChatHistory is a Chat conversation with two parallel calls, their
// answers and a follow-up, offering tools with tool_choice auto.
const filterChatHistory = `{"model":"llama3.2-notools","messages":[` +
	`{"role":"system","content":"You are terse."},` +
	`{"role":"user","content":"What is ticket 42, and who has it?"},` +
	`{"role":"assistant","content":null,"tool_calls":[` +
	`{"id":"call_t1","type":"function","function":{"name":"lookup_ticket","arguments":"{\"id\":\"42\"}"}},` +
	`{"id":"call_t2","type":"function","function":{"name":"lookup_user","arguments":"{\"id\":\"ana\"}"}}]},` +
	`{"role":"tool","tool_call_id":"call_t1","content":"Ticket 42: printer \"on fire\" \\ again"},` +
	`{"role":"tool","tool_call_id":"call_t2","content":"Ana Müller — on call"},` +
	`{"role":"user","content":"Summarise."}],` +
	`"tools":[` + `{"type":"function","function":{"name":"lookup_ticket","parameters":{"type":"object"}}},{"type":"function","function":{"name":"lookup_user","parameters":{"type":"object"}}}` + `],` +
	`"tool_choice":"auto"`

// TestToolsFilterFunctionCallingOff: `function_calling off` in front of a
// model without function calling. The real Codex request with a tool
// history, and a Chat conversation with tool calls, are accepted: the
// upstream gets no tool member and the history as plain messages. Without
// the rule the same upstream refuses both, and its 400 reaches the client
// untouched.
func TestToolsFilterFunctionCallingOff(t *testing.T) {
	up := &fakeprovider.Provider{NoTools: true}
	addr := serveUpstream(t, up)
	startGateway(t, `		rule tools_filter {
			function_calling off
		}`, addr)
	client := sdkClient()
	codex := codexWithHistory(t, codexHistoryItems())
	const codexAnswer = "I cannot call tools, so here is plain text: I read 11 input messages."

	t.Run("codex responses stream", func(t *testing.T) {
		stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{}, option.WithRequestBody("application/json", codex))
		defer stream.Close()
		var acc responses.ResponseAccumulator
		var completed responses.Response
		for stream.Next() {
			ev := stream.Current()
			var se responses.ResponsesServerEventUnion
			if err := json.Unmarshal([]byte(ev.RawJSON()), &se); err != nil {
				t.Fatalf("event does not decode: %v\n%s", err, ev.RawJSON())
			}
			if err := acc.AddEvent(se); err != nil {
				t.Fatalf("the SDK accumulator refused %s: %v", ev.RawJSON(), err)
			}
			if ev.Type == "response.completed" {
				completed = ev.AsResponseCompleted().Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Snapshot().OutputText(); got != codexAnswer {
			t.Errorf("accumulated text %q", got)
		}
		if completed.OutputText() != codexAnswer || completed.Status != "completed" {
			t.Errorf("response.completed: %s", completed.RawJSON())
		}
		assertToolFreeCodex(t, codex, lastUpstream(t, up))
	})

	t.Run("codex responses JSON", func(t *testing.T) {
		body := streamOff(t, codex)
		resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{}, option.WithRequestBody("application/json", body))
		if err != nil {
			t.Fatal(err)
		}
		if resp.OutputText() != codexAnswer || resp.Status != "completed" {
			t.Errorf("response: %s", resp.RawJSON())
		}
		assertToolFreeCodex(t, body, lastUpstream(t, up))
	})

	const chatAnswer = "I cannot call tools, so here is plain text: I read 5 input messages."
	t.Run("chat JSON", func(t *testing.T) {
		resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{},
			option.WithRequestBody("application/json", []byte(filterChatHistory+`}`)))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 || resp.Choices[0].Message.Content != chatAnswer || resp.Choices[0].FinishReason != "stop" {
			t.Errorf("completion: %s", resp.RawJSON())
		}
		assertToolFreeChat(t, lastUpstream(t, up))
	})

	t.Run("chat stream", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{},
			option.WithRequestBody("application/json", []byte(filterChatHistory+`,"stream":true,"stream_options":{"include_usage":true}}`)))
		defer stream.Close()
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			if !acc.AddChunk(stream.Current()) {
				t.Fatalf("the SDK accumulator refused %s", stream.Current().RawJSON())
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != chatAnswer || acc.Choices[0].FinishReason != "stop" || len(acc.Choices[0].Message.ToolCalls) != 0 {
			t.Errorf("accumulated: %+v", acc.Choices)
		}
		got := lastUpstream(t, up)
		if got.Get("stream").Raw != "true" || got.Get("stream_options").Raw != `{"include_usage":true}` {
			t.Errorf("stream members: %s", got.Raw)
		}
		assertToolFreeChat(t, got)
	})

	// Without the rule: the upstream's own 400, byte for byte.
	startGateway(t, `		rule field_set {
			path metadata.gateway
			value on
		}`, addr)
	refused := &fakeprovider.Provider{NoTools: true}
	for _, tc := range []struct {
		name, path string
		body       []byte
		mentions   string
	}{
		{"codex responses", "/v1/responses", codex, "request member 'tools'"},
		{"codex responses JSON", "/v1/responses", streamOff(t, codex), "request member 'tools'"},
		// Without the tool members, the history alone gives the tools away.
		{"codex history only", "/v1/responses", withoutMembers(t, codex, "tools", "tool_choice", "parallel_tool_calls"), "input[5] is a 'function_call' item"},
		{"chat", "/v1/chat/completions", []byte(filterChatHistory + `}`), "request member 'tools'"},
		{"chat stream", "/v1/chat/completions", []byte(filterChatHistory + `,"stream":true}`), "request member 'tools'"},
		{"chat history only", "/v1/chat/completions", withoutMembers(t, []byte(filterChatHistory+`}`), "tools", "tool_choice"), "messages[2] carries 'tool_calls'"},
	} {
		t.Run("without the rule/"+tc.name, func(t *testing.T) {
			// field_set adds a member, so the body differs from the
			// client's only there, and the refusal cannot depend on it.
			want := directAnswer(refused, tc.path, tc.body)
			if want.Code != http.StatusBadRequest || !strings.Contains(want.Body.String(), tc.mentions) {
				t.Fatalf("the provider itself answers %d %s", want.Code, want.Body)
			}
			status, hdr, got := filterPost(t, tc.path, string(tc.body))
			if status != want.Code || !bytes.Equal(got, want.Body.Bytes()) || hdr.Get("Content-Type") != "application/json" {
				t.Errorf("through the gateway %d %s %s, want %d %s", status, hdr.Get("Content-Type"), got, want.Code, want.Body)
			}
			if lastUpstream(t, up).Get("metadata.gateway").String() != "on" {
				t.Errorf("the request did not go through the gateway's rules")
			}
		})
	}
}

// assertToolFreeCodex checks what the no-tools upstream got for the Codex
// request with history: no tool member, the fixture's messages and
// reasoning item as they were, each call and each output retold as one
// message, and every other member unchanged.
func assertToolFreeCodex(t *testing.T, sent []byte, got gjson.Result) {
	t.Helper()
	client := gjson.ParseBytes(sent)
	for _, m := range []string{"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"} {
		if got.Get(m).Exists() {
			t.Errorf("upstream got %s", m)
		}
	}
	for _, m := range []string{"model", "stream", "reasoning", "store", "include", "prompt_cache_key", "text"} {
		if got.Get(m).Raw != client.Get(m).Raw {
			t.Errorf("%s: upstream got %s, client sent %s", m, got.Get(m).Raw, client.Get(m).Raw)
		}
	}
	in, sentIn := got.Get("input").Array(), client.Get("input").Array()
	var shape []string
	for _, it := range in {
		shape = append(shape, it.Get("type").String()+":"+it.Get("role").String())
	}
	wantShape := []string{"message:developer", "message:developer", "message:user", "message:user", "reasoning:",
		"message:assistant", "message:user", "message:assistant", "message:user", "message:assistant", "message:user", "message:user"}
	if !slices.Equal(shape, wantShape) {
		t.Fatalf("upstream input\n got %q\nwant %q", shape, wantShape)
	}
	// Untouched items keep their bytes.
	for _, i := range []int{0, 1, 2, 3, 4} {
		if in[i].Raw != sentIn[i].Raw {
			t.Errorf("input[%d] changed: %s", i, in[i].Raw)
		}
	}
	if in[11].Raw != sentIn[len(sentIn)-1].Raw {
		t.Errorf("the last message changed: %s", in[11].Raw)
	}
	want := []string{
		"Called tool `exec_command` (call call_exec_1) with:\n{\"cmd\":\"ls -a\"}",
		"Output of tool `exec_command` (call call_exec_1):\n.\n..\nREADME.md",
		"Called tool `apply_patch` (call call_patch_1) with:\n" + histPatch,
		"Output of tool `apply_patch` (call call_patch_1):\nSuccess. Updated the following files:\nA grüße.txt\n",
		"Called tool `local_shell` (call call_shell_1) with:\n" + histShellAction,
		"Output of tool `local_shell` (call call_shell_1):\n" + histShellOutput,
	}
	for k, w := range want {
		it := in[5+k]
		if c := it.Get("content"); c.Type != gjson.String || c.String() != w {
			t.Errorf("input[%d] content\n got %s\nwant %q", 5+k, c.Raw, w)
		}
		if n := len(it.Map()); n != 3 {
			t.Errorf("input[%d] has %d members: %s", 5+k, n, it.Raw)
		}
	}
}

// assertToolFreeChat checks what the no-tools upstream got for
// filterChatHistory.
func assertToolFreeChat(t *testing.T, got gjson.Result) {
	t.Helper()
	for _, m := range []string{"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"} {
		if got.Get(m).Exists() {
			t.Errorf("upstream got %s", m)
		}
	}
	msgs := got.Get("messages").Array()
	sent := gjson.Get(filterChatHistory+`}`, "messages").Array()
	want := []string{
		sent[0].Raw,
		sent[1].Raw,
		`{"role":"assistant","content":` + jsonString("Called tool `lookup_ticket` (call call_t1) with:\n{\"id\":\"42\"}\n\nCalled tool `lookup_user` (call call_t2) with:\n{\"id\":\"ana\"}") + `}`,
		`{"role":"user","content":` + jsonString("Output of tool `lookup_ticket` (call call_t1):\nTicket 42: printer \"on fire\" \\ again\n\nOutput of tool `lookup_user` (call call_t2):\nAna Müller — on call") + `}`,
		sent[5].Raw,
	}
	var gotRaw []string
	for _, m := range msgs {
		gotRaw = append(gotRaw, m.Raw)
	}
	if len(gotRaw) != len(want) {
		t.Fatalf("upstream messages\n got %s\nwant %s", strings.Join(gotRaw, "\n     "), strings.Join(want, "\n     "))
	}
	for i := range want {
		var g, w any
		if json.Unmarshal([]byte(gotRaw[i]), &g) != nil || json.Unmarshal([]byte(want[i]), &w) != nil || mustJSONText(g) != mustJSONText(w) {
			t.Errorf("messages[%d]\n got %s\nwant %s", i, gotRaw[i], want[i])
		}
	}
}

func mustJSONText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Metrics of tools_filter's response phase, as the admin endpoint shows
// them.
const (
	mUndeclared = `caddy_llm_transform_unexpected_calls_total{reason="undeclared"}`
	mFiltered   = `caddy_llm_transform_unexpected_calls_total{reason="filtered"}`
	mDropped    = `caddy_llm_transform_dropped_calls_total`
)

// scrapeLLM reads the llm_transform series from Caddy's admin /metrics.
func scrapeLLM(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + adminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "caddy_llm_transform_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// assertGrowth checks each series grew by exactly the given amount since
// before. A request's metrics are recorded when its handler returns, which
// a client that stops at the end of a JSON body or at [DONE] may not wait
// for; the scrape is repeated until the counts are reached (or passed),
// within a few seconds.
func assertGrowth(t *testing.T, before map[string]float64, want map[string]float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := scrapeLLM(t)
		reached := true
		for k, d := range want {
			reached = reached && after[k]-before[k] >= d
		}
		if reached || time.Now().After(deadline) {
			for k, d := range want {
				if got := after[k] - before[k]; got != d {
					t.Errorf("%s grew by %v, want %v", k, got, d)
				}
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// undeclaredReply answers every request with two calls, first to
// wipe_disk, which the clients here never declare, then to lookup_ticket,
// after some text: JSON or streamed, Responses or Chat.
func undeclaredReply(w http.ResponseWriter, req gjson.Result) {
	const (
		wipeArgs   = `{"all":true}`
		lookupArgs = `{"id":"42"}`
	)
	model := req.Get("model").String()
	if req.Get("messages").Exists() {
		call := func(id, name, args string) string {
			return `{"id":"` + id + `","type":"function","function":{"name":"` + name + `","arguments":` + jsonString(args) + `}}`
		}
		if !req.Get("stream").Bool() {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"chatcmpl-u","object":"chat.completion","created":1,"model":`+jsonString(model)+`,"choices":[{"index":0,"message":{"role":"assistant","content":"Let me check.","refusal":null,"annotations":[],"tool_calls":[`+
				call("call_wipe", "wipe_disk", wipeArgs)+`,`+call("call_lookup", "lookup_ticket", lookupArgs)+`]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":9,"completion_tokens":9,"total_tokens":18}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta, finish string) {
			fmt.Fprint(w, `data: {"id":"chatcmpl-u","object":"chat.completion.chunk","created":1,"model":`+jsonString(model)+`,"choices":[{"index":0,"delta":`+delta+`,"logprobs":null,"finish_reason":`+finish+`}]}`+"\n\n")
		}
		chunk(`{"role":"assistant","content":"Let me check."}`, "null")
		chunk(`{"tool_calls":[{"index":0,"id":"call_wipe","type":"function","function":{"name":"wipe_disk","arguments":""}}]}`, "null")
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+jsonString(wipeArgs[:5])+`}}]}`, "null")
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+jsonString(wipeArgs[5:])+`}}]}`, "null")
		chunk(`{"tool_calls":[{"index":1,"id":"call_lookup","type":"function","function":{"name":"lookup_ticket","arguments":""}}]}`, "null")
		chunk(`{"tool_calls":[{"index":1,"function":{"arguments":`+jsonString(lookupArgs)+`}}]}`, "null")
		chunk(`{}`, `"tool_calls"`)
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	msg := func(status, text string) string {
		content := `[]`
		if status == "completed" {
			content = `[{"type":"output_text","annotations":[],"logprobs":[],"text":` + jsonString(text) + `}]`
		}
		return `{"id":"msg_u","type":"message","status":"` + status + `","content":` + content + `,"role":"assistant"}`
	}
	fc := func(id, callID, name, status, args string) string {
		return `{"id":"` + id + `","type":"function_call","status":"` + status + `","arguments":` + jsonString(args) + `,"call_id":"` + callID + `","name":"` + name + `"}`
	}
	response := func(status, output string) string {
		return `{"id":"resp_u","object":"response","created_at":1,"status":"` + status + `","error":null,"incomplete_details":null,"model":` + jsonString(model) +
			`,"output":` + output + `,"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"usage":null}`
	}
	full := `[` + msg("completed", "Let me check.") + `,` + fc("fc_wipe", "call_wipe", "wipe_disk", "completed", wipeArgs) + `,` + fc("fc_lookup", "call_lookup", "lookup_ticket", "completed", lookupArgs) + `]`
	if !req.Get("stream").Bool() {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, response("completed", full))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	event := func(typ, fields string) {
		fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, fields)
		seq++
	}
	event("response.created", `"response":`+response("in_progress", "[]"))
	event("response.output_item.added", `"output_index":0,"item":`+msg("in_progress", ""))
	event("response.content_part.added", `"item_id":"msg_u","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`)
	event("response.output_text.delta", `"item_id":"msg_u","output_index":0,"content_index":0,"delta":"Let me check.","logprobs":[]`)
	event("response.output_text.done", `"item_id":"msg_u","output_index":0,"content_index":0,"text":"Let me check.","logprobs":[]`)
	event("response.content_part.done", `"item_id":"msg_u","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"Let me check."}`)
	event("response.output_item.done", `"output_index":0,"item":`+msg("completed", "Let me check."))
	for i, c := range []struct{ id, callID, name, args string }{
		{"fc_wipe", "call_wipe", "wipe_disk", wipeArgs},
		{"fc_lookup", "call_lookup", "lookup_ticket", lookupArgs},
	} {
		oi := strconv.Itoa(i + 1)
		event("response.output_item.added", `"output_index":`+oi+`,"item":`+fc(c.id, c.callID, c.name, "in_progress", ""))
		event("response.function_call_arguments.delta", `"item_id":"`+c.id+`","output_index":`+oi+`,"delta":`+jsonString(c.args))
		event("response.function_call_arguments.done", `"item_id":"`+c.id+`","output_index":`+oi+`,"name":"`+c.name+`","arguments":`+jsonString(c.args))
		event("response.output_item.done", `"output_index":`+oi+`,"item":`+fc(c.id, c.callID, c.name, "completed", c.args))
	}
	event("response.completed", `"response":`+response("completed", full))
}

// undeclaredResponsesParams and undeclaredChatParams declare lookup_ticket
// only.
func undeclaredResponsesParams() responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model: "gpt-5.5",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is ticket 42 about?")},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("lookup_ticket",
			map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}, "required": []string{"id"}}, false)},
	}
}

func undeclaredChatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "gpt-5.5",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is ticket 42 about?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name:       "lookup_ticket",
			Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}, "required": []string{"id"}},
		})},
	}
}

// callsSeen is what runUndeclared's four requests showed the client: per
// request the calls as "index:name:arguments" (Chat: with the call id),
// the output indexes and tool call indexes the streams carried, the
// Responses stream's sequence numbers and the Chat finish reasons.
type callsSeen struct {
	responsesJSON, responsesStream, chatJSON, chatStream []string
	streamIndexes, chatIndexes, sequence                 []int64
	chatFinish, chatStreamFinish                         string
}

// runUndeclared sends the four requests with the SDK, streams through its
// accumulators.

func runUndeclared(t *testing.T) callsSeen {
	t.Helper()
	client := sdkClient()
	ctx := context.Background()
	var seen callsSeen

	resp, err := client.Responses.New(ctx, undeclaredResponsesParams())
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range resp.Output {
		if it.Type == "function_call" {
			c := it.AsFunctionCall()
			seen.responsesJSON = append(seen.responsesJSON, fmt.Sprintf("%d:%s:%s", i, c.Name, c.Arguments))
		}
	}
	if resp.OutputText() != "Let me check." {
		t.Errorf("responses JSON text: %s", resp.RawJSON())
	}

	stream := client.Responses.NewStreaming(ctx, undeclaredResponsesParams())
	var acc responses.ResponseAccumulator
	for stream.Next() {
		ev := stream.Current()
		seen.sequence = append(seen.sequence, gjson.Get(ev.RawJSON(), "sequence_number").Int())
		if oi := gjson.Get(ev.RawJSON(), "output_index"); oi.Exists() && !slices.Contains(seen.streamIndexes, oi.Int()) {
			seen.streamIndexes = append(seen.streamIndexes, oi.Int())
		}
		var se responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(ev.RawJSON()), &se); err != nil {
			t.Fatalf("event does not decode: %v\n%s", err, ev.RawJSON())
		}
		if err := acc.AddEvent(se); err != nil {
			t.Fatalf("the SDK accumulator refused %s: %v", ev.RawJSON(), err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	stream.Close()
	snap := acc.Snapshot()
	if snap.TerminalEvent != "response.completed" || snap.OutputText() != "Let me check." {
		t.Errorf("responses stream: terminal %q text %q", snap.TerminalEvent, snap.OutputText())
	}
	for _, o := range snap.Output {
		if o.Type == "function_call" {
			seen.responsesStream = append(seen.responsesStream, fmt.Sprintf("%d:%s:%s", o.OutputIndex, o.Name, o.Arguments))
		}
	}
	// The completed response the accumulator rebuilds says the same.
	final, err := acc.ReconstructedResponse()
	if err != nil {
		t.Fatal(err)
	}
	var finalCalls []string
	for i, it := range final.Output {
		if it.Type == "function_call" {
			finalCalls = append(finalCalls, fmt.Sprintf("%d:%s:%s", i, it.AsFunctionCall().Name, it.AsFunctionCall().Arguments))
		}
	}
	if !slices.Equal(finalCalls, seen.responsesStream) {
		t.Errorf("response.completed calls %q, stream items %q", finalCalls, seen.responsesStream)
	}

	comp, err := client.Chat.Completions.New(ctx, undeclaredChatParams())
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range comp.Choices[0].Message.ToolCalls {
		seen.chatJSON = append(seen.chatJSON, fmt.Sprintf("%d:%s:%s:%s", i, c.ID, c.Function.Name, c.Function.Arguments))
	}
	seen.chatFinish = comp.Choices[0].FinishReason

	cs := client.Chat.Completions.NewStreaming(ctx, undeclaredChatParams())
	var cacc openai.ChatCompletionAccumulator
	for cs.Next() {
		ch := cs.Current()
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				if !slices.Contains(seen.chatIndexes, tc.Index) {
					seen.chatIndexes = append(seen.chatIndexes, tc.Index)
				}
			}
		}
		if !cacc.AddChunk(ch) {
			t.Fatalf("the SDK accumulator refused %s", ch.RawJSON())
		}
	}
	if err := cs.Err(); err != nil {
		t.Fatal(err)
	}
	cs.Close()
	for i, c := range cacc.Choices[0].Message.ToolCalls {
		seen.chatStream = append(seen.chatStream, fmt.Sprintf("%d:%s:%s:%s", i, c.ID, c.Function.Name, c.Function.Arguments))
	}
	seen.chatStreamFinish = cacc.Choices[0].FinishReason
	if cacc.Choices[0].Message.Content != "Let me check." {
		t.Errorf("chat stream content %q", cacc.Choices[0].Message.Content)
	}
	return seen
}

// dense is 0, 1, …, n-1.
func dense(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

// TestToolsFilterUndeclaredCalls: an upstream that calls a tool the client
// never declared next to one it did. Without drop_undeclared_calls the
// call reaches the client and is counted; with it, the openai-go clients
// and their stream accumulators see only the declared call, at dense
// indexes, in JSON and streams of both protocols.
func TestToolsFilterUndeclaredCalls(t *testing.T) {
	up := &fakeprovider.Provider{Strict: true, Reply: undeclaredReply}
	addr := serveUpstream(t, up)

	t.Run("counted", func(t *testing.T) {
		startGateway(t, `		rule tools_filter`, addr)
		before := scrapeLLM(t)
		seen := runUndeclared(t)
		both := []string{"1:wipe_disk:{\"all\":true}", "2:lookup_ticket:{\"id\":\"42\"}"}
		chatBoth := []string{"0:call_wipe:wipe_disk:{\"all\":true}", "1:call_lookup:lookup_ticket:{\"id\":\"42\"}"}
		if !slices.Equal(seen.responsesJSON, both) || !slices.Equal(seen.responsesStream, both) {
			t.Errorf("responses calls: JSON %q stream %q, want %q", seen.responsesJSON, seen.responsesStream, both)
		}
		if !slices.Equal(seen.chatJSON, chatBoth) || !slices.Equal(seen.chatStream, chatBoth) || seen.chatFinish != "tool_calls" || seen.chatStreamFinish != "tool_calls" {
			t.Errorf("chat calls: JSON %q (%s) stream %q (%s), want %q", seen.chatJSON, seen.chatFinish, seen.chatStream, seen.chatStreamFinish, chatBoth)
		}
		if !slices.Equal(seen.streamIndexes, []int64{0, 1, 2}) || !slices.Equal(seen.chatIndexes, []int64{0, 1}) {
			t.Errorf("stream indexes: responses %v chat %v", seen.streamIndexes, seen.chatIndexes)
		}
		if !slices.Equal(seen.sequence, dense(16)) {
			t.Errorf("sequence numbers %v", seen.sequence)
		}
		assertGrowth(t, before, map[string]float64{mUndeclared: 4, mFiltered: 0, mDropped: 0})
	})

	t.Run("dropped", func(t *testing.T) {
		startGateway(t, `		rule tools_filter {
			deny delete_*
			drop_undeclared_calls
		}`, addr)
		before := scrapeLLM(t)
		seen := runUndeclared(t)
		one := []string{"1:lookup_ticket:{\"id\":\"42\"}"}
		chatOne := []string{"0:call_lookup:lookup_ticket:{\"id\":\"42\"}"}
		if !slices.Equal(seen.responsesJSON, one) || !slices.Equal(seen.responsesStream, one) {
			t.Errorf("responses calls: JSON %q stream %q, want %q", seen.responsesJSON, seen.responsesStream, one)
		}
		if !slices.Equal(seen.chatJSON, chatOne) || !slices.Equal(seen.chatStream, chatOne) || seen.chatFinish != "tool_calls" || seen.chatStreamFinish != "tool_calls" {
			t.Errorf("chat calls: JSON %q (%s) stream %q (%s), want %q", seen.chatJSON, seen.chatFinish, seen.chatStream, seen.chatStreamFinish, chatOne)
		}
		// No event names an index beyond the items the client has.
		if !slices.Equal(seen.streamIndexes, []int64{0, 1}) || !slices.Equal(seen.chatIndexes, []int64{0}) {
			t.Errorf("stream indexes: responses %v chat %v", seen.streamIndexes, seen.chatIndexes)
		}
		// The wipe_disk call's four events are gone, and the sequence
		// numbers have no gap where they were.
		if !slices.Equal(seen.sequence, dense(12)) {
			t.Errorf("sequence numbers %v", seen.sequence)
		}

		// A tool the rule filtered is counted as filtered, and dropped.
		status, _, body := filterPost(t, "/v1/responses", `{"model":"gpt-5.5","input":"hi","tools":[`+fn("delete_file")+`,`+fn("lookup_ticket")+`,`+fn("wipe_disk")+`]}`)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		if got := strings.Join(toolNames(lastUpstream(t, up)), ","); got != "lookup_ticket,wipe_disk" {
			t.Errorf("upstream tools %q", got)
		}
		var calls []string
		for _, it := range gjson.GetBytes(body, "output").Array() {
			calls = append(calls, it.Get("type").String()+":"+it.Get("name").String())
		}
		if got := strings.Join(calls, ","); got != "message:,function_call:wipe_disk,function_call:lookup_ticket" {
			t.Errorf("declared calls both pass: %s", got)
		}

		// Every call of a Chat answer dropped: it is an answer, not a
		// tool turn.
		status, _, body = filterPost(t, "/v1/chat/completions", `{"model":"gpt-5.5","messages":[{"role":"user","content":"hi"}],"tools":[`+chatFn("search_docs")+`]}`)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		msg := gjson.GetBytes(body, "choices.0")
		if msg.Get("message.tool_calls").Exists() || msg.Get("finish_reason").String() != "stop" || msg.Get("message.content").String() != "Let me check." {
			t.Errorf("chat answer with every call dropped: %s", body)
		}
		status, _, body = filterPost(t, "/v1/chat/completions", `{"model":"gpt-5.5","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[`+chatFn("search_docs")+`]}`)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		var finishes []string
		for _, ev := range parseEvents(t, string(body)) {
			if ev.data == "[DONE]" {
				continue
			}
			for _, c := range gjson.Get(ev.data, "choices").Array() {
				if c.Get("delta.tool_calls.0").Exists() {
					t.Errorf("a dropped call's fragment reached the client: %s", ev.data)
				}
				if f := c.Get("finish_reason"); f.Type == gjson.String {
					finishes = append(finishes, f.String())
				}
			}
		}
		if !slices.Equal(finishes, []string{"stop"}) {
			t.Errorf("finish reasons %q", finishes)
		}
		// 4 + the Chat JSON and stream with two each; the delete_file
		// call is not made.
		assertGrowth(t, before, map[string]float64{mUndeclared: 8, mFiltered: 0, mDropped: 8})
	})

	t.Run("filtered", func(t *testing.T) {
		startGateway(t, `		rule tools_filter {
			deny wipe_*
			drop_undeclared_calls
		}`, addr)
		before := scrapeLLM(t)
		status, _, body := filterPost(t, "/v1/responses", `{"model":"gpt-5.5","input":"hi","tools":[`+fn("lookup_ticket")+`,`+fn("wipe_disk")+`]}`)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		if got := strings.Join(toolNames(lastUpstream(t, up)), ","); got != "lookup_ticket" {
			t.Errorf("upstream tools %q", got)
		}
		var items []string
		for _, it := range gjson.GetBytes(body, "output").Array() {
			items = append(items, it.Get("type").String()+":"+it.Get("name").String())
		}
		if got := strings.Join(items, ","); got != "message:,function_call:lookup_ticket" {
			t.Errorf("client output %s", got)
		}
		assertGrowth(t, before, map[string]float64{mUndeclared: 0, mFiltered: 1, mDropped: 1})
	})
}

// geminiUpstream refuses, as Gemini does, a request with any function
// whose parameters break Gemini's Schema (fakeprovider.CheckToolSchema
// with the gemini dialect), in Gemini's error shape with every finding;
// the rest goes to next.
type geminiUpstream struct {
	next *fakeprovider.Provider

	mu       sync.Mutex
	refusals [][]byte // bodies of the 400s it wrote
}

func (g *geminiUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var findings []string
	index := 0
	for _, tool := range gjson.GetBytes(body, "tools").Array() {
		def := tool
		if tool.Get("function").IsObject() {
			def = tool.Get("function") // Chat
		}
		if tool.Get("type").String() != "function" {
			continue
		}
		var strict *bool
		if s := def.Get("strict"); s.IsBool() {
			b := s.Bool()
			strict = &b
		}
		findings = append(findings, fakeprovider.CheckToolSchema(fakeprovider.DialectGemini, index, def.Get("name").String(), []byte(def.Get("parameters").Raw), strict)...)
		index++
	}
	if len(findings) > 0 {
		msg, _ := json.Marshal(strings.Join(findings, "\n"))
		out := []byte(`{"error":{"code":400,"message":` + string(msg) + `,"status":"INVALID_ARGUMENT"}}` + "\n")
		g.mu.Lock()
		g.refusals = append(g.refusals, out)
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(out)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	g.next.ServeHTTP(w, r)
}

// mcpIssueTool is an MCP server's tool as zod-to-json-schema writes it: a
// $schema, additionalProperties false, a nullable field as a type list, a
// shared definition behind $ref, a default and a format Gemini does not
// take.
const mcpIssueTool = `{"type":"function","name":"mcp__tracker__create_issue","description":"Create an issue in the tracker.","strict":false,"parameters":{` +
	`"$schema":"http://json-schema.org/draft-07/schema#","type":"object",` +
	`"properties":{"title":{"type":"string","description":"Issue title"},` +
	`"assignee":{"$ref":"#/$defs/user"},` +
	`"due":{"type":["string","null"],"format":"date-time"},` +
	`"labels":{"type":"array","items":{"type":"string"},"default":[]}},` +
	`"required":["title"],"additionalProperties":false,` +
	`"$defs":{"user":{"type":"object","properties":{"login":{"type":"string"},"email":{"type":"string","format":"email"}},"required":["login"],"additionalProperties":false}}}}`

// wantMCPParameters is mcpIssueTool's schema as the gemini dialect writes it.
const wantMCPParameters = `{"type":"object","properties":{"title":{"type":"string","description":"Issue title"},` +
	`"assignee":{"type":"object","properties":{"login":{"type":"string"},"email":{"type":"string","description":"(format: \"email\")"}},"required":["login"]},` +
	`"due":{"type":"string","nullable":true,"format":"date-time"},` +
	`"labels":{"type":"array","items":{"type":"string"},"description":"(default: [])"}},"required":["title"]}`

// jsonWithout is the JSON text raw without any member named key, at any
// depth, re-encoded so that two texts compare by value.
func jsonWithout(t *testing.T, raw, key string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	var strip func(any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			delete(v, key)
			for _, e := range v {
				strip(e)
			}
		case []any:
			for _, e := range v {
				strip(e)
			}
		}
	}
	strip(v)
	return mustJSONText(v)
}

// codexWithMCPTool is the Codex fixture with mcpIssueTool as its last tool.
func codexWithMCPTool(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(codexRequestFixture)
	if err != nil {
		t.Fatal(err)
	}
	tools := gjson.GetBytes(b, "tools")
	raw := strings.TrimRight(strings.TrimSuffix(tools.Raw, "]"), " \n\t")
	out := append(bytes.Clone(b[:tools.Index]), raw+",\n  "+mcpIssueTool+"\n ]"...)
	return append(out, b[tools.Index+len(tools.Raw):]...)
}

// TestToolsNormalizeSchemaForGemini: the Codex request with an MCP tool,
// through tools_plan's gemini profile and tools_normalize_schema's gemini
// dialect, is accepted by an upstream that validates every function's
// parameters as Gemini does; without the normalization the upstream's
// refusal, naming each offending keyword, reaches the client untouched.
func TestToolsNormalizeSchemaForGemini(t *testing.T) {
	up := &geminiUpstream{next: &fakeprovider.Provider{Strict: true}}
	addr := serveUpstream(t, up)
	body := codexWithMCPTool(t)
	// tools_plan's gemini profile: web_search goes, apply_patch and
	// tool_search become functions; the MCP tool stays last.
	wantTools := "exec_command,write_stdin,request_user_input,apply_patch,view_image,get_goal,create_goal,update_goal,tool_search,mcp__tracker__create_issue"
	const mcpIndex = 9

	t.Run("normalized", func(t *testing.T) {
		startGateway(t, `		rule tools_plan {
			profile gemini
		}
		rule tools_normalize_schema {
			dialect gemini
		}`, addr)
		client := sdkClient()
		stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{}, option.WithRequestBody("application/json", body))
		var completed responses.Response
		for stream.Next() {
			if ev := stream.Current(); ev.Type == "response.completed" {
				completed = ev.AsResponseCompleted().Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		stream.Close()
		got := lastUpstream(t, up.next)
		if names := strings.Join(toolNames(got), ","); names != wantTools {
			t.Fatalf("upstream tools\n got %s\nwant %s", names, wantTools)
		}
		for i, tool := range got.Get("tools").Array() {
			if f := fakeprovider.CheckToolSchema(fakeprovider.DialectGemini, i, tool.Get("name").String(), []byte(tool.Get("parameters").Raw), nil); len(f) > 0 {
				t.Errorf("tool %d still breaks Gemini's rules: %q", i, f)
			}
			if tool.Get("strict").Exists() {
				t.Errorf("tool %d keeps strict: %s", i, tool.Raw)
			}
		}
		// The MCP schema: $schema, $defs and additionalProperties gone,
		// the reference inlined, the type list one type and nullable, the
		// default and the email format told in descriptions.
		mcp := got.Get("tools." + strconv.Itoa(mcpIndex))
		if mcp.Get("parameters").Raw != wantMCPParameters {
			t.Errorf("MCP parameters\n got %s\nwant %s", mcp.Get("parameters").Raw, wantMCPParameters)
		}
		if mcp.Get("description").Raw != `"Create an issue in the tracker."` || mcp.Get("type").Raw != `"function"` || len(mcp.Map()) != 4 {
			t.Errorf("MCP tool: %s", mcp.Raw)
		}
		// Codex's own functions: only their additionalProperties go, and
		// the parameters of those without any (Gemini takes no OBJECT
		// without properties).
		sent := gjson.ParseBytes(body)
		for _, name := range strings.Split(wantTools, ",")[:8] {
			if name == "apply_patch" {
				continue
			}
			g, s := got.Get(`tools.#(name=="`+name+`")`), sent.Get(`tools.#(name=="`+name+`")`)
			if len(s.Get("parameters.properties").Map()) == 0 {
				if g.Get("parameters").Exists() || g.Get("description").Raw != s.Get("description").Raw {
					t.Errorf("%s: want no parameters\n got %s", name, g.Raw)
				}
				continue
			}
			if jsonWithout(t, g.Get("parameters").Raw, "additionalProperties") != jsonWithout(t, s.Get("parameters").Raw, "additionalProperties") ||
				g.Get("description").Raw != s.Get("description").Raw {
				t.Errorf("%s\n got %s\nsent %s", name, g.Raw, s.Raw)
			}
		}
		// The upstream called apply_patch; the client gets its custom
		// call, the patch normalised.
		var calls []string
		for _, it := range completed.Output {
			if it.Type != "message" {
				calls = append(calls, it.Type+":"+it.AsCustomToolCall().Name+":"+it.AsCustomToolCall().Input)
			}
		}
		if want := "custom_tool_call:apply_patch:" + normalisedDemoPatch; !slices.Equal(calls, []string{want}) {
			t.Errorf("client output: %s", completed.RawJSON())
		}
	})

	t.Run("not normalized", func(t *testing.T) {
		startGateway(t, `		rule tools_plan {
			profile gemini
		}`, addr)
		n := len(up.next.Requests())
		status, hdr, got := filterPost(t, "/v1/responses", string(body))
		if status != http.StatusBadRequest {
			t.Fatalf("status %d: %s", status, got)
		}
		up.mu.Lock()
		last := up.refusals[len(up.refusals)-1]
		up.mu.Unlock()
		if !bytes.Equal(got, last) || hdr.Get("Content-Type") != "application/json; charset=UTF-8" {
			t.Errorf("the client got %s %s, the upstream wrote %s", hdr.Get("Content-Type"), got, last)
		}
		if len(up.next.Requests()) != n {
			t.Errorf("a refused request reached the model")
		}
		// Every Codex function is refused for its additionalProperties,
		// and the MCP tool for each keyword Gemini has no field for.
		var mcpFindings []string
		other := 0
		at := "tools[0].function_declarations[" + strconv.Itoa(mcpIndex) + "].parameters"
		for _, line := range strings.Split(gjson.GetBytes(got, "error.message").String(), "\n") {
			switch {
			case strings.Contains(line, at):
				mcpFindings = append(mcpFindings, line)
			case strings.Contains(line, `Unknown name "additionalProperties"`), strings.Contains(line, "should be non-empty for OBJECT type"):
				other++
			default:
				t.Errorf("unexpected finding %s", line)
			}
		}
		// (Gemini reads nothing inside a field it does not know, $defs
		// included, and takes default.)
		wantMCP := []string{
			`Invalid JSON payload received. Unknown name "$defs" at '` + at + `': Cannot find field.`,
			`Invalid JSON payload received. Unknown name "$schema" at '` + at + `': Cannot find field.`,
			`Invalid JSON payload received. Unknown name "additionalProperties" at '` + at + `': Cannot find field.`,
			`Invalid JSON payload received. Unknown name "$ref" at '` + at + `.properties[assignee]': Cannot find field.`,
			`* GenerateContentRequest.` + at + `.properties[assignee].type: must be specified`,
			`Invalid JSON payload received. Unknown name "type" at '` + at + `.properties[due]': Proto field is not repeating, cannot start list.`,
		}
		if !slices.Equal(mcpFindings, wantMCP) || other < 9 {
			t.Errorf("findings on the MCP tool\n got %q\nwant %q\n(%d on the others)", mcpFindings, wantMCP, other)
		}
	})
}
