package customtools

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// BenchmarkCustomScaling: a request declaring n custom tools with a call
// to each in its history, and answers calling each, as JSON and as a
// stream, doubled. Each metric is the cost at 2n over the cost at n (the
// answers' include converting the request): about 2 when linear.
func BenchmarkCustomScaling(b *testing.B) {
	c := transformtest.Chain(b, `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`)
	request := func(n int) []byte {
		var tools, in strings.Builder
		for i := range n {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&tools, `%s{"type":"custom","name":"tool_%d"}`, sep, i)
			fmt.Fprintf(&in, `%s{"type":"custom_tool_call","call_id":"h%d","name":"tool_%d","input":"x"},{"type":"custom_tool_call_output","call_id":"h%d","output":"ok"}`, sep, i, i, i)
		}
		return []byte(`{"model":"m","tools":[` + tools.String() + `],"input":[` + in.String() + `]}`)
	}
	convert := func(body []byte) *transforms.Exchange {
		x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{MaxCallBuffer: 1 << 20, MaxEvent: 1 << 24}, nil)
		c.Begin(x, "m")
		if _, err := x.RewriteRequest(body); err != nil {
			b.Fatal(err)
		}
		return x
	}
	requestOnly := func(n int) func() {
		body := request(n)
		return func() { convert(body) }
	}
	answerJSON := func(n int) func() {
		req := request(n)
		var out strings.Builder
		for i := range n {
			if i > 0 {
				out.WriteByte(',')
			}
			fmt.Fprintf(&out, `{"type":"function_call","id":"fc_%d","call_id":"c%d","name":"tool_%d","arguments":"{\"input\":\"x\"}","status":"completed"}`, i, i, i)
		}
		resp := []byte(`{"id":"r","object":"response","status":"completed","output":[` + out.String() + `]}`)
		return func() {
			if _, err := convert(req).RewriteResponse(resp); err != nil {
				b.Fatal(err)
			}
		}
	}
	answerSSE := func(n int) func() {
		req := request(n)
		var evs []string
		for i := range n {
			evs = append(evs, transformtest.FunctionCallStream(len(evs), i, fmt.Sprintf("fc_%d", i), fmt.Sprintf("c%d", i), fmt.Sprintf("tool_%d", i), `{"input":"some text"}`, 4, true)...)
		}
		stream := []byte(transformtest.SSE(evs...))
		return func() {
			s := convert(req).NewStream()
			if err := s.Write(stream); err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	// A Chat stream of n choices, each opening a call to a custom tool,
	// then finishing one by one.
	chatChoices := func(n int) func() {
		var tools strings.Builder
		var chunks []string
		const head = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[`
		for i := range n {
			if i > 0 {
				tools.WriteByte(',')
			}
			fmt.Fprintf(&tools, `{"type":"custom","custom":{"name":"tool_%d"}}`, i)
			chunks = append(chunks, fmt.Sprintf(head+`{"index":%d,"delta":{"tool_calls":[{"index":0,"id":"call_%d","type":"function","function":{"name":"tool_%d","arguments":"{\"input\":\"x\"}"}}]},"finish_reason":null}]}`, i, i, i))
		}
		for i := range n {
			chunks = append(chunks, fmt.Sprintf(head+`{"index":%d,"delta":{},"finish_reason":"tool_calls"}]}`, i))
		}
		req := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[` + tools.String() + `]}`)
		stream := []byte(transformtest.ChatSSE(chunks...))
		return func() {
			x := transforms.NewExchange(transforms.ProtocolChat, transforms.Limits{MaxCallBuffer: 1 << 20, MaxEvent: 1 << 24}, nil)
			c.Begin(x, "m")
			if _, err := x.RewriteRequest(req); err != nil {
				b.Fatal(err)
			}
			s := x.NewStream()
			if err := s.Write(stream); err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	const n = 2000
	var req, json, sse, chat float64
	for b.Loop() {
		req = transformtest.Doubling(n, requestOnly)
		json = transformtest.Doubling(n, answerJSON)
		sse = transformtest.Doubling(n, answerSSE)
		chat = transformtest.Doubling(n, chatChoices)
	}
	b.ReportMetric(req, "x_request")
	b.ReportMetric(json, "x_answer_json")
	b.ReportMetric(sse, "x_answer_stream")
	b.ReportMetric(chat, "x_chat_choices")
}
