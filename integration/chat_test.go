package integration

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tidwall/gjson"
)

var update = flag.Bool("update", false, "rewrite golden files")

func chatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "deepseek-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Create hello.txt")},
		Tools: []openai.ChatCompletionToolUnionParam{
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "exec_command", Parameters: shared.FunctionParameters{"type": "object"}}),
			openai.ChatCompletionCustomTool(openai.ChatCompletionCustomToolCustomParam{Name: "apply_patch"}),
		},
	}
}

func TestChatNonStreamingWithSDK(t *testing.T) {
	demo, up := strictUpstream(t)
	startGateway(t, `		rule field_custom_tools_to_function`, up)
	client := sdkClient()
	resp, err := client.Chat.Completions.New(context.Background(), chatParams())
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Type != "custom" {
		t.Fatalf("tool calls: %s", resp.RawJSON())
	}
	c := calls[0].AsCustom()
	if c.Custom.Name != "apply_patch" || c.Custom.Input != normalisedDemoPatch || c.ID == "" {
		t.Fatalf("custom call: %+v", c)
	}
	last := gjson.ParseBytes(demo.Requests()[len(demo.Requests())-1])
	if last.Get(`tools.#(function.name=="apply_patch").type`).String() != "function" {
		t.Fatalf("upstream saw: %s", last.Get("tools").Raw)
	}
}

// TestChatStreamingGolden compares the raw bytes a client receives with a
// golden transcript, then lets the SDK accumulate the same stream.
func TestChatStreamingGolden(t *testing.T) {
	_, up := strictUpstream(t)
	tester := startGateway(t, `		rule field_custom_tools_to_function`, up)
	body := `{"model":"deepseek-chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Create hello.txt"}],"tools":[{"type":"custom","custom":{"name":"apply_patch"}}]}`
	req, _ := http.NewRequest(http.MethodPost, gatewayURL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := tester.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The demo stamps created times; pin them for the comparison.
	got = createdRe(got)
	const golden = "testdata/chat_stream.golden"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("stream differs from %s\n--- got\n%s", golden, got)
	}

	// The SDK sees the same call, and the input deltas add up.
	client := sdkClient()
	stream := client.Chat.Completions.NewStreaming(context.Background(), chatParams())
	var input strings.Builder
	var name string
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			for _, tc := range ch.Delta.ToolCalls {
				raw := gjson.Parse(tc.RawJSON())
				if n := raw.Get("custom.name"); n.Exists() {
					name = n.String()
				}
				input.WriteString(raw.Get("custom.input").String())
				if raw.Get("function").Exists() {
					t.Fatalf("function fragment reached the client: %s", tc.RawJSON())
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if name != "apply_patch" || input.String() != normalisedDemoPatch {
		t.Fatalf("accumulated %q %q", name, input.String())
	}
}

// createdRe replaces the digits after every "created": with 0.
func createdRe(b []byte) []byte {
	var out []byte
	for {
		i := bytes.Index(b, []byte(`"created":`))
		if i < 0 {
			return append(out, b...)
		}
		i += len(`"created":`)
		out = append(out, b[:i]...)
		out = append(out, '0')
		j := i
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		b = b[j:]
	}
}
