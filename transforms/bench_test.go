package transforms

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// codexLikeRequest builds a Responses request around the real Codex turn-1
// body, with history items appended until it reaches size bytes: messages,
// encrypted reasoning, apply_patch custom calls and their outputs, and
// exec_command function calls with long outputs. Items keep Codex's key
// order (type first).
func codexLikeRequest(tb testing.TB, size int) ([]byte, int) {
	tb.Helper()
	raw, err := os.ReadFile("testdata/codex-request.json")
	if err != nil {
		tb.Fatal(err)
	}
	compact := gjson.ParseBytes(raw).Get("@ugly").Raw
	inputEnd := gjson.Get(compact, "input").Index + len(gjson.Get(compact, "input").Raw) - 1 // the closing ]
	patch := jstr("*** Begin Patch\n*** Update File: src/app.py\n@@ def greet():\n-print(\"Hi\")\n+print(\"Hello, world! é 🦀\")\n*** End Patch\n")
	output := jstr(strings.Repeat("Chunk ID: 1\nOutput:\nREADME.md\nsrc/app.py \"quoted\" \\ path\n", 40))
	var hist strings.Builder
	items := 0
	for i := 0; len(compact)+hist.Len() < size; i++ {
		id := fmt.Sprintf("call_%d", i)
		fmt.Fprintf(&hist, `,{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Working on step %s"}]}`, id)
		fmt.Fprintf(&hist, `,{"type":"reasoning","summary":[],"encrypted_content":"%s"}`, strings.Repeat("gAAAAB", 200))
		fmt.Fprintf(&hist, `,{"type":"custom_tool_call","id":"ctc_%s","status":"completed","call_id":"%s","name":"apply_patch","input":%s}`, id, id, patch)
		fmt.Fprintf(&hist, `,{"type":"custom_tool_call_output","id":"ctco_%s","call_id":"%s","output":"Success. Updated the following files:\nM src/app.py\n"}`, id, id)
		fmt.Fprintf(&hist, `,{"type":"function_call","call_id":"%sx","name":"exec_command","arguments":"{\"cmd\":\"ls -la\"}"}`, id)
		fmt.Fprintf(&hist, `,{"type":"function_call_output","call_id":"%sx","output":%s}`, id, output)
		items += 6
	}
	doc := []byte(compact[:inputEnd] + hist.String() + compact[inputEnd:])
	if !json.Valid(doc) {
		tb.Fatal("generated request is not JSON")
	}
	return doc, items
}

func BenchmarkRequestRewrite(b *testing.B) {
	doc, items := codexLikeRequest(b, 1<<20)
	c := chainOf(b, `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`)
	// What the handler does per request: validate, read the model, rewrite.
	rewrite := func() []byte {
		if !gjson.ValidBytes(doc) {
			b.Fatal("invalid")
		}
		x := NewExchange(ProtocolResponses, Limits{}, nil)
		c.Begin(x, gjson.GetBytes(doc, "model").String())
		out, err := x.RewriteRequest(doc)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	if out := rewrite(); strings.Contains(string(out), `"custom_tool_call"`) {
		b.Fatal("rewrite left custom calls behind")
	}
	roundTrip := func() {
		var v any
		if err := json.Unmarshal(doc, &v); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
	// Baselines and subject are timed in the same loop so machine noise hits
	// all of them alike; ns/op is their sum and not meant to be read alone.
	var tValid, tRewrite, tJSON time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		gjson.ValidBytes(doc)
		t1 := time.Now()
		rewrite()
		t2 := time.Now()
		if i%8 == 0 { // the slow baseline is sampled, then scaled
			roundTrip()
			tJSON += 8 * time.Since(t2)
		}
		tValid += t1.Sub(t0)
		tRewrite += t2.Sub(t1)
	}
	b.ReportMetric(float64(tRewrite)/float64(tValid), "x_validate")
	b.ReportMetric(float64(tJSON)/float64(tRewrite), "encoding_json_x_slower")
	mb := float64(len(doc)) * float64(b.N) / 1e6
	b.ReportMetric(mb/tRewrite.Seconds(), "rewrite_MB/s")
	b.ReportMetric(mb/tValid.Seconds(), "validate_MB/s")
	b.ReportMetric(float64(len(doc))/1e6, "MB_doc")
	b.ReportMetric(float64(items), "history_items")
}

func BenchmarkRewriteOnly(b *testing.B) {
	doc, _ := codexLikeRequest(b, 1<<20)
	c := chainOf(b, `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		x := NewExchange(ProtocolResponses, Limits{}, nil)
		c.Begin(x, "m")
		if _, err := x.RewriteRequest(doc); err != nil {
			b.Fatal(err)
		}
	}
}
