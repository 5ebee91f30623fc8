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
	set := `{"transform":"field_set","config":{"path":"store","value":true}}`
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
		// The last rule's rewrite is the one left unbuilt: field_set's.
		{"a rule after the conversion", "[" + custom + "," + set + "]", ProtocolResponses, codex, true},
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
			body := tc.body
			deferred, msg := requestBodyMismatch(t, chainOf(t, tc.rules), tc.proto, body, false, 1, 4096, 32<<10, 1<<21)
			if msg != "" {
				t.Fatal(msg)
			}
			if deferred != tc.deferred {
				t.Fatalf("deferred = %v, want %v", deferred, tc.deferred)
			}
		})
	}
}

// requestBodyMismatch rewrites body through RewriteRequest and through
// RewriteRequestBody, each on a fresh exchange of c, and says how the
// second differs ("" when it does not): the outcome, the rules applied,
// the announced length, Bytes, and the bytes read in reads of each size
// given (a body over 1 MiB skips reads of one byte). With deferAll every
// rewrite of the last rule is left unbuilt, whatever its size.
func requestBodyMismatch(t testing.TB, c *Chain, p Protocol, body []byte, deferAll bool, reads ...int) (deferred bool, msg string) {
	t.Helper()
	if deferAll {
		defer func(m int) { deferMin = m }(deferMin)
		deferMin = 0
	}
	x := begin(t, c, p, body)
	want, err := x.RewriteRequest(body)
	y := begin(t, c, p, body)
	rb, errB := y.RewriteRequestBody(body)
	if (err == nil) != (errB == nil) {
		return false, fmt.Sprintf("RewriteRequest: %v, RewriteRequestBody: %v", err, errB)
	}
	if err != nil {
		return false, ""
	}
	defer y.Release()
	if a, b := len(x.Applied()), len(y.Applied()); a != b {
		return rb.Deferred(), fmt.Sprintf("%d rules applied, RewriteRequest applied %d", b, a)
	}
	if rb.Len() != len(want) {
		return rb.Deferred(), fmt.Sprintf("deferred %v: Len() = %d, RewriteRequest's body is %d bytes", rb.Deferred(), rb.Len(), len(want))
	}
	if !bytes.Equal(rb.Bytes(), want) {
		return rb.Deferred(), "Bytes() differs from RewriteRequest's body"
	}
	if len(reads) == 0 {
		reads = []int{32 << 10}
	}
	for _, n := range reads {
		if n == 1 && len(want) > 1<<20 {
			continue
		}
		got, err := io.ReadAll(&chunked{r: rb.NewReader(), n: n})
		if err != nil || !bytes.Equal(got, want) {
			return rb.Deferred(), fmt.Sprintf("deferred %v, reads of %d: %d bytes, %v; want the %d bytes of RewriteRequest\nread: %.300s\nwant: %.300s",
				rb.Deferred(), n, len(got), err, len(want), got, want)
		}
	}
	return rb.Deferred(), ""
}

// chunked reads r at most n bytes at a time, as a transport's buffer does.
type chunked struct {
	r io.Reader
	n int
}

func (c *chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }
