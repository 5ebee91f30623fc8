package tooldeny_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	// field_custom_tools_to_function, for the chains below.
	_ "github.com/llmtransform/caddy-llm-transform/transforms/customtools"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"example.com/tooldeny"
)

const denyRules = `[{"transform":"tool_deny","config":{"tools":["exec_*","delete_*","web_search"],"namespaces":["browser"]}}]`

// rewrite runs body through the rules' request phases with decisions kept,
// as the explain option keeps them.
func rewrite(t *testing.T, rules string, p transforms.Protocol, body string) ([]byte, []transforms.Decision, error) {
	t.Helper()
	return rewriteWith(t, transformtest.Chain(t, rules), p, body)
}

func rewriteWith(t *testing.T, c *transforms.Chain, p transforms.Protocol, body string) ([]byte, []transforms.Decision, error) {
	t.Helper()
	x := transformtest.Begin(t, c, p, []byte(body))
	x.Explain = true
	out, err := x.RewriteRequest([]byte(body))
	return out, x.Decisions(), err
}

func TestRemovesByNameAndNamespace(t *testing.T) {
	out, decisions, err := rewrite(t, denyRules, transforms.ProtocolResponses, `{
		"model": "gpt-5.5",
		"tools": [
			{"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
			{"type": "custom", "name": "apply_patch"},
			{"type": "namespace", "name": "browser", "tools": [{"type": "function", "name": "open"}, {"type": "function", "name": "click"}]},
			{"type": "namespace", "name": "files", "tools": [{"type": "function", "name": "read_file"}, {"type": "function", "name": "delete_file"}]},
			{"type": "web_search"}
		],
		"input": [
			{"type": "message", "role": "user", "content": "hi"},
			{"type": "additional_tools", "tools": [{"type": "function", "name": "exec_python"}, {"type": "function", "name": "lookup"}]},
			{"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
			{"type": "function_call_output", "call_id": "c1", "output": "ok"}
		],
		"tool_choice": "auto"
	}`)
	transformtest.Accepted(t, out, err, `{
		"model": "gpt-5.5",
		"tools": [
			{"type": "custom", "name": "apply_patch"},
			{"type": "namespace", "name": "files", "tools": [{"type": "function", "name": "read_file"}]}
		],
		"input": [
			{"type": "message", "role": "user", "content": "hi"},
			{"type": "additional_tools", "tools": [{"type": "function", "name": "lookup"}]},
			{"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
			{"type": "function_call_output", "call_id": "c1", "output": "ok"}
		],
		"tool_choice": "auto"
	}`)
	want := []transforms.Decision{
		{Tool: "exec_command", Action: "remove", Reason: `tool_deny: name matches "exec_*"`},
		{Tool: "browser", Action: "remove", Reason: `tool_deny: namespace matches "browser"`},
		{Tool: "files/delete_file", Action: "remove", Reason: `tool_deny: name matches "delete_*"`},
		{Tool: "web_search", Action: "remove", Reason: `tool_deny: name matches "web_search"`},
		{Tool: "exec_python", Action: "remove", Reason: `tool_deny: name matches "exec_*"`},
	}
	if !equalDecisions(decisions, want) {
		t.Fatalf("decisions %+v", decisions)
	}
}

func equalDecisions(a, b []transforms.Decision) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNamespaceLeftEmptyGoes(t *testing.T) {
	out, decisions, err := rewrite(t, `[{"transform":"tool_deny","config":{"tools":["delete_*"]}}]`, transforms.ProtocolResponses,
		`{"tools":[{"type":"function","name":"a"},{"type":"namespace","name":"fs","tools":[{"type":"namespace","name":"danger","tools":[{"type":"function","name":"delete_file"},{"type":"function","name":"delete_dir"}]},{"type":"function","name":"stat"}]}]}`)
	transformtest.Accepted(t, out, err,
		`{"tools":[{"type":"function","name":"a"},{"type":"namespace","name":"fs","tools":[{"type":"function","name":"stat"}]}]}`)
	want := []transforms.Decision{
		{Tool: "danger/delete_file", Action: "remove", Reason: `tool_deny: name matches "delete_*"`},
		{Tool: "danger/delete_dir", Action: "remove", Reason: `tool_deny: name matches "delete_*"`},
		{Tool: "danger", Action: "remove", Reason: "tool_deny: every tool of the namespace was removed"},
	}
	if !equalDecisions(decisions, want) {
		t.Fatalf("decisions %+v", decisions)
	}
}

func TestNothingDeniedKeepsTheBytes(t *testing.T) {
	body := `{"model":"m", "tools":[ {"type":"function","name":"read"} ],"tool_choice":{"type":"function","name":"read"}}`
	out, _, err := rewrite(t, denyRules, transforms.ProtocolResponses, body)
	if err != nil || !bytes.Equal(out, []byte(body)) {
		t.Fatalf("got %s, %v", out, err)
	}
}

// Every subset of a list's tools removed, with a non-tool element in it
// and whitespace around the commas: what is left is the kept elements in
// their order, and valid JSON. With no tool left the list goes whole.
func TestRemovalKeepsTheListValid(t *testing.T) {
	names := []string{"a", "b", "c", "d"}
	for mask := 1; mask < 1<<len(names); mask++ {
		var deny, elems, kept []string
		for i, n := range names {
			el := `{"type":"function","name":"` + n + `"}`
			if mask&(1<<i) != 0 {
				deny = append(deny, n)
			} else {
				kept = append(kept, el)
			}
			elems = append(elems, el)
			if i == 1 {
				elems = append(elems, "7") // not a tool: not the rule's to judge
				kept = append(kept, "7")
			}
		}
		rules := `[{"transform":"tool_deny","config":{"tools":["` + strings.Join(deny, `","`) + `"]}}]`
		body := "{\"tools\": [\n\t" + strings.Join(elems, " ,\n\t") + "\n], \"x\": 1}"
		out, _, err := rewrite(t, rules, transforms.ProtocolResponses, body)
		if err != nil || !json.Valid(out) {
			t.Fatalf("deny %v: %v\n%s", deny, err, out)
		}
		want := `{"tools":[` + strings.Join(kept, ",") + `],"x":1}`
		if len(deny) == len(names) {
			want = `{"x":1}`
		}
		transformtest.JSONEqual(t, out, want)
	}
}

// The last rule of a large request does not build the body: its edits are
// applied as the upstream reads it. Read that way, in reads of any size,
// the body is the one RewriteRequest builds.
func TestBodyBuiltAsItIsRead(t *testing.T) {
	c := transformtest.Chain(t, denyRules)
	for _, body := range []string{
		`{"tools":[{"type":"function","name":"exec_command"},{"type":"function","name":"read"},{"type":"web_search"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"read"},{"type":"web_search"}]}}`,
		`{"tools":[{"type":"function","name":"exec_command"}],"tool_choice":"auto","input":[{"type":"additional_tools","tools":[{"type":"function","name":"a"},{"type":"namespace","name":"browser","tools":[]}]}]}`,
	} {
		deferred, msg := transformtest.RequestBodyMismatch(t, c, transforms.ProtocolResponses, []byte(body), true, 1, 7, 4096)
		if msg != "" || !deferred {
			t.Fatalf("%s: deferred %v: %s", body, deferred, msg)
		}
	}
}

func TestEveryToolRemoved(t *testing.T) {
	out, _, err := rewrite(t, denyRules, transforms.ProtocolResponses,
		`{"model":"m","tools":[{"type":"function","name":"exec_command"},{"type":"web_search"}],"tool_choice":"auto","parallel_tool_calls":true,"input":"hi"}`)
	transformtest.Accepted(t, out, err, `{"model":"m","input":"hi"}`)

	// "required" with nothing left to call, however it is spelt.
	for _, required := range []string{`"required"`, `"\u0072equired"`} {
		out, _, err = rewrite(t, denyRules, transforms.ProtocolResponses,
			`{"tools":[{"type":"function","name":"exec_command"}],"tool_choice":`+required+`}`)
		transformtest.Rejected(t, out, err, "tool_denied")
	}
}

func TestToolChoice(t *testing.T) {
	tools := `"tools":[{"type":"function","name":"exec_command"},{"type":"function","name":"read"},{"type":"namespace","name":"browser","tools":[{"type":"function","name":"open"}]}]`
	for _, choice := range []string{
		`{"type":"function","name":"exec_command"}`,
		`{"type":"function","namespace":"browser","name":"open"}`,
		`{"type":"web_search"}`,
		`{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"exec_command"},{"type":"web_search"}]}`,
	} {
		out, _, err := rewrite(t, denyRules, transforms.ProtocolResponses, `{`+tools+`,"tool_choice":`+choice+`}`)
		e := transformtest.Rejected(t, out, err, "tool_denied")
		if e.Param != "tool_choice" {
			t.Fatalf("%s: param %q", choice, e.Param)
		}
	}

	// allowed_tools loses what was removed and keeps the rest.
	out, _, err := rewrite(t, denyRules, transforms.ProtocolResponses,
		`{`+tools+`,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"exec_command"},{"type":"function","name":"read"},{"type":"web_search"}]}}`)
	transformtest.Accepted(t, out, err,
		`{"tools":[{"type":"function","name":"read"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"read"}]}}`)
}

func TestChat(t *testing.T) {
	out, _, err := rewrite(t, denyRules, transforms.ProtocolChat,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"exec_command","parameters":{}}},{"type":"function","function":{"name":"read"}}],"tool_choice":{"type":"function","function":{"name":"read"}}}`)
	transformtest.Accepted(t, out, err,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"read"}}],"tool_choice":{"type":"function","function":{"name":"read"}}}`)

	out, _, err = rewrite(t, denyRules, transforms.ProtocolChat,
		`{"messages":[],"tools":[{"type":"function","function":{"name":"exec_command"}},{"type":"function","function":{"name":"read"}}],"tool_choice":{"type":"function","function":{"name":"exec_command"}}}`)
	transformtest.Rejected(t, out, err, "tool_denied")
}

// A definition that names itself twice reads as one tool here and as
// another upstream: refused rather than guessed at.
func TestRepeatedNameIsRefused(t *testing.T) {
	out, _, err := rewrite(t, denyRules, transforms.ProtocolResponses,
		`{"tools":[{"type":"function","name":"read","name":"exec_command"}]}`)
	if e := transformtest.Rejected(t, out, err, "ambiguous_tool"); e.Param != "tools[0]" {
		t.Fatalf("param %q", e.Param)
	}
}

// Chained with field_custom_tools_to_function, in either order: the
// upstream gets apply_patch as a function and no denied tool, and the
// upstream's apply_patch function call reaches the client as a custom
// tool call, in a stream replayed at every chunk size.
func TestChainWithCustomTools(t *testing.T) {
	deny := `{"transform":"tool_deny","config":{"tools":["exec_*"]}}`
	custom := `{"transform":"field_custom_tools_to_function"}`
	request := `{"model":"m","stream":true,"input":"add hello.txt","tools":[{"type":"custom","name":"apply_patch"},{"type":"function","name":"exec_command"}]}`
	patch := "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"
	args := `{"input":` + transformtest.JSONString(patch) + `}`
	resp := func(status, output string) string {
		return `{"id":"resp_1","object":"response","status":"` + status + `","model":"m","output":[` + output + `]}`
	}
	upstream := transformtest.SSE(append(append(
		[]string{`{"type":"response.created","sequence_number":0,"response":` + resp("in_progress", "") + `}`},
		transformtest.FunctionCallStream(1, 0, "fc_1", "call_1", "apply_patch", args, 5, true)...),
		`{"type":"response.completed","sequence_number":99,"response":`+resp("completed", `{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"apply_patch","arguments":`+transformtest.JSONString(args)+`}`)+`}`)...)

	for name, rules := range map[string]string{
		"deny first":   `[` + deny + `,` + custom + `]`,
		"custom first": `[` + custom + `,` + deny + `]`,
	} {
		t.Run(name, func(t *testing.T) {
			x := transformtest.Begin(t, transformtest.Chain(t, rules), transforms.ProtocolResponses, []byte(request))
			out, err := x.RewriteRequest([]byte(request))
			if err != nil {
				t.Fatal(err)
			}
			var sent struct {
				Tools []struct{ Type, Name string }
			}
			if err := json.Unmarshal(out, &sent); err != nil {
				t.Fatal(err)
			}
			if len(sent.Tools) != 1 || sent.Tools[0].Type != "function" || sent.Tools[0].Name != "apply_patch" {
				t.Fatalf("upstream tools: %s", out)
			}

			evs := transformtest.Events(t, transformtest.StreamCase(t, rules, request, upstream))
			done := evs[len(evs)-2]["item"].(map[string]any)
			if evs[len(evs)-2]["type"] != "response.output_item.done" || done["type"] != "custom_tool_call" || done["name"] != "apply_patch" || done["input"] != patch {
				t.Fatalf("output_item.done: %v", evs[len(evs)-2])
			}
			if got := transformtest.ConcatDeltas(evs, "response.custom_tool_call_input.delta"); got != patch {
				t.Fatalf("input deltas %q", got)
			}
		})
	}
}

func TestCaddyfile(t *testing.T) {
	var got tooldeny.ToolDeny
	err := got.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`tool_deny {
		tools exec_* delete_*
		namespaces browser
		tools web_search
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Tools, " ") != "exec_* delete_* web_search" || strings.Join(got.Namespaces, " ") != "browser" {
		t.Fatalf("%+v", got)
	}
	for block, want := range map[string]string{
		"tool_deny {\n tools\n}":       "wrong argument count",
		"tool_deny {\n names a\n}":     `unrecognized option "names"`,
		"tool_deny {\n tools a b c\n}": "",
	} {
		var td tooldeny.ToolDeny
		err := td.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block))
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: err %v, want %q", block, err, want)
		}
	}
}

// Config errors surface when the config loads, naming the rule.
func TestConfigErrors(t *testing.T) {
	for cfg, want := range map[string]string{
		`{}`:                      "no tools or namespaces to deny",
		`{"tools":[""]}`:          "tools: empty glob",
		`{"namespaces":["a",""]}`: "namespaces: empty glob",
		`{"tool":["a"]}`:          `unknown field "tool"`,
	} {
		_, err := transforms.Compile(transformtest.Context(t),
			[]transforms.RuleConfig{{Transform: "tool_deny", Config: json.RawMessage(cfg)}}, transforms.ScopeProvider, "")
		if err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "rule 0 (tool_deny)") {
			t.Errorf("%s: err %v, want %q", cfg, err, want)
		}
	}
	_, err := transforms.Compile(transformtest.Context(t),
		[]transforms.RuleConfig{{Transform: "tool_deny", Phase: "response", Config: json.RawMessage(`{"tools":["a"]}`)}}, transforms.ScopeProvider, "")
	if err == nil || !strings.Contains(err.Error(), "no response phase") {
		t.Errorf("response phase: %v", err)
	}
}

// FuzzToolDeny: whatever the body, the rule refuses it with a 400, or
// leaves valid JSON (when it got valid JSON) that a second pass leaves
// alone. The seeds are the walk's own tool bodies.
func FuzzToolDeny(f *testing.F) {
	for _, b := range transformtest.ToolBodies() {
		f.Add(b)
	}
	c := transformtest.Chain(f, `[{"transform":"tool_deny","config":{"tools":["a","f*"],"namespaces":["m"]}}]`)
	f.Fuzz(func(t *testing.T, body string) {
		p := transforms.ProtocolResponses
		if strings.Contains(body, `"messages"`) {
			p = transforms.ProtocolChat
		}
		out, _, err := rewriteWith(t, c, p, body)
		var e *transforms.Error
		switch {
		case errors.As(err, &e):
			return
		case err != nil:
			t.Fatalf("error that is not a rejection: %v", err)
		case !json.Valid([]byte(body)):
			return
		case !json.Valid(out):
			t.Fatalf("invalid JSON out of %s:\n%s", body, out)
		}
		again, _, err := rewriteWith(t, c, p, string(out))
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("second pass changed %s:\n%s (%v)", out, again, err)
		}
	})
}
