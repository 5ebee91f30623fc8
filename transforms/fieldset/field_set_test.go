package fieldset

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

func fieldSetChain(t *testing.T, path, value string) *transforms.Chain {
	t.Helper()
	return transformtest.Chain(t, `[{"transform":"field_set","config":{"path":`+quote(path)+`,"value":`+value+`}}]`)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestFieldSetRewritesInOnePass(t *testing.T) {
	for _, tc := range []struct {
		name, path, value, in, want string
	}{
		{"replace top level", "service_tier", `"flex"`,
			`{"model":"m", "service_tier" : "auto","input":"x"}`,
			`{"model":"m", "service_tier" : "flex","input":"x"}`},
		{"append to object", "service_tier", `"flex"`,
			"{\"model\":\"m\",\n \"input\":[1, 2]\n}",
			"{\"model\":\"m\",\n \"input\":[1, 2],\"service_tier\":\"flex\"\n}"},
		{"empty object", "a", `1`, `{ }`, `{"a":1 }`},
		{"nested, existing parent", "reasoning.effort", `"high"`,
			`{"model":"m","reasoning":{"summary":"auto"}}`,
			`{"model":"m","reasoning":{"summary":"auto","effort":"high"}}`},
		{"nested, replace leaf", "reasoning.effort", `"high"`,
			`{"reasoning":{"effort":"low","summary":"auto"}}`,
			`{"reasoning":{"effort":"high","summary":"auto"}}`},
		{"nested, missing parents", "metadata.team.tier", `{"a": [1, true]}`,
			`{"model":"m"}`,
			`{"model":"m","metadata":{"team":{"tier":{"a":[1,true]}}}}`},
		{"nested, parent not an object", "reasoning.effort", `"high"`,
			`{"reasoning":null,"model":"m"}`,
			`{"reasoning":{"effort":"high"},"model":"m"}`},
		{"duplicate keys all written", "stream", `false`,
			`{"stream":true,"model":"m","stream":true}`,
			`{"stream":false,"model":"m","stream":false}`},
		{"key needing escapes", `we"ird`, `"x"`, `{}`, `{"we\"ird":"x"}`},
		{"unicode untouched", "tag", `"é"`, `{"input":"日本語"}`, `{"input":"日本語","tag":"é"}`},
		{"escaped key is the same key", "metadata.team", `"a"`,
			`{"metadata":{"te\u0061m":"evil"}}`,
			`{"metadata":{"te\u0061m":"a"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fieldSetChain(t, tc.path, tc.value)
			x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(tc.in))
			out, err := x.RewriteRequest([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Fatalf("got  %s\nwant %s", out, tc.want)
			}
			if len(x.Applied()) != 1 || x.Applications()[0].Phase != transforms.PhaseRequest {
				t.Fatalf("applied = %v, applications = %v", x.Applied(), x.Applications())
			}
		})
	}
}

func TestFieldSetLeavesBodiesAlone(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"already set", `{"model":"m","service_tier":"flex"}`},
		{"array body", `[1,2]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fieldSetChain(t, "service_tier", `"flex"`)
			in := []byte(tc.in)
			x := transformtest.Begin(t, c, transforms.ProtocolChat, in)
			out, err := x.RewriteRequest(in)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonspan.SameSlice(out, in) {
				t.Fatalf("body changed: %s", out)
			}
			if x.Unreadable() || len(x.Applied()) != 0 {
				t.Fatalf("invalid = %v, applied = %v", x.Unreadable(), x.Applied())
			}
		})
	}
}

// A body field_set cannot read is refused, never forwarded with the pin
// skipped: an upstream that reads NaN or deep nesting would get what the
// rule was there to prevent.
func TestFieldSetRefusesBodiesItCannotRead(t *testing.T) {
	for _, tc := range []struct{ name, in, msg string }{
		{"not JSON", `{"model": nope}`, "invalid character 'o' in literal null (expecting 'u') at byte offset 11"},
		{"truncated", `{"model":"m",`, "unexpected end of JSON input at byte offset 13"},
		{"trailing garbage", `{"model":"m"} x`, "invalid character 'x' after top-level value at byte offset 14"},
		{"bad value elsewhere", `{"model":"m","input":[1,}`, "invalid character '}' looking for beginning of value at byte offset 24"},
		{"NaN", `{"model":"m","metadata":{"n":NaN}}`, "invalid character 'N' looking for beginning of value at byte offset 29"},
		{"-Infinity", `{"model":"m","x":-Infinity}`, "invalid character 'I' in numeric literal at byte offset 18"},
		// The object and 1,000 arrays: 1,001 levels, though no single
		// value the rule skips is nested past 1,000 on its own.
		{"1,001 levels", `{"model":"m","a":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`, "nested deeper than 1000 levels at byte offset 1016"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fieldSetChain(t, "model", `"pinned"`)
			in := []byte(tc.in)
			x := transformtest.Begin(t, c, transforms.ProtocolChat, in)
			out, err := x.RewriteRequest(in)
			e := transformtest.Rejected(t, out, err, "invalid_json")
			if want := "the request body is not JSON the gateway reads: " + tc.msg; e.Message != want {
				t.Fatalf("message %q, want %q", e.Message, want)
			}
		})
	}
}

func TestFieldSetConfigErrors(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{`{"value":1}`, "rule 0 (field_set): provision llm_transform.transforms.field_set: path: required"},
		{`{"path":"a"}`, "rule 0 (field_set): provision llm_transform.transforms.field_set: value: required"},
		{`{"path":"a..b","value":1}`, `rule 0 (field_set): provision llm_transform.transforms.field_set: path "a..b": empty member name`},
		{`{"path":"a","value":1,"vlaue":2}`, `rule 0 (field_set): decoding module config: llm_transform.transforms.field_set: json: unknown field "vlaue"`},
	} {
		var cfgs []transforms.RuleConfig
		if err := json.Unmarshal([]byte(`[{"transform":"field_set","config":`+tc.config+`}]`), &cfgs); err != nil {
			t.Fatal(err)
		}
		if _, err := transforms.Compile(transformtest.Context(t), cfgs, transforms.ScopeGlobal, ""); err == nil || err.Error() != tc.want {
			t.Errorf("config %s: err = %v, want %q", tc.config, err, tc.want)
		}
	}
	// A response phase is refused: the transform only writes requests.
	_, err := transforms.Compile(transformtest.Context(t), []transforms.RuleConfig{{Transform: "field_set", Phase: "response", Config: json.RawMessage(`{"path":"a","value":1}`)}}, transforms.ScopeProvider, "")
	if err == nil || err.Error() != "rule 0 (field_set): transform has no response phase" {
		t.Fatalf("err = %v", err)
	}
}

// TestChainOrderAcrossScopes runs three field_set rules on one field, one
// per scope: each rule sees the output of the one before, so the last
// scope's value wins and every rule counts as applied, in chain order.
func TestChainOrderAcrossScopes(t *testing.T) {
	compile := func(scope transforms.Scope, prefix, value string) []*transforms.Rule {
		rules, err := transforms.Compile(transformtest.Context(t), []transforms.RuleConfig{{Transform: "field_set", Config: json.RawMessage(`{"path":"tier","value":"` + value + `"}`)}}, scope, prefix)
		if err != nil {
			t.Fatal(err)
		}
		return rules
	}
	provider := compile(transforms.ScopeProvider, "", "p")
	global := compile(transforms.ScopeGlobal, "global", "g")
	key := compile(transforms.ScopeAPIKey, "api_key 0123abcd", "k")
	for _, tc := range []struct {
		chain *transforms.Chain
		want  string
		names []string
	}{
		{transforms.NewChain(provider, global, key), `{"tier":"k"}`, []string{"rule 0 (field_set)", "global rule 0 (field_set)", "api_key 0123abcd rule 0 (field_set)"}},
		{transforms.NewChain(provider, global), `{"tier":"g"}`, []string{"rule 0 (field_set)", "global rule 0 (field_set)"}},
	} {
		x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
		x.Explain = true
		tc.chain.Begin(x, "m")
		out, err := x.RewriteRequest([]byte(`{"tier":"client"}`))
		if err != nil || string(out) != tc.want {
			t.Fatalf("out = %s, %v; want %s", out, err, tc.want)
		}
		var names []string
		for _, a := range x.Applications() {
			names = append(names, a.Rule.Name())
		}
		if strings.Join(names, "|") != strings.Join(tc.names, "|") {
			t.Fatalf("applications = %q", names)
		}
		if len(x.Decisions()) != len(tc.names) || x.Decisions()[0] != (transforms.Decision{Tool: "tier", Action: "set_field", Reason: "field_set rule"}) {
			t.Fatalf("decisions = %+v", x.Decisions())
		}
	}
	if provider[0].Hits() != 2 || global[0].Hits() != 2 || key[0].Hits() != 1 {
		t.Fatalf("hits = %d %d %d", provider[0].Hits(), global[0].Hits(), key[0].Hits())
	}
}

func BenchmarkFieldSet(b *testing.B) {
	body := []byte(`{"model":"m","input":[` + strings.Repeat(`{"type":"message","role":"user","content":"`+strings.Repeat("x", 500)+`"},`, 2000) + `{}],"reasoning":{"summary":"auto"}}`)
	rules, err := transforms.Compile(transformtest.Context(b), []transforms.RuleConfig{{Transform: "field_set", Config: json.RawMessage(`{"path":"reasoning.effort","value":"high"}`)}}, transforms.ScopeGlobal, "")
	if err != nil {
		b.Fatal(err)
	}
	c := transforms.NewChain(rules)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
		c.Begin(x, "m")
		if _, err := x.RewriteRequest(body); err != nil {
			b.Fatal(err)
		}
		x.Release()
	}
}
