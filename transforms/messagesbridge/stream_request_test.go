package messagesbridge

import (
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// Through the real request phase: the record it leaves names the client's
// model in message_start, and its stop sequences and max_tokens serve the
// response side.
func TestMessagesStreamAfterRequest(t *testing.T) {
	const request = `{"model":"claude-opus-5-5","max_tokens":1000,"stop_sequences":["END"],"stream":true,` +
		`"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"Read","input_schema":{"type":"object"}}]}`
	rules := `[{"transform":"messages_to_chat","config":{"profile":"deepseek"}}]`
	fresh := func() *transforms.Exchange {
		x := transformtest.Begin(t, transformtest.Chain(t, rules), transforms.ProtocolMessages, []byte(request))
		if _, err := x.RewriteRequest([]byte(request)); err != nil {
			t.Fatal(err)
		}
		return x
	}
	upstream := rsChunk(`{"reasoning_content":"Say it."}`, "null") + rsChunk(`{"content":"Done"}`, "null") +
		`data: {"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":"END"}]}` + "\n\n" +
		rsUsageChunk(`{"prompt_tokens":30,"completion_tokens":4,"prompt_cache_hit_tokens":10}`) + rsDone
	var got string
	for _, n := range transformtest.ChunkSizes {
		out := rsNorm(transformtest.Replay(t, fresh(), upstream, n))
		if got != "" && out != got {
			t.Fatalf("chunk size %d changed the output:\n%s\n--- vs:\n%s", n, out, got)
		}
		got = out
	}
	rsEqual(t, got, rsStart+rsThinkingStart(0)+rsThinking(0, "Say it.")+rsSignature(0, "deepseek", "Say it.")+rsStop(0)+
		rsTextStart(1)+rsText(1, "Done")+rsStop(1)+
		rsEnd(`{"stop_reason":"stop_sequence","stop_sequence":"END"}`, rsUsage(20, 4, 0, 10, -1)))

	x := fresh()
	body := x.RewriteError(400, []byte(`{"error":{"message":"Your request exceeded model token limit: 2000 (requested: 2600)"}}`))
	if want := `{"type":"error","error":{"type":"invalid_request_error","message":"input length and ` + "`max_tokens`" + ` exceed context limit: 1600 + 1000 > 2000, decrease input length or ` + "`max_tokens`" + ` and try again"}}`; string(body) != want {
		t.Fatalf("%s\nwant %s", body, want)
	}
}
