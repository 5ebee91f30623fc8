package operate

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/caddymodule"
	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// A test transform that may only be configured next to an upstream.
func init() {
	caddy.RegisterModule(providerOnly{})
}

type providerOnly struct{}

func (providerOnly) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("operate_provider_only"), New: func() caddy.Module { return new(providerOnly) }}
}

func (providerOnly) RewriteRequest(_ *transforms.Exchange, b []byte) ([]byte, error) { return b, nil }
func (providerOnly) Scopes() transforms.Scope                                        { return transforms.ScopeProvider }

const (
	// 32 characters at least: the Caddyfile refuses shorter keys.
	teamAKey = "sk-team-a-0c9f3e7d51b2a84f6e1d9c3b"
	teamBKey = "sk-team-b-77aa01c4e9d3f52b08a6c1e7"
	wrongKey = "sk-wrong-5e6f7a8b9c0d4e1f2a3b5c6d"

	// The keys' SHA-256 in hex, computed outside Go
	// (printf %s KEY | sha256sum), so a wrong hash cannot agree with itself.
	teamAHash = "db9ab43a50f9551e72bd01d4f0b171d8e4569fc93930ab5fe31b5db2365fce24"
	teamBHash = "1169d027e2cbaba602433523b807ae579aeeb264452eee98cc8e8a1752c33b0b"
)

// scopedConfig has a rule in every scope. All of them write "tier", so the
// value the upstream sees names the last scope that ran; the global scope
// also converts custom tools, which the response phase restores.
func scopedConfig(up, extraGlobal, extraSite string) string {
	return globalOptions(extraGlobal+`
	llm_transform {
		rule field_custom_tools_to_function {
			names *
		}
		rule field_set {
			path tier
			value global
		}
		api_key {env.OPERATE_TEAM_A_KEY} {
			rule field_set {
				path tier
				value team-a
			}
		}
		api_key `+teamBKey+` {
			rule field_set {
				path tier
				value team-b
			}
		}
	}`) + `
:9180 {
` + extraSite + `
	llm_transform {
		explain
		rule field_set {
			path tier
			value provider
		}
	}
	reverse_proxy ` + up + `
}
`
}

const toolRequest = `{"model":"m","tier":"client","input":"hi","tools":[{"type":"custom","name":"apply_patch"}]}`

func TestScopeOrder(t *testing.T) {
	t.Setenv("OPERATE_TEAM_A_KEY", teamAKey)
	u := &fakeprovider.Provider{}
	up := startUpstream(t, u)
	newTester(t).InitServer(scopedConfig(up, "", ""), "caddyfile")

	const (
		request  = "provider/field_set@request,global/field_custom_tools_to_function@request,global/field_set@request"
		response = "global/field_custom_tools_to_function@response"
		decided  = "set_field:tier,convert_definition:apply_patch,set_field:tier"
	)
	for _, tc := range []struct {
		name, header, tier, explain string
	}{
		{"key A by bearer", "Authorization: Bearer " + teamAKey, "team-a",
			"applied=" + request + ",api_key/field_set@request," + response + "; converted=1; restored=1; decisions=" + decided + ",set_field:tier,restore_call:apply_patch"},
		{"key B by x-api-key", "X-Api-Key: " + teamBKey, "team-b",
			"applied=" + request + ",api_key/field_set@request," + response + "; converted=1; restored=1; decisions=" + decided + ",set_field:tier,restore_call:apply_patch"},
		{"another key", "Authorization: Bearer " + wrongKey, "global",
			"applied=" + request + "," + response + "; converted=1; restored=1; decisions=" + decided + ",restore_call:apply_patch"},
		{"no key", "", "global",
			"applied=" + request + "," + response + "; converted=1; restored=1; decisions=" + decided + ",restore_call:apply_patch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.header != "" {
				hdr = append(hdr, tc.header)
			}
			resp, body := post(t, "/v1/responses", toolRequest, hdr...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			seen := lastRequest(u)
			if got := seen.Get("tier").String(); got != tc.tier {
				t.Fatalf("upstream saw tier %q, want %q", got, tc.tier)
			}
			if got := seen.Get("tools.0.type").String(); got != "function" {
				t.Fatalf("upstream saw tool type %q", got)
			}
			if got := gjson.Get(body, `output.#(type=="custom_tool_call").input`).String(); got != normalisedPatch {
				t.Fatalf("client got %s", body)
			}
			if got := resp.Header.Get(caddymodule.ExplainHeader); got != tc.explain {
				t.Fatalf("explain:\n got %s\nwant %s", got, tc.explain)
			}
		})
	}
}

// TestAmbiguousKeyThroughCaddy: a junk Authorization next to the caller's
// X-Api-Key is refused, not read as "no key", which would drop the key's
// rules.
func TestAmbiguousKeyThroughCaddy(t *testing.T) {
	t.Setenv("OPERATE_TEAM_A_KEY", teamAKey)
	up := startUpstream(t, &fakeprovider.Provider{})
	newTester(t).InitServer(scopedConfig(up, "", ""), "caddyfile")
	resp, body := post(t, "/v1/responses", toolRequest, "Authorization: Basic junk", "X-Api-Key: "+teamAKey)
	if resp.StatusCode != http.StatusUnauthorized || gjson.Get(body, "error.code").String() != "ambiguous_api_key" {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
}

// TestWrongOrMissingKey checks that no key-scope rule runs without the right
// key, and that no key text reaches Caddy's logs: the debug log our
// decisions go to and the access log with our fields. Caddy redacts
// Authorization itself; reverse_proxy's debug log and the access log print
// other request headers, so X-Api-Key is filtered from both, as the README
// advises.
func TestWrongOrMissingKey(t *testing.T) {
	t.Setenv("OPERATE_TEAM_A_KEY", teamAKey)
	dir := t.TempDir()
	debugLog, accessLog := filepath.Join(dir, "debug.log"), filepath.Join(dir, "access.log")
	u := &fakeprovider.Provider{}
	up := startUpstream(t, u)
	tester := newTester(t)
	tester.InitServer(scopedConfig(up, `
	log {
		output file `+debugLog+`
		format filter {
			wrap json
			request>headers>X-Api-Key delete
		}
		level DEBUG
	}`, `
	log {
		output file `+accessLog+`
		format filter {
			wrap json
			request>headers>X-Api-Key delete
		}
	}`), "caddyfile")
	// Stop writing into the temporary directory before it is removed.
	t.Cleanup(func() { load(t, "text/caddyfile", globalOptions("")+site("", up)) })

	for _, h := range []string{"Authorization: Bearer " + wrongKey, "X-Api-Key: " + wrongKey, "Authorization: Basic " + teamAKey, ""} {
		var hdr []string
		if h != "" {
			hdr = append(hdr, h)
		}
		resp, body := post(t, "/v1/responses", toolRequest, hdr...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: status %d: %s", h, resp.StatusCode, body)
		}
		if got := lastRequest(u).Get("tier").String(); got != "global" {
			t.Fatalf("%q: upstream saw tier %q: a key rule ran", h, got)
		}
		if ex := resp.Header.Get(caddymodule.ExplainHeader); strings.Contains(ex, "api_key/") {
			t.Fatalf("%q: explain %s", h, ex)
		}
	}
	// The right key, as a control that the logs would show its rule.
	post(t, "/v1/responses", toolRequest, "X-Api-Key: "+teamAKey)
	if got := lastRequest(u).Get("tier").String(); got != "team-a" {
		t.Fatalf("with the key, upstream saw tier %q", got)
	}

	var debug, access string
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, _ := os.ReadFile(debugLog)
		a, _ := os.ReadFile(accessLog)
		debug, access = string(d), string(a)
		if strings.Count(access, "\n") >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(debug, `"msg":"llm_transform decision"`) || !strings.Contains(debug, `"action":"convert_definition"`) {
		t.Fatalf("debug log holds no decision logs; the capture is broken:\n%s", debug)
	}
	if got := strings.Count(access, `"llm_transform_rules":["provider/field_set","global/field_custom_tools_to_function","global/field_set"]`); got != 4 {
		t.Fatalf("access log: %d entries without key rules, want 4:\n%s", got, access)
	}
	if !strings.Contains(access, `"llm_transform_rules":["provider/field_set","global/field_custom_tools_to_function","global/field_set","api_key/field_set"],"llm_transform_converted":1,"llm_transform_restored":1`) {
		t.Fatalf("access log lacks the keyed request:\n%s", access)
	}
	for _, secret := range []string{teamAKey, teamBKey, wrongKey} {
		if strings.Contains(debug, secret) || strings.Contains(access, secret) {
			t.Fatalf("key %q appears in the logs:\n%s\n%s", secret, debug, access)
		}
	}
	// Nor in the config Caddy holds, which stores only hashes.
	_, cfg := adminDo(t, http.MethodGet, "/config/apps/llm_transform", "", "")
	if strings.Contains(cfg, teamAKey) || strings.Contains(cfg, teamBKey) ||
		!strings.Contains(cfg, `"key_sha256":"`+teamAHash+`"`) {
		t.Fatalf("app config: %s", cfg)
	}
}

func TestScopeConfigErrors(t *testing.T) {
	u := &fakeprovider.Provider{}
	up := startUpstream(t, u)
	for _, tc := range []struct{ global, want string }{
		{`llm_transform {
		rule operate_provider_only
	}`, "global rule 0 (operate_provider_only): transform does not support the global scope"},
		{`llm_transform {
		api_key ` + teamAKey + ` {
			rule operate_provider_only
		}
	}`, "api_key " + teamAHash[:12] + " rule 0 (operate_provider_only): transform does not support the api_key scope"},
		{`llm_transform {
		api_key ` + teamAKey + ` {
			rule nope
		}
	}`, `api_key 0 rule 0 (nope): unknown transform \"nope\"`},
		{`llm_transform {
		api_key {env.OPERATE_UNSET_KEY} {
		}
	}`, "api_key 0: the key is empty (is its environment variable set?)"},
	} {
		code, body := adminDo(t, http.MethodPost, "/load", "text/caddyfile", globalOptions(tc.global)+site("", up))
		if code == http.StatusOK || !strings.Contains(body, tc.want) {
			t.Errorf("load: %d %s\nwant error containing %s", code, body, tc.want)
		}
		if strings.Contains(body, teamAKey) {
			t.Errorf("the error shows the key: %s", body)
		}
	}
	// JSON: a malformed hash is refused, and the config stays valid.
	code, body := adminDo(t, http.MethodPost, "/load", "application/json", `{
	"admin": {"listen": "`+adminAddr+`"},
	"apps": {"llm_transform": {"api_keys": [{"key_sha256": "abc"}]}}}`)
	if code == http.StatusOK || !strings.Contains(body, "api_keys[0]: key_sha256 must be 64 hex digits") {
		t.Errorf("load: %d %s", code, body)
	}
}

// TestAdaptHashesKeys pins the JSON the global option adapts to: the key,
// from a literal or a placeholder, is stored only as its SHA-256.
func TestAdaptHashesKeys(t *testing.T) {
	t.Setenv("OPERATE_TEAM_A_KEY", teamAKey)
	caddytest.AssertAdapt(t, `{
	llm_transform {
		key_sources authorization x-team-key
		rule field_set {
			path service_tier
			value flex
		}
		api_key {env.OPERATE_TEAM_A_KEY} {
			rule field_set {
				path reasoning.effort
				value high
			}
		}
		api_key `+teamBKey+` {
		}
	}
}
`, "caddyfile", `{
	"apps": {
		"llm_transform": {
			"rules": [
				{
					"transform": "field_set",
					"config": {
						"path": "service_tier",
						"value": "flex"
					}
				}
			],
			"api_keys": [
				{
					"key_sha256": "`+teamAHash+`",
					"rules": [
						{
							"transform": "field_set",
							"config": {
								"path": "reasoning.effort",
								"value": "high"
							}
						}
					]
				},
				{
					"key_sha256": "`+teamBHash+`"
				}
			],
			"key_sources": [
				"authorization",
				"x-team-key"
			]
		}
	}
}`)
}
