package toolsplan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// The response side of tools_plan: every call to a tool the plan degraded,
// renamed or flattened comes back to the client as the item it declared,
// in JSON bodies and in streams, and nothing else is touched.

const planRules = `[{"transform":"tools_plan","config":{"profile":"function_only"}}]`

// planLongName is a 70-character dotted MCP function name; flattened under
// its namespace, sanitised and cut, it goes upstream as planLongUp.
const (
	planLongName = "repos.issues.comments.create_for_pull_request.with_review_thread.v2.01"
	planLongUp   = "mcp__github__repos_issues_comments_create_for_pull_reques_2c3qzt"
)

// planTools are the tools of the requests below, besides apply_patch.
const planTools = `{"type":"local_shell"},` +
	`{"type":"shell","environment":{"type":"local"}},` +
	`{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"linux"},` +
	`{"type":"tool_search","execution":"client","description":"Find tools","parameters":{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},"required":["query"]}},` +
	`{"type":"namespace","name":"mcp__github","description":"GitHub","tools":[{"type":"function","name":"` + planLongName + `","parameters":{"type":"object","properties":{"body":{"type":"string"}}}}]},` +
	`{"type":"function","name":"exec_command","parameters":{}}`

// planBuiltinRequest declares the built-in apply_patch, planCustomRequest
// Codex's custom apply_patch. One request cannot declare both: they would
// share the upstream name apply_patch, and the plan answers 400.
const (
	planBuiltinRequest = `{"model":"gpt-5.5","stream":true,"tools":[{"type":"apply_patch"},` + planTools + `],"tool_choice":"auto"}`
	planCustomRequest  = `{"model":"gpt-5.5","stream":true,"tools":[{"type":"custom","name":"apply_patch","description":"Edit files.","format":{"type":"grammar","syntax":"lark","definition":"start: x"}},` + planTools + `],"tool_choice":"auto"}`
)

// upFC is an upstream function_call item.
func upFC(id, callID, name, args string) string {
	return `{"id":` + transformtest.JSONString(id) + `,"type":"function_call","status":"completed","arguments":` + transformtest.JSONString(args) + `,"call_id":` + transformtest.JSONString(callID) + `,"name":` + transformtest.JSONString(name) + `}`
}

// planExchange runs the request phase of rules for request, with the
// decisions kept.
func planExchange(t testing.TB, rules, request string) *transforms.Exchange {
	t.Helper()
	c := transformtest.Chain(t, rules)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(request))
	x.Explain = true
	if _, err := x.RewriteRequest([]byte(request)); err != nil {
		t.Fatal(err)
	}
	return x
}

func evTypes(evs []responses.ResponseStreamEventUnion) string {
	ts := make([]string, len(evs))
	for i, e := range evs {
		ts[i] = e.Type
	}
	return strings.Join(ts, ",")
}

// doneItems returns the items of a stream's output_item.done events.
func doneItems(evs []responses.ResponseStreamEventUnion) []responses.ResponseOutputItemUnion {
	var items []responses.ResponseOutputItemUnion
	for _, e := range evs {
		if e.Type == "response.output_item.done" {
			items = append(items, e.AsResponseOutputItemDone().Item)
		}
	}
	return items
}

func decided(x *transforms.Exchange, tool, action string) bool {
	for _, d := range x.Decisions() {
		if d.Tool == tool && d.Action == action {
			return true
		}
	}
	return false
}

// --- JSON -------------------------------------------------------------------

func TestToolsPlanResponseRestoresEveryItemType(t *testing.T) {
	x := planExchange(t, planRules, planBuiltinRequest)
	unknown := upFC("fc_u", "call_u", "not_declared", `{"a":1}`)
	native := upFC("fc_n", "call_n", "exec_command", `{"cmd":"ls"}`)
	body := `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-5.5","output":[` +
		`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Working.","annotations":[]}]},` +
		upFC("fc_ls", "call_ls", "local_shell", `{"command":["ls","-la"],"env":{"A":"1","N":2,"B":null,"O":{"x":"y"}},"timeout_ms":5000,"user":"dev","working_directory":"/repo"}`) + `,` +
		upFC("fc_cmd", "call_cmd", "local_shell", `{"cmd":["git","status"]}`) + `,` +
		upFC("fc_sh", "call_sh", "shell", `{"commands":["go test ./...","go vet ./..."],"timeout_ms":60000}`) + `,` +
		upFC("fc_sh2", "call_sh2", "shell", `{"commands":["ls"],"timeout_ms":1000,"max_output_length":4096}`) + `,` +
		upFC("fc_ap1", "call_ap1", "apply_patch", `{"operation":{"type":"create_file","path":"a.txt","diff":"+hello\n"}}`) + `,` +
		upFC("fc_ap2", "call_ap2", "apply_patch", `{"operation":{"type":"update_file","path":"b.go","diff":"@@\n-old\n+new\n"}}`) + `,` +
		upFC("fc_ap3", "call_ap3", "apply_patch", `{"operation":{"type":"delete_file","path":"old.txt"}}`) + `,` +
		upFC("fc_cu", "call_cu", "computer", `{"action":{"type":"click","x":10,"y":20,"button":"left"}}`) + `,` +
		upFC("fc_ts", "call_ts", "tool_search", `{"query":"github issues","limit":3}`) + `,` +
		upFC("fc_ns", "call_ns", planLongUp, `{"body":"LGTM"}`) + `,` +
		native + `,` + unknown +
		`],"usage":{"input_tokens":10,"output_tokens":20,"total_tokens":30}}`
	out, err := x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-5.5","output":[`+
		`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Working.","annotations":[]}]},`+
		`{"type":"local_shell_call","id":"fc_ls","call_id":"call_ls","status":"completed","action":{"type":"exec","command":["ls","-la"],"env":{"A":"1"},"timeout_ms":5000,"user":"dev","working_directory":"/repo"}},`+
		`{"type":"local_shell_call","id":"fc_cmd","call_id":"call_cmd","status":"completed","action":{"type":"exec","command":["git","status"],"env":{}}},`+
		`{"type":"shell_call","id":"fc_sh","call_id":"call_sh","status":"completed","action":{"commands":["go test ./...","go vet ./..."],"timeout_ms":60000,"max_output_length":null},"environment":{"type":"local"}},`+
		`{"type":"shell_call","id":"fc_sh2","call_id":"call_sh2","status":"completed","action":{"commands":["ls"],"timeout_ms":1000,"max_output_length":4096},"environment":{"type":"local"}},`+
		`{"type":"apply_patch_call","id":"fc_ap1","call_id":"call_ap1","status":"completed","operation":{"type":"create_file","path":"a.txt","diff":"+hello\n"}},`+
		`{"type":"apply_patch_call","id":"fc_ap2","call_id":"call_ap2","status":"completed","operation":{"type":"update_file","path":"b.go","diff":"@@\n-old\n+new\n"}},`+
		`{"type":"apply_patch_call","id":"fc_ap3","call_id":"call_ap3","status":"completed","operation":{"type":"delete_file","path":"old.txt"}},`+
		`{"type":"computer_call","id":"fc_cu","call_id":"call_cu","status":"completed","action":{"type":"click","x":10,"y":20,"button":"left"},"pending_safety_checks":[]},`+
		`{"type":"tool_search_call","id":"fc_ts","call_id":"call_ts","status":"completed","execution":"client","arguments":{"query":"github issues","limit":3}},`+
		`{"id":"fc_ns","type":"function_call","status":"completed","arguments":"{\"body\":\"LGTM\"}","call_id":"call_ns","name":"`+planLongName+`","namespace":"mcp__github"},`+
		native+`,`+unknown+
		`],"usage":{"input_tokens":10,"output_tokens":20,"total_tokens":30}}`)
	// Calls that are not the plan's keep their bytes.
	for _, s := range []string{native, unknown} {
		if !strings.Contains(string(out), s) {
			t.Fatalf("untouched call changed: %s\n%s", s, out)
		}
	}
	// The request converted six definitions: five built-ins, and the
	// namespace flattened as one.
	if c := x.Counts(); c.Restored != 10 || c.Converted != 6 {
		t.Fatalf("restored = %d, converted = %d, want 10 and 6", c.Restored, c.Converted)
	}

	// What the official SDK reads.
	r := transformtest.SDKResponse(t, out)
	o := r.Output
	if len(o) != 13 {
		t.Fatalf("%d output items", len(o))
	}
	ls := o[1].AsLocalShellCall()
	if o[1].Type != "local_shell_call" || ls.ID != "fc_ls" || ls.CallID != "call_ls" || ls.Status != "completed" ||
		strings.Join(ls.Action.Command, " ") != "ls -la" || len(ls.Action.Env) != 1 || ls.Action.Env["A"] != "1" ||
		ls.Action.TimeoutMs != 5000 || ls.Action.User != "dev" || ls.Action.WorkingDirectory != "/repo" || string(ls.Action.Type) != "exec" {
		t.Fatalf("local_shell_call: %+v", ls)
	}
	if c := o[2].AsLocalShellCall(); strings.Join(c.Action.Command, " ") != "git status" || !c.Action.JSON.Env.Valid() || len(c.Action.Env) != 0 {
		t.Fatalf("local_shell_call from cmd: %+v", c.Action)
	}
	sh := o[3].AsShellCall()
	if o[3].Type != "shell_call" || sh.CallID != "call_sh" || sh.Status != "completed" || len(sh.Action.Commands) != 2 ||
		sh.Action.Commands[1] != "go vet ./..." || sh.Action.TimeoutMs != 60000 || sh.Action.JSON.MaxOutputLength.Valid() || sh.Environment.Type != "local" {
		t.Fatalf("shell_call: %+v", sh)
	}
	if sh2 := o[4].AsShellCall(); sh2.Action.MaxOutputLength != 4096 || sh2.Action.TimeoutMs != 1000 {
		t.Fatalf("shell_call limits: %+v", sh2.Action)
	}
	for i, want := range []struct{ typ, path, diff string }{
		{"create_file", "a.txt", "+hello\n"}, {"update_file", "b.go", "@@\n-old\n+new\n"}, {"delete_file", "old.txt", ""},
	} {
		ap := o[5+i].AsApplyPatchCall()
		if o[5+i].Type != "apply_patch_call" || ap.Operation.Type != want.typ || ap.Operation.Path != want.path || ap.Operation.Diff != want.diff || ap.CallID == "" || ap.Status != "completed" {
			t.Fatalf("apply_patch_call %d: %+v", i, ap)
		}
	}
	if del := o[7].AsApplyPatchCall().Operation.AsDeleteFile(); del.Path != "old.txt" {
		t.Fatalf("delete_file: %+v", del)
	}
	cu := o[8].AsComputerCall()
	if o[8].Type != "computer_call" || cu.CallID != "call_cu" || cu.Action.Type != "click" || cu.Action.X != 10 || cu.Action.Y != 20 ||
		cu.Action.Button != "left" || !cu.JSON.PendingSafetyChecks.Valid() || len(cu.PendingSafetyChecks) != 0 {
		t.Fatalf("computer_call: %+v", cu)
	}
	ts := o[9].AsToolSearchCall()
	args, _ := ts.Arguments.(map[string]any)
	if o[9].Type != "tool_search_call" || ts.Execution != "client" || ts.CallID != "call_ts" || args["query"] != "github issues" || args["limit"] != float64(3) {
		t.Fatalf("tool_search_call: %+v", ts)
	}
	fc := o[10].AsFunctionCall()
	if o[10].Type != "function_call" || fc.Name != planLongName || fc.Namespace != "mcp__github" || fc.Arguments != `{"body":"LGTM"}` || fc.CallID != "call_ns" {
		t.Fatalf("namespaced function_call: %+v", fc)
	}
	if u := o[12].AsFunctionCall(); u.Name != "not_declared" || u.Namespace != "" {
		t.Fatalf("unknown call: %+v", u)
	}
}

// planFallbacks are arguments that do not fit the degraded tool's item:
// each call comes back as a function_call under the client's name, with the
// arguments as they came.
var planFallbacks = []struct{ name, tool, args string }{
	{"not JSON", "local_shell", `bun test`},
	{"local_shell without a command array", "local_shell", `{"command":"ls -la"}`},
	{"local_shell with an empty command", "local_shell", `{"command":[]}`},
	{"local_shell with a non-string argv", "local_shell", `{"cmd":["ls",1]}`},
	{"shell without commands", "shell", `{"command":["ls"]}`},
	{"shell not JSON", "shell", `go test ./...`},
	{"apply_patch with a bad operation", "apply_patch", `{"operation":{"type":"rename_file","path":"a","diff":"x"}}`},
	{"apply_patch without a path", "apply_patch", `{"operation":{"type":"delete_file"}}`},
	{"apply_patch create without a diff", "apply_patch", `{"operation":{"type":"create_file","path":"a.txt"}}`},
	{"apply_patch with a string operation", "apply_patch", `{"operation":"*** Begin Patch"}`},
	{"computer without an action type", "computer", `{"action":{"x":1}}`},
	{"tool_search with an array", "tool_search", `["github"]`},
	{"truncated JSON", "tool_search", `{"query":"gith`},
}

func TestToolsPlanResponseFallsBackToFunctionCall(t *testing.T) {
	for _, tc := range planFallbacks {
		t.Run(tc.name, func(t *testing.T) {
			x := planExchange(t, planRules, planBuiltinRequest)
			body := `{"id":"r","output":[` + upFC("fc_1", "call_1", tc.tool, tc.args) + `]}`
			out, err := x.RewriteResponse([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			transformtest.JSONEqual(t, out, `{"id":"r","output":[`+upFC("fc_1", "call_1", tc.tool, tc.args)+`]}`)
			fc := transformtest.SDKResponse(t, out).Output[0].AsFunctionCall()
			if fc.Type != "function_call" || fc.Name != tc.tool || fc.Arguments != tc.args || fc.CallID != "call_1" {
				t.Fatalf("fallback: %+v", fc)
			}
			if !decided(x, tc.tool, "restore_as_function") {
				t.Fatalf("no restore_as_function decision for %s: %+v", tc.tool, x.Decisions())
			}
		})
	}
}

// Optional fields of the wrong type are left out rather than passed on in a
// shape the SDK cannot read.
func TestToolsPlanResponseOptionalFieldsKeepTheirTypes(t *testing.T) {
	x := planExchange(t, planRules, planBuiltinRequest)
	body := `{"output":[` +
		upFC("fc_1", "c1", "local_shell", `{"command":["make"],"env":"A=1","timeout_ms":"5s","user":7,"working_directory":null}`) + `,` +
		upFC("fc_2", "c2", "shell", `{"commands":["make"],"timeout_ms":"5s","max_output_length":-1}`) + `,` +
		upFC("fc_3", "c3", "local_shell", `{"command":"bad","cmd":["echo","alias"]}`) +
		`]}`
	out, err := x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"output":[`+
		`{"type":"local_shell_call","id":"fc_1","call_id":"c1","status":"completed","action":{"type":"exec","command":["make"],"env":{}}},`+
		`{"type":"shell_call","id":"fc_2","call_id":"c2","status":"completed","action":{"commands":["make"],"timeout_ms":null,"max_output_length":null},"environment":{"type":"local"}},`+
		`{"type":"local_shell_call","id":"fc_3","call_id":"c3","status":"completed","action":{"type":"exec","command":["echo","alias"],"env":{}}}`+
		`]}`)
	transformtest.SDKResponse(t, out)
}

// Codex's custom apply_patch goes through the plan's own custom conversion:
// its call comes back as a custom_tool_call with the patch normalised,
// beside the plan's other restored calls.
func TestToolsPlanResponseCustomApplyPatch(t *testing.T) {
	x := planExchange(t, planRules, planCustomRequest)
	body := `{"id":"r","output":[` +
		upFC("fc_p", "call_p", "apply_patch", `{"input":"*** Begin Patch ***\n*** Add File: x.txt\nhello\n*** End Patch ***"}`) + `,` +
		upFC("fc_ls", "call_ls", "local_shell", `{"cmd":["pwd"]}`) + `,` +
		upFC("fc_ns", "call_ns", planLongUp, `{}`) +
		`]}`
	out, err := x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	const patch = "*** Begin Patch\n*** Add File: x.txt\n+hello\n*** End Patch\n"
	transformtest.JSONEqual(t, out, `{"id":"r","output":[`+
		`{"id":"fc_p","type":"custom_tool_call","status":"completed","input":`+transformtest.JSONString(patch)+`,"call_id":"call_p","name":"apply_patch"},`+
		`{"type":"local_shell_call","id":"fc_ls","call_id":"call_ls","status":"completed","action":{"type":"exec","command":["pwd"],"env":{}}},`+
		`{"id":"fc_ns","type":"function_call","status":"completed","arguments":"{}","call_id":"call_ns","name":"`+planLongName+`","namespace":"mcp__github"}`+
		`]}`)
	o := transformtest.SDKResponse(t, out).Output
	if c := o[0].AsCustomToolCall(); o[0].Type != "custom_tool_call" || c.Name != "apply_patch" || c.Input != patch || c.CallID != "call_p" {
		t.Fatalf("custom_tool_call: %+v", c)
	}
	if x.Counts().Restored != 3 {
		t.Fatalf("restored = %d, want 3", x.Counts().Restored)
	}
}

// --- streams ----------------------------------------------------------------

// A built-in call's events are held until its arguments are complete, then
// its added and done events go out together; text around it flows in
// order; the namespaced function streams live under its own name.
func TestToolsPlanStreamGolden(t *testing.T) {
	lsItem := func(status, args string) string {
		return `{"id":"fc_ls","type":"function_call","status":"` + status + `","arguments":` + transformtest.JSONString(args) + `,"call_id":"call_ls","name":"local_shell"}`
	}
	nsItem := func(status, args string) string {
		return `{"id":"fc_ns","type":"function_call","status":"` + status + `","arguments":` + transformtest.JSONString(args) + `,"call_id":"call_ns","name":"` + planLongUp + `"}`
	}
	const lsArgs, nsArgs = `{"cmd":["ls","-la"],"env":{"TERM":"xterm","N":1}}`, `{"body":"LGTM"}`
	upstream := transformtest.SSE(
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`,
		`{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Let me ","logprobs":[],"obfuscation":"ab"}`,
		`{"type":"response.output_item.added","sequence_number":3,"output_index":1,"item":`+lsItem("in_progress", "")+`}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_ls","output_index":1,"delta":"{\"cmd\":[\"ls\",","obfuscation":"x"}`,
		`{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"look.","logprobs":[],"obfuscation":"cd"}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_ls","output_index":1,"delta":"\"-la\"],\"env\":{\"TERM\":\"xterm\",\"N\":1}}","obfuscation":"y"}`,
		`{"type":"response.function_call_arguments.done","sequence_number":7,"item_id":"fc_ls","output_index":1,"name":"local_shell","arguments":`+transformtest.JSONString(lsArgs)+`}`,
		`{"type":"response.output_item.done","sequence_number":8,"output_index":1,"item":`+lsItem("completed", lsArgs)+`}`,
		`{"type":"response.output_text.done","sequence_number":9,"item_id":"msg_1","output_index":0,"content_index":0,"text":"Let me look.","logprobs":[]}`,
		`{"type":"response.output_item.done","sequence_number":10,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Let me look.","annotations":[]}]}}`,
		`{"type":"response.output_item.added","sequence_number":11,"output_index":2,"item":`+nsItem("in_progress", "")+`}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":12,"item_id":"fc_ns","output_index":2,"delta":"{\"body\":","obfuscation":"z"}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":13,"item_id":"fc_ns","output_index":2,"delta":"\"LGTM\"}","obfuscation":"w"}`,
		`{"type":"response.function_call_arguments.done","sequence_number":14,"item_id":"fc_ns","output_index":2,"name":"`+planLongUp+`","arguments":`+transformtest.JSONString(nsArgs)+`}`,
		`{"type":"response.output_item.done","sequence_number":15,"output_index":2,"item":`+nsItem("completed", nsArgs)+`}`,
		`{"type":"response.completed","sequence_number":16,"response":{"id":"resp_1","status":"completed","output":[{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Let me look.","annotations":[]}]},`+lsItem("completed", lsArgs)+`,`+nsItem("completed", nsArgs)+`],"usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7}}}`,
	)
	const ls = `{"type":"local_shell_call","id":"fc_ls","call_id":"call_ls","status":"completed","action":{"type":"exec","command":["ls","-la"],"env":{"TERM":"xterm"}}}`
	const lsAdded = `{"type":"local_shell_call","id":"fc_ls","call_id":"call_ls","status":"in_progress","action":{"type":"exec","command":["ls","-la"],"env":{"TERM":"xterm"}}}`
	ns := `{"id":"fc_ns","type":"function_call","status":"completed","arguments":"{\"body\":\"LGTM\"}","call_id":"call_ns","name":"` + planLongName + `","namespace":"mcp__github"}`
	want := "" +
		"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"in_progress\",\"role\":\"assistant\",\"content\":[]}}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Let me \",\"logprobs\":[],\"obfuscation\":\"ab\"}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":3,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"look.\",\"logprobs\":[],\"obfuscation\":\"cd\"}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":4,\"output_index\":1,\"item\":" + lsAdded + "}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":5,\"output_index\":1,\"item\":" + ls + "}\n\n" +
		"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"sequence_number\":6,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"text\":\"Let me look.\",\"logprobs\":[]}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":7,\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Let me look.\",\"annotations\":[]}]}}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":8,\"output_index\":2,\"item\":{\"id\":\"fc_ns\",\"type\":\"function_call\",\"status\":\"in_progress\",\"arguments\":\"\",\"call_id\":\"call_ns\",\"name\":\"" + planLongName + "\",\"namespace\":\"mcp__github\"}}\n\n" +
		"event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":9,\"item_id\":\"fc_ns\",\"output_index\":2,\"delta\":\"{\\\"body\\\":\"}\n\n" +
		"event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":10,\"item_id\":\"fc_ns\",\"output_index\":2,\"delta\":\"\\\"LGTM\\\"}\"}\n\n" +
		"event: response.function_call_arguments.done\ndata: {\"type\":\"response.function_call_arguments.done\",\"sequence_number\":11,\"item_id\":\"fc_ns\",\"output_index\":2,\"arguments\":\"{\\\"body\\\":\\\"LGTM\\\"}\"}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":12,\"output_index\":2,\"item\":" + ns + "}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":13,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Let me look.\",\"annotations\":[]}]}," + ls + "," + ns + "],\"usage\":{\"input_tokens\":3,\"output_tokens\":4,\"total_tokens\":7}}}\n\n"
	got := transformtest.StreamCase(t, planRules, planBuiltinRequest, upstream)
	if got != want {
		t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, want)
	}

	evs := transformtest.SDKEvents(t, got)
	added := evs[4].AsResponseOutputItemAdded()
	if c := added.Item.AsLocalShellCall(); added.Item.Type != "local_shell_call" || added.OutputIndex != 1 || strings.Join(c.Action.Command, " ") != "ls -la" {
		t.Fatalf("held call added: %+v", added)
	}
	if c := evs[5].AsResponseOutputItemDone().Item.AsLocalShellCall(); c.CallID != "call_ls" || c.ID != "fc_ls" || c.Action.Env["TERM"] != "xterm" || len(c.Action.Env) != 1 {
		t.Fatalf("held call done: %+v", c)
	}
	if f := evs[8].AsResponseOutputItemAdded().Item.AsFunctionCall(); f.Name != planLongName || f.Namespace != "mcp__github" {
		t.Fatalf("namespaced added: %+v", f)
	}
	if d := evs[9].AsResponseFunctionCallArgumentsDelta(); d.ItemID != "fc_ns" || d.Delta != `{"body":` {
		t.Fatalf("live delta: %+v", d)
	}
	if d := evs[11].AsResponseFunctionCallArgumentsDone(); d.Arguments != nsArgs {
		t.Fatalf("args done: %+v", d)
	}
	out := evs[13].AsResponseCompleted().Response.Output
	if out[1].AsLocalShellCall().Action.Command[0] != "ls" || out[2].AsFunctionCall().Namespace != "mcp__github" || out[2].AsFunctionCall().Name != planLongName {
		t.Fatalf("completed output: %+v", out)
	}
}

// planBuiltinCalls are one call to each degraded built-in tool and the item
// the client must get for it.
var planBuiltinCalls = []struct{ tool, args, item string }{
	{"local_shell", `{"command":["bash","-lc","echo \"hi\" > a.txt"],"env":{"HOME":"/home/u","X":true},"timeout_ms":1500}`,
		`{"type":"local_shell_call","id":"fc_1","call_id":"call_1","status":"completed","action":{"type":"exec","command":["bash","-lc","echo \"hi\" > a.txt"],"env":{"HOME":"/home/u"},"timeout_ms":1500}}`},
	{"local_shell", `{"cmd":["rg","--files"]}`,
		`{"type":"local_shell_call","id":"fc_1","call_id":"call_1","status":"completed","action":{"type":"exec","command":["rg","--files"],"env":{}}}`},
	{"shell", `{"commands":["npm ci","npm test"],"max_output_length":2000}`,
		`{"type":"shell_call","id":"fc_1","call_id":"call_1","status":"completed","action":{"commands":["npm ci","npm test"],"timeout_ms":null,"max_output_length":2000},"environment":{"type":"local"}}`},
	{"apply_patch", `{"operation":{"type":"create_file","path":"docs/新.md","diff":"+# Title\n+中文 🦀\n"}}`,
		`{"type":"apply_patch_call","id":"fc_1","call_id":"call_1","status":"completed","operation":{"type":"create_file","path":"docs/新.md","diff":"+# Title\n+中文 🦀\n"}}`},
	{"apply_patch", `{"operation":{"type":"update_file","path":"main.go","diff":"@@ func main\n-\tprintln(1)\n+\tprintln(2)\n"}}`,
		`{"type":"apply_patch_call","id":"fc_1","call_id":"call_1","status":"completed","operation":{"type":"update_file","path":"main.go","diff":"@@ func main\n-\tprintln(1)\n+\tprintln(2)\n"}}`},
	{"apply_patch", `{"operation":{"type":"delete_file","path":"tmp.txt"}}`,
		`{"type":"apply_patch_call","id":"fc_1","call_id":"call_1","status":"completed","operation":{"type":"delete_file","path":"tmp.txt"}}`},
	{"computer", `{"action":{"type":"type","text":"hello \"world\""}}`,
		`{"type":"computer_call","id":"fc_1","call_id":"call_1","status":"completed","action":{"type":"type","text":"hello \"world\""},"pending_safety_checks":[]}`},
	{"tool_search", `{"query":"create a pull request"}`,
		`{"type":"tool_search_call","id":"fc_1","call_id":"call_1","status":"completed","execution":"client","arguments":{"query":"create a pull request"}}`},
}

// announced is a restored built-in item as its output_item.added event
// carries it: the same item, in progress.
func announced(t *testing.T, item string) string {
	t.Helper()
	const done, open = `"status":"completed"`, `"status":"in_progress"`
	if strings.Count(item, done) != 1 {
		t.Fatalf("item without one completed status: %s", item)
	}
	return strings.Replace(item, done, open, 1)
}

// checkSDKItem asserts what the SDK reads of a restored built-in item.
func checkSDKItem(t *testing.T, it responses.ResponseOutputItemUnion, want string) {
	t.Helper()
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if it.Type != w["type"] {
		t.Fatalf("item type %q, want %q", it.Type, w["type"])
	}
	switch it.Type {
	case "local_shell_call":
		c := it.AsLocalShellCall()
		if c.CallID != "call_1" || c.ID != "fc_1" || string(c.Action.Type) != "exec" || len(c.Action.Command) == 0 || !c.Action.JSON.Env.Valid() {
			t.Fatalf("local_shell_call: %+v", c)
		}
	case "shell_call":
		c := it.AsShellCall()
		if c.CallID != "call_1" || len(c.Action.Commands) == 0 || c.Environment.Type != "local" {
			t.Fatalf("shell_call: %+v", c)
		}
	case "apply_patch_call":
		c := it.AsApplyPatchCall()
		if c.CallID != "call_1" || c.Operation.Path == "" || (c.Operation.Type != "delete_file" && c.Operation.Diff == "") {
			t.Fatalf("apply_patch_call: %+v", c)
		}
	case "computer_call":
		c := it.AsComputerCall()
		if c.CallID != "call_1" || c.Action.Type != "type" || c.Action.Text != `hello "world"` || c.PendingSafetyChecks == nil {
			t.Fatalf("computer_call: %+v", c)
		}
	case "tool_search_call":
		c := it.AsToolSearchCall()
		if a, _ := c.Arguments.(map[string]any); c.CallID != "call_1" || c.Execution != "client" || a["query"] != "create a pull request" {
			t.Fatalf("tool_search_call: %+v", c)
		}
	default:
		t.Fatalf("unexpected item %s", it.RawJSON())
	}
}

// Each built-in call streamed in small pieces (escapes and multi-byte runes
// split), with and without its arguments done event, comes out as its added
// and done events only, each carrying the whole item, announced in
// progress and done with the upstream's status.
func TestToolsPlanStreamEachBuiltinItem(t *testing.T) {
	for _, tc := range planBuiltinCalls {
		for _, withDone := range []bool{true, false} {
			t.Run(tc.tool+"/"+tc.args, func(t *testing.T) {
				up := []string{`{"type":"response.created","sequence_number":0,"response":{"id":"r","output":[]}}`}
				up = append(up, transformtest.FunctionCallStream(1, 0, "fc_1", "call_1", tc.tool, tc.args, 3, withDone)...)
				up = append(up, `{"type":"response.completed","sequence_number":`+transformtest.Itoa(len(up))+`,"response":{"id":"r","status":"completed","output":[`+upFC("fc_1", "call_1", tc.tool, tc.args)+`]}}`)
				got := transformtest.StreamCase(t, planRules, planBuiltinRequest, transformtest.SSE(up...))
				want := "" +
					"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"r\",\"output\":[]}}\n\n" +
					"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":" + announced(t, tc.item) + "}\n\n" +
					"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":2,\"output_index\":0,\"item\":" + tc.item + "}\n\n" +
					"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":3,\"response\":{\"id\":\"r\",\"status\":\"completed\",\"output\":[" + tc.item + "]}}\n\n"
				if got != want {
					t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, want)
				}
				evs := transformtest.SDKEvents(t, got)
				checkSDKItem(t, evs[1].AsResponseOutputItemAdded().Item, tc.item)
				checkSDKItem(t, evs[2].AsResponseOutputItemDone().Item, tc.item)
				checkSDKItem(t, evs[3].AsResponseCompleted().Response.Output[0], tc.item)
			})
		}
	}
}

// planStreamExchange replays upstream at every chunk size like streamCase
// and returns the output and the last exchange, whose decisions are kept.
func planStreamExchange(t *testing.T, request, upstream string) (string, *transforms.Exchange) {
	t.Helper()
	var x *transforms.Exchange
	got := transformtest.ReplayAll(t, func() *transforms.Exchange { x = planExchange(t, planRules, request); return x }, upstream)
	return got, x
}

// Arguments that do not fit the item go to the client as a function call
// under the client's name, with argument events carrying the raw text.
func TestToolsPlanStreamFallsBackToFunctionCall(t *testing.T) {
	for _, tc := range planFallbacks {
		t.Run(tc.name, func(t *testing.T) {
			up := append(transformtest.FunctionCallStream(0, 0, "fc_1", "call_1", tc.tool, tc.args, 4, true),
				`{"type":"response.completed","sequence_number":99,"response":{"id":"r","output":[`+upFC("fc_1", "call_1", tc.tool, tc.args)+`]}}`)
			got, x := planStreamExchange(t, planBuiltinRequest, transformtest.SSE(up...))
			fc := upFC("fc_1", "call_1", tc.tool, tc.args)
			want := "" +
				"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":0,\"output_index\":0,\"item\":" + upFC("fc_1", "call_1", tc.tool, "") + "}\n\n" +
				"event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":1,\"item_id\":\"fc_1\",\"output_index\":0,\"delta\":" + transformtest.JSONString(tc.args) + "}\n\n" +
				"event: response.function_call_arguments.done\ndata: {\"type\":\"response.function_call_arguments.done\",\"sequence_number\":2,\"item_id\":\"fc_1\",\"output_index\":0,\"arguments\":" + transformtest.JSONString(tc.args) + "}\n\n" +
				"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":3,\"output_index\":0,\"item\":" + fc + "}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":4,\"response\":{\"id\":\"r\",\"output\":[" + fc + "]}}\n\n"
			if got != want {
				t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, want)
			}
			evs := transformtest.SDKEvents(t, got)
			if f := evs[0].AsResponseOutputItemAdded().Item.AsFunctionCall(); f.Name != tc.tool || f.Arguments != "" {
				t.Fatalf("added: %+v", f)
			}
			if d := evs[1].AsResponseFunctionCallArgumentsDelta(); d.Delta != tc.args {
				t.Fatalf("delta: %+v", d)
			}
			for _, it := range []responses.ResponseOutputItemUnion{evs[3].AsResponseOutputItemDone().Item, evs[4].AsResponseCompleted().Response.Output[0]} {
				if f := it.AsFunctionCall(); it.Type != "function_call" || f.Name != tc.tool || f.Arguments != tc.args || f.CallID != "call_1" {
					t.Fatalf("item: %+v", f)
				}
			}
			if !decided(x, tc.tool, "restore_as_function") {
				t.Fatalf("no restore_as_function decision: %+v", x.Decisions())
			}
		})
	}
}

// A call whose stream ends, fails or errs before the call completes is
// never delivered: no item is made up from the arguments received, for a
// held built-in call or a live namespaced one.
func TestToolsPlanStreamCutCallsAreNeverDelivered(t *testing.T) {
	const created = `{"type":"response.created","sequence_number":0,"response":{"id":"r","output":[]}}`
	builtin := transformtest.FunctionCallStream(1, 0, "fc_1", "call_1", "local_shell", `{"command":["ls"]}`, 5, true)
	builtin = builtin[:len(builtin)-1] // arguments complete, the item never done
	partial := transformtest.FunctionCallStream(1, 0, "fc_1", "call_1", "apply_patch", `{"operation":{"type":"delete_file","path":"a"}}`, 9, false)
	partial = partial[:3] // added and two deltas
	live := transformtest.FunctionCallStream(1, 0, "fc_1", "call_1", planLongUp, `{"body":"x"}`, 4, false)
	live = live[:2] // added and one delta
	for _, tc := range []struct {
		name     string
		call     []string
		terminal string
		want     string // the client's event types
	}{
		{"built-in, arguments done, eof", builtin, ``, "response.created"},
		{"built-in, partial, eof", partial, ``, "response.created"},
		{"built-in, partial, error", partial, `{"type":"error","sequence_number":10,"code":"server_error","message":"boom","param":null}`, "response.created,error"},
		{"built-in, partial, failed", partial, `{"type":"response.failed","sequence_number":10,"response":{"id":"r","status":"failed","error":{"code":"server_error","message":"boom"},"output":[{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"{\"operation\":{\"type\":\"del","call_id":"call_1","name":"apply_patch"}]}}`, "response.created,response.failed"},
		{"built-in, arguments done, incomplete", builtin, `{"type":"response.incomplete","sequence_number":10,"response":{"id":"r","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[]}}`, "response.created,response.incomplete"},
		{"namespaced, partial, eof", live, ``, "response.created,response.output_item.added,response.function_call_arguments.delta"},
		{"namespaced, partial, failed", live, `{"type":"response.failed","sequence_number":10,"response":{"id":"r","status":"failed","output":[{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"{\"bo","call_id":"call_1","name":"` + planLongUp + `"}]}}`, "response.created,response.output_item.added,response.function_call_arguments.delta,response.failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := append([]string{created}, tc.call...)
			if tc.terminal != "" {
				up = append(up, tc.terminal)
				// Whatever the upstream sends after the end is not the
				// call's completion either.
				up = append(up, `{"type":"response.output_item.done","sequence_number":11,"output_index":0,"item":`+upFC("fc_1", "call_1", "local_shell", `{"command":["ls"]}`)+`}`)
			}
			got, x := planStreamExchange(t, planBuiltinRequest, transformtest.SSE(up...))
			evs := transformtest.SDKEvents(t, got)
			if evTypes(evs) != tc.want {
				t.Fatalf("types = %s, want %s\n%s", evTypes(evs), tc.want, got)
			}
			for _, bad := range []string{"local_shell_call", "apply_patch_call", "response.output_item.done", "function_call_arguments.done"} {
				if strings.Contains(got, bad) {
					t.Fatalf("the cut call was delivered (%s):\n%s", bad, got)
				}
			}
			if strings.HasPrefix(tc.name, "namespaced") {
				if f := evs[1].AsResponseOutputItemAdded().Item.AsFunctionCall(); f.Name != planLongName || f.Namespace != "mcp__github" {
					t.Fatalf("live header: %+v", f)
				}
			}
			if tc.name == "built-in, partial, failed" {
				// The upstream's own partial item is reported as it was.
				if o := evs[1].AsResponseFailed().Response.Output; len(o) != 1 || o[0].Type != "function_call" {
					t.Fatalf("failed output: %+v", o)
				}
			}
			if !decided(x, x.Decisions()[len(x.Decisions())-1].Tool, "drop_partial_call") {
				t.Fatalf("no drop_partial_call decision: %+v", x.Decisions())
			}
		})
	}
}

// Calls the stream never finished, or never showed, are delivered from
// response.completed before it, and restored in its output.
func TestToolsPlanStreamCompletedDeliversCalls(t *testing.T) {
	const tsArgs = `{"query":"issues"}`
	open := transformtest.FunctionCallStream(1, 0, "fc_ts", "call_ts", "tool_search", tsArgs, 6, false)
	open = open[:len(open)-1] // no output_item.done
	up := []string{`{"type":"response.created","sequence_number":0,"response":{"id":"r","output":[]}}`}
	up = append(up, open...)
	up = append(up, `{"type":"response.completed","sequence_number":`+transformtest.Itoa(len(up))+`,"response":{"id":"r","status":"completed","output":[`+
		upFC("fc_ts", "call_ts", "tool_search", tsArgs)+`,`+
		upFC("fc_ap", "call_ap", "apply_patch", `{"operation":{"type":"update_file","path":"x","diff":"@@\n-a\n+b\n"}}`)+`,`+
		upFC("fc_ns", "call_ns", planLongUp, `{"body":"hi"}`)+`,`+
		upFC("fc_bad", "call_bad", "shell", `bun test`)+`]}}`)
	got := transformtest.StreamCase(t, planRules, planBuiltinRequest, transformtest.SSE(up...))
	ts := `{"type":"tool_search_call","id":"fc_ts","call_id":"call_ts","status":"completed","execution":"client","arguments":{"query":"issues"}}`
	ap := `{"type":"apply_patch_call","id":"fc_ap","call_id":"call_ap","status":"completed","operation":{"type":"update_file","path":"x","diff":"@@\n-a\n+b\n"}}`
	tsAdded := `{"type":"tool_search_call","id":"fc_ts","call_id":"call_ts","status":"in_progress","execution":"client","arguments":{"query":"issues"}}`
	apAdded := `{"type":"apply_patch_call","id":"fc_ap","call_id":"call_ap","status":"in_progress","operation":{"type":"update_file","path":"x","diff":"@@\n-a\n+b\n"}}`
	ns := `{"id":"fc_ns","type":"function_call","status":"completed","arguments":"{\"body\":\"hi\"}","call_id":"call_ns","name":"` + planLongName + `","namespace":"mcp__github"}`
	bad := upFC("fc_bad", "call_bad", "shell", `bun test`)
	ev := func(seq int, typ, rest string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\",\"sequence_number\":" + transformtest.Itoa(seq) + rest + "}\n\n"
	}
	want := ev(0, "response.created", `,"response":{"id":"r","output":[]}`) +
		ev(1, "response.output_item.added", `,"output_index":0,"item":`+tsAdded) +
		ev(2, "response.output_item.done", `,"output_index":0,"item":`+ts) +
		ev(3, "response.output_item.added", `,"output_index":1,"item":`+apAdded) +
		ev(4, "response.output_item.done", `,"output_index":1,"item":`+ap) +
		ev(5, "response.output_item.added", `,"output_index":2,"item":{"id":"fc_ns","type":"function_call","status":"completed","arguments":"","call_id":"call_ns","name":"`+planLongName+`","namespace":"mcp__github"}`) +
		ev(6, "response.function_call_arguments.delta", `,"item_id":"fc_ns","output_index":2,"delta":"{\"body\":\"hi\"}"`) +
		ev(7, "response.function_call_arguments.done", `,"item_id":"fc_ns","output_index":2,"arguments":"{\"body\":\"hi\"}"`) +
		ev(8, "response.output_item.done", `,"output_index":2,"item":`+ns) +
		ev(9, "response.output_item.added", `,"output_index":3,"item":`+upFC("fc_bad", "call_bad", "shell", "")) +
		ev(10, "response.function_call_arguments.delta", `,"item_id":"fc_bad","output_index":3,"delta":"bun test"`) +
		ev(11, "response.function_call_arguments.done", `,"item_id":"fc_bad","output_index":3,"arguments":"bun test"`) +
		ev(12, "response.output_item.done", `,"output_index":3,"item":`+bad) +
		ev(13, "response.completed", `,"response":{"id":"r","status":"completed","output":[`+ts+`,`+ap+`,`+ns+`,`+bad+`]}`)
	if got != want {
		t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, want)
	}
	evs := transformtest.SDKEvents(t, got)
	items := doneItems(evs)
	if len(items) != 4 || items[0].Type != "tool_search_call" || items[1].AsApplyPatchCall().Operation.Type != "update_file" ||
		items[2].AsFunctionCall().Namespace != "mcp__github" || items[3].AsFunctionCall().Name != "shell" {
		t.Fatalf("items: %+v", items)
	}
	out := evs[13].AsResponseCompleted().Response.Output
	if out[0].AsToolSearchCall().Execution != "client" || out[1].AsApplyPatchCall().Operation.Diff != "@@\n-a\n+b\n" || out[3].AsFunctionCall().Arguments != "bun test" {
		t.Fatalf("completed output: %+v", out)
	}
}

// A call to a name the plan never gave passes untouched, JSON and stream.
func TestToolsPlanUnknownCallsPassUntouched(t *testing.T) {
	x := planExchange(t, planRules, planBuiltinRequest)
	body := `{"id":"r","output":[` + upFC("fc_1", "c1", "local_shell_v2", `{"command":["ls"]}`) + `,` +
		`{"id":"fc_2","type":"function_call","call_id":"c2","name":"` + planLongName + `","namespace":"mcp__github","arguments":"{}"}]}`
	out, err := x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != body || x.Counts().Restored != 0 {
		t.Fatalf("changed (%d restored):\n%s", x.Counts().Restored, out)
	}
	calls := transformtest.FunctionCallStream(0, 0, "fc_1", "c1", "computer_use_preview", `{"action":{"type":"screenshot"}}`, 5, true)
	up := transformtest.SSE(append(calls, `{"type":"response.completed","sequence_number":`+transformtest.Itoa(len(calls))+`,"response":{"id":"r","output":[`+upFC("fc_1", "c1", "computer_use_preview", `{"action":{"type":"screenshot"}}`)+`]}}`)...)
	if got := transformtest.StreamCase(t, planRules, planBuiltinRequest, up); got != up {
		t.Fatalf("stream changed:\n%s\n--- want\n%s", got, up)
	}
}

// --- custom tools through the plan ------------------------------------------------

// field_custom_tools_to_function and tools_plan in one chain, either order:
// the custom apply_patch is converted once and its call restored once.
func TestToolsPlanChainedWithFieldCustomRestoresOnce(t *testing.T) {
	const patch = "*** Begin Patch\n*** Update File: a.go\n@@\n-x\n+y\n*** End Patch\n"
	args := `{"input":` + transformtest.JSONString(strings.TrimSuffix(patch, "\n")) + `}`
	custom := `{"id":"fc_p","type":"custom_tool_call","status":"completed","input":` + transformtest.JSONString(patch) + `,"call_id":"call_p","name":"apply_patch"}`
	ls := `{"type":"local_shell_call","id":"fc_ls","call_id":"call_ls","status":"completed","action":{"type":"exec","command":["make"],"env":{}}}`
	for _, rules := range []string{
		`[{"transform":"field_custom_tools_to_function"},{"transform":"tools_plan","config":{"profile":"function_only"}}]`,
		`[{"transform":"tools_plan","config":{"profile":"function_only"}},{"transform":"field_custom_tools_to_function"}]`,
		`[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}},{"transform":"tools_plan","config":{"profile":"function_only"}}]`,
	} {
		t.Run(rules, func(t *testing.T) {
			c := transformtest.Chain(t, rules)
			x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(planCustomRequest))
			up, err := x.RewriteRequest([]byte(planCustomRequest))
			if err != nil {
				t.Fatal(err)
			}
			var req struct {
				Tools []struct {
					Type, Name string
					Parameters struct {
						Properties map[string]struct{ Type string }
					}
				}
			}
			if err := json.Unmarshal(up, &req); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, tl := range req.Tools {
				if tl.Name == "apply_patch" {
					n++
					if tl.Type != "function" || tl.Parameters.Properties["input"].Type != "string" || len(tl.Parameters.Properties) != 1 {
						t.Fatalf("apply_patch upstream: %+v\n%s", tl, up)
					}
				}
			}
			if n != 1 {
				t.Fatalf("%d apply_patch definitions upstream:\n%s", n, up)
			}

			body := `{"id":"r","output":[` + upFC("fc_p", "call_p", "apply_patch", args) + `,` + upFC("fc_ls", "call_ls", "local_shell", `{"command":["make"]}`) + `]}`
			out, err := x.RewriteResponse([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			transformtest.JSONEqual(t, out, `{"id":"r","output":[`+custom+`,`+ls+`]}`)
			if x.Counts().Restored != 2 {
				t.Fatalf("restored = %d, want 2", x.Counts().Restored)
			}
			if ct := transformtest.SDKResponse(t, out).Output[0].AsCustomToolCall(); ct.Input != patch {
				t.Fatalf("custom call: %+v", ct)
			}

			upstream := transformtest.SSE(append(transformtest.FunctionCallStream(0, 0, "fc_p", "call_p", "apply_patch", args, 5, true),
				`{"type":"response.completed","sequence_number":99,"response":{"id":"r","output":[`+upFC("fc_p", "call_p", "apply_patch", args)+`]}}`)...)
			got := transformtest.StreamCase(t, rules, planCustomRequest, upstream)
			evs := transformtest.SDKEvents(t, got)
			var deltas strings.Builder
			for _, e := range evs {
				if e.Type == "response.custom_tool_call_input.delta" {
					deltas.WriteString(e.AsResponseCustomToolCallInputDelta().Delta)
				}
			}
			if deltas.String() != patch {
				t.Fatalf("streamed input %q\n%s", deltas.String(), got)
			}
			items := doneItems(evs)
			if len(items) != 1 || items[0].Type != "custom_tool_call" || items[0].AsCustomToolCall().Input != patch {
				t.Fatalf("items: %+v\n%s", items, got)
			}
			if strings.Count(got, "response.output_item.added") != 2 || strings.Contains(got, "function_call") {
				t.Fatalf("call delivered twice or as a function:\n%s", got)
			}
			if o := evs[len(evs)-1].AsResponseCompleted().Response.Output[0].AsCustomToolCall(); o.Input != patch {
				t.Fatalf("completed: %+v", o)
			}
		})
	}
}

// A custom tool the plan also renames (a dotted name) or flattens (inside a
// namespace) comes back as a custom call under its own name and namespace:
// the plan's restoration, then its custom conversion's, JSON and stream.
func TestToolsPlanCustomToolRenamedAndFlattened(t *testing.T) {
	req := `{"model":"gpt-5.5","tools":[{"type":"custom","name":"files.write"},{"type":"namespace","name":"functions","tools":[{"type":"custom","name":"apply_patch"}]}]}`
	x := planExchange(t, planRules, req)
	body := `{"output":[` + upFC("fc_1", "c1", "files_write", `{"input":"hello\nworld"}`) + `,` +
		upFC("fc_2", "c2", "functions__apply_patch", `{"input":"*** Begin Patch\n*** Delete File: a\n*** End Patch"}`) + `]}`
	out, err := x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"output":[`+
		`{"id":"fc_1","type":"custom_tool_call","status":"completed","input":"hello\nworld","call_id":"c1","name":"files.write"},`+
		`{"id":"fc_2","type":"custom_tool_call","status":"completed","input":"*** Begin Patch\n*** Delete File: a\n*** End Patch\n","call_id":"c2","name":"apply_patch","namespace":"functions"}`+
		`]}`)
	o := transformtest.SDKResponse(t, out).Output
	if c := o[1].AsCustomToolCall(); c.Namespace != "functions" || c.Name != "apply_patch" {
		t.Fatalf("namespaced custom: %+v", c)
	}
	// Two upstream calls given back their client shape: two, however many
	// stages of the rule took part.
	if x.Counts().Restored != 2 {
		t.Errorf("JSON: restored = %d, want 2", x.Counts().Restored)
	}

	up := append(transformtest.FunctionCallStream(0, 0, "fc_1", "c1", "files_write", `{"input":"hello\nworld"}`, 4, true),
		transformtest.FunctionCallStream(10, 1, "fc_2", "c2", "functions__apply_patch", `{"input":"*** Begin Patch\n*** Delete File: a\n*** End Patch"}`, 7, true)...)
	up = append(up, `{"type":"response.completed","sequence_number":30,"response":{"output":[`+upFC("fc_1", "c1", "files_write", `{"input":"hello\nworld"}`)+`,`+
		upFC("fc_2", "c2", "functions__apply_patch", `{"input":"*** Begin Patch\n*** Delete File: a\n*** End Patch"}`)+`]}}`)
	got, sx := planStreamExchange(t, req, transformtest.SSE(up...))
	if sx.Counts().Restored != 2 {
		t.Errorf("stream: restored = %d, want 2", sx.Counts().Restored)
	}
	evs := transformtest.SDKEvents(t, got)
	if strings.Contains(got, "function_call") {
		t.Fatalf("a function event leaked:\n%s", got)
	}
	items := doneItems(evs)
	if len(items) != 2 {
		t.Fatalf("items: %+v", items)
	}
	if c := items[0].AsCustomToolCall(); c.Name != "files.write" || c.Input != "hello\nworld" || c.Namespace != "" {
		t.Fatalf("renamed custom: %+v", c)
	}
	if c := items[1].AsCustomToolCall(); c.Name != "apply_patch" || c.Namespace != "functions" || c.Input != "*** Begin Patch\n*** Delete File: a\n*** End Patch\n" {
		t.Fatalf("namespaced custom: %+v", c)
	}
	var added []string
	for _, e := range evs {
		if e.Type == "response.output_item.added" {
			c := e.AsResponseOutputItemAdded().Item.AsCustomToolCall()
			added = append(added, c.Namespace+"/"+c.Name)
		}
	}
	if strings.Join(added, ",") != "/files.write,functions/apply_patch" {
		t.Fatalf("added: %v", added)
	}
	out2 := evs[len(evs)-1].AsResponseCompleted().Response.Output
	if out2[0].AsCustomToolCall().Name != "files.write" || out2[1].AsCustomToolCall().Namespace != "functions" {
		t.Fatalf("completed: %+v", out2)
	}
}

// --- Chat Completions -------------------------------------------------------------

// planChatRequest declares Chat tools whose names the profile's rule does
// not take: they go upstream as github_search_issues, planChatLongUp and
// (a custom tool, converted) apply_patch.
const (
	planChatRequest = `{"model":"gpt-5.5","stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[` +
		`{"type":"function","function":{"name":"github.search_issues","parameters":{}}},` +
		`{"type":"function","function":{"name":"` + planLongName + `","parameters":{}}},` +
		`{"type":"function","function":{"name":"exec_command","parameters":{}}},` +
		`{"type":"custom","custom":{"name":"apply.patch"}}]}`
	planChatLongUp = "repos_issues_comments_create_for_pull_request_with_review_jibr33"
)

func TestToolsPlanChatRestoresOriginalNames(t *testing.T) {
	x := transformtest.ChatExchange(t, planRules, planChatRequest)
	native := `{"id":"call_4","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\":\"ls\"}"}}`
	body := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-5.5","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"github_search_issues","arguments":"{\"q\":\"bug\"}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"` + planChatLongUp + `","arguments":"{}"}},` +
		`{"id":"call_3","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"raw text\"}"}},` +
		native + `,` +
		`{"id":"call_5","type":"function","function":{"name":"unknown_tool","arguments":"{}"}}` +
		`]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`
	out, err := x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-5.5","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[`+
		`{"id":"call_1","type":"function","function":{"name":"github.search_issues","arguments":"{\"q\":\"bug\"}"}},`+
		`{"id":"call_2","type":"function","function":{"name":"`+planLongName+`","arguments":"{}"}},`+
		`{"id":"call_3","type":"custom","custom":{"name":"apply.patch","input":"raw text"}},`+
		native+`,`+
		`{"id":"call_5","type":"function","function":{"name":"unknown_tool","arguments":"{}"}}`+
		`]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	if !strings.Contains(string(out), native) {
		t.Fatalf("native call changed: %s", out)
	}
	var cc openai.ChatCompletion
	if err := json.Unmarshal(out, &cc); err != nil {
		t.Fatal(err)
	}
	tc := cc.Choices[0].Message.ToolCalls
	if tc[0].Function.Name != "github.search_issues" || tc[1].Function.Name != planLongName || tc[2].Type != "custom" ||
		tc[2].Custom.Name != "apply.patch" || tc[2].Custom.Input != "raw text" || tc[4].Function.Name != "unknown_tool" {
		t.Fatalf("SDK tool calls: %+v", tc)
	}
	if x.Counts().Restored != 3 {
		t.Fatalf("restored = %d, want 3", x.Counts().Restored)
	}
}

func TestToolsPlanChatStreamGolden(t *testing.T) {
	const head = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5.5","choices":[`
	up := transformtest.ChatSSE(
		head+`{"index":0,"delta":{"role":"assistant","content":"Searching."},"finish_reason":null}]}`,
		head+`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"github_search_issues","arguments":""}}]},"finish_reason":null}]}`,
		head+`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":"}}]},"finish_reason":null}]}`,
		head+`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"bug\"}"}}]},"finish_reason":null}]}`,
		head+`{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"`+planChatLongUp+`","arguments":"{\"a\""}}]},"finish_reason":null}]}`,
		head+`{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":":1}"}},{"index":2,"id":"call_3","type":"function","function":{"name":"exec_command","arguments":"{}"}}]},"finish_reason":null}]}`,
		head+`{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5.5","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
	)
	want := "" +
		"data: " + head + `{"index":0,"delta":{"role":"assistant","content":"Searching."},"finish_reason":null}]}` + "\n\n" +
		"data: " + head + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"github.search_issues","arguments":""}}]},"finish_reason":null}]}` + "\n\n" +
		"data: " + head + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":"}}]},"finish_reason":null}]}` + "\n\n" +
		"data: " + head + `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"bug\"}"}}]},"finish_reason":null}]}` + "\n\n" +
		"data: " + head + `{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"` + planLongName + `","arguments":"{\"a\""}}]},"finish_reason":null}]}` + "\n\n" +
		"data: " + head + `{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":":1}"}},{"index":2,"id":"call_3","type":"function","function":{"name":"exec_command","arguments":"{}"}}]},"finish_reason":null}]}` + "\n\n" +
		"data: " + head + `{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\n" +
		`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5.5","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}` + "\n\n" +
		"data: [DONE]\n\n"
	got := transformtest.ChatCase(t, planRules, planChatRequest, up)
	if got != want {
		t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, want)
	}
	names := map[int64]string{}
	args := map[int64]string{}
	for _, block := range strings.Split(strings.TrimSuffix(got, "\n\n"), "\n\n") {
		d := strings.TrimPrefix(block, "data: ")
		if d == "[DONE]" {
			continue
		}
		var ch openai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatalf("SDK cannot parse %s: %v", d, err)
		}
		for _, c := range ch.Choices {
			for _, tc := range c.Delta.ToolCalls {
				if tc.Function.Name != "" {
					names[tc.Index] = tc.Function.Name
				}
				args[tc.Index] += tc.Function.Arguments
			}
		}
	}
	if names[0] != "github.search_issues" || args[0] != `{"q":"bug"}` || names[1] != planLongName || args[1] != `{"a":1}` || names[2] != "exec_command" {
		t.Fatalf("accumulated calls: %v %v", names, args)
	}
}

// A custom tool the plan renamed streams back as Chat's custom call.
func TestToolsPlanChatStreamRenamedCustom(t *testing.T) {
	const head = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-5.5","choices":[`
	up := transformtest.ChatSSE(
		head+`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_3","type":"function","function":{"name":"apply_patch","arguments":""}}]},"finish_reason":null}]}`,
		head+`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"input\":\"ab"}}]},"finish_reason":null}]}`,
		head+`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"c\"}"}}]},"finish_reason":null}]}`,
		head+`{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	)
	var x *transforms.Exchange
	got := transformtest.ReplayAll(t, func() *transforms.Exchange { x = transformtest.ChatExchange(t, planRules, planChatRequest); return x }, up)
	if x.Counts().Restored != 1 {
		t.Errorf("restored = %d, want 1", x.Counts().Restored)
	}
	cs, done := transformtest.ChatChunks(t, got)
	if !done {
		t.Fatal("no [DONE]")
	}
	calls := transformtest.CallText(cs)
	if calls["0/0/name"] != "custom:apply.patch" || calls["0/0"] != "abc" {
		t.Fatalf("calls: %v\n%s", calls, got)
	}
	if strings.Contains(got, `"function"`) {
		t.Fatalf("function fragment leaked:\n%s", got)
	}
}

// --- odd upstreams ---------------------------------------------------------------

// An item without an id or status still gives the SDK what it requires: the
// call id stands in for the id, and a finished call is completed.
func TestToolsPlanResponseItemWithoutIDOrStatus(t *testing.T) {
	x := planExchange(t, planRules, planBuiltinRequest)
	body := `{"output":[{"type":"function_call","call_id":"call_9","name":"computer","arguments":"{\"action\":{\"type\":\"screenshot\"}}"}]}`
	out, err := x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"output":[{"type":"computer_call","id":"call_9","call_id":"call_9","status":"completed","action":{"type":"screenshot"},"pending_safety_checks":[]}]}`)
	if c := transformtest.SDKResponse(t, out).Output[0].AsComputerCall(); c.ID != "call_9" || c.Action.Type != "screenshot" {
		t.Fatalf("computer_call: %+v", c)
	}
}

// Two built-in calls whose argument events interleave are each held and
// delivered whole, in the order they complete, with comments and a
// data-only framing left as they are.
func TestToolsPlanStreamInterleavedBuiltinCalls(t *testing.T) {
	data := func(s string) string { return "data: " + s + "\n\n" }
	up := data(`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"id":"fc_a","type":"function_call","status":"in_progress","arguments":"","call_id":"call_a","name":"shell"}}`) +
		data(`{"type":"response.output_item.added","sequence_number":1,"output_index":1,"item":{"id":"fc_b","type":"function_call","status":"in_progress","arguments":"","call_id":"call_b","name":"apply_patch"}}`) +
		data(`{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_b","output_index":1,"delta":"{\"operation\":{\"type\":\"delete_file\","}`) +
		data(`{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_a","output_index":0,"delta":"{\"commands\":[\"ls\"]"}`) +
		": keep-alive\n\n" +
		data(`{"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_b","output_index":1,"delta":"\"path\":\"x\"}}"}`) +
		data(`{"type":"response.output_item.done","sequence_number":5,"output_index":1,"item":{"id":"fc_b","type":"function_call","status":"completed","arguments":"{\"operation\":{\"type\":\"delete_file\",\"path\":\"x\"}}","call_id":"call_b","name":"apply_patch"}}`) +
		data(`{"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_a","output_index":0,"delta":"}"}`) +
		data(`{"type":"response.output_item.done","sequence_number":7,"output_index":0,"item":{"id":"fc_a","type":"function_call","status":"completed","arguments":"{\"commands\":[\"ls\"]}","call_id":"call_a","name":"shell"}}`)
	got := transformtest.StreamCase(t, planRules, planBuiltinRequest, up)
	ap := `{"type":"apply_patch_call","id":"fc_b","call_id":"call_b","status":"completed","operation":{"type":"delete_file","path":"x"}}`
	sh := `{"type":"shell_call","id":"fc_a","call_id":"call_a","status":"completed","action":{"commands":["ls"],"timeout_ms":null,"max_output_length":null},"environment":{"type":"local"}}`
	apAdded := `{"type":"apply_patch_call","id":"fc_b","call_id":"call_b","status":"in_progress","operation":{"type":"delete_file","path":"x"}}`
	shAdded := `{"type":"shell_call","id":"fc_a","call_id":"call_a","status":"in_progress","action":{"commands":["ls"],"timeout_ms":null,"max_output_length":null},"environment":{"type":"local"}}`
	want := ": keep-alive\n\n" +
		data(`{"type":"response.output_item.added","sequence_number":0,"output_index":1,"item":`+apAdded+`}`) +
		data(`{"type":"response.output_item.done","sequence_number":1,"output_index":1,"item":`+ap+`}`) +
		data(`{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":`+shAdded+`}`) +
		data(`{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":`+sh+`}`)
	if got != want {
		t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, want)
	}
	items := doneItems(transformtest.SDKEvents(t, strings.TrimPrefix(got, ": keep-alive\n\n")))
	if items[0].AsApplyPatchCall().Operation.Path != "x" || items[1].AsShellCall().Action.Commands[0] != "ls" {
		t.Fatalf("items: %+v", items)
	}
}

// tpEvent is one client-side SSE event as the tracker writes it.
func tpEvent(typ string, seq int, rest string) string {
	return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\",\"sequence_number\":" + transformtest.Itoa(seq) + rest + "}\n\n"
}

// tpValidEvents checks every data payload of a stream is valid JSON.
func tpValidEvents(t *testing.T, stream string) {
	t.Helper()
	for _, line := range strings.Split(stream, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && !json.Valid([]byte(d)) {
			t.Fatalf("event data is not valid JSON: %s", d)
		}
	}
}

// TestToolsPlanStreamHeldCallsSharingACallID: two held local_shell calls
// that the upstream gave one call_id, their events interleaved: each is
// delivered with its own command at its own output_index, whichever
// finishes first, and response.completed lists each as its own item.
func TestToolsPlanStreamHeldCallsSharingACallID(t *testing.T) {
	req := `{"model":"gpt-5.5","stream":true,"tools":[{"type":"local_shell"},{"type":"function","name":"exec_command","parameters":{}}]}`
	item := func(id, status, args string) string {
		return `{"id":"` + id + `","type":"function_call","status":"` + status + `","arguments":` + transformtest.JSONString(args) + `,"call_id":"dup","name":"local_shell"}`
	}
	const aArgs, bArgs = `{"command":["ls","-la"]}`, `{"command":["pwd"]}`
	ls := func(id, status, cmd string) string {
		return `{"type":"local_shell_call","id":"` + id + `","call_id":"dup","status":"` + status + `","action":{"type":"exec","command":` + cmd + `,"env":{}}}`
	}
	a, b := ls("fc_a", "completed", `["ls","-la"]`), ls("fc_b", "completed", `["pwd"]`)
	aAdded, bAdded := ls("fc_a", "in_progress", `["ls","-la"]`), ls("fc_b", "in_progress", `["pwd"]`)
	head := []string{
		`{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":` + item("fc_a", "in_progress", "") + `}`,
		`{"type":"response.output_item.added","sequence_number":2,"output_index":1,"item":` + item("fc_b", "in_progress", "") + `}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_a","output_index":0,"delta":"{\"command\":[\"ls\","}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_b","output_index":1,"delta":"{\"command\":["}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_a","output_index":0,"delta":"\"-la\"]}"}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_b","output_index":1,"delta":"\"pwd\"]}"}`,
	}
	doneA := []string{
		`{"type":"response.function_call_arguments.done","sequence_number":0,"item_id":"fc_a","output_index":0,"arguments":` + transformtest.JSONString(aArgs) + `}`,
		`{"type":"response.output_item.done","sequence_number":0,"output_index":0,"item":` + item("fc_a", "completed", aArgs) + `}`,
	}
	doneB := []string{
		`{"type":"response.function_call_arguments.done","sequence_number":0,"item_id":"fc_b","output_index":1,"arguments":` + transformtest.JSONString(bArgs) + `}`,
		`{"type":"response.output_item.done","sequence_number":0,"output_index":1,"item":` + item("fc_b", "completed", bArgs) + `}`,
	}
	completed := `{"type":"response.completed","sequence_number":0,"response":{"id":"r","status":"completed","output":[` +
		item("fc_a", "completed", aArgs) + `,` + item("fc_b", "completed", bArgs) + `]}}`
	// renumber gives the upstream events gap-free sequence numbers.
	renumber := func(evs []string) []string {
		out := make([]string, len(evs))
		for i, e := range evs {
			var m map[string]json.RawMessage
			_ = json.Unmarshal([]byte(e), &m)
			out[i] = strings.Replace(e, `"sequence_number":`+string(m["sequence_number"]), `"sequence_number":`+transformtest.Itoa(i), 1)
		}
		return out
	}
	created := `,"response":{"id":"r","status":"in_progress","output":[]}`
	wantCompleted := `,"response":{"id":"r","status":"completed","output":[` + a + `,` + b + `]}`
	for _, tc := range []struct {
		name string
		up   []string
		want string
	}{
		{
			name: "a finishes first",
			up:   append(append(append(append([]string{}, head...), doneA...), doneB...), completed),
			want: tpEvent("response.created", 0, created) +
				tpEvent("response.output_item.added", 1, `,"output_index":0,"item":`+aAdded) +
				tpEvent("response.output_item.done", 2, `,"output_index":0,"item":`+a) +
				tpEvent("response.output_item.added", 3, `,"output_index":1,"item":`+bAdded) +
				tpEvent("response.output_item.done", 4, `,"output_index":1,"item":`+b) +
				tpEvent("response.completed", 5, wantCompleted),
		},
		{
			name: "b finishes first",
			up:   append(append(append(append([]string{}, head...), doneB...), doneA...), completed),
			want: tpEvent("response.created", 0, created) +
				tpEvent("response.output_item.added", 1, `,"output_index":1,"item":`+bAdded) +
				tpEvent("response.output_item.done", 2, `,"output_index":1,"item":`+b) +
				tpEvent("response.output_item.added", 3, `,"output_index":0,"item":`+aAdded) +
				tpEvent("response.output_item.done", 4, `,"output_index":0,"item":`+a) +
				tpEvent("response.completed", 5, wantCompleted),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := transformtest.StreamCase(t, planRules, req, transformtest.SSE(renumber(tc.up)...))
			tpValidEvents(t, got)
			if got != tc.want {
				t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, tc.want)
			}
		})
	}
}

// TestToolsPlanStreamEmptyFinishedArgumentsTakeTheDeltas: a renamed
// function whose arguments streamed as deltas, while its done event and
// finished item carry "arguments":"": the client gets the streamed
// arguments in both, and in response.completed.
func TestToolsPlanStreamEmptyFinishedArgumentsTakeTheDeltas(t *testing.T) {
	req := `{"model":"gpt-5.5","stream":true,"tools":[{"type":"function","name":"a.b","parameters":{}},{"type":"local_shell"}]}`
	up := transformtest.SSE(
		`{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"c1","name":"a_b"}}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":"{\"path\":","obfuscation":"p"}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"\"a.txt\"}","obfuscation":"q"}`,
		`{"type":"response.function_call_arguments.done","sequence_number":4,"item_id":"fc_1","output_index":0,"name":"a_b","arguments":""}`,
		`{"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"","call_id":"c1","name":"a_b"}}`,
		`{"type":"response.completed","sequence_number":6,"response":{"id":"r","status":"completed","output":[{"id":"fc_1","type":"function_call","status":"completed","arguments":"","call_id":"c1","name":"a_b"}]}}`,
	)
	const args = `{"path":"a.txt"}`
	fc := `{"id":"fc_1","type":"function_call","status":"completed","arguments":` + transformtest.JSONString(args) + `,"call_id":"c1","name":"a.b"}`
	want := tpEvent("response.created", 0, `,"response":{"id":"r","status":"in_progress","output":[]}`) +
		tpEvent("response.output_item.added", 1, `,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"c1","name":"a.b"}`) +
		tpEvent("response.function_call_arguments.delta", 2, `,"item_id":"fc_1","output_index":0,"delta":`+transformtest.JSONString(`{"path":`)) +
		tpEvent("response.function_call_arguments.delta", 3, `,"item_id":"fc_1","output_index":0,"delta":`+transformtest.JSONString(`"a.txt"}`)) +
		tpEvent("response.function_call_arguments.done", 4, `,"item_id":"fc_1","output_index":0,"arguments":`+transformtest.JSONString(args)) +
		tpEvent("response.output_item.done", 5, `,"output_index":0,"item":`+fc) +
		tpEvent("response.completed", 6, `,"response":{"id":"r","status":"completed","output":[`+fc+`]}`)
	got := transformtest.StreamCase(t, planRules, req, up)
	tpValidEvents(t, got)
	if got != want {
		t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, want)
	}
}

// A held call over max_call_buffer ends the stream with the gateway's
// error; nothing of the call reaches the client.
func TestToolsPlanStreamHeldCallBufferLimit(t *testing.T) {
	c := transformtest.Chain(t, planRules)
	x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{MaxCallBuffer: 32}, nil)
	c.Begin(x, "gpt-5.5")
	if _, err := x.RewriteRequest([]byte(planBuiltinRequest)); err != nil {
		t.Fatal(err)
	}
	args := `{"command":["echo","0123456789abcdefghijklmnopqrstuvwxyz"]}`
	up := transformtest.SSE(append(transformtest.FunctionCallStream(0, 0, "fc_1", "c1", "local_shell", args, 8, true),
		`{"type":"response.completed","sequence_number":99,"response":{"id":"r","output":[`+upFC("fc_1", "c1", "local_shell", args)+`]}}`)...)
	got := transformtest.Replay(t, x, up, 4096)
	evs := transformtest.SDKEvents(t, got)
	if evTypes(evs) != "error" || evs[0].AsError().Code != "max_call_buffer_exceeded" {
		t.Fatalf("events: %s\n%s", evTypes(evs), got)
	}
	if strings.Contains(got, "local_shell_call") || strings.Contains(got, "echo") {
		t.Fatalf("the call leaked:\n%s", got)
	}
}

// A call under a built-in's name that the request did not declare is not
// the plan's: it passes as the upstream sent it.
func TestToolsPlanUndeclaredBuiltinNamePasses(t *testing.T) {
	req := `{"model":"gpt-5.5","tools":[{"type":"local_shell"},{"type":"function","name":"a.b","parameters":{}}]}`
	x := planExchange(t, planRules, req)
	body := `{"output":[` + upFC("fc_1", "c1", "shell", `{"commands":["ls"]}`) + `,` + upFC("fc_2", "c2", "apply_patch", `{"operation":{"type":"delete_file","path":"a"}}`) + `]}`
	out, err := x.RewriteResponse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != body {
		t.Fatalf("changed:\n%s", out)
	}
}

// Responses objects echo tools and tool_choice: the client gets its own
// back, not the plan's functions, in JSON and on every lifecycle event.
func TestToolsPlanResponseEchoesClientTools(t *testing.T) {
	req := strings.Replace(planBuiltinRequest, `"tool_choice":"auto"`, `"tool_choice":{"type":"local_shell"}`, 1)
	var client struct {
		Tools      json.RawMessage `json:"tools"`
		ToolChoice json.RawMessage `json:"tool_choice"`
	}
	if err := json.Unmarshal([]byte(req), &client); err != nil {
		t.Fatal(err)
	}
	c := transformtest.Chain(t, planRules)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(req))
	upReq, err := x.RewriteRequest([]byte(req))
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Tools      json.RawMessage `json:"tools"`
		ToolChoice json.RawMessage `json:"tool_choice"`
	}
	if err := json.Unmarshal(upReq, &sent); err != nil {
		t.Fatal(err)
	}
	if string(sent.ToolChoice) != `{"type":"function","name":"local_shell"}` {
		t.Fatalf("upstream tool_choice %s", sent.ToolChoice)
	}
	obj := func(tools, choice json.RawMessage, output string) string {
		return `{"id":"r","object":"response","status":"completed","tool_choice":` + string(choice) + `,"tools":` + string(tools) + `,"output":[` + output + `]}`
	}
	call := upFC("fc_1", "c1", "local_shell", `{"command":["id"]}`)
	item := `{"type":"local_shell_call","id":"fc_1","call_id":"c1","status":"completed","action":{"type":"exec","command":["id"],"env":{}}}`
	out, err := x.RewriteResponse([]byte(obj(sent.Tools, sent.ToolChoice, call)))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, obj(client.Tools, client.ToolChoice, item))
	r := transformtest.SDKResponse(t, out)
	if len(r.Tools) != 7 || r.Tools[0].Type != "apply_patch" || r.Tools[1].Type != "local_shell" || r.ToolChoice.Type != "local_shell" {
		t.Fatalf("SDK echo: %+v / %+v", r.Tools, r.ToolChoice)
	}

	created := strings.Replace(obj(sent.Tools, sent.ToolChoice, ""), `"completed"`, `"in_progress"`, 1)
	up := transformtest.SSE(`{"type":"response.created","sequence_number":0,"response":`+created+`}`,
		`{"type":"response.completed","sequence_number":1,"response":`+obj(sent.Tools, sent.ToolChoice, call)+`}`)
	got := transformtest.StreamCase(t, planRules, req, up)
	evs := transformtest.SDKEvents(t, got)
	if evTypes(evs) != "response.created,response.output_item.added,response.output_item.done,response.completed" {
		t.Fatalf("types %s", evTypes(evs))
	}
	for _, i := range []int{0, 3} {
		var m struct {
			Response struct {
				Tools      json.RawMessage `json:"tools"`
				ToolChoice json.RawMessage `json:"tool_choice"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(evs[i].RawJSON()), &m); err != nil {
			t.Fatal(err)
		}
		if string(m.Response.Tools) != string(client.Tools) || string(m.Response.ToolChoice) != string(client.ToolChoice) {
			t.Fatalf("event %d echoes %s / %s", i, m.Response.Tools, m.Response.ToolChoice)
		}
	}
}

// Upstreams whose finished items leave the arguments out, or empty, after
// streaming them whole: the built-in call is built from the arguments the
// stream carried, as a function call's text is, and response.completed
// carries the item the stream delivered.
func TestToolsPlanStreamItemsWithoutArguments(t *testing.T) {
	const ls = `{"type":"local_shell_call","id":"fc_1","call_id":"c1","status":"completed","action":{"type":"exec","command":["ls"],"env":{}}}`
	const lsAdded = `{"type":"local_shell_call","id":"fc_1","call_id":"c1","status":"in_progress","action":{"type":"exec","command":["ls"],"env":{}}}`
	for _, tc := range []struct{ name, up, want string }{
		{
			name: "no arguments member",
			up: transformtest.SSE(
				`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","call_id":"c1","name":"local_shell"}}`,
				`{"type":"response.function_call_arguments.delta","sequence_number":1,"item_id":"fc_1","output_index":0,"delta":"{\"command\":[\"ls\"]}"}`,
				`{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","call_id":"c1","name":"local_shell"}}`,
				`{"type":"response.completed","sequence_number":3,"response":{"id":"r","output":[{"id":"fc_1","type":"function_call","status":"completed","call_id":"c1","name":"local_shell"}]}}`),
			want: "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":0,\"output_index\":0,\"item\":" + lsAdded + "}\n\n" +
				"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":1,\"output_index\":0,\"item\":" + ls + "}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"r\",\"output\":[" + ls + "]}}\n\n",
		},
		{
			name: "empty arguments after a done event",
			up: transformtest.SSE(
				`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"c1","name":"local_shell"}}`,
				`{"type":"response.function_call_arguments.delta","sequence_number":1,"item_id":"fc_1","output_index":0,"delta":"{\"command\":[\"ls\"]}"}`,
				`{"type":"response.function_call_arguments.done","sequence_number":2,"item_id":"fc_1","output_index":0,"arguments":"{\"command\":[\"ls\"]}"}`,
				`{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"","call_id":"c1","name":"local_shell"}}`),
			want: "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":0,\"output_index\":0,\"item\":" + lsAdded + "}\n\n" +
				"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":1,\"output_index\":0,\"item\":" + ls + "}\n\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := transformtest.StreamCase(t, planRules, planBuiltinRequest, tc.up)
			if got != tc.want {
				t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, tc.want)
			}
		})
	}
}

// With native namespaces only the name is encoded: the upstream's call in
// the namespace comes back under the original name, JSON and stream.
func TestToolsPlanNativeNamespaceRestoresName(t *testing.T) {
	const rules = `[{"transform":"tools_plan","config":{"profile":"function_only","namespaces":"native"}}]`
	c := transformtest.Chain(t, rules)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(planBuiltinRequest))
	upReq, err := x.RewriteRequest([]byte(planBuiltinRequest))
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Tools []struct {
			Type, Name string
			Tools      []struct{ Name string }
		}
	}
	if err := json.Unmarshal(upReq, &sent); err != nil {
		t.Fatal(err)
	}
	var up string
	for _, tl := range sent.Tools {
		if tl.Type == "namespace" && tl.Name == "mcp__github" && len(tl.Tools) == 1 {
			up = tl.Tools[0].Name
		}
	}
	if up == "" || up == planLongName || len(up) > 64 {
		t.Fatalf("namespace upstream: %s", upReq)
	}
	call := `{"id":"fc_1","type":"function_call","status":"completed","arguments":"{}","call_id":"c1","name":"` + up + `","namespace":"mcp__github"}`
	want := `{"id":"fc_1","type":"function_call","status":"completed","arguments":"{}","call_id":"c1","name":"` + planLongName + `","namespace":"mcp__github"}`
	out, err := x.RewriteResponse([]byte(`{"output":[` + call + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"output":[`+want+`]}`)

	added := strings.Replace(strings.Replace(call, `"completed"`, `"in_progress"`, 1), `"{}"`, `""`, 1)
	stream := transformtest.SSE(`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":`+added+`}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":1,"item_id":"fc_1","output_index":0,"delta":"{}"}`,
		`{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":`+call+`}`)
	got := transformtest.StreamCase(t, rules, planBuiltinRequest, stream)
	items := doneItems(transformtest.SDKEvents(t, got))
	if len(items) != 1 || items[0].AsFunctionCall().Name != planLongName || items[0].AsFunctionCall().Namespace != "mcp__github" {
		t.Fatalf("stream:\n%s", got)
	}
	if strings.Contains(got, up) {
		t.Fatalf("the upstream name leaked:\n%s", got)
	}
}

// Rounds: one exchange may take several upstream responses, each restored
// on its own, JSON and stream.
func TestToolsPlanRestoresEveryRound(t *testing.T) {
	x := planExchange(t, planRules, planBuiltinRequest)
	item := `{"type":"apply_patch_call","id":"fc_1","call_id":"c1","status":"completed","operation":{"type":"delete_file","path":"a"}}`
	call := upFC("fc_1", "c1", "apply_patch", `{"operation":{"type":"delete_file","path":"a"}}`)
	for round := 0; round < 2; round++ {
		out, err := x.RewriteResponse([]byte(`{"output":[` + call + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		transformtest.JSONEqual(t, out, `{"output":[`+item+`]}`)
		got := transformtest.Replay(t, x, transformtest.SSE(transformtest.FunctionCallStream(0, 0, "fc_1", "c1", "apply_patch", `{"operation":{"type":"delete_file","path":"a"}}`, 6, true)...), 7)
		if items := doneItems(transformtest.SDKEvents(t, got)); len(items) != 1 || items[0].AsApplyPatchCall().Operation.Path != "a" {
			t.Fatalf("round %d stream:\n%s", round, got)
		}
	}
	if x.Counts().Restored != 4 {
		t.Fatalf("restored = %d, want 4", x.Counts().Restored)
	}
}
