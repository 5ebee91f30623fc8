package caddymodule

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/klauspost/compress/zstd"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

func gzipped(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = io.WriteString(zw, s)
	_ = zw.Close()
	return b.Bytes()
}

func zstded(s string) []byte {
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	return enc.EncodeAll([]byte(s), nil)
}

// TestCompressedRequestIsDecoded: gzip and zstd bodies reach the rules
// decoded and go upstream decoded, with a matching length.
func TestCompressedRequestIsDecoded(t *testing.T) {
	h := wildcardHandler(t)
	for enc, body := range map[string][]byte{"gzip": gzipped(customRequest), "zstd": zstded(customRequest)} {
		req := httptest.NewRequest(http.MethodPost, "/v1/responses", bytes.NewReader(body))
		req.Header.Set("Content-Encoding", enc)
		called := false
		serveRequest(t, h, req, func(w http.ResponseWriter, r *http.Request) error {
			called = true
			got, _ := io.ReadAll(r.Body)
			if !bytes.Contains(got, []byte(`"type":"function"`)) || bytes.Contains(got, []byte(`"custom"`)) {
				t.Errorf("%s: forwarded %q", enc, got)
			}
			if r.Header.Get("Content-Encoding") != "" || r.ContentLength != int64(len(got)) {
				t.Errorf("%s: Content-Encoding %q, length %d for %d bytes", enc, r.Header.Get("Content-Encoding"), r.ContentLength, len(got))
			}
			return nil
		})
		if !called {
			t.Fatalf("%s: next not called", enc)
		}
	}
}

// TestUndecodableRequestIsRefused: a body the gateway cannot decode never
// goes upstream with the custom tool inside; a bomb over max_body_size once
// decoded is refused too.
func TestUndecodableRequestIsRefused(t *testing.T) {
	h := provisioned(t, &Handler{MaxBodySize: 1000, Rules: []transforms.RuleConfig{{
		Transform: "field_custom_tools_to_function", Config: []byte(`{"names":["*"]}`)}}})
	bomb := gzipped(`{"model":"m","input":"` + strings.Repeat("x", 100000) + `"}`)
	for _, tc := range []struct {
		enc    string
		body   []byte
		status int
		code   string
	}{
		{"br", []byte(customRequest), 415, "unsupported_content_encoding"},
		{"gzip", []byte("not gzip at all"), 415, "unsupported_content_encoding"},
		{"zstd", []byte(customRequest), 415, "unsupported_content_encoding"},
		{"gzip", bomb, 413, "request_too_large"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/v1/responses", bytes.NewReader(tc.body))
		req.Header.Set("Content-Encoding", tc.enc)
		called := false
		rec := serveRequest(t, h, req, func(w http.ResponseWriter, r *http.Request) error {
			called = true
			return nil
		})
		if called || rec.Code != tc.status || !strings.Contains(rec.Body.String(), `"code":"`+tc.code+`"`) {
			t.Errorf("%s %.10q: called %v, %d %s", tc.enc, tc.body, called, rec.Code, rec.Body)
		}
	}
}

// TestEncodedResponseIsRestored: an upstream that compresses despite
// Accept-Encoding: identity still gets its calls restored, JSON and SSE.
func TestEncodedResponseIsRestored(t *testing.T) {
	h := wildcardHandler(t)
	jsonIn := `{"output":[{"type":"function_call","call_id":"c","name":"x","arguments":"{\"input\":\"hi\"}"}],"tools":[{"type":"function","name":"x"}]}`
	jsonWant := `{"output":[{"type":"custom_tool_call","call_id":"c","name":"x","input":"hi"}],"tools":[{"type":"custom","name":"x"}]}`
	sseIn := "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":0,\"output_index\":0,\"item\":{\"id\":\"fc\",\"type\":\"function_call\",\"arguments\":\"\",\"call_id\":\"c\",\"name\":\"x\"}}\n\n"
	sseWant := "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":0,\"output_index\":0,\"item\":{\"id\":\"fc\",\"type\":\"custom_tool_call\",\"input\":\"\",\"call_id\":\"c\",\"name\":\"x\"}}\n\n"
	for _, tc := range []struct{ ctype, in, want string }{
		{"application/json", jsonIn, jsonWant},
		{"text/event-stream", sseIn, sseWant},
	} {
		for enc, body := range map[string][]byte{"gzip": gzipped(tc.in), "zstd": zstded(tc.in)} {
			rec := serve(t, h, customRequest, func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("Content-Type", tc.ctype)
				w.Header().Set("Content-Encoding", enc)
				// Split, so the decoder sees the body arrive in pieces.
				for len(body) > 0 {
					n := min(7, len(body))
					if _, err := w.Write(body[:n]); err != nil {
						return err
					}
					body = body[n:]
				}
				return nil
			})
			if rec.Body.String() != tc.want || rec.Header().Get("Content-Encoding") != "" {
				t.Errorf("%s %s: %q (Content-Encoding %q)", tc.ctype, enc, rec.Body, rec.Header().Get("Content-Encoding"))
			}
		}
	}
}

// TestEncodedStreamCutOrAbandoned: a compressed stream that ends early is
// an error, and one the upstream handler abandons leaves no decoder
// goroutine behind.
func TestEncodedStreamCutOrAbandoned(t *testing.T) {
	h := wildcardHandler(t)
	stream := gzipped("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0}\n\n")
	before := runtime.NumGoroutine()
	for _, fail := range []bool{false, true} {
		req := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(customRequest))
		req = req.WithContext(context.WithValue(req.Context(), caddy.ReplacerCtxKey, caddy.NewReplacer()))
		err := h.ServeHTTP(httptest.NewRecorder(), req, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Content-Encoding", "gzip")
			if _, err := w.Write(stream[:len(stream)-6]); err != nil {
				return err
			}
			if fail {
				return errors.New("upstream went away")
			}
			return nil
		}))
		if err == nil {
			t.Errorf("fail=%v: a cut stream ended without error", fail)
		}
	}
	for i := 0; runtime.NumGoroutine() > before && i < 100; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines left behind", n-before)
	}
}
