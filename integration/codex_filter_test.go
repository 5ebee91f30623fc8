//go:build unix

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// filterChainRules is tools_filter, then tools_plan, then
// tools_normalize_schema, in the order the README prescribes.
const filterChainRules = `		rule tools_filter {
			deny web_search view_image
		}
		rule tools_plan {
			profile function_only
		}
		rule tools_normalize_schema {
			dialect gemini
		}`

// filterDenied are the tools the chain's tools_filter denies; the guard
// refuses any request that still carries one.
var filterDenied = []string{"web_search", "view_image"}

// filterGuard stands before a fakeprovider.Provider: it refuses, with a
// 400 in OpenAI's error shape, a request carrying a tool named (or typed)
// web_search or view_image, or a function whose parameters Gemini would
// refuse (fakeprovider.CheckToolSchema, gemini dialect), and hands the rest
// on to next, whose own strict checks then apply. It records the refusals
// it wrote.
type filterGuard struct {
	next http.Handler

	mu       sync.Mutex
	refusals []string
}

func (g *filterGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := gjson.ParseBytes(body)
	param, msg := guardTools(req.Get("tools"), "tools")
	for i, item := range req.Get("input").Array() {
		if msg != "" {
			break
		}
		if item.Get("type").String() == "additional_tools" {
			param, msg = guardTools(item.Get("tools"), "input["+strconv.Itoa(i)+"].tools")
		}
	}
	if msg != "" {
		g.mu.Lock()
		g.refusals = append(g.refusals, param+": "+msg)
		g.mu.Unlock()
		out, _ := json.Marshal(map[string]any{"error": map[string]any{
			"message": msg, "type": "invalid_request_error", "param": param, "code": nil,
		}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(append(out, '\n'))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	g.next.ServeHTTP(w, r)
}

// guardTools returns the path and text of the first refusal filterGuard
// makes of a Responses tools array (namespaces included), or "" for none.
func guardTools(tools gjson.Result, path string) (param, msg string) {
	fnIndex := 0
	for i, tool := range tools.Array() {
		p := path + "[" + strconv.Itoa(i) + "]"
		typ, name := tool.Get("type").String(), tool.Get("name").String()
		for _, denied := range filterDenied {
			if name == denied || typ == denied {
				return p, fmt.Sprintf("Tool %q (type %q) is not served by this upstream.", denied, typ)
			}
		}
		switch typ {
		case "namespace":
			if param, msg := guardTools(tool.Get("tools"), p+".tools"); msg != "" {
				return param, msg
			}
		case "function":
			var strict *bool
			if s := tool.Get("strict"); s.IsBool() {
				b := s.Bool()
				strict = &b
			}
			if f := fakeprovider.CheckToolSchema(fakeprovider.DialectGemini, fnIndex, name, []byte(tool.Get("parameters").Raw), strict); len(f) > 0 {
				return p + ".parameters", strings.Join(f, "\n")
			}
			fnIndex++
		}
	}
	return "", ""
}

// tappedGateway is the gateway's base URL behind a recorder, so a test
// sees what Codex itself sent.
func tappedGateway(t *testing.T) (*headerRecorder, string) {
	t.Helper()
	gw, err := url.Parse(gatewayURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(gw)
	proxy.FlushInterval = -1
	tap := &headerRecorder{next: proxy}
	srv := httptest.NewServer(tap)
	t.Cleanup(srv.Close)
	return tap, srv.URL + "/v1"
}

// TestCodexFilterChain runs a real Codex through Caddy twice.
//
// "deny, plan, gemini schemas": tools_filter denies web_search and
// view_image, tools_plan makes everything left a function, and
// tools_normalize_schema writes every schema as Gemini takes it, in front of
// a strict upstream that refuses a denied tool or a schema Gemini refuses
// before its own function-only checks. Codex must apply the scripted patch,
// and both turns must reach the upstream with the allowed tools only, each a
// function whose schema passes, apply_patch among them. Codex's recorded
// turn-1 request, replayed to the upstream directly and through the chain
// without tools_filter or without tools_normalize_schema, is refused.
//
// "function calling off": tools_filter { function_calling off } alone in
// front of a model without tools. Codex's request (tools, developer and user
// messages) must reach it without any tool member, and Codex must print the
// model's plain text and exit 0.
func TestCodexFilterChain(t *testing.T) {
	codexBinary(t)

	t.Run("deny, plan, gemini schemas", func(t *testing.T) {
		guard := &filterGuard{next: &fakeprovider.Provider{Strict: true}}
		upstream := &headerRecorder{next: guard}
		startGateway(t, filterChainRules, serveUpstream(t, upstream))
		tap, base := tappedGateway(t)

		workdir := t.TempDir()
		stdout, stderr, err := runCodex(t, base, workdir, codexPrompt)
		guard.mu.Lock()
		refusals := append([]string(nil), guard.refusals...)
		guard.mu.Unlock()
		if len(refusals) > 0 {
			t.Errorf("the upstream refused %d request(s):\n%s", len(refusals), strings.Join(refusals, "\n"))
		}
		assertCodexApplied(t, workdir, stdout, stderr, err)

		sent, reqs := tap.requestBodies(), upstream.requestBodies()
		if len(sent) != 2 || len(reqs) != 2 {
			t.Fatalf("Codex sent %d requests and the upstream received %d, want 2 each (patch turn, answer turn)", len(sent), len(reqs))
		}
		for turn := range 2 {
			client, got := gjson.ParseBytes(sent[turn]), gjson.ParseBytes(reqs[turn])
			// Codex did send what the filter is there to take out, and
			// a custom apply_patch for tools_plan to turn into a function.
			if !client.Get(`tools.#(type=="web_search")`).Exists() || !client.Get(`tools.#(name=="view_image")`).Exists() ||
				client.Get(`tools.#(name=="apply_patch").type`).String() != "custom" {
				t.Fatalf("turn %d: Codex sent no web_search, view_image or custom apply_patch: %q", turn+1, toolSignature(client.Get("tools")))
			}
			// The upstream got Codex's other tools, in order, as
			// functions.
			var want, have []string
			for _, tool := range client.Get("tools").Array() {
				switch typ, name := tool.Get("type").String(), tool.Get("name").String(); {
				case typ == "web_search", name == "view_image":
				case typ == "tool_search":
					want = append(want, "function:tool_search")
				default:
					want = append(want, "function:"+name)
				}
			}
			for i, tool := range got.Get("tools").Array() {
				name := tool.Get("name").String()
				have = append(have, tool.Get("type").String()+":"+name)
				for _, denied := range filterDenied {
					if name == denied || tool.Get("type").String() == denied {
						t.Errorf("turn %d: %s reached the upstream: %s", turn+1, denied, tool.Raw)
					}
				}
				if f := fakeprovider.CheckToolSchema(fakeprovider.DialectGemini, i, name, []byte(tool.Get("parameters").Raw), nil); len(f) > 0 {
					t.Errorf("turn %d: %s breaks Gemini's rules: %q", turn+1, name, f)
				}
				if tool.Get("strict").Exists() {
					t.Errorf("turn %d: %s keeps strict (the gemini dialect removes it): %s", turn+1, name, tool.Raw)
				}
			}
			if !reflect.DeepEqual(have, want) {
				t.Errorf("turn %d: upstream tools\n got %q\nwant %q", turn+1, have, want)
			}
			if ap := got.Get(`tools.#(name=="apply_patch")`); ap.Get("type").String() != "function" ||
				ap.Get("parameters.required.0").String() != "input" || ap.Get("format").Exists() {
				t.Errorf("turn %d: apply_patch went upstream as %s", turn+1, ap.Raw)
			}
		}
		assertCodexTurn2(t, reqs[1])

		// Each rule of the chain is needed: Codex's own turn-1 request,
		// replayed through the chain without one of them, is refused.
		addr := serveUpstream(t, guard)
		for _, tc := range []struct {
			name, rules, mentions string
		}{
			{"no gateway", "", "additionalProperties"},
			{"without tools_filter", `		rule tools_plan {
			profile function_only
		}
		rule tools_normalize_schema {
			dialect gemini
		}`, "view_image"},
			{"without tools_normalize_schema", `		rule tools_filter {
			deny web_search view_image
		}
		rule tools_plan {
			profile function_only
		}`, "additionalProperties"},
		} {
			var status int
			var body []byte
			if tc.rules == "" {
				rec := httptest.NewRecorder()
				guard.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/responses", bytes.NewReader(sent[0])))
				status, body = rec.Code, rec.Body.Bytes()
			} else {
				startGateway(t, tc.rules, addr)
				status, _, body = filterPost(t, "/v1/responses", string(sent[0]))
			}
			e := gjson.GetBytes(body, "error")
			if status != http.StatusBadRequest || e.Get("type").String() != "invalid_request_error" ||
				!strings.HasPrefix(e.Get("param").String(), "tools[") || !strings.Contains(e.Get("message").String(), tc.mentions) {
				t.Errorf("%s: %d %s, want the guard's 400 on tools mentioning %s", tc.name, status, body, tc.mentions)
			}
		}
	})

	t.Run("function calling off", func(t *testing.T) {
		model := &fakeprovider.Provider{NoTools: true}
		startGateway(t, `		rule tools_filter {
			function_calling off
		}`, serveUpstream(t, model))
		tap, base := tappedGateway(t)

		workdir := t.TempDir()
		stdout, stderr, err := runCodex(t, base, workdir, codexPrompt)
		if err != nil {
			t.Fatalf("codex failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}

		sent, reqs := tap.requestBodies(), model.Requests()
		if len(sent) != 1 || len(reqs) != 1 {
			t.Fatalf("Codex sent %d requests and the upstream received %d, want 1 each", len(sent), len(reqs))
		}
		client, got := gjson.ParseBytes(sent[0]), gjson.ParseBytes(reqs[0])
		if len(client.Get("tools").Array()) == 0 || !client.Get("tool_choice").Exists() || len(client.Get("input").Array()) < 2 {
			t.Fatalf("Codex sent no tools or no history: tools %q, input %d items", toolSignature(client.Get("tools")), len(client.Get("input").Array()))
		}
		for _, m := range []string{"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"} {
			if got.Get(m).Exists() {
				t.Errorf("upstream got %s: %s", m, got.Get(m).Raw)
			}
		}
		// Without tool calls in the history, the input passes byte for
		// byte, and so do the other members.
		if got.Get("input").Raw != client.Get("input").Raw {
			t.Errorf("input changed:\n got %s\nsent %s", got.Get("input").Raw, client.Get("input").Raw)
		}
		for _, m := range []string{"model", "stream", "instructions", "reasoning", "store", "include", "prompt_cache_key", "text"} {
			if got.Get(m).Raw != client.Get(m).Raw {
				t.Errorf("%s: upstream got %s, Codex sent %s", m, got.Get(m).Raw, client.Get(m).Raw)
			}
		}
		// The model counts the messages it read; Codex prints its answer.
		messages := 0
		for _, item := range got.Get("input").Array() {
			if typ := item.Get("type").String(); typ == "" || typ == "message" {
				messages++
			}
		}
		answer := fmt.Sprintf("I cannot call tools, so here is plain text: I read %d input messages.", messages)
		if !strings.Contains(stdout, answer) {
			t.Errorf("codex did not print %q\nstdout:\n%s\nstderr:\n%s", answer, stdout, stderr)
		}
	})
}
