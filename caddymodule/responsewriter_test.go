package caddymodule

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"errors"
)

func provisioned(t *testing.T, h *Handler) *Handler {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := h.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	return h
}

func wildcardHandler(t *testing.T) *Handler {
	return provisioned(t, &Handler{Rules: []transforms.RuleConfig{{
		Transform: "field_custom_tools_to_function",
		Config:    []byte(`{"names":["*"]}`),
	}}})
}

const customRequest = `{"model":"m","tools":[{"type":"custom","name":"x"}]}`

func serve(t *testing.T, h *Handler, body string, next caddyhttp.HandlerFunc) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body))
	req.Header.Set("Accept-Encoding", "gzip")
	return serveRequest(t, h, req, next)
}

func TestUpstreamErrorsAndEncodedBodiesPassThrough(t *testing.T) {
	h := wildcardHandler(t)
	errBody := `{"error":{"message":"nope","type":"invalid_request_error","param":null,"code":null}}`
	rec := serve(t, h, customRequest, func(w http.ResponseWriter, r *http.Request) error {
		if got := r.Header.Get("Accept-Encoding"); got != "identity" {
			t.Errorf("upstream Accept-Encoding = %q", got)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, err := io.WriteString(w, errBody)
		return err
	})
	if rec.Code != 400 || rec.Body.String() != errBody {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	gz := "\x1f\x8b not really gzip"
	rec = serve(t, h, customRequest, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		_, err := io.WriteString(w, gz)
		return err
	})
	if rec.Body.String() != gz {
		t.Fatalf("encoded body changed: %q", rec.Body)
	}
}

func TestJSONResponseIsRestoredWithLength(t *testing.T) {
	h := wildcardHandler(t)
	rec := serve(t, h, customRequest, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Content-Length", "999")
		_, err := io.WriteString(w, `{"output":[{"type":"function_call","call_id":"c","name":"x","arguments":"{\"input\":\"hi\"}"}],"tools":[{"type":"function","name":"x"}]}`)
		return err
	})
	want := `{"output":[{"type":"custom_tool_call","call_id":"c","name":"x","input":"hi"}],"tools":[{"type":"custom","name":"x"}]}`
	if rec.Body.String() != want || rec.Header().Get("Content-Length") != strconv.Itoa(len(want)) {
		t.Fatalf("%q (Content-Length %s)", rec.Body, rec.Header().Get("Content-Length"))
	}
}

func TestStreamThroughReadFromAndFlush(t *testing.T) {
	h := wildcardHandler(t)
	stream := "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":0,\"output_index\":0,\"item\":{\"id\":\"fc\",\"type\":\"function_call\",\"arguments\":\"\",\"call_id\":\"c\",\"name\":\"x\"}}\n\n"
	rec := serve(t, h, customRequest, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Length", "1")
		// io.Copy takes ReadFrom when the writer has one: it must not
		// bypass the rules.
		if _, err := io.Copy(w, strings.NewReader(stream)); err != nil {
			return err
		}
		return http.NewResponseController(w).Flush()
	})
	if !rec.Flushed {
		t.Fatal("flush did not reach the client")
	}
	if rec.Header().Get("Content-Length") != "" {
		t.Fatal("stale Content-Length kept")
	}
	want := "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":0,\"output_index\":0,\"item\":{\"id\":\"fc\",\"type\":\"custom_tool_call\",\"input\":\"\",\"call_id\":\"c\",\"name\":\"x\"}}\n\n"
	if rec.Body.String() != want {
		t.Fatalf("got %q", rec.Body)
	}
}

func TestLimits(t *testing.T) {
	h := provisioned(t, &Handler{MaxBodySize: 100, Rules: []transforms.RuleConfig{{Transform: "field_custom_tools_to_function", Config: []byte(`{"names":["*"]}`)}}})
	called := false
	rec := serve(t, h, `{"model":"m","input":"`+strings.Repeat("x", 200)+`"}`, func(w http.ResponseWriter, r *http.Request) error {
		called = true
		return nil
	})
	if called || rec.Code != 413 || !strings.Contains(rec.Body.String(), `"code":"request_too_large"`) {
		t.Fatalf("%v %d %s", called, rec.Code, rec.Body)
	}
	rec = serve(t, h, customRequest, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write(bytes.Repeat([]byte(" "), 150))
		return err
	})
	if rec.Code != 502 || !strings.Contains(rec.Body.String(), `"code":"response_too_large"`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

// A body the bound rules cannot read is refused in the client's error
// shape, with the byte where reading stopped; nothing goes upstream.
func TestUnreadableRequestIsRefused(t *testing.T) {
	h := wildcardHandler(t)
	body := `{"model":"m","tools":[{"type":"custom","name":"x"}], oops`
	rec := serve(t, h, body, func(w http.ResponseWriter, r *http.Request) error {
		t.Error("the request reached the upstream")
		return nil
	})
	want := `{"error":{"message":"the request body is not JSON the gateway reads: invalid character 'o' looking for beginning of object key string at byte offset 53","type":"invalid_request_error","param":null,"code":"invalid_json"}}`
	if rec.Code != http.StatusBadRequest || rec.Body.String() != want {
		t.Fatalf("%d %s\nwant 400 %s", rec.Code, rec.Body, want)
	}
}

// pathBridge only moves the request to the Chat endpoint, as a bridge does.
type pathBridge struct{}

func init() { caddy.RegisterModule(pathBridge{}) }

func (pathBridge) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("test_path_bridge"), New: func() caddy.Module { return new(pathBridge) }}
}

func (pathBridge) BridgedProtocol(transforms.Protocol) transforms.Protocol {
	return transforms.ProtocolChat
}

func (pathBridge) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	x.ReplacePathSuffix("/responses", "/chat/completions")
	return body, nil
}

func (pathBridge) WantsResponse(*transforms.Exchange) bool { return false }

func (pathBridge) RewriteResponse(_ *transforms.Exchange, b []byte) ([]byte, error) {
	return b, nil
}

func (pathBridge) NewStream(*transforms.Exchange) transforms.StreamTransform { return nil }

func TestBridgedRequestGoesToTheBridgedPath(t *testing.T) {
	h := provisioned(t, &Handler{Rules: []transforms.RuleConfig{{Transform: "test_path_bridge"}}})
	called := false
	serve(t, h, customRequest, func(w http.ResponseWriter, r *http.Request) error {
		called = true
		if r.URL.Path != "/v1/chat/completions" {
			t.Errorf("upstream path %q", r.URL.Path)
		}
		return nil
	})
	if !called {
		t.Fatal("next was not called")
	}
}

// A bridge puts the upstream's context-length error in its client's terms
// and keeps the status; every other error, and every error of a request
// nothing bridged, passes as it came.
func TestBridgeNamesContextLengthErrors(t *testing.T) {
	h := provisioned(t, &Handler{Rules: []transforms.RuleConfig{{Transform: "responses_to_chat", Config: []byte(`{"profile":"deepseek"}`)}}})
	answer := func(status int, body string) caddyhttp.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, err := io.WriteString(w, body)
			return err
		}
	}
	const request = `{"model":"gpt-5.5","input":"hi","stream":true}`
	for _, tc := range []struct{ name, request, upstream, want string }{
		{
			name:     "DeepSeek's context-length 400",
			request:  request,
			upstream: `{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 140000 tokens.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
			want:     `{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 140000 tokens.","type":"invalid_request_error","param":null,"code":"context_length_exceeded"}}`,
		},
		{
			name:     "Kimi's, without a code",
			request:  request,
			upstream: `{"error":{"message":"Your request exceeded model token limit: 262144","type":"invalid_request_error"}}`,
			want:     `{"error":{"code":"context_length_exceeded","message":"Your request exceeded model token limit: 262144","type":"invalid_request_error"}}`,
		},
		{
			name:     "another error",
			request:  request,
			upstream: `{"error":{"message":"Authentication Fails","type":"authentication_error","code":"invalid_api_key"}}`,
			want:     `{"error":{"message":"Authentication Fails","type":"authentication_error","code":"invalid_api_key"}}`,
		},
		{
			name:     "a Chat client: nothing bridged",
			request:  `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			upstream: `{"error":{"message":"maximum context length is 10","code":null}}`,
			want:     `{"error":{"message":"maximum context length is 10","code":null}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(tc.request))
			if strings.Contains(tc.request, "messages") {
				req = httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(tc.request))
			}
			rec := serveRequest(t, h, req, answer(http.StatusBadRequest, tc.upstream))
			if rec.Code != http.StatusBadRequest || rec.Body.String() != tc.want {
				t.Fatalf("%d %s\nwant 400 %s", rec.Code, rec.Body, tc.want)
			}
			if n := rec.Header().Get("Content-Length"); req.URL.Path == "/v1/responses" && n != strconv.Itoa(len(tc.want)) {
				t.Errorf("Content-Length %q", n)
			}
		})
	}
}

// flushCounter counts the flushes that reach the client's writer.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes int
}

func (f *flushCounter) Flush() { f.flushes++; f.ResponseRecorder.Flush() }

// TestStreamFlushesOnlyWhatItWrote: reverse_proxy flushes after every read;
// a read whose events the rules hold (the first bytes of a converted
// apply_patch line) reaches the client as no flush at all, while the header
// and every read with output are flushed at once.
func TestStreamFlushesOnlyWhatItWrote(t *testing.T) {
	h := provisioned(t, &Handler{Rules: []transforms.RuleConfig{{Transform: "field_custom_tools_to_function", Config: []byte(`{"names":["*"]}`)}}})
	added := "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":0,\"output_index\":0,\"item\":{\"id\":\"fc\",\"type\":\"function_call\",\"arguments\":\"\",\"call_id\":\"c\",\"name\":\"apply_patch\"}}\n\n"
	held := "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":1,\"item_id\":\"fc\",\"output_index\":0,\"delta\":\"{\\\"input\\\":\\\"*** Beg\"}\n\n"
	line := "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":2,\"item_id\":\"fc\",\"output_index\":0,\"delta\":\"in Patch\\\\n\"}\n\n"
	fc := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	var seen []int // flushes the client had after each read
	req := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(`{"model":"m","tools":[{"type":"custom","name":"apply_patch"}]}`))
	req = req.WithContext(context.WithValue(req.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
	err := h.ServeHTTP(fc, req, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		if err := rc.Flush(); err != nil { // the header, before any event
			return err
		}
		seen = append(seen, fc.flushes)
		for _, ev := range []string{added, held, line} {
			if _, err := io.WriteString(w, ev); err != nil {
				return err
			}
			if err := rc.Flush(); err != nil {
				return err
			}
			seen = append(seen, fc.flushes)
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 2, 3}; !slices.Equal(seen, want) {
		t.Fatalf("client flushes after the header and each read: %v, want %v", seen, want)
	}
	if body := fc.Body.String(); !strings.Contains(body, `"delta":"*** Begin Patch\n"`) || strings.Contains(body, `"*** Beg"`) {
		t.Fatalf("body %s", body)
	}
}

// TestFailedRewriteHidesItsError: a 502 from a failed response rewrite says
// nothing about the gateway's internals.
func TestFailedRewriteHidesItsError(t *testing.T) {
	h := provisioned(t, &Handler{Rules: []transforms.RuleConfig{{Transform: "test_failing_response"}}})
	rec := serve(t, h, customRequest, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := io.WriteString(w, `{"output":[]}`)
		return err
	})
	if rec.Code != 502 || strings.Contains(rec.Body.String(), "secret") || !strings.Contains(rec.Body.String(), `"code":"transform_failed"`) {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

// failingResponse fails every response rewrite with an internal detail.
type failingResponse struct{ pathBridge }

func init() { caddy.RegisterModule(failingResponse{}) }

func (failingResponse) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("test_failing_response"), New: func() caddy.Module { return new(failingResponse) }}
}

func (failingResponse) RewriteRequest(_ *transforms.Exchange, b []byte) ([]byte, error) {
	return b, nil
}
func (failingResponse) WantsResponse(*transforms.Exchange) bool { return true }
func (failingResponse) RewriteResponse(*transforms.Exchange, []byte) ([]byte, error) {
	return nil, errors.New("secret internal detail")
}

// TestStreamKeepsEventIDs: events the rules rewrite or synthesize while
// handling an upstream event keep its id and retry, so a client that
// reconnects sends the right Last-Event-ID.
func TestStreamKeepsEventIDs(t *testing.T) {
	h := wildcardHandler(t)
	stream := "id: 41\nretry: 1500\nevent: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":0,\"output_index\":0,\"item\":{\"id\":\"fc\",\"type\":\"function_call\",\"arguments\":\"\",\"call_id\":\"c\",\"name\":\"x\"}}\n\n"
	rec := serve(t, h, customRequest, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		_, err := io.WriteString(w, stream)
		return err
	})
	want := "event: response.output_item.added\nid: 41\nretry: 1500\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":0,\"output_index\":0,\"item\":{\"id\":\"fc\",\"type\":\"custom_tool_call\",\"input\":\"\",\"call_id\":\"c\",\"name\":\"x\"}}\n\n"
	if rec.Body.String() != want {
		t.Fatalf("got  %q\nwant %q", rec.Body, want)
	}
}
