package schema

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// corpusTool is one tool of the schema corpus.
type corpusTool struct {
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
	Strict     *bool           `json:"strict"`
}

// TestSchemaCorpusPerDialect sends every corpus file through each dialect,
// in both protocols, and checks every function's output with the
// validator written for that dialect from the sourced table: what the
// transform emits is what the upstream accepts. The cycle can only be
// refused by dialects that must inline references.
func TestSchemaCorpusPerDialect(t *testing.T) {
	files, err := filepath.Glob("testdata/schemas/*.json")
	if err != nil || len(files) < 5 {
		t.Fatalf("corpus: %v %v", files, err)
	}
	dialects := []string{"permissive", "openai_strict", "anthropic", "gemini", "kimi"}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var tools []json.RawMessage
		if err := json.Unmarshal(raw, &tools); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, d := range dialects {
			for _, proto := range []transforms.Protocol{transforms.ProtocolResponses, transforms.ProtocolChat} {
				name := filepath.Base(file) + "/" + d + "/" + proto.String()
				t.Run(name, func(t *testing.T) {
					body := corpusRequest(t, tools, proto)
					c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"`+d+`"}}]`)
					x := transformtest.Begin(t, c, proto, body)
					x.Explain = true
					out, err := x.RewriteRequest(body)
					cycle := strings.HasSuffix(file, "cycle.json")
					// A cycle where references must be inlined: strict
					// mode goes (anthropic), or the schema travels as
					// JSON text (gemini), each a decision.
					if want := map[string]string{"anthropic": "strict_off", "gemini": "schema_as_json_text"}[d]; cycle && want != "" && !hasDecision(x, "tree_insert", want) {
						t.Errorf("a cycle under %s: no %s decision for tree_insert: %+v", d, want, x.Decisions())
					}
					if err != nil {
						t.Fatalf("rewrite: %v", err)
					}
					checked := 0
					for i, tool := range corpusTools(t, out, proto) {
						if d == "gemini" && tool.Strict != nil {
							t.Errorf("%s: gemini takes no strict member", tool.Name)
						}
						if problems := fakeprovider.CheckToolSchema(d, i, tool.Name, tool.Parameters, tool.Strict); len(problems) > 0 {
							t.Errorf("%s: the %s upstream refuses the output:\n  %s\n  schema: %s", tool.Name, d, strings.Join(problems, "\n  "), tool.Parameters)
						}
						checked++
					}
					if checked != len(tools) {
						t.Fatalf("checked %d tools of %d", checked, len(tools))
					}
				})
			}
		}
	}
}

// corpusRequest wraps corpus tools (Responses shape) in a request of the
// protocol.
func corpusRequest(t *testing.T, tools []json.RawMessage, proto transforms.Protocol) []byte {
	t.Helper()
	list := make([]any, 0, len(tools))
	for _, raw := range tools {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if proto == transforms.ProtocolChat {
			delete(m, "type")
			list = append(list, map[string]any{"type": "function", "function": m})
			continue
		}
		list = append(list, m)
	}
	req := map[string]any{"model": "m", "tools": list}
	if proto == transforms.ProtocolChat {
		req["messages"] = []any{map[string]any{"role": "user", "content": "hi"}}
	} else {
		req["input"] = "hi"
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// corpusTools reads the functions back out of a rewritten request.
func corpusTools(t *testing.T, body []byte, proto transforms.Protocol) []corpusTool {
	t.Helper()
	var req struct {
		Tools []struct {
			corpusTool
			Function *corpusTool `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, body)
	}
	out := make([]corpusTool, 0, len(req.Tools))
	for _, tl := range req.Tools {
		if proto == transforms.ProtocolChat {
			if tl.Function == nil {
				t.Fatalf("a chat tool lost its function: %s", body)
			}
			out = append(out, *tl.Function)
			continue
		}
		out = append(out, tl.corpusTool)
	}
	return out
}
