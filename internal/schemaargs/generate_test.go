package schemaargs

import (
	"testing"
)

// generateCases pair a schema with the minimal and the full value Generate
// must return for it; "" for ok=false.
var generateCases = []struct {
	name          string
	schema        string
	minimal, full string
}{
	// Types.
	{"string", `{"type":"string"}`, `"x"`, `"x"`},
	{"integer", `{"type":"integer"}`, `0`, `0`},
	{"number", `{"type":"number","format":"float"}`, `0`, `0`},
	{"boolean", `{"type":"boolean"}`, `false`, `true`},
	{"null", `{"type":"null"}`, `null`, `null`},
	{"free-form object", `{"type":"object"}`, `{}`, `{"k1":"x"}`},
	{"array of strings", `{"type":"array","items":{"type":"string"}}`, `[]`, `["x"]`},
	{"type list, null first", `{"type":["null","integer"]}`, `0`, `0`},
	{"type list, string first", `{"type":["string","null"],"minLength":2}`, `"xx"`, `"xx"`},
	{"only null in the list left", `{"allOf":[{"type":["string","null"]},{"type":["integer","null"]}]}`, `null`, `null`},

	// enum and const.
	{"enum", `{"type":"string","enum":["a","b","c"]}`, `"a"`, `"c"`},
	{"enum with null last", `{"type":["integer","null"],"enum":[1,2,null]}`, `1`, `2`},
	{"enum without type", `{"enum":["on",3]}`, `"on"`, `3`},
	{"enum filtered by type", `{"type":"integer","enum":["a",7,"b"]}`, `7`, `7`},
	{"const", `{"const":{"a":[1,"<b>"]}}`, `{"a":[1,"<b>"]}`, `{"a":[1,"<b>"]}`},

	// Objects.
	{"required and optional in document order",
		`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"},"c":{"type":"boolean"}},"required":["a","b"]}`,
		`{"b":"x","a":0}`, `{"b":"x","a":0,"c":true}`},
	{"required but undeclared", `{"type":"object","required":["z"]}`, `{"z":"x"}`, `{"z":"x","k1":"x"}`},
	{"map", `{"type":"object","additionalProperties":{"type":"integer"}}`, `{}`, `{"k1":0}`},
	{"map of objects", `{"type":"object","additionalProperties":{"type":"object","properties":{"v":{"type":"string"}}}}`, `{}`, `{"k1":{"v":"x"}}`},
	{"properties and a map", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"boolean"}}`, `{}`, `{"a":"x","k1":true}`},
	{"closed object", `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`, `{}`, `{"a":"x"}`},
	{"patternProperties skipped", `{"type":"object","patternProperties":{"^x-":{"type":"integer"}}}`, `{}`, `{}`},
	{"propertyNames name the map entry", `{"type":"object","additionalProperties":{"type":"integer"},"propertyNames":{"enum":["alpha","beta"]}}`, `{}`, `{"alpha":0}`},
	{"minProperties", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"minProperties":1}`, `{"a":"x"}`, `{"a":"x","b":"x"}`},
	{"maxProperties", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"maxProperties":1}`, `{}`, `{"a":"x"}`},
	{"draft-03 required true", `{"type":"object","properties":{"a":{"type":"string","required":true},"b":{"type":"integer","required":false}}}`, `{"a":"x"}`, `{"a":"x","b":0}`},
	{"properties named like keywords",
		`{"type":"object","properties":{"type":{"type":"string","enum":["t"]},"properties":{"type":"integer"},"required":{"type":"boolean"}},"required":["type","required"]}`,
		`{"type":"t","required":false}`, `{"type":"t","properties":0,"required":true}`},
	{"annotations ignored",
		`{"type":"dict","title":"T","description":"d","properties":{"a":{"type":"string","default":"zz","examples":["q"],"optional":true},"b":{"type":"float","default":1.5}},"required":["b"]}`,
		`{"b":0}`, `{"a":"x","b":0}`},
	{"untyped object keywords", `{"properties":{"a":{"type":"integer"}},"required":["a"]}`, `{"a":0}`, `{"a":0}`},

	// Arrays.
	{"minItems", `{"type":"array","items":{"type":"integer","minimum":3},"minItems":2}`, `[3,3]`, `[3,3]`},
	{"maxItems 0", `{"type":"array","items":{"type":"string"},"maxItems":0}`, `[]`, `[]`},
	{"prefixItems", `{"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}],"items":false}`, `[]`, `["x",true]`},
	{"draft-04 tuple", `{"type":"array","items":[{"type":"integer"},{"type":"string"}],"minItems":1}`, `[0]`, `[0,"x"]`},
	{"uniqueItems", `{"type":"array","items":{"enum":["a","b"]},"uniqueItems":true,"minItems":1}`, `["a"]`, `["b"]`},

	// Strings.
	{"minLength", `{"type":"string","minLength":3,"maxLength":5}`, `"xxx"`, `"xxx"`},
	{"maxLength 0", `{"type":"string","maxLength":0}`, `""`, `""`},
	{"pattern sampled", `{"type":"string","pattern":"^[a-z]{2}\\d-(foo|bar)+$"}`, `"xx1-foo"`, `"xx1-foo"`},
	{"pattern class without x", `{"type":"string","pattern":"^[B-D]+$"}`, `"B"`, `"B"`},
	{"pattern and minLength", `{"type":"string","pattern":"^\\d+","minLength":3}`, `"1xx"`, `"1xx"`},
	{"pattern of two-letter codes", `{"type":"string","pattern":"^(-?[a-zA-Z]{2})$"}`, `"xx"`, `"xx"`},
	{"pattern with day spans", `{"type":"string","pattern":"^((([1-9]|[1-9][0-9])d(control)?)|(([1-9]|[1-4][0-9])w))$"}`, `"1d"`, `"1d"`},
	{"format date-time", `{"type":"string","format":"date-time"}`, `"2024-01-02T03:04:05Z"`, `"2024-01-02T03:04:05Z"`},
	{"format date", `{"type":"string","format":"date"}`, `"2024-01-02"`, `"2024-01-02"`},
	{"format time", `{"type":"string","format":"time"}`, `"03:04:05Z"`, `"03:04:05Z"`},
	{"format email", `{"type":"string","format":"email"}`, `"a@example.com"`, `"a@example.com"`},
	{"format uri", `{"type":"string","format":"uri","minLength":1}`, `"https://example.com"`, `"https://example.com"`},
	{"format uuid", `{"type":"string","format":"uuid"}`, `"123e4567-e89b-12d3-a456-426614174000"`, `"123e4567-e89b-12d3-a456-426614174000"`},
	{"format ipv4", `{"type":"string","format":"ipv4"}`, `"192.0.2.1"`, `"192.0.2.1"`},
	{"format ipv6", `{"type":"string","format":"ipv6"}`, `"2001:db8::1"`, `"2001:db8::1"`},
	{"unknown format", `{"type":"string","format":"password"}`, `"x"`, `"x"`},

	// Numbers.
	{"minimum", `{"type":"integer","minimum":5,"maximum":9}`, `5`, `5`},
	{"exclusiveMinimum", `{"type":"integer","exclusiveMinimum":5}`, `6`, `6`},
	{"exclusiveMinimum 0", `{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":1000000}`, `1`, `1`},
	{"draft-04 exclusiveMinimum", `{"type":"integer","minimum":1,"exclusiveMinimum":true}`, `2`, `2`},
	{"number exclusiveMinimum", `{"type":"number","exclusiveMinimum":0.5}`, `1.5`, `1.5`},
	{"number minimum fraction", `{"type":"number","minimum":0.25}`, `0.25`, `0.25`},
	{"maximum below 0", `{"type":"integer","maximum":-3}`, `-3`, `-3`},
	{"exclusiveMaximum below 0", `{"type":"number","exclusiveMaximum":-2,"minimum":-2.5}`, `-2.25`, `-2.25`},
	{"multipleOf", `{"type":"integer","minimum":10,"multipleOf":7}`, `14`, `14`},

	// References.
	{"$defs", `{"type":"object","properties":{"p":{"$ref":"#/$defs/pt"}},"required":["p"],"$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}}}`, `{"p":{"x":0}}`, `{"p":{"x":0}}`},
	{"definitions", `{"properties":{"p":{"$ref":"#/definitions/c"}},"required":["p"],"definitions":{"c":{"enum":["r","g"]}}}`, `{"p":"r"}`, `{"p":"g"}`},
	{"escaped and percent-encoded pointer", `{"$ref":"#/$defs/a~1b%20c~0","$defs":{"a/b c~":{"type":"integer","minimum":4}}}`, `4`, `4`},
	{"zod-style pointer", `{"type":"object","properties":{"a":{"type":"string","enum":["z"]},"b":{"$ref":"#/properties/a"}},"required":["b"]}`, `{"b":"z"}`, `{"a":"z","b":"z"}`},
	{"recursion through #",
		`{"type":"object","properties":{"n":{"type":"string"},"kids":{"type":"array","items":{"$ref":"#"}}},"required":["n"]}`,
		`{"n":"x"}`, `{"n":"x","kids":[{"n":"x","kids":[{"n":"x","kids":[{"n":"x","kids":[{"n":"x","kids":[{"n":"x"}]}]}]}]}]}`},
	{"recursion ends at the non-recursive branch",
		`{"$ref":"#/$defs/l","$defs":{"l":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/l"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}}}`,
		`{"v":0,"next":null}`, `{"v":0,"next":{"v":0,"next":{"v":0,"next":{"v":0,"next":null}}}}`},

	// Combinators.
	{"anyOf first branch", `{"anyOf":[{"type":"string"},{"type":"integer"}]}`, `"x"`, `"x"`},
	{"anyOf first branch that works", `{"anyOf":[{"type":"string","pattern":"(?=a)a"},{"type":"integer","minimum":5}]}`, `5`, `5`},
	{"oneOf", `{"oneOf":[false,{"type":"boolean"}]}`, `false`, `true`},
	{"anyOf with sibling keywords", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"anyOf":[{"required":["b"]},{"required":["a"]}]}`, `{"b":"x"}`, `{"a":"x","b":"x"}`},
	{"allOf merged", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer","minimum":1}},"required":["b"]}]}`, `{"a":"x","b":1}`, `{"a":"x","b":1}`},
	{"allOf types intersect", `{"allOf":[{"type":"number"},{"type":"integer","minimum":0.5}]}`, `1`, `1`},

	// Boolean and empty schemas.
	{"true", `true`, `"x"`, `{"k":"v"}`},
	{"empty", `{}`, `"x"`, `{"k":"v"}`},
	{"untyped property", `{"type":"object","properties":{"any":{}},"required":["any"]}`, `{"any":"x"}`, `{"any":{"k":"v"}}`},

	// ok=false.
	{"false", `false`, ``, ``},
	{"required false", `{"type":"object","properties":{"a":false},"required":["a"]}`, ``, ``},
	{"optional false", `{"type":"object","properties":{"a":false}}`, `{}`, `{}`},
	{"unresolved ref", `{"$ref":"#/$defs/none"}`, ``, ``},
	{"remote ref", `{"$ref":"other.json#/x"}`, ``, ``},
	{"types disjoint", `{"allOf":[{"type":"string"},{"type":"integer"}]}`, ``, ``},
	{"enum outside the type", `{"type":"string","enum":[1,2]}`, ``, ``},
	{"pattern Go cannot read", `{"type":"string","pattern":"^(?!a)"}`, ``, ``},
	{"pattern no candidate fits", `{"type":"string","pattern":"^a$","minLength":2}`, ``, ``},
	{"bounds crossed", `{"type":"integer","minimum":5,"maximum":4}`, ``, ``},
	{"no integer between", `{"type":"integer","exclusiveMinimum":1,"exclusiveMaximum":2}`, ``, ``},
	{"format longer than maxLength", `{"type":"string","format":"email","maxLength":3}`, ``, ``},
	{"too few unique items", `{"type":"array","items":{"const":1},"uniqueItems":true,"minItems":2}`, ``, ``},
	{"required recursion never ends", `{"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]}`, ``, ``},
	{"ref cycle", `{"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}}`, ``, ``},
	{"not JSON", `{"type":`, ``, ``},
	{"too many items", `{"type":"array","minItems":1000000000}`, ``, ``},
	{"too long a string", `{"type":"string","minLength":1000000000}`, ``, ``},
}

func TestGenerate(t *testing.T) {
	for _, c := range generateCases {
		for _, full := range []bool{false, true} {
			want := c.minimal
			if full {
				want = c.full
			}
			got, ok := Generate([]byte(c.schema), full)
			switch {
			case want == "" && ok:
				t.Errorf("%s full=%v: got %s, want ok=false", c.name, full, got)
			case want == "":
			case !ok:
				t.Errorf("%s full=%v: ok=false, want %s", c.name, full, want)
			case string(got) != want:
				t.Errorf("%s full=%v:\n got %s\nwant %s", c.name, full, got, want)
			default:
				// The expectation itself is checked by an independent
				// validator.
				compiled, err := validate(t, []byte(c.schema), got)
				if compiled && err != nil {
					t.Errorf("%s full=%v: %s invalid: %v", c.name, full, got, err)
				}
			}
		}
	}
}

// TestGenerateBudget: schemas whose full values would grow exponentially
// (each level referring to the next twice) stop at the budget.
func TestGenerateBudget(t *testing.T) {
	schema := `{"$ref":"#/$defs/d0","$defs":{`
	for i := range 40 {
		if i > 0 {
			schema += ","
		}
		next := `{"type":"integer"}`
		if i < 39 {
			next = `{"$ref":"#/$defs/d` + itoa(i+1) + `"}`
		}
		schema += `"d` + itoa(i) + `":{"type":"object","properties":{"a":` + next + `,"b":` + next + `}}`
	}
	schema += `}}`
	if got, ok := Generate([]byte(schema), false); !ok || string(got) != `{}` {
		t.Errorf("minimal: %s %v, want {}", got, ok)
	}
	if _, ok := Generate([]byte(schema), true); ok {
		t.Errorf("full: generated 2^40 members")
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
