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
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/tidwall/gjson"

	_ "github.com/llmtransform/caddy-llm-transform" // the module as xcaddy builds it
	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
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
	code, b, err := adminSend(method, path, contentType, body)
	if err != nil {
		t.Fatalf("admin %s %s: %v", method, path, err)
	}
	return code, b
}

// adminSend is adminDo for goroutines and loops that report errors
// themselves.
func adminSend(method, path, contentType, body string) (int, string, error) {
	var resp *http.Response
	var err error
	// Each successful load restarts Caddy's admin server; a request that
	// races the old one's shutdown is refused at the transport level, not
	// answered, and is safe to send again: every request sent here is
	// idempotent.
	for attempt := 0; attempt < 5; attempt++ {
		var req *http.Request
		req, err = http.NewRequest(method, "http://"+adminAddr+path, strings.NewReader(body))
		if err != nil {
			return 0, "", err
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
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
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

// normalisedPatch is what fakeprovider's sloppy default patch must become.
const normalisedPatch = "*** Begin Patch\n*** Add File: hello.txt\n+Hello from caddy-llm-transform\n*** End Patch\n"

func startUpstream(t *testing.T, u http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// lastRequest is the last body the strict upstream received.
func lastRequest(u *fakeprovider.Provider) gjson.Result {
	reqs := u.Requests()
	if len(reqs) == 0 {
		return gjson.Result{}
	}
	return gjson.ParseBytes(reqs[len(reqs)-1])
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
