package chatbridge

import (
	"runtime/debug"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// FuzzChatStreamToResponses feeds arbitrary bytes as the Chat upstream's
// stream of a request bridged by responses_to_chat (profile deepseek), at
// chunk sizes 1, 5 and 4096. Whatever comes, the client's stream must hold
// what strict clients need (rcEventsProblem): response.created first,
// sequence_number gap-free from 0, event lines naming the types, every
// output_item.added at the next output_index (dense, in order of first
// appearance, never reused), content parts before their deltas, and
// exactly one terminal event (response.completed, response.incomplete or
// response.failed) as the last event with data, whose response holds the
// items the stream finished. The output must not depend on the chunk size
// (ids and a clock-given created_at aside), and nothing may panic.
//
// An empty or silent upstream is no exception: the client still gets
// response.created, response.in_progress and response.failed
// (server_error), so that it never waits for a terminal event that cannot
// come. Data lines that are not JSON objects (never a Chat chunk) are
// passed over here: TestResponsesToChatStreamNonJSONData covers them.
//
// The seed corpus is in testdata/fuzz/FuzzChatStreamToResponses; the two
// inputs named by hash are crashers the fuzzer found (see
// TestResponsesToChatStreamCutMidLine and
// TestResponsesToChatStreamTruncatedChunks).
func FuzzChatStreamToResponses(f *testing.F) {
	// The rules are compiled once: loading Caddy modules per input would
	// leave the fuzzer a few inputs a minute.
	chain := transformtest.Chain(f, rcRules(`{"profile":"deepseek"}`))
	fresh := func(t *testing.T) *transforms.Exchange {
		x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{MaxCallBuffer: 1 << 20, MaxEvent: 1 << 20}, nil)
		chain.Begin(x, "gpt-5.5")
		x.SetUpstreamPath("/v1/responses")
		if _, err := x.RewriteRequest([]byte(`{"model":"gpt-5.5","input":"hi","stream":true}`)); err != nil {
			t.Fatal(err)
		}
		return x
	}
	f.Fuzz(func(t *testing.T, stream string) {
		// A panic fails this input, not the whole test binary.
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("panic: %v\n%s\n--- upstream\n%q", r, debug.Stack(), stream)
			}
		}()
		var first string
		for i, n := range []int{1, 5, 4096} {
			out := transformtest.Replay(t, fresh(t), stream, n)
			if _, err := rcEventsProblem(out, true); err != nil {
				t.Fatalf("chunk size %d: %v\n--- upstream\n%q\n--- client\n%s", n, err, stream, out)
			}
			norm := rcNormTime(rcNorm(out))
			if i == 0 {
				first = norm
			} else if norm != first {
				t.Fatalf("chunk size %d changed the output:\n%s\n--- vs size 1:\n%s", n, norm, first)
			}
		}
	})
}
