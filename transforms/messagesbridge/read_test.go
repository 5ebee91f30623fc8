package messagesbridge

import (
	"reflect"
	"testing"
)

// TestReadWalksARepeatedHeadOnce: a chunk that starts with the members a
// chunk before it had (the provider's id, object, created, model) is read
// from "choices" on, into exactly what a reader that never saw a chunk
// reads from it; one whose head differs, or that is malformed after the
// head, is read whole.
func TestReadWalksARepeatedHeadOnce(t *testing.T) {
	head := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",`
	chunks := []string{
		head + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"R","arguments":"{}"}}]},"finish_reason":null}]}`,
		head + ` "choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1}}`,
		head + `"usage":{"prompt_tokens":1,"completion_tokens":2},"choices":[]}`,
		head + `}`,
		head + `"choices":[{"index":0,"delta":{"content":"b"}}]`,
		`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"c"}}]}`,
		`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"d"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"e"}}],"id":"c3"}`,
	}
	s := &chatToMessages{}
	for i, c := range chunks {
		d := []byte(c)
		ok := s.read(d)
		fresh := &chatToMessages{}
		wantOK := fresh.read(d)
		same := func(a, b any, n int) bool { return n == 0 || reflect.DeepEqual(a, b) }
		if i == 8 && string(s.head) != `{"id":"c2","object":"chat.completion.chunk","created":1,"model":"m",` {
			t.Fatalf("chunk %d: head %s", i, s.head)
		}
		if ok != wantOK || ok && (len(s.items) != len(fresh.items) || !same(s.items, fresh.items, len(s.items)) ||
			len(s.frags) != len(fresh.frags) || !same(s.frags, fresh.frags, len(s.frags))) {
			t.Fatalf("chunk %d %s:\nread %v %+v %+v\nfresh %v %+v %+v", i, c, ok, s.items, s.frags, wantOK, fresh.items, fresh.frags)
		}
	}
	if string(s.head) != `{` { // the last chunk leads with its choices
		t.Fatalf("head %s", s.head)
	}
}
