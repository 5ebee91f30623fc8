package transforms

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// chainOf compiles provider rules from a JSON array of rule objects.
func chainOf(t testing.TB, rulesJSON string) *Chain {
	t.Helper()
	var cfgs []RuleConfig
	if err := json.Unmarshal([]byte(rulesJSON), &cfgs); err != nil {
		t.Fatalf("rules: %v", err)
	}
	rules, err := Compile(testContext(t), cfgs, ScopeProvider, "")
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return NewChain(rules)
}

// testContext is a Caddy context for loading transform modules, cancelled
// (and its modules cleaned up) when the test ends.
func testContext(t testing.TB) caddy.Context {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return ctx
}

// begin binds a chain to a fresh exchange for body.
func begin(t testing.TB, c *Chain, p Protocol, body []byte) *Exchange {
	t.Helper()
	x := NewExchange(p, Limits{MaxCallBuffer: 1 << 20, MaxEvent: 1 << 24}, nil)
	var m struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &m)
	c.Begin(x, m.Model)
	return x
}

// jsonEqual compares two JSON documents structurally.
func jsonEqual(t testing.TB, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("expectation is not JSON: %v\n%s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", " ")
		wi, _ := json.MarshalIndent(w, "", " ")
		t.Fatalf("JSON mismatch\n--- got\n%s\n--- want\n%s", gi, wi)
	}
}

// replay feeds an SSE body through the exchange's stream in chunks of n
// bytes and returns everything the client would receive.
func replay(t testing.TB, x *Exchange, body string, n int) string {
	t.Helper()
	return replayClaims(t, x, body, n, true)
}

// replayClaims is replay, with or without the parser offering events to
// Stream.claim: with the claims off, every event takes the general way.
func replayClaims(t testing.TB, x *Exchange, body string, n int, claims bool) string {
	t.Helper()
	s := x.NewStream()
	if s == nil {
		return body
	}
	if !claims {
		s.parser.Claim = nil
	}
	var out bytes.Buffer
	b := []byte(body)
	for len(b) > 0 {
		k := min(n, len(b))
		_ = s.Write(b[:k])
		out.Write(s.Output())
		b = b[k:]
	}
	_ = s.Close()
	out.Write(s.Output())
	return out.String()
}

// sse builds a stream from data payloads, each framed with an event line
// holding its type, as OpenAI frames Responses streams.
func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		var v struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(e), &v); err == nil && v.Type != "" {
			b.WriteString("event: " + v.Type + "\n")
		}
		b.WriteString("data: " + e + "\n\n")
	}
	return b.String()
}
