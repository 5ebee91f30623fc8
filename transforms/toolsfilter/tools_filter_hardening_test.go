package toolsfilter

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// rfRun runs one tools_filter rule and turns a panic into an error, so one
// crashing case does not take the whole package's tests down.
func rfRun(t *testing.T, p transforms.Protocol, cfg, body string) (out []byte, x *transforms.Exchange, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return tfRun(t, p, cfg, body)
}

func rfPermutations(a []string) [][]string {
	if len(a) <= 1 {
		return [][]string{append([]string(nil), a...)}
	}
	var out [][]string
	for i := range a {
		rest := append(append([]string(nil), a[:i]...), a[i+1:]...)
		for _, p := range rfPermutations(rest) {
			out = append(out, append([]string{a[i]}, p...))
		}
	}
	return out
}

// The items of the function_calling off cases.
const (
	rfCall  = `{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}`
	rfCall2 = `{"type":"function_call","call_id":"c2","name":"g","arguments":"{\"a\":1}"}`
	rfOut   = `{"type":"function_call_output","call_id":"c1","output":"ok"}`
	rfAT    = `{"type":"additional_tools","tools":[{"type":"function","name":"g"}]}`
	rfMsg   = `{"type":"message","role":"user","content":"hi"}`
	rfOff   = `{"function_calling":"off"}`
	rfDeny  = `{"deny":["delete_*"]}`

	rfToldCall = `{"type":"message","role":"assistant","content":"Called tool ` + "`f`" + ` (call c1) with:\n{}"}`
	rfToldOut  = `{"type":"message","role":"user","content":"Output of tool ` + "`function`" + ` (call c1):\nok"}`
)

func rfInput(items ...string) string {
	return `{"model":"m","input":[` + strings.Join(items, ",") + `]}`
}

// TestFixReviewOffTwoAdditionalToolsAtTheEndPanic: with function calling
// off, additional_tools items met after the last call (or output) of the
// input go on their own, each with RemoveRun. When two or more of them
// end the array, the first claims the comma after it ([AT1, AT2)) and the
// last, followed by "]", claims the comma before it ([AT2-1, AT2.End)):
// the edits overlap and jsonspan.AppendEdits panics (a 500 through the
// handler's recover). Right: the items go and the run is retold, as for
// one trailing additional_tools item.
func TestFixReviewOffTwoAdditionalToolsAtTheEndPanic(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want string
	}{
		{"call then two", []string{rfCall, rfAT, rfAT}, rfInput(rfToldCall)},
		{"output then two", []string{rfOut, rfAT, rfAT}, rfInput(rfToldOut)},
		{"call then three", []string{rfCall, rfAT, rfAT, rfAT}, rfInput(rfToldCall)},
		{"two around a call", []string{rfAT, rfAT, rfCall, rfAT, rfAT}, rfInput(rfToldCall)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := rfRun(t, transforms.ProtocolResponses, rfOff, rfInput(tc.in...))
			transformtest.Accepted(t, out, err, tc.want)
		})
	}
}

// TestFixReviewGuardOffAdditionalToolsInsideRuns (guard, passes): an
// additional_tools item inside a run of calls does not split it; one after
// a run, before other items or before a run of the other kind, goes on its
// own; one first goes as a run of its own.
func TestFixReviewGuardOffAdditionalToolsInsideRuns(t *testing.T) {
	both := `{"type":"message","role":"assistant","content":"Called tool ` + "`f`" + ` (call c1) with:\n{}\n\nCalled tool ` + "`g`" + ` (call c2) with:\n{\"a\":1}"}`
	namedOut := `{"type":"message","role":"user","content":"Output of tool ` + "`f`" + ` (call c1):\nok"}`
	for _, tc := range []struct {
		name string
		in   []string
		want string
	}{
		{"call, at, at, other", []string{rfCall, rfAT, rfAT, rfMsg}, rfInput(rfToldCall, rfMsg)},
		{"call, at, call", []string{rfCall, rfAT, rfCall2}, rfInput(both)},
		{"call, at, at, call", []string{rfCall, rfAT, rfAT, rfCall2}, rfInput(both)},
		{"call, at, output", []string{rfCall, rfAT, rfOut}, rfInput(rfToldCall, namedOut)},
		{"output, at at the end", []string{rfOut, rfAT}, rfInput(rfToldOut)},
		{"at first", []string{rfAT, rfCall}, rfInput(rfToldCall)},
		{"at, at first", []string{rfAT, rfAT, rfMsg, rfCall}, rfInput(rfMsg, rfToldCall)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := rfRun(t, transforms.ProtocolResponses, rfOff, rfInput(tc.in...))
			transformtest.Accepted(t, out, err, tc.want)
		})
	}
}

// TestFixReviewNestedRepeatHidesOuterRepeat: a definition that is not a
// namespace but holds a "tools" array has that array walked, its nodes
// dropped again, and w.repeated reset to -1 when the repeat was found
// among them. A repeat of the outer definition's own name found after
// the array is then not recorded (w.repeated was already set by the
// inner one) and the reset forgets both: the rule judges the first name
// (read_file, kept) and the upstream serves the last (delete_file), the
// very bypass the ambiguity check exists for. Right: 400 ambiguous_tool
// at tools[0].
func TestFixReviewNestedRepeatHidesOuterRepeat(t *testing.T) {
	body := `{"model":"m","input":"hi","tools":[{"type":"function","tools":[{"name":"a","name":"b"}],"name":"read_file","name":"delete_file"}]}`
	out, _, err := rfRun(t, transforms.ProtocolResponses, rfDeny, body)
	// Refused at the first repeat the walk meets (the inner one).
	e := transformtest.Rejected(t, out, err, "ambiguous_tool")
	if e.Param != "tools[0].tools[0]" && e.Param != "tools[0]" {
		t.Errorf("param %q, want tools[0] or its inner tool", e.Param)
	}
}

// TestFixReviewAdditionalToolsRepeatedToolsList: an additional_tools item
// with two "tools" lists is read by the walk through EachObject, which
// keeps the first; encoding/json and most upstreams keep the last. The
// new "a second tools member is ambiguous" check covers the top level and
// namespaces only, so deny delete_* judges read_file and the upstream
// gets delete_file untouched. Right: 400 ambiguous_tool, as for a
// repeated top-level tools member.
func TestFixReviewAdditionalToolsRepeatedToolsList(t *testing.T) {
	body := rfInput(`{"type":"additional_tools","tools":[{"type":"function","name":"read_file"}],"tools":[{"type":"function","name":"delete_file"}]}`)
	out, _, err := rfRun(t, transforms.ProtocolResponses, rfDeny, body)
	transformtest.Rejected(t, out, err, "ambiguous_tool")
}

// TestFixReviewRepeatedInputHidesAdditionalTools: a body with "input"
// twice has both arrays walked; their additional_tools items share the
// root name "input[0].tools", so rootIndex reuses one root whose span is
// the second array's while its first node is the first array's.
// writeList then matches no element to a node and copies the second
// list as it was; the first is never rewritten either. delete_file
// reaches the upstream (which reads the last input) while the decision
// log says it was dropped. Right: 400 ambiguous_tool, as for a repeated
// top-level tools member (or delete_file gone from both).
func TestFixReviewRepeatedInputHidesAdditionalTools(t *testing.T) {
	body := `{"model":"m","input":[{"type":"additional_tools","tools":[{"type":"function","name":"read_file"}]}],"input":[{"type":"additional_tools","tools":[{"type":"function","name":"delete_file"}]}]}`
	out, _, err := rfRun(t, transforms.ProtocolResponses, rfDeny, body)
	transformtest.Rejected(t, out, err, "ambiguous_tool")
}

// TestFixReviewToolsNullMemberIsNotARepeat: the new check for a second
// "tools" member in a definition fires on the first one when it is not
// an array: {"type":"function","name":"read_file","tools":null} is
// refused as "repeats a key" although nothing repeats. Right: the request
// passes unchanged (the same slice).
func TestFixReviewToolsNullMemberIsNotARepeat(t *testing.T) {
	body := tfResp(``, `{"type":"function","name":"read_file","tools":null}`)
	out, _, err := rfRun(t, transforms.ProtocolResponses, rfDeny, body)
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if string(out) != body {
		t.Fatalf("body changed: %s", out)
	}
}

// TestFixReviewEscapedFunctionsKeyBypassesDeny: legacyFunctions only runs
// when the body contains the bytes "functions" in quotes; a key spelled
// "function\u0073" (which every JSON decoder, and jsonspan.KeyIs, read as
// functions) skips it, so deny delete_* lets delete_file through the
// legacy list. Right: the list is filtered whatever the key's spelling.
func TestFixReviewEscapedFunctionsKeyBypassesDeny(t *testing.T) {
	body := `{"model":"m","messages":[],"function\u0073":[{"name":"delete_file"},{"name":"read_file"}]}`
	out, x, err := rfRun(t, transforms.ProtocolChat, rfDeny, body)
	transformtest.Accepted(t, out, err, `{"model":"m","messages":[],"functions":[{"name":"read_file"}]}`)
	tfDecisions(t, x, []transforms.Decision{{Tool: "delete_file", Action: "drop", Reason: "denied"}})
}

// TestFixReviewLegacyFunctionRepeatedName: the legacy list reads a
// function's name with Lookup (the first), the upstream the last; the
// ambiguity check that refuses {"name":"read","name":"delete_repo"} in
// tools does not look at functions. deny delete_* keeps the entry and the
// upstream serves delete_file. Right: 400 ambiguous_tool (param
// functions[0]), as in tools.
func TestFixReviewLegacyFunctionRepeatedName(t *testing.T) {
	body := `{"model":"m","messages":[],"functions":[{"name":"read_file","name":"delete_file"}]}`
	out, _, err := rfRun(t, transforms.ProtocolChat, rfDeny, body)
	transformtest.Rejected(t, out, err, "ambiguous_tool")
}

// TestFixReviewDefaultAfterSoleFunctionsMember: a default inserted at the
// end of a body whose only member is a functions list that goes entirely:
// insertMember decides on the leading comma from the original bytes (a
// member before "}"), while the removal of functions takes that member
// away, leaving {,"tools":[…]}, which is not JSON. Right:
// {"tools":[default]}.
func TestFixReviewDefaultAfterSoleFunctionsMember(t *testing.T) {
	cfg := `{"deny":["delete_*"],"defaults":[{"type":"function","function":{"name":"lookup"}}]}`
	out, _, err := rfRun(t, transforms.ProtocolChat, cfg, `{"functions":[{"name":"delete_file"}]}`)
	transformtest.Accepted(t, out, err, `{"tools":[{"type":"function","function":{"name":"lookup"}}]}`)
}

// TestFixReviewGuardLegacyAndToolMembersAdjacent (guard, passes): the five
// members that may go (functions, function_call, tools, tool_choice,
// parallel_tool_calls) in every order, first, last, split around other
// members and with blanks, with every tool and function filtered, some
// kept, an allowed_tools choice rewritten beside them, function calling
// off, and defaults joining tools:null: one removal per run, never two
// edits on one comma.
func TestFixReviewGuardLegacyAndToolMembersAdjacent(t *testing.T) {
	keys := []string{"functions", "function_call", "tools", "tool_choice", "parallel_tool_calls"}
	lookup := `{"type":"function","function":{"name":"lookup"}}`
	for _, v := range []struct {
		name    string
		cfg     string
		members map[string]string
		want    map[string]string // the members left beside model and messages
	}{
		{"all filtered", rfDeny, map[string]string{
			"functions": `[{"name":"delete_a"},{"name":"delete_b"}]`, "function_call": `"auto"`,
			"tools": `[{"type":"function","function":{"name":"delete_c"}}]`, "tool_choice": `"auto"`, "parallel_tool_calls": `true`,
		}, map[string]string{}},
		{"functions kept in part", rfDeny, map[string]string{
			"functions": `[{"name":"delete_a"},{"name":"read_b"}]`, "function_call": `{"name":"read_b"}`,
			"tools": `[{"type":"function","function":{"name":"delete_c"}}]`, "tool_choice": `"auto"`, "parallel_tool_calls": `true`,
		}, map[string]string{"functions": `[{"name":"read_b"}]`, "function_call": `{"name":"read_b"}`}},
		{"tools kept in part, allowed_tools rewritten", rfDeny, map[string]string{
			"functions": `[{"name":"delete_a"}]`, "function_call": `"none"`,
			"tools":       `[{"type":"function","function":{"name":"delete_c"}},{"type":"function","function":{"name":"read_c"}}]`,
			"tool_choice": `{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"delete_c"}},{"type":"function","function":{"name":"read_c"}}]}}`, "parallel_tool_calls": `true`,
		}, map[string]string{
			"tools":       `[{"type":"function","function":{"name":"read_c"}}]`,
			"tool_choice": `{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"read_c"}}]}}`, "parallel_tool_calls": `true`,
		}},
		{"function calling off", rfOff, map[string]string{
			"functions": `[{"name":"delete_a"}]`, "function_call": `"none"`,
			"tools": `[{"type":"function","function":{"name":"delete_c"}}]`, "tool_choice": `"auto"`, "parallel_tool_calls": `true`,
		}, map[string]string{}},
		{"defaults join tools:null", `{"deny":["delete_*"],"defaults":[` + lookup + `]}`, map[string]string{
			"functions": `[{"name":"delete_a"}]`, "function_call": `"none"`,
			"tools": `null`, "tool_choice": `"auto"`, "parallel_tool_calls": `true`,
		}, map[string]string{"tools": `[` + lookup + `]`, "tool_choice": `"auto"`, "parallel_tool_calls": `true`}},
	} {
		t.Run(v.name, func(t *testing.T) {
			want := `{"model":"m","messages":[]`
			wk := make([]string, 0, len(v.want))
			for k := range v.want {
				wk = append(wk, k)
			}
			sort.Strings(wk)
			for _, k := range wk {
				want += `,"` + k + `":` + v.want[k]
			}
			want += `}`
			for _, p := range rfPermutations(keys) {
				parts := make([]string, len(p))
				for i, k := range p {
					parts[i] = `"` + k + `":` + v.members[k]
				}
				for shape, body := range []string{
					`{"model":"m","messages":[],` + strings.Join(parts, ",") + `}`,
					`{` + strings.Join(parts, ",") + `,"model":"m","messages":[]}`,
					`{"model":"m",` + strings.Join(parts[:2], ",") + `,"messages":[],` + strings.Join(parts[2:], ",") + `}`,
					"{ \"model\":\"m\" ,\n " + strings.Join(parts, " ,\n\t") + " , \"messages\":[] }",
				} {
					out, _, err := rfRun(t, transforms.ProtocolChat, v.cfg, body)
					if err != nil {
						t.Fatalf("order %v shape %d: %v\n%s", p, shape, err, body)
					}
					transformtest.Accepted(t, out, nil, want)
				}
			}
		})
	}
}

// TestFixReviewGuardToolsNullDefaults (guard, passes): a Chat-shaped
// default becomes the list of a tools:null, in place.
func TestFixReviewGuardToolsNullDefaults(t *testing.T) {
	cfg := `{"defaults":[{"type":"function","function":{"name":"lookup"}}]}`
	out, _, err := rfRun(t, transforms.ProtocolChat, cfg, `{"model":"m","tools":null,"messages":[]}`)
	transformtest.Accepted(t, out, err, `{"model":"m","tools":[{"type":"function","function":{"name":"lookup"}}],"messages":[]}`)
}

// TestFixReviewGuardTypelessChatTool (guard, passes): tools_filter judges
// a typeless Chat tool by its inner name (deny catches it), and tools_plan
// does with it what it did before the walk read it as a function (it drops
// it as a tool without a type: the output is the one fa98cc1 gave).
func TestFixReviewGuardTypelessChatTool(t *testing.T) {
	out, x, err := rfRun(t, transforms.ProtocolChat, rfDeny, `{"model":"m","messages":[],"tools":[{"function":{"name":"delete_file"}},`+tfReadC+`]}`)
	transformtest.Accepted(t, out, err, `{"model":"m","messages":[],"tools":[`+tfReadC+`]}`)
	tfDecisions(t, x, []transforms.Decision{{Tool: "delete_file", Action: "drop", Reason: "denied"}})
}

// TestFixReviewConditionLineBreakIsABlank: the new scanner splits on
// spaces and tabs only, while the values are trimmed with
// strings.TrimSpace and the scanner it replaced (strings.Fields) split on
// every blank: "a\n== b" (a JSON config written across lines, a value
// pasted with a CRLF) parsed before the fix and is now "no operator".
// Right: left a, op ==, right b.
func TestFixReviewConditionLineBreakIsABlank(t *testing.T) {
	for _, s := range []string{"a\n== b", "a ==\r\nb"} {
		c, err := ParseCondition(s)
		if err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		if c.left != "a" || c.op != "==" || c.right != "b" {
			t.Errorf("%q: got %q %q %q", s, c.left, c.op, c.right)
		}
	}
}

// TestFixReviewGuardConditionScanner (guard, passes): tabs and runs of
// blanks apart the operator, the values keep their inner blanks, an
// operator-like token first is a value, an operator-like value on the
// right is a value, and a lone operator is an error that names it.
func TestFixReviewGuardConditionScanner(t *testing.T) {
	for _, tc := range []struct{ in, left, op, right, err string }{
		{in: "a\t==\tb", left: "a", op: "==", right: "b"},
		{in: "{h}  ==  red  team", left: "{h}", op: "==", right: "red  team"},
		{in: " a == b\t", left: "a", op: "==", right: "b"},
		{in: "a == ==", left: "a", op: "==", right: "=="},
		{in: "x !~ ~", left: "x", op: "!~", right: "~"},
		{in: "== == b", left: "==", op: "==", right: "b"},
		{in: "a ~ b ~ c", left: "a", op: "~", right: "b ~ c"},
		{in: "{http.request.header.X-Team} != research", left: "{http.request.header.X-Team}", op: "!=", right: "research"},
		{in: "a ==", err: "the operator == needs a value on both sides"},
		{in: "== b", err: "the operator == needs a value on both sides"},
		{in: "a==b", err: "no operator"},
	} {
		c, err := ParseCondition(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %v, want an error with %q", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case c.left != tc.left || c.op != tc.op || c.right != tc.right:
			t.Errorf("%q: got %q %q %q, want %q %q %q", tc.in, c.left, c.op, c.right, tc.left, tc.op, tc.right)
		}
	}
}

// TestFixReviewGuardChatStreamUnnamedCall (guard, passes): a dropped call
// at index 0, then a call whose first fragment has no name: it passes
// numbered 0, keeps that number when a later fragment names it, and the
// choice still ends with tool_calls. An unnamed call later named after an
// undeclared tool is counted, not dropped.
func TestFixReviewGuardChatStreamUnnamedCall(t *testing.T) {
	request := tfChat(`,"stream":true`, tfReadC)
	up := transformtest.ChatSSE(
		tfChunk(`{"tool_calls":[{"index":0,"id":"c0","type":"function","function":{"name":"invented","arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"id":"c1","type":"function","function":{"arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"function":{"name":"read_file"}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	want := transformtest.ChatSSE(
		tfChunk(`{}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"name":"read_file"}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	for _, n := range transformtest.ChunkSizes {
		x, _ := tfExchange(t, transforms.ProtocolChat, `{"drop_undeclared_calls":true}`, request)
		tfSameChunks(t, transformtest.Replay(t, x, up, n), want)
		tfCounts(t, x, 1, 0, 1)
	}

	up = transformtest.ChatSSE(
		tfChunk(`{"tool_calls":[{"index":0,"id":"c0","type":"function","function":{"arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"name":"invented","arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	for _, n := range transformtest.ChunkSizes {
		x, _ := tfExchange(t, transforms.ProtocolChat, `{"drop_undeclared_calls":true}`, request)
		tfSameChunks(t, transformtest.Replay(t, x, up, n), up)
		tfCounts(t, x, 1, 0, 0)
	}
}
