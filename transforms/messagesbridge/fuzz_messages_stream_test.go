package messagesbridge

import (
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// FuzzMessagesStream feeds any bytes as the upstream's Chat stream: the
// client must get a well-formed Messages stream (checkGrammar) whatever
// comes, the same whether the bytes come in pieces of 3 or all at once. A
// small max_call_buffer, for inputs that start with an odd byte, lets the
// abort path be found too.
func FuzzMessagesStream(f *testing.F) {
	f.Add([]byte(rsChunk(`{"reasoning_content":"a"}`, "null") + rsChunk(`{"content":"b"}`, "null") +
		rsChunk(`{"tool_calls":[{"index":0,"id":"c","function":{"name":"R","arguments":"{\"x\":1}"}},{"index":1,"function":{"name":"S","arguments":"{}"}}]}`, `"tool_calls"`) +
		rsUsageChunk(`{"prompt_tokens":3,"completion_tokens":1}`) + rsDone))
	f.Add([]byte(rsChunk(`{"content":"<thi"}`, "null") + rsChunk(`{"content":"nk>x</think>y"}`, `"stop"`)))
	f.Add([]byte(rsChunk(`{"tool_calls":[{"index":0,"id":"a","function":{"name":"A","arguments":""}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":1,"id":"b","function":{"name":"B","arguments":"{\"y\":"}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"[1]"}}]}`, "null") +
		rsChunk(`{"content":"text after calls"}`, "null") + rsChunk(`{"reasoning":"late"}`, `"length"`) + rsDone))
	f.Add([]byte(": ping\n\n" + `data: {"error":{"message":"maximum context length is 10 tokens. However, you requested 20 tokens (15 in the messages, 5 in the completion)"}}` + "\n\n"))
	// The chain is built once: compiling it per input would be most of
	// the work.
	chain := transformtest.Chain(f, rsRules("deepseek", `{"model":"m","max_tokens":5,"stop_sequences":["END"]}`))
	const request = `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stream":true}`
	fresh := func(t *testing.T, limit int) *transforms.Exchange {
		x := transforms.NewExchange(transforms.ProtocolMessages, transforms.Limits{MaxCallBuffer: limit, MaxEvent: 1 << 20}, nil)
		chain.Begin(x, "m")
		if _, err := x.RewriteRequest([]byte(request)); err != nil {
			t.Fatal(err)
		}
		return x
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		limit := 1 << 20
		if len(data) > 0 && data[0]&1 == 1 {
			limit = 64
		}
		var outs [2]string
		for i, n := range []int{3, 1 << 20} {
			outs[i] = rsNorm(transformtest.Replay(t, fresh(t, limit), string(data), n))
		}
		if err := checkGrammar(outs[0]); err != nil {
			t.Fatalf("%v\n--- upstream:\n%q\n--- client:\n%s", err, data, outs[0])
		}
		if outs[0] != outs[1] {
			t.Fatalf("the chunk size changed the output:\n%s\n--- whole:\n%s", outs[0], outs[1])
		}
	})
}
