package customtools

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

const genericParams = `{"type":"object","properties":{"input":{"type":"string","description":"The complete input string for this custom tool."}},"required":["input"],"additionalProperties":false}`

func patchParams() string {
	d, _ := json.Marshal(patchInputDescription)
	return `{"type":"object","properties":{"input":{"type":"string","description":` + string(d) + `}},"required":["input"],"additionalProperties":false}`
}

func rewrite(t *testing.T, rules, body string) (string, *transforms.Exchange, error) {
	t.Helper()
	c := transformtest.Chain(t, rules)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(body))
	out, err := x.RewriteRequest([]byte(body))
	return string(out), x, err
}

const wildcard = `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`

func TestRequestResponses(t *testing.T) {
	tests := []struct {
		name  string
		rules string
		body  string
		want  string
	}{
		{
			name:  "custom tool becomes generic function, extra fields kept, grammar dropped",
			rules: wildcard,
			body:  `{"model":"m","tools":[{"type":"custom","name":"run_sql","description":"SQL","format":{"type":"grammar","syntax":"lark","definition":"start: x"},"defer_loading":true,"allowed_callers":["direct"]}]}`,
			want:  `{"model":"m","tools":[{"type":"function","name":"run_sql","description":"SQL","defer_loading":true,"allowed_callers":["direct"],"parameters":` + genericParams + `,"strict":false}]}`,
		},
		{
			name:  "apply_patch gets the patch schema and usage text after a blank line",
			rules: `[{"transform":"field_custom_tools_to_function"}]`,
			body:  `{"model":"m","tools":[{"type":"custom","name":"apply_patch","description":"Edit files.","format":{"type":"text"}}]}`,
			want:  `{"model":"m","tools":[{"type":"function","name":"apply_patch","description":` + transformtest.JSONString("Edit files.\n\n"+patchUsage) + `,"parameters":` + patchParams() + `,"strict":false}]}`,
		},
		{
			name:  "apply_patch without description gets the usage text alone",
			rules: `[{"transform":"field_custom_tools_to_function"}]`,
			body:  `{"tools":[{"type":"custom","name":"apply_patch"}]}`,
			want:  `{"tools":[{"type":"function","name":"apply_patch","description":` + transformtest.JSONString(patchUsage) + `,"parameters":` + patchParams() + `,"strict":false}]}`,
		},
		{
			name:  "usage text is not appended twice",
			rules: `[{"transform":"field_custom_tools_to_function"}]`,
			body:  `{"tools":[{"type":"custom","name":"apply_patch","description":` + transformtest.JSONString("Edit.\n\n"+patchUsage) + `}]}`,
			want:  `{"tools":[{"type":"function","name":"apply_patch","description":` + transformtest.JSONString("Edit.\n\n"+patchUsage) + `,"parameters":` + patchParams() + `,"strict":false}]}`,
		},
		{
			name:  "default names convert only apply_patch",
			rules: `[{"transform":"field_custom_tools_to_function"}]`,
			body:  `{"tools":[{"type":"custom","name":"exec"},{"type":"function","name":"read","parameters":{}}]}`,
			want:  `{"tools":[{"type":"custom","name":"exec"},{"type":"function","name":"read","parameters":{}}]}`,
		},
		{
			name:  "namespaces at any depth",
			rules: wildcard,
			body:  `{"tools":[{"type":"namespace","name":"editing","description":"d","tools":[{"type":"custom","name":"patch"},{"type":"namespace","name":"inner","tools":[{"type":"custom","name":"deep"}]}]},{"type":"namespace","name":"native","tools":[{"type":"function","name":"patch","parameters":{}}]}]}`,
			want:  `{"tools":[{"type":"namespace","name":"editing","description":"d","tools":[{"type":"function","name":"patch","parameters":` + genericParams + `,"strict":false},{"type":"namespace","name":"inner","tools":[{"type":"function","name":"deep","parameters":` + genericParams + `,"strict":false}]}]},{"type":"namespace","name":"native","tools":[{"type":"function","name":"patch","parameters":{}}]}]}`,
		},
		{
			name:  "additional_tools input items",
			rules: wildcard,
			body:  `{"input":[{"type":"additional_tools","role":"developer","tools":[{"type":"custom","name":"exec","format":{"type":"text"}}]}]}`,
			want:  `{"input":[{"type":"additional_tools","role":"developer","tools":[{"type":"function","name":"exec","parameters":` + genericParams + `,"strict":false}]}]}`,
		},
		{
			name:  "history: wrapped exactly once, ids dropped, call_id and unknown fields kept, results follow call ids in any order",
			rules: wildcard,
			body: `{"tools":[{"type":"custom","name":"patch"}],"input":[` +
				`{"type":"custom_tool_call_output","id":"ctco_1","call_id":"c1","output":"done","extra":17},` +
				`{"type":"custom_tool_call","id":"ctc_1","status":"completed","call_id":"c1","name":"patch","input":"{\"input\":\"literal JSON\"}","future_item":{"a":1}},` +
				`{"type":"custom_tool_call_output","id":"ctco_2","call_id":"other","output":"x"}]}`,
			want: `{"tools":[{"type":"function","name":"patch","parameters":` + genericParams + `,"strict":false}],"input":[` +
				`{"type":"function_call_output","call_id":"c1","output":"done","extra":17},` +
				`{"type":"function_call","status":"completed","call_id":"c1","name":"patch","arguments":"{\"input\":\"{\\\"input\\\":\\\"literal JSON\\\"}\"}","future_item":{"a":1}},` +
				`{"type":"custom_tool_call_output","id":"ctco_2","call_id":"other","output":"x"}]}`,
		},
		{
			name:  "unicode, quotes and backslashes survive wrapping byte for byte",
			rules: wildcard,
			body:  `{"input":[{"type":"custom_tool_call","call_id":"c","name":"x","input":"多行\ninput \"q\" \\ 🦀 \u00e9"}]}`,
			want:  `{"input":[{"type":"function_call","call_id":"c","name":"x","arguments":"{\"input\":\"多行\\ninput \\\"q\\\" \\\\ 🦀 \\u00e9\"}"}]}`,
		},
		{
			name:  "unselected custom items keep their shape and ids",
			rules: `[{"transform":"field_custom_tools_to_function","config":{"names":["apply_patch"]}}]`,
			body:  `{"input":[{"type":"custom_tool_call","id":"ctc_9","call_id":"c9","name":"exec","input":"1"},{"type":"custom_tool_call_output","id":"ctco_9","call_id":"c9","output":"ok"},{"type":"function_call","id":"fc_1","call_id":"f","name":"read","arguments":"{}"}]}`,
			want:  `{"input":[{"type":"custom_tool_call","id":"ctc_9","call_id":"c9","name":"exec","input":"1"},{"type":"custom_tool_call_output","id":"ctco_9","call_id":"c9","output":"ok"},{"type":"function_call","id":"fc_1","call_id":"f","name":"read","arguments":"{}"}]}`,
		},
		{
			name:  "orphan result converts only when its explicit identity names a converted definition",
			rules: wildcard,
			body:  `{"tools":[{"type":"custom","name":"patch","namespace":"ns"}],"input":[{"type":"custom_tool_call_output","id":"a","call_id":"x1","name":"patch","namespace":"ns","output":"1"},{"type":"custom_tool_call_output","id":"b","call_id":"x2","name":"patch","namespace":"other","output":"2"}]}`,
			want:  `{"tools":[{"type":"function","name":"patch","namespace":"ns","parameters":` + genericParams + `,"strict":false}],"input":[{"type":"function_call_output","call_id":"x1","name":"patch","namespace":"ns","output":"1"},{"type":"custom_tool_call_output","id":"b","call_id":"x2","name":"patch","namespace":"other","output":"2"}]}`,
		},
		{
			name:  "tool_choice custom becomes function",
			rules: wildcard,
			body:  `{"tools":[{"type":"custom","name":"grammar_tool"}],"tool_choice":{"type":"custom","name":"grammar_tool"}}`,
			want:  `{"tools":[{"type":"function","name":"grammar_tool","parameters":` + genericParams + `,"strict":false}],"tool_choice":{"type":"function","name":"grammar_tool"}}`,
		},
		{
			name:  "tool_choice with explicit namespace and nested custom object",
			rules: wildcard,
			body:  `{"tools":[{"type":"namespace","name":"ns","tools":[{"type":"custom","name":"patch"}]}],"tool_choice":{"type":"custom","namespace":"ns","custom":{"name":"patch"}}}`,
			want:  `{"tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"patch","parameters":` + genericParams + `,"strict":false}]}],"tool_choice":{"type":"function","namespace":"ns","function":{"name":"patch"}}}`,
		},
		{
			name:  "allowed_tools entries convert; unknown tools and extension payloads do not",
			rules: wildcard,
			body:  `{"tools":[{"type":"custom","name":"patch"},{"type":"function","name":"read","parameters":{}}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"custom","custom":{"name":"patch","opaque":7}},{"type":"custom","name":"patch"},{"type":"function","name":"read"},{"type":"custom","name":"unknown"},{"type":"mcp","server_label":"deepwiki"}],"extension":{"type":"custom","name":"patch"}}}`,
			want:  `{"tools":[{"type":"function","name":"patch","parameters":` + genericParams + `,"strict":false},{"type":"function","name":"read","parameters":{}}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","function":{"name":"patch","opaque":7}},{"type":"function","name":"patch"},{"type":"function","name":"read"},{"type":"custom","name":"unknown"},{"type":"mcp","server_label":"deepwiki"}],"extension":{"type":"custom","name":"patch"}}}`,
		},
		{
			name:  "string tool_choice untouched; built-in tools untouched",
			rules: wildcard,
			body:  `{"tools":[{"type":"web_search","external_web_access":false},{"type":"tool_search","execution":"client"},{"type":"local_shell"},{"type":"custom","name":"x"}],"tool_choice":"required"}`,
			want:  `{"tools":[{"type":"web_search","external_web_access":false},{"type":"tool_search","execution":"client"},{"type":"local_shell"},{"type":"function","name":"x","parameters":` + genericParams + `,"strict":false}],"tool_choice":"required"}`,
		},
		{
			name:  "empty names list is a no-op",
			rules: `[{"transform":"field_custom_tools_to_function","config":{"names":[]}}]`,
			body:  `{"tools":[{"type":"custom","name":"apply_patch"}]}`,
			want:  `{"tools":[{"type":"custom","name":"apply_patch"}]}`,
		},
		{
			name:  "two rules chain: each converts its own names",
			rules: `[{"transform":"field_custom_tools_to_function","config":{"names":["a"]}},{"transform":"field_custom_tools_to_function","config":{"names":["b"]}}]`,
			body:  `{"tools":[{"type":"custom","name":"a"},{"type":"custom","name":"b"},{"type":"custom","name":"c"}]}`,
			want:  `{"tools":[{"type":"function","name":"a","parameters":` + genericParams + `,"strict":false},{"type":"function","name":"b","parameters":` + genericParams + `,"strict":false},{"type":"custom","name":"c"}]}`,
		},
		{
			name:  "a rule scoped to other models does nothing",
			rules: `[{"transform":"field_custom_tools_to_function","models":["deepseek-*"],"config":{"names":["*"]}}]`,
			body:  `{"model":"gpt-5.5","tools":[{"type":"custom","name":"a"}]}`,
			want:  `{"model":"gpt-5.5","tools":[{"type":"custom","name":"a"}]}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := rewrite(t, tc.rules, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			transformtest.JSONEqual(t, []byte(out), tc.want)
		})
	}
}

// Bytes outside the rewritten values stay exactly as the client sent them,
// whitespace and key order included.
func TestRequestTouchesOnlyChangedBytes(t *testing.T) {
	body := "{ \"model\" : \"m\",\n \"input\": [ {\"type\":\"message\", \"content\":\"héllo \\u00e9\"} ],\n \"tools\":[ {\"type\":\"custom\",\"name\":\"x\"} , {\"type\":\"function\" , \"name\":\"y\"} ], \"z\": 1.50e3 }"
	out, _, err := rewrite(t, wildcard, body)
	if err != nil {
		t.Fatal(err)
	}
	want := "{ \"model\" : \"m\",\n \"input\": [ {\"type\":\"message\", \"content\":\"héllo \\u00e9\"} ],\n \"tools\":[ {\"type\":\"function\",\"name\":\"x\",\"parameters\":" + genericParams + ",\"strict\":false} , {\"type\":\"function\" , \"name\":\"y\"} ], \"z\": 1.50e3 }"
	if out != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
}

func TestRequestWithoutCustomToolsIsReturnedAsIs(t *testing.T) {
	body := []byte(`{"model":"m","tools":[{"type":"function","name":"f"}],"input":[{"type":"function_call","call_id":"a","name":"f","arguments":"{}"}]}`)
	c := transformtest.Chain(t, wildcard)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, body)
	out, err := x.RewriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonspan.SameSlice(out, body) {
		t.Fatalf("body was copied or changed: %s", out)
	}
	if x.WantsResponse() {
		t.Fatal("response phase wanted although nothing was converted")
	}
}

func TestRequestConflictRejectsBeforeMutation(t *testing.T) {
	for _, body := range []string{
		`{"tools":[{"type":"custom","name":"exec"},{"type":"function","name":"exec","parameters":{}}]}`,
		`{"tools":[{"type":"namespace","name":"ns","tools":[{"type":"custom","name":"exec"}]},{"type":"function","name":"exec","namespace":"ns"}]}`,
	} {
		c := transformtest.Chain(t, wildcard)
		x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(body))
		out, err := x.RewriteRequest([]byte(body))
		var e *transforms.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Code != "custom_tool_conflict" {
			t.Fatalf("%s: got %v, %s", body, err, out)
		}
		if !strings.Contains(e.Message, `exec"`) {
			t.Fatalf("message does not name the tool: %s", e.Message)
		}
		if x.WantsResponse() {
			t.Fatal("a rejected request must not leave a conversion record")
		}
		transformtest.JSONEqual(t, e.JSON(), `{"error":{"message":`+transformtest.JSONString(e.Message)+`,"type":"invalid_request_error","param":`+transformtest.JSONString(e.Param)+`,"code":"custom_tool_conflict"}}`)
	}
	// History items never make a request fail. A function call of a
	// converted tool (one a client kept unrestored) stays as it is, and
	// later calls of the tool are restored.
	x := transformtest.ExchangeAfter(t, wildcard, `{"tools":[{"type":"custom","name":"exec"}],"input":[{"type":"function_call","call_id":"a","name":"exec","arguments":"{}"}]}`)
	out, err := x.RewriteResponse([]byte(`{"output":[{"type":"function_call","call_id":"b","name":"exec","arguments":"{\"input\":\"ls\"}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"output":[{"type":"custom_tool_call","call_id":"b","name":"exec","input":"ls"}]}`)
	// A custom call in the history of a tool now declared as a function
	// goes upstream as a function call; the function's calls stay
	// functions.
	body := `{"tools":[{"type":"function","name":"exec"}],"input":[{"type":"custom_tool_call","call_id":"a","name":"exec","input":"x"}]}`
	got, x, err := rewrite(t, wildcard, body)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(got), `{"tools":[{"type":"function","name":"exec"}],"input":[{"type":"function_call","call_id":"a","name":"exec","arguments":"{\"input\":\"x\"}"}]}`)
	if x.WantsResponse() {
		t.Fatal("a native function's calls must not be restored")
	}
	// The same name in another namespace is a different identity.
	if _, _, err := rewrite(t, wildcard, `{"tools":[{"type":"custom","name":"exec"},{"type":"function","name":"exec","namespace":"other"}]}`); err != nil {
		t.Fatalf("different namespaces must not conflict: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ rules, want string }{
		{`[{"transform":"nope"}]`, `rule 0 (nope): unknown transform "nope"`},
		{`[{"transform":"field_custom_tools_to_function","config":{"names":[""]}}]`, `rule 0 (field_custom_tools_to_function): provision llm_transform.transforms.field_custom_tools_to_function: names: empty tool name`},
		{`[{"transform":"field_custom_tools_to_function","config":{"nmaes":["x"]}}]`, `rule 0 (field_custom_tools_to_function): decoding module config: llm_transform.transforms.field_custom_tools_to_function: json: unknown field "nmaes"`},
		{`[{"transform":"field_custom_tools_to_function","phase":"sideways"}]`, `rule 0 (field_custom_tools_to_function): unknown phase "sideways"`},
		{`[{"transform":"field_custom_tools_to_function","models":[""]}]`, `rule 0 (field_custom_tools_to_function): empty model glob`},
		// A lone phase would convert without restoring, or restore nothing.
		{`[{"transform":"field_custom_tools_to_function","phase":"response"}]`, `rule 0 (field_custom_tools_to_function): phase response: the transform needs both phases: the request phase converts custom tools and only the response phase of the same rule turns the calls back into custom calls`},
		{`[{"transform":"field_custom_tools_to_function","phase":"request"}]`, `rule 0 (field_custom_tools_to_function): phase request: the transform needs both phases`},
		// Disabled rules are checked too.
		{`[{"transform":"field_custom_tools_to_function","enabled":false,"config":{"names":[""]}}]`, `rule 0 (field_custom_tools_to_function): provision`},
	} {
		var cfgs []transforms.RuleConfig
		if err := json.Unmarshal([]byte(tc.rules), &cfgs); err != nil {
			t.Fatal(err)
		}
		_, err := transforms.Compile(transformtest.Context(t), cfgs, transforms.ScopeProvider, "")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want prefix %q", tc.rules, err, tc.want)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "openai/gpt-5", true}, {"gpt-?", "gpt-5", true}, {"gpt-?", "gpt-55", false},
		{"deepseek-*", "deepseek-chat", true}, {"deepseek-*", "DeepSeek-chat", false}, {"*-chat", "deepseek-chat", true},
		{"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false}, {"gpt", "gpt-5", false}, {"?", "é", true},
		{"openai/*", "openai/gpt-4.1", true},
	} {
		if got := transforms.GlobMatch(tc.p, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}

// The real Codex turn-1 request: only the apply_patch definition changes,
// every other byte reaches the upstream as Codex sent it.
func TestCodexFixtureRequest(t *testing.T) {
	body := transformtest.CodexRequest(t)
	out, x, err := rewrite(t, `[{"transform":"field_custom_tools_to_function"}]`, string(body))
	if err != nil {
		t.Fatal(err)
	}
	var in, got struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Tools) != len(in.Tools) {
		t.Fatalf("tool count %d -> %d", len(in.Tools), len(got.Tools))
	}
	for i := range in.Tools {
		if i == 3 {
			var ap map[string]any
			_ = json.Unmarshal(got.Tools[i], &ap)
			if ap["type"] != "function" || ap["name"] != "apply_patch" || ap["format"] != nil || ap["strict"] != false {
				t.Fatalf("apply_patch: %s", got.Tools[i])
			}
			continue
		}
		if string(got.Tools[i]) != string(in.Tools[i]) {
			t.Fatalf("tools[%d] changed:\n%s\n%s", i, in.Tools[i], got.Tools[i])
		}
	}
	// Outside the tools array the body is byte-identical.
	start := strings.Index(string(body), `"tools"`)
	if out[:start] != string(body[:start]) {
		t.Fatal("bytes before tools changed")
	}
	if x.Counts().Converted != 1 || !x.WantsResponse() {
		t.Fatalf("converted %d", x.Counts().Converted)
	}
}

// Running the rule over its own output changes nothing: converted items are
// functions now, and the usage text is not added twice.
func TestRequestRewriteIsIdempotent(t *testing.T) {
	body := `{"tools":[{"type":"custom","name":"apply_patch","description":"d"},{"type":"custom","name":"x"}],"input":[{"type":"custom_tool_call","id":"ctc","call_id":"c","name":"x","input":"{\"input\":\"j\"}"},{"type":"custom_tool_call_output","id":"o","call_id":"c","output":"ok"}],"tool_choice":{"type":"custom","name":"x"}}`
	once, _, err := rewrite(t, wildcard, body)
	if err != nil {
		t.Fatal(err)
	}
	twice, _, err := rewrite(t, wildcard, once)
	if err != nil {
		t.Fatal(err)
	}
	if once != twice {
		t.Fatalf("second pass changed the body:\n%s\n%s", once, twice)
	}
}
