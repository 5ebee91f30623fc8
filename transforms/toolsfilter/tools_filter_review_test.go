package toolsfilter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Review of tools_filter. Every TestFilterReview* test below that is not
// marked as a passing guard pins a bug: its comment says what is wrong and
// what is right, and it fails until the transform is fixed. The guards pin
// edge cases that work and must stay working.

// frRun runs one tools_filter rule over body and fails on an error.
func frRun(t *testing.T, p transforms.Protocol, cfg, body string) ([]byte, *transforms.Exchange) {
	t.Helper()
	out, x, err := tfRun(t, p, cfg, body)
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	return out, x
}

// frSame runs one tools_filter rule over body and reports whether the
// very slice handed in came back.
func frSame(t *testing.T, p transforms.Protocol, cfg, body string) ([]byte, *transforms.Exchange, bool) {
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

// frToolNames decodes a body as an upstream does (encoding/json: the last
// of repeated keys wins) and returns the names of every tool it declares:
// top-level, inside namespaces at any depth, in Chat's legacy functions,
// and in additional_tools items.
func frToolNames(t *testing.T, body []byte) []string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, body)
	}
	var names []string
	var walk func(list any)
	walk = func(list any) {
		arr, _ := list.([]any)
		for _, el := range arr {
			m, _ := el.(map[string]any)
			if m == nil {
				continue
			}
			if n, ok := m["name"].(string); ok {
				names = append(names, n)
			}
			if fn, ok := m["function"].(map[string]any); ok {
				if n, ok := fn["name"].(string); ok {
					names = append(names, n)
				}
			}
			if inner, ok := m["tools"]; ok {
				walk(inner)
			}
		}
	}
	walk(doc["tools"])
	walk(doc["functions"])
	if in, ok := doc["input"].([]any); ok {
		for _, it := range in {
			if m, ok := it.(map[string]any); ok && m["type"] == "additional_tools" {
				walk(m["tools"])
			}
		}
	}
	return names
}

// --- request side: deny bypasses ------------------------------------------------------------

// TestFilterReviewNestedNamespaceDenyLeaks: a denied tool inside a
// namespace that is itself inside a namespace stays in the request. judge
// marks the inner namespace "changed", but the outer one only hears
// "kept" from it (changed propagates only from a filtered child), so
// writeLists never rewrites the outer, top-level definition and the
// denied tool goes upstream. The decision says it was dropped, which it
// was not. Right: the inner namespace loses delete_x, byte for byte
// otherwise, as one level of nesting does.
func TestFilterReviewNestedNamespaceDenyLeaks(t *testing.T) {
	nested := `{"type":"namespace","name":"outer","tools":[{"type":"namespace","name":"inner","tools":[{"type":"function","name":"delete_x"},{"type":"function","name":"read_x"}]},{"type":"function","name":"keep"}]}`
	want := `{"type":"namespace","name":"outer","tools":[{"type":"namespace","name":"inner","tools":[{"type":"function","name":"read_x"}]},{"type":"function","name":"keep"}]}`
	out, x := frRun(t, transforms.ProtocolResponses, `{"deny":["delete_*"]}`, tfResp(``, tfRead, nested))
	transformtest.JSONEqual(t, out, tfResp(``, tfRead, want))
	tfDecisions(t, x, []transforms.Decision{{Tool: "inner/delete_x", Action: "drop", Reason: "denied"}})
}

// TestFilterReviewChatLegacyFunctionsBypassDeny: Chat's legacy
// "functions" list (still accepted by OpenAI Chat Completions and by most
// compatible servers) is never looked at, so deny delete_* lets
// delete_repo through untouched, and a function_call forcing it is not
// refused either. Right: functions entries are judged like tools
// (delete_repo dropped, denied), and function_call {"name":"delete_repo"}
// is a 400 tool_filtered.
func TestFilterReviewChatLegacyFunctionsBypassDeny(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"delete_repo","parameters":{}},{"name":"read_repo","parameters":{}}]}`
	out, x := frRun(t, transforms.ProtocolChat, `{"deny":["delete_*"]}`, body)
	transformtest.JSONEqual(t, out, `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"read_repo","parameters":{}}]}`)
	tfDecisions(t, x, []transforms.Decision{{Tool: "delete_repo", Action: "drop", Reason: "denied"}})

	forced := `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"delete_repo","parameters":{}},{"name":"read_repo","parameters":{}}],"function_call":{"name":"delete_repo"}}`
	tfErr(t, transforms.ProtocolChat, `{"deny":["delete_*"]}`, forced, "function_call", "delete_repo")
}

// TestFilterReviewRepeatedToolsMemberBypassesDeny: a body with two
// top-level "tools" members. Upstream parsers (Python's json, Go's
// encoding/json) keep the last; the walk collects both lists' nodes under
// one root, and writeList, handed the last list's span but the first
// list's first node, treats every element of the last list as "not a
// tool object" and copies it verbatim. The denied tool reaches the
// upstream. Right: refuse the body (400, as for repeated identity keys) or
// filter the list the upstream will read.
func TestFilterReviewRepeatedToolsMemberBypassesDeny(t *testing.T) {
	body := `{"model":"m","input":"hi","tools":[` + tfRead + `],"tools":[` + tfDelete + `,` + tfWrite + `]}`
	out, _, err := tfRun(t, transforms.ProtocolResponses, `{"deny":["delete_*"]}`, body)
	var e *transforms.Error
	if errors.As(err, &e) && e.Status == 400 {
		return // refused: right
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	for _, n := range frToolNames(t, out) {
		if n == "delete_file" {
			t.Fatalf("the upstream (last key wins) still sees delete_file:\n%s", out)
		}
	}
}

// TestFilterReviewEscapedAdditionalToolsTypeBypassesDeny: the walk
// recognises an additional_tools item by the raw bytes of its type, so
// "additional\u005ftools" (which every JSON parser reads as
// additional_tools) is skipped and the tools in it are never judged: a
// client hides a denied tool from the gateway. Names and types elsewhere
// are decoded before they are compared. Right: the escaped type is read as
// additional_tools and delete_file is removed from it.
func TestFilterReviewEscapedAdditionalToolsTypeBypassesDeny(t *testing.T) {
	body := `{"model":"m","tools":[` + tfRead + `],"input":[{"type":"message","role":"user","content":"hi"},{"type":"additional\u005ftools","role":"developer","tools":[` + tfDelete + `,` + tfWrite + `]}]}`
	out, x := frRun(t, transforms.ProtocolResponses, `{"deny":["delete_*"]}`, body)
	transformtest.JSONEqual(t, out, `{"model":"m","tools":[`+tfRead+`],"input":[{"type":"message","role":"user","content":"hi"},{"type":"additional_tools","role":"developer","tools":[`+tfWrite+`]}]}`)
	tfDecisions(t, x, []transforms.Decision{{Tool: "delete_file", Action: "drop", Reason: "denied"}})
}

// Guard (passes): escaped member names and string values of definitions
// and tool_choice are decoded before selectors see them, so
// "n\u0061me":"delete\u005ffile" is denied like delete_file, and a
// Chat choice that forces it by an escaped name is refused.
func TestFilterReviewGuardEscapedNamesAreDecoded(t *testing.T) {
	esc := `{"type":"function","n\u0061me":"delete\u005ffile","parameters":{"type":"object"}}`
	out, x := frRun(t, transforms.ProtocolResponses, `{"deny":["delete_*"]}`, tfResp(``, tfRead, esc))
	transformtest.JSONEqual(t, out, tfResp(``, tfRead))
	tfDecisions(t, x, []transforms.Decision{{Tool: "delete_file", Action: "drop", Reason: "denied"}})

	escC := `{"type":"function","function":{"n\u0061me":"delete_file"}}`
	tfErr(t, transforms.ProtocolChat, `{"deny":["delete_*"]}`,
		tfChat(`,"tool_choice":{"type":"function","function":{"name":"delete\u005ffile"}}`, tfReadC, escC),
		"tool_choice", "delete_file")
}

// --- request side: wrong decisions --------------------------------------------------------------

// TestFilterReviewMCPServersAreNotDuplicates: hosted tools without a name
// are told apart by type alone, so a second {"type":"mcp"} server (another
// server_label) is dropped as a "duplicate" by a rule that filters
// nothing. The Responses API takes any number of MCP servers, told apart
// by server_label. Right: both servers are kept and the body is the same
// slice.
func TestFilterReviewMCPServersAreNotDuplicates(t *testing.T) {
	gh := `{"type":"mcp","server_label":"github","server_url":"https://gh.example/mcp","require_approval":"never"}`
	lin := `{"type":"mcp","server_label":"linear","server_url":"https://linear.example/mcp","require_approval":"never"}`
	body := tfResp(``, tfRead, gh, lin)
	out, x, same := frSame(t, transforms.ProtocolResponses, `{"deny":["write_file"]}`, body)
	if !same {
		t.Errorf("body changed, want the same slice:\n%s", out)
	}
	tfDecisions(t, x, nil)
}

// TestFilterReviewDefaultIntoNullTools: "tools":null (sent by many SDK
// serialisers) is treated as "a tools member that is not a list": the
// default is not added, yet the decision says add_default and the
// response side counts the default as declared. Right: null is no tools
// at all; the member becomes the list of the default.
func TestFilterReviewDefaultIntoNullTools(t *testing.T) {
	cfg := `{"defaults":[` + tfLookupDef + `]}`
	out, x := frRun(t, transforms.ProtocolResponses, cfg, `{"model":"m","input":"hi","tools":null}`)
	transformtest.JSONEqual(t, out, `{"model":"m","input":"hi","tools":[`+tfLookupDef+`]}`)
	tfDecisions(t, x, []transforms.Decision{{Tool: "lookup", Action: "add_default", Reason: "the request does not declare it"}})
}

// TestFilterReviewChatShapeCustomDefault: the README says a default may be
// written in the Responses or the Chat shape, but a Chat-shaped custom tool
// ({"type":"custom","custom":{"name":…}}) is rejected at provision ("a
// custom tool needs a name"): compileDefault reads the nested shape only
// under "function". Right: it compiles, a Responses request gets the flat
// shape and a Chat request the nested one.
func TestFilterReviewChatShapeCustomDefault(t *testing.T) {
	def := `{"type":"custom","custom":{"name":"apply_patch","description":"Patch files"}}`
	var cfgs []transforms.RuleConfig
	if err := json.Unmarshal([]byte(tfRules(`{"defaults":[`+def+`]}`)), &cfgs); err != nil {
		t.Fatal(err)
	}
	rules, err := transforms.Compile(transformtest.Context(t), cfgs, transforms.ScopeProvider, "")
	if err != nil {
		t.Fatalf("a Chat-shaped custom default is refused: %v", err)
	}
	c := transforms.NewChain(rules)
	body := tfResp(``, tfRead)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(body))
	out, err := x.RewriteRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, tfResp(``, tfRead, `{"type":"custom","name":"apply_patch","description":"Patch files"}`))
	bodyC := tfChat(``, tfReadC)
	x = transformtest.Begin(t, c, transforms.ProtocolChat, []byte(bodyC))
	if out, err = x.RewriteRequest([]byte(bodyC)); err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, tfChat(``, tfReadC, def))
}

// Guard (passes): defaults are inserted into bodies with no tools member
// whatever their shape: an empty object, blanks before the closing brace,
// a trailing newline. Conversions: a Chat-shaped function default reaches
// a Responses request flat; a Responses-shaped custom one reaches a Chat
// request nested.
func TestFilterReviewGuardDefaultInsertion(t *testing.T) {
	cfg := `{"defaults":[` + tfLookupDefC + `]}`
	for body, want := range map[string]string{
		`{}`:                            `{"tools":[` + tfLookupDef + `]}`,
		"{ \n\t }":                      `{"tools":[` + tfLookupDef + `]}`,
		"{\"model\":\"m\" \n }\n":       `{"model":"m","tools":[` + tfLookupDef + `]}`,
		`{"model":"m","tools":[ ]}`:     `{"model":"m","tools":[` + tfLookupDef + `]}`,
		`{"tools":[],"model":"m"}`:      `{"tools":[` + tfLookupDef + `],"model":"m"}`,
		`{"input":[],"tools":[1,"x"]}`:  `{"input":[],"tools":[1,"x",` + tfLookupDef + `]}`,
		`{"model":"m","input":"a{b}c"}`: `{"model":"m","input":"a{b}c","tools":[` + tfLookupDef + `]}`,
	} {
		out, _ := frRun(t, transforms.ProtocolResponses, cfg, body)
		transformtest.JSONEqual(t, out, want)
	}
	custom := `{"type":"custom","name":"apply_patch","format":{"type":"text"}}`
	out, _ := frRun(t, transforms.ProtocolChat, `{"defaults":[`+custom+`]}`, `{"model":"m","messages":[]}`)
	transformtest.JSONEqual(t, out, `{"model":"m","messages":[],"tools":[{"type":"custom","custom":{"name":"apply_patch","format":{"type":"text"}}}]}`)
}

// Guard (passes): removing tools, tool_choice and parallel_tool_calls
// keeps the body valid whatever their positions and the blanks around
// them.
func TestFilterReviewGuardMemberRemovalCommas(t *testing.T) {
	for body, want := range map[string]string{
		`{"tools":[` + tfRead + `],"tool_choice":"auto"}`:                                         `{}`,
		`{"tools":[` + tfRead + `] , "model":"m" ,"tool_choice":"auto"}`:                          `{"model":"m"}`,
		`{"tool_choice":"auto","model":"m","tools":[` + tfRead + `]}`:                             `{"model":"m"}`,
		"{\"parallel_tool_calls\":true,\n\"model\":\"m\",\n\"tools\":[" + tfRead + "]\n}":         `{"model":"m"}`,
		`{"model":"m","tools":[` + tfRead + `],"input":"x","tool_choice":"auto","stream":true}`:   `{"model":"m","input":"x","stream":true}`,
		`{"tools":[` + tfRead + `],"parallel_tool_calls":false,"tool_choice":"none","model":"m"}`: `{"model":"m"}`,
	} {
		out, _ := frRun(t, transforms.ProtocolResponses, `{"deny":["*"]}`, body)
		transformtest.JSONEqual(t, out, want)
	}
}

// --- function calling off ---------------------------------------------------------------------

// TestFilterReviewOffChatNullToolCallsChangesContent: SDK-serialised Chat
// histories carry "tool_calls":null and "function_call":null (or
// "tool_calls":[]) on plain assistant answers. Such a message is taken for
// one with calls and rewritten: its content "Hello" becomes "Hello\n\n"
// (and a null content becomes ""), though no call was retold. Right: the
// null/empty members go and the content stays "Hello".
func TestFilterReviewOffChatNullToolCallsChangesContent(t *testing.T) {
	for _, calls := range []string{`"tool_calls":null,"function_call":null`, `"tool_calls":[]`} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello",` + calls + `},{"role":"user","content":"more"}]}`
		out, _ := frRun(t, transforms.ProtocolChat, `{"function_calling":"off"}`, body)
		transformtest.JSONEqual(t, out, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":"more"}]}`)
	}
}

// TestFilterReviewOffComputerScreenshotRetoldAsJSON: a
// computer_call_output's output is an object, a computer_screenshot
// holding the image. It is retold as JSON text: the image becomes
// base64 in the prompt (thousands of tokens of noise) and the model never
// sees it. The README promises that "images and files of an output stay
// as content parts". Right: the screenshot becomes an input_image part of
// the user message.
func TestFilterReviewOffComputerScreenshotRetoldAsJSON(t *testing.T) {
	body := `{"model":"m","input":[` +
		`{"type":"computer_call","id":"cu_1","call_id":"call_1","action":{"type":"screenshot"},"pending_safety_checks":[],"status":"completed"},` +
		`{"type":"computer_call_output","call_id":"call_1","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,AAAA"}}` +
		`],"tools":[{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"browser"}]}`
	want := `{"model":"m","input":[` +
		`{"type":"message","role":"assistant","content":` + transformtest.JSONString("Called tool `computer` (call call_1) with:\n{\"type\":\"screenshot\"}") + `},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":` + transformtest.JSONString("Output of tool `computer` (call call_1):\n") + `},{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]}` +
		`]}`
	out, _ := frRun(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, body)
	transformtest.JSONEqual(t, out, want)
}

// TestFilterReviewOffMCPCallLosesItsOutput: an mcp_call history item holds
// both the arguments and the server's answer ("output"). Only the
// arguments are retold: the model loses what the MCP server answered.
// Right: the answer is retold too, as the output of the call.
func TestFilterReviewOffMCPCallLosesItsOutput(t *testing.T) {
	body := `{"model":"m","input":[{"type":"message","role":"user","content":"q"},` +
		`{"type":"mcp_call","id":"mcp_1","server_label":"deepwiki","name":"ask_question","arguments":"{\"q\":\"x\"}","output":"The answer is 42"}]}`
	out, _ := frRun(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, body)
	if !strings.Contains(string(out), "The answer is 42") {
		t.Fatalf("the MCP server's answer is lost:\n%s", out)
	}
}

// TestFilterReviewOffOutputBeforeItsCall: outputs are named from the calls
// seen before them, so an output that precedes its call (histories
// reordered by clients that group outputs, or items replayed out of order)
// is told as "Output of tool `function`", the item type, though the call
// names the tool. Right: the call's name, read from anywhere in the
// history.
func TestFilterReviewOffOutputBeforeItsCall(t *testing.T) {
	body := `{"model":"m","input":[` +
		`{"type":"function_call_output","call_id":"call_1","output":"A"},` +
		`{"type":"message","role":"user","content":"and?"},` +
		`{"type":"function_call","call_id":"call_1","name":"lookup","arguments":"{}"}]}`
	out, _ := frRun(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, body)
	if !strings.Contains(string(out), "Output of tool `lookup` (call call_1)") {
		t.Fatalf("the output is not named after its call:\n%s", out)
	}
}

// TestFilterReviewOffChatCustomToolDecision: with function calling off a
// Chat custom tool ({"type":"custom","custom":{"name":"apply_patch"}}) is
// reported under its type ("custom") instead of its name, and filed under
// the wrong key: a call to apply_patch in the response then counts as
// "undeclared" instead of "incompatible". definitionID only reads the
// nested name under "function". Right: decision apply_patch/incompatible,
// the response's call counted as filtered.
func TestFilterReviewOffChatCustomToolDecision(t *testing.T) {
	custom := `{"type":"custom","custom":{"name":"apply_patch"}}`
	out, x := frRun(t, transforms.ProtocolChat, `{"function_calling":"off"}`, tfChat(``, custom))
	transformtest.JSONEqual(t, out, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	tfDecisions(t, x, []transforms.Decision{{Tool: "apply_patch", Action: "drop", Reason: "incompatible"}})
	call := `{"id":"call_1","type":"custom","custom":{"name":"apply_patch","input":"x"}}`
	if _, err := x.RewriteResponse([]byte(tfCompletion("tool_calls", call))); err != nil {
		t.Fatal(err)
	}
	tfCounts(t, x, 0, 1, 0)
}

// TestFilterReviewOffLegacyForcedFunctionCall: with function calling off a
// tool_choice that forces a call is a 400, but the legacy Chat
// function_call {"name":…}, which forces a call just the same, is dropped
// silently and the model answers without the call the client demanded.
// Right: a 400 tool_filtered on function_call.
func TestFilterReviewOffLegacyForcedFunctionCall(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}],"function_call":{"name":"f"}}`
	tfErr(t, transforms.ProtocolChat, `{"function_calling":"off"}`, body, "function_call", "function calling is off")
}

// Guard (passes): the off path leaves Chat assistant content arrays with
// refusal parts valid, reasoning items between Responses calls split the
// run, and an untouched body comes back as the same slice.
func TestFilterReviewGuardOffEdges(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"refusal","refusal":"no"}],"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`
	out, _ := frRun(t, transforms.ProtocolChat, `{"function_calling":"off"}`, body)
	transformtest.JSONEqual(t, out, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"refusal","refusal":"no"},{"type":"text","text":`+transformtest.JSONString("Called tool `f` (call c1) with:\n{}")+`}]},{"role":"user","content":`+transformtest.JSONString("Output of tool `f` (call c1):\nr")+`}]}`)

	body = `{"model":"m","input":[{"type":"function_call","call_id":"a","name":"f","arguments":"{}"},{"type":"reasoning","id":"rs","summary":[]},{"type":"function_call","call_id":"b","name":"g","arguments":"{}"},{"type":"function_call_output","call_id":"a","output":{"k":1}},{"type":"function_call_output","call_id":"b","output":"B"}]}`
	out, _ = frRun(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, body)
	transformtest.JSONEqual(t, out, `{"model":"m","input":[`+
		`{"type":"message","role":"assistant","content":`+transformtest.JSONString("Called tool `f` (call a) with:\n{}")+`},`+
		`{"type":"reasoning","id":"rs","summary":[]},`+
		`{"type":"message","role":"assistant","content":`+transformtest.JSONString("Called tool `g` (call b) with:\n{}")+`},`+
		`{"type":"message","role":"user","content":`+transformtest.JSONString("Output of tool `f` (call a):\n{\"k\":1}\n\nOutput of tool `g` (call b):\nB")+`}]}`)

	for _, p := range []transforms.Protocol{transforms.ProtocolResponses, transforms.ProtocolChat} {
		plain := `{"model":"m","input":"hi","messages":[{"role":"user","content":"hi"}],"stream":true}`
		out, _, same := frSame(t, p, `{"function_calling":"off"}`, plain)
		if !same {
			t.Errorf("%v: an untouched body is not the same slice:\n%s", p, out)
		}
	}
}

// --- when --------------------------------------------------------------------------------------

// TestFilterReviewWhenCollapsesBlanksInValues: ParseCondition splits on
// blanks and joins the values with one space, so a value with two blanks
// in a row, or a tab, can never be matched: "a  b" is compared as "a b".
// Right: the value as written, only trimmed around the operator.
func TestFilterReviewWhenCollapsesBlanksInValues(t *testing.T) {
	c, err := ParseCondition("{http.request.header.X-Team} == red  team")
	if err != nil {
		t.Fatal(err)
	}
	repl := caddy.NewReplacer()
	repl.Set("http.request.header.X-Team", "red  team")
	if !c.Holds(repl) {
		t.Errorf("%q does not hold for the header %q", c, "red  team")
	}
}

// TestFilterReviewWhenOperatorTokenAsLeftValue: the first token that
// looks like an operator is taken as the operator even when it leaves the
// left side empty, so "~ == {http.request.header.X-Sep}" (is the header a
// tilde?) is refused instead of reading the second token as the
// operator. Right: the first operator with a value on both sides.
func TestFilterReviewWhenOperatorTokenAsLeftValue(t *testing.T) {
	c, err := ParseCondition("~ == {http.request.header.X-Sep}")
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	if c.String() != "~ == {http.request.header.X-Sep}" {
		t.Errorf("read as %q", c)
	}
}

// Guard (passes): a placeholder whose value holds operators or glob
// characters is compared as data, never parsed.
func TestFilterReviewGuardPlaceholderValuesAreData(t *testing.T) {
	c, err := ParseCondition("{http.request.header.X-Team} == research")
	if err != nil {
		t.Fatal(err)
	}
	repl := caddy.NewReplacer()
	repl.Set("http.request.header.X-Team", "x != research")
	if c.Holds(repl) {
		t.Error("a header holding an operator changed the comparison")
	}
	g, _ := ParseCondition("{http.request.header.X-Team} ~ res*")
	repl.Set("http.request.header.X-Team", "*")
	if g.Holds(repl) {
		t.Error("a header holding * matched as a pattern")
	}
}

// --- tool_choice ---------------------------------------------------------------------------------

// Guard (passes): a forced choice naming a tool of a denied namespace is
// refused; allowed_tools entries naming tools of a denied namespace go.
func TestFilterReviewGuardChoiceInsideNamespace(t *testing.T) {
	tfErr(t, transforms.ProtocolResponses, `{"deny":["type:namespace"]}`,
		tfResp(`,"tool_choice":{"type":"function","namespace":"mcp","name":"read_issue"}`, tfRead, tfNS),
		"tool_choice", "mcp/read_issue", "denied")
	out, _ := frRun(t, transforms.ProtocolResponses, `{"deny":["mcp"]}`,
		tfResp(`,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","namespace":"mcp","name":"read_issue"},{"type":"function","name":"read_file"}]}`, tfRead, tfNS))
	transformtest.JSONEqual(t, out, tfResp(`,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"read_file"}]}`, tfRead))
}

// TestFilterReviewRequiredWithClientsEmptyList: tool_choice "required"
// with the client's own empty tools list is a 400 that blames the gateway
// ("every tool of the request was filtered by the gateway (none
// declared)") though the rule filtered nothing. Right: the rule filtered
// nothing, so it does not refuse; the upstream judges the client's
// request (tools, tool_choice dropped as "no tool is left" is fine too,
// but not a tool_filtered 400).
func TestFilterReviewRequiredWithClientsEmptyList(t *testing.T) {
	_, _, err := tfRun(t, transforms.ProtocolResponses, `{"deny":["write_file"]}`, `{"model":"m","input":"hi","tools":[],"tool_choice":"required"}`)
	var e *transforms.Error
	if errors.As(err, &e) && e.Code == "tool_filtered" {
		t.Fatalf("a 400 tool_filtered though the gateway filtered nothing: %s", e.Message)
	}
}

// --- response side -------------------------------------------------------------------------------

// TestFilterReviewStreamAddedWithoutOutputIndex: when the dropped call's
// response.output_item.added carries no output_index (compatible servers
// omit it), the drop records only the item id, but the events after it
// reach shift only when an output index was recorded: the call's
// argument deltas and output_item.done leak to the client, which gets
// the events of a call it never saw added. Right: every event of the
// item (by item_id or item.id) vanishes.
func TestFilterReviewStreamAddedWithoutOutputIndex(t *testing.T) {
	up := transformtest.SSE(
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"invented"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","delta":"{}"}`,
		`{"type":"response.output_item.done","sequence_number":3,"item":`+tfFC1Done+`}`,
		`{"type":"response.completed","sequence_number":4,"response":{"id":"resp_1","status":"completed","output":[`+tfFC1Done+`]}}`,
	)
	want := transformtest.SSE(
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}`,
		`{"type":"response.completed","sequence_number":1,"response":{"id":"resp_1","status":"completed","output":[]}}`,
	)
	x, _ := tfExchange(t, transforms.ProtocolResponses, `{"drop_undeclared_calls":true}`, tfResp(`,"stream":true`, tfRead))
	got := transformtest.Replay(t, x, up, 4096)
	if got != want {
		t.Errorf("got\n%s\n--- want\n%s", got, want)
	}
	tfCounts(t, x, 1, 0, 1)
}

// TestFilterReviewChatStreamNameInLaterFragment: a call whose first
// fragment carries the id but not yet the name passes unjudged and
// unrecorded. When the name arrives the call is dropped, yet its first
// fragment (index 0, id call_1) is already out, and the next call is
// renumbered onto index 0: the client merges call_1's id with read_file's
// fragments into one call. Right: the unnamed fragment is held (or the
// call's index reserved) until it can be judged; the client sees
// read_file alone, at index 0, with its own id.
func TestFilterReviewChatStreamNameInLaterFragment(t *testing.T) {
	up := transformtest.ChatSSE(
		tfChunk(`{"role":"assistant","content":null}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"name":"invented","arguments":"{}"}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"read_file","arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	x, _ := tfExchange(t, transforms.ProtocolChat, `{"drop_undeclared_calls":true}`, tfChat(`,"stream":true`, tfReadC))
	got := transformtest.Replay(t, x, up, 4096)
	chunks, _ := transformtest.ChatChunks(t, got)
	var ids []string
	for _, ch := range chunks {
		for _, c := range ch["choices"].([]any) {
			delta, _ := c.(map[string]any)["delta"].(map[string]any)
			calls, _ := delta["tool_calls"].([]any)
			for _, tc := range calls {
				m := tc.(map[string]any)
				if id, ok := m["id"].(string); ok {
					ids = append(ids, fmt.Sprintf("%v:%s", m["index"], id))
				}
			}
		}
	}
	// The first fragment went out before any fragment named the call:
	// it cannot be taken back, so the call is counted and passed whole
	// rather than cut in half (a client would merge the halves).
	if strings.Join(ids, ",") != "0:call_1,1:call_2" {
		t.Errorf("calls the client sees (index:id) %v, want [0:call_1 1:call_2]\n%s", ids, got)
	}
	tfCounts(t, x, 1, 0, 0)
}

// TestFilterReviewChatStreamEscapedToolCallsKey: the Chat stream stage
// skips every chunk whose bytes lack `"tool_calls"`, so an upstream that
// escapes the key ("tool\u005fcalls", which clients decode as tool_calls)
// gets its undeclared calls through despite drop_undeclared_calls, while
// the JSON path (which decodes keys) drops them. Right: the call is
// judged and removed.
func TestFilterReviewChatStreamEscapedToolCallsKey(t *testing.T) {
	up := transformtest.ChatSSE(
		tfChunk(`{"tool\u005fcalls":[{"index":0,"id":"call_1","type":"function","function":{"name":"invented","arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"stop"`),
	)
	x, _ := tfExchange(t, transforms.ProtocolChat, `{"drop_undeclared_calls":true}`, tfChat(`,"stream":true`, tfReadC))
	got := transformtest.Replay(t, x, up, 4096)
	if strings.Contains(got, "invented") {
		t.Errorf("the undeclared call passed:\n%s", got)
	}
	tfCounts(t, x, 1, 0, 1)
}

// Guard (passes): a Chat stream with two choices renumbers and finishes
// each on its own, and a Responses stream whose later events carry only
// item_id (no output_index) still loses the dropped call's events.
func TestFilterReviewGuardStreams(t *testing.T) {
	up := transformtest.ChatSSE(
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a0","type":"function","function":{"name":"invented","arguments":"{}"}}]},"finish_reason":null},{"index":1,"delta":{"tool_calls":[{"index":0,"id":"b0","type":"function","function":{"name":"invented","arguments":"{}"}},{"index":1,"id":"b1","type":"function","function":{"name":"read_file","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"},{"index":1,"delta":{},"finish_reason":"tool_calls"}]}`,
	)
	want := transformtest.ChatSSE(
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":null},{"index":1,"delta":{"tool_calls":[{"index":0,"id":"b1","type":"function","function":{"name":"read_file","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":"tool_calls"}]}`,
	)
	for _, n := range transformtest.ChunkSizes {
		x, _ := tfExchange(t, transforms.ProtocolChat, `{"drop_undeclared_calls":true}`, tfChat(`,"stream":true`, tfReadC))
		tfSameChunks(t, transformtest.Replay(t, x, up, n), want)
		tfCounts(t, x, 2, 0, 2)
	}

	upR := transformtest.SSE(
		`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"invented"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":1,"item_id":"fc_1","delta":"{}"}`,
		`{"type":"response.output_item.added","sequence_number":2,"output_index":1,"item":{"id":"fc_2","type":"function_call","status":"in_progress","arguments":"","call_id":"call_2","name":"read_file"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_2","delta":"{}"}`,
		`{"type":"response.completed","sequence_number":4,"response":{"id":"resp_1","status":"completed","output":[`+tfFC1Done+`,`+tfFC2Done+`]}}`,
	)
	wantR := transformtest.SSE(
		`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"id":"fc_2","type":"function_call","status":"in_progress","arguments":"","call_id":"call_2","name":"read_file"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":1,"item_id":"fc_2","delta":"{}"}`,
		`{"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","status":"completed","output":[`+tfFC2Done+`]}}`,
	)
	x, _ := tfExchange(t, transforms.ProtocolResponses, `{"drop_undeclared_calls":true}`, tfResp(`,"stream":true`, tfRead))
	if got := transformtest.Replay(t, x, upR, 4096); got != wantR {
		t.Errorf("got\n%s\n--- want\n%s", got, wantR)
	}
	tfCounts(t, x, 1, 0, 1)
}

// --- performance ----------------------------------------------------------------------------------

// scaleFilterBody is a request with n namespaces of two tools and n
// additional_tools items, for the guard below and BenchmarkFilterScaling.
func scaleFilterBody(n int) string {
	var b strings.Builder
	b.WriteString(`{"model":"m","tools":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"namespace","name":"ns%d","tools":[{"type":"function","name":"delete_%d"},{"type":"function","name":"read_%d"}]}`, i, i, i)
	}
	b.WriteString(`],"input":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"additional_tools","tools":[{"type":"function","name":"delete_x%d"},{"type":"function","name":"dup"}]}`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// scaleOffHistory is a Responses history of n call, output and message
// triples, for the guard below and BenchmarkFilterScaling.
func scaleOffHistory(n int) string {
	var b strings.Builder
	b.WriteString(`{"model":"m","input":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"type":"function_call","call_id":"c%d","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c%d","output":"o"},{"type":"message","role":"user","content":"next"}`, i, i)
	}
	b.WriteString(`],"tools":[{"type":"function","name":"f"}]}`)
	return b.String()
}

// Guard (passes): thousands of namespaces, additional_tools items and
// history calls are filtered whole. How the cost grows with them is
// BenchmarkFilterScaling's to measure: a test does not time.
func TestFilterReviewGuardLinear(t *testing.T) {
	out, _, err := tfRun(t, transforms.ProtocolResponses, `{"deny":["delete_*"]}`, scaleFilterBody(8000))
	if err != nil || bytes.Contains(out, []byte(`"delete_`)) || bytes.Count(out, []byte(`"read_`)) != 8000 {
		t.Fatalf("8000 namespaces: err %v, delete_ left %v, read_ kept %d", err, bytes.Contains(out, []byte(`"delete_`)), bytes.Count(out, []byte(`"read_`)))
	}
	out, _, err = tfRun(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, scaleOffHistory(8000))
	if err != nil || bytes.Contains(out, []byte(`"function_call`)) || bytes.Count(out, []byte("Called tool `f`")) != 8000 {
		t.Fatalf("8000 calls retold: err %v", err)
	}
}

// --- request side: more selector and walk cases ---------------------------------------------------

// TestFilterReviewRepeatedNamespaceToolsMemberBypassesDeny: inside a
// namespace only the first "tools" member is walked; a second one, which
// upstream parsers keep, is copied unjudged. Right: refuse the body (400)
// or filter the list the upstream will read.
func TestFilterReviewRepeatedNamespaceToolsMemberBypassesDeny(t *testing.T) {
	ns := `{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"read_issue"}],"tools":[{"type":"function","name":"delete_issue"}]}`
	out, _, err := tfRun(t, transforms.ProtocolResponses, `{"deny":["delete_*"]}`, tfResp(``, tfRead, ns))
	var e *transforms.Error
	if errors.As(err, &e) && e.Status == 400 {
		return // refused: right
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	for _, n := range frToolNames(t, out) {
		if n == "delete_issue" {
			t.Fatalf("the upstream (last key wins) still sees delete_issue:\n%s", out)
		}
	}
}

// TestFilterReviewNamespaceChildOwnNamespaceEvadesScopedDeny: a tool
// inside namespace mcp that carries a "namespace" member of its own is
// judged as that namespace's, so `deny mcp/delete_*` misses it; the
// upstream serves it as mcp's (the member is not part of a namespace
// child's schema: upstreams that tolerate unknown members ignore it, and
// the model calls mcp/delete_issue). Right: a tool inside a namespace is
// judged by the namespace that holds it.
func TestFilterReviewNamespaceChildOwnNamespaceEvadesScopedDeny(t *testing.T) {
	ns := `{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"delete_issue","namespace":"safe"},{"type":"function","name":"read_issue"}]}`
	out, _ := frRun(t, transforms.ProtocolResponses, `{"deny":["mcp/delete_*"]}`, tfResp(``, tfRead, ns))
	transformtest.JSONEqual(t, out, tfResp(``, tfRead, `{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"read_issue"}]}`))
}

// TestFilterReviewChatToolWithoutTypeEvadesDeny: a Chat tool with a
// function object but no "type" (vLLM, Ollama and other compatible
// servers default the type to function) has no name for the walk, so a
// name deny never matches it and delete_repo goes upstream. Right: the
// nested name is read (or the tool is judged by it) and the tool is
// denied.
func TestFilterReviewChatToolWithoutTypeEvadesDeny(t *testing.T) {
	untyped := `{"function":{"name":"delete_repo","parameters":{}}}`
	out, _ := frRun(t, transforms.ProtocolChat, `{"deny":["delete_*"]}`, tfChat(``, tfReadC, untyped))
	transformtest.JSONEqual(t, out, tfChat(``, tfReadC))
}

// TestFilterReviewScopedSelectorSkipsNestedNamespace: `deny outer/*`
// should cover every tool in namespace outer, but a namespace nested in
// it is never matched (scoped selectors skip namespace nodes) and its
// tools sit in "inner", so the inner namespace and all its tools survive
// a deny of everything in outer. Right: outer loses every tool and goes.
func TestFilterReviewScopedSelectorSkipsNestedNamespace(t *testing.T) {
	nested := `{"type":"namespace","name":"outer","tools":[{"type":"namespace","name":"inner","tools":[{"type":"function","name":"delete_x"}]},{"type":"function","name":"keep"}]}`
	out, _ := frRun(t, transforms.ProtocolResponses, `{"deny":["outer/*"]}`, tfResp(``, tfRead, nested))
	transformtest.JSONEqual(t, out, tfResp(``, tfRead))
}

// TestFilterReviewNamespacedToolInAdditionalToolsIsNoDuplicate: top-level
// tools are told apart per list (a read_file in tools and another in an
// additional_tools item are both kept), but tools inside namespaces all
// share one list key, so a namespace that an additional_tools item
// declares again (Codex re-sends its MCP namespaces mid-conversation)
// loses its tools as "duplicate" and vanishes, under a rule that filters
// nothing. Right: the same treatment as top-level tools; the body comes
// back as the same slice.
func TestFilterReviewNamespacedToolInAdditionalToolsIsNoDuplicate(t *testing.T) {
	body := `{"model":"m","tools":[` + tfRead + `,` + tfNS + `],"input":[{"type":"message","role":"user","content":"hi"},{"type":"additional_tools","role":"developer","tools":[` + tfRead + `,` + tfNS + `]}]}`
	out, x, same := frSame(t, transforms.ProtocolResponses, `{"deny":["nothing"]}`, body)
	if !same {
		t.Errorf("body changed, want the same slice:\n%s", out)
	}
	tfDecisions(t, x, nil)
}

// Guard (passes): allow with a scoped selector keeps the namespace with
// only the allowed tools; allow by namespace name keeps a nested one
// whole; type: selectors reach namespace children.
func TestFilterReviewGuardSelectors(t *testing.T) {
	out, _ := frRun(t, transforms.ProtocolResponses, `{"allow":["mcp/read_*"]}`, tfResp(``, tfRead, tfNS))
	transformtest.JSONEqual(t, out, tfResp(``, tfNSRead))
	nested := `{"type":"namespace","name":"outer","tools":[{"type":"namespace","name":"inner","tools":[{"type":"function","name":"x"}]}]}`
	_, _, same := frSame(t, transforms.ProtocolResponses, `{"allow":["outer"]}`, tfResp(``, nested))
	if !same {
		t.Error("allow outer changed a body with only outer's tools")
	}
	out, x := frRun(t, transforms.ProtocolResponses, `{"deny":["type:function"]}`, tfResp(``, tfRead, tfWeb, tfNS))
	transformtest.JSONEqual(t, out, tfResp(``, tfWeb))
	tfDecisions(t, x, []transforms.Decision{
		{Tool: "read_file", Action: "drop", Reason: "denied"},
		{Tool: "mcp", Action: "drop", Reason: "denied"},
		{Tool: "mcp/delete_issue", Action: "drop", Reason: "denied"},
		{Tool: "mcp/read_issue", Action: "drop", Reason: "denied"},
	})
}

// TestFilterReviewOverDeepNamespacesEmptyTheList: namespaces nested past
// the scanner's depth limit (1000) are walked (the walk recurses without
// that limit) but cannot be copied: writeList's element scan fails on the
// first namespace and writes "tools":[], every tool gone and an empty
// list sent, which the README promises never to do, while the decisions
// name only the denied tools. Right: a body the scanner cannot handle
// goes upstream untouched (as any body it finds malformed) or is refused;
// never an emptied list.
func TestFilterReviewOverDeepNamespacesEmptyTheList(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"model":"m","tools":[`)
	const depth = 600
	for i := 0; i < depth; i++ {
		fmt.Fprintf(&b, `{"type":"namespace","name":"n%d","tools":[{"type":"function","name":"delete_%d"},`, i, i)
	}
	b.WriteString(`{"type":"function","name":"leaf"}`)
	for i := 0; i < depth; i++ {
		b.WriteString(`]}`)
	}
	b.WriteString(`],"input":"x"}`)
	body := b.String()
	out, _, err := tfRun(t, transforms.ProtocolResponses, `{"deny":["delete_*"]}`, body)
	var e *transforms.Error
	if errors.As(err, &e) && e.Status == 400 {
		return
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if string(out) != body {
		t.Errorf("want the body untouched (or a 400), got %.200s", out)
	}
}

// TestFilterReviewDuplicateNamespaceReason: a namespace emptied because
// its tools repeat an earlier namespace's is reported as "not_allowed",
// a reason for allow lists, under a rule without one. Right: duplicate.
func TestFilterReviewDuplicateNamespaceReason(t *testing.T) {
	out, x := frRun(t, transforms.ProtocolResponses, `{"deny":["nothing"]}`, tfResp(``, tfNSRead, tfNSRead))
	transformtest.JSONEqual(t, out, tfResp(``, tfNSRead))
	tfDecisions(t, x, []transforms.Decision{{Tool: "mcp", Action: "drop", Reason: "duplicate"}, {Tool: "mcp/read_issue", Action: "drop", Reason: "duplicate"}})
}

// TestFilterReviewOffCallRunSplitByAdditionalTools: an additional_tools
// item between two calls goes, but it still ends the run, so the two
// calls become two assistant messages in a row, breaking the alternation
// the retelling promises ("each run of calls becomes one assistant
// message"). Right: one assistant message telling both calls.
func TestFilterReviewOffCallRunSplitByAdditionalTools(t *testing.T) {
	body := `{"model":"m","input":[` +
		`{"type":"function_call","call_id":"a","name":"f","arguments":"{}"},` +
		`{"type":"additional_tools","role":"developer","tools":[{"type":"function","name":"g"}]},` +
		`{"type":"function_call","call_id":"b","name":"g","arguments":"{}"}]}`
	out, _ := frRun(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, body)
	transformtest.JSONEqual(t, out, `{"model":"m","input":[{"type":"message","role":"assistant","content":`+
		transformtest.JSONString("Called tool `f` (call a) with:\n{}\n\nCalled tool `g` (call b) with:\n{}")+`}]}`)
}
