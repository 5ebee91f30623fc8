package schema

import (
	"encoding/json"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// The gemini dialect (schema.go, tools_normalize_schema.go): nullable
// instead of null in type lists, enums and const; enum and const as string
// enums; what is taken out told in the description. Each object must come
// out with each keyword once.

// TestGeminiNullableEnumWritesOneNullable: a type list with null beside an
// enum holding null (zod-to-json-schema's z.enum([...]).nullable()) gives
// one nullable:true, not the key twice, and the enum loses its null.
func TestGeminiNullableEnumWritesOneNullable(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"string enum",
			`{"type":"object","properties":{"e":{"type":["string","null"],"enum":["a","b",null]}}}`,
			`{"type":"object","properties":{"e":{"type":"string","nullable":true,"enum":["a","b"]}}}`},
		{"integer enum",
			`{"type":"object","properties":{"e":{"type":["integer","null"],"enum":[1,null]}}}`,
			`{"type":"object","properties":{"e":{"type":"string","nullable":true,"enum":["1"]}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(tc.in))
			transformtest.JSONEqual(t, out, fn(tc.want))
		})
	}
}

// TestGeminiExplicitNullableWritesOneNullable: type:[T,"null"] beside an
// explicit nullable:true (common in OpenAPI-derived schemas) gives one
// nullable member.
func TestGeminiExplicitNullableWritesOneNullable(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"one type",
			`{"type":"object","properties":{"a":{"type":["string","null"],"nullable":true}}}`,
			`{"type":"object","properties":{"a":{"type":"string","nullable":true}}}`},
		{"a union",
			`{"type":"object","properties":{"a":{"type":["string","integer","null"],"nullable":true,"description":"d"}}}`,
			// Nothing may stand beside anyOf: each branch says it.
			`{"type":"object","properties":{"a":{"anyOf":[{"type":"string","description":"d","nullable":true},{"type":"integer","description":"d","nullable":true}]}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(tc.in))
			transformtest.JSONEqual(t, out, fn(tc.want))
		})
	}
}

// TestGeminiConstNullBesideNullTypeWritesOneNullable: const null beside a
// type list with null, or beside type null, gives one nullable:true, not
// the key twice.
func TestGeminiConstNullBesideNullTypeWritesOneNullable(t *testing.T) {
	for _, v := range []string{`{"type":["integer","null"],"const":null}`, `{"type":"null","const":null}`} {
		out, _, err := normalizeRecovered(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(`{"type":"object","properties":{"v":`+v+`}}`))
		transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{"v":{"type":"string","nullable":true}}}`))
	}
}

// TestGeminiConstNullIsNullableNotTheString: const null is allowed through
// nullable and never becomes the string "null" among the enum values, which
// would tell the model to send that string.
func TestGeminiConstNullIsNullableNotTheString(t *testing.T) {
	out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"a":{"const":null}}}`))
	p, _ := firstParams(t, out)
	var root struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(p, &root); err != nil {
		t.Fatal(err)
	}
	a := root.Properties["a"]
	if enum, _ := a["enum"].([]any); len(enum) > 0 {
		for _, v := range enum {
			if v == "null" {
				t.Errorf("const null became the string \"null\": %s", p)
			}
		}
	}
	if a["nullable"] != true {
		t.Errorf("null is no longer allowed: %s", p)
	}
}

// TestGeminiConstBesideEnumWritesOneEnum: const beside an enum gives one
// enum holding const's value, the stricter of the two, not the enum key
// twice.
func TestGeminiConstBesideEnumWritesOneEnum(t *testing.T) {
	out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"a":{"const":"x","enum":["x","y"]}}}`))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"a":{"enum":["x"],"type":"string"}}}`))
}

// TestGeminiEmptyTypeEnumGetsTypeString: "type":"" counts as no type: an
// enum or const of numbers gets type string, as it does with no type
// member.
func TestGeminiEmptyTypeEnumGetsTypeString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"type":"","enum":[1,2]}`, `{"enum":["1","2"],"type":"string"}`},
		{`{"type":"","const":3}`, `{"enum":["3"],"type":"string"}`},
	} {
		out, _, err := normalizeRecovered(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(`{"type":"object","properties":{"v":`+tc.in+`}}`))
		transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{"v":`+tc.want+`}}`))
	}
}

// TestNormalizeSchemaGeminiDistributesTypeKeywords: a type list that
// becomes a union under gemini takes each type's keywords into that
// type's branch, instead of losing them beside the anyOf.
func TestNormalizeSchemaGeminiDistributesTypeKeywords(t *testing.T) {
	c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"gemini"}}]`)
	in := `{"type":"object","properties":{"v":{"type":["string","array","null"],"items":{"type":"object","properties":{"id":{"type":"integer"}},"additionalProperties":false},"maxLength":5,"minItems":1,"description":"One or many."}}}`
	want := `{"type":"object","properties":{"v":{"anyOf":[{"type":"string","maxLength":5,"description":"One or many.","nullable":true},{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"}}},"minItems":1,"description":"One or many.","nullable":true}]}}}`
	body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":` + in + `}]}`)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, body)
	out, err := x.RewriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":`+want+`}]}`)
}

// TestGeminiMapToldInDescription: Gemini's Schema has no maps (no
// additionalProperties, and an OBJECT needs properties), so a map travels
// as JSON text, described so that the model writes it and knows what the
// object holds; the arguments get the object back (undo_test.go).
func TestGeminiMapToldInDescription(t *testing.T) {
	out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"env":{"type":"object","description":"Variables.","additionalProperties":{"type":"string"}}}}`))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"env":{"type":"string","description":"Variables. (write a JSON object whose values follow {\"type\":\"string\"} as JSON text)"}}}`))
}

// TestGeminiTypeListBranchesTakeTheirKeywords: each branch of the union a
// type list becomes takes the keywords of its type (integer number's),
// a repeated type each time, a type without keywords none; the keyword
// of a type not in the list is told in the description.
func TestGeminiTypeListBranchesTakeTheirKeywords(t *testing.T) {
	nsExact(t, `{"dialect":"gemini"}`,
		fn(`{"type":"object","properties":{"p":{"type":["boolean","integer","string","integer"],"pattern":"a","minimum":1,"minItems":2,"maxLength":3}}}`),
		fn(`{"type":"object","properties":{"p":{"anyOf":[{"type":"boolean"},{"type":"integer","minimum":1},{"type":"string","pattern":"a","maxLength":3},{"type":"integer","minimum":1}]}}}`))
}

// TestGeminiRepeatedEnumsWriteOneNullable: enums repeated, each with null,
// write one nullable between them, none when the type list already took
// null in.
func TestGeminiRepeatedEnumsWriteOneNullable(t *testing.T) {
	nsExact(t, `{"dialect":"gemini"}`,
		fn(`{"type":"object","properties":{"p":{"type":"string","enum":["a",null],"enum":["b",null]}}}`),
		fn(`{"type":"object","properties":{"p":{"type":"string","enum":["a"],"nullable":true,"enum":["b"]}}}`))
	nsExact(t, `{"dialect":"gemini"}`,
		fn(`{"type":"object","properties":{"p":{"type":["string","null"],"enum":["a",null],"enum":["b",null]}}}`),
		fn(`{"type":"object","properties":{"p":{"type":"string","nullable":true,"enum":["a"],"enum":["b"]}}}`))
}
