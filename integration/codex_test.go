//go:build unix

// The Codex harness kills Codex's whole process group on timeout, which
// needs Unix process groups; Codex CI runs on Linux.

package integration

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
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

const (
	// codexPrompt is all the demo upstream needs: it follows a fixed script.
	codexPrompt = "Create hello.txt"

	// codexTimeout bounds one `codex exec`; a healthy run takes seconds.
	codexTimeout = 120 * time.Second

	// codexKey is exported as GW_KEY, the provider's env_key.
	codexKey = "test-gateway-key"

	// codexFixture is a sanitized turn-1 request of Codex 0.169 with gpt-5.5.
	codexFixture = "testdata/codex/codex-0.169-gpt-5.5-responses-request.json"

	// wantHelloTxt is what the demo's patch creates once normalised.
	wantHelloTxt = "Hello from caddy-llm-transform\n"
)

// codexConfig points Codex at one base URL with retries off, so each turn is
// exactly one request and a failure surfaces at once. The model must be in
// Codex's bundled catalog: only then does Codex send the freeform apply_patch.
const codexConfig = `model = "gpt-5.5"
model_provider = "gw"

[model_providers.gw]
name = "gw"
base_url = %q
wire_api = "responses"
env_key = "GW_KEY"
request_max_retries = 0
stream_max_retries = 0
`

// codexBinary finds the Codex CLI: $CODEX_BIN, else the pinned version
// where .ci/run installs it. The test installs nothing itself, so that
// `go test` never reaches a registry. Without Codex the test is skipped,
// except on CI (CI=true), where it must run.
func codexBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("CODEX_BIN"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("CODEX_BIN=%s: %v", bin, err)
		}
		return bin
	}
	bin, err := pinnedCodex()
	if err == nil {
		return bin
	}
	missingTool(t, "Codex CLI "+codexVersion+" unavailable ("+err.Error()+"); run .ci/run, or set CODEX_BIN to node_modules/.bin/codex")
	return ""
}

const codexVersion = "0.169.0"

// pinnedCodex is the Codex CLI .ci/run installs into the user cache.
func pinnedCodex() (string, error) {
	return cachedTool("codex-"+codexVersion, "node_modules", ".bin", "codex")
}

// codexEnv is the caller's environment without anything that could steer
// Codex elsewhere: its own settings, OpenAI credentials, proxies (the gateway
// is on 127.0.0.1) and the real HOME.
func codexEnv(home, codexHome string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		upper := strings.ToUpper(name)
		switch {
		case strings.HasPrefix(upper, "CODEX_"), strings.HasPrefix(upper, "OPENAI_"),
			strings.HasSuffix(upper, "_PROXY"), strings.HasPrefix(upper, "XDG_"),
			upper == "HOME", upper == "GW_KEY", upper == "RUST_LOG":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "CODEX_HOME="+codexHome, "GW_KEY="+codexKey)
}

// runCodex runs `codex exec` once in workdir against baseURL (ending in /v1)
// with a throwaway HOME and CODEX_HOME, and returns its output. err is
// non-nil when Codex exits non-zero or runs past codexTimeout.
func runCodex(t *testing.T, baseURL, workdir, prompt string) (stdout, stderr string, err error) {
	t.Helper()
	bin := codexBinary(t)
	home := t.TempDir()
	codexHome := filepath.Join(home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	// %q quoting is valid TOML for a URL.
	cfg := fmt.Sprintf(codexConfig, baseURL)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), codexTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "exec", "--skip-git-repo-check",
		"--dangerously-bypass-approvals-and-sandbox", prompt)
	cmd.Dir = workdir
	cmd.Env = codexEnv(home, codexHome)
	cmd.Stdin = nil // /dev/null: `codex exec` otherwise waits for more input
	var outBuf, errBuf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outBuf, &errBuf
	// The npm launcher may run the native binary as a child; kill the group so
	// nothing outlives a timeout and keeps the output pipes open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second

	start := time.Now()
	err = cmd.Run()
	if ctx.Err() != nil {
		err = errors.Join(err, ctx.Err())
	}
	t.Logf("codex exec took %s (err: %v)", time.Since(start).Round(time.Millisecond), err)
	return outBuf.String(), errBuf.String(), err
}

// headerRecorder keeps the method, path, headers and body of each request,
// then hands the request on to next.
type headerRecorder struct {
	mu     sync.Mutex
	seen   []*http.Request
	bodies [][]byte
	next   http.Handler
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	h.mu.Lock()
	h.seen = append(h.seen, &http.Request{Method: r.Method, URL: r.URL, Header: r.Header.Clone()})
	h.bodies = append(h.bodies, body)
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
}

func (h *headerRecorder) requests() []*http.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*http.Request(nil), h.seen...)
}

// requestBodies returns the bodies of the requests, in order.
func (h *headerRecorder) requestBodies() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]byte(nil), h.bodies...)
}

// toolSignature lists each tool as type:name, and flattens namespaces, so a
// Codex that changes the tools it sends shows up as a readable diff.
func toolSignature(tools gjson.Result) []string {
	var sig []string
	for _, t := range tools.Array() {
		sig = append(sig, t.Get("type").String()+":"+t.Get("name").String())
		for _, nt := range t.Get("tools").Array() {
			sig = append(sig, "  "+nt.Get("type").String()+":"+nt.Get("name").String())
		}
	}
	return sig
}

// TestCodexHarnessReachesUpstream points Codex straight at the strict demo
// upstream, without the gateway. Codex must fail with the upstream's 400: this
// proves the binary, config and HOME set-up work, and pins what Codex sends.
func TestCodexHarnessReachesUpstream(t *testing.T) {
	codexBinary(t)
	demo := &fakeprovider.Provider{}
	rec := &headerRecorder{next: demo}
	srv := httptest.NewServer(rec)
	defer srv.Close()

	workdir := t.TempDir()
	stdout, stderr, err := runCodex(t, srv.URL+"/v1", workdir, codexPrompt)
	if err == nil {
		t.Fatalf("codex succeeded against a strict upstream\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("codex did not run to an exit code: %v\nstderr:\n%s", err, stderr)
	}
	const wantErr = `{"error":{"message":"unknown variant ` + "`custom`" + `, expected ` + "`function`" +
		`","type":"invalid_request_error","param":"tools[3].type","code":null}}`
	if !strings.Contains(stdout+stderr, wantErr) {
		t.Fatalf("codex output lacks the upstream's 400 %s\nstdout:\n%s\nstderr:\n%s", wantErr, stdout, stderr)
	}

	// With retries off, Codex sends exactly one request, and nothing else.
	seen := rec.requests()
	if len(seen) != 1 || seen[0].Method != http.MethodPost || seen[0].URL.Path != "/v1/responses" {
		var got []string
		for _, r := range seen {
			got = append(got, r.Method+" "+r.URL.String())
		}
		t.Fatalf("requests = %q, want one POST /v1/responses", got)
	}
	for name, want := range map[string]string{
		"Authorization": "Bearer " + codexKey,
		"Accept":        "text/event-stream",
		"Content-Type":  "application/json",
		"Originator":    "codex_exec",
	} {
		if got := seen[0].Header.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}

	reqs := demo.Requests()
	if len(reqs) != 1 {
		t.Fatalf("upstream recorded %d bodies, want 1", len(reqs))
	}
	body := gjson.ParseBytes(reqs[0])
	if body.Get("model").String() != "gpt-5.5" || !body.Get("stream").Bool() || body.Get("tool_choice").String() != "auto" {
		t.Errorf("request model/stream/tool_choice = %s/%s/%s", body.Get("model").Raw, body.Get("stream").Raw, body.Get("tool_choice").Raw)
	}
	input := body.Get("input").Array()
	if len(input) == 0 || input[len(input)-1].Get("content.0.text").String() != codexPrompt {
		t.Errorf("last input item is not the prompt: %s", body.Get("input").Raw)
	}

	// Codex must still send what the recorded fixture has: a drift here
	// means the fixture, and maybe the transform, need a look.
	fixture, err := os.ReadFile(codexFixture)
	if err != nil {
		t.Fatal(err)
	}
	want := gjson.ParseBytes(fixture)
	if got, want := toolSignature(body.Get("tools")), toolSignature(want.Get("tools")); !reflect.DeepEqual(got, want) {
		t.Errorf("tools Codex sends changed:\n got %q\nwant %q", got, want)
	}
	// @ugly compacts, since the fixture is stored pretty-printed.
	const grammar = `tools.#(name=="apply_patch").format|@ugly`
	if got, want := body.Get(grammar).Raw, want.Get(grammar).Raw; got != want || got == "" {
		t.Errorf("apply_patch format changed:\n got %s\nwant %s", got, want)
	}
}

// TestCodexAppliesPatchThroughGateway runs a real Codex turn through Caddy
// with llm_transform in front of the strict demo upstream: Codex must apply
// the (normalised) patch, and turn 2 must reach the upstream in function form.
func TestCodexAppliesPatchThroughGateway(t *testing.T) {
	codexBinary(t)
	demo, up := strictUpstream(t)
	startGateway(t, `		rule field_custom_tools_to_function {
			names apply_patch
		}`, up)

	workdir := t.TempDir()
	stdout, stderr, err := runCodex(t, gatewayURL+"/v1", workdir, codexPrompt)
	assertCodexApplied(t, workdir, stdout, stderr, err)

	reqs := demo.Requests()
	if len(reqs) != 2 {
		t.Fatalf("upstream received %d requests, want 2 (patch turn, answer turn)", len(reqs))
	}
	assertCodexTurn2(t, reqs[1])
}

// assertCodexApplied checks a `codex exec` run of codexPrompt succeeded:
// hello.txt holds the normalised demo patch's line and Codex printed the
// upstream's final answer.
func assertCodexApplied(t *testing.T, workdir, stdout, stderr string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("codex failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	got, err := os.ReadFile(filepath.Join(workdir, "hello.txt"))
	if err != nil {
		t.Fatalf("codex created no hello.txt: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if string(got) != wantHelloTxt {
		t.Errorf("hello.txt = %q, want %q", got, wantHelloTxt)
	}
	if !strings.Contains(stdout, "Patch applied.") {
		t.Errorf("codex did not print the final answer\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
}

// assertCodexTurn2 checks the upstream's second request of a Codex patch
// run: Codex's custom apply_patch call reached it as a function call with
// the normalised patch wrapped once, answered by its output.
func assertCodexTurn2(t *testing.T, body []byte) {
	t.Helper()
	turn2 := gjson.ParseBytes(body)
	var call, output gjson.Result
	for i, item := range turn2.Get("input").Array() {
		typ, id := item.Get("type").String(), item.Get("id").String()
		if strings.HasPrefix(typ, "custom_tool_call") {
			t.Errorf("turn 2 input[%d] is still %s: %s", i, typ, item.Raw)
		}
		if strings.HasPrefix(id, "ctc_") || strings.HasPrefix(id, "ctco_") {
			t.Errorf("turn 2 input[%d] keeps custom id %q: %s", i, id, item.Raw)
		}
		switch {
		case typ == "function_call" && item.Get("name").String() == "apply_patch":
			call = item
		case typ == "function_call_output":
			output = item
		}
	}
	if !call.Exists() {
		t.Fatalf("turn 2 has no apply_patch function_call: %s", turn2.Get("input").Raw)
	}
	// The arguments are {"input": <patch>}, wrapped exactly once: the
	// string inside is the patch itself, not JSON text again.
	var args map[string]any
	if err := json.Unmarshal([]byte(call.Get("arguments").String()), &args); err != nil {
		t.Fatalf("arguments %s: %v", call.Get("arguments").Raw, err)
	}
	patch, ok := args["input"].(string)
	if !ok || len(args) != 1 {
		t.Fatalf("arguments = %s, want exactly {\"input\": <string>}", call.Get("arguments").Raw)
	}
	if json.Valid([]byte(patch)) {
		t.Errorf("input is JSON-wrapped twice: %q", patch)
	}
	if patch != normalisedDemoPatch {
		t.Errorf("input = %q, want the normalised patch %q", patch, normalisedDemoPatch)
	}
	if !output.Exists() || output.Get("call_id").String() != call.Get("call_id").String() || call.Get("call_id").String() == "" {
		t.Errorf("function_call_output %s does not answer call %s", output.Raw, call.Raw)
	}
	if !strings.Contains(output.Get("output").String(), "hello.txt") {
		t.Errorf("tool output does not mention hello.txt: %s", output.Raw)
	}
}
