//go:build unix

package integration

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// TestCodexAppliesPatchThroughToolsPlan runs a real Codex (gpt-5.5) patch
// turn through Caddy with `rule tools_plan { profile function_only }`
// alone, in front of an upstream that refuses every non-function tool type
// and every name outside ^[a-zA-Z0-9_-]{1,64}$. Codex sends its freeform
// apply_patch, a client tool_search and web_search; the upstream must see
// functions only (apply_patch and tool_search degraded, web_search
// dropped), and Codex must apply the patch the upstream's function call
// carries.
func TestCodexAppliesPatchThroughToolsPlan(t *testing.T) {
	codexBinary(t)
	demo := &fakeprovider.Provider{Strict: true}
	startGateway(t, functionOnlyRule, serveUpstream(t, demo))
	// Codex talks to the gateway through a recorder, so the test sees what
	// Codex itself sent.
	gw, err := url.Parse(gatewayURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(gw)
	proxy.FlushInterval = -1
	tap := &headerRecorder{next: proxy}
	srv := httptest.NewServer(tap)
	defer srv.Close()

	workdir := t.TempDir()
	stdout, stderr, err := runCodex(t, srv.URL+"/v1", workdir, codexPrompt)
	assertCodexApplied(t, workdir, stdout, stderr, err)

	sent, reqs := tap.requestBodies(), demo.Requests()
	if len(sent) != 2 || len(reqs) != 2 {
		t.Fatalf("Codex sent %d requests and the upstream received %d, want 2 each (patch turn, answer turn)", len(sent), len(reqs))
	}
	// Without the plan, the upstream refuses what Codex sent.
	rec := httptest.NewRecorder()
	(&fakeprovider.Provider{Strict: true}).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/responses", bytes.NewReader(sent[0])))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("the strict upstream took Codex's own request: %d %s", rec.Code, rec.Body)
	}
	for turn := range 2 {
		client, upstream := gjson.ParseBytes(sent[turn]), gjson.ParseBytes(reqs[turn])
		// What Codex sent: the tools this test is about are there.
		search := client.Get(`tools.#(type=="tool_search")`)
		if search.Get("execution").String() != "client" || !client.Get(`tools.#(type=="web_search")`).Exists() ||
			client.Get(`tools.#(name=="apply_patch").type`).String() != "custom" {
			t.Fatalf("turn %d: Codex did not send a custom apply_patch, a client tool_search and web_search: %q", turn+1, toolSignature(client.Get("tools")))
		}
		// What the upstream got: Codex's tools in order, each a function
		// under a name the upstream takes; web_search gone, tool_search a
		// function with Codex's own parameters, apply_patch one taking
		// {"input"}.
		var want, got []string
		for _, tool := range client.Get("tools").Array() {
			switch typ := tool.Get("type").String(); typ {
			case "web_search":
			case "tool_search":
				want = append(want, "function:tool_search")
			default:
				want = append(want, "function:"+tool.Get("name").String())
			}
		}
		for _, tool := range upstream.Get("tools").Array() {
			name := tool.Get("name").String()
			got = append(got, tool.Get("type").String()+":"+name)
			if !upstreamName.MatchString(name) {
				t.Errorf("turn %d: upstream name %q breaks its rule", turn+1, name)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("turn %d: upstream tools\n got %q\nwant %q", turn+1, got, want)
		}
		if up := upstream.Get(`tools.#(name=="tool_search")`); up.Get("parameters").Raw != search.Get("parameters").Raw {
			t.Errorf("turn %d: tool_search went upstream as %s, want Codex's parameters %s", turn+1, up.Raw, search.Get("parameters").Raw)
		}
		if ap := upstream.Get(`tools.#(name=="apply_patch")`); ap.Get("parameters.required.0").String() != "input" || ap.Get("format").Exists() {
			t.Errorf("turn %d: apply_patch went upstream as %s", turn+1, ap.Raw)
		}
		if c := upstream.Get("tool_choice"); c.String() != "auto" {
			t.Errorf("turn %d: tool_choice %s", turn+1, c.Raw)
		}
	}
	assertCodexTurn2(t, reqs[1])
}
