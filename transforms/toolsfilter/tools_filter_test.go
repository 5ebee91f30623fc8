package toolsfilter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Tests of tools_filter as a rule: the helpers and fixtures the package's
// tests share, when conditions, Codex's whole request, bodies of thousands
// of tools and the Caddyfile. The request side is tested in
// tools_filter_request_test.go, function calling off in
// tools_filter_history_test.go, the response side in
// tools_filter_response_test.go and conditions in condition_test.go. Every
// expected body is written out by hand.

// --- helpers -------------------------------------------------------------------

func tfRules(cfg string) string { return `[{"transform":"tools_filter","config":` + cfg + `}]` }

// tfRun runs the request phase of one tools_filter rule over body, with
// the decisions kept.
func tfRun(t testing.TB, p transforms.Protocol, cfg, body string) ([]byte, *transforms.Exchange, error) {
	t.Helper()
	c := transformtest.Chain(t, tfRules(cfg))
	x := transformtest.Begin(t, c, p, []byte(body))
	x.Explain = true
	out, err := x.RewriteRequest([]byte(body))
	return out, x, err
}

// tfDecisions compares the decisions an exchange recorded with want,
// exactly and in order.
func tfDecisions(t testing.TB, x *transforms.Exchange, want []transforms.Decision) {
	t.Helper()
	got := x.Decisions()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decisions\n got %+v\nwant %+v", got, want)
	}
}

// tfErr runs the request and wants a 400 tool_filtered on param whose
// message holds every one of parts, and no body for the upstream.
func tfErr(t testing.TB, p transforms.Protocol, cfg, body, param string, parts ...string) *transforms.Error {
	t.Helper()
	out, _, err := tfRun(t, p, cfg, body)
	var e *transforms.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a 400 tool_filtered, got err %v and body %s", err, out)
	}
	if e.Status != http.StatusBadRequest || e.Type != "invalid_request_error" || e.Code != "tool_filtered" || e.Param != param {
		t.Fatalf("got error %d %s code=%q param=%q message=%q; want 400 invalid_request_error tool_filtered %q",
			e.Status, e.Type, e.Code, e.Param, e.Message, param)
	}
	for _, s := range parts {
		if !strings.Contains(e.Message, s) {
			t.Errorf("message %q lacks %q", e.Message, s)
		}
	}
	if out != nil {
		t.Fatalf("the upstream would receive a body: %s", out)
	}
	return e
}

// The tools of the requests below, in both shapes.
const (
	tfRead   = `{"type":"function","name":"read_file","parameters":{"type":"object"}}`
	tfWrite  = `{"type":"function","name":"write_file","parameters":{"type":"object"}}`
	tfDelete = `{"type":"function","name":"delete_file","parameters":{"type":"object"}}`
	tfDir    = `{"type":"function","name":"read_dir"}`
	tfWeb    = `{"type":"web_search"}`
	tfShell  = `{"type":"local_shell"}`
	// tfNS is an MCP server's tools in a namespace; tfNSRead is it without
	// delete_issue.
	tfNS     = `{"type":"namespace","name":"mcp","description":"MCP","tools":[{"type":"function","name":"delete_issue"},{"type":"function","name":"read_issue","parameters":{"type":"object"}}]}`
	tfNSRead = `{"type":"namespace","name":"mcp","description":"MCP","tools":[{"type":"function","name":"read_issue","parameters":{"type":"object"}}]}`

	tfReadC   = `{"type":"function","function":{"name":"read_file","parameters":{"type":"object"}}}`
	tfWriteC  = `{"type":"function","function":{"name":"write_file","parameters":{"type":"object"}}}`
	tfDeleteC = `{"type":"function","function":{"name":"delete_file","parameters":{"type":"object"}}}`
	tfDirC    = `{"type":"function","function":{"name":"read_dir"}}`
)

// tfResp is a Responses request with tools and extra members; tfChat a
// Chat one.
func tfResp(extra string, tools ...string) string {
	return `{"model":"m","input":"hi","tools":[` + strings.Join(tools, ",") + `]` + extra + `}`
}

func tfChat(extra string, tools ...string) string {
	return `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[` + strings.Join(tools, ",") + `]` + extra + `}`
}

const tfNoneLeft = "no tool is left: tools, tool_choice and parallel_tool_calls are not sent"

// The defaults of the cases below, in the shapes configured and sent.
const (
	tfSearchDef  = `{"type":"function","name":"search","description":"Search the web","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}`
	tfSearchDefC = `{"type":"function","function":{"name":"search","description":"Search the web","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}`
	tfLookupDefC = `{"type":"function","function":{"name":"lookup","description":"Look up","parameters":{"type":"object"}}}`
	tfLookupDef  = `{"type":"function","name":"lookup","description":"Look up","parameters":{"type":"object"}}`
)

type tfCase struct {
	name      string
	p         transforms.Protocol
	cfg, body string
	want      string // "" means the body must come back as the same slice
	decisions []transforms.Decision
}

func tfRunCases(t *testing.T, cases []tfCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, x, err := tfRun(t, tc.p, tc.cfg, tc.body)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.want == "" {
				if !jsonspan.SameSlice(out, []byte(tc.body)) && string(out) != tc.body {
					t.Fatalf("body changed:\n%s", out)
				}
			} else {
				transformtest.JSONEqual(t, out, tc.want)
			}
			tfDecisions(t, x, tc.decisions)
		})
	}
}

// filterOK runs one tools_filter rule over body and fails on an error.
func filterOK(t *testing.T, p transforms.Protocol, cfg, body string) ([]byte, *transforms.Exchange) {
	t.Helper()
	out, x, err := tfRun(t, p, cfg, body)
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	return out, x
}

// filterSame runs one tools_filter rule over body and reports whether the
// very slice handed in came back.
func filterSame(t *testing.T, p transforms.Protocol, cfg, body string) ([]byte, *transforms.Exchange, bool) {
	t.Helper()
	in := []byte(body)
	c := transformtest.Chain(t, tfRules(cfg))
	x := transformtest.Begin(t, c, p, in)
	x.Explain = true
	out, err := x.RewriteRequest(in)
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	return out, x, jsonspan.SameSlice(out, in)
}

// filterRecovered runs one tools_filter rule and turns a panic into an
// error, so one crashing case does not take the whole package's tests down.
func filterRecovered(t *testing.T, p transforms.Protocol, cfg, body string) (out []byte, x *transforms.Exchange, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return tfRun(t, p, cfg, body)
}

// Items of Responses inputs, what function calling off makes of them, and
// the configurations the cases share.
const (
	callItem            = `{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`
	callItem2           = `{"type":"function_call","call_id":"c2","name":"g","arguments":"{\"a\":1}"}`
	outputItem          = `{"type":"function_call_output","call_id":"c1","output":"ok"}`
	additionalToolsItem = `{"type":"additional_tools","tools":[{"type":"function","name":"g"}]}`
	messageItem         = `{"type":"message","role":"user","content":"hi"}`
	offConfig           = `{"function_calling":"off"}`
	denyDeleteConfig    = `{"deny":["delete_*"]}`

	toldCall   = `{"type":"message","role":"assistant","content":"Called tool ` + "`f`" + ` (call c1) with:\n{}"}`
	toldOutput = `{"type":"message","role":"user","content":"Output of tool ` + "`function`" + ` (call c1):\nok"}`
)

// inputOf is a Responses request whose input is items.
func inputOf(items ...string) string {
	return `{"model":"m","input":[` + strings.Join(items, ",") + `]}`
}

// --- when ----------------------------------------------------------------------------------------

// TestToolsFilterWhen: the rule applies only when its conditions hold;
// otherwise the body is untouched and the response side stays out.
func TestToolsFilterWhen(t *testing.T) {
	const team = "{http.request.header.X-Team}"
	body := tfResp(``, tfRead, tfWrite)
	filtered := tfResp(``, tfRead)
	response := `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"function_call","id":"fc_1","call_id":"call_1","name":"invented","arguments":"{}","status":"completed"}]}`
	for _, tc := range []struct {
		when    []string
		applies bool
	}{
		{[]string{team + " == research"}, true},
		{[]string{team + " == ops"}, false},
		{[]string{team + " != ops"}, true},
		{[]string{team + " != research"}, false},
		{[]string{team + " ~ res*"}, true},
		{[]string{team + " ~ re?earch"}, true},
		{[]string{team + " ~ res"}, false},
		{[]string{team + " ~ ops*"}, false},
		{[]string{team + " !~ ops*"}, true},
		{[]string{team + " !~ r*"}, false},
		{[]string{"{http.request.header.X-Missing} == research"}, false},
		{[]string{"{http.request.header.X-Missing} != research"}, true},
		{[]string{"research == " + team}, true},
		{[]string{team + " == research", team + " ~ *ch"}, true},
		{[]string{team + " == research", team + " ~ ops*"}, false},
	} {
		when, _ := json.Marshal(tc.when)
		cfg := `{"when":` + string(when) + `,"deny":["write_file"],"drop_undeclared_calls":true}`
		c := transformtest.Chain(t, tfRules(cfg))
		in := []byte(body)
		x := transformtest.Begin(t, c, transforms.ProtocolResponses, in)
		repl := caddy.NewReplacer()
		repl.Set("http.request.header.X-Team", "research")
		x.Replacer = repl
		out, err := x.RewriteRequest(in)
		if err != nil {
			t.Fatalf("%v: %v", tc.when, err)
		}
		resp, err := x.RewriteResponse([]byte(response))
		if err != nil {
			t.Fatalf("%v: %v", tc.when, err)
		}
		if tc.applies {
			transformtest.JSONEqual(t, out, filtered)
			if x.Counts().DroppedCalls != 1 || x.Counts().UndeclaredCalls != 1 || strings.Contains(string(resp), "invented") {
				t.Errorf("%v: response side inactive: dropped %d undeclared %d\n%s", tc.when, x.Counts().DroppedCalls, x.Counts().UndeclaredCalls, resp)
			}
			continue
		}
		if !jsonspan.SameSlice(out, in) {
			t.Errorf("%v: body changed:\n%s", tc.when, out)
		}
		if x.WantsResponse() || string(resp) != response || x.Counts().UndeclaredCalls != 0 || x.Counts().DroppedCalls != 0 {
			t.Errorf("%v: response side active: wants %v undeclared %d\n%s", tc.when, x.WantsResponse(), x.Counts().UndeclaredCalls, resp)
		}
	}

	// No replacer: every placeholder is empty.
	c := transformtest.Chain(t, tfRules(`{"when":["`+team+` == research"],"deny":["write_file"]}`))
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(body))
	if out, err := x.RewriteRequest([]byte(body)); err != nil || string(out) != body {
		t.Errorf("without a replacer: %v %s", err, out)
	}

	// An unmet condition leaves function calling on.
	c = transformtest.Chain(t, tfRules(`{"when":["`+team+` == ops"],"function_calling":"off"}`))
	x = transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(body))
	repl := caddy.NewReplacer()
	repl.Set("http.request.header.X-Team", "research")
	x.Replacer = repl
	if out, err := x.RewriteRequest([]byte(body)); err != nil || string(out) != body {
		t.Errorf("function_calling off under an unmet condition: %v %s", err, out)
	}
}

// --- Codex's request -----------------------------------------------------------------------------

func TestToolsFilterCodexRequest(t *testing.T) {
	body := transformtest.CodexRequest(t)
	type item struct {
		Type string `json:"type"`
	}
	type tool struct {
		Type  string `json:"type"`
		Name  string `json:"name"`
		Tools []tool `json:"tools"`
	}

	out, x, err := tfRun(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, string(body))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tools", "tool_choice", "parallel_tool_calls"} {
		if _, ok := got[k]; ok {
			t.Errorf("%s is still there", k)
		}
	}
	var input []item
	if err := json.Unmarshal(got["input"], &input); err != nil || len(input) == 0 {
		t.Fatalf("input: %v %s", err, got["input"])
	}
	for i, it := range input {
		if it.Type != "message" && it.Type != "reasoning" {
			t.Errorf("input[%d] is a %s", i, it.Type)
		}
	}
	var orig struct {
		Tools []tool `json:"tools"`
	}
	if err := json.Unmarshal(body, &orig); err != nil {
		t.Fatal(err)
	}
	if n := len(x.Decisions()); n != len(orig.Tools) {
		t.Errorf("%d decisions for %d tools: %+v", n, len(orig.Tools), x.Decisions())
	}
	for _, d := range x.Decisions() {
		if d.Action != "drop" || d.Reason != "incompatible" {
			t.Errorf("decision %+v", d)
		}
	}

	out, x, err = tfRun(t, transforms.ProtocolResponses, `{"deny":["apply_patch","web_search"]}`, string(body))
	if err != nil {
		t.Fatal(err)
	}
	var kept struct {
		Tools      []tool          `json:"tools"`
		ToolChoice json.RawMessage `json:"tool_choice"`
	}
	if err := json.Unmarshal(out, &kept); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range kept.Tools {
		if tl.Name != "" {
			names = append(names, tl.Name)
		} else {
			names = append(names, "type:"+tl.Type)
		}
	}
	sort.Strings(names)
	want := []string{"create_goal", "exec_command", "get_goal", "request_user_input", "type:tool_search", "update_goal", "view_image", "write_stdin"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("tools left %v, want %v", names, want)
	}
	if string(kept.ToolChoice) != `"auto"` {
		t.Errorf("tool_choice %s", kept.ToolChoice)
	}
	tfDecisions(t, x, []transforms.Decision{{Tool: "apply_patch", Action: "drop", Reason: "denied"}, {Tool: "web_search", Action: "drop", Reason: "denied"}})
	// Everything else is as it came.
	var a, b map[string]json.RawMessage
	_ = json.Unmarshal(body, &a)
	_ = json.Unmarshal(out, &b)
	for k, v := range a {
		if k != "tools" && string(b[k]) != string(v) {
			t.Errorf("%s changed", k)
		}
	}
}

// --- scale ---------------------------------------------------------------------------------------

// TestFilterHandlesThousandsOfNamespacesAndCalls: thousands of namespaces,
// additional_tools items and history calls are filtered whole, none left
// behind. How the cost grows with them is BenchmarkFilterScaling's to
// measure: a test does not time.
func TestFilterHandlesThousandsOfNamespacesAndCalls(t *testing.T) {
	out, _, err := tfRun(t, transforms.ProtocolResponses, `{"deny":["delete_*"]}`, scaleFilterBody(8000))
	if err != nil || bytes.Contains(out, []byte(`"delete_`)) || bytes.Count(out, []byte(`"read_`)) != 8000 {
		t.Fatalf("8000 namespaces: err %v, delete_ left %v, read_ kept %d", err, bytes.Contains(out, []byte(`"delete_`)), bytes.Count(out, []byte(`"read_`)))
	}
	out, _, err = tfRun(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, scaleOffHistory(8000))
	if err != nil || bytes.Contains(out, []byte(`"function_call`)) || bytes.Count(out, []byte("Called tool `f`")) != 8000 {
		t.Fatalf("8000 calls retold: err %v", err)
	}
}

// --- configuration -------------------------------------------------------------------------------

func TestToolsFilterCaddyfile(t *testing.T) {
	block := "tools_filter {\n" +
		"\tallow read_* mcp/* type:web_search*\n" +
		"\tdeny delete_* mcp/delete_*\n" +
		"\twhen {http.request.header.X-Team} == research\n" +
		"\twhen {http.request.host} ~ *.example.com\n" +
		"\tfunction_calling off\n" +
		"\tdefault `" + tfSearchDef + "`\n" +
		"\tdefault `{\"type\":\"web_search\"}`\n" +
		"\tdrop_undeclared_calls\n" +
		"}"
	var got ToolsFilter
	if err := got.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block)); err != nil {
		t.Fatal(err)
	}
	want := ToolsFilter{
		Allow:               []string{"read_*", "mcp/*", "type:web_search*"},
		Deny:                []string{"delete_*", "mcp/delete_*"},
		When:                []string{"{http.request.header.X-Team} == research", "{http.request.host} ~ *.example.com"},
		FunctionCalling:     "off",
		Defaults:            []json.RawMessage{json.RawMessage(tfSearchDef), json.RawMessage(`{"type":"web_search"}`)},
		DropUndeclaredCalls: true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if err := got.Provision(caddy.Context{}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	// The JSON form reads the same.
	var fromJSON ToolsFilter
	js, _ := json.Marshal(want)
	if err := json.Unmarshal(js, &fromJSON); err != nil || !reflect.DeepEqual(fromJSON, want) {
		t.Errorf("JSON round trip: %v %+v", err, fromJSON)
	}
	var empty ToolsFilter
	if err := empty.UnmarshalCaddyfile(caddyfile.NewTestDispenser("tools_filter")); err != nil || !reflect.DeepEqual(empty, ToolsFilter{}) {
		t.Errorf("an empty block: %v %+v", err, empty)
	}

	for _, bad := range []string{
		"tools_filter {\n\tallow a\n\tallow b\n}",
		"tools_filter {\n\tdeny a\n\tdeny b\n}",
		"tools_filter {\n\tallow\n}",
		"tools_filter {\n\twhen {a} ==\n}",
		"tools_filter {\n\twhen {a}\n}",
		"tools_filter {\n\twhen a b c\n}",
		"tools_filter {\n\tdefault `{\"type\":`\n}",
		"tools_filter {\n\tdefault `{}` `{}`\n}",
		"tools_filter {\n\tdefault\n}",
		"tools_filter {\n\tfunction_calling\n}",
		"tools_filter {\n\tfunction_calling on\n\tfunction_calling off\n}",
		"tools_filter {\n\tdrop_undeclared_calls yes\n}",
		"tools_filter {\n\tcolour blue\n}",
	} {
		var tf ToolsFilter
		if err := tf.UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}

	// Provision refuses what the Caddyfile cannot check.
	for _, tc := range []struct{ cfg, msg string }{
		{`{"function_calling":"maybe"}`, "function_calling"},
		{`{"function_calling":"OFF"}`, "function_calling"},
		{`{"allow":["ns/"]}`, "namespace/name"},
		{`{"deny":["/x"]}`, "namespace/name"},
		{`{"deny":["a/b/c"]}`, "namespace/name"},
		{`{"deny":[""]}`, "empty"},
		{`{"allow":["type:"]}`, "type"},
		{`{"when":["{a} is b"]}`, "no operator"},
		{`{"defaults":[{"type":"function","parameters":{}}]}`, "name"},
		{`{"defaults":[{"type":"function","function":{"parameters":{}}}]}`, "name"},
		{`{"defaults":[{"type":"custom"}]}`, "name"},
		{`{"defaults":[{"name":"x"}]}`, "type"},
		{`{"defaults":[[1]]}`, "object"},
		{`{"defaults":[` + tfSearchDef + `,{"type":"function","function":{"name":"search"}}]}`, "search"},
		{`{"defaults":[{"type":"web_search"},{"type":"web_search","search_context_size":"low"}]}`, "second default"},
	} {
		var cfgs []transforms.RuleConfig
		if err := json.Unmarshal([]byte(tfRules(tc.cfg)), &cfgs); err != nil {
			t.Fatal(err)
		}
		_, err := transforms.Compile(transformtest.Context(t), cfgs, transforms.ScopeProvider, "")
		if err == nil {
			t.Errorf("config %s accepted", tc.cfg)
			continue
		}
		if !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("config %s: error %q lacks %q", tc.cfg, err, tc.msg)
		}
	}
}
