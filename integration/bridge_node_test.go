package integration

// responses_to_chat with the official openai npm package: its
// client.responses.stream() (a strict accumulator that throws on an
// unknown event, a reused output_index, a delta without its part, …)
// reads the bridged stream through Caddy.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// openaiNodeVersion is the openai npm package .ci/run installs.
const openaiNodeVersion = "7.59.0"

// nodeScript streams one request with client.responses.stream().
const nodeScript = "testdata/bridge/responses_stream.cjs"

// cachedTool is the path under the user cache where .ci/run installs the
// tools the end-to-end tests run (…/caddy-llm-transform/<dir>/<rel…>), if
// it is there.
func cachedTool(dir string, rel ...string) (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(home, ".cache")
	}
	p := filepath.Join(append([]string{base, "caddy-llm-transform", dir}, rel...)...)
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// missingTool skips a test whose external tool is not installed, except
// on CI (CI=true), where the test must run and fails instead.
func missingTool(t *testing.T, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (required on CI)")
	}
	t.Skip(msg)
}

// openaiNode finds node and the openai package: $OPENAI_NODE_DIR (a
// directory `npm install --prefix` put openai into), else the pinned
// version where .ci/run installs it. Like codexBinary it installs nothing.
func openaiNode(t *testing.T) (node, dir string) {
	t.Helper()
	dir = os.Getenv("OPENAI_NODE_DIR")
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
			t.Fatalf("OPENAI_NODE_DIR=%s: %v", dir, err)
		}
	} else {
		pkg, err := cachedTool("openai-node-"+openaiNodeVersion, "node_modules", "openai", "package.json")
		if err != nil {
			missingTool(t, "openai npm package "+openaiNodeVersion+" unavailable ("+err.Error()+"); run .ci/run, or set OPENAI_NODE_DIR")
		}
		dir = filepath.Dir(filepath.Dir(filepath.Dir(pkg)))
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missingTool(t, "node unavailable: "+err.Error())
	}
	return node, dir
}

// nodeResult is what the script accumulated.
type nodeResult struct {
	Events []string `json:"events"`
	Final  struct {
		Status            string `json:"status"`
		Model             string `json:"model"`
		OutputText        string `json:"output_text"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Output []struct {
			Type      string `json:"type"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			Content   []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Usage struct {
			InputTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	} `json:"final"`
}

// runNodeStream runs the script against the gateway.
func runNodeStream(t *testing.T) nodeResult {
	t.Helper()
	node, dir := openaiNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, nodeScript)
	cmd.Env = append(os.Environ(), "OPENAI_NODE_DIR="+dir, "GATEWAY_URL="+gatewayURL+"/v1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("openai-node rejected the stream: %v\n%s%s", err, stderr.String(), stdout.String())
	}
	var r nodeResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("script output: %v\n%s", err, stdout.String())
	}
	return r
}

// TestBridgeOpenAINodeStream: responses.stream() accumulates a thinking
// provider's tool turn (reasoning, text, two parallel calls) and resolves
// finalResponse() with the completed response.
func TestBridgeOpenAINodeStream(t *testing.T) {
	openaiNode(t)
	turns := bridgeTask()
	turns[0].Text = "I'll look around first."
	up := startBridge(t, fakeprovider.DeepSeek, turns)
	r := runNodeStream(t)

	if n := len(r.Events); n < 3 || r.Events[0] != "response.created" || r.Events[n-1] != "response.completed" {
		t.Fatalf("events %q", r.Events)
	}
	ids := up.CallIDs()
	var got []string
	for _, it := range r.Final.Output {
		switch it.Type {
		case "reasoning", "message":
			got = append(got, it.Type+":"+it.Content[0].Type+":"+it.Content[0].Text)
		default:
			got = append(got, it.Type+":"+it.CallID+":"+it.Name+":"+it.Arguments)
		}
	}
	want := []string{
		"reasoning:reasoning_text:" + bridgeReasoning[0],
		"message:output_text:I'll look around first.",
		"function_call:" + ids[0] + `:exec_command:{"cmd":"ls"}`,
		"function_call:" + ids[1] + `:exec_command:{"cmd":"cat README.md"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("final output\n got %q\nwant %q", got, want)
	}
	if r.Final.Status != "completed" || r.Final.Model != "gpt-5.5" || r.Final.OutputText != "I'll look around first." {
		t.Errorf("final status %q model %q output_text %q", r.Final.Status, r.Final.Model, r.Final.OutputText)
	}
	if c := r.Final.Usage.InputTokensDetails.CachedTokens; c != fakeprovider.CacheHitTokens(len(up.Requests()[0])) {
		t.Errorf("cached_tokens %d", c)
	}
}

// TestBridgeOpenAINodeLength: a length-cut answer ends in
// response.incomplete, which responses.stream() takes, and
// finalResponse() says why.
func TestBridgeOpenAINodeLength(t *testing.T) {
	openaiNode(t)
	startBridge(t, fakeprovider.Kimi, lengthTurn)
	r := runNodeStream(t)
	if n := len(r.Events); n < 3 || r.Events[n-1] != "response.incomplete" {
		t.Fatalf("events %q", r.Events)
	}
	if r.Final.Status != "incomplete" || r.Final.IncompleteDetails == nil || r.Final.IncompleteDetails.Reason != "max_output_tokens" ||
		r.Final.OutputText != "The answer is cut" {
		t.Errorf("final %+v", r.Final)
	}
}
