package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// TestReviewToolsPlanLargeBodyReachesUpstream: a large Responses request
// that tools_plan (the last rule) rewrites by flattening namespaced
// function_call history items goes upstream built as it is read; the
// announced Content-Length must be the bytes sent, or the transport fails
// the round trip.
func TestReviewToolsPlanLargeBodyReachesUpstream(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"model":"m","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}],"input":[`)
	for i := 0; b.Len() < 600<<10; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"function_call","call_id":"c%d","namespace":"ns","name":"f","arguments":"{\"x\":%d}"},{"type":"function_call_output","call_id":"c%d","output":"ok"}`, i, i, i)
	}
	b.WriteString(`]}`)
	body := b.String()

	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, err := io.ReadAll(r.Body)
		if err != nil || int64(len(got)) != r.ContentLength {
			t.Errorf("upstream read %d bytes (%v), announced %d", len(got), err, r.ContentLength)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"r","object":"response","output":[]}`)
	}))
	defer upstream.Close()

	h := provisioned(t, &Handler{Rules: []transforms.RuleConfig{{
		Transform: "tools_plan",
		Config:    []byte(`{"profile":"function_only","namespaces":"flatten"}`),
	}}})
	req := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(body))
	var rtErr error
	serveRequest(t, h, req, func(w http.ResponseWriter, r *http.Request) error {
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = "http", strings.TrimPrefix(upstream.URL, "http://")
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			rtErr = err
			w.WriteHeader(http.StatusBadGateway)
			return nil
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		_, err = io.Copy(w, resp.Body)
		return err
	})
	if rtErr != nil {
		t.Fatalf("the upstream round trip failed: %v", rtErr)
	}
}
