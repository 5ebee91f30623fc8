// Package operate tests scopes, hot reload and operator visibility against
// a real Caddy run in process. It uses its own admin and HTTP ports (2998,
// 9180) so it can run at the same time as the top-level integration
// package (2999, 9080). All tests share one Caddy; none runs in parallel.
package operate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/tidwall/gjson"

	_ "github.com/llmtransform/caddy-llm-transform/caddymodule"
)

const (
	adminPort  = 2998
	adminAddr  = "localhost:2998"
	gatewayURL = "http://127.0.0.1:9180"
)

// globalOptions must open every Caddyfile this package loads: a config
// without the admin address would move the admin endpoint away from the
// tester. extra goes inside the block.
func globalOptions(extra string) string {
	return `{
	skip_install_trust
	admin ` + adminAddr + `
	http_port 9180
	https_port 9543
	grace_period 1ns
` + extra + `
}
`
}

func newTester(t *testing.T) *caddytest.Tester {
	t.Helper()
	return caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{
		AdminPort:          adminPort,
		TestRequestTimeout: 30 * time.Second,
		LoadRequestTimeout: 30 * time.Second,
	})
}

// site is a :9180 site block: the llm_transform handler with the given
// body, then a proxy to up.
func site(handlerBody, up string) string {
	return `
:9180 {
	llm_transform {
` + handlerBody + `
	}
	reverse_proxy ` + up + `
}
`
}

// fresh is a client that opens a connection per request. Reloads stop the
// old server, which closes its idle keep-alive connections; a POST sent on
// one just as it closes is not retried by net/http, which would make the
// tests flaky for reasons that have nothing to do with this module.
var fresh = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}

// adminDo sends a request to the admin endpoint and returns status and body.
func adminDo(t *testing.T, method, path, contentType, body string) (int, string) {
	t.Helper()
	var resp *http.Response
	var err error
	// Each successful load restarts Caddy's admin server; a request that
	// races the old one's shutdown is refused at the transport level, not
	// answered, and is safe to send again.
	for attempt := 0; attempt < 5; attempt++ {
		var req *http.Request
		req, err = http.NewRequest(method, "http://"+adminAddr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if resp, err = fresh.Do(req); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("admin %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// load replaces the running config through POST /load.
func load(t *testing.T, contentType, cfg string) {
	t.Helper()
	if code, body := adminDo(t, http.MethodPost, "/load", contentType, cfg); code != http.StatusOK {
		t.Fatalf("POST /load: %d %s", code, body)
	}
}

// post sends a JSON body to the gateway with extra headers ("Name: value").
func post(t *testing.T, path, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, gatewayURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := fresh.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	// The gateway cuts a stream it ended with an error event, so that the
	// proxy stops reading the upstream: what came before the cut counts.
	if err != nil && !(errors.Is(err, io.ErrUnexpectedEOF) && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")) {
		t.Fatal(err)
	}
	return resp, string(b)
}

const patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"

// fakeUpstream is a lenient Responses upstream: it records request bodies,
// accepts any tools and always answers with an apply_patch function call,
// so tests can see what each key's rules let through.
type fakeUpstream struct {
	mu     sync.Mutex
	bodies [][]byte
}

func startUpstream(t *testing.T, u http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func (u *fakeUpstream) last() gjson.Result {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.bodies) == 0 {
		return gjson.Result{}
	}
	return gjson.ParseBytes(u.bodies[len(u.bodies)-1])
}

func (u *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, body)
	u.mu.Unlock()
	args, _ := json.Marshal(map[string]string{"input": patch})
	argsJSON, _ := json.Marshal(string(args))
	item := `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"apply_patch","arguments":` + string(argsJSON) + `,"status":"completed"}`
	if !gjson.GetBytes(body, "stream").Bool() {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"r","object":"response","status":"completed","output":[`+item+`]}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	seq := 0
	send := func(typ, data string) {
		fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, data)
		seq++
		_ = rc.Flush()
	}
	send("response.created", `"response":{"id":"r","status":"in_progress","output":[]}`)
	send("response.output_item.added", `"output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"apply_patch","arguments":"","status":"in_progress"}`)
	send("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":1,"delta":`+string(argsJSON))
	send("response.function_call_arguments.done", `"item_id":"fc_1","output_index":1,"arguments":`+string(argsJSON))
	send("response.output_item.done", `"output_index":1,"item":`+item)
	send("response.completed", `"response":{"id":"r","status":"completed","output":[`+item+`]}`)
}

// parseSSE splits an SSE body into the data of its events. It returns an
// error rather than failing the test, so goroutines may use it.
func parseSSE(body string) ([]gjson.Result, error) {
	var out []gjson.Result
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if !gjson.Valid(d) {
				return out, fmt.Errorf("event data is not JSON: %s", d)
			}
			out = append(out, gjson.Parse(d))
		}
	}
	return out, sc.Err()
}

// compactJSON is s with insignificant white space removed.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return b.String()
}
