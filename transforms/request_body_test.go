package transforms_test

import (
	"bytes"
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

// deferredBodyMatches holds RewriteRequestBody's body (announced length,
// bytes read) to RewriteRequest's, with every rewrite of the last rule left
// unbuilt, and fails the test on a mismatch.
func deferredBodyMatches(t *testing.T, rules string, p transforms.Protocol, body string) (deferred bool) {
	t.Helper()
	deferred, msg := transformtest.RequestBodyMismatch(t, transformtest.Chain(t, rules), p, []byte(body), true)
	if msg != "" {
		t.Fatal(msg)
	}
	return deferred
}

// TestDeferredBodyLengthOfToolsPlanHistory: tools_plan's history rewrites
// (a renamed or flattened function_call, a degraded built-in call or
// output) go through ReplaceWith with estimated sizes; the announced
// length of the deferred body must still be the bytes read.
func TestDeferredBodyLengthOfToolsPlanHistory(t *testing.T) {
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
			deferredBodyMatches(t, tc.rules, transforms.ProtocolResponses, tc.body)
		})
	}
}

// TestDeferredBodyLengthOfToolsPlanHistoryLarge: the same without forcing
// the deferral, on a body of flattened calls over the default threshold
// (256 KiB), deferred for its size.
func TestDeferredBodyLengthOfToolsPlanHistoryLarge(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"model":"m","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}],"input":[`)
	for i := 0; b.Len() < 300<<10; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"function_call","call_id":"c%d","namespace":"ns","name":"f","arguments":"{\"x\":%d}"},{"type":"function_call_output","call_id":"c%d","output":"ok"}`, i, i, i)
	}
	b.WriteString(`]}`)
	c := transformtest.Chain(t, `[{"transform":"tools_plan","config":{"profile":"function_only","namespaces":"flatten"}}]`)
	if _, msg := transformtest.RequestBodyMismatch(t, c, transforms.ProtocolResponses, []byte(b.String()), false); msg != "" {
		t.Fatal(msg)
	}
}

// TestDeferredBodyLengthOfAdversarialCustomInputs: converted history calls
// whose input is adversarial (escapes, control characters, invalid UTF-8,
// non-string JSON, absent, repeated or escaped keys, namespaces): the
// announced length must still be the bytes read.
func TestDeferredBodyLengthOfAdversarialCustomInputs(t *testing.T) {
	rules := `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`
	inputs := []string{
		`"plain"`, `"a\"b\\c\u0000\n"`, "\"tab\there\"", "\"nl\nhere\"", "\"\x01\x1f\"", "\"bad\xff\xfeutf8\"",
		`{"a": [1,` + "\n\t\r" + `2]}`, `123`, `null`, `true`, `[]`, `{"k":"v\"q\\"}`, `  "spaced"  `, "{\"k\":\"\xff\"}",
		`"\u2028\ud800"`, `-1.5e+10`,
	}
	for i, in := range inputs {
		t.Run(fmt.Sprintf("responses/%d", i), func(t *testing.T) {
			body := `{"model":"m","tools":[{"type":"custom","name":"apply_patch"}],"input":[{"type":"custom_tool_call","id":"ctc_1","call_id":"c1","name":"apply_patch","input":` + in + `},{"type":"custom_tool_call_output","id":"x","call_id":"c1","output":"ok"}]}`
			deferredBodyMatches(t, rules, transforms.ProtocolResponses, body)
		})
		t.Run(fmt.Sprintf("chat/%d", i), func(t *testing.T) {
			body := `{"model":"m","tools":[{"type":"custom","custom":{"name":"apply_patch"}}],"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"custom","custom":{"name":"apply_patch","input":` + in + `}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`
			deferredBodyMatches(t, rules, transforms.ProtocolChat, body)
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
			deferredBodyMatches(t, rules, transforms.ProtocolResponses, body)
		})
	}
	for i, body := range []string{
		`{"tools":[{"type":"custom","custom":{"name":"p"}}],"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"custom","custom":{"name":"p"}}]}]}`,
		`{"tools":[{"type":"custom","custom":{"name":"p"}}],"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"custom","custom":{"name":"p","input":"a","input":{"x":"\""}}}]}]}`,
		`{"tools":[{"type":"custom","custom":{"name":"p"}}],"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"custom","custom":{"name":"p","input":"a"},"custom":{"name":"p","input":"bb\"\""}}]}]}`,
		`{"tools":[{"type":"custom","custom":{"name":"p"}}],"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"custom","custom":{"name":"p","inp\u0075t":"a\"\"\""}}]}]}`,
	} {
		t.Run(fmt.Sprintf("chat-shape/%d", i), func(t *testing.T) {
			deferredBodyMatches(t, rules, transforms.ProtocolChat, body)
		})
	}
}

// TestDeferredBodyMatchesForEveryRequestRule runs every request rule, alone
// and after the custom conversion, over a set of bodies with every rewrite
// left unbuilt, and holds the bytes read and the announced length to
// RewriteRequest's. It skips no rule and no body.
func TestDeferredBodyMatchesForEveryRequestRule(t *testing.T) {
	var bodies []string
	bodies = append(bodies, transformtest.ToolBodies()...)
	codex, _ := transformtest.CodexLikeRequest(t, 64<<10)
	bodies = append(bodies, string(codex), string(chatCustomRequest(16<<10)))
	bodies = append(bodies,
		`{"model":"m","tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"custom","name":"p"}]},{"type":"web_search"},{"type":"local_shell"},{"type":"shell"},{"type":"computer"},{"type":"tool_search"},{"type":"apply_patch"}],"tool_choice":"required",`+
			`"input":[{"type":"custom_tool_call","call_id":"c0","namespace":"ns","name":"p","input":"a\"b"},{"type":"custom_tool_call_output","call_id":"c0","output":"ok"},`+
			`{"type":"web_search_call","id":"ws","status":"completed"},`+
			`{"type":"shell_call","call_id":"s1","action":{"commands":["ls"]}},{"type":"shell_call_output","call_id":"s1","output":[{"stdout":"a","stderr":"","outcome":{"type":"exit","exit_code":0}}]},`+
			`{"type":"apply_patch_call","call_id":"a1","operation":{"type":"create_file","path":"x","diff":"+x"}},{"type":"apply_patch_call_output","call_id":"a1","output":"done"},`+
			`{"type":"tool_search_call","call_id":"t1","arguments":"q"},{"type":"tool_search_output","call_id":"t1","tools":[]},`+
			`{"type":"function_call","call_id":"f1","namespace":"ns","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"f1","output":"ok"}]}`,
		`{"model":"m","tools":[{"type":"function","function":{"name":"a.b c","parameters":{"type":"object","properties":{"x":{"type":"string"}}}}},{"type":"custom","custom":{"name":"p"}}],`+
			`"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"a.b c","arguments":"{}"}},{"id":"c2","type":"custom","custom":{"name":"p","input":"x\\y"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`,
	)
	custom := `{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}`
	rules := []string{
		`{"transform":"tools_plan","config":{"profile":"function_only"}}`,
		`{"transform":"tools_plan","config":{"profile":"openai_chat"}}`,
		`{"transform":"tools_plan","config":{"profile":"kimi","namespaces":"flatten"}}`,
		`{"transform":"tools_plan","config":{"profile":"gemini"}}`,
		`{"transform":"tools_filter","config":{"deny":["exec_command","f"]}}`,
		`{"transform":"tools_filter","config":{"allow":["apply_patch"]}}`,
		`{"transform":"tools_normalize_schema","config":{"dialect":"openai_strict"}}`,
		`{"transform":"field_set","config":{"path":"store","value":false}}`,
		custom,
	}
	var failed []string
	for _, r := range rules {
		for _, chain := range []string{"[" + r + "]", "[" + custom + "," + r + "]"} {
			for _, p := range []transforms.Protocol{transforms.ProtocolResponses, transforms.ProtocolChat} {
				for i, body := range bodies {
					name := fmt.Sprintf("%s/%v/%d", chain, p, i)
					if msg := deferredBodyMismatch(t, chain, p, body); msg != "" {
						failed = append(failed, name+": "+msg)
					}
				}
			}
		}
	}
	if len(failed) > 0 {
		t.Fatalf("%d mismatches:\n%s", len(failed), strings.Join(failed, "\n"))
	}
}

// deferredBodyMismatch is deferredBodyMatches's comparison, returning the
// mismatch ("" when none) instead of failing the test.
func deferredBodyMismatch(t *testing.T, rules string, p transforms.Protocol, body string) string {
	_, msg := transformtest.RequestBodyMismatch(t, transformtest.Chain(t, rules), p, []byte(body), true)
	return msg
}

// TestDeferredBodyConcurrentReadsDuringResponse reads a deferred body on
// two goroutines at once (a retry while the first read is still going)
// while the handler's goroutine goes on into the response phase: each read
// gets RewriteRequest's bytes, and under -race the detector checks the
// reads share no unsynchronised state with the response phase.
func TestDeferredBodyConcurrentReadsDuringResponse(t *testing.T) {
	codex, _ := transformtest.CodexLikeRequest(t, 1<<20)
	for _, rules := range []string{
		`[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`,
		`[{"transform":"tools_plan","config":{"profile":"function_only"}}]`,
	} {
		c := transformtest.Chain(t, rules)
		x := transformtest.Begin(t, c, transforms.ProtocolResponses, codex)
		want, err := x.RewriteRequest(codex)
		if err != nil {
			t.Fatal(err)
		}
		y := transformtest.Begin(t, c, transforms.ProtocolResponses, codex)
		rb, err := y.RewriteRequestBody(codex)
		if err != nil || !rb.Deferred() {
			t.Fatalf("%v, deferred %v", err, rb.Deferred())
		}
		done := make(chan []byte, 2)
		for range 2 {
			go func() {
				b, _ := io.ReadAll(&chunked{r: rb.NewReader(), n: 4096})
				done <- b
			}()
		}
		resp := `{"id":"r","object":"response","output":[{"type":"function_call","call_id":"call_x","name":"apply_patch","arguments":"{\"input\":\"x\"}"}]}`
		if y.WantsResponse() {
			if _, err := y.RewriteResponse([]byte(resp)); err != nil {
				t.Fatal(err)
			}
		}
		y2 := transformtest.Begin(t, c, transforms.ProtocolResponses, codex)
		if _, err := y2.RewriteRequestBody(codex); err != nil {
			t.Fatal(err)
		}
		transformtest.Replay(t, y2, transformtest.SSE(`{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc","call_id":"c","name":"apply_patch","arguments":""}}`,
			`{"type":"response.function_call_arguments.delta","output_index":0,"item_id":"fc","delta":"{\"input\":\"x\"}"}`,
			`{"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","id":"fc","call_id":"c","name":"apply_patch","arguments":"{\"input\":\"x\"}"}}`), 7)
		y2.Release()
		for range 2 {
			if got := <-done; !bytes.Equal(got, want) {
				t.Fatalf("%s: a concurrent read gave %d bytes, want %d", rules, len(got), len(want))
			}
		}
		y.Release()
	}
}

// chunked reads r at most n bytes at a time, as a transport's buffer does.
type chunked struct {
	r io.Reader
	n int
}

func (c *chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }
