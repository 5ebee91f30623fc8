package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// tools_defer through a real Caddy, in front of a strict upstream that
// refuses more than 128 tools as OpenAI does. The client declares 300
// tools: the public schemas beside the repository (../shared/fixtures/
// tool-schemas) and generated ones to make up the number. The scripted
// model searches with tool_search for a tool to take a page's screenshot,
// and calls what it found: the fixture tool get_url_screenshot (Cloudflare's
// browser MCP server), whose name and description no other tool shares.

// tdRules is the chain under test: tools_defer, then tools_plan fitting
// what is left to OpenAI's Chat rules.
const tdRules = `		rule tools_defer
		rule tools_plan {
			profile openai_chat
		}`

const (
	tdTarget       = "get_url_screenshot"
	tdTargetArgs   = `{"url":"https://example.com/pricing","viewport":{"width":1280,"height":720}}`
	tdTargetCallID = "call_td_shot_41c9"
	tdSearchCallID = "call_td_search_8f2e"
	tdSearchQuery  = "screenshot of a web page"
	tdSearchArgs   = `{"query":"` + tdSearchQuery + `"}`
	tdToolCount    = 300
	tdAnswerText   = "The screenshot of the pricing page is saved."
	tdToolOutput   = "Saved screenshot.png (1280x720, 212 kB)."
)

// The usage of the scripted answers: the search, then the call. The client
// must see their sums.
var (
	tdUsageSearch = [3]int{1200, 15, 1215}
	tdUsageCall   = [3]int{1500, 40, 1540}
	tdUsageSum    = [3]int{2700, 55, 2755}
)

// tdTool is one tool the client declares.
type tdTool struct {
	name, description string
	parameters        json.RawMessage
}

// tdTools reads the public schema corpus, as transforms/schema's
// realCorpus does (skipped where it is absent, fatal in CI), giving each
// repeated name a suffix, and makes up tdToolCount with generated tools.
func tdTools(t *testing.T) []tdTool {
	t.Helper()
	dir := filepath.Join("..", "..", "shared", "fixtures", "tool-schemas")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the public schema corpus is not at %s", dir)
		}
		t.Skipf("no schema corpus at %s", dir)
	}
	sort.Strings(files)
	var tools []tdTool
	seen := map[string]int{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tl struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal(raw, &tl); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		seen[tl.Name]++
		name := tl.Name
		if n := seen[tl.Name]; n > 1 {
			name = fmt.Sprintf("%s_v%d", tl.Name, n)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, tl.Parameters); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		tools = append(tools, tdTool{name, tl.Description, compact.Bytes()})
	}
	if seen[tdTarget] != 1 {
		t.Fatalf("the corpus has %d tools named %s, want one", seen[tdTarget], tdTarget)
	}
	if len(tools) > tdToolCount {
		t.Fatalf("the corpus has %d tools, more than %d", len(tools), tdToolCount)
	}
	domains := []struct{ name, system string }{
		{"crm", "the CRM"}, {"billing", "the billing service"}, {"inventory", "the warehouse inventory"},
		{"hr", "the HR system"}, {"ticketing", "the helpdesk"}, {"analytics", "the analytics warehouse"},
		{"storage", "object storage"}, {"chat", "the team chat"}, {"deploy", "the deployment pipeline"},
		{"kb", "the knowledge base"}, {"payroll", "payroll"}, {"fleet", "the vehicle fleet"},
	}
	verbs := []string{"create", "get", "list", "update", "delete", "archive", "export", "assign", "approve", "sync", "merge", "restore", "tag", "count"}
	nouns := []string{"contact", "invoice", "shipment", "employee", "ticket", "report", "bucket", "channel", "release", "article", "payslip", "vehicle", "note"}
	for i := 0; len(tools) < tdToolCount; i++ {
		d, v, n := domains[i%len(domains)], verbs[(i/len(domains))%len(verbs)], nouns[(i*5)%len(nouns)]
		name := fmt.Sprintf("%s_%s_%s_%03d", d.name, v, n, i)
		desc := fmt.Sprintf("%s a %s in %s. Returns the %s as JSON.", strings.ToUpper(v[:1])+v[1:], n, d.system, n)
		params := fmt.Sprintf(`{"type":"object","properties":{"%s_id":{"type":"string","description":"The %s's ID."},"note":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["%s_id"],"additionalProperties":false}`, n, n, n)
		tools = append(tools, tdTool{name, desc, json.RawMessage(params)})
	}
	return tools
}

func tdString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// tdToolsJSON is the tools array in the client's protocol.
func tdToolsJSON(tools []tdTool, chat bool) string {
	parts := make([]string, len(tools))
	for i, tl := range tools {
		if chat {
			parts[i] = `{"type":"function","function":{"name":` + tdString(tl.name) + `,"description":` + tdString(tl.description) + `,"parameters":` + string(tl.parameters) + `}}`
		} else {
			parts[i] = `{"type":"function","name":` + tdString(tl.name) + `,"description":` + tdString(tl.description) + `,"parameters":` + string(tl.parameters) + `,"strict":false}`
		}
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// tdFirstTurn is the client's first request: a task and the 300 tools.
func tdFirstTurn(tools []tdTool, chat, stream bool) []byte {
	const task = "Take a screenshot of https://example.com/pricing at 1280x720."
	var b string
	if chat {
		b = `{"model":"gpt-4.1","messages":[{"role":"system","content":"You are a helpful agent."},{"role":"user","content":"` + task + `"}],"tools":` + tdToolsJSON(tools, true) + `,"tool_choice":"auto"`
		if stream {
			b += `,"stream":true,"stream_options":{"include_usage":true}`
		}
	} else {
		b = `{"model":"gpt-4.1","instructions":"You are a helpful agent.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"` + task + `"}]}],"tools":` + tdToolsJSON(tools, false) + `,"tool_choice":"auto","store":false`
		if stream {
			b += `,"stream":true`
		}
	}
	return []byte(b + "}")
}

// tdNextTurn is the client's next request: the first turn's history with
// the call as the client got it and the tool's output.
func tdNextTurn(tools []tdTool, chat bool) []byte {
	first := string(tdFirstTurn(tools, chat, false))
	if chat {
		hist := `,{"role":"assistant","content":null,"tool_calls":[{"id":"` + tdTargetCallID + `","type":"function","function":{"name":"` + tdTarget + `","arguments":` + tdString(tdTargetArgs) + `}}]}` +
			`,{"role":"tool","tool_call_id":"` + tdTargetCallID + `","content":` + tdString(tdToolOutput) + `}`
		i := strings.Index(first, `],"tools":`)
		return []byte(first[:i] + hist + first[i:])
	}
	hist := `,{"type":"function_call","id":"fc_td_shot","call_id":"` + tdTargetCallID + `","name":"` + tdTarget + `","arguments":` + tdString(tdTargetArgs) + `,"status":"completed"}` +
		`,{"type":"function_call_output","call_id":"` + tdTargetCallID + `","output":` + tdString(tdToolOutput) + `}`
	i := strings.Index(first, `],"tools":`)
	return []byte(first[:i] + hist + first[i:])
}

// tdScript is the model behind the strict upstream. Given a conversation
// whose last step is the target's output it answers with text; given the
// output of its search it calls the target, which the request must now
// declare; otherwise it searches, with tool_search, which the request
// must declare. It answers in the request's protocol, JSON or streamed.
func tdScript(w http.ResponseWriter, req gjson.Result) {
	chat := req.Get("messages").Exists()
	declared := map[string]bool{}
	for _, tl := range req.Get("tools").Array() {
		if chat {
			declared[tl.Get("function.name").String()] = true
		} else {
			declared[tl.Get("name").String()] = true
		}
	}
	answered := tdAnswered(req)
	refuse := func(msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":%s,"type":"invalid_request_error","param":null,"code":null}}`, tdString("script: "+msg))
	}
	stream := req.Get("stream").Bool()
	switch {
	case answered[tdTargetCallID]:
		tdWriteText(w, req, chat, stream)
	case answered[tdSearchCallID]:
		if !declared[tdTarget] {
			refuse("the search's round does not declare " + tdTarget)
			return
		}
		tdWriteCall(w, req, chat, stream, "2", tdTargetCallID, tdTarget, tdTargetArgs, tdUsageCall)
	default:
		if !declared["tool_search"] {
			refuse("no tool_search to search with")
			return
		}
		tdWriteCall(w, req, chat, stream, "1", tdSearchCallID, "tool_search", tdSearchArgs, tdUsageSearch)
	}
}

// tdAnswered returns the ids of the calls a request's history answers.
func tdAnswered(req gjson.Result) map[string]bool {
	answered := map[string]bool{}
	if req.Get("messages").Exists() {
		for _, m := range req.Get("messages").Array() {
			if m.Get("role").String() == "tool" {
				answered[m.Get("tool_call_id").String()] = true
			}
		}
		return answered
	}
	for _, it := range req.Get("input").Array() {
		if it.Get("type").String() == "function_call_output" {
			answered[it.Get("call_id").String()] = true
		}
	}
	return answered
}

func tdPieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// tdResponse is a Responses response object echoing the request's tools,
// as OpenAI's are.
func tdResponse(req gjson.Result, id, status, output, usage string) string {
	tools := req.Get("tools").Raw
	if tools == "" {
		tools = "[]"
	}
	return `{"id":"resp_td_` + id + `","object":"response","created_at":1764400000,"status":"` + status + `","error":null,"incomplete_details":null,"model":"gpt-4.1-2025-04-14","output":` + output +
		`,"parallel_tool_calls":true,"tool_choice":"auto","tools":` + tools + `,"usage":` + usage + `}`
}

func tdResponsesUsage(u [3]int) string {
	return fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}`, u[0], u[1], u[2])
}

func tdChatUsage(u [3]int) string {
	return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, u[0], u[1], u[2])
}

// tdEvents writes a Responses stream, numbering the events.
func tdEvents(w http.ResponseWriter, evs []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	for i, e := range evs {
		e = strings.Replace(e, `"sequence_number":0`, fmt.Sprintf(`"sequence_number":%d`, i), 1)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", gjson.Get(e, "type").String(), e)
		_ = rc.Flush()
	}
}

// tdChunks writes a Chat stream of chunks and [DONE].
func tdChunks(w http.ResponseWriter, chunks []string) {
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
		_ = rc.Flush()
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

func tdWriteCall(w http.ResponseWriter, req gjson.Result, chat, stream bool, id, callID, name, args string, usage [3]int) {
	if chat {
		head := `{"id":"chatcmpl-td-` + id + `","object":"chat.completion.chunk","created":1764400000,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_td",`
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"chatcmpl-td-`+id+`","object":"chat.completion","created":1764400000,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"`+callID+`","type":"function","function":{"name":"`+name+`","arguments":`+tdString(args)+`}}],"annotations":[]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":`+tdChatUsage(usage)+`,"system_fingerprint":"fp_td"}`)
			return
		}
		chunks := []string{head + `"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"` + callID + `","type":"function","function":{"name":"` + name + `","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`}
		for _, p := range tdPieces(args, 8) {
			chunks = append(chunks, head+`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":`+tdString(p)+`}}]},"logprobs":null,"finish_reason":null}],"usage":null}`)
		}
		chunks = append(chunks, head+`"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}`)
		if req.Get("stream_options.include_usage").Bool() {
			chunks = append(chunks, head+`"choices":[],"usage":`+tdChatUsage(usage)+`}`)
		}
		tdChunks(w, chunks)
		return
	}
	fcID := "fc_td_" + id
	item := func(status, a string) string {
		return `{"id":"` + fcID + `","type":"function_call","status":"` + status + `","arguments":` + tdString(a) + `,"call_id":"` + callID + `","name":"` + name + `"}`
	}
	done := item("completed", args)
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, tdResponse(req, id, "completed", "["+done+"]", tdResponsesUsage(usage)))
		return
	}
	evs := []string{
		`{"type":"response.created","sequence_number":0,"response":` + tdResponse(req, id, "in_progress", "[]", "null") + `}`,
		`{"type":"response.in_progress","sequence_number":0,"response":` + tdResponse(req, id, "in_progress", "[]", "null") + `}`,
		`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":` + item("in_progress", "") + `}`,
	}
	for _, p := range tdPieces(args, 8) {
		evs = append(evs, `{"type":"response.function_call_arguments.delta","sequence_number":0,"item_id":"`+fcID+`","output_index":0,"delta":`+tdString(p)+`,"obfuscation":"Xq3"}`)
	}
	evs = append(evs,
		`{"type":"response.function_call_arguments.done","sequence_number":0,"item_id":"`+fcID+`","output_index":0,"name":"`+name+`","arguments":`+tdString(args)+`}`,
		`{"type":"response.output_item.done","sequence_number":0,"output_index":0,"item":`+done+`}`,
		`{"type":"response.completed","sequence_number":0,"response":`+tdResponse(req, id, "completed", "["+done+"]", tdResponsesUsage(usage))+`}`,
	)
	tdEvents(w, evs)
}

// tdWriteText answers the next turn with text.
func tdWriteText(w http.ResponseWriter, req gjson.Result, chat, stream bool) {
	usage := [3]int{1700, 12, 1712}
	if chat {
		if stream {
			head := `{"id":"chatcmpl-td-3","object":"chat.completion.chunk","created":1764400000,"model":"gpt-4.1-2025-04-14",`
			tdChunks(w, []string{
				head + `"choices":[{"index":0,"delta":{"role":"assistant","content":` + tdString(tdAnswerText) + `},"finish_reason":null}]}`,
				head + `"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"chatcmpl-td-3","object":"chat.completion","created":1764400000,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":`+tdString(tdAnswerText)+`},"finish_reason":"stop"}],"usage":`+tdChatUsage(usage)+`}`)
		return
	}
	msg := `{"id":"msg_td_3","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":` + tdString(tdAnswerText) + `}]}`
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, tdResponse(req, "3", "completed", "["+msg+"]", tdResponsesUsage(usage)))
}

// tdUpstream is the strict upstream behind OpenAI's cap on tools.
func tdUpstream(t *testing.T) (*fakeprovider.Provider, *fakeprovider.ToolCap, string) {
	t.Helper()
	p := &fakeprovider.Provider{Strict: true, Reply: tdScript}
	capped := &fakeprovider.ToolCap{Next: p}
	return p, capped, serveUpstream(t, capped)
}

// tdTap records the bytes of every answer the SDK reads. The SDK stops
// reading a Chat stream at [DONE] and closes it; the tap reads on to the
// end of the answer first, so the gateway's handler has returned, and its
// metrics are counted, by the time the SDK is done (a client that leaves
// at [DONE] is TestToolsDeferClientLeavingAtDone's).
type tdTap struct{ bytes.Buffer }

type tdTapBody struct {
	io.Reader
	body io.ReadCloser
}

func (b tdTapBody) Close() error {
	_, _ = io.Copy(io.Discard, b.Reader)
	return b.body.Close()
}

func (tap *tdTap) option() option.RequestOption {
	return option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if err == nil {
			resp.Body = tdTapBody{io.TeeReader(resp.Body, &tap.Buffer), resp.Body}
		}
		return resp, err
	})
}

// tdMetrics are the series the searches move.
const (
	tdMFound        = `caddy_llm_transform_defer_searches_total{reason="found"}`
	tdMRounds       = `caddy_llm_transform_rounds_total{outcome="answered",reason="search"}`
	tdMRoundsFailed = `caddy_llm_transform_rounds_total{outcome="failed",reason="search"}`
	tdMHistory      = `caddy_llm_transform_defer_tools_loaded_total{reason="history"}`
)

// tdCheckUpstream checks the two requests a search's answer made: the
// first declared the search tool alone; the round declared the target and
// the search tool and carried the search call and the gateway's answer.
func tdCheckUpstream(t *testing.T, reqs [][]byte, client []byte, chat bool) {
	t.Helper()
	if len(reqs) != 2 {
		t.Fatalf("the upstream got %d requests, want 2 (the request and the search's round)", len(reqs))
	}
	nameOf := "name"
	if chat {
		nameOf = "function.name"
	}
	names := func(b []byte) []string {
		var out []string
		for _, tl := range gjson.GetBytes(b, "tools").Array() {
			out = append(out, tl.Get(nameOf).String())
		}
		return out
	}
	if got := names(reqs[0]); len(got) != 1 || got[0] != "tool_search" {
		t.Errorf("the first request declared %v, want [tool_search]", got)
	}
	got := names(reqs[1])
	t.Logf("the round declared %v", got)
	if len(got) < 2 || len(got) > 6 || !strings.Contains(strings.Join(got, ","), tdTarget) || got[0] != "tool_search" {
		t.Errorf("the round declared %v, want tool_search and at most five found tools, %s among them", got, tdTarget)
	}
	// The target goes as the client declared it.
	find := func(b []byte) gjson.Result {
		for _, tl := range gjson.GetBytes(b, "tools").Array() {
			if tl.Get(nameOf).String() == tdTarget {
				return tl
			}
		}
		return gjson.Result{}
	}
	if up, cl := find(reqs[1]), find(client); !tdJSONEqual(up.Raw, cl.Raw) {
		t.Errorf("the round declared %s as\n%s\nthe client as\n%s", tdTarget, up.Raw, cl.Raw)
	}
	var call, output gjson.Result
	if chat {
		msgs := gjson.GetBytes(reqs[1], "messages").Array()
		if n := len(gjson.GetBytes(client, "messages").Array()); len(msgs) != n+2 {
			t.Fatalf("the round has %d messages, want the client's %d, the search and its answer: %s", len(msgs), n, gjson.GetBytes(reqs[1], "messages").Raw)
		}
		a, tm := msgs[len(msgs)-2], msgs[len(msgs)-1]
		call = a.Get("tool_calls.0")
		if a.Get("role").String() != "assistant" || len(a.Get("tool_calls").Array()) != 1 || call.Get("id").String() != tdSearchCallID ||
			call.Get("function.name").String() != "tool_search" || call.Get("function.arguments").String() != tdSearchArgs {
			t.Errorf("the round's search call: %s", a.Raw)
		}
		if tm.Get("role").String() != "tool" || tm.Get("tool_call_id").String() != tdSearchCallID {
			t.Errorf("the round's search answer: %s", tm.Raw)
		}
		output = tm.Get("content")
	} else {
		in := gjson.GetBytes(reqs[1], "input").Array()
		if n := len(gjson.GetBytes(client, "input").Array()); len(in) != n+2 {
			t.Fatalf("the round has %d input items, want the client's %d, the search and its answer: %s", len(in), n, gjson.GetBytes(reqs[1], "input").Raw)
		}
		call, out := in[len(in)-2], in[len(in)-1]
		if call.Get("type").String() != "function_call" || call.Get("call_id").String() != tdSearchCallID ||
			call.Get("name").String() != "tool_search" || call.Get("arguments").String() != tdSearchArgs {
			t.Errorf("the round's search call: %s", call.Raw)
		}
		if out.Get("type").String() != "function_call_output" || out.Get("call_id").String() != tdSearchCallID {
			t.Errorf("the round's search answer: %s", out.Raw)
		}
		output = out.Get("output")
	}
	t.Logf("the gateway answered the search: %s", output.String())
	if !strings.Contains(output.String(), "\n- "+tdTarget+":") {
		t.Errorf("the search's answer does not list %s: %q", tdTarget, output.String())
	}
}

func tdJSONEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return mustJSONText(x) == mustJSONText(y)
}

// tdNoSearch fails if the client's bytes mention the search.
func tdNoSearch(t *testing.T, got []byte) {
	t.Helper()
	for _, s := range []string{"tool_search", tdSearchCallID, "fc_td_1"} {
		if bytes.Contains(got, []byte(s)) {
			i := bytes.Index(got, []byte(s))
			t.Errorf("the client saw %q: …%s…", s, got[max(0, i-200):min(len(got), i+200)])
		}
	}
}

// TestToolsDeferThroughCaddy: 300 tools to an upstream that takes 128.
// The model's search is answered by the gateway in a hidden round; its
// call of the tool found reaches Responses and Chat clients, JSON and
// streamed, under the tool's own name, with the usage of both upstream
// answers summed and no trace of the search.
func TestToolsDeferThroughCaddy(t *testing.T) {
	tools := tdTools(t)
	up, capped, addr := tdUpstream(t)

	// The upstream is OpenAI's cap: the client's request as it is gets
	// OpenAI's refusal.
	resp, err := http.Post("http://"+addr+"/v1/responses", "application/json", bytes.NewReader(tdFirstTurn(tools, false, false)))
	if err != nil {
		t.Fatal(err)
	}
	refusal, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `{"error":{"message":"Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 300 instead.","type":"invalid_request_error","param":"tools","code":"array_above_max_length"}}` + "\n"
	if resp.StatusCode != http.StatusBadRequest || string(refusal) != want {
		t.Fatalf("the capped upstream answered %d %s", resp.StatusCode, refusal)
	}

	startGateway(t, tdRules, addr)
	client := sdkClient()
	before := scrapeLLM(t)
	ctx := context.Background()
	served := 0
	// upstream returns the requests the last client request made.
	upstream := func() [][]byte {
		reqs := up.Requests()
		got := reqs[served:]
		served = len(reqs)
		return got
	}

	t.Run("responses/json", func(t *testing.T) {
		body := tdFirstTurn(tools, false, false)
		var tap tdTap
		r, err := client.Responses.New(ctx, responses.ResponseNewParams{}, option.WithRequestBody("application/json", body), tap.option())
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Output) != 1 || r.Output[0].Type != "function_call" {
			t.Fatalf("output: %s", gjson.Get(r.RawJSON(), "output").Raw)
		}
		c := r.Output[0].AsFunctionCall()
		if c.Name != tdTarget || c.Arguments != tdTargetArgs || c.CallID != tdTargetCallID || c.Namespace != "" {
			t.Errorf("the call: %s", r.Output[0].RawJSON())
		}
		if u := r.Usage; [3]int{int(u.InputTokens), int(u.OutputTokens), int(u.TotalTokens)} != tdUsageSum {
			t.Errorf("usage %s, want the sum %v", gjson.Get(r.RawJSON(), "usage").Raw, tdUsageSum)
		}
		// The echoed tools are the client's 300.
		if !tdJSONEqual(gjson.Get(r.RawJSON(), "tools").Raw, gjson.GetBytes(body, "tools").Raw) {
			t.Errorf("the echoed tools are not the client's (%d of them)", len(r.Tools))
		}
		tdNoSearch(t, tap.Bytes())
		tdCheckUpstream(t, upstream(), body, false)
	})

	t.Run("responses/sse", func(t *testing.T) {
		body := tdFirstTurn(tools, false, true)
		var tap tdTap
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{}, option.WithRequestBody("application/json", body), tap.option())
		var types []string
		var args strings.Builder
		var added, done responses.ResponseFunctionToolCall
		var completed responses.Response
		seq := int64(0)
		for stream.Next() {
			ev := stream.Current()
			if ev.SequenceNumber != seq {
				t.Errorf("event %d (%s) has sequence_number %d", seq, ev.Type, ev.SequenceNumber)
			}
			seq++
			types = append(types, ev.Type)
			switch ev.Type {
			case "response.output_item.added":
				added = ev.AsResponseOutputItemAdded().Item.AsFunctionCall()
				if ev.OutputIndex != 0 {
					t.Errorf("output_item.added at output_index %d", ev.OutputIndex)
				}
			case "response.function_call_arguments.delta":
				args.WriteString(ev.AsResponseFunctionCallArgumentsDelta().Delta)
			case "response.output_item.done":
				done = ev.AsResponseOutputItemDone().Item.AsFunctionCall()
			case "response.completed":
				completed = ev.AsResponseCompleted().Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		for _, ty := range types {
			count[ty]++
		}
		if count["response.created"] != 1 || count["response.completed"] != 1 || types[len(types)-1] != "response.completed" ||
			count["response.output_item.added"] != 1 || count["response.output_item.done"] != 1 || count["response.function_call_arguments.done"] != 1 {
			t.Errorf("events %v", types)
		}
		if added.Name != tdTarget || added.CallID != tdTargetCallID {
			t.Errorf("output_item.added: %+v", added)
		}
		if done.Name != tdTarget || done.CallID != tdTargetCallID || done.Arguments != tdTargetArgs || args.String() != tdTargetArgs {
			t.Errorf("output_item.done %+v, argument deltas %q", done, args.String())
		}
		if len(completed.Output) != 1 || completed.Output[0].AsFunctionCall().Name != tdTarget || completed.Output[0].AsFunctionCall().Arguments != tdTargetArgs {
			t.Errorf("response.completed output: %s", gjson.Get(completed.RawJSON(), "output").Raw)
		}
		if !tdJSONEqual(gjson.Get(completed.RawJSON(), "tools").Raw, gjson.GetBytes(body, "tools").Raw) {
			t.Errorf("response.completed does not echo the client's tools")
		}
		if u := completed.Usage; [3]int{int(u.InputTokens), int(u.OutputTokens), int(u.TotalTokens)} != tdUsageSum {
			t.Errorf("usage %s, want the sum %v", gjson.Get(completed.RawJSON(), "usage").Raw, tdUsageSum)
		}
		tdNoSearch(t, tap.Bytes())
		tdCheckUpstream(t, upstream(), body, false)
	})

	t.Run("chat/json", func(t *testing.T) {
		body := tdFirstTurn(tools, true, false)
		var tap tdTap
		var r openai.ChatCompletion
		if err := client.Post(ctx, "chat/completions", json.RawMessage(body), &r, tap.option()); err != nil {
			t.Fatal(err)
		}
		if len(r.Choices) != 1 || r.Choices[0].FinishReason != "tool_calls" || len(r.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("answer: %s", r.RawJSON())
		}
		c := r.Choices[0].Message.ToolCalls[0]
		if c.ID != tdTargetCallID || c.Type != "function" || c.Function.Name != tdTarget || c.Function.Arguments != tdTargetArgs {
			t.Errorf("the call: %s", c.RawJSON())
		}
		if u := r.Usage; [3]int{int(u.PromptTokens), int(u.CompletionTokens), int(u.TotalTokens)} != tdUsageSum {
			t.Errorf("usage %s, want the sum %v", gjson.Get(r.RawJSON(), "usage").Raw, tdUsageSum)
		}
		tdNoSearch(t, tap.Bytes())
		tdCheckUpstream(t, upstream(), body, true)
	})

	t.Run("chat/sse", func(t *testing.T) {
		body := tdFirstTurn(tools, true, true)
		var tap tdTap
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{}, option.WithRequestBody("application/json", body), tap.option())
		var acc openai.ChatCompletionAccumulator
		ids := map[string]bool{}
		var finishes []string
		var entries int
		var usage openai.CompletionUsage
		for stream.Next() {
			ch := stream.Current()
			acc.AddChunk(ch)
			ids[ch.ID] = true
			for _, c := range ch.Choices {
				if c.FinishReason != "" {
					finishes = append(finishes, c.FinishReason)
				}
				for _, tc := range c.Delta.ToolCalls {
					entries++
					if tc.Index != 0 {
						t.Errorf("a call entry at index %d: %s", tc.Index, tc.RawJSON())
					}
				}
			}
			if ch.JSON.Usage.Valid() && ch.Usage.TotalTokens > 0 {
				usage = ch.Usage
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(ids) != 1 || strings.Join(finishes, ",") != "tool_calls" || entries == 0 {
			t.Errorf("chunk ids %v, finishes %v, %d call entries", ids, finishes, entries)
		}
		if len(acc.Choices) != 1 || len(acc.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("accumulated: %+v", acc.Choices)
		}
		c := acc.Choices[0].Message.ToolCalls[0]
		if c.ID != tdTargetCallID || c.Function.Name != tdTarget || c.Function.Arguments != tdTargetArgs {
			t.Errorf("the call: id %q name %q arguments %q", c.ID, c.Function.Name, c.Function.Arguments)
		}
		if [3]int{int(usage.PromptTokens), int(usage.CompletionTokens), int(usage.TotalTokens)} != tdUsageSum {
			t.Errorf("usage %+v, want the sum %v", usage, tdUsageSum)
		}
		if !bytes.Contains(tap.Bytes(), []byte("data: [DONE]")) || bytes.Count(tap.Bytes(), []byte("[DONE]")) != 1 {
			t.Errorf("the stream does not end with one [DONE]")
		}
		tdNoSearch(t, tap.Bytes())
		tdCheckUpstream(t, upstream(), body, true)
	})

	if r := capped.Refused(); len(r) != 1 {
		t.Errorf("the cap refused %v: only the direct request should have been", r)
	}
	assertGrowth(t, before, map[string]float64{tdMFound: 4, tdMRounds: 4, tdMRoundsFailed: 0})
}

// TestToolsDeferNextTurnOnFreshGateway: the client's next turn, holding the
// call and its output, goes to a gateway started afresh, which keeps
// nothing of the first turn: the upstream gets one request, declaring the
// tool the history calls (and the search tool, the rest still deferred),
// and answers with text straight away.
func TestToolsDeferNextTurnOnFreshGateway(t *testing.T) {
	tools := tdTools(t)
	up, capped, addr := tdUpstream(t)
	for _, chat := range []bool{false, true} {
		name := "responses"
		if chat {
			name = "chat"
		}
		t.Run(name, func(t *testing.T) {
			startGateway(t, tdRules, addr) // a fresh Caddy: new handlers, no state
			before := scrapeLLM(t)
			n0 := len(up.Requests())
			body := tdNextTurn(tools, chat)
			var tap tdTap
			client := sdkClient()
			var text string
			if chat {
				var r openai.ChatCompletion
				if err := client.Post(context.Background(), "chat/completions", json.RawMessage(body), &r, tap.option()); err != nil {
					t.Fatal(err)
				}
				if len(r.Choices) == 1 {
					text = r.Choices[0].Message.Content
				}
			} else {
				r, err := client.Responses.New(context.Background(), responses.ResponseNewParams{}, option.WithRequestBody("application/json", body), tap.option())
				if err != nil {
					t.Fatal(err)
				}
				text = r.OutputText()
			}
			if text != tdAnswerText {
				t.Errorf("the answer: %s", tap.Bytes())
			}
			tdNoSearch(t, tap.Bytes())
			reqs := up.Requests()[n0:]
			if len(reqs) != 1 {
				t.Fatalf("the upstream got %d requests, want 1", len(reqs))
			}
			nameOf := "name"
			if chat {
				nameOf = "function.name"
			}
			var got []string
			for _, tl := range gjson.GetBytes(reqs[0], "tools").Array() {
				got = append(got, tl.Get(nameOf).String())
			}
			if strings.Join(got, ",") != tdTarget+",tool_search" {
				t.Errorf("the upstream was declared %v, want [%s tool_search]", got, tdTarget)
			}
			if bytes.Contains(reqs[0], []byte(tdSearchCallID)) || gjson.GetBytes(reqs[0], `input.#(name=="tool_search")`).Exists() ||
				strings.Contains(gjson.GetBytes(reqs[0], "messages.#.tool_calls.#.function.name").Raw, "tool_search") {
				t.Errorf("the upstream's history holds a search")
			}
			histLen := len(gjson.GetBytes(body, "input").Array())
			if chat {
				histLen = len(gjson.GetBytes(body, "messages").Array())
				if n := len(gjson.GetBytes(reqs[0], "messages").Array()); n != histLen {
					t.Errorf("the upstream got %d messages, the client sent %d", n, histLen)
				}
			} else if n := len(gjson.GetBytes(reqs[0], "input").Array()); n != histLen {
				t.Errorf("the upstream got %d input items, the client sent %d", n, histLen)
			}
			assertGrowth(t, before, map[string]float64{tdMHistory: 1, tdMFound: 0, tdMRounds: 0})
		})
	}
	if r := capped.Refused(); len(r) != 0 {
		t.Errorf("the cap refused %v", r)
	}
}

// TestToolsDeferAfterToolsPlanFailsToLoad: tools_defer after tools_plan is
// a configuration error that names both rules and says which goes first.
func TestToolsDeferAfterToolsPlanFailsToLoad(t *testing.T) {
	caddytest.AssertLoadError(t, globalOptions+`
:9080 {
	llm_transform {
		rule tools_plan {
			profile openai_chat
		}
		rule tools_defer
	}
	respond "x"
}
`, "caddyfile", "tools_defer decides which of the client's tools the upstream sees, which tools_plan then fits to the provider; put tools_defer first")
}

// tdChatStream sends a Chat stream request and returns the answer's bytes
// and the openai-go SDK's chunks.
func tdChatStream(t *testing.T, body []byte) ([]byte, []openai.ChatCompletionChunk) {
	t.Helper()
	var tap tdTap
	client := sdkClient()
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{}, option.WithRequestBody("application/json", body), tap.option())
	var chunks []openai.ChatCompletionChunk
	for stream.Next() {
		chunks = append(chunks, stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return tap.Bytes(), chunks
}

// TestToolsDeferChatStreamCarriesTheRole: OpenAI opens a tool-call answer
// with one chunk holding the role, content null and the call's first
// entry. When that call is the search, the client's stream must still get
// the role, in its first chunk, as a Chat stream always has it.
func TestToolsDeferChatStreamCarriesTheRole(t *testing.T) {
	tools := tdTools(t)
	_, _, addr := tdUpstream(t)
	startGateway(t, tdRules, addr)
	out, chunks := tdChatStream(t, tdFirstTurn(tools, true, true))
	tdNoSearch(t, out)
	if len(chunks) == 0 || len(chunks[0].Choices) != 1 || chunks[0].Choices[0].Delta.Role != "assistant" {
		t.Fatalf("the first chunk has no role:\n%s", out)
	}
	if n := bytes.Count(out, []byte(`"role":"assistant"`)); n != 1 {
		t.Errorf("the role comes %d times", n)
	}
}

// TestToolsDeferFailedRoundIsNotRetried: when the search's round fails
// upstream (here a 503 to the request carrying the search's answer), the
// answer ends as if there had been no round: one round, no search
// repeated, and still nothing of the search reaches the client.
func TestToolsDeferFailedRoundIsNotRetried(t *testing.T) {
	tools := tdTools(t)
	p := &fakeprovider.Provider{Strict: true, Reply: func(w http.ResponseWriter, req gjson.Result) {
		if tdAnswered(req)[tdSearchCallID] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"message":"The server is overloaded.","type":"server_error","param":null,"code":null}}`)
			return
		}
		tdScript(w, req)
	}}
	startGateway(t, tdRules, serveUpstream(t, &fakeprovider.ToolCap{Next: p}))
	ctx := context.Background()
	for _, tc := range []struct {
		name         string
		chat, stream bool
	}{
		{"responses/json", false, false},
		{"responses/sse", false, true},
		{"chat/json", true, false},
		{"chat/sse", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := scrapeLLM(t)
			n0 := len(p.Requests())
			body := tdFirstTurn(tools, tc.chat, tc.stream)
			var out []byte
			switch {
			case tc.chat && tc.stream:
				var chunks []openai.ChatCompletionChunk
				out, chunks = tdChatStream(t, body)
				var finishes []string
				for _, c := range chunks {
					for _, ch := range c.Choices {
						if len(ch.Delta.ToolCalls) > 0 {
							t.Errorf("a call reached the client: %s", c.RawJSON())
						}
						if ch.FinishReason != "" {
							finishes = append(finishes, ch.FinishReason)
						}
					}
				}
				if strings.Join(finishes, ",") != "stop" {
					t.Errorf("finishes %v:\n%s", finishes, out)
				}
			case tc.chat:
				var tap tdTap
				var r openai.ChatCompletion
				client := sdkClient()
				if err := client.Post(ctx, "chat/completions", json.RawMessage(body), &r, tap.option()); err != nil {
					t.Fatal(err)
				}
				out = tap.Bytes()
				if len(r.Choices) != 1 || len(r.Choices[0].Message.ToolCalls) != 0 || r.Choices[0].FinishReason != "stop" {
					t.Errorf("answer: %s", out)
				}
			case tc.stream:
				var tap tdTap
				client := sdkClient()
				stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{}, option.WithRequestBody("application/json", body), tap.option())
				last := ""
				for stream.Next() {
					ev := stream.Current()
					last = ev.Type
					if ev.Type == "response.completed" && len(ev.AsResponseCompleted().Response.Output) != 0 {
						t.Errorf("response.completed output: %s", ev.RawJSON())
					}
				}
				if err := stream.Err(); err != nil {
					t.Fatal(err)
				}
				out = tap.Bytes()
				if last != "response.completed" {
					t.Errorf("the stream ends with %s", last)
				}
			default:
				var tap tdTap
				client := sdkClient()
				r, err := client.Responses.New(ctx, responses.ResponseNewParams{}, option.WithRequestBody("application/json", body), tap.option())
				if err != nil {
					t.Fatal(err)
				}
				out = tap.Bytes()
				if len(r.Output) != 0 {
					t.Errorf("output: %s", gjson.Get(r.RawJSON(), "output").Raw)
				}
			}
			tdNoSearch(t, out)
			reqs := p.Requests()[n0:]
			if len(reqs) != 2 {
				for i, q := range reqs {
					hist := gjson.GetBytes(q, "input")
					if !hist.Exists() {
						hist = gjson.GetBytes(q, "messages")
					}
					t.Logf("request %d's history: %s", i, hist.Raw)
				}
				t.Errorf("the upstream got %d requests, want 2: the request and the one round", len(reqs))
			}
			assertGrowth(t, before, map[string]float64{tdMRoundsFailed: 1, tdMRounds: 0, tdMFound: 1})
		})
	}
}

// TestToolsDeferClientLeavingAtDone: a Chat client that closes its
// connection as soon as it has read [DONE] (as the openai-go SDK does) got
// the whole answer: the search's round was answered, and counts as such.
func TestToolsDeferClientLeavingAtDone(t *testing.T) {
	tools := tdTools(t)
	_, _, addr := tdUpstream(t)
	startGateway(t, tdRules, addr)
	body := tdFirstTurn(tools, true, true)
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	before := scrapeLLM(t)
	const n = 20
	for i := 0; i < n; i++ {
		resp, err := hc.Post(gatewayURL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			got.WriteString(sc.Text() + "\n")
			if sc.Text() == "data: [DONE]" {
				break
			}
		}
		resp.Body.Close() // at once, as the SDK does
		if !bytes.HasSuffix(got.Bytes(), []byte("data: [DONE]\n")) || !bytes.Contains(got.Bytes(), []byte(`"name":"`+tdTarget+`"`)) {
			t.Fatalf("answer %d:\n%s", i, got.Bytes())
		}
		tdNoSearch(t, got.Bytes())
	}
	assertGrowth(t, before, map[string]float64{tdMFound: n, tdMRounds: n, tdMRoundsFailed: 0})
}
