package toolsplan

import (
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// History items of built-in tools replayed by a client on a later turn:
// a built-in the request no longer declares never conflicts with a
// declared tool of its name, and rebuilt calls carry no nulls the stand-in
// functions' schemas refuse.

// histPatchTool is Codex's freeform apply_patch as Codex declares it.
const histPatchTool = `{"type":"custom","name":"apply_patch","description":"Edit","format":{"type":"grammar","syntax":"lark","definition":"start: begin_patch hunk+ end_patch"}}`

// histPatchFunction is what the upstream gets for histPatchTool.
func histPatchFunction(t testing.TB) string {
	return `{"type":"function","name":"apply_patch","description":` + patchDescription(t) + `,"parameters":` + patchParameters(t) + `,"strict":false}`
}

// histPatchHistory is a conversation in which Codex used the built-in
// apply_patch (three operations and their outputs), then a custom call on
// the turn after, as a client that switched tools replays it.
const histPatchHistory = `{"type":"message","role":"user","content":"fix it"},` +
	`{"type":"apply_patch_call","id":"apc_1","call_id":"c1","status":"completed","operation":{"type":"update_file","path":"src/a.go","diff":"@@ func a() {\n-\treturn 1\n+\treturn 2\n"}},` +
	`{"type":"apply_patch_call_output","id":"apo_1","call_id":"c1","status":"completed","output":"Updated src/a.go"},` +
	`{"type":"apply_patch_call","id":"apc_2","call_id":"c2","status":"completed","operation":{"type":"create_file","path":"notes.txt","diff":"+first\n+second"}},` +
	`{"type":"apply_patch_call_output","id":"apo_2","call_id":"c2","status":"completed","output":"Created notes.txt"},` +
	`{"type":"apply_patch_call","id":"apc_3","call_id":"c3","status":"completed","operation":{"type":"delete_file","path":"old.txt","diff":null}},` +
	`{"type":"apply_patch_call_output","id":"apo_3","call_id":"c3","status":"failed","output":null},` +
	`{"type":"custom_tool_call","id":"ctc_4","call_id":"c4","name":"apply_patch","input":"*** Begin Patch\n*** Delete File: tmp.txt\n*** End Patch"},` +
	`{"type":"custom_tool_call_output","call_id":"c4","output":"Deleted tmp.txt"}`

// histPatchHistoryUp is histPatchHistory as the upstream gets it beside
// the declared custom apply_patch: every call a call of that function.
const histPatchHistoryUp = `{"type":"message","role":"user","content":"fix it"},` +
	`{"type":"function_call","call_id":"c1","name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** Update File: src/a.go\\n@@ func a() {\\n-\\treturn 1\\n+\\treturn 2\\n*** End Patch\\n\"}","status":"completed"},` +
	`{"type":"function_call_output","call_id":"c1","output":"Updated src/a.go"},` +
	`{"type":"function_call","call_id":"c2","name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** Add File: notes.txt\\n+first\\n+second\\n*** End Patch\\n\"}","status":"completed"},` +
	`{"type":"function_call_output","call_id":"c2","output":"Created notes.txt"},` +
	`{"type":"function_call","call_id":"c3","name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** Delete File: old.txt\\n*** End Patch\\n\"}","status":"completed"},` +
	`{"type":"function_call_output","call_id":"c3","output":"failed"},` +
	`{"type":"function_call","call_id":"c4","name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** Delete File: tmp.txt\\n*** End Patch\"}"},` +
	`{"type":"function_call_output","call_id":"c4","output":"Deleted tmp.txt"}`

// TestToolsPlanHistoryBuiltinBesideDeclaredTool: apply_patch_call items
// from turns when the client used the built-in apply_patch, in a request
// that declares Codex's custom apply_patch, are no second tool named
// apply_patch (no 400 tool_name_conflict): they go upstream as calls of
// the declared function, the operation written as the patch the custom
// tool takes, with a decision. The same holds for any built-in the request
// does not declare, beside a function of its name.
func TestToolsPlanHistoryBuiltinBesideDeclaredTool(t *testing.T) {
	body := `{"model":"gpt-5.5","tools":[` + histPatchTool + `,{"type":"function","name":"exec_command","parameters":{}}],"input":[` + histPatchHistory + `]}`
	want := `{"model":"gpt-5.5","tools":[` + histPatchFunction(t) + `,{"type":"function","name":"exec_command","parameters":{}}],"input":[` + histPatchHistoryUp + `]}`
	for name, rules := range map[string]string{
		"tools_plan alone":                       tpProfile("function_only"),
		"field_custom_tools_to_function first":   `[{"transform":"field_custom_tools_to_function"},{"transform":"tools_plan","config":{"profile":"function_only"}}]`,
		"tools_plan first, then the custom rule": `[{"transform":"tools_plan","config":{"profile":"function_only"}},{"transform":"field_custom_tools_to_function"}]`,
	} {
		t.Run(name, func(t *testing.T) {
			x := tpOKValid(t, transforms.ProtocolResponses, rules, body, want)
			tpDecided(t, x, "apply_patch", "convert_history_only",
				"the history holds apply_patch calls and the request does not declare apply_patch: they go to the upstream as calls to the declared custom tool apply_patch")
		})
	}

	rules := tpProfile("function_only")
	cases := []struct{ name, body, want string }{
		{
			name: "an operation the patch cannot hold goes as the built-in's arguments, in input",
			body: `{"tools":[` + histPatchTool + `],"input":[` +
				`{"type":"apply_patch_call","call_id":"c1","status":"in_progress","operation":{"type":"rename_file","path":"a","to":"b"}},` +
				`{"type":"apply_patch_call","call_id":"c2","operation":{"type":"update_file","path":"a\nb","diff":"@@\n"}}]}`,
			want: `{"tools":[` + histPatchFunction(t) + `],"input":[` +
				`{"type":"function_call","call_id":"c1","name":"apply_patch","arguments":` + transformtest.JSONString(`{"input":`+transformtest.JSONString(`{"operation":{"type":"rename_file","path":"a","to":"b"}}`)+`}`) + `,"status":"in_progress"},` +
				`{"type":"function_call","call_id":"c2","name":"apply_patch","arguments":` + transformtest.JSONString(`{"input":`+transformtest.JSONString(`{"operation":{"type":"update_file","path":"a\nb","diff":"@@\n"}}`)+`}`) + `}]}`,
		},
		{
			name: "a shell_call beside a function named shell is a call of that function",
			body: `{"tools":[{"type":"function","name":"shell","parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}}}}],"input":[` +
				`{"type":"shell_call","id":"sh_1","call_id":"c1","status":"completed","action":{"commands":["ls"],"timeout_ms":null,"max_output_length":null},"environment":{"type":"local"}},` +
				`{"type":"shell_call_output","call_id":"c1","output":[{"stdout":"a\n","stderr":"","outcome":{"type":"exit","exit_code":0}}]},` +
				`{"type":"local_shell_call","id":"ls_1","call_id":"c2","status":"completed","action":{"type":"exec","command":["pwd"],"env":{},"timeout_ms":null,"user":null,"working_directory":null}},` +
				`{"type":"local_shell_call_output","call_id":"c2","output":"/"}]}`,
			want: `{"tools":[{"type":"function","name":"shell","parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}}}}],"input":[` +
				`{"type":"function_call","call_id":"c1","name":"shell","arguments":` + transformtest.JSONString(`{"commands":["ls"]}`) + `,"status":"completed"},` +
				`{"type":"function_call_output","call_id":"c1","output":` + transformtest.JSONString("[exit 0]\nstdout:\na\n\nstderr:\n") + `},` +
				`{"type":"function_call","call_id":"c2","name":"local_shell","arguments":` + transformtest.JSONString(`{"command":["pwd"],"env":{}}`) + `,"status":"completed"},` +
				`{"type":"function_call_output","call_id":"c2","output":"/"}]}`,
		},
		{
			name: "the built-in declared as well: its own function, as before",
			body: `{"tools":[{"type":"apply_patch"}],"input":[` +
				`{"type":"apply_patch_call","call_id":"c1","status":"completed","operation":{"type":"delete_file","path":"old.txt"}}]}`,
			want: `{"tools":[` + tpDegraded("apply_patch", "apply_patch") + `],"input":[` +
				`{"type":"function_call","call_id":"c1","name":"apply_patch","arguments":` + transformtest.JSONString(`{"operation":{"type":"delete_file","path":"old.txt"}}`) + `,"status":"completed"}]}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tpOKValid(t, transforms.ProtocolResponses, rules, tc.body, tc.want)
		})
	}

	// Two declared tools of one name are still a conflict.
	tpErr(t, transforms.ProtocolResponses, rules,
		`{"tools":[`+histPatchTool+`,{"type":"apply_patch"}],"input":[{"type":"apply_patch_call","call_id":"c1","operation":{"type":"delete_file","path":"a"}}]}`,
		"tool_name_conflict", "tools",
		`tools "apply_patch apply_patch" and "apply_patch" both map to the upstream name "apply_patch" under ^[a-zA-Z0-9_-]{1,64}$; rename one of them`)
}

// TestToolsPlanHistoryBuiltinBesideDeclaredToolResponse: after such a
// request, the upstream's apply_patch calls are the custom tool's, in JSON
// and in streams at every chunk size: the history's built-in is not linked
// to the name, so no call comes back as an apply_patch_call.
func TestToolsPlanHistoryBuiltinBesideDeclaredToolResponse(t *testing.T) {
	request := `{"model":"gpt-5.5","stream":true,"tools":[` + histPatchTool + `],"input":[` + histPatchHistory + `]}`
	const patch = "*** Begin Patch\n*** Update File: b.go\n@@\n-x\n+y\n*** End Patch\n"
	args := `{"input":` + transformtest.JSONString(patch) + `}`
	custom := `{"id":"fc_p","type":"custom_tool_call","status":"completed","input":` + transformtest.JSONString(patch) + `,"call_id":"call_p","name":"apply_patch"}`

	x := planExchange(t, planRules, request)
	out, err := x.RewriteResponse([]byte(`{"id":"r","output":[` + upFC("fc_p", "call_p", "apply_patch", args) + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"id":"r","output":[`+custom+`]}`)
	if c := x.Counts(); c.Restored != 1 {
		t.Fatalf("restored = %d, want 1", c.Restored)
	}

	upstream := transformtest.SSE(append(transformtest.FunctionCallStream(0, 0, "fc_p", "call_p", "apply_patch", args, 9, true),
		`{"type":"response.completed","sequence_number":99,"response":{"id":"r","status":"completed","output":[`+upFC("fc_p", "call_p", "apply_patch", args)+`]}}`)...)
	got, _ := planStreamExchange(t, request, upstream)
	want := transformtest.SSE(
		`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"id":"fc_p","type":"custom_tool_call","status":"in_progress","input":"","call_id":"call_p","name":"apply_patch"}}`,
		`{"type":"response.custom_tool_call_input.delta","sequence_number":1,"item_id":"fc_p","output_index":0,"delta":"*** Begin Patch\n"}`,
		`{"type":"response.custom_tool_call_input.delta","sequence_number":2,"item_id":"fc_p","output_index":0,"delta":"*** Update File: b.go\n@@\n-x\n+y\n"}`,
		`{"type":"response.custom_tool_call_input.delta","sequence_number":3,"item_id":"fc_p","output_index":0,"delta":"*** End Patch\n"}`,
		`{"type":"response.custom_tool_call_input.done","sequence_number":4,"item_id":"fc_p","output_index":0,"input":`+transformtest.JSONString(patch)+`}`,
		`{"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":`+custom+`}`,
		`{"type":"response.completed","sequence_number":6,"response":{"id":"r","status":"completed","output":[`+custom+`]}}`)
	if got != want {
		t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, want)
	}
	if items := doneItems(transformtest.SDKEvents(t, got)); len(items) != 1 || items[0].AsCustomToolCall().Input != patch {
		t.Fatalf("items: %+v", items)
	}
}

// TestToolsPlanHistoryRebuildLeavesOutNulls: a built-in call item replayed
// with null members (the Responses items make timeout_ms,
// max_output_length, user, working_directory and a delete's diff
// nullable) goes upstream as arguments without them: the stand-in
// functions declare those fields as integers and strings, and an upstream
// holding the history to the schema refuses a null. An integer field that
// is not a positive integer goes too; the rest is kept as the client sent
// it.
func TestToolsPlanHistoryRebuildLeavesOutNulls(t *testing.T) {
	body := `{"model":"m","tools":[{"type":"local_shell"},{"type":"shell"},{"type":"apply_patch"},{"type":"computer_use_preview","display_width":1,"display_height":1,"environment":"browser"}],"input":[` +
		`{"type":"local_shell_call","id":"ls_1","call_id":"c1","status":"completed","action":{"type":"exec","command":["ls"],"env":null,"timeout_ms":null,"user":null,"working_directory":null}},` +
		`{"type":"local_shell_call","id":"ls_2","call_id":"c2","status":"completed","action":{"type":"exec","command":["make"],"env":{"A":"1"},"timeout_ms":0,"user":"dev","working_directory":null}},` +
		`{"type":"shell_call","id":"sh_1","call_id":"c3","status":"completed","action":{"commands":["ls"],"timeout_ms":null,"max_output_length":null},"environment":{"type":"local"}},` +
		`{"type":"shell_call","id":"sh_2","call_id":"c4","status":"completed","action":{"commands":["go test ./..."],"timeout_ms":60000,"max_output_length":"4096"},"environment":null},` +
		`{"type":"apply_patch_call","id":"ap_1","call_id":"c5","status":"completed","operation":{"type":"delete_file","path":"old.txt","diff":null}},` +
		`{"type":"computer_call","id":"cu_1","call_id":"c6","status":"completed","action":{"type":"keypress","keys":["ENTER"],"x":null,"y":null},"pending_safety_checks":[]},` +
		`{"type":"computer_call","id":"cu_2","call_id":"c7","status":"completed","action":null,"pending_safety_checks":[]}]}`
	fc := func(callID, name, args string) string {
		return `{"type":"function_call","call_id":"` + callID + `","name":"` + name + `","arguments":` + transformtest.JSONString(args) + `,"status":"completed"}`
	}
	want := `{"model":"m","tools":[` + tpDegraded("local_shell", "local_shell") + `,` + tpDegraded("shell", "shell") + `,` + tpDegraded("apply_patch", "apply_patch") + `,` + tpDegraded("computer", "computer") + `],"input":[` +
		fc("c1", "local_shell", `{"command":["ls"]}`) + `,` +
		fc("c2", "local_shell", `{"command":["make"],"env":{"A":"1"},"user":"dev"}`) + `,` +
		fc("c3", "shell", `{"commands":["ls"]}`) + `,` +
		fc("c4", "shell", `{"commands":["go test ./..."],"timeout_ms":60000}`) + `,` +
		fc("c5", "apply_patch", `{"operation":{"type":"delete_file","path":"old.txt"}}`) + `,` +
		fc("c6", "computer", `{"action":{"type":"keypress","keys":["ENTER"]}}`) + `,` +
		fc("c7", "computer", `{"action":{}}`) + `]}`
	tpOKValid(t, transforms.ProtocolResponses, tpProfile("function_only"), body, want)
}

// TestToolsPlanHistoryRoundTrip: every built-in call the plan restores in
// a stream (at chunk sizes 1, 7 and 4096), sent back by the client as
// history on the next turn, reaches the upstream as the function call it
// stands for, without the nulls the item's shape added (a shell call the
// model made without limits comes back with "timeout_ms":null and
// "max_output_length":null).
func TestToolsPlanHistoryRoundTrip(t *testing.T) {
	for _, tc := range []struct{ tool, args, item, history string }{
		{"shell", `{"commands":["go test ./..."]}`,
			`{"type":"shell_call","id":"fc_1","call_id":"call_1","status":"completed","action":{"commands":["go test ./..."],"timeout_ms":null,"max_output_length":null},"environment":{"type":"local"}}`,
			`{"commands":["go test ./..."]}`},
		{"shell", `{"commands":["npm ci","npm test"],"max_output_length":2000}`,
			`{"type":"shell_call","id":"fc_1","call_id":"call_1","status":"completed","action":{"commands":["npm ci","npm test"],"timeout_ms":null,"max_output_length":2000},"environment":{"type":"local"}}`,
			`{"commands":["npm ci","npm test"],"max_output_length":2000}`},
		{"local_shell", `{"cmd":["rg","--files"],"timeout_ms":1500}`,
			`{"type":"local_shell_call","id":"fc_1","call_id":"call_1","status":"completed","action":{"type":"exec","command":["rg","--files"],"env":{},"timeout_ms":1500}}`,
			`{"command":["rg","--files"],"env":{},"timeout_ms":1500}`},
		{"apply_patch", `{"operation":{"type":"delete_file","path":"tmp.txt"}}`,
			`{"type":"apply_patch_call","id":"fc_1","call_id":"call_1","status":"completed","operation":{"type":"delete_file","path":"tmp.txt"}}`,
			`{"operation":{"type":"delete_file","path":"tmp.txt"}}`},
		{"computer", `{"action":{"type":"scroll","x":0,"y":0,"scroll_x":0,"scroll_y":300}}`,
			`{"type":"computer_call","id":"fc_1","call_id":"call_1","status":"completed","action":{"type":"scroll","x":0,"y":0,"scroll_x":0,"scroll_y":300},"pending_safety_checks":[]}`,
			`{"action":{"type":"scroll","x":0,"y":0,"scroll_x":0,"scroll_y":300}}`},
	} {
		t.Run(tc.tool+" "+tc.args, func(t *testing.T) {
			up := append(transformtest.FunctionCallStream(0, 0, "fc_1", "call_1", tc.tool, tc.args, 4, true),
				`{"type":"response.completed","sequence_number":99,"response":{"id":"r","status":"completed","output":[`+upFC("fc_1", "call_1", tc.tool, tc.args)+`]}}`)
			got, _ := planStreamExchange(t, planBuiltinRequest, transformtest.SSE(up...))
			want := transformtest.SSE(
				`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":`+announced(t, tc.item)+`}`,
				`{"type":"response.output_item.done","sequence_number":1,"output_index":0,"item":`+tc.item+`}`,
				`{"type":"response.completed","sequence_number":2,"response":{"id":"r","status":"completed","output":[`+tc.item+`]}}`)
			if got != want {
				t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, want)
			}
			// The next turn: the item the client got, as history, its
			// tool still declared.
			item := doneItems(transformtest.SDKEvents(t, got))[0].RawJSON()
			decl := map[string]string{"computer": `{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"linux"}`}[tc.tool]
			if decl == "" {
				decl = `{"type":"` + tc.tool + `"}`
			}
			tpOKValid(t, transforms.ProtocolResponses, planRules,
				`{"model":"gpt-5.5","tools":[`+decl+`],"input":[{"type":"message","role":"user","content":"go"},`+item+`]}`,
				`{"model":"gpt-5.5","tools":[`+tpDegraded(tc.tool, tc.tool)+`],"input":[{"type":"message","role":"user","content":"go"},`+
					`{"type":"function_call","call_id":"call_1","name":"`+tc.tool+`","arguments":`+transformtest.JSONString(tc.history)+`,"status":"completed"}]}`)
		})
	}
}
