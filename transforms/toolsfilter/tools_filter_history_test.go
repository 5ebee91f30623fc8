package toolsfilter

import (
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// Function calling off (tools_filter_history.go): no tool member reaches
// the upstream, a choice that demands a call is refused, and the history's
// calls and outputs are retold as assistant and user messages.

// --- the request ---------------------------------------------------------------------------------

// TestToolsFilterFunctionCallingOff: no tools member at all (never []),
// nor tool_choice nor parallel_tool_calls; every tool is reported
// incompatible, allow and deny are not consulted.
func TestToolsFilterFunctionCallingOff(t *testing.T) {
	tfRunCases(t, []tfCase{
		{
			name: "responses",
			p:    transforms.ProtocolResponses,
			cfg:  `{"function_calling":"off","deny":["read_file"],"allow":["nothing"]}`,
			body: `{"model":"m","input":"hi","tools":[` + tfRead + `,` + tfWeb + `,` + tfNS + `],"tool_choice":"auto","parallel_tool_calls":true,"store":false}`,
			want: `{"model":"m","input":"hi","store":false}`,
			decisions: []transforms.Decision{
				{Tool: "read_file", Action: "drop", Reason: "incompatible"},
				{Tool: "web_search", Action: "drop", Reason: "incompatible"},
				{Tool: "mcp", Action: "drop", Reason: "incompatible"},
			},
		},
		{
			name: "chat",
			p:    transforms.ProtocolChat,
			cfg:  `{"function_calling":"off","deny":["read_file"]}`,
			body: `{"model":"m","tools":[` + tfReadC + `,` + tfWriteC + `],"messages":[{"role":"user","content":"hi"}],"tool_choice":"none","parallel_tool_calls":false}`,
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			decisions: []transforms.Decision{
				{Tool: "read_file", Action: "drop", Reason: "incompatible"},
				{Tool: "write_file", Action: "drop", Reason: "incompatible"},
			},
		},
		{
			name: "chat legacy functions",
			p:    transforms.ProtocolChat,
			cfg:  `{"function_calling":"off"}`,
			body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f","parameters":{}}],"function_call":"auto"}`,
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "an empty list goes too",
			p:    transforms.ProtocolResponses,
			cfg:  `{"function_calling":"off"}`,
			body: `{"model":"m","tools":[],"input":"hi"}`,
			want: `{"model":"m","input":"hi"}`,
		},
		{
			name: "no tools at all",
			p:    transforms.ProtocolResponses,
			cfg:  `{"function_calling":"off"}`,
			body: `{"model":"m","input":"hi"}`,
		},
		{
			// LobeHub de-duplicates the requested and default ids before
			// reporting them: a default the request declares is one tool.
			name: "a default the request declares is reported once",
			p:    transforms.ProtocolResponses,
			cfg:  `{"function_calling":"off","defaults":[{"type":"function","name":"read_file"},` + tfSearchDef + `]}`,
			body: tfResp(``, tfRead),
			want: `{"model":"m","input":"hi"}`,
			decisions: []transforms.Decision{
				{Tool: "read_file", Action: "drop", Reason: "incompatible"},
				{Tool: "search", Action: "skip_default", Reason: "incompatible"},
			},
		},
		{
			// LobeHub reports the default ids with the requested ones;
			// none is added.
			name: "defaults are incompatible too",
			p:    transforms.ProtocolResponses,
			cfg:  `{"function_calling":"off","defaults":[` + tfSearchDef + `]}`,
			body: tfResp(``, tfRead),
			want: `{"model":"m","input":"hi"}`,
			decisions: []transforms.Decision{
				{Tool: "read_file", Action: "drop", Reason: "incompatible"},
				{Tool: "search", Action: "skip_default", Reason: "incompatible"},
			},
		},
	})
}

// TestToolsFilterOffForcedChoice: with function calling off, a choice that
// demands a call is refused; one that does not goes with the tools.
func TestToolsFilterOffForcedChoice(t *testing.T) {
	const off = `{"function_calling":"off"}`
	for _, choice := range []string{
		`"required"`,
		`{"type":"function","name":"read_file"}`,
		`{"type":"web_search"}`,
		`{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"read_file"}]}`,
	} {
		tfErr(t, transforms.ProtocolResponses, off, tfResp(`,"tool_choice":`+choice, tfRead, tfWeb), "tool_choice", "function calling is off")
	}
	tfErr(t, transforms.ProtocolChat, off, tfChat(`,"tool_choice":"required"`, tfReadC), "tool_choice", "function calling is off")
	tfErr(t, transforms.ProtocolChat, off, tfChat(`,"tool_choice":{"type":"function","function":{"name":"read_file"}}`, tfReadC), "tool_choice", "function calling is off")
	tfErr(t, transforms.ProtocolChat, off, tfChat(`,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"read_file"}}]}}`, tfReadC), "tool_choice")

	tfRunCases(t, []tfCase{
		{
			name:      "auto",
			p:         transforms.ProtocolResponses,
			cfg:       off,
			body:      tfResp(`,"tool_choice":"auto"`, tfRead),
			want:      `{"model":"m","input":"hi"}`,
			decisions: []transforms.Decision{{Tool: "read_file", Action: "drop", Reason: "incompatible"}},
		},
		{
			name:      "none",
			p:         transforms.ProtocolChat,
			cfg:       off,
			body:      tfChat(`,"tool_choice":"none"`, tfReadC),
			want:      `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			decisions: []transforms.Decision{{Tool: "read_file", Action: "drop", Reason: "incompatible"}},
		},
		{
			name:      "allowed_tools auto",
			p:         transforms.ProtocolResponses,
			cfg:       off,
			body:      tfResp(`,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"read_file"}]}`, tfRead),
			want:      `{"model":"m","input":"hi"}`,
			decisions: []transforms.Decision{{Tool: "read_file", Action: "drop", Reason: "incompatible"}},
		},
	})
}

// TestOffRefusesForcedLegacyFunctionCall: the legacy Chat function_call
// {"name":…} forces a call just as tool_choice does, so with function
// calling off it is a 400 tool_filtered, not dropped while the model
// answers without the call the client demanded.
func TestOffRefusesForcedLegacyFunctionCall(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}],"function_call":{"name":"f"}}`
	tfErr(t, transforms.ProtocolChat, `{"function_calling":"off"}`, body, "function_call", "function calling is off")
}

// TestOffReportsChatCustomToolByName: a Chat custom tool is reported under
// its name (apply_patch, incompatible), not its type, so a call to it in
// the response counts as filtered rather than undeclared.
func TestOffReportsChatCustomToolByName(t *testing.T) {
	custom := `{"type":"custom","custom":{"name":"apply_patch"}}`
	out, x := filterOK(t, transforms.ProtocolChat, `{"function_calling":"off"}`, tfChat(``, custom))
	transformtest.JSONEqual(t, out, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	tfDecisions(t, x, []transforms.Decision{{Tool: "apply_patch", Action: "drop", Reason: "incompatible"}})
	call := `{"id":"call_1","type":"custom","custom":{"name":"apply_patch","input":"x"}}`
	if _, err := x.RewriteResponse([]byte(tfCompletion("tool_calls", call))); err != nil {
		t.Fatal(err)
	}
	tfCounts(t, x, 0, 1, 0)
}

// --- the history ---------------------------------------------------------------------------------

// TestToolsFilterOffResponsesHistory: calls and their outputs become
// assistant and user messages, runs merged, images kept, additional_tools
// removed, reasoning and messages as they were.
func TestToolsFilterOffResponsesHistory(t *testing.T) {
	patch := "*** Begin Patch\n*** Add File: \"q\".txt\n+back\\slash café ✓ 日本\n*** End Patch\n"
	body := `{"model":"m","input":[` +
		`{"type":"message","role":"user","content":"fix it"},` +
		`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"},` +
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","status":"completed"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"a.txt\nb.txt"},` +
		`{"type":"custom_tool_call","id":"ctc_1","call_id":"call_2","name":"apply_patch","input":` + transformtest.JSONString(patch) + `},` +
		`{"type":"custom_tool_call_output","call_id":"call_2","output":"Done!"},` +
		`{"type":"function_call","call_id":"call_3","name":"read","arguments":"{\"p\":\"a\"}"},` +
		`{"type":"function_call","call_id":"call_4","namespace":"mcp","name":"shot","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"call_3","output":"A"},` +
		`{"type":"function_call_output","call_id":"call_4","output":[{"type":"input_text","text":"see the picture"},{"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"low"}]},` +
		`{"type":"additional_tools","tools":[{"type":"function","name":"late"}]},` +
		`{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"ok"}]},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Fixed."}]}` +
		`],"tools":[` + tfRead + `,{"type":"custom","name":"apply_patch"}],"tool_choice":"auto","parallel_tool_calls":true,"store":false}`
	want := `{"model":"m","input":[` +
		`{"type":"message","role":"user","content":"fix it"},` +
		`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"},` +
		`{"type":"message","role":"assistant","content":` + transformtest.JSONString("Called tool `exec_command` (call call_1) with:\n{\"cmd\":\"ls\"}") + `},` +
		`{"type":"message","role":"user","content":` + transformtest.JSONString("Output of tool `exec_command` (call call_1):\na.txt\nb.txt") + `},` +
		`{"type":"message","role":"assistant","content":` + transformtest.JSONString("Called tool `apply_patch` (call call_2) with:\n"+patch) + `},` +
		`{"type":"message","role":"user","content":` + transformtest.JSONString("Output of tool `apply_patch` (call call_2):\nDone!") + `},` +
		`{"type":"message","role":"assistant","content":` + transformtest.JSONString("Called tool `read` (call call_3) with:\n{\"p\":\"a\"}\n\nCalled tool `mcp/shot` (call call_4) with:\n{}") + `},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":` + transformtest.JSONString("Output of tool `read` (call call_3):\nA\n\nOutput of tool `mcp/shot` (call call_4):\nsee the picture") + `},` +
		`{"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"low"}]},` +
		`{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"ok"}]},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Fixed."}]}` +
		`],"store":false}`
	out, x, err := tfRun(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, body)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, want)
	tfDecisions(t, x, []transforms.Decision{
		{Tool: "read_file", Action: "drop", Reason: "incompatible"},
		{Tool: "apply_patch", Action: "drop", Reason: "incompatible"},
		{Tool: "history", Action: "retell", Reason: "tool calls and outputs became plain text: function calling is off"},
	})
	// The retold text is valid UTF-8 with the patch's characters as they
	// were, not escaped twice.
	if !strings.Contains(string(out), "café ✓ 日本") && !strings.Contains(string(out), `caf\u00e9`) {
		t.Errorf("non-ASCII text lost:\n%s", out)
	}
}

// TestToolsFilterOffChatHistory: tool_calls are told in the assistant's
// content, runs of tool messages become one user message.
func TestToolsFilterOffChatHistory(t *testing.T) {
	body := `{"model":"m","messages":[` +
		`{"role":"system","content":"sys"},` +
		`{"role":"user","content":[{"type":"text","text":"hi"}]},` +
		`{"role":"assistant","content":"Let me look.","tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"read","arguments":"{\"p\":\"a\"}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"grep","arguments":"{\"q\":\"\\\\d+ \\\"x\\\"\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"A"},` +
		`{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"match: é"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_3","type":"function","function":{"name":"write","arguments":"{}"}}],"refusal":null},` +
		`{"role":"tool","tool_call_id":"call_3","content":"ok"},` +
		`{"role":"assistant","content":[{"type":"text","text":"Checking."}],"tool_calls":[{"id":"call_4","type":"custom","custom":{"name":"apply_patch","input":"*** Begin Patch\n*** End Patch"}}]},` +
		`{"role":"tool","tool_call_id":"call_4","content":"Done"},` +
		`{"role":"user","content":"thanks"},` +
		`{"role":"assistant","content":"All good."}` +
		`],"tools":[` + tfReadC + `],"tool_choice":"auto","parallel_tool_calls":false,"stream":true}`
	want := `{"model":"m","messages":[` +
		`{"role":"system","content":"sys"},` +
		`{"role":"user","content":[{"type":"text","text":"hi"}]},` +
		`{"role":"assistant","content":` + transformtest.JSONString("Let me look.\n\nCalled tool `read` (call call_1) with:\n{\"p\":\"a\"}\n\nCalled tool `grep` (call call_2) with:\n{\"q\":\"\\\\d+ \\\"x\\\"\"}") + `},` +
		`{"role":"user","content":` + transformtest.JSONString("Output of tool `read` (call call_1):\nA\n\nOutput of tool `grep` (call call_2):\nmatch: é") + `},` +
		`{"role":"assistant","content":` + transformtest.JSONString("Called tool `write` (call call_3) with:\n{}") + `,"refusal":null},` +
		`{"role":"user","content":` + transformtest.JSONString("Output of tool `write` (call call_3):\nok") + `},` +
		`{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"text","text":` + transformtest.JSONString("Called tool `apply_patch` (call call_4) with:\n*** Begin Patch\n*** End Patch") + `}]},` +
		`{"role":"user","content":` + transformtest.JSONString("Output of tool `apply_patch` (call call_4):\nDone") + `},` +
		`{"role":"user","content":"thanks"},` +
		`{"role":"assistant","content":"All good."}` +
		`],"stream":true}`
	out, x, err := tfRun(t, transforms.ProtocolChat, `{"function_calling":"off"}`, body)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, want)
	tfDecisions(t, x, []transforms.Decision{
		{Tool: "read_file", Action: "drop", Reason: "incompatible"},
		{Tool: "history", Action: "retell", Reason: "tool calls and outputs became plain text: function calling is off"},
	})

	// The legacy function_call and function messages.
	body = `{"model":"m","messages":[{"role":"user","content":"q"},` +
		`{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{\"a\":1}"}},` +
		`{"role":"function","name":"f","content":"r"}],"functions":[{"name":"f"}],"function_call":"auto"}`
	want = `{"model":"m","messages":[{"role":"user","content":"q"},` +
		`{"role":"assistant","content":` + transformtest.JSONString("Called tool `f` with:\n{\"a\":1}") + `},` +
		`{"role":"user","content":` + transformtest.JSONString("Output of tool `f`:\nr") + `}]}`
	out, _, err = tfRun(t, transforms.ProtocolChat, `{"function_calling":"off"}`, body)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, want)
}

// TestOffKeepsContentBesideNullToolCalls: a Chat assistant message with
// "tool_calls":null, "function_call":null or "tool_calls":[]
// (SDK-serialised histories carry them) retells no call: the members go and
// the content stays as it was.
func TestOffKeepsContentBesideNullToolCalls(t *testing.T) {
	for _, calls := range []string{`"tool_calls":null,"function_call":null`, `"tool_calls":[]`} {
		body := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello",` + calls + `},{"role":"user","content":"more"}]}`
		out, _ := filterOK(t, transforms.ProtocolChat, `{"function_calling":"off"}`, body)
		transformtest.JSONEqual(t, out, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello"},{"role":"user","content":"more"}]}`)
	}
}

// TestOffKeepsComputerScreenshotAsImage: a computer_call_output's
// screenshot becomes an input_image part of the user message, as the README
// promises for images of outputs, not base64 text the model cannot see.
func TestOffKeepsComputerScreenshotAsImage(t *testing.T) {
	body := `{"model":"m","input":[` +
		`{"type":"computer_call","id":"cu_1","call_id":"call_1","action":{"type":"screenshot"},"pending_safety_checks":[],"status":"completed"},` +
		`{"type":"computer_call_output","call_id":"call_1","output":{"type":"computer_screenshot","image_url":"data:image/png;base64,AAAA"}}` +
		`],"tools":[{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"browser"}]}`
	want := `{"model":"m","input":[` +
		`{"type":"message","role":"assistant","content":` + transformtest.JSONString("Called tool `computer` (call call_1) with:\n{\"type\":\"screenshot\"}") + `},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":` + transformtest.JSONString("Output of tool `computer` (call call_1):\n") + `},{"type":"input_image","image_url":"data:image/png;base64,AAAA"}]}` +
		`]}`
	out, _ := filterOK(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, body)
	transformtest.JSONEqual(t, out, want)
}

// TestOffRetellsMCPCallOutput: an mcp_call item's output, the server's
// answer, is retold with its arguments, so the model keeps what the server
// said.
func TestOffRetellsMCPCallOutput(t *testing.T) {
	body := `{"model":"m","input":[{"type":"message","role":"user","content":"q"},` +
		`{"type":"mcp_call","id":"mcp_1","server_label":"deepwiki","name":"ask_question","arguments":"{\"q\":\"x\"}","output":"The answer is 42"}]}`
	out, _ := filterOK(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, body)
	if !strings.Contains(string(out), "The answer is 42") {
		t.Fatalf("the MCP server's answer is lost:\n%s", out)
	}
}

// TestOffNamesOutputBeforeItsCall: an output that precedes its call
// (clients that group outputs, items replayed out of order) is named after
// the call's tool, read from anywhere in the history, not after the item
// type.
func TestOffNamesOutputBeforeItsCall(t *testing.T) {
	body := `{"model":"m","input":[` +
		`{"type":"function_call_output","call_id":"call_1","output":"A"},` +
		`{"type":"message","role":"user","content":"and?"},` +
		`{"type":"function_call","call_id":"call_1","name":"lookup","arguments":"{}"}]}`
	out, _ := filterOK(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, body)
	if !strings.Contains(string(out), "Output of tool `lookup` (call call_1)") {
		t.Fatalf("the output is not named after its call:\n%s", out)
	}
}

// TestOffRefusalPartsReasoningAndUntouchedBodies: Chat assistant content
// arrays with refusal parts stay valid when calls are told beside them, a
// reasoning item between Responses calls splits the run, and a body with
// nothing to remove comes back as the same slice.
func TestOffRefusalPartsReasoningAndUntouchedBodies(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"refusal","refusal":"no"}],"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`
	out, _ := filterOK(t, transforms.ProtocolChat, `{"function_calling":"off"}`, body)
	transformtest.JSONEqual(t, out, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"refusal","refusal":"no"},{"type":"text","text":`+transformtest.JSONString("Called tool `f` (call c1) with:\n{}")+`}]},{"role":"user","content":`+transformtest.JSONString("Output of tool `f` (call c1):\nr")+`}]}`)

	body = `{"model":"m","input":[{"type":"function_call","call_id":"a","name":"f","arguments":"{}"},{"type":"reasoning","id":"rs","summary":[]},{"type":"function_call","call_id":"b","name":"g","arguments":"{}"},{"type":"function_call_output","call_id":"a","output":{"k":1}},{"type":"function_call_output","call_id":"b","output":"B"}]}`
	out, _ = filterOK(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, body)
	transformtest.JSONEqual(t, out, `{"model":"m","input":[`+
		`{"type":"message","role":"assistant","content":`+transformtest.JSONString("Called tool `f` (call a) with:\n{}")+`},`+
		`{"type":"reasoning","id":"rs","summary":[]},`+
		`{"type":"message","role":"assistant","content":`+transformtest.JSONString("Called tool `g` (call b) with:\n{}")+`},`+
		`{"type":"message","role":"user","content":`+transformtest.JSONString("Output of tool `f` (call a):\n{\"k\":1}\n\nOutput of tool `g` (call b):\nB")+`}]}`)

	for _, p := range []transforms.Protocol{transforms.ProtocolResponses, transforms.ProtocolChat} {
		plain := `{"model":"m","input":"hi","messages":[{"role":"user","content":"hi"}],"stream":true}`
		out, _, same := filterSame(t, p, `{"function_calling":"off"}`, plain)
		if !same {
			t.Errorf("%v: an untouched body is not the same slice:\n%s", p, out)
		}
	}
}

// --- additional_tools items in runs of calls -----------------------------------------------------

// TestOffAdditionalToolsKeepsCallRunWhole: an additional_tools item between
// two calls goes without ending the run: both calls are told in one
// assistant message, keeping the roles alternating as the retelling
// promises.
func TestOffAdditionalToolsKeepsCallRunWhole(t *testing.T) {
	body := `{"model":"m","input":[` +
		`{"type":"function_call","call_id":"a","name":"f","arguments":"{}"},` +
		`{"type":"additional_tools","role":"developer","tools":[{"type":"function","name":"g"}]},` +
		`{"type":"function_call","call_id":"b","name":"g","arguments":"{}"}]}`
	out, _ := filterOK(t, transforms.ProtocolResponses, `{"function_calling":"off"}`, body)
	transformtest.JSONEqual(t, out, `{"model":"m","input":[{"type":"message","role":"assistant","content":`+
		transformtest.JSONString("Called tool `f` (call a) with:\n{}\n\nCalled tool `g` (call b) with:\n{}")+`}]}`)
}

// TestOffAdditionalToolsInsideAndAroundRuns: an additional_tools item
// inside a run of calls does not split it; one after a run, before other
// items or before a run of the other kind, goes on its own; one first goes
// as a run of its own.
func TestOffAdditionalToolsInsideAndAroundRuns(t *testing.T) {
	both := `{"type":"message","role":"assistant","content":"Called tool ` + "`f`" + ` (call c1) with:\n{}\n\nCalled tool ` + "`g`" + ` (call c2) with:\n{\"a\":1}"}`
	namedOut := `{"type":"message","role":"user","content":"Output of tool ` + "`f`" + ` (call c1):\nok"}`
	for _, tc := range []struct {
		name string
		in   []string
		want string
	}{
		{"call, at, at, other", []string{callItem, additionalToolsItem, additionalToolsItem, messageItem}, inputOf(toldCall, messageItem)},
		{"call, at, call", []string{callItem, additionalToolsItem, callItem2}, inputOf(both)},
		{"call, at, at, call", []string{callItem, additionalToolsItem, additionalToolsItem, callItem2}, inputOf(both)},
		{"call, at, output", []string{callItem, additionalToolsItem, outputItem}, inputOf(toldCall, namedOut)},
		{"output, at at the end", []string{outputItem, additionalToolsItem}, inputOf(toldOutput)},
		{"at first", []string{additionalToolsItem, callItem}, inputOf(toldCall)},
		{"at, at first", []string{additionalToolsItem, additionalToolsItem, messageItem, callItem}, inputOf(messageItem, toldCall)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := filterRecovered(t, transforms.ProtocolResponses, offConfig, inputOf(tc.in...))
			transformtest.Accepted(t, out, err, tc.want)
		})
	}
}

// TestOffTrailingAdditionalToolsItemsGo: two or more additional_tools items
// ending the input go and the run before them is retold, as for one: their
// removals must not claim the same comma (overlapping edits panic, a 500).
func TestOffTrailingAdditionalToolsItemsGo(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want string
	}{
		{"call then two", []string{callItem, additionalToolsItem, additionalToolsItem}, inputOf(toldCall)},
		{"output then two", []string{outputItem, additionalToolsItem, additionalToolsItem}, inputOf(toldOutput)},
		{"call then three", []string{callItem, additionalToolsItem, additionalToolsItem, additionalToolsItem}, inputOf(toldCall)},
		{"two around a call", []string{additionalToolsItem, additionalToolsItem, callItem, additionalToolsItem, additionalToolsItem}, inputOf(toldCall)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := filterRecovered(t, transforms.ProtocolResponses, offConfig, inputOf(tc.in...))
			transformtest.Accepted(t, out, err, tc.want)
		})
	}
}
