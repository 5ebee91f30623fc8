package preflight

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

var testParamTypes = map[string]map[string]string{
	"get_weather": {"city": "string", "days": "integer", "metric": "boolean"},
	"write_file":  {"path": "string", "content": "string"},
	"search":      {"query": "string", "limit": "integer", "filters": "object"},
}

func testParamType(tool, param string) string { return testParamTypes[tool][param] }

type wantCall struct{ name, args string }

// markupCase is one text with the section extractMarkup must find in it.
type markupCase struct {
	name          string
	before, after string
	section       string // "" when nothing must be found; text is then before
	calls         []wantCall
}

func (c markupCase) text() string { return c.before + c.section + c.after }

// Sections in each format, as the models write them (token spellings from
// vLLM's parsers and the issue reports cited in markup.go).
const (
	hermesWeather = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>"
	hermesSearch  = "<tool_call>\n{\"name\": \"search\", \"arguments\": \"{\\\"query\\\": \\\"go\\\"}\"}\n</tool_call>"

	glmWeather = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
	glm47      = "<tool_call>search<arg_key>query</arg_key><arg_value>go generics</arg_value><arg_key>filters</arg_key><arg_value>{\"lang\": \"en\"}</arg_value></tool_call>"

	qwenWrite   = "<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/a.txt\n</parameter>\n<parameter=content>\nline1\n\n<b>line2</b> </function>\n\n</parameter>\n</function>\n</tool_call>"
	qwenWeather = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n5\n</parameter>\n</function>\n</tool_call>"

	dsV3 = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Beijing\"}\n```<｜tool▁call▁end｜>\n" +
		"<｜tool▁call▁begin｜>function<｜tool▁sep｜>search\n```json\n{\"query\": \"x\", \"limit\": 2}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
	dsV31 = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Beijing\"}<｜tool▁call▁end｜>" +
		"<｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"query\": \"x\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"

	dsmlV32 = "<｜DSML｜function_calls>\n" +
		"<｜DSML｜invoke name=\"get_weather\">\n" +
		"<｜DSML｜parameter name=\"city\" string=\"true\">杭州</｜DSML｜parameter>\n" +
		"<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n" +
		"</｜DSML｜invoke>\n" +
		"<｜DSML｜invoke name=\"search\">\n" +
		"<｜DSML｜parameter name=\"query\" string=\"true\">123</｜DSML｜parameter>\n" +
		"<｜DSML｜parameter name=\"filters\" string=\"false\">{\"a\": [1]}</｜DSML｜parameter>\n" +
		"</｜DSML｜invoke>\n" +
		"</｜DSML｜function_calls>"
	dsmlV4 = "<｜DSML｜tool_calls>\n" +
		"<｜DSML｜invoke name=\"read\">\n" +
		"<｜DSML｜parameter name=\"filePath\" string=\"true\">I:\\hrc\\a.cpp</｜DSML｜parameter>\n" +
		"<｜DSML｜parameter name=\"limit\" string=\"false\">15</｜DSML｜parameter>\n" +
		"</｜DSML｜invoke>\n" +
		"</｜DSML｜tool_calls>"

	kimi = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Beijing\"}<|tool_call_end|>" +
		"<|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>{\"query\": \"x\"}<|tool_call_end|><|tool_calls_section_end|>"
)

var markupCases = []markupCase{
	// a. Hermes / Qwen2.5 JSON.
	{name: "hermes", section: hermesWeather, calls: []wantCall{{"get_weather", `{"city":"Paris","days":3}`}}},
	{name: "hermes two blocks, text around", before: "I'll check.\n\n", section: hermesWeather + "\n\n" + hermesSearch, after: "\nDone.",
		calls: []wantCall{{"get_weather", `{"city":"Paris","days":3}`}, {"search", `{"query":"go"}`}}},
	{name: "hermes parameters, no newlines", section: `<tool_call>{"name":"search","parameters":{"limit":1}}</tool_call>`,
		calls: []wantCall{{"search", `{"limit":1}`}}},
	{name: "hermes without arguments", section: `<tool_call>{"name":"list_files"}</tool_call>`, after: " ",
		calls: []wantCall{{"list_files", `{}`}}},
	{name: "hermes null arguments", section: `<tool_call>{"name":"list_files","arguments":null}</tool_call>`,
		calls: []wantCall{{"list_files", `{}`}}},

	// b. GLM-4.5+ / GLM-5.
	{name: "glm", before: "Let me look.", section: glmWeather, calls: []wantCall{{"get_weather", `{"city":"Paris","days":3}`}}},
	{name: "glm 4.7 inline", section: glm47, calls: []wantCall{{"search", `{"query":"go generics","filters":{"lang":"en"}}`}}},
	{name: "glm no arguments, two blocks", section: "<tool_call>list_files</tool_call>\n" + glm47,
		calls: []wantCall{{"list_files", `{}`}, {"search", `{"query":"go generics","filters":{"lang":"en"}}`}}},
	{name: "glm spaces (ik_llama report)", section: "<tool_call>ls <arg_key>dirPath</arg_key> <arg_value>backend</arg_value> </tool_call>",
		calls: []wantCall{{"ls", `{"dirPath":"backend"}`}}},
	{name: "glm typed by schema", section: "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>42</arg_value>\n" +
		"<arg_key>days</arg_key>\n<arg_value>three</arg_value>\n<arg_key>extra</arg_key>\n<arg_value>[1, 2]</arg_value>\n" +
		"<arg_key>note</arg_key>\n<arg_value>hello world</arg_value>\n<arg_key>metric</arg_key>\n<arg_value>true</arg_value>\n</tool_call>",
		calls: []wantCall{{"get_weather", `{"city":"42","days":"three","extra":[1,2],"note":"hello world","metric":true}`}}},
	{name: "glm repeated key keeps the last value", section: "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value><arg_key>b</arg_key><arg_value>2</arg_value><arg_key>a</arg_key><arg_value>3</arg_value></tool_call>",
		calls: []wantCall{{"f", `{"a":3,"b":2}`}}},

	// c. Qwen3-Coder XML.
	{name: "qwen3-coder", section: qwenWrite,
		calls: []wantCall{{"write_file", `{"path":"/tmp/a.txt","content":"line1\n\n<b>line2</b> </function>\n"}`}}},
	{name: "qwen3-coder two blocks, text around", before: "Writing.\n", section: qwenWrite + "\n" + qwenWeather, after: "\n",
		calls: []wantCall{{"write_file", `{"path":"/tmp/a.txt","content":"line1\n\n<b>line2</b> </function>\n"}`}, {"get_weather", `{"city":"Paris","days":5}`}}},
	{name: "qwen3-coder two functions in one block", section: "<tool_call>\n<function=a>\n</function>\n<function=b>\n<parameter=x>\n{\"k\": null}\n</parameter>\n</function>\n</tool_call>",
		calls: []wantCall{{"a", `{}`}, {"b", `{"x":{"k":null}}`}}},

	// d. DeepSeek V3 / R1 and V3.1.
	{name: "deepseek v3", section: dsV3, after: "<｜end▁of▁sentence｜>",
		calls: []wantCall{{"get_weather", `{"city":"Beijing"}`}, {"search", `{"query":"x","limit":2}`}}},
	{name: "deepseek v3.1", before: "OK.", section: dsV31,
		calls: []wantCall{{"get_weather", `{"city":"Beijing"}`}, {"search", `{"query":"x"}`}}},
	{name: "deepseek v3.1 tool called function", section: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>{\"a\":1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		calls: []wantCall{{"function", `{"a":1}`}}},
	{name: "deepseek bare calls", before: "text ", section: "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\":\"x\"}<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>search<｜tool▁sep｜>{}<｜tool▁call▁end｜>", after: " after",
		calls: []wantCall{{"get_weather", `{"city":"x"}`}, {"search", `{}`}}},
	{name: "deepseek bare calls with stray section end", section: "<｜tool▁call▁begin｜>search<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		calls: []wantCall{{"search", `{}`}}},

	// e. DeepSeek DSML (V3.2, V4).
	{name: "dsml v3.2", before: "Checking both.\n\n", section: dsmlV32,
		calls: []wantCall{{"get_weather", `{"city":"杭州","days":3}`}, {"search", `{"query":"123","filters":{"a":[1]}}`}}},
	{name: "dsml v4", section: dsmlV4, after: "\n",
		calls: []wantCall{{"read", `{"filePath":"I:\\hrc\\a.cpp","limit":15}`}}},
	{name: "dsml ascii bars, self-closing invoke", section: `<|DSML|tool_calls><|DSML|invoke name="list_files"/></|DSML|tool_calls>`,
		calls: []wantCall{{"list_files", `{}`}}},
	{name: "dsml untyped and non-JSON string=false", section: "<｜DSML｜function_calls><｜DSML｜invoke name=\"get_weather\">" +
		"<｜DSML｜parameter name=\"city\" string=\"false\">Paris</｜DSML｜parameter>" +
		"<｜DSML｜parameter name=\"days\">4</｜DSML｜parameter>" +
		"<｜DSML｜parameter name=\"flag\">true</｜DSML｜parameter>" +
		"<｜DSML｜parameter string=\"true\" name=\"n\">\n2\n</｜DSML｜parameter>" +
		"</｜DSML｜invoke></｜DSML｜function_calls>",
		calls: []wantCall{{"get_weather", `{"city":"Paris","days":4,"flag":true,"n":"\n2\n"}`}}},

	// f. Kimi K2.
	{name: "kimi", section: kimi, after: "<|im_end|>",
		calls: []wantCall{{"get_weather", `{"city":"Beijing"}`}, {"search", `{"query":"x"}`}}},
	{name: "kimi white space, no namespace", before: "Sure. ", section: "<|tool_calls_section_begin|>\n <|tool_call_begin|> search:2 <|tool_call_argument_begin|> {} <|tool_call_end|>\n<|tool_calls_section_end|>",
		calls: []wantCall{{"search", `{}`}}},

	// Nothing found: no markup, or a section that is malformed or cut short.
	{name: "plain text", before: "plain <b>text</b> with <tags> and <|im_end|>"},
	{name: "partial opener", before: "text <tool_c"},
	{name: "prose mention", before: "Use <tool_call> tags to call tools."},
	{name: "prose first, good markup later", before: "The <tool_call> tag: <tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>"},
	{name: "hermes unterminated block", before: "<tool_call>\n{\"name\": \"x\", \"arguments\": {\"a\": 1}}\n"},
	{name: "hermes truncated json", before: "<tool_call>\n{\"name\": \"x\", \"arguments\": {\"a\": 1}\n</tool_call>"},
	{name: "hermes no name", before: `<tool_call>{"arguments": {}}</tool_call>`},
	{name: "hermes array arguments", before: `<tool_call>{"name": "x", "arguments": [1]}</tool_call>`},
	{name: "hermes string arguments not an object", before: `<tool_call>{"name": "x", "arguments": "not json"}</tool_call>`},
	{name: "hermes name with space", before: `<tool_call>{"name": "has space", "arguments": {}}</tool_call>`},
	{name: "hermes second block cut short", before: hermesWeather + "\n<tool_call>\n{\"name\": \"search\", \"argu"},
	{name: "empty block", before: "<tool_call></tool_call>"},
	{name: "glm value unterminated", before: "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1\n</tool_call>"},
	{name: "glm key without value", before: "<tool_call>f\n<arg_key>a</arg_key>\n</tool_call>"},
	{name: "glm text between pairs", before: "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value>junk</tool_call>"},
	{name: "qwen missing function end", before: "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</tool_call>"},
	{name: "qwen missing parameter end", before: "<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>"},
	{name: "qwen text between parameters", before: "<tool_call><function=f>junk<parameter=a>1</parameter></function></tool_call>"},
	{name: "qwen missing tool_call end", before: "<tool_call>\n<function=f>\n</function>\n"},
	{name: "deepseek no section end", before: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>"},
	{name: "deepseek empty section", before: "<｜tool▁calls▁begin｜><｜tool▁calls▁end｜>"},
	{name: "deepseek v3 unclosed fence", before: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
	{name: "deepseek arguments not an object", before: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>[1]<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
	{name: "deepseek bare call cut short", before: "x <｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\":"},
	{name: "dsml no section end", before: "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n"},
	{name: "dsml closed by the other block name", before: "<｜DSML｜function_calls><｜DSML｜invoke name=\"f\"></｜DSML｜invoke></｜DSML｜tool_calls>"},
	{name: "dsml mixed bars", before: "<｜DSML｜tool_calls><|DSML|invoke name=\"f\"></|DSML|invoke></｜DSML｜tool_calls>"},
	{name: "dsml empty section", before: "<｜DSML｜function_calls>\n</｜DSML｜function_calls>"},
	{name: "dsml invoke without name", before: "<｜DSML｜tool_calls><｜DSML｜invoke></｜DSML｜invoke></｜DSML｜tool_calls>"},
	{name: "dsml parameter unterminated", before: "<｜DSML｜tool_calls><｜DSML｜invoke name=\"f\"><｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜invoke></｜DSML｜tool_calls>"},
	{name: "kimi no section end", before: "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|>"},
	{name: "kimi arguments not an object", before: "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>\"x\"<|tool_call_end|><|tool_calls_section_end|>"},
	{name: "kimi empty name", before: "<|tool_calls_section_begin|><|tool_call_begin|>:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>"},
}

func TestExtractMarkup(t *testing.T) {
	for _, c := range markupCases {
		t.Run(c.name, func(t *testing.T) {
			text := []byte(c.text())
			before, calls, after, found := extractMarkup(text, testParamType)
			if found != (c.section != "") {
				t.Fatalf("found = %v", found)
			}
			if !found {
				if !bytes.Equal(before, text) || calls != nil || after != nil {
					t.Fatalf("not found, but before=%q calls=%v after=%q", before, calls, after)
				}
				return
			}
			if string(before) != c.before || string(after) != c.after {
				t.Fatalf("before=%q after=%q, want %q and %q", before, after, c.before, c.after)
			}
			checkCalls(t, calls, c.calls)
		})
	}
}

func checkCalls(t *testing.T, got []leakedCall, want []wantCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d calls, want %d: %q", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Name != w.name {
			t.Errorf("call %d: name %q, want %q", i, got[i].Name, w.name)
		}
		var g, e map[string]any
		if err := json.Unmarshal(got[i].Args, &g); err != nil {
			t.Fatalf("call %d: args %q are not a JSON object: %v", i, got[i].Args, err)
		}
		if err := json.Unmarshal([]byte(w.args), &e); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, e) {
			t.Errorf("call %d: args %s, want %s", i, got[i].Args, w.args)
		}
	}
}

// TestExtractMarkupArgsOwned checks that the calls do not share memory
// with the text, which a stream reuses.
func TestExtractMarkupArgsOwned(t *testing.T) {
	for _, s := range []string{hermesWeather, dsV31, kimi, dsV3} {
		text := []byte(s)
		_, calls, _, found := extractMarkup(text, nil)
		if !found {
			t.Fatalf("%q not found", s)
		}
		want := make([]string, len(calls))
		for i, c := range calls {
			want[i] = string(c.Args)
		}
		for i := range text {
			text[i] = 'x'
		}
		for i, c := range calls {
			if string(c.Args) != want[i] {
				t.Fatalf("args changed with the text: %q", c.Args)
			}
		}
	}
}

func TestMarkupTypedValue(t *testing.T) {
	cases := []struct{ typ, raw, want string }{
		{"string", "\nline\n", `"line"`},
		{"string", "\n\nx\n\n", `"\nx\n"`},
		{"string", "\r\nx\r\n", `"x"`},
		{"string", "42", `"42"`},
		{"string", ` {"a":1} `, `" {\"a\":1} "`},
		{"integer", " 42 ", `42`},
		{"integer", "\n42\n", `42`},
		{"integer", "4 2", `"4 2"`},
		{"integer", `"42"`, `"42"`},
		{"number", "007", `"007"`},
		{"number", "-1.5e3", `-1.5e3`},
		{"boolean", "true", `true`},
		{"boolean", "yes", `"yes"`},
		{"object", `{"a": [1]}`, `{"a": [1]}`},
		{"array", "[1,", `"[1,"`},
		{"integer", "", `""`},
		{"", `{"a":1}`, `{"a":1}`},
		{"", "[]", `[]`},
		{"", "null", `null`},
		{"", "false", `false`},
		{"", "12", `12`},
		{"", `"q"`, `"\"q\""`},
		{"", "hello", `"hello"`},
		{"", "\nhello\n", `"hello"`},
		{"", "", `""`},
		{"", "tab\there \"q\" \\", `"tab\there \"q\" \\"`},
	}
	for _, c := range cases {
		got := appendTypedValue(nil, c.typ, []byte(c.raw))
		if string(got) != c.want {
			t.Errorf("%s %q: got %s, want %s", c.typ, c.raw, got, c.want)
		}
		if !json.Valid(got) {
			t.Errorf("%s %q: %s is not JSON", c.typ, c.raw, got)
		}
	}
}

func TestHoldFrom(t *testing.T) {
	cases := []struct {
		text string
		want int
	}{
		{"", 0},
		{"hello", 5},
		{"hello <", 6},
		{"hello <tool_c", 6},
		{"a <to", 2},
		{"a <tool_call", 2},
		{"<tool_call>{", 0},
		{"x <tool_call> y", 2},
		{"x <｜", 2},
		{"x <\xef", 2},
		{"x <｜tool▁call", 2},
		{"x <｜tool▁calls▁begin｜><｜tool", 2},
		{"x <|DSML|fu", 2},
		{"x <|tool_calls_sec", 2},
		{"x <|tool_call_begin|>", 21}, // not an opener, and too long to become one
		{"a < b", 5},
		{"<toolbox>", 9},
		{"<b>bold</b> <tool", 12},
		{"< <tool_call> <tool_call>", 2},
		{"<tool_c <｜DSML｜tool_calls>", 8},
	}
	for _, c := range cases {
		if got := holdFrom([]byte(c.text)); got != c.want {
			t.Errorf("holdFrom(%q) = %d, want %d", c.text, got, c.want)
		}
	}
}

// holdTexts are the texts the hold is tested on: every markup case, and
// texts with '<' that are not markup.
func holdTexts() []string {
	var ts []string
	for _, c := range markupCases {
		ts = append(ts, c.text())
	}
	return append(ts,
		"",
		"<",
		"a <b> c < d <tool <｜ x",
		"ends with a partial opener <｜DSML｜tool",
		"ends with a lone <",
		"<tool_c<tool_ca<tool_cal<tool_call",
		"unicode ｜ ▁ 杭州 <｜end▁of▁sentence｜>",
	)
}

// feedAll feeds text in the chunks split gives and returns what was
// released, the held section and what flush returned.
func feedAll(t *testing.T, h *markupHold, text []byte, cuts []int) (released, section, rest []byte) {
	t.Helper()
	prev := 0
	for _, c := range append(cuts, len(text)) {
		r, holding := h.feed(text[prev:c])
		released = append(released, r...)
		if holding != (len(h.held) > 0) {
			t.Fatalf("holding = %v with %d bytes held", holding, len(h.held))
		}
		prev = c
	}
	section = bytes.Clone(h.section())
	rest = bytes.Clone(h.flush())
	return released, section, rest
}

// checkHold checks one feeding of text against holdFrom on the whole
// text: the hold must release exactly what precedes the first opener (or
// partial opener), and hold the rest.
func checkHold(t *testing.T, text []byte, cuts []int) {
	t.Helper()
	var h markupHold
	released, section, rest := feedAll(t, &h, text, cuts)
	p := holdFrom(text)
	_, o := findOpener(text)
	if string(released) != string(text[:p]) {
		t.Fatalf("cuts %v: released %q, want %q", cuts, released, text[:p])
	}
	if o != nil {
		if string(section) != string(text[p:]) || rest != nil {
			t.Fatalf("cuts %v: section %q rest %q, want section %q", cuts, section, rest, text[p:])
		}
	} else if section != nil || string(rest) != string(text[p:]) {
		t.Fatalf("cuts %v: section %q rest %q, want rest %q", cuts, section, rest, text[p:])
	}
	// The hold is ready for the next part.
	if r, holding := h.feed([]byte("next")); string(r) != "next" || holding {
		t.Fatalf("after flush: %q %v", r, holding)
	}
}

func TestMarkupHoldSplits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range holdTexts() {
		text := []byte(s)
		// One byte at a time.
		var cuts []int
		for i := 1; i < len(text); i++ {
			cuts = append(cuts, i)
		}
		checkHold(t, text, cuts)
		// Whole, and split in two at every byte.
		for i := 0; i <= len(text); i++ {
			checkHold(t, text, []int{i})
		}
		// Random chunks, empty ones included.
		for range 50 {
			var cuts []int
			for i := 0; i < len(text); {
				i += rng.IntN(12)
				cuts = append(cuts, min(i, len(text)))
			}
			checkHold(t, text, cuts)
		}
	}
}

// TestMarkupHoldSection checks that the held section is exactly the markup
// (and what follows it in the part), and that extractMarkup reads the same
// calls from it as from the whole text.
func TestMarkupHoldSection(t *testing.T) {
	for _, c := range markupCases {
		if c.section == "" {
			continue
		}
		text := []byte(c.text())
		for _, n := range []int{1, 3, 64} {
			var h markupHold
			var released []byte
			for i := 0; i < len(text); i += n {
				r, _ := h.feed(text[i:min(i+n, len(text))])
				released = append(released, r...)
			}
			sec := h.section()
			if string(released) != c.before || string(sec) != c.section+c.after {
				t.Fatalf("%s: released %q section %q", c.name, released, sec)
			}
			before, calls, after, found := extractMarkup(sec, testParamType)
			if !found || len(before) != 0 || string(after) != c.after {
				t.Fatalf("%s: from the section: found=%v before=%q after=%q", c.name, found, before, after)
			}
			checkCalls(t, calls, c.calls)
			if rest := h.flush(); rest != nil {
				t.Fatalf("%s: flush after a section returned %q", c.name, rest)
			}
		}
	}
}

func TestMarkupHoldMax(t *testing.T) {
	text := []byte("hi " + hermesWeather + " bye <tool_call>")
	for _, n := range []int{1, 5, len(text)} {
		h := markupHold{max: 40}
		var released []byte
		for i := 0; i < len(text); i += n {
			r, _ := h.feed(text[i:min(i+n, len(text))])
			released = append(released, r...)
		}
		if h.section() != nil {
			t.Fatalf("chunk %d: a section is held past the bound", n)
		}
		released = append(released, h.flush()...)
		if string(released) != string(text) {
			t.Fatalf("chunk %d: released %q", n, released)
		}
	}
	// The bound applies from the next part on again.
	h := markupHold{max: 40}
	h.feed(text)
	h.flush()
	if r, holding := h.feed([]byte("a <tool_call>")); string(r) != "a " || !holding {
		t.Fatalf("next part: %q %v", r, holding)
	}
}

func TestMarkupHoldAllocs(t *testing.T) {
	var h markupHold
	delta := []byte("plain text without markup, and a < b.")
	if n := testing.AllocsPerRun(100, func() { h.feed(delta) }); n != 0 {
		t.Errorf("feed allocates %v times on plain text", n)
	}
}

// TestMarkupLinear runs inputs that would take quadratic time if a parse
// or a hold rescanned text: a megabyte each.
func TestMarkupLinear(t *testing.T) {
	const n = 1 << 20
	inputs := []string{
		strings.Repeat("<", n),
		strings.Repeat("<tool_call>x</tool_call>\n", n/25) + "<tool_call>x",
		strings.Repeat("<tool_call>x", n/12),
		"<tool_call>" + strings.Repeat("f<arg_key>", n/10),
		"<tool_call>f" + strings.Repeat("<arg_key>a</arg_key><arg_value>1</arg_value>", n/45) + "</tool_cal",
		"<｜DSML｜tool_calls>" + strings.Repeat("<｜DSML｜invoke name=\"f\"></｜DSML｜invoke>", n/40),
		"<tool_call>{\"name\":\"f\",\"arguments\":{\"a\":\"" + strings.Repeat("x", n),
		strings.Repeat("<tool_c", n/7),
		strings.Repeat("<｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>", n/60) + "<｜tool▁call▁begin｜>",
	}
	for _, in := range inputs {
		text := []byte(in)
		extractMarkup(text, testParamType)
		holdFrom(text)
		var h markupHold
		for i := range text {
			h.feed(text[i : i+1])
		}
		h.flush()
	}
}
