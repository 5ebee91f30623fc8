package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// TestReviewCloseDuringReadReleasesWalks: HTTP/2's transport closes a
// request body on its own goroutine (closeReqBodyLocked) while its body
// writer may be inside Read, e.g. when the upstream answers early. The
// lease then reaches zero as the handler returns and Exchange.Release
// clears the walks' nodes and pools them (and recycles the read buffer)
// while the deferred body's Write closures are still reading them. Run
// with -race: the detector reports the clear in releaseWalks against the
// closures' reads; without -race, the cleared nodes (Start 0) make every
// remaining replacement copy the whole body, and the Read runs for minutes.
func TestReviewCloseDuringReadReleasesWalks(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"model":"m","tools":[{"type":"custom","name":"apply_patch"}],"input":[`)
	for i := 0; b.Len() < 3<<20; i++ {
		fmt.Fprintf(&b, `{"type":"custom_tool_call","id":"ctc_%d","call_id":"c%d","name":"apply_patch","input":"*** Begin Patch\n+x\n*** End Patch\n"},`, i, i)
	}
	b.WriteString(`{"type":"message","role":"user","content":"go"}]}`)
	h := wildcardHandler(t)
	req := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(b.String()))
	done := make(chan int)
	var announced int64
	serveRequest(t, h, req, func(w http.ResponseWriter, r *http.Request) error {
		body := r.Body
		announced = r.ContentLength
		started := make(chan struct{})
		go func() {
			p := make([]byte, 16<<20) // one Read crosses every edit
			close(started)
			n, _ := body.Read(p)
			done <- n
		}()
		<-started
		// The upstream answered early: the transport closes the body on
		// another goroutine, the handler copies the answer and returns.
		go body.Close()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"early","type":"invalid_request_error"}}`)
		return nil
	})
	select {
	case n := <-done:
		// Close waits for the Read, or the Read finds the body closed:
		// all of it or nothing, never a body built from released walks.
		if int64(n) != announced && n != 0 {
			t.Fatalf("one Read across the release gave %d bytes of the %d announced: the walks were released under it", n, announced)
		}
	case <-time.After(20 * time.Second):
		// The walks' nodes were cleared under the reader: each remaining
		// converted call, at Start 0, copies the whole body.
		t.Fatal("the body's Read is still running 20s after the handler returned: Release cleared the walks it reads")
	}
}
