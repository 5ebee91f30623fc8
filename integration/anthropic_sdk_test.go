package integration

// The official Anthropic TypeScript SDK as a conformance check of Messages
// streams (anthropic-messages-bridge.md §14 scenario 23): its accumulators,
// MessageStream and BetaMessageStream (Claude Code's), read a stream
// through the SDK's own SSE decoder, and the final message must equal the
// same answer as JSON.

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// anthropicSDKVersion is the @anthropic-ai/sdk npm package .ci/run installs.
const anthropicSDKVersion = "1.15.0"

// anthropicSDKScript feeds a stream on stdin to both accumulators.
const anthropicSDKScript = "testdata/anthropic-sdk/final_message.cjs"

// claudeCodeFixtures are Claude Code 2.1.332's recorded requests and the
// streams it accepted, beside the repository.
const claudeCodeFixtures = "../../shared/fixtures/claude-code"

// anthropicSDKNode finds node and the SDK: $ANTHROPIC_SDK_DIR (a directory
// `npm install --prefix` put @anthropic-ai/sdk into), else the pinned
// version where .ci/run installs it. It installs nothing; without the SDK
// the test is skipped, except under CI=true, where it fails.
func anthropicSDKNode(t *testing.T) (node, dir string) {
	t.Helper()
	dir = os.Getenv("ANTHROPIC_SDK_DIR")
	if dir == "" {
		pkg, err := cachedTool("anthropic-sdk-"+anthropicSDKVersion, "node_modules", "@anthropic-ai", "sdk", "package.json")
		if err != nil {
			missingTool(t, "@anthropic-ai/sdk "+anthropicSDKVersion+" unavailable ("+err.Error()+"); run .ci/run, or set ANTHROPIC_SDK_DIR")
		}
		dir = filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(pkg))))
	}
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "@anthropic-ai", "sdk", "package.json"))
	if err != nil {
		t.Fatalf("ANTHROPIC_SDK_DIR=%s: %v", dir, err)
	}
	if got := gjson.GetBytes(b, "version").String(); got != anthropicSDKVersion {
		t.Fatalf("ANTHROPIC_SDK_DIR=%s holds @anthropic-ai/sdk %s, the test pins %s", dir, got, anthropicSDKVersion)
	}
	node, err = exec.LookPath("node")
	if err != nil {
		missingTool(t, "node unavailable: "+err.Error())
	}
	return node, dir
}

// anthropicSDKFinal runs the script on stream and returns the final
// message of MessageStream and of BetaMessageStream. A stream the SDK
// refuses fails the test with the SDK's error.
func anthropicSDKFinal(t *testing.T, stream []byte) (message, beta []byte) {
	t.Helper()
	node, dir := anthropicSDKNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, anthropicSDKScript)
	cmd.Env = append(os.Environ(), "ANTHROPIC_SDK_DIR="+dir)
	cmd.Stdin = bytes.NewReader(stream)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the Anthropic SDK refused the stream: %v\n%s%s\nstream:\n%s", err, stdout.String(), stderr.String(), stream)
	}
	var out struct {
		Message json.RawMessage `json:"message"`
		Beta    json.RawMessage `json:"beta"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.Message) == 0 || len(out.Beta) == 0 {
		t.Fatalf("script output (%v): %s\n%s", err, stdout.String(), stderr.String())
	}
	return out.Message, out.Beta
}

// anthropicSDKCheck asserts that the SDK's accumulators, MessageStream and
// BetaMessageStream, turn stream into exactly the message want (a
// non-streaming Messages JSON body), compared as JSON values.
//
// Nothing is ignored silently. The SDK adds parsed_output (null without
// structured output) to the final message; it must be null and is then
// dropped. byDesign names the members that differ by design between two
// answers (say "id", the message id every answer draws anew, or
// "content.*.signature", sealed with a fresh nonce): each must be a
// non-empty string on both sides, and only then is it left out of the
// comparison; the test log says which were. A path is dot-separated
// members, "*" for every element of an array.
func anthropicSDKCheck(t *testing.T, stream, want []byte, byDesign ...string) {
	t.Helper()
	message, beta := anthropicSDKFinal(t, stream)
	var w any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want: %v: %s", err, want)
	}
	for _, got := range []struct {
		name string
		raw  []byte
	}{{"MessageStream", message}, {"BetaMessageStream", beta}} {
		var g map[string]any
		if err := json.Unmarshal(got.raw, &g); err != nil {
			t.Fatalf("%s: %v: %s", got.name, err, got.raw)
		}
		if po, ok := g["parsed_output"]; ok {
			if po != nil {
				t.Errorf("%s: parsed_output %v, want null (no structured output was asked for)", got.name, po)
			}
			delete(g, "parsed_output")
		}
		wc := cloneJSON(w)
		var gv any = g
		for _, path := range byDesign {
			gs, ws := maskJSON(gv, path), maskJSON(wc, path)
			if len(gs) != len(ws) || len(gs) == 0 {
				t.Errorf("%s: %s: %d values in the stream's message, %d in the JSON", got.name, path, len(gs), len(ws))
				continue
			}
			for i := range gs {
				if gs[i] == "" || ws[i] == "" {
					t.Errorf("%s: %s[%d] is not a non-empty string (stream %q, JSON %q)", got.name, path, i, gs[i], ws[i])
				} else if gs[i] != ws[i] {
					t.Logf("%s: %s[%d] differs by design: stream %.40q, JSON %.40q", got.name, path, i, gs[i], ws[i])
				}
			}
		}
		if !reflect.DeepEqual(gv, wc) {
			gb, _ := json.MarshalIndent(gv, "", "  ")
			wb, _ := json.MarshalIndent(wc, "", "  ")
			t.Errorf("%s: the stream's final message differs from the JSON answer\n got %s\nwant %s", got.name, gb, wb)
		}
	}
}

// maskJSON replaces every value at path in v (decoded JSON) with
// "<by design>" and returns the values it replaced, in document order; a
// value that is not a string is returned as "". A path is dot-separated
// members, "*" for every element of an array.
func maskJSON(v any, path string) []string {
	var out []string
	var walk func(v any, parts []string)
	walk = func(v any, parts []string) {
		last := len(parts) == 1
		take := func(c any) any {
			s, _ := c.(string)
			out = append(out, s)
			return "<by design>"
		}
		switch x := v.(type) {
		case map[string]any:
			c, ok := x[parts[0]]
			switch {
			case !ok:
			case last:
				x[parts[0]] = take(c)
			default:
				walk(c, parts[1:])
			}
		case []any:
			for i, c := range x {
				if parts[0] != "*" && parts[0] != strconv.Itoa(i) {
					continue
				}
				if last {
					x[i] = take(c)
				} else {
					walk(c, parts[1:])
				}
			}
		}
	}
	walk(v, strings.Split(path, "."))
	return out
}

// cloneJSON deep-copies a decoded JSON value.
func cloneJSON(v any) any {
	b, _ := json.Marshal(v)
	var c any
	_ = json.Unmarshal(b, &c)
	return c
}

// claudeCodeFixture reads a file of the recorded Claude Code traffic;
// without the folder the test is skipped, except under CI=true.
func claudeCodeFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(claudeCodeFixtures, name))
	if err != nil {
		missingTool(t, "Claude Code fixtures unavailable: "+err.Error())
	}
	return b
}

// fixtureToolUseMessage is response-tool-use.sse as one message, derived
// by hand from its frames: message_start's message, the one tool_use
// block with the concatenated input_json_delta fragments parsed, and
// message_delta's stop_reason and usage (which replaces message_start's).
const fixtureToolUseMessage = `{
	"id": "msg_mock0000000000000003",
	"type": "message",
	"role": "assistant",
	"model": "claude-opus-5-5",
	"content": [{
		"type": "tool_use",
		"id": "toolu_mock000000000001",
		"name": "Write",
		"input": {
			"file_path": "/home/user/project/hello.txt",
			"content": "He said \"hi\" and left.\nBack\\slash: C:\\temp\\new and a literal \\n (not a newline)\nTab:\tend; quote ' single\nUnicode: café – naïve – 日本語 – 🚀\n"
		}
	}],
	"stop_reason": "tool_use",
	"stop_sequence": null,
	"usage": {"input_tokens": 1200, "output_tokens": 40, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}`

// fixtureFinalTextMessage is response-final-text.sse as one message.
const fixtureFinalTextMessage = `{
	"id": "msg_mock0000000000000005",
	"type": "message",
	"role": "assistant",
	"model": "claude-opus-5-5",
	"content": [{"type": "text", "text": "Created hello.txt with the requested content."}],
	"stop_reason": "end_turn",
	"stop_sequence": null,
	"usage": {"input_tokens": 1200, "output_tokens": 40, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}`

// TestAnthropicSDKCheckFixture runs the check on the two streams Claude
// Code 2.1.332 accepted, against the messages derived from them by hand;
// and once with another message id declared as differing by design.
func TestAnthropicSDKCheckFixture(t *testing.T) {
	anthropicSDKNode(t)
	t.Run("tool_use", func(t *testing.T) {
		anthropicSDKCheck(t, claudeCodeFixture(t, "response-tool-use.sse"), []byte(fixtureToolUseMessage))
	})
	t.Run("final_text", func(t *testing.T) {
		anthropicSDKCheck(t, claudeCodeFixture(t, "response-final-text.sse"), []byte(fixtureFinalTextMessage))
	})
	t.Run("id_by_design", func(t *testing.T) {
		want := strings.Replace(fixtureToolUseMessage, "msg_mock0000000000000003", "msg_other", 1)
		anthropicSDKCheck(t, claudeCodeFixture(t, "response-tool-use.sse"), []byte(want), "id")
	})
}
