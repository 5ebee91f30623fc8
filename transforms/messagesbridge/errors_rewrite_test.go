package messagesbridge

import (
	"testing"
)

// rsError runs an upstream error through the rule as the handler does:
// the body first, then the status.
func rsErrorBody(t *testing.T, rules string, status int, body string) (int, string) {
	t.Helper()
	x := rsExchange(t, rules)
	if !x.WantsError() {
		t.Fatal("the bridge does not want the error")
	}
	out := x.RewriteError(status, []byte(body))
	return x.RewriteErrorStatus(status), string(out)
}

// Scenario 20: a context-length error is told in Anthropic's words, with
// the provider's numbers, which Claude Code reads to shrink max_tokens or
// compact.
func TestMessagesErrorContextLength(t *testing.T) {
	for _, c := range []struct{ name, profile, record, body, want string }{
		{"deepseek", "deepseek", "",
			`{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 131134 tokens (122942 in the messages, 8192 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
			"input length and `max_tokens` exceed context limit: 122942 + 8192 > 131072, decrease input length or `max_tokens` and try again"},
		{"openai", "openai_chat", "",
			`{"error":{"message":"This model's maximum context length is 128000 tokens. However, you requested 140000 tokens (100000 in the messages, 40000 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			"input length and `max_tokens` exceed context limit: 100000 + 40000 > 128000, decrease input length or `max_tokens` and try again"},
		{"vllm, input tokens", "openai_chat", "",
			`{"object":"error","message":"'max_tokens' or 'max_completion_tokens' is too large: 32000. This model's maximum context length is 32768 tokens and your request has 1200 input tokens (32000 > 32768 - 1200).","type":"BadRequestError","param":null,"code":400}`,
			"input length and `max_tokens` exceed context limit: 1200 + 32000 > 32768, decrease input length or `max_tokens` and try again"},
		{"kimi", "kimi", `{"model":"claude-opus-5-5","max_tokens":32000}`,
			`{"error":{"message":"Invalid request: Your request exceeded model token limit: 262144 (requested: 270000)","type":"invalid_request_error"}}`,
			"input length and `max_tokens` exceed context limit: 238000 + 32000 > 262144, decrease input length or `max_tokens` and try again"},
		{"the prompt alone", "openai_chat", `{"model":"claude-opus-5-5","max_tokens":4096}`,
			`{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","code":"context_length_exceeded"}}`,
			"prompt is too long: 130000 tokens > 128000 maximum"},
		{"no numbers", "glm", "",
			`{"error":{"code":"1261","message":"Prompt exceeds max length"}}`,
			"Prompt exceeds max length"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, got := rsErrorBody(t, rsRules(c.profile, c.record), 400, c.body)
			want := `{"type":"error","error":{"type":"invalid_request_error","message":` + rsStr(c.want) + `}}`
			if status != 400 || got != want {
				t.Fatalf("%d %s\nwant 400 %s", status, got, want)
			}
		})
	}
}

// Scenario 21 and the status table of §10: each upstream status becomes
// Anthropic's, with its error type; 502 and 503 become 529, which clients
// retry. Retry-After is a header, which the gateway passes untouched.
func TestMessagesErrorStatuses(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		want   int
		typ    string
		msg    string
	}{
		{429, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`, 429, "rate_limit_error", "Rate limit reached for requests"},
		{503, `{"error":{"message":"Service is too busy","type":"server_error"}}`, 529, "overloaded_error", "Service is too busy"},
		{502, `<html><body>Bad Gateway</body></html>`, 529, "overloaded_error", "<html><body>Bad Gateway</body></html>"},
		{504, ``, 504, "timeout_error", "the upstream answered HTTP 504"},
		{500, `{"error":"internal"}`, 500, "api_error", "internal"},
		{401, `{"error":{"message":"Authentication Fails, Your api key is invalid","type":"authentication_error"}}`, 401, "authentication_error", "Authentication Fails, Your api key is invalid"},
		{402, `{"error":{"message":"Insufficient Balance","type":"unknown_error"}}`, 402, "billing_error", "Insufficient Balance"},
		{429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, 402, "billing_error", "You exceeded your current quota"},
		{403, `{"error":{"message":"forbidden"}}`, 403, "permission_error", "forbidden"},
		{404, `{"error":{"message":"Model Not Exist"}}`, 404, "not_found_error", "Model Not Exist"},
		{413, `{"error":{"message":"Request Entity Too Large"}}`, 413, "request_too_large", "Request Entity Too Large"},
		{422, `{"detail":"Field required: messages"}`, 400, "invalid_request_error", "Field required: messages"},
		{400, `{"error":{"message":"Invalid tool schema"}}`, 400, "invalid_request_error", "Invalid tool schema"},
	} {
		status, got := rsErrorBody(t, rsRules("deepseek", ""), c.status, c.body)
		want := `{"type":"error","error":{"type":"` + c.typ + `","message":` + rsStr(c.msg) + `}}`
		if status != c.want || got != want {
			t.Errorf("%d %s:\n got %d %s\nwant %d %s", c.status, c.body, status, got, c.want, want)
		}
	}
}

// An error chunk about the context length, mid-stream, says it in
// Anthropic's words too.
func TestMessagesErrorContextLengthInStream(t *testing.T) {
	rules := rsRules("kimi", `{"model":"claude-opus-5-5","max_tokens":8192}`)
	got := rsStream(t, rules, `data: {"error":{"message":"Invalid request: Your request exceeded model token limit: 131072 (requested: 135000)","type":"invalid_request_error"}}`+"\n\n")
	rsEqual(t, got, rsStart+rsError("invalid_request_error",
		"input length and `max_tokens` exceed context limit: 126808 + 8192 > 131072, decrease input length or `max_tokens` and try again"))
	x := rsExchange(t, rules)
	replay(t, x, `data: {"error":{"message":"Your request exceeded model token limit: 10 (requested: 20)"}}`+"\n\n")
	if x.StreamError() != "context_length_exceeded" {
		t.Fatalf("stream error %q", x.StreamError())
	}
}
