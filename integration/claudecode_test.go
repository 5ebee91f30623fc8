//go:build unix

// The Claude Code harness kills the CLI's whole process group on timeout,
// which needs Unix process groups.

package integration

// messages_to_chat with real clients: Claude Code (`claude -p`) runs a
// Write, Edit, Bash tool loop through Caddy against a strict DeepSeek-like
// thinking upstream (fakeprovider.DeepSeekChat), and the official
// Anthropic SDK accumulates the bridge's stream into its JSON answer.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

const (
	// claudeCodeVersion is the Claude Code .ci/run installs, the version
	// of the recorded fixtures.
	claudeCodeVersion = "2.1.332"

	// claudeCodeTimeout bounds one `claude -p`; a healthy run of the
	// four-turn script takes a few seconds.
	claudeCodeTimeout = 100 * time.Second

	// claudeCodeModel is the model Claude Code asks for; the gateway
	// routes it to the upstream's model (claudeCodeRules).
	claudeCodeModel = "claude-sonnet-4-6"

	// claudeCodeToken is Claude Code's ANTHROPIC_AUTH_TOKEN (Bearer).
	claudeCodeToken = "test"
)

// claudeCodeRules bridge Messages to DeepSeek's Chat: the bridge, then (on
// the Chat request) the model routed to DeepSeek V4 and the tools fitted
// to DeepSeek's profile.
const claudeCodeRules = `		rule messages_to_chat {
			profile deepseek
		}
		rule field_set {
			models claude-*
			path model
			value deepseek-v4-pro
		}
		rule tools_plan {
			profile deepseek
		}`

// claudeCodeBinary finds Claude Code: $CLAUDE_CODE_BIN, else the pinned
// version where .ci/run installs it. It installs nothing; without Claude
// Code the test is skipped, except under CI=true, where it fails.
func claudeCodeBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CLAUDE_CODE_BIN"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("CLAUDE_CODE_BIN=%s: %v", bin, err)
		}
		return bin
	}
	bin, err := cachedTool("claude-code-"+claudeCodeVersion, "node_modules", ".bin", "claude")
	if err != nil {
		missingTool(t, "Claude Code "+claudeCodeVersion+" unavailable ("+err.Error()+"); run .ci/run, or set CLAUDE_CODE_BIN to node_modules/.bin/claude")
	}
	return bin
}

// claudeCodeEnv is the caller's environment without anything that could
// steer Claude Code elsewhere (its settings, Anthropic credentials and
// endpoints, proxies: the gateway is on 127.0.0.1, the real HOME), with
// the base URL, a token, a throwaway HOME, no traffic but the model
// requests, no non-streaming fallback (a broken stream must fail the run,
// not be papered over) and no retries (a refusal fails at once).
func claudeCodeEnv(home, baseURL string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		switch {
		case strings.HasPrefix(upper, "ANTHROPIC_"), strings.HasPrefix(upper, "CLAUDE"),
			strings.HasSuffix(upper, "_PROXY"), strings.HasPrefix(upper, "XDG_"),
			strings.HasPrefix(upper, "DISABLE_"), upper == "HOME", upper == "API_TIMEOUT_MS",
			upper == "MAX_THINKING_TOKENS", upper == "ENABLE_TOOL_SEARCH":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"HOME="+home,
		"ANTHROPIC_BASE_URL="+baseURL,
		"ANTHROPIC_AUTH_TOKEN="+claudeCodeToken,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"API_TIMEOUT_MS=60000",
	)
}

// claudeCodeResult is what `claude -p --output-format json` prints.
type claudeCodeResult struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	IsError bool   `json:"is_error"`
	Result  string `json:"result"`
	NumTurn int    `json:"num_turns"`
}

// runClaudeCode runs `claude -p prompt` once in workdir against baseURL
// (no /v1), allowing Write, Edit and Bash, with a throwaway HOME, and
// returns its output. err is non-nil when Claude Code exits non-zero or
// runs past claudeCodeTimeout.
func runClaudeCode(t *testing.T, baseURL, workdir, prompt string) (stdout, stderr string, err error) {
	t.Helper()
	bin := claudeCodeBinary(t)
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), claudeCodeTimeout)
	defer cancel()
	// The prompt comes first: --allowedTools takes every argument after it.
	cmd := exec.CommandContext(ctx, bin, "-p", prompt,
		"--model", claudeCodeModel,
		"--output-format", "json",
		"--no-session-persistence",
		"--allowedTools", "Write,Edit,Bash")
	cmd.Dir = workdir
	cmd.Env = claudeCodeEnv(home, baseURL)
	cmd.Stdin = nil // /dev/null
	var outBuf, errBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &errBuf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second

	start := time.Now()
	err = cmd.Run()
	if ctx.Err() != nil {
		err = errors.Join(err, ctx.Err())
	}
	t.Logf("claude -p took %s (err: %v)", time.Since(start).Round(time.Millisecond), err)
	return outBuf.String(), errBuf.String(), err
}

// claudeCodeReasoning is what the upstream thinks on each turn: quotes, a
// backslash, a tab, newlines and CJK, which must come back byte for byte
// as reasoning_content.
var claudeCodeReasoning = [4]string{
	"The user wants notes.txt. Write it first, with \"quotes\", a backslash \\ and 日本語:\nthe Write tool.",
	"Written. Now the Edit:\n\treplace \"left.\" in place.",
	"Edited. Check the bytes with Bash (cat), 中文 \\ ok.",
	"cat showed the file. Answer in one sentence.",
}

const (
	// claudeCodePrompt is all the scripted upstream needs.
	claudeCodePrompt = "Create notes.txt, then edit it, then show it."

	// claudeCodeNotes is what the Write call writes: quotes, backslashes
	// (one before an n, which must stay two characters), a tab, non-ASCII
	// text and an emoji.
	claudeCodeNotes = "He said \"hi\" and left.\nBack\\slash: C:\\temp\\new\nTab:\tend; 'single'\nUnicode: café – naïve – 日本語 – 🚀\n"

	// claudeCodeOld and claudeCodeNew are the Edit's strings.
	claudeCodeOld = "left."
	claudeCodeNew = "left — \"twice\" \\o/."

	// claudeCodeAnswer is the upstream's final answer.
	claudeCodeAnswer = "Done: notes.txt holds the quotes, the backslashes and 日本語 – edited once."
)

// claudeCodeWant is the file at the end of the run.
var claudeCodeWant = strings.Replace(claudeCodeNotes, claudeCodeOld, claudeCodeNew, 1)

// jsonArgs encodes tool arguments as a model writes them (no HTML
// escaping).
func jsonArgs(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// claudeCodeTurns is the upstream's side of the task in workdir: Write,
// Edit, Bash, then the answer, each after its reasoning.
func claudeCodeTurns(t *testing.T, workdir string) []fakeprovider.Turn {
	file := filepath.Join(workdir, "notes.txt")
	return []fakeprovider.Turn{
		{Reasoning: claudeCodeReasoning[0], Text: "I'll write the file.", Calls: []fakeprovider.Call{{Name: "Write",
			Arguments: jsonArgs(t, map[string]any{"file_path": file, "content": claudeCodeNotes})}}},
		{Reasoning: claudeCodeReasoning[1], Calls: []fakeprovider.Call{{Name: "Edit",
			Arguments: jsonArgs(t, map[string]any{"file_path": file, "old_string": claudeCodeOld, "new_string": claudeCodeNew})}}},
		{Reasoning: claudeCodeReasoning[2], Calls: []fakeprovider.Call{{Name: "Bash",
			Arguments: jsonArgs(t, map[string]any{"command": "cat " + file, "description": "Show the file"})}}},
		{Reasoning: claudeCodeReasoning[3], Text: claudeCodeAnswer},
	}
}

// claudeCodeUpstream is the strict DeepSeek upstream of the task. Claude
// Code's side requests (any that does not offer Write: a title, a Bash
// command check) get a short text outside the script.
func claudeCodeUpstream(t *testing.T, workdir string) (*fakeprovider.DeepSeekChat, string) {
	t.Helper()
	up := &fakeprovider.DeepSeekChat{
		Turns:          claudeCodeTurns(t, workdir),
		ExactReasoning: true,
		Aside: func(req gjson.Result) (fakeprovider.Turn, bool) {
			if declaresTool(req, "Write") {
				return fakeprovider.Turn{}, false
			}
			return fakeprovider.Turn{Reasoning: "A side request.", Text: "none"}, true
		},
	}
	return up, serveUpstream(t, up)
}

// declaresTool reports a Chat function tool named name in req.
func declaresTool(req gjson.Result, name string) bool {
	for _, tool := range req.Get("tools").Array() {
		if tool.Get("function.name").String() == name {
			return true
		}
	}
	return false
}

// upstreamReport lists what the upstream received, for failures.
func upstreamReport(up *fakeprovider.DeepSeekChat) string {
	var b strings.Builder
	for i, r := range up.Log() {
		fmt.Fprintf(&b, "upstream request %d: %s", i+1, r)
	}
	return b.String()
}

// TestClaudeCodeHarnessReachesUpstream points Claude Code straight at the
// DeepSeek upstream, without the gateway: a Chat-only provider has no
// /v1/messages, so Claude Code must fail with its 404. This proves the
// binary, flags, HOME and environment work, and pins what Claude Code
// sends: POST /v1/messages?beta=true, Bearer auth, its user agent.
func TestClaudeCodeHarnessReachesUpstream(t *testing.T) {
	claudeCodeBinary(t)
	workdir := t.TempDir()
	up := &fakeprovider.DeepSeekChat{Turns: claudeCodeTurns(t, workdir)}
	// The upstream answers a wrong path before it reads the body: keep
	// the query and body here.
	var queries []string
	var bodies [][]byte
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		queries, bodies = append(queries, r.URL.RawQuery), append(bodies, b)
		mu.Unlock()
		up.ServeHTTP(w, r)
	}))
	defer srv.Close()

	stdout, stderr, err := runClaudeCode(t, srv.URL, workdir, claudeCodePrompt)
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("claude did not fail with an exit code against a Chat-only upstream: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout+stderr, `"api_error_status":404`) {
		t.Errorf("claude's output lacks the upstream's 404\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	log := up.Log()
	if len(log) == 0 {
		t.Fatalf("the upstream got no request\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	for i, r := range log {
		if r.Method != http.MethodPost || r.Path != "/v1/messages" || queries[i] != "beta=true" {
			t.Errorf("request %d: %s %s?%s, want POST /v1/messages?beta=true", i+1, r.Method, r.Path, queries[i])
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+claudeCodeToken {
			t.Errorf("request %d: Authorization %q", i+1, got)
		}
		if got := r.Header.Get("User-Agent"); !strings.HasPrefix(got, "claude-cli/"+claudeCodeVersion+" ") {
			t.Errorf("request %d: User-Agent %q, want claude-cli/%s", i+1, got, claudeCodeVersion)
		}
		body := gjson.ParseBytes(bodies[i])
		// After the 404 Claude Code asks once more without streaming.
		if body.Get("model").String() != claudeCodeModel || (i == 0 && !body.Get("stream").Bool()) {
			t.Errorf("request %d: model %s stream %s", i+1, body.Get("model").Raw, body.Get("stream").Raw)
		}
		var names []string
		for _, tool := range body.Get("tools").Array() {
			names = append(names, tool.Get("name").String())
		}
		for _, want := range []string{"Write", "Edit", "Bash"} {
			if !slices.Contains(names, want) {
				t.Errorf("request %d: tools %q lack %s", i+1, names, want)
			}
		}
	}
}

// TestClaudeCodeThroughMessagesBridge runs a real Claude Code task through
// Caddy with messages_to_chat in front of the strict DeepSeek upstream:
// Claude Code writes a file with quotes, backslashes and non-ASCII text,
// edits it, runs Bash on it and prints the upstream's answer. Every
// upstream request is accepted, and each one after the first carries the
// earlier turns' reasoning back, exactly, as reasoning_content on the
// assistant tool-call messages.
func TestClaudeCodeThroughMessagesBridge(t *testing.T) {
	claudeCodeBinary(t)
	workdir := t.TempDir()
	up, addr := claudeCodeUpstream(t, workdir)
	startGateway(t, claudeCodeRules, addr)

	stdout, stderr, err := runClaudeCode(t, gatewayURL, workdir, claudeCodePrompt)
	if err != nil {
		t.Fatalf("claude failed: %v: %s\nstdout:\n%s\nstderr:\n%s\n%s", err, gjson.Get(stdout, "result").String(), stdout, stderr, upstreamReport(up))
	}

	// Claude Code's result: the upstream's answer.
	var res claudeCodeResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("claude's JSON output: %v\n%s", err, stdout)
	}
	if res.Type != "result" || res.IsError || res.Result != claudeCodeAnswer {
		t.Errorf("claude's result %+v, want the answer %q\n%s", res, claudeCodeAnswer, upstreamReport(up))
	}

	// The file, byte for byte.
	got, err := os.ReadFile(filepath.Join(workdir, "notes.txt"))
	if err != nil {
		t.Fatalf("claude wrote no notes.txt: %v\n%s", err, upstreamReport(up))
	}
	if string(got) != claudeCodeWant {
		t.Errorf("notes.txt\n got %q\nwant %q", got, claudeCodeWant)
	}

	// The upstream: nothing refused; the script's four turns answered in
	// order; request k carries the k earlier turns' reasoning.
	if refused := up.Refused(); len(refused) > 0 {
		t.Fatalf("the upstream refused %d requests, first: %s\n%s", len(refused), refused[0], upstreamReport(up))
	}
	var turns []int
	for _, r := range up.Log() {
		if r.Turn == -2 {
			t.Logf("side request answered outside the script: %s", r)
			continue
		}
		turns = append(turns, r.Turn)
		body := gjson.ParseBytes(r.Body)
		var reasoning []string
		for _, m := range body.Get("messages").Array() {
			if m.Get("role").String() == "assistant" && len(m.Get("tool_calls").Array()) > 0 {
				reasoning = append(reasoning, m.Get("reasoning_content").String())
			}
		}
		if !slices.Equal(reasoning, claudeCodeReasoning[:r.Turn]) {
			t.Errorf("turn %d: reasoning_content on the tool-call messages %q, want %q", r.Turn, reasoning, claudeCodeReasoning[:r.Turn])
		}
		if r.Turn == 3 {
			// Bash's output came back as the last tool message.
			msgs := body.Get("messages").Array()
			var last gjson.Result
			for _, m := range msgs {
				if m.Get("role").String() == "tool" {
					last = m
				}
			}
			if !strings.Contains(last.Get("content").String(), "日本語 – 🚀") || !strings.Contains(last.Get("content").String(), `"twice" \o/.`) {
				t.Errorf("the last tool message is not cat's output of the edited file: %s", last.Raw)
			}
		}
	}
	if !slices.Equal(turns, []int{0, 1, 2, 3}) {
		t.Errorf("scripted turns answered %v, want [0 1 2 3]\n%s", turns, upstreamReport(up))
	}
}

// bridgeMessagesRequest is a Claude-Code-like Messages request: system
// blocks, adaptive thinking, Write, Edit and Bash with 2020-12 schemas.
const bridgeMessagesRequest = `{
	"model": "claude-sonnet-4-6",
	"max_tokens": 32000,
	"system": [{"type": "text", "text": "You are a coding agent."}, {"type": "text", "text": "Work in /tmp/w.", "cache_control": {"type": "ephemeral"}}],
	"messages": [{"role": "user", "content": [{"type": "text", "text": "Create notes.txt, then edit it, then show it."}]}],
	"tools": [{"name": "Write", "description": "Write a file.", "input_schema": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
		"properties": {"file_path": {"type": "string"}, "content": {"type": "string"}}, "required": ["file_path", "content"], "additionalProperties": false}},
		{"name": "Edit", "description": "Edit a file.", "input_schema": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
		"properties": {"file_path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}, "replace_all": {"type": "boolean", "default": false}},
		"required": ["file_path", "old_string", "new_string"], "additionalProperties": false}},
		{"name": "Bash", "description": "Run a command.", "input_schema": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
		"properties": {"command": {"type": "string"}, "description": {"type": "string"}}, "required": ["command"], "additionalProperties": false}}],
	"thinking": {"type": "adaptive"},
	"output_config": {"effort": "high"}
}`

// postMessages sends a Messages request to the gateway as Claude Code
// does, and returns the status, content type and body.
func postMessages(t *testing.T, body string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, gatewayURL+"/v1/messages?beta=true", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+claudeCodeToken)
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// withStream sets a Messages request's stream member.
func withStream(t *testing.T, body string, stream bool) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatal(err)
	}
	m["stream"] = stream
	return jsonArgs(t, m)
}

// TestMessagesBridgeStreamMatchesJSON sends the same Messages request
// through messages_to_chat to the DeepSeek upstream with stream true and
// false: the official SDK must accumulate the stream into the JSON
// answer. The upstream answers both alike (the same reasoning, text, call
// ids and usage), so only what the bridge draws anew may differ: the
// message id, and the thinking block's signature if sealed with a fresh
// nonce (both must be non-empty). Then the JSON answer goes back as
// history: the upstream must get the reasoning back from the signature.
func TestMessagesBridgeStreamMatchesJSON(t *testing.T) {
	anthropicSDKNode(t)
	workdir := t.TempDir()
	up, addr := claudeCodeUpstream(t, workdir)
	startGateway(t, claudeCodeRules, addr)

	status, ctype, stream := postMessages(t, withStream(t, bridgeMessagesRequest, true))
	if status != http.StatusOK || !strings.HasPrefix(ctype, "text/event-stream") {
		t.Fatalf("stream: %d %s\n%s\n%s", status, ctype, stream, upstreamReport(up))
	}
	status, ctype, whole := postMessages(t, withStream(t, bridgeMessagesRequest, false))
	if status != http.StatusOK || !strings.HasPrefix(ctype, "application/json") {
		t.Fatalf("JSON: %d %s\n%s\n%s", status, ctype, whole, upstreamReport(up))
	}
	if refused := up.Refused(); len(refused) > 0 {
		t.Fatalf("the upstream refused: %s", refused[0])
	}

	// The JSON answer is the upstream's first turn, in order: thinking
	// (with a signature), text, the Write call.
	msg := gjson.ParseBytes(whole)
	turn := claudeCodeTurns(t, workdir)[0]
	var types []string
	for _, b := range msg.Get("content").Array() {
		types = append(types, b.Get("type").String())
	}
	if !slices.Equal(types, []string{"thinking", "text", "tool_use"}) ||
		msg.Get("content.0.thinking").String() != turn.Reasoning || msg.Get("content.0.signature").String() == "" ||
		msg.Get("content.1.text").String() != turn.Text ||
		msg.Get("content.2.name").String() != "Write" || !sameJSON(t, []byte(msg.Get("content.2.input").Raw), []byte(turn.Calls[0].Arguments)) ||
		msg.Get("stop_reason").String() != "tool_use" || msg.Get("model").String() != claudeCodeModel {
		t.Errorf("JSON answer %s", whole)
	}

	anthropicSDKCheck(t, stream, whole, "id", "content.0.signature")

	// Turn 2: the answer as history, the call answered.
	var req map[string]any
	if err := json.Unmarshal([]byte(bridgeMessagesRequest), &req); err != nil {
		t.Fatal(err)
	}
	var content any
	if err := json.Unmarshal([]byte(msg.Get("content").Raw), &content); err != nil {
		t.Fatal(err)
	}
	req["messages"] = append(req["messages"].([]any),
		map[string]any{"role": "assistant", "content": content},
		map[string]any{"role": "user", "content": []any{map[string]any{
			"type": "tool_result", "tool_use_id": msg.Get("content.2.id").String(), "content": "File created successfully.",
		}}})
	req["stream"] = true
	status, _, stream2 := postMessages(t, jsonArgs(t, req))
	if status != http.StatusOK {
		t.Fatalf("turn 2: %d\n%s\n%s", status, stream2, upstreamReport(up))
	}
	log := up.Log()
	last := log[len(log)-1]
	if last.Status != http.StatusOK || last.Turn != 1 {
		t.Fatalf("turn 2 reached the upstream as %s", last)
	}
	var calls []gjson.Result
	for _, m := range gjson.GetBytes(last.Body, "messages").Array() {
		if len(m.Get("tool_calls").Array()) > 0 {
			calls = append(calls, m)
		}
	}
	if len(calls) != 1 || calls[0].Get("reasoning_content").String() != turn.Reasoning || calls[0].Get("content").String() != turn.Text {
		t.Errorf("turn 2's assistant message upstream: %v, want reasoning_content %q and content %q", calls, turn.Reasoning, turn.Text)
	}
	message2, _ := anthropicSDKFinal(t, stream2)
	if got := gjson.GetBytes(message2, "content.#(type==\"tool_use\").name").String(); got != "Edit" {
		t.Errorf("turn 2's answer: %s", message2)
	}
}
