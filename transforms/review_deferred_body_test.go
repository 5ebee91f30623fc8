package transforms

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// reviewCompare holds RewriteRequestBody's body (announced length, bytes
// read) to RewriteRequest's, with deferMin lowered so every rewrite of the
// last rule is left unbuilt.
func reviewCompare(t *testing.T, rules string, p Protocol, body string) (deferred bool) {
	t.Helper()
	defer func(m int) { deferMin = m }(deferMin)
	deferMin = 0
	c := chainOf(t, rules)
	x := begin(t, c, p, []byte(body))
	want, err := x.RewriteRequest([]byte(body))
	y := begin(t, c, p, []byte(body))
	rb, errB := y.RewriteRequestBody([]byte(body))
	if (err == nil) != (errB == nil) {
		t.Fatalf("RewriteRequest: %v, RewriteRequestBody: %v", err, errB)
	}
	if err != nil {
		return false
	}
	defer y.Release()
	got, _ := io.ReadAll(rb.NewReader())
	if rb.Len() != len(want) || len(got) != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("deferred %v: announced %d, read %d bytes, RewriteRequest %d bytes\nread: %s\nwant: %s",
			rb.Deferred(), rb.Len(), len(got), len(want), got, want)
	}
	return rb.Deferred()
}

// tools_plan's history rewrites (a renamed or flattened function_call, a
// degraded built-in call or output) go through ReplaceWith with estimated
// sizes, which ReplaceWith now marks Exact: the announced length of a
// deferred body is then wrong.
func TestReviewToolsPlanHistoryLength(t *testing.T) {
	for _, tc := range []struct{ name, rules, body string }{
		{"flattened namespace call",
			`[{"transform":"tools_plan","config":{"profile":"function_only","namespaces":"flatten"}}]`,
			`{"model":"m","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}],` +
				`"input":[{"type":"function_call","call_id":"c1","namespace":"ns","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`},
		{"degraded local_shell call",
			`[{"transform":"tools_plan","config":{"profile":"function_only"}}]`,
			`{"model":"m","tools":[{"type":"local_shell"}],` +
				`"input":[{"type":"local_shell_call","id":"ls_1","call_id":"c1","status":"completed","action":{"type":"exec","command":["ls","-la"]}},` +
				`{"type":"local_shell_call_output","id":"lso_1","call_id":"c1","output":"file1\nfile2"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reviewCompare(t, tc.rules, ProtocolResponses, tc.body)
		})
	}
}

// The same at the real threshold: a large body with a flattened call.
func TestReviewToolsPlanHistoryLengthLarge(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"model":"m","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}],"input":[`)
	for i := 0; b.Len() < 300<<10; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"function_call","call_id":"c%d","namespace":"ns","name":"f","arguments":"{\"x\":%d}"},{"type":"function_call_output","call_id":"c%d","output":"ok"}`, i, i, i)
	}
	b.WriteString(`]}`)
	body := []byte(b.String())
	c := chainOf(t, `[{"transform":"tools_plan","config":{"profile":"function_only","namespaces":"flatten"}}]`)
	x := begin(t, c, ProtocolResponses, body)
	want, err := x.RewriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	y := begin(t, c, ProtocolResponses, body)
	rb, err := y.RewriteRequestBody(body)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Release()
	got, _ := io.ReadAll(rb.NewReader())
	if rb.Len() != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("deferred %v: Content-Length would be %d, the reader gives %d bytes, RewriteRequest %d", rb.Deferred(), rb.Len(), len(got), len(want))
	}
}

// Converted history calls whose input is adversarial: the announced
// length must still be the bytes read.
func TestReviewCustomInputs(t *testing.T) {
	rules := `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`
	inputs := []string{
		`"plain"`, `"a\"b\\c\u0000\n"`, "\"tab\there\"", "\"nl\nhere\"", "\"\x01\x1f\"", "\"bad\xff\xfeutf8\"",
		`{"a": [1,` + "\n\t\r" + `2]}`, `123`, `null`, `true`, `[]`, `{"k":"v\"q\\"}`, `  "spaced"  `, "{\"k\":\"\xff\"}",
		`"\u2028\ud800"`, `-1.5e+10`,
	}
	for i, in := range inputs {
		t.Run(fmt.Sprintf("responses/%d", i), func(t *testing.T) {
			body := `{"model":"m","tools":[{"type":"custom","name":"apply_patch"}],"input":[{"type":"custom_tool_call","id":"ctc_1","call_id":"c1","name":"apply_patch","input":` + in + `},{"type":"custom_tool_call_output","id":"x","call_id":"c1","output":"ok"}]}`
			reviewCompare(t, rules, ProtocolResponses, body)
		})
		t.Run(fmt.Sprintf("chat/%d", i), func(t *testing.T) {
			body := `{"model":"m","tools":[{"type":"custom","custom":{"name":"apply_patch"}}],"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"custom","custom":{"name":"apply_patch","input":` + in + `}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`
			reviewCompare(t, rules, ProtocolChat, body)
		})
	}
	// Absent, repeated and escaped-key inputs, and namespaces.
	for i, body := range []string{
		`{"tools":[{"type":"custom","name":"p"}],"input":[{"type":"custom_tool_call","call_id":"c1","name":"p"}]}`,
		`{"tools":[{"type":"custom","name":"p"}],"input":[{"type":"custom_tool_call","call_id":"c1","name":"p","input":"a","input":{"b":1}}]}`,
		`{"tools":[{"type":"custom","name":"p"}],"input":[{"type":"custom_tool_call","call_id":"c1","name":"p","inp\u0075t":"a\"","input":"x"}]}`,
		`{"tools":[{"type":"namespace","name":"ns","tools":[{"type":"custom","name":"p"}]}],"input":[{"type":"custom_tool_call","call_id":"c1","namespace":"ns","name":"p","input":"q\"\\"}]}`,
		`{"tools":[{"type":"custom","name":"p"}],"input":[{"type":"custom_tool_call","call_id":"c1","name":"p","input":"a"},{"type":"custom_tool_call","call_id":"c1","name":"p","input":"b"}]}`,
	} {
		t.Run(fmt.Sprintf("responses-shape/%d", i), func(t *testing.T) {
			reviewCompare(t, rules, ProtocolResponses, body)
		})
	}
	for i, body := range []string{
		`{"tools":[{"type":"custom","custom":{"name":"p"}}],"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"custom","custom":{"name":"p"}}]}]}`,
		`{"tools":[{"type":"custom","custom":{"name":"p"}}],"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"custom","custom":{"name":"p","input":"a","input":{"x":"\""}}}]}]}`,
		`{"tools":[{"type":"custom","custom":{"name":"p"}}],"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"custom","custom":{"name":"p","input":"a"},"custom":{"name":"p","input":"bb\"\""}}]}]}`,
		`{"tools":[{"type":"custom","custom":{"name":"p"}}],"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"custom","custom":{"name":"p","inp\u0075t":"a\"\"\""}}]}]}`,
	} {
		t.Run(fmt.Sprintf("chat-shape/%d", i), func(t *testing.T) {
			reviewCompare(t, rules, ProtocolChat, body)
		})
	}
}
