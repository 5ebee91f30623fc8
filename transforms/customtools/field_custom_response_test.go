package customtools

import (
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

const sampleRequest = `{"model":"m","tools":[{"type":"custom","name":"patch"},{"type":"function","name":"read","parameters":{}},{"type":"custom","name":"apply_patch"}],"tool_choice":{"type":"custom","name":"patch"}}`

func TestResponseRestoresOnlyConvertedCalls(t *testing.T) {
	x := transformtest.ExchangeAfter(t, wildcard, sampleRequest)
	body := `{"id":"resp_1","object":"response","status":"completed","tool_choice":{"type":"function","name":"patch"},"tools":[{"type":"function","name":"patch"}],"output":[` +
		`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]},` +
		`{"id":"fc_1","type":"function_call","status":"completed","call_id":"c1","name":"patch","arguments":"{\"input\":\"raw input\"}"},` +
		`{"id":"fc_2","type":"function_call","status":"completed","call_id":"c2","name":"read","arguments":"{\"input\":\"native\"}"},` +
		`{"id":"fc_3","type":"function_call","status":"completed","call_id":"c3","name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch ***\\n*** Add File: x\\nhello\\n*** End Patch ***\"}"}` +
		`],"usage":{"input_tokens":1}}`
	out, err := x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"id":"resp_1","object":"response","status":"completed","tool_choice":{"type":"custom","name":"patch"},"tools":[{"type":"custom","name":"patch"},{"type":"function","name":"read","parameters":{}},{"type":"custom","name":"apply_patch"}],"output":[`+
		`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"output_text","text":"hi"}]},`+
		`{"id":"fc_1","type":"custom_tool_call","status":"completed","call_id":"c1","name":"patch","input":"raw input"},`+
		`{"id":"fc_2","type":"function_call","status":"completed","call_id":"c2","name":"read","arguments":"{\"input\":\"native\"}"},`+
		`{"id":"fc_3","type":"custom_tool_call","status":"completed","call_id":"c3","name":"apply_patch","input":"*** Begin Patch\n*** Add File: x\n+hello\n*** End Patch\n"}`+
		`],"usage":{"input_tokens":1}}`)
	if x.Counts().Restored != 2 {
		t.Fatalf("restored = %d, want 2", x.Counts().Restored)
	}
}

func TestResponseWithoutRequestRecordIsUntouched(t *testing.T) {
	body := `{"output":[{"type":"function_call","call_id":"c1","name":"patch","arguments":"{\"input\":\"x\"}"}]}`
	for _, tc := range []struct{ rules, request string }{
		// The request declared no custom tool, so the record is empty.
		{wildcard, `{"model":"m","tools":[{"type":"function","name":"other"}]}`},
		// The rule is scoped to other models.
		{`[{"transform":"field_custom_tools_to_function","models":["other"],"config":{"names":["*"]}}]`, `{"model":"m","tools":[{"type":"custom","name":"patch"}]}`},
	} {
		x := transformtest.ExchangeAfter(t, tc.rules, tc.request)
		out, err := x.RewriteResponse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != body {
			t.Fatalf("%s: changed: %s", tc.rules, out)
		}
	}
}

func TestResponseNamespaceIdentity(t *testing.T) {
	req := `{"tools":[{"type":"namespace","name":"editing","tools":[{"type":"custom","name":"patch"},{"type":"namespace","name":"inner","tools":[{"type":"custom","name":"deep"}]}]},{"type":"namespace","name":"native","tools":[{"type":"function","name":"patch"}]}]}`
	x := transformtest.ExchangeAfter(t, wildcard, req)
	body := `{"output":[` +
		`{"type":"function_call","call_id":"1","name":"patch","arguments":"{\"input\":\"a\"}"},` + // ambiguous: not restored
		`{"type":"function_call","call_id":"2","name":"patch","namespace":"editing","arguments":"{\"input\":\"b\"}"},` +
		`{"type":"function_call","call_id":"3","name":"patch","namespace":"native","arguments":"{\"input\":\"c\"}"},` +
		`{"type":"function_call","call_id":"4","name":"deep","arguments":"{\"input\":\"d\"}"}` + // unambiguous: namespace restored
		`]}`
	out, err := x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"output":[`+
		`{"type":"function_call","call_id":"1","name":"patch","arguments":"{\"input\":\"a\"}"},`+
		`{"type":"custom_tool_call","call_id":"2","name":"patch","namespace":"editing","input":"b"},`+
		`{"type":"function_call","call_id":"3","name":"patch","namespace":"native","arguments":"{\"input\":\"c\"}"},`+
		`{"type":"custom_tool_call","call_id":"4","name":"deep","input":"d","namespace":"inner"}`+
		`]}`)
}

func TestUnwrapArgs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"input":"plain"}`, "plain"},
		{` {"input":"多行\ninput"} `, "多行\ninput"},
		{`{"input":"{\"input\":\"literal JSON\"}"}`, `{"input":"literal JSON"}`},
		{`{"patch":"*** Begin Patch\n*** End Patch"}`, "*** Begin Patch\n*** End Patch"},
		{`{"patch":"not a patch"}`, `{"patch":"not a patch"}`},
		{`{"command":"x","input":"wins"}`, "wins"},
		{`{"content":"*** Begin Patch\nx"}`, "*** Begin Patch\nx"},
		{`"a JSON string\nline"`, "a JSON string\nline"},
		{`{}`, `{}`},
		{`{"input":5}`, `{"input":5}`},
		{`[1,2]`, `[1,2]`},
		{`not json {`, `not json {`},
		{``, ``},
		{`{"input":"emoji 🦀 \ud83e\udd80 quote \" slash \\"}`, "emoji 🦀 🦀 quote \" slash \\"},
	} {
		if got := string(unwrapArgs([]byte(tc.in))); got != tc.want {
			t.Errorf("unwrapArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Codex's Responses-lite mode puts every tool in the "functions" namespace,
// while history calls may name none: the un-namespaced call the upstream
// returns belongs to the one converted definition of that name.
func TestResponseNamespacedDefinitionWithBareHistory(t *testing.T) {
	req := `{"tools":[{"type":"namespace","name":"functions","tools":[{"type":"custom","name":"apply_patch"}]}],"input":[{"type":"custom_tool_call","call_id":"h","name":"apply_patch","input":"x"}]}`
	x := transformtest.ExchangeAfter(t, `[{"transform":"field_custom_tools_to_function"}]`, req)
	out, err := x.RewriteResponse([]byte(`{"output":[{"type":"function_call","call_id":"c","name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** Delete File: a\\n*** End Patch\"}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"output":[{"type":"custom_tool_call","call_id":"c","name":"apply_patch","input":"*** Begin Patch\n*** Delete File: a\n*** End Patch\n","namespace":"functions"}]}`)
}

// A restored patch that normalisation cannot bring into the grammar still
// reaches the client, and is counted and logged.
func TestInvalidPatchIsCounted(t *testing.T) {
	for _, tc := range []struct {
		input   string
		invalid int
	}{
		{"*** Begin Patch\n*** Add File: a\nx\n*** End Patch", 0},
		{"*** Begin Patch\n*** Frobnicate File: a\n*** End Patch", 1},
	} {
		x := transformtest.ExchangeAfter(t, wildcard, sampleRequest)
		x.Explain = true
		body := `{"output":[{"type":"function_call","call_id":"c","name":"apply_patch","arguments":` + transformtest.JSONString(`{"input":`+transformtest.JSONString(tc.input)+`}`) + `}]}`
		if _, err := x.RewriteResponse([]byte(body)); err != nil {
			t.Fatal(err)
		}
		var logged int
		for _, d := range x.Decisions() {
			if d.Action == "patch_invalid" && d.Tool == "apply_patch" && strings.HasPrefix(d.Reason, "line ") {
				logged++
			}
		}
		if x.Counts().PatchInvalid != tc.invalid || logged != tc.invalid || x.Counts().Restored != 1 {
			t.Fatalf("%q: invalid %d, logged %d, restored %d", tc.input, x.Counts().PatchInvalid, logged, x.Counts().Restored)
		}
	}
}
