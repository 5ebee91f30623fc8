package toolsplan

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
	"github.com/tidwall/gjson"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Request-side tests of tools_plan: GodeX's tool-plan, request-builder,
// provider-conformance and builtin cases (tool-planning-peers.md §1.11)
// re-expressed as our own table tests on the Responses and Chat wire
// formats. Expectations are written out by hand; hash suffixes were
// computed outside Go (see toolname_test.go).

// --- helpers -------------------------------------------------------------------

func tpRules(cfg string) string { return `[{"transform":"tools_plan","config":` + cfg + `}]` }

func tpProfile(p string) string { return tpRules(`{"profile":"` + p + `"}`) }

// tpRun runs the request phase of rules over body, decisions recorded.
func tpRun(t testing.TB, p transforms.Protocol, rules, body string) ([]byte, *transforms.Exchange, error) {
	t.Helper()
	c := transformtest.Chain(t, rules)
	x := transformtest.Begin(t, c, p, []byte(body))
	x.Explain = true
	out, err := x.RewriteRequest([]byte(body))
	return out, x, err
}

// tpOK runs the request and compares the body the upstream gets with want.
func tpOK(t testing.TB, p transforms.Protocol, rules, body, want string) *transforms.Exchange {
	t.Helper()
	out, x, err := tpRun(t, p, rules, body)
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	transformtest.JSONEqual(t, out, want)
	return x
}

// tpErr runs the request and wants a 400 with exactly code, param and
// message, and no body for the upstream.
func tpErr(t testing.TB, p transforms.Protocol, rules, body, code, param, msg string) {
	t.Helper()
	out, _, err := tpRun(t, p, rules, body)
	var e *transforms.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a 400 %s, got err %v and body %s", code, err, out)
	}
	if e.Status != http.StatusBadRequest || e.Type != "invalid_request_error" || e.Code != code || e.Param != param || e.Message != msg {
		t.Fatalf("got error %d %s code=%q param=%q message=%q\nwant 400 invalid_request_error code=%q param=%q message=%q",
			e.Status, e.Type, e.Code, e.Param, e.Message, code, param, msg)
	}
	if out != nil {
		t.Fatalf("the upstream would receive a body: %s", out)
	}
}

// tpOKValid runs the request phase and wants no error, a body that is valid
// JSON, and that body equal to want.
func tpOKValid(t *testing.T, p transforms.Protocol, rules, body, want string) *transforms.Exchange {
	t.Helper()
	out, x, err := tpRun(t, p, rules, body)
	if err != nil {
		t.Fatalf("unexpected error: %v\nrequest: %s", err, body)
	}
	if !json.Valid(out) {
		t.Fatalf("the rewritten body is not valid JSON:\n%s\nrequest: %s", out, body)
	}
	transformtest.JSONEqual(t, out, want)
	return x
}

// tpResponseOK restores an upstream JSON response on x and wants valid JSON
// equal to want.
func tpResponseOK(t *testing.T, x *transforms.Exchange, body, want string) {
	t.Helper()
	out, err := x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatalf("response: %v", err)
	}
	if !json.Valid(out) {
		t.Fatalf("the restored response is not valid JSON:\n%s", out)
	}
	transformtest.JSONEqual(t, out, want)
}

// tpDecided wants a decision among those the exchange recorded.
func tpDecided(t testing.TB, x *transforms.Exchange, tool, action, reason string) {
	t.Helper()
	for _, d := range x.Decisions() {
		if d.Tool == tool && d.Action == action && d.Reason == reason {
			return
		}
	}
	t.Errorf("no decision {%s %s %q} among %+v", tool, action, reason, x.Decisions())
}

// The parameters of the functions that stand in for built-in tools: the
// contract with the model and with the response side, which restores only
// calls that fit them.
var tpBuiltinParams = map[string]string{
	"local_shell": `{"type":"object","properties":{` +
		`"command":{"type":"array","items":{"type":"string"},"minItems":1,"description":"The program and its arguments, one string each."},` +
		`"env":{"type":"object","additionalProperties":{"type":"string"},"description":"Environment variables to set."},` +
		`"timeout_ms":{"type":"integer","minimum":1,"description":"How long to let it run, in milliseconds."},` +
		`"user":{"type":"string","description":"The user to run it as."},` +
		`"working_directory":{"type":"string","description":"The directory to run it in."}},` +
		`"required":["command"],"additionalProperties":false}`,
	"shell": `{"type":"object","properties":{` +
		`"commands":{"type":"array","items":{"type":"string"},"minItems":1,"description":"The shell commands to run, in order."},` +
		`"timeout_ms":{"type":"integer","minimum":1,"description":"How long to let them run, in milliseconds."},` +
		`"max_output_length":{"type":"integer","minimum":1,"description":"The most output characters to return."}},` +
		`"required":["commands"],"additionalProperties":false}`,
	"apply_patch": `{"type":"object","properties":{"operation":{"oneOf":[` +
		`{"type":"object","properties":{"type":{"type":"string","enum":["create_file"]},"path":{"type":"string","minLength":1},"diff":{"type":"string","minLength":1}},"required":["type","path","diff"],"additionalProperties":false},` +
		`{"type":"object","properties":{"type":{"type":"string","enum":["update_file"]},"path":{"type":"string","minLength":1},"diff":{"type":"string","minLength":1}},"required":["type","path","diff"],"additionalProperties":false},` +
		`{"type":"object","properties":{"type":{"type":"string","enum":["delete_file"]},"path":{"type":"string","minLength":1}},"required":["type","path"],"additionalProperties":false}]}},` +
		`"required":["operation"],"additionalProperties":false}`,
	"computer":    `{"type":"object","properties":{"action":{"type":"object","properties":{"type":{"type":"string","description":"click, double_click, drag, keypress, move, screenshot, scroll, type or wait."}},"required":["type"],"description":"The action and its fields."}},"required":["action"],"additionalProperties":false}`,
	"tool_search": `{"type":"object","properties":{"query":{"type":"string","description":"What the tool should do."},"limit":{"type":"integer","minimum":1,"description":"The most tools to load."}},"required":["query"],"additionalProperties":false}`,
}

// tpBuiltinDesc is the description of a degraded built-in: prose, checked
// for presence in TestToolsPlanBuiltinSchemas; its wording is the
// implementation's.
func tpBuiltinDesc(typ string) string {
	d, _ := builtinSchema(typ)
	return d
}

// tpDegraded is the Responses function that stands in for a built-in.
func tpDegraded(typ, name string) string {
	return `{"type":"function","name":"` + name + `","description":` + transformtest.JSONString(tpBuiltinDesc(typ)) + `,"parameters":` + tpBuiltinParams[typ] + `,"strict":false}`
}

// tpDegradedChat is the same in Chat's nested shape.
func tpDegradedChat(typ, name string) string {
	return `{"type":"function","function":{"name":"` + name + `","description":` + transformtest.JSONString(tpBuiltinDesc(typ)) + `,"parameters":` + tpBuiltinParams[typ] + `,"strict":false}}`
}

var tpProfiles = []string{"function_only", "openai_chat", "deepseek", "kimi", "glm", "qwen", "minimax", "gemini", "bedrock"}

// --- every tool type, per preset ---------------------------------------------------

const tpTypesBody = `{"model":"m","tools":[` +
	`{"type":"function","name":"read","parameters":{"type":"object"}},` +
	`{"type":"custom","name":"run_sql","description":"SQL","format":{"type":"grammar","syntax":"lark","definition":"start: x"}},` +
	`{"type":"local_shell"},` +
	`{"type":"shell","environment":{"type":"local"}},` +
	`{"type":"apply_patch"},` +
	`{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"browser"},` +
	`{"type":"tool_search","execution":"client","description":"Find tools","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}},` +
	`{"type":"tool_search","execution":"server"},` +
	`{"type":"web_search","external_web_access":false},` +
	`{"type":"web_search_preview"},` +
	`{"type":"file_search","vector_store_ids":["vs_1"]},` +
	`{"type":"mcp","server_label":"deepwiki"},` +
	`{"type":"image_generation"},` +
	`{"type":"code_interpreter","container":{"type":"auto"}}]}`

func tpTypesWant(custom string) string {
	return `{"model":"m","tools":[` +
		`{"type":"function","name":"read","parameters":{"type":"object"}},` +
		custom + `,` +
		tpDegraded("local_shell", "local_shell") + `,` +
		tpDegraded("shell", "shell") + `,` +
		tpDegraded("apply_patch", "apply_patch") + `,` +
		tpDegraded("computer", "computer") + `,` +
		`{"type":"function","name":"tool_search","description":"Find tools","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]},"strict":false}]}`
}

// TestToolsPlanTypeDecisions: every tool type gets its decision on every
// preset: custom degraded the way field_custom_tools_to_function does it
// (native on openai_chat), the built-ins degraded with their schemas, a
// client tool_search degraded with its own parameters, a server one, web
// search and unknown types dropped.
func TestToolsPlanTypeDecisions(t *testing.T) {
	degradedCustom := `{"type":"function","name":"run_sql","description":"SQL","parameters":` + genericParams + `,"strict":false}`
	nativeCustom := `{"type":"custom","name":"run_sql","description":"SQL","format":{"type":"grammar","syntax":"lark","definition":"start: x"}}`
	for _, p := range tpProfiles {
		t.Run(p, func(t *testing.T) {
			custom := degradedCustom
			if p == "openai_chat" {
				custom = nativeCustom
			}
			x := tpOK(t, transforms.ProtocolResponses, tpProfile(p), tpTypesBody, tpTypesWant(custom))
			if p != "function_only" {
				return
			}
			want := []transforms.Decision{
				{Tool: "run_sql", Action: "convert_definition", Reason: "custom tool selected by names"},
				{Tool: "local_shell", Action: "degrade", Reason: "the upstream has no local_shell tool: declared as a function"},
				{Tool: "shell", Action: "degrade", Reason: "the upstream has no shell tool: declared as a function"},
				{Tool: "apply_patch", Action: "degrade", Reason: "the upstream has no apply_patch tool: declared as a function"},
				{Tool: "computer_use_preview", Action: "degrade", Reason: "the upstream has no computer_use_preview tool: declared as a function"},
				{Tool: "tool_search", Action: "degrade", Reason: "the upstream has no tool_search tool: declared as a function"},
				{Tool: "tool_search", Action: "drop", Reason: "server-executed tool_search needs the provider's own search"},
				{Tool: "web_search", Action: "drop", Reason: "the upstream has no web_search tool"},
				{Tool: "web_search_preview", Action: "drop", Reason: "the upstream has no web_search_preview tool"},
				{Tool: "file_search", Action: "drop", Reason: "the upstream has no file_search tool"},
				{Tool: "mcp", Action: "drop", Reason: "the upstream has no mcp tool"},
				{Tool: "image_generation", Action: "drop", Reason: "the upstream has no image_generation tool"},
				{Tool: "code_interpreter", Action: "drop", Reason: "the upstream has no code_interpreter tool"},
				{Tool: "read", Action: "keep", Reason: "a function the upstream takes as it is"},
				{Tool: "run_sql", Action: "keep", Reason: "a function the upstream takes as it is"},
			}
			// Every tool has its decision; their order is not part of the
			// contract.
			if !reflect.DeepEqual(sortedDecisions(x.Decisions()), sortedDecisions(want)) {
				t.Errorf("decisions\n got %+v\nwant %+v", x.Decisions(), want)
			}
		})
	}
}

// TestToolsPlanTypeDecisionsChat: the same on a Chat body: every function
// the upstream gets is in Chat's nested shape.
func TestToolsPlanTypeDecisionsChat(t *testing.T) {
	body := `{"model":"m","tools":[{"type":"function","function":{"name":"read","parameters":{}}},{"type":"custom","custom":{"name":"run_sql","description":"SQL"}},` +
		`{"type":"local_shell"},{"type":"tool_search","execution":"client"},{"type":"tool_search"},{"type":"web_search"},{"type":"file_search"}]}`
	for _, p := range tpProfiles {
		t.Run(p, func(t *testing.T) {
			custom := `{"type":"function","function":{"name":"run_sql","description":"SQL","parameters":` + genericParams + `,"strict":false}}`
			if p == "openai_chat" {
				custom = `{"type":"custom","custom":{"name":"run_sql","description":"SQL"}}`
			}
			tpOK(t, transforms.ProtocolChat, tpProfile(p), body, `{"model":"m","tools":[{"type":"function","function":{"name":"read","parameters":{}}},`+custom+`,`+
				tpDegradedChat("local_shell", "local_shell")+`,`+tpDegradedChat("tool_search", "tool_search")+`]}`)
		})
	}
}

// TestToolsPlanTypeOverrides: per-type actions and unknown_types on top of
// a preset.
func TestToolsPlanTypeOverrides(t *testing.T) {
	okCases := []struct{ name, cfg, body, want string }{
		{
			name: "web_search native is kept as it is",
			cfg:  `{"profile":"glm","types":{"web_search":"native"}}`,
			body: `{"tools":[{"type":"web_search","search_context_size":"low"},{"type":"function","name":"a"}]}`,
			want: `{"tools":[{"type":"web_search","search_context_size":"low"},{"type":"function","name":"a"}]}`,
		},
		{
			name: "native_types keeps a built-in",
			cfg:  `{"profile":"function_only","native_types":["local_shell"]}`,
			body: `{"tools":[{"type":"local_shell"},{"type":"shell"}]}`,
			want: `{"tools":[{"type":"local_shell"},` + tpDegraded("shell", "shell") + `]}`,
		},
		{
			name: "a built-in dropped: its history stays as it is",
			cfg:  `{"profile":"function_only","types":{"local_shell":"drop"}}`,
			body: `{"tools":[{"type":"local_shell"},{"type":"function","name":"a"}],"input":[{"type":"local_shell_call","id":"l1","call_id":"c1","action":{"type":"exec","command":["ls"]}}]}`,
			want: `{"tools":[{"type":"function","name":"a"}],"input":[{"type":"local_shell_call","id":"l1","call_id":"c1","action":{"type":"exec","command":["ls"]}}]}`,
		},
		{
			name: "custom dropped",
			cfg:  `{"profile":"function_only","types":{"custom":"drop"}}`,
			body: `{"tools":[{"type":"custom","name":"x"},{"type":"function","name":"a"}]}`,
			want: `{"tools":[{"type":"function","name":"a"}]}`,
		},
		{
			name: "unknown_types reject leaves web_search to its own action",
			cfg:  `{"profile":"function_only","unknown_types":"reject"}`,
			body: `{"tools":[{"type":"web_search"},{"type":"web_search_2025_08_26"},{"type":"function","name":"a"}]}`,
			want: `{"tools":[{"type":"function","name":"a"}]}`,
		},
		{
			name: "additional_tools definitions are planned too",
			cfg:  `{"profile":"function_only"}`,
			body: `{"tools":[{"type":"function","name":"a"}],"input":[{"type":"additional_tools","role":"developer","tools":[{"type":"function","name":"b.c"},{"type":"mcp","server_label":"x"},{"type":"custom","name":"q"}]}]}`,
			want: `{"tools":[{"type":"function","name":"a"}],"input":[{"type":"additional_tools","role":"developer","tools":[{"type":"function","name":"b_c"},{"type":"function","name":"q","parameters":` + genericParams + `,"strict":false}]}]}`,
		},
		{
			name: "types the lookup must not confuse with object keys are unknown",
			cfg:  `{"profile":"function_only"}`,
			body: `{"tools":[{"type":"toString"},{"type":"constructor"},{"type":"__proto__"},{"type":"function","name":"a"}]}`,
			want: `{"tools":[{"type":"function","name":"a"}]}`,
		},
		{
			name: "every tool dropped: no tools member",
			cfg:  `{"profile":"function_only"}`,
			body: `{"tools":[{"type":"web_search"},{"type":"file_search"}],"model":"m"}`,
			want: `{"model":"m"}`,
		},
		{
			name: "every tool dropped: tool_choice goes too",
			cfg:  `{"profile":"function_only"}`,
			body: `{"model":"m","tools":[{"type":"web_search"}],"tool_choice":"auto"}`,
			want: `{"model":"m"}`,
		},
		{
			name: "hosted calls in the history are dropped, in runs",
			cfg:  `{"profile":"function_only"}`,
			body: `{"tools":[{"type":"function","name":"f"}],"input":[{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"q"}},{"type":"web_search_call","id":"ws_2","status":"completed"},{"type":"message","role":"user","content":"hi"},{"type":"web_search_call","id":"ws_3"}]}`,
			want: `{"tools":[{"type":"function","name":"f"}],"input":[{"type":"message","role":"user","content":"hi"}]}`,
		},
		{
			name: "hosted calls stay where the tool is native",
			cfg:  `{"profile":"function_only","types":{"web_search":"native"}}`,
			body: `{"tools":[{"type":"web_search"}],"input":[{"type":"web_search_call","id":"ws_1"}]}`,
			want: `{"tools":[{"type":"web_search"}],"input":[{"type":"web_search_call","id":"ws_1"}]}`,
		},
	}
	for _, tc := range okCases {
		t.Run(tc.name, func(t *testing.T) { tpOK(t, transforms.ProtocolResponses, tpRules(tc.cfg), tc.body, tc.want) })
	}
	errCases := []struct{ name, cfg, body, param, msg string }{
		{
			name: "web_search reject",
			cfg:  `{"profile":"function_only","types":{"web_search":"reject"}}`,
			body: `{"tools":[{"type":"function","name":"a"},{"type":"web_search"}]}`, param: "tools[1]",
			msg: `tool type "web_search" at tools[1] is not supported by the upstream (tools_plan profile function_only)`,
		},
		{
			name: "web_search reject covers its dated variants",
			cfg:  `{"profile":"deepseek","types":{"web_search":"reject"}}`,
			body: `{"tools":[{"type":"web_search_preview_2025_03_11"}]}`, param: "tools[0]",
			msg: `tool type "web_search_preview_2025_03_11" at tools[0] is not supported by the upstream (tools_plan profile deepseek)`,
		},
		{
			name: "unknown_types reject",
			cfg:  `{"profile":"function_only","unknown_types":"reject"}`,
			body: `{"tools":[{"type":"web_search"},{"type":"function","name":"a"},{"type":"mcp","server_label":"x"}]}`, param: "tools[2]",
			msg: `tool type "mcp" at tools[2] is not supported by the upstream (tools_plan profile function_only)`,
		},
		{
			name: "custom reject",
			cfg:  `{"profile":"kimi","types":{"custom":"reject"}}`,
			body: `{"tools":[{"type":"custom","name":"apply_patch"}]}`, param: "tools[0]",
			msg: `tool type "custom" at tools[0] is not supported by the upstream (tools_plan profile kimi)`,
		},
		{
			name: "a rejected type inside additional_tools is located there",
			cfg:  `{"profile":"function_only","unknown_types":"reject"}`,
			body: `{"tools":[{"type":"function","name":"a"}],"input":[{"type":"additional_tools","tools":[{"type":"function","name":"b"},{"type":"mcp","server_label":"x"}]}]}`, param: "input[0].tools[1]",
			msg: `tool type "mcp" at input[0].tools[1] is not supported by the upstream (tools_plan profile function_only)`,
		},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			tpErr(t, transforms.ProtocolResponses, tpRules(tc.cfg), tc.body, "unsupported_tool", tc.param, tc.msg)
		})
	}
	t.Run("chat web_search reject", func(t *testing.T) {
		tpErr(t, transforms.ProtocolChat, tpRules(`{"profile":"function_only","types":{"web_search":"reject"}}`),
			`{"tools":[{"type":"function","function":{"name":"a"}},{"type":"web_search"}]}`, "unsupported_tool", "tools[1]",
			`tool type "web_search" at tools[1] is not supported by the upstream (tools_plan profile function_only)`)
	})
}

// TestToolsPlanBuiltinSchemas mirrors GodeX's builtin.test.ts on the
// schemas that reach the upstream: key sets, required fields, minimums,
// closed objects.
func TestToolsPlanBuiltinSchemas(t *testing.T) {
	out, _, err := tpRun(t, transforms.ProtocolResponses, tpProfile("function_only"),
		`{"tools":[{"type":"local_shell"},{"type":"shell"},{"type":"apply_patch"},{"type":"computer"},{"type":"tool_search","execution":"client"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	type schema struct {
		Type                 string             `json:"type"`
		Properties           map[string]*schema `json:"properties"`
		Required             []string           `json:"required"`
		AdditionalProperties any                `json:"additionalProperties"`
		Items                *schema            `json:"items"`
		MinItems             *int               `json:"minItems"`
		Minimum              *int               `json:"minimum"`
		MinLength            *int               `json:"minLength"`
		Enum                 []string           `json:"enum"`
		OneOf                []*schema          `json:"oneOf"`
	}
	var v struct {
		Tools []struct {
			Type        string  `json:"type"`
			Name        string  `json:"name"`
			Description string  `json:"description"`
			Parameters  *schema `json:"parameters"`
			Strict      *bool   `json:"strict"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	got := map[string]*schema{}
	for _, tool := range v.Tools {
		if tool.Type != "function" || tool.Description == "" || tool.Strict == nil || *tool.Strict || tool.Parameters == nil {
			t.Errorf("%s: type %s, description %q, strict %v", tool.Name, tool.Type, tool.Description, tool.Strict)
			continue
		}
		got[tool.Name] = tool.Parameters
	}
	keys := func(s *schema) []string {
		var k []string
		for n := range s.Properties {
			k = append(k, n)
		}
		return sortedStrings(k)
	}
	closed := func(name string, s *schema) {
		if s.Type != "object" || s.AdditionalProperties != false {
			t.Errorf("%s: not a closed object: type %q additionalProperties %v", name, s.Type, s.AdditionalProperties)
		}
	}
	one := func(p *int, want int, what string) {
		if p == nil || *p != want {
			t.Errorf("%s: %v, want %d", what, p, want)
		}
	}
	if len(got) != 5 {
		t.Fatalf("want 5 degraded built-ins, got %d: %s", len(got), out)
	}
	ls := got["local_shell"]
	closed("local_shell", ls)
	if !reflect.DeepEqual(keys(ls), []string{"command", "env", "timeout_ms", "user", "working_directory"}) || !reflect.DeepEqual(ls.Required, []string{"command"}) {
		t.Errorf("local_shell: keys %v required %v", keys(ls), ls.Required)
	}
	if c := ls.Properties["command"]; c.Type != "array" || c.Items == nil || c.Items.Type != "string" {
		t.Errorf("local_shell command: %+v", c)
	}
	one(ls.Properties["command"].MinItems, 1, "local_shell command minItems")
	one(ls.Properties["timeout_ms"].Minimum, 1, "local_shell timeout_ms minimum")
	if env := ls.Properties["env"]; env.Type != "object" || !reflect.DeepEqual(env.AdditionalProperties, map[string]any{"type": "string"}) {
		t.Errorf("local_shell env: %+v", env)
	}
	sh := got["shell"]
	closed("shell", sh)
	if !reflect.DeepEqual(keys(sh), []string{"commands", "max_output_length", "timeout_ms"}) || !reflect.DeepEqual(sh.Required, []string{"commands"}) {
		t.Errorf("shell: keys %v required %v", keys(sh), sh.Required)
	}
	one(sh.Properties["commands"].MinItems, 1, "shell commands minItems")
	one(sh.Properties["timeout_ms"].Minimum, 1, "shell timeout_ms minimum")
	one(sh.Properties["max_output_length"].Minimum, 1, "shell max_output_length minimum")
	ap := got["apply_patch"]
	closed("apply_patch", ap)
	if !reflect.DeepEqual(ap.Required, []string{"operation"}) || len(ap.Properties["operation"].OneOf) != 3 {
		t.Fatalf("apply_patch: %+v", ap)
	}
	for i, want := range []struct {
		typ      string
		required []string
	}{{"create_file", []string{"type", "path", "diff"}}, {"update_file", []string{"type", "path", "diff"}}, {"delete_file", []string{"type", "path"}}} {
		s := ap.Properties["operation"].OneOf[i]
		closed("apply_patch "+want.typ, s)
		if !reflect.DeepEqual(s.Properties["type"].Enum, []string{want.typ}) || !reflect.DeepEqual(s.Required, want.required) {
			t.Errorf("apply_patch oneOf[%d]: enum %v required %v", i, s.Properties["type"].Enum, s.Required)
		}
		one(s.Properties["path"].MinLength, 1, want.typ+" path minLength")
		if d := s.Properties["diff"]; want.typ != "delete_file" {
			one(d.MinLength, 1, want.typ+" diff minLength")
		} else if d != nil {
			t.Errorf("delete_file has a diff")
		}
	}
	cu := got["computer"]
	closed("computer", cu)
	if !reflect.DeepEqual(cu.Required, []string{"action"}) || !reflect.DeepEqual(cu.Properties["action"].Required, []string{"type"}) {
		t.Errorf("computer: %+v", cu)
	}
	ts := got["tool_search"]
	closed("tool_search", ts)
	if !reflect.DeepEqual(ts.Required, []string{"query"}) {
		t.Errorf("tool_search: %+v", ts)
	}
	one(ts.Properties["limit"].Minimum, 1, "tool_search limit minimum")
}

// TestToolsPlanStrayToolListEntriesDropped: a null (or any non-object) in
// a tools list is not sent on, and the body stays valid JSON.
func TestToolsPlanStrayToolListEntriesDropped(t *testing.T) {
	rules := tpProfile("function_only")
	for _, tc := range []struct{ name, body, want string }{
		{"dropped tool then null", `{"tools":[{"type":"web_search"},null],"model":"m"}`, `{"model":"m"}`},
		{"null between changed tools", `{"tools":[{"type":"local_shell"},null,{"type":"function","name":"a.b"}]}`,
			`{"tools":[` + tpDegraded("local_shell", "local_shell") + `,{"type":"function","name":"a_b"}]}`},
		{"null first, strings and numbers", `{"tools":[null,"x",{"type":"function","name":"a.b"},1,[]],"model":"m"}`,
			`{"tools":[{"type":"function","name":"a_b"}],"model":"m"}`},
		{"null beside a tool that needs nothing", `{"tools":[{"type":"function","name":"ok"}, null ]}`, `{"tools":[{"type":"function","name":"ok"}]}`},
		{"in an additional_tools list", `{"tools":[{"type":"function","name":"a"}],"input":[{"type":"additional_tools","tools":[null,{"type":"local_shell"}]}]}`,
			`{"tools":[{"type":"function","name":"a"}],"input":[{"type":"additional_tools","tools":[` + tpDegraded("local_shell", "local_shell") + `]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) { tpOKValid(t, transforms.ProtocolResponses, rules, tc.body, tc.want) })
	}
}

func sortedDecisions(d []transforms.Decision) []string {
	s := make([]string, len(d))
	for i, v := range d {
		s[i] = v.Tool + "|" + v.Action + "|" + v.Reason
	}
	return sortedStrings(s)
}

func sortedStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

// --- namespaces ----------------------------------------------------------------------

const tpN70 = "search.repositories.by.owner.and.topic.including.archived.forks.v2.now" // 70 characters

// TestToolsPlanNamespaces: namespaces flatten to ns__name (declarations,
// history calls, tool_choice), or stay with namespaces native; a
// 70-character dotted name is cut and hashed either way.
func TestToolsPlanNamespaces(t *testing.T) {
	body := `{"model":"m","tools":[` +
		`{"type":"namespace","name":"mcp__github","description":"GitHub","tools":[{"type":"function","name":"search","parameters":{}},{"type":"function","name":"` + tpN70 + `","description":"long","parameters":{}}]},` +
		`{"type":"function","name":"plain"}],` +
		`"tool_choice":{"type":"function","namespace":"mcp__github","name":"search"},` +
		`"input":[{"type":"function_call","id":"fc_1","call_id":"c1","namespace":"mcp__github","name":"` + tpN70 + `","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"c1","output":"ok"},` +
		`{"type":"function_call","id":"fc_2","call_id":"c2","namespace":"mcp__github","name":"search","arguments":"{\"q\":1}"}]}`
	const flatLong = "mcp__github__search_repositories_by_owner_and_topic_inclu_jsk63s"
	const nativeLong = "search_repositories_by_owner_and_topic_including_archived_jsk63s"
	t.Run("flatten", func(t *testing.T) {
		x := tpOK(t, transforms.ProtocolResponses, tpProfile("function_only"), body, `{"model":"m","tools":[`+
			`{"type":"function","name":"mcp__github__search","parameters":{}},{"type":"function","name":"`+flatLong+`","description":"long","parameters":{}},`+
			`{"type":"function","name":"plain"}],`+
			`"tool_choice":{"type":"function","name":"mcp__github__search"},`+
			`"input":[{"type":"function_call","id":"fc_1","call_id":"c1","name":"`+flatLong+`","arguments":"{}"},`+
			`{"type":"function_call_output","call_id":"c1","output":"ok"},`+
			`{"type":"function_call","id":"fc_2","call_id":"c2","name":"mcp__github__search","arguments":"{\"q\":1}"}]}`)
		tpDecided(t, x, "mcp__github", "flatten_namespace", "the upstream has no namespaces")
		tpDecided(t, x, "mcp__github.search", "flatten", "sent as mcp__github__search: the upstream has no namespaces")
		tpDecided(t, x, "plain", "keep", "a function the upstream takes as it is")
	})
	t.Run("native", func(t *testing.T) {
		tpOK(t, transforms.ProtocolResponses, tpRules(`{"profile":"function_only","namespaces":"native"}`), body, `{"model":"m","tools":[`+
			`{"type":"namespace","name":"mcp__github","description":"GitHub","tools":[{"type":"function","name":"search","parameters":{}},{"type":"function","name":"`+nativeLong+`","description":"long","parameters":{}}]},`+
			`{"type":"function","name":"plain"}],`+
			`"tool_choice":{"type":"function","namespace":"mcp__github","name":"search"},`+
			`"input":[{"type":"function_call","id":"fc_1","call_id":"c1","namespace":"mcp__github","name":"`+nativeLong+`","arguments":"{}"},`+
			`{"type":"function_call_output","call_id":"c1","output":"ok"},`+
			`{"type":"function_call","id":"fc_2","call_id":"c2","namespace":"mcp__github","name":"search","arguments":"{\"q\":1}"}]}`)
	})
	t.Run("native: a renamed tool's choice keeps its namespace", func(t *testing.T) {
		tpOK(t, transforms.ProtocolResponses, tpRules(`{"profile":"function_only","namespaces":"native"}`),
			`{"tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"`+tpN70+`"},{"type":"function","name":"ok"}]}],"tool_choice":{"type":"function","namespace":"ns","name":"`+tpN70+`"}}`,
			`{"tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"search_repositories_by_owner_and_topic_including_archived_6mizez"},{"type":"function","name":"ok"}]}],"tool_choice":{"type":"function","namespace":"ns","name":"search_repositories_by_owner_and_topic_including_archived_6mizez"}}`)
	})
	t.Run("native, no tool_search: a namespace loses defer_loading as a function does", func(t *testing.T) {
		tpOK(t, transforms.ProtocolResponses, tpRules(`{"profile":"function_only","namespaces":"native"}`),
			`{"tools":[{"type":"namespace","name":"ns","description":"d","defer_loading":true,"tools":[{"type":"function","name":"x"},{"type":"function","name":"y","defer_loading":true}]}]}`,
			`{"tools":[{"type":"namespace","name":"ns","description":"d","tools":[{"type":"function","name":"x"},{"type":"function","name":"y"}]}]}`)
	})
	t.Run("native, client tool_search: a namespace left without tools is not sent", func(t *testing.T) {
		tpOK(t, transforms.ProtocolResponses, tpRules(`{"profile":"function_only","namespaces":"native"}`),
			`{"tools":[{"type":"tool_search","execution":"client"},{"type":"namespace","name":"ns","tools":[{"type":"function","name":"x","defer_loading":true}]},{"type":"namespace","name":"keep","tools":[{"type":"function","name":"k"}]}]}`,
			`{"tools":[`+tpDegraded("tool_search", "tool_search")+`,{"type":"namespace","name":"keep","tools":[{"type":"function","name":"k"}]}]}`)
	})
	t.Run("a namespace member of a function, at top level", func(t *testing.T) {
		tpOK(t, transforms.ProtocolResponses, tpProfile("function_only"),
			`{"tools":[{"type":"function","namespace":"files","name":"read","parameters":{}}],"tool_choice":{"type":"function","name":"read"}}`,
			`{"tools":[{"type":"function","name":"files__read","parameters":{}}],"tool_choice":{"type":"function","name":"files__read"}}`)
	})
	t.Run("separator", func(t *testing.T) {
		tpOK(t, transforms.ProtocolResponses, tpRules(`{"profile":"function_only","namespace_separator":"-"}`),
			`{"tools":[{"type":"namespace","name":"fs","tools":[{"type":"function","name":"read"}]}]}`,
			`{"tools":[{"type":"function","name":"fs-read"}]}`)
	})
	t.Run("kimi", func(t *testing.T) {
		tpOK(t, transforms.ProtocolResponses, tpProfile("kimi"),
			`{"tools":[{"type":"namespace","name":"9fs","tools":[{"type":"function","name":"read"}]}]}`,
			`{"tools":[{"type":"function","name":"_9fs__read"}]}`)
	})
}

// TestToolsPlanNativeNamespacesScopeNames: with native namespaces, names
// are unique per namespace. Two namespaces may each have a function of one
// name; a name needing repair is repaired the same way in both, without a
// hash, and calls come back in their own namespace.
func TestToolsPlanNativeNamespacesScopeNames(t *testing.T) {
	rules := tpRules(`{"profile":"function_only","namespaces":"native"}`)
	t.Run("same valid name in two namespaces passes", func(t *testing.T) {
		body := `{"model":"m","tools":[{"type":"namespace","name":"n1","description":"one","tools":[{"type":"function","name":"search","parameters":{}}]},` +
			`{"type":"namespace","name":"n2","description":"two","tools":[{"type":"function","name":"search","parameters":{}}]}],` +
			`"input":[{"type":"function_call","call_id":"h1","namespace":"n2","name":"search","arguments":"{}"}]}`
		tpOKValid(t, transforms.ProtocolResponses, rules, body, body)
	})
	t.Run("same repaired name in two namespaces, no hash", func(t *testing.T) {
		x := tpOKValid(t, transforms.ProtocolResponses, rules,
			`{"model":"m","tools":[{"type":"namespace","name":"n1","tools":[{"type":"function","name":"search.x","parameters":{}}]},`+
				`{"type":"namespace","name":"n2","tools":[{"type":"function","name":"search.x","parameters":{}}]}],`+
				`"input":[{"type":"function_call","call_id":"h1","namespace":"n2","name":"search.x","arguments":"{}"},{"type":"function_call_output","call_id":"h1","output":"r"}]}`,
			`{"model":"m","tools":[{"type":"namespace","name":"n1","tools":[{"type":"function","name":"search_x","parameters":{}}]},`+
				`{"type":"namespace","name":"n2","tools":[{"type":"function","name":"search_x","parameters":{}}]}],`+
				`"input":[{"type":"function_call","call_id":"h1","namespace":"n2","name":"search_x","arguments":"{}"},{"type":"function_call_output","call_id":"h1","output":"r"}]}`)
		tpResponseOK(t, x,
			`{"id":"r","output":[{"type":"function_call","id":"fc_1","call_id":"c1","namespace":"n1","name":"search_x","arguments":"{\"q\":1}"},`+
				`{"type":"function_call","id":"fc_2","call_id":"c2","namespace":"n2","name":"search_x","arguments":"{\"q\":2}"}]}`,
			`{"id":"r","output":[{"type":"function_call","id":"fc_1","call_id":"c1","namespace":"n1","name":"search.x","arguments":"{\"q\":1}"},`+
				`{"type":"function_call","id":"fc_2","call_id":"c2","namespace":"n2","name":"search.x","arguments":"{\"q\":2}"}]}`)
	})
}

// TestToolsPlanNativeToolLeavesFlattenedNamespace: openai_chat keeps
// custom tools but has no namespaces: the custom tool is sent as it is,
// outside its namespace, the function flattened, and the decision says so.
func TestToolsPlanNativeToolLeavesFlattenedNamespace(t *testing.T) {
	x := tpOKValid(t, transforms.ProtocolResponses, tpProfile("openai_chat"),
		`{"model":"m","tools":[{"type":"namespace","name":"ns","description":"d","tools":[{"type":"custom","name":"raw","description":"raw text"},{"type":"function","name":"fn","parameters":{}}]}]}`,
		`{"model":"m","tools":[{"type":"custom","name":"raw","description":"raw text"},{"type":"function","name":"ns__fn","parameters":{}}]}`)
	tpDecided(t, x, "ns.raw", "keep", "native on this upstream, which has no namespaces: sent and called back without its namespace")
	tpDecided(t, x, "ns.fn", "flatten", "sent as ns__fn: the upstream has no namespaces")
}

// --- history -------------------------------------------------------------------------

// TestToolsPlanHistory: the history's built-in calls and outputs become
// function calls and outputs (ids dropped, call_id kept); tools an earlier
// tool_search_output loaded are sent with the declared ones.
func TestToolsPlanHistory(t *testing.T) {
	body := `{"model":"m","tools":[{"type":"local_shell"},{"type":"shell"},{"type":"apply_patch"},{"type":"computer_use_preview","display_width":1,"display_height":1,"environment":"browser"},{"type":"tool_search","execution":"client"}],"input":[` +
		`{"type":"message","role":"user","content":"go"},` +
		`{"type":"local_shell_call","id":"lsh_1","call_id":"c1","status":"completed","action":{"type":"exec","command":["ls","-la"],"env":{"A":"1"},"working_directory":"/tmp","timeout_ms":5000}},` +
		`{"type":"local_shell_call_output","id":"lsho_1","call_id":"c1","output":"a\nb"},` +
		`{"type":"shell_call","id":"sh_1","call_id":"c2","status":"completed","action":{"commands":["ls"],"timeout_ms":1000,"max_output_length":100}},` +
		`{"type":"shell_call_output","id":"sho_1","call_id":"c2","output":[{"stdout":"x","stderr":"warn","outcome":{"type":"exit","exit_code":0}},{"stdout":"","stderr":"","outcome":{"type":"timeout"}}]},` +
		`{"type":"apply_patch_call","id":"ap_1","call_id":"c3","status":"completed","operation":{"type":"update_file","path":"a.txt","diff":"@@\n-a\n+b\n"}},` +
		`{"type":"apply_patch_call_output","id":"apo_1","call_id":"c3","status":"completed","output":"done"},` +
		`{"type":"computer_call","id":"cu_1","call_id":"c4","status":"completed","action":{"type":"click","x":1,"y":2,"button":"left"},"pending_safety_checks":[]},` +
		`{"type":"computer_call_output","id":"cuo_1","call_id":"c4","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,AAA"}},` +
		`{"type":"tool_search_call","id":"ts_1","call_id":"c5","status":"completed","execution":"client","arguments":{"query":"weather"}},` +
		`{"type":"tool_search_output","id":"tso_1","call_id":"c5","status":"completed","execution":"client","tools":[{"type":"function","name":"weather.now","parameters":{"type":"object"}},{"type":"namespace","name":"cal","tools":[{"type":"function","name":"add","parameters":{}}]}]}]}`
	want := `{"model":"m","tools":[` + tpDegraded("local_shell", "local_shell") + `,` + tpDegraded("shell", "shell") + `,` + tpDegraded("apply_patch", "apply_patch") + `,` +
		tpDegraded("computer", "computer") + `,` + tpDegraded("tool_search", "tool_search") + `,` +
		`{"type":"function","name":"weather_now","parameters":{"type":"object"}},{"type":"function","name":"cal__add","parameters":{}}],"input":[` +
		`{"type":"message","role":"user","content":"go"},` +
		`{"type":"function_call","call_id":"c1","name":"local_shell","arguments":` + transformtest.JSONString(`{"command":["ls","-la"],"env":{"A":"1"},"working_directory":"/tmp","timeout_ms":5000}`) + `,"status":"completed"},` +
		`{"type":"function_call_output","call_id":"c1","output":"a\nb"},` +
		`{"type":"function_call","call_id":"c2","name":"shell","arguments":` + transformtest.JSONString(`{"commands":["ls"],"timeout_ms":1000,"max_output_length":100}`) + `,"status":"completed"},` +
		`{"type":"function_call_output","call_id":"c2","output":` + transformtest.JSONString("[exit 0]\nstdout:\nx\nstderr:\nwarn\n[timeout]\nstdout:\n\nstderr:\n") + `},` +
		`{"type":"function_call","call_id":"c3","name":"apply_patch","arguments":` + transformtest.JSONString(`{"operation":{"type":"update_file","path":"a.txt","diff":"@@\n-a\n+b\n"}}`) + `,"status":"completed"},` +
		`{"type":"function_call_output","call_id":"c3","output":"done"},` +
		`{"type":"function_call","call_id":"c4","name":"computer","arguments":` + transformtest.JSONString(`{"action":{"type":"click","x":1,"y":2,"button":"left"}}`) + `,"status":"completed"},` +
		`{"type":"function_call_output","call_id":"c4","output":[{"type":"input_image","image_url":"data:image/png;base64,AAA"}]},` +
		`{"type":"function_call","call_id":"c5","name":"tool_search","arguments":` + transformtest.JSONString(`{"query":"weather"}`) + `,"status":"completed"},` +
		`{"type":"function_call_output","call_id":"c5","output":` + transformtest.JSONString(`[{"type":"function","name":"weather.now","parameters":{"type":"object"}},{"type":"namespace","name":"cal","tools":[{"type":"function","name":"add","parameters":{}}]}]`) + `}]}`
	x := tpOK(t, transforms.ProtocolResponses, tpProfile("function_only"), body, want)
	tpDecided(t, x, "weather.now", "load", "loaded by an earlier tool_search")
	tpDecided(t, x, "cal.add", "load", "loaded by an earlier tool_search")

	cases := []struct{ name, rules, body, want string }{
		{
			name:  "built-in history of a tool no longer declared is converted too",
			rules: tpProfile("deepseek"),
			body:  `{"tools":[{"type":"function","name":"a"}],"input":[{"type":"local_shell_call","id":"l1","call_id":"c1","action":{"type":"exec","command":["pwd"]}},{"type":"local_shell_call_output","call_id":"c1","output":"/"}]}`,
			want:  `{"tools":[{"type":"function","name":"a"}],"input":[{"type":"function_call","call_id":"c1","name":"local_shell","arguments":` + transformtest.JSONString(`{"command":["pwd"]}`) + `},{"type":"function_call_output","call_id":"c1","output":"/"}]}`,
		},
		{
			name:  "tool_search_call arguments given as JSON text",
			rules: tpProfile("function_only"),
			body:  `{"tools":[{"type":"tool_search","execution":"client"}],"input":[{"type":"tool_search_call","call_id":"c1","execution":"client","arguments":"{\"query\":\"x\"}"},{"type":"tool_search_output","call_id":"c1","execution":"client","tools":[]}]}`,
			want:  `{"tools":[` + tpDegraded("tool_search", "tool_search") + `],"input":[{"type":"function_call","call_id":"c1","name":"tool_search","arguments":` + transformtest.JSONString(`{"query":"x"}`) + `},{"type":"function_call_output","call_id":"c1","output":"[]"}]}`,
		},
		{
			name:  "a loaded tool already declared is sent once",
			rules: tpProfile("function_only"),
			body:  `{"tools":[{"type":"tool_search","execution":"client"},{"type":"function","name":"b"}],"input":[{"type":"tool_search_output","call_id":"c1","tools":[{"type":"function","name":"b","description":"loaded"}]}]}`,
			want:  `{"tools":[` + tpDegraded("tool_search", "tool_search") + `,{"type":"function","name":"b"}],"input":[{"type":"function_call_output","call_id":"c1","output":` + transformtest.JSONString(`[{"type":"function","name":"b","description":"loaded"}]`) + `}]}`,
		},
		{
			name:  "a deferred tool that an earlier search loaded is sent, without defer_loading",
			rules: tpProfile("function_only"),
			body:  `{"tools":[{"type":"tool_search","execution":"client"},{"type":"function","name":"lazy","description":"declared","defer_loading":true}],"input":[{"type":"tool_search_output","call_id":"c1","tools":[{"type":"function","name":"lazy","description":"loaded","defer_loading":true,"parameters":{}}]}]}`,
			want:  `{"tools":[` + tpDegraded("tool_search", "tool_search") + `,{"type":"function","name":"lazy","description":"loaded","parameters":{}}],"input":[{"type":"function_call_output","call_id":"c1","output":` + transformtest.JSONString(`[{"type":"function","name":"lazy","description":"loaded","defer_loading":true,"parameters":{}}]`) + `}]}`,
		},
		{
			name:  "defer_loading tools are dropped when a client tool_search is degraded",
			rules: tpProfile("function_only"),
			body:  `{"tools":[{"type":"tool_search","execution":"client"},{"type":"function","name":"a","defer_loading":true},{"type":"namespace","name":"ns","defer_loading":true,"tools":[{"type":"function","name":"x"}]},{"type":"namespace","name":"ns2","tools":[{"type":"function","name":"y","defer_loading":true},{"type":"function","name":"z"}]},{"type":"function","name":"b"}]}`,
			want:  `{"tools":[` + tpDegraded("tool_search", "tool_search") + `,{"type":"function","name":"ns2__z"},{"type":"function","name":"b"}]}`,
		},
		{
			name:  "without a client tool_search, defer_loading is removed and the tools are sent",
			rules: tpProfile("function_only"),
			body:  `{"tools":[{"type":"tool_search"},{"type":"function","name":"a","defer_loading":true},{"type":"namespace","name":"ns","defer_loading":true,"tools":[{"type":"function","name":"x"}]}]}`,
			want:  `{"tools":[{"type":"function","name":"a"},{"type":"function","name":"ns__x"}]}`,
		},
		{
			name:  "chat: assistant tool_calls renamed, ids kept, tool messages untouched",
			rules: tpProfile("bedrock"),
			body:  `{"tools":[{"type":"function","function":{"name":"fs.read"}}],"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"fs.read","arguments":"{}"}},{"id":"call_2","type":"function","function":{"name":"ok_name","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"data"}]}`,
			want:  `{"tools":[{"type":"function","function":{"name":"fs_read"}}],"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"fs_read","arguments":"{}"}},{"id":"call_2","type":"function","function":{"name":"ok_name","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"data"}]}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := transforms.ProtocolResponses
			if strings.Contains(tc.body, `"messages"`) {
				p = transforms.ProtocolChat
			}
			tpOK(t, p, tc.rules, tc.body, tc.want)
		})
	}
}

// TestToolsPlanFallbackCallInHistoryIsTheBuiltins: a shell call whose
// arguments did not fit shell_call reached the client as a function_call
// named "shell"; on the next turn that call is in the history while the
// built-in is still declared. It is the built-in's own call, not a second
// tool of that name: no conflict, and it goes upstream as it is. A
// declared function of that name beside the built-in is still a conflict.
func TestToolsPlanFallbackCallInHistoryIsTheBuiltins(t *testing.T) {
	rules := tpProfile("function_only")
	t.Run("responses shell", func(t *testing.T) {
		tpOKValid(t, transforms.ProtocolResponses, rules,
			`{"model":"m","tools":[{"type":"shell"}],"input":[`+
				`{"type":"message","role":"user","content":"test it"},`+
				`{"type":"function_call","id":"fc_1","call_id":"c1","name":"shell","arguments":"bun test","status":"completed"},`+
				`{"type":"function_call_output","call_id":"c1","output":"ok"}]}`,
			`{"model":"m","tools":[`+tpDegraded("shell", "shell")+`],"input":[`+
				`{"type":"message","role":"user","content":"test it"},`+
				`{"type":"function_call","id":"fc_1","call_id":"c1","name":"shell","arguments":"bun test","status":"completed"},`+
				`{"type":"function_call_output","call_id":"c1","output":"ok"}]}`)
	})
	t.Run("chat local_shell", func(t *testing.T) {
		tpOKValid(t, transforms.ProtocolChat, rules,
			`{"model":"m","tools":[{"type":"local_shell"}],"messages":[{"role":"user","content":"list"},`+
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"local_shell","arguments":"bun test"}}]},`+
				`{"role":"tool","tool_call_id":"c1","content":"ok"}]}`,
			`{"model":"m","tools":[`+tpDegradedChat("local_shell", "local_shell")+`],"messages":[{"role":"user","content":"list"},`+
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"local_shell","arguments":"bun test"}}]},`+
				`{"role":"tool","tool_call_id":"c1","content":"ok"}]}`)
	})
	const conflict = `tools "shell" and "shell shell" both map to the upstream name "shell" under ^[a-zA-Z0-9_-]{1,64}$; rename one of them`
	t.Run("a declared function named shell next to the built-in is still a conflict", func(t *testing.T) {
		tpErr(t, transforms.ProtocolResponses, rules, `{"tools":[{"type":"shell"},{"type":"function","name":"shell","parameters":{}}]}`,
			"tool_name_conflict", "tools", conflict)
		tpErr(t, transforms.ProtocolResponses, rules, `{"tools":[{"type":"function","name":"shell","parameters":{}},{"type":"shell"}],"input":[`+
			`{"type":"function_call","call_id":"c1","name":"shell","arguments":"bun test"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`,
			"tool_name_conflict", "tools", conflict)
	})
}

// TestToolsPlanLoadedToolsWithoutToolsList: tool_search declared only in
// an additional_tools item; the tool an earlier search loaded goes into a
// top-level tools list, created when the request has none.
func TestToolsPlanLoadedToolsWithoutToolsList(t *testing.T) {
	rules := tpProfile("function_only")
	input := `"input":[{"type":"additional_tools","role":"developer","tools":[{"type":"tool_search","execution":"client"}]},` +
		`{"type":"tool_search_output","call_id":"c1","execution":"client","tools":[{"type":"function","name":"lt","description":"loaded","parameters":{}}]}]`
	wantInput := `"input":[{"type":"additional_tools","role":"developer","tools":[` + tpDegraded("tool_search", "tool_search") + `]},` +
		`{"type":"function_call_output","call_id":"c1","output":` + transformtest.JSONString(`[{"type":"function","name":"lt","description":"loaded","parameters":{}}]`) + `}]`
	lt := `{"type":"function","name":"lt","description":"loaded","parameters":{}}`
	for _, tc := range []struct{ name, body string }{
		{"no tools key", `{"model":"m",` + input + `}`},
		{"no tools key, input first", `{` + input + `,"model":"m"}`},
		{"no tools key, nothing else", `{` + input + `}`},
		{"empty tools list", `{"model":"m","tools":[],` + input + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := `{"tools":[` + lt + `],` + wantInput
			if strings.Contains(tc.body, `"model"`) {
				want += `,"model":"m"`
			}
			x := tpOKValid(t, transforms.ProtocolResponses, rules, tc.body, want+`}`)
			tpDecided(t, x, "lt", "load", "loaded by an earlier tool_search")
		})
	}
}

// TestToolsPlanLoadedNamespaceKeptNative: with native namespaces a loaded
// namespace is appended as a namespace, its tools inside, without
// defer_loading, since tool_search is degraded.
func TestToolsPlanLoadedNamespaceKeptNative(t *testing.T) {
	rules := tpRules(`{"profile":"function_only","namespaces":"native"}`)
	for _, tc := range []struct{ name, loaded, want string }{
		{
			name:   "as reported",
			loaded: `{"type":"namespace","name":"mcp__x","tools":[{"type":"function","name":"lt","defer_loading":true}]}`,
			want:   `{"type":"namespace","name":"mcp__x","tools":[{"type":"function","name":"lt"}]}`,
		},
		{
			name:   "namespace members kept, its own defer_loading stripped",
			loaded: `{"type":"namespace","name":"mcp__x","description":"X server","defer_loading":true,"tools":[{"type":"function","name":"lt","defer_loading":true,"parameters":{}},{"type":"function","name":"lt.2","parameters":{}}]}`,
			want:   `{"type":"namespace","name":"mcp__x","description":"X server","tools":[{"type":"function","name":"lt","parameters":{}},{"type":"function","name":"lt_2","parameters":{}}]}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := tpOKValid(t, transforms.ProtocolResponses, rules,
				`{"model":"m","tools":[{"type":"tool_search","execution":"client"}],"input":[`+
					`{"type":"tool_search_output","call_id":"c1","execution":"client","tools":[`+tc.loaded+`]}]}`,
				`{"model":"m","tools":[`+tpDegraded("tool_search", "tool_search")+`,`+tc.want+`],"input":[`+
					`{"type":"function_call_output","call_id":"c1","output":`+transformtest.JSONString(`[`+tc.loaded+`]`)+`}]}`)
			tpDecided(t, x, "mcp__x.lt", "load", "loaded by an earlier tool_search")
		})
	}
}

// --- tool_choice ---------------------------------------------------------------------

const (
	tpT  = `"tools":[{"type":"function","name":"get.weather","parameters":{}},{"type":"function","name":"search"}]`
	tpTU = `"tools":[{"type":"function","name":"get_weather","parameters":{}},{"type":"function","name":"search"}]`
	tpTG = `"tools":[{"type":"function","name":"get_weather","parameters":{}}]`
	tpTS = `"tools":[{"type":"function","name":"search"}]`

	tpNamedGet = `{"type":"function","name":"get.weather"}`
	tpNamedUp  = `{"type":"function","name":"get_weather"}`
)

// tpChoiceBody is a request with fields (each followed by a comma), tools
// and tool_choice (omitted when empty).
func tpChoiceBody(fields, tools, choice string) string {
	b := `{"model":"m",` + fields + tools
	if choice != "" {
		b += `,"tool_choice":` + choice
	}
	return b + `}`
}

// TestToolsPlanToolChoice: tool_choice per preset and thinking state. A
// supported choice passes (renamed with its tool); "required" the upstream
// cannot take becomes "auto" (or a 400 with unsupported_choice reject); a
// named choice it cannot take is imitated by sending only that tool with
// required or auto; "none" it cannot take sends no tools; a choice of a tool
// that cannot be sent is a 400 naming it.
func TestToolsPlanToolChoice(t *testing.T) {
	const (
		thinkOn   = `"thinking":{"type":"enabled"},`
		thinkOff  = `"thinking":{"type":"disabled"},`
		effortHi  = `"reasoning":{"effort":"high"},`
		effortNo  = `"reasoning":{"effort":"none"},`
		effortLow = `"reasoning_effort":"low",`
		qwenOn    = `"enable_thinking":true,`
		qwenOff   = `"enable_thinking":false,`
	)
	allowed := func(mode string, names ...string) string {
		var e []string
		for _, n := range names {
			e = append(e, `{"type":"function","name":"`+n+`"}`)
		}
		m := ""
		if mode != "" {
			m = `"mode":"` + mode + `",`
		}
		return `{"type":"allowed_tools",` + m + `"tools":[` + strings.Join(e, ",") + `]}`
	}
	type decision struct{ tool, action, reason string }
	cases := []struct {
		name    string
		cfg     string // tools_plan config
		model   string // the request's model, when not "m"
		fields  string // request fields before tools
		choice  string
		want    string // full expected body; empty when err is set
		err     string // expected 400 message (code unsupported_tool_choice, param tool_choice)
		decided *decision
	}{
		// function_only: none, auto, required, named; no allowed_tools.
		{name: "function_only none", cfg: `{"profile":"function_only"}`, choice: `"none"`, want: tpChoiceBody("", tpTU, `"none"`)},
		{name: "function_only auto", cfg: `{"profile":"function_only"}`, choice: `"auto"`, want: tpChoiceBody("", tpTU, `"auto"`)},
		{name: "function_only required", cfg: `{"profile":"function_only"}`, choice: `"required"`, want: tpChoiceBody("", tpTU, `"required"`)},
		{name: "function_only named, renamed with its tool", cfg: `{"profile":"function_only"}`, choice: tpNamedGet, want: tpChoiceBody("", tpTU, tpNamedUp)},
		{name: "function_only named, name kept", cfg: `{"profile":"function_only"}`, choice: `{"type":"function","name":"search"}`, want: tpChoiceBody("", tpTU, `{"type":"function","name":"search"}`)},
		{name: "function_only allowed_tools required", cfg: `{"profile":"function_only"}`, choice: allowed("required", "get.weather"), want: tpChoiceBody("", tpTG, `"required"`),
			decided: &decision{"tool_choice", "degrade_tool_choice", "allowed_tools is not supported without thinking: only the allowed tools are sent"}},
		{name: "function_only allowed_tools auto", cfg: `{"profile":"function_only"}`, choice: allowed("auto", "search"), want: tpChoiceBody("", tpTS, `"auto"`)},
		{name: "function_only allowed_tools without mode is auto", cfg: `{"profile":"function_only"}`, choice: allowed("", "search"), want: tpChoiceBody("", tpTS, `"auto"`)},
		// openai_chat: allowed_tools supported, entries renamed.
		{name: "openai_chat allowed_tools", cfg: `{"profile":"openai_chat"}`, choice: allowed("required", "get.weather"),
			want: tpChoiceBody("", tpTU, `{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"get_weather"}]}`)},
		{name: "openai_chat required", cfg: `{"profile":"openai_chat"}`, choice: `"required"`, want: tpChoiceBody("", tpTU, `"required"`)},
		// deepseek: forced choices only without thinking.
		{name: "deepseek required", cfg: `{"profile":"deepseek"}`, choice: `"required"`, want: tpChoiceBody("", tpTU, `"required"`)},
		{name: "deepseek named", cfg: `{"profile":"deepseek"}`, choice: tpNamedGet, want: tpChoiceBody("", tpTU, tpNamedUp)},
		{name: "deepseek thinking required becomes auto", cfg: `{"profile":"deepseek"}`, fields: thinkOn, choice: `"required"`, want: tpChoiceBody(thinkOn, tpTU, `"auto"`),
			decided: &decision{"tool_choice", "degrade", "required is not supported while thinking: sent as auto"}},
		{name: "deepseek thinking named: only that tool, auto", cfg: `{"profile":"deepseek"}`, fields: thinkOn, choice: tpNamedGet, want: tpChoiceBody(thinkOn, tpTG, `"auto"`),
			decided: &decision{"get.weather", "degrade_tool_choice", "a named choice is not supported while thinking: only this tool is sent, with auto"}},
		{name: "deepseek thinking none", cfg: `{"profile":"deepseek"}`, fields: thinkOn, choice: `"none"`, want: tpChoiceBody(thinkOn, tpTU, `"none"`)},
		{name: "deepseek thinking auto", cfg: `{"profile":"deepseek"}`, fields: thinkOn, choice: `"auto"`, want: tpChoiceBody(thinkOn, tpTU, `"auto"`)},
		{name: "deepseek thinking disabled", cfg: `{"profile":"deepseek"}`, fields: thinkOff, choice: `"required"`, want: tpChoiceBody(thinkOff, tpTU, `"required"`)},
		{name: "deepseek reasoning.effort high thinks", cfg: `{"profile":"deepseek"}`, fields: effortHi, choice: `"required"`, want: tpChoiceBody(effortHi, tpTU, `"auto"`)},
		{name: "deepseek reasoning.effort none does not think", cfg: `{"profile":"deepseek"}`, fields: effortNo, choice: `"required"`, want: tpChoiceBody(effortNo, tpTU, `"required"`)},
		{name: "deepseek reasoning_effort thinks", cfg: `{"profile":"deepseek"}`, fields: effortLow, choice: tpNamedGet, want: tpChoiceBody(effortLow, tpTG, `"auto"`)},
		{name: "deepseek-reasoner thinks", cfg: `{"profile":"deepseek"}`, model: "deepseek-reasoner", choice: `"required"`, want: `{"model":"deepseek-reasoner",` + tpTU + `,"tool_choice":"auto"}`},
		{name: "qwen thinking model", cfg: `{"profile":"qwen"}`, model: "qwq-32b", choice: `"required"`, want: `{"model":"qwq-32b",` + tpTU + `,"tool_choice":"auto"}`},
		{name: "qwen -thinking model", cfg: `{"profile":"qwen"}`, model: "qwen3-235b-a22b-thinking-2507", choice: tpNamedGet, want: `{"model":"qwen3-235b-a22b-thinking-2507",` + tpTG + `,"tool_choice":"auto"}`},
		{name: "kimi thinking model", cfg: `{"profile":"kimi"}`, model: "kimi-k2-thinking", choice: `"required"`, want: `{"model":"kimi-k2-thinking",` + tpTU + `,"tool_choice":"auto"}`,
			decided: &decision{"tool_choice", "degrade", "required is not supported while thinking: sent as auto"}},
		{name: "deepseek thinking allowed_tools required", cfg: `{"profile":"deepseek"}`, fields: thinkOn, choice: allowed("required", "search"), want: tpChoiceBody(thinkOn, tpTS, `"auto"`)},
		{name: "deepseek reject: required while thinking", cfg: `{"profile":"deepseek","unsupported_choice":"reject"}`, fields: thinkOn, choice: `"required"`,
			err: `tool_choice "required" is not supported by the upstream while thinking (tools_plan profile deepseek)`},
		{name: "deepseek reject: a named choice is still imitated", cfg: `{"profile":"deepseek","unsupported_choice":"reject"}`, fields: thinkOn, choice: tpNamedGet, want: tpChoiceBody(thinkOn, tpTG, `"auto"`)},
		{name: "deepseek reject: allowed_tools required while thinking", cfg: `{"profile":"deepseek","unsupported_choice":"reject"}`, fields: effortHi, choice: allowed("required", "search"),
			err: `tool_choice allowed_tools with mode required is not supported by the upstream while thinking (tools_plan profile deepseek)`},
		{name: "deepseek reject: required without thinking passes", cfg: `{"profile":"deepseek","unsupported_choice":"reject"}`, choice: `"required"`, want: tpChoiceBody("", tpTU, `"required"`)},
		// qwen: enable_thinking and thinking models.
		{name: "qwen enable_thinking required", cfg: `{"profile":"qwen"}`, fields: qwenOn, choice: `"required"`, want: tpChoiceBody(qwenOn, tpTU, `"auto"`)},
		{name: "qwen enable_thinking named", cfg: `{"profile":"qwen"}`, fields: qwenOn, choice: `{"type":"function","name":"search"}`, want: tpChoiceBody(qwenOn, tpTS, `"auto"`)},
		{name: "qwen enable_thinking false", cfg: `{"profile":"qwen"}`, fields: qwenOff, choice: `"required"`, want: tpChoiceBody(qwenOff, tpTU, `"required"`)},
		{name: "qwen named without thinking", cfg: `{"profile":"qwen"}`, choice: tpNamedGet, want: tpChoiceBody("", tpTU, tpNamedUp)},
		// glm: auto only.
		{name: "glm none: no tools, no tool_choice", cfg: `{"profile":"glm"}`, choice: `"none"`, want: `{"model":"m"}`,
			decided: &decision{"tool_choice", "degrade", "the upstream has no tool_choice none: no tools are sent"}},
		{name: "glm auto", cfg: `{"profile":"glm"}`, choice: `"auto"`, want: tpChoiceBody("", tpTU, `"auto"`)},
		{name: "glm required", cfg: `{"profile":"glm"}`, choice: `"required"`, want: tpChoiceBody("", tpTU, `"auto"`),
			decided: &decision{"tool_choice", "degrade", "required is not supported without thinking: sent as auto"}},
		{name: "glm named", cfg: `{"profile":"glm"}`, choice: tpNamedGet, want: tpChoiceBody("", tpTG, `"auto"`),
			decided: &decision{"search", "drop", "tool_choice names another tool, imitated by sending only that one"}},
		{name: "glm allowed_tools", cfg: `{"profile":"glm"}`, choice: allowed("required", "get.weather", "search"), want: tpChoiceBody("", tpTU, `"auto"`)},
		{name: "glm thinking required", cfg: `{"profile":"glm"}`, fields: thinkOn, choice: `"required"`, want: tpChoiceBody(thinkOn, tpTU, `"auto"`),
			decided: &decision{"tool_choice", "degrade", "required is not supported while thinking: sent as auto"}},
		{name: "glm reject required", cfg: `{"profile":"glm","unsupported_choice":"reject"}`, choice: `"required"`,
			err: `tool_choice "required" is not supported by the upstream without thinking (tools_plan profile glm)`},
		{name: "glm reject allowed_tools required", cfg: `{"profile":"glm","unsupported_choice":"reject"}`, choice: allowed("required", "search"),
			err: `tool_choice allowed_tools with mode required is not supported by the upstream without thinking (tools_plan profile glm)`},
		// kimi: none and auto.
		{name: "kimi required", cfg: `{"profile":"kimi"}`, choice: `"required"`, want: tpChoiceBody("", tpTU, `"auto"`)},
		{name: "kimi named", cfg: `{"profile":"kimi"}`, choice: tpNamedGet, want: tpChoiceBody("", tpTG, `"auto"`)},
		{name: "kimi none", cfg: `{"profile":"kimi"}`, choice: `"none"`, want: tpChoiceBody("", tpTU, `"none"`)},
		// minimax: as function_only.
		{name: "minimax required", cfg: `{"profile":"minimax"}`, choice: `"required"`, want: tpChoiceBody("", tpTU, `"required"`)},
		{name: "minimax named", cfg: `{"profile":"minimax"}`, fields: thinkOn, choice: tpNamedGet, want: tpChoiceBody(thinkOn, tpTU, tpNamedUp)},
		{name: "minimax allowed_tools required", cfg: `{"profile":"minimax"}`, choice: allowed("required", "get.weather"), want: tpChoiceBody("", tpTG, `"required"`)},
		// gemini: dotted names are valid, so nothing is renamed.
		{name: "gemini named", cfg: `{"profile":"gemini"}`, choice: tpNamedGet, want: tpChoiceBody("", tpT, tpNamedGet)},
		{name: "gemini required", cfg: `{"profile":"gemini"}`, choice: `"required"`, want: tpChoiceBody("", tpT, `"required"`)},
		// bedrock: no none; nothing forced while thinking.
		{name: "bedrock none", cfg: `{"profile":"bedrock"}`, choice: `"none"`, want: `{"model":"m"}`},
		{name: "bedrock required", cfg: `{"profile":"bedrock"}`, choice: `"required"`, want: tpChoiceBody("", tpTU, `"required"`)},
		{name: "bedrock named", cfg: `{"profile":"bedrock"}`, choice: tpNamedGet, want: tpChoiceBody("", tpTU, tpNamedUp)},
		{name: "bedrock thinking required", cfg: `{"profile":"bedrock"}`, fields: thinkOn, choice: `"required"`, want: tpChoiceBody(thinkOn, tpTU, `"auto"`)},
		{name: "bedrock thinking named", cfg: `{"profile":"bedrock"}`, fields: thinkOn, choice: tpNamedGet, want: tpChoiceBody(thinkOn, tpTG, `"auto"`)},
		{name: "bedrock thinking none", cfg: `{"profile":"bedrock"}`, fields: thinkOn, choice: `"none"`, want: `{"model":"m","thinking":{"type":"enabled"}}`},
		{name: "bedrock additionalModelRequestFields thinking", cfg: `{"profile":"bedrock"}`, fields: `"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":1024}},`, choice: `"required"`,
			want: tpChoiceBody(`"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":1024}},`, tpTU, `"auto"`)},
		// Overrides of the modes.
		{name: "tool_choice override", cfg: `{"profile":"function_only","tool_choice":["auto"]}`, choice: `"required"`, want: tpChoiceBody("", tpTU, `"auto"`)},
		{name: "thinking_fields override", cfg: `{"profile":"function_only","thinking_tool_choice":["auto"],"thinking_fields":["x.think=on"]}`, fields: `"x":{"think":"on"},`, choice: `"required"`,
			want: tpChoiceBody(`"x":{"think":"on"},`, tpTU, `"auto"`)},
		{name: "thinking_models override", cfg: `{"profile":"function_only","thinking_tool_choice":["auto"],"thinking_models":["m"]}`, choice: tpNamedGet, want: tpChoiceBody("", tpTG, `"auto"`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := tpChoiceBody(tc.fields, tpT, tc.choice)
			if tc.model != "" {
				body = strings.Replace(body, `"model":"m"`, `"model":"`+tc.model+`"`, 1)
			}
			if tc.err != "" {
				tpErr(t, transforms.ProtocolResponses, tpRules(tc.cfg), body, "unsupported_tool_choice", "tool_choice", tc.err)
				return
			}
			x := tpOK(t, transforms.ProtocolResponses, tpRules(tc.cfg), body, tc.want)
			if tc.decided != nil {
				tpDecided(t, x, tc.decided.tool, tc.decided.action, tc.decided.reason)
			}
		})
	}
}

// TestToolsPlanToolChoiceTargets: choices of built-ins, custom tools,
// namespaced tools, and of tools that cannot be sent.
func TestToolsPlanToolChoiceTargets(t *testing.T) {
	okCases := []struct{ name, rules, body, want string }{
		{
			name:  "a degraded built-in's choice names its function",
			rules: tpProfile("function_only"),
			body:  `{"tools":[{"type":"function","name":"a"},{"type":"local_shell"}],"tool_choice":{"type":"local_shell"}}`,
			want:  `{"tools":[{"type":"function","name":"a"},` + tpDegraded("local_shell", "local_shell") + `],"tool_choice":{"type":"function","name":"local_shell"}}`,
		},
		{
			name:  "glm: only the chosen built-in is sent",
			rules: tpProfile("glm"),
			body:  `{"tools":[{"type":"function","name":"a"},{"type":"local_shell"}],"tool_choice":{"type":"local_shell"}}`,
			want:  `{"tools":[` + tpDegraded("local_shell", "local_shell") + `],"tool_choice":"auto"}`,
		},
		{
			name:  "tool_choice written before tools",
			rules: tpProfile("glm"),
			body:  `{"tool_choice":{"type":"function","name":"get.weather"},"model":"m",` + tpT + `}`,
			want:  `{"tool_choice":"auto","model":"m",` + tpTG + `}`,
		},
		{
			name:  "a degraded custom tool's choice",
			rules: tpProfile("function_only"),
			body:  `{"tools":[{"type":"custom","name":"run.sql"}],"tool_choice":{"type":"custom","name":"run.sql"}}`,
			want:  `{"tools":[{"type":"function","name":"run_sql","parameters":` + genericParams + `,"strict":false}],"tool_choice":{"type":"function","name":"run_sql"}}`,
		},
		{
			name:  "a namespaced tool chosen by namespace and name",
			rules: tpProfile("function_only"),
			body:  `{"tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"x"},{"type":"function","name":"y"}]}],"tool_choice":{"type":"function","namespace":"ns","name":"x"}}`,
			want:  `{"tools":[{"type":"function","name":"ns__x"},{"type":"function","name":"ns__y"}],"tool_choice":{"type":"function","name":"ns__x"}}`,
		},
		{
			name:  "a namespaced tool chosen by its name alone",
			rules: tpProfile("glm"),
			body:  `{"tools":[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"x"},{"type":"function","name":"y"}]}],"tool_choice":{"type":"function","name":"y"}}`,
			want:  `{"tools":[{"type":"function","name":"ns__y"}],"tool_choice":"auto"}`,
		},
		{
			name:  "allowed_tools: entries that cannot be sent are left out",
			rules: tpProfile("function_only"),
			body:  `{"tools":[{"type":"function","name":"a"},{"type":"web_search"},{"type":"function","name":"b"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"web_search"},{"type":"function","name":"a"}]}}`,
			want:  `{"tools":[{"type":"function","name":"a"}],"tool_choice":"auto"}`,
		},
		{
			name:  "openai_chat allowed_tools keeps the entries of native tools",
			rules: tpProfile("openai_chat"),
			body:  `{"tools":[{"type":"function","name":"a.b","parameters":{}},{"type":"custom","name":"c"},{"type":"function","name":"d"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"custom","name":"c"},{"type":"function","name":"a.b"}]}}`,
			want:  `{"tools":[{"type":"function","name":"a_b","parameters":{}},{"type":"custom","name":"c"},{"type":"function","name":"d"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"custom","name":"c"},{"type":"function","name":"a_b"}]}}`,
		},
		{
			name:  "a named choice imitated: native tools that were not chosen are not sent either",
			rules: tpRules(`{"profile":"glm","native_types":["web_search"]}`),
			body:  `{"tools":[{"type":"function","name":"a.b","parameters":{}},{"type":"web_search"},{"type":"function","name":"d"}],"tool_choice":{"type":"function","name":"d"}}`,
			want:  `{"tools":[{"type":"function","name":"d"}],"tool_choice":"auto"}`,
		},
	}
	for _, tc := range okCases {
		t.Run(tc.name, func(t *testing.T) { tpOK(t, transforms.ProtocolResponses, tc.rules, tc.body, tc.want) })
	}
	errCases := []struct{ name, rules, body, msg string }{
		{
			name: "a dropped web_search", rules: tpProfile("function_only"),
			body: `{"tools":[{"type":"function","name":"a"},{"type":"web_search"}],"tool_choice":{"type":"web_search"}}`,
			msg:  `tool_choice names a web_search tool, which the upstream does not have (tools_plan profile function_only)`,
		},
		{
			name: "a dropped hosted tool", rules: tpProfile("kimi"),
			body: `{"tools":[{"type":"function","name":"abc"},{"type":"file_search"}],"tool_choice":{"type":"file_search"}}`,
			msg:  `tool_choice names a file_search tool, which the upstream does not have (tools_plan profile kimi)`,
		},
		{
			name: "a function not declared", rules: tpProfile("function_only"),
			body: `{"tools":[{"type":"function","name":"a"}],"tool_choice":{"type":"function","name":"zz.top"}}`,
			msg:  `tool_choice names tool "zz.top", which cannot be sent to the upstream: it is not declared`,
		},
		{
			name: "a deferred function dropped for tool_search", rules: tpProfile("function_only"),
			body: `{"tools":[{"type":"function","name":"a"},{"type":"tool_search","execution":"client"},{"type":"function","name":"lazy","defer_loading":true}],"tool_choice":{"type":"function","name":"lazy"}}`,
			msg:  `tool_choice names tool "lazy", which cannot be sent to the upstream: deferred: the model loads it through tool_search`,
		},
		{
			name: "a dropped custom tool", rules: tpRules(`{"profile":"function_only","types":{"custom":"drop"}}`),
			body: `{"tools":[{"type":"function","name":"a"},{"type":"custom","name":"c"}],"tool_choice":{"type":"custom","name":"c"}}`,
			msg:  `tool_choice names a custom tool, which the upstream does not have (tools_plan profile function_only)`,
		},
		{
			name: "allowed_tools naming only tools that cannot be sent", rules: tpProfile("function_only"),
			body: `{"tools":[{"type":"function","name":"a"},{"type":"web_search"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"web_search"},{"type":"function","name":"nope"}]}}`,
			msg:  `none of the tools tool_choice allows can be sent to the upstream (tools_plan profile function_only): web_search, nope`,
		},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			tpErr(t, transforms.ProtocolResponses, tc.rules, tc.body, "unsupported_tool_choice", "tool_choice", tc.msg)
		})
	}
}

// TestToolsPlanToolChoiceChat: the same planning on Chat's shapes.
func TestToolsPlanToolChoiceChat(t *testing.T) {
	const (
		ct  = `"tools":[{"type":"function","function":{"name":"get.weather","parameters":{}}},{"type":"function","function":{"name":"search"}}]`
		ctu = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}},{"type":"function","function":{"name":"search"}}]`
		ctg = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}]`
	)
	named := `{"type":"function","function":{"name":"get.weather"}}`
	for _, tc := range []struct{ name, cfg, fields, choice, want string }{
		{"function_only named", `{"profile":"function_only"}`, "", named, tpChoiceBody("", ctu, `{"type":"function","function":{"name":"get_weather"}}`)},
		{"glm named", `{"profile":"glm"}`, "", named, tpChoiceBody("", ctg, `"auto"`)},
		{"glm none", `{"profile":"glm"}`, `"messages":[{"role":"user","content":"hi"}],`, `"none"`, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"deepseek thinking required", `{"profile":"deepseek"}`, `"thinking":{"type":"enabled"},`, `"required"`, tpChoiceBody(`"thinking":{"type":"enabled"},`, ctu, `"auto"`)},
		{"bedrock thinking named", `{"profile":"bedrock"}`, `"thinking":{"type":"enabled"},`, named, tpChoiceBody(`"thinking":{"type":"enabled"},`, ctg, `"auto"`)},
		{"openai_chat nested allowed_tools", `{"profile":"openai_chat"}`, "", `{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"get.weather"}}]}}`,
			tpChoiceBody("", ctu, `{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"get_weather"}}]}}`)},
		{"function_only nested allowed_tools imitated", `{"profile":"function_only"}`, "", `{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"get.weather"}}]}}`,
			tpChoiceBody("", ctg, `"required"`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpOK(t, transforms.ProtocolChat, tpRules(tc.cfg), tpChoiceBody(tc.fields, ct, tc.choice), tc.want)
		})
	}
	tpErr(t, transforms.ProtocolChat, tpRules(`{"profile":"qwen","unsupported_choice":"reject"}`), tpChoiceBody(`"enable_thinking":true,`, ct, `"required"`),
		"unsupported_tool_choice", "tool_choice", `tool_choice "required" is not supported by the upstream while thinking (tools_plan profile qwen)`)
}

// TestToolsPlanBareChoiceSharedByNamespacesIsAmbiguous: a choice naming,
// by its name alone, a tool that two flattened namespaces have is a 400
// naming both, the same one every time; a name only one namespace has, a
// namespaced choice, or a top-level function of that name resolves to its
// tool.
func TestToolsPlanBareChoiceSharedByNamespacesIsAmbiguous(t *testing.T) {
	rules := tpProfile("function_only")
	const msg = `tool_choice names "get" without a namespace, and the namespaces n1, n2 each have a tool of that name`
	for _, tools := range []string{
		`"tools":[{"type":"namespace","name":"n1","tools":[{"type":"function","name":"get"}]},{"type":"namespace","name":"n2","tools":[{"type":"function","name":"get"}]}]`,
		`"tools":[{"type":"namespace","name":"n2","tools":[{"type":"function","name":"get"}]},{"type":"function","name":"other"},{"type":"namespace","name":"n1","tools":[{"type":"function","name":"get"}]}]`,
	} {
		for i := 0; i < 50; i++ {
			tpErr(t, transforms.ProtocolResponses, rules, `{"model":"m",`+tools+`,"tool_choice":{"type":"function","name":"get"}}`,
				"ambiguous_tool_choice", "tool_choice", msg)
			tpErr(t, transforms.ProtocolResponses, rules, `{"model":"m",`+tools+`,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"other"},{"type":"function","name":"get"}]}}`,
				"ambiguous_tool_choice", "tool_choice.tools[1]", msg)
		}
	}
	const two = `"tools":[{"type":"namespace","name":"n1","tools":[{"type":"function","name":"get"},{"type":"function","name":"put"}]},{"type":"namespace","name":"n2","tools":[{"type":"function","name":"get"}]}]`
	const flat = `"tools":[{"type":"function","name":"n1__get"},{"type":"function","name":"n1__put"},{"type":"function","name":"n2__get"}]`
	t.Run("a bare name one namespace has", func(t *testing.T) {
		tpOKValid(t, transforms.ProtocolResponses, rules, `{"model":"m",`+two+`,"tool_choice":{"type":"function","name":"put"}}`,
			`{"model":"m",`+flat+`,"tool_choice":{"type":"function","name":"n1__put"}}`)
	})
	t.Run("a namespaced choice of the shared name", func(t *testing.T) {
		tpOKValid(t, transforms.ProtocolResponses, rules, `{"model":"m",`+two+`,"tool_choice":{"type":"function","namespace":"n2","name":"get"}}`,
			`{"model":"m",`+flat+`,"tool_choice":{"type":"function","name":"n2__get"}}`)
	})
	t.Run("a top-level function of the shared name is not ambiguous", func(t *testing.T) {
		tpOKValid(t, transforms.ProtocolResponses, rules,
			`{"model":"m","tools":[{"type":"function","name":"get"},{"type":"namespace","name":"n1","tools":[{"type":"function","name":"get"}]},{"type":"namespace","name":"n2","tools":[{"type":"function","name":"get"}]}],"tool_choice":{"type":"function","name":"get"}}`,
			`{"model":"m","tools":[{"type":"function","name":"get"},{"type":"function","name":"n1__get"},{"type":"function","name":"n2__get"}],"tool_choice":{"type":"function","name":"get"}}`)
	})
}

// TestToolsPlanManyBareAllowedToolsResolve: 8000 namespaced tools and an
// allowed_tools entry by bare name for each, in reverse order: every entry
// resolves to its own tool, imitated or renamed per profile. Bare names
// are looked up in an index; a search per entry would be quadratic here.
func TestToolsPlanManyBareAllowedToolsResolve(t *testing.T) {
	const nsCount, perNS = 80, 100
	var tools, entries, flatTools, flatEntries []string
	for n := 0; n < nsCount; n++ {
		var members []string
		for i := 0; i < perNS; i++ {
			name := fmt.Sprintf("t%05d", n*perNS+i)
			members = append(members, `{"type":"function","name":"`+name+`"}`)
			flatTools = append(flatTools, fmt.Sprintf(`{"type":"function","name":"ns%03d__%s"}`, n, name))
		}
		tools = append(tools, fmt.Sprintf(`{"type":"namespace","name":"ns%03d","tools":[%s]}`, n, strings.Join(members, ",")))
	}
	// Entries in reverse order of declaration.
	for k := nsCount*perNS - 1; k >= 0; k-- {
		entries = append(entries, fmt.Sprintf(`{"type":"function","name":"t%05d"}`, k))
		flatEntries = append(flatEntries, fmt.Sprintf(`{"type":"function","name":"ns%03d__t%05d"}`, k/perNS, k))
	}
	body := `{"model":"m","tools":[` + strings.Join(tools, ",") + `],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[` + strings.Join(entries, ",") + `]}}`
	t.Run("function_only imitates", func(t *testing.T) {
		tpOKValid(t, transforms.ProtocolResponses, tpRules(`{"profile":"function_only","max_tools":0}`), body,
			`{"model":"m","tools":[`+strings.Join(flatTools, ",")+`],"tool_choice":"required"}`)
	})
	t.Run("openai_chat renames the entries", func(t *testing.T) {
		tpOKValid(t, transforms.ProtocolResponses, tpRules(`{"profile":"openai_chat","max_tools":0}`), body,
			`{"model":"m","tools":[`+strings.Join(flatTools, ",")+`],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[`+strings.Join(flatEntries, ",")+`]}}`)
	})
}

// TestToolsPlanImitatedChoiceLeavesLoadedToolsOut: kimi has no named
// choice, so only the chosen tool is sent, with auto; a tool an earlier
// tool_search loaded is not sent alongside it.
func TestToolsPlanImitatedChoiceLeavesLoadedToolsOut(t *testing.T) {
	x := tpOKValid(t, transforms.ProtocolResponses, tpProfile("kimi"),
		`{"model":"m","tools":[{"type":"tool_search","execution":"client"},{"type":"function","name":"fff","parameters":{}}],"tool_choice":{"type":"function","name":"fff"},`+
			`"input":[{"type":"tool_search_call","call_id":"c1","execution":"client","arguments":{"query":"q"}},`+
			`{"type":"tool_search_output","call_id":"c1","execution":"client","tools":[{"type":"function","name":"lt1","parameters":{}}]}]}`,
		`{"model":"m","tools":[{"type":"function","name":"fff","parameters":{}}],"tool_choice":"auto",`+
			`"input":[{"type":"function_call","call_id":"c1","name":"tool_search","arguments":`+transformtest.JSONString(`{"query":"q"}`)+`},`+
			`{"type":"function_call_output","call_id":"c1","output":`+transformtest.JSONString(`[{"type":"function","name":"lt1","parameters":{}}]`)+`}]}`)
	tpDecided(t, x, "fff", "degrade_tool_choice", "a named choice is not supported without thinking: only this tool is sent, with auto")
}

// TestToolsPlanNoneRemovesToolsWherever: "none" without the mode removes
// tools and tool_choice wherever they stand, and the rest stays valid.
func TestToolsPlanNoneRemovesToolsWherever(t *testing.T) {
	tools := `"tools":[{"type":"function","name":"a.b"}]`
	for _, tc := range []struct{ body, want string }{
		{`{"tool_choice":"none",` + tools + `}`, `{}`},
		{`{` + tools + `,"tool_choice":"none"}`, `{}`},
		{`{"tool_choice":"none","model":"m",` + tools + `}`, `{"model":"m"}`},
		{`{` + tools + `,"model":"m","tool_choice":"none"}`, `{"model":"m"}`},
		{`{"a":1,` + tools + `,"b":2,"tool_choice":"none","c":3}`, `{"a":1,"b":2,"c":3}`},
		{"{ \"tool_choice\" : \"none\" ,\n " + tools + " , \"z\": [1] }", `{"z":[1]}`},
		{`{"input":[{"type":"function_call","call_id":"c","name":"a.b","arguments":"{}"}],` + tools + `,"tool_choice":"none"}`, `{"input":[{"type":"function_call","call_id":"c","name":"a_b","arguments":"{}"}]}`},
	} {
		for _, p := range []string{"glm", "bedrock"} {
			tpOK(t, transforms.ProtocolResponses, tpProfile(p), tc.body, tc.want)
		}
	}
}

// TestToolsPlanNoneRemovesToolsInEveryMemberOrder: tools and tool_choice
// both go, whatever their places among the other members and whatever the
// white space: neighbours share a comma, which must go once.
func TestToolsPlanNoneRemovesToolsInEveryMemberOrder(t *testing.T) {
	members := []string{`"model":"m"`, `"tools":[{"type":"function","name":"f"}]`, `"tool_choice":"none"`, `"input":"hi"`}
	var perm func([]string, int)
	perm = func(m []string, k int) {
		if k == len(m) {
			for _, sep := range []string{",", " ,\n "} {
				body := "{" + strings.Join(m, sep) + "}"
				x := transformtest.Begin(t, transformtest.Chain(t, `[{"transform":"tools_plan","config":{"profile":"glm"}}]`), transforms.ProtocolResponses, []byte(body))
				out, err := x.RewriteRequest([]byte(body))
				if err != nil {
					t.Fatal(err)
				}
				transformtest.JSONEqual(t, out, `{"model":"m","input":"hi"}`)
			}
			return
		}
		for i := k; i < len(m); i++ {
			m[k], m[i] = m[i], m[k]
			perm(m, k+1)
			m[k], m[i] = m[i], m[k]
		}
	}
	perm(members, 0)
}

// TestToolsPlanNoneEmptiesAdditionalTools: glm has no tool_choice none, so
// no tools are sent: the top-level list and tool_choice go, and the lists
// of additional_tools items are emptied.
func TestToolsPlanNoneEmptiesAdditionalTools(t *testing.T) {
	tpOKValid(t, transforms.ProtocolResponses, tpProfile("glm"),
		`{"model":"m","tool_choice":"none","tools":[{"type":"function","name":"a"}],"input":[`+
			`{"type":"message","role":"user","content":"hi"},`+
			`{"type":"additional_tools","role":"developer","tools":[{"type":"local_shell"},{"type":"namespace","name":"ns","tools":[{"type":"function","name":"x"}]}]}]}`,
		`{"model":"m","input":[{"type":"message","role":"user","content":"hi"},{"type":"additional_tools","role":"developer","tools":[]}]}`)
	// With no top-level tools at all.
	tpOKValid(t, transforms.ProtocolResponses, tpProfile("glm"),
		`{"tool_choice":"none","input":[{"type":"additional_tools","tools":[{"type":"function","name":"b.c"}]}]}`,
		`{"input":[{"type":"additional_tools","tools":[]}]}`)
}

// --- max_tools -------------------------------------------------------------------------

func tpManyTools(n int, chat bool) string {
	var b strings.Builder
	b.WriteString(`{"model":"m","tools":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		if chat {
			fmt.Fprintf(&b, `{"type":"function","function":{"name":"tool_%03d"}}`, i)
		} else {
			fmt.Fprintf(&b, `{"type":"function","name":"tool_%03d"}`, i)
		}
	}
	b.WriteString(`]}`)
	return b.String()
}

// TestToolsPlanMaxTools: over the limit after planning is a 400 naming the
// limit and the count; the upstream receives nothing.
func TestToolsPlanMaxTools(t *testing.T) {
	msg := func(max, n int) string {
		return fmt.Sprintf("the upstream takes at most %d tools (max_tools) and this request has %d after planning", max, n)
	}
	three := tpRules(`{"profile":"function_only","max_tools":3}`)
	// Counted after planning: web_search dropped, local_shell degraded, the
	// namespace's one member flattened.
	tpErr(t, transforms.ProtocolResponses, three, `{"tools":[{"type":"function","name":"a"},{"type":"function","name":"b"},{"type":"local_shell"},{"type":"web_search"},{"type":"namespace","name":"n","tools":[{"type":"function","name":"c"}]}]}`,
		"too_many_tools", "tools", msg(3, 4))
	tpOK(t, transforms.ProtocolResponses, three, `{"tools":[{"type":"function","name":"a"},{"type":"function","name":"b"},{"type":"local_shell"},{"type":"web_search"},{"type":"file_search"}]}`,
		`{"tools":[{"type":"function","name":"a"},{"type":"function","name":"b"},`+tpDegraded("local_shell", "local_shell")+`]}`)
	// Every preset has 128, also when nothing else changes.
	for _, p := range tpProfiles {
		tpErr(t, transforms.ProtocolResponses, tpProfile(p), tpManyTools(129, false), "too_many_tools", "tools", msg(128, 129))
		body := tpManyTools(128, false)
		out, _, err := tpRun(t, transforms.ProtocolResponses, tpProfile(p), body)
		if err != nil || string(out) != body {
			t.Fatalf("%s: 128 valid tools must pass untouched: %v", p, err)
		}
	}
	// 0 is no limit.
	body := tpManyTools(300, false)
	out, _, err := tpRun(t, transforms.ProtocolResponses, tpRules(`{"profile":"function_only","max_tools":0}`), body)
	if err != nil || string(out) != body {
		t.Fatalf("max_tools 0: %v", err)
	}
	// Sending no tools at all is within any limit.
	tpOK(t, transforms.ProtocolResponses, tpRules(`{"profile":"glm","max_tools":2}`), strings.TrimSuffix(tpManyTools(200, false), "}")+`,"tool_choice":"none"}`, `{"model":"m"}`)
	// A named choice imitated sends one tool.
	tpOK(t, transforms.ProtocolResponses, tpRules(`{"profile":"glm","max_tools":1}`), tpChoiceBody("", tpT, tpNamedGet), tpChoiceBody("", tpTG, `"auto"`))
	// Tools an earlier search loaded count.
	tpErr(t, transforms.ProtocolResponses, tpRules(`{"profile":"function_only","max_tools":2}`),
		`{"tools":[{"type":"tool_search","execution":"client"},{"type":"function","name":"a"}],"input":[{"type":"tool_search_output","call_id":"c","tools":[{"type":"function","name":"b"}]}]}`,
		"too_many_tools", "tools", msg(2, 3))
	// Chat.
	tpErr(t, transforms.ProtocolChat, tpRules(`{"profile":"deepseek","max_tools":1}`), tpManyTools(2, true), "too_many_tools", "tools", msg(1, 2))
	tpErr(t, transforms.ProtocolChat, tpProfile("kimi"), tpManyTools(129, true), "too_many_tools", "tools", msg(128, 129))
}

// --- chaining with field_custom_tools_to_function --------------------------------------

// TestToolsPlanChainedWithCustomRule: both rules in one chain, in either
// order, convert each custom tool once.
func TestToolsPlanChainedWithCustomRule(t *testing.T) {
	custom := `{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}`
	plan := `{"transform":"tools_plan","config":{"profile":"function_only"}}`
	body := `{"tools":[{"type":"custom","name":"apply_patch","description":"Edit"},{"type":"custom","name":"run.sql"},{"type":"local_shell"}],` +
		`"tool_choice":{"type":"custom","name":"run.sql"},` +
		`"input":[{"type":"custom_tool_call","id":"ctc_1","call_id":"c1","name":"run.sql","input":"select 1"},{"type":"custom_tool_call_output","id":"o","call_id":"c1","output":"1"}]}`
	want := `{"tools":[{"type":"function","name":"apply_patch","description":` + patchDescription(t) + `,"parameters":` + patchParameters(t) + `,"strict":false},` +
		`{"type":"function","name":"run_sql","parameters":` + genericParams + `,"strict":false},` + tpDegraded("local_shell", "local_shell") + `],` +
		`"tool_choice":{"type":"function","name":"run_sql"},` +
		`"input":[{"type":"function_call","call_id":"c1","name":"run_sql","arguments":` + transformtest.JSONString(`{"input":"select 1"}`) + `},{"type":"function_call_output","call_id":"c1","output":"1"}]}`
	for name, rules := range map[string]string{
		"tools_plan alone":                   "[" + plan + "]",
		"custom rule first":                  "[" + custom + "," + plan + "]",
		"tools_plan first":                   "[" + plan + "," + custom + "]",
		"default custom rule, then the plan": `[{"transform":"field_custom_tools_to_function"},` + plan + "]",
	} {
		t.Run(name, func(t *testing.T) {
			x := tpOK(t, transforms.ProtocolResponses, rules, body, want)
			n := 0
			for _, d := range x.Decisions() {
				if d.Action == "convert_definition" {
					n++
				}
			}
			if n != 2 {
				t.Errorf("%d custom definitions converted, want 2: %+v", n, x.Decisions())
			}
		})
	}
	chatBody := `{"tools":[{"type":"custom","custom":{"name":"apply_patch","description":"Edit"}}],"messages":[{"role":"assistant","tool_calls":[{"id":"k","type":"custom","custom":{"name":"apply_patch","input":"*** Begin Patch\n*** End Patch"}}]}]}`
	chatWant := `{"tools":[{"type":"function","function":{"name":"apply_patch","description":` + patchDescription(t) + `,"parameters":` + patchParameters(t) + `,"strict":false}}],` +
		`"messages":[{"role":"assistant","tool_calls":[{"id":"k","type":"function","function":{"name":"apply_patch","arguments":` + transformtest.JSONString(`{"input":"*** Begin Patch\n*** End Patch"}`) + `}}]}]}`
	for _, rules := range []string{"[" + custom + "," + plan + "]", "[" + plan + "," + custom + "]"} {
		tpOK(t, transforms.ProtocolChat, rules, chatBody, chatWant)
	}
}

// --- the real Codex request -----------------------------------------------------------

func tpCodexFixture(t *testing.T) []byte {
	t.Helper()
	for _, p := range []string{
		"../../integration/testdata/codex/codex-0.169-gpt-5.5-responses-request.json",
		"../../shared/fixtures/codex-0.169-gpt-5.5-responses-request.json",
	} {
		if b, err := os.ReadFile(p); err == nil {
			return b
		}
	}
	t.Fatal("the Codex 0.169 fixture is missing")
	return nil
}

// TestToolsPlanCodexFixture: Codex 0.169's real request through each
// preset: web_search gone, tool_search a function with Codex's own
// parameters, every tool a function whose name matches the preset's rule
// (openai_chat keeps apply_patch custom: Chat Completions takes custom
// tools), the rest of the request as Codex sent it.
func TestToolsPlanCodexFixture(t *testing.T) {
	body := tpCodexFixture(t)
	var in struct {
		Input      json.RawMessage   `json:"input"`
		ToolChoice string            `json:"tool_choice"`
		Tools      []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		t.Fatal(err)
	}
	var search struct {
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(in.Tools[8], &search); err != nil || search.Description == "" {
		t.Fatalf("fixture tools[8] is not Codex's tool_search: %s", in.Tools[8])
	}
	wantNames := []string{"exec_command", "write_stdin", "request_user_input", "apply_patch", "view_image", "get_goal", "create_goal", "update_goal", "tool_search"}
	for _, pp := range presetNamePatterns {
		t.Run(pp.profile, func(t *testing.T) {
			re := regexp.MustCompile(pp.pattern)
			out, _, err := tpRun(t, transforms.ProtocolResponses, tpProfile(pp.profile), string(body))
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Input      json.RawMessage `json:"input"`
				ToolChoice string          `json:"tool_choice"`
				Tools      []struct {
					Type        string          `json:"type"`
					Name        string          `json:"name"`
					Description string          `json:"description"`
					Parameters  json.RawMessage `json:"parameters"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if len(got.Tools) != len(wantNames) {
				t.Fatalf("%d tools, want %d", len(got.Tools), len(wantNames))
			}
			for i, tool := range got.Tools {
				wantType := "function"
				if pp.profile == "openai_chat" && tool.Name == "apply_patch" {
					wantType = "custom"
				}
				if tool.Type != wantType || tool.Name != wantNames[i] || !re.MatchString(tool.Name) {
					t.Errorf("tools[%d]: %s %q, want %s %q matching %s", i, tool.Type, tool.Name, wantType, wantNames[i], pp.pattern)
				}
			}
			ts := got.Tools[8]
			if ts.Description != search.Description {
				t.Errorf("tool_search description %q", ts.Description)
			}
			transformtest.JSONEqual(t, ts.Parameters, string(search.Parameters))
			if got.ToolChoice != in.ToolChoice {
				t.Errorf("tool_choice %q, want %q", got.ToolChoice, in.ToolChoice)
			}
			transformtest.JSONEqual(t, got.Input, string(in.Input))
			// The functions Codex declared reach the upstream byte for byte.
			for _, i := range []int{0, 1, 2, 4, 5, 6, 7} {
				if !strings.Contains(string(out), string(in.Tools[i])) {
					t.Errorf("tools[%d] changed", i)
				}
			}
		})
	}
}

// --- pass-through ------------------------------------------------------------------------

// TestToolsPlanLeavesFitRequestsAlone: a request the upstream takes as it
// is reaches it as the same bytes, and the response phase is not needed.
func TestToolsPlanLeavesFitRequestsAlone(t *testing.T) {
	for _, tc := range []struct {
		p    transforms.Protocol
		body string
	}{
		{transforms.ProtocolResponses, `{"model":"m","tools":[{"type":"function","name":"a","defer_loading":false}],"tool_choice":{"type":"function","name":"a"},"input":[{"type":"function_call","call_id":"c","name":"a","arguments":"{}"}]}`},
		{transforms.ProtocolResponses, `{"model":"m","input":"hi"}`},
		{transforms.ProtocolChat, `{"model":"m","tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"required","messages":[{"role":"user","content":"x"}]}`},
	} {
		b := []byte(tc.body)
		x := transformtest.Begin(t, transformtest.Chain(t, tpProfile("function_only")), tc.p, b)
		out, err := x.RewriteRequest(b)
		if err != nil || !jsonspan.SameSlice(out, b) {
			t.Errorf("%s: err %v, body %s", tc.body, err, out)
		}
		if x.WantsResponse() {
			t.Errorf("%s: response phase wanted for an untouched request", tc.body)
		}
	}
	// A body that is not JSON is refused, not planned around.
	bad := `{"tools":[{"type":"local_shell"}`
	out, _, err := tpRun(t, transforms.ProtocolResponses, tpProfile("function_only"), bad)
	transformtest.Rejected(t, out, err, "invalid_json")
}

// --- configuration -----------------------------------------------------------------------

func tpCaddyfile(t *testing.T, block string) (*ToolsPlan, error) {
	t.Helper()
	var tp ToolsPlan
	err := tp.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block))
	return &tp, err
}

// TestToolsPlanCaddyfile: the rule block, one option per line, gives the
// same config as the JSON.
func TestToolsPlanCaddyfile(t *testing.T) {
	for _, tc := range []struct{ block, json string }{
		{"tools_plan {\n\tprofile deepseek\n\tmax_tools 64\n\tweb_search drop\n}", `{"profile":"deepseek","max_tools":64,"types":{"web_search":"drop"}}`},
		{"tools_plan {\n\tprofile glm\n}", `{"profile":"glm"}`},
		{"tools_plan", `{}`},
		{`tools_plan {
			profile kimi
			native_types web_search custom
			local_shell drop
			computer reject
			unknown_types reject
			namespaces native
			namespace_separator -
			tool_choice none auto required named allowed_tools
			thinking_tool_choice auto
			unsupported_choice reject
			max_tools 0
			name_pattern ^[a-zA-Z_][a-zA-Z0-9_-]{2,40}$
			max_name_length 32
			thinking_models kimi-*-thinking* k2*
			thinking_fields thinking.type=enabled reasoning_effort
		}`, `{"profile":"kimi","native_types":["web_search","custom"],"types":{"local_shell":"drop","computer":"reject"},"unknown_types":"reject",` +
			`"namespaces":"native","namespace_separator":"-","tool_choice":["none","auto","required","named","allowed_tools"],"thinking_tool_choice":["auto"],` +
			`"unsupported_choice":"reject","max_tools":0,"name_pattern":"^[a-zA-Z_][a-zA-Z0-9_-]{2,40}$","max_name_length":32,` +
			`"thinking_models":["kimi-*-thinking*","k2*"],"thinking_fields":["thinking.type=enabled","reasoning_effort"]}`},
	} {
		got, err := tpCaddyfile(t, tc.block)
		if err != nil {
			t.Fatalf("%s: %v", tc.block, err)
		}
		var want ToolsPlan
		dec := json.NewDecoder(strings.NewReader(tc.json))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.block, *got, want)
		}
		b, _ := json.Marshal(got)
		transformtest.JSONEqual(t, b, tc.json)
		// Both compile, and plan the same request the same way.
		body := `{"model":"m","thinking":{"type":"enabled"},"tools":[{"type":"function","name":"get.weather"},{"type":"web_search"}],"tool_choice":"required"}`
		outJSON, _, errJSON := tpRun(t, transforms.ProtocolResponses, tpRules(tc.json), body)
		outCF, _, errCF := tpRun(t, transforms.ProtocolResponses, tpRules(string(b)), body)
		if (errJSON == nil) != (errCF == nil) || string(outJSON) != string(outCF) {
			t.Errorf("%s: JSON gives %v %s, Caddyfile %v %s", tc.block, errJSON, outJSON, errCF, outCF)
		}
	}
	// The first block, planned: deepseek thinks, so required becomes auto.
	tpOK(t, transforms.ProtocolResponses, tpRules(`{"profile":"deepseek","max_tools":64,"types":{"web_search":"drop"}}`),
		`{"model":"m","thinking":{"type":"enabled"},"tools":[{"type":"function","name":"get.weather"},{"type":"web_search"}],"tool_choice":"required"}`,
		`{"model":"m","thinking":{"type":"enabled"},"tools":[{"type":"function","name":"get_weather"}],"tool_choice":"auto"}`)
}

func TestToolsPlanCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct{ block, want string }{
		{"tools_plan {\n profile deepseek\n profile kimi\n}", "profile already specified, at Testfile:3"},
		{"tools_plan {\n web_search drop\n max_tools 3\n web_search reject\n}", "web_search already specified, at Testfile:4"},
		{"tools_plan {\n web_search maybe\n}", `unrecognized option "web_search" (a tool type takes one of native, degrade, drop, reject), at Testfile:2`},
		{"tools_plan {\n web_search\n}", `unrecognized option "web_search" (a tool type takes one of native, degrade, drop, reject), at Testfile:2`},
		{"tools_plan {\n frobnicate a b\n}", `unrecognized option "frobnicate" (a tool type takes one of native, degrade, drop, reject), at Testfile:2`},
		{"tools_plan {\n max_tools many\n}", `max_tools: "many" is not a whole number, at Testfile:2`},
		{"tools_plan {\n max_tools -1\n}", `max_tools: "-1" is not a whole number, at Testfile:2`},
		{"tools_plan {\n max_name_length 1.5\n}", `max_name_length: "1.5" is not a whole number, at Testfile:2`},
		{"tools_plan {\n profile\n}", "wrong argument count or unexpected line ending after 'profile', at Testfile:2"},
		{"tools_plan {\n profile a b\n}", "wrong argument count or unexpected line ending after 'b', at Testfile:2"},
		{"tools_plan {\n tool_choice\n}", "wrong argument count or unexpected line ending after 'tool_choice', at Testfile:2"},
	} {
		_, err := tpCaddyfile(t, tc.block)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: err = %v\nwant %s", tc.block, err, tc.want)
		}
	}
}

// TestToolsPlanTypeLinesOverrideNativeTypes: a type's own line (degrade,
// reject) wins over the preset and over native_types, in JSON and in the
// Caddyfile, whatever the order of the Caddyfile's lines.
func TestToolsPlanTypeLinesOverrideNativeTypes(t *testing.T) {
	body := `{"model":"m","tools":[{"type":"custom","name":"raw","description":"r"},{"type":"function","name":"f"}]}`
	degraded := `{"model":"m","tools":[{"type":"function","name":"raw","description":"r","parameters":` + genericParams + `,"strict":false},{"type":"function","name":"f"}]}`
	const rejected = `tool type "custom" at tools[0] is not supported by the upstream (tools_plan profile %s)`
	t.Run("json degrade over the preset", func(t *testing.T) {
		tpOKValid(t, transforms.ProtocolResponses, tpRules(`{"profile":"openai_chat","types":{"custom":"degrade"}}`), body, degraded)
	})
	t.Run("json degrade over native_types", func(t *testing.T) {
		tpOKValid(t, transforms.ProtocolResponses, tpRules(`{"profile":"function_only","native_types":["custom"],"types":{"custom":"degrade"}}`), body, degraded)
	})
	t.Run("json reject", func(t *testing.T) {
		tpErr(t, transforms.ProtocolResponses, tpRules(`{"profile":"openai_chat","types":{"custom":"reject"}}`), body,
			"unsupported_tool", "tools[0]", fmt.Sprintf(rejected, "openai_chat"))
		tpErr(t, transforms.ProtocolResponses, tpRules(`{"profile":"openai_chat","native_types":["custom"],"types":{"custom":"reject"}}`), body,
			"unsupported_tool", "tools[0]", fmt.Sprintf(rejected, "openai_chat"))
	})
	for _, tc := range []struct{ name, block string }{
		{"caddyfile reject", "tools_plan {\n\tprofile openai_chat\n\tcustom reject\n}"},
		{"caddyfile reject over native_types", "tools_plan {\n\tprofile openai_chat\n\tnative_types custom\n\tcustom reject\n}"},
		{"caddyfile reject, native_types after", "tools_plan {\n\tprofile openai_chat\n\tcustom reject\n\tnative_types custom\n}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, err := tpCaddyfile(t, tc.block)
			if err != nil {
				t.Fatal(err)
			}
			cfg, _ := json.Marshal(tp)
			tpErr(t, transforms.ProtocolResponses, tpRules(string(cfg)), body, "unsupported_tool", "tools[0]", fmt.Sprintf(rejected, "openai_chat"))
		})
	}
	t.Run("caddyfile degrade", func(t *testing.T) {
		tp, err := tpCaddyfile(t, "tools_plan {\n\tprofile openai_chat\n\tcustom degrade\n}")
		if err != nil {
			t.Fatal(err)
		}
		cfg, _ := json.Marshal(tp)
		tpOKValid(t, transforms.ProtocolResponses, tpRules(string(cfg)), body, degraded)
	})
}

// TestToolsPlanProvisionErrors: configs that cannot work are refused when
// the rules load.
func TestToolsPlanProvisionErrors(t *testing.T) {
	const pre = "rule 0 (tools_plan): provision llm_transform.transforms.tools_plan: "
	for _, tc := range []struct{ cfg, want string }{
		{`{"profile":"openai"}`, `profile "openai": unknown; have bedrock, deepseek, function_only, gemini, glm, kimi, minimax, openai_chat, qwen`},
		{`{"types":{"web_search":"degrade"}}`, `types: web_search cannot be degraded to a function (the upstream cannot search): use native, drop or reject`},
		{`{"types":{"web_search_preview":"degrade"}}`, `types: web_search_preview cannot be degraded to a function (the upstream cannot search): use native, drop or reject`},
		{`{"types":{"file_search":"degrade"}}`, `types: file_search cannot be degraded to a function; degradable types are custom, local_shell, shell, apply_patch, computer, computer_use_preview and tool_search`},
		{`{"types":{"local_shell":"maybe"}}`, `types: local_shell: unknown action "maybe" (want native, degrade, drop or reject)`},
		{`{"types":{"function":"drop"}}`, `types: "function" is not a type the plan decides`},
		{`{"types":{"namespace":"drop"}}`, `types: namespaces are set with namespaces native|flatten`},
		{`{"name_pattern":"[a-z]+"}`, `name_pattern "[a-z]+": want the form ^[first][rest]{min,max}$, ^[rest]{min,max}$ or ^[rest]+$`},
		{`{"name_pattern":"^[A-Z_]{1,64}$"}`, `name_pattern "^[A-Z_]{1,64}$" must allow 'a' after the first character: repaired names use it`},
		{`{"max_name_length":4}`, `name_pattern "^[a-zA-Z0-9_-]{1,64}$" with max_name_length 4: names need room for at least 9 characters`},
		{`{"max_name_length":-1}`, `max_name_length: -1 is negative`},
		{`{"max_tools":-1}`, `max_tools: -1 is negative`},
		{`{"unknown_types":"keep"}`, `unknown_types: "keep" (want drop or reject)`},
		{`{"namespaces":"nested"}`, `namespaces: "nested" (want native or flatten)`},
		{`{"unsupported_choice":"drop"}`, `unsupported_choice: "drop" (want degrade or reject)`},
		{`{"tool_choice":["auto","forced"]}`, `tool_choice: unknown mode "forced" (want none, auto, required, named or allowed_tools)`},
		{`{"namespace_separator":"."}`, `namespace_separator ".": '.' is not allowed in names by ^[a-zA-Z0-9_-]{1,64}$`},
		{`{"thinking_fields":["=x"]}`, `thinking_fields: "=x" has no path`},
		{`{"thinking_models":[""]}`, `thinking_models: empty glob`},
	} {
		var cfgs []transforms.RuleConfig
		if err := json.Unmarshal([]byte(tpRules(tc.cfg)), &cfgs); err != nil {
			t.Fatal(err)
		}
		_, err := transforms.Compile(transformtest.Context(t), cfgs, transforms.ScopeProvider, "")
		if err == nil || err.Error() != pre+tc.want {
			t.Errorf("%s: err = %v\nwant %s", tc.cfg, err, pre+tc.want)
		}
	}
	// Unknown config fields are refused by the strict decoder.
	var cfgs []transforms.RuleConfig
	_ = json.Unmarshal([]byte(tpRules(`{"profle":"glm"}`)), &cfgs)
	if _, err := transforms.Compile(transformtest.Context(t), cfgs, transforms.ScopeProvider, ""); err == nil || !strings.Contains(err.Error(), `unknown field "profle"`) {
		t.Errorf("misspelt field: %v", err)
	}
	// gemini's dots are allowed in its separator.
	tpOK(t, transforms.ProtocolResponses, tpRules(`{"profile":"gemini","namespace_separator":"."}`),
		`{"tools":[{"type":"namespace","name":"fs","tools":[{"type":"function","name":"read"}]}]}`,
		`{"tools":[{"type":"function","name":"fs.read"}]}`)
}

// A Chat tool without a type is a function to the upstream: tools_plan
// plans it as one (here: dropped as a duplicate name is not at stake, the
// profile keeps functions), never passing it on as an unknown type.
func TestTypelessChatToolPlannedAsFunction(t *testing.T) {
	tpOK(t, transforms.ProtocolChat, tpProfile("function_only"),
		`{"model":"m","messages":[],"tools":[{"function":{"name":"read","parameters":{"type":"object"}}},{"type":"function","function":{"name":"x"}}]}`,
		`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"x"}}]}`)
}

// genericParams is the schema a degraded custom tool gets: one string.
const genericParams = `{"type":"object","properties":{"input":{"type":"string","description":"The complete input string for this custom tool."}},"required":["input"],"additionalProperties":false}`

// customPatch is the function field_custom_tools_to_function makes of an
// apply_patch tool described "Edit": tools_plan degrades apply_patch
// through it, so the two must agree.
func customPatch(t testing.TB) gjson.Result {
	t.Helper()
	body := `{"model":"m","tools":[{"type":"custom","name":"apply_patch","description":"Edit"}]}`
	x := transformtest.Begin(t, transformtest.Chain(t, `[{"transform":"field_custom_tools_to_function"}]`), transforms.ProtocolResponses, []byte(body))
	out, err := x.RewriteRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return gjson.GetBytes(out, "tools.0")
}

// patchDescription is customPatch's description, as JSON.
func patchDescription(t testing.TB) string { return customPatch(t).Get("description").Raw }

// patchParameters is customPatch's parameters.
func patchParameters(t testing.TB) string { return customPatch(t).Get("parameters").Raw }
