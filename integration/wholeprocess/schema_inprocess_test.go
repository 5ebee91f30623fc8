package wholeprocess

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// BenchmarkSchemaRequestInProcess is BenchmarkSchemaRequest's rewrite alone
// in the benchmark process (the same 300 generated tools, gemini): for
// profiles and callgrind counts, which the whole-process figure cannot
// give.
func BenchmarkSchemaRequestInProcess(b *testing.B) {
	doc, _ := schemaToolsBody()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	rules, err := transforms.Compile(ctx, []transforms.RuleConfig{{Transform: "tools_normalize_schema", Config: json.RawMessage(`{"dialect":"gemini"}`)}}, transforms.ScopeProvider, "")
	if err != nil {
		b.Fatal(err)
	}
	chain := transforms.NewChain(rules)
	for i := 0; i < b.N; i++ {
		x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
		chain.Begin(x, "m")
		if _, err := x.RewriteRequest(doc); err != nil {
			b.Fatal(err)
		}
	}
}
