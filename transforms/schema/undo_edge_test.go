package schema

import (
	"strconv"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Edge cases of the restoration the corpus and the fuzzer miss, and the
// cost of schemas made to multiply the first pass's work.

// A union's branch is told by the value's shape: under strict mode every
// branch is closed and lists every member, so {"q":null,"r":"x"} is the
// second branch's, whose q takes null; the first branch's undo (drop q's
// null) must not apply.
func TestStrictUnionBranchToldByShape(t *testing.T) {
	params := `{"type":"object","properties":{"v":{"anyOf":[` +
		`{"type":"object","properties":{"q":{"type":"string"}},"additionalProperties":false},` +
		`{"type":"object","properties":{"q":{"type":["string","null"]},"r":{"type":"string"}},"required":["q","r"],"additionalProperties":false}]}},"required":["v"]}`
	got, _ := roundTrip(t, `{"dialect":"openai_strict"}`, strictOnMember, []rtTool{
		{"k", params, `{"v":{"q":null,"r":"x"}}`},
		{"k", params, `{"v":{"q":null}}`},
	})
	wantArgs(t, got, `{"v":{"q":null,"r":"x"}}`, `{"v":{}}`)
}

// A type list with null beside an enum without null takes no null: the
// strict rewrite's null goes.
func TestStrictNullDroppedWhenEnumRefusesIt(t *testing.T) {
	params := `{"type":"object","properties":{"v":{"type":["string","null"],"enum":["a","b"]},"n":{"type":["string","null"],"enum":["a",null]}},"additionalProperties":false}`
	got, _ := roundTrip(t, `{"dialect":"openai_strict"}`, strictOnMember, []rtTool{{"k", params, `{"v":null,"n":null}`}})
	wantArgs(t, got, `{"n":null}`)
}

// A property renamed in a $defs entry that is inlined under keywords
// beside its reference (kimi), after the entry was walked, keeps its
// undo in the copy.
func TestKimiRenameSurvivesInlinedCopy(t *testing.T) {
	params := `{"type":"object","$defs":{"X":{"type":"object","properties":{"required":{"type":"string"}}}},"properties":{"x":{"$ref":"#/$defs/X","default":{}}}}`
	got, _ := roundTrip(t, `{"dialect":"kimi"}`, "", []rtTool{{"k", params, `{"x":{"required_":"a"}}`}})
	wantArgs(t, got, `{"x":{"required":"a"}}`)
}

// Enum values that are lists or objects travel as their JSON text under
// gemini, and come back as values, however the model spaces them.
func TestGeminiContainerEnumValuesComeBack(t *testing.T) {
	params := `{"type":"object","properties":{"v":{"enum":[[1,2],{"a": 1}]},"c":{"const":{"k":[true]}}}}`
	got, _ := roundTrip(t, `{"dialect":"gemini"}`, "", []rtTool{
		{"k", params, `{"v":"{\"a\": 1}","c":"{\"k\":[true]}"}`},
		{"k", params, `{"v":" [1, 2]"}`},
	})
	wantArgs(t, got, `{"v":{"a": 1},"c":{"k":[true]}}`, `{"v":[1,2]}`)
}

// A map of maps goes as one JSON text told by the tool's own schema
// (not by its rewritten inner map), and comes back whole; a reference
// there is told by its target.
func TestGeminiMapOfMapsToldAsTheToolWrites(t *testing.T) {
	params := `{"type":"object","properties":{"v":{"type":"array","items":{"$ref":"#/$defs/M"}},"m":{"type":"object","additionalProperties":{"$ref":"#/$defs/M"}}},"$defs":{"M":{"type":"object","additionalProperties":{"type":"integer"}}}}`
	out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(params))
	validatorAccepts(t, "gemini", out)
	if strings.Contains(string(out), `\\\"`) || !strings.Contains(string(out), `whose values follow {\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}`) {
		t.Errorf("the map of maps is told by its encoded inner map or an unresolved reference: %s", out)
	}
	got, _ := roundTrip(t, `{"dialect":"gemini"}`, "", []rtTool{{"k", params, `{"v":["{\"a\":1}"],"m":"{\"b\":{\"c\":2}}"}`}})
	wantArgs(t, got, `{"v":[{"a":1}],"m":{"b":{"c":2}}}`)
}

// The JSON-text fallback gives back the decoded text, trimmed, and
// counts text that is not JSON; the object itself, written as such, is
// taken.
func TestJSONTextFallbackObjectsOnly(t *testing.T) {
	params := `{"type":"object","properties":{"root":{"$ref":"#/$defs/Node"}},"$defs":{"Node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/Node"}}}}}}`
	got, x := roundTrip(t, `{"dialect":"gemini"}`, "", []rtTool{
		{"tree", params, `{"json":"{\"root\""}`},
		{"tree", params, `{"json":" {\"root\":{}} "}`},
		{"tree", params, `{"json":{"root":{"kids":[]}}}`},
	})
	wantArgs(t, got, `{"json":"{\"root\""}`, `{"root":{}}`, `{"root":{"kids":[]}}`)
	if c := x.Counts().ArgsUnrestored; c.JSONText != 1 {
		t.Errorf("want one json_text failure, got %+v", c)
	}
}

// Unions of references to unions: whether a member takes null is judged
// once per schema, not once per path (8 branches over 9 levels were 8⁹
// paths).
func TestAllowsNullLinearInUnionsOfReferences(t *testing.T) {
	var defs []string
	for i := 0; i < 9; i++ {
		r := `{"$ref":"#/$defs/a` + strconv.Itoa(i+1) + `"}`
		defs = append(defs, `"a`+strconv.Itoa(i)+`":{"anyOf":[`+strings.Repeat(r+",", 7)+r+`]}`)
	}
	defs = append(defs, `"a9":{"type":"string"}`)
	params := `{"type":"object","properties":{"o":{"$ref":"#/$defs/a0"}},"additionalProperties":false,"$defs":{` + strings.Join(defs, ",") + `}}`
	// Counted, not timed: each of the 83 schema objects (10 definitions,
	// 72 references, the property) is judged once; by path it was 8⁹.
	tree := readTree([]byte(params), jsonspan.Span{Start: 0, End: len(params)}, 0)
	p := &prep{r: &schemaRules{}, root: tree}
	if p.allowsNull(tree.get("properties").get("o")) || p.judged > 83 {
		t.Errorf("judged %d schemas", p.judged)
	}
	nsOK(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, fn(params, strictOn))
	got, _ := roundTrip(t, `{"dialect":"openai_strict"}`, strictOnMember, []rtTool{{"k", params, `{"o":null}`}})
	wantArgs(t, got, `{}`)
}

// References with keywords beside them, each target holding two more:
// inlining copies doubles per level; past a budget of the schema's size
// a reference keeps no siblings, and the request stays cheap.
func TestRefSiblingInliningBounded(t *testing.T) {
	const n = 24
	var defs []string
	for i := 0; i < n; i++ {
		next := `{"type":"string"}`
		if i+1 < n {
			next = `{"$ref":"#/$defs/d` + strconv.Itoa(i+1) + `","description":"x"}`
		}
		defs = append(defs, `"d`+strconv.Itoa(i)+`":{"type":"object","properties":{"a":`+next+`,"b":`+next+`},"required":["a","b"],"additionalProperties":false}`)
	}
	params := `{"type":"object","properties":{"r":{"$ref":"#/$defs/d0","description":"y"}},"required":["r"],"additionalProperties":false,"$defs":{` + strings.Join(defs, ",") + `}}`
	for _, d := range []string{"openai_strict", "kimi"} {
		// (Doubling per level would write 2^24 copies.)
		out, _, err := nsRun(t, `{"dialect":"`+d+`"}`, transforms.ProtocolResponses, fn(params, strictOn))
		if err != nil || len(out) > 64*len(params)+(1<<20) {
			t.Errorf("%s: %d bytes, %v", d, len(out), err)
			continue
		}
		validatorAccepts(t, d, out)
	}
}
