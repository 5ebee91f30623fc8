package schema

import (
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

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
	transformtest.JSONEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"n":{"type":"string","enum":["1"],"nullable":true},"u":{"description":"(format: \"uri\")"}}}}]}`)
	anthropic := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"anthropic"}}]`)
	body = []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"h":{"format":"hostname"}},"required":["h"],"additionalProperties":false}}]}`)
	x = transformtest.Begin(t, anthropic, transforms.ProtocolResponses, body)
	if out, err = x.RewriteRequest(body); err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"h":{"description":"(format: \"hostname\")"}},"required":["h"],"additionalProperties":false}}]}`)
}

// TestNormalizeSchemaHoistsDraft3Required: "required": true on a property
// (draft-03) moves to its parent's list, which every upstream reads.
func TestNormalizeSchemaHoistsDraft3Required(t *testing.T) {
	c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{}}]`)
	for _, tc := range []struct{ in, want string }{
		{`{"type":"object","properties":{"a":{"type":"string","required":true},"b":{"type":"string"}}}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"]}`},
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string","required":true}},"required":["a"]}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","b"]}`},
	} {
		body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":` + tc.in + `}]}`)
		x := transformtest.Begin(t, c, transforms.ProtocolResponses, body)
		out, err := x.RewriteRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		transformtest.JSONEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":`+tc.want+`}]}`)
	}
}

// TestNormalizeSchemaGeminiDistributesTypeKeywords: a type list that
// becomes a union under gemini takes each type's keywords into that
// type's branch, instead of losing them beside the anyOf.
func TestNormalizeSchemaGeminiDistributesTypeKeywords(t *testing.T) {
	c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"gemini"}}]`)
	in := `{"type":"object","properties":{"v":{"type":["string","array","null"],"items":{"type":"object","properties":{"id":{"type":"integer"}},"additionalProperties":false},"maxLength":5,"minItems":1,"description":"One or many."}}}`
	want := `{"type":"object","properties":{"v":{"anyOf":[{"type":"string","maxLength":5},{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"}}},"minItems":1}],"nullable":true,"description":"One or many."}}}`
	body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":` + in + `}]}`)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, body)
	out, err := x.RewriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":`+want+`}]}`)
}

// TestNormalizeSchemaStrictPropertyRefKeepsItsNullability: zod writes a
// repeated shape as a reference to the first property that has it
// ("#/properties/a"); under openai_strict the optional a becomes nullable,
// and a required b that refers to it must not.
func TestNormalizeSchemaStrictPropertyRefKeepsItsNullability(t *testing.T) {
	c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"openai_strict"}}]`)
	in := `{"type":"object","properties":{"a":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]},"b":{"$ref":"#/properties/a"}},"required":["b"]}`
	want := `{"type":"object","properties":{` +
		`"a":{"type":["object","null"],"properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false},` +
		`"b":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}},` +
		`"required":["a","b"],"additionalProperties":false}`
	body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":` + in + `}]}`)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, body)
	out, err := x.RewriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":`+want+`}]}`)
}
