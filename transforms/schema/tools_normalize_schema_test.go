package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// These tests pin tools_normalize_schema's exact output: every expected
// body is written out by hand from the README's dialect table, not taken
// from the transform. The corpus test checks the same dialects with the
// fake providers' validators; here the bytes and the shapes are the point.

// nsRun sends body through one tools_normalize_schema rule with config
// (a JSON object), explained.
func nsRun(t *testing.T, config string, proto transforms.Protocol, body string) ([]byte, *transforms.Exchange, error) {
	t.Helper()
	c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":`+config+`}]`)
	b := []byte(body)
	x := transformtest.Begin(t, c, proto, b)
	x.Explain = true
	out, err := x.RewriteRequest(b)
	return out, x, err
}

// nsOK is nsRun for a request that must pass.
func nsOK(t *testing.T, config string, proto transforms.Protocol, body string) ([]byte, *transforms.Exchange) {
	t.Helper()
	out, x, err := nsRun(t, config, proto, body)
	if err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	transformtest.NoDuplicateKeys(t, out)
	return out, x
}

// nsErr is nsRun for a request that must be a 400 with code.
func nsErr(t *testing.T, config string, proto transforms.Protocol, body, code string) *transforms.Error {
	t.Helper()
	out, _, err := nsRun(t, config, proto, body)
	var te *transforms.Error
	if !errors.As(err, &te) {
		t.Fatalf("want a %s error, got %v\n%s", code, err, out)
	}
	if te.Status != 400 || te.Code != code {
		t.Fatalf("want 400 %s, got %d %s: %s", code, te.Status, te.Code, te.Message)
	}
	return te
}

// fn is a Responses request with one function f and the given
// parameters; extra members (",\"strict\":true") go after them.
func fn(params string, extra ...string) string {
	return `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":` + params + strings.Join(extra, "") + `}]}`
}

// chatFn is the same in Chat's shape.
func chatFn(params string, extra ...string) string {
	return `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":` + params + strings.Join(extra, "") + `}}]}`
}

const strictOn = `,"strict":true`

func hasDecision(x *transforms.Exchange, tool, action string) bool {
	for _, d := range x.Decisions() {
		if d.Tool == tool && d.Action == action {
			return true
		}
	}
	return false
}

// normalizeRecovered is nsRun with a panic turned into an error, so one
// crashing case does not take the package's tests down.
func normalizeRecovered(t *testing.T, cfg string, p transforms.Protocol, body string) (out []byte, x *transforms.Exchange, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return nsRun(t, cfg, p, body)
}

// firstParams returns the parameters and strict member of the first
// function of a Responses request.
func firstParams(t *testing.T, body []byte) ([]byte, *bool) {
	t.Helper()
	tools := corpusTools(t, body, transforms.ProtocolResponses)
	if len(tools) == 0 {
		t.Fatalf("no tools in %s", body)
	}
	return tools[0].Parameters, tools[0].Strict
}

// validatorAccepts fails when the dialect's validator refuses the
// parameters.
func validatorAccepts(t *testing.T, dialect string, body []byte) {
	t.Helper()
	p, strict := firstParams(t, body)
	if problems := fakeprovider.CheckSchema(dialect, p, strict); len(problems) > 0 {
		t.Errorf("the %s validator refuses the output:\n  %s\n  %s", dialect, strings.Join(problems, "\n  "), p)
	}
}

// normalizeSame fails unless the request comes back as the very slice it
// was handed, without an error or a decision.
func normalizeSame(t *testing.T, config string, proto transforms.Protocol, body string) {
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

// normalizeLarge runs one rewrite of a large body and returns its output.
func normalizeLarge(t *testing.T, config, body string) []byte {
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

// --- 1. bytes ------------------------------------------------------------------------------------

func TestNormalizeSchemaUnchangedIsSameSlice(t *testing.T) {
	// Already what every dialect wants: typed objects with properties,
	// required naming them, string enums, no keyword anyone refuses.
	params := `{"type":"object","properties":{"path":{"type":"string","description":"A path."},"mode":{"type":"string","enum":["r","w"]},"n":{"type":"integer"}},"required":["path"]}`
	for _, d := range []string{"permissive", "gemini", "kimi", "openai_strict", "anthropic"} {
		for _, proto := range []transforms.Protocol{transforms.ProtocolResponses, transforms.ProtocolChat} {
			body := fn(params)
			if proto == transforms.ProtocolChat {
				body = chatFn(params)
			}
			c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"`+d+`"}}]`)
			b := []byte(body)
			x := transformtest.Begin(t, c, proto, b)
			x.Explain = true
			out, err := x.RewriteRequest(b)
			if err != nil {
				t.Fatalf("%s: %v", d, err)
			}
			if !jsonspan.SameSlice(out, b) {
				t.Errorf("%s/%s: an unchanged request must come back as the same slice\n%s", d, proto, out)
			}
			if len(x.Decisions()) != 0 {
				t.Errorf("%s/%s: decisions for an unchanged request: %+v", d, proto, x.Decisions())
			}
		}
	}
	// No tools at all, and a request without a function.
	for _, body := range []string{`{"model":"m","input":"hi"}`, `{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`} {
		b := []byte(body)
		c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"gemini"}}]`)
		x := transformtest.Begin(t, c, transforms.ProtocolResponses, b)
		out, err := x.RewriteRequest(b)
		if err != nil || !jsonspan.SameSlice(out, b) {
			t.Errorf("%s: %v %s", body, err, out)
		}
	}
}

func TestNormalizeSchemaKeepsBytesAroundTheChange(t *testing.T) {
	// Two tools; only b's schema needs a change (a null required, an object
	// without properties). a's odd whitespace, b's other members and
	// everything after must come through byte for byte.
	prefix := "{ \"model\" : \"m\",\n\t\"input\":\"hi\" ,\"tools\" : [\n" +
		"  {\"type\":\"function\" , \"name\" :\"a\",\t\"description\":\"A \\u00e9 tool\",\n" +
		"    \"parameters\" : { \"type\" : \"object\" ,\n \"properties\" : { \"p\" : {\"type\":\"string\"} } , \"required\" : [ \"p\" ] } } ,\n" +
		"  { \"type\": \"function\", \"name\": \"b\", \"parameters\" :  "
	changed := "{ \"type\" : \"object\", \"required\" : null }"
	suffix := " ,  \"description\" : \"B\" }\n ] , \"stream\" : true }"
	body := prefix + changed + suffix
	out, x := nsOK(t, `{"dialect":"permissive"}`, transforms.ProtocolResponses, body)
	if !bytes.HasPrefix(out, []byte(prefix)) {
		t.Fatalf("the bytes before b's parameters changed:\n%s", out)
	}
	if !bytes.HasSuffix(out, []byte(suffix)) {
		t.Fatalf("the bytes after b's parameters changed:\n%s", out)
	}
	mid := out[len(prefix) : len(out)-len(suffix)]
	transformtest.JSONEqual(t, mid, `{"type":"object","properties":{}}`)
	if !hasDecision(x, "b", "normalize_schema") || hasDecision(x, "a", "normalize_schema") {
		t.Errorf("decisions: %+v", x.Decisions())
	}

	// Inside a parameters value that changes, a sub-schema nothing
	// changed keeps its bytes too.
	params := "{\"type\":\"object\",  \"properties\":{\"keep\":{ \"type\" : \"string\" ,\"description\" : \"x\" },\"fix\":{\"type\":\"object\"}}}"
	out, _ = nsOK(t, `{}`, transforms.ProtocolResponses, fn(params))
	if !bytes.Contains(out, []byte("\"keep\":{ \"type\" : \"string\" ,\"description\" : \"x\" }")) {
		t.Errorf("an unchanged sub-schema lost its bytes: %s", out)
	}
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"keep":{"type":"string","description":"x"},"fix":{"type":"object","properties":{}}}}`))
}

// --- 2. properties named like keywords -----------------------------------------------------------

func TestNormalizeSchemaKeywordNamedProperties(t *testing.T) {
	params := `{"type":"object","properties":{` +
		`"$ref":{"type":"string","default":"x"},` +
		`"additionalProperties":{"type":"object"},` +
		`"format":{"type":"string","format":"uri"},` +
		`"type":{"type":["string","null"]},` +
		`"required":{"type":"boolean","const":true},` +
		`"properties":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x","y"]},` +
		`"default":{"type":"integer","enum":[1,2]},` +
		`"const":{"const":"c"},` +
		`"enum":{"type":"string","enum":["a","b"]}` +
		`},"required":["enum","$ref","type","required","properties","default","const","format","additionalProperties"]}`
	allRequired := `["enum","$ref","type","required","properties","default","const","format","additionalProperties"]`

	// permissive: only the universal fixes (properties:{} on the property
	// called additionalProperties, y out of the nested required).
	plain := `{"type":"object","properties":{` +
		`"$ref":{"type":"string","default":"x"},` +
		`"additionalProperties":{"type":"object","properties":{}},` +
		`"format":{"type":"string","format":"uri"},` +
		`"type":{"type":["string","null"]},` +
		`"required":{"type":"boolean","const":true},` +
		`"properties":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]},` +
		`"default":{"type":"integer","enum":[1,2]},` +
		`"const":{"const":"c"},` +
		`"enum":{"type":"string","enum":["a","b"]}` +
		`},"required":` + allRequired + `}`
	// openai_strict and anthropic (strict): every object closed; every
	// property is required already (in the client's order, which stays),
	// so nothing becomes nullable. uri is one of Anthropic's formats.
	closed := `{"type":"object","properties":{` +
		`"$ref":{"type":"string","default":"x"},` +
		`"additionalProperties":{"type":"object","properties":{},"additionalProperties":false},` +
		`"format":{"type":"string","format":"uri"},` +
		`"type":{"type":["string","null"]},` +
		`"required":{"type":"boolean","const":true},` +
		`"properties":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"],"additionalProperties":false},` +
		`"default":{"type":"integer","enum":[1,2]},` +
		`"const":{"const":"c"},` +
		`"enum":{"type":"string","enum":["a","b"]}` +
		`},"required":` + allRequired + `,"additionalProperties":false}`
	// kimi: walle reserves $ref, required and additionalProperties as
	// property names (renamed, and named back in the arguments), wants
	// every schema typed, and a union for a type list.
	kimi := `{"type":"object","properties":{` +
		`"$ref_":{"type":"string","default":"x"},` +
		`"additionalProperties_":{"type":"object","properties":{}},` +
		`"format":{"type":"string","format":"uri"},` +
		`"type":{"anyOf":[{"type":"string"},{"type":"null"}]},` +
		`"required_":{"type":"boolean","const":true},` +
		`"properties":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]},` +
		`"default":{"type":"integer","enum":[1,2]},` +
		`"const":{"const":"c","type":"string"},` +
		`"enum":{"type":"string","enum":["a","b"]}` +
		`},"required":["enum","$ref_","type","required_","properties","default","const","format","additionalProperties_"]}`
	// openai_strict: also no default (told), and every schema typed.
	openai := strings.NewReplacer(`"$ref":{"type":"string","default":"x"}`, `"$ref":{"type":"string","description":"(default: \"x\")"}`,
		`"const":{"const":"c"}`, `"const":{"const":"c","type":"string"}`).Replace(closed)
	// gemini: default goes (told), uri goes (told), the type list becomes
	// nullable, const and non-string enums become string enums typed
	// string.
	gemini := `{"type":"object","properties":{` +
		`"$ref":{"type":"string","description":"(default: \"x\")"},` +
		`"additionalProperties":{"type":"string","description":"(write a JSON object as JSON text)"},` +
		`"format":{"type":"string","description":"(format: \"uri\")"},` +
		`"type":{"type":"string","nullable":true},` +
		`"required":{"type":"string","enum":["true"]},` +
		`"properties":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]},` +
		`"default":{"type":"string","enum":["1","2"]},` +
		`"const":{"enum":["c"],"type":"string"},` +
		`"enum":{"type":"string","enum":["a","b"]}` +
		`},"required":` + allRequired + `}`

	for _, tc := range []struct {
		dialect, want string
		keepsStrict   bool
	}{
		{"permissive", plain, true},
		{"kimi", kimi, true},
		{"openai_strict", openai, true},
		{"anthropic", closed, true},
		{"gemini", gemini, false},
	} {
		t.Run(tc.dialect, func(t *testing.T) {
			out, _ := nsOK(t, `{"dialect":"`+tc.dialect+`"}`, transforms.ProtocolResponses, fn(params, strictOn))
			want := fn(tc.want)
			if tc.keepsStrict {
				want = fn(tc.want, strictOn)
			}
			transformtest.JSONEqual(t, out, want)
			// The same in Chat's shape.
			out, _ = nsOK(t, `{"dialect":"`+tc.dialect+`"}`, transforms.ProtocolChat, chatFn(params, strictOn))
			want = chatFn(tc.want)
			if tc.keepsStrict {
				want = chatFn(tc.want, strictOn)
			}
			transformtest.JSONEqual(t, out, want)
		})
	}
}

// --- 3. each rule --------------------------------------------------------------------------------

func TestNormalizeSchemaRequired(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"null required goes",
			`{"type":"object","properties":{"a":{"type":"string"}},"required":null}`,
			`{"type":"object","properties":{"a":{"type":"string"}}}`},
		{"unknown names out, duplicates once",
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","zz","a","b","b"]}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","b"]}`},
		{"nothing left: no member",
			`{"type":"object","properties":{"a":{"type":"string"}},"required":["zz"]}`,
			`{"type":"object","properties":{"a":{"type":"string"}}}`},
		{"required before properties, nested",
			`{"type":"object","required":["o"],"properties":{"o":{"type":"object","required":["q","p"],"properties":{"p":{"type":"string"}}}}}`,
			`{"type":"object","required":["o"],"properties":{"o":{"type":"object","required":["p"],"properties":{"p":{"type":"string"}}}}}`},
		{"required without properties",
			`{"type":"object","required":["a"]}`,
			`{"type":"object","properties":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, x := nsOK(t, `{}`, transforms.ProtocolResponses, fn(tc.in))
			transformtest.JSONEqual(t, out, fn(tc.want))
			if !hasDecision(x, "f", "normalize_schema") {
				t.Errorf("no decision: %+v", x.Decisions())
			}
		})
	}
}

func TestNormalizeSchemaAddsProperties(t *testing.T) {
	in := `{"type":"object","properties":{` +
		`"o":{"type":"object","description":"nested"},` +
		`"l":{"type":"array","items":{"type":"object"}},` +
		`"u":{"anyOf":[{"type":"object"},{"type":"string"}]},` +
		`"deep":{"type":"object","properties":{"in":{"type":"object"}}}}}`
	want := `{"type":"object","properties":{` +
		`"o":{"type":"object","description":"nested","properties":{}},` +
		`"l":{"type":"array","items":{"type":"object","properties":{}}},` +
		`"u":{"anyOf":[{"type":"object","properties":{}},{"type":"string"}]},` +
		`"deep":{"type":"object","properties":{"in":{"type":"object","properties":{}}}}}}`
	out, _ := nsOK(t, `{}`, transforms.ProtocolResponses, fn(in))
	transformtest.JSONEqual(t, out, fn(want))
	out, _ = nsOK(t, `{}`, transforms.ProtocolResponses, fn(`{"type":"object"}`))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{}}`))
	out, _ = nsOK(t, `{}`, transforms.ProtocolChat, chatFn(`{"type":"object"}`))
	transformtest.JSONEqual(t, out, chatFn(`{"type":"object","properties":{}}`))
}

func TestNormalizeSchemaStripKeywordsAtSchemaPositionsOnly(t *testing.T) {
	in := `{"type":"object","examples":[{"examples":"x"}],"properties":{` +
		`"examples":{"type":"string","examples":["a"]},` +
		`"list":{"type":"array","items":{"type":"string","examples":["b"],"deprecated":true}}},` +
		`"required":["examples"]}`
	want := `{"type":"object","properties":{` +
		`"examples":{"type":"string"},` +
		`"list":{"type":"array","items":{"type":"string"}}},` +
		`"required":["examples"]}`
	out, x := nsOK(t, `{"strip_keywords":["examples","deprecated"]}`, transforms.ProtocolResponses, fn(in))
	transformtest.JSONEqual(t, out, fn(want))
	if !hasDecision(x, "f", "normalize_schema") {
		t.Errorf("no decision: %+v", x.Decisions())
	}
}

func TestNormalizeSchemaInlineRefs(t *testing.T) {
	in := `{"type":"object","properties":{` +
		`"a":{"$ref":"#/$defs/A"},` +
		`"b":{"$ref":"#/definitions/B","description":"mine"},` +
		`"c":{"$ref":"#/properties/a"},` +
		`"d":{"$ref":"#/$defs/A"},` +
		`"o":{"$ref":"#/$defs/O"}},` +
		`"$defs":{"A":{"type":"string","description":"an A"},"O":{"type":"object","properties":{"x":{"$ref":"#/definitions/B"}}}},` +
		`"definitions":{"B":{"type":"integer","description":"a B"}}}`
	want := `{"type":"object","properties":{` +
		`"a":{"type":"string","description":"an A"},` +
		`"b":{"description":"mine","type":"integer"},` +
		`"c":{"type":"string","description":"an A"},` +
		`"d":{"type":"string","description":"an A"},` +
		`"o":{"type":"object","properties":{"x":{"type":"integer","description":"a B"}}}}}`
	out, x := nsOK(t, `{"inline_refs":true}`, transforms.ProtocolResponses, fn(in))
	transformtest.JSONEqual(t, out, fn(want))
	if !hasDecision(x, "f", "normalize_schema") {
		t.Errorf("no decision: %+v", x.Decisions())
	}
	// A root that is a reference.
	out, _ = nsOK(t, `{"inline_refs":true}`, transforms.ProtocolResponses,
		fn(`{"$ref":"#/$defs/Args","$defs":{"Args":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}`))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`))
	// Under permissive (no inlining) the same request keeps its bytes.
	b := fn(`{"type":"object","properties":{"a":{"$ref":"#/$defs/A"}},"$defs":{"A":{"type":"string"}}}`)
	out, _ = nsOK(t, `{}`, transforms.ProtocolResponses, b)
	if string(out) != b {
		t.Errorf("permissive changed a request with a reference: %s", out)
	}
}

func TestNormalizeSchemaRefDepth(t *testing.T) {
	// Two references deep passes max_ref_depth 2; three do not.
	two := `{"type":"object","properties":{"a":{"$ref":"#/$defs/A"}},"$defs":{"A":{"$ref":"#/$defs/B"},"B":{"type":"string"}}}`
	out, _ := nsOK(t, `{"dialect":"gemini","max_ref_depth":2}`, transforms.ProtocolResponses, fn(two))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"a":{"type":"string"}}}`))

	three := `{"type":"object","properties":{"a":{"$ref":"#/$defs/A"}},"$defs":{"A":{"type":"object","properties":{"b":{"$ref":"#/$defs/B"}}},"B":{"$ref":"#/$defs/C"},"C":{"type":"string"}}}`
	e := nsErr(t, `{"dialect":"gemini","max_ref_depth":2}`, transforms.ProtocolResponses, fn(three), "schema_ref_depth")
	if !strings.Contains(e.Message, `"f"`) || e.Param != "tools[0].parameters" {
		t.Errorf("the error must name the tool and the place: %q %q", e.Message, e.Param)
	}
	// The default, 32, takes the three.
	out, _ = nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(three))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}}}}}`))
}

func TestNormalizeSchemaRefCycle(t *testing.T) {
	body := `{"model":"m","input":"hi","tools":[{"type":"function","name":"ok","parameters":{"type":"object","properties":{}}},` +
		`{"type":"function","name":"tree","parameters":{"type":"object","properties":{"root":{"$ref":"#/$defs/Node"}},` +
		`"$defs":{"Node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/Node"}}}}}}}]}`
	e := nsErr(t, `{"dialect":"gemini","unsupported":"reject"}`, transforms.ProtocolResponses, body, "schema_ref_cycle")
	if !strings.Contains(e.Message, `tool "tree"`) || !strings.Contains(e.Message, "#/$defs/Node -> #/$defs/Node") {
		t.Errorf("the error must name the tool and the chain: %s", e.Message)
	}
	if e.Param != "tools[1].parameters" {
		t.Errorf("param %q", e.Param)
	}
	// In Chat the place is under function.
	chat := `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"tree","parameters":{"$ref":"#"}}}]}`
	e = nsErr(t, `{"dialect":"gemini","unsupported":"reject"}`, transforms.ProtocolChat, chat, "schema_ref_cycle")
	if e.Param != "tools[0].function.parameters" || !strings.Contains(e.Message, `tool "tree"`) {
		t.Errorf("chat cycle: %q %q", e.Param, e.Message)
	}
	// Without inlining a cycle is no business of the rule.
	out, _ := nsOK(t, `{"dialect":"permissive"}`, transforms.ProtocolResponses, body)
	if string(out) != body {
		t.Errorf("permissive changed a cyclic schema: %s", out)
	}
}

func TestNormalizeSchemaNonLocalRef(t *testing.T) {
	body := fn(`{"type":"object","properties":{"s":{"$ref":"https://example.com/s.json"}}}`)
	e := nsErr(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, body, "schema_ref_unresolved")
	if !strings.Contains(e.Message, "https://example.com/s.json") || !strings.Contains(e.Message, `"f"`) {
		t.Errorf("message: %s", e.Message)
	}
	// A local pointer to nothing is unresolved too.
	nsErr(t, `{"dialect":"anthropic"}`, transforms.ProtocolResponses, fn(`{"type":"object","properties":{"s":{"$ref":"#/$defs/missing"}},"required":["s"],"additionalProperties":false}`, strictOn), "schema_ref_unresolved")
	out, _ := nsOK(t, `{"dialect":"permissive"}`, transforms.ProtocolResponses, body)
	if string(out) != body {
		t.Errorf("permissive must leave a remote reference alone: %s", out)
	}
}

func TestNormalizeSchemaEnumToString(t *testing.T) {
	in := `{"type":"object","properties":{` +
		`"n":{"type":"integer","enum":[1,2.5,-3]},` +
		`"b":{"type":"boolean","enum":[true,false]},` +
		`"m":{"enum":["x",1,null]},` +
		`"s":{"type":"string","enum":["a"]}}}`
	want := `{"type":"object","properties":{` +
		`"n":{"type":"string","enum":["1","2.5","-3"]},` +
		`"b":{"type":"string","enum":["true","false"]},` +
		`"m":{"enum":["x","1"],"type":"string"},` +
		`"s":{"type":"string","enum":["a"]}}}`
	out, _ := nsOK(t, `{"enum_to_string":true}`, transforms.ProtocolResponses, fn(in))
	transformtest.JSONEqual(t, out, fn(want))
	// Off in gemini: enums as they are, nothing else of the enum rule.
	out, _ = nsOK(t, `{"dialect":"gemini","enum_to_string":false}`, transforms.ProtocolResponses, fn(`{"type":"object","properties":{"n":{"type":"integer","enum":[1,2]}}}`))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"n":{"type":"integer","enum":[1,2]}}}`))
}

func TestNormalizeSchemaTypeArrays(t *testing.T) {
	in := `{"type":"object","properties":{` +
		`"s":{"type":["string","null"]},` +
		`"u":{"type":["integer","string","null"],"description":"d"},` +
		`"p":{"type":["integer","string"]},` +
		`"one":{"type":["string"]}}}`
	for _, tc := range []struct{ mode, want string }{
		{"nullable", `{"type":"object","properties":{` +
			`"s":{"type":"string","nullable":true},` +
			`"u":{"anyOf":[{"type":"integer"},{"type":"string"}],"nullable":true,"description":"d"},` +
			`"p":{"anyOf":[{"type":"integer"},{"type":"string"}]},` +
			`"one":{"type":"string"}}}`},
		{"any_of", `{"type":"object","properties":{` +
			`"s":{"anyOf":[{"type":"string"},{"type":"null"}]},` +
			`"u":{"anyOf":[{"type":"integer"},{"type":"string"},{"type":"null"}],"description":"d"},` +
			`"p":{"anyOf":[{"type":"integer"},{"type":"string"}]},` +
			`"one":{"type":"string"}}}`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			out, _ := nsOK(t, `{"type_arrays":"`+tc.mode+`"}`, transforms.ProtocolResponses, fn(in))
			transformtest.JSONEqual(t, out, fn(tc.want))
		})
	}
	// keep: the request keeps its bytes.
	b := fn(in)
	out, _ := nsOK(t, `{"type_arrays":"keep"}`, transforms.ProtocolResponses, b)
	if string(out) != b {
		t.Errorf("keep changed the request: %s", out)
	}
	// gemini's default is nullable.
	out, _ = nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(`{"type":"object","properties":{"s":{"type":["string","null"]}}}`))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"s":{"type":"string","nullable":true}}}`))
}

func TestNormalizeSchemaGeminiConstAndAnyOf(t *testing.T) {
	in := `{"type":"object","properties":{` +
		`"c":{"const":"fixed"},` +
		`"cs":{"type":"string","const":"x","description":"d"},` +
		`"u":{"anyOf":[{"type":"string"},{"type":"integer","minimum":0}],"description":"d","title":"t","nullable":true,"minLength":1,"x-extra":1,"type":"string"}}}`
	want := `{"type":"object","properties":{` +
		`"c":{"enum":["fixed"],"type":"string"},` +
		`"cs":{"type":"string","enum":["x"],"description":"d"},` +
		// Nothing beside anyOf (Vertex refuses even annotations): they
		// go into the branches, and what the writer takes out is lost
		// with the place to tell it.
		`"u":{"anyOf":[{"type":"string","description":"d","title":"t","nullable":true},{"type":"integer","minimum":0,"description":"d","title":"t","nullable":true}]}}}`
	out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(in))
	transformtest.JSONEqual(t, out, fn(want))
}

func TestNormalizeSchemaGeminiFormats(t *testing.T) {
	in := `{"type":"object","properties":{` +
		`"when":{"type":"string","format":"date-time"},` +
		`"mail":{"type":"string","format":"email","description":"Address."},` +
		`"kind":{"type":"string","format":"enum","enum":["a"]},` +
		`"n":{"type":"integer","format":"int32"}}}`
	told := `{"type":"object","properties":{` +
		`"when":{"type":"string","format":"date-time"},` +
		`"mail":{"type":"string","description":"Address. (format: \"email\")"},` +
		`"kind":{"type":"string","format":"enum","enum":["a"]},` +
		`"n":{"type":"integer","format":"int32"}}}`
	untold := `{"type":"object","properties":{` +
		`"when":{"type":"string","format":"date-time"},` +
		`"mail":{"type":"string","description":"Address."},` +
		`"kind":{"type":"string","format":"enum","enum":["a"]},` +
		`"n":{"type":"integer","format":"int32"}}}`
	out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(in))
	transformtest.JSONEqual(t, out, fn(told))
	out, _ = nsOK(t, `{"dialect":"gemini","describe_dropped":false}`, transforms.ProtocolResponses, fn(in))
	transformtest.JSONEqual(t, out, fn(untold))
}

func TestNormalizeSchemaGeminiDropsStrict(t *testing.T) {
	params := `{"type":"object","properties":{"a":{"type":"string"}}}`
	out, x := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(params, strictOn))
	transformtest.JSONEqual(t, out, fn(params))
	if !hasDecision(x, "f", "drop_strict") {
		t.Errorf("no drop_strict decision: %+v", x.Decisions())
	}
	out, x = nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolChat, chatFn(params, `,"strict":false`))
	transformtest.JSONEqual(t, out, chatFn(params))
	if !hasDecision(x, "f", "drop_strict") {
		t.Errorf("no drop_strict decision: %+v", x.Decisions())
	}
	// strict before parameters, in Chat.
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"strict":true,"name":"f","parameters":` + params + `}}]}`
	out, _ = nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolChat, body)
	transformtest.JSONEqual(t, out, chatFn(params))
}

func TestNormalizeSchemaOpenAIStrict(t *testing.T) {
	strictParams := `{"type":"object","properties":{` +
		`"req":{"type":"string"},` +
		`"t":{"type":"string"},` +
		`"tl":{"type":["integer","null"]},` +
		`"e":{"type":"string","enum":["a","b"]},` +
		`"eu":{"enum":["a","b"]},` +
		`"u":{"anyOf":[{"type":"string"},{"type":"integer"}]},` +
		`"r":{"$ref":"#/$defs/R"},` +
		`"o":{"type":"object","properties":{"x":{"type":"string"}}}` +
		`},"required":["req"],"$defs":{"R":{"type":"object","properties":{"y":{"type":"integer"}}}}}`
	strictWant := `{"type":"object","properties":{` +
		`"req":{"type":"string"},` +
		`"t":{"type":["string","null"]},` +
		`"tl":{"type":["integer","null"]},` +
		`"e":{"type":["string","null"],"enum":["a","b",null]},` +
		`"eu":{"enum":["a","b",null],"type":["string","null"]},` +
		`"u":{"anyOf":[{"type":"string"},{"type":"integer"},{"type":"null"}]},` +
		`"r":{"anyOf":[{"$ref":"#/$defs/R"},{"type":"null"}]},` +
		`"o":{"type":["object","null"],"properties":{"x":{"type":["string","null"]}},"additionalProperties":false,"required":["x"]}` +
		`},"required":["req","t","tl","e","eu","u","r","o"],` +
		`"$defs":{"R":{"type":"object","properties":{"y":{"type":["integer","null"]}},"additionalProperties":false,"required":["y"]}},` +
		`"additionalProperties":false}`
	looseParams := `{"type":"object","properties":{"a":{"type":"object"},"b":{"type":"string"}},"required":["a","zz"]}`
	looseWant := `{"type":"object","properties":{"a":{"type":"object","properties":{}},"b":{"type":"string"}},"required":["a"]}`
	body := `{"model":"m","input":"hi","tools":[` +
		`{"type":"function","name":"s","strict":true,"parameters":` + strictParams + `},` +
		`{"type":"function","name":"l","parameters":` + looseParams + `},` +
		`{"type":"function","name":"l2","strict":false,"parameters":` + looseParams + `}]}`
	want := `{"model":"m","input":"hi","tools":[` +
		`{"type":"function","name":"s","strict":true,"parameters":` + strictWant + `},` +
		`{"type":"function","name":"l","parameters":` + looseWant + `},` +
		`{"type":"function","name":"l2","strict":false,"parameters":` + looseWant + `}]}`
	out, _ := nsOK(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, body)
	transformtest.JSONEqual(t, out, want)
	var strict = true
	if p := fakeprovider.CheckSchema("openai_strict", []byte(strictWant), &strict); len(p) > 0 {
		t.Errorf("the expectation itself is refused: %v", p)
	}
	// Chat: strict nested under function.
	out, _ = nsOK(t, `{"dialect":"openai_strict"}`, transforms.ProtocolChat, chatFn(strictParams, strictOn))
	transformtest.JSONEqual(t, out, chatFn(strictWant, strictOn))
	// A schema-valued additionalProperties is a map, which strict mode
	// would close to {}: the function goes without strict instead, its
	// schema as the client wrote it.
	in := `{"type":"object","properties":{"m":{"type":"object","properties":{},"additionalProperties":{"type":"string"}}},"required":["m"],"additionalProperties":false}`
	out, _ = nsOK(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, fn(in, strictOn))
	transformtest.JSONEqual(t, out, fn(in, `,"strict":false`))
}

func TestNormalizeSchemaStrictRootUnion(t *testing.T) {
	params := `{"anyOf":[{"type":"object","properties":{"a":{"type":"string"}}},{"type":"object","properties":{"b":{"type":"string"}}}]}`
	for _, d := range []string{"openai_strict", "anthropic"} {
		out, x := nsOK(t, `{"dialect":"`+d+`"}`, transforms.ProtocolResponses, fn(params, strictOn))
		transformtest.JSONEqual(t, out, fn(params, `,"strict":false`))
		if !hasDecision(x, "f", "strict_off") {
			t.Errorf("%s: no strict_off decision: %+v", d, x.Decisions())
		}
		out, x = nsOK(t, `{"dialect":"`+d+`"}`, transforms.ProtocolChat, chatFn(params, strictOn))
		transformtest.JSONEqual(t, out, chatFn(params, `,"strict":false`))
		if !hasDecision(x, "f", "strict_off") {
			t.Errorf("%s chat: no strict_off decision: %+v", d, x.Decisions())
		}
	}
}

func TestNormalizeSchemaAnthropicStrict(t *testing.T) {
	in := `{"type":"object","properties":{` +
		`"s":{"type":"string","pattern":"^a","minLength":2,"description":"S."},` +
		`"n":{"type":"integer","maximum":10},` +
		`"l2":{"type":"array","items":{"type":"string"},"minItems":2},` +
		`"l1":{"type":"array","items":{"type":"string"},"minItems":1},` +
		`"h":{"type":"string","format":"hostname"},` +
		`"m":{"type":"string","format":"email"}` +
		`},"required":["s","n","l2","l1","h","m"]}`
	want := `{"type":"object","properties":{` +
		`"s":{"type":"string","description":"S. (pattern: \"^a\"; minLength: 2)"},` +
		`"n":{"type":"integer","description":"(maximum: 10)"},` +
		`"l2":{"type":"array","items":{"type":"string"},"description":"(minItems: 2)"},` +
		`"l1":{"type":"array","items":{"type":"string"},"minItems":1},` +
		`"h":{"type":"string","description":"(format: \"hostname\")"},` +
		`"m":{"type":"string","format":"email"}` +
		`},"required":["s","n","l2","l1","h","m"],"additionalProperties":false}`
	out, _ := nsOK(t, `{"dialect":"anthropic"}`, transforms.ProtocolResponses, fn(in, strictOn))
	transformtest.JSONEqual(t, out, fn(want, strictOn))
	// Not strict: only the universal fixes, so this one keeps its bytes.
	b := fn(in)
	out, _ = nsOK(t, `{"dialect":"anthropic"}`, transforms.ProtocolResponses, b)
	if string(out) != b {
		t.Errorf("a non-strict function changed under anthropic: %s", out)
	}
}

func TestNormalizeSchemaKimi(t *testing.T) {
	out, _ := nsOK(t, `{"dialect":"kimi"}`, transforms.ProtocolResponses, fn(`{"properties":{"a":{"type":"string"}}}`))
	transformtest.JSONEqual(t, out, fn(`{"properties":{"a":{"type":"string"}},"type":"object"}`))
	out, _ = nsOK(t, `{"dialect":"kimi"}`, transforms.ProtocolResponses, fn(`{}`))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{}}`))
	// strict:false still gets the universal fixes and Kimi's own.
	out, _ = nsOK(t, `{"dialect":"kimi"}`, transforms.ProtocolChat,
		chatFn(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"type":"object"}},"required":null}`, `,"strict":false`))
	transformtest.JSONEqual(t, out, chatFn(`{"type":"object","properties":{"a":{"type":"object","properties":{}}}}`, `,"strict":false`))
}

// TestNormalizeSchemaTypeListEdges: a type list is a type too: formats,
// keywords, properties, closing and the root read each of its types, and a
// type that is no type is left alone.
func TestNormalizeSchemaTypeListEdges(t *testing.T) {
	for _, tc := range []struct {
		name, cfg, in, want string
		strict              bool
	}{
		// Every expectation below is also what the dialect's validator
		// accepts (checked after the comparison).
		{"gemini: a format beside a nullable string list",
			`{"dialect":"gemini"}`,
			`{"type":"object","properties":{"a":{"type":["string","null"],"format":"email"}}}`,
			`{"type":"object","properties":{"a":{"type":"string","nullable":true,"description":"(format: \"email\")"}}}`, false},
		{"gemini: nothing beside the anyOf a type list became",
			`{"dialect":"gemini"}`,
			`{"type":"object","properties":{"a":{"type":["integer","string"],"minimum":1,"description":"A."}}}`,
			// minimum constrains integers: it goes into their branch.
			`{"type":"object","properties":{"a":{"anyOf":[{"type":"integer","minimum":1,"description":"A."},{"type":"string","description":"A."}]}}}`, false},
		{"permissive: an object-or-null gets properties",
			`{}`,
			`{"type":"object","properties":{"a":{"type":["object","null"]}}}`,
			`{"type":"object","properties":{"a":{"type":["object","null"],"properties":{}}}}`, false},
		{"openai_strict: an object-or-null is closed",
			`{"dialect":"openai_strict"}`,
			`{"type":"object","properties":{"a":{"type":["object","null"],"properties":{"x":{"type":"string"}}},"b":{"type":["object","null"]}},"required":["a","b"]}`,
			`{"type":"object","properties":{"a":{"type":["object","null"],"properties":{"x":{"type":["string","null"]}},"additionalProperties":false,"required":["x"]},"b":{"type":["object","null"],"properties":{},"additionalProperties":false}},"required":["a","b"],"additionalProperties":false}`, true},
		{"kimi: a type list at the root is one type, not two members",
			`{"dialect":"kimi"}`,
			`{"type":["object","null"],"properties":{"a":{"type":"string"}}}`,
			`{"type":"object","properties":{"a":{"type":"string"}}}`, false},
		{"a type that is no type is left as it is",
			`{}`,
			`{"type":"object","properties":{"a":{"type":[]},"b":{"type":[1]},"c":{"type":"object"}}}`,
			`{"type":"object","properties":{"a":{"type":[]},"b":{"type":[1]},"c":{"type":"object","properties":{}}}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			extra := []string{}
			if tc.strict {
				extra = append(extra, strictOn)
			}
			out, _ := nsOK(t, tc.cfg, transforms.ProtocolResponses, fn(tc.in, extra...))
			transformtest.JSONEqual(t, out, fn(tc.want, extra...))
		})
		dialect := "permissive"
		var cfg struct{ Dialect string }
		_ = json.Unmarshal([]byte(tc.cfg), &cfg)
		if cfg.Dialect != "" {
			dialect = cfg.Dialect
		}
		strict := tc.strict
		if p := fakeprovider.CheckSchema(dialect, []byte(tc.want), &strict); len(p) > 0 {
			t.Errorf("%s: the expectation itself is refused: %v", tc.name, p)
		}
	}
	// type_arrays any_of keeps the null of a one-type list.
	out, _ := nsOK(t, `{"dialect":"gemini","type_arrays":"any_of"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"s":{"type":["string","null"],"description":"S."}}}`))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"s":{"anyOf":[{"type":"string","description":"S."},{"type":"null"}]}}}`))
}

// --- 4. namespaces and history ------------------------------------------------------------------

func TestNormalizeSchemaNamespacesAndAdditionalTools(t *testing.T) {
	body := `{"model":"m","input":[` +
		`{"type":"message","role":"user","content":"hi"},` +
		`{"type":"additional_tools","tools":[{"type":"function","name":"late","strict":true,"parameters":{"type":"object","required":null}}]}],` +
		`"tools":[{"type":"namespace","name":"mcp","description":"MCP","tools":[` +
		`{"type":"function","name":"x","strict":true,"parameters":{"type":"object","properties":{"v":{"type":["string","null"]}}}},` +
		`{"type":"function","name":"y","parameters":{"type":"object","properties":{}}}]}]}`
	want := `{"model":"m","input":[` +
		`{"type":"message","role":"user","content":"hi"},` +
		`{"type":"additional_tools","tools":[{"type":"function","name":"late"}]}],` +
		`"tools":[{"type":"namespace","name":"mcp","description":"MCP","tools":[` +
		`{"type":"function","name":"x","parameters":{"type":"object","properties":{"v":{"type":"string","nullable":true}}}},` +
		`{"type":"function","name":"y"}]}]}`
	out, x := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, body)
	transformtest.JSONEqual(t, out, want)
	for _, d := range []struct{ tool, action string }{
		// Gemini takes no OBJECT without properties: a function without
		// arguments goes without parameters.
		{"mcp/x", "normalize_schema"}, {"mcp/x", "drop_strict"}, {"late", "drop_parameters"}, {"late", "drop_strict"}, {"mcp/y", "drop_parameters"},
	} {
		if !hasDecision(x, d.tool, d.action) {
			t.Errorf("no %s decision for %s: %+v", d.action, d.tool, x.Decisions())
		}
	}
	if hasDecision(x, "mcp/y", "normalize_schema") {
		t.Errorf("y needed nothing: %+v", x.Decisions())
	}
	// A namespace's cycle names the namespaced tool.
	cyc := `{"model":"m","input":"hi","tools":[{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"x","parameters":{"$ref":"#"}}]}]}`
	e := nsErr(t, `{"dialect":"gemini","unsupported":"reject"}`, transforms.ProtocolResponses, cyc, "schema_ref_cycle")
	if !strings.Contains(e.Message, `"mcp/x"`) || e.Param != "tools[0].tools[0].parameters" {
		t.Errorf("%q %q", e.Param, e.Message)
	}
}

// --- 5. after tools_plan -------------------------------------------------------------------------

// --- 6. configuration ----------------------------------------------------------------------------

func TestNormalizeSchemaCaddyfile(t *testing.T) {
	block := "tools_normalize_schema {\n" +
		"\tdialect gemini\n" +
		"\tstrip_keywords examples deprecated\n" +
		"\tinline_refs\n" +
		"\tmax_ref_depth 16\n" +
		"\tenum_to_string false\n" +
		"\ttype_arrays any_of\n" +
		"\tdescribe_dropped false\n" +
		"\tunsupported reject\n" +
		"\tanyof_annotations keep\n" +
		"}"
	var got ToolsNormalizeSchema
	if err := got.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block)); err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	want := ToolsNormalizeSchema{
		Dialect:          "gemini",
		StripKeywords:    []string{"examples", "deprecated"},
		InlineRefs:       &yes,
		MaxRefDepth:      16,
		EnumToString:     &no,
		TypeArrays:       "any_of",
		DescribeDropped:  &no,
		Unsupported:      "reject",
		AnyOfAnnotations: "keep",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	// The JSON form reads the same.
	js, _ := json.Marshal(want)
	var fromJSON ToolsNormalizeSchema
	if err := json.Unmarshal(js, &fromJSON); err != nil || !reflect.DeepEqual(fromJSON, want) {
		t.Errorf("JSON round trip: %v %+v", err, fromJSON)
	}
	for _, bad := range []string{`{"unsupported":"maybe"}`, `{"anyof_annotations":"inside"}`} {
		var ns ToolsNormalizeSchema
		if err := json.Unmarshal([]byte(bad), &ns); err != nil {
			t.Fatal(err)
		}
		if err := ns.Provision(transformtest.Context(t)); err == nil {
			t.Errorf("provisioned %s", bad)
		}
	}
	var off ToolsNormalizeSchema
	if err := off.UnmarshalCaddyfile(caddyfile.NewTestDispenser("tools_normalize_schema {\n\tinline_refs false\n\tdescribe_dropped true\n}")); err != nil {
		t.Fatal(err)
	}
	if off.InlineRefs == nil || *off.InlineRefs || off.DescribeDropped == nil || !*off.DescribeDropped {
		t.Errorf("inline_refs false / describe_dropped true: %+v", off)
	}
	var empty ToolsNormalizeSchema
	if err := empty.UnmarshalCaddyfile(caddyfile.NewTestDispenser("tools_normalize_schema")); err != nil || !reflect.DeepEqual(empty, ToolsNormalizeSchema{}) {
		t.Errorf("an empty block: %v %+v", err, empty)
	}
	for _, bad := range []string{
		"tools_normalize_schema {\n\tdialect gemini\n\tdialect kimi\n}",
		"tools_normalize_schema {\n\tinline_refs\n\tinline_refs false\n}",
		"tools_normalize_schema {\n\tdialect\n}",
		"tools_normalize_schema {\n\tdialect gemini kimi\n}",
		"tools_normalize_schema {\n\tstrip_keywords\n}",
		"tools_normalize_schema {\n\tinline_refs maybe\n}",
		"tools_normalize_schema {\n\tenum_to_string true false\n}",
		"tools_normalize_schema {\n\tmax_ref_depth -1\n}",
		"tools_normalize_schema {\n\tmax_ref_depth many\n}",
		"tools_normalize_schema {\n\ttype_arrays\n}",
		"tools_normalize_schema {\n\tcolour blue\n}",
		"tools_normalize_schema {\n\tunsupported\n}",
	} {
		var ns ToolsNormalizeSchema
		if err := ns.UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}

	// The Caddyfile-built config behaves: examples out at schema
	// positions only, type lists as anyOf, enums as they are, default
	// dropped without a word.
	body := fn(`{"type":"object","examples":[1],"properties":{"examples":{"type":["integer","string"]},"d":{"type":"string","default":"x"},"e":{"type":"integer","enum":[1]}}}`)
	b := []byte(body)
	if err := got.Provision(transformtest.Context(t)); err != nil {
		t.Fatal(err)
	}
	x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
	out, err := got.RewriteRequest(x, b)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"examples":{"anyOf":[{"type":"integer"},{"type":"string"}]},"d":{"type":"string"},"e":{"type":"integer","enum":[1]}}}`))
}

func TestNormalizeSchemaProvisionRejects(t *testing.T) {
	for _, tc := range []struct{ cfg, msg string }{
		{`{"type_arrays":"union"}`, "type_arrays"},
		{`{"dialect":"mistral"}`, "dialect"},
		{`{"strip_keywords":["type"]}`, "type"},
		{`{"strip_keywords":["properties"]}`, "properties"},
		{`{"strip_keywords":[""]}`, "strip_keywords"},
		{`{"max_ref_depth":-1}`, "max_ref_depth"},
	} {
		var cfgs []transforms.RuleConfig
		if err := json.Unmarshal([]byte(`[{"transform":"tools_normalize_schema","config":`+tc.cfg+`}]`), &cfgs); err != nil {
			t.Fatal(err)
		}
		_, err := transforms.Compile(transformtest.Context(t), cfgs, transforms.ScopeProvider, "")
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: want an error about %s, got %v", tc.cfg, tc.msg, err)
		}
	}
	// strip_keywords type through the Caddyfile: read, then refused.
	var ns ToolsNormalizeSchema
	if err := ns.UnmarshalCaddyfile(caddyfile.NewTestDispenser("tools_normalize_schema {\n\tstrip_keywords examples type\n}")); err != nil {
		t.Fatal(err)
	}
	if err := ns.Provision(transformtest.Context(t)); err == nil {
		t.Error("strip_keywords type was accepted")
	}
}

// --- 7. limits -----------------------------------------------------------------------------------

func TestNormalizeSchemaTooDeep(t *testing.T) {
	var b strings.Builder
	const levels = 250
	for range levels {
		b.WriteString(`{"type":"array","items":`)
	}
	b.WriteString(`{"type":"object"}`)
	for range levels {
		b.WriteString(`}`)
	}
	params := `{"type":"object","properties":{"deep":` + b.String() + `}}`
	e := nsErr(t, `{}`, transforms.ProtocolResponses, fn(params), "schema_too_deep")
	if !strings.Contains(e.Message, `"f"`) {
		t.Errorf("message: %s", e.Message)
	}
	// 150 levels are fine.
	b.Reset()
	for range 150 {
		b.WriteString(`{"type":"array","items":`)
	}
	b.WriteString(`{"type":"object"}`)
	for range 150 {
		b.WriteString(`}`)
	}
	out, _ := nsOK(t, `{}`, transforms.ProtocolResponses, fn(`{"type":"object","properties":{"deep":`+b.String()+`}}`))
	if !bytes.Contains(out, []byte(`{"type":"object","properties":{}}`)) {
		t.Errorf("the innermost object was not fixed")
	}
}

func TestNormalizeSchemaDefsBlowUp(t *testing.T) {
	// Each definition refers to the previous one twice: inlining would
	// write 2^30 copies of the first.
	var defs strings.Builder
	defs.WriteString(`"d0":{"type":"string"}`)
	for i := 1; i < 30; i++ {
		p := "#/$defs/d" + strconv.Itoa(i-1)
		defs.WriteString(`,"d` + strconv.Itoa(i) + `":{"type":"object","properties":{"a":{"$ref":"` + p + `"},"b":{"$ref":"` + p + `"}}}`)
	}
	params := `{"type":"object","properties":{"x":{"$ref":"#/$defs/d29"}},"$defs":{` + defs.String() + `}}`
	e := nsErr(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(params), "schema_too_large")
	if !strings.Contains(e.Message, `"f"`) {
		t.Errorf("message: %s", e.Message)
	}
	// Without inlining the same schema is fine and unchanged.
	body := fn(params)
	out, _ := nsOK(t, `{}`, transforms.ProtocolResponses, body)
	if string(out) != body {
		t.Errorf("permissive changed it")
	}
}

func TestNormalizeSchemaAfterToolsPlan(t *testing.T) {
	chain := func(dialect string) *transforms.Chain {
		return transformtest.Chain(t, `[{"transform":"tools_plan","config":{"profile":"function_only"}},{"transform":"tools_normalize_schema","config":{"dialect":"`+dialect+`"}}]`)
	}
	body := []byte(`{"model":"m","input":"hi","tools":[` +
		`{"type":"custom","name":"apply_patch","description":"Patch files.","format":{"type":"grammar","syntax":"lark","definition":"start: /.+/"}},` +
		`{"type":"local_shell"},` +
		`{"type":"function","name":"f","parameters":{"type":"object","properties":{"p":{"type":["string","null"]}},"required":["p"]}}]}`)
	x := transformtest.Begin(t, chain("gemini"), transforms.ProtocolResponses, body)
	out, err := x.RewriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	tools := corpusTools(t, out, transforms.ProtocolResponses)
	if len(tools) != 3 {
		t.Fatalf("want three functions, got %d: %s", len(tools), out)
	}
	var sawF bool
	for i, tl := range tools {
		if tl.Name == "" || len(tl.Parameters) == 0 {
			t.Errorf("tool %d is not a function with parameters: %s", i, out)
		}
		if p := fakeprovider.CheckToolSchema("gemini", i, tl.Name, tl.Parameters, tl.Strict); len(p) > 0 {
			t.Errorf("%s refused: %v\n%s", tl.Name, p, tl.Parameters)
		}
		// As a keyword, that is: a map's value schema is told in its
		// description, where the text may name it.
		if bytes.Contains(tl.Parameters, []byte(`"additionalProperties":`)) {
			t.Errorf("%s keeps additionalProperties: %s", tl.Name, tl.Parameters)
		}
		if tl.Strict != nil {
			t.Errorf("%s keeps strict", tl.Name)
		}
		if tl.Name == "f" {
			sawF = true
			transformtest.JSONEqual(t, tl.Parameters, `{"type":"object","properties":{"p":{"type":"string","nullable":true}},"required":["p"]}`)
		}
	}
	if !sawF {
		t.Errorf("f is gone: %s", out)
	}

	// The real Codex request through the same chain: every function the
	// output holds passes its dialect's validator.
	codex := transformtest.CodexRequest(t)
	for _, d := range []string{"gemini", "openai_strict"} {
		x := transformtest.Begin(t, chain(d), transforms.ProtocolResponses, codex)
		out, err := x.RewriteRequest(codex)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		var req struct {
			Tools []struct {
				Type string `json:"type"`
				corpusTool
			} `json:"tools"`
		}
		if err := json.Unmarshal(out, &req); err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, tl := range req.Tools {
			if tl.Type != "function" {
				t.Errorf("%s: tools_plan function_only left a %s tool", d, tl.Type)
				continue
			}
			n++
			if p := fakeprovider.CheckToolSchema(d, i, tl.Name, tl.Parameters, tl.Strict); len(p) > 0 {
				t.Errorf("%s: %s refused: %v\n%s", d, tl.Name, p, tl.Parameters)
			}
		}
		if n < 8 {
			t.Errorf("%s: only %d functions: %s", d, n, out)
		}
	}
}
