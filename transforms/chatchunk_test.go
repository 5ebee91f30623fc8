package transforms_test

import (
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// TestChatChunkReaderMatchesReadChatChunk: a stream's reader, which walks
// a repeated head once, reads every chunk into what ReadChatChunk reads
// from it alone: a head that repeats, one with a usage member before the
// choices, white space after the head, a malformed tail, a new head.
func TestChatChunkReaderMatchesReadChatChunk(t *testing.T) {
	head := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",`
	chunks := []string{
		head + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"content":"a","reasoning_content":"r"},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"R","arguments":"{}"}}]},"finish_reason":null}]}`,
		head + ` "choices":[{"index":1,"delta":{"content":"b"}},{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`,
		head + `"usage":{"prompt_tokens":2},"choices":[]}`,
		head + `"usage":{"prompt_tokens":2},"choices":[{"index":0,"delta":{"content":"c"}}]}`,
		head + `"usage":{"prompt_tokens":2},"choices":[{"index":0,"delta":{"content":"d"}}],"usage":null}`,
		head + `"usage":{"prompt_tokens":2},"choices":[{"index":0,"delta":{"content":"e"}}`,
		head + `}`,
		`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"f"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"g"}}],"id":"c3","usage":{"prompt_tokens":3}}`,
		`{"choices":[{"index":0,"delta":{"content":"h"}}],"id":"c3"}`,
	}
	var r transforms.ChatChunkReader
	for i, c := range chunks {
		d := []byte(c)
		if got, want := r.Read(d), transforms.ReadChatChunk(d); got != want {
			t.Fatalf("chunk %d %s:\nreader %+v\nalone  %+v", i, c, got, want)
		}
	}
}
