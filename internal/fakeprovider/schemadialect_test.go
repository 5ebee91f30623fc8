package fakeprovider

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func boolPtr(b bool) *bool { return &b }

// Prefixes of the dialects' texts for a function "f", the first tool.
const (
	oaCtx = "Invalid schema for function 'f': In context="
	anAt  = "tools.0.custom.input_schema"
	gmAt  = "tools[0].function_declarations[0].parameters"
	gmSem = "* GenerateContentRequest." + gmAt
	kmAt  = "Invalid request: tools[0].function.parameters"

	msgOpenAIClosed  = "'additionalProperties' is required to be supplied and to be false."
	msgAnthClosed    = "For 'object' type, 'additionalProperties' must be explicitly set to false"
	msgKimiRoot      = `the root of parameters must be an object schema ("type": "object")`
	msgRecursive     = "is recursive; strict mode does not support recursive schemas"
	msgOpenAIUntyped = "schema must have a 'type' key."
	msgGeminiAnyOf   = "schema specified other fields alongside any_of. When using any_of, it must be the only field set."
)

// gmAnyOf is the refusal of siblings beside anyOf at a declaration path
// such as "parameters.v".
func gmAnyOf(at string) string {
	return "Unable to submit request because `f` functionDeclaration `" + at + "` " + msgGeminiAnyOf
}

func gmUnknown(name, at string) string {
	return `Invalid JSON payload received. Unknown name "` + name + `" at '` + gmAt + at + `': Cannot find field.`
}

// keywordNames has properties named like keywords; keywordNamesClosed is it
// in the form strict modes want.
const keywordNames = `{"type":"object","properties":{` +
	`"$ref":{"type":"string"},"additionalProperties":{"type":"boolean"},"format":{"type":"string","enum":["a"]},` +
	`"type":{"type":"string"},"required":{"type":"array","items":{"type":"string"}},"const":{"type":"integer"},` +
	`"properties":{"type":"object","properties":{"$defs":{"type":"integer"}},"required":["$defs"]}},` +
	`"required":["$ref","additionalProperties","format","type","required","properties","const"]}`

var keywordNamesClosed = strings.ReplaceAll(keywordNames, `{"type":"object",`, `{"type":"object","additionalProperties":false,`)

type schemaCase struct {
	name    string
	dialect string
	strict  *bool
	schema  string
	want    []string
}

var schemaCases = []schemaCase{
	// openai_strict
	{
		name: "openai closed and fully required", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"x":{"type":"object","properties":{"y":{"type":["string","null"]}},"required":["y"],"additionalProperties":false},` +
			`"n":{"type":"integer","minimum":1,"format":"anything"}},"required":["x","n"],"additionalProperties":false}`,
	},
	{
		name: "openai nested anyOf and local $ref", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/p"}]}},"required":["v"],"additionalProperties":false,` +
			`"$defs":{"p":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false}}}`,
	},
	{
		name: "openai nested open object", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"x":{"type":"object","properties":{"y":{"type":"string"}},"required":["y"]}},"required":["x"],"additionalProperties":false}`,
		want:   []string{oaCtx + "('properties', 'x'), " + msgOpenAIClosed},
	},
	{
		name: "openai property left out of required", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"x":{"type":"string"},"y":{"type":"string"}},"required":["x"],"additionalProperties":false}`,
		want:   []string{oaCtx + "(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'y'."},
	},
	{
		name: "openai additionalProperties true and no required", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"string"}},"additionalProperties":true}`,
		want: []string{
			oaCtx + "(), " + msgOpenAIClosed,
			oaCtx + "(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'a'.",
			oaCtx + "(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'b'.",
		},
	},
	{
		name: "openai root anyOf", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"anyOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}]}`,
		want:   []string{oaCtx + "(), 'anyOf' is not permitted at the root: the root must be an object schema."},
	},
	{
		name: "openai open object in array-form items and in $defs", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"list":{"type":"array","items":[{"type":"object","properties":{}}]}},"required":["list"],"additionalProperties":false,` +
			`"$defs":{"d":{"properties":{}}}}`,
		want: []string{
			oaCtx + "('properties', 'list', 'items', 0), " + msgOpenAIClosed,
			oaCtx + "('$defs', 'd'), " + msgOpenAIClosed,
			oaCtx + "('$defs', 'd'), " + msgOpenAIUntyped,
		},
	},
	{
		name: "openai property named properties", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"properties":{"type":"object","properties":{"items":{"type":"string"}},"required":["items"]}},"required":["properties"],"additionalProperties":false}`,
		want:   []string{oaCtx + "('properties', 'properties'), " + msgOpenAIClosed},
	},
	{
		name: "openai rules off without strict", dialect: DialectOpenAIStrict,
		schema: `{"anyOf":[{"type":"object","properties":{"a":{"type":"string"}}}]}`,
	},
	{
		name: "openai rules off with strict false", dialect: DialectOpenAIStrict, strict: boolPtr(false),
		schema: `{"type":"object","properties":{"x":{"type":"object","properties":{"y":{"type":"string"}}}}}`,
	},

	// openai_strict: $ref alone, a type everywhere, the unsupported
	// keywords, recursion through "#" and $defs
	{
		name: "openai $ref with a description beside it", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"p":{"$ref":"#/$defs/p","description":"d","title":"t"}},"required":["p"],"additionalProperties":false,"$defs":{"p":{"type":"string"}}}`,
		want:   []string{"Invalid schema for function 'f': context=('properties', 'p'), $ref cannot have keywords {'description', 'title'}."},
	},
	{
		name: "openai bare $ref, description on the definition", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"p":{"$ref":"#/$defs/p"}},"required":["p"],"additionalProperties":false,"$defs":{"p":{"type":"string","description":"d"}}}`,
	},
	{
		name: "openai schemas without a type", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"any":{},"doc":{"description":"d"},"k":{"enum":["a"]}},"required":["any","doc","k"],"additionalProperties":false}`,
		want: []string{
			oaCtx + "('properties', 'any'), " + msgOpenAIUntyped,
			oaCtx + "('properties', 'doc'), " + msgOpenAIUntyped,
			oaCtx + "('properties', 'k'), " + msgOpenAIUntyped,
		},
	},
	{
		name: "openai anyOf and $ref need no type", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"u":{"anyOf":[{"type":"string"},{"type":"null"}],"description":"d"},"r":{"$ref":"#/$defs/s"}},"required":["u","r"],"additionalProperties":false,"$defs":{"s":{"type":"string","enum":["a"]}}}`,
	},
	{
		name: "openai composition keywords", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"s":{"type":"string","oneOf":[{"type":"string"}],"allOf":[{"type":"string"}],"not":{"type":"null"},` +
			`"if":{"type":"string"},"then":{"type":"string"},"else":{"type":"string"}}},"required":["s"],"additionalProperties":false}`,
		want: []string{
			oaCtx + "('properties', 's'), 'oneOf' is not permitted.",
			oaCtx + "('properties', 's'), 'allOf' is not permitted.",
			oaCtx + "('properties', 's'), 'not' is not permitted.",
			oaCtx + "('properties', 's'), 'if' is not permitted.",
			oaCtx + "('properties', 's'), 'then' is not permitted.",
			oaCtx + "('properties', 's'), 'else' is not permitted.",
		},
	},
	{
		name: "openai object, array and string keywords strict mode lacks", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"m":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false,` +
			`"patternProperties":{"^x":{"type":"string"}},"propertyNames":{"type":"string","pattern":"^a"},"minProperties":1},` +
			`"l":{"type":"array","items":{"type":"string"},"uniqueItems":true,"minItems":1,"maxItems":3},` +
			`"s":{"type":"string","minLength":1,"pattern":"^a","format":"email","default":"a"}},"required":["m","l","s"],"additionalProperties":false}`,
		want: []string{
			oaCtx + "('properties', 'l'), 'uniqueItems' is not permitted.",
			oaCtx + "('properties', 'm'), 'patternProperties' is not permitted.",
			oaCtx + "('properties', 'm'), 'propertyNames' is not permitted.",
			oaCtx + "('properties', 'm'), 'minProperties' is not permitted.",
			oaCtx + "('properties', 's'), 'minLength' is not permitted.",
			oaCtx + "('properties', 's'), 'default' is not permitted.",
		},
	},
	{
		// The Structured Outputs guide's UI example ("$ref": "#") and its
		// linked list (a $defs entry that refers to itself).
		name: "openai recursion through # and $defs", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"label":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}},` +
			`"list":{"$ref":"#/$defs/node"}},"required":["label","children","list"],"additionalProperties":false,` +
			`"$defs":{"node":{"type":"object","properties":{"value":{"type":"number"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},` +
			`"required":["value","next"],"additionalProperties":false}}}`,
	},
	{
		name: "openai reference that does not resolve", dialect: DialectOpenAIStrict, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"},"b":{"$ref":"https://example.com/b.json"}},"required":["a","b"],"additionalProperties":false,"$defs":{}}`,
		want: []string{
			oaCtx + `('properties', 'a'), reference "#/$defs/missing" does not resolve to a definition in this schema.`,
			oaCtx + `('properties', 'b'), reference "https://example.com/b.json" does not resolve to a definition in this schema.`,
		},
	},
	{
		name: "openai new rules off without strict", dialect: DialectOpenAIStrict,
		schema: `{"type":"object","properties":{"any":{},"p":{"$ref":"#/$defs/x","description":"d"},"s":{"type":"string","oneOf":[{"type":"string"}],"minLength":1}}}`,
	},

	// anthropic
	{
		name: "anthropic strict accepted", dialect: DialectAnthropic, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"when":{"type":"string","format":"date-time"},"tags":{"type":"array","items":{"type":"string"},"minItems":1},` +
			`"at":{"$ref":"#/$defs/place"},"again":{"$ref":"#/$defs/place"},"note":{"type":"string","default":"none"},"k":{"const":3}},"required":["when"],"additionalProperties":false,` +
			`"$defs":{"place":{"type":"object","properties":{"lat":{"type":"number"}},"additionalProperties":false}}}`,
	},
	{
		name: "anthropic open object", dialect: DialectAnthropic, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"a":{"type":"string"}}}`,
		want:   []string{anAt + ": " + msgAnthClosed},
	},
	{
		name: "anthropic bounds", dialect: DialectAnthropic, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":9},"s":{"type":"string","pattern":"^a","maxLength":3},` +
			`"l":{"type":"array","items":{"type":"string"},"minItems":2},"e":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},"m":{"type":"string","minLength":1}},"additionalProperties":false}`,
		want: []string{
			anAt + ".properties.e: 'exclusiveMinimum' is not supported in strict mode",
			anAt + ".properties.e: 'exclusiveMaximum' is not supported in strict mode",
			anAt + ".properties.l: 'minItems' must be 0 or 1 in strict mode, got 2",
			anAt + ".properties.m: 'minLength' is not supported in strict mode",
			anAt + ".properties.n: 'minimum' is not supported in strict mode",
			anAt + ".properties.n: 'maximum' is not supported in strict mode",
			anAt + ".properties.s: 'maxLength' is not supported in strict mode",
			anAt + ".properties.s: 'pattern' is not supported in strict mode",
		},
	},
	{
		name: "anthropic format outside the sourced set", dialect: DialectAnthropic, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"h":{"type":"string","format":"hostname"},"u":{"type":"string","format":"uri"}},"additionalProperties":false}`,
		want:   []string{anAt + ".properties.h: format 'hostname' is not supported in strict mode; supported formats: date-time, date, time, email, uri, uuid, ipv4, ipv6"},
	},
	{
		name: "anthropic external and dangling refs", dialect: DialectAnthropic, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"},"b":{"$ref":"#/$defs/missing"}},"additionalProperties":false}`,
		want: []string{
			anAt + ".properties.a: '$ref' 'https://example.com/a.json' is not supported: only local references ('#/...') are",
			anAt + ".properties.b: '$ref' '#/$defs/missing' does not resolve within the schema",
		},
	},
	{
		name: "anthropic self-referencing definition", dialect: DialectAnthropic, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"root":{"$ref":"#/$defs/node"}},"additionalProperties":false,` +
			`"$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}},"additionalProperties":false}}}`,
		want: []string{
			anAt + ".properties.root: '$ref' '#/$defs/node' " + msgRecursive,
			anAt + ".$defs.node.properties.next: '$ref' '#/$defs/node' " + msgRecursive,
		},
	},
	{
		name: "anthropic ref to the root", dialect: DialectAnthropic, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"self":{"$ref":"#"}},"additionalProperties":false}`,
		want:   []string{anAt + ".properties.self: '$ref' '#' " + msgRecursive},
	},
	{
		name: "anthropic mutual recursion beside a plain shared ref", dialect: DialectAnthropic, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"p":{"$ref":"#/$defs/a"},"q":{"$ref":"#/$defs/leaf"},"r":{"$ref":"#/$defs/leaf"}},"additionalProperties":false,"$defs":{` +
			`"a":{"type":"object","properties":{"b":{"$ref":"#/$defs/b"}},"additionalProperties":false},` +
			`"b":{"type":"array","items":{"$ref":"#/$defs/a"}},"leaf":{"type":"string"}}}`,
		want: []string{
			anAt + ".properties.p: '$ref' '#/$defs/a' " + msgRecursive,
			anAt + ".$defs.a.properties.b: '$ref' '#/$defs/b' " + msgRecursive,
			anAt + ".$defs.b.items: '$ref' '#/$defs/a' " + msgRecursive,
		},
	},
	{
		name: "anthropic property named $ref", dialect: DialectAnthropic, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"$ref":{"type":"object","properties":{}}},"additionalProperties":false}`,
		want:   []string{anAt + `.properties["$ref"]: ` + msgAnthClosed},
	},
	{
		name: "anthropic maxItems", dialect: DialectAnthropic, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"l":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3},"n":{"type":["array","null"],"items":{"type":"string"},"maxItems":0}},"additionalProperties":false}`,
		want: []string{
			anAt + ".properties.l: For 'array' type, property 'maxItems' is not supported",
			anAt + ".properties.n: For 'array' type, property 'maxItems' is not supported",
		},
	},
	{
		name: "anthropic rules off without strict", dialect: DialectAnthropic,
		schema: `{"type":"object","properties":{"n":{"type":"integer","minimum":0},"r":{"$ref":"#"},"h":{"type":"string","format":"hostname"}}}`,
	},

	// gemini
	{
		name: "gemini accepted", dialect: DialectGemini, strict: boolPtr(true),
		schema: `{"type":"object","properties":{"when":{"type":"string","format":"date-time"},"mode":{"type":"string","enum":["a","b"],"format":"enum"},` +
			`"n":{"type":"integer","format":"int32","minimum":1,"maximum":5},"opt":{"anyOf":[{"type":"string","description":"d"},{"type":"integer","nullable":true}]},` +
			`"list":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3},"d":{"type":"string","default":"x","example":"y","title":"t","pattern":"^a","minLength":1,"maxLength":9},` +
			`"o":{"type":"object","properties":{"k":{"type":"boolean"}},"minProperties":1,"maxProperties":2,"propertyOrdering":["k"]}},"required":["when"]}`,
	},
	{
		name: "gemini additionalProperties at the root", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`,
		want:   []string{`Invalid JSON payload received. Unknown name "additionalProperties" at 'tools[0].function_declarations[0].parameters': Cannot find field.`},
	},
	{
		name: "gemini additionalProperties in items", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"edits":{"type":"array","items":{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}}}}`,
		want:   []string{gmUnknown("additionalProperties", ".properties[edits].items")},
	},
	{
		name: "gemini type list", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"body":{"type":["string","null"]}}}`,
		want:   []string{`Invalid JSON payload received. Unknown name "type" at '` + gmAt + `.properties[body]': Proto field is not repeating, cannot start list.`},
	},
	{
		name: "gemini enum values that are not strings", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"n":{"type":"integer","enum":[1,"2",true,2.50]}}}`,
		want: []string{
			"Invalid value at '" + gmAt + ".properties[n].enum[0]' (TYPE_STRING), 1",
			"Invalid value at '" + gmAt + ".properties[n].enum[2]' (TYPE_STRING), true",
			"Invalid value at '" + gmAt + ".properties[n].enum[3]' (TYPE_STRING), 2.50",
			gmSem + ".properties[n].enum: only allowed for STRING type",
		},
	},
	{
		name: "gemini string format", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"u":{"type":"string","format":"uri"}}}`,
		want:   []string{gmSem + ".properties[u].format: only 'enum' and 'date-time' are supported for STRING type"},
	},
	{
		name: "gemini unknown keywords", dialect: DialectGemini,
		schema: `{"$schema":"x","$id":"y","type":"object","properties":{"a":{"$ref":"#/$defs/s"},"c":{"type":"integer","const":3},` +
			`"m":{"type":"object","properties":{},"propertyNames":{"pattern":"^a"}},"d":{"type":"string","default":"x"}},"$defs":{"s":{"type":"string"}},"definitions":{}}`,
		want: []string{
			gmUnknown("$defs", ""),
			gmUnknown("$id", ""),
			gmUnknown("$schema", ""),
			gmUnknown("definitions", ""),
			gmUnknown("$ref", ".properties[a]"),
			gmSem + ".properties[a].type: must be specified",
			gmUnknown("const", ".properties[c]"),
			gmUnknown("propertyNames", ".properties[m]"),
			gmSem + ".properties[m].properties: should be non-empty for OBJECT type",
		},
	},
	{
		name: "gemini anyOf with siblings", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"integer"}],"type":"string","description":"d","default":"x"}}}`,
		want:   []string{gmAnyOf("parameters.v")},
	},
	{
		name: "gemini boolean schemas", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"anything":true,"list":{"type":"array","items":false}}}`,
		want: []string{
			"Invalid value at '" + gmAt + ".properties[anything]' (type.googleapis.com/google.ai.generativelanguage.v1beta.Schema), true",
			"Invalid value at '" + gmAt + ".properties[list].items' (type.googleapis.com/google.ai.generativelanguage.v1beta.Schema), false",
		},
	},
	{
		name: "gemini property names that look like keywords, nested", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"properties":{"type":"object","properties":{"items":{"type":["string","null"]}}}}}`,
		want:   []string{`Invalid JSON payload received. Unknown name "type" at '` + gmAt + `.properties[properties].properties[items]': Proto field is not repeating, cannot start list.`},
	},

	{
		name: "gemini object with empty properties", dialect: DialectGemini,
		schema: `{"type":"object","properties":{}}`,
		want:   []string{gmSem + ".properties: should be non-empty for OBJECT type"},
	},
	{
		name: "gemini names that are no Schema field", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"n":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1},"o":{"type":"string","optional":true},` +
			`"u":{"type":"string","oneOf":[{"type":"string"}]},"m":{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"string"}}}}`,
		want: []string{
			gmUnknown("additionalProperties", ".properties[m]"),
			gmUnknown("exclusiveMaximum", ".properties[n]"),
			gmUnknown("exclusiveMinimum", ".properties[n]"),
			gmUnknown("optional", ".properties[o]"),
			gmUnknown("oneOf", ".properties[u]"),
		},
	},
	{
		name: "gemini schemas without a type", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"any":{},"doc":{"description":"d"},"u":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`,
		want: []string{
			gmSem + ".properties[any].type: must be specified",
			gmSem + ".properties[doc].type: must be specified",
		},
	},
	{
		name: "gemini annotations beside anyOf", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"d":{"anyOf":[{"type":"string"}],"description":"d"},"t":{"anyOf":[{"type":"string"}],"title":"t"},` +
			`"n":{"anyOf":[{"type":"string"}],"nullable":true},"alone":{"anyOf":[{"type":"string"},{"type":"integer","nullable":true}]}}}`,
		want: []string{gmAnyOf("parameters.d"), gmAnyOf("parameters.n"), gmAnyOf("parameters.t")},
	},
	{
		name: "gemini lenient anyOf takes description and title", dialect: DialectGeminiLenientAnyOf,
		schema: `{"type":"object","properties":{"d":{"anyOf":[{"type":"string"}],"description":"d"},"t":{"anyOf":[{"type":"string"}],"title":"t"},` +
			`"n":{"anyOf":[{"type":"string"}],"nullable":true},"alone":{"anyOf":[{"type":"string"},{"type":"integer","nullable":true}]}}}`,
		want: []string{gmAnyOf("parameters.n")},
	},
	{
		name: "gemini anyOf in items and in a member", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"l":{"type":"array","items":{"anyOf":[{"type":"string"},{"anyOf":[{"type":"integer"}],"type":"integer"}],"description":"d"}}}}`,
		want: []string{
			gmAnyOf("parameters.l.items"),
			gmAnyOf("parameters.l.items.any_of[1]"),
		},
	},
	{
		name: "gemini enum on a type other than STRING", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"i":{"type":"integer","enum":["1","2"]},"s":{"type":"STRING","format":"enum","enum":["a"]}}}`,
		want:   []string{gmSem + ".properties[i].enum: only allowed for STRING type"},
	},

	// kimi
	{
		name: "kimi accepted", dialect: DialectKimi,
		schema: `{"type":"object","properties":{"a":{"$ref":"#/$defs/s"},"b":{"type":["string","null"]}},"$defs":{"s":{"type":"string"}}}`,
	},
	{
		name: "kimi root anyOf", dialect: DialectKimi,
		schema: `{"anyOf":[{"type":"object","properties":{}}]}`,
		want:   []string{kmAt + ": " + msgKimiRoot},
	},
	{
		name: "kimi root type list", dialect: DialectKimi, strict: boolPtr(true),
		schema: `{"type":["object","null"],"properties":{}}`,
		want: []string{
			kmAt + ": " + msgKimiRoot,
			kmAt + ": keyword properties is not allowed in combination with multiple types",
		},
	},
	{
		name: "kimi root boolean", dialect: DialectKimi,
		schema: `true`,
		want:   []string{kmAt + ": " + msgKimiRoot},
	},
	{
		name: "kimi external ref, $schema and $id", dialect: DialectKimi,
		schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"a":{"$ref":"https://example.com/s.json"},"b":{"$id":"urn:b","type":"string"}}}`,
		want: []string{
			kmAt + ": '$schema' is not supported",
			kmAt + ".properties.a: references must start with #/$defs/",
			kmAt + ".properties.b: keyword $id must be at root level",
		},
	},
	{
		name: "kimi type list with keywords beside it", dialect: DialectKimi,
		schema: `{"type":"object","properties":{"o":{"type":["object","null"],"properties":{}},"l":{"type":["array","null"],"items":{"type":"string"},"description":"d"},` +
			`"e":{"type":["string","null"],"enum":["a",null]},"s":{"type":["string","null"],"description":"d","title":"t"}}}`,
		want: []string{
			kmAt + ".properties.l: keyword items is not allowed in combination with multiple types",
			kmAt + ".properties.o: keyword properties is not allowed in combination with multiple types",
		},
	},
	{
		name: "kimi references outside #/$defs", dialect: DialectKimi,
		schema: `{"type":"object","properties":{"a":{"type":"string"},"z":{"$ref":"#/properties/a"},"d":{"$ref":"#/definitions/s"},"m":{"$ref":"#/$defs/missing"},` +
			`"ok":{"$ref":"#/$defs/s","description":"d"},"self":{"$ref":"#"}},"definitions":{"s":{"type":"string"}},"$defs":{"s":{"type":"string"}}}`,
		want: []string{
			kmAt + ".properties.d: references must start with #/$defs/",
			kmAt + ".properties.m: invalid $ref path: #/$defs/missing",
			kmAt + ".properties.z: references must start with #/$defs/",
		},
	},
	{
		name: "kimi reference without $defs, and keywords beside $ref and anyOf", dialect: DialectKimi,
		schema: `{"type":"object","properties":{"r":{"$ref":"#/$defs/s","type":"string","default":"x"},"u":{"anyOf":[{"type":"string"}],"type":"string","title":"t"}}}`,
		want: []string{
			kmAt + ".properties.r: $defs not found for reference: #/$defs/s",
			kmAt + ".properties.r: keyword 'default' is not allowed at the same level as $ref",
			kmAt + ".properties.r: when using $ref, type should be defined in the referenced schema instead of the parent schema",
			kmAt + ".properties.u: when using anyOf, type should be defined in anyOf items instead of the parent schema",
		},
	},
	{
		name: "kimi property named additionalProperties", dialect: DialectKimi,
		schema: `{"type":"object","properties":{"additionalProperties":{"type":"boolean"},"additional_properties":{"type":"boolean"}}}`,
		want:   []string{kmAt + ".properties: property name 'additionalProperties' is reserved for JSON Schema keywords"},
	},
	{
		name: "kimi enum without a type", dialect: DialectKimi,
		schema: `{"type":"object","properties":{"lang":{"enum":["Chinese","English"]},"typed":{"type":"string","enum":["Chinese","English"]}}}`,
		want:   []string{kmAt + ".properties.lang: type is not defined"},
	},
	{
		// MFJS spec, "Recursive Schema Example".
		name: "kimi recursive list through $defs", dialect: DialectKimi,
		schema: `{"type":"object","properties":{"linked_list":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","properties":{"value":{"type":"number"},` +
			`"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"additionalProperties":false,"required":["next","value"]}},"additionalProperties":false,"required":["linked_list"]}`,
	},
	{
		name: "kimi strict false", dialect: DialectKimi, strict: boolPtr(false),
		schema: `{"$schema":"x","anyOf":[{"$ref":"https://example.com/s.json"}]}`,
	},

	// permissive, and the same rules in the other dialects' words
	{
		name: "permissive accepted with boolean schemas", dialect: DialectPermissive,
		schema: `{"type":"object","properties":{"any":true,"never":false,"m":{"type":"object","properties":{},"additionalProperties":{"type":"string"}}},"required":["any"]}`,
	},
	{
		name: "permissive null required", dialect: DialectPermissive,
		schema: `{"type":"object","properties":{"q":{"type":"string"}},"required":null}`,
		want:   []string{oaCtx + "(), 'required' must be an array of property names, got null."},
	},
	{
		name: "permissive required names an undeclared property", dialect: DialectPermissive,
		schema: `{"type":"object","properties":{"q":{"type":"string"}},"required":["q","limit",7]}`,
		want: []string{
			oaCtx + "(), 'required' lists 'limit', which is not a key of 'properties'.",
			oaCtx + "(), 'required' lists 7, which is not a key of 'properties'.",
		},
	},
	{
		name: "permissive object without properties", dialect: DialectPermissive,
		schema: `{"type":"object","properties":{"o":{"type":["object","null"]}}}`,
		want:   []string{oaCtx + "('properties', 'o'), 'properties' is required to be supplied for a schema of type 'object'."},
	},
	{
		name: "permissive value that is no schema", dialect: DialectPermissive,
		schema: `{"type":"object","properties":{"a":"string","b":{"type":"array","items":3}}}`,
		want: []string{
			oaCtx + `('properties', 'a'), "string" is not a schema: expected an object or a boolean.`,
			oaCtx + "('properties', 'b', 'items'), 3 is not a schema: expected an object or a boolean.",
		},
	},
	{
		name: "gemini words a null required", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"q":{"type":"string"}},"required":null}`,
		want:   []string{gmSem + ".required: must be a list of property names, got null"},
	},
	{
		name: "gemini words an undeclared required name", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"q":{"type":"string"}},"required":["q","limit"]}`,
		want:   []string{gmSem + ".required[1]: property is not defined"},
	},
	{
		name: "gemini words an object without properties", dialect: DialectGemini,
		schema: `{"type":"object","properties":{"o":{"type":"object"}}}`,
		want:   []string{gmSem + ".properties[o].properties: should be non-empty for OBJECT type"},
	},
	{
		name: "anthropic without strict keeps the permissive rules", dialect: DialectAnthropic,
		schema: `{"type":"object","properties":{"q":{"type":"string"}},"required":null}`,
		want:   []string{anAt + ": 'required' must be an array of property names, got null."},
	},
	{
		name: "kimi with strict false keeps the permissive rules", dialect: DialectKimi, strict: boolPtr(false),
		schema: `{"type":"object","properties":{"q":{"type":"string"}},"required":["q","limit"]}`,
		want:   []string{kmAt + ": 'required' lists 'limit', which is not a key of 'properties'."},
	},
	{
		name: "openai without strict keeps the permissive rules", dialect: DialectOpenAIStrict,
		schema: `{"type":"object"}`,
		want:   []string{oaCtx + "(), 'properties' is required to be supplied for a schema of type 'object'."},
	},

	// properties named like keywords are names in every dialect
	{name: "keyword names, openai strict", dialect: DialectOpenAIStrict, strict: boolPtr(true), schema: keywordNamesClosed},
	{name: "keyword names, anthropic strict", dialect: DialectAnthropic, strict: boolPtr(true), schema: keywordNamesClosed},
	{name: "keyword names, gemini", dialect: DialectGemini, schema: keywordNames},
	{name: "keyword names, gemini lenient anyOf", dialect: DialectGeminiLenientAnyOf, schema: keywordNames},
	// walle reserves five names whatever the property holds (see kimi below).
	{name: "keyword names, kimi", dialect: DialectKimi, schema: keywordNames, want: []string{
		kmAt + ".properties: property name '$ref' is reserved for JSON Schema keywords",
		kmAt + ".properties: property name 'required' is reserved for JSON Schema keywords",
		kmAt + ".properties: property name 'additionalProperties' is reserved for JSON Schema keywords",
		kmAt + ".properties.properties.properties: property name '$defs' is reserved for JSON Schema keywords",
	}},
	{name: "keyword names, permissive", dialect: DialectPermissive, schema: keywordNames},

	// what is not a schema at all
	{name: "empty schema is absent", dialect: DialectKimi, schema: ""},
	{name: "null schema is absent", dialect: DialectKimi, schema: "null"},
	{name: "invalid JSON", dialect: DialectPermissive, schema: `{"type":`, want: []string{"parameters of function 'f' are not valid JSON: unexpected EOF"}},
	{name: "trailing data", dialect: DialectPermissive, schema: `{} {}`, want: []string{"parameters of function 'f' are not valid JSON: data after the schema"}},
	{name: "unknown dialect", dialect: "bedrock", schema: `{}`, want: []string{`unknown schema dialect "bedrock"`}},
}

func TestCheckSchema(t *testing.T) {
	for _, tc := range schemaCases {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckSchema(tc.dialect, []byte(tc.schema), tc.strict)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %d findings:\n  %s\nwant %d:\n  %s", len(got), strings.Join(got, "\n  "), len(tc.want), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestCheckSchemaKeyOrder checks every case again with each object's keys
// in sorted order, as encoding/json writes a map: the findings must not
// move.
func TestCheckSchemaKeyOrder(t *testing.T) {
	for _, tc := range schemaCases {
		var v any
		if json.Unmarshal([]byte(tc.schema), &v) != nil || v == nil {
			continue
		}
		sorted, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if string(sorted) == tc.schema || strings.Contains(tc.schema, "2.50") {
			continue // already sorted, or a number the round trip would rewrite
		}
		if got, want := CheckSchema(tc.dialect, sorted, tc.strict), CheckSchema(tc.dialect, []byte(tc.schema), tc.strict); !slices.Equal(got, want) {
			t.Errorf("%s: sorted keys give\n  %s\nnot\n  %s", tc.name, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
}

func TestCheckToolSchemaNamesTheTool(t *testing.T) {
	const open = `{"type":"object","properties":{"a":{"type":"string","format":"uri"}},"required":["a"],"additionalProperties":true}`
	for dialect, want := range map[string]string{
		DialectOpenAIStrict:       "Invalid schema for function 'read_file': In context=(), " + msgOpenAIClosed,
		DialectAnthropic:          "tools.3.custom.input_schema: " + msgAnthClosed,
		DialectGemini:             "Invalid JSON payload received. Unknown name \"additionalProperties\" at 'tools[0].function_declarations[3].parameters': Cannot find field.",
		DialectKimi:               "Invalid request: tools[3].function.parameters.properties.a.properties[\"$ ref\"]: references must start with #/$defs/",
		DialectGeminiLenientAnyOf: "Unable to submit request because `read_file` functionDeclaration `parameters.a.b` " + msgGeminiAnyOf,
	} {
		schema := open
		switch dialect {
		case DialectKimi:
			schema = `{"type":"object","properties":{"a":{"type":"object","properties":{"$ ref":{"$ref":"x.json"}}}}}`
		case DialectGeminiLenientAnyOf:
			schema = `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"anyOf":[{"type":"string"}],"nullable":true}}}}}`
		}
		got := CheckToolSchema(dialect, 3, "read_file", []byte(schema), boolPtr(true))
		if len(got) == 0 || got[0] != want {
			t.Errorf("%s: got %q, want first %q", dialect, got, want)
		}
	}
}

var allDialects = []string{DialectOpenAIStrict, DialectAnthropic, DialectGemini, DialectGeminiLenientAnyOf, DialectKimi, DialectPermissive}

type corpusTool struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
	Strict     *bool           `json:"strict"`
}

// TestSchemaCorpus runs every dialect over the sample tools in
// transforms/schema/testdata/schemas, which are shaped like real MCP servers'
// tools, and logs what each would refuse as sent.
func TestSchemaCorpus(t *testing.T) {
	files, err := filepath.Glob("../../transforms/schema/testdata/schemas/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	for _, file := range files {
		base := filepath.Base(file)
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var tools []corpusTool
		if err := json.Unmarshal(raw, &tools); err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		if len(tools) == 0 {
			t.Fatalf("%s: no tools", base)
		}
		refused := map[string][]string{}
		for i, tool := range tools {
			if tool.Type != "function" || tool.Name == "" || len(tool.Parameters) == 0 {
				t.Errorf("%s: tool %d is not a named function with parameters", base, i)
			}
			for _, d := range allDialects {
				found := CheckToolSchema(d, i, tool.Name, tool.Parameters, tool.Strict)
				if len(found) > 0 {
					refused[d] = append(refused[d], tool.Name)
				}
				switch {
				case tool.Name == "keyword_names" && len(found) > 0:
					t.Errorf("%s: %s refuses keyword_names: %q", base, d, found)
				case base == "cycle.json" && d == DialectAnthropic && !containsText(found, msgRecursive):
					t.Errorf("%s: anthropic does not call %s recursive: %q", base, tool.Name, found)
				}
			}
		}
		for _, d := range allDialects {
			t.Logf("%s: %s refuses %d of %d: %s", base, d, len(refused[d]), len(tools), strings.Join(refused[d], ", "))
		}
		switch g := len(refused[DialectGemini]); {
		case base == "cycle.json" && g != len(tools):
			t.Errorf("%s: gemini accepts a cyclic tool: refused only %v", base, refused[DialectGemini])
		case g == 0:
			t.Errorf("%s: gemini refuses none of its tools", base)
		}
	}
}

func containsText(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
