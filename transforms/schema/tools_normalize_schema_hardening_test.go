package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// rfNS runs one tools_normalize_schema rule, panics as errors.
func rfNS(t *testing.T, cfg string, p transforms.Protocol, body string) (out []byte, x *transforms.Exchange, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return nsRun(t, cfg, p, body)
}

// TestFixReviewSchemaNullableWrapStillAllocates: the fix bounds what a
// schema writes (maxOut, checked as each sub-schema starts), not what the
// nullable wrap allocates: every untyped optional property of a closed
// object clones its whole written subtree to wrap it in
// anyOf[…,{"type":"null"}], also while unwinding after schema_too_large.
// 170 nested untyped objects (no reference, ~20 bytes each) above one
// reference into a doubling $defs chain make a 4.7 KB request allocate
// ~130 MB under openai_strict with inline_refs, and ~195 MB for the
// slightly larger one that is refused. Right: allocation within a small
// multiple of the 1 MiB output limit (the fix's own review test asks for
// under 32 MB).
func TestFixReviewSchemaNullableWrapStillAllocates(t *testing.T) {
	for _, fan := range []int{12, 14} {
		var b strings.Builder
		const levels = 170
		for i := 0; i < levels; i++ {
			b.WriteString(`{"properties":{"p":`)
		}
		b.WriteString(`{"$ref":"#/$defs/e0"}`)
		for i := 0; i < levels; i++ {
			b.WriteString(`}}`)
		}
		var defs []string
		for k := 0; k < fan; k++ {
			defs = append(defs, fmt.Sprintf(`"e%d":{"properties":{"a":{"$ref":"#/$defs/e%d"},"b":{"$ref":"#/$defs/e%d"}}}`, k, k+1, k+1))
		}
		defs = append(defs, fmt.Sprintf(`"e%d":{"description":"xxxxxxxxxxxxxxxxxxxx"}`, fan))
		params := `{"type":"object","properties":{"q":` + b.String() + `},"$defs":{` + strings.Join(defs, ",") + `}}`
		body := fn(params, strictOn)
		c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"openai_strict","inline_refs":true}}]`)
		x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(body))
		var m1, m2 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m1)
		out, err := x.RewriteRequest([]byte(body))
		runtime.ReadMemStats(&m2)
		if alloc := m2.TotalAlloc - m1.TotalAlloc; alloc > 32<<20 {
			t.Errorf("fan %d: a %d-byte request allocated %d MB (%d bytes out, err %v)", fan, len(body), alloc>>20, len(out), err)
		}
	}
}

// rfDoubling is a parameters schema whose reference chain doubles k
// times under a dialect that inlines, with a leaf of pad bytes.
func rfDoubling(k, pad int) string {
	var defs []string
	for i := 0; i < k; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"a":{"$ref":"#/$defs/d%d"},"b":{"$ref":"#/$defs/d%d"}}}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":"string","description":"%s"}`, k, strings.Repeat("x", pad)))
	return `{"type":"object","properties":{"r":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
}

// TestFixReviewGuardSchemaLimitPerFunction (guard, passes): the arena is
// shared by the request's functions, and each one's limit counts from
// where its own output starts: two functions that each write ~700 KB
// (under their 1 MiB) pass; an unchanged first function then a second
// that blows up is refused naming the second.
func TestFixReviewGuardSchemaLimitPerFunction(t *testing.T) {
	two := func(a, b string) string {
		return `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":` + a + `},{"type":"function","name":"g","parameters":` + b + `}]}`
	}
	big := rfDoubling(12, 100) // 4096 leaves of ~140 bytes: ~700 KB inlined
	out, _, err := rfNS(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, two(big, big))
	if err != nil {
		t.Fatalf("two functions under their own limit: %v", err)
	}
	if len(out) < 1<<20 {
		t.Fatalf("the output (%d bytes) is not the sum of two large schemas: the guard tests nothing", len(out))
	}
	_, _, err = rfNS(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, two(`{"type":"object","properties":{"a":{"type":"string"}}}`, rfDoubling(20, 10)))
	var e *transforms.Error
	if !errors.As(err, &e) || e.Code != "schema_too_large" || e.Param != "tools[1].parameters" {
		t.Fatalf("want schema_too_large at tools[1].parameters, got %v", err)
	}
}

// TestFixReviewGuardPointerCachePerFunction (guard, passes): the cache of
// resolved pointers and the index of the objects they cross are per
// function: two functions with the same "#/$defs/a" at different offsets
// and meanings each get their own; ~1 and %xx are decoded against keys
// that are themselves escaped in the body.
func TestFixReviewGuardPointerCachePerFunction(t *testing.T) {
	body := `{"model":"m","input":"hi","tools":[` +
		`{"type":"function","name":"f","parameters":{"type":"object","properties":{"x":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}}}},` +
		`{"type":"function","name":"g","parameters":{"type":"object","$defs":{"pad":{"type":"null"},"a":{"type":"integer"}},"properties":{"x":{"$ref":"#/$defs/a"}}}},` +
		`{"type":"function","name":"h","parameters":{"type":"object","properties":{"s":{"$ref":"#/$defs/a~1b"},"p":{"$ref":"#/$defs/a%20b"},"t":{"$ref":"#/$defs/~0c"}},"$defs":{"a\u002fb":{"type":"string"},"a b":{"type":"boolean"},"~c":{"type":"number"}}}}]}`
	out, _, err := rfNS(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, body)
	transformtest.Accepted(t, out, err, `{"model":"m","input":"hi","tools":[`+
		`{"type":"function","name":"f","parameters":{"type":"object","properties":{"x":{"type":"string"}}}},`+
		`{"type":"function","name":"g","parameters":{"type":"object","properties":{"x":{"type":"integer"}}}},`+
		`{"type":"function","name":"h","parameters":{"type":"object","properties":{"s":{"type":"string"},"p":{"type":"boolean"},"t":{"type":"number"}}}}]}`)
}

// TestFixReviewGuardNameSets (guard, passes): past 16 names, required and
// properties are matched through a set: openai_strict keeps the bytes of
// a required list that names every property in another order, and
// permissive drops unknown and repeated names from a long list.
func TestFixReviewGuardNameSets(t *testing.T) {
	var props, rev, long, kept []string
	for i := 0; i < 20; i++ {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string"}`, i))
		rev = append(rev, fmt.Sprintf(`"p%d"`, 19-i))
		long = append(long, fmt.Sprintf(`"p%d"`, i), fmt.Sprintf(`"p%d"`, i), fmt.Sprintf(`"q%d"`, i))
		kept = append(kept, fmt.Sprintf(`"p%d"`, i))
	}
	strict := `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(rev, ",") + `],"additionalProperties":false}`
	body := fn(strict, strictOn)
	out, _, err := rfNS(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, body)
	if err != nil || string(out) != body {
		t.Fatalf("want the body unchanged, got %v\n%s", err, out)
	}
	out, _, err = rfNS(t, `{"dialect":"permissive"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{`+strings.Join(props, ",")+`},"required":[`+strings.Join(long, ",")+`]}`))
	transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{`+strings.Join(props, ",")+`},"required":[`+strings.Join(kept, ",")+`]}`))
}

// TestFixReviewSchemaAllOfMergeLosesNullable: under openai_strict with
// type_arrays any_of, an optional property with a type list and an anyOf
// becomes allOf[{anyOf: types + null}, {anyOf: own}], and nullDone is
// set: but the own anyOf is written without null (schemaList(…, false)),
// so the intersection refuses null and the optional property, now in
// required, must be given a value. Before the merge the own anyOf got its
// null. Right: the own anyOf gets {"type":"null"} too.
func TestFixReviewSchemaAllOfMergeLosesNullable(t *testing.T) {
	params := `{"type":"object","properties":{"v":{"type":["string","integer"],"anyOf":[{"type":"string","format":"date"},{"type":"integer","minimum":0}]}}}`
	out, _, err := rfNS(t, `{"dialect":"openai_strict","type_arrays":"any_of"}`, transforms.ProtocolResponses, fn(params, strictOn))
	transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{"v":{"allOf":[`+
		`{"anyOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]},`+
		`{"anyOf":[{"type":"string","format":"date"},{"type":"integer","minimum":0},{"type":"null"}]}]}},`+
		`"additionalProperties":false,"required":["v"]}`, strictOn))
}

// TestFixReviewSchemaAllOfMergeDuplicateKey: the merge writes an allOf
// key of its own beside the schema's allOf, when it has one: two allOf
// keys, of which upstreams keep the last, losing both unions. Right: one
// allOf holding the two unions and the schema's own members.
func TestFixReviewSchemaAllOfMergeDuplicateKey(t *testing.T) {
	params := `{"type":"object","properties":{"v":{"type":["string","integer"],"anyOf":[{"minLength":1},{"minimum":0}],"allOf":[{"description":"x"}]}}}`
	out, _, err := rfNS(t, `{"dialect":"permissive","type_arrays":"any_of"}`, transforms.ProtocolResponses, fn(params))
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

// TestFixReviewKimiTypeListRootDropsAnyOf: with type_arrays any_of, a
// root ["object","null"] beside an anyOf: the anyOf case skips itself
// because typeUnion says the type member will write both in one allOf,
// but the type case first takes the rootObject branch (type "object",
// continue), which writes neither: the client's anyOf is lost without a
// word. Right: type object and the anyOf kept as it came.
func TestFixReviewKimiTypeListRootDropsAnyOf(t *testing.T) {
	params := `{"type":["object","null"],"properties":{"a":{"type":"string"},"b":{"type":"string"}},"anyOf":[{"required":["a"]},{"required":["b"]}]}`
	out, _, err := rfNS(t, `{"dialect":"kimi","type_arrays":"any_of"}`, transforms.ProtocolResponses, fn(params))
	transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"anyOf":[{"required":["a"]},{"required":["b"]}]}`))
}

// TestFixReviewGeminiConstNullTwiceNullable: the fix makes const null say
// nullable:true unless the schema has a nullable member, but the type
// list's null already wrote one (typeMember): {"type":["integer","null"],
// "const":null} becomes {"type":"string","nullable":true,"nullable":true},
// the duplicate the fix set out to end. Right: one nullable.
func TestFixReviewGeminiConstNullTwiceNullable(t *testing.T) {
	for _, v := range []string{`{"type":["integer","null"],"const":null}`, `{"type":"null","const":null}`} {
		out, _, err := rfNS(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(`{"type":"object","properties":{"v":`+v+`}}`))
		transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{"v":{"type":"string","nullable":true}}}`))
	}
}

// TestFixReviewGeminiEmptyTypeEnum: an empty type is now no type, except
// where gemini says the type of an enum made of strings: that looks for
// a missing type member, and "type":"" is present, so {"type":"","enum":
// [1,2]} becomes {"enum":["1","2"]} without the "type":"string" that
// {"enum":[1,2]} gets (the same for a const). Right: type string.
func TestFixReviewGeminiEmptyTypeEnum(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"type":"","enum":[1,2]}`, `{"enum":["1","2"],"type":"string"}`},
		{`{"type":"","const":3}`, `{"enum":["3"],"type":"string"}`},
	} {
		out, _, err := rfNS(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(`{"type":"object","properties":{"v":`+tc.in+`}}`))
		transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{"v":`+tc.want+`}}`))
	}
}

// TestFixReviewStrictEmptyTypeRoot: objectRoot, which decides whether a
// strict function keeps strict, reads "type":"" as a type that is not
// object, while the writer reads it as no type (and an untyped schema
// with properties as an object): {"type":"","properties":{…}} loses
// strict ("needs an object schema at the root") where {"properties":{…}}
// keeps it. Right: strict stays, the schema closed as the untyped one is.
func TestFixReviewStrictEmptyTypeRoot(t *testing.T) {
	out, _, err := rfNS(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, fn(`{"type":"","properties":{"a":{"type":"string"}}}`, strictOn))
	transformtest.Accepted(t, out, err, fn(`{"properties":{"a":{"type":["string","null"]}},"additionalProperties":false,"required":["a"]}`, strictOn))
}

// TestFixReviewKimiRootRefToNonObject: kimi no longer inlines, so a root
// {"$ref":"#/$defs/s"} to a string schema is not seen for what it is: the
// root is untyped, and rootObject writes "type":"object" and
// "properties":{} beside the $ref, a schema no value satisfies (object
// and string), sent without a word. Before the fix it was the 400
// schema_root_not_object the README promises ("an object root"). Right:
// that 400.
func TestFixReviewKimiRootRefToNonObject(t *testing.T) {
	out, _, err := rfNS(t, `{"dialect":"kimi"}`, transforms.ProtocolResponses, fn(`{"$ref":"#/$defs/s","$defs":{"s":{"type":"string"}}}`))
	transformtest.Rejected(t, out, err, "schema_root_not_object")
}

// TestFixReviewGuardSchemaFixes (guard, passes): anthropic drops formats
// outside its list on any type, gemini only on strings; a strict function
// with a map goes non-strict in both shapes, the strict member inside
// Chat's function object; a non-strict one keeps its map; kimi keeps
// local references and refuses others.
func TestFixReviewGuardSchemaFixes(t *testing.T) {
	formats := `{"type":"object","properties":{"n":{"type":"integer","format":"int64"},"s":{"type":"string","format":"date"}}}`
	out, _, err := rfNS(t, `{"dialect":"anthropic"}`, transforms.ProtocolResponses, fn(formats, strictOn))
	transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{"n":{"type":"integer","description":"(format: \"int64\")"},"s":{"type":"string","format":"date"}},"additionalProperties":false}`, strictOn))
	out, _, err = rfNS(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(formats))
	transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{"n":{"type":"integer","format":"int64"},"s":{"type":"string","description":"(format: \"date\")"}}}`))

	mapped := `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"}}},"required":["m"]}`
	wantMap := `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"},"properties":{}}},"required":["m"]}`
	out, x, err := rfNS(t, `{"dialect":"openai_strict"}`, transforms.ProtocolChat, chatFn(mapped, strictOn))
	transformtest.Accepted(t, out, err, chatFn(wantMap, `,"strict":false`))
	if !hasDecision(x, "f", "strict_off") {
		t.Errorf("no strict_off decision: %v", x.Decisions())
	}
	out, _, err = rfNS(t, `{"dialect":"anthropic"}`, transforms.ProtocolResponses, fn(mapped, strictOn))
	transformtest.Accepted(t, out, err, fn(wantMap, `,"strict":false`))
	out, _, err = rfNS(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, fn(mapped))
	transformtest.Accepted(t, out, err, fn(wantMap))

	local := `{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}}}`
	body := fn(local)
	out, _, err = rfNS(t, `{"dialect":"kimi"}`, transforms.ProtocolResponses, body)
	if err != nil || string(out) != body {
		t.Fatalf("kimi: want the body unchanged, got %v\n%s", err, out)
	}
	for _, ref := range []string{"https://x/y.json", "other.json#/x", "#anchor"} {
		out, _, err = rfNS(t, `{"dialect":"kimi"}`, transforms.ProtocolResponses, fn(`{"type":"object","properties":{"a":{"$ref":"`+ref+`"}}}`))
		transformtest.Rejected(t, out, err, "schema_ref_unresolved")
	}
}
