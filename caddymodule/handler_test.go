package caddymodule

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
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

func sumOf(key string) [sha256.Size]byte { return sha256.Sum256([]byte(key)) }

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

// max_json_depth lowers the nesting the rules read: a body nested deeper
// is refused before any rule, naming the limit and where it was passed;
// one within it goes through. The Caddyfile sets it, and Validate refuses
// a value past the scanner's own limit.
func TestMaxJSONDepthRefusesDeeperBodies(t *testing.T) {
	var parsed Handler
	if err := parsed.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_transform {\nmax_json_depth 4\n}")); err != nil || parsed.MaxJSONDepth != 4 {
		t.Fatalf("parsed %d, %v", parsed.MaxJSONDepth, err)
	}
	h := provisioned(t, &Handler{MaxJSONDepth: 4, Rules: []transforms.RuleConfig{{
		Transform: "field_custom_tools_to_function",
		Config:    []byte(`{"names":["*"]}`),
	}}})
	deep := `{"model":"m","input":[{"content":[{"x":[1]}]}]}`
	rec := serve(t, h, deep, func(w http.ResponseWriter, r *http.Request) error {
		t.Error("the request reached the upstream")
		return nil
	})
	want := `{"error":{"message":"the request body is not JSON the gateway reads: nested deeper than 4 levels at byte offset 34","type":"invalid_request_error","param":null,"code":"invalid_json"}}`
	if rec.Code != http.StatusBadRequest || rec.Body.String() != want {
		t.Fatalf("%d %s\nwant 400 %s", rec.Code, rec.Body, want)
	}
	within := `{"model":"m","input":[{"content":[1]}]}`
	called := false
	serve(t, h, within, func(w http.ResponseWriter, r *http.Request) error {
		called = true
		return nil
	})
	if !called {
		t.Fatal("a body within the limit did not reach the upstream")
	}
	for _, n := range []int{-1, 1001} {
		if err := (&Handler{MaxJSONDepth: n}).Validate(); err == nil || !strings.Contains(err.Error(), "max_json_depth must be between 1 and 1000") {
			t.Errorf("%d: %v", n, err)
		}
	}
}
