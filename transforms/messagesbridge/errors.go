package messagesbridge

import (
	"bytes"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// The upstream's errors reach an Anthropic client in its shape (§10):
// {"type":"error","error":{"type","message"}} with the status the SDKs
// and Claude Code act on (529 for an overloaded upstream, which they
// retry). A context-length error is told in Anthropic's own words, with
// the provider's numbers: Claude Code reads them to shrink max_tokens or
// compact, and a generic message leaves it stuck.

// errNote is what RewriteError learned from the body for
// RewriteErrorStatus, which sees only the status.
type errNote struct{ status int }

// errKey keys the note of one rule.
type errKey struct{ t *MessagesToChat }

func (t *MessagesToChat) note(x *transforms.Exchange) *errNote {
	return x.Record(errKey{t}, func() any { return &errNote{} }).(*errNote)
}

// clientStatus is Anthropic's status for an upstream's.
func clientStatus(status int) int {
	switch status {
	case http.StatusUnprocessableEntity:
		return http.StatusBadRequest
	case http.StatusRequestTimeout:
		return http.StatusGatewayTimeout
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return 529 // overloaded_error, which clients retry
	}
	return status
}

// RewriteErrorStatus implements ErrorStatusRewriter: Anthropic's status
// for the upstream's.
func (t *MessagesToChat) RewriteErrorStatus(x *transforms.Exchange, status int) int {
	if !t.record(x).bridged {
		return status
	}
	if n := t.note(x); n.status != 0 {
		return n.status
	}
	return clientStatus(status)
}

// RewriteError implements ErrorRewriter: the upstream's error in
// Anthropic's shape, its message kept (or, for a context-length error,
// put in Anthropic's words).
func (t *MessagesToChat) RewriteError(x *transforms.Exchange, status int, body []byte) []byte {
	rec := t.record(x)
	if !rec.bridged {
		return body
	}
	msg, code := errorText(body)
	st := clientStatus(status)
	if code == "insufficient_quota" {
		// OpenAI says an empty balance with a 429; retrying it is futile.
		st = http.StatusPaymentRequired
		t.note(x).status = st
	}
	if st == http.StatusBadRequest || st == http.StatusRequestEntityTooLarge {
		if m, ok := contextMessage(rec, msg); ok {
			msg = m
			st = http.StatusBadRequest
			t.note(x).status = st
		}
	}
	if msg == "" {
		msg = "the upstream answered HTTP " + strconv.Itoa(status)
	}
	return anthropicError(transforms.AnthropicErrorType(st), msg)
}

// anthropicError is an error body, or an error event's data.
func anthropicError(typ, msg string) []byte {
	b := []byte(`{"type":"error","error":{"type":`)
	b = jsonspan.AppendStringStr(b, typ)
	b = append(b, `,"message":`...)
	b = jsonspan.AppendStringStr(b, msg)
	return append(b, "}}"...)
}

// maxErrorText bounds the message taken from an upstream body that is
// not JSON (an HTML page from a proxy).
const maxErrorText = 1024

// errorText reads an upstream error body's message and code: OpenAI's
// {"error":{"message","code"}}, {"error":"…"}, vLLM's top-level message,
// FastAPI's detail, or the text of a body that is not JSON.
func errorText(body []byte) (msg, code string) {
	if !jsonspan.Valid(body) {
		t := bytes.TrimSpace(body)
		if len(t) > maxErrorText {
			t = t[:maxErrorText]
			for len(t) > 0 && !utf8.Valid(t) {
				t = t[:len(t)-1]
			}
		}
		return string(t), ""
	}
	start := jsonspan.SkipSpace(body, 0)
	if body[start] != '{' {
		return "", ""
	}
	var f [4]jsonspan.Span
	jsonspan.ObjectFields(body, start, []string{"error", "message", "detail", "code"}, f[:])
	code = codeText(body, f[3])
	if e := f[0]; e.Start >= 0 {
		switch body[e.Start] {
		case '{':
			var g [3]jsonspan.Span
			jsonspan.ObjectFields(body, e.Start, []string{"message", "code", "type"}, g[:])
			msg, _ = jsonspan.StringValue(body, g[0])
			if code = codeText(body, g[1]); code == "" {
				code = codeText(body, g[2])
			}
			return msg, code
		case '"':
			msg, _ = jsonspan.StringValue(body, e)
			return msg, code
		}
	}
	if msg, _ = jsonspan.StringValue(body, f[1]); msg == "" {
		msg, _ = jsonspan.StringValue(body, f[2])
	}
	return msg, code
}

// codeText is a code member as text, a string or a number.
func codeText(doc []byte, sp jsonspan.Span) string {
	if sp.Start < 0 {
		return ""
	}
	if s, ok := jsonspan.StringValue(doc, sp); ok {
		return s
	}
	if c := doc[sp.Start]; c >= '0' && c <= '9' {
		return string(doc[sp.Start:sp.End])
	}
	return ""
}

// streamErrorOf reads an upstream error chunk's error object at e: the
// Anthropic error type it is, and its message.
func streamErrorOf(rec *bridgeRecord, d []byte, e jsonspan.Span) (typ, msg string) {
	var g [4]jsonspan.Span
	jsonspan.ObjectFields(d, e.Start, []string{"message", "code", "type", "status"}, g[:])
	msg, _ = jsonspan.StringValue(d, g[0])
	if m, ok := contextMessage(rec, msg); ok {
		return "invalid_request_error", m
	}
	if msg == "" {
		msg = "the upstream's stream failed"
	}
	for _, sp := range []jsonspan.Span{g[1], g[3]} {
		if n, err := strconv.Atoi(codeText(d, sp)); err == nil && n >= 400 && n < 600 {
			return transforms.AnthropicErrorType(clientStatus(n)), msg
		}
	}
	words := strings.ToLower(codeText(d, g[1]) + " " + codeText(d, g[2]))
	switch {
	case strings.Contains(words, "insufficient_quota"):
		return "billing_error", msg
	case strings.Contains(words, "rate_limit"):
		return "rate_limit_error", msg
	case strings.Contains(words, "overload"), strings.Contains(words, "insufficient_system_resource"), strings.Contains(words, "unavailable"):
		return "overloaded_error", msg
	case strings.Contains(words, "timeout"):
		return "timeout_error", msg
	case strings.Contains(words, "invalid_request"), strings.Contains(words, "bad_request"):
		return "invalid_request_error", msg
	}
	return "api_error", msg
}

// contextTooLong recognises the providers' words for a prompt over the
// model's context.
func contextTooLong(msg string) bool {
	lower := strings.ToLower(msg)
	for _, w := range []string{"maximum context length", "context length", "context window", "exceeded model token limit", "context_length_exceeded", "prompt is too long", "exceed context limit"} {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// The providers' context-length errors, with the numbers each gives.
var (
	// DeepSeek, OpenAI, vLLM: "This model's maximum context length is X
	// tokens. However, you requested Y tokens (A in the messages, B in
	// the completion)."
	ctxSplit = regexp.MustCompile(`maximum context length is (\d+) tokens\..*?\((\d+) in the messages, (\d+) in the completion\)`)
	// vLLM since 0.6: "'max_tokens' … is too large: B. This model's
	// maximum context length is X tokens and your request has A input
	// tokens".
	ctxInput = regexp.MustCompile(`maximum context length is (\d+) tokens and your request has (\d+) input tokens`)
	ctxAsked = regexp.MustCompile(`is too large: (\d+)`)
	// OpenAI, prompt alone: "maximum context length is X tokens. However,
	// your messages resulted in A tokens".
	ctxPrompt = regexp.MustCompile(`maximum context length is (\d+) tokens\. However, your messages resulted in (\d+) tokens`)
	// Kimi: "Your request exceeded model token limit: X (requested: Y)",
	// where Y counts the request's max_tokens in.
	ctxKimi = regexp.MustCompile(`exceeded model token limit: (\d+) \(requested: (\d+)\)`)
)

// contextMessage puts a provider's context-length error in Anthropic's
// words, with its numbers: "input length and `max_tokens` exceed context
// limit: A + B > X, …", or "prompt is too long: A tokens > X maximum" when
// the input alone is over. ok is false for any other message, and for one
// whose numbers cannot be read.
func contextMessage(rec *bridgeRecord, msg string) (string, bool) {
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	var limit, in, out int64
	switch {
	case !contextTooLong(msg):
		return "", false
	case ctxSplit.MatchString(msg):
		m := ctxSplit.FindStringSubmatch(msg)
		limit, in, out = num(m[1]), num(m[2]), num(m[3])
	case ctxInput.MatchString(msg):
		m := ctxInput.FindStringSubmatch(msg)
		limit, in, out = num(m[1]), num(m[2]), int64(rec.maxTokens)
		if a := ctxAsked.FindStringSubmatch(msg); a != nil {
			out = num(a[1])
		}
	case ctxPrompt.MatchString(msg):
		m := ctxPrompt.FindStringSubmatch(msg)
		limit, in, out = num(m[1]), num(m[2]), int64(rec.maxTokens)
	case ctxKimi.MatchString(msg):
		m := ctxKimi.FindStringSubmatch(msg)
		limit = num(m[1])
		asked := num(m[2])
		out = int64(rec.maxTokens)
		if out > asked || out < 0 {
			out = 0
		}
		in = asked - out
	default:
		return "", false
	}
	if limit < 0 || in < 0 || out < 0 {
		return "", false
	}
	l, a, b := strconv.FormatInt(limit, 10), strconv.FormatInt(in, 10), strconv.FormatInt(out, 10)
	if in > limit {
		return "prompt is too long: " + a + " tokens > " + l + " maximum", true
	}
	return "input length and `max_tokens` exceed context limit: " + a + " + " + b + " > " + l + ", decrease input length or `max_tokens` and try again", true
}
