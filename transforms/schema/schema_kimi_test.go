package schema

import (
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// The kimi dialect (schema.go, tools_normalize_schema.go): local references
// kept, other references refused, an object root.

// TestKimiKeepsLocalRefs: Kimi takes local references, so a recursive
// schema (which inlining would refuse as a cycle) and plain $defs come back
// as the same slice.
func TestKimiKeepsLocalRefs(t *testing.T) {
	tree := `{"type":"object","properties":{"root":{"$ref":"#/$defs/Node"}},"required":["root"],` +
		`"$defs":{"Node":{"type":"object","properties":{"value":{"type":"string"},"kids":{"type":"array","items":{"$ref":"#/$defs/Node"}}},"required":["value"]}}}`
	if p := fakeprovider.CheckSchema("kimi", []byte(tree), nil); len(p) > 0 {
		t.Fatalf("the kimi validator refuses the input itself: %v", p)
	}
	t.Run("recursive", func(t *testing.T) {
		normalizeSame(t, `{"dialect":"kimi"}`, transforms.ProtocolChat, chatFn(tree))
	})
	plain := `{"type":"object","properties":{"a":{"$ref":"#/$defs/A"}},"$defs":{"A":{"type":"string"}}}`
	t.Run("plain defs", func(t *testing.T) {
		normalizeSame(t, `{"dialect":"kimi"}`, transforms.ProtocolChat, chatFn(plain))
	})
}

// TestKimiRootRefToNonObjectIsRefused: a root $ref to a schema that is no
// object is the 400 schema_root_not_object the README promises, not type
// object written beside a $ref to a string, which no value satisfies.
func TestKimiRootRefToNonObjectIsRefused(t *testing.T) {
	out, _, err := normalizeRecovered(t, `{"dialect":"kimi"}`, transforms.ProtocolResponses, fn(`{"$ref":"#/$defs/s","$defs":{"s":{"type":"string"}}}`))
	transformtest.Rejected(t, out, err, "schema_root_not_object")
}

// TestKimiTypeListRootKeepsAnyOf: a root ["object","null"] becomes type
// object; walle takes nothing beside an anyOf, and the root must be an
// object schema, so the client's anyOf (only a constraint here) is told
// in the description.
func TestKimiTypeListRootKeepsAnyOf(t *testing.T) {
	params := `{"type":["object","null"],"properties":{"a":{"type":"string"},"b":{"type":"string"}},"anyOf":[{"required":["a"]},{"required":["b"]}]}`
	out, _, err := normalizeRecovered(t, `{"dialect":"kimi","type_arrays":"any_of"}`, transforms.ProtocolResponses, fn(params))
	transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"description":"(anyOf: [{\"required\":[\"a\"]},{\"required\":[\"b\"]}])"}`))
}
