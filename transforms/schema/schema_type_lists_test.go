package schema

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// Type lists and unions (schema.go): a list of types beside the schema's
// own anyOf or allOf, and object in a list.

// TestObjectInTypeListGetsProperties: a type list that includes object gets
// properties:{}, as every object schema does: every validator, permissive
// included, asks for it.
func TestObjectInTypeListGetsProperties(t *testing.T) {
	out, _ := nsOK(t, `{}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"a":{"type":["object","string"],"description":"A value or a map."}}}`))
	validatorAccepts(t, "permissive", out)
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"a":{"type":["object","string"],"description":"A value or a map.","properties":{}}}}`))
}

// TestTypeArraysBesideAnyOfKeepsBothUnions: with type_arrays any_of, a type
// list beside the schema's own anyOf becomes two allOf members, keeping
// both unions without writing anyOf twice.
func TestTypeArraysBesideAnyOfKeepsBothUnions(t *testing.T) {
	out, _ := nsOK(t, `{"type_arrays":"any_of"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"a":{"type":["string","null"],"anyOf":[{"minLength":1},{"maxLength":0}]}}}`))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"a":{"allOf":[`+
		`{"anyOf":[{"type":"string"},{"type":"null"}]},`+
		`{"anyOf":[{"minLength":1},{"maxLength":0}]}]}}}`))
}

// TestAllOfMergeKeepsNullOfOptionalProperty: under openai_strict with
// type_arrays any_of, an optional property whose type list and own anyOf
// are merged into allOf gets {"type":"null"} in both unions, so the
// property, now required, still takes null.
func TestAllOfMergeKeepsNullOfOptionalProperty(t *testing.T) {
	params := `{"type":"object","properties":{"v":{"type":["string","integer"],"anyOf":[{"type":"string","format":"date"},{"type":"integer","minimum":0}]}}}`
	out, _, err := normalizeRecovered(t, `{"dialect":"openai_strict","type_arrays":"any_of"}`, transforms.ProtocolResponses, fn(params, strictOn))
	transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{"v":{"allOf":[`+
		`{"anyOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]},`+
		`{"anyOf":[{"type":"string","format":"date"},{"type":"integer","minimum":0},{"type":"null"}]}]}},`+
		`"additionalProperties":false,"required":["v"]}`, strictOn))
}

// TestAllOfMergeJoinsOwnAllOf: the allOf the merge writes joins the
// schema's own allOf: one allOf holding both unions and the schema's
// members, not two allOf keys of which upstreams keep the last.
func TestAllOfMergeJoinsOwnAllOf(t *testing.T) {
	params := `{"type":"object","properties":{"v":{"type":["string","integer"],"anyOf":[{"minLength":1},{"minimum":0}],"allOf":[{"description":"x"}]}}}`
	out, _, err := normalizeRecovered(t, `{"dialect":"permissive","type_arrays":"any_of"}`, transforms.ProtocolResponses, fn(params))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.NoDuplicateKeys(t, out)
	var doc struct {
		Tools []struct {
			Parameters struct {
				Properties map[string]map[string]any `json:"properties"`
			} `json:"parameters"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	v := doc.Tools[0].Parameters.Properties["v"]
	var want []any
	_ = json.Unmarshal([]byte(`[{"anyOf":[{"type":"string"},{"type":"integer"}]},{"anyOf":[{"minLength":1},{"minimum":0}]},{"description":"x"}]`), &want)
	got, _ := v["allOf"].([]any)
	if len(v) != 1 || !sameMembers(got, want) {
		t.Fatalf("v = %v, want one allOf of %v", v, want)
	}
}

// sameMembers reports whether a and b hold the same values, in any order.
func sameMembers(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	used := make([]bool, len(b))
outer:
	for _, x := range a {
		for j, y := range b {
			if !used[j] && reflect.DeepEqual(x, y) {
				used[j] = true
				continue outer
			}
		}
		return false
	}
	return true
}
