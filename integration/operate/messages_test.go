package operate

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// On a Messages route (/v1/messages, with Claude Code's ?beta=true) every
// error the gateway answers itself is in Anthropic's shape with its type
// for the status: a body too large, ambiguous keys, an unreadable body, a
// rule placed where it would get Messages it does not read. A rule that
// reads any protocol (field_set) works there, and the upstream's own
// answer passes.
func TestMessagesRoutesAnswerInAnthropicsShape(t *testing.T) {
	u := &recorder{}
	up := startUpstream(t, u)
	newTester(t).InitServer(globalOptions(`
	llm_transform {
		api_key `+teamAKey+` {
			rule field_set {
				path metadata.team
				value a
			}
		}
	}`)+`
:9180 {
	handle /tools/* {
		llm_transform {
			rule tools_filter {
				deny Bash
			}
		}
		reverse_proxy `+up+`
	}
	handle /bridge/* {
		llm_transform {
			rule messages_to_chat {
				profile deepseek
			}
		}
		reverse_proxy `+up+`
	}
	handle /pin/* {
		llm_transform {
			max_body_size 2KiB
			rule field_set {
				path model
				value deepseek-v4-pro
			}
		}
		reverse_proxy `+up+`
	}
}
`, "caddyfile")
	body := `{"model":"claude-sonnet-4-6","max_tokens":1024,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"Bash","input_schema":{"type":"object"}}]}`
	for _, tc := range []struct {
		name, path, body string
		headers          []string
		status           int
		want             string
	}{
		{"a tool rule before any bridge", "/tools/v1/messages?beta=true", body, nil, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"rule tools_filter does not read the messages protocol; put it after the bridge that turns messages into what it reads (e.g. after messages_to_chat) (rule_protocol_unsupported)"}}`},
		{"a body past max_body_size", "/pin/v1/messages", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"` + strings.Repeat("x", 3000) + `"}]}`, nil, 413,
			`{"type":"error","error":{"type":"request_too_large","message":"request body exceeds the gateway's max_body_size of 2048 bytes (request_too_large)"}}`},
		{"an unreadable body", "/pin/v1/messages", `{"model":"m","max_tokens":NaN}`, nil, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"the request body is not JSON the gateway reads: invalid character 'N' looking for beginning of value at byte offset 26 (invalid_json)"}}`},
		{"a body the gateway cannot decode", "/pin/v1/messages", body, []string{"Content-Encoding: br"}, 415,
			`{"type":"error","error":{"type":"invalid_request_error","message":"the gateway cannot decode a request body with Content-Encoding \"br\"; send it as gzip, zstd or uncompressed (unsupported_content_encoding)"}}`},
		{"two different keys", "/pin/v1/messages", body, []string{"Authorization: Bearer " + teamAKey, "X-Api-Key: other"}, 401,
			`{"type":"error","error":{"type":"authentication_error","message":"the request carries several API keys that differ (Authorization, X-Api-Key); send one (ambiguous_api_key)"}}`},
	} {
		resp, got := post(t, tc.path, tc.body, tc.headers...)
		if resp.StatusCode != tc.status || got != tc.want {
			t.Errorf("%s: %d %s\nwant %d %s", tc.name, resp.StatusCode, got, tc.status, tc.want)
		}
		if seen := u.take(); len(seen) != 0 {
			t.Errorf("%s reached the upstream: %.80q", tc.name, seen)
		}
	}
	// field_set reads Messages: the model is pinned, the key's rule too
	// (x-api-key alone is the caller's key).
	resp, got := post(t, "/pin/v1/messages?beta=true", body, "X-Api-Key: "+teamAKey)
	if resp.StatusCode != http.StatusOK || got != `{"ok":true}` {
		t.Fatalf("%d %s", resp.StatusCode, got)
	}
	seen := u.take()
	if len(seen) != 1 || !strings.Contains(seen[0], `"model":"deepseek-v4-pro"`) || !strings.Contains(seen[0], `"metadata":{"team":"a"}`) {
		t.Errorf("upstream got %q", seen)
	}
	// Bridged to Chat, the request goes to /chat/completions without
	// Claude Code's ?beta=true; other query parameters stay.
	u.mu.Lock()
	u.uris = nil
	u.mu.Unlock()
	_, _ = post(t, "/bridge/v1/messages?beta=true&api-version=7", `{"model":"deepseek-v4-pro","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`)
	u.mu.Lock()
	uris := u.uris
	u.mu.Unlock()
	if len(uris) != 1 || uris[0] != "/bridge/v1/chat/completions?api-version=7" {
		t.Errorf("bridged request went to %q", uris)
	}
	u.take()
}

// TestCountTokensAnsweredByTheGateway: Claude Code sends bursts of
// count_tokens (about 25 at once for /context); with messages_to_chat in
// front of a Chat upstream, which has no such endpoint, the gateway
// answers every one itself from the converted request, the upstream
// never called; a larger conversation never counts less, and a body it
// cannot read is a 400 in Anthropic's shape.
func TestCountTokensAnsweredByTheGateway(t *testing.T) {
	u := &recorder{}
	up := startUpstream(t, u)
	newTester(t).InitServer(globalOptions("")+`
:9180 {
	handle /bridge/* {
		llm_transform {
			rule messages_to_chat {
				profile deepseek
			}
		}
		reverse_proxy `+up+`
	}
}
`, "caddyfile")
	body := func(turns int) string {
		var b strings.Builder
		b.WriteString(`{"model":"claude-sonnet-4-6","system":"You are terse.","messages":[`)
		for i := 0; i < turns; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"role":"user","content":"Read src/main.go and tell me what it does."},{"role":"assistant","content":"It starts the server."}`)
		}
		b.WriteString(`],"tools":[{"name":"Bash","description":"Run a command","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}]}`)
		return b.String()
	}
	count := func(resp *http.Response, got string) int {
		var v struct {
			InputTokens int `json:"input_tokens"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(got), &v) != nil || v.InputTokens <= 0 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), got)
		}
		return v.InputTokens
	}
	var wg sync.WaitGroup
	counts := make([]int, 25)
	for i := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, got := post(t, "/bridge/v1/messages/count_tokens?beta=true", body(1+i%5))
			counts[i] = count(resp, got)
		}()
	}
	wg.Wait()
	if seen := u.take(); len(seen) != 0 {
		t.Fatalf("count_tokens reached the upstream %d times", len(seen))
	}
	for i, c := range counts {
		if j := i % 5; i >= 5 && c != counts[j] {
			t.Errorf("the same body counted %d and %d", counts[j], c)
		}
		if i%5 > 0 && c <= counts[i-1] {
			t.Errorf("%d turns counted %d, %d turns %d", i%5+1, c, i%5, counts[i-1])
		}
	}
	resp, got := post(t, "/bridge/v1/messages/count_tokens", `{"model":"m","messages":NaN}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(got, `{"type":"error","error":{"type":"invalid_request_error"`) {
		t.Errorf("%d %s", resp.StatusCode, got)
	}
	if seen := u.take(); len(seen) != 0 {
		t.Fatalf("a refused count_tokens reached the upstream")
	}
}
