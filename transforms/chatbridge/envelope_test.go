package chatbridge

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// An envelope gives back the profile and the exact text it sealed,
// escapes and all, and is smaller than the text it carries.
func TestEnvelopeRoundTrip(t *testing.T) {
	text := strings.Repeat("The user wants \"ls\" then `pwd`.\n\tÜnïcode ✓ </think>\u2028", 200)
	env := textEnvelopeOf("deepseek", []byte(text))
	if !strings.HasPrefix(env, "llmt2.") || len(env) >= len(text)/4 {
		t.Fatalf("envelope of %d bytes for %d bytes of text: %.40s…", len(env), len(text), env)
	}
	p, got, ok := openEnvelope(env, 1<<20)
	if !ok || p != "deepseek" || got != text {
		t.Fatalf("opened %v %q, %d bytes (want %d)", ok, p, len(got), len(text))
	}
}

// Opening stops at the limit: a small envelope that inflates to 64 MiB is
// refused after reading little more than the limit, as are envelopes that
// are not base64, not deflate or not the JSON the bridge writes.
func TestEnvelopeOpeningIsBounded(t *testing.T) {
	var buf bytes.Buffer
	b64 := base64.NewEncoder(base64.RawURLEncoding, &buf)
	fw, _ := flate.NewWriter(b64, flate.BestCompression)
	_, _ = fw.Write([]byte(`{"p":"deepseek","t":"`))
	zeros := make([]byte, 1<<20)
	for range 64 {
		_, _ = fw.Write(zeros)
	}
	_, _ = fw.Write([]byte(`"}`))
	_ = fw.Close()
	_ = b64.Close()
	bomb := "llmt2." + buf.String()
	if len(bomb) > 1<<20 {
		t.Fatalf("the bomb is %d bytes", len(bomb))
	}
	for name, env := range map[string]string{
		"bomb":        bomb,
		"not base64":  "llmt2.!!!",
		"not deflate": "llmt2.bm90IGRlZmxhdGU",
		"not json":    "llmt2." + strings.TrimPrefix(textEnvelopeOf("deepseek", nil), "llmt2.")[:4],
		"version 1":   "llmt1.eyJwIjoiZGVlcHNlZWsifQ",
	} {
		if p, text, ok := openEnvelope(env, 4<<20); ok {
			t.Errorf("%s: opened as %q with %d bytes", name, p, len(text))
		}
	}
}

// TestEnvelopesBoundedPerRequest: a deflated envelope of kilobytes opens
// to megabytes, and a request may carry any number: what a request's
// envelopes open to is bounded by a multiple of its size (plus one
// max_reasoning), the rest dropped with a decision.
func TestEnvelopesBoundedPerRequest(t *testing.T) {
	const maxReasoning, n = 100000, 50
	one := textEnvelopeOf("deepseek", []byte(strings.Repeat("a", maxReasoning)))
	items := []string{rcMsg("user", "q")}
	for i := 0; i < n; i++ {
		items = append(items, `{"type":"reasoning","summary":[],"encrypted_content":"`+one+`"}`, rcMsg("assistant", "ok"), rcMsg("user", "go"))
	}
	body := rcInput(items...)
	budget := 8*len(body) + maxReasoning
	if n*maxReasoning <= budget {
		t.Fatalf("the envelopes (%d bytes of text) fit the bound %d", n*maxReasoning, budget)
	}
	out, x, err := rcRequest(t, rcRules(`{"profile":"deepseek","max_reasoning":100000}`), body)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Messages []struct {
			Reasoning *string `json:"reasoning_content"`
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	sent, whole := 0, 0
	for _, m := range got.Messages {
		if m.Reasoning != nil {
			sent += len(*m.Reasoning)
			if len(*m.Reasoning) == maxReasoning {
				whole++
			}
		}
	}
	if sent > budget || whole == 0 || whole == n {
		t.Errorf("sent %d bytes of reasoning in %d whole items, bound %d", sent, whole, budget)
	}
	dropped := 0
	for _, d := range rcDecisions(x) {
		if d == "reasoning drop" {
			dropped++
		}
	}
	if dropped != n-whole {
		t.Errorf("%d drops for %d items left out", dropped, 300-whole)
	}
}
