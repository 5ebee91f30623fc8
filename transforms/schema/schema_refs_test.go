package schema

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// $ref resolution (schema.go): JSON pointers with their escapes and
// percent-encoding, chains of references and their depth, caches per
// function, and many references.

// TestRefPointerEscapesArraysChainsAndRootCycle: JSON pointer escapes (~0,
// ~1 and "~01", which is "~1" as a name), references into arrays, a sibling
// beside $ref winning over its target through a chain of references, and
// "#" below the root refused as a cycle.
func TestRefPointerEscapesArraysChainsAndRootCycle(t *testing.T) {
	in := `{"type":"object","properties":{` +
		`"slash":{"$ref":"#/$defs/a~1b"},` +
		`"tilde":{"$ref":"#/$defs/t~0x"},` +
		`"both":{"$ref":"#/$defs/~01"},` +
		`"arr":{"$ref":"#/properties/u/anyOf/1"},` +
		`"u":{"anyOf":[{"type":"string"},{"type":"integer","description":"int"}]},` +
		`"chain":{"$ref":"#/$defs/A","description":"mine"}},` +
		`"$defs":{"a/b":{"type":"string"},"t~x":{"type":"boolean"},"~1":{"type":"number"},` +
		`"A":{"$ref":"#/$defs/B","description":"A's","title":"A"},"B":{"type":"integer","description":"B's","title":"B","minimum":1}}}`
	want := `{"type":"object","properties":{` +
		`"slash":{"type":"string"},` +
		`"tilde":{"type":"boolean"},` +
		`"both":{"type":"number"},` +
		`"arr":{"type":"integer","description":"int"},` +
		`"u":{"anyOf":[{"type":"string"},{"type":"integer","description":"int"}]},` +
		`"chain":{"description":"mine","title":"A","type":"integer","minimum":1}}}`
	out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(in))
	transformtest.JSONEqual(t, out, fn(want))
	validatorAccepts(t, "gemini", out)
	nsErr(t, `{"dialect":"gemini","unsupported":"reject"}`, transforms.ProtocolResponses, fn(`{"type":"object","properties":{"self":{"$ref":"#"}}}`), "schema_ref_cycle")
}

// TestRefPointerIsPercentDecoded: a $ref is a URI fragment, so its JSON
// pointer is percent-decoded (RFC 6901 §6), then ~1 and ~0, as the
// validators do: "My%20Type" and "%24defs" resolve.
func TestRefPointerIsPercentDecoded(t *testing.T) {
	in := `{"type":"object","properties":{"a":{"$ref":"#/$defs/My%20Type"},"b":{"$ref":"#/%24defs/C"}},` +
		`"$defs":{"My Type":{"type":"string"},"C":{"type":"integer"}}}`
	out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(in))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`))
}

// TestMaxRefDepthBoundary: max_ref_depth n takes a chain of exactly n
// references and refuses n+1.
func TestMaxRefDepthBoundary(t *testing.T) {
	chain := func(n int) string {
		var defs strings.Builder
		for i := 1; i < n; i++ {
			defs.WriteString(`"d` + strconv.Itoa(i) + `":{"$ref":"#/$defs/d` + strconv.Itoa(i+1) + `"},`)
		}
		defs.WriteString(`"d` + strconv.Itoa(n) + `":{"type":"string"}`)
		return fn(`{"type":"object","properties":{"a":{"$ref":"#/$defs/d1"}},"$defs":{` + defs.String() + `}}`)
	}
	out, _ := nsOK(t, `{"dialect":"gemini","max_ref_depth":3}`, transforms.ProtocolResponses, chain(3))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"a":{"type":"string"}}}`))
	nsErr(t, `{"dialect":"gemini","max_ref_depth":3}`, transforms.ProtocolResponses, chain(4), "schema_ref_depth")
}

// TestRefPointerCacheIsPerFunction: resolved pointers and the objects they
// cross are cached per function: the same "#/$defs/a" in two functions
// resolves to each one's own definition, and ~1 and %xx decode against keys
// that are themselves escaped in the body.
func TestRefPointerCacheIsPerFunction(t *testing.T) {
	body := `{"model":"m","input":"hi","tools":[` +
		`{"type":"function","name":"f","parameters":{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}}}},` +
		`{"type":"function","name":"g","parameters":{"type":"object","$defs":{"pad":{"type":"null"},"a":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/a"}}}},` +
		`{"type":"function","name":"h","parameters":{"type":"object","properties":{"s":{"$ref":"#/$defs/a~1b"},"p":{"$ref":"#/$defs/a%20b"},"t":{"$ref":"#/$defs/~0c"}},"$defs":{"a\u002fb":{"type":"string"},"a b":{"type":"boolean"},"~c":{"type":"number"}}}}]}`
	out, _, err := normalizeRecovered(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, body)
	transformtest.Accepted(t, out, err, `{"model":"m","input":"hi","tools":[`+
		`{"type":"function","name":"f","parameters":{"type":"object","properties":{"x":{"type":"string"}}}},`+
		`{"type":"function","name":"g","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}},`+
		`{"type":"function","name":"h","parameters":{"type":"object","properties":{"s":{"type":"string"},"p":{"type":"boolean"},"t":{"type":"number"}}}}]}`)
}

// TestThousandsOfRefsAllResolve: 4000 references into $defs all resolve.
// That resolution grows linearly with the references is
// BenchmarkSchemaScaling's to measure: a test does not time.
func TestThousandsOfRefsAllResolve(t *testing.T) {
	schema := func(n int) string {
		var props, defs strings.Builder
		for i := 0; i < n; i++ {
			if i > 0 {
				props.WriteByte(',')
				defs.WriteByte(',')
			}
			props.WriteString(`"p` + strconv.Itoa(i) + `":{"$ref":"#/$defs/d` + strconv.Itoa(i) + `"}`)
			defs.WriteString(`"d` + strconv.Itoa(i) + `":{"type":"string","description":"a definition of some length"}`)
		}
		return fn(`{"type":"object","properties":{` + props.String() + `},"$defs":{` + defs.String() + `}}`)
	}
	// The scaling itself is measured by BenchmarkSchemaScaling (a test
	// must not time): here, 4000 references all resolve.
	out := normalizeLarge(t, `{"dialect":"gemini"}`, schema(4000))
	if bytes.Contains(out, []byte(`"$ref"`)) || bytes.Count(out, []byte(`"description":"a definition of some length"`)) != 4000 {
		t.Errorf("references left unresolved in the output")
	}
}

// TestRefMergePastSixteenKeys: eleven keywords beside $ref and twelve in
// its target (five of them the siblings', one repeated) merge through a
// set: the siblings first and winning, then the target's others in its
// order, the first of a repeat.
func TestRefMergePastSixteenKeys(t *testing.T) {
	var sib, tgt, want strings.Builder
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&sib, `,"x-%d":1`, i)
		fmt.Fprintf(&tgt, `,"x-%d":2`, i+5)
	}
	want.WriteString(`"description":"mine"` + sib.String() + `,"type":"string","x-10":2,"x-11":2,"x-12":2,"x-13":2,"x-14":2,"minLength":1`)
	nsExact(t, `{"dialect":"permissive","inline_refs":true}`,
		fn(`{"type":"object","properties":{"r":{"$ref":"#/$defs/t","description":"mine"`+sib.String()+`}},`+
			`"$defs":{"t":{"type":"string","description":"theirs"`+tgt.String()+`,"minLength":1,"minLength":3}}}`),
		fn(`{"type":"object","properties":{"r":{`+want.String()+`}}}`))
}

// TestRefsIntoOneArrayEachResolve: references to several elements of one
// array (indexed once) each get their own element; one past its end is
// unresolved.
func TestRefsIntoOneArrayEachResolve(t *testing.T) {
	defs := `"$defs":{"l":[{"type":"string"},{"type":"integer"},{"type":"boolean"}]}`
	nsExact(t, `{"dialect":"gemini"}`,
		fn(`{"type":"object","properties":{"a":{"$ref":"#/$defs/l/2"},"b":{"$ref":"#/$defs/l/0"},"c":{"$ref":"#/$defs/l/2"}},`+defs+`}`),
		fn(`{"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"string"},"c":{"type":"boolean"}}}`))
	nsErr(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"a":{"$ref":"#/$defs/l/0"},"b":{"$ref":"#/$defs/l/3"}},`+defs+`}`), "schema_ref_unresolved")
}
