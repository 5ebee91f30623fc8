package transforms

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
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
	codex, _ := codexLikeRequest(t, 1<<20)
	small, _ := codexLikeRequest(t, 100<<10)
	custom := `{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}`
	set := `{"transform":"field_set","config":{"path":"store","value":false}}`
	for _, tc := range []struct {
		name     string
		rules    string
		proto    Protocol
		body     []byte
		deferred bool
	}{
		{"large Responses request", "[" + custom + "]", ProtocolResponses, codex, true},
		{"large Chat request", "[" + custom + "]", ProtocolChat, chatCustomRequest(1 << 20), true},
		{"a rule before the conversion", "[" + set + "," + custom + "]", ProtocolResponses, codex, true},
		// The last rule's rewrite is the one left unbuilt; field_set builds
		// its own.
		{"a rule after the conversion", "[" + custom + "," + set + "]", ProtocolResponses, codex, false},
		{"small request", "[" + custom + "]", ProtocolResponses, small, false},
		// tools_plan runs the conversion inside its own rewrite: that one
		// is built, its own is not.
		{"tools_plan converting", `[{"transform":"tools_plan","config":{"profile":"function_only"}}]`, ProtocolResponses, codex, true},
		{"tools_filter last", "[" + custom + `,{"transform":"tools_filter","config":{"deny":["exec_command"]}}]`, ProtocolResponses, codex, true},
		// The last rule changes nothing here: the conversion before it
		// built its body.
		{"tools_normalize_schema last", "[" + custom + `,{"transform":"tools_normalize_schema","config":{"dialect":"openai_strict"}}]`, ProtocolResponses, codex, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := chainOf(t, tc.rules)
			x := begin(t, c, tc.proto, tc.body)
			want, err := x.RewriteRequest(tc.body)
			if err != nil || x.Invalid || bytes.Equal(want, tc.body) {
				t.Fatalf("RewriteRequest: %v, invalid %v, changed %v", err, x.Invalid, !bytes.Equal(want, tc.body))
			}
			wantApplied := len(x.Applied())
			y := begin(t, c, tc.proto, tc.body)
			rb, err := y.RewriteRequestBody(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if rb.Deferred() != tc.deferred {
				t.Fatalf("deferred = %v, want %v", rb.Deferred(), tc.deferred)
			}
			if rb.Len() != len(want) {
				t.Fatalf("Len() = %d, the body is %d bytes", rb.Len(), len(want))
			}
			if len(y.Applied()) != wantApplied {
				t.Fatalf("%d rules applied, RewriteRequest applied %d", len(y.Applied()), wantApplied)
			}
			if !bytes.Equal(rb.Bytes(), want) {
				t.Fatal("Bytes() differs from RewriteRequest's body")
			}
			for _, n := range []int{1, 4096, 32 << 10, 1 << 21} {
				if n == 1 && len(want) > 1<<20 {
					continue
				}
				got, err := io.ReadAll(io.LimitReader(&chunked{r: rb.NewReader(), n: n}, 1<<30))
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("reads of %d: %d bytes, %v; want the %d bytes of RewriteRequest", n, len(got), err, len(want))
				}
			}
			y.Release()
		})
	}
}

// chunked reads r at most n bytes at a time, as a transport's buffer does.
type chunked struct {
	r io.Reader
	n int
}

func (c *chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }
