package transforms

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// Review of the review fixes (5c96f4d..e752d36) to tools_filter and
// tools_normalize_schema. Every TestFixReview* test below that is not
// named Guard pins a defect: its comment says what is wrong and what is
// right, and it fails until the transform is fixed. The guards pin the
// risky spots of the fixes that work and must stay working.

// --- helpers -------------------------------------------------------------------------------------

// rfRun runs one tools_filter rule and turns a panic into an error, so one
// crashing case does not take the whole package's tests down.
func rfRun(t *testing.T, p Protocol, cfg, body string) (out []byte, x *Exchange, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return tfRun(t, p, cfg, body)
}

// rfNS runs one tools_normalize_schema rule, panics as errors.
func rfNS(t *testing.T, cfg string, p Protocol, body string) (out []byte, x *Exchange, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return nsRun(t, cfg, p, body)
}

// rfCode wants a 400 with code and no body for the upstream.
func rfCode(t *testing.T, out []byte, err error, code string) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want a 400 %s, got err %v and body %s", code, err, out)
	}
	if e.Status != 400 || e.Code != code {
		t.Fatalf("want 400 %s, got %d %s: %s", code, e.Status, e.Code, e.Message)
	}
	if out != nil {
		t.Fatalf("the upstream would receive a body: %s", out)
	}
	return e
}

// rfOK wants no error and out equal to want as JSON, with no key twice.
func rfOK(t *testing.T, out []byte, err error, want string) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	noDuplicateKeys(t, out)
	jsonEqual(t, out, want)
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

// --- tools_filter, function calling off: additional_tools inside runs ---------------------------

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
			out, _, err := rfRun(t, ProtocolResponses, rfOff, rfInput(tc.in...))
			rfOK(t, out, err, tc.want)
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
			out, _, err := rfRun(t, ProtocolResponses, rfOff, rfInput(tc.in...))
			rfOK(t, out, err, tc.want)
		})
	}
}

// --- tools_filter: the ambiguity checks -----------------------------------------------------------

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
	out, _, err := rfRun(t, ProtocolResponses, rfDeny, body)
	// Refused at the first repeat the walk meets (the inner one).
	e := rfCode(t, out, err, "ambiguous_tool")
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
	out, _, err := rfRun(t, ProtocolResponses, rfDeny, body)
	rfCode(t, out, err, "ambiguous_tool")
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
	out, _, err := rfRun(t, ProtocolResponses, rfDeny, body)
	rfCode(t, out, err, "ambiguous_tool")
}

// TestFixReviewToolsNullMemberIsNotARepeat: the new check for a second
// "tools" member in a definition fires on the first one when it is not
// an array: {"type":"function","name":"read_file","tools":null} is
// refused as "repeats a key" although nothing repeats. Right: the request
// passes unchanged (the same slice).
func TestFixReviewToolsNullMemberIsNotARepeat(t *testing.T) {
	body := tfResp(``, `{"type":"function","name":"read_file","tools":null}`)
	out, _, err := rfRun(t, ProtocolResponses, rfDeny, body)
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if string(out) != body {
		t.Fatalf("body changed: %s", out)
	}
}

// --- tools_filter: Chat's legacy functions ---------------------------------------------------------

// TestFixReviewEscapedFunctionsKeyBypassesDeny: legacyFunctions only runs
// when the body contains the bytes "functions" in quotes; a key spelled
// "function\u0073" (which every JSON decoder, and jsonspan.KeyIs, read as
// functions) skips it, so deny delete_* lets delete_file through the
// legacy list. Right: the list is filtered whatever the key's spelling.
func TestFixReviewEscapedFunctionsKeyBypassesDeny(t *testing.T) {
	body := `{"model":"m","messages":[],"function\u0073":[{"name":"delete_file"},{"name":"read_file"}]}`
	out, x, err := rfRun(t, ProtocolChat, rfDeny, body)
	rfOK(t, out, err, `{"model":"m","messages":[],"functions":[{"name":"read_file"}]}`)
	tfDecisions(t, x, []Decision{{"delete_file", "drop", "denied"}})
}

// TestFixReviewLegacyFunctionRepeatedName: the legacy list reads a
// function's name with Lookup (the first), the upstream the last; the
// ambiguity check that refuses {"name":"read","name":"delete_repo"} in
// tools does not look at functions. deny delete_* keeps the entry and the
// upstream serves delete_file. Right: 400 ambiguous_tool (param
// functions[0]), as in tools.
func TestFixReviewLegacyFunctionRepeatedName(t *testing.T) {
	body := `{"model":"m","messages":[],"functions":[{"name":"read_file","name":"delete_file"}]}`
	out, _, err := rfRun(t, ProtocolChat, rfDeny, body)
	rfCode(t, out, err, "ambiguous_tool")
}

// TestFixReviewDefaultAfterSoleFunctionsMember: a default inserted at the
// end of a body whose only member is a functions list that goes entirely:
// insertMember decides on the leading comma from the original bytes (a
// member before "}"), while the removal of functions takes that member
// away, leaving {,"tools":[…]}, which is not JSON. Right:
// {"tools":[default]}.
func TestFixReviewDefaultAfterSoleFunctionsMember(t *testing.T) {
	cfg := `{"deny":["delete_*"],"defaults":[{"type":"function","function":{"name":"lookup"}}]}`
	out, _, err := rfRun(t, ProtocolChat, cfg, `{"functions":[{"name":"delete_file"}]}`)
	rfOK(t, out, err, `{"tools":[{"type":"function","function":{"name":"lookup"}}]}`)
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
					out, _, err := rfRun(t, ProtocolChat, v.cfg, body)
					if err != nil {
						t.Fatalf("order %v shape %d: %v\n%s", p, shape, err, body)
					}
					rfOK(t, out, nil, want)
				}
			}
		})
	}
}

// TestFixReviewGuardToolsNullDefaults (guard, passes): a Chat-shaped
// default becomes the list of a tools:null, in place.
func TestFixReviewGuardToolsNullDefaults(t *testing.T) {
	cfg := `{"defaults":[{"type":"function","function":{"name":"lookup"}}]}`
	out, _, err := rfRun(t, ProtocolChat, cfg, `{"model":"m","tools":null,"messages":[]}`)
	rfOK(t, out, err, `{"model":"m","tools":[{"type":"function","function":{"name":"lookup"}}],"messages":[]}`)
}

// --- the Chat typeless tool, now read as a function -------------------------------------------------

// TestFixReviewTypelessChatToolConflictsWithCustom: the walk now reads a
// Chat tool without a type as the function vLLM and Ollama read
// ({"function":{"name":"x"}}), and gives it its name, but
// field_custom_tools_to_function still registers only Type "function" as
// a native function: a custom tool x beside it is converted into a second
// function x, with no custom_tool_conflict, and every call to x is later
// restored as a custom call, the typeless function's included. Right: the
// 400 custom_tool_conflict a typed function x gets.
func TestFixReviewTypelessChatToolConflictsWithCustom(t *testing.T) {
	body := `{"model":"m","messages":[],"tools":[{"function":{"name":"x"}},{"type":"custom","custom":{"name":"x"}}]}`
	out, err := rewriteChat(t, `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`, body)
	var e *Error
	if !errors.As(err, &e) || e.Code != "custom_tool_conflict" {
		t.Fatalf("want 400 custom_tool_conflict, got %v\n%s", err, out)
	}
}

// TestFixReviewGuardTypelessChatTool (guard, passes): tools_filter judges
// a typeless Chat tool by its inner name (deny catches it), and tools_plan
// does with it what it did before the walk read it as a function (it drops
// it as a tool without a type: the output is the one fa98cc1 gave).
func TestFixReviewGuardTypelessChatTool(t *testing.T) {
	out, x, err := rfRun(t, ProtocolChat, rfDeny, `{"model":"m","messages":[],"tools":[{"function":{"name":"delete_file"}},`+tfReadC+`]}`)
	rfOK(t, out, err, `{"model":"m","messages":[],"tools":[`+tfReadC+`]}`)
	tfDecisions(t, x, []Decision{{"delete_file", "drop", "denied"}})

	tpOK(t, ProtocolChat, tpProfile("function_only"),
		`{"model":"m","messages":[],"tools":[{"function":{"name":"read","parameters":{"type":"object"}}},{"type":"function","function":{"name":"x"}}]}`,
		`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"x"}}]}`)
}

// --- tools_filter: when ------------------------------------------------------------------------------

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

// --- tools_filter: the Chat stream's unnamed calls ----------------------------------------------------

// TestFixReviewGuardChatStreamUnnamedCall (guard, passes): a dropped call
// at index 0, then a call whose first fragment has no name: it passes
// numbered 0, keeps that number when a later fragment names it, and the
// choice still ends with tool_calls. An unnamed call later named after an
// undeclared tool is counted, not dropped.
func TestFixReviewGuardChatStreamUnnamedCall(t *testing.T) {
	request := tfChat(`,"stream":true`, tfReadC)
	up := chatSSE(
		tfChunk(`{"tool_calls":[{"index":0,"id":"c0","type":"function","function":{"name":"invented","arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"id":"c1","type":"function","function":{"arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"function":{"name":"read_file"}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	want := chatSSE(
		tfChunk(`{}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"name":"read_file"}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	for _, n := range chunkSizes {
		x, _ := tfExchange(t, ProtocolChat, `{"drop_undeclared_calls":true}`, request)
		tfSameChunks(t, replay(t, x, up, n), want)
		tfCounts(t, x, 1, 0, 1)
	}

	up = chatSSE(
		tfChunk(`{"tool_calls":[{"index":0,"id":"c0","type":"function","function":{"arguments":""}}]}`, `null`),
		tfChunk(`{"tool_calls":[{"index":0,"function":{"name":"invented","arguments":"{}"}}]}`, `null`),
		tfChunk(`{}`, `"tool_calls"`),
	)
	for _, n := range chunkSizes {
		x, _ := tfExchange(t, ProtocolChat, `{"drop_undeclared_calls":true}`, request)
		tfSameChunks(t, replay(t, x, up, n), up)
		tfCounts(t, x, 1, 0, 0)
	}
}

// --- tools_normalize_schema: the size limit -------------------------------------------------------------

// TestFixReviewSchemaNullableWrapStillAllocates: the fix bounds what a
// schema writes (maxOut, checked as each sub-schema starts), not what the
// nullable wrap allocates: every untyped optional property of a closed
// object clones its whole written subtree to wrap it in
// anyOf[…,{"type":"null"}], also while unwinding after schema_too_large.
// 170 nested untyped objects (no reference, ~20 bytes each) above one
// reference into a doubling $defs chain make a 4.7 KB request allocate
// ~130 MB under openai_strict with inline_refs, and ~195 MB for the
// slightly larger one that is refused. Right: allocation within a small
// multiple of the 1 MiB output limit (the fix's own review test asks for
// under 32 MB).
func TestFixReviewSchemaNullableWrapStillAllocates(t *testing.T) {
	for _, fan := range []int{12, 14} {
		var b strings.Builder
		const levels = 170
		for i := 0; i < levels; i++ {
			b.WriteString(`{"properties":{"p":`)
		}
		b.WriteString(`{"$ref":"#/$defs/e0"}`)
		for i := 0; i < levels; i++ {
			b.WriteString(`}}`)
		}
		var defs []string
		for k := 0; k < fan; k++ {
			defs = append(defs, fmt.Sprintf(`"e%d":{"properties":{"a":{"$ref":"#/$defs/e%d"},"b":{"$ref":"#/$defs/e%d"}}}`, k, k+1, k+1))
		}
		defs = append(defs, fmt.Sprintf(`"e%d":{"description":"xxxxxxxxxxxxxxxxxxxx"}`, fan))
		params := `{"type":"object","properties":{"q":` + b.String() + `},"$defs":{` + strings.Join(defs, ",") + `}}`
		body := fn(params, strictOn)
		c := chainOf(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"openai_strict","inline_refs":true}}]`)
		x := begin(t, c, ProtocolResponses, []byte(body))
		var m1, m2 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m1)
		out, err := x.RewriteRequest([]byte(body))
		runtime.ReadMemStats(&m2)
		if alloc := m2.TotalAlloc - m1.TotalAlloc; alloc > 32<<20 {
			t.Errorf("fan %d: a %d-byte request allocated %d MB (%d bytes out, err %v)", fan, len(body), alloc>>20, len(out), err)
		}
	}
}

// rfDoubling is a parameters schema whose reference chain doubles k
// times under a dialect that inlines, with a leaf of pad bytes.
func rfDoubling(k, pad int) string {
	var defs []string
	for i := 0; i < k; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"a":{"$ref":"#/$defs/d%d"},"b":{"$ref":"#/$defs/d%d"}}}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":"string","description":"%s"}`, k, strings.Repeat("x", pad)))
	return `{"type":"object","properties":{"r":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
}

// TestFixReviewGuardSchemaLimitPerFunction (guard, passes): the arena is
// shared by the request's functions, and each one's limit counts from
// where its own output starts: two functions that each write ~700 KB
// (under their 1 MiB) pass; an unchanged first function then a second
// that blows up is refused naming the second.
func TestFixReviewGuardSchemaLimitPerFunction(t *testing.T) {
	two := func(a, b string) string {
		return `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":` + a + `},{"type":"function","name":"g","parameters":` + b + `}]}`
	}
	big := rfDoubling(12, 100) // 4096 leaves of ~140 bytes: ~700 KB inlined
	out, _, err := rfNS(t, `{"dialect":"gemini"}`, ProtocolResponses, two(big, big))
	if err != nil {
		t.Fatalf("two functions under their own limit: %v", err)
	}
	if len(out) < 1<<20 {
		t.Fatalf("the output (%d bytes) is not the sum of two large schemas: the guard tests nothing", len(out))
	}
	_, _, err = rfNS(t, `{"dialect":"gemini"}`, ProtocolResponses, two(`{"type":"object","properties":{"a":{"type":"string"}}}`, rfDoubling(20, 10)))
	var e *Error
	if !errors.As(err, &e) || e.Code != "schema_too_large" || e.Param != "tools[1].parameters" {
		t.Fatalf("want schema_too_large at tools[1].parameters, got %v", err)
	}
}

// --- tools_normalize_schema: the pointer cache and the object index -----------------------------------

// TestFixReviewGuardPointerCachePerFunction (guard, passes): the cache of
// resolved pointers and the index of the objects they cross are per
// function: two functions with the same "#/$defs/a" at different offsets
// and meanings each get their own; ~1 and %xx are decoded against keys
// that are themselves escaped in the body.
func TestFixReviewGuardPointerCachePerFunction(t *testing.T) {
	body := `{"model":"m","input":"hi","tools":[` +
		`{"type":"function","name":"f","parameters":{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}}}},` +
		`{"type":"function","name":"g","parameters":{"type":"object","$defs":{"pad":{"type":"null"},"a":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/a"}}}},` +
		`{"type":"function","name":"h","parameters":{"type":"object","properties":{"s":{"$ref":"#/$defs/a~1b"},"p":{"$ref":"#/$defs/a%20b"},"t":{"$ref":"#/$defs/~0c"}},"$defs":{"a\u002fb":{"type":"string"},"a b":{"type":"boolean"},"~c":{"type":"number"}}}}]}`
	out, _, err := rfNS(t, `{"dialect":"gemini"}`, ProtocolResponses, body)
	rfOK(t, out, err, `{"model":"m","input":"hi","tools":[`+
		`{"type":"function","name":"f","parameters":{"type":"object","properties":{"x":{"type":"string"}}}},`+
		`{"type":"function","name":"g","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}},`+
		`{"type":"function","name":"h","parameters":{"type":"object","properties":{"s":{"type":"string"},"p":{"type":"boolean"},"t":{"type":"number"}}}}]}`)
}

// TestFixReviewGuardNameSets (guard, passes): past 16 names, required and
// properties are matched through a set: openai_strict keeps the bytes of
// a required list that names every property in another order, and
// permissive drops unknown and repeated names from a long list.
func TestFixReviewGuardNameSets(t *testing.T) {
	var props, rev, long, kept []string
	for i := 0; i < 20; i++ {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string"}`, i))
		rev = append(rev, fmt.Sprintf(`"p%d"`, 19-i))
		long = append(long, fmt.Sprintf(`"p%d"`, i), fmt.Sprintf(`"p%d"`, i), fmt.Sprintf(`"q%d"`, i))
		kept = append(kept, fmt.Sprintf(`"p%d"`, i))
	}
	strict := `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(rev, ",") + `],"additionalProperties":false}`
	body := fn(strict, strictOn)
	out, _, err := rfNS(t, `{"dialect":"openai_strict"}`, ProtocolResponses, body)
	if err != nil || string(out) != body {
		t.Fatalf("want the body unchanged, got %v\n%s", err, out)
	}
	out, _, err = rfNS(t, `{"dialect":"permissive"}`, ProtocolResponses,
		fn(`{"type":"object","properties":{`+strings.Join(props, ",")+`},"required":[`+strings.Join(long, ",")+`]}`))
	rfOK(t, out, err, fn(`{"type":"object","properties":{`+strings.Join(props, ",")+`},"required":[`+strings.Join(kept, ",")+`]}`))
}

// --- tools_normalize_schema: the allOf merge -----------------------------------------------------------

// TestFixReviewSchemaAllOfMergeLosesNullable: under openai_strict with
// type_arrays any_of, an optional property with a type list and an anyOf
// becomes allOf[{anyOf: types + null}, {anyOf: own}], and nullDone is
// set: but the own anyOf is written without null (schemaList(…, false)),
// so the intersection refuses null and the optional property, now in
// required, must be given a value. Before the merge the own anyOf got its
// null. Right: the own anyOf gets {"type":"null"} too.
func TestFixReviewSchemaAllOfMergeLosesNullable(t *testing.T) {
	params := `{"type":"object","properties":{"v":{"type":["string","integer"],"anyOf":[{"type":"string","format":"date"},{"type":"integer","minimum":0}]}}}`
	out, _, err := rfNS(t, `{"dialect":"openai_strict","type_arrays":"any_of"}`, ProtocolResponses, fn(params, strictOn))
	rfOK(t, out, err, fn(`{"type":"object","properties":{"v":{"allOf":[`+
		`{"anyOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]},`+
		`{"anyOf":[{"type":"string","format":"date"},{"type":"integer","minimum":0},{"type":"null"}]}]}},`+
		`"additionalProperties":false,"required":["v"]}`, strictOn))
}

// TestFixReviewSchemaAllOfMergeDuplicateKey: the merge writes an allOf
// key of its own beside the schema's allOf, when it has one: two allOf
// keys, of which upstreams keep the last, losing both unions. Right: one
// allOf holding the two unions and the schema's own members.
func TestFixReviewSchemaAllOfMergeDuplicateKey(t *testing.T) {
	params := `{"type":"object","properties":{"v":{"type":["string","integer"],"anyOf":[{"minLength":1},{"minimum":0}],"allOf":[{"description":"x"}]}}}`
	out, _, err := rfNS(t, `{"dialect":"permissive","type_arrays":"any_of"}`, ProtocolResponses, fn(params))
	if err != nil {
		t.Fatal(err)
	}
	noDuplicateKeys(t, out)
	var doc struct {
		Tools []struct {
			Parameters struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"parameters"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	v := doc.Tools[0].Parameters.Properties["v"]
	var want []any
	_ = json.Unmarshal([]byte(`[{"anyOf":[{"type":"string"},{"type":"integer"}]},{"anyOf":[{"minLength":1},{"minimum":0}]},{"description":"x"}]`), &want)
	got, _ := v["allOf"].([]any)
	if len(v) != 1 || !sameMembers(got, want) {
		t.Fatalf("v = %v, want one allOf of %v", v, want)
	}
}

func sameMembers(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
outer:
	for _, x := range a {
		for j, y := range b {
			if !used[j] && reflect.DeepEqual(x, y) {
				used[j] = true
				continue outer
			}
		}
		return false
	}
	return true
}

// TestFixReviewKimiTypeListRootDropsAnyOf: with type_arrays any_of, a
// root ["object","null"] beside an anyOf: the anyOf case skips itself
// because typeUnion says the type member will write both in one allOf,
// but the type case first takes the rootObject branch (type "object",
// continue), which writes neither: the client's anyOf is lost without a
// word. Right: type object and the anyOf kept as it came.
func TestFixReviewKimiTypeListRootDropsAnyOf(t *testing.T) {
	params := `{"type":["object","null"],"properties":{"a":{"type":"string"},"b":{"type":"string"}},"anyOf":[{"required":["a"]},{"required":["b"]}]}`
	out, _, err := rfNS(t, `{"dialect":"kimi","type_arrays":"any_of"}`, ProtocolResponses, fn(params))
	rfOK(t, out, err, fn(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"anyOf":[{"required":["a"]},{"required":["b"]}]}`))
}

// --- tools_normalize_schema: const null, empty type, kimi references ----------------------------------

// TestFixReviewGeminiConstNullTwiceNullable: the fix makes const null say
// nullable:true unless the schema has a nullable member, but the type
// list's null already wrote one (typeMember): {"type":["integer","null"],
// "const":null} becomes {"type":"string","nullable":true,"nullable":true},
// the duplicate the fix set out to end. Right: one nullable.
func TestFixReviewGeminiConstNullTwiceNullable(t *testing.T) {
	for _, v := range []string{`{"type":["integer","null"],"const":null}`, `{"type":"null","const":null}`} {
		out, _, err := rfNS(t, `{"dialect":"gemini"}`, ProtocolResponses, fn(`{"type":"object","properties":{"v":`+v+`}}`))
		rfOK(t, out, err, fn(`{"type":"object","properties":{"v":{"type":"string","nullable":true}}}`))
	}
}

// TestFixReviewGeminiEmptyTypeEnum: an empty type is now no type, except
// where gemini says the type of an enum made of strings: that looks for
// a missing type member, and "type":"" is present, so {"type":"","enum":
// [1,2]} becomes {"enum":["1","2"]} without the "type":"string" that
// {"enum":[1,2]} gets (the same for a const). Right: type string.
func TestFixReviewGeminiEmptyTypeEnum(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"type":"","enum":[1,2]}`, `{"enum":["1","2"],"type":"string"}`},
		{`{"type":"","const":3}`, `{"enum":["3"],"type":"string"}`},
	} {
		out, _, err := rfNS(t, `{"dialect":"gemini"}`, ProtocolResponses, fn(`{"type":"object","properties":{"v":`+tc.in+`}}`))
		rfOK(t, out, err, fn(`{"type":"object","properties":{"v":`+tc.want+`}}`))
	}
}

// TestFixReviewStrictEmptyTypeRoot: objectRoot, which decides whether a
// strict function keeps strict, reads "type":"" as a type that is not
// object, while the writer reads it as no type (and an untyped schema
// with properties as an object): {"type":"","properties":{…}} loses
// strict ("needs an object schema at the root") where {"properties":{…}}
// keeps it. Right: strict stays, the schema closed as the untyped one is.
func TestFixReviewStrictEmptyTypeRoot(t *testing.T) {
	out, _, err := rfNS(t, `{"dialect":"openai_strict"}`, ProtocolResponses, fn(`{"type":"","properties":{"a":{"type":"string"}}}`, strictOn))
	rfOK(t, out, err, fn(`{"properties":{"a":{"type":["string","null"]}},"additionalProperties":false,"required":["a"]}`, strictOn))
}

// TestFixReviewKimiRootRefToNonObject: kimi no longer inlines, so a root
// {"$ref":"#/$defs/s"} to a string schema is not seen for what it is: the
// root is untyped, and rootObject writes "type":"object" and
// "properties":{} beside the $ref, a schema no value satisfies (object
// and string), sent without a word. Before the fix it was the 400
// schema_root_not_object the README promises ("an object root"). Right:
// that 400.
func TestFixReviewKimiRootRefToNonObject(t *testing.T) {
	out, _, err := rfNS(t, `{"dialect":"kimi"}`, ProtocolResponses, fn(`{"$ref":"#/$defs/s","$defs":{"s":{"type":"string"}}}`))
	rfCode(t, out, err, "schema_root_not_object")
}

// TestFixReviewGuardSchemaFixes (guard, passes): anthropic drops formats
// outside its list on any type, gemini only on strings; a strict function
// with a map goes non-strict in both shapes, the strict member inside
// Chat's function object; a non-strict one keeps its map; kimi keeps
// local references and refuses others.
func TestFixReviewGuardSchemaFixes(t *testing.T) {
	formats := `{"type":"object","properties":{"n":{"type":"integer","format":"int64"},"s":{"type":"string","format":"date"}}}`
	out, _, err := rfNS(t, `{"dialect":"anthropic"}`, ProtocolResponses, fn(formats, strictOn))
	rfOK(t, out, err, fn(`{"type":"object","properties":{"n":{"type":"integer","description":"(format: \"int64\")"},"s":{"type":"string","format":"date"}},"additionalProperties":false}`, strictOn))
	out, _, err = rfNS(t, `{"dialect":"gemini"}`, ProtocolResponses, fn(formats))
	rfOK(t, out, err, fn(`{"type":"object","properties":{"n":{"type":"integer","format":"int64"},"s":{"type":"string","description":"(format: \"date\")"}}}`))

	mapped := `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"}}},"required":["m"]}`
	wantMap := `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"},"properties":{}}},"required":["m"]}`
	out, x, err := rfNS(t, `{"dialect":"openai_strict"}`, ProtocolChat, chatFn(mapped, strictOn))
	rfOK(t, out, err, chatFn(wantMap, `,"strict":false`))
	if !hasDecision(x, "f", "strict_off") {
		t.Errorf("no strict_off decision: %v", x.Decisions())
	}
	out, _, err = rfNS(t, `{"dialect":"anthropic"}`, ProtocolResponses, fn(mapped, strictOn))
	rfOK(t, out, err, fn(wantMap, `,"strict":false`))
	out, _, err = rfNS(t, `{"dialect":"openai_strict"}`, ProtocolResponses, fn(mapped))
	rfOK(t, out, err, fn(wantMap))

	local := `{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}}}`
	body := fn(local)
	out, _, err = rfNS(t, `{"dialect":"kimi"}`, ProtocolResponses, body)
	if err != nil || string(out) != body {
		t.Fatalf("kimi: want the body unchanged, got %v\n%s", err, out)
	}
	for _, ref := range []string{"https://x/y.json", "other.json#/x", "#anchor"} {
		out, _, err = rfNS(t, `{"dialect":"kimi"}`, ProtocolResponses, fn(`{"type":"object","properties":{"a":{"$ref":"`+ref+`"}}}`))
		rfCode(t, out, err, "schema_ref_unresolved")
	}
}
