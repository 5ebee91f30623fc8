package caddymodule

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// TestReadBodyGrowsWithWhatArrives: a body that announces far more than it
// sends costs what it sent, not what it announced.
func TestReadBodyGrowsWithWhatArrives(t *testing.T) {
	h := provisioned(t, &Handler{MaxBodySize: 64 << 20})
	req := httptest.NewRequest(http.MethodPost, "/v1/responses", strings.NewReader(`{"model":"m"}`))
	req.ContentLength = 32 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	body, err := h.readBody(req, &bodyLease{})
	runtime.ReadMemStats(&after)
	if err != nil || string(body) != `{"model":"m"}` {
		t.Fatalf("%q %v", body, err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Fatalf("reading 13 bytes allocated %d bytes", n)
	}
}

// TestReadBodyKeepsNoGarbage: a large body the pool has no buffer for
// grows its buffer fourfold, allocating less than twice its size on the
// way; once its buffer is pooled, the next body its size allocates nothing
// of that order.
func TestReadBodyKeepsNoGarbage(t *testing.T) {
	h := provisioned(t, &Handler{})
	body := []byte(`{"input":"` + strings.Repeat("x", 3<<20) + `"}`)
	read := func() (uint64, []byte, *bodyLease) {
		req := httptest.NewRequest(http.MethodPost, "/v1/responses", bytes.NewReader(body))
		lease := &bodyLease{}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := h.readBody(req, lease)
		runtime.ReadMemStats(&after)
		if err != nil || !bytes.Equal(got, body) || cap(got) != len(body) && lease.read == nil {
			t.Fatalf("read %d bytes (cap %d): %v", len(got), cap(got), err)
		}
		return after.TotalAlloc - before.TotalAlloc, got, lease
	}
	n, _, lease := read()
	if n > uint64(len(body))*2 {
		t.Fatalf("reading %d bytes allocated %d", len(body), n)
	}
	lease.acquire()
	lease.release() // the body is done with: its buffer joins the pool
	if raceEnabled {
		return
	}
	// sync.Pool may drop what it holds at any garbage collection, so a
	// collection between the release and the read can empty it: the
	// buffer must be reused within a few tries, not on the first.
	var last uint64
	for try := 0; try < 3; try++ {
		var l *bodyLease
		if last, _, l = read(); last <= 1<<20 {
			return
		}
		l.acquire()
		l.release()
	}
	t.Fatalf("with a pooled buffer, reading %d bytes allocated %d, three times", len(body), last)
}

// rawServer serves h behind the body wrapper Caddy's access logging puts on
// every request, and returns its address.
func rawServer(t *testing.T, h *Handler) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Caddy's server wraps the body (lengthReader) when it logs; net/http
		// then no longer recognises its own body type after the handler.
		r.Body = struct{ io.ReadCloser }{r.Body}
		repl := caddy.NewReplacer()
		r = r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl))
		_ = h.ServeHTTP(w, r, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			_, err := io.Copy(io.Discard, r.Body)
			return err
		}))
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestOversizedRequestRefusedAtOnce: a request whose announced length is
// over max_body_size gets 413 before any of its body is read, with or
// without Expect: 100-continue.
func TestOversizedRequestRefusedAtOnce(t *testing.T) {
	h := provisioned(t, &Handler{MaxBodySize: 1000, Rules: []transforms.RuleConfig{{
		Transform: "field_custom_tools_to_function", Config: []byte(`{"names":["*"]}`)}}})
	addr := rawServer(t, h)
	for _, expect := range []string{"", "Expect: 100-continue\r\n"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		head := "POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 33554432\r\n" + expect + "\r\n"
		if expect == "" {
			head += `{"model":"m"` // a start of the body, then nothing
		}
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%q: no response: %v", expect, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), `"code":"request_too_large"`) {
			t.Fatalf("%q: %d %s", expect, resp.StatusCode, b)
		}
	}
}

// TestLeaseEndsWhenTheBodiesAreDone: the read buffer goes back to its pool
// once the handler is done and the body that went upstream is closed, also
// when a rewritten body replaced the one read.
func TestLeaseEndsWhenTheBodiesAreDone(t *testing.T) {
	buf := make([]byte, 0, pooledRead)
	lease := &bodyLease{}
	lease.acquire() // the handler's hold
	lease.keep(&buf)
	r := httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
	setLeasedBody(r, []byte(`{"original":true}`), lease)
	setLeasedBody(r, []byte(`{"rewritten":true}`), lease)
	lease.release() // the handler returns while the transport still reads
	if got, _ := io.ReadAll(r.Body); string(got) != `{"rewritten":true}` {
		t.Fatalf("body %s", got)
	}
	if lease.n.Load() != 1 {
		t.Fatalf("holds before close: %d", lease.n.Load())
	}
	_ = r.Body.Close()
	_ = r.Body.Close() // transports may close twice
	// At zero the lease hands the buffers back (sync.Pool itself is not
	// checked: under the race detector it drops items at random).
	if lease.n.Load() != 0 {
		t.Fatalf("holds after close: %d", lease.n.Load())
	}
}

// TestLeasedBodyReadAfterClose: once the transport closed the body, and the
// lease may have handed its buffers back, a Read finds it closed instead of
// reading them.
func TestLeasedBodyReadAfterClose(t *testing.T) {
	lease := &bodyLease{}
	lease.acquire()
	r := httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
	setLeasedBody(r, []byte(`{"a":1}`), lease)
	lease.release()
	_ = r.Body.Close()
	if n, err := r.Body.Read(make([]byte, 8)); n != 0 || !errors.Is(err, errBodyClosed) {
		t.Fatalf("Read after Close: %d, %v", n, err)
	}
	if lease.n.Load() != 0 {
		t.Fatalf("holds after close: %d", lease.n.Load())
	}
}

// TestLargeRewrittenBodyIsBuiltAsRead: a large body the conversion
// rewrites goes upstream built as the transport reads it, from the
// client's bytes, not held as a second copy: the bytes, the announced
// length and a re-read (GetBody, for a retry) are those of the rewrite.
func TestLargeRewrittenBodyIsBuiltAsRead(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"model":"m","tools":[{"type":"custom","name":"apply_patch"}],"input":[`)
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, `{"type":"custom_tool_call","id":"ctc_%d","call_id":"c%d","name":"apply_patch","input":"*** Begin Patch\n+print(\"Grüße \\\"%d\\\"\", r\"C:\\temp\")\n*** End Patch\n"},`, i, i, i)
	}
	b.WriteString(`{"type":"message","role":"user","content":"go"}]}`)
	body := []byte(b.String())

	h := wildcardHandler(t)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	rules, err := transforms.Compile(ctx, h.Rules, transforms.ScopeProvider, "")
	if err != nil {
		t.Fatal(err)
	}
	x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
	transforms.NewChain(rules).Begin(x, "m")
	want, err := x.RewriteRequest(body)
	if err != nil || bytes.Equal(want, body) {
		t.Fatalf("the rewrite: %v, changed %v", err, !bytes.Equal(want, body))
	}

	req := httptest.NewRequest(http.MethodPost, "/v1/responses", bytes.NewReader(body))
	called := false
	rec := serveRequest(t, h, req, func(w http.ResponseWriter, r *http.Request) error {
		called = true
		if _, deferred := r.Body.(*leasedBody).Reader.(*jsonspan.EditReader); !deferred {
			t.Error("the rewritten body was built whole before it went upstream")
		}
		if r.ContentLength != int64(len(want)) || r.Header.Get("Content-Length") != strconv.Itoa(len(want)) {
			t.Errorf("announced %d (header %q), the body is %d bytes", r.ContentLength, r.Header.Get("Content-Length"), len(want))
		}
		got, err := io.ReadAll(r.Body)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("upstream read %d bytes (%v), want the rewrite's %d", len(got), err, len(want))
		}
		again, _ := r.GetBody()
		got, err = io.ReadAll(again)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("a re-read gave %d bytes (%v), want the rewrite's %d", len(got), err, len(want))
		}
		_ = again.Close()
		w.Header().Set("Content-Type", "application/json")
		_, err = io.WriteString(w, `{"id":"resp_1","object":"response","output":[]}`)
		return err
	})
	if !called || rec.Code != http.StatusOK {
		t.Fatalf("upstream called %v, status %d: %s", called, rec.Code, rec.Body)
	}
}

// TestLargeToolsPlanBodyAnnouncesTheBytesSent: a large Responses request
// that tools_plan (the last rule) rewrites by flattening namespaced
// function_call history items goes upstream built as it is read; the
// announced Content-Length must be the bytes sent, or the transport fails
// the round trip.
func TestLargeToolsPlanBodyAnnouncesTheBytesSent(t *testing.T) {
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

// TestCloseDuringReadLeavesTheReadWhole: HTTP/2's transport closes a
// request body on its own goroutine (closeReqBodyLocked) while its body
// writer may be inside Read, e.g. when the upstream answers early. The
// lease then reaches zero as the handler returns, and Exchange.Release
// would clear the walks' nodes and pool them (and recycle the read buffer)
// while the deferred body's Write closures still read them. A Read across
// the close must give the whole body or nothing, and finish. Run with
// -race, the detector would report the clear in releaseWalks against the
// closures' reads; without -race, cleared nodes (Start 0) would make every
// remaining replacement copy the whole body, and the Read run for minutes.
func TestCloseDuringReadLeavesTheReadWhole(t *testing.T) {
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
