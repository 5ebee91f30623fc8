package toolsfilter

import (
	"encoding/json"
	"errors"
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

// Request-side tests of tools_filter. LobeHub's ToolsEngine behaviours
// (tool-planning-peers.md §2.2 and §2.4) are re-expressed as our own: the
// reasons a tool is filtered, in order; no tools member at all rather than
// an empty one; defaults; duplicates; and function calling off, with the
// history's tool calls retold as text. Every expected body is written out
// by hand.

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

// --- LobeHub's behaviours ----------------------------------------------------------

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

// --- bytes -----------------------------------------------------------------------------

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

// --- tool_choice --------------------------------------------------------------------------

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

// --- when --------------------------------------------------------------------------------

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
			if x.DroppedCalls != 1 || x.UndeclaredCalls != 1 || strings.Contains(string(resp), "invented") {
				t.Errorf("%v: response side inactive: dropped %d undeclared %d\n%s", tc.when, x.DroppedCalls, x.UndeclaredCalls, resp)
			}
			continue
		}
		if !jsonspan.SameSlice(out, in) {
			t.Errorf("%v: body changed:\n%s", tc.when, out)
		}
		if x.WantsResponse() || string(resp) != response || x.UndeclaredCalls != 0 || x.DroppedCalls != 0 {
			t.Errorf("%v: response side active: wants %v undeclared %d\n%s", tc.when, x.WantsResponse(), x.UndeclaredCalls, resp)
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

// TestConditionParse: the operator stands apart, with a value on both
// sides.
func TestConditionParse(t *testing.T) {
	for _, bad := range []string{
		"",
		"{http.request.header.X-Team} research",
		"{http.request.header.X-Team}==research",
		"{http.request.header.X-Team} = research",
		"== research",
		"{http.request.header.X-Team} ==",
		"!~",
	} {
		if c, err := ParseCondition(bad); err == nil {
			t.Errorf("%q parsed as %q", bad, c)
		}
	}
	_, err := ParseCondition("{a} research")
	if err == nil || !strings.Contains(err.Error(), "no operator") {
		t.Errorf("no operator: %v", err)
	}
	_, err = ParseCondition("{a} ==")
	if err == nil || !strings.Contains(err.Error(), "both sides") {
		t.Errorf("missing side: %v", err)
	}

	repl := caddy.NewReplacer()
	repl.Set("a", "hello world")
	for _, tc := range []struct {
		in, str string
		holds   bool
	}{
		{"{a}  ==   hello world", "{a} == hello world", true},
		{"{a} != hello", "{a} != hello", true},
		{"{a} !~ hello*", "{a} !~ hello*", false},
		{"{a} ~ *o?w*", "{a} ~ *o?w*", true},
		{"{a} ~ hello", "{a} ~ hello", false},
		{"x{a}y == xhello worldy", "x{a}y == xhello worldy", true},
	} {
		c, err := ParseCondition(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if c.String() != tc.str {
			t.Errorf("%q reads back as %q, want %q", tc.in, c.String(), tc.str)
		}
		if c.Holds(repl) != tc.holds {
			t.Errorf("%q holds %v, want %v", tc.in, !tc.holds, tc.holds)
		}
	}
	// A nil replacer leaves placeholders empty.
	c, _ := ParseCondition("{a} == hello world")
	if c.Holds(nil) {
		t.Error("held without a replacer")
	}
	c, _ = ParseCondition("x{a} == x")
	if !c.Holds(nil) {
		t.Error("an unknown placeholder is not empty")
	}
}

// --- function calling off: the history ------------------------------------------------------

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

// --- Codex's request ------------------------------------------------------------------------

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

// --- configuration ----------------------------------------------------------------------------

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
