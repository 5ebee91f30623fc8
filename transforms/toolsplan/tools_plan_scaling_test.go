package toolsplan

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// BenchmarkPlanScaling: what a client or an upstream controls, doubled:
// namespaced tools whose names break the provider's rule, history calls to
// them, an allowed_tools list naming them all, and an answer calling them
// all, as JSON and as a stream. Each metric is the cost at 2n over the cost
// at n (the answers' include planning the request): about 2 when linear.
func BenchmarkPlanScaling(b *testing.B) {
	c := transformtest.Chain(b, `[{"transform":"tools_plan","config":{"profile":"function_only","max_tools":0}}]`)
	ns := func(i int) string { return fmt.Sprintf("mcp__server_%d", i) }
	name := func(i int) string { return fmt.Sprintf("repo.issues.v2.list_comments_for_a_pull_request_review_%d", i) }
	request := func(n int, history, allowed bool) []byte {
		var tools, in, choice strings.Builder
		in.WriteString(`"hi"`)
		choice.WriteString(`"auto"`)
		if history {
			in.Reset()
			in.WriteByte('[')
		}
		if allowed {
			choice.Reset()
			choice.WriteString(`{"type":"allowed_tools","mode":"auto","tools":[`)
		}
		for i := range n {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&tools, `%s{"type":"namespace","name":%q,"tools":[{"type":"function","name":%q,"parameters":{}}]}`, sep, ns(i), name(i))
			if history {
				fmt.Fprintf(&in, `%s{"type":"function_call","call_id":"c%d","namespace":%q,"name":%q,"arguments":"{}"},{"type":"function_call_output","call_id":"c%d","output":"ok"}`, sep, i, ns(i), name(i), i)
			}
			if allowed {
				fmt.Fprintf(&choice, `%s{"type":"function","namespace":%q,"name":%q}`, sep, ns(i), name(i))
			}
		}
		if history {
			in.WriteByte(']')
		}
		if allowed {
			choice.WriteString(`]}`)
		}
		return []byte(`{"model":"m","tools":[` + tools.String() + `],"tool_choice":` + choice.String() + `,"input":` + in.String() + `}`)
	}
	plan := func(body []byte) *transforms.Exchange {
		x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{MaxCallBuffer: 1 << 20, MaxEvent: 1 << 24}, nil)
		c.Begin(x, "m")
		if _, err := x.RewriteRequest(body); err != nil {
			b.Fatal(err)
		}
		return x
	}
	requestOnly := func(history, allowed bool) func(int) func() {
		return func(n int) func() {
			body := request(n, history, allowed)
			return func() { plan(body) }
		}
	}
	// upNames are the names the plan of n tools sends upstream, in order.
	upNames := func(n int) []string {
		body := request(n, false, false)
		x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
		c.Begin(x, "m")
		out, err := x.RewriteRequest(body)
		if err != nil {
			b.Fatal(err)
		}
		var names []string
		for _, t := range gjson.GetBytes(out, "tools.#.name").Array() {
			names = append(names, t.String())
		}
		if len(names) != n {
			b.Fatalf("%d tools planned, want %d", len(names), n)
		}
		return names
	}
	answerJSON := func(n int) func() {
		req := request(n, false, false)
		var out strings.Builder
		for i, up := range upNames(n) {
			if i > 0 {
				out.WriteByte(',')
			}
			fmt.Fprintf(&out, `{"type":"function_call","id":"fc_%d","call_id":"c%d","name":%q,"arguments":"{}","status":"completed"}`, i, i, up)
		}
		resp := []byte(`{"id":"r","object":"response","status":"completed","output":[` + out.String() + `]}`)
		return func() {
			if _, err := plan(req).RewriteResponse(resp); err != nil {
				b.Fatal(err)
			}
		}
	}
	answerSSE := func(n int) func() {
		req := request(n, false, false)
		var evs []string
		for i, up := range upNames(n) {
			evs = append(evs, transformtest.FunctionCallStream(len(evs), i, fmt.Sprintf("fc_%d", i), fmt.Sprintf("c%d", i), up, `{"q":"x"}`, 4, true)...)
		}
		stream := []byte(transformtest.SSE(evs...))
		return func() {
			s := plan(req).NewStream()
			if err := s.Write(stream); err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	const n = 2000
	var defs, hist, allowed, json, sse float64
	for b.Loop() {
		defs = transformtest.Doubling(n, requestOnly(false, false))
		hist = transformtest.Doubling(n, requestOnly(true, false))
		allowed = transformtest.Doubling(n, requestOnly(false, true))
		json = transformtest.Doubling(n, answerJSON)
		sse = transformtest.Doubling(n, answerSSE)
	}
	b.ReportMetric(defs, "x_definitions")
	b.ReportMetric(hist, "x_history")
	b.ReportMetric(allowed, "x_allowed_tools")
	b.ReportMetric(json, "x_answer_json")
	b.ReportMetric(sse, "x_answer_stream")
}
