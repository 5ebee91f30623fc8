//go:build unix

// The Claude Code harness kills the CLI's whole process group on timeout,
// which needs Unix process groups.

package integration

// messages_to_chat with Claude Code on more upstreams: the Write, Edit,
// Bash task of claudecode_test.go against a strict Kimi-like upstream
// (fakeprovider.KimiChat, profile kimi), and one prompt with an image on
// a profile without vision (deepseek): the upstream gets a text
// placeholder instead, and the turn completes.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// claudeCodeKimiRules bridge Messages to Kimi's Chat: the bridge, the
// model routed to Kimi K2.6, the tools fitted to Kimi's profile.
const claudeCodeKimiRules = `		rule messages_to_chat {
			profile kimi
		}
		rule field_set {
			models claude-*
			path model
			value kimi-k2.6
		}
		rule tools_plan {
			profile kimi
		}`

// chatReport lists what a mock received, for failures.
func chatReport(log []fakeprovider.ChatRequest) string {
	var b strings.Builder
	for i, r := range log {
		fmt.Fprintf(&b, "upstream request %d: %s", i+1, r)
	}
	return b.String()
}

// TestClaudeCodeKimi runs the Claude Code task through Caddy against the
// strict Kimi upstream: Claude Code writes, edits and shows the file and
// prints the answer; every upstream request is accepted; request k gives
// back the k earlier turns' reasoning exactly and Kimi's call ids
// (functions.Write:0, functions.Edit:1, functions.Bash:2) byte for byte,
// in the calls and in the tool messages.
func TestClaudeCodeKimi(t *testing.T) {
	claudeCodeBinary(t)
	workdir := t.TempDir()
	up := &fakeprovider.KimiChat{ChatScript: fakeprovider.ChatScript{
		Turns:          claudeCodeTurns(t, workdir),
		ExactReasoning: true,
		Aside: func(req gjson.Result) (fakeprovider.Turn, bool) {
			if declaresTool(req, "Write") {
				return fakeprovider.Turn{}, false
			}
			return fakeprovider.Turn{Reasoning: "A side request.", Text: "none"}, true
		},
	}}
	startGateway(t, claudeCodeKimiRules, serveUpstream(t, up))

	stdout, stderr, err := runClaudeCode(t, gatewayURL, workdir, claudeCodePrompt)
	if err != nil {
		t.Fatalf("claude failed: %v: %s\nstdout:\n%s\nstderr:\n%s\n%s", err, gjson.Get(stdout, "result").String(), stdout, stderr, chatReport(up.Log()))
	}
	var res claudeCodeResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("claude's JSON output: %v\n%s", err, stdout)
	}
	if res.Type != "result" || res.IsError || res.Result != claudeCodeAnswer {
		t.Errorf("claude's result %+v, want the answer %q\n%s", res, claudeCodeAnswer, chatReport(up.Log()))
	}
	got, err := os.ReadFile(filepath.Join(workdir, "notes.txt"))
	if err != nil {
		t.Fatalf("claude wrote no notes.txt: %v\n%s", err, chatReport(up.Log()))
	}
	if string(got) != claudeCodeWant {
		t.Errorf("notes.txt\n got %q\nwant %q", got, claudeCodeWant)
	}

	if refused := up.Refused(); len(refused) > 0 {
		t.Fatalf("the upstream refused %d requests, first: %s\n%s", len(refused), refused[0], chatReport(up.Log()))
	}
	ids := []string{"functions.Write:0", "functions.Edit:1", "functions.Bash:2"}
	var turns []int
	for _, r := range up.Log() {
		if r.Turn == -2 {
			t.Logf("side request answered outside the script: %s", r)
			continue
		}
		turns = append(turns, r.Turn)
		body := gjson.ParseBytes(r.Body)
		if body.Get("model").String() != "kimi-k2.6" {
			t.Errorf("turn %d: model %s, want kimi-k2.6", r.Turn, body.Get("model").Raw)
		}
		var reasoning, calls, answered []string
		for _, m := range body.Get("messages").Array() {
			if m.Get("role").String() == "assistant" && len(m.Get("tool_calls").Array()) > 0 {
				reasoning = append(reasoning, m.Get("reasoning_content").String())
			}
			for _, tc := range m.Get("tool_calls").Array() {
				calls = append(calls, tc.Get("id").String())
			}
			if m.Get("role").String() == "tool" {
				answered = append(answered, m.Get("tool_call_id").String())
			}
		}
		if !slices.Equal(reasoning, claudeCodeReasoning[:r.Turn]) {
			t.Errorf("turn %d: reasoning_content on the tool-call messages %q, want %q", r.Turn, reasoning, claudeCodeReasoning[:r.Turn])
		}
		if !slices.Equal(calls, ids[:r.Turn]) || !slices.Equal(answered, ids[:r.Turn]) {
			t.Errorf("turn %d: call ids %q, tool messages answer %q, want Kimi's %q verbatim", r.Turn, calls, answered, ids[:r.Turn])
		}
	}
	if !slices.Equal(turns, []int{0, 1, 2, 3}) {
		t.Errorf("scripted turns answered %v, want [0 1 2 3]\n%s", turns, chatReport(up.Log()))
	}
}

// claudeCodeImageAnswer is the upstream's answer to the image prompt.
const claudeCodeImageAnswer = "I cannot see the image here; it was left out before it reached me."

// claudeCodeImagePNG is a small valid PNG: a 16×16 red square.
func claudeCodeImagePNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for x := range 16 {
		for y := range 16 {
			img.Set(x, y, color.RGBA{R: 255, A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// runClaudeCodeStreamJSON runs `claude -p` with its prompt read from
// stdin as stream-json (how print mode takes a message with an image
// block) and returns the result line of its stream-json output.
func runClaudeCodeStreamJSON(t *testing.T, baseURL, workdir string, message any) (result gjson.Result, stdout, stderr string, err error) {
	t.Helper()
	bin := claudeCodeBinary(t)
	line, jerr := json.Marshal(map[string]any{"type": "user", "message": message})
	if jerr != nil {
		t.Fatal(jerr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), claudeCodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-p",
		"--model", claudeCodeModel,
		"--input-format", "stream-json",
		"--output-format", "stream-json",
		"--verbose",
		"--no-session-persistence")
	cmd.Dir = workdir
	cmd.Env = claudeCodeEnv(t.TempDir(), baseURL)
	cmd.Stdin = bytes.NewReader(append(line, '\n'))
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
	t.Logf("claude -p --input-format stream-json took %s (err: %v)", time.Since(start).Round(time.Millisecond), err)
	for _, l := range strings.Split(outBuf.String(), "\n") {
		if r := gjson.Parse(l); r.Get("type").String() == "result" {
			result = r
		}
	}
	return result, outBuf.String(), errBuf.String(), err
}

// TestClaudeCodeImage sends Claude Code a prompt with an image (print
// mode, a stream-json user message with an image block) through the
// bridge on the deepseek profile, whose upstream takes text only
// (fakeprovider.DeepSeekChat refuses any other content part). The
// upstream must get a short text placeholder where the image was
// ("[image omitted…]", the unsupported_content placeholder), no image
// part, and the turn must complete with the upstream's answer.
func TestClaudeCodeImage(t *testing.T) {
	claudeCodeBinary(t)
	workdir := t.TempDir()
	up := &fakeprovider.DeepSeekChat{
		Turns: []fakeprovider.Turn{{Reasoning: "There is no image in what I got, only a note that one was left out.", Text: claudeCodeImageAnswer}},
		Aside: func(req gjson.Result) (fakeprovider.Turn, bool) {
			if declaresTool(req, "Write") {
				return fakeprovider.Turn{}, false
			}
			return fakeprovider.Turn{Reasoning: "A side request.", Text: "none"}, true
		},
	}
	startGateway(t, claudeCodeRules, serveUpstream(t, up))

	data := base64.StdEncoding.EncodeToString(claudeCodeImagePNG(t))
	message := map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "text", "text": "What is in this image? Answer in one sentence."},
		map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": data}},
	}}
	result, stdout, stderr, err := runClaudeCodeStreamJSON(t, gatewayURL, workdir, message)

	// What the upstream got: the main request (the one that offers
	// Write) holds the placeholder and no image.
	var main []fakeprovider.ChatRequest
	for _, r := range up.Log() {
		if declaresTool(gjson.ParseBytes(r.Body), "Write") {
			main = append(main, r)
		}
	}
	if len(main) == 0 {
		t.Fatalf("no main request reached the upstream (err %v)\nstdout:\n%s\nstderr:\n%s\n%s", err, stdout, stderr, upstreamReport(up))
	}
	for _, r := range main {
		msgs := gjson.GetBytes(r.Body, "messages").Raw
		if i := strings.Index(msgs, "[image"); i >= 0 {
			t.Logf("upstream: …%s", msgs[i:min(i+80, len(msgs))])
		}
		if strings.Contains(msgs, "image_url") || strings.Contains(msgs, data[:32]) {
			t.Errorf("the image went upstream: %s", r)
		}
		if !strings.Contains(strings.ToLower(msgs), "image omitted") {
			t.Errorf("no \"image omitted\" placeholder upstream (the unsupported_content placeholder for a profile without vision): %s", r)
		}
	}
	if refused := up.Refused(); len(refused) > 0 {
		t.Errorf("the upstream refused %d requests, first: %s", len(refused), refused[0])
	}
	if err != nil || !result.Exists() || result.Get("is_error").Bool() || result.Get("result").String() != claudeCodeImageAnswer {
		t.Errorf("the turn did not complete with the upstream's answer (err %v): result %s\nstderr:\n%s\n%s", err, result.Raw, stderr, upstreamReport(up))
	}
}
