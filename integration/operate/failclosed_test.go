package operate

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// recorder is an upstream that answers every request with 200 and keeps
// the bodies it got.
type recorder struct {
	mu     sync.Mutex
	bodies []string
	uris   []string
}

func (u *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.uris = append(u.uris, r.URL.RequestURI())
	u.bodies = append(u.bodies, string(b))
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
}

func (u *recorder) take() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	b := u.bodies
	u.bodies = nil
	return b
}

// A body the gateway cannot read (NaN, -Infinity, nesting past the
// scanner's limit) never reaches the upstream past a rule that would have
// acted on it: a tools_filter deny, a field_set pin, a rule bound to the
// caller's key. Each gets a 400 invalid_json saying what and where. On a
// route whose rules do not bind the request, the same bodies pass as they
// came: the gateway refuses only what it was asked to police.
func TestUnreadableBodiesFailClosed(t *testing.T) {
	u := &recorder{}
	up := startUpstream(t, u)
	newTester(t).InitServer(globalOptions(`
	llm_transform {
		api_key `+teamAKey+` {
			rule field_set {
				path model
				value pinned
			}
		}
	}`)+`
:9180 {
	handle /deny/* {
		llm_transform {
			explain
			rule tools_filter {
				deny delete_*
			}
		}
		reverse_proxy `+up+`
	}
	handle /pin/* {
		llm_transform {
			rule field_set {
				path model
				value pinned
			}
		}
		reverse_proxy `+up+`
	}
	handle /key/* {
		llm_transform
		reverse_proxy `+up+`
	}
	handle /other/* {
		llm_transform {
			rule field_set {
				models other-*
				path model
				value pinned
			}
		}
		reverse_proxy `+up+`
	}
}
`, "caddyfile")
	deep := `{"model":"m","input":"hi","x":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`
	bodies := []struct{ name, body, where string }{
		{"NaN", `{"model":"m","input":"hi","metadata":{"n":NaN}}`, "invalid character 'N' looking for beginning of value at byte offset 42"},
		{"-Infinity", `{"model":"m","input":"hi","x":-Infinity}`, "invalid character 'I' in numeric literal at byte offset 31"},
		{"1001 levels", deep, "nested deeper than 1000 levels at byte offset 1029"},
	}
	for _, b := range bodies {
		for _, route := range []struct{ path, header string }{
			{"/deny/v1/responses", ""},
			{"/pin/v1/responses", ""},
			{"/key/v1/responses", "Authorization: Bearer " + teamAKey},
		} {
			var headers []string
			if route.header != "" {
				headers = append(headers, route.header)
			}
			resp, got := post(t, route.path, b.body, headers...)
			want := `{"error":{"message":"the request body is not JSON the gateway reads: ` + b.where + `","type":"invalid_request_error","param":null,"code":"invalid_json"}}`
			if resp.StatusCode != http.StatusBadRequest || got != want {
				t.Errorf("%s on %s: %d %s\nwant 400 %s", b.name, route.path, resp.StatusCode, got, want)
			}
			if route.path == "/deny/v1/responses" {
				if e := resp.Header.Get("X-LLM-Transform-Explain"); !strings.Contains(e, "reject") {
					t.Errorf("%s: explain header %q tells no rejection", b.name, e)
				}
			}
			if seen := u.take(); len(seen) != 0 {
				t.Errorf("%s on %s reached the upstream: %.80q", b.name, route.path, seen)
			}
		}
		// No rule binds model m here, and without a key no key rule runs.
		for _, path := range []string{"/other/v1/responses", "/key/v1/responses"} {
			resp, got := post(t, path, b.body)
			if resp.StatusCode != http.StatusOK || got != `{"ok":true}` {
				t.Errorf("%s on %s: %d %s", b.name, path, resp.StatusCode, got)
			}
			if seen := u.take(); len(seen) != 1 || seen[0] != b.body {
				t.Errorf("%s on %s: the upstream got %.80q, want the body as sent", b.name, path, seen)
			}
		}
	}
}
