package integration

// tools_preflight through a real Caddy: the upstream's first answer calls
// read_file with {"limit":"10"} (a wrong type and a missing required
// member), the gateway asks the model again in a hidden round through
// reverse_proxy, and the client sees one answer holding the valid call of
// the second answer. The scripted upstreams write and flush every event
// on its own, so the rounds go through real reads.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

const (
	pfSchema = `{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"],"additionalProperties":false}`

	pfBad  = `{"limit":"10"}`                // wrong type at /limit, path missing
	pfGood = `{"path":"a.txt","limit":10}`   // valid
	pfBad2 = `{"path":"a.txt","limit":"10"}` // still wrong at /limit

	// pfReask is what the re-ask tells the model about pfBad.
	pfReask = "The arguments of the call to tool 'read_file' do not match the tool's parameters schema (2 problems):\n" +
		"- at the root (schema /required): missing property 'path'\n" +
		"- at /limit (schema /properties/limit/type): expected integer, but got string\n" +
		"Call 'read_file' again with corrected arguments."

	// pfInvalidMsg is the client's error for pfBad2 under on_failure error.
	pfInvalidMsg = `the model's call to "read_file" is invalid and could not be repaired: ` +
		`The arguments of the call to tool 'read_file' do not match the tool's parameters schema (1 problem):`

	pfUsage1   = `{"input_tokens":100,"input_tokens_details":{"cached_tokens":40},"output_tokens":20,"output_tokens_details":{"reasoning_tokens":5},"total_tokens":120}`
	pfUsage2   = `{"input_tokens":150,"input_tokens_details":{"cached_tokens":100},"output_tokens":10,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":160}`
	pfUsageSum = `{"input_tokens":250,"input_tokens_details":{"cached_tokens":140},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":7},"total_tokens":280}`

	pfChatUsage1   = `{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":40},"completion_tokens_details":{"reasoning_tokens":5}}`
	pfChatUsage2   = `{"prompt_tokens":150,"completion_tokens":10,"total_tokens":160,"prompt_tokens_details":{"cached_tokens":100},"completion_tokens_details":{"reasoning_tokens":2}}`
	pfChatUsageSum = `{"prompt_tokens":250,"completion_tokens":30,"total_tokens":280,"prompt_tokens_details":{"cached_tokens":140},"completion_tokens_details":{"reasoning_tokens":7}}`

	// DeepSeek's usage: cache hits in prompt_cache_hit_tokens.
	pfDSUsage1 = `{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_cache_hit_tokens":40,"prompt_cache_miss_tokens":60,"completion_tokens_details":{"reasoning_tokens":5}}`
	pfDSUsage2 = `{"prompt_tokens":150,"completion_tokens":10,"total_tokens":160,"prompt_cache_hit_tokens":100,"prompt_cache_miss_tokens":50,"completion_tokens_details":{"reasoning_tokens":2}}`
	// ... as the bridge maps and the join sums them.
	pfDSUsageSum = `{"input_tokens":250,"input_tokens_details":{"cached_tokens":140,"cache_write_tokens":0},"output_tokens":30,"output_tokens_details":{"reasoning_tokens":7},"total_tokens":280}`

	pfDSModel = "deepseek-v4-pro"
)

// The metrics the tests read.
const (
	pfMRoundsAnswered   = `caddy_llm_transform_rounds_total{outcome="answered",reason="repair"}`
	pfMRoundsFailed     = `caddy_llm_transform_rounds_total{outcome="failed",reason="repair"}`
	pfMRoundsClientGone = `caddy_llm_transform_rounds_total{outcome="client_gone",reason="repair"}`
	pfMInvalid          = `caddy_llm_transform_preflight_invalid_total{reason="schema"}`
	pfMRepaired         = `caddy_llm_transform_preflight_repaired_total{reason="reask"}`
	pfMPass             = `caddy_llm_transform_preflight_failed_total{reason="pass"}`
	pfMDrop             = `caddy_llm_transform_preflight_failed_total{reason="drop"}`
	pfMError            = `caddy_llm_transform_preflight_failed_total{reason="error"}`
)

func pfQ(s string) string { b, _ := json.Marshal(s); return string(b) }

// --- the scripted upstream ----------------------------------------------------

// pfStep is one scripted answer: json for a JSON request, sse (frames,
// each written and flushed on its own) for a streaming one.
type pfStep struct {
	json   string
	sse    []string
	status int  // not 0 nor 200: this status, json as the body
	hang   bool // hold the request until its context ends
}

// pfUpstream answers its n-th request with steps[n] and keeps every body.
type pfUpstream struct {
	mu       sync.Mutex
	steps    []pfStep
	reqs     [][]byte
	hung     chan int // a hanging request started
	canceled chan int // a hanging request's context ended
}

func newPFUpstream() *pfUpstream {
	return &pfUpstream{hung: make(chan int, 16), canceled: make(chan int, 16)}
}

// script replaces the steps and forgets the requests.
func (u *pfUpstream) script(steps ...pfStep) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.steps, u.reqs = steps, nil
}

func (u *pfUpstream) requests() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([][]byte(nil), u.reqs...)
}

func (u *pfUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	u.serve(r.Context(), w, body)
}

// reply is fakeprovider.Provider's Reply: the strict provider's checks
// passed, the script answers.
func (u *pfUpstream) reply(w http.ResponseWriter, req gjson.Result) {
	u.serve(context.Background(), w, []byte(req.Raw))
}

func (u *pfUpstream) serve(ctx context.Context, w http.ResponseWriter, body []byte) {
	u.mu.Lock()
	n := len(u.reqs)
	u.reqs = append(u.reqs, bytes.Clone(body))
	var st pfStep
	ok := n < len(u.steps)
	if ok {
		st = u.steps[n]
	}
	u.mu.Unlock()
	switch {
	case !ok:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"error":{"message":"no answer scripted for request %d","type":"server_error","param":null,"code":null}}`, n)
	case st.hang:
		u.hung <- n
		select {
		case <-ctx.Done():
			u.canceled <- n
		case <-time.After(8 * time.Second):
		}
	case st.status != 0 && st.status != http.StatusOK:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st.status)
		io.WriteString(w, st.json)
	case gjson.GetBytes(body, "stream").Bool():
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		for _, f := range st.sse {
			io.WriteString(w, f)
			if err := rc.Flush(); err != nil {
				return
			}
		}
	default:
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, st.json)
	}
}

// --- Responses answers ----------------------------------------------------------

// pfRSAnswer is one scripted Responses answer: a message with text, then a
// call of read_file.
type pfRSAnswer struct{ n, text, fc, call, args, usage string }

func (a pfRSAnswer) msgItem(status string) string {
	content := `[]`
	if status == "completed" {
		content = `[{"type":"output_text","text":` + pfQ(a.text) + `,"annotations":[]}]`
	}
	return `{"type":"message","id":"msg_` + a.n + `","status":"` + status + `","role":"assistant","content":` + content + `}`
}

func (a pfRSAnswer) callItem(status string) string {
	args := a.args
	if status != "completed" {
		args = ""
	}
	return `{"type":"function_call","id":"` + a.fc + `","call_id":"` + a.call + `","name":"read_file","arguments":` + pfQ(args) + `,"status":"` + status + `"}`
}

// pfRSResponse is a Response object with id resp_<n>.
func pfRSResponse(n, status, usage string, items ...string) string {
	return `{"id":"resp_` + n + `","object":"response","created_at":1,"status":"` + status + `","model":"m","output":[` +
		strings.Join(items, ",") + `],"usage":` + usage + `}`
}

func (a pfRSAnswer) json() string {
	return pfRSResponse(a.n, "completed", a.usage, a.msgItem("completed"), a.callItem("completed"))
}

// events are the answer's event data, numbered as the upstream numbers
// them: 0 created … 7 the message done, 8 the call added … 12 the call
// done, 13 completed.
func (a pfRSAnswer) events() []string {
	msg := `"item_id":"msg_` + a.n + `","output_index":0,"content_index":0`
	call := `"item_id":"` + a.fc + `","output_index":1`
	half := len(a.args) / 2
	evs := []string{
		`{"type":"response.created","response":` + pfRSResponse(a.n, "in_progress", "null") + `}`,
		`{"type":"response.in_progress","response":` + pfRSResponse(a.n, "in_progress", "null") + `}`,
		`{"type":"response.output_item.added","output_index":0,"item":` + a.msgItem("in_progress") + `}`,
		`{"type":"response.content_part.added",` + msg + `,"part":{"type":"output_text","text":"","annotations":[]}}`,
		`{"type":"response.output_text.delta",` + msg + `,"delta":` + pfQ(a.text) + `,"logprobs":[]}`,
		`{"type":"response.output_text.done",` + msg + `,"text":` + pfQ(a.text) + `,"logprobs":[]}`,
		`{"type":"response.content_part.done",` + msg + `,"part":{"type":"output_text","text":` + pfQ(a.text) + `,"annotations":[]}}`,
		`{"type":"response.output_item.done","output_index":0,"item":` + a.msgItem("completed") + `}`,
		`{"type":"response.output_item.added","output_index":1,"item":` + a.callItem("in_progress") + `}`,
		`{"type":"response.function_call_arguments.delta",` + call + `,"delta":` + pfQ(a.args[:half]) + `}`,
		`{"type":"response.function_call_arguments.delta",` + call + `,"delta":` + pfQ(a.args[half:]) + `}`,
		`{"type":"response.function_call_arguments.done",` + call + `,"arguments":` + pfQ(a.args) + `}`,
		`{"type":"response.output_item.done","output_index":1,"item":` + a.callItem("completed") + `}`,
		`{"type":"response.completed","response":` + pfRSResponse(a.n, "completed", a.usage, a.msgItem("completed"), a.callItem("completed")) + `}`,
	}
	return pfNumber(evs)
}

// sse frames the events as OpenAI does.
func (a pfRSAnswer) sse() []string {
	var out []string
	for _, e := range a.events() {
		out = append(out, "event: "+gjson.Get(e, "type").String()+"\ndata: "+e+"\n\n")
	}
	return out
}

func (a pfRSAnswer) step() pfStep { return pfStep{json: a.json(), sse: a.sse()} }

// pfNumber sets each event's sequence_number to its place in the list.
func pfNumber(evs []string) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(e), &m); err != nil {
			panic(fmt.Sprintf("event %d: %v: %s", i, err, e))
		}
		m["sequence_number"] = json.RawMessage(fmt.Sprint(i))
		b, _ := json.Marshal(m)
		out[i] = string(b)
	}
	return out
}

var (
	pfRS1     = pfRSAnswer{"1", "Reading.", "fc_1", "call_1", pfBad, pfUsage1}
	pfRS2     = pfRSAnswer{"2", "Sorry.", "fc_2", "call_2", pfGood, pfUsage2}
	pfRS2Bad  = pfRSAnswer{"2", "Sorry.", "fc_2", "call_2", pfBad2, pfUsage2}
	pfRS1Good = pfRSAnswer{"1", "Reading.", "fc_1", "call_1", pfGood, pfUsage1}
)

func pfResponsesRequest(stream bool) string {
	return `{"model":"m","stream":` + fmt.Sprint(stream) + `,"input":"read a.txt","tools":[{"type":"function","name":"read_file","parameters":` + pfSchema + `}]}`
}

func pfParams(model string) responses.ResponseNewParams {
	var schema map[string]any
	_ = json.Unmarshal([]byte(pfSchema), &schema)
	return responses.ResponseNewParams{
		Model: model,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("read a.txt")},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("read_file", schema, false)},
	}
}

// --- Chat answers -----------------------------------------------------------------

// pfChAnswer is one scripted Chat answer: text (and reasoning), then a call
// of read_file.
type pfChAnswer struct{ n, model, reasoning, text, call, args, usage string }

func (a pfChAnswer) head() string {
	return `{"id":"chatcmpl-` + a.n + `","object":"chat.completion.chunk","created":1,"model":"` + a.model + `",`
}

// chunks are the data of the answer's stream, [DONE] last.
func (a pfChAnswer) chunks() []string {
	h := a.head()
	half := len(a.args) / 2
	first := `{"role":"assistant","content":""}`
	if a.reasoning != "" {
		first = `{"role":"assistant","content":null,"reasoning_content":` + pfQ(a.reasoning) + `}`
	}
	return []string{
		h + `"choices":[{"index":0,"delta":` + first + `,"finish_reason":null}]}`,
		h + `"choices":[{"index":0,"delta":{"content":` + pfQ(a.text) + `},"finish_reason":null}]}`,
		h + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"` + a.call + `","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}`,
		h + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":` + pfQ(a.args[:half]) + `}}]},"finish_reason":null}]}`,
		h + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":` + pfQ(a.args[half:]) + `}}]},"finish_reason":null}]}`,
		h + `"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		h + `"choices":[],"usage":` + a.usage + `}`,
		`[DONE]`,
	}
}

func (a pfChAnswer) json() string {
	reasoning := ""
	if a.reasoning != "" {
		reasoning = `,"reasoning_content":` + pfQ(a.reasoning)
	}
	return `{"id":"chatcmpl-` + a.n + `","object":"chat.completion","created":1,"model":"` + a.model + `","choices":[{"index":0,"message":{"role":"assistant","content":` +
		pfQ(a.text) + reasoning + `,"tool_calls":[` + a.toolCall() + `]},"finish_reason":"tool_calls"}],"usage":` + a.usage + `}`
}

func (a pfChAnswer) toolCall() string {
	return `{"id":"` + a.call + `","type":"function","function":{"name":"read_file","arguments":` + pfQ(a.args) + `}}`
}

func (a pfChAnswer) sse() []string {
	var out []string
	for _, c := range a.chunks() {
		out = append(out, "data: "+c+"\n\n")
	}
	return out
}

func (a pfChAnswer) step() pfStep { return pfStep{json: a.json(), sse: a.sse()} }

var (
	pfCh1     = pfChAnswer{"1", "m", "", "Reading.", "call_1", pfBad, pfChatUsage1}
	pfCh2     = pfChAnswer{"2", "m", "", "Sorry.", "call_2", pfGood, pfChatUsage2}
	pfCh2Bad  = pfChAnswer{"2", "m", "", "Sorry.", "call_2", pfBad2, pfChatUsage2}
	pfCh1Good = pfChAnswer{"1", "m", "", "Reading.", "call_1", pfGood, pfChatUsage1}

	pfDS1     = pfChAnswer{"pfDS1", pfDSModel, "Think 1.", "Reading.", "call_1", pfBad, pfDSUsage1}
	pfDS2     = pfChAnswer{"pfDS2", pfDSModel, "Think 2.", "Sorry.", "call_2", pfGood, pfDSUsage2}
	pfDS1Good = pfChAnswer{"pfDS1", pfDSModel, "Think 1.", "Reading.", "call_1", pfGood, pfDSUsage1}
)

func pfChatRequest(stream bool) string {
	opts := ""
	if stream {
		opts = `,"stream_options":{"include_usage":true}`
	}
	return `{"model":"m","stream":` + fmt.Sprint(stream) + opts + `,"messages":[{"role":"user","content":"read a.txt"}],"tools":[{"type":"function","function":{"name":"read_file","parameters":` + pfSchema + `}}]}`
}

// --- client helpers ---------------------------------------------------------------

var pfClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 15 * time.Second}

// pfPost sends body to the gateway and returns the response and its body.
func pfPost(t *testing.T, path, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := pfClient.Post(gatewayURL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp, b
}

// pfCanon is a JSON text with its keys sorted.
func pfCanon(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// pfJSONEq reports whether got is the JSON value want, and says why not.
func pfJSONEq(t *testing.T, what string, got []byte, want string) bool {
	t.Helper()
	var g any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: not JSON (%v): %s", what, err, got)
		return false
	}
	gb, _ := json.Marshal(g)
	if w := pfCanon(t, want); string(gb) != w {
		t.Errorf("%s:\n got %s\nwant %s", what, gb, w)
		return false
	}
	return true
}

// pfEvents checks a Responses stream event by event against want (event
// data, the name being the type), and that nothing follows.
func pfEvents(t *testing.T, what string, raw []byte, want []string) {
	t.Helper()
	if !bytes.HasSuffix(raw, []byte("\n\n")) {
		t.Errorf("%s: the stream does not end with a whole event: %q", what, raw[max(0, len(raw)-80):])
	}
	evs := parseEvents(t, string(raw))
	n := max(len(evs), len(want))
	for i := 0; i < n; i++ {
		switch {
		case i >= len(evs):
			t.Errorf("%s: event %d missing, want %s", what, i, want[i])
			continue
		case i >= len(want):
			t.Errorf("%s: event %d is one too many: %s %s", what, i, evs[i].name, evs[i].data)
			continue
		}
		if typ := gjson.Get(evs[i].data, "type").String(); evs[i].name != "" && evs[i].name != typ {
			t.Errorf("%s: event %d named %q has type %q", what, i, evs[i].name, typ)
		}
		pfJSONEq(t, fmt.Sprintf("%s: event %d", what, i), []byte(evs[i].data), want[i])
	}
	if t.Failed() {
		t.Logf("%s: the client's stream:\n%s", what, raw)
	}
}

// pfChunks checks a Chat stream chunk by chunk against want ("[DONE]"
// for the terminator), and that nothing follows.
func pfChunks(t *testing.T, what string, raw []byte, want []string) {
	t.Helper()
	var got []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			got = append(got, d)
		} else if sc.Text() != "" {
			t.Errorf("%s: line %q in a Chat stream", what, sc.Text())
		}
	}
	if len(got) == 0 {
		t.Fatalf("%s: no chunks in %q", what, raw)
	}
	n := max(len(got), len(want))
	for i := 0; i < n; i++ {
		switch {
		case i >= len(got):
			t.Errorf("%s: chunk %d missing, want %s", what, i, want[i])
		case i >= len(want):
			t.Errorf("%s: chunk %d is one too many: %s", what, i, got[i])
		case want[i] == "[DONE]" || got[i] == "[DONE]":
			if got[i] != want[i] {
				t.Errorf("%s: chunk %d is %s, want %s", what, i, got[i], want[i])
			}
		default:
			pfJSONEq(t, fmt.Sprintf("%s: chunk %d", what, i), []byte(got[i]), want[i])
		}
	}
	if t.Failed() {
		t.Logf("%s: the client's stream:\n%s", what, raw)
	}
}

// pfWithMember returns the JSON object doc with member key set to v.
func pfWithMember(t *testing.T, doc []byte, key, v string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, doc)
	}
	m[key] = json.RawMessage(v)
	b, _ := json.Marshal(m)
	return string(b)
}

// pfAssertResponsesReask checks the upstream's second request: the first
// with the first answer's turn, the bad call as made, and its output
// naming both problems appended to the input.
func pfAssertResponsesReask(t *testing.T, what string, reqs [][]byte) {
	t.Helper()
	if len(reqs) != 2 {
		t.Fatalf("%s: the upstream got %d requests, want 2", what, len(reqs))
	}
	want := pfWithMember(t, reqs[0], "input", `[{"role":"user","content":"read a.txt"},`+
		pfRS1.msgItem("completed")+`,`+pfRS1.callItem("completed")+`,`+
		`{"type":"function_call_output","call_id":"call_1","output":`+pfQ(pfReask)+`}]`)
	pfJSONEq(t, what+": the re-ask", reqs[1], want)
	out := gjson.GetBytes(reqs[1], "input.3.output").String()
	if !strings.Contains(out, "at /limit (schema /properties/limit/type)") || !strings.Contains(out, "at the root (schema /required)") {
		t.Errorf("%s: the re-ask's output does not name both places: %q", what, out)
	}
}

// pfAssertChatReask is pfAssertResponsesReask for Chat: an assistant
// message with the bad call and a tool message naming both problems.
func pfAssertChatReask(t *testing.T, what string, reqs [][]byte, assistant string) {
	t.Helper()
	if len(reqs) != 2 {
		t.Fatalf("%s: the upstream got %d requests, want 2", what, len(reqs))
	}
	msgs := gjson.GetBytes(reqs[0], "messages").Raw
	want := pfWithMember(t, reqs[0], "messages", msgs[:len(msgs)-1]+","+assistant+
		`,{"role":"tool","tool_call_id":"call_1","content":`+pfQ(pfReask)+`}]`)
	pfJSONEq(t, what+": the re-ask", reqs[1], want)
	out := gjson.GetBytes(reqs[1], "messages.#(role==\"tool\").content").String()
	if !strings.Contains(out, "at /limit (schema /properties/limit/type)") || !strings.Contains(out, "at the root (schema /required)") {
		t.Errorf("%s: the tool message does not name both places: %q", what, out)
	}
}

var pfExplainRounds = regexp.MustCompile(`; rounds=repair:\d+ms;`)

// startPFJSON loads a JSON config: the llm_transform handler (its JSON
// members but "handler") in front of reverse_proxy to up.
func startPFJSON(t *testing.T, handler, up string) {
	t.Helper()
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(`{
	"admin": {"listen": "`+adminAddr+`"},
	"apps": {"http": {"http_port": 9080, "https_port": 9443, "grace_period": 1, "servers": {"gw": {
		"listen": [":9080"],
		"automatic_https": {"disable": true},
		"routes": [{"handle": [
			{"handler": "llm_transform", `+handler+`},
			{"handler": "reverse_proxy", "upstreams": [{"dial": "`+up+`"}]}
		]}]
	}}}, "pki": {"certificate_authorities": {"local": {"install_trust": false}}}}
}`, "json")
}

// --- expectations -----------------------------------------------------------------

// pfRSClientStream is what a Responses client sees when the second answer's
// call (or none) follows the first answer's text: the first answer up to
// its message, then the second answer's call events, then one completed
// event holding the items seen and the usage given.
func pfRSClientStream(second *pfRSAnswer, usage string) []string {
	evs := pfRS1.events()[:8]
	items := []string{pfRS1.msgItem("completed")}
	if second != nil {
		evs = append(evs, second.events()[8:13]...)
		items = append(items, second.callItem("completed"))
	}
	evs = append(evs, `{"type":"response.completed","response":`+pfRSResponse("1", "completed", usage, items...)+`}`)
	return pfNumber(evs)
}

// pfChClientStream is pfRSClientStream's Chat twin: the first answer's role
// and text, the second's call (or none) under the first's id, one finish,
// one usage chunk, [DONE].
func pfChClientStream(second *pfChAnswer, finish, usage string) []string {
	c := pfCh1.chunks()
	out := []string{c[0], c[1]}
	if second != nil {
		for _, s := range second.chunks()[2:5] {
			out = append(out, strings.Replace(s, `"id":"chatcmpl-2"`, `"id":"chatcmpl-1"`, 1))
		}
	}
	return append(out,
		pfCh1.head()+`"choices":[{"index":0,"delta":{},"finish_reason":"`+finish+`"}]}`,
		pfCh1.head()+`"choices":[],"usage":`+usage+`}`,
		"[DONE]")
}

// pfChClientJSON is the joined Chat answer.
func pfChClientJSON(calls, finish, usage string) string {
	tc := ""
	if calls != "" {
		tc = `,"tool_calls":[` + calls + `]`
	}
	return `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Reading."` +
		tc + `},"finish_reason":"` + finish + `"}],"usage":` + usage + `}`
}

func pfErrorJSON(msg string) string {
	return `{"error":{"message":` + pfQ(msg) + `,"type":"server_error","param":null,"code":"tool_call_invalid"}}`
}

// --- 1. Responses ---------------------------------------------------------------

// TestPreflightResponsesReask: a Responses client against a Responses
// upstream. The SDK and raw HTTP see only the second answer's valid call,
// under its own name and call id, in one answer with the first answer's
// id and the usage of both; the upstream's second request carries the bad
// call as made and an output naming both schema places.
func TestPreflightResponsesReask(t *testing.T) {
	u := newPFUpstream()
	startGateway(t, "\t\texplain\n\t\trule tools_preflight", serveUpstream(t, u))
	before := scrapeLLM(t)

	t.Run("SDK JSON", func(t *testing.T) {
		u.script(pfRS1.step(), pfRS2.step())
		client := sdkClient()
		resp, err := client.Responses.New(context.Background(), pfParams("m"))
		if err != nil {
			t.Fatal(err)
		}
		pfAssertResponsesReask(t, "SDK JSON", u.requests())
		if resp.ID != "resp_1" || resp.Status != "completed" || len(resp.Output) != 2 {
			t.Fatalf("response %s", resp.RawJSON())
		}
		if m := resp.Output[0]; m.Type != "message" || m.AsMessage().ID != "msg_1" || m.AsMessage().Content[0].Text != "Reading." {
			t.Errorf("output[0] %s", m.RawJSON())
		}
		c := resp.Output[1].AsFunctionCall()
		if resp.Output[1].Type != "function_call" || c.ID != "fc_2" || c.CallID != "call_2" || c.Name != "read_file" || c.Arguments != pfGood {
			t.Errorf("output[1] %s", resp.Output[1].RawJSON())
		}
		us := resp.Usage
		if us.InputTokens != 250 || us.InputTokensDetails.CachedTokens != 140 || us.OutputTokens != 30 ||
			us.OutputTokensDetails.ReasoningTokens != 7 || us.TotalTokens != 280 {
			t.Errorf("usage %s", us.RawJSON())
		}
	})

	t.Run("raw JSON", func(t *testing.T) {
		u.script(pfRS1.step(), pfRS2.step())
		resp, body := pfPost(t, "/v1/responses", pfResponsesRequest(false))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		pfAssertResponsesReask(t, "raw JSON", u.requests())
		pfJSONEq(t, "raw JSON", body, pfRSResponse("1", "completed", pfUsageSum, pfRS1.msgItem("completed"), pfRS2.callItem("completed")))
		if h := resp.Header.Get("X-LLM-Transform-Explain"); !pfExplainRounds.MatchString(h) {
			t.Errorf("explain header %q lists no repair round", h)
		}
		if cl := resp.Header.Get("Content-Length"); cl != fmt.Sprint(len(body)) {
			t.Errorf("Content-Length %q for %d bytes", cl, len(body))
		}
	})

	t.Run("SDK stream", func(t *testing.T) {
		u.script(pfRS1.step(), pfRS2.step())
		evs, acc := sdkStream(t, pfParams("m"))
		pfAssertResponsesReask(t, "SDK stream", u.requests())
		terminal := assertResponsesGrammar(t, evs)
		var created, completed, calls int
		for _, ev := range evs {
			switch ev.name {
			case "response.created":
				created++
			case "response.completed":
				completed++
			case "response.output_item.added":
				if gjson.Get(ev.data, "item.type").String() == "function_call" {
					calls++
				}
			}
		}
		if created != 1 || completed != 1 || calls != 1 {
			t.Errorf("created %d, completed %d, calls added %d; want 1 each", created, completed, calls)
		}
		final, err := acc.ReconstructedResponse()
		if err != nil {
			t.Fatal(err)
		}
		if final.ID != "resp_1" || len(final.Output) != 2 {
			t.Fatalf("final response %s", final.RawJSON())
		}
		c := final.Output[1].AsFunctionCall()
		if c.ID != "fc_2" || c.CallID != "call_2" || c.Name != "read_file" || c.Arguments != pfGood {
			t.Errorf("final call %s", final.Output[1].RawJSON())
		}
		pfJSONEq(t, "SDK stream: usage", []byte(terminal.Get("response.usage").Raw), pfUsageSum)
	})

	t.Run("raw stream", func(t *testing.T) {
		u.script(pfRS1.step(), pfRS2.step())
		resp, body := pfPost(t, "/v1/responses", pfResponsesRequest(true))
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("status %d, %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		pfAssertResponsesReask(t, "raw stream", u.requests())
		pfEvents(t, "raw stream", body, pfRSClientStream(&pfRS2, pfUsageSum))
		if bytes.Contains(body, []byte("Sorry.")) || bytes.Contains(body, []byte("fc_1")) || bytes.Contains(body, []byte("resp_2")) {
			t.Errorf("the client saw the hidden round's text, the bad call or the second response")
		}
		// The header went out before the round; the trailer lists it.
		if h := resp.Header.Get("X-LLM-Transform-Explain"); h == "" || pfExplainRounds.MatchString(h) {
			t.Errorf("explain header %q: want one sent before the round", h)
		}
		if tr := resp.Trailer.Get("X-LLM-Transform-Explain"); !pfExplainRounds.MatchString(tr) {
			t.Errorf("explain trailer %q lists no repair round", tr)
		}
	})

	if t.Failed() {
		return
	}
	assertGrowth(t, before, map[string]float64{pfMRoundsAnswered: 4, pfMRoundsFailed: 0, pfMInvalid: 4, pfMRepaired: 4, pfMPass: 0})
}

// --- 2. Chat -----------------------------------------------------------------------

// TestPreflightChatReask: a Chat client against a Chat upstream, JSON and
// SSE with include_usage: one id, the role once, the call at index 0, one
// finish_reason "tool_calls", one usage chunk with the sum, [DONE] last;
// the second request carries the assistant's bad call and a tool message
// naming both places.
func TestPreflightChatReask(t *testing.T) {
	u := newPFUpstream()
	startGateway(t, "\t\trule tools_preflight", serveUpstream(t, u))
	before := scrapeLLM(t)
	assistant := `{"role":"assistant","content":"Reading.","tool_calls":[` + pfCh1.toolCall() + `]}`

	t.Run("SDK JSON", func(t *testing.T) {
		u.script(pfCh1.step(), pfCh2.step())
		client := sdkClient()
		resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{},
			option.WithRequestBody("application/json", []byte(pfChatRequest(false))))
		if err != nil {
			t.Fatal(err)
		}
		pfAssertChatReask(t, "SDK JSON", u.requests(), assistant)
		pfJSONEq(t, "SDK JSON", []byte(resp.RawJSON()), pfChClientJSON(pfCh2.toolCall(), "tool_calls", pfChatUsageSum))
		if len(resp.Choices) != 1 || len(resp.Choices[0].Message.ToolCalls) != 1 || resp.Choices[0].Message.ToolCalls[0].ID != "call_2" {
			t.Errorf("SDK reads %s", resp.RawJSON())
		}
	})

	t.Run("SDK stream", func(t *testing.T) {
		u.script(pfCh1.step(), pfCh2.step())
		client := sdkClient()
		stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{},
			option.WithRequestBody("application/json", []byte(pfChatRequest(true))))
		var acc openai.ChatCompletionAccumulator
		ids := map[string]bool{}
		var roles, finishes, usages int
		for stream.Next() {
			ch := stream.Current()
			acc.AddChunk(ch)
			ids[ch.ID] = true
			for _, c := range ch.Choices {
				if c.Delta.Role != "" {
					roles++
				}
				if c.FinishReason != "" {
					finishes++
				}
			}
			if ch.JSON.Usage.Valid() && ch.Usage.TotalTokens > 0 {
				usages++
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		pfAssertChatReask(t, "SDK stream", u.requests(), assistant)
		if len(ids) != 1 || !ids["chatcmpl-1"] || roles != 1 || finishes != 1 || usages != 1 {
			t.Errorf("ids %v, roles %d, finishes %d, usage chunks %d", ids, roles, finishes, usages)
		}
		msg := acc.Choices[0].Message
		if msg.Content != "Reading." || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != "call_2" ||
			msg.ToolCalls[0].Function.Arguments != pfGood || acc.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("accumulated %+v", acc.Choices[0])
		}
		if acc.Usage.PromptTokens != 250 || acc.Usage.CompletionTokens != 30 || acc.Usage.TotalTokens != 280 {
			t.Errorf("usage %+v", acc.Usage)
		}
	})

	t.Run("raw stream", func(t *testing.T) {
		u.script(pfCh1.step(), pfCh2.step())
		resp, body := pfPost(t, "/v1/chat/completions", pfChatRequest(true))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		pfAssertChatReask(t, "raw stream", u.requests(), assistant)
		pfChunks(t, "raw stream", body, pfChClientStream(&pfCh2, "tool_calls", pfChatUsageSum))
	})

	if t.Failed() {
		return
	}
	assertGrowth(t, before, map[string]float64{pfMInvalid: 3, pfMRepaired: 3})
	// The SDK closes the stream at [DONE], which may come before
	// reverse_proxy is done with the round: the round then counts as
	// failed (the client gone), though its answer was delivered whole.
	after := scrapeLLM(t)
	answered, failed := after[pfMRoundsAnswered]-before[pfMRoundsAnswered], after[pfMRoundsFailed]-before[pfMRoundsFailed]
	if answered+failed != 3 || answered < 2 {
		t.Errorf("rounds answered %v, failed %v; want 3 rounds, the two raw exchanges' answered", answered, failed)
	}
}

// --- 3. responses_to_chat ----------------------------------------------------

const pfBridgeRules = `		rule tools_preflight
		rule responses_to_chat {
			profile deepseek
		}`

// pfDSUpstream is the strict DeepSeek-like Chat provider answering with
// the script: it refuses (400) any request a strict provider would.
func pfDSUpstream(t *testing.T) (*pfUpstream, *fakeprovider.Provider, string) {
	u := newPFUpstream()
	strict := &fakeprovider.Provider{Thinking: fakeprovider.DeepSeek, Reply: u.reply}
	return u, strict, serveUpstream(t, strict)
}

// pfAssertBridgedReask checks the strict provider answered both requests
// (it refuses what a strict provider would) and the second is the first
// with the first answer's assistant turn (its reasoning replayed) and a
// tool message naming both places.
func pfAssertBridgedReask(t *testing.T, what string, u *pfUpstream, strict *fakeprovider.Provider, before int) {
	t.Helper()
	all := strict.Requests()
	if n, m := len(all)-before, len(u.requests()); n != 2 || m != 2 {
		t.Fatalf("%s: the strict provider got %d requests and answered %d, want 2 and 2; last: %s", what, n, m, all[len(all)-1])
	}
	pfAssertChatReask(t, what, u.requests(),
		`{"role":"assistant","content":"Reading.","reasoning_content":"Think 1.","tool_calls":[`+pfDS1.toolCall()+`]}`)
}

// TestPreflightBridgedReask: a Responses client behind responses_to_chat
// on a strict Chat provider: the client sees what it sees in
// TestPreflightResponsesReask (one created, one completed, the second
// answer's call only, usage summed, gap-free numbers, dense indexes), and
// the provider's second request is a valid Chat request carrying the bad
// call and a tool message naming both places.
func TestPreflightBridgedReask(t *testing.T) {
	u, strict, addr := pfDSUpstream(t)
	startGateway(t, pfBridgeRules, addr)

	t.Run("SDK stream", func(t *testing.T) {
		u.script(pfDS1.step(), pfDS2.step())
		seen := len(strict.Requests())
		evs, acc := sdkStream(t, pfParams(pfDSModel))
		pfAssertBridgedReask(t, "SDK stream", u, strict, seen)
		terminal := assertResponsesGrammar(t, evs)
		var created, completed int
		var respID string
		for _, ev := range evs {
			switch ev.name {
			case "response.created":
				created++
				respID = gjson.Get(ev.data, "response.id").String()
			case "response.completed":
				completed++
			}
			if strings.Contains(ev.data, "Think 2.") || strings.Contains(ev.data, "Sorry.") || strings.Contains(ev.data, "call_1") {
				t.Errorf("the client saw the hidden round or the bad call: %s", ev.data)
			}
		}
		if created != 1 || completed != 1 || terminal.Get("type").String() != "response.completed" || terminal.Get("response.id").String() != respID {
			t.Errorf("created %d, completed %d, terminal %s (created %s)", created, completed, terminal.Get("type"), respID)
		}
		final, err := acc.ReconstructedResponse()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range final.Output {
			switch it.Type {
			case "reasoning":
				got = append(got, "reasoning:"+it.AsReasoning().Content[0].Text)
			case "message":
				got = append(got, "message:"+it.AsMessage().Content[0].Text)
			case "function_call":
				c := it.AsFunctionCall()
				got = append(got, "function_call:"+c.CallID+":"+c.Name+":"+c.Arguments)
			default:
				got = append(got, it.Type)
			}
		}
		want := []string{"reasoning:Think 1.", "message:Reading.", "function_call:call_2:read_file:" + pfGood}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("output\n got %q\nwant %q", got, want)
		}
		pfJSONEq(t, "SDK stream: usage", []byte(terminal.Get("response.usage").Raw), pfDSUsageSum)
	})

	t.Run("SDK JSON", func(t *testing.T) {
		u.script(pfDS1.step(), pfDS2.step())
		seen := len(strict.Requests())
		client := sdkClient()
		resp, err := client.Responses.New(context.Background(), pfParams(pfDSModel))
		if err != nil {
			t.Fatal(err)
		}
		pfAssertBridgedReask(t, "SDK JSON", u, strict, seen)
		var types []string
		for _, it := range resp.Output {
			types = append(types, it.Type)
		}
		if strings.Join(types, ",") != "reasoning,message,function_call" || !strings.HasPrefix(resp.ID, "resp_") {
			t.Fatalf("response %s", resp.RawJSON())
		}
		c := resp.Output[2].AsFunctionCall()
		if c.CallID != "call_2" || c.Name != "read_file" || c.Arguments != pfGood || resp.Output[1].AsMessage().Content[0].Text != "Reading." {
			t.Errorf("response %s", resp.RawJSON())
		}
		pfJSONEq(t, "SDK JSON: usage", []byte(resp.Usage.RawJSON()), pfDSUsageSum)
		if strings.Contains(resp.RawJSON(), "Think 2.") || strings.Contains(resp.RawJSON(), "Sorry.") {
			t.Errorf("the client saw the hidden round: %s", resp.RawJSON())
		}
	})
}

// --- 4. both answers bad ------------------------------------------------------

// TestPreflightBothAnswersBad: the answer to the re-ask is invalid too.
// pass hands on the second answer's call as the model made it, drop
// removes it (the answer ends as one without calls), error ends the
// answer with tool_call_invalid: a 502 for JSON, an error event in a
// stream, with nothing after it.
//
// As of 605a72e, drop fails for Chat (JSON and stream: finish_reason
// "tool_calls" with no call), and error fails its metrics (the streams'
// rounds count as failed: the gateway's own abort of the stream fails
// reverse_proxy's copy, which the round takes for its upstream failing).
func TestPreflightBothAnswersBad(t *testing.T) {
	u := newPFUpstream()
	addr := serveUpstream(t, u)
	outcomes := []struct {
		name   string
		metric string
	}{{"pass", pfMPass}, {"drop", pfMDrop}, {"error", pfMError}}
	for _, oc := range outcomes {
		t.Run(oc.name, func(t *testing.T) {
			startGateway(t, "\t\trule tools_preflight {\n\t\t\ton_failure "+oc.name+"\n\t\t}", addr)
			before := scrapeLLM(t)

			// Responses, JSON.
			u.script(pfRS1.step(), pfRS2Bad.step())
			resp, body := pfPost(t, "/v1/responses", pfResponsesRequest(false))
			if n := len(u.requests()); n != 2 {
				t.Errorf("responses JSON: %d upstream requests, want 2", n)
			}
			switch oc.name {
			case "pass":
				pfJSONEq(t, "responses JSON", body, pfRSResponse("1", "completed", pfUsageSum, pfRS1.msgItem("completed"), pfRS2Bad.callItem("completed")))
			case "drop":
				pfJSONEq(t, "responses JSON", body, pfRSResponse("1", "completed", pfUsageSum, pfRS1.msgItem("completed")))
			case "error":
				if resp.StatusCode != http.StatusBadGateway {
					t.Errorf("responses JSON: status %d", resp.StatusCode)
				}
				pfJSONEq(t, "responses JSON", body, pfErrorJSON(pfInvalidMsg))
			}
			if oc.name != "error" && resp.StatusCode != http.StatusOK {
				t.Errorf("responses JSON: status %d", resp.StatusCode)
			}

			// Responses, stream.
			u.script(pfRS1.step(), pfRS2Bad.step())
			_, body = pfPost(t, "/v1/responses", pfResponsesRequest(true))
			switch oc.name {
			case "pass":
				pfEvents(t, "responses stream", body, pfRSClientStream(&pfRS2Bad, pfUsageSum))
			case "drop":
				pfEvents(t, "responses stream", body, pfRSClientStream(nil, pfUsageSum))
			case "error":
				pfEvents(t, "responses stream", body, pfNumber(append(pfRS1.events()[:8:8],
					`{"type":"error","code":"tool_call_invalid","message":`+pfQ(pfInvalidMsg)+`,"param":null}`)))
			}

			// Chat, JSON.
			u.script(pfCh1.step(), pfCh2Bad.step())
			resp, body = pfPost(t, "/v1/chat/completions", pfChatRequest(false))
			switch oc.name {
			case "pass":
				pfJSONEq(t, "chat JSON", body, pfChClientJSON(pfCh2Bad.toolCall(), "tool_calls", pfChatUsageSum))
			case "drop":
				pfJSONEq(t, "chat JSON", body, pfChClientJSON("", "stop", pfChatUsageSum))
			case "error":
				if resp.StatusCode != http.StatusBadGateway {
					t.Errorf("chat JSON: status %d", resp.StatusCode)
				}
				pfJSONEq(t, "chat JSON", body, pfErrorJSON(pfInvalidMsg))
			}

			// Chat, stream.
			u.script(pfCh1.step(), pfCh2Bad.step())
			_, body = pfPost(t, "/v1/chat/completions", pfChatRequest(true))
			switch oc.name {
			case "pass":
				pfChunks(t, "chat stream", body, pfChClientStream(&pfCh2Bad, "tool_calls", pfChatUsageSum))
			case "drop":
				pfChunks(t, "chat stream", body, pfChClientStream(nil, "stop", pfChatUsageSum))
			case "error":
				c := pfCh1.chunks()
				pfChunks(t, "chat stream", body, []string{c[0], c[1], pfErrorJSON(pfInvalidMsg)})
			}

			// Every round was answered: under on_failure error the gateway
			// ends the stream itself, which is no failure of the round.
			want := map[string]float64{pfMRoundsAnswered: 4, pfMRoundsFailed: 0, pfMInvalid: 8, pfMRepaired: 0, pfMPass: 0, pfMDrop: 0, pfMError: 0}
			want[oc.metric] = 4
			if oc.name == "error" {
				want[`caddy_llm_transform_stream_errors_total{reason="tool_call_invalid"}`] = 2
			}
			assertGrowth(t, before, want)
		})
	}
}

// --- 5. a valid first answer -------------------------------------------------

// TestPreflightValidFirstAnswer: a valid first answer takes one upstream
// request, and the client's bytes are those of the same chain without
// tools_preflight, JSON and SSE, Responses and Chat, direct and behind
// responses_to_chat (whose minted ids are masked).
func TestPreflightValidFirstAnswer(t *testing.T) {
	type exchange struct {
		path, body string
		step       func() pfStep
	}
	type answer struct {
		status int
		ctype  string
		body   []byte
	}
	run := func(t *testing.T, rules string, u *pfUpstream, addr string, xs []exchange) []answer {
		startGateway(t, rules, addr)
		var out []answer
		for _, x := range xs {
			u.script(x.step())
			resp, body := pfPost(t, x.path, x.body)
			if n := len(u.requests()); n != 1 {
				t.Errorf("%s %s: %d upstream requests, want 1", x.path, x.body[:40], n)
			}
			out = append(out, answer{resp.StatusCode, resp.Header.Get("Content-Type"), body})
		}
		return out
	}
	minted := regexp.MustCompile(`[0-9a-f]{24}`)
	compare := func(t *testing.T, xs []exchange, with, without []answer, mask bool, upstream func(i int) []byte) {
		for i := range xs {
			w, wo := with[i], without[i]
			if mask {
				w.body, wo.body = minted.ReplaceAll(w.body, []byte("X")), minted.ReplaceAll(wo.body, []byte("X"))
			}
			what := fmt.Sprintf("%s stream=%v", xs[i].path, gjson.Get(xs[i].body, "stream").Bool())
			if w.status != http.StatusOK || w.status != wo.status || w.ctype != wo.ctype || !bytes.Equal(w.body, wo.body) {
				t.Errorf("%s: with tools_preflight %d %s\n%s\n--- without\n%d %s\n%s", what, w.status, w.ctype, w.body, wo.status, wo.ctype, wo.body)
			}
			if len(w.body) < 100 {
				t.Errorf("%s: an answer of %d bytes proves nothing: %s", what, len(w.body), w.body)
			}
			if upstream != nil && !bytes.Equal(w.body, upstream(i)) {
				t.Errorf("%s: the client's bytes are not the upstream's:\n%s\n--- upstream\n%s", what, w.body, upstream(i))
			}
		}
	}
	joined := func(s pfStep, stream bool) []byte {
		if stream {
			return []byte(strings.Join(s.sse, ""))
		}
		return []byte(s.json)
	}

	t.Run("direct", func(t *testing.T) {
		u := newPFUpstream()
		addr := serveUpstream(t, u)
		xs := []exchange{
			{"/v1/responses", pfResponsesRequest(false), pfRS1Good.step},
			{"/v1/responses", pfResponsesRequest(true), pfRS1Good.step},
			{"/v1/chat/completions", pfChatRequest(false), pfCh1Good.step},
			{"/v1/chat/completions", pfChatRequest(true), pfCh1Good.step},
		}
		with := run(t, "\t\trule tools_preflight", u, addr, xs)
		without := run(t, "", u, addr, xs)
		compare(t, xs, with, without, false, func(i int) []byte {
			return joined(xs[i].step(), gjson.Get(xs[i].body, "stream").Bool())
		})
	})

	t.Run("bridged", func(t *testing.T) {
		u, _, addr := pfDSUpstream(t)
		req := func(stream bool) string {
			return strings.Replace(pfResponsesRequest(stream), `"model":"m"`, `"model":"`+pfDSModel+`"`, 1)
		}
		xs := []exchange{
			{"/v1/responses", req(false), pfDS1Good.step},
			{"/v1/responses", req(true), pfDS1Good.step},
		}
		with := run(t, pfBridgeRules, u, addr, xs)
		without := run(t, "\t\trule responses_to_chat {\n\t\t\tprofile deepseek\n\t\t}", u, addr, xs)
		compare(t, xs, with, without, true, nil)
		for i, a := range with {
			if !bytes.Contains(a.body, []byte(`read_file`)) || !bytes.Contains(a.body, []byte(`call_1`)) {
				t.Errorf("exchange %d: no call in %s", i, a.body)
			}
		}
	})
}

// --- 6. the round's upstream call fails ------------------------------------------

// TestPreflightRoundFails: the upstream answers the re-ask 429. The answer
// ends as if the repair failed: under on_failure pass the first answer's
// bad call reaches the client as made, with the first answer's usage, and
// a stream still ends with one terminal event (Responses: one
// response.completed; Chat: one finish, the usage, [DONE]).
//
// The streams fail as of 605a72e: the joiners (transforms/rounds_join.go)
// take the events tools_preflight's End emits for the failed re-ask for a
// new round's and drop what they held for the end (the Responses terminal
// event; Chat's finish and [DONE]), so the stream ends without them.
func TestPreflightRoundFails(t *testing.T) {
	u := newPFUpstream()
	startGateway(t, "\t\texplain\n\t\trule tools_preflight", serveUpstream(t, u))
	before := scrapeLLM(t)
	limited := pfStep{status: http.StatusTooManyRequests, json: `{"error":{"message":"rate limited","type":"requests","param":null,"code":"rate_limit_exceeded"}}`}

	t.Run("responses JSON", func(t *testing.T) {
		u.script(pfRS1.step(), limited)
		resp, body := pfPost(t, "/v1/responses", pfResponsesRequest(false))
		if resp.StatusCode != http.StatusOK || len(u.requests()) != 2 {
			t.Fatalf("status %d, %d upstream requests: %s", resp.StatusCode, len(u.requests()), body)
		}
		pfJSONEq(t, "responses JSON", body, pfRS1.json())
		if h := resp.Header.Get("X-LLM-Transform-Explain"); !regexp.MustCompile(`; rounds=repair:failed:\d+ms;`).MatchString(h) {
			t.Errorf("explain header %q lists no failed round", h)
		}
	})
	t.Run("responses stream", func(t *testing.T) {
		u.script(pfRS1.step(), limited)
		_, body := pfPost(t, "/v1/responses", pfResponsesRequest(true))
		if len(u.requests()) != 2 {
			t.Fatalf("%d upstream requests", len(u.requests()))
		}
		pfEvents(t, "responses stream", body, pfRS1.events())
	})
	t.Run("chat JSON", func(t *testing.T) {
		u.script(pfCh1.step(), limited)
		resp, body := pfPost(t, "/v1/chat/completions", pfChatRequest(false))
		if resp.StatusCode != http.StatusOK || len(u.requests()) != 2 {
			t.Fatalf("status %d, %d upstream requests: %s", resp.StatusCode, len(u.requests()), body)
		}
		pfJSONEq(t, "chat JSON", body, pfCh1.json())
	})
	t.Run("chat stream", func(t *testing.T) {
		u.script(pfCh1.step(), limited)
		_, body := pfPost(t, "/v1/chat/completions", pfChatRequest(true))
		if len(u.requests()) != 2 {
			t.Fatalf("%d upstream requests", len(u.requests()))
		}
		pfChunks(t, "chat stream", body, pfCh1.chunks())
	})
	assertGrowth(t, before, map[string]float64{pfMRoundsFailed: 4, pfMRoundsAnswered: 0, pfMPass: 4, pfMInvalid: 4})
}

// --- 7. max_rounds -1 --------------------------------------------------------------

// TestPreflightMaxRoundsOff: max_rounds -1 in the handler block turns
// re-asks off: one upstream request, and on_failure applies at once (pass:
// the bad call as made; error: tool_call_invalid).
func TestPreflightMaxRoundsOff(t *testing.T) {
	u := newPFUpstream()
	addr := serveUpstream(t, u)

	t.Run("pass", func(t *testing.T) {
		startGateway(t, "\t\tmax_rounds -1\n\t\trule tools_preflight", addr)
		before := scrapeLLM(t)
		u.script(pfRS1.step(), pfRS2.step())
		_, body := pfPost(t, "/v1/responses", pfResponsesRequest(false))
		if n := len(u.requests()); n != 1 {
			t.Errorf("responses JSON: %d upstream requests, want 1", n)
		}
		pfJSONEq(t, "responses JSON", body, pfRS1.json())

		u.script(pfRS1.step(), pfRS2.step())
		_, body = pfPost(t, "/v1/responses", pfResponsesRequest(true))
		if n := len(u.requests()); n != 1 {
			t.Errorf("responses stream: %d upstream requests, want 1", n)
		}
		pfEvents(t, "responses stream", body, pfRS1.events())

		u.script(pfCh1.step(), pfCh2.step())
		_, body = pfPost(t, "/v1/chat/completions", pfChatRequest(true))
		if n := len(u.requests()); n != 1 {
			t.Errorf("chat stream: %d upstream requests, want 1", n)
		}
		pfChunks(t, "chat stream", body, pfCh1.chunks())
		assertGrowth(t, before, map[string]float64{pfMRoundsAnswered: 0, pfMRoundsFailed: 0, pfMPass: 3, pfMInvalid: 3})
	})

	t.Run("error", func(t *testing.T) {
		startPFJSON(t, `"max_rounds": -1, "rules": [{"transform": "tools_preflight", "config": {"on_failure": "error"}}]`, addr)
		u.script(pfRS1.step(), pfRS2.step())
		resp, body := pfPost(t, "/v1/responses", pfResponsesRequest(false))
		if n := len(u.requests()); n != 1 || resp.StatusCode != http.StatusBadGateway {
			t.Errorf("%d upstream requests, status %d", n, resp.StatusCode)
		}
		pfJSONEq(t, "responses JSON", body, pfErrorJSON(`the model's call to "read_file" is invalid and could not be repaired: `+
			`The arguments of the call to tool 'read_file' do not match the tool's parameters schema (2 problems):`))
	})
}

// --- 8. the client leaves during a round -------------------------------------

// TestPreflightClientLeavesDuringRound: the client disconnects while the
// hidden round waits for the upstream: the round's upstream request is
// canceled (the scripted upstream sees its request's context end).
func TestPreflightClientLeavesDuringRound(t *testing.T) {
	u := newPFUpstream()
	startGateway(t, "\t\trule tools_preflight", serveUpstream(t, u))
	before := scrapeLLM(t)

	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			u.script(pfRS1.step(), pfStep{hang: true})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gatewayURL+"/v1/responses", strings.NewReader(pfResponsesRequest(stream)))
			req.Header.Set("Content-Type", "application/json")
			got := make(chan []byte, 1)
			if stream {
				resp, err := pfClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				// The first answer's text reaches the client before the
				// round.
				br := bufio.NewReader(resp.Body)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("the first answer's text never arrived: %v", err)
					}
					if strings.Contains(line, `"delta":"Reading."`) {
						break
					}
				}
			} else {
				go func() {
					resp, err := pfClient.Do(req)
					if err == nil {
						b, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						got <- b
					}
					close(got)
				}()
			}
			select {
			case n := <-u.hung:
				if n != 1 {
					t.Fatalf("request %d hangs, want the round's (1)", n)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the round never reached the upstream")
			}
			cancel()
			select {
			case n := <-u.canceled:
				if n != 1 {
					t.Fatalf("request %d canceled", n)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the round's upstream request was not canceled after the client left")
			}
			if !stream {
				if b, ok := <-got; ok {
					t.Errorf("the client that left got an answer: %s", b)
				}
			}
		})
	}
	// A client that leaves is not an upstream failure.
	assertGrowth(t, before, map[string]float64{pfMRoundsClientGone: 2, pfMRoundsFailed: 0, pfMRoundsAnswered: 0})
}

// --- the Caddyfile --------------------------------------------------------------

// TestPreflightCaddyfileOptions: the options of a tools_preflight rule
// block reach the transform's config, as those of every other transform
// do, and a bad one is refused at load. (Until 3657efd the rule block's
// options were lost: the transform read its block without consuming its
// name first.)
func TestPreflightCaddyfileOptions(t *testing.T) {
	cf := `:9080 {
	llm_transform {
		rule tools_preflight {
			max_repairs 2
			on_failure drop
			dedup false
		}
	}
	reverse_proxy 127.0.0.1:1
}
`
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		t.Fatal(err)
	}
	rule := gjson.GetBytes(out, "apps.http.servers.srv0.routes.0.handle.0.rules.0")
	if rule.Get("transform").String() != "tools_preflight" {
		t.Fatalf("adapted: %s", out)
	}
	pfJSONEq(t, "the rule's config", []byte(rule.Get("config").Raw), `{"max_repairs":2,"on_failure":"drop","dedup":false}`)

	caddytest.AssertLoadError(t, globalOptions+strings.Replace(cf, "on_failure drop", "on_failure sideways", 1), "caddyfile",
		"(want pass, drop or error)")
}
