package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
	"github.com/llmtransform/caddy-llm-transform/internal/schemaargs"
)

// realCorpus reads the public tool schemas beside the repository
// (../shared/fixtures/tool-schemas: real MCP servers' tools/list, BFCL,
// pydantic models, provider examples), none copied here. Elsewhere the
// test skips, except in CI, where the folder must be there.
func realCorpus(t *testing.T) []corpusTool {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "fixtures", "tool-schemas")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the public schema corpus is not at %s", dir)
		}
		t.Skipf("no schema corpus at %s", dir)
	}
	var tools []corpusTool
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tl corpusTool
		if err := json.Unmarshal(raw, &tl); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// Names repeat across sources: each gets its place's.
		tl.Name = fmt.Sprintf("t%03d", len(tools))
		tools = append(tools, tl)
	}
	return tools
}

// TestRealSchemasPassEveryDialectAndArgumentsComeBack sends every public
// corpus tool through every dialect in both protocols (strict where the
// dialect has a strict mode): each output passes the dialect's validator,
// and arguments generated from the tool's original schema (minimal and
// full), shaped as a model bound to the rewritten schema writes them,
// come back equal to the generated ones, in a JSON answer and in a
// stream.
func TestRealSchemasPassEveryDialectAndArgumentsComeBack(t *testing.T) {
	tools := realCorpus(t)
	for _, d := range []string{"permissive", "openai_strict", "anthropic", "gemini", "kimi"} {
		strict := ""
		if d == "openai_strict" || d == "anthropic" {
			strict = strictOnMember
		}
		for _, proto := range []transforms.Protocol{transforms.ProtocolResponses, transforms.ProtocolChat} {
			t.Run(d+"/"+proto.String(), func(t *testing.T) {
				var decl []rtTool
				for _, tl := range tools {
					decl = append(decl, rtTool{name: tl.Name, params: string(tl.Parameters)})
				}
				req := rtRequest(proto, strict, decl)
				rules := `[{"transform":"tools_normalize_schema","config":{"dialect":"` + d + `"}}]`
				x := transformtest.Begin(t, transformtest.Chain(t, rules), proto, []byte(req))
				out, err := x.RewriteRequest([]byte(req))
				if err != nil {
					t.Fatalf("rewrite: %v", err)
				}
				sent := corpusTools(t, out, proto)
				if len(sent) != len(tools) {
					t.Fatalf("%d tools went, of %d", len(sent), len(tools))
				}
				var calls []rtTool
				var want []string
				for i, up := range sent {
					if p := fakeprovider.CheckToolSchema(d, i, up.Name, up.Parameters, up.Strict); len(p) > 0 {
						t.Errorf("%s (%s): the %s upstream refuses:\n  %s\n  %s", up.Name, tools[i].Name, d, strings.Join(p, "\n  "), up.Parameters)
					}
					for _, full := range []bool{false, true} {
						args, ok := schemaargs.Generate(tools[i].Parameters, full)
						if !ok {
							continue
						}
						shaped, ok := modelArgs(t, tools[i].Parameters, up.Parameters, args)
						if !ok {
							continue
						}
						calls = append(calls, rtTool{name: up.Name, args: string(shaped)})
						want = append(want, string(args))
					}
				}
				t.Logf("%d tools, %d round trips", len(tools), len(calls))
				if len(calls) < len(tools) {
					t.Fatalf("only %d round trips for %d tools", len(calls), len(tools))
				}
				fresh := func() *transforms.Exchange {
					x := transformtest.Begin(t, transformtest.Chain(t, rules), proto, []byte(req))
					if _, err := x.RewriteRequest([]byte(req)); err != nil {
						t.Fatal(err)
					}
					return x
				}
				back, err := fresh().RewriteResponse([]byte(rtJSON(proto, calls)))
				if err != nil {
					t.Fatal(err)
				}
				got := rtArgs(t, proto, string(back), false)
				streamed := rtArgs(t, proto, transformtest.Replay(t, fresh(), rtSSE(proto, calls, 7), 509), true)
				for i, w := range want {
					id := "call_" + transformtest.Itoa(i)
					if !sameButNulls(got[id], w) {
						t.Errorf("%s: sent %s as %s, the client got %s", calls[i].name, w, calls[i].args, got[id])
					}
					if streamed[id] != got[id] {
						t.Errorf("%s: streamed %s, JSON %s", calls[i].name, streamed[id], got[id])
					}
				}
			})
		}
	}
}

// modelArgs shapes args, valid for the tool's schema, as a model bound to
// the rewritten one writes them; ok false when the rewritten schema cannot
// carry them (a function left without parameters, given arguments).
func modelArgs(t *testing.T, original, rewritten, args []byte) ([]byte, bool) {
	t.Helper()
	if len(bytes.TrimSpace(rewritten)) == 0 {
		return args, jsonSame(string(args), "{}")
	}
	var w struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(rewritten, &w)
	if _, wrapped := w.Properties[wrappedParam]; wrapped && len(w.Properties) == 1 && !bytes.Contains(original, []byte(`"`+wrappedParam+`"`)) {
		// The whole schema as JSON text.
		b, _ := json.Marshal(map[string]string{wrappedParam: string(args)})
		return b, true
	}
	shaped, err := schemaargs.Shape(original, rewritten, args)
	if err != nil {
		t.Fatalf("shape: %v", err)
	}
	return shaped, true
}

// sameButNulls compares the client's arguments with the generated ones:
// equal, but for members the generated ones leave out and the client's
// hold as null. Strict mode has no way to leave a member out, so a null
// the tool's own schema takes is kept (the tool reads it as it reads a
// null from any model).
func sameButNulls(got, want string) bool {
	var g, w any
	if json.Unmarshal([]byte(got), &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		return false
	}
	return reflect.DeepEqual(dropExtraNulls(g, w), w)
}

func dropExtraNulls(g, w any) any {
	switch gv := g.(type) {
	case map[string]any:
		wv, ok := w.(map[string]any)
		if !ok {
			return g
		}
		out := map[string]any{}
		for k, v := range gv {
			wk, in := wv[k]
			if !in && v == nil {
				continue
			}
			out[k] = dropExtraNulls(v, wk)
		}
		return out
	case []any:
		wv, ok := w.([]any)
		if !ok || len(wv) != len(gv) {
			return g
		}
		out := make([]any, len(gv))
		for i := range gv {
			out[i] = dropExtraNulls(gv[i], wv[i])
		}
		return out
	}
	return g
}

// jsonSame compares two JSON texts as values.
func jsonSame(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
