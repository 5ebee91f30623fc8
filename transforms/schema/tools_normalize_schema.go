// Package schema is the tools_normalize_schema transform: it rewrites the
// parameter schemas of function tools into what the upstream's dialect
// accepts (permissive, OpenAI and Anthropic strict, Gemini, Kimi),
// keyword by keyword, inlining references where the dialect has none.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/internal/providers"
)

func init() {
	caddy.RegisterModule(ToolsNormalizeSchema{})
}

// ToolsNormalizeSchema rewrites the parameters schema of every function
// tool, in both protocols and including the functions earlier rules made
// (tools_plan's degraded built-ins), into what the upstream's schema
// dialect accepts. Only schema positions are rewritten: a property named
// "$ref" or "format" is a property, not a keyword. Schemas that need no
// change keep their bytes, and so does everything around them.
//
// Every dialect drops a null or dangling required list (Bailian and GLM
// refuse a null one) and gives every object schema properties:{}.
type ToolsNormalizeSchema struct {
	// Dialect names the upstream's rules: permissive (the default: the
	// fixes every upstream needs and nothing more), openai_strict (strict
	// functions get closed objects, every property required and the
	// optional ones nullable), anthropic (strict functions as OpenAI's,
	// plus only the formats and length and range keywords Anthropic's
	// strict mode takes), gemini (Gemini's OpenAPI subset: references
	// inlined; additionalProperties, $schema, $id, propertyNames and
	// default removed; const and non-string enums made string enums; type
	// lists made nullable; the function's strict flag removed) or kimi
	// (Moonshot's strict subset, strict unless a function says
	// strict:false: an object root, references inlined, $schema and $id
	// removed). docs/providers.md gives the sources.
	Dialect string `json:"dialect,omitempty"`

	// StripKeywords are keywords removed at every schema position, on top
	// of the dialect's.
	StripKeywords []string `json:"strip_keywords,omitempty"`

	// InlineRefs resolves local $ref (#/$defs/…, any pointer into the
	// schema) in place and removes $defs and definitions. A reference that
	// is not local, or a cycle, is a 400 naming the tool. Default: the
	// dialect's.
	InlineRefs *bool `json:"inline_refs,omitempty"`

	// MaxRefDepth bounds how many references may nest while inlining; a
	// deeper chain is a 400. Default: 32.
	MaxRefDepth int `json:"max_ref_depth,omitempty"`

	// EnumToString makes every enum value a string, and the schema's type
	// string with it. Default: the dialect's.
	EnumToString *bool `json:"enum_to_string,omitempty"`

	// TypeArrays says what becomes of a type list such as
	// ["string","null"]: "keep", "nullable" (one type and nullable:true,
	// several as anyOf) or "any_of" (an anyOf of single types). Default:
	// the dialect's.
	TypeArrays string `json:"type_arrays,omitempty"`

	// AnyOfAnnotations says where a union's description, title and
	// nullable go under a dialect that takes nothing beside anyOf
	// (gemini): "branches" (the default: into every branch; Vertex AI
	// refuses any field beside any_of, "When using any_of, it must be
	// the only field set") or "keep" (beside the union, for an endpoint
	// known to take them there).
	AnyOfAnnotations string `json:"anyof_annotations,omitempty"`

	// Unsupported says what becomes of a tool whose schema the dialect
	// cannot express (a map, an untyped value or a composition strict
	// mode refuses, a recursive schema where references must be
	// inlined): "strict_off" (the default: the tool goes without strict
	// mode where the dialect has one, else as "string"), "string" (one
	// string parameter, the arguments as JSON text described by the
	// tool's schema, decoded back for the client) or "reject" (a 400
	// naming the tool and what the dialect cannot take).
	Unsupported string `json:"unsupported,omitempty"`

	// DescribeDropped appends the constraints a dialect takes out (a
	// pattern, a maximum) to the schema's description, so the model still
	// reads them. Default: true.
	DescribeDropped *bool `json:"describe_dropped,omitempty"`

	dialect         *schemaDialect
	all, strictOnly schemaRules
	maxRefDepth     int
}

// schemaDialect is one upstream's rules: what applies to every function,
// and what applies on top to strict ones.
type schemaDialect struct {
	all, strict schemaRules
	// strictDefault: a function without a strict member is strict (Kimi).
	strictDefault bool
	// dropStrict removes the function's strict member (Gemini refuses it).
	dropStrict bool
}

func keywordSet(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// schemaDialects are the presets, from provider-limits §A.2.
var schemaDialects = map[string]schemaDialect{
	"permissive": {},
	"openai_strict": {
		strict: schemaRules{
			closeObjects: true, requireAll: true,
			// Not permitted in strict mode, and only a constraint.
			strip:      keywordSet("minLength", "maxLength", "default", "uniqueItems", "minProperties", "maxProperties", "minContains", "maxContains"),
			refsToDefs: true, refSiblings: true, oneOfToAnyOf: true, enumType: true, untypedStrictOff: true,
		},
	},
	"anthropic": {
		strict: schemaRules{
			closeObjects:   true,
			strip:          keywordSet("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "multipleOf", "maxItems"),
			formats:        keywordSet("date-time", "date", "time", "email", "uri", "uuid", "ipv4", "ipv6"),
			formatsAnyType: true,
			minItemsMax:    1,
			inline:         true,
			oneOfToAnyOf:   true,
		},
	},
	"gemini": {
		all: schemaRules{
			strip:         keywordSet("additionalProperties", "$schema", "$id", "propertyNames", "default"),
			inline:        true,
			enumString:    true,
			typeArrays:    "nullable",
			constEnum:     true,
			formats:       keywordSet("enum", "date-time"),
			anyOfAlone:    true,
			noBoolSchemas: true,
			allow: keywordSet("type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
				"properties", "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern",
				"example", "anyOf", "propertyOrdering", "items", "minimum", "maximum",
				// read by the writer before they go: inlined, or made an enum
				"$ref", "$defs", "definitions", "const"),
			oneOfToAnyOf:    true,
			exclusiveBounds: true,
			anyOfBranches:   true,
			encodeOpaque:    true,
		},
		dropStrict: true,
	},
	"kimi": {
		// Local references are Kimi's to resolve (its validator walle
		// takes them); only network ones are refused.
		all: schemaRules{
			strip:         keywordSet("$schema", "$id"),
			rootObject:    true,
			localRefsOnly: true,
			// walle takes no keyword but description and title beside a
			// type list, a union or a reference.
			typeArrays:    "any_of",
			anyOfAlone:    true,
			refsToDefs:    true,
			defsOnly:      true,
			refSiblings:   true,
			refKeeps:      []string{"description", "title"},
			enumType:      true,
			reservedProps: []string{"$defs", "$ref", "anyOf", "required", "additionalProperties"},
		},
		strictDefault: true,
	},
}

// CaddyModule returns the Caddy module information.
func (ToolsNormalizeSchema) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  transforms.ModuleID("tools_normalize_schema"),
		New: func() caddy.Module { return new(ToolsNormalizeSchema) },
	}
}

// Provision compiles the dialect and the overrides.
func (t *ToolsNormalizeSchema) Provision(caddy.Context) error {
	if t.Dialect == "" {
		t.Dialect = "permissive"
	}
	d, ok := schemaDialects[t.Dialect]
	if !ok {
		return providers.UnknownName("dialect", t.Dialect, schemaDialects)
	}
	t.dialect = &d
	t.all, t.strictOnly = d.all, d.strict
	for _, r := range []*schemaRules{&t.all, &t.strictOnly} {
		r.strip = maps.Clone(r.strip) // the preset's is shared
		if r.strip == nil {
			r.strip = map[string]bool{}
		}
		for _, k := range t.StripKeywords {
			if k == "" {
				return fmt.Errorf("strip_keywords: empty keyword")
			}
			if k == "type" || k == "properties" {
				return fmt.Errorf("strip_keywords: %q is what a schema is made of; it cannot go", k)
			}
			r.strip[k] = true
		}
		if t.InlineRefs != nil {
			r.inline = *t.InlineRefs
		}
		if t.EnumToString != nil {
			r.enumString = *t.EnumToString
		}
		switch t.TypeArrays {
		case "":
		case "keep", "nullable", "any_of":
			r.typeArrays = t.TypeArrays
		default:
			return fmt.Errorf("type_arrays: %q (want keep, nullable or any_of)", t.TypeArrays)
		}
		r.describe = t.DescribeDropped == nil || *t.DescribeDropped
	}
	switch t.AnyOfAnnotations {
	case "", "branches":
	case "keep":
		t.all.anyOfBranches, t.strictOnly.anyOfBranches = false, false
	default:
		return fmt.Errorf("anyof_annotations: %q (want branches or keep)", t.AnyOfAnnotations)
	}
	switch t.Unsupported {
	case "", "strict_off", "string", "reject":
	default:
		return fmt.Errorf("unsupported: %q (want strict_off, string or reject)", t.Unsupported)
	}
	switch {
	case t.MaxRefDepth < 0:
		return fmt.Errorf("max_ref_depth: %d is negative", t.MaxRefDepth)
	case t.MaxRefDepth == 0:
		t.maxRefDepth = 32
	default:
		t.maxRefDepth = t.MaxRefDepth
	}
	return nil
}

// rulesFor merges the rules of every function with a strict one's.
func (t *ToolsNormalizeSchema) rulesFor(strict bool) *schemaRules {
	if !strict {
		return &t.all
	}
	r := t.all
	s := t.strictOnly
	r.strip = maps.Clone(r.strip)
	if r.strip == nil {
		r.strip = map[string]bool{}
	}
	maps.Copy(r.strip, s.strip)
	r.inline = r.inline || s.inline
	r.enumString = r.enumString || s.enumString
	if s.typeArrays != "" && t.TypeArrays == "" {
		r.typeArrays = s.typeArrays
	}
	r.constEnum = r.constEnum || s.constEnum
	r.closeObjects = r.closeObjects || s.closeObjects
	r.requireAll = r.requireAll || s.requireAll
	if s.formats != nil {
		r.formats = s.formats
	}
	r.anyOfAlone = r.anyOfAlone || s.anyOfAlone
	r.rootObject = r.rootObject || s.rootObject
	if s.minItemsMax > 0 {
		r.minItemsMax = s.minItemsMax
	}
	r.formatsAnyType = r.formatsAnyType || s.formatsAnyType
	r.refsToDefs = r.refsToDefs || s.refsToDefs
	r.refSiblings = r.refSiblings || s.refSiblings
	r.enumType = r.enumType || s.enumType
	r.oneOfToAnyOf = r.oneOfToAnyOf || s.oneOfToAnyOf
	r.untypedStrictOff = r.untypedStrictOff || s.untypedStrictOff
	return &r
}

// RewriteRequest implements RequestRewriter.
func (t *ToolsNormalizeSchema) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	w := transforms.WalkTools(x, body)
	if w == nil {
		return body, nil
	}
	doc := w.Doc
	var strictRules *schemaRules
	// One writer and one output arena serve every schema of the request:
	// the edits point into the arena, which only grows.
	sw := schemaWriter{maxDepth: t.maxRefDepth, telling: x.Deciding(), trees: getParser()}
	// What the first pass reads lives until the body is rewritten: the
	// edits point into the arena, never into the trees.
	defer putParser(sw.trees)
	var arena []byte
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind != transforms.NodeDefinition || n.Type != "function" {
			continue
		}
		obj := n.Span()
		if n.InnerStart >= 0 {
			obj = jsonspan.Span{Start: n.InnerStart, End: n.InnerEnd}
		}
		var f [2]jsonspan.Span
		jsonspan.ObjectFields(doc, obj.Start, []string{"parameters", "strict"}, f[:])
		strict := t.dialect.strictDefault
		if f[1].Start >= 0 {
			strict = string(doc[f[1].Start:f[1].End]) == "true"
		}
		if strict && f[0].Start >= 0 && t.strictOnly.closeObjects && !objectRoot(doc, f[0]) {
			// Strict mode wants an object at the root; a union there cannot
			// be closed, so the function goes without strict rather than
			// be refused.
			strict = false
			if f[1].Start >= 0 {
				w.Edit(f[1].Start, f[1].End, []byte("false"), true)
			}
			x.Decide(transforms.ToolID{Namespace: n.Namespace, Name: n.Name}.Display(), "strict_off",
				t.Dialect+": strict mode needs an object schema at the root")
		}
		rules := &t.all
		if strict {
			if strictRules == nil {
				strictRules = t.rulesFor(true)
			}
			rules = strictRules
		}
		dropParams := jsonspan.NoSpan()
		if p := f[0]; p.Start >= 0 && (doc[p.Start] == '{' || doc[p.Start] == 't' || doc[p.Start] == 'f') {
			id := transforms.ToolID{Namespace: n.Namespace, Name: n.Name}
			res := t.params(&sw, &arena, doc, p, n, rules, strict)
			if what := res.unfit(); strict && what != "" && t.dialect.hasStrict() {
				// Strict mode cannot take the schema as it is.
				switch t.Unsupported {
				case "reject":
					return nil, schemaError("schema_unsupported", res.loc, "tool %q: %s cannot keep %s in strict mode", id.Display(), t.Dialect, what)
				case "string":
					res = t.wrapped(&arena, doc, p, rules, strict)
				default:
					strict = false
					if f[1].Start >= 0 {
						w.Edit(f[1].Start, f[1].End, []byte("false"), true)
					}
					x.Decide(id.Display(), "strict_off", t.Dialect+": strict mode cannot keep "+what)
					res = t.params(&sw, &arena, doc, p, n, &t.all, false)
				}
			}
			if what := res.unfit(); what != "" {
				// No strict mode to turn off: the dialect cannot write the
				// schema at all.
				if t.Unsupported == "reject" {
					if res.err != nil {
						res.err.Message = fmt.Sprintf("tool %q: %s", id.Display(), res.err.Message)
						return nil, res.err
					}
					return nil, schemaError("schema_unsupported", res.loc, "tool %q: %s cannot express %s", id.Display(), t.Dialect, what)
				}
				x.Decide(id.Display(), "schema_as_json_text", t.Dialect+" cannot express "+what)
				res = t.wrapped(&arena, doc, p, rules, strict)
			}
			if res.err != nil {
				res.err.Message = fmt.Sprintf("tool %q: %s", id.Display(), res.err.Message)
				return nil, res.err
			}
			switch {
			case res.dropParams:
				dropParams = p
				x.Decide(id.Display(), "drop_parameters", t.Dialect+" takes no object schema without properties; the function takes no arguments")
			case res.changed:
				w.Edit(p.Start, p.End, res.out, true)
				if x.Deciding() {
					x.Decide(id.Display(), "normalize_schema", t.Dialect+": "+summarize(res.did))
				}
			}
			if res.undo != nil {
				rec := t.record(x)
				if rec.undo == nil {
					rec.undo = map[string]*undo{}
				}
				rec.undo[toolKey(n.Namespace, n.Name)] = res.undo
			}
		}
		var gone []jsonspan.Span
		if dropParams.Start >= 0 {
			gone = append(gone, dropParams)
		}
		if t.dialect.dropStrict && f[1].Start >= 0 {
			gone = append(gone, f[1])
		}
		if len(gone) == 2 && gone[1].Start < gone[0].Start {
			gone[0], gone[1] = gone[1], gone[0]
		}
		for _, e := range jsonspan.RemoveMembers(doc, gone) {
			w.Edit(e.Start, e.End, nil, true)
		}
		if t.dialect.dropStrict && f[1].Start >= 0 {
			if x.Deciding() {
				x.Decide(transforms.ToolID{Namespace: n.Namespace, Name: n.Name}.Display(), "drop_strict", t.Dialect+" takes no strict flag")
			}
		}
	}
	return w.Rewrite(), nil
}

// paramsOut is what became of one function's parameters.
type paramsOut struct {
	out        []byte // the new schema, in the arena
	changed    bool
	did        map[string]bool // what was done, when explaining
	undo       *undo           // how to give the arguments back; nil: as they come
	err        *transforms.Error
	openMap    bool   // strict mode closed a map
	prepUnfit  string // what the first pass found the dialect cannot take
	dropParams bool   // no schema is the right one: the function takes no arguments
	loc        string
}

// unfit names what the dialect cannot express of the schema, "" when
// nothing.
func (r *paramsOut) unfit() string {
	switch {
	case r.prepUnfit != "":
		return r.prepUnfit
	case r.openMap:
		return "a map (additionalProperties as a schema)"
	case r.err != nil && r.err.Code == "schema_ref_cycle":
		return "a recursive schema"
	}
	return ""
}

// prepares reports whether the rules have first-pass work or arguments
// to give back, so that the schema is read as a tree.
func (r *schemaRules) prepares(strict bool) bool {
	return r.refsToDefs || r.refSiblings || r.oneOfToAnyOf || r.exclusiveBounds || r.enumType ||
		len(r.reservedProps) > 0 || r.untypedStrictOff || r.anyOfBranches ||
		r.encodeOpaque || r.enumString || r.constEnum || strict && r.requireAll
}

// params rewrites the parameters schema at p of one function under
// rules: the first pass on a tree, then the keyword writer.
func (t *ToolsNormalizeSchema) params(sw *schemaWriter, arena *[]byte, doc []byte, p jsonspan.Span, n *transforms.ToolNode, rules *schemaRules, strict bool) paramsOut {
	var res paramsOut
	src, span := doc, p
	var pr *prep
	var index *spanIndex
	if rules.prepares(strict) {
		var tree *tnode
		if tree, index = sw.trees.read(doc, p, 0, true); tree != nil {
			pr = &prep{r: rules, root: tree}
			if pr.prepare() {
				// Written in the reader's buffer, which the next schema
				// reuses: the writer is done with this one by then.
				sw.trees.out = pr.root.append(sw.trees.out[:0])
				src = sw.trees.out
				span = jsonspan.Span{Start: 0, End: len(src)}
				index = nil
			}
			res.prepUnfit = pr.unfit
			if rules.encodeOpaque && pr.root.kind == '{' && opaque(pr.root) {
				if !mapSchema(pr.root) {
					res.dropParams = true
					return res
				}
				res.prepUnfit = "a map at the root"
			}
		}
	}
	sw.reset(src, rules, span, n)
	if index == nil {
		// The first pass changed it: read the new bytes once more, which
		// costs less than the writer's walk without an index.
		index = sw.trees.index(src, span)
	}
	sw.index = index
	if pr != nil && pr.badRef != "" {
		res.err = schemaError("schema_ref_unresolved", sw.loc(),
			"the schema of %s refers to %q, which is not a schema of the same document", sw.loc(), pr.badRef)
		return res
	}
	start := len(*arena)
	*arena = sw.schema(*arena, span, false)
	res.out = (*arena)[start:len(*arena):len(*arena)]
	res.changed = sw.changed || pr != nil && pr.root.dirty
	res.err, res.openMap, res.loc = sw.err, sw.openMap, sw.loc()
	if sw.telling {
		res.did = maps.Clone(sw.did)
		if res.did == nil {
			res.did = map[string]bool{}
		}
		if pr != nil {
			maps.Copy(res.did, pr.notes)
		}
	}
	if pr != nil && res.err == nil {
		b := undoBuilder{p: pr, strict: strict, memo: map[*tnode]*undo{}}
		res.undo = b.build(pr.root)
	}
	return res
}

// mapSchema reports whether an object schema takes members it does not
// list.
func mapSchema(n *tnode) bool {
	ap := n.get("additionalProperties")
	return ap != nil && (ap.kind == '{' || ap.text() == "true") || n.has("patternProperties") || n.has("propertyNames")
}

// wrappedParam is the one parameter of a function whose schema the
// dialect cannot express.
const wrappedParam = "json"

// wrapped is the fallback for a schema the dialect cannot express: one
// string parameter holding the arguments as JSON text, described with
// the tool's schema, and decoded back on the way to the client.
func (t *ToolsNormalizeSchema) wrapped(arena *[]byte, doc []byte, p jsonspan.Span, rules *schemaRules, strict bool) paramsOut {
	var compact bytes.Buffer
	if err := json.Compact(&compact, doc[p.Start:p.End]); err != nil {
		compact.Write(doc[p.Start:p.End])
	}
	desc := "The arguments, written as one JSON object in text, following this JSON Schema: " + compact.String()
	start := len(*arena)
	out := append(*arena, `{"type":"object","properties":{"`+wrappedParam+`":{"type":"string","description":`...)
	out = jsonspan.AppendStringStr(out, desc)
	out = append(out, `}},"required":["`+wrappedParam+`"]`...)
	if rules.closeObjects && strict {
		out = append(out, `,"additionalProperties":false`...)
	}
	out = append(out, '}')
	*arena = out
	return paramsOut{
		out:     out[start:len(out):len(out)],
		changed: true,
		did:     map[string]bool{"schema_as_json_text": true},
		undo:    &undo{unwrap: wrappedParam},
	}
}

// hasStrict reports whether the dialect has a strict mode to turn off.
func (d *schemaDialect) hasStrict() bool {
	return d.strict.closeObjects
}

// objectRoot reports whether a parameters schema is an object schema at
// its root: typed object, or untyped with properties, or a reference to
// one.
func objectRoot(doc []byte, p jsonspan.Span) bool {
	if doc[p.Start] != '{' {
		return false
	}
	var f [3]jsonspan.Span
	jsonspan.ObjectFields(doc, p.Start, []string{"type", "properties", "$ref"}, f[:])
	if jsonspan.IsString(doc, f[0], "") {
		f[0] = jsonspan.NoSpan() // an empty type names none
	}
	switch {
	case f[0].Start >= 0:
		return jsonspan.IsString(doc, f[0], "object")
	case f[1].Start >= 0:
		return true
	case f[2].Start >= 0:
		// References resolve from the document's root, however many are
		// followed; a chain longer than any schema has is a loop.
		s := &schemaWriter{doc: doc, root: p}
		for hops := 0; hops < 64 && f[2].Start >= 0; hops++ {
			ref, _ := jsonspan.StringValue(doc, f[2])
			v, ok := s.pointer(ref)
			if !ok || v.Start == p.Start || doc[v.Start] != '{' {
				return false
			}
			jsonspan.ObjectFields(doc, v.Start, []string{"type", "properties", "$ref"}, f[:])
			switch {
			case f[0].Start >= 0:
				return jsonspan.IsString(doc, f[0], "object")
			case f[1].Start >= 0:
				return true
			}
		}
	}
	return false
}

func summarize(did map[string]bool) string {
	list := make([]string, 0, len(did))
	for k := range did {
		list = append(list, k)
	}
	sort.Strings(list)
	return strings.Join(list, ", ")
}

// UnmarshalCaddyfile sets up the transform from its rule block. Syntax:
//
//	rule tools_normalize_schema {
//		dialect permissive|openai_strict|anthropic|gemini|kimi
//		strip_keywords <keyword>...
//		inline_refs [true|false]
//		max_ref_depth <n>
//		enum_to_string [true|false]
//		type_arrays keep|nullable|any_of
//		describe_dropped [true|false]
//		unsupported strict_off|string|reject
//		anyof_annotations branches|keep
//	}
//
// Each option appears once; a switch without a value is true.
func (t *ToolsNormalizeSchema) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	b := transforms.NewRuleBlock(d)
	for {
		more, err := b.Next()
		if !more || err != nil {
			return err
		}
		switch b.Opt {
		case "dialect":
			err = b.One(&t.Dialect)
		case "type_arrays":
			err = b.One(&t.TypeArrays)
		case "unsupported":
			err = b.One(&t.Unsupported)
		case "anyof_annotations":
			err = b.One(&t.AnyOfAnnotations)
		case "strip_keywords":
			err = b.List(&t.StripKeywords)
		case "inline_refs":
			err = b.Flag(&t.InlineRefs)
		case "enum_to_string":
			err = b.Flag(&t.EnumToString)
		case "describe_dropped":
			err = b.Flag(&t.DescribeDropped)
		case "max_ref_depth":
			t.MaxRefDepth, err = b.Number()
		default:
			return b.Unknown()
		}
		if err != nil {
			return err
		}
	}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*ToolsNormalizeSchema)(nil)
	_ caddyfile.Unmarshaler       = (*ToolsNormalizeSchema)(nil)
	_ transforms.RequestRewriter  = (*ToolsNormalizeSchema)(nil)
	_ transforms.ResponseRewriter = (*ToolsNormalizeSchema)(nil)
	_ transforms.DepthRefuser     = (*ToolsNormalizeSchema)(nil)
)

// RefuseDepth implements transforms.DepthRefuser: a body nested past the
// gateway's limit inside its tools holds a schema far past the writer's
// own limit, and gets schema_too_deep, as a schema the writer refuses.
func (t *ToolsNormalizeSchema) RefuseDepth(body []byte, at, _ int) *transforms.Error {
	if tools := jsonspan.LastMember(body, "tools"); at < tools.Start || at >= tools.End {
		return nil
	}
	return schemaError("schema_too_deep", "tools", "a tool's schema nests deeper than %d levels", maxSchemaNesting)
}
