package transforms

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// mcpHeavyRequest is the real Codex turn-1 request with 300 MCP-style tools
// added: 30 namespaces of 10 functions with dotted names and schemas the
// size MCP servers send, so planning flattens, renames and hashes.
func mcpHeavyRequest(tb testing.TB) []byte {
	tb.Helper()
	doc, _ := codexLikeRequest(tb, 0)
	tools := gjson.GetBytes(doc, "tools")
	var b strings.Builder
	for s := 0; s < 30; s++ {
		fmt.Fprintf(&b, `,{"type":"namespace","name":"mcp__server_%d","description":"Tools of MCP server %d.","tools":[`, s, s)
		for f := 0; f < 10; f++ {
			if f > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"type":"function","name":"repo.issues.v%d.list_comments_for_a_pull_request_review_%d","description":"Lists comments \"quoted\" for a review — page by page.","strict":false,`+
				`"parameters":{"type":"object","properties":{"owner":{"type":"string","description":"The account owner."},"repo":{"type":"string"},"pull_number":{"type":"integer"},"per_page":{"type":"integer","minimum":1,"maximum":100},"state":{"type":"string","enum":["open","closed","all"]}},"required":["owner","repo","pull_number"],"additionalProperties":false}}`, s, f)
		}
		b.WriteString(`]}`)
	}
	end := tools.Index + len(tools.Raw) - 1
	return []byte(string(doc[:end]) + b.String() + string(doc[end:]))
}

// BenchmarkToolsPlan plans the Codex request plus 300 MCP tools for the
// function_only profile (max_tools lifted: the fixture has more than 128),
// against a plain copy of the same bytes and one validation pass, in the
// same loop.
func BenchmarkToolsPlan(b *testing.B) {
	doc := mcpHeavyRequest(b)
	c := chainOf(b, `[{"transform":"tools_plan","config":{"profile":"function_only","max_tools":0}}]`)
	plan := func() []byte {
		x := NewExchange(ProtocolResponses, Limits{}, nil)
		c.Begin(x, "gpt-5.5")
		out, err := x.RewriteRequest(doc)
		if err != nil || x.Invalid {
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
