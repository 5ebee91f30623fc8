package chatbridge

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// BenchmarkBridgeScaling: what a client or an upstream controls, doubled,
// through responses_to_chat. Each metric is the cost at 2n over the cost at
// n: about 2 when the work is linear, 4 when quadratic.
//
//   - x_history: a history whose second run of calls has its outputs
//     placed inside the first run, each output looked up among the calls
//     gathered so far.
//   - x_history_in_order: the same calls, each followed by its output.
//   - x_duplicate_ids: n calls with one call_id and one output of n × 64
//     bytes; each copy of the call would get its own tool message.
//   - x_ordering: a stream of n calls whose names arrive in reverse order,
//     so their output_index runs against the order they settle in, and
//     the final object puts them back in order.
//   - x_ordering_in_order: the same calls named in order.
//   - x_think_candidates: one content delta inside <think> holding n
//     escaped backslashes followed by u003c/think\u003e, each a closing
//     tag on a byte that is not a character's start.
func BenchmarkBridgeScaling(b *testing.B) {
	c := transformtest.Chain(b, rcRules(`{"profile":"deepseek"}`))
	exchange := func() *transforms.Exchange {
		x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{MaxCallBuffer: 1 << 20, MaxEvent: 1 << 26}, nil)
		c.Begin(x, "m")
		x.SetUpstreamPath("/v1/responses")
		return x
	}
	request := func(items func(w *strings.Builder)) func() {
		var in strings.Builder
		in.WriteString(`{"model":"m","input":[` + rcMsg("user", "q"))
		items(&in)
		in.WriteString(`,` + rcMsg("user", "next") + `]}`)
		body := []byte(in.String())
		return func() {
			if _, err := exchange().RewriteRequest(body); err != nil {
				b.Fatal(err)
			}
		}
	}
	history := func(interleaved bool) func(n int) func() {
		return func(n int) func() {
			return request(func(w *strings.Builder) {
				for i := range n {
					fmt.Fprintf(w, `,{"type":"function_call","call_id":"a%d","name":"f","arguments":"{}"}`, i)
					if interleaved {
						fmt.Fprintf(w, `,{"type":"function_call_output","call_id":"b%d","output":"B"}`, i)
					} else {
						fmt.Fprintf(w, `,{"type":"function_call_output","call_id":"a%d","output":"A"}`, i)
					}
				}
				if interleaved {
					for i := range n {
						fmt.Fprintf(w, `,{"type":"function_call_output","call_id":"a%d","output":"A"}`, i)
					}
					for i := range n {
						fmt.Fprintf(w, `,{"type":"function_call","call_id":"b%d","name":"f","arguments":"{}"}`, i)
					}
				}
			})
		}
	}
	duplicates := func(n int) func() {
		return request(func(w *strings.Builder) {
			for range n {
				w.WriteString(`,{"type":"function_call","call_id":"x","name":"f","arguments":"{}"}`)
			}
			fmt.Fprintf(w, `,{"type":"function_call_output","call_id":"x","output":"%s"}`, strings.Repeat("o", 64*n))
		})
	}
	stream := func(body string) func() {
		req := []byte(`{"model":"m","input":"hi","stream":true}`)
		data := []byte(body)
		return func() {
			x := exchange()
			if _, err := x.RewriteRequest(req); err != nil {
				b.Fatal(err)
			}
			s := x.NewStream()
			if err := s.Write(data); err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	ordering := func(reverse bool) func(n int) func() {
		return func(n int) func() {
			var sb strings.Builder
			for i := range n {
				sb.WriteString("data: " + rcChunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"c%d","type":"function","function":{"arguments":"{}"}}]}`, i, i), "null") + "\n\n")
			}
			for k := range n {
				i := k
				if reverse {
					i = n - 1 - k
				}
				sb.WriteString("data: " + rcChunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"name":"f"}}]}`, i), "null") + "\n\n")
			}
			sb.WriteString("data: " + rcChunk(`{}`, `"tool_calls"`) + "\n\ndata: [DONE]\n\n")
			return stream(sb.String())
		}
	}
	think := func(n int) func() {
		delta := `{"content":"<think>` + strings.Repeat(`\\u003c/think\u003e`, n) + `"}`
		return stream("data: " + rcChunk(delta, "null") + "\n\ndata: " + rcChunk(`{"content":"</think>ok"}`, `"stop"`) + "\n\ndata: [DONE]\n\n")
	}
	var hist, histOrder, dups, order, orderIn, thk float64
	for b.Loop() {
		hist = transformtest.Doubling(20000, history(true))
		histOrder = transformtest.Doubling(20000, history(false))
		dups = transformtest.Doubling(2000, duplicates)
		order = transformtest.Doubling(40000, ordering(true))
		orderIn = transformtest.Doubling(40000, ordering(false))
		thk = transformtest.Doubling(50000, think)
	}
	b.ReportMetric(hist, "x_history")
	b.ReportMetric(histOrder, "x_history_in_order")
	b.ReportMetric(dups, "x_duplicate_ids")
	b.ReportMetric(order, "x_ordering")
	b.ReportMetric(orderIn, "x_ordering_in_order")
	b.ReportMetric(thk, "x_think_candidates")
}
