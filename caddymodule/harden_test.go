package caddymodule

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
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
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/klauspost/compress/zstd"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// serveRequest runs req through h with a Caddy replacer in its context.
func serveRequest(t *testing.T, h *Handler, req *http.Request, next caddyhttp.HandlerFunc) *httptest.ResponseRecorder {
	t.Helper()
	repl := caddy.NewReplacer()
	req = req.WithContext(context.WithValue(req.Context(), caddy.ReplacerCtxKey, repl))
	rec := httptest.NewRecorder()
	if err := h.ServeHTTP(rec, req, next); err != nil {
		t.Fatal(err)
	}
	return rec
}

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

// TestModelsMatchLastModelKey: rules are picked for the model the upstream
// serves, the last "model" key, as encoding/json and Python read it.
func TestModelsMatchLastModelKey(t *testing.T) {
	h := provisioned(t, &Handler{Rules: []transforms.RuleConfig{{
		Transform: "field_custom_tools_to_function", Models: []string{"deepseek-*"}, Config: []byte(`{"names":["*"]}`)}}})
	body := `{"model":"gpt-5","tools":[{"type":"custom","name":"x"}],"model":"deepseek-v4"}`
	serve(t, h, body, func(w http.ResponseWriter, r *http.Request) error {
		got, _ := io.ReadAll(r.Body)
		if bytes.Contains(got, []byte(`"custom"`)) {
			t.Errorf("rules of the first model key were used: %s", got)
		}
		return nil
	})
}

// TestAmbiguousKeyRefused: a request whose key sources disagree, or that
// repeats one, is refused instead of falling back to no key.
func TestAmbiguousKeyRefused(t *testing.T) {
	const key = "sk-team-a-0123456789abcdef0123456789"
	h := &Handler{}
	h.keySources = []string{"Authorization", "X-Api-Key"}
	h.chain = transforms.NewChain(nil, nil)
	h.keys = []keyChain{{sum: sumOf(key), chain: transforms.NewChain(nil, nil)}}
	for _, tc := range []struct {
		headers [][2]string
		ok      bool
	}{
		{[][2]string{{"Authorization", "Bearer " + key}}, true},
		{[][2]string{{"Authorization", "Bearer " + key}, {"X-Api-Key", key}}, true},
		{[][2]string{{"Authorization", "Basic junk"}}, true},
		{nil, true},
		{[][2]string{{"Authorization", "Bearer junk"}, {"X-Api-Key", key}}, false},
		{[][2]string{{"Authorization", "Basic junk"}, {"X-Api-Key", key}}, false},
		{[][2]string{{"Authorization", "Bearer " + key}, {"Authorization", "Bearer " + key}}, false},
		{[][2]string{{"X-Api-Key", key}, {"X-Api-Key", "other"}}, false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/v1/responses", nil)
		for _, kv := range tc.headers {
			r.Header.Add(kv[0], kv[1])
		}
		_, err := h.chainFor(r)
		if (err == nil) != tc.ok {
			t.Errorf("%v: err %v", tc.headers, err)
		}
		if err != nil && (err.Status != 401 || err.Code != "ambiguous_api_key") {
			t.Errorf("%v: %+v", tc.headers, err)
		}
	}
}

func TestShortKeysRefused(t *testing.T) {
	var a App
	err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`llm_transform {
		api_key sk-short {
			rule field_set {
				path a
				value b
			}
		}
	}`))
	if err == nil || !strings.Contains(err.Error(), "api_key 0: the key is shorter than 32 characters") || strings.Contains(err.Error(), "sk-short") {
		t.Fatalf("got %v", err)
	}
}

func TestCaddyfileRepeatsAndSizes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"protocol auto\nprotocol responses", "protocol already specified"},
		{"max_body_size 1MB\nmax_body_size 2MB", "max_body_size already specified"},
		{"max_call_buffer 1MB\nmax_call_buffer 2MB", "max_call_buffer already specified"},
		{"explain\nexplain false", "explain already specified"},
		{"max_body_size 12QB", `max_body_size: invalid size "12QB"`},
		{"max_call_buffer lots", `max_call_buffer: invalid size "lots"`},
		{"max_body_size 0", "max_body_size must be positive"},
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_transform {\n" + tc.in + "\n}"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
	var a App
	err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_transform {\nkey_sources authorization\nkey_sources x-api-key\n}"))
	if err == nil || !strings.Contains(err.Error(), "key_sources already specified") {
		t.Errorf("key_sources twice: %v", err)
	}
}

// TestValidateRefusesNegativeSizes: in JSON an absent size and 0 are the
// same value, the default; a negative one is an error.
func TestValidateRefusesNegativeSizes(t *testing.T) {
	for _, cfg := range []string{`{"max_body_size":-1}`, `{"max_call_buffer":-5}`} {
		var h Handler
		if err := json.Unmarshal([]byte(cfg), &h); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		err := h.Provision(ctx)
		if err == nil {
			err = h.Validate()
		}
		cancel()
		if err == nil || !strings.Contains(err.Error(), "must be positive") {
			t.Errorf("%s: got %v", cfg, err)
		}
	}
}

func sumOf(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }

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
