package schema

import (
	"bytes"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// schemaRules is what a rewrite of one function's parameters does; a
// dialect gives one set for every tool and one more for strict tools.
type schemaRules struct {
	strip        map[string]bool // keywords removed at schema positions
	inline       bool            // local $refs resolved in place
	enumString   bool            // non-string enum values become strings
	typeArrays   string          // keep, nullable or any_of
	constEnum    bool            // const becomes a one-value enum
	closeObjects bool            // additionalProperties false on every object
	requireAll   bool            // every property required, the optional ones made nullable
	formats      map[string]bool // the string formats kept; nil keeps all
	// formatsAnyType: formats holds every format the dialect takes, on
	// any type.
	formatsAnyType bool
	anyOfAlone     bool // anyOf takes no siblings but description, title, nullable
	rootObject     bool // the root is an object schema
	describe       bool // constraints taken out are told in the description
	minItemsMax    int  // minItems above it is taken out; 0 keeps all
	noBoolSchemas  bool // true and false as schemas become {}
	localRefsOnly  bool // a reference outside the document is a 400
	// allow, when set, is every keyword the dialect has a field for:
	// the others go (Gemini's Schema message refuses unknown names).
	allow map[string]bool

	// The first pass's (prepare.go).
	refsToDefs       bool     // references not into $defs get a $defs entry
	refSiblings      bool     // keywords beside $ref: target inlined, or dropped when recursive
	refKeeps         []string // what may stay beside $ref after all (Kimi: annotations)
	defsOnly         bool     // references must point into $defs, not definitions
	oneOfToAnyOf     bool     // oneOf becomes anyOf
	exclusiveBounds  bool     // exclusive bounds become inclusive ones
	enumType         bool     // an enum without a type gets its values' type, and keywords of one type theirs
	reservedProps    []string // property names the dialect reserves, renamed
	untypedStrictOff bool     // what strict mode cannot take turns strict off
	anyOfBranches    bool     // a union's description and title go into its branches
	encodeOpaque     bool     // maps and untyped values travel as JSON text
}

// constraintKeywords are the keywords whose loss changes what a value may
// be; the model is told of them in the description when they go.
var constraintKeywords = map[string]bool{
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"multipleOf": true, "minLength": true, "maxLength": true, "pattern": true, "format": true,
	"minItems": true, "maxItems": true, "uniqueItems": true, "minProperties": true,
	"maxProperties": true, "const": true, "default": true,
}

// schemaWriter rewrites one function's parameters schema.
type schemaWriter struct {
	doc      []byte
	r        *schemaRules
	root     jsonspan.Span
	maxDepth int                              // nested $ref inlining
	maxOut   int                              // the most bytes this schema may grow to
	outStart int                              // where this schema's output begins in the arena
	resolved map[string]jsonspan.Span         // pointers already resolved
	indexed  map[int]map[string]jsonspan.Span // objects a pointer crossed, by start
	elements map[int][]jsonspan.Span          // arrays a pointer crossed, by start
	inlined  int                              // the bytes of every target inlined, charged like output
	node     *transforms.ToolNode             // the function whose parameters these are, for messages
	index    *spanIndex                       // the schema's objects and arrays, read once; nil: read as walked
	trees    *treeParser                      // the first pass's reader, its slabs shared by the request's schemas
	refs     []string                         // the $refs being inlined, innermost last
	depth    int                              // nesting of schema objects
	changed  bool
	openMap  bool // a closed object was a map
	// nullableOut: the object being written has its nullable member.
	nullableOut bool
	did         map[string]bool // what was done, for the decision, when telling
	telling     bool
	// stack holds the members of the schema objects being written, the
	// innermost last: one slice for the whole rewrite rather than one per
	// object.
	stack []member
	types []string // typeList's, reused
	names []string // property and required names of the objects being written
	keep  []string // required's, reused
	err   *transforms.Error
}

// maxSchemaNesting bounds how deep schemas may nest: far beyond any real
// tool, and short of what would make the rewrite's recursion a risk.
const maxSchemaNesting = 200

func schemaError(code, param, format string, a ...any) *transforms.Error {
	e := transforms.BadRequest(code, param, format, a...)
	e.Status = http.StatusBadRequest
	return e
}

// loc names the schema being written for messages, e.g.
// "tools[3].parameters"; only an error needs it.
func (s *schemaWriter) loc() string {
	if s.node == nil {
		return "parameters"
	}
	if s.node.InnerStart >= 0 {
		return s.node.Where() + ".function.parameters"
	}
	return s.node.Where() + ".parameters"
}

// reset readies the writer for the next function's schema, keeping its
// buffers.
func (s *schemaWriter) reset(doc []byte, r *schemaRules, root jsonspan.Span, node *transforms.ToolNode) {
	s.doc, s.r, s.root, s.node = doc, r, root, node
	s.index = nil
	s.maxOut = max(1<<20, 8*(root.End-root.Start))
	s.outStart = -1
	clear(s.resolved)
	clear(s.indexed)
	clear(s.elements)
	s.refs, s.stack = s.refs[:0], s.stack[:0]
	s.depth, s.changed, s.err, s.openMap, s.inlined = 0, false, nil, false, 0
	if s.did != nil {
		clear(s.did)
	}
}

func (s *schemaWriter) note(what string) {
	s.changed = true
	if !s.telling {
		return
	}
	if s.did == nil {
		s.did = map[string]bool{}
	}
	s.did[what] = true
}

// members collects an object's members with their keys unescaped.
type member struct {
	key string
	m   jsonspan.Member
}

// members collects an object's members on the stack; the caller drops
// them with s.stack = s.stack[:base] when done.
func (s *schemaWriter) members(v jsonspan.Span) []member {
	base := len(s.stack)
	s.eachMember(v.Start, func(m jsonspan.Member) bool {
		s.stack = append(s.stack, member{jsonspan.KeyName(s.doc, m.Key), m})
		return true
	})
	return s.stack[base:len(s.stack):len(s.stack)]
}

func find(ms []member, key string) int {
	for i := range ms {
		if ms[i].key == key {
			return i
		}
	}
	return -1
}

// schema writes the schema at v, which sits at a schema position; nullable
// asks for null to be allowed too (an optional property of a closed
// object).
func (s *schemaWriter) schema(out []byte, v jsonspan.Span, nullable bool) []byte {
	if s.err != nil {
		return out
	}
	if s.outStart < 0 {
		s.outStart = len(out)
	}
	if s.overBudget(out) {
		return out
	}
	// A schema nothing changed keeps its bytes, whitespace and all, even
	// inside one that changed around it.
	start, before := len(out), s.changed
	s.changed = false
	out = s.rewrite(out, v, nullable)
	if !s.changed {
		out = append(out[:start], s.doc[v.Start:v.End]...)
	}
	s.changed = s.changed || before
	return out
}

// overBudget reports, and makes the error, when the schema has outgrown
// its budget. What was written so far counts once, however deep: only
// inlining can make a schema outgrow its input this much (or a key
// repeated n times, each repeat writing n names). Every inlined target
// counts its size too: inlining reads it all even where the dialect drops
// most of it, and n references to one target must not read it n times
// for free.
func (s *schemaWriter) overBudget(out []byte) bool {
	if len(out)-s.outStart <= s.maxOut && s.inlined <= s.maxOut {
		return false
	}
	if s.err == nil {
		s.err = schemaError("schema_too_large", s.loc(), "the schema of %s grows too large when its references are inlined", s.loc())
	}
	return true
}

func (s *schemaWriter) rewrite(out []byte, v jsonspan.Span, nullable bool) []byte {
	doc := s.doc
	if doc[v.Start] != '{' && s.r.noBoolSchemas {
		// A dialect whose schemas are messages, not JSON Schema: true is
		// the empty schema, and false (nothing is valid) has no
		// spelling; the empty schema at least lets the call through.
		s.note("boolean_schema")
		if nullable {
			return append(out, `{"nullable":true}`...)
		}
		return append(out, "{}"...)
	}
	if doc[v.Start] != '{' {
		if nullable {
			// true or false as a schema: true already takes null.
			s.note("nullable")
			return append(append(append(out, `{"anyOf":[`...), doc[v.Start:v.End]...), `,{"type":"null"}]}`...)
		}
		return append(out, doc[v.Start:v.End]...)
	}
	s.depth++
	defer func() { s.depth-- }()
	if s.depth > maxSchemaNesting {
		s.err = schemaError("schema_too_deep", s.loc(), "the schema of %s nests deeper than %d levels", s.loc(), maxSchemaNesting)
		return out
	}
	base := len(s.stack)
	defer func() { s.stack = s.stack[:base] }()
	ms := s.members(v)
	pushed := 0
	defer func() { s.refs = s.refs[:len(s.refs)-pushed] }()
	if i := find(ms, "$ref"); i >= 0 && !s.r.inline && s.r.localRefsOnly {
		if ref, _ := jsonspan.StringValue(doc, ms[i].m.Value); ref != "#" && !strings.HasPrefix(ref, "#/") {
			s.err = schemaError("schema_ref_unresolved", s.loc(),
				"the schema of %s refers to %q, which is not in the same document; the upstream takes only local references", s.loc(), ref)
			return out
		}
	}
	for s.r.inline || s.r.requireAll {
		i := find(ms, "$ref")
		if i < 0 {
			break
		}
		ref, _ := jsonspan.StringValue(doc, ms[i].m.Value)
		if !s.r.inline && !strings.HasPrefix(ref, "#/properties/") {
			break
		}
		// (Where every property is made required, the optional ones
		// nullable, a reference to a property (zod's "#/properties/a")
		// is inlined: it must keep its own nullability, not take the
		// nullable form its target gets.)
		if slices.Contains(s.refs, ref) {
			s.err = schemaError("schema_ref_cycle", s.loc(),
				"the schema of %s refers to itself through %q (%s): the upstream needs references inlined, and a cycle cannot be", s.loc(), ref, strings.Join(append(s.refs, ref), " -> "))
			return out
		}
		if len(s.refs) >= s.maxDepth {
			s.err = schemaError("schema_ref_depth", s.loc(),
				"the schema of %s nests $ref more than %d deep (%s)", s.loc(), s.maxDepth, strings.Join(append(s.refs, ref), " -> "))
			return out
		}
		target, ok := s.pointer(ref)
		if !ok {
			s.err = schemaError("schema_ref_unresolved", s.loc(),
				"the schema of %s refers to %q, which is not a schema of the same document; the upstream needs references inlined", s.loc(), ref)
			return out
		}
		s.refs = append(s.refs, ref)
		pushed++
		s.note("inline_refs")
		if s.inlined += target.End - target.Start; s.overBudget(out) {
			return out
		}
		// The members beside $ref win over the target's.
		// References are rare: their merges get their own slice.
		merged := make([]member, 0, len(ms)+8)
		merged = append(merged, ms[:i]...)
		merged = append(merged, ms[i+1:]...)
		if doc[target.Start] != '{' {
			if len(merged) == 0 {
				s.refs = s.refs[:len(s.refs)-1]
				pushed--
				return s.schema(out, target, nullable)
			}
			break // a boolean target beside other keywords: keep those
		}
		tms := s.members(target)
		if len(merged)+len(tms) <= smallNames {
			for _, tm := range tms {
				if find(merged, tm.key) < 0 {
					merged = append(merged, tm)
				}
			}
		} else {
			// Keys taken, by the siblings or an earlier repeat of the
			// target's: n keys each looked up in n would be n×n.
			taken := make(map[string]struct{}, len(merged)+len(tms))
			for _, m := range merged {
				taken[m.key] = struct{}{}
			}
			for _, tm := range tms {
				if _, ok := taken[tm.key]; !ok {
					taken[tm.key] = struct{}{}
					merged = append(merged, tm)
				}
			}
		}
		ms = merged
	}
	return s.object(out, ms, nullable)
}

// pointer resolves a local reference: "#" or a JSON pointer into the root
// schema ("#/$defs/node"). Anything else is not ours to fetch.
func (s *schemaWriter) pointer(ref string) (jsonspan.Span, bool) {
	if v, ok := s.resolved[ref]; ok {
		return v, v.Start >= 0
	}
	v, ok := s.walkPointer(ref)
	if !ok {
		v = jsonspan.NoSpan()
	}
	if s.resolved == nil {
		s.resolved = map[string]jsonspan.Span{}
	}
	// Every use of a definition resolves it once: a schema with
	// thousands of references to a long $defs is not scanned per use.
	s.resolved[ref] = v
	return v, ok
}

// member finds key in the object at v. The objects references go
// through ($defs with thousands of entries) are indexed on first use, so
// resolving every one of their entries costs their size once.
func (s *schemaWriter) member(v jsonspan.Span, key string) jsonspan.Span {
	if idx, ok := s.indexed[v.Start]; ok {
		if m, ok := idx[key]; ok {
			return m
		}
		return jsonspan.NoSpan()
	}
	idx := map[string]jsonspan.Span{}
	s.eachMember(v.Start, func(m jsonspan.Member) bool {
		if k := jsonspan.KeyName(s.doc, m.Key); idx[k].End == 0 {
			idx[k] = m.Value // the first of repeated keys, as everywhere
		}
		return true
	})
	if s.indexed == nil {
		s.indexed = map[int]map[string]jsonspan.Span{}
	}
	s.indexed[v.Start] = idx
	if m, ok := idx[key]; ok {
		return m
	}
	return jsonspan.NoSpan()
}

// element is the nth element of the array at v, or none. Arrays are
// indexed on first use, like objects: references to each of n elements
// cost the array once, not a scan to each.
func (s *schemaWriter) element(v jsonspan.Span, n int) jsonspan.Span {
	els, ok := s.elements[v.Start]
	if !ok {
		s.eachElement(v.Start, func(el jsonspan.Span) bool {
			els = append(els, el)
			return true
		})
		if s.elements == nil {
			s.elements = map[int][]jsonspan.Span{}
		}
		s.elements[v.Start] = els
	}
	if n >= len(els) {
		return jsonspan.NoSpan()
	}
	return els[n]
}

// walkPointer walks a local reference from the root schema.
func (s *schemaWriter) walkPointer(ref string) (jsonspan.Span, bool) {
	doc := s.doc
	v := s.root
	if ref == "#" {
		return v, true
	}
	if !strings.HasPrefix(ref, "#/") {
		return jsonspan.NoSpan(), false
	}
	for _, tok := range strings.Split(ref[2:], "/") {
		if strings.IndexByte(tok, '%') >= 0 {
			// A pointer in a URI fragment is percent-encoded (RFC 6901 §6).
			if dec, err := url.PathUnescape(tok); err == nil {
				tok = dec
			}
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch doc[v.Start] {
		case '{':
			v = s.member(v, tok)
		case '[':
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 {
				return jsonspan.NoSpan(), false
			}
			v = s.element(v, n)
		default:
			return jsonspan.NoSpan(), false
		}
		if v.Start < 0 {
			return v, false
		}
	}
	return v, doc[v.Start] == '{' || doc[v.Start] == 't' || doc[v.Start] == 'f'
}

// schemaObj is a schema object being written: its members, and where the
// keywords the rules ask about first stand (-1: absent), found in one
// pass. A key may be repeated n times, and each repeat must not scan the
// n members again.
type schemaObj struct {
	ms                                                            []member
	typ, properties, required, anyOf, allOf, enum, cnst, nul, ref int
	// typeNull: 0 not worked out yet, 1 the type is no list with null,
	// 2 it is one.
	typeNull int8
	// branches holds the members typeBranch writes, by branchGroup,
	// once the object needs them.
	branches *[4][]member
}

func newSchemaObj(ms []member) schemaObj {
	o := schemaObj{ms: ms, typ: -1, properties: -1, required: -1, anyOf: -1, allOf: -1, enum: -1, cnst: -1, nul: -1, ref: -1}
	for i := len(ms) - 1; i >= 0; i-- { // backwards: the first of repeats wins
		switch ms[i].key {
		case "type":
			o.typ = i
		case "properties":
			o.properties = i
		case "required":
			o.required = i
		case "anyOf":
			o.anyOf = i
		case "allOf":
			o.allOf = i
		case "enum":
			o.enum = i
		case "const":
			o.cnst = i
		case "nullable":
			o.nul = i
		case "$ref":
			o.ref = i
		}
	}
	return o
}

// value is the value of the member at i (a keyword's index).
func (o *schemaObj) value(i int) jsonspan.Span { return o.ms[i].m.Value }

// object writes one schema object from its members.
func (s *schemaWriter) object(out []byte, ms []member, nullable bool) []byte {
	doc, r := s.doc, s.r
	root := s.depth == 1
	o := newSchemaObj(ms)
	typ := s.typeOf(&o)
	untyped := o.typ < 0 || isString(doc, o.value(o.typ), "")
	isObject := typ == "object" || (untyped && o.properties >= 0) || s.listHas(&o, "object")
	// Properties first: required is filtered against them, wherever it
	// stands.
	// nullable is written once per object, whichever rule comes first.
	outerNullable := s.nullableOut
	s.nullableOut = false
	defer func() { s.nullableOut = outerNullable }()
	// Both name lists live on the writer's name stack, like the members.
	base := len(s.names)
	defer func() { s.names = s.names[:base] }()
	if i := o.properties; i >= 0 && doc[o.value(i).Start] == '{' {
		s.eachMember(o.value(i).Start, func(m jsonspan.Member) bool {
			s.names = append(s.names, jsonspan.KeyName(doc, m.Key))
			return true
		})
	}
	props := s.names[base:len(s.names):len(s.names)]
	mid := len(s.names)
	if i := o.required; i >= 0 {
		if rv := o.value(i); doc[rv.Start] == '[' {
			s.eachElement(rv.Start, func(el jsonspan.Span) bool {
				if name, ok := docString(doc, el); ok {
					s.names = append(s.names, name)
				}
				return true
			})
		}
	}
	// Draft-03 marks a property required on the property itself
	// ("required": true); every upstream reads the parent's list, so the
	// mark moves there (the child's boolean goes as an odd required).
	hoisted := 0
	if i := o.properties; i >= 0 && doc[o.value(i).Start] == '{' && bytes.Contains(doc[o.value(i).Start:o.value(i).End], []byte(`"required"`)) {
		// The names required so far, once there are too many to scan for
		// each property.
		var listed map[string]struct{}
		s.eachMember(o.value(i).Start, func(m jsonspan.Member) bool {
			if doc[m.Value.Start] == '{' {
				if rv := jsonspan.Lookup(doc, m.Value.Start, "required"); rv.Start >= 0 && string(doc[rv.Start:rv.End]) == "true" {
					name := jsonspan.KeyName(doc, m.Key)
					if listed == nil && len(s.names)-mid > smallNames {
						listed = make(map[string]struct{}, 2*(len(s.names)-mid))
						for _, n := range s.names[mid:] {
							listed[n] = struct{}{}
						}
					}
					dup := false
					if listed != nil {
						_, dup = listed[name]
						listed[name] = struct{}{}
					} else {
						dup = slices.Contains(s.names[mid:], name)
					}
					if !dup {
						s.names = append(s.names, name)
						hoisted++
					}
				}
			}
			return true
		})
	}
	required := s.names[mid:len(s.names):len(s.names)]
	propSet, reqSet := newNameSet(props), newNameSet(required)
	closing := r.closeObjects && isObject
	anyOf := r.anyOfAlone && o.anyOf >= 0
	// A type list written as anyOf takes no siblings either; the type
	// member is what becomes the anyOf.
	typeAnyOf := false
	if i := o.typ; r.anyOfAlone && !anyOf && i >= 0 && s.typeUnion(o.value(i), nullable, &o) {
		anyOf, typeAnyOf = true, true
	}
	var told []string // constraints taken out, for the description
	// inUnion: the keyword went into a branch of the union the type list
	// became, so it is not lost and need not be told. The branches are
	// known by their groups, so a list of n types is read once, not once
	// per keyword.
	var unionGroups [4]bool
	if typeAnyOf && r.typeArrays == "nullable" {
		types, _, _, _ := s.typeList(o.value(o.typ), nullable, &o)
		for _, t := range types {
			if g := branchGroup(t); g >= 0 {
				unionGroups[g] = true
			}
		}
	}
	inUnion := func(k string) bool {
		kt, ok := typeKeywords[k]
		return ok && unionGroups[branchGroup(kt)] && !(k == "format" && r.formats != nil)
	}
	drop := func(m member) bool {
		k := m.key
		switch {
		case r.strip[k]:
		case r.allow != nil && !r.allow[k]:
			// A keyword the dialect has no field for.
		case k == "format" && r.formats != nil && (r.formatsAnyType || typ == "string" || typ == "") && !r.formats[stringOf(doc, m.m.Value)]:
			// The dialect's string formats are all it takes on strings
			// (and on untyped schemas, judged as strings); some take no
			// other format on any type (Anthropic: not int64 either).
		case k == "minItems" && r.minItemsMax > 0 && !smallInt(doc, m.m.Value, r.minItemsMax):
		case anyOf && k != "anyOf" && (r.anyOfBranches || k != "description" && k != "title" && k != "nullable") && !(typeAnyOf && k == "type"):
		case (k == "$defs" || k == "definitions") && r.inline:
			// Every reference is inlined: the definitions serve nobody.
		case k == "$ref" && r.inline:
			// a boolean target kept the keywords beside it
		default:
			return false
		}
		if r.describe && !(typeAnyOf && inUnion(k)) && (constraintKeywords[k] || (k == "additionalProperties" && doc[m.m.Value.Start] == '{')) {
			// (A map's value schema is worth telling; a closed object's
			// false is not.)
			told = append(told, k+": "+string(doc[m.m.Value.Start:m.m.Value.End]))
		}
		if s.telling {
			s.note("strip " + k)
		} else {
			s.changed = true
		}
		return true
	}
	// A schema that takes null only by being wrapped (no type, enum or
	// anyOf to take it in) is written inside its wrap from the start:
	// building it first and wrapping a copy after would cost its size
	// again at every level of a deep schema.
	wrapped := nullable && o.typ < 0 && o.enum < 0 && o.anyOf < 0
	if wrapped {
		s.note("nullable")
		out = append(out, `{"anyOf":[`...)
	}
	ow := jsonspan.NewObj(out)
	wroteDesc, wroteProps, wroteAdditional, wroteRequired := false, false, false, false
	// A type list that becomes a union beside the schema's own anyOf:
	// both go into one allOf (with the schema's own allOf members, if
	// any), written where the type stands.
	rootTypeList := root && r.rootObject && typ == "object" && o.typ >= 0 && doc[o.value(o.typ).Start] == '['
	willMerge := !r.anyOfAlone && !rootTypeList && o.anyOf >= 0 && o.typ >= 0 && s.typeUnion(o.value(o.typ), nullable, &o)
	nullDone := !nullable
	writeDesc := func(v jsonspan.Span) {
		wroteDesc = true
		ow.Key("description")
		text := []byte{}
		if v.Start >= 0 {
			if doc[v.Start] != '"' || len(told) == 0 {
				ow.B = append(ow.B, doc[v.Start:v.End]...)
				return
			}
			text = jsonspan.Unescape(text, doc[v.Start+1:v.End-1])
			text = append(text, ' ')
		}
		text = append(text, '(')
		text = append(text, strings.Join(told, "; ")...)
		text = append(text, ')')
		ow.B = jsonspan.AppendString(ow.B, text)
	}
	// What goes is decided first: the description, wherever it stands,
	// tells of the constraints that went.
	var droppedBuf [16]bool
	dropped := droppedBuf[:0]
	if len(ms) > len(droppedBuf) {
		dropped = make([]bool, 0, len(ms))
	}
	dropped = dropped[:len(ms)]
	for i, m := range ms {
		dropped[i] = drop(m)
	}
	var req requiredOut
	for i, m := range ms {
		if s.overBudget(ow.B) {
			// A key repeated n times can write n times n bytes.
			break
		}
		if dropped[i] {
			continue
		}
		k := m.key
		v := m.m.Value
		switch k {
		case "description":
			writeDesc(v)
		case "properties":
			wroteProps = true
			ow.Key("properties")
			ow.B = s.properties(ow.B, v, reqSet, closing && r.requireAll)
		case "patternProperties", "dependentSchemas", "$defs", "definitions":
			ow.Key(k)
			ow.B = s.schemaMap(ow.B, v)
		case "items", "additionalItems", "unevaluatedItems", "contains", "not", "if", "then", "else", "propertyNames":
			ow.Sep()
			ow.B = append(ow.B, doc[m.m.Key.Start:m.m.Key.End]...)
			ow.B = append(ow.B, ':')
			if doc[v.Start] == '[' {
				ow.B = s.schemaList(ow.B, v, false)
			} else {
				ow.B = s.schema(ow.B, v, false)
			}
		case "prefixItems", "allOf", "oneOf":
			if k == "allOf" && willMerge {
				continue // its members joined the merged allOf
			}
			ow.Key(k)
			ow.B = s.schemaList(ow.B, v, false)
		case "anyOf":
			if willMerge {
				continue // written with the type list, in one allOf
			}
			ow.Key(k)
			ow.B = s.schemaList(ow.B, v, nullable)
			nullDone = true
		case "additionalProperties":
			wroteAdditional = true
			switch {
			case closing:
				if string(doc[v.Start:v.End]) != "false" {
					s.note("close_objects")
				}
				if doc[v.Start] == '{' || doc[v.Start] == 't' {
					// A map (keys the schema cannot list): closing it
					// would leave it nothing but {}.
					s.openMap = true
				}
				ow.Key(k)
				ow.B = append(ow.B, "false"...)
			case doc[v.Start] == '{':
				ow.Key(k)
				ow.B = s.schema(ow.B, v, false)
			default:
				ow.Raw(doc, m.m)
			}
		case "required":
			wroteRequired = true
			if !isObject && o.properties < 0 && !(root && r.rootObject) && doc[v.Start] == '[' {
				// A branch that names properties of the schema around it
				// ("anyOf":[{"required":["a"]},…]): nothing here to filter
				// them against.
				ow.Raw(doc, m.m)
				continue
			}
			ow.B = s.required(&ow, m.m, &req, props, propSet, required, reqSet, closing && r.requireAll, hoisted > 0)
		case "type":
			if isString(doc, v, "") {
				// An empty type names none: the schema is untyped.
				s.note("type")
				continue
			}
			if root && r.rootObject && typ == "object" && doc[v.Start] == '[' {
				// Arguments are an object, never null.
				s.note("root_object")
				ow.Key("type")
				ow.B = append(ow.B, `"object"`...)
				continue
			}
			if willMerge {
				// Two unions, the type list's and the schema's own, must
				// both hold: one allOf of the two, not two anyOf keys.
				ow.Key("allOf")
				ow.B = append(ow.B, '[')
				sub := jsonspan.NewObj(ow.B)
				sub.B, _ = s.typeMember(&sub, v, nullable, &o)
				ow.B = append(sub.Close(), ',')
				own := jsonspan.NewObj(ow.B)
				own.Key("anyOf")
				// Both unions must take null for a nullable schema.
				own.B = s.schemaList(own.B, o.value(o.anyOf), nullable)
				ow.B = own.Close()
				if ai := o.allOf; ai >= 0 && doc[o.value(ai).Start] == '[' {
					s.eachElement(o.value(ai).Start, func(el jsonspan.Span) bool {
						ow.B = s.schema(append(ow.B, ','), el, false)
						return true
					})
				}
				ow.B = append(ow.B, ']')
				nullDone = true
				continue
			}
			var done bool
			ow.B, done = s.typeMember(&ow, v, nullable, &o)
			nullDone = nullDone || done
		case "enum":
			if r.constEnum && o.cnst >= 0 {
				// The const is the one value left of the enum, and becomes
				// it.
				s.note("const_to_enum")
				continue
			}
			ow.Key(k)
			var done bool
			ow.B, done = s.enum(ow.B, v, nullable)
			nullDone = nullDone || done
			if r.enumString && r.typeArrays == "nullable" && enumHasNull(doc, v) && o.nul < 0 && !typeListHasNull(doc, &o) && !s.nullableOut {
				s.nullableOut = true
				// The null left the enum for nullable, which says it.
				s.note("enum_to_string")
				ow.Key("nullable")
				ow.B = append(ow.B, "true"...)
			}
		case "const":
			if r.constEnum && jsonspan.IsNull(doc, v) {
				// null is no string: the schema allows null instead.
				s.note("const_to_enum")
				if r.typeArrays == "nullable" && o.nul < 0 && !s.nullableOut {
					s.nullableOut = true
					ow.Key("nullable")
					ow.B = append(ow.B, "true"...)
				}
				continue
			}
			if r.constEnum {
				s.note("const_to_enum")
				ow.Key("enum")
				ow.B = append(ow.B, '[')
				ow.B = s.enumValue(ow.B, v)
				ow.B = append(ow.B, ']')
				continue
			}
			ow.Raw(doc, m.m)
		default:
			ow.Raw(doc, m.m)
		}
	}
	if r.enumString && !anyOf && untyped && (o.enum >= 0 || (r.constEnum && o.cnst >= 0)) {
		// The values are strings now; a dialect that wants string enums
		// wants the type said.
		s.note("enum_to_string")
		ow.Key("type")
		ow.B = append(ow.B, `"string"`...)
	}
	if len(told) > 0 && !wroteDesc && !(anyOf && r.anyOfBranches) {
		writeDesc(jsonspan.NoSpan())
	}
	if root && r.rootObject && untyped && o.ref >= 0 && !objectRoot(doc, s.root) && s.err == nil {
		s.err = schemaError("schema_root_not_object", s.loc(),
			"the schema of %s refers at its root to a schema that is not an object; the upstream takes only an object schema there", s.loc())
	}
	if root && r.rootObject && untyped && !anyOf {
		s.note("root_object")
		ow.Key("type")
		ow.B = append(ow.B, `"object"`...)
		isObject = true
	}
	if root && r.rootObject && !isObject && s.err == nil {
		// Arguments are an object: a root of another type is no schema
		// the upstream can take, and none we could make of it.
		what := "a union"
		if i := o.typ; i >= 0 {
			what = "type " + string(doc[o.value(i).Start:o.value(i).End])
		}
		s.err = schemaError("schema_root_not_object", s.loc(),
			"the schema of %s has %s at its root; the upstream takes only an object schema there", s.loc(), what)
	}
	if isObject && !wroteProps && !anyOf {
		s.note("properties")
		ow.Key("properties")
		ow.B = append(ow.B, "{}"...)
	}
	if closing && !wroteAdditional {
		s.note("close_objects")
		ow.Key("additionalProperties")
		ow.B = append(ow.B, "false"...)
	}
	switch {
	case closing && r.requireAll && !wroteRequired && len(props) > 0:
		s.note("close_objects")
		ow.Key("required")
		ow.B = appendNames(ow.B, props)
	case hoisted > 0 && !wroteRequired:
		s.note("required")
		ow.Key("required")
		ow.B = appendNames(ow.B, required)
	}
	if wrapped {
		return append(ow.Close(), `,{"type":"null"}]}`...)
	}
	if !nullDone && s.err == nil {
		// No type, enum or anyOf took the null in after all (a type no
		// rule can read): allow it beside the schema.
		s.note("nullable")
		body := ow.Close()
		start := len(out)
		inner := slices.Clone(body[start:])
		return append(append(append(body[:start], `{"anyOf":[`...), inner...), `,{"type":"null"}]}`...)
	}
	return ow.Close()
}

func stringOf(doc []byte, v jsonspan.Span) string {
	s, _ := docString(doc, v)
	return s
}

// docString is jsonspan.StringValue without the copy for a string with no
// escapes: the request body outlives the rewrite, and schemas repeat the
// same few type names thousands of times.
func docString(doc []byte, v jsonspan.Span) (string, bool) {
	if v.Start < 0 || v.End-v.Start < 2 || doc[v.Start] != '"' {
		return "", false
	}
	raw := doc[v.Start+1 : v.End-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return jsonspan.UnsafeString(raw), true
	}
	return jsonspan.StringValue(doc, v)
}

// isString reports whether the JSON value at v is the string t, as
// written.
func isString(doc []byte, v jsonspan.Span, t string) bool {
	return v.End-v.Start == len(t)+2 && doc[v.Start] == '"' && string(doc[v.Start+1:v.End-1]) == t
}

func smallInt(doc []byte, v jsonspan.Span, max int) bool {
	n, err := strconv.Atoi(string(doc[v.Start:v.End]))
	return err == nil && n <= max
}

// typeOf is a schema's single type: its type, or the one type of a list
// besides null (["object","null"] is an object schema too); "" when
// there is none or several.
func (s *schemaWriter) typeOf(o *schemaObj) string {
	if o.typ < 0 {
		return ""
	}
	doc, v := s.doc, o.value(o.typ)
	if t, ok := docString(doc, v); ok {
		return t
	}
	if doc[v.Start] != '[' {
		return ""
	}
	one, n := "", 0
	s.eachElement(v.Start, func(el jsonspan.Span) bool {
		t, ok := docString(doc, el)
		switch {
		case !ok:
			n = 2
		case t != "null":
			one = t
			n++
		}
		return n < 2
	})
	if n == 1 {
		return one
	}
	return ""
}

// typeUnion reports whether the type member at v will be written as an
// anyOf of single types (a list of several types, or any_of with null),
// as typeMember writes it.
func (s *schemaWriter) typeUnion(v jsonspan.Span, nullable bool, o *schemaObj) bool {
	types, list, _, _ := s.typeList(v, nullable, o)
	if !list || s.r.typeArrays == "keep" || s.r.typeArrays == "" {
		return false
	}
	others := 0
	for _, t := range types {
		if t != "null" {
			others++
		}
	}
	return others > 1 || (others == 1 && s.r.typeArrays == "any_of" && len(types) > 1)
}

// typeKeywords are the keywords that constrain one type only, by the
// type ("number" stands for integer too).
var typeKeywords = map[string]string{
	"items": "array", "prefixItems": "array", "minItems": "array", "maxItems": "array",
	"uniqueItems": "array", "contains": "array",
	"properties": "object", "required": "object", "additionalProperties": "object",
	"patternProperties": "object", "minProperties": "object", "maxProperties": "object",
	"propertyNames": "object",
	"minLength":     "string", "maxLength": "string", "pattern": "string", "format": "string",
	"minimum": "number", "maximum": "number", "exclusiveMinimum": "number",
	"exclusiveMaximum": "number", "multipleOf": "number",
}

// branchGroup is the group of typeKeywords' types that type t takes its
// keywords from (integer: number's), or -1 for a type that takes none.
func branchGroup(t string) int {
	switch t {
	case "array":
		return 0
	case "object":
		return 1
	case "string":
		return 2
	case "number", "integer":
		return 3
	}
	return -1
}

// typeBranch writes into the union branch of type t the members of the
// object that constrain t, as the dialect wants them. The members are
// grouped by the type they constrain once per object: a union of n types
// beside n keywords must not read every keyword for every type.
func (s *schemaWriter) typeBranch(ow *jsonspan.ObjWriter, t string, o *schemaObj) {
	doc := s.doc
	g := branchGroup(t)
	if g < 0 {
		return
	}
	if o.branches == nil {
		o.branches = new([4][]member)
		for _, m := range o.ms {
			if kt, ok := typeKeywords[m.key]; ok && !s.r.strip[m.key] {
				o.branches[branchGroup(kt)] = append(o.branches[branchGroup(kt)], m)
			}
		}
	}
	for _, m := range o.branches[g] {
		v := m.m.Value
		switch m.key {
		case "items", "contains", "propertyNames":
			ow.Key(m.key)
			if doc[v.Start] == '[' {
				ow.B = s.schemaList(ow.B, v, false)
			} else {
				ow.B = s.schema(ow.B, v, false)
			}
		case "prefixItems":
			ow.Key(m.key)
			ow.B = s.schemaList(ow.B, v, false)
		case "properties":
			ow.Key(m.key)
			ow.B = s.properties(ow.B, v, nameSet{}, false)
		case "patternProperties":
			ow.Key(m.key)
			ow.B = s.schemaMap(ow.B, v)
		case "format":
			if s.r.formats == nil || s.r.formats[stringOf(doc, v)] {
				ow.Raw(doc, m.m)
			}
		default:
			ow.Raw(doc, m.m)
		}
	}
}

// typeList is the types the member at v stands for once the dialect's
// enum and nullable rules are applied, and whether they are a list; no
// types when the member is not a string or a list of strings. enumed
// and nulled report what those rules changed.
func (s *schemaWriter) typeList(v jsonspan.Span, nullable bool, o *schemaObj) (types []string, list, enumed, nulled bool) {
	doc := s.doc
	list = doc[v.Start] == '['
	types = s.types[:0]
	if list {
		s.eachElement(v.Start, func(el jsonspan.Span) bool {
			if t, ok := docString(doc, el); ok {
				types = append(types, t)
			}
			return true
		})
	} else if t, ok := docString(doc, v); ok {
		types = append(types, t)
	}
	s.types = types
	if len(types) == 0 {
		return nil, false, false, false
	}
	hasNull := slices.Contains(types, "null")
	enum := o.enum >= 0 || (s.r.constEnum && o.cnst >= 0)
	if s.r.enumString && enum && !(len(types) == 1 && types[0] == "string") {
		// The enum is made of strings now, and so is the value.
		enumed = true
		types, list = append(types[:0], "string"), false
		if hasNull {
			types = append(types, "null")
			list = true
		}
	}
	if nullable && !hasNull {
		nulled = true
		types = append(types, "null")
		list = true
	}
	return types, list, enumed, nulled
}

// properties writes a properties object, each value a schema; with
// closing, the ones not required become nullable.
func (s *schemaWriter) properties(out []byte, v jsonspan.Span, required nameSet, closing bool) []byte {
	doc := s.doc
	if doc[v.Start] != '{' {
		return append(out, doc[v.Start:v.End]...)
	}
	ow := jsonspan.NewObj(out)
	s.eachMember(v.Start, func(m jsonspan.Member) bool {
		ow.Sep()
		ow.B = append(ow.B, doc[m.Key.Start:m.Key.End]...)
		ow.B = append(ow.B, ':')
		optional := closing && !required.has(jsonspan.KeyName(doc, m.Key))
		ow.B = s.schema(ow.B, m.Value, optional)
		return true
	})
	return ow.Close()
}

// schemaMap writes an object whose member values are schemas.
func (s *schemaWriter) schemaMap(out []byte, v jsonspan.Span) []byte {
	doc := s.doc
	if doc[v.Start] != '{' {
		return append(out, doc[v.Start:v.End]...)
	}
	ow := jsonspan.NewObj(out)
	s.eachMember(v.Start, func(m jsonspan.Member) bool {
		ow.Sep()
		ow.B = append(ow.B, doc[m.Key.Start:m.Key.End]...)
		ow.B = append(ow.B, ':')
		ow.B = s.schema(ow.B, m.Value, false)
		return true
	})
	return ow.Close()
}

// schemaList writes an array of schemas; addNull appends a null schema
// to it (an optional anyOf property of a closed object).
func (s *schemaWriter) schemaList(out []byte, v jsonspan.Span, addNull bool) []byte {
	doc := s.doc
	if doc[v.Start] != '[' {
		return append(out, doc[v.Start:v.End]...)
	}
	out = append(out, '[')
	n := 0
	hasNull := false
	s.eachElement(v.Start, func(el jsonspan.Span) bool {
		if n > 0 {
			out = append(out, ',')
		}
		n++
		if doc[el.Start] == '{' && jsonspan.IsString(doc, jsonspan.Lookup(doc, el.Start, "type"), "null") {
			hasNull = true
		}
		out = s.schema(out, el, false)
		return true
	})
	if addNull && !hasNull {
		s.note("nullable")
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"type":"null"}`...)
	}
	return append(out, ']')
}

// requiredOut is what an object's required list becomes, worked out at
// its first required member: a key repeated n times copies it instead of
// filtering n names again.
type requiredOut struct {
	done bool
	// same: a list keeps its bytes; none: nothing is required.
	same, none bool
	// from, to: where the list first written stands in the output, once
	// written (the output only grows after it); from < 0 before.
	from, to int
}

// required writes the required list with only the names of existing
// properties, each once; with closing, every property. A null or odd
// required goes.
func (s *schemaWriter) required(ow *jsonspan.ObjWriter, m jsonspan.Member, out *requiredOut, props []string, propSet nameSet, required []string, reqSet nameSet, closing, hoisted bool) []byte {
	doc := s.doc
	v := m.Value
	keep := s.keep[:0]
	defer func() { s.keep = keep[:0] }()
	first := !out.done
	if first {
		if closing {
			keep = append(keep, props...)
		} else {
			var seen map[string]bool
			if len(required) > smallNames {
				seen = make(map[string]bool, len(required))
			}
			for _, name := range required {
				dup := seen[name]
				if seen == nil {
					dup = slices.Contains(keep, name)
				}
				if propSet.has(name) && !dup {
					if seen != nil {
						seen[name] = true
					}
					keep = append(keep, name)
				}
			}
		}
		// A list with hoisted names is never the same: the names are not
		// in its bytes.
		out.same = !hoisted && len(keep) == len(required) && slices.Equal(keep, required)
		if closing && !hoisted && !out.same && len(keep) == len(required) {
			// Every property, in another order, is every property: the
			// list keeps its bytes.
			out.same = true
			for _, p := range keep {
				out.same = out.same && reqSet.has(p)
			}
			for _, r := range required {
				out.same = out.same && propSet.has(r)
			}
			// ...and the same names, each once.
			out.same = out.same && reqSet.distinct()
		}
		out.done, out.none, out.from = true, len(keep) == 0 && !closing, -1
	}
	if out.same && doc[v.Start] == '[' {
		ow.Raw(doc, m)
		return ow.B
	}
	if closing {
		s.note("close_objects")
	} else {
		s.note("required")
	}
	if out.none {
		return ow.B // nothing required: no member, never null
	}
	ow.Key("required")
	if out.from >= 0 {
		return append(ow.B, ow.B[out.from:out.to]...)
	}
	if !first {
		// The list kept its bytes at the first member, so what is kept
		// is what it listed: every property when closing, else itself.
		keep = append(keep, required...)
		if closing {
			keep = append(keep[:0], props...)
		}
	}
	out.from = len(ow.B)
	ow.B = appendNames(ow.B, keep)
	out.to = len(ow.B)
	return ow.B
}

func appendNames(out []byte, names []string) []byte {
	out = append(out, '[')
	for i, n := range names {
		if i > 0 {
			out = append(out, ',')
		}
		out = jsonspan.AppendStringStr(out, n)
	}
	return append(out, ']')
}

// typeMember writes type: a list becomes what the dialect takes, and a
// nullable schema gets null. It reports whether null was taken in.
func (s *schemaWriter) typeMember(ow *jsonspan.ObjWriter, v jsonspan.Span, nullable bool, o *schemaObj) ([]byte, bool) {
	doc := s.doc
	types, list, enumed, nulled := s.typeList(v, nullable, o)
	if len(types) == 0 {
		if doc[v.Start] == '[' && s.r.typeArrays != "" && s.r.typeArrays != "keep" {
			// A list the dialect refuses, and not one type in it to
			// keep: no type at all says the same.
			s.note("type_arrays")
			return ow.B, false
		}
		// Not a type this rule can read ([], [1]): as it is.
		ow.Key("type")
		return append(ow.B, doc[v.Start:v.End]...), false
	}
	if enumed {
		s.note("enum_to_string")
	}
	if nulled {
		s.note("nullable")
	}
	hasNull := slices.Contains(types, "null")
	if !list || s.r.typeArrays == "keep" || s.r.typeArrays == "" {
		ow.Key("type")
		if !list && isString(doc, v, types[0]) {
			return append(ow.B, doc[v.Start:v.End]...), hasNull
		}
		start := len(ow.B)
		if list {
			ow.B = appendNames(ow.B, types)
		} else {
			ow.B = jsonspan.AppendStringStr(ow.B, types[0])
		}
		if bytes.Equal(ow.B[start:], doc[v.Start:v.End]) {
			return append(ow.B[:start], doc[v.Start:v.End]...), hasNull
		}
		return ow.B, hasNull
	}
	// A dialect without type lists: one type, nullable, or a union.
	s.note("type_arrays")
	var others []string
	for _, t := range types {
		if t != "null" {
			others = append(others, t)
		}
	}
	switch {
	case len(others) == 1 && (!hasNull || s.r.typeArrays == "nullable"):
		ow.Key("type")
		ow.B = jsonspan.AppendStringStr(ow.B, others[0])
	case len(others) > 1 && s.r.typeArrays == "nullable":
		ow.Key("anyOf")
		ow.B = append(ow.B, '[')
		for i, t := range others {
			if i > 0 {
				ow.B = append(ow.B, ',')
			}
			branch := jsonspan.NewObj(ow.B)
			branch.Key("type")
			branch.B = jsonspan.AppendStringStr(branch.B, t)
			if s.r.anyOfAlone {
				// Nothing may stand beside the union: the keywords of one
				// type go into that type's branch.
				s.typeBranch(&branch, t, o)
			}
			if s.r.anyOfBranches {
				// Nor annotations, nor nullable: each branch says them.
				for _, m := range o.ms {
					if m.key == "description" || m.key == "title" {
						branch.Raw(doc, m.m)
					}
				}
				if hasNull {
					branch.Key("nullable")
					branch.B = append(branch.B, "true"...)
				}
			}
			ow.B = branch.Close()
			if s.overBudget(ow.B) {
				// n types, each writing keywords repeated n times.
				return ow.B, false
			}
		}
		ow.B = append(ow.B, ']')
	case len(others) > 0:
		// any_of: every type, null included, as a union of single types.
		ow.Key("anyOf")
		ow.B = append(ow.B, '[')
		for i, t := range types {
			if i > 0 {
				ow.B = append(ow.B, ',')
			}
			branch := jsonspan.NewObj(ow.B)
			branch.Key("type")
			branch.B = jsonspan.AppendStringStr(branch.B, t)
			if s.r.anyOfAlone {
				// The type's keywords go into its branch, as above.
				s.typeBranch(&branch, t, o)
				if t == "object" && (o.properties < 0 || s.r.strip["properties"]) {
					branch.Key("properties")
					branch.B = append(branch.B, "{}"...)
				}
			}
			if s.r.anyOfBranches && t != "null" {
				for _, m := range o.ms {
					if m.key == "description" || m.key == "title" {
						branch.Raw(doc, m.m)
					}
				}
			}
			ow.B = branch.Close()
		}
		return append(ow.B, ']'), hasNull
	}
	if hasNull && s.r.typeArrays == "nullable" && o.nul < 0 && !s.nullableOut && !(s.r.anyOfBranches && len(others) > 1) {
		s.nullableOut = true
		ow.Key("nullable")
		ow.B = append(ow.B, "true"...)
	}
	return ow.B, hasNull
}

// enum writes an enum: strings only when the dialect wants them, with
// null added for a nullable schema.
func (s *schemaWriter) enum(out []byte, v jsonspan.Span, nullable bool) ([]byte, bool) {
	doc := s.doc
	if doc[v.Start] != '[' {
		return append(out, doc[v.Start:v.End]...), false
	}
	hasNull, plain := false, true
	s.eachElement(v.Start, func(el jsonspan.Span) bool {
		switch doc[el.Start] {
		case 'n':
			hasNull = true
			plain = plain && !s.r.enumString
		case '"':
		default:
			plain = plain && !s.r.enumString
		}
		return true
	})
	if plain && (!nullable || hasNull) {
		return append(out, doc[v.Start:v.End]...), hasNull
	}
	out = append(out, '[')
	n := 0
	s.eachElement(v.Start, func(el jsonspan.Span) bool {
		if doc[el.Start] == 'n' && s.r.enumString {
			return true // null is nullable's business
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		if s.r.enumString {
			out = s.enumValue(out, el)
		} else {
			out = append(out, doc[el.Start:el.End]...)
		}
		return true
	})
	if nullable && !hasNull && !s.r.enumString {
		s.note("nullable")
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, "null"...)
		hasNull = true
	}
	if s.r.enumString {
		s.note("enum_to_string")
	}
	return append(out, ']'), hasNull || nullable && s.r.enumString
}

// enumValue writes one enum value as a string: numbers and booleans as
// they are written, objects and arrays as their JSON.
func (s *schemaWriter) enumValue(out []byte, v jsonspan.Span) []byte {
	doc := s.doc
	if !s.r.enumString || doc[v.Start] == '"' {
		return append(out, doc[v.Start:v.End]...)
	}
	return jsonspan.AppendString(out, doc[v.Start:v.End])
}

// enumHasNull reports whether an enum lists null.
func enumHasNull(doc []byte, v jsonspan.Span) bool {
	found := false
	if doc[v.Start] == '[' {
		jsonspan.EachElement(doc, v.Start, func(el jsonspan.Span) bool {
			found = found || doc[el.Start] == 'n'
			return !found
		})
	}
	return found
}

// listHas reports whether the schema's type is a list naming t.
func (s *schemaWriter) listHas(o *schemaObj, t string) bool {
	if o.typ < 0 || s.doc[o.value(o.typ).Start] != '[' {
		return false
	}
	found := false
	s.eachElement(o.value(o.typ).Start, func(el jsonspan.Span) bool {
		found = found || isString(s.doc, el, t)
		return !found
	})
	return found
}

// typeListHasNull reports whether the schema's type is a list with null,
// which becomes nullable:true on its own. It is asked at every enum, which
// may be repeated: the list is read once.
func typeListHasNull(doc []byte, o *schemaObj) bool {
	if o.typeNull == 0 {
		o.typeNull = 1
		if o.typ >= 0 && doc[o.value(o.typ).Start] == '[' {
			jsonspan.EachElement(doc, o.value(o.typ).Start, func(el jsonspan.Span) bool {
				if isString(doc, el, "null") {
					o.typeNull = 2
				}
				return o.typeNull == 1
			})
		}
	}
	return o.typeNull == 2
}

// smallNames is how many names a list holds before lookups in it go
// through a map: an MCP schema with thousands of properties must not cost
// their square.
const smallNames = 16

// nameSet answers membership in a list of names, by scan when it is short.
type nameSet struct {
	names []string
	set   map[string]struct{}
}

func newNameSet(names []string) nameSet {
	l := nameSet{names: names}
	if len(names) > smallNames {
		l.set = make(map[string]struct{}, len(names))
		for _, n := range names {
			l.set[n] = struct{}{}
		}
	}
	return l
}

// distinct reports whether no name is listed twice.
func (l nameSet) distinct() bool {
	if l.set != nil {
		return len(l.set) == len(l.names)
	}
	for i, n := range l.names {
		if slices.Contains(l.names[:i], n) {
			return false
		}
	}
	return true
}

func (l nameSet) has(n string) bool {
	if l.set != nil {
		_, ok := l.set[n]
		return ok
	}
	return slices.Contains(l.names, n)
}
