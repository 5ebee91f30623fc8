package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Review of tools_normalize_schema (transforms/tools_normalize_schema.go,
// transforms/schema.go, README "## `tools_normalize_schema`"). Every test
// but the ones marked GUARD pins a defect: its comment says what is wrong
// and what is right, and it fails until the transform is fixed. The
// validators are internal/fakeprovider's, written from
// provider-limits-and-tool-loop.md §A.2.

// srParams is the parameters of the first function of a Responses
// request.
func srParams(t *testing.T, body []byte) ([]byte, *bool) {
	t.Helper()
	tools := corpusTools(t, body, transforms.ProtocolResponses)
	if len(tools) == 0 {
		t.Fatalf("no tools in %s", body)
	}
	return tools[0].Parameters, tools[0].Strict
}

// srAccepted fails when the dialect's validator refuses the parameters.
func srAccepted(t *testing.T, dialect string, body []byte) {
	t.Helper()
	p, strict := srParams(t, body)
	if problems := fakeprovider.CheckSchema(dialect, p, strict); len(problems) > 0 {
		t.Errorf("the %s validator refuses the output:\n  %s\n  %s", dialect, strings.Join(problems, "\n  "), p)
	}
}

// srSame fails unless the request comes back as the very slice it was
// handed, without an error or a decision.
func srSame(t *testing.T, config string, proto transforms.Protocol, body string) {
	t.Helper()
	c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":`+config+`}]`)
	b := []byte(body)
	x := transformtest.Begin(t, c, proto, b)
	x.Explain = true
	out, err := x.RewriteRequest(b)
	if err != nil {
		t.Fatalf("a schema that needs no change was refused: %v", err)
	}
	if !jsonspan.SameSlice(out, b) {
		t.Errorf("a schema that needs no change must come back as the same slice\n in:  %s\n out: %s", b, out)
	}
	if d := x.Decisions(); len(d) != 0 {
		t.Errorf("decisions for a request that needs no change: %+v", d)
	}
}

// --- duplicate keys ------------------------------------------------------------------------------

// TestSchemaReviewGeminiNullableEnumDuplicateKey: zod-to-json-schema writes
// z.enum([...]).nullable() as a type list with null plus null in the enum.
// Under the default gemini rules the type list becomes nullable:true, and
// the enum rule writes nullable:true a second time: the object has the
// key twice. typeListHasNull looks for a bare n in a list of quoted
// strings ("null" starts with a quote), so it never sees the null.
// Right: one nullable.
func TestSchemaReviewGeminiNullableEnumDuplicateKey(t *testing.T) {
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

// TestSchemaReviewGeminiExplicitNullableDuplicateKey: OpenAPI-derived
// schemas often say both type:[T,"null"] and nullable:true. typeMember
// writes nullable:true for the null of the list without looking for the
// member, which is then copied too: nullable twice. Right: one nullable.
func TestSchemaReviewGeminiExplicitNullableDuplicateKey(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"one type",
			`{"type":"object","properties":{"a":{"type":["string","null"],"nullable":true}}}`,
			`{"type":"object","properties":{"a":{"type":"string","nullable":true}}}`},
		{"a union",
			`{"type":"object","properties":{"a":{"type":["string","integer","null"],"nullable":true,"description":"d"}}}`,
			`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"integer"}],"nullable":true,"description":"d"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(tc.in))
			transformtest.JSONEqual(t, out, fn(tc.want))
		})
	}
}

// TestSchemaReviewGeminiConstBesideEnumDuplicateKey: const becomes a
// one-value enum, and an enum already there is copied as well: enum
// twice. Right: one enum; const is the stricter of the two, so its value.
func TestSchemaReviewGeminiConstBesideEnumDuplicateKey(t *testing.T) {
	out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"a":{"const":"x","enum":["x","y"]}}}`))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"a":{"enum":["x"],"type":"string"}}}`))
}

// TestSchemaReviewTypeArraysBesideAnyOfDuplicateKey: with type_arrays
// any_of (or nullable with several types) and no anyOfAlone rule, a type
// list becomes an anyOf written next to the schema's own anyOf: anyOf
// twice. Right: both unions kept, e.g. as two allOf members (the form
// pinned here).
func TestSchemaReviewTypeArraysBesideAnyOfDuplicateKey(t *testing.T) {
	out, _ := nsOK(t, `{"type_arrays":"any_of"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"a":{"type":["string","null"],"anyOf":[{"minLength":1},{"maxLength":0}]}}}`))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"a":{"allOf":[`+
		`{"anyOf":[{"type":"string"},{"type":"null"}]},`+
		`{"anyOf":[{"minLength":1},{"maxLength":0}]}]}}}`))
}

// --- output the validators refuse ----------------------------------------------------------------

// TestSchemaReviewPermissiveObjectInTypeListGetsProperties: "every object
// schema gets properties:{}", but typeOf returns "" for a list of several
// types, so {"type":["object","string"]} gets none, and every validator
// (permissive included) refuses it: 'properties' is required for a schema
// of type 'object'. Right: properties:{} whenever the type includes
// object.
func TestSchemaReviewPermissiveObjectInTypeListGetsProperties(t *testing.T) {
	out, _ := nsOK(t, `{}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"a":{"type":["object","string"],"description":"A value or a map."}}}`))
	srAccepted(t, "permissive", out)
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"a":{"type":["object","string"],"description":"A value or a map.","properties":{}}}}`))
}

// TestSchemaReviewAnthropicFormatOnNonString: the format rule only
// judges string (or untyped) schemas, so OpenAPI-generated integer and
// number formats (int64, int32, double) stay, and Anthropic's strict mode
// refuses them: format 'int64' is not supported in strict mode. Right:
// taken out and told, as on strings.
func TestSchemaReviewAnthropicFormatOnNonString(t *testing.T) {
	out, _ := nsOK(t, `{"dialect":"anthropic"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"id":{"type":"integer","format":"int64"},"r":{"type":"number","format":"double"}},"required":["id","r"]}`, strictOn))
	srAccepted(t, "anthropic", out)
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{`+
		`"id":{"type":"integer","description":"(format: \"int64\")"},`+
		`"r":{"type":"number","description":"(format: \"double\")"}},`+
		`"required":["id","r"],"additionalProperties":false}`, strictOn))
}

// --- semantics lost without need -----------------------------------------------------------------

// TestSchemaReviewAnthropicKeepsOptionalProperties: the anthropic dialect
// copies OpenAI's "every property required, the optional ones nullable".
// Anthropic's strict mode takes optional properties (§A.2 lists a limit
// of 24 of them) and its validator does not ask for them to be required.
// The rewrite makes the model send null for every optional argument (a
// zod .optional() MCP tool refuses null) and turns each into a union
// parameter, of which Anthropic takes only 16. Right: required as given,
// only the object closed.
func TestSchemaReviewAnthropicKeepsOptionalProperties(t *testing.T) {
	out, _ := nsOK(t, `{"dialect":"anthropic"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"]}`, strictOn))
	srAccepted(t, "anthropic", out)
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`, strictOn))
}

// TestSchemaReviewKimiKeepsLocalRefs: Kimi takes local references (its
// validator refuses only non-local ones), yet the kimi dialect inlines
// every reference: a recursive schema (a tree, a filter expression), which
// Kimi accepts, becomes a 400 schema_ref_cycle, and a schema with plain
// $defs loses its bytes. Right: local references left alone, the request
// unchanged.
func TestSchemaReviewKimiKeepsLocalRefs(t *testing.T) {
	tree := `{"type":"object","properties":{"root":{"$ref":"#/$defs/Node"}},"required":["root"],` +
		`"$defs":{"Node":{"type":"object","properties":{"value":{"type":"string"},"kids":{"type":"array","items":{"$ref":"#/$defs/Node"}}},"required":["value"]}}}`
	if p := fakeprovider.CheckSchema("kimi", []byte(tree), nil); len(p) > 0 {
		t.Fatalf("the kimi validator refuses the input itself: %v", p)
	}
	t.Run("recursive", func(t *testing.T) {
		srSame(t, `{"dialect":"kimi"}`, transforms.ProtocolChat, chatFn(tree))
	})
	plain := `{"type":"object","properties":{"a":{"$ref":"#/$defs/A"}},"$defs":{"A":{"type":"string"}}}`
	t.Run("plain defs", func(t *testing.T) {
		srSame(t, `{"dialect":"kimi"}`, transforms.ProtocolChat, chatFn(plain))
	})
}

// TestSchemaReviewOpenAIStrictMapTurnsStrictOff: a map parameter
// (additionalProperties: {schema}, e.g. env or headers, common in MCP
// servers) is closed to additionalProperties:false with properties:{} —
// the only value left is {}, the parameter is destroyed without a word.
// Strict mode cannot say a map; the transform already turns strict off
// for what strict cannot say (a union root). Right: strict off, the map
// kept (with the properties:{} every dialect adds), a strict_off decision.
func TestSchemaReviewOpenAIStrictMapTurnsStrictOff(t *testing.T) {
	in := `{"type":"object","properties":{"env":{"type":"object","additionalProperties":{"type":"string"}}},"required":["env"],"additionalProperties":false}`
	out, x := nsOK(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, fn(in, strictOn))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"env":{"type":"object","additionalProperties":{"type":"string"},"properties":{}}},"required":["env"],"additionalProperties":false}`, `,"strict":false`))
	if !hasDecision(x, "f", "strict_off") {
		t.Errorf("no strict_off decision: %+v", x.Decisions())
	}
}

// TestSchemaReviewGeminiMapToldInDescription: gemini removes
// additionalProperties, so a map of strings becomes an object without
// properties, and describe_dropped says nothing: the model no longer knows
// that env takes names to strings. Right: told like the other constraints
// taken out.
func TestSchemaReviewGeminiMapToldInDescription(t *testing.T) {
	out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"env":{"type":"object","description":"Variables.","additionalProperties":{"type":"string"}}}}`))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"env":{"type":"object","description":"Variables. (additionalProperties: {\"type\":\"string\"})","properties":{}}}}`))
}

// TestSchemaReviewGeminiConstNullIsNotTheString: const null becomes
// enum ["null"]: the model is told to send the string "null". An enum's
// null is turned into nullable ("null is nullable's business"); const's
// is not. Right: no string "null" among the values; null allowed by
// nullable.
func TestSchemaReviewGeminiConstNullIsNotTheString(t *testing.T) {
	out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"a":{"const":null}}}`))
	p, _ := srParams(t, out)
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

// --- $ref resolution -----------------------------------------------------------------------------

// TestSchemaReviewPercentEncodedPointer: a $ref is a URI fragment, so its
// JSON pointer may be percent-encoded (RFC 6901 §6: a space is %20, and
// "$defs" may be written %24defs); the validators decode it. pointer()
// does not, so gemini refuses the request with schema_ref_unresolved.
// Right: decoded, then ~1 and ~0, then resolved.
func TestSchemaReviewPercentEncodedPointer(t *testing.T) {
	in := `{"type":"object","properties":{"a":{"$ref":"#/$defs/My%20Type"},"b":{"$ref":"#/%24defs/C"}},` +
		`"$defs":{"My Type":{"type":"string"},"C":{"type":"integer"}}}`
	out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(in))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}`))
}

// TestSchemaReviewStrictRootRefChain: objectRoot follows a root $ref, but
// resolves the next reference against the target instead of the whole
// schema, so a root that reaches its object through two references is
// taken for a non-object: strict is turned off for a schema strict mode
// takes as it is. Right: the request unchanged, strict still on.
func TestSchemaReviewStrictRootRefChain(t *testing.T) {
	in := `{"$ref":"#/$defs/A","$defs":{"A":{"$ref":"#/$defs/B"},"B":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}}}`
	on := true
	if p := fakeprovider.CheckSchema("openai_strict", []byte(in), &on); len(p) > 0 {
		t.Fatalf("the openai_strict validator refuses the input itself: %v", p)
	}
	srSame(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, fn(in, strictOn))
}

// --- transparency --------------------------------------------------------------------------------

// TestSchemaReviewOpenAIStrictRequiredOrderKeepsBytes: a strict schema
// that is already closed and lists every property in required, in another
// order than properties, is rewritten (required reordered, a
// normalize_schema decision). Right: nothing needs a change, so the same
// slice.
func TestSchemaReviewOpenAIStrictRequiredOrderKeepsBytes(t *testing.T) {
	in := `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b","a"],"additionalProperties":false}`
	on := true
	if p := fakeprovider.CheckSchema("openai_strict", []byte(in), &on); len(p) > 0 {
		t.Fatalf("the validator refuses the input itself: %v", p)
	}
	srSame(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, fn(in, strictOn))
	srSame(t, `{"dialect":"openai_strict"}`, transforms.ProtocolChat, chatFn(in, strictOn))
}

// --- limits and performance ----------------------------------------------------------------------

// TestSchemaReviewInlineBlowUpThroughNullableWrap: the size budget is
// charged at the end of object(), but the path that wraps an untyped
// optional property of a closed object in anyOf[…,{"type":"null"}]
// returns before the charge. Under anthropic strict (inlining and
// closing) a chain of untyped definitions each naming the previous twice
// is expanded in full before anything is charged: 2^k work for a
// ~1.4 KB request (k=16: ~250 MB allocated; each k doubles it, k=30
// would run for hours). Right: schema_too_large after about the budget's
// worth of output (1 MiB), so well under 32 MB allocated.
func TestSchemaReviewInlineBlowUpThroughNullableWrap(t *testing.T) {
	const k = 16
	var defs strings.Builder
	defs.WriteString(`"d0":{"description":"leaf"}`)
	for i := 1; i <= k; i++ {
		p := "#/$defs/d" + strconv.Itoa(i-1)
		defs.WriteString(`,"d` + strconv.Itoa(i) + `":{"properties":{"a":{"$ref":"` + p + `"},"b":{"$ref":"` + p + `"}}}`)
	}
	params := `{"type":"object","properties":{"x":{"$ref":"#/$defs/d` + strconv.Itoa(k) + `"}},"required":["x"],"$defs":{` + defs.String() + `}}`
	c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"anthropic"}}]`)
	b := []byte(fn(params, strictOn))
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, b)
	var m1, m2 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m1)
	out, err := x.RewriteRequest(b)
	runtime.ReadMemStats(&m2)
	alloc := m2.TotalAlloc - m1.TotalAlloc
	var te *transforms.Error
	if !errors.As(err, &te) || te.Code != "schema_too_large" {
		t.Errorf("want schema_too_large, got %v (%d bytes out)", err, len(out))
	}
	if alloc > 32<<20 {
		t.Errorf("a %d-byte request allocated %d MB before it was refused: the budget is not charged on the nullable path", len(b), alloc>>20)
	}
}

// TestSchemaReviewBudgetCountsNestedBytesRepeatedly: every object's
// whole output is charged to the budget, its children's included, and
// whether or not anything changed: a byte at nesting depth d is charged d
// times. A 100 KB schema with no reference at all, which needs no change,
// is refused under permissive once its bulk sits ten objects deep, with
// "grows too large when its references are inlined". Right: the same
// slice; the budget counts what inlining adds, once.
func TestSchemaReviewBudgetCountsNestedBytesRepeatedly(t *testing.T) {
	var enum strings.Builder
	for i := 0; i < 8000; i++ {
		if i > 0 {
			enum.WriteByte(',')
		}
		enum.WriteString(`"value-` + strconv.Itoa(i) + `"`)
	}
	s := `{"type":"string","enum":[` + enum.String() + `]}`
	for i := 0; i < 10; i++ {
		s = `{"type":"object","properties":{"n":` + s + `}}`
	}
	srSame(t, `{}`, transforms.ProtocolResponses, fn(s))
}

// srLarge runs one rewrite of a large body and returns its output.
func srLarge(t *testing.T, config, body string) []byte {
	t.Helper()
	c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":`+config+`}]`)
	b := []byte(body)
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, b)
	out, err := x.RewriteRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSchemaReviewRefResolutionIsLinear: each $ref is resolved by
// scanning from the root (EachMember over $defs for every reference), so
// inlining is O(references × size of $defs): 8000 references in an
// 800 KB schema take ~6 s under gemini, and the 32 MiB default body
// allows hours. Right: linear (resolve each pointer once, or index $defs);
// BenchmarkSchemaScaling measures it.
func TestSchemaReviewRefResolutionIsLinear(t *testing.T) {
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
	out := srLarge(t, `{"dialect":"gemini"}`, schema(4000))
	if bytes.Contains(out, []byte(`"$ref"`)) || bytes.Count(out, []byte(`"description":"a definition of some length"`)) != 4000 {
		t.Errorf("references left unresolved in the output")
	}
}

// TestSchemaReviewRequiredFilterIsLinear: required is filtered with
// slices.Contains over the property names for each name (and properties()
// does the same per property when closing): O(properties × required)
// under every dialect, the default included. 20000 required properties
// (700 KB) took ~0.8 s. Right: a set; BenchmarkSchemaScaling measures it.
func TestSchemaReviewRequiredFilterIsLinear(t *testing.T) {
	schema := func(n int) string {
		var props, req strings.Builder
		for i := 0; i < n; i++ {
			if i > 0 {
				props.WriteByte(',')
				req.WriteByte(',')
			}
			props.WriteString(`"p` + strconv.Itoa(i) + `":{"type":"string"}`)
			req.WriteString(`"p` + strconv.Itoa(i) + `"`)
		}
		return fn(`{"type":"object","properties":{` + props.String() + `},"required":[` + req.String() + `]}`)
	}
	// The scaling itself is measured by BenchmarkSchemaScaling: here,
	// 40000 properties, all required, keep their bytes.
	body := schema(40000)
	if out := srLarge(t, `{}`, body); string(out) != body {
		t.Errorf("a schema needing no change was rewritten")
	}
}

// --- guards (these pass) -------------------------------------------------------------------------

// TestSchemaReviewGuardRefEdges: GUARD. JSON pointer escapes (~0, ~1 and
// "~01", which is "~1" as a name), references into arrays, a sibling
// beside $ref winning over its target through a chain of references, and
// "#" nested below the root being a cycle.
func TestSchemaReviewGuardRefEdges(t *testing.T) {
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
	srAccepted(t, "gemini", out)
	nsErr(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(`{"type":"object","properties":{"self":{"$ref":"#"}}}`), "schema_ref_cycle")
}

// TestSchemaReviewGuardMaxRefDepthBoundary: GUARD. max_ref_depth n takes
// a chain of exactly n references and refuses n+1.
func TestSchemaReviewGuardMaxRefDepthBoundary(t *testing.T) {
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

// TestSchemaReviewGuardRealisticGenerators: GUARD. pydantic v2 output
// ($defs, anyOf with null, $ref with a description beside it, title,
// default, examples, a map) and zod-to-json-schema output (a root $ref
// into definitions, $schema, "#/properties/…" references) pass every
// dialect's validator, without duplicate keys, in both protocols.
func TestSchemaReviewGuardRealisticGenerators(t *testing.T) {
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
