package messagesbridge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/internal/reasonenv"
	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// BenchmarkMessagesToChatScaling reports how the request's conversion time
// grows when the body doubles (about 2 for linear work): a long tool loop
// with thinking, system messages waiting between calls and results,
// repeated call ids, and many tools. It reports, never fails: timings vary
// with the host.
func BenchmarkMessagesToChatScaling(b *testing.B) {
	env := reasonenv.SealText("deepseek", []byte("Thinking about the next step."))
	chain := transformtest.Chain(b, rqRules(rqDeepSeek))
	run := func(body string) func() {
		data := []byte(body)
		return func() {
			x := transforms.NewExchange(transforms.ProtocolMessages, transforms.Limits{}, nil)
			chain.Begin(x, "deepseek-v4-pro")
			x.SetUpstreamPath("/v1/messages")
			if _, err := x.RewriteRequest(data); err != nil {
				b.Fatal(err)
			}
		}
	}
	loop := func(n int) func() {
		var w strings.Builder
		w.WriteString(`{"role":"user","content":"go"}`)
		for i := range n {
			fmt.Fprintf(&w, `,{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"%s"},{"type":"text","text":"step"},`+
				`{"type":"tool_use","id":"t%d","name":"Bash","input":{"cmd":"ls"}}]},{"role":"system","content":"note"},`+
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":"out"}]}`, env, i, i)
		}
		return run(rqBody("", w.String()))
	}
	dupIDs := func(n int) func() {
		calls := strings.Repeat(`{"type":"tool_use","id":"same","name":"Bash","input":{}},`, n)
		results := strings.Repeat(`{"type":"tool_result","tool_use_id":"same","content":"x"},`, n)
		return run(rqBody("", `{"role":"user","content":"go"}`, `{"role":"assistant","content":[`+calls+`{"type":"text","text":"."}]}`,
			`{"role":"user","content":[`+results+`{"type":"text","text":"."}]}`))
	}
	tools := func(n int) func() {
		var w strings.Builder
		for i := range n {
			if i > 0 {
				w.WriteByte(',')
			}
			fmt.Fprintf(&w, `{"name":"tool_%d","description":"d","input_schema":{"type":"object"},"defer_loading":%v}`, i, i%2 == 0)
		}
		return run(rqBody(`,"tools":[`+w.String()+`]`, `{"role":"user","content":"go"}`))
	}
	var xLoop, xDup, xTools float64
	for b.Loop() {
		xLoop = transformtest.Doubling(5000, loop)
		xDup = transformtest.Doubling(20000, dupIDs)
		xTools = transformtest.Doubling(20000, tools)
	}
	b.ReportMetric(xLoop, "x_tool_loop")
	b.ReportMetric(xDup, "x_duplicate_ids")
	b.ReportMetric(xTools, "x_tools")
}
