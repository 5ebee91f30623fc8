package schema

import (
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// What each dialect makes of the same schemas (schema.go,
// tools_normalize_schema.go), checked against the exact bytes or the
// dialect's validator.

// TestPydanticAndZodSchemasPassEveryDialect: pydantic v2 output ($defs,
// anyOf with null, $ref with a description beside it, title, default,
// examples, a map) and zod-to-json-schema output (a root $ref into
// definitions, $schema, "#/properties/…" references) pass every dialect's
// validator, without duplicate keys, in both protocols.
func TestPydanticAndZodSchemasPassEveryDialect(t *testing.T) {
	pydantic := `{"$defs":{"Addr":{"properties":{"city":{"title":"City","type":"string"},` +
		`"zip":{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"title":"Zip"}},"required":["city"],"title":"Addr","type":"object"}},` +
		`"properties":{"home":{"anyOf":[{"$ref":"#/$defs/Addr"},{"type":"null"}],"default":null,"description":"Home"},` +
		`"work":{"$ref":"#/$defs/Addr","description":"Work"},` +
		`"tags":{"items":{"type":"string"},"title":"Tags","type":"array","examples":[["a"]]},` +
		`"kind":{"enum":[1,2],"title":"Kind","type":"integer"},` +
		`"meta":{"additionalProperties":{"type":"integer"},"type":"object","title":"Meta"}},` +
		`"required":["work","kind"],"title":"Args","type":"object"}`
	zod := `{"$ref":"#/definitions/Args","definitions":{"Args":{"type":"object","properties":{` +
		`"path":{"type":"string","minLength":1},` +
		`"a":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false},` +
		`"b":{"$ref":"#/definitions/Args/properties/a"},` +
		`"depth":{"type":"number","default":1}},"required":["path","b"],"additionalProperties":false}},` +
		`"$schema":"http://json-schema.org/draft-07/schema#"}`
	for _, d := range []string{"permissive", "gemini", "kimi", "openai_strict", "anthropic"} {
		for name, params := range map[string]string{"pydantic": pydantic, "zod": zod} {
			for _, proto := range []transforms.Protocol{transforms.ProtocolResponses, transforms.ProtocolChat} {
				t.Run(d+"/"+name+"/"+proto.String(), func(t *testing.T) {
					body := fn(params, strictOn)
					if proto == transforms.ProtocolChat {
						body = chatFn(params, strictOn)
					}
					out, _ := nsOK(t, `{"dialect":"`+d+`"}`, proto, body)
					for i, tl := range corpusTools(t, out, proto) {
						if p := fakeprovider.CheckToolSchema(d, i, tl.Name, tl.Parameters, tl.Strict); len(p) > 0 {
							t.Errorf("refused: %v\n%s", p, tl.Parameters)
						}
					}
				})
			}
		}
	}
}

// TestFormatsMapsAndRefsPerDialect: anthropic drops formats outside its
// list on any type, gemini only on strings; a strict function with a map
// goes non-strict in both shapes (in Chat, the strict member inside the
// function object) and a non-strict one keeps its map; kimi keeps local
// references and refuses others.
func TestFormatsMapsAndRefsPerDialect(t *testing.T) {
	formats := `{"type":"object","properties":{"n":{"type":"integer","format":"int64"},"s":{"type":"string","format":"date"}}}`
	out, _, err := normalizeRecovered(t, `{"dialect":"anthropic"}`, transforms.ProtocolResponses, fn(formats, strictOn))
	transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{"n":{"type":"integer","description":"(format: \"int64\")"},"s":{"type":"string","format":"date"}},"additionalProperties":false}`, strictOn))
	out, _, err = normalizeRecovered(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(formats))
	transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{"n":{"type":"integer","format":"int64"},"s":{"type":"string","description":"(format: \"date\")"}}}`))

	mapped := `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"}}},"required":["m"]}`
	wantMap := `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"},"properties":{}}},"required":["m"]}`
	out, x, err := normalizeRecovered(t, `{"dialect":"openai_strict"}`, transforms.ProtocolChat, chatFn(mapped, strictOn))
	transformtest.Accepted(t, out, err, chatFn(wantMap, `,"strict":false`))
	if !hasDecision(x, "f", "strict_off") {
		t.Errorf("no strict_off decision: %v", x.Decisions())
	}
	out, _, err = normalizeRecovered(t, `{"dialect":"anthropic"}`, transforms.ProtocolResponses, fn(mapped, strictOn))
	transformtest.Accepted(t, out, err, fn(wantMap, `,"strict":false`))
	out, _, err = normalizeRecovered(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, fn(mapped))
	transformtest.Accepted(t, out, err, fn(wantMap))

	local := `{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}}}`
	body := fn(local)
	out, _, err = normalizeRecovered(t, `{"dialect":"kimi"}`, transforms.ProtocolResponses, body)
	if err != nil || string(out) != body {
		t.Fatalf("kimi: want the body unchanged, got %v\n%s", err, out)
	}
	for _, ref := range []string{"https://x/y.json", "other.json#/x", "#anchor"} {
		out, _, err = normalizeRecovered(t, `{"dialect":"kimi"}`, transforms.ProtocolResponses, fn(`{"type":"object","properties":{"a":{"$ref":"`+ref+`"}}}`))
		transformtest.Rejected(t, out, err, "schema_ref_unresolved")
	}
}

// TestNormalizeSchemaEnumNullAndUntypedFormat: an enum that loses its null
// to enum_to_string says nullable instead, and a format without a type is
// judged as on a string.
func TestNormalizeSchemaEnumNullAndUntypedFormat(t *testing.T) {
	gemini := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"gemini"}}]`)
	body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"n":{"type":"integer","enum":[1,null]},"u":{"format":"uri"}}}}]}`)
	x := transformtest.Begin(t, gemini, transforms.ProtocolResponses, body)
	out, err := x.RewriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"n":{"type":"string","enum":["1"],"nullable":true},"u":{"type":"string","description":"(format: \"uri\")"}}}}]}`)
	anthropic := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"anthropic"}}]`)
	body = []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"h":{"format":"hostname"}},"required":["h"],"additionalProperties":false}}]}`)
	x = transformtest.Begin(t, anthropic, transforms.ProtocolResponses, body)
	if out, err = x.RewriteRequest(body); err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"h":{"description":"(format: \"hostname\")"}},"required":["h"],"additionalProperties":false}}]}`)
}
