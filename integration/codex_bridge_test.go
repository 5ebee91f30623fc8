//go:build unix

package integration

// responses_to_chat with the real Codex CLI: Codex (gpt-5.5, Responses
// only) runs a multi-step task through Caddy against strict Chat-only
// thinking providers, DeepSeek-like and Kimi-like.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// bridgePrompt asks for what the provider's script does anyway.
const bridgePrompt = "List the files and read README.md, then create hello.txt as README.md asks."

// deepSeekCallID is the shape of DeepSeek's tool call ids.
var deepSeekCallID = regexp.MustCompile(`^call_0\d_[A-Za-z0-9]{24}$`)

func TestCodexBridgeDeepSeek(t *testing.T) { runCodexBridge(t, fakeprovider.DeepSeek) }

func TestCodexBridgeKimi(t *testing.T) { runCodexBridge(t, fakeprovider.Kimi) }

// runCodexBridge runs the task with Codex through the canonical rules in
// front of the thinking provider th: parallel exec_command calls, then
// apply_patch, then the final answer. hello.txt must hold the exact bytes,
// and every request the provider got must be the Chat request a strict
// provider takes: its model, one system message, each earlier turn's
// reasoning replayed verbatim on its assistant tool-call message, the
// provider's call ids echoed.
func runCodexBridge(t *testing.T, th fakeprovider.Thinking) {
	codexBinary(t)
	turns := bridgeTask()
	up := &fakeprovider.Provider{Thinking: th, Turns: turns}
	rec := &headerRecorder{next: up}
	startGateway(t, bridgeRules(string(th), bridgeModels[th]), serveUpstream(t, rec))

	workdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(workdir, "README.md"), []byte(bridgeReadme), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runCodex(t, gatewayURL+"/v1", workdir, bridgePrompt)
	if err != nil {
		t.Fatalf("codex failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	got, err := os.ReadFile(filepath.Join(workdir, "hello.txt"))
	if err != nil {
		t.Fatalf("codex created no hello.txt: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if string(got) != bridgeHello {
		t.Errorf("hello.txt = %q, want %q", got, bridgeHello)
	}
	if !strings.Contains(stdout, bridgeAnswer) {
		t.Errorf("codex did not print the final answer\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}

	reqs := up.Requests()
	if len(reqs) != len(turns) {
		t.Fatalf("the provider received %d requests, want %d (exec_command ×2, apply_patch, answer)", len(reqs), len(turns))
	}
	for _, r := range rec.requests() {
		if r.URL.Path != "/v1/chat/completions" {
			t.Errorf("upstream path %s", r.URL.Path)
		}
	}
	ids := up.CallIDs()
	if len(ids) != 3 {
		t.Fatalf("the provider made calls %q, want 3", ids)
	}
	if th == fakeprovider.Kimi {
		if want := []string{"functions.exec_command:0", "functions.exec_command:1", "functions.apply_patch:2"}; strings.Join(ids, " ") != strings.Join(want, " ") {
			t.Errorf("Kimi call ids %q, want %q", ids, want)
		}
	} else {
		for _, id := range ids {
			if !deepSeekCallID.MatchString(id) {
				t.Errorf("DeepSeek call id %q", id)
			}
		}
	}
	// The calls each turn made, by the ids the provider gave them.
	turnIDs := [][]string{ids[:2], ids[2:3]}

	for k, raw := range reqs {
		body := gjson.ParseBytes(raw)
		assertBridgedRequest(t, k+1, th, body)
		msgs := body.Get("messages").Array()
		if n := len(msgs[0].Get("content").String()); n < 10000 {
			t.Errorf("turn %d: the system message has %d bytes, not Codex's instructions", k+1, n)
		}

		// Each earlier turn is one assistant message with its reasoning
		// and its calls, and the tool messages right after it answer them.
		var calls []gjson.Result
		var at []int
		for i, m := range msgs {
			if m.Get("role").String() == "assistant" && len(m.Get("tool_calls").Array()) > 0 {
				calls = append(calls, m)
				at = append(at, i)
			}
		}
		if len(calls) != k {
			t.Errorf("turn %d: %d assistant tool-call messages, want %d", k+1, len(calls), k)
			continue
		}
		for j, m := range calls {
			if got := m.Get("reasoning_content"); got.Type != gjson.String || got.String() != turns[j].Reasoning {
				t.Errorf("turn %d: assistant message %d carries reasoning_content %s, want turn %d's %q", k+1, at[j], got.Raw, j+1, turns[j].Reasoning)
			}
			tcs := m.Get("tool_calls").Array()
			if len(tcs) != len(turnIDs[j]) {
				t.Errorf("turn %d: message %d has %d calls, want %d", k+1, at[j], len(tcs), len(turnIDs[j]))
				continue
			}
			for c, tc := range tcs {
				want := turns[j].Calls[c]
				if tc.Get("id").String() != turnIDs[j][c] || tc.Get("function.name").String() != want.Name {
					t.Errorf("turn %d: message %d call %d is %s, want id %s name %s", k+1, at[j], c, tc.Raw, turnIDs[j][c], want.Name)
				}
				assertSameArguments(t, tc.Get("function.arguments").String(), want.Arguments)
				out := msgs[at[j]+1+c]
				if out.Get("role").String() != "tool" || out.Get("tool_call_id").String() != turnIDs[j][c] {
					t.Errorf("turn %d: message %d is %s, want the tool message for %s", k+1, at[j]+1+c, out.Raw, turnIDs[j][c])
				}
			}
		}
		if k >= 1 {
			// What Codex ran reached the provider: ls lists README.md,
			// cat prints it.
			ls, cat := msgs[at[0]+1].Get("content").String(), msgs[at[0]+2].Get("content").String()
			if !strings.Contains(ls, "README.md") || !strings.Contains(cat, "Please greet in hello.txt.") {
				t.Errorf("turn %d: tool outputs\nls: %q\ncat: %q", k+1, ls, cat)
			}
		}
		if k == 2 {
			if out := msgs[at[1]+1].Get("content").String(); !strings.Contains(out, "hello.txt") {
				t.Errorf("turn 3: apply_patch output %q", out)
			}
		}
	}
}

// assertBridgedRequest checks what every bridged request must be for a
// strict provider, beyond what the fake already enforces: the renamed
// model, exactly one system message (Codex's instructions) and first, only
// function tools with apply_patch taking {"input"}, the provider's
// thinking knobs, a generous token limit and usage on the stream.
func assertBridgedRequest(t *testing.T, turn int, th fakeprovider.Thinking, body gjson.Result) {
	t.Helper()
	if m := body.Get("model").String(); m != bridgeModels[th] {
		t.Errorf("turn %d: model %q, want %q", turn, m, bridgeModels[th])
	}
	var system []int
	for i, m := range body.Get("messages").Array() {
		switch m.Get("role").String() {
		case "system":
			system = append(system, i)
		case "developer":
			t.Errorf("turn %d: message %d has the role developer", turn, i)
		}
	}
	if len(system) != 1 || system[0] != 0 || body.Get("messages.0.content").String() == "" {
		t.Errorf("turn %d: system messages at %v, want one, first, with Codex's instructions", turn, system)
	}
	for _, tool := range body.Get("tools").Array() {
		if tool.Get("type").String() != "function" || !upstreamName.MatchString(tool.Get("function.name").String()) {
			t.Errorf("turn %d: tool %s", turn, tool.Raw)
		}
	}
	if ap := body.Get(`tools.#(function.name=="apply_patch").function.parameters.required.0`); ap.String() != "input" {
		t.Errorf("turn %d: no apply_patch function taking input: %s", turn, body.Get("tools.#.function.name").Raw)
	}
	if !body.Get(`tools.#(function.name=="exec_command")`).Exists() {
		t.Errorf("turn %d: no exec_command function", turn)
	}
	if !body.Get("stream").Bool() || !body.Get("stream_options.include_usage").Bool() || body.Get("max_tokens").Int() < 16384 {
		t.Errorf("turn %d: stream %s, stream_options %s, max_tokens %s", turn, body.Get("stream").Raw, body.Get("stream_options").Raw, body.Get("max_tokens").Raw)
	}
	if tt := body.Get("thinking.type"); tt.Exists() && tt.String() != "enabled" {
		t.Errorf("turn %d: thinking %s", turn, body.Get("thinking").Raw)
	}
	if th == fakeprovider.DeepSeek && (body.Get("thinking.type").String() != "enabled" || body.Get("reasoning_effort").String() != "high") {
		// Codex asks for medium effort: DeepSeek's high.
		t.Errorf("turn %d: thinking %s reasoning_effort %s, want enabled and high", turn, body.Get("thinking").Raw, body.Get("reasoning_effort").Raw)
	}
}

// assertSameArguments compares function arguments as JSON values: a
// custom call Codex replays is wrapped again by the gateway, which may
// escape differently than the provider did.
func assertSameArguments(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Errorf("arguments %q: %v", got, err)
		return
	}
	_ = json.Unmarshal([]byte(want), &w)
	if mustJSON(g) != mustJSON(w) {
		t.Errorf("arguments %s, want %s", got, want)
	}
}

// TestBridgeZstdCodexRequest sends Codex's recorded turn-1 request
// zstd-compressed (Content-Encoding: zstd, as Codex may) with a plain
// HTTP client through the canonical rules: it must be decoded, bridged to
// the DeepSeek-like provider and answered with a strict Responses stream.
func TestBridgeZstdCodexRequest(t *testing.T) {
	up := &fakeprovider.Provider{Thinking: fakeprovider.DeepSeek, Turns: bridgeTask()}
	rec := &headerRecorder{next: up}
	startGateway(t, bridgeRules("deepseek", "deepseek-v4-pro"), serveUpstream(t, rec))

	fixture, err := os.ReadFile(codexFixture)
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, fixture); err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	compressed := enc.EncodeAll(compact.Bytes(), nil)
	_ = enc.Close()

	req, err := http.NewRequest(http.MethodPost, gatewayURL+"/v1/responses", bytes.NewReader(compressed))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "zstd")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+codexKey)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), out)
	}

	seen := rec.requests()
	if len(seen) != 1 || seen[0].URL.Path != "/v1/chat/completions" || seen[0].Header.Get("Content-Encoding") != "" {
		t.Fatalf("upstream requests: %d, first %s %v", len(seen), seen[0].URL.Path, seen[0].Header)
	}
	body := gjson.ParseBytes(up.Requests()[0])
	assertBridgedRequest(t, 1, fakeprovider.DeepSeek, body)
	msgs := body.Get("messages").Array()
	if last := msgs[len(msgs)-1]; last.Get("role").String() != "user" || !strings.Contains(last.Raw, "say hi") {
		t.Errorf("last message %s, want Codex's prompt", last.Raw)
	}
	if sys := msgs[0].Get("content").String(); !strings.Contains(sys, "(client instructions, 21299 chars, elided)") || !strings.Contains(sys, "(client instructions, 4677 chars, elided)") {
		t.Errorf("system message does not hold both developer messages: %.200q", sys)
	}

	evs := parseEvents(t, string(out))
	terminal := assertResponsesGrammar(t, evs)
	if terminal.Get("type").String() != "response.completed" {
		t.Fatalf("terminal %s", terminal.Raw)
	}
	ids := up.CallIDs()
	output := terminal.Get("response.output").Array()
	if len(output) != 3 || output[0].Get("type").String() != "reasoning" ||
		output[0].Get("content.0.text").String() != bridgeReasoning[0] ||
		output[1].Get("call_id").String() != ids[0] || output[2].Get("call_id").String() != ids[1] ||
		output[1].Get("arguments").String() != `{"cmd":"ls"}` || output[2].Get("arguments").String() != `{"cmd":"cat README.md"}` {
		t.Errorf("output %s", terminal.Get("response.output").Raw)
	}
	if m := terminal.Get("response.model").String(); m != "gpt-5.5" {
		t.Errorf("response model %q, want the client's", m)
	}
	assertUsage(t, terminal.Get("response.usage"), up.Requests()[0])
}
