package toolsfilter

import (
	"errors"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// TestToolsFilterRefusesRepeatedIdentityKeys: a definition that names
// itself twice would be judged by its first name and served by its last,
// which upstream JSON parsers keep, so a denied tool could pass as an
// allowed one. Such a request is refused before anything is filtered.
func TestToolsFilterRefusesRepeatedIdentityKeys(t *testing.T) {
	c := transformtest.Chain(t, `[{"transform":"tools_filter","config":{"deny":["delete_*"]}}]`)
	for _, tc := range []struct {
		proto      transforms.Protocol
		body, want string
	}{
		{transforms.ProtocolResponses, `{"model":"m","input":"hi","tools":[{"type":"function","name":"read"},{"type":"function","name":"read","name":"delete_repo"}]}`, "tools[1]"},
		{transforms.ProtocolResponses, `{"model":"m","input":"hi","tools":[{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"ok","type":"function"}]}]}`, "tools[0].tools[0]"},
		{transforms.ProtocolChat, `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"read","parameters":{},"name":"delete_repo"}}]}`, "tools[0]"},
	} {
		x := transformtest.Begin(t, c, tc.proto, []byte(tc.body))
		_, err := x.RewriteRequest([]byte(tc.body))
		var te *transforms.Error
		if !errors.As(err, &te) || te.Status != 400 || te.Code != "ambiguous_tool" || te.Param != tc.want {
			t.Errorf("%s: got %v, want a 400 ambiguous_tool at %s", tc.body, err, tc.want)
		}
	}
	// A rule that filters nothing by name has nothing to be fooled about.
	off := transformtest.Chain(t, `[{"transform":"tools_filter","config":{"defaults":[{"type":"function","name":"x"}]}}]`)
	body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"a","name":"b"}]}`)
	x := transformtest.Begin(t, off, transforms.ProtocolResponses, body)
	if _, err := x.RewriteRequest(body); err != nil {
		t.Fatalf("defaults only: %v", err)
	}
}

// TestToolsFilterLegacyFunctionCallResponse: an answer in the legacy
// function_call form (to a request with functions) is judged like
// tool_calls, in JSON and in streams; a removed one leaves an answer that
// finished with stop.
func TestToolsFilterLegacyFunctionCallResponse(t *testing.T) {
	req := `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"read_file","parameters":{}}]}`
	cfg := `{"drop_undeclared_calls":true}`
	json := func(name string) string {
		return `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"function_call":{"name":"` + name + `","arguments":"{}"}},"finish_reason":"function_call"}]}`
	}
	x, _ := tfExchange(t, transforms.ProtocolChat, cfg, req)
	out, err := x.RewriteResponse([]byte(json("wipe_disk")))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}`)
	tfCounts(t, x, 1, 0, 1)

	x, _ = tfExchange(t, transforms.ProtocolChat, cfg, req)
	if out, err = x.RewriteResponse([]byte(json("read_file"))); err != nil || string(out) != json("read_file") {
		t.Fatalf("a declared legacy call changed: %s %v", out, err)
	}
	tfCounts(t, x, 0, 0, 0)

	up := transformtest.ChatSSE(
		tfChunk(`{"role":"assistant","content":null,"function_call":{"name":"wipe_disk","arguments":""}}`, `null`),
		tfChunk(`{"function_call":{"arguments":"{}"}}`, `null`),
		tfChunk(`{}`, `"function_call"`),
	)
	x, _ = tfExchange(t, transforms.ProtocolChat, cfg, strings.Replace(req, `"messages"`, `"stream":true,"messages"`, 1))
	got := transformtest.Replay(t, x, up, 4096)
	want := transformtest.ChatSSE(
		tfChunk(`{"role":"assistant","content":null}`, `null`),
		tfChunk(`{}`, `null`),
		tfChunk(`{}`, `"stop"`),
	)
	if got != want {
		t.Fatalf("stream:\n got %s\nwant %s", got, want)
	}
	tfCounts(t, x, 1, 0, 1)
}

// TestToolsFilterTwoRulesCountACallOnce: with two filter rules, the one
// nearer the upstream never saw the tool the other filtered and calls it
// undeclared; the nearer-the-client rule's reason replaces that count, so
// the call is counted once, as filtered.
func TestToolsFilterTwoRulesCountACallOnce(t *testing.T) {
	rules := `[{"transform":"tools_filter","config":{"deny":["write_file"]}},{"transform":"tools_filter","config":{"deny":["web_search"]}}]`
	c := transformtest.Chain(t, rules)
	req := tfResp(``, tfRead, tfWrite, tfWeb)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(req))
	if _, err := x.RewriteRequest([]byte(req)); err != nil {
		t.Fatal(err)
	}
	if _, err := x.RewriteResponse([]byte(tfResponse(tfWriteItem))); err != nil {
		t.Fatal(err)
	}
	tfCounts(t, x, 0, 1, 0)

	chatReq := tfChat(``, `{"type":"function","function":{"name":"read_file"}}`, `{"type":"function","function":{"name":"write_file"}}`)
	x = transformtest.Begin(t, c, transforms.ProtocolChat, []byte(chatReq))
	if _, err := x.RewriteRequest([]byte(chatReq)); err != nil {
		t.Fatal(err)
	}
	if _, err := x.RewriteResponse([]byte(tfCompletion("tool_calls", tfWriteCall))); err != nil {
		t.Fatal(err)
	}
	tfCounts(t, x, 0, 1, 0)
}
