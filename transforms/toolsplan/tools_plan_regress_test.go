package toolsplan

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// Regression tests for the review of tools_plan and the Responses call
// tracker: one test per finding, each asserting the behaviour the review
// asked for, against expectations written out by hand.

// --- helpers -------------------------------------------------------------------

// rgOK runs the request phase and wants no error, a body that is valid
// JSON, and that body equal to want.
func rgOK(t *testing.T, p transforms.Protocol, rules, body, want string) *transforms.Exchange {
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

// rgErr wants a 400 with exactly code, param and message, and no body for
// the upstream.
func rgErr(t *testing.T, p transforms.Protocol, rules, body, code, param, msg string) {
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

// rgResponse restores an upstream JSON response on x and wants valid JSON
// equal to want.
func rgResponse(t *testing.T, x *transforms.Exchange, body, want string) {
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

// rgEv is one client-side SSE event as the tracker writes it.
func rgEv(typ string, seq int, rest string) string {
	return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\",\"sequence_number\":" + transformtest.Itoa(seq) + rest + "}\n\n"
}

// rgValidEvents checks every data payload of a stream is valid JSON.
func rgValidEvents(t *testing.T, stream string) {
	t.Helper()
	for _, line := range strings.Split(stream, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && !json.Valid([]byte(d)) {
			t.Fatalf("event data is not valid JSON: %s", d)
		}
	}
}

// --- 1: a fallback call's history keeps the built-in's name ----------------------

// TestRegressFallbackHistoryKeepsBuiltinName: turn 1 gave the client a
// shell call whose arguments did not fit shell_call as a function_call
// named "shell"; on turn 2 that call is in the history while the built-in
// is still declared. It is the built-in's own call, not a second tool of
// that name: no conflict, and it goes upstream as it is.
func TestRegressFallbackHistoryKeepsBuiltinName(t *testing.T) {
	rules := tpProfile("function_only")
	t.Run("responses shell", func(t *testing.T) {
		rgOK(t, transforms.ProtocolResponses, rules,
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
		rgOK(t, transforms.ProtocolChat, rules,
			`{"model":"m","tools":[{"type":"local_shell"}],"messages":[{"role":"user","content":"list"},`+
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"local_shell","arguments":"bun test"}}]},`+
				`{"role":"tool","tool_call_id":"c1","content":"ok"}]}`,
			`{"model":"m","tools":[`+tpDegradedChat("local_shell", "local_shell")+`],"messages":[{"role":"user","content":"list"},`+
				`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"local_shell","arguments":"bun test"}}]},`+
				`{"role":"tool","tool_call_id":"c1","content":"ok"}]}`)
	})
	const conflict = `tools "shell" and "shell shell" both map to the upstream name "shell" under ^[a-zA-Z0-9_-]{1,64}$; rename one of them`
	t.Run("a declared function named shell next to the built-in is still a conflict", func(t *testing.T) {
		rgErr(t, transforms.ProtocolResponses, rules, `{"tools":[{"type":"shell"},{"type":"function","name":"shell","parameters":{}}]}`,
			"tool_name_conflict", "tools", conflict)
		rgErr(t, transforms.ProtocolResponses, rules, `{"tools":[{"type":"function","name":"shell","parameters":{}},{"type":"shell"}],"input":[`+
			`{"type":"function_call","call_id":"c1","name":"shell","arguments":"bun test"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`,
			"tool_name_conflict", "tools", conflict)
	})
}

// --- 2: with native namespaces, names are unique per namespace ------------------

// TestRegressNativeNamespacesScopeNames: two namespaces may each have a
// function of one name; a name needing repair is repaired the same way in
// both, without a hash, and calls come back in their own namespace.
func TestRegressNativeNamespacesScopeNames(t *testing.T) {
	rules := tpRules(`{"profile":"function_only","namespaces":"native"}`)
	t.Run("same valid name in two namespaces passes", func(t *testing.T) {
		body := `{"model":"m","tools":[{"type":"namespace","name":"n1","description":"one","tools":[{"type":"function","name":"search","parameters":{}}]},` +
			`{"type":"namespace","name":"n2","description":"two","tools":[{"type":"function","name":"search","parameters":{}}]}],` +
			`"input":[{"type":"function_call","call_id":"h1","namespace":"n2","name":"search","arguments":"{}"}]}`
		rgOK(t, transforms.ProtocolResponses, rules, body, body)
	})
	t.Run("same repaired name in two namespaces, no hash", func(t *testing.T) {
		x := rgOK(t, transforms.ProtocolResponses, rules,
			`{"model":"m","tools":[{"type":"namespace","name":"n1","tools":[{"type":"function","name":"search.x","parameters":{}}]},`+
				`{"type":"namespace","name":"n2","tools":[{"type":"function","name":"search.x","parameters":{}}]}],`+
				`"input":[{"type":"function_call","call_id":"h1","namespace":"n2","name":"search.x","arguments":"{}"},{"type":"function_call_output","call_id":"h1","output":"r"}]}`,
			`{"model":"m","tools":[{"type":"namespace","name":"n1","tools":[{"type":"function","name":"search_x","parameters":{}}]},`+
				`{"type":"namespace","name":"n2","tools":[{"type":"function","name":"search_x","parameters":{}}]}],`+
				`"input":[{"type":"function_call","call_id":"h1","namespace":"n2","name":"search_x","arguments":"{}"},{"type":"function_call_output","call_id":"h1","output":"r"}]}`)
		rgResponse(t, x,
			`{"id":"r","output":[{"type":"function_call","id":"fc_1","call_id":"c1","namespace":"n1","name":"search_x","arguments":"{\"q\":1}"},`+
				`{"type":"function_call","id":"fc_2","call_id":"c2","namespace":"n2","name":"search_x","arguments":"{\"q\":2}"}]}`,
			`{"id":"r","output":[{"type":"function_call","id":"fc_1","call_id":"c1","namespace":"n1","name":"search.x","arguments":"{\"q\":1}"},`+
				`{"type":"function_call","id":"fc_2","call_id":"c2","namespace":"n2","name":"search.x","arguments":"{\"q\":2}"}]}`)
	})
}

// --- 3: a bare name shared by namespaces is an ambiguous choice -----------------

// TestRegressAmbiguousBareChoice: a choice naming, by its name alone, a
// tool that two flattened namespaces have is a 400 naming both, the same
// one every time; a name only one namespace has resolves to its tool.
func TestRegressAmbiguousBareChoice(t *testing.T) {
	rules := tpProfile("function_only")
	const msg = `tool_choice names "get" without a namespace, and the namespaces n1, n2 each have a tool of that name`
	for _, tools := range []string{
		`"tools":[{"type":"namespace","name":"n1","tools":[{"type":"function","name":"get"}]},{"type":"namespace","name":"n2","tools":[{"type":"function","name":"get"}]}]`,
		`"tools":[{"type":"namespace","name":"n2","tools":[{"type":"function","name":"get"}]},{"type":"function","name":"other"},{"type":"namespace","name":"n1","tools":[{"type":"function","name":"get"}]}]`,
	} {
		for i := 0; i < 50; i++ {
			rgErr(t, transforms.ProtocolResponses, rules, `{"model":"m",`+tools+`,"tool_choice":{"type":"function","name":"get"}}`,
				"ambiguous_tool_choice", "tool_choice", msg)
			rgErr(t, transforms.ProtocolResponses, rules, `{"model":"m",`+tools+`,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"other"},{"type":"function","name":"get"}]}}`,
				"ambiguous_tool_choice", "tool_choice.tools[1]", msg)
		}
	}
	const two = `"tools":[{"type":"namespace","name":"n1","tools":[{"type":"function","name":"get"},{"type":"function","name":"put"}]},{"type":"namespace","name":"n2","tools":[{"type":"function","name":"get"}]}]`
	const flat = `"tools":[{"type":"function","name":"n1__get"},{"type":"function","name":"n1__put"},{"type":"function","name":"n2__get"}]`
	t.Run("a bare name one namespace has", func(t *testing.T) {
		rgOK(t, transforms.ProtocolResponses, rules, `{"model":"m",`+two+`,"tool_choice":{"type":"function","name":"put"}}`,
			`{"model":"m",`+flat+`,"tool_choice":{"type":"function","name":"n1__put"}}`)
	})
	t.Run("a namespaced choice of the shared name", func(t *testing.T) {
		rgOK(t, transforms.ProtocolResponses, rules, `{"model":"m",`+two+`,"tool_choice":{"type":"function","namespace":"n2","name":"get"}}`,
			`{"model":"m",`+flat+`,"tool_choice":{"type":"function","name":"n2__get"}}`)
	})
	t.Run("a top-level function of the shared name is not ambiguous", func(t *testing.T) {
		rgOK(t, transforms.ProtocolResponses, rules,
			`{"model":"m","tools":[{"type":"function","name":"get"},{"type":"namespace","name":"n1","tools":[{"type":"function","name":"get"}]},{"type":"namespace","name":"n2","tools":[{"type":"function","name":"get"}]}],"tool_choice":{"type":"function","name":"get"}}`,
			`{"model":"m","tools":[{"type":"function","name":"get"},{"type":"function","name":"n1__get"},{"type":"function","name":"n2__get"}],"tool_choice":{"type":"function","name":"get"}}`)
	})
}

// --- 4: bare-name choices are indexed, not searched ---------------------------------

// TestRegressManyBareAllowedTools: 8000 namespaced tools and an
// allowed_tools entry by bare name for each plan (the old search was
// quadratic); every entry resolves to its own tool.
func TestRegressManyBareAllowedTools(t *testing.T) {
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
		rgOK(t, transforms.ProtocolResponses, tpRules(`{"profile":"function_only","max_tools":0}`), body,
			`{"model":"m","tools":[`+strings.Join(flatTools, ",")+`],"tool_choice":"required"}`)
	})
	t.Run("openai_chat renames the entries", func(t *testing.T) {
		rgOK(t, transforms.ProtocolResponses, tpRules(`{"profile":"openai_chat","max_tools":0}`), body,
			`{"model":"m","tools":[`+strings.Join(flatTools, ",")+`],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[`+strings.Join(flatEntries, ",")+`]}}`)
	})
}

// --- 5: loaded tools honour an imitated choice ---------------------------------------

// TestRegressLoadedToolsHonourImitatedChoice: kimi has no named choice, so
// only the chosen tool is sent, with auto; a tool an earlier search loaded
// is not sent alongside it.
func TestRegressLoadedToolsHonourImitatedChoice(t *testing.T) {
	x := rgOK(t, transforms.ProtocolResponses, tpProfile("kimi"),
		`{"model":"m","tools":[{"type":"tool_search","execution":"client"},{"type":"function","name":"fff","parameters":{}}],"tool_choice":{"type":"function","name":"fff"},`+
			`"input":[{"type":"tool_search_call","call_id":"c1","execution":"client","arguments":{"query":"q"}},`+
			`{"type":"tool_search_output","call_id":"c1","execution":"client","tools":[{"type":"function","name":"lt1","parameters":{}}]}]}`,
		`{"model":"m","tools":[{"type":"function","name":"fff","parameters":{}}],"tool_choice":"auto",`+
			`"input":[{"type":"function_call","call_id":"c1","name":"tool_search","arguments":`+transformtest.JSONString(`{"query":"q"}`)+`},`+
			`{"type":"function_call_output","call_id":"c1","output":`+transformtest.JSONString(`[{"type":"function","name":"lt1","parameters":{}}]`)+`}]}`)
	tpDecided(t, x, "fff", "degrade_tool_choice", "a named choice is not supported without thinking: only this tool is sent, with auto")
}

// --- 6: loaded tools land without a top-level tools list -----------------------------

// TestRegressLoadedToolsWithoutToolsList: tool_search declared only in an
// additional_tools item; the tool an earlier search loaded goes into a
// top-level tools list, created when the request has none.
func TestRegressLoadedToolsWithoutToolsList(t *testing.T) {
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
			x := rgOK(t, transforms.ProtocolResponses, rules, tc.body, want+`}`)
			tpDecided(t, x, "lt", "load", "loaded by an earlier tool_search")
		})
	}
}

// --- 7: loaded namespaces kept where the upstream has them ----------------------------

// TestRegressLoadedNamespaceKeptNative: with native namespaces a loaded
// namespace is appended as a namespace, its tools inside, without
// defer_loading, since tool_search is degraded.
func TestRegressLoadedNamespaceKeptNative(t *testing.T) {
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
			x := rgOK(t, transforms.ProtocolResponses, rules,
				`{"model":"m","tools":[{"type":"tool_search","execution":"client"}],"input":[`+
					`{"type":"tool_search_output","call_id":"c1","execution":"client","tools":[`+tc.loaded+`]}]}`,
				`{"model":"m","tools":[`+tpDegraded("tool_search", "tool_search")+`,`+tc.want+`],"input":[`+
					`{"type":"function_call_output","call_id":"c1","output":`+transformtest.JSONString(`[`+tc.loaded+`]`)+`}]}`)
			tpDecided(t, x, "mcp__x.lt", "load", "loaded by an earlier tool_search")
		})
	}
}

// --- 8: a native tool of a flattened namespace is sent without it ------------------

// TestRegressNativeToolInFlattenedNamespace: openai_chat keeps custom tools
// but has no namespaces: the custom tool is sent as it is, outside its
// namespace, the function flattened, and the decision says so.
func TestRegressNativeToolInFlattenedNamespace(t *testing.T) {
	x := rgOK(t, transforms.ProtocolResponses, tpProfile("openai_chat"),
		`{"model":"m","tools":[{"type":"namespace","name":"ns","description":"d","tools":[{"type":"custom","name":"raw","description":"raw text"},{"type":"function","name":"fn","parameters":{}}]}]}`,
		`{"model":"m","tools":[{"type":"custom","name":"raw","description":"raw text"},{"type":"function","name":"ns__fn","parameters":{}}]}`)
	tpDecided(t, x, "ns.raw", "keep", "native on this upstream, which has no namespaces: sent and called back without its namespace")
	tpDecided(t, x, "ns.fn", "flatten", "sent as ns__fn: the upstream has no namespaces")
}

// --- 9: per-type lines override native_types ------------------------------------------

// TestRegressTypeLinesOverrideNative: a type's own line wins over the
// preset and over native_types, in JSON and in the Caddyfile.
func TestRegressTypeLinesOverrideNative(t *testing.T) {
	body := `{"model":"m","tools":[{"type":"custom","name":"raw","description":"r"},{"type":"function","name":"f"}]}`
	degraded := `{"model":"m","tools":[{"type":"function","name":"raw","description":"r","parameters":` + genericParams + `,"strict":false},{"type":"function","name":"f"}]}`
	const rejected = `tool type "custom" at tools[0] is not supported by the upstream (tools_plan profile %s)`
	t.Run("json degrade over the preset", func(t *testing.T) {
		rgOK(t, transforms.ProtocolResponses, tpRules(`{"profile":"openai_chat","types":{"custom":"degrade"}}`), body, degraded)
	})
	t.Run("json degrade over native_types", func(t *testing.T) {
		rgOK(t, transforms.ProtocolResponses, tpRules(`{"profile":"function_only","native_types":["custom"],"types":{"custom":"degrade"}}`), body, degraded)
	})
	t.Run("json reject", func(t *testing.T) {
		rgErr(t, transforms.ProtocolResponses, tpRules(`{"profile":"openai_chat","types":{"custom":"reject"}}`), body,
			"unsupported_tool", "tools[0]", fmt.Sprintf(rejected, "openai_chat"))
		rgErr(t, transforms.ProtocolResponses, tpRules(`{"profile":"openai_chat","native_types":["custom"],"types":{"custom":"reject"}}`), body,
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
			rgErr(t, transforms.ProtocolResponses, tpRules(string(cfg)), body, "unsupported_tool", "tools[0]", fmt.Sprintf(rejected, "openai_chat"))
		})
	}
	t.Run("caddyfile degrade", func(t *testing.T) {
		tp, err := tpCaddyfile(t, "tools_plan {\n\tprofile openai_chat\n\tcustom degrade\n}")
		if err != nil {
			t.Fatal(err)
		}
		cfg, _ := json.Marshal(tp)
		rgOK(t, transforms.ProtocolResponses, tpRules(string(cfg)), body, degraded)
	})
}

// --- 10: stray list entries are dropped ------------------------------------------------

// TestRegressStrayListEntriesDropped: a null (or any non-object) in the
// tools list is not sent on, and the body stays valid JSON.
func TestRegressStrayListEntriesDropped(t *testing.T) {
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
		t.Run(tc.name, func(t *testing.T) { rgOK(t, transforms.ProtocolResponses, rules, tc.body, tc.want) })
	}
}

// --- 11: none empties additional_tools lists ------------------------------------------

// TestRegressNoneEmptiesAdditionalTools: glm has no tool_choice none, so no
// tools are sent: the top-level list and tool_choice go, and the lists of
// additional_tools items are emptied.
func TestRegressNoneEmptiesAdditionalTools(t *testing.T) {
	rgOK(t, transforms.ProtocolResponses, tpProfile("glm"),
		`{"model":"m","tool_choice":"none","tools":[{"type":"function","name":"a"}],"input":[`+
			`{"type":"message","role":"user","content":"hi"},`+
			`{"type":"additional_tools","role":"developer","tools":[{"type":"local_shell"},{"type":"namespace","name":"ns","tools":[{"type":"function","name":"x"}]}]}]}`,
		`{"model":"m","input":[{"type":"message","role":"user","content":"hi"},{"type":"additional_tools","role":"developer","tools":[]}]}`)
	// With no top-level tools at all.
	rgOK(t, transforms.ProtocolResponses, tpProfile("glm"),
		`{"tool_choice":"none","input":[{"type":"additional_tools","tools":[{"type":"function","name":"b.c"}]}]}`,
		`{"input":[{"type":"additional_tools","tools":[]}]}`)
}

// --- 12: held calls sharing a call id ----------------------------------------------

// TestRegressRepeatedCallIDHeldCalls: two held local_shell calls that the
// upstream gave one call_id, their events interleaved: each is delivered
// with its own command at its own output_index, and response.completed
// lists each as its own item.
func TestRegressRepeatedCallIDHeldCalls(t *testing.T) {
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
			want: rgEv("response.created", 0, created) +
				rgEv("response.output_item.added", 1, `,"output_index":0,"item":`+aAdded) +
				rgEv("response.output_item.done", 2, `,"output_index":0,"item":`+a) +
				rgEv("response.output_item.added", 3, `,"output_index":1,"item":`+bAdded) +
				rgEv("response.output_item.done", 4, `,"output_index":1,"item":`+b) +
				rgEv("response.completed", 5, wantCompleted),
		},
		{
			name: "b finishes first",
			up:   append(append(append(append([]string{}, head...), doneB...), doneA...), completed),
			want: rgEv("response.created", 0, created) +
				rgEv("response.output_item.added", 1, `,"output_index":1,"item":`+bAdded) +
				rgEv("response.output_item.done", 2, `,"output_index":1,"item":`+b) +
				rgEv("response.output_item.added", 3, `,"output_index":0,"item":`+aAdded) +
				rgEv("response.output_item.done", 4, `,"output_index":0,"item":`+a) +
				rgEv("response.completed", 5, wantCompleted),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := transformtest.StreamCase(t, planRules, req, transformtest.SSE(renumber(tc.up)...))
			rgValidEvents(t, got)
			if got != tc.want {
				t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, tc.want)
			}
		})
	}
}

// --- 13: an empty finished argument string -------------------------------------------

// TestRegressEmptyFinishedArguments: a renamed function whose arguments
// streamed as deltas, while its done event and finished item carry
// "arguments":"": the client gets the streamed arguments in both, and in
// response.completed.
func TestRegressEmptyFinishedArguments(t *testing.T) {
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
	want := rgEv("response.created", 0, `,"response":{"id":"r","status":"in_progress","output":[]}`) +
		rgEv("response.output_item.added", 1, `,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"c1","name":"a.b"}`) +
		rgEv("response.function_call_arguments.delta", 2, `,"item_id":"fc_1","output_index":0,"delta":`+transformtest.JSONString(`{"path":`)) +
		rgEv("response.function_call_arguments.delta", 3, `,"item_id":"fc_1","output_index":0,"delta":`+transformtest.JSONString(`"a.txt"}`)) +
		rgEv("response.function_call_arguments.done", 4, `,"item_id":"fc_1","output_index":0,"arguments":`+transformtest.JSONString(args)) +
		rgEv("response.output_item.done", 5, `,"output_index":0,"item":`+fc) +
		rgEv("response.completed", 6, `,"response":{"id":"r","status":"completed","output":[`+fc+`]}`)
	got := transformtest.StreamCase(t, planRules, req, up)
	rgValidEvents(t, got)
	if got != want {
		t.Fatalf("stream mismatch\n--- got\n%s\n--- want\n%s", got, want)
	}
}

// --- 14: repaired first characters follow the rule ----------------------------------

// TestRegressRepairedFirstCharacter: with a rule whose first character
// must be a letter, a name starting with a character allowed nowhere is
// repaired with the rule's fill letter, not '_', and calls come back
// under the client's name.
func TestRegressRepairedFirstCharacter(t *testing.T) {
	const pattern = `^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`
	rules := tpRules(`{"profile":"function_only","name_pattern":"` + pattern + `"}`)
	x := rgOK(t, transforms.ProtocolResponses, rules,
		`{"model":"m","tools":[{"type":"function","name":".abc"},{"type":"function","name":"é"},{"type":"function","name":"_x"}]}`,
		`{"model":"m","tools":[{"type":"function","name":"tabc"},{"type":"function","name":"t"},{"type":"function","name":"t_x"}]}`)
	re := regexp.MustCompile(pattern)
	for _, n := range []string{"tabc", "t", "t_x"} {
		if !re.MatchString(n) {
			t.Errorf("%q does not match %s", n, pattern)
		}
	}
	tpDecided(t, x, ".abc", "rename", "sent as tabc: the upstream's names match "+pattern)
	tpDecided(t, x, "é", "rename", "sent as t: the upstream's names match "+pattern)
	rgResponse(t, x,
		`{"output":[{"type":"function_call","id":"fc_1","call_id":"c1","name":"tabc","arguments":"{}"},{"type":"function_call","id":"fc_2","call_id":"c2","name":"t","arguments":"{}"},{"type":"function_call","id":"fc_3","call_id":"c3","name":"t_x","arguments":"{}"}]}`,
		`{"output":[{"type":"function_call","id":"fc_1","call_id":"c1","name":".abc","arguments":"{}"},{"type":"function_call","id":"fc_2","call_id":"c2","name":"é","arguments":"{}"},{"type":"function_call","id":"fc_3","call_id":"c3","name":"_x","arguments":"{}"}]}`)
}

// tools and tool_choice both go, whatever their places among the other
// members: neighbours share a comma, which must go once.
func TestRegressRemoveToolsInEveryOrder(t *testing.T) {
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
