package schema

import (
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// The strict dialects, openai_strict and anthropic (schema.go,
// tools_normalize_schema.go): objects closed, optional properties, formats
// and maps, and when strict has to be turned off.

// --- openai_strict -------------------------------------------------------------------------------

// TestOpenAIStrictRequiredOrderKeepsBytes: a closed strict schema whose
// required lists every property, in another order than properties, needs no
// change: the same slice, in both protocols.
func TestOpenAIStrictRequiredOrderKeepsBytes(t *testing.T) {
	in := `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b","a"],"additionalProperties":false}`
	on := true
	if p := fakeprovider.CheckSchema("openai_strict", []byte(in), &on); len(p) > 0 {
		t.Fatalf("the validator refuses the input itself: %v", p)
	}
	normalizeSame(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, fn(in, strictOn))
	normalizeSame(t, `{"dialect":"openai_strict"}`, transforms.ProtocolChat, chatFn(in, strictOn))
}

// TestOpenAIStrictMapTurnsStrictOff: a map parameter (additionalProperties:
// {schema}, e.g. env or headers in MCP servers), which strict mode cannot
// say, turns strict off with a strict_off decision and keeps the map,
// instead of being closed to an object whose only value is {}.
func TestOpenAIStrictMapTurnsStrictOff(t *testing.T) {
	in := `{"type":"object","properties":{"env":{"type":"object","additionalProperties":{"type":"string"}}},"required":["env"],"additionalProperties":false}`
	out, x := nsOK(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, fn(in, strictOn))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"env":{"type":"object","additionalProperties":{"type":"string"},"properties":{}}},"required":["env"],"additionalProperties":false}`, `,"strict":false`))
	if !hasDecision(x, "f", "strict_off") {
		t.Errorf("no strict_off decision: %+v", x.Decisions())
	}
}

// TestStrictRootRefChainKeepsStrict: a root that reaches its object through
// two references is an object root, strict stays on; strict mode takes no
// $defs beside the root's $ref, so the chain's last target is inlined
// there.
func TestStrictRootRefChainKeepsStrict(t *testing.T) {
	in := `{"$ref":"#/$defs/A","$defs":{"A":{"$ref":"#/$defs/B"},"B":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}}}`
	out, _ := nsOK(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, fn(in, strictOn))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false,`+
		`"$defs":{"A":{"$ref":"#/$defs/B"},"B":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}}}`, strictOn))
	validatorAccepts(t, "openai_strict", out)
}

// TestStrictEmptyTypeRootKeepsStrict: a root with "type":"" and properties
// is read as untyped, as the writer reads it: strict stays on and the
// schema is closed like an untyped one.
func TestStrictEmptyTypeRootKeepsStrict(t *testing.T) {
	out, _, err := normalizeRecovered(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, fn(`{"type":"","properties":{"a":{"type":"string"}}}`, strictOn))
	transformtest.Accepted(t, out, err, fn(`{"properties":{"a":{"type":["string","null"]}},"type":"object","additionalProperties":false,"required":["a"]}`, strictOn))
}

// TestNormalizeSchemaStrictPropertyRefKeepsItsNullability: zod writes a
// repeated shape as a reference to the first property that has it
// ("#/properties/a"); under openai_strict the optional a becomes nullable,
// and a required b that refers to it must not. Strict mode resolves only
// $defs, so the shape gets an entry there, which b refers to: recursion
// through such references stays expressible.
func TestNormalizeSchemaStrictPropertyRefKeepsItsNullability(t *testing.T) {
	c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"openai_strict"}}]`)
	in := `{"type":"object","properties":{"a":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]},"b":{"$ref":"#/properties/a"}},"required":["b"]}`
	want := `{"type":"object","properties":{` +
		`"a":{"type":["object","null"],"properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false},` +
		`"b":{"$ref":"#/$defs/a"}},` +
		`"required":["a","b"],"additionalProperties":false,` +
		`"$defs":{"a":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}}}`
	body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":` + in + `}]}`)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, body)
	out, err := x.RewriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":`+want+`}]}`)
}

// --- anthropic -----------------------------------------------------------------------------------

// TestAnthropicKeepsOptionalProperties: anthropic keeps required as given
// and only closes the object: its strict mode takes optional properties,
// and making them required and nullable would have the model send null to
// tools that refuse it.
func TestAnthropicKeepsOptionalProperties(t *testing.T) {
	out, _ := nsOK(t, `{"dialect":"anthropic"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"]}`, strictOn))
	validatorAccepts(t, "anthropic", out)
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`, strictOn))
}

// TestAnthropicDropsFormatOnNonString: formats Anthropic's strict mode
// refuses are taken out and told on integers and numbers (OpenAPI's int64,
// double) as on strings.
func TestAnthropicDropsFormatOnNonString(t *testing.T) {
	out, _ := nsOK(t, `{"dialect":"anthropic"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"id":{"type":"integer","format":"int64"},"r":{"type":"number","format":"double"}},"required":["id","r"]}`, strictOn))
	validatorAccepts(t, "anthropic", out)
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{`+
		`"id":{"type":"integer","description":"(format: \"int64\")"},`+
		`"r":{"type":"number","description":"(format: \"double\")"}},`+
		`"required":["id","r"],"additionalProperties":false}`, strictOn))
}
