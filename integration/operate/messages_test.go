package operate

import (
	"net/http"
	"strings"
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
