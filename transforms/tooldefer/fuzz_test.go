package tooldefer_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	tt "github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// FuzzDeferStream feeds arbitrary upstream streams, Responses and Chat,
// through tools_defer, whose rounds get the same answer: no panic, and the
// search the model makes never reaches the client's bytes.
func FuzzDeferStream(f *testing.F) {
	f.Add(false, callAnswer("1", "tool_search", "call_secret", `{"query":"create github issue"}`), 7)
	f.Add(false, callAnswer("1", "create_issue", "call_c", `{"title":"x"}`), 1)
	f.Add(true, chatCallAnswer("1", "tool_search", "call_secret", `{"query":"send email"}`), 3)
	f.Add(true, chatCallAnswer("1", "send_email", "call_e", `{"to":"a"}`), 64)
	f.Add(true, "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"name\":\"tool_search\"}}]}}]}\n\ndata: [DONE]\n\n", 5)
	f.Fuzz(func(t *testing.T, chat bool, stream string, n int) {
		if n <= 0 || n > 1<<16 {
			n = 1 + n&0xff
		}
		proto, req := transforms.ProtocolResponses, `{"model":"m","stream":true,"input":"hi","tools":`+tools(130, false)+`}`
		if chat {
			proto, req = transforms.ProtocolChat, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":`+tools(130, true)+`}`
		}
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(3 * time.Second):
				panic(fmt.Sprintf("slow input: chat=%v n=%d %q", chat, n, stream))
			}
		}()
		x := tt.Begin(t, tt.Chain(t, `[{"transform":"tools_defer"}]`), proto, []byte(req))
		out, _ := tt.RunStream(t, x, []byte(req), func([]byte) (int, string) { return 200, stream }, n)
		if validSearch(chat, stream) && strings.Contains(out, "call_secret") {
			t.Fatalf("the search reached the client:\n%s", out)
		}
	})
}

// validSearch reports whether the stream is one of the seeds' searches,
// unchanged, in the request's protocol.
func validSearch(chat bool, s string) bool {
	if chat {
		return s == chatCallAnswer("1", "tool_search", "call_secret", `{"query":"send email"}`)
	}
	return s == callAnswer("1", "tool_search", "call_secret", `{"query":"create github issue"}`)
}
