package caddymodule

import (
	"crypto/sha256"
	"net/http"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestCallerKey(t *testing.T) {
	sources := []string{"Authorization", "X-Api-Key"}
	for _, tc := range []struct {
		headers map[string]string
		want    string
		ok      bool
	}{
		{map[string]string{"Authorization": "Bearer sk-1"}, "sk-1", true},
		{map[string]string{"Authorization": "bearer  sk-1 "}, "sk-1", true},
		{map[string]string{"Authorization": "Basic c2stMQ=="}, "", true},
		{map[string]string{"Authorization": "Basic c2stMQ==", "X-Api-Key": "sk-2"}, "", false},
		{map[string]string{"Authorization": "Bearer sk-1", "X-Api-Key": "sk-2"}, "", false},
		{map[string]string{"Authorization": "Bearer sk-1", "X-Api-Key": "sk-1"}, "sk-1", true},
		{map[string]string{"Authorization": "Bearer "}, "", true},
		{map[string]string{"X-Other": "sk-3"}, "", true},
	} {
		r, _ := http.NewRequest(http.MethodPost, "/", nil)
		for k, v := range tc.headers {
			r.Header.Set(k, v)
		}
		if got, ok := callerKey(r, sources); got != tc.want || ok != tc.ok {
			t.Errorf("%v: got %q %v, want %q %v", tc.headers, got, ok, tc.want, tc.ok)
		}
	}
}

func TestMatchKey(t *testing.T) {
	keys := []keyChain{{sum: sha256.Sum256([]byte("a"))}, {sum: sha256.Sum256([]byte("b"))}}
	for key, want := range map[string]int{"a": 0, "b": 1, "c": -1, "": -1} {
		sum := sha256.Sum256([]byte(key))
		if got := matchKey(keys, &sum); got != want {
			t.Errorf("%q: got %d, want %d", key, got, want)
		}
	}
}

func TestCaddyfileExplainAndJSONOption(t *testing.T) {
	var h Handler
	d := caddyfile.NewTestDispenser(`llm_transform {
		explain
		rule field_set {
			path reasoning.effort
			value high
		}
		rule field_set {
			path max_output_tokens
			value 2048
		}
	}`)
	if err := h.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if !h.Explain || string(h.Rules[0].Config) != `{"path":"reasoning.effort","value":"high"}` ||
		string(h.Rules[1].Config) != `{"path":"max_output_tokens","value":2048}` {
		t.Fatalf("explain %v, rules %s %s", h.Explain, h.Rules[0].Config, h.Rules[1].Config)
	}
	h = Handler{}
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_transform {\n explain false\n}")); err != nil || h.Explain {
		t.Fatalf("explain false: %v %v", h.Explain, err)
	}
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_transform {\n explain maybe\n}")); err == nil {
		t.Fatal("explain maybe was accepted")
	}
}

func TestExplainHeaderIsSafe(t *testing.T) {
	var b []byte
	b = appendHeaderSafe(b, "ns/tool name\r\n;,=é")
	if string(b) != "ns/tool%20name%0D%0A%3B%2C%3D%C3%A9" {
		t.Fatalf("got %s", b)
	}
}
