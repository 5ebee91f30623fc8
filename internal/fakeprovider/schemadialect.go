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
	// no anyOf at the root. Without strict, only the permissive rules.
	DialectOpenAIStrict = "openai_strict"

	// DialectAnthropic is Anthropic with "strict": true: closed objects,
	// local and non-recursive $ref only, a small format set, no numeric
	// or string bounds, minItems 0 or 1. Without strict, only the
	// permissive rules.
	DialectAnthropic = "anthropic"

	// DialectGemini is Gemini's "parameters", an OpenAPI subset, which
	// applies whatever the function's strict flag says (a gateway has to
	// remove that flag anyway, elsewhere).
	DialectGemini = "gemini"

	// DialectKimi is Moonshot's, where strict is on unless the function
	// says "strict": false: an object root, local $ref only, no $schema
	// or $id.
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
	case DialectGemini, DialectPermissive:
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
		if _, isBool := node.(bool); !isBool || c.dialect == DialectGemini {
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
	case DialectGemini:
		c.gemini(s, path)
	case DialectKimi:
		if c.strict {
			c.kimiStrict(s, path)
		}
	}

	for _, kw := range schemaMapKeywords {
		if m, ok := s[kw].(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				c.walk(m[k], with(path, kw, k))
			}
		}
	}
	for _, kw := range schemaValueKeywords {
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

// geminiUnknown are JSON Schema keywords Gemini's Schema message has no
// field for, so its JSON parser refuses them by name. default is in some
// gateways' allow-lists and refused in a report; it is refused here.
var geminiUnknown = []string{"additionalProperties", "$ref", "$defs", "definitions", "$schema", "$id", "const", "propertyNames", "default"}

// geminiAnyOfSiblings may stand next to anyOf.
var geminiAnyOfSiblings = []string{"anyOf", "description", "title", "nullable"}

func (c *schemaCheck) gemini(s map[string]any, path []any) {
	at := c.geminiPath(path)
	for _, kw := range geminiUnknown {
		if _, ok := s[kw]; ok {
			c.out = append(c.out, `Invalid JSON payload received. Unknown name "`+kw+`" at '`+at+`': Cannot find field.`)
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
	if f, ok := s["format"].(string); ok && s["type"] == "string" && f != "enum" && f != "date-time" {
		c.report(with(path, "format"), "only 'enum' and 'date-time' are supported for STRING type")
	}
	if _, ok := s["anyOf"]; ok {
		var extra []string
		for _, k := range slices.Sorted(maps.Keys(s)) {
			if !slices.Contains(geminiAnyOfSiblings, k) {
				extra = append(extra, k)
			}
		}
		if len(extra) > 0 {
			c.report(path, "any_of must be the only field besides description, title and nullable, found "+strings.Join(extra, ", "))
		}
	}
}

func (c *schemaCheck) kimiStrict(s map[string]any, path []any) {
	if ref, ok := s["$ref"].(string); ok && !strings.HasPrefix(ref, "#") {
		c.report(path, "'$ref' '"+ref+"' is not supported: only local references ('#/...') are")
	}
	for _, kw := range []string{"$schema", "$id"} {
		if _, ok := s[kw]; ok {
			c.report(path, "'"+kw+"' is not supported")
		}
	}
}

// The permissive findings, worded per dialect.

func (c *schemaCheck) requiredNotList(path []any, v any) {
	if c.dialect == DialectGemini {
		c.report(with(path, "required"), "must be a list of property names, got "+jsonText(v))
		return
	}
	c.report(path, "'required' must be an array of property names, got "+jsonText(v)+".")
}

func (c *schemaCheck) requiredUndeclared(path []any, j int, v any) {
	if c.dialect == DialectGemini {
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
	if c.dialect == DialectGemini {
		c.report(with(path, "properties"), "should be non-empty for OBJECT type")
		return
	}
	c.report(path, "'properties' is required to be supplied for a schema of type 'object'.")
}

func (c *schemaCheck) notSchema(path []any, v any) {
	if c.dialect == DialectGemini {
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
