package schemaargs

import "testing"

var shapeCases = []struct {
	name                     string
	original, rewritten, arg string
	want                     string
}{
	{"same schema: kept, members in the value's order, no HTML escaping",
		`{"type":"object","properties":{"a":{"type":"integer"},"z":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"type":"integer"},"z":{"type":"string"}}}`,
		`{ "z" : "<a&b>\u00e9\n", "a" : 1.50 }`,
		`{"z":"<a&b>é\n","a":1.50}`},

	// Strict: optional members are required and nullable.
	{"strict: missing optional member sent as null",
		`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"},"c":{"type":"boolean"}},"required":["a"]}`,
		`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":["integer","null"]},"c":{"type":["boolean","null"]}},"required":["a","b","c"],"additionalProperties":false}`,
		`{"c":true,"a":"x"}`,
		`{"c":true,"a":"x","b":null}`},
	{"strict: nested objects and array elements",
		`{"type":"object","properties":{"list":{"type":"array","items":{"type":"object","properties":{"v":{"type":"integer"},"w":{"type":"string"}},"required":["v"]}}}}`,
		`{"type":"object","properties":{"list":{"anyOf":[{"type":"array","items":{"type":"object","properties":{"v":{"type":"integer"},"w":{"type":["string","null"]}},"required":["v","w"],"additionalProperties":false}},{"type":"null"}]}},"required":["list"],"additionalProperties":false}`,
		`{"list":[{"v":1},{"v":2,"w":"s"}]}`,
		`{"list":[{"v":1,"w":null},{"v":2,"w":"s"}]}`},
	{"strict: the whole optional object missing",
		`{"type":"object","properties":{"o":{"type":"object","properties":{"x":{"type":"integer"}}}}}`,
		`{"type":"object","properties":{"o":{"type":["object","null"],"properties":{"x":{"type":["integer","null"]}},"required":["x"]}},"required":["o"]}`,
		`{}`,
		`{"o":null}`},
	{"strict: $ref resolved in the rewritten document",
		`{"type":"object","properties":{"p":{"$ref":"#/$defs/P"}},"$defs":{"P":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},"required":["x"]}}}`,
		`{"type":"object","properties":{"p":{"$ref":"#/definitions/Q"}},"definitions":{"Q":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":["integer","null"]}},"required":["x","y"]}}}`,
		`{"p":{"x":3}}`,
		`{"p":{"x":3,"y":null}}`},

	// Gemini: non-string enums become string enums.
	{"integer enum as string enum",
		`{"type":"object","properties":{"n":{"type":"integer","enum":[10,20]}}}`,
		`{"type":"object","properties":{"n":{"type":"string","enum":["10","20"]}}}`,
		`{"n":10}`,
		`{"n":"10"}`},
	{"boolean and null under string enums",
		`{"type":"object","properties":{"b":{"enum":[true,false]},"z":{"enum":[null,"a"]}}}`,
		`{"type":"object","properties":{"b":{"type":"string","enum":["true","false"]},"z":{"type":"string","enum":["null","a"]}}}`,
		`{"b":true,"z":null}`,
		`{"b":"true","z":"null"}`},
	{"string-only enum without type",
		`{"type":"object","properties":{"n":{"enum":[1,2.5]}}}`,
		`{"type":"object","properties":{"n":{"enum":["1","2.5"]}}}`,
		`{"n":2.5}`,
		`{"n":"2.5"}`},
	{"nullable string enum keeps null",
		`{"type":"object","properties":{"n":{"type":["integer","null"],"enum":[1,null]}}}`,
		`{"type":"object","properties":{"n":{"type":["string","null"],"enum":["1",null]}}}`,
		`{"n":null}`,
		`{"n":null}`},
	{"string enum element of an array",
		`{"type":"array","items":{"type":"integer","enum":[1,2]}}`,
		`{"type":"array","items":{"type":"string","enum":["1","2"]}}`,
		`[2,1]`,
		`["2","1"]`},

	// Maps and free-form values sent as JSON strings.
	{"map as a JSON string",
		`{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"integer"}}}}`,
		`{"type":"object","properties":{"m":{"type":"string","description":"JSON object"}}}`,
		`{"m":{"k1":0,"k2":"<"}}`,
		`{"m":"{\"k1\":0,\"k2\":\"<\"}"}`},
	{"untyped value as a JSON string",
		`{"type":"object","properties":{"a":{},"b":{},"c":{},"d":{}}}`,
		`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"},"d":{"type":["string","null"]}}}`,
		`{"a":{"k":"v"},"b":[1,true],"c":"x","d":7}`,
		`{"a":"{\"k\":\"v\"}","b":"[1,true]","c":"x","d":"7"}`},
	{"encoded value is not shaped inside",
		`{"type":"object","properties":{"m":{"type":"object","properties":{"type":{"type":"integer","enum":[1]}}}}}`,
		`{"type":"object","properties":{"m":{"type":"string"}},"$defs":{}}`,
		`{"m":{"type":1}}`,
		`{"m":"{\"type\":1}"}`},

	// Renamed properties.
	{"renamed with underscores",
		`{"type":"object","properties":{"type":{"type":"string"},"format":{"type":"string"},"keep":{"type":"string"}}}`,
		`{"type":"object","properties":{"type_":{"type":"string"},"format__":{"type":"string"},"keep":{"type":"string"}},"required":["type_","format__","keep"]}`,
		`{"type":"t","format":"f"}`,
		`{"type_":"t","format__":"f","keep":null}`},
	{"renamed and shaped below",
		`{"type":"object","properties":{"properties":{"type":"object","properties":{"n":{"type":"integer","enum":[3]}}}}}`,
		`{"type":"object","properties":{"properties_":{"type":"object","properties":{"n":{"type":"string","enum":["3"]}}}}}`,
		`{"properties":{"n":3}}`,
		`{"properties_":{"n":"3"}}`},
	{"not renamed where declared",
		`{"type":"object","properties":{"a":{"type":"string"},"a_":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"type":"string"},"a_":{"type":"string"}}}`,
		`{"a":"1","a_":"2"}`,
		`{"a":"1","a_":"2"}`},

	// anyOf branches.
	{"anyOf branch by the value's type",
		`{"anyOf":[{"type":"string"},{"type":"object","properties":{"x":{"type":"integer"}}}]}`,
		`{"anyOf":[{"type":"string"},{"type":"object","properties":{"x":{"type":["integer","null"]}},"required":["x"]}]}`,
		`{}`,
		`{"x":null}`},
	{"anyOf object branch by its keys",
		`{"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}}},{"type":"object","properties":{"b":{"type":"integer"}}}]}`,
		`{"anyOf":[{"type":"object","properties":{"a":{"type":"integer"},"z1":{"type":"null"}},"required":["a","z1"]},{"type":"object","properties":{"b":{"type":"integer"},"z2":{"type":"null"}},"required":["b","z2"]}]}`,
		`{"b":1}`,
		`{"b":1,"z2":null}`},
	{"anyOf tie goes to the original's branch",
		`{"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"type":"object","properties":{"b":{"type":"integer"}},"required":["b"]}]}`,
		`{"anyOf":[{"type":"object","required":["r1"]},{"type":"object","required":["r2"]}]}`,
		`{"b":1}`,
		`{"b":1,"r2":null}`},
	{"type list counts as each type",
		`{"type":"object","properties":{"v":{"type":["integer","string"]}}}`,
		`{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`,
		`{"v":4}`,
		`{"v":4}`},
	{"anyOf of string enums only",
		`{"type":"object","properties":{"v":{"anyOf":[{"type":"integer","enum":[1]},{"type":"null"}]}}}`,
		`{"type":"object","properties":{"v":{"anyOf":[{"type":"string","enum":["1"]},{"type":"null"}]}}}`,
		`{"v":1}`,
		`{"v":"1"}`},
	{"allOf in the rewritten schema",
		`{"type":"object","properties":{"a":{"type":"integer"}}}`,
		`{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}}},{"required":["a","b"]}]}`,
		`{}`,
		`{"a":null,"b":null}`},
}

func TestShape(t *testing.T) {
	for _, c := range shapeCases {
		got, err := Shape([]byte(c.original), []byte(c.rewritten), []byte(c.arg))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestShapeNotJSON(t *testing.T) {
	ok := `{"type":"object"}`
	for _, in := range [][3]string{{`{`, ok, `{}`}, {ok, `[`, `{}`}, {ok, ok, `{} {}`}} {
		if got, err := Shape([]byte(in[0]), []byte(in[1]), []byte(in[2])); err == nil {
			t.Errorf("Shape(%q, %q, %q) = %s, want an error", in[0], in[1], in[2], got)
		}
	}
}

// TestShapeIdentity: under its own schema, every generated value shapes to
// itself except for required members, which Generate always writes.
func TestShapeIdentity(t *testing.T) {
	for _, c := range generateCases {
		for _, full := range []bool{false, true} {
			args, ok := Generate([]byte(c.schema), full)
			if !ok {
				continue
			}
			got, err := Shape([]byte(c.schema), []byte(c.schema), args)
			if err != nil || string(got) != string(args) {
				t.Errorf("%s full=%v: Shape(%s) = %s, %v", c.name, full, args, got, err)
			}
		}
	}
}
