package caddymodule

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// tickingStage passes events on and sends a comment-free keep-alive event
// whenever the handler says the upstream has been silent.
type tickingStage struct{}

func (tickingStage) Event(ev *transforms.Event, emit transforms.Emit) error { return emit(ev) }
func (tickingStage) End(transforms.Emit) error                              { return nil }
func (tickingStage) TickInterval() time.Duration                            { return 20 * time.Millisecond }
func (tickingStage) Tick(emit transforms.Emit) error {
	return emit(&transforms.Event{Name: []byte("ping"), Data: []byte(`{"type":"ping"}`)})
}

// keepAliveRule ticks on every stream.
type keepAliveRule struct{ pathBridge }

func init() { caddy.RegisterModule(keepAliveRule{}) }

func (keepAliveRule) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("test_keep_alive"), New: func() caddy.Module { return new(keepAliveRule) }}
}

func (keepAliveRule) BridgedProtocol(p transforms.Protocol) transforms.Protocol { return p }
func (keepAliveRule) RewriteRequest(_ *transforms.Exchange, b []byte) ([]byte, error) {
	return b, nil
}
func (keepAliveRule) WantsResponse(*transforms.Exchange) bool { return true }
func (keepAliveRule) NewStream(*transforms.Exchange) transforms.StreamTransform {
	return tickingStage{}
}

// TestSilentUpstreamGetsKeepAlives: while the upstream is silent in the
// middle of a stream, a rule that ticks sends its keep-alive, flushed, and
// nothing once the upstream speaks again or the stream ends; the
// upstream's events pass in order around them.
func TestSilentUpstreamGetsKeepAlives(t *testing.T) {
	h := provisioned(t, &Handler{Rules: []transforms.RuleConfig{{Transform: "test_keep_alive"}}})
	rec := serve(t, h, customRequest, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_, _ = io.WriteString(w, "data: {\"n\":1}\n\n")
		_ = rc.Flush()
		time.Sleep(130 * time.Millisecond) // about six intervals of silence
		_, _ = io.WriteString(w, "data: {\"n\":2}\n\n")
		_ = rc.Flush()
		return nil
	})
	body := rec.Body.String()
	first, last := strings.Index(body, `{"n":1}`), strings.Index(body, `{"n":2}`)
	pings := strings.Count(body, "data: {\"type\":\"ping\"}\n\n") // (framed as the upstream frames)
	if first < 0 || last < first || pings < 2 || pings > 8 {
		t.Fatalf("%d pings in %q", pings, body)
	}
	if strings.Contains(body[last:], "ping") || strings.Contains(body[:first], "ping") {
		t.Errorf("a ping outside the silence: %q", body)
	}
	time.Sleep(60 * time.Millisecond)
	if got := rec.Body.String(); got != body {
		t.Errorf("written after the stream ended: %q", got[len(body):])
	}
}

// localRule answers every request itself with the size of the body the
// request phases left.
type localRule struct{ pathBridge }

func init() { caddy.RegisterModule(localRule{}) }

func (localRule) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("test_local_answer"), New: func() caddy.Module { return new(localRule) }}
}

func (localRule) BridgedProtocol(p transforms.Protocol) transforms.Protocol { return p }
func (localRule) RewriteRequest(x *transforms.Exchange, b []byte) ([]byte, error) {
	x.AnswerLocally(func(final []byte) transforms.LocalAnswer {
		return transforms.LocalAnswer{Status: 200, ContentType: "application/json", Body: []byte(`{"input_tokens":` + strconv.Itoa(len(final)) + `}`)}
	})
	return append([]byte(nil), b...), nil
}

// TestRuleAnswersLocally: a rule that answers a request itself gets the
// body every request phase left, and the upstream is never called.
func TestRuleAnswersLocally(t *testing.T) {
	h := provisioned(t, &Handler{Rules: []transforms.RuleConfig{
		{Transform: "test_local_answer"},
		{Transform: "field_set", Config: []byte(`{"path":"model","value":"longer-model-name"}`)},
	}})
	rec := serve(t, h, customRequest, func(w http.ResponseWriter, r *http.Request) error {
		t.Error("the upstream was called")
		return nil
	})
	want := `{"input_tokens":` + strconv.Itoa(len(customRequest)+len("longer-model-name")-1) + `}`
	if rec.Code != 200 || rec.Body.String() != want || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s %q, want %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body, want)
	}
}

// TestProtocolByPath: the path picks the protocol under any prefix, and
// OpenAI's Assistants messages (/v1/threads/{id}/messages) are not
// Anthropic's: a rule that reads only OpenAI's protocols leaves them be.
func TestProtocolByPath(t *testing.T) {
	h := wildcardHandler(t)
	for path, want := range map[string]transforms.Protocol{
		"/v1/responses":                   transforms.ProtocolResponses,
		"/openai/v1/chat/completions/":    transforms.ProtocolChat,
		"/v1/messages":                    transforms.ProtocolMessages,
		"/anthropic/v1/messages":          transforms.ProtocolMessages,
		"/v1/messages/count_tokens":       transforms.ProtocolMessages,
		"/v1/threads/thread_abc/messages": transforms.ProtocolUnknown,
		"/v1/messages/msg_1/other":        transforms.ProtocolUnknown,
		"/v1/embeddings":                  transforms.ProtocolUnknown,
	} {
		r := httptest.NewRequest(http.MethodPost, path+"?beta=true", nil)
		if got := h.protocolFor(r); got != want {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
	rec := serveRequest(t, h, httptest.NewRequest(http.MethodPost, "/v1/threads/thread_abc/messages", strings.NewReader(`{"role":"user","content":"hi"}`)),
		func(w http.ResponseWriter, r *http.Request) error {
			_, err := io.WriteString(w, "passed")
			return err
		})
	if rec.Code != 200 || rec.Body.String() != "passed" {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
}
