package fakeprovider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The schema dialects CheckSchema knows: which JSON Schema an upstream
// accepts as a function's parameters. Every dialect also applies the
// permissive rules, which no upstream waives.
const (
	// DialectOpenAIStrict is OpenAI with "strict": true: every object
	// closed with additionalProperties false, every property required,
	// no anyOf at the root, a type on every schema that is not an anyOf
	// or a $ref, a $ref alone and resolving, none of the keywords
	// Structured Outputs does not support (oneOf, allOf, not, if/then/
	// else, patternProperties, ...). Recursion through "#" and $defs is
	// allowed. Without strict, only the permissive rules.
	DialectOpenAIStrict = "openai_strict"

	// DialectAnthropic is Anthropic with "strict": true: closed objects,
	// local and non-recursive $ref only, a small format set, no numeric
	// or string bounds, minItems 0 or 1 and no maxItems. Without strict,
	// only the permissive rules.
	DialectAnthropic = "anthropic"

	// DialectGemini is Gemini's "parameters", an OpenAPI subset parsed
	// into the Schema proto, which applies whatever the function's strict
	// flag says (a gateway has to remove that flag anyway, elsewhere):
	// only the Schema message's field names, a type everywhere except
	// beside anyOf, an anyOf with no other field beside it, non-empty
	// properties on an OBJECT, string enums on a STRING.
	DialectGemini = "gemini"

	// DialectGeminiLenientAnyOf is DialectGemini read leniently on one
	// point: description and title may stand beside anyOf. Every refusal
	// of those siblings that could be found came from Vertex AI, and none
	// shows the Gemini API (generativelanguage.googleapis.com) accepting
	// them either, so DialectGemini refuses them; this one lets a test
	// ask what passes if an endpoint does take them.
	DialectGeminiLenientAnyOf = "gemini_lenient_anyof"

	// DialectKimi is Moonshot's, where strict is on unless the function
	// says "strict": false, checked as its validator walle does at level
	// strict: an object root, $ref only to "#" or "#/$defs/...", no
	// $schema or $id below the root, a type list with no keyword beside
	// it, no enum without a type, no property named like a keyword
	// walle reserves.
	DialectKimi = "kimi"

	// DialectPermissive is what every upstream refuses: a null required,
	// required naming a property that does not exist, and an object
	// schema without properties.
	DialectPermissive = "permissive"
)

// CheckSchema returns the ways the function parameters schema breaks the
// dialect's rules, each as the provider's error text with the JSON path
// (empty when it is accepted). strict is the function's "strict" flag as
// the request gives it (nil: absent). Where a provider's text names the
// function it is called "f", the first tool of the request; CheckToolSchema
// takes the real name and position.
func CheckSchema(dialect string, schema []byte, strict *bool) []string {
	return CheckToolSchema(dialect, 0, "f", schema, strict)
}

// CheckToolSchema is CheckSchema for the function name, the index-th tool
// of its request, so the texts point where the provider would. An empty or
// null schema is an absent one and passes. The findings come in a fixed
// order whatever the order of the schema's keys.
func CheckToolSchema(dialect string, index int, name string, schema []byte, strict *bool) []string {
	c := &schemaCheck{dialect: dialect, index: index, name: name}
	switch dialect {
	case DialectOpenAIStrict, DialectAnthropic:
		c.strict = strict != nil && *strict
	case DialectKimi:
		c.strict = strict == nil || *strict
	case DialectGemini, DialectGeminiLenientAnyOf, DialectPermissive:
	default:
		return []string{fmt.Sprintf("unknown schema dialect %q", dialect)}
	}
	root, err := decodeSchema(schema)
	if err != nil {
		return []string{"parameters of function '" + name + "' are not valid JSON: " + err.Error()}
	}
	if root == nil {
		return nil
	}
	c.root = root
	if c.dialect == DialectKimi && c.strict {
		if s, ok := root.(map[string]any); !ok || s["type"] != "object" {
			c.report(nil, `the root of parameters must be an object schema ("type": "object")`)
		}
	}
	c.walk(root, nil)
	if c.dialect == DialectAnthropic && c.strict {
		c.recursiveRefs()
	}
	return c.out
}

// decodeSchema keeps numbers as written, so an enum value is quoted back
// exactly; nil means absent.
func decodeSchema(b []byte) (any, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the schema")
	}
	return v, nil
}

// isGemini reports the dialects that parse parameters into Gemini's Schema
// proto and word their findings as Google does.
func (c *schemaCheck) isGemini() bool {
	return c.dialect == DialectGemini || c.dialect == DialectGeminiLenientAnyOf
}

type schemaCheck struct {
	dialect string
	index   int
	name    string
	strict  bool // the dialect's strict rules apply
	root    any
	out     []string
	refs    []refSite // local $refs, for the recursion check
}

// refSite is a $ref and the location of the schema holding it, as JSON
// pointer tokens (strings and array indices).
type refSite struct {
	at     []any
	target string
}

// Keywords whose values are maps from names to schemas, and those whose
// values are schemas or arrays of schemas, in the order they are walked.
var (
	schemaMapKeywords   = []string{"properties", "patternProperties", "$defs", "definitions"}
	schemaValueKeywords = []string{"items", "prefixItems", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "additionalProperties", "contains"}
)

// walk checks node, found at path, and every schema position below it.
// Only keywords are followed: a property's name is data, never a keyword,
// so a property called "$ref" or "type" is checked as the schema it holds.
func (c *schemaCheck) walk(node any, path []any) {
	s, ok := node.(map[string]any)
	if !ok {
		if _, isBool := node.(bool); !isBool || c.isGemini() {
			// Gemini's Schema is a proto message, which no boolean fits.
			c.notSchema(path, node)
		}
		return
	}
	c.permissive(s, path)
	switch c.dialect {
	case DialectOpenAIStrict:
		if c.strict {
			c.openAIStrict(s, path)
		}
	case DialectAnthropic:
		if c.strict {
			c.anthropicStrict(s, path)
		}
	case DialectGemini, DialectGeminiLenientAnyOf:
		c.gemini(s, path)
	case DialectKimi:
		if c.strict {
			c.kimiStrict(s, path)
		}
	}

	for _, kw := range schemaMapKeywords {
		if c.isGemini() && !slices.Contains(geminiFields, kw) {
			continue // refused by name; the parser reads nothing inside
		}
		if m, ok := s[kw].(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				c.walk(m[k], with(path, kw, k))
			}
		}
	}
	for _, kw := range schemaValueKeywords {
		if c.isGemini() && !slices.Contains(geminiFields, kw) {
			continue
		}
		switch v := s[kw].(type) {
		case nil:
		case []any:
			if kw == "not" || kw == "if" || kw == "then" || kw == "else" || kw == "additionalProperties" || kw == "contains" {
				c.notSchema(with(path, kw), v)
				continue
			}
			for i, sub := range v {
				c.walk(sub, with(path, kw, i))
			}
		case map[string]any:
			c.walk(v, with(path, kw))
		case bool:
			// additionalProperties: false is the closing flag, not a
			// schema a dialect should judge.
			if kw != "additionalProperties" {
				c.walk(v, with(path, kw))
			}
		default:
			c.notSchema(with(path, kw), v)
		}
	}
}

// with extends path without sharing its backing array.
func with(path []any, elems ...any) []any {
	return append(slices.Clip(path), elems...)
}

// permissive applies the rules no upstream waives.
func (c *schemaCheck) permissive(s map[string]any, path []any) {
	if req, ok := s["required"]; ok {
		list, isList := req.([]any)
		if !isList {
			c.requiredNotList(path, req)
		}
		props, hasProps := s["properties"].(map[string]any)
		if !hasProps && !typeIncludes(s, "object") {
			// A bare constraint ("anyOf":[{"required":["a"]},…]) names
			// properties of the schema around it: nothing here to hold
			// them against.
			list = nil
		}
		for j, r := range list {
			name, isString := r.(string)
			if _, declared := props[name]; !isString || !declared {
				c.requiredUndeclared(path, j, r)
			}
		}
	}
	if typeIncludes(s, "object") {
		if _, ok := s["properties"]; !ok {
			c.objectWithoutProperties(path)
		}
	}
}

func (c *schemaCheck) openAIStrict(s map[string]any, path []any) {
	if isObjectSchema(s) && s["additionalProperties"] != false {
		c.report(path, "'additionalProperties' is required to be supplied and to be false.")
	}
	if props, ok := s["properties"].(map[string]any); ok {
		required := map[string]bool{}
		if list, ok := s["required"].([]any); ok {
			for _, r := range list {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		for _, k := range slices.Sorted(maps.Keys(props)) {
			if !required[k] {
				c.report(path, "'required' is required to be supplied and to be an array including every key in properties. Missing '"+k+"'.")
			}
		}
	}
	if _, ok := s["anyOf"]; ok && len(path) == 0 {
		c.report(path, "'anyOf' is not permitted at the root: the root must be an object schema.")
	}

	// Every schema names its type unless it is an anyOf or a $ref: the
	// Structured Outputs guide's "Supported schemas" lists the types and
	// anyOf, and an untyped {} (pydantic's Any, zod's unknown) or a
	// description alone is refused in these words (ogx-ai/ogx#4416,
	// apexive/odoo-llm#212: "In context=('properties', 'method_name_filter'),
	// schema must have a 'type' key.").
	// https://platform.openai.com/docs/guides/structured-outputs#supported-schemas
	_, typed := s["type"]
	_, union := s["anyOf"]
	ref, isRef := s["$ref"]
	if !typed && !union && !isRef {
		c.report(path, "schema must have a 'type' key.")
	}

	// A $ref stands alone: "$ref cannot have keywords {'description'}."
	// (pydantic renders Field(description=...) on a nested model as a
	// sibling of its $ref; reported against OpenAI and Azure OpenAI, e.g.
	// openai-python src/openai/lib/_pydantic.py, _ensure_strict_json_schema:
	// "we can't use `$ref`s if there are also other properties defined",
	// so it inlines them). The text has no "In " before "context=".
	if isRef {
		var siblings []string
		for _, k := range slices.Sorted(maps.Keys(s)) {
			if k != "$ref" {
				siblings = append(siblings, "'"+k+"'")
			}
		}
		if len(siblings) > 0 {
			c.out = append(c.out, "Invalid schema for function '"+c.name+"': context="+pythonTuple(path)+", $ref cannot have keywords {"+strings.Join(siblings, ", ")+"}.")
		}
		// Recursion is supported ("Recursive schemas are supported", with
		// both "$ref": "#" and "#/$defs/..." in the guide's examples), so
		// no cycle check; a reference must still point into the document.
		// The wording of this one is ours: no captured refusal quotes it.
		if target, ok := ref.(string); !ok || !strings.HasPrefix(target, "#") || !resolves(c.root, target) {
			c.report(path, "reference "+jsonText(ref)+" does not resolve to a definition in this schema.")
		}
	}

	// Keywords strict mode refuses by name, in its words "'oneOf' is not
	// permitted." The guide's "Supported schemas" supports only anyOf among
	// the compositions and lists as not supported: allOf, not,
	// dependentRequired, dependentSchemas, if, then, else; for objects
	// patternProperties, unevaluatedProperties, propertyNames,
	// minProperties, maxProperties; for arrays unevaluatedItems, contains,
	// minContains, maxContains, uniqueItems. Refusals seen: oneOf
	// (community.openai.com/t/932422: "In context=(), 'oneOf' is not
	// permitted."), allOf, not, if, propertyNames, uniqueItems, minLength
	// ("In context=('properties', 'amount'), 'minLength' is not permitted.")
	// and default (567-labs/instructor#961; "In context=('properties',
	// 'status'), 'default' is not permitted."). maxLength goes with
	// minLength: the guide names neither among the supported string
	// keywords (pattern, format).
	for _, kw := range openAINotPermitted {
		if _, ok := s[kw]; ok {
			c.report(path, "'"+kw+"' is not permitted.")
		}
	}
}

// openAINotPermitted are the keywords OpenAI's strict mode refuses by name,
// in a fixed order (see openAIStrict for the sources).
var openAINotPermitted = []string{
	"oneOf", "allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
	"patternProperties", "unevaluatedProperties", "propertyNames", "minProperties", "maxProperties",
	"unevaluatedItems", "contains", "minContains", "maxContains", "uniqueItems",
	"minLength", "maxLength", "default",
}

// anthropicFormats are the formats the table's sources name for Anthropic's
// strict mode. The table ends its list with "…", so others may pass there;
// keeping to the named ones refuses only what a gateway cannot vouch for.
var anthropicFormats = []string{"date-time", "date", "time", "email", "uri", "uuid", "ipv4", "ipv6"}

// anthropicBounds are the keywords strict mode cannot compile into its
// grammar.
var anthropicBounds = []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern"}

func (c *schemaCheck) anthropicStrict(s map[string]any, path []any) {
	if isObjectSchema(s) && s["additionalProperties"] != false {
		c.report(path, "For 'object' type, 'additionalProperties' must be explicitly set to false")
	}
	if ref, ok := s["$ref"].(string); ok {
		switch {
		case !strings.HasPrefix(ref, "#"):
			c.report(path, "'$ref' '"+ref+"' is not supported: only local references ('#/...') are")
		case !resolves(c.root, ref):
			c.report(path, "'$ref' '"+ref+"' does not resolve within the schema")
		default:
			c.refs = append(c.refs, refSite{at: path, target: ref})
		}
	}
	if f, ok := s["format"].(string); ok && !slices.Contains(anthropicFormats, f) {
		c.report(path, "format '"+f+"' is not supported in strict mode; supported formats: "+strings.Join(anthropicFormats, ", "))
	}
	for _, kw := range anthropicBounds {
		if _, ok := s[kw]; ok {
			c.report(path, "'"+kw+"' is not supported in strict mode")
		}
	}
	if v, ok := s["minItems"]; ok {
		n, _ := v.(json.Number) // not a number: "" fails to parse below
		if f, err := n.Float64(); err != nil || (f != 0 && f != 1) {
			c.report(path, "'minItems' must be 0 or 1 in strict mode, got "+jsonText(v))
		}
	}
	// No maxItems at all: the structured outputs page's "JSON Schema
	// limitations" supports "minItems of 0 or 1" and no other array
	// constraint, and the API answers "For 'array' type, property
	// 'maxItems' is not supported" (maximhq/bifrost#4691, "tools.1.custom:
	// For 'array' type, property 'maxItems' is not supported").
	// https://platform.claude.com/docs/en/build-with-claude/structured-outputs#json-schema-limitations
	if _, ok := s["maxItems"]; ok {
		c.report(path, "For '"+typeName(s, "array")+"' type, property 'maxItems' is not supported")
	}
}

// typeName is the schema's type as a provider names it in a finding: the
// type, the first non-null one of a list, or fallback.
func typeName(s map[string]any, fallback string) string {
	switch v := s["type"].(type) {
	case string:
		return v
	case []any:
		for _, t := range v {
			if name, ok := t.(string); ok && name != "null" {
				return name
			}
		}
	}
	return fallback
}

// recursiveRefs reports each local $ref whose expansion never ends: its
// target holds, directly or through more references, a reference back into
// a schema being expanded.
func (c *schemaCheck) recursiveRefs() {
	infinite := map[string]bool{} // by target, once known
	onPath := map[string]bool{}
	var expand func(target string) bool
	expand = func(target string) bool {
		if onPath[target] {
			return true
		}
		if v, ok := infinite[target]; ok {
			return v
		}
		onPath[target] = true
		inside := pointerTokens(target)
		result := false
		for _, r := range c.refs {
			if hasPrefix(r.at, inside) && expand(r.target) {
				result = true
				break
			}
		}
		delete(onPath, target)
		infinite[target] = result
		return result
	}
	for _, r := range c.refs {
		if expand(r.target) {
			c.report(r.at, "'$ref' '"+r.target+"' is recursive; strict mode does not support recursive schemas")
		}
	}
}

// pointerTokens splits a local reference into JSON pointer tokens.
func pointerTokens(ref string) []string {
	frag := strings.TrimPrefix(ref, "#")
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	if frag == "" {
		return nil
	}
	if !strings.HasPrefix(frag, "/") {
		// A named anchor, which these checks do not resolve.
		return []string{"\x00" + frag}
	}
	toks := strings.Split(frag[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

func resolves(root any, ref string) bool {
	node := root
	for _, tok := range pointerTokens(ref) {
		switch v := node.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return false
			}
			node = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return false
			}
			node = v[i]
		default:
			return false
		}
	}
	return true
}

// hasPrefix reports whether the location at lies inside the pointer toks.
func hasPrefix(at []any, toks []string) bool {
	if len(toks) > len(at) {
		return false
	}
	for i, t := range toks {
		if fmt.Sprint(at[i]) != t {
			return false
		}
	}
	return true
}

// geminiFields are the JSON names of the fields of the Gemini API's Schema
// message, the type "parameters" is parsed into; any other key is refused
// by its JSON parser as an unknown name. The list is the reference's
// (https://ai.google.dev/api/caching#Schema) and the client library's
// (protos.google.ai.generativelanguage.v1beta.ISchema). default is one:
// googleapis google/ai/generativelanguage/v1beta/content.proto gives it
// field 25, "included here and ignored so that developers who send schemas
// with a `default` field don't get unknown-field errors"; example is one
// too. Vertex AI's Schema has more (additionalProperties, ref, defs), which
// the Gemini API does not take; these dialects model the Gemini API.
var geminiFields = []string{
	"type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
	"properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
	"pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum",
}

// geminiLenientAnyOfSiblings may stand next to anyOf under
// DialectGeminiLenientAnyOf; DialectGemini takes none.
var geminiLenientAnyOfSiblings = []string{"description", "title"}

func (c *schemaCheck) gemini(s map[string]any, path []any) {
	at := c.geminiPath(path)
	// Any key that is no Schema field, by name: BFCL's "optional": true,
	// oneOf, $ref, additionalProperties, exclusiveMinimum, const ... The
	// text is the proto JSON parser's (CLIProxyAPI#97, jan#5927:
	// `Unknown name "$schema" at '...parameters': Cannot find field.`).
	for _, k := range slices.Sorted(maps.Keys(s)) {
		if !slices.Contains(geminiFields, k) {
			c.out = append(c.out, `Invalid JSON payload received. Unknown name "`+k+`" at '`+at+`': Cannot find field.`)
		}
	}
	if _, ok := s["type"].([]any); ok {
		c.out = append(c.out, `Invalid JSON payload received. Unknown name "type" at '`+at+`': Proto field is not repeating, cannot start list.`)
	}
	if list, ok := s["enum"].([]any); ok {
		for k, v := range list {
			if _, isString := v.(string); !isString {
				c.out = append(c.out, fmt.Sprintf("Invalid value at '%s.enum[%d]' (TYPE_STRING), %s", at, k, jsonText(v)))
			}
		}
	}
	_, union := s["anyOf"]
	t, typed := s["type"]
	// Type is the one required field of Schema ("Required. Data type."),
	// except on an anyOf, which carries its types in its members and may
	// stand alone. "* GenerateContentRequest.tools[0]
	// .function_declarations[3].parameters.properties[commands].type: must
	// be specified" (a LangChain ShellTool's untyped commands).
	if !typed && !union {
		c.report(with(path, "type"), "must be specified")
	}
	// enum belongs to STRING ("Possible values of the element of
	// Type.STRING with enum format", content.proto); on any other type the
	// API answers "properties[max_depth].enum: only allowed for STRING
	// type" (ClickUp MCP's integer enum, reported through several gateways).
	if name, ok := t.(string); ok && s["enum"] != nil && !strings.EqualFold(name, "string") {
		c.report(with(path, "enum"), "only allowed for STRING type")
	}
	if f, ok := s["format"].(string); ok && s["type"] == "string" && f != "enum" && f != "date-time" {
		c.report(with(path, "format"), "only 'enum' and 'date-time' are supported for STRING type")
	}
	// An OBJECT needs at least one property: missing properties is the
	// permissive finding; an empty map is refused in the same words.
	if props, ok := s["properties"].(map[string]any); ok && len(props) == 0 && typeIncludes(s, "object") {
		c.objectWithoutProperties(path)
	}
	// anyOf must be the only field of its schema. Every capture of this
	// refusal names description, title, type, items, format or default
	// beside anyOf, and every one is Vertex AI's: "Unable to submit request
	// because `search_jobs` functionDeclaration `parameters.employment_types`
	// schema specified other fields alongside any_of. When using any_of, it
	// must be the only field set." (BerriAI/litellm#11164, whose fix keeps
	// only anyOf and moves title and description into the members;
	// lambda-alpha-labs/Graphenium#37; patlux/pi-commandcode-provider#103;
	// google/adk-python#3281). None shows the Gemini API taking a sibling
	// either, so DialectGemini refuses them all and
	// DialectGeminiLenientAnyOf lets description and title through.
	if union {
		var extra []string
		for _, k := range slices.Sorted(maps.Keys(s)) {
			lenient := c.dialect == DialectGeminiLenientAnyOf && slices.Contains(geminiLenientAnyOfSiblings, k)
			if k != "anyOf" && !lenient {
				extra = append(extra, k)
			}
		}
		if len(extra) > 0 {
			c.out = append(c.out, "Unable to submit request because `"+c.name+"` functionDeclaration `"+declarationPath(path)+
				"` schema specified other fields alongside any_of. When using any_of, it must be the only field set.")
		}
	}
}

// declarationPath writes path as Vertex AI's function declaration checks
// do: "parameters.max_proposals" for a property, keywords other than
// properties kept (items, any_of[0]).
func declarationPath(path []any) string {
	var b strings.Builder
	b.WriteString("parameters")
	isName := names(path)
	for i, e := range path {
		switch e := e.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", e)
		case string:
			switch {
			case isName[i]:
				b.WriteString("." + e)
			case e == "properties":
			case e == "anyOf":
				b.WriteString(".any_of")
			default:
				b.WriteString("." + e)
			}
		}
	}
	return b.String()
}

// walleCommon are the keywords walle allows anywhere, beside $ref, anyOf
// or a type list (CommonKeywords in MoonshotAI/walle model.go).
var walleCommon = []string{"description", "title"}

// walleRootOnly may stand at the root beside them (TopLevelOnlyKeywords).
var walleRootOnly = []string{"$defs", "$id"}

// walleReservedNames are property names walle refuses whatever they hold
// (InvalidPropertyNames in model.go, checked by ValidateProperties).
var walleReservedNames = []string{"$defs", "$ref", "anyOf", "required", "additionalProperties"}

// kimiStrict applies Moonshot's validator, walle (MoonshotAI/walle,
// validator.go and keyword_validators.go, level strict), in its words. The
// MFJS spec it enforces: https://github.com/MoonshotAI/walle/blob/main/docs/mfjs-spec.md
func (c *schemaCheck) kimiStrict(s map[string]any, path []any) {
	root := len(path) == 0
	allowedBeside := func(k string) bool {
		return slices.Contains(walleCommon, k) || root && slices.Contains(walleRootOnly, k)
	}
	if ref, ok := s["$ref"]; ok {
		// ValidateRef: "#" or "#/$defs/<name>", nothing else (not
		// "#/definitions/...", not zod's "#/properties/..."), a $defs at the
		// root, and the target there (PostValidateRefs).
		target, _ := ref.(string)
		rootMap, _ := c.root.(map[string]any)
		_, hasDefs := rootMap["$defs"]
		switch {
		case target == "#":
		case !strings.HasPrefix(target, "#/$defs/"):
			c.report(path, "references must start with #/$defs/")
		case !hasDefs:
			c.report(path, "$defs not found for reference: "+target)
		case !resolves(c.root, target):
			c.report(path, "invalid $ref path: "+target)
		}
		// TraverseSchema and ValidateRef: nothing beside a $ref but a
		// description or a title.
		for _, k := range slices.Sorted(maps.Keys(s)) {
			switch {
			case k == "$ref" || allowedBeside(k):
			case k == "type":
				c.report(path, "when using $ref, type should be defined in the referenced schema instead of the parent schema")
			default:
				c.report(path, "keyword '"+k+"' is not allowed at the same level as $ref")
			}
		}
	}
	if _, ok := s["anyOf"]; ok {
		for _, k := range slices.Sorted(maps.Keys(s)) {
			switch {
			case k == "anyOf" || k == "$ref" || allowedBeside(k):
			case k == "type":
				c.report(path, "when using anyOf, type should be defined in anyOf items instead of the parent schema")
			default:
				c.report(path, "keyword '"+k+"' is not allowed at the same level as anyOf")
			}
		}
	}
	// validateTypeAndKeywords: a type list takes nothing beside it but a
	// description or a title (and $defs, $id at the root), even an empty
	// properties; only a two-type list with an enum may carry the enum
	// (ValidateEnum then wants null as the other type), and then no object
	// or array in it.
	if types, ok := s["type"].([]any); ok && len(types) > 1 {
		_, hasEnum := s["enum"]
		switch {
		case len(types) == 2 && hasEnum && (slices.Contains(types, any("object")) || slices.Contains(types, any("array"))):
			c.report(path, "object and array cannot be used in combination with multiple types")
		case len(types) == 2 && hasEnum:
		default:
			for _, k := range slices.Sorted(maps.Keys(s)) {
				if k != "type" && !allowedBeside(k) {
					c.report(path, "keyword "+k+" is not allowed in combination with multiple types")
				}
			}
		}
	}
	// ValidateEnum: an enum needs a type to check its values against
	// (the MFJS spec's own case study writes {"enum": [...]} alone).
	if _, ok := s["enum"]; ok {
		if _, typed := s["type"]; !typed {
			c.report(path, "type is not defined")
		}
	}
	// ValidateProperties: names walle keeps for keywords.
	if props, ok := s["properties"].(map[string]any); ok {
		for _, name := range walleReservedNames {
			if _, ok := props[name]; ok {
				c.report(with(path, "properties"), "property name '"+name+"' is reserved for JSON Schema keywords")
			}
		}
	}
	// $schema is no keyword walle supports ("unsupported keywords").
	if _, ok := s["$schema"]; ok {
		c.report(path, "'$schema' is not supported")
	}
	// $id and $defs only at the root: "keyword $id must be at root level".
	if !root {
		for _, kw := range walleRootOnly {
			if _, ok := s[kw]; ok {
				c.report(path, "keyword "+kw+" must be at root level")
			}
		}
	}
}

// The permissive findings, worded per dialect.

func (c *schemaCheck) requiredNotList(path []any, v any) {
	if c.isGemini() {
		c.report(with(path, "required"), "must be a list of property names, got "+jsonText(v))
		return
	}
	c.report(path, "'required' must be an array of property names, got "+jsonText(v)+".")
}

func (c *schemaCheck) requiredUndeclared(path []any, j int, v any) {
	if c.isGemini() {
		c.report(with(path, "required", j), "property is not defined")
		return
	}
	name := jsonText(v)
	if s, ok := v.(string); ok {
		name = "'" + s + "'"
	}
	c.report(path, "'required' lists "+name+", which is not a key of 'properties'.")
}

func (c *schemaCheck) objectWithoutProperties(path []any) {
	if c.isGemini() {
		c.report(with(path, "properties"), "should be non-empty for OBJECT type")
		return
	}
	c.report(path, "'properties' is required to be supplied for a schema of type 'object'.")
}

func (c *schemaCheck) notSchema(path []any, v any) {
	if c.isGemini() {
		c.out = append(c.out, fmt.Sprintf("Invalid value at '%s' (type.googleapis.com/google.ai.generativelanguage.v1beta.Schema), %s", c.geminiPath(path), jsonText(v)))
		return
	}
	c.report(path, jsonText(v)+" is not a schema: expected an object or a boolean.")
}

// report words one finding at path the way the dialect's provider does.
func (c *schemaCheck) report(path []any, text string) {
	var msg string
	switch c.dialect {
	case DialectAnthropic:
		msg = fmt.Sprintf("tools.%d.custom.input_schema%s: %s", c.index, dottedPath(path, false), text)
	case DialectGemini:
		msg = "* GenerateContentRequest." + c.geminiPath(path) + ": " + text
	case DialectKimi:
		msg = fmt.Sprintf("Invalid request: tools[%d].function.parameters%s: %s", c.index, dottedPath(path, true), text)
	default:
		msg = "Invalid schema for function '" + c.name + "': In context=" + pythonTuple(path) + ", " + text
	}
	c.out = append(c.out, msg)
}

// geminiPath writes path as Gemini's validator does: map entries by name in
// brackets, proto field names in snake case (any_of). Gemini's JSON parser
// indexes map entries by position instead ("properties[1].value"); a name
// says the same without depending on key order.
func (c *schemaCheck) geminiPath(path []any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tools[0].function_declarations[%d].parameters", c.index)
	isName := names(path)
	for i, e := range path {
		switch e := e.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", e)
		case string:
			if isName[i] {
				b.WriteString("[" + e + "]")
				continue
			}
			if e == "anyOf" {
				e = "any_of"
			}
			b.WriteString("." + e)
		}
	}
	return b.String()
}

// dottedPath writes path with dots, and array indices in brackets when
// brackets is set. A name that is not a plain identifier is quoted.
func dottedPath(path []any, brackets bool) string {
	var b strings.Builder
	isName := names(path)
	for i, e := range path {
		switch e := e.(type) {
		case int:
			if brackets {
				fmt.Fprintf(&b, "[%d]", e)
			} else {
				fmt.Fprintf(&b, ".%d", e)
			}
		case string:
			if isName[i] && !isIdentifier(e) {
				b.WriteString("[" + strconv.Quote(e) + "]")
				continue
			}
			b.WriteString("." + e)
		}
	}
	return b.String()
}

// names marks the elements of path that are names (of properties or
// definitions) rather than keywords. A property may be called
// "properties" itself, so this has to be read from the root: an element is
// a name only after a keyword, never after another name.
func names(path []any) []bool {
	out := make([]bool, len(path))
	for i := 1; i < len(path); i++ {
		kw, ok := path[i-1].(string)
		out[i] = ok && !out[i-1] && slices.Contains(schemaMapKeywords, kw)
	}
	return out
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// pythonTuple writes path as OpenAI's validator shows a context, a Python
// tuple: ('properties', 'x'), ('items',), ().
func pythonTuple(path []any) string {
	parts := make([]string, len(path))
	for i, e := range path {
		switch e := e.(type) {
		case int:
			parts[i] = strconv.Itoa(e)
		case string:
			quote := "'"
			if strings.Contains(e, "'") && !strings.Contains(e, `"`) {
				quote = `"`
			}
			r := strings.NewReplacer(`\`, `\\`, quote, `\`+quote, "\n", `\n`)
			parts[i] = quote + r.Replace(e) + quote
		}
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// typeIncludes reports whether the schema's type is t, or a list holding t.
func typeIncludes(s map[string]any, t string) bool {
	switch v := s["type"].(type) {
	case string:
		return v == t
	case []any:
		return slices.Contains(v, any(t))
	}
	return false
}

// isObjectSchema reports a schema that describes objects: typed so, or
// untyped with properties.
func isObjectSchema(s map[string]any) bool {
	if _, typed := s["type"]; !typed {
		_, ok := s["properties"]
		return ok
	}
	return typeIncludes(s, "object")
}
