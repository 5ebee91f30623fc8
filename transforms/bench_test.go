package transforms_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/streambuf"
)

func BenchmarkRequestRewrite(b *testing.B) {
	doc, items := transformtest.CodexLikeRequest(b, 1<<20)
	c := transformtest.Chain(b, `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`)
	// What the handler does per request: read the model, then rewrite;
	// the rewrite validates the whole body in the same pass.
	rewrite := func() []byte {
		x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
		c.Begin(x, gjson.GetBytes(doc, "model").String())
		out, err := x.RewriteRequest(doc)
		if err != nil || x.Unreadable() {
			b.Fatal(err)
		}
		n := len(out)
		x.Release() // as the handler does once the upstream has the body
		return out[:n]
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
	// The baselines and the subject run in the same benchmark. Validation
	// and rewrite alternate, so load on the machine hits both alike; the
	// encoding/json baseline runs last, after a GC, so its garbage does not
	// slow the other two. ns/op is the sum and not meant to be read alone.
	var tValid, tRewrite time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		gjson.ValidBytes(doc)
		t1 := time.Now()
		rewrite()
		tValid += t1.Sub(t0)
		tRewrite += time.Since(t1)
	}
	runtime.GC()
	t3 := time.Now()
	jsonRuns := max(b.N/4, 1)
	for i := 0; i < jsonRuns; i++ {
		roundTrip()
	}
	tJSON := time.Since(t3) * time.Duration(b.N) / time.Duration(jsonRuns)
	b.ReportMetric(float64(tRewrite)/float64(tValid), "x_validate")
	b.ReportMetric(float64(tJSON)/float64(tRewrite), "encoding_json_x_slower")
	mb := float64(len(doc)) * float64(b.N) / 1e6
	b.ReportMetric(mb/tRewrite.Seconds(), "rewrite_MB/s")
	b.ReportMetric(mb/tValid.Seconds(), "validate_MB/s")
	b.ReportMetric(float64(len(doc))/1e6, "MB_doc")
	b.ReportMetric(float64(items), "history_items")
}

func BenchmarkRewriteOnly(b *testing.B) {
	doc, _ := transformtest.CodexLikeRequest(b, 1<<20)
	c := transformtest.Chain(b, `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
		c.Begin(x, "m")
		if _, err := x.RewriteRequest(doc); err != nil {
			b.Fatal(err)
		}
		x.Release()
	}
}

// benchStream renders a Responses stream of about n events: text deltas
// interleaved with apply_patch calls whose arguments arrive in small deltas.
func benchStream(n int) (string, int) {
	var evs []string
	seq := 0
	next := func() string { s := transformtest.Itoa(seq); seq++; return s }
	evs = append(evs, `{"type":"response.created","sequence_number":`+next()+`,"response":{"id":"r","status":"in_progress","output":[]}}`)
	patch := `{"input":"*** Begin Patch\n*** Update File: src/app.py\n@@ def greet():\n-print(\"Hi\")\n+print(\"Hello, world! é 🦀\")\n*** End Patch\n"}`
	oi := 0
	for len(evs) < n {
		for k := 0; k < 40; k++ {
			evs = append(evs, `{"type":"response.output_text.delta","sequence_number":`+next()+`,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"some streamed words ","logprobs":[],"obfuscation":"abcdefgh"}`)
		}
		oi++
		call := transformtest.FunctionCallStream(seq, oi, "fc_"+transformtest.Itoa(oi), "call_"+transformtest.Itoa(oi), "apply_patch", patch, 12, true)
		seq += len(call)
		evs = append(evs, call...)
	}
	evs = append(evs, `{"type":"response.completed","sequence_number":`+next()+`,"response":{"id":"r","status":"completed","output":[]}}`)
	return transformtest.SSE(evs...), len(evs)
}

// BenchmarkStreamPipeline measures the engine alone: the stream is written
// one event per Write, as reverse_proxy delivers it. The baseline is the
// SSE parser on the same bytes with every event passed through unchanged.
func BenchmarkStreamPipeline(b *testing.B) {
	body, nEvents := benchStream(10000)
	b.Run("openai", func(b *testing.B) { streamPipeline(b, body, nEvents) })
	// The same events with every object's keys sorted: "type" last.
	b.Run("sorted", func(b *testing.B) { streamPipeline(b, sortedSSE(b, body), nEvents) })
}

// sortedSSE rewrites each data line of an SSE body with its JSON's keys
// sorted at every level.
func sortedSSE(tb testing.TB, body string) string {
	var out strings.Builder
	for _, line := range strings.SplitAfter(body, "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || !strings.HasPrefix(d, "{") {
			out.WriteString(line)
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(d), &v); err != nil {
			tb.Fatal(err)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			tb.Fatal(err)
		}
		out.WriteString("data: ")
		out.Write(buf.Bytes()) // Encode ends it with the line's "\n"
	}
	return out.String()
}

func streamPipeline(b *testing.B, body string, nEvents int) {
	var chunks [][]byte
	for _, ch := range strings.SplitAfter(body, "\n\n") {
		chunks = append(chunks, []byte(ch))
	}
	var sink int
	var tBase, tRules time.Duration
	var allocsRules uint64
	var ms runtime.MemStats
	// Rules compile once per config load, not per request.
	chain := transformtest.Chain(b, `[{"transform":"field_custom_tools_to_function"}]`)
	for b.Loop() {
		t0 := time.Now()
		var p streambuf.Parser
		var out []byte
		for _, ch := range chunks {
			_ = p.Feed(ch, func(ev *streambuf.Event) error { out = ev.AppendTo(out); return nil })
			sink += len(out)
			out = out[:0]
		}
		base := time.Since(t0)
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		t1 := time.Now()
		x := transformtest.Begin(b, chain, transforms.ProtocolResponses, []byte(patchRequest))
		if _, err := x.RewriteRequest([]byte(patchRequest)); err != nil {
			b.Fatal(err)
		}
		s := x.NewStream()
		for _, ch := range chunks {
			_ = s.Write(ch)
			sink += len(s.Output())
		}
		_ = s.Close()
		t2 := time.Now()
		runtime.ReadMemStats(&ms)
		allocsRules += ms.Mallocs - before
		tBase += base
		tRules += t2.Sub(t1)
	}
	b.ReportMetric(float64(tRules)/float64(tBase), "x_parse_only")
	b.ReportMetric(float64(tRules.Nanoseconds())/float64(b.N*nEvents), "ns/event")
	b.ReportMetric(float64(allocsRules)/float64(b.N*nEvents), "allocs/event")
	_ = sink
}

// BenchmarkWalkScaling doubles what a hostile body can multiply: distinct
// tool identities (custom tools and their history calls), namespaces that
// share one tool name, and the nesting depth of namespaces around a large
// value. Each doubling must cost at most about double (a walk linear in the
// body, whatever its shape), and 480 levels of namespaces around a large
// value about what one level costs; the metrics are the time ratios.
func BenchmarkWalkScaling(b *testing.B) {
	identities := func(n int) []byte {
		var tools, input strings.Builder
		for i := range n {
			fmt.Fprintf(&tools, `,{"type":"custom","name":"tool_%d"}`, i)
			fmt.Fprintf(&input, `,{"type":"custom_tool_call","call_id":"c%d","name":"tool_%d","input":"x"}`, i, i)
		}
		return []byte(`{"tools":[` + tools.String()[1:] + `],"input":[` + input.String()[1:] + `]}`)
	}
	namespaces := func(n int) []byte {
		var tools strings.Builder
		for i := range n {
			fmt.Fprintf(&tools, `,{"type":"namespace","name":"ns_%d","tools":[{"type":"custom","name":"x"}]}`, i)
		}
		return []byte(`{"tools":[` + tools.String()[1:] + `]}`)
	}
	nesting := func(depth int) []byte {
		big := `{"type":"custom","name":"x","description":"` + strings.Repeat(`a \"quoted\" é `, 20000) + `"}`
		return []byte(strings.Repeat(`{"type":"namespace","name":"n","tools":[`, depth) + big + strings.Repeat(`]}`, depth))
	}
	c := transformtest.Chain(b, `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`)
	run := func(body []byte) time.Duration {
		best := time.Duration(1 << 62)
		for range 5 {
			runtime.GC() // each run starts from the same heap
			t0 := time.Now()
			x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
			c.Begin(x, "")
			if _, err := x.RewriteRequest(body); err != nil || x.Unreadable() {
				b.Fatalf("rewrite: %v", err)
			}
			best = min(best, time.Since(t0))
		}
		return best
	}
	var ids, nss, deep, flat float64
	for b.Loop() {
		ids = float64(run(identities(16000))) / float64(run(identities(8000)))
		nss = float64(run(namespaces(16000))) / float64(run(namespaces(8000)))
		d480 := float64(run(nesting(480)))
		deep = d480 / float64(run(nesting(240)))
		flat = d480 / float64(run(nesting(1)))
	}
	b.ReportMetric(ids, "x_double_identities")
	b.ReportMetric(nss, "x_double_namespaces")
	b.ReportMetric(deep, "x_double_nesting")
	b.ReportMetric(flat, "x_480_levels_vs_1")
}
