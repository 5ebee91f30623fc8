package schema

import (
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// TestEachFailureClassWithItsMinimalSchema: each way a dialect's upstream
// refused our rewrite of real tools, with the smallest schema that shows
// it: the exact parameters that go upstream, the strict flag, the
// decision, and the dialect's validator accepting them (strict when the
// dialect has a strict mode).
func TestEachFailureClassWithItsMinimalSchema(t *testing.T) {
	for _, tc := range []struct {
		name, dialect, in, want, strict, action string
	}{
		{"openai_strict: $ref with a sibling description: the target inlined under it", "openai_strict",
			`{"type":"object","properties":{"a":{"$ref":"#/$defs/A","description":"The A."}},"required":["a"],"$defs":{"A":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}}}`,
			`{"type":"object","properties":{"a":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"description":"The A.","additionalProperties":false}},"required":["a"],"$defs":{"A":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}},"additionalProperties":false}`,
			"true", "normalize_schema"},
		{"openai_strict: an untyped value: strict off for the tool", "openai_strict",
			`{"type":"object","properties":{"v":{"description":"anything"}},"required":["v"]}`,
			`{"type":"object","properties":{"v":{"description":"anything"}},"required":["v"]}`,
			"false", "strict_off"},
		{"openai_strict: oneOf becomes anyOf", "openai_strict",
			`{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"integer"}]}},"required":["v"]}`,
			`{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}]}},"required":["v"],"additionalProperties":false}`,
			"true", "normalize_schema"},
		{"openai_strict: recursion through #/properties goes through $defs", "openai_strict",
			`{"type":"object","properties":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/properties/node"}}}}},"required":["node"]}`,
			`{"type":"object","properties":{"node":{"type":"object","properties":{"kids":{"type":["array","null"],"items":{"$ref":"#/$defs/node"}}},"additionalProperties":false,"required":["kids"]}},"required":["node"],"$defs":{"node":{"type":"object","properties":{"kids":{"type":["array","null"],"items":{"$ref":"#/$defs/node"}}},"additionalProperties":false,"required":["kids"]}},"additionalProperties":false}`,
			"true", "normalize_schema"},
		{"anthropic: maxItems goes, told", "anthropic",
			`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"maxItems":5}},"required":["tags"]}`,
			`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"},"description":"(maxItems: 5)"}},"required":["tags"],"additionalProperties":false}`,
			"true", "normalize_schema"},
		{"anthropic: recursion: strict off for the tool", "anthropic",
			`{"type":"object","properties":{"n":{"$ref":"#/$defs/N"}},"$defs":{"N":{"type":"object","properties":{"next":{"$ref":"#/$defs/N"}}}}}`,
			`{"type":"object","properties":{"n":{"$ref":"#/$defs/N"}},"$defs":{"N":{"type":"object","properties":{"next":{"$ref":"#/$defs/N"}}}}}`,
			"false", "strict_off"},
		{"gemini: maps travel as JSON text", "gemini",
			`{"type":"object","properties":{"env":{"type":"object","additionalProperties":{"type":"string"}},"names":{"type":"object","propertyNames":{"pattern":"^[a-z]+$"}}}}`,
			`{"type":"object","properties":{"env":{"type":"string","description":"(write a JSON object whose values follow {\"type\":\"string\"} as JSON text)"},"names":{"type":"string","description":"(write a JSON object as JSON text)"}}}`,
			"", "normalize_schema"},
		{"gemini: exclusive bounds made inclusive, exactly for integers, told for numbers", "gemini",
			`{"type":"object","properties":{"n":{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10},"r":{"type":"number","exclusiveMinimum":0.5}}}`,
			`{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9},"r":{"type":"number","minimum":0.5,"description":"(must be greater than 0.5)"}}}`,
			"", "normalize_schema"},
		{"gemini: oneOf becomes anyOf", "gemini",
			`{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`,
			`{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`,
			"", "normalize_schema"},
		{"gemini: untyped values travel as JSON text", "gemini",
			`{"type":"object","properties":{"v":{},"w":{"description":"free"}}}`,
			`{"type":"object","properties":{"v":{"type":"string","description":"(write any JSON value as JSON text)"},"w":{"type":"string","description":"free (write any JSON value as JSON text)"}}}`,
			"", "normalize_schema"},
		{"gemini: annotations beside anyOf go into the branches", "gemini",
			`{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}],"description":"d","title":"T"}}}`,
			`{"type":"object","properties":{"v":{"anyOf":[{"type":"string","description":"d","title":"T"},{"type":"integer","description":"d","title":"T"}]}}}`,
			"", "normalize_schema"},
		{"gemini: BFCL's optional goes", "gemini",
			`{"type":"object","properties":{"v":{"type":"string","optional":true}}}`,
			`{"type":"object","properties":{"v":{"type":"string"}}}`,
			"", "normalize_schema"},
		{"kimi: an object-or-null gets no properties beside its type list", "kimi",
			`{"type":"object","properties":{"page":{"type":["object","null"]}}}`,
			`{"type":"object","properties":{"page":{"anyOf":[{"type":"object","properties":{}},{"type":"null"}]}}}`,
			"", "normalize_schema"},
		{"kimi: zod's #/properties reference points into $defs", "kimi",
			`{"type":"object","properties":{"a":{"type":"object","properties":{"x":{"type":"string"}}},"b":{"$ref":"#/properties/a"}}}`,
			`{"type":"object","properties":{"a":{"type":"object","properties":{"x":{"type":"string"}}},"b":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"object","properties":{"x":{"type":"string"}}}}}`,
			"", "normalize_schema"},
		{"kimi: a property named additionalProperties is renamed", "kimi",
			`{"type":"object","properties":{"additionalProperties":{"type":"string"}}}`,
			`{"type":"object","properties":{"additionalProperties_":{"type":"string"}}}`,
			"", "normalize_schema"},
		{"kimi: an enum without a type gets its values' type", "kimi",
			`{"type":"object","properties":{"level":{"enum":["low","high"]}}}`,
			`{"type":"object","properties":{"level":{"enum":["low","high"],"type":"string"}}}`,
			"", "normalize_schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			strict := ""
			if tc.dialect == "openai_strict" || tc.dialect == "anthropic" {
				strict = `,"strict":true`
			}
			out, x := nsOK(t, `{"dialect":"`+tc.dialect+`"}`, transforms.ProtocolResponses,
				`{"model":"m","input":"hi","tools":[{"type":"function","name":"f"`+strict+`,"parameters":`+tc.in+`}]}`)
			transformtest.JSONEqual(t, []byte(gjson.GetBytes(out, "tools.0.parameters").Raw), tc.want)
			if s := gjson.GetBytes(out, "tools.0.strict").Raw; s != tc.strict {
				t.Errorf("strict %q, want %q", s, tc.strict)
			}
			if !hasDecision(x, "f", tc.action) {
				t.Errorf("no %s decision: %+v", tc.action, x.Decisions())
			}
			validatorAccepts(t, tc.dialect, out)
		})
	}
}

// TestGeminiAnyOfAnnotationsKept: anyof_annotations keep leaves a union's
// description and title beside it, for an endpoint that takes them there.
func TestGeminiAnyOfAnnotationsKept(t *testing.T) {
	in := `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}],"description":"d","title":"T"}}}`
	out, _ := nsOK(t, `{"dialect":"gemini","anyof_annotations":"keep"}`, transforms.ProtocolResponses, fn(in))
	transformtest.JSONEqual(t, out, fn(in))
	if p := fakeprovider.CheckSchema(fakeprovider.DialectGeminiLenientAnyOf, []byte(gjson.GetBytes(out, "tools.0.parameters").Raw), nil); len(p) > 0 {
		t.Errorf("refused: %v", p)
	}
}
