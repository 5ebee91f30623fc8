package chatbridge

import (
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// The engine's error hook runs only a bridge that bridged this request;
// the body changes only for a context-length error.
func TestResponsesToChatRewriteError(t *testing.T) {
	x := rcStreamExchange(t, rcRules(`{"profile":"kimi"}`))
	if !x.WantsError() {
		t.Fatal("a bridged request wants the upstream's errors")
	}
	in := `{"error":{"message":"Your request exceeded model token limit: 262144","type":"invalid_request_error","code":"invalid_request_error"}}`
	want := `{"error":{"message":"Your request exceeded model token limit: 262144","type":"invalid_request_error","code":"context_length_exceeded"}}`
	if got := string(x.RewriteError(400, []byte(in))); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	for _, body := range []string{`{"error":{"message":"rate limited","code":"rate_limit_exceeded"}}`, `not json`, `{"detail":"maximum context length"}`} {
		if got := string(x.RewriteError(429, []byte(body))); got != body {
			t.Errorf("%s became %s", body, got)
		}
	}
	chat := transforms.NewExchange(transforms.ProtocolChat, transforms.Limits{}, nil)
	transformtest.Chain(t, rcRules(`{"profile":"kimi"}`)).Begin(chat, "m")
	if _, err := chat.RewriteRequest([]byte(`{"model":"m","messages":[]}`)); err != nil {
		t.Fatal(err)
	}
	if chat.WantsError() {
		t.Fatal("a Chat request is not bridged, and its errors are not the bridge's")
	}
}

// TestResponsesToChatRewriteErrorKeepsLookalikeErrors: errors that speak
// of tokens or context without being a refused over-long prompt (a rate
// limit, a server error, an output limit, a code of the upstream's own)
// reach the client unchanged.
func TestResponsesToChatRewriteErrorKeepsLookalikeErrors(t *testing.T) {
	x := rcStreamExchange(t, rcRules(`{"profile":"kimi"}`))
	for _, tc := range []struct {
		status int
		body   string
	}{
		{429, `{"error":{"message":"You exceeded your token limit for the minute, try again in 20s","code":"rate_limit_exceeded"}}`},
		{500, `{"error":{"message":"context window full on the server","code":null}}`},
		{400, `{"error":{"message":"max_tokens is above the output token limit","code":null}}`},
		{400, `{"error":{"message":"maximum context length is 8192","code":"model_not_found"}}`},
	} {
		if got := string(x.RewriteError(tc.status, []byte(tc.body))); got != tc.body {
			t.Errorf("%d %s became %s", tc.status, tc.body, got)
		}
	}
}
