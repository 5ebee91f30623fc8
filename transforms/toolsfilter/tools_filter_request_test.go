package toolsfilter

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// The request side of tools_filter (tools_filter_request.go). LobeHub's
// ToolsEngine behaviours (tool-planning-peers.md §2.2 and §2.4) are
// re-expressed as our own: the reasons a tool is filtered, in order; no
// tools member at all rather than an empty one; defaults; duplicates. Then
// selectors, the bytes kept, tool_choice, and bodies an upstream would read
// differently from a naive scan: repeated members, escaped keys, deep
// nesting. Every expected body is written out by hand.

// upstreamToolNames decodes a body as an upstream does (encoding/json: the
// last of repeated keys wins) and returns the names of every tool it
// declares: top-level, inside namespaces at any depth, in Chat's legacy
// functions, and in additional_tools items.
func upstreamToolNames(t *testing.T, body []byte) []string {
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

// --- LobeHub's behaviours ------------------------------------------------------------------------

// TestToolsFilterReasons: every filtered tool is reported with its reason,
// in the order the request declares the tools; deny wins over allow; a
// tool without a name is selected by its type.
func TestToolsFilterReasons(t *testing.T) {
	tfRunCases(t, []tfCase{
		{
			name: "responses mixed",
			p:    transforms.ProtocolResponses,
			cfg:  `{"allow":["read_*","write_file","web_search"],"deny":["write_*"]}`,
			body: tfResp(`,"tool_choice":"auto"`, tfRead, tfWrite, tfDelete, tfDir, tfWeb),
			want: tfResp(`,"tool_choice":"auto"`, tfRead, tfDir, tfWeb),
			decisions: []transforms.Decision{
				{Tool: "write_file", Action: "drop", Reason: "denied"},
				{Tool: "delete_file", Action: "drop", Reason: "not_allowed"},
			},
		},
		{
			name: "chat mixed",
			p:    transforms.ProtocolChat,
			cfg:  `{"allow":["read_*","write_file"],"deny":["write_*"]}`,
			body: tfChat(`,"tool_choice":"auto"`, tfReadC, tfWriteC, tfDeleteC, tfDirC),
			want: tfChat(`,"tool_choice":"auto"`, tfReadC, tfDirC),
			decisions: []transforms.Decision{
				{Tool: "write_file", Action: "drop", Reason: "denied"},
				{Tool: "delete_file", Action: "drop", Reason: "not_allowed"},
			},
		},
		{
			name: "not_allowed before denied",
			p:    transforms.ProtocolResponses,
			cfg:  `{"allow":["read_file","write_file"],"deny":["write_file"]}`,
			body: tfResp(``, tfDelete, tfRead, tfWrite),
			want: tfResp(``, tfRead),
			decisions: []transforms.Decision{
				{Tool: "delete_file", Action: "drop", Reason: "not_allowed"},
				{Tool: "write_file", Action: "drop", Reason: "denied"},
			},
		},
	})
}

// TestToolsFilterAllFiltered: when no tool is left, tools, tool_choice and
// parallel_tool_calls go: never an empty list.
func TestToolsFilterAllFiltered(t *testing.T) {
	tfRunCases(t, []tfCase{
		{
			name: "responses denied",
			p:    transforms.ProtocolResponses,
			cfg:  `{"deny":["*"]}`,
			body: `{"model":"m","tools":[` + tfRead + `,` + tfWeb + `],"tool_choice":"auto","input":"x","parallel_tool_calls":false}`,
			want: `{"model":"m","input":"x"}`,
			decisions: []transforms.Decision{
				{Tool: "read_file", Action: "drop", Reason: "denied"},
				{Tool: "web_search", Action: "drop", Reason: "denied"},
				{Tool: "tools", Action: "drop", Reason: tfNoneLeft},
			},
		},
		{
			name: "chat not allowed",
			p:    transforms.ProtocolChat,
			cfg:  `{"allow":["nothing"]}`,
			body: tfChat(`,"tool_choice":"none","parallel_tool_calls":true`, tfReadC, tfWriteC),
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			decisions: []transforms.Decision{
				{Tool: "read_file", Action: "drop", Reason: "not_allowed"},
				{Tool: "write_file", Action: "drop", Reason: "not_allowed"},
				{Tool: "tools", Action: "drop", Reason: tfNoneLeft},
			},
		},
		{
			name: "an emptied namespace goes with the list",
			p:    transforms.ProtocolResponses,
			cfg:  `{"deny":["mcp/*","read_file"]}`,
			body: `{"model":"m","tools":[` + tfRead + `,` + tfNS + `],"tool_choice":"auto","input":"x"}`,
			want: `{"model":"m","input":"x"}`,
			decisions: []transforms.Decision{
				{Tool: "read_file", Action: "drop", Reason: "denied"},
				{Tool: "mcp", Action: "drop", Reason: "denied"},
				{Tool: "mcp/delete_issue", Action: "drop", Reason: "denied"},
				{Tool: "mcp/read_issue", Action: "drop", Reason: "denied"},
				{Tool: "tools", Action: "drop", Reason: tfNoneLeft},
			},
		},
		{
			name: "additional_tools are filtered when the top-level list goes",
			p:    transforms.ProtocolResponses,
			cfg:  `{"deny":["write_file"]}`,
			body: `{"model":"m","tools":[` + tfWrite + `],"tool_choice":"auto","input":[{"type":"message","role":"user","content":"hi"},{"type":"additional_tools","tools":[` + tfWrite + `,` + tfRead + `]}]}`,
			want: `{"model":"m","input":[{"type":"message","role":"user","content":"hi"},{"type":"additional_tools","tools":[` + tfRead + `]}]}`,
			decisions: []transforms.Decision{
				{Tool: "write_file", Action: "drop", Reason: "denied"},
				{Tool: "write_file", Action: "drop", Reason: "denied"},
				{Tool: "tools", Action: "drop", Reason: tfNoneLeft},
			},
		},
		{
			name:      "additional_tools are filtered beside a kept list",
			p:         transforms.ProtocolResponses,
			cfg:       `{"deny":["write_file"]}`,
			body:      `{"model":"m","tools":[` + tfRead + `],"input":[{"type":"additional_tools","tools":[` + tfNS + `,` + tfWrite + `]}]}`,
			want:      `{"model":"m","tools":[` + tfRead + `],"input":[{"type":"additional_tools","tools":[` + tfNS + `]}]}`,
			decisions: []transforms.Decision{{Tool: "write_file", Action: "drop", Reason: "denied"}},
		},
		{
			// The rule filtered nothing: the client's own empty list is
			// its business, and the body passes as it came.
			name:      "the client's empty list",
			p:         transforms.ProtocolResponses,
			cfg:       `{"deny":["x"]}`,
			body:      `{"model":"m","tools":[],"tool_choice":"auto","input":"x"}`,
			want:      `{"model":"m","tools":[],"tool_choice":"auto","input":"x"}`,
			decisions: nil,
		},
	})
}

// TestToolsFilterDefaults: defaults join the request in its own shape,
// unless it declares a tool of the same name; deny and allow apply to
// them; a Chat request gets no tool type Chat lacks.
func TestToolsFilterDefaults(t *testing.T) {
	added := func(n string) transforms.Decision {
		return transforms.Decision{Tool: n, Action: "add_default", Reason: "the request does not declare it"}
	}
	tfRunCases(t, []tfCase{
		{
			name:      "responses",
			p:         transforms.ProtocolResponses,
			cfg:       `{"defaults":[` + tfSearchDef + `]}`,
			body:      tfResp(`,"tool_choice":"auto"`, tfRead),
			want:      tfResp(`,"tool_choice":"auto"`, tfRead, tfSearchDef),
			decisions: []transforms.Decision{added("search")},
		},
		{
			name:      "responses default converted for chat",
			p:         transforms.ProtocolChat,
			cfg:       `{"defaults":[` + tfSearchDef + `]}`,
			body:      tfChat(``, tfReadC),
			want:      tfChat(``, tfReadC, tfSearchDefC),
			decisions: []transforms.Decision{added("search")},
		},
		{
			name:      "chat default converted for responses",
			p:         transforms.ProtocolResponses,
			cfg:       `{"defaults":[` + tfLookupDefC + `]}`,
			body:      tfResp(``, tfRead),
			want:      tfResp(``, tfRead, tfLookupDef),
			decisions: []transforms.Decision{added("lookup")},
		},
		{
			name:      "chat default on chat",
			p:         transforms.ProtocolChat,
			cfg:       `{"defaults":[` + tfLookupDefC + `]}`,
			body:      tfChat(``, tfReadC),
			want:      tfChat(``, tfReadC, tfLookupDefC),
			decisions: []transforms.Decision{added("lookup")},
		},
		{
			name:      "pretty default is sent compact",
			p:         transforms.ProtocolResponses,
			cfg:       `{"defaults":[ { "type" : "function", "name" : "search", "description":"Search the web", "parameters":{"type":"object","properties":{"q":{"type":"string"}}} } ]}`,
			body:      tfResp(``, tfRead),
			want:      tfResp(``, tfRead, tfSearchDef),
			decisions: []transforms.Decision{added("search")},
		},
		{
			name: "declared already",
			p:    transforms.ProtocolResponses,
			cfg:  `{"defaults":[` + tfSearchDef + `]}`,
			body: tfResp(``, tfRead, `{"type":"function","name":"search","description":"The client's own"}`),
		},
		{
			name: "declared already in chat",
			p:    transforms.ProtocolChat,
			cfg:  `{"defaults":[` + tfSearchDef + `]}`,
			body: tfChat(``, `{"type":"function","function":{"name":"search"}}`),
		},
		{
			name:      "a request without tools",
			p:         transforms.ProtocolResponses,
			cfg:       `{"defaults":[` + tfSearchDef + `,` + tfWeb + `]}`,
			body:      `{"model":"m","input":"hi"}`,
			want:      `{"model":"m","input":"hi","tools":[` + tfSearchDef + `,` + tfWeb + `]}`,
			decisions: []transforms.Decision{added("search"), added("web_search")},
		},
		{
			name:      "a chat request without tools",
			p:         transforms.ProtocolChat,
			cfg:       `{"defaults":[` + tfSearchDef + `]}`,
			body:      `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			want:      `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[` + tfSearchDefC + `]}`,
			decisions: []transforms.Decision{added("search")},
		},
		{
			name: "deny and allow apply",
			p:    transforms.ProtocolResponses,
			cfg:  `{"deny":["search"],"allow":["read_*","web_search"],"defaults":[` + tfSearchDef + `,` + tfLookupDefC + `,` + tfWeb + `]}`,
			body: tfResp(``, tfRead),
			want: tfResp(``, tfRead, tfWeb),
			decisions: []transforms.Decision{
				{Tool: "search", Action: "skip_default", Reason: "denied"},
				{Tool: "lookup", Action: "skip_default", Reason: "not_allowed"},
				added("web_search"),
			},
		},
		{
			name: "no web_search for chat",
			p:    transforms.ProtocolChat,
			cfg:  `{"defaults":[` + tfWeb + `]}`,
			body: tfChat(``, tfReadC),
			decisions: []transforms.Decision{
				{Tool: "web_search", Action: "skip_default", Reason: "incompatible"},
			},
		},
		{
			name: "a default keeps a list whose tools were all filtered",
			p:    transforms.ProtocolResponses,
			cfg:  `{"deny":["read_file"],"defaults":[` + tfSearchDef + `]}`,
			body: tfResp(`,"tool_choice":"required"`, tfRead),
			want: tfResp(`,"tool_choice":"required"`, tfSearchDef),
			decisions: []transforms.Decision{
				{Tool: "read_file", Action: "drop", Reason: "denied"},
				added("search"),
			},
		},
	})
}

// TestToolsFilterDuplicates: of two tools of one name the first is kept.
func TestToolsFilterDuplicates(t *testing.T) {
	tfRunCases(t, []tfCase{
		{
			name:      "responses",
			p:         transforms.ProtocolResponses,
			cfg:       `{}`,
			body:      tfResp(``, `{"type":"function","name":"read_file","description":"one"}`, tfWrite, `{"type":"function","name":"read_file","description":"two"}`),
			want:      tfResp(``, `{"type":"function","name":"read_file","description":"one"}`, tfWrite),
			decisions: []transforms.Decision{{Tool: "read_file", Action: "drop", Reason: "duplicate"}},
		},
		{
			name:      "chat",
			p:         transforms.ProtocolChat,
			cfg:       `{}`,
			body:      tfChat(``, `{"type":"function","function":{"name":"read_file","description":"one"}}`, tfWriteC, `{"type":"function","function":{"name":"read_file","description":"two"}}`),
			want:      tfChat(``, `{"type":"function","function":{"name":"read_file","description":"one"}}`, tfWriteC),
			decisions: []transforms.Decision{{Tool: "read_file", Action: "drop", Reason: "duplicate"}},
		},
		{
			name:      "two web searches",
			p:         transforms.ProtocolResponses,
			cfg:       `{}`,
			body:      tfResp(``, `{"type":"web_search","search_context_size":"low"}`, tfRead, `{"type":"web_search"}`),
			want:      tfResp(``, `{"type":"web_search","search_context_size":"low"}`, tfRead),
			decisions: []transforms.Decision{{Tool: "web_search", Action: "drop", Reason: "duplicate"}},
		},
		{
			name: "one name in and out of a namespace is no duplicate",
			p:    transforms.ProtocolResponses,
			cfg:  `{}`,
			body: tfResp(``, `{"type":"function","name":"read_issue"}`, tfNS),
		},
	})
}

// TestToolsFilterNames: bare selectors, type: selectors, namespace/name
// selectors and what they do to namespaces.
func TestToolsFilterNames(t *testing.T) {
	nsOnlyRead := `{"type":"namespace","name":"mcp","description":"MCP","tools":[{"type":"function","name":"read_issue","parameters":{"type":"object"}}]}`
	tfRunCases(t, []tfCase{
		{
			name:      "a nameless built-in by its type",
			p:         transforms.ProtocolResponses,
			cfg:       `{"deny":["local_shell"]}`,
			body:      tfResp(``, tfShell, tfWeb, `{"type":"function","name":"local_shell_x"}`),
			want:      tfResp(``, tfWeb, `{"type":"function","name":"local_shell_x"}`),
			decisions: []transforms.Decision{{Tool: "local_shell", Action: "drop", Reason: "denied"}},
		},
		{
			name: "type globs",
			p:    transforms.ProtocolResponses,
			cfg:  `{"deny":["type:web_search*"]}`,
			body: tfResp(``, tfWeb, `{"type":"web_search_preview","search_context_size":"low"}`, `{"type":"function","name":"web_search_helper"}`, tfShell),
			want: tfResp(``, `{"type":"function","name":"web_search_helper"}`, tfShell),
			decisions: []transforms.Decision{
				{Tool: "web_search", Action: "drop", Reason: "denied"},
				{Tool: "web_search_preview", Action: "drop", Reason: "denied"},
			},
		},
		{
			name:      "allow a type",
			p:         transforms.ProtocolResponses,
			cfg:       `{"allow":["type:function"]}`,
			body:      tfResp(``, tfRead, tfWeb, tfNS),
			want:      tfResp(``, tfRead, tfNS),
			decisions: []transforms.Decision{{Tool: "web_search", Action: "drop", Reason: "not_allowed"}},
		},
		{
			name:      "ns/glob inside a namespace",
			p:         transforms.ProtocolResponses,
			cfg:       `{"deny":["mcp/delete_*"]}`,
			body:      tfResp(``, tfRead, tfNS, `{"type":"function","name":"delete_issue"}`),
			want:      tfResp(``, tfRead, nsOnlyRead, `{"type":"function","name":"delete_issue"}`),
			decisions: []transforms.Decision{{Tool: "mcp/delete_issue", Action: "drop", Reason: "denied"}},
		},
		{
			name: "ns/* empties the namespace",
			p:    transforms.ProtocolResponses,
			cfg:  `{"deny":["mcp/*"]}`,
			body: tfResp(``, tfRead, tfNS),
			want: tfResp(``, tfRead),
			decisions: []transforms.Decision{
				{Tool: "mcp", Action: "drop", Reason: "denied"},
				{Tool: "mcp/delete_issue", Action: "drop", Reason: "denied"},
				{Tool: "mcp/read_issue", Action: "drop", Reason: "denied"},
			},
		},
		{
			name: "a bare glob reaches inside namespaces",
			p:    transforms.ProtocolResponses,
			cfg:  `{"deny":["delete_*"]}`,
			body: tfResp(``, tfDelete, tfNS, tfRead),
			want: tfResp(``, nsOnlyRead, tfRead),
			decisions: []transforms.Decision{
				{Tool: "delete_file", Action: "drop", Reason: "denied"},
				{Tool: "mcp/delete_issue", Action: "drop", Reason: "denied"},
			},
		},
		{
			name: "allow ns/glob",
			p:    transforms.ProtocolResponses,
			cfg:  `{"allow":["mcp/read_*","read_file"]}`,
			body: tfResp(``, tfRead, tfWrite, tfNS),
			want: tfResp(``, tfRead, nsOnlyRead),
			decisions: []transforms.Decision{
				{Tool: "write_file", Action: "drop", Reason: "not_allowed"},
				{Tool: "mcp/delete_issue", Action: "drop", Reason: "not_allowed"},
			},
		},
		{
			name:      "a namespace denied by its name",
			p:         transforms.ProtocolResponses,
			cfg:       `{"deny":["mcp"]}`,
			body:      tfResp(``, tfNS, tfRead),
			want:      tfResp(``, tfRead),
			decisions: []transforms.Decision{{Tool: "mcp", Action: "drop", Reason: "denied"}},
		},
		{
			name: "a namespace allowed by its name keeps its tools",
			p:    transforms.ProtocolResponses,
			cfg:  `{"allow":["mcp","read_file"]}`,
			body: tfResp(``, tfNS, tfRead),
		},
		{
			name: "a namespace none of whose tools is allowed",
			p:    transforms.ProtocolResponses,
			cfg:  `{"allow":["read_file"]}`,
			body: tfResp(``, tfRead, tfNS),
			want: tfResp(``, tfRead),
			decisions: []transforms.Decision{
				{Tool: "mcp", Action: "drop", Reason: "not_allowed"},
				{Tool: "mcp/delete_issue", Action: "drop", Reason: "not_allowed"},
				{Tool: "mcp/read_issue", Action: "drop", Reason: "not_allowed"},
			},
		},
	})
}

// --- bytes ---------------------------------------------------------------------------------------

// TestToolsFilterKeepsBytes: kept tools, in and out of namespaces, keep
// their exact bytes; a request no selector touches is the same slice.
func TestToolsFilterKeepsBytes(t *testing.T) {
	keptTop := `{"type":"function", "name" : "read_file","parameters":{ "type":"object" ,"x" : "\u00e9"}}`
	keptChild := `{"name":"read_issue" ,"type":"function", "strict" :true}`
	body := `{"model":"m","tools":[ ` + keptTop + ` ,
	  {"type":"function","name":"write_file"},
	  {"type":"namespace","name":"mcp","tools":[ {"type":"function","name":"delete_issue"}, ` + keptChild + ` ]} ],"input":"hi"}`
	out, x, err := tfRun(t, transforms.ProtocolResponses, `{"deny":["write_file","delete_*"]}`, body)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"model":"m","tools":[`+keptTop+`,{"type":"namespace","name":"mcp","tools":[`+keptChild+`]}],"input":"hi"}`)
	for _, kept := range []string{keptTop, keptChild} {
		if !strings.Contains(string(out), kept) {
			t.Errorf("lost the bytes of %s:\n%s", kept, out)
		}
	}
	tfDecisions(t, x, []transforms.Decision{{Tool: "write_file", Action: "drop", Reason: "denied"}, {Tool: "mcp/delete_issue", Action: "drop", Reason: "denied"}})

	// Chat: the same.
	keptC := `{ "type":"function","function":{"name":"read_file" , "parameters":{}} }`
	bodyC := `{"model":"m","messages":[],"tools":[` + tfWriteC + `,` + keptC + `]}`
	out, _, err = tfRun(t, transforms.ProtocolChat, `{"deny":["write_file"]}`, bodyC)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"m","messages":[],"tools":[` + keptC + `]}`; string(out) != want {
		t.Errorf("chat\n got %s\nwant %s", out, want)
	}

	// Untouched: the same slice comes back, and nothing was applied.
	for _, tc := range []struct {
		p         transforms.Protocol
		cfg, body string
	}{
		{transforms.ProtocolResponses, `{"deny":["nothing"],"allow":["*"]}`, body},
		{transforms.ProtocolResponses, `{"deny":["mcp/nothing"]}`, tfResp(`,"tool_choice":{"type":"function","name":"read_file"}`, tfRead, tfNS, tfWeb)},
		{transforms.ProtocolChat, `{"deny":["nothing"]}`, bodyC},
		{transforms.ProtocolChat, `{"allow":["*"]}`, tfChat(`,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"read_file"}}]}}`, tfReadC)},
	} {
		in := []byte(tc.body)
		c := transformtest.Chain(t, tfRules(tc.cfg))
		x := transformtest.Begin(t, c, tc.p, in)
		out, err := x.RewriteRequest(in)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonspan.SameSlice(out, in) {
			t.Errorf("%s: not the same slice:\n%s", tc.cfg, out)
		}
		if len(x.Applications()) != 0 {
			t.Errorf("%s: applications %+v", tc.cfg, x.Applications())
		}
	}
}

// --- tool_choice ---------------------------------------------------------------------------------

// TestToolsFilterChoice: a choice that forces a filtered tool is refused;
// allowed_tools loses the filtered entries; "auto" goes with the tools.
func TestToolsFilterChoice(t *testing.T) {
	// Refused.
	tfErr(t, transforms.ProtocolResponses, `{"deny":["write_file"]}`,
		tfResp(`,"tool_choice":{"type":"function","name":"write_file"}`, tfRead, tfWrite),
		"tool_choice", `"write_file"`, "denied")
	tfErr(t, transforms.ProtocolChat, `{"allow":["read_file"]}`,
		tfChat(`,"tool_choice":{"type":"function","function":{"name":"write_file"}}`, tfReadC, tfWriteC),
		"tool_choice", `"write_file"`, "not_allowed")
	tfErr(t, transforms.ProtocolResponses, `{"deny":["web_search"]}`,
		tfResp(`,"tool_choice":{"type":"web_search"}`, tfRead, tfWeb),
		"tool_choice", `"web_search"`, "denied")
	tfErr(t, transforms.ProtocolResponses, `{"deny":["type:web_search*"]}`,
		tfResp(`,"tool_choice":{"type":"web_search_preview"}`, tfRead, `{"type":"web_search_preview"}`),
		"tool_choice", `"web_search_preview"`, "denied")
	tfErr(t, transforms.ProtocolResponses, `{"deny":["mcp/delete_*"]}`,
		tfResp(`,"tool_choice":{"type":"function","namespace":"mcp","name":"delete_issue"}`, tfRead, tfNS),
		"tool_choice", `"mcp/delete_issue"`, "denied")
	e := tfErr(t, transforms.ProtocolResponses, `{"allow":["x"],"deny":["read_file"]}`,
		tfResp(`,"tool_choice":"required"`, tfRead, tfWrite), "tool_choice", `"required"`)
	if want := `tool_choice is "required" but every tool of the request was filtered by the gateway (1 denied, 1 not_allowed)`; e.Message != want {
		t.Errorf("message %q, want %q", e.Message, want)
	}
	tfErr(t, transforms.ProtocolChat, `{"deny":["*"]}`, tfChat(`,"tool_choice":"required"`, tfReadC), "tool_choice", `"required"`)
	e = tfErr(t, transforms.ProtocolResponses, `{"deny":["write_file","web_search"]}`,
		tfResp(`,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"write_file"},{"type":"web_search"}]}`, tfRead, tfWrite, tfWeb),
		"tool_choice")
	if want := `tool_choice allows only tools the gateway filtered: write_file (denied), web_search (denied)`; e.Message != want {
		t.Errorf("message %q, want %q", e.Message, want)
	}
	tfErr(t, transforms.ProtocolChat, `{"deny":["write_file"]}`,
		tfChat(`,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"write_file"}}]}}`, tfReadC, tfWriteC),
		"tool_choice", "write_file (denied)")

	// Kept, trimmed or removed.
	tfRunCases(t, []tfCase{
		{
			name:      "auto goes with the last tool",
			p:         transforms.ProtocolResponses,
			cfg:       `{"deny":["read_file"]}`,
			body:      `{"model":"m","tools":[` + tfRead + `],"tool_choice":"auto","input":"hi"}`,
			want:      `{"model":"m","input":"hi"}`,
			decisions: []transforms.Decision{{Tool: "read_file", Action: "drop", Reason: "denied"}, {Tool: "tools", Action: "drop", Reason: tfNoneLeft}},
		},
		{
			name:      "a named choice of a filtered tool that is gone anyway",
			p:         transforms.ProtocolResponses,
			cfg:       `{"deny":["write_file"]}`,
			body:      tfResp(`,"tool_choice":{"type":"function","name":"read_file"}`, tfRead, tfWrite),
			want:      tfResp(`,"tool_choice":{"type":"function","name":"read_file"}`, tfRead),
			decisions: []transforms.Decision{{Tool: "write_file", Action: "drop", Reason: "denied"}},
		},
		{
			name: "responses allowed_tools",
			p:    transforms.ProtocolResponses,
			cfg:  `{"deny":["write_file","web_search"]}`,
			body: tfResp(`,"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"read_file"},{"type":"function","name":"write_file"},{"type":"web_search"}]}`, tfRead, tfWrite, tfWeb),
			want: tfResp(`,"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"read_file"}]}`, tfRead),
			decisions: []transforms.Decision{
				{Tool: "write_file", Action: "drop", Reason: "denied"},
				{Tool: "web_search", Action: "drop", Reason: "denied"},
				{Tool: "tool_choice", Action: "filter_allowed_tools", Reason: "removed write_file (denied), web_search (denied)"},
			},
		},
		{
			name: "allowed_tools naming a namespaced tool",
			p:    transforms.ProtocolResponses,
			cfg:  `{"deny":["mcp/delete_*"]}`,
			body: tfResp(`,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","namespace":"mcp","name":"delete_issue"},{"type":"function","namespace":"mcp","name":"read_issue"}]}`, tfNS),
			want: tfResp(`,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","namespace":"mcp","name":"read_issue"}]}`, tfNSRead),
			decisions: []transforms.Decision{
				{Tool: "mcp/delete_issue", Action: "drop", Reason: "denied"},
				{Tool: "tool_choice", Action: "filter_allowed_tools", Reason: "removed mcp/delete_issue (denied)"},
			},
		},
		{
			// Not the gateway's doing: the upstream judges it.
			name:      "a named choice of a tool the request never declared",
			p:         transforms.ProtocolResponses,
			cfg:       `{"deny":["write_file"]}`,
			body:      tfResp(`,"tool_choice":{"type":"function","name":"other"}`, tfRead, tfWrite),
			want:      tfResp(`,"tool_choice":{"type":"function","name":"other"}`, tfRead),
			decisions: []transforms.Decision{{Tool: "write_file", Action: "drop", Reason: "denied"}},
		},
		{
			name: "chat allowed_tools",
			p:    transforms.ProtocolChat,
			cfg:  `{"allow":["read_*"]}`,
			body: tfChat(`,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"write_file"}},{"type":"function","function":{"name":"read_file"}}]}}`, tfReadC, tfWriteC),
			want: tfChat(`,"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"read_file"}}]}}`, tfReadC),
			decisions: []transforms.Decision{
				{Tool: "write_file", Action: "drop", Reason: "not_allowed"},
				{Tool: "tool_choice", Action: "filter_allowed_tools", Reason: "removed write_file (not_allowed)"},
			},
		},
	})
}

// TestChoiceNamingToolOfDeniedNamespace: a forced choice naming a tool of a
// denied namespace is refused, and allowed_tools entries naming tools of a
// denied namespace go, as for any filtered tool.
func TestChoiceNamingToolOfDeniedNamespace(t *testing.T) {
	tfErr(t, transforms.ProtocolResponses, `{"deny":["type:namespace"]}`,
		tfResp(`,"tool_choice":{"type":"function","namespace":"mcp","name":"read_issue"}`, tfRead, tfNS),
		"tool_choice", "mcp/read_issue", "denied")
	out, _ := filterOK(t, transforms.ProtocolResponses, `{"deny":["mcp"]}`,
		tfResp(`,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","namespace":"mcp","name":"read_issue"},{"type":"function","name":"read_file"}]}`, tfRead, tfNS))
	transformtest.JSONEqual(t, out, tfResp(`,"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"read_file"}]}`, tfRead))
}

// TestRequiredChoiceWithClientsEmptyListIsNotRefused: tool_choice
// "required" with the client's own empty tools list is no tool_filtered
// 400: the rule filtered nothing, so it must not blame the gateway; the
// upstream judges the client's request.
func TestRequiredChoiceWithClientsEmptyListIsNotRefused(t *testing.T) {
	_, _, err := tfRun(t, transforms.ProtocolResponses, `{"deny":["write_file"]}`, `{"model":"m","input":"hi","tools":[],"tool_choice":"required"}`)
	var e *transforms.Error
	if errors.As(err, &e) && e.Code == "tool_filtered" {
		t.Fatalf("a 400 tool_filtered though the gateway filtered nothing: %s", e.Message)
	}
}

// --- names the upstream reads differently --------------------------------------------------------

// TestToolsFilterRefusesRepeatedIdentityKeys: a definition that names
// itself twice would be judged by its first name and served by its last,
// which upstream JSON parsers keep, so a denied tool could pass as an
// allowed one. Such a request is refused before anything is filtered.
func TestToolsFilterRefusesRepeatedIdentityKeys(t *testing.T) {
	c := transformtest.Chain(t, `[{"transform":"tools_filter","config":{"deny":["delete_*"]}}]`)
	for _, tc := range []struct {
		proto      transforms.Protocol
		body, want string
	}{
		{transforms.ProtocolResponses, `{"model":"m","input":"hi","tools":[{"type":"function","name":"read"},{"type":"function","name":"read","name":"delete_repo"}]}`, "tools[1]"},
		{transforms.ProtocolResponses, `{"model":"m","input":"hi","tools":[{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"ok","type":"function"}]}]}`, "tools[0].tools[0]"},
		{transforms.ProtocolChat, `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"read","parameters":{},"name":"delete_repo"}}]}`, "tools[0]"},
	} {
		x := transformtest.Begin(t, c, tc.proto, []byte(tc.body))
		_, err := x.RewriteRequest([]byte(tc.body))
		var te *transforms.Error
		if !errors.As(err, &te) || te.Status != 400 || te.Code != "ambiguous_tool" || te.Param != tc.want {
			t.Errorf("%s: got %v, want a 400 ambiguous_tool at %s", tc.body, err, tc.want)
		}
	}
	// A rule that filters nothing by name has nothing to be fooled about.
	off := transformtest.Chain(t, `[{"transform":"tools_filter","config":{"defaults":[{"type":"function","name":"x"}]}}]`)
	body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"a","name":"b"}]}`)
	x := transformtest.Begin(t, off, transforms.ProtocolResponses, body)
	if _, err := x.RewriteRequest(body); err != nil {
		t.Fatalf("defaults only: %v", err)
	}
}

// TestNestedRepeatDoesNotHideOuterRepeat: a repeated key inside a tools
// array nested in a definition that is no namespace does not hide a repeat
// of the definition's own name: a 400 ambiguous_tool, since the rule would
// judge the first name (read_file) and the upstream serve the last
// (delete_file).
func TestNestedRepeatDoesNotHideOuterRepeat(t *testing.T) {
	body := `{"model":"m","input":"hi","tools":[{"type":"function","tools":[{"name":"a","name":"b"}],"name":"read_file","name":"delete_file"}]}`
	out, _, err := filterRecovered(t, transforms.ProtocolResponses, denyDeleteConfig, body)
	// Refused at the first repeat the walk meets (the inner one).
	e := transformtest.Rejected(t, out, err, "ambiguous_tool")
	if e.Param != "tools[0].tools[0]" && e.Param != "tools[0]" {
		t.Errorf("param %q, want tools[0] or its inner tool", e.Param)
	}
}

// TestToolsNullMemberIsNotARepeat: a definition's "tools":null is a member
// like any other, not a second tools list: nothing repeats, so the request
// passes as the same bytes.
func TestToolsNullMemberIsNotARepeat(t *testing.T) {
	body := tfResp(``, `{"type":"function","name":"read_file","tools":null}`)
	out, _, err := filterRecovered(t, transforms.ProtocolResponses, denyDeleteConfig, body)
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	if string(out) != body {
		t.Fatalf("body changed: %s", out)
	}
}

// TestDenyHoldsForRepeatedToolsMember: with two top-level tools members,
// upstream parsers (Python's json, Go's encoding/json) keep the last. The
// body is refused with a 400, or the list the upstream reads has lost the
// denied tool.
func TestDenyHoldsForRepeatedToolsMember(t *testing.T) {
	body := `{"model":"m","input":"hi","tools":[` + tfRead + `],"tools":[` + tfDelete + `,` + tfWrite + `]}`
	out, _, err := tfRun(t, transforms.ProtocolResponses, `{"deny":["delete_*"]}`, body)
	var e *transforms.Error
	if errors.As(err, &e) && e.Status == 400 {
		return // refused: right
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	for _, n := range upstreamToolNames(t, out) {
		if n == "delete_file" {
			t.Fatalf("the upstream (last key wins) still sees delete_file:\n%s", out)
		}
	}
}

// TestDenyHoldsForRepeatedNamespaceToolsMember: a namespace with two tools
// members is refused with a 400, or the list the upstream keeps (the last)
// has lost the denied tool.
func TestDenyHoldsForRepeatedNamespaceToolsMember(t *testing.T) {
	ns := `{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"read_issue"}],"tools":[{"type":"function","name":"delete_issue"}]}`
	out, _, err := tfRun(t, transforms.ProtocolResponses, `{"deny":["delete_*"]}`, tfResp(``, tfRead, ns))
	var e *transforms.Error
	if errors.As(err, &e) && e.Status == 400 {
		return // refused: right
	}
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	for _, n := range upstreamToolNames(t, out) {
		if n == "delete_issue" {
			t.Fatalf("the upstream (last key wins) still sees delete_issue:\n%s", out)
		}
	}
}

// TestRepeatedToolsListInAdditionalToolsIsAmbiguous: an additional_tools
// item with two tools lists is a 400 ambiguous_tool, as a repeated
// top-level tools member is: the rule would read one list and the upstream
// the other.
func TestRepeatedToolsListInAdditionalToolsIsAmbiguous(t *testing.T) {
	body := inputOf(`{"type":"additional_tools","tools":[{"type":"function","name":"read_file"}],"tools":[{"type":"function","name":"delete_file"}]}`)
	out, _, err := filterRecovered(t, transforms.ProtocolResponses, denyDeleteConfig, body)
	transformtest.Rejected(t, out, err, "ambiguous_tool")
}

// TestRepeatedInputIsAmbiguous: a body with input twice, both holding
// additional_tools, is a 400 ambiguous_tool, so a denied tool cannot reach
// the upstream (which reads the last input) while the decisions say it was
// dropped.
func TestRepeatedInputIsAmbiguous(t *testing.T) {
	body := `{"model":"m","input":[{"type":"additional_tools","tools":[{"type":"function","name":"read_file"}]}],"input":[{"type":"additional_tools","tools":[{"type":"function","name":"delete_file"}]}]}`
	out, _, err := filterRecovered(t, transforms.ProtocolResponses, denyDeleteConfig, body)
	transformtest.Rejected(t, out, err, "ambiguous_tool")
}

// TestDenyHoldsForEscapedAdditionalToolsType: an additional_tools item
// whose type is escaped ("additional\u005ftools", which every JSON parser
// reads as additional_tools) is recognised and loses its denied tools:
// escaping cannot hide a tool from the gateway.
func TestDenyHoldsForEscapedAdditionalToolsType(t *testing.T) {
	body := `{"model":"m","tools":[` + tfRead + `],"input":[{"type":"message","role":"user","content":"hi"},{"type":"additional\u005ftools","role":"developer","tools":[` + tfDelete + `,` + tfWrite + `]}]}`
	out, x := filterOK(t, transforms.ProtocolResponses, `{"deny":["delete_*"]}`, body)
	transformtest.JSONEqual(t, out, `{"model":"m","tools":[`+tfRead+`],"input":[{"type":"message","role":"user","content":"hi"},{"type":"additional_tools","role":"developer","tools":[`+tfWrite+`]}]}`)
	tfDecisions(t, x, []transforms.Decision{{Tool: "delete_file", Action: "drop", Reason: "denied"}})
}

// TestEscapedNamesAreDecodedBeforeSelectors: escaped member names and
// string values of definitions and tool_choice are decoded before selectors
// see them: "n\u0061me":"delete\u005ffile" is denied like delete_file, and
// a Chat choice that forces it by an escaped name is refused.
func TestEscapedNamesAreDecodedBeforeSelectors(t *testing.T) {
	esc := `{"type":"function","n\u0061me":"delete\u005ffile","parameters":{"type":"object"}}`
	out, x := filterOK(t, transforms.ProtocolResponses, `{"deny":["delete_*"]}`, tfResp(``, tfRead, esc))
	transformtest.JSONEqual(t, out, tfResp(``, tfRead))
	tfDecisions(t, x, []transforms.Decision{{Tool: "delete_file", Action: "drop", Reason: "denied"}})

	escC := `{"type":"function","function":{"n\u0061me":"delete_file"}}`
	tfErr(t, transforms.ProtocolChat, `{"deny":["delete_*"]}`,
		tfChat(`,"tool_choice":{"type":"function","function":{"name":"delete\u005ffile"}}`, tfReadC, escC),
		"tool_choice", "delete_file")
}

// --- namespaces ----------------------------------------------------------------------------------

// TestDenyReachesNestedNamespaces: a denied tool in a namespace nested in
// another namespace is removed, the rest kept byte for byte, as at one
// level of nesting; the outer definition must not carry it upstream while
// the decision says it was dropped.
func TestDenyReachesNestedNamespaces(t *testing.T) {
	nested := `{"type":"namespace","name":"outer","tools":[{"type":"namespace","name":"inner","tools":[{"type":"function","name":"delete_x"},{"type":"function","name":"read_x"}]},{"type":"function","name":"keep"}]}`
	want := `{"type":"namespace","name":"outer","tools":[{"type":"namespace","name":"inner","tools":[{"type":"function","name":"read_x"}]},{"type":"function","name":"keep"}]}`
	out, x := filterOK(t, transforms.ProtocolResponses, `{"deny":["delete_*"]}`, tfResp(``, tfRead, nested))
	transformtest.JSONEqual(t, out, tfResp(``, tfRead, want))
	tfDecisions(t, x, []transforms.Decision{{Tool: "inner/delete_x", Action: "drop", Reason: "denied"}})
}

// TestScopedDenyCoversNestedNamespace: deny outer/* covers a namespace
// nested in outer and its tools: outer loses every tool and goes.
func TestScopedDenyCoversNestedNamespace(t *testing.T) {
	nested := `{"type":"namespace","name":"outer","tools":[{"type":"namespace","name":"inner","tools":[{"type":"function","name":"delete_x"}]},{"type":"function","name":"keep"}]}`
	out, _ := filterOK(t, transforms.ProtocolResponses, `{"deny":["outer/*"]}`, tfResp(``, tfRead, nested))
	transformtest.JSONEqual(t, out, tfResp(``, tfRead))
}

// TestScopedDenyJudgesChildByHoldingNamespace: a tool inside namespace mcp
// is judged as mcp's even when it carries a namespace member of its own,
// since the upstream serves it as mcp's: deny mcp/delete_* removes it.
func TestScopedDenyJudgesChildByHoldingNamespace(t *testing.T) {
	ns := `{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"delete_issue","namespace":"safe"},{"type":"function","name":"read_issue"}]}`
	out, _ := filterOK(t, transforms.ProtocolResponses, `{"deny":["mcp/delete_*"]}`, tfResp(``, tfRead, ns))
	transformtest.JSONEqual(t, out, tfResp(``, tfRead, `{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"read_issue"}]}`))
}

// TestScopedAllowAndTypeSelectorsInNamespaces: allow with a scoped selector
// keeps the namespace with only the allowed tools; allow by namespace name
// keeps a nested one whole; type: selectors reach namespace children.
func TestScopedAllowAndTypeSelectorsInNamespaces(t *testing.T) {
	out, _ := filterOK(t, transforms.ProtocolResponses, `{"allow":["mcp/read_*"]}`, tfResp(``, tfRead, tfNS))
	transformtest.JSONEqual(t, out, tfResp(``, tfNSRead))
	nested := `{"type":"namespace","name":"outer","tools":[{"type":"namespace","name":"inner","tools":[{"type":"function","name":"x"}]}]}`
	_, _, same := filterSame(t, transforms.ProtocolResponses, `{"allow":["outer"]}`, tfResp(``, nested))
	if !same {
		t.Error("allow outer changed a body with only outer's tools")
	}
	out, x := filterOK(t, transforms.ProtocolResponses, `{"deny":["type:function"]}`, tfResp(``, tfRead, tfWeb, tfNS))
	transformtest.JSONEqual(t, out, tfResp(``, tfWeb))
	tfDecisions(t, x, []transforms.Decision{
		{Tool: "read_file", Action: "drop", Reason: "denied"},
		{Tool: "mcp", Action: "drop", Reason: "denied"},
		{Tool: "mcp/delete_issue", Action: "drop", Reason: "denied"},
		{Tool: "mcp/read_issue", Action: "drop", Reason: "denied"},
	})
}

// TestDuplicateNamespaceIsReportedAsDuplicate: a namespace emptied because
// its tools repeat an earlier namespace's is reported with the reason
// duplicate, not not_allowed (a reason for allow lists) under a rule
// without one.
func TestDuplicateNamespaceIsReportedAsDuplicate(t *testing.T) {
	out, x := filterOK(t, transforms.ProtocolResponses, `{"deny":["nothing"]}`, tfResp(``, tfNSRead, tfNSRead))
	transformtest.JSONEqual(t, out, tfResp(``, tfNSRead))
	tfDecisions(t, x, []transforms.Decision{{Tool: "mcp", Action: "drop", Reason: "duplicate"}, {Tool: "mcp/read_issue", Action: "drop", Reason: "duplicate"}})
}

// TestNamespaceRedeclaredInAdditionalToolsIsNoDuplicate: a namespace an
// additional_tools item declares again (Codex re-sends its MCP namespaces
// mid-conversation) is told apart per list, as top-level tools are: a rule
// that filters nothing returns the same slice.
func TestNamespaceRedeclaredInAdditionalToolsIsNoDuplicate(t *testing.T) {
	body := `{"model":"m","tools":[` + tfRead + `,` + tfNS + `],"input":[{"type":"message","role":"user","content":"hi"},{"type":"additional_tools","role":"developer","tools":[` + tfRead + `,` + tfNS + `]}]}`
	out, x, same := filterSame(t, transforms.ProtocolResponses, `{"deny":["nothing"]}`, body)
	if !same {
		t.Errorf("body changed, want the same slice:\n%s", out)
	}
	tfDecisions(t, x, nil)
}

// TestOverDeepNamespacesNeverEmptyTheList: namespaces nested past the
// scanner's depth limit leave the body untouched, or refused with a 400,
// never sent with an emptied tools list.
func TestOverDeepNamespacesNeverEmptyTheList(t *testing.T) {
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

// TestMCPServersAreNotDuplicates: hosted tools without a name are not told
// apart by type alone: two MCP servers with different server_labels are
// both kept, and the body is the same slice.
func TestMCPServersAreNotDuplicates(t *testing.T) {
	gh := `{"type":"mcp","server_label":"github","server_url":"https://gh.example/mcp","require_approval":"never"}`
	lin := `{"type":"mcp","server_label":"linear","server_url":"https://linear.example/mcp","require_approval":"never"}`
	body := tfResp(``, tfRead, gh, lin)
	out, x, same := filterSame(t, transforms.ProtocolResponses, `{"deny":["write_file"]}`, body)
	if !same {
		t.Errorf("body changed, want the same slice:\n%s", out)
	}
	tfDecisions(t, x, nil)
}

// --- Chat's tools and legacy functions -----------------------------------------------------------

// TestDenyCoversChatToolWithoutType: a Chat tool with a function object but
// no type (vLLM, Ollama and other compatible servers default the type to
// function) is judged by its nested name, so a name deny removes it.
func TestDenyCoversChatToolWithoutType(t *testing.T) {
	untyped := `{"function":{"name":"delete_repo","parameters":{}}}`
	out, _ := filterOK(t, transforms.ProtocolChat, `{"deny":["delete_*"]}`, tfChat(``, tfReadC, untyped))
	transformtest.JSONEqual(t, out, tfChat(``, tfReadC))
}

// TestTypelessChatToolIsReportedByItsInnerName: a typeless Chat tool is
// judged by its inner name and reported under it: deny catches it and the
// decision names delete_file.
func TestTypelessChatToolIsReportedByItsInnerName(t *testing.T) {
	out, x, err := filterRecovered(t, transforms.ProtocolChat, denyDeleteConfig, `{"model":"m","messages":[],"tools":[{"function":{"name":"delete_file"}},`+tfReadC+`]}`)
	transformtest.Accepted(t, out, err, `{"model":"m","messages":[],"tools":[`+tfReadC+`]}`)
	tfDecisions(t, x, []transforms.Decision{{Tool: "delete_file", Action: "drop", Reason: "denied"}})
}

// TestDenyCoversChatLegacyFunctions: Chat's legacy functions list (still
// accepted by OpenAI Chat Completions and most compatible servers) is
// judged like tools, and a function_call that forces a denied function is a
// 400 tool_filtered.
func TestDenyCoversChatLegacyFunctions(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"delete_repo","parameters":{}},{"name":"read_repo","parameters":{}}]}`
	out, x := filterOK(t, transforms.ProtocolChat, `{"deny":["delete_*"]}`, body)
	transformtest.JSONEqual(t, out, `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"read_repo","parameters":{}}]}`)
	tfDecisions(t, x, []transforms.Decision{{Tool: "delete_repo", Action: "drop", Reason: "denied"}})

	forced := `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"delete_repo","parameters":{}},{"name":"read_repo","parameters":{}}],"function_call":{"name":"delete_repo"}}`
	tfErr(t, transforms.ProtocolChat, `{"deny":["delete_*"]}`, forced, "function_call", "delete_repo")
}

// TestDenyHoldsForEscapedFunctionsKey: a legacy functions list whose key is
// escaped ("function\u0073", which every JSON decoder reads as functions)
// is filtered like the plain key.
func TestDenyHoldsForEscapedFunctionsKey(t *testing.T) {
	body := `{"model":"m","messages":[],"function\u0073":[{"name":"delete_file"},{"name":"read_file"}]}`
	out, x, err := filterRecovered(t, transforms.ProtocolChat, denyDeleteConfig, body)
	transformtest.Accepted(t, out, err, `{"model":"m","messages":[],"functions":[{"name":"read_file"}]}`)
	tfDecisions(t, x, []transforms.Decision{{Tool: "delete_file", Action: "drop", Reason: "denied"}})
}

// TestLegacyFunctionRepeatedNameIsAmbiguous: a legacy function that names
// itself twice is a 400 ambiguous_tool, as in tools: the rule would judge
// the first name and the upstream serve the last.
func TestLegacyFunctionRepeatedNameIsAmbiguous(t *testing.T) {
	body := `{"model":"m","messages":[],"functions":[{"name":"read_file","name":"delete_file"}]}`
	out, _, err := filterRecovered(t, transforms.ProtocolChat, denyDeleteConfig, body)
	transformtest.Rejected(t, out, err, "ambiguous_tool")
}

// --- defaults and removed members ----------------------------------------------------------------

// TestDefaultReplacesNullTools: "tools":null (sent by many SDK serialisers)
// is no tools at all: the default becomes the member's list, as the
// add_default decision says.
func TestDefaultReplacesNullTools(t *testing.T) {
	cfg := `{"defaults":[` + tfLookupDef + `]}`
	out, x := filterOK(t, transforms.ProtocolResponses, cfg, `{"model":"m","input":"hi","tools":null}`)
	transformtest.JSONEqual(t, out, `{"model":"m","input":"hi","tools":[`+tfLookupDef+`]}`)
	tfDecisions(t, x, []transforms.Decision{{Tool: "lookup", Action: "add_default", Reason: "the request does not declare it"}})
}

// TestChatDefaultReplacesNullToolsInPlace: a Chat-shaped default becomes
// the list of a "tools":null, in place.
func TestChatDefaultReplacesNullToolsInPlace(t *testing.T) {
	cfg := `{"defaults":[{"type":"function","function":{"name":"lookup"}}]}`
	out, _, err := filterRecovered(t, transforms.ProtocolChat, cfg, `{"model":"m","tools":null,"messages":[]}`)
	transformtest.Accepted(t, out, err, `{"model":"m","tools":[{"type":"function","function":{"name":"lookup"}}],"messages":[]}`)
}

// TestChatShapedCustomDefault: a custom default written in Chat's shape
// ({"type":"custom","custom":{"name":…}}), which the README allows,
// compiles; a Responses request gets it flat and a Chat request nested.
func TestChatShapedCustomDefault(t *testing.T) {
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

// TestDefaultInsertionKeepsBodiesValid: defaults are inserted into bodies
// with no tools member whatever their shape (an empty object, blanks before
// the closing brace, a trailing newline), and converted: a Chat-shaped
// function default reaches a Responses request flat, a Responses-shaped
// custom one a Chat request nested.
func TestDefaultInsertionKeepsBodiesValid(t *testing.T) {
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
		out, _ := filterOK(t, transforms.ProtocolResponses, cfg, body)
		transformtest.JSONEqual(t, out, want)
	}
	custom := `{"type":"custom","name":"apply_patch","format":{"type":"text"}}`
	out, _ := filterOK(t, transforms.ProtocolChat, `{"defaults":[`+custom+`]}`, `{"model":"m","messages":[]}`)
	transformtest.JSONEqual(t, out, `{"model":"m","messages":[],"tools":[{"type":"custom","custom":{"name":"apply_patch","format":{"type":"text"}}}]}`)
}

// TestDefaultReplacesSoleFunctionsMember: a default added to a body whose
// only member, a functions list, goes entirely gives {"tools":[default]}:
// the comma before it is decided on the body as rewritten.
func TestDefaultReplacesSoleFunctionsMember(t *testing.T) {
	cfg := `{"deny":["delete_*"],"defaults":[{"type":"function","function":{"name":"lookup"}}]}`
	out, _, err := filterRecovered(t, transforms.ProtocolChat, cfg, `{"functions":[{"name":"delete_file"}]}`)
	transformtest.Accepted(t, out, err, `{"tools":[{"type":"function","function":{"name":"lookup"}}]}`)
}

// TestMemberRemovalKeepsBodiesValid: removing tools, tool_choice and
// parallel_tool_calls keeps the body valid whatever their positions and the
// blanks around them.
func TestMemberRemovalKeepsBodiesValid(t *testing.T) {
	for body, want := range map[string]string{
		`{"tools":[` + tfRead + `],"tool_choice":"auto"}`:                                         `{}`,
		`{"tools":[` + tfRead + `] , "model":"m" ,"tool_choice":"auto"}`:                          `{"model":"m"}`,
		`{"tool_choice":"auto","model":"m","tools":[` + tfRead + `]}`:                             `{"model":"m"}`,
		"{\"parallel_tool_calls\":true,\n\"model\":\"m\",\n\"tools\":[" + tfRead + "]\n}":         `{"model":"m"}`,
		`{"model":"m","tools":[` + tfRead + `],"input":"x","tool_choice":"auto","stream":true}`:   `{"model":"m","input":"x","stream":true}`,
		`{"tools":[` + tfRead + `],"parallel_tool_calls":false,"tool_choice":"none","model":"m"}`: `{"model":"m"}`,
	} {
		out, _ := filterOK(t, transforms.ProtocolResponses, `{"deny":["*"]}`, body)
		transformtest.JSONEqual(t, out, want)
	}
}

// permutations lists every order of a.
func permutations(a []string) [][]string {
	if len(a) <= 1 {
		return [][]string{append([]string(nil), a...)}
	}
	var out [][]string
	for i := range a {
		rest := append(append([]string(nil), a[:i]...), a[i+1:]...)
		for _, p := range permutations(rest) {
			out = append(out, append([]string{a[i]}, p...))
		}
	}
	return out
}

// TestToolMembersRemovedInEveryOrder: the five members that may go
// (functions, function_call, tools, tool_choice, parallel_tool_calls), in
// every order, first, last, split around other members and with blanks,
// with everything filtered, some kept, an allowed_tools choice rewritten
// beside them, function calling off, and defaults joining tools:null: one
// removal per run, never two edits on one comma.
func TestToolMembersRemovedInEveryOrder(t *testing.T) {
	keys := []string{"functions", "function_call", "tools", "tool_choice", "parallel_tool_calls"}
	lookup := `{"type":"function","function":{"name":"lookup"}}`
	for _, v := range []struct {
		name    string
		cfg     string
		members map[string]string
		want    map[string]string // the members left beside model and messages
	}{
		{"all filtered", denyDeleteConfig, map[string]string{
			"functions": `[{"name":"delete_a"},{"name":"delete_b"}]`, "function_call": `"auto"`,
			"tools": `[{"type":"function","function":{"name":"delete_c"}}]`, "tool_choice": `"auto"`, "parallel_tool_calls": `true`,
		}, map[string]string{}},
		{"functions kept in part", denyDeleteConfig, map[string]string{
			"functions": `[{"name":"delete_a"},{"name":"read_b"}]`, "function_call": `{"name":"read_b"}`,
			"tools": `[{"type":"function","function":{"name":"delete_c"}}]`, "tool_choice": `"auto"`, "parallel_tool_calls": `true`,
		}, map[string]string{"functions": `[{"name":"read_b"}]`, "function_call": `{"name":"read_b"}`}},
		{"tools kept in part, allowed_tools rewritten", denyDeleteConfig, map[string]string{
			"functions": `[{"name":"delete_a"}]`, "function_call": `"none"`,
			"tools":       `[{"type":"function","function":{"name":"delete_c"}},{"type":"function","function":{"name":"read_c"}}]`,
			"tool_choice": `{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"delete_c"}},{"type":"function","function":{"name":"read_c"}}]}}`, "parallel_tool_calls": `true`,
		}, map[string]string{
			"tools":       `[{"type":"function","function":{"name":"read_c"}}]`,
			"tool_choice": `{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"read_c"}}]}}`, "parallel_tool_calls": `true`,
		}},
		{"function calling off", offConfig, map[string]string{
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
			for _, p := range permutations(keys) {
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
					out, _, err := filterRecovered(t, transforms.ProtocolChat, v.cfg, body)
					if err != nil {
						t.Fatalf("order %v shape %d: %v\n%s", p, shape, err, body)
					}
					transformtest.Accepted(t, out, nil, want)
				}
			}
		})
	}
}

// Namespaces nested past the gateway's limit are refused before the walk,
// which recurses into definition lists, reads them: a body of a few
// megabytes nested millions deep must not exhaust the stack.
func TestNestingPastTheLimitIsRefusedBeforeTheWalk(t *testing.T) {
	body := `{"model":"m","tools":[` + strings.Repeat(`{"tools":[`, 200000)
	c := transformtest.Chain(t, `[{"transform":"tools_filter","config":{"deny":["delete_*"]}}]`)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(body))
	out, err := x.RewriteRequest([]byte(body))
	e := transformtest.Rejected(t, out, err, "invalid_json")
	if want := "the request body is not JSON the gateway reads: nested deeper than 1000 levels at byte offset 5012"; e.Message != want {
		t.Fatalf("got %q, want %q", e.Message, want)
	}
}
