package integration

// responses_to_chat with the Vercel AI SDK: generateText and streamText
// (ai, with @ai-sdk/openai's Responses model) run a multi-step tool loop
// through Caddy against a strict DeepSeek-like thinking provider, which
// wants the exact reasoning of each tool-call turn back. The SDK keeps only
// a reasoning item's summary and encrypted_content when it sends the
// history back, so the reasoning has to travel in what it keeps.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// The AI SDK packages .ci/run installs, pinned (zod is the peer dependency
// the script's tool schemas use).
var aisdkPackages = map[string]string{
	"ai":             "7.0.173",
	"@ai-sdk/openai": "4.0.118",
	"zod":            "4.6.7",
}

// aisdkScript runs one tool loop and prints a JSON summary.
const aisdkScript = "testdata/aisdk/tool_loop.mjs"

// aisdkModel is the model the SDK asks for: the upstream's own id, as an
// AI SDK user pointing createOpenAI at the gateway would write it.
const aisdkModel = "deepseek-v4-pro"

// aisdkReasoning is what the provider thinks on each turn: quotes, a
// backslash, a tab, newlines and CJK, which must come back byte for byte.
var aisdkReasoning = [3]string{
	"The user asks about Paris. I need the \"current\" weather first:\ncall get_weather. 中文 \\ ok",
	"get_weather says 20 °C. The user wants Fahrenheit too,\n\tso call to_fahrenheit.",
	"Both tools answered (\"68\"). Answer in one sentence.",
}

// aisdkAnswer is the provider's final answer.
const aisdkAnswer = "It is 20 °C (68 °F) and clear in Paris."

// aisdkTurns is the provider's side of the loop: get_weather, then
// to_fahrenheit, then the answer, each after its reasoning.
func aisdkTurns() []fakeprovider.Turn {
	return []fakeprovider.Turn{
		{Reasoning: aisdkReasoning[0], Calls: []fakeprovider.Call{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{Reasoning: aisdkReasoning[1], Calls: []fakeprovider.Call{{Name: "to_fahrenheit", Arguments: `{"celsius":20}`}}},
		{Reasoning: aisdkReasoning[2], Text: aisdkAnswer},
	}
}

// aisdkRules bridge to the DeepSeek-like upstream, its reasoning shown as
// the reasoning item's summary, which is what the AI SDK renders.
const aisdkRules = `		rule responses_to_chat {
			profile deepseek
			reasoning_display summary
		}`

// aisdkNode finds node and the AI SDK packages: $AISDK_DIR (a directory
// `npm install --prefix` put them into), else the pinned versions where
// .ci/run installs them. It installs nothing, and fails on a version other
// than the pinned one.
func aisdkNode(t *testing.T) (node, dir string) {
	t.Helper()
	dir = os.Getenv("AISDK_DIR")
	if dir == "" {
		pkg, err := cachedTool("aisdk-"+aisdkPackages["ai"], "node_modules", "ai", "package.json")
		if err != nil {
			missingTool(t, "AI SDK (ai "+aisdkPackages["ai"]+") unavailable ("+err.Error()+"); run .ci/run, or set AISDK_DIR")
		}
		dir = filepath.Dir(filepath.Dir(filepath.Dir(pkg)))
	}
	for name, version := range aisdkPackages {
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(name), "package.json"))
		if err != nil {
			t.Fatalf("AISDK_DIR=%s: %v", dir, err)
		}
		if got := gjson.GetBytes(b, "version").String(); got != version {
			t.Fatalf("AISDK_DIR=%s holds %s %s, the test pins %s", dir, name, got, version)
		}
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missingTool(t, "node unavailable: "+err.Error())
	}
	return node, dir
}

// reasoningUpstream is a strict DeepSeek-like thinking provider:
// fakeprovider's DeepSeek (which refuses unknown request members and
// message fields, unpaired tool messages and a tool-call message without
// reasoning_content) that also refuses, with DeepSeek's words, an
// assistant tool-call message whose reasoning_content is not the exact
// reasoning it gave for that turn. It logs every request and its answer.
type reasoningUpstream struct {
	fake *fakeprovider.Provider
	want []string // the reasoning of each tool-call turn

	mu  sync.Mutex
	log []upstreamCall
}

// upstreamCall is one request the upstream received and what it answered.
type upstreamCall struct {
	body   []byte
	status int
	errMsg string // the body of a refusal
}

func newReasoningUpstream() *reasoningUpstream {
	turns := aisdkTurns()
	u := &reasoningUpstream{fake: &fakeprovider.Provider{Thinking: fakeprovider.DeepSeek, Turns: turns}}
	for _, tr := range turns {
		u.want = append(u.want, tr.Reasoning)
	}
	return u
}

func (u *reasoningUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	call := upstreamCall{body: body}
	defer func() {
		u.mu.Lock()
		u.log = append(u.log, call)
		u.mu.Unlock()
	}()
	if rej := u.checkReasoning(gjson.ParseBytes(body)); rej != "" {
		b := fmt.Appendf(nil, `{"error":{"message":%q,"type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`+"\n", rej)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(b)
		call.status, call.errMsg = http.StatusBadRequest, string(b)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	u.fake.ServeHTTP(sw, r)
	call.status, call.errMsg = sw.status, sw.errBody.String()
}

// checkReasoning returns DeepSeek's refusal when thinking is on and the
// j-th assistant tool-call message does not carry, as reasoning_content,
// exactly the reasoning of turn j.
func (u *reasoningUpstream) checkReasoning(req gjson.Result) string {
	if req.Get("thinking.type").String() == "disabled" {
		return ""
	}
	j := 0
	for _, m := range req.Get("messages").Array() {
		if m.Get("role").String() != "assistant" || len(m.Get("tool_calls").Array()) == 0 {
			continue
		}
		if j < len(u.want) {
			if rc := m.Get("reasoning_content"); rc.Type != gjson.String || rc.String() != u.want[j] {
				return fakeprovider.MsgDeepSeekReasoning
			}
		}
		j++
	}
	return ""
}

// calls returns the log so far.
func (u *reasoningUpstream) calls() []upstreamCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]upstreamCall(nil), u.log...)
}

// report shows what the upstream received: per request, its answer and
// the assistant and tool messages it was sent.
func (u *reasoningUpstream) report() string {
	var b strings.Builder
	for i, c := range u.calls() {
		fmt.Fprintf(&b, "upstream request %d: answered %d %s\n", i+1, c.status, strings.TrimSpace(c.errMsg))
		req := gjson.ParseBytes(c.body)
		fmt.Fprintf(&b, "  thinking %s reasoning_effort %s\n", req.Get("thinking").Raw, req.Get("reasoning_effort").Raw)
		for k, m := range req.Get("messages").Array() {
			if role := m.Get("role").String(); role == "assistant" || role == "tool" {
				fmt.Fprintf(&b, "  messages[%d] %s\n", k, m.Raw)
			}
		}
	}
	return b.String()
}

// statusWriter notes the status and keeps the body of a refusal; it
// unwraps for http.ResponseController, so streams still flush.
type statusWriter struct {
	http.ResponseWriter
	status  int
	errBody bytes.Buffer
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status >= 400 && w.errBody.Len() < 4096 {
		w.errBody.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// aisdkResult is the script's summary.
type aisdkResult struct {
	Steps           json.RawMessage `json:"steps"`
	Executed        json.RawMessage `json:"executed"`
	Text            *string         `json:"text"`
	StreamReasoning []string        `json:"stream_reasoning"`
	PartTypes       []string        `json:"part_types"`
	Errors          []struct {
		Name    string `json:"name"`
		Message string `json:"message"`
		Status  int    `json:"status"`
		Body    string `json:"body"`
		Code    string `json:"code"`
	} `json:"errors"`
}

// runAISDK runs the script's loop in mode (generate, stream) with store
// (false, default) against the gateway.
func runAISDK(t *testing.T, node, dir, mode, store string) (aisdkResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, aisdkScript, mode, store)
	cmd.Env = append(os.Environ(), "AISDK_DIR="+dir, "GATEWAY_URL="+gatewayURL+"/v1", "MODEL="+aisdkModel)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("AI SDK script: %v\n%s%s", err, stderr.String(), stdout.String())
	}
	var r aisdkResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("script output: %v\n%s", err, stdout.String())
	}
	return r, stdout.String()
}

// aisdkSteps is the loop every run must produce: the two tool steps, each
// with its reasoning, then the answer.
const aisdkSteps = `[
	{"finish_reason":"tool-calls","text":"","reasoning_text":%s,
	 "tool_calls":[{"name":"get_weather","input":{"city":"Paris"}}],
	 "tool_results":[{"name":"get_weather","output":{"city":"Paris","celsius":20,"sky":"clear"}}]},
	{"finish_reason":"tool-calls","text":"","reasoning_text":%s,
	 "tool_calls":[{"name":"to_fahrenheit","input":{"celsius":20}}],
	 "tool_results":[{"name":"to_fahrenheit","output":{"fahrenheit":68}}]},
	{"finish_reason":"stop","text":%s,"reasoning_text":%s,"tool_calls":[],"tool_results":[]}
]`

const aisdkExecuted = `[{"name":"get_weather","input":{"city":"Paris"}},{"name":"to_fahrenheit","input":{"celsius":20}}]`

// sameJSON compares two JSON texts as values.
func sameJSON(t *testing.T, got, want []byte) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%v: %s", err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%v: %s", err, want)
	}
	return reflect.DeepEqual(g, w)
}

// TestBridgeAISDKToolLoop: generateText and streamText finish a
// three-step tool loop through responses_to_chat on a thinking provider
// that wants each turn's reasoning back, with store: false (the SDK then
// sends reasoning items with their encrypted_content and summary only);
// the stream shows the reasoning. With store left at the SDK's default
// (true: item_reference for the items it thinks the server stored), the
// loop either completes the same way or ends in the bridge's 400 naming
// store: false.
func TestBridgeAISDKToolLoop(t *testing.T) {
	node, dir := aisdkNode(t)
	for _, tc := range []struct{ mode, store string }{
		{"generate", "false"},
		{"stream", "false"},
		{"generate", "default"},
		{"stream", "default"},
	} {
		t.Run(tc.mode+"/store="+tc.store, func(t *testing.T) {
			up := newReasoningUpstream()
			startGateway(t, aisdkRules, serveUpstream(t, up))
			r, out := runAISDK(t, node, dir, tc.mode, tc.store)

			if tc.store == "default" && len(r.Errors) > 0 {
				// The documented refusal: the bridge's 400, naming
				// store: false, before anything reached the upstream
				// that it would refuse.
				e := r.Errors[0]
				if len(r.Errors) != 1 || e.Status != http.StatusBadRequest || !strings.Contains(e.Message, "store") {
					t.Fatalf("store left at its default: want the loop to complete or a 400 naming store, got %s\n%s", out, up.report())
				}
				for i, c := range up.calls() {
					if c.status != http.StatusOK {
						t.Fatalf("the 400 came from the upstream (request %d), not the bridge\n%s", i+1, up.report())
					}
				}
				t.Logf("store left at its default: the bridge's 400 %q", e.Message)
				return
			}

			if len(r.Errors) > 0 {
				t.Fatalf("errors %s\n%s", out, up.report())
			}
			q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
			want := fmt.Sprintf(aisdkSteps, q(aisdkReasoning[0]), q(aisdkReasoning[1]), q(aisdkAnswer), q(aisdkReasoning[2]))
			if !sameJSON(t, r.Steps, []byte(want)) {
				t.Errorf("steps\n got %s\nwant %s", r.Steps, want)
			}
			if !sameJSON(t, r.Executed, []byte(aisdkExecuted)) {
				t.Errorf("executed %s, want %s", r.Executed, aisdkExecuted)
			}
			if r.Text == nil || *r.Text != aisdkAnswer {
				t.Errorf("final text %v", r.Text)
			}
			// streamText shows each step's reasoning as reasoning-delta parts.
			if tc.mode == "stream" && !slices.Equal(r.StreamReasoning, aisdkReasoning[:]) {
				t.Errorf("reasoning in the stream parts, per step %q (part types %q), want %q", r.StreamReasoning, r.PartTypes, aisdkReasoning)
			}

			// The upstream: three requests, all answered; request k holds
			// the k earlier tool-call turns, each with its exact reasoning.
			calls := up.calls()
			if len(calls) != 3 {
				t.Fatalf("upstream received %d requests, want 3\n%s", len(calls), up.report())
			}
			for k, c := range calls {
				if c.status != http.StatusOK {
					t.Fatalf("upstream request %d answered %d\n%s", k+1, c.status, up.report())
				}
				var got []string
				for _, m := range gjson.GetBytes(c.body, "messages").Array() {
					if m.Get("role").String() == "assistant" && len(m.Get("tool_calls").Array()) > 0 {
						got = append(got, m.Get("reasoning_content").String())
					}
				}
				if !slices.Equal(got, aisdkReasoning[:k]) {
					t.Errorf("upstream request %d: reasoning_content on the tool-call messages %q, want %q\n%s", k+1, got, aisdkReasoning[:k], up.report())
				}
			}
		})
	}
}
