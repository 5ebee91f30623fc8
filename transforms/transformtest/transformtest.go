// Package transformtest holds the helpers a transform's tests need: build
// a chain from rule JSON, bind it to an exchange, replay an upstream stream
// through it at several chunk sizes (and with the engine's claims of delta
// runs off, which must change nothing), build Responses and Chat streams,
// and compare JSON. The transforms of this module are tested with it, and
// a transform in another module can be tested the same way.
package transformtest

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// ChunkSizes are the sizes ReplayAll feeds a stream in: one byte at a
// time, a small odd size that cuts events and escapes anywhere, and a
// size that holds many events.
var ChunkSizes = []int{1, 7, 4096}

// Context is a Caddy context for loading transform modules, cancelled (and
// its modules cleaned up) when the test ends.
func Context(t testing.TB) caddy.Context {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	return ctx
}

// Chain compiles provider rules from a JSON array of rule objects, as a
// handler's "rules" holds them. The transforms must be registered (import
// their packages, or transforms/all).
func Chain(t testing.TB, rulesJSON string) *transforms.Chain {
	t.Helper()
	var cfgs []transforms.RuleConfig
	if err := json.Unmarshal([]byte(rulesJSON), &cfgs); err != nil {
		t.Fatalf("rules: %v", err)
	}
	rules, err := transforms.Compile(Context(t), cfgs, transforms.ScopeProvider, "")
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return transforms.NewChain(rules)
}

// Begin binds a chain to a fresh exchange for body, with the body's model.
func Begin(t testing.TB, c *transforms.Chain, p transforms.Protocol, body []byte) *transforms.Exchange {
	t.Helper()
	x := transforms.NewExchange(p, transforms.Limits{MaxCallBuffer: 1 << 20, MaxEvent: 1 << 24}, nil)
	var m struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &m)
	c.Begin(x, m.Model)
	return x
}

// ExchangeAfter runs a Responses request through the rules' request phases
// and returns the exchange, ready for the response.
func ExchangeAfter(t testing.TB, rules, request string) *transforms.Exchange {
	t.Helper()
	return after(t, rules, transforms.ProtocolResponses, request)
}

// ChatExchange is ExchangeAfter for a Chat Completions request.
func ChatExchange(t testing.TB, rules, request string) *transforms.Exchange {
	t.Helper()
	return after(t, rules, transforms.ProtocolChat, request)
}

func after(t testing.TB, rules string, p transforms.Protocol, request string) *transforms.Exchange {
	t.Helper()
	x := Begin(t, Chain(t, rules), p, []byte(request))
	if _, err := x.RewriteRequest([]byte(request)); err != nil {
		t.Fatal(err)
	}
	return x
}

// JSONEqual compares two JSON documents structurally.
func JSONEqual(t testing.TB, got []byte, want string) {
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

// Replay feeds an SSE body through the exchange's stream in chunks of n
// bytes and returns everything the client would receive.
func Replay(t testing.TB, x *transforms.Exchange, body string, n int) string {
	t.Helper()
	return ReplayClaims(t, x, body, n, true)
}

// ReplayClaims is Replay with the engine's claims of delta runs on or off
// (see transforms.Stream.DisableClaims).
func ReplayClaims(t testing.TB, x *transforms.Exchange, body string, n int, claims bool) string {
	t.Helper()
	s := x.NewStream()
	if s == nil {
		return body
	}
	if !claims {
		s.DisableClaims()
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

// ReplayAll runs upstream through a fresh exchange per chunk size, and
// once more with the claims off, requires the same output every time, and
// returns it.
func ReplayAll(t testing.TB, fresh func() *transforms.Exchange, upstream string) string {
	t.Helper()
	var first string
	for i, n := range ChunkSizes {
		got := Replay(t, fresh(), upstream, n)
		if general := ReplayClaims(t, fresh(), upstream, n, false); general != got {
			t.Fatalf("chunk size %d: claimed deltas changed the output:\n%s\n--- without claims:\n%s", n, got, general)
		}
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("chunk size %d changed the output:\n%s\n--- vs size 1:\n%s", n, got, first)
		}
	}
	return first
}

// StreamCase runs a Responses request through the rules, then replays
// upstream with ReplayAll.
func StreamCase(t testing.TB, rules, request, upstream string) string {
	t.Helper()
	return ReplayAll(t, func() *transforms.Exchange { return ExchangeAfter(t, rules, request) }, upstream)
}

// ChatCase is StreamCase for a Chat Completions request and stream.
func ChatCase(t testing.TB, rules, request, upstream string) string {
	t.Helper()
	return ReplayAll(t, func() *transforms.Exchange { return ChatExchange(t, rules, request) }, upstream)
}

// SSE builds a stream from data payloads, each framed with an event line
// holding its type, as OpenAI frames Responses streams.
func SSE(events ...string) string {
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

// ChatSSE builds a Chat Completions stream from chunks, ended by [DONE].
func ChatSSE(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// Events parses a client-side Responses stream into its data payloads, and
// fails the test unless sequence numbers run 0, 1, 2… without a gap.
func Events(t testing.TB, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, block := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		d, ok := eventData(block)
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("bad data %q: %v", d, err)
		}
		out = append(out, m)
	}
	for i, e := range out {
		if n, ok := e["sequence_number"].(float64); ok && int(n) != i {
			t.Fatalf("event %d has sequence_number %v", i, n)
		}
	}
	return out
}

// ChatChunks parses a client-side Chat stream, reporting whether it ended
// with [DONE].
func ChatChunks(t testing.TB, s string) (chunks []map[string]any, done bool) {
	t.Helper()
	for _, block := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		d, ok := eventData(block)
		if !ok || strings.HasPrefix(block, "event:") {
			t.Fatalf("unexpected block %q", block)
		}
		if d == "[DONE]" {
			done = true
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("bad chunk %q: %v", d, err)
		}
		chunks = append(chunks, m)
	}
	return chunks, done
}

// ConcatDeltas joins the "delta" of every event of type typ.
func ConcatDeltas(evs []map[string]any, typ string) string {
	var b strings.Builder
	for _, e := range evs {
		if e["type"] == typ {
			b.WriteString(e["delta"].(string))
		}
	}
	return b.String()
}

// FunctionCallStream renders an upstream Responses function call, numbered
// from seq0, whose arguments text is sent n runes per delta, split
// anywhere (inside escapes too); withDone adds the arguments' done event.
func FunctionCallStream(seq0, outputIndex int, itemID, callID, name, args string, n int, withDone bool) []string {
	var evs []string
	seq := seq0
	add := func(s string) { evs = append(evs, s); seq++ }
	item := func(status, a string) string {
		return `{"id":` + JSONString(itemID) + `,"type":"function_call","status":"` + status + `","arguments":` + JSONString(a) + `,"call_id":` + JSONString(callID) + `,"name":` + JSONString(name) + `}`
	}
	oi := JSONString(itemID)
	add(`{"type":"response.output_item.added","sequence_number":` + Itoa(seq) + `,"output_index":` + Itoa(outputIndex) + `,"item":` + item("in_progress", "") + `}`)
	// Upstreams split the argument text anywhere, escapes included; only
	// rune boundaries hold, because each piece travels as a JSON string.
	rs := []rune(args)
	for len(rs) > 0 && n > 0 {
		k := min(n, len(rs))
		add(`{"type":"response.function_call_arguments.delta","sequence_number":` + Itoa(seq) + `,"item_id":` + oi + `,"output_index":` + Itoa(outputIndex) + `,"delta":` + JSONString(string(rs[:k])) + `,"obfuscation":"pad"}`)
		rs = rs[k:]
	}
	if withDone {
		add(`{"type":"response.function_call_arguments.done","sequence_number":` + Itoa(seq) + `,"item_id":` + oi + `,"output_index":` + Itoa(outputIndex) + `,"arguments":` + JSONString(args) + `}`)
	}
	add(`{"type":"response.output_item.done","sequence_number":` + Itoa(seq) + `,"output_index":` + Itoa(outputIndex) + `,"item":` + item("completed", args) + `}`)
	return evs
}

// JSONString is s as a JSON string literal.
func JSONString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Itoa is i as a JSON number.
func Itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// eventData is the data of one SSE event block: its data lines joined by
// newlines, as the SSE grammar reads an event split over several lines.
func eventData(block string) (string, bool) {
	var data []string
	for _, line := range strings.Split(block, "\n") {
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(d, " "))
		}
	}
	return strings.Join(data, "\n"), data != nil
}
