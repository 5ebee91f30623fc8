package toolsplan

import (
	"testing"
	"time"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/tidwall/gjson"
)

// BenchmarkToolsPlan plans the Codex request plus 300 MCP tools for the
// function_only profile (max_tools lifted: the fixture has more than 128),
// against a plain copy of the same bytes and one validation pass, in the
// same loop.
func BenchmarkToolsPlan(b *testing.B) {
	doc := transformtest.MCPHeavyRequest(b)
	c := transformtest.Chain(b, `[{"transform":"tools_plan","config":{"profile":"function_only","max_tools":0}}]`)
	plan := func() []byte {
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
	if out := plan(); gjson.GetBytes(out, "tools.#").Int() != 10+300-1 {
		b.Fatalf("planned %d tools, want 309 (web_search dropped)", gjson.GetBytes(out, "tools.#").Int())
	}
	var sink []byte
	var tCopy, tValid, tPlan time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		sink = append(sink[:0], doc...)
		t1 := time.Now()
		gjson.ValidBytes(doc)
		t2 := time.Now()
		plan()
		tCopy += t1.Sub(t0)
		tValid += t2.Sub(t1)
		tPlan += time.Since(t2)
	}
	b.ReportMetric(float64(tPlan)/float64(tCopy), "x_copy")
	b.ReportMetric(float64(tPlan)/float64(tValid), "x_validate")
	b.ReportMetric(float64(len(doc))/1e3, "KB_doc")
	_ = sink
}
