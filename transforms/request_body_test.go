package transforms_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// chatCustomRequest builds a Chat request of about size bytes whose
// history is custom calls: string inputs full of escapes and one whose
// input is a JSON object spread over lines, which wrapping escapes.
func chatCustomRequest(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"m","tools":[{"type":"custom","custom":{"name":"apply_patch"}}],"messages":[{"role":"user","content":"go"}`)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `,{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"custom","custom":{"name":"apply_patch","input":"*** Begin Patch\n+print(\"Grüße \\\"%d\\\"\", r\"C:\\temp\") \u00e9\n*** End Patch\n"}}]},{"role":"tool","tool_call_id":"c%d","content":"ok"}`, i, i, i)
		if i%50 == 0 {
			fmt.Fprintf(&b, `,{"role":"assistant","content":null,"tool_calls":[{"id":"o%d","type":"custom","custom":{"name":"apply_patch","input":{"a": [1,`+"\n\t"+`2]}}}]}`, i)
		}
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// TestRequestBodyMatchesRewriteRequest holds the body the handler sends,
// built as it is read when it is large, to RewriteRequest's: the same
// bytes, an exact announced length, the same rules applied.
func TestRequestBodyMatchesRewriteRequest(t *testing.T) {
	codex, _ := transformtest.CodexLikeRequest(t, 1<<20)
	small, _ := transformtest.CodexLikeRequest(t, 100<<10)
	custom := `{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}`
	set := `{"transform":"field_set","config":{"path":"store","value":true}}`
	for _, tc := range []struct {
		name     string
		rules    string
		proto    transforms.Protocol
		body     []byte
		deferred bool
	}{
		{"large Responses request", "[" + custom + "]", transforms.ProtocolResponses, codex, true},
		{"large Chat request", "[" + custom + "]", transforms.ProtocolChat, chatCustomRequest(1 << 20), true},
		{"a rule before the conversion", "[" + set + "," + custom + "]", transforms.ProtocolResponses, codex, true},
		// The last rule's rewrite is the one left unbuilt: field_set's.
		{"a rule after the conversion", "[" + custom + "," + set + "]", transforms.ProtocolResponses, codex, true},
		{"small request", "[" + custom + "]", transforms.ProtocolResponses, small, false},
		// tools_plan runs the conversion inside its own rewrite: that one
		// is built, its own is not.
		{"tools_plan converting", `[{"transform":"tools_plan","config":{"profile":"function_only"}}]`, transforms.ProtocolResponses, codex, true},
		{"tools_filter last", "[" + custom + `,{"transform":"tools_filter","config":{"deny":["exec_command"]}}]`, transforms.ProtocolResponses, codex, true},
		// The last rule changes nothing here: the conversion before it
		// built its body.
		{"tools_normalize_schema last", "[" + custom + `,{"transform":"tools_normalize_schema","config":{"dialect":"openai_strict"}}]`, transforms.ProtocolResponses, codex, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			deferred, msg := transformtest.RequestBodyMismatch(t, transformtest.Chain(t, tc.rules), tc.proto, body, false, 1, 4096, 32<<10, 1<<21)
			if msg != "" {
				t.Fatal(msg)
			}
			if deferred != tc.deferred {
				t.Fatalf("deferred = %v, want %v", deferred, tc.deferred)
			}
		})
	}
}

// chunked reads r at most n bytes at a time, as a transport's buffer does.
type chunked struct {
	r io.Reader
	n int
}

func (c *chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }
