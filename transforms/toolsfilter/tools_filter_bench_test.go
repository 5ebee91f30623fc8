package toolsfilter

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/tidwall/gjson"
)

// benchAgainstValidation runs rewrite and one gjson.ValidBytes pass over
// the same body in the same loop, and reports their ratio.
func benchAgainstValidation(b *testing.B, doc []byte, rewrite func() []byte) {
	var tValid, tRun time.Duration
	b.SetBytes(int64(len(doc)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		gjson.ValidBytes(doc)
		t1 := time.Now()
		rewrite()
		tValid += t1.Sub(t0)
		tRun += time.Since(t1)
	}
	b.ReportMetric(float64(tRun)/float64(tValid), "x_validate")
	b.ReportMetric(float64(len(doc))/1e3, "KB_doc")
}

// runChain is one request through c, as the handler runs it.
func runChain(b *testing.B, c *transforms.Chain, doc []byte) []byte {
	x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
	c.Begin(x, "gpt-5.5")
	out, err := x.RewriteRequest(doc)
	if err != nil || x.Unreadable() {
		b.Fatal(err)
	}
	n := len(out)
	x.Release()
	return out[:n]
}

// BenchmarkToolsFilter filters the Codex request plus 300 MCP tools (30
// namespaces): a deny inside every namespace, so every list is rewritten,
// and one default added.
func BenchmarkToolsFilter(b *testing.B) {
	doc := transformtest.MCPHeavyRequest(b)
	c := transformtest.Chain(b, `[{"transform":"tools_filter","config":{"deny":["web_search","mcp__server_*/*_review_3"],
		"defaults":[{"type":"function","name":"lookup_ticket","parameters":{"type":"object","properties":{}}}]}}]`)
	if out := runChain(b, c, doc); gjson.GetBytes(out, "tools.#").Int() != 10-1+30+1 {
		b.Fatalf("got %d top-level tools", gjson.GetBytes(out, "tools.#").Int())
	}
	benchAgainstValidation(b, doc, func() []byte { return runChain(b, c, doc) })
}

// BenchmarkToolsNormalizeSchema rewrites the schemas of the same request
// for Gemini: 300 MCP schemas lose additionalProperties, and Codex's own
// tools are normalized too.
func BenchmarkToolsNormalizeSchema(b *testing.B) {
	doc := transformtest.MCPHeavyRequest(b)
	c := transformtest.Chain(b, `[{"transform":"tools_normalize_schema","config":{"dialect":"gemini"}}]`)
	if out := runChain(b, c, doc); gjson.GetBytes(out, `tools.10.tools.0.parameters.additionalProperties`).Exists() {
		b.Fatal("schemas not normalized")
	}
	benchAgainstValidation(b, doc, func() []byte { return runChain(b, c, doc) })
}

// scaling runs rewrite over bodies of size n and 8n and reports the time
// ratio: 8 is linear, 64 quadratic.
func scaling(b *testing.B, name string, body func(n int) string, n int, rewrite func(body []byte)) {
	small, large := []byte(body(n)), []byte(body(8*n))
	var tSmall, tLarge time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		rewrite(small)
		t1 := time.Now()
		rewrite(large)
		tSmall += t1.Sub(t0)
		tLarge += time.Since(t1)
	}
	b.ReportMetric(float64(tLarge)/float64(tSmall), name+"_x8")
}

// scaleFilterBody is a request with n namespaces of two tools and n
// additional_tools items, for
// TestFilterHandlesThousandsOfNamespacesAndCalls and
// BenchmarkFilterScaling.
func scaleFilterBody(n int) string {
	var b strings.Builder
	b.WriteString(`{"model":"m","tools":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"namespace","name":"ns%d","tools":[{"type":"function","name":"delete_%d"},{"type":"function","name":"read_%d"}]}`, i, i, i)
	}
	b.WriteString(`],"input":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"additional_tools","tools":[{"type":"function","name":"delete_x%d"},{"type":"function","name":"dup"}]}`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// scaleOffHistory is a Responses history of n call, output and message
// triples, for TestFilterHandlesThousandsOfNamespacesAndCalls and
// BenchmarkFilterScaling.
func scaleOffHistory(n int) string {
	var b strings.Builder
	b.WriteString(`{"model":"m","input":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"function_call","call_id":"c%d","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c%d","output":"o"},{"type":"message","role":"user","content":"next"}`, i, i)
	}
	b.WriteString(`],"tools":[{"type":"function","name":"f"}]}`)
	return b.String()
}

// BenchmarkFilterScaling: eight times the namespaces and additional_tools
// items, and eight times the history with function calling off.
func BenchmarkFilterScaling(b *testing.B) {
	run := func(cfg string) func([]byte) {
		c := transformtest.Chain(b, `[{"transform":"tools_filter","config":`+cfg+`}]`)
		return func(body []byte) {
			x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
			c.Begin(x, "m")
			if _, err := x.RewriteRequest(body); err != nil {
				b.Fatal(err)
			}
		}
	}
	scaling(b, "namespaces", scaleFilterBody, 1000, run(`{"deny":["delete_*"]}`))
	scaling(b, "history", scaleOffHistory, 1000, run(`{"function_calling":"off"}`))
}

// BenchmarkDroppedCallsScaling: a stream whose n calls all go to tools the
// request did not declare, each removed and the gaps closed, with the
// upstream numbering its items in order and backwards; doubled. About 2
// when linear.
func BenchmarkDroppedCallsScaling(b *testing.B) {
	c := transformtest.Chain(b, `[{"transform":"tools_filter","config":{"deny":["nothing"],"drop_undeclared_calls":true}}]`)
	req := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}]}`)
	stream := func(backwards bool) func(int) func() {
		return func(n int) func() {
			var evs []string
			for i := range n {
				oi := i
				if backwards {
					oi = n - i
				}
				evs = append(evs, transformtest.FunctionCallStream(len(evs), oi, fmt.Sprintf("fc_%d", i), fmt.Sprintf("c%d", i), "ghost", `{}`, 2, true)...)
			}
			body := []byte(transformtest.SSE(evs...))
			x := transformtest.ExchangeAfter(b, `[{"transform":"tools_filter","config":{"deny":["nothing"],"drop_undeclared_calls":true}}]`, string(req))
			if out := transformtest.Replay(b, x, string(body), 1<<20); strings.Contains(out, "ghost") {
				b.Fatal("the undeclared calls were not removed")
			}
			return func() {
				x := transformtest.Begin(b, c, transforms.ProtocolResponses, req)
				if _, err := x.RewriteRequest(req); err != nil {
					b.Fatal(err)
				}
				s := x.NewStream()
				if err := s.Write(body); err != nil {
					b.Fatal(err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	var inOrder, backwards float64
	for b.Loop() {
		inOrder = transformtest.Doubling(4000, stream(false))
		backwards = transformtest.Doubling(4000, stream(true))
	}
	b.ReportMetric(inOrder, "x_in_order")
	b.ReportMetric(backwards, "x_backwards")
}
