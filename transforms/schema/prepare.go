package schema

import (
	"net/url"
	"strconv"
	"strings"
)

// The first pass of a rewrite works on the schema as a tree, for what
// moves things around (references into $defs, a union for a type list
// with properties, a value the dialect cannot express sent as a JSON
// string): the keyword writer after it rewrites keyword by keyword in
// place. The pass also marks, on the tree, what the restoration of
// arguments must undo (undo.go): encoded values and renamed properties.

// prep is one schema's first pass.
type prep struct {
	r    *schemaRules
	root *tnode
	// notes name what was done, for the decision.
	notes map[string]bool
	// encoded are the schemas sent as JSON strings; renamed the objects
	// whose properties got new names (upstream name → the tool's).
	encoded map[*tnode]string // "any" or "object"
	renamed map[*tnode]map[string]string
	// recursive are the $defs entries that refer to themselves, by
	// reference ("#/$defs/a"); "#" always is.
	recursive map[string]bool
	// unfit names the first keyword strict mode cannot take, "" if none.
	unfit string
	// badRef is a local reference that resolves to nothing, where the
	// dialect resolves references itself and would refuse it.
	badRef string
	depth  int
	// cloned counts the nodes copied to inline references beside
	// keywords; past cloneBudget a reference keeps no siblings, as a
	// recursive one: each copy is walked, and may inline copies of its
	// own, which doubles per level without a bound.
	cloned int
	// nulls memoizes allowsNull by node (nullPending while computed);
	// judged counts the schemas it judged, once each.
	nulls  map[*tnode]uint8
	judged int
}

// cloneBudget is the most nodes the first pass copies for a schema of
// size bytes: the writer's own bound on what inlining may grow to.
func cloneBudget(size int) int { return max(1<<16, 8*size) }

// clone copies n for another place in the schema, with what the pass
// recorded of the nodes copied (renamed properties, encoded values): a
// target already walked keeps its undo in the copy.
func (p *prep) clone(n *tnode) *tnode {
	c := &tnode{raw: n.raw, kind: n.kind, dirty: n.dirty}
	p.cloned++
	if what, ok := p.encoded[n]; ok {
		p.encoded[c] = what
	}
	if m, ok := p.renamed[n]; ok {
		p.renamed[c] = m
	}
	if n.kind != 0 {
		c.keys = append([]string(nil), n.keys...)
		c.vals = make([]*tnode, len(n.vals))
		for i, v := range n.vals {
			c.vals[i] = p.clone(v)
		}
	}
	return c
}

func (p *prep) note(what string) {
	if p.notes == nil {
		p.notes = map[string]bool{}
	}
	p.notes[what] = true
}

// prepare runs the first pass over a function's parameters; it reports
// whether it changed anything.
func (p *prep) prepare() bool {
	r := p.r
	if r.refsToDefs {
		p.moveRefs()
	}
	if r.refSiblings {
		p.findRecursive()
	}
	p.root = p.walk(p.root, true, "")
	return p.root.dirty
}

// Keywords whose value is one schema, a list of them, or a map of them.
const (
	schemaOne = iota + 1
	schemaList
	schemaMap
)

var schemaKeywords = map[string]uint8{
	"items": schemaOne, "additionalItems": schemaOne, "unevaluatedItems": schemaOne, "contains": schemaOne,
	"not": schemaOne, "if": schemaOne, "then": schemaOne, "else": schemaOne, "propertyNames": schemaOne,
	"additionalProperties": schemaOne, "unevaluatedProperties": schemaOne,
	"prefixItems": schemaList, "allOf": schemaList, "anyOf": schemaList, "oneOf": schemaList,
	"properties": schemaMap, "patternProperties": schemaMap, "$defs": schemaMap, "definitions": schemaMap,
	"dependentSchemas": schemaMap,
}

// children calls fn for every schema position directly below the schema
// object n; fn returns the schema to put there.
// Containers of a changed schema are marked changed too.
func children(n *tnode, fn func(c *tnode, kw string) *tnode) {
	each := func(v *tnode, k string) {
		for j, e := range v.vals {
			if v.vals[j] = fn(e, k); v.vals[j].dirty {
				v.dirty, n.dirty = true, true
			}
		}
	}
	for i, k := range n.keys {
		v := n.vals[i]
		switch kind := schemaKeywords[k]; {
		case kind == schemaOne:
			if v.kind == '[' { // items as a list (draft 4 tuples)
				each(v, k)
			} else if n.vals[i] = fn(v, k); n.vals[i].dirty {
				n.dirty = true
			}
		case kind == schemaList && v.kind == '[', kind == schemaMap && v.kind == '{':
			each(v, k)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// walk rewrites the schema n (children first) and returns what stands in
// its place.
func (p *prep) walk(n *tnode, root bool, kw string) *tnode {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxSchemaNesting {
		return n // the writer refuses it
	}
	r := p.r
	if n.kind != '{' {
		if n.kind == 0 && (n.text() == "true" || n.text() == "false") {
			if r.untypedStrictOff && p.unfit == "" && n.text() == "true" {
				p.unfit = "a schema that takes any value"
			}
			if r.encodeOpaque && !root && kw != "additionalProperties" && kw != "unevaluatedProperties" {
				// (false, which nothing satisfies, has no spelling; the
				// writer would make it {}. A closed object's false stays.)
				return p.encode(n, nil)
			}
		}
		return n
	}
	if root && r.inline {
		p.inlineRoot(n)
	}
	if t := n.get("type"); t != nil && t.kind == '[' && (r.encodeOpaque || r.enumType) {
		// Only names are types; a list of one type is that type
		// (["null"] is null, not a nullable schema of no type).
		var names []*tnode
		for _, e := range t.vals {
			if s, ok := e.str(); ok && s != "" {
				names = append(names, e)
			}
		}
		switch {
		case len(names) == 1:
			n.set("type", names[0])
		case len(names) > 1 && len(names) < len(t.vals):
			n.set("type", &tnode{kind: '[', dirty: true, vals: names})
		}
	}
	if t := n.get("type"); t != nil && namesNoType(t) && (r.encodeOpaque || r.enumType) {
		// A type that names none ("", [], [true]): the schema is
		// untyped, and gets what untyped schemas get here.
		n.del("type")
		p.note("type")
	}
	if r.refSiblings {
		// Before the children: the target comes in as the client wrote
		// it, and is rewritten here like any schema of this place.
		if m := p.refSibling(n); m != nil {
			n = m
		}
	}
	if r.encodeOpaque && !root && opaque(n) && (n.has("type") || impliedType(n) == "") {
		// Sent as JSON text, told by the tool's own schema: what is
		// below is the model's to write as the tool wants it, not
		// rewritten (a map of maps is described as it is, and decoded
		// whole).
		return p.encode(n, n)
	}
	children(n, func(c *tnode, kw string) *tnode { return p.walk(c, false, kw) })
	if r.oneOfToAnyOf {
		if v := n.get("oneOf"); v != nil && !n.has("anyOf") {
			// Exactly one branch becomes at least one: a value that fits
			// two branches is taken where the tool's schema said no,
			// which the tool checks anyway.
			n.del("oneOf")
			n.set("anyOf", v)
			p.note("oneOf_to_anyOf")
		}
	}
	if r.exclusiveBounds {
		p.exclusive(n, "exclusiveMinimum", "minimum", 1)
		p.exclusive(n, "exclusiveMaximum", "maximum", -1)
	}
	if (r.enumType || r.encodeOpaque) && !n.has("type") && !n.has("anyOf") && !n.has("$ref") {
		t := enumType(n.get("enum"))
		if t == "" && n.get("const") != nil {
			t = enumType(&tnode{kind: '[', vals: []*tnode{n.get("const")}})
		}
		if t == "" {
			t = impliedType(n)
		}
		if t != "" {
			n.set("type", strNode(t))
			p.note("implied_type")
		} else if r.enumType && n.has("enum") {
			p.splitEnum(n)
		}
	}
	if len(r.reservedProps) > 0 {
		p.rename(n)
	}
	if t := n.get("type"); root && r.rootObject && t != nil && t.kind == '[' && listHasObject(t) {
		// Arguments are an object, never null nor anything else.
		n.set("type", strNode("object"))
		p.note("root_object")
	}
	if root && r.rootObject && r.anyOfAlone && !n.has("properties") && !n.has("type") {
		p.mergeRootUnion(n)
	}
	if root && r.rootObject && r.anyOfAlone && n.has("anyOf") && (n.has("properties") || n.has("type")) {
		// The root must be an object schema, and a union takes nothing
		// beside it: the union's constraint goes, told.
		p.tell(n, "anyOf: "+compactSchema(n.get("anyOf")))
		n.del("anyOf")
		p.note("root_anyOf_told")
	}
	if r.untypedStrictOff && p.unfit == "" {
		p.unfit = strictUnfit(n)
	}
	if r.anyOfBranches {
		p.annotateBranches(n)
	}
	if r.encodeOpaque && !root {
		if opaque(n) {
			return p.encode(n, n)
		}
		if m := p.opaqueRef(n); m != nil {
			return p.encode(m, m)
		}
	}
	return n
}

// opaqueRef is the schema a reference stands for, merged with the
// keywords beside it, when that is one the dialect cannot write (the
// writer inlines every other reference); nil otherwise.
func (p *prep) opaqueRef(n *tnode) *tnode {
	ref, ok := n.get("$ref").str()
	if !ok || ref == "#" {
		return nil
	}
	t := p.chainEnd(ref)
	if t == nil || t == n || t == p.root {
		return nil
	}
	var m *tnode
	switch {
	case t.kind == 0 && (t.text() == "true" || t.text() == "false"):
		// (false, which nothing satisfies, is written as {} here.)
		m = &tnode{kind: '{', dirty: true}
	case t.kind == '{' && !t.has("$ref"):
		// A shallow copy to judge it: only a schema that goes as JSON
		// text is built from it, and that reads no more than its top.
		m = &tnode{kind: '{', dirty: true, keys: append([]string(nil), t.keys...), vals: append([]*tnode(nil), t.vals...)}
	default:
		return nil
	}
	for i, k := range n.keys {
		if k != "$ref" {
			m.set(k, n.vals[i])
		}
	}
	if !m.has("type") {
		if it := impliedType(m); it != "" {
			return nil // typed once written
		}
	}
	if !opaque(m) {
		return nil
	}
	return m
}

// namesNoType reports whether a type member names no type at all.
func namesNoType(t *tnode) bool {
	if t.kind == '[' {
		for _, e := range t.vals {
			if s, ok := e.str(); ok && s != "" {
				return false
			}
		}
		return true
	}
	s, ok := t.str()
	return !ok || s == ""
}

// exclusive turns an exclusive bound into the inclusive keyword: exactly
// for an integer, told in the description for a number.
func (p *prep) exclusive(n *tnode, kw, incl string, step int) {
	v := n.get(kw)
	if v == nil {
		return
	}
	bound := v
	if v.text() == "true" || v.text() == "false" {
		// Draft 4: a flag on the inclusive keyword.
		n.del(kw)
		p.note("exclusive_bounds")
		if v.text() == "false" || n.get(incl) == nil {
			return
		}
		bound = n.get(incl)
	} else {
		n.del(kw)
		p.note("exclusive_bounds")
	}
	if _, err := strconv.ParseFloat(bound.text(), 64); err != nil {
		return
	}
	if isIntegerSchema(n) {
		if k, err := strconv.ParseInt(bound.text(), 10, 64); err == nil {
			n.set(incl, scalar(strconv.FormatInt(k+int64(step), 10)))
			return
		}
	}
	n.set(incl, scalar(bound.text()))
	word := "greater than "
	if step < 0 {
		word = "less than "
	}
	p.tell(n, "must be "+word+bound.text())
}

// tell adds a sentence about a constraint to the schema's description.
func (p *prep) tell(n *tnode, what string) {
	d, _ := n.get("description").str()
	if d != "" {
		d += " "
	}
	n.set("description", strNode(d+"("+what+")"))
}

func isIntegerSchema(n *tnode) bool {
	t := n.get("type")
	if t.isStr("integer") {
		return true
	}
	if t != nil && t.kind == '[' {
		for _, e := range t.vals {
			if e.isStr("integer") {
				return true
			}
		}
	}
	return false
}

// enumType is the one JSON type of an enum's values, "" when they mix.
func enumType(e *tnode) string {
	if e == nil || e.kind != '[' || len(e.vals) == 0 {
		return ""
	}
	t := ""
	for _, v := range e.vals {
		var vt string
		switch {
		case v.kind != 0:
			return ""
		case v.raw[0] == '"':
			vt = "string"
		case v.text() == "true" || v.text() == "false":
			vt = "boolean"
		case v.text() == "null":
			continue
		case strings.ContainsAny(v.text(), ".eE"):
			vt = "number"
		default:
			vt = "integer"
		}
		switch {
		case t == "" || t == vt:
			t = vt
		case t == "integer" && vt == "number" || t == "number" && vt == "integer":
			t = "number"
		default:
			return ""
		}
	}
	return t
}

// rename gives properties with a name the dialect reserves another one,
// recorded so the arguments get the tool's names back.
func (p *prep) rename(n *tnode) {
	props := n.get("properties")
	if props == nil || props.kind != '{' {
		return
	}
	for i, k := range props.keys {
		if !contains(p.r.reservedProps, k) {
			continue
		}
		nk := k + "_"
		for props.has(nk) {
			nk += "_"
		}
		props.keys[i] = nk
		props.dirty, n.dirty = true, true
		if req := n.get("required"); req != nil && req.kind == '[' {
			for j, e := range req.vals {
				if e.isStr(k) {
					req.vals[j] = strNode(nk)
					req.dirty = true
				}
			}
		}
		if p.renamed == nil {
			p.renamed = map[*tnode]map[string]string{}
		}
		if p.renamed[n] == nil {
			p.renamed[n] = map[string]string{}
		}
		p.renamed[n][nk] = k
		p.note("rename_reserved")
	}
}

// mergeRootUnion writes a root union of object schemas as one object
// schema, where the root must be an object and a union takes nothing
// beside it (Kimi): every branch's properties, the names all of them
// require, the union told in the description.
func (p *prep) mergeRootUnion(n *tnode) {
	u := n.get("anyOf")
	if u == nil {
		u = n.get("oneOf")
	}
	if u == nil || u.kind != '[' || len(u.vals) == 0 {
		return
	}
	props := &tnode{kind: '{', dirty: true}
	seen := map[string]bool{}
	var required []string
	for i, b := range u.vals {
		bp := b.get("properties")
		if b.kind != '{' || !(b.get("type").isStr("object") || b.get("type") == nil && bp != nil) || bp != nil && bp.kind != '{' {
			return
		}
		if bp != nil {
			for j, k := range bp.keys {
				if !seen[k] {
					seen[k] = true
					props.keys = append(props.keys, k)
					props.vals = append(props.vals, bp.vals[j])
				}
			}
		}
		var names []string
		if req := b.get("required"); req != nil && req.kind == '[' {
			for _, e := range req.vals {
				if s, ok := e.str(); ok {
					names = append(names, s)
				}
			}
		}
		if i == 0 {
			required = names
			continue
		}
		in := make(map[string]bool, len(names))
		for _, k := range names {
			in[k] = true
		}
		kept := required[:0]
		for _, k := range required {
			if in[k] {
				kept = append(kept, k)
			}
		}
		required = kept
	}
	p.tell(n, "one of: "+compactSchema(u))
	n.del("anyOf")
	n.del("oneOf")
	n.set("type", strNode("object"))
	n.set("properties", props)
	if len(required) > 0 {
		req := &tnode{kind: '[', dirty: true}
		for _, k := range required {
			req.vals = append(req.vals, strNode(k))
		}
		n.set("required", req)
	}
	p.note("root_union_merged")
}

// strictUnfit names what in the schema object n strict mode cannot take.
func strictUnfit(n *tnode) string {
	for _, k := range []string{"allOf", "not", "if", "then", "else", "dependentSchemas", "dependentRequired", "patternProperties", "unevaluatedProperties", "unevaluatedItems", "propertyNames", "contains", "oneOf"} {
		if n.has(k) {
			return k
		}
	}
	if !n.has("type") && !n.has("anyOf") && !n.has("$ref") {
		return "a schema without a type"
	}
	return ""
}

// splitEnum writes an enum of values of several types, without a type,
// as a union of one typed enum per type, in the order the types first
// appear: a dialect that wants every schema typed (Kimi) takes that.
func (p *prep) splitEnum(n *tnode) {
	e := n.get("enum")
	if e == nil || e.kind != '[' {
		return
	}
	var types []string
	byType := map[string]*tnode{}
	for _, v := range e.vals {
		t := enumType(&tnode{kind: '[', vals: []*tnode{v}})
		if v.text() == "null" {
			t = "null"
		}
		if t == "" {
			return // an object or array value: left as it is
		}
		if t == "integer" {
			t = "number"
		}
		if byType[t] == nil {
			byType[t] = &tnode{kind: '[', dirty: true}
			types = append(types, t)
		}
		byType[t].vals = append(byType[t].vals, v)
	}
	u := &tnode{kind: '[', dirty: true}
	for _, t := range types {
		b := objNode("type", strNode(t))
		if t != "null" {
			b.set("enum", byType[t])
		}
		u.vals = append(u.vals, b)
	}
	n.del("enum")
	n.set("anyOf", u)
	p.note("enum_split_by_type")
}

// impliedType is the one type the keywords of an untyped schema apply
// to (a format or a pattern: a string), "" when there is none.
func impliedType(n *tnode) string {
	if n.has("$ref") || n.has("anyOf") || n.has("oneOf") || n.has("allOf") || n.has("enum") || n.has("const") {
		return ""
	}
	found := ""
	for _, k := range n.keys {
		t := typeKeywords[k]
		if t == "" || k == "required" {
			continue // (required alone: a branch naming its parent's properties)
		}
		if found != "" && found != t {
			return ""
		}
		found = t
	}
	return found
}

// opaque reports whether the schema object is one Gemini's Schema cannot
// write: a map (extra keys under a schema, no properties) or an untyped
// value (no type, union, enum or reference).
func opaque(n *tnode) bool {
	if n.has("$ref") || n.has("anyOf") || n.has("oneOf") || n.has("allOf") || n.has("enum") || n.has("const") {
		return false
	}
	props := n.get("properties")
	noProps := props == nil || props.kind == '{' && len(props.keys) == 0
	t := n.get("type")
	if t == nil {
		return noProps
	}
	// An object without properties: a map, or an empty object.
	return noProps && (t.isStr("object") || t.kind == '[' && listHasObject(t))
}

func listHasObject(t *tnode) bool {
	for _, e := range t.vals {
		if e.isStr("object") {
			return true
		}
	}
	return false
}

// encode puts a string in the place of a schema the dialect cannot
// write: the model is told to write the value as JSON text, which the
// restoration decodes.
func (p *prep) encode(n, obj *tnode) *tnode {
	what := "any JSON value"
	if obj != nil {
		t := obj.get("type")
		if t.isStr("object") || t != nil && t.kind == '[' && listHasObject(t) {
			what = "a JSON object"
			if ap := obj.get("additionalProperties"); ap != nil && ap.kind == '{' {
				if ref, ok := ap.get("$ref").str(); ok && len(ap.keys) == 1 {
					// References go with $defs: the values' own schema.
					if t := p.chainEnd(ref); t != nil {
						ap = t
					}
				}
				what += " whose values follow " + compactSchema(ap)
			} else if pn := obj.get("patternProperties"); pn != nil {
				what += " whose members follow " + compactSchema(pn)
			}
		}
	}
	desc := ""
	if obj != nil {
		desc, _ = obj.get("description").str()
	}
	if desc != "" {
		desc += " "
	}
	s := objNode("type", strNode("string"), "description", strNode(desc+"(write "+what+" as JSON text)"))
	if obj != nil {
		if t, ok := obj.get("title").str(); ok {
			s.set("title", strNode(t))
		}
		if nl := obj.get("nullable"); nl != nil {
			s.set("nullable", nl)
		}
		if t := obj.get("type"); t != nil && t.kind == '[' {
			for _, e := range t.vals {
				if e.isStr("null") {
					s.set("nullable", scalar("true"))
				}
			}
		}
	}
	if p.encoded == nil {
		p.encoded = map[*tnode]string{}
	}
	p.encoded[s] = "any"
	if what != "any JSON value" {
		p.encoded[s] = "object"
	}
	p.note("encode_as_json_text")
	return s
}

// compactSchema is a short rendering of a schema for a description.
func compactSchema(n *tnode) string {
	b := n.append(nil)
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// annotateBranches moves a union's description and title into its
// branches, where Gemini takes them.
func (p *prep) annotateBranches(n *tnode) {
	any := n.get("anyOf")
	if any == nil || any.kind != '[' {
		return
	}
	for _, k := range []string{"description", "title", "nullable"} {
		v := n.get(k)
		if v == nil {
			continue
		}
		n.del(k)
		for _, b := range any.vals {
			if b.kind == '{' && !b.has(k) && !(b.get("type").isStr("null") && len(b.keys) == 1) {
				b.set(k, v)
			}
		}
		any.dirty = true
		p.note("anyOf_annotations_to_branches")
	}
}

// refSibling rewrites a reference with keywords beside it, which strict
// mode refuses: the target inlined under them when it does not refer to
// itself, else the reference alone. nil: nothing to do.
func (p *prep) refSibling(n *tnode) *tnode {
	ref, ok := n.get("$ref").str()
	if !ok {
		return nil
	}
	extra := false
	for _, k := range n.keys {
		if k != "$ref" && !contains(p.r.refKeeps, k) {
			extra = true
		}
	}
	if !extra {
		return nil
	}
	overBudget := p.cloned > cloneBudget(len(p.root.raw))
	if (p.recursive[ref] || ref == "#" || overBudget) && n != p.root {
		m := objNode("$ref", strNode(ref))
		for i, k := range n.keys {
			if contains(p.r.refKeeps, k) || k == "$defs" && n == p.root {
				m.set(k, n.vals[i])
			}
		}
		p.note("ref_siblings_dropped")
		return m
	}
	target := p.chainEnd(ref)
	if target == nil || target.kind != '{' || target == n {
		return nil
	}
	m := p.clone(target)
	m.dirty = true
	for i, k := range n.keys {
		if k != "$ref" {
			m.set(k, n.vals[i])
		}
	}
	p.note("ref_siblings_inlined")
	return m
}

// chainEnd resolves ref, following a chain of references to the schema
// at its end, short of a recursive one.
func (p *prep) chainEnd(ref string) *tnode {
	target := p.pointer(ref)
	for hops := 0; target != nil && target.kind == '{' && len(target.keys) == 1 && hops < 64; hops++ {
		next, ok := target.get("$ref").str()
		if !ok || p.recursive[next] || next == "#" {
			break
		}
		target = p.pointer(next)
	}
	return target
}

// inlineRoot resolves a reference at the root where references are
// inlined, so that the root is read for what it is (an object, a map):
// its target's members, the root's own winning.
func (p *prep) inlineRoot(n *tnode) {
	ref, ok := n.get("$ref").str()
	if !ok || ref == "#" {
		return
	}
	target := p.chainEnd(ref)
	if target == nil || target.kind != '{' || target == n || target.has("$ref") {
		return // unresolved, recursive or boolean: the writer says so
	}
	n.del("$ref")
	for i, k := range target.keys {
		if !n.has(k) {
			n.set(k, p.clone(target.vals[i]))
		}
	}
	p.note("inline_refs")
}

// pointer resolves a local reference in the tree; nil when it does not.
func (p *prep) pointer(ref string) *tnode {
	if ref == "#" {
		return p.root
	}
	if !strings.HasPrefix(ref, "#/") {
		return nil
	}
	n := p.root
	for _, tok := range strings.Split(ref[2:], "/") {
		if strings.IndexByte(tok, '%') >= 0 {
			if dec, err := url.PathUnescape(tok); err == nil {
				tok = dec
			}
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch n.kind {
		case '{':
			n = n.get(tok)
		case '[':
			k, err := strconv.Atoi(tok)
			if err != nil || k < 0 || k >= len(n.vals) {
				return nil
			}
			n = n.vals[k]
		default:
			return nil
		}
		if n == nil {
			return nil
		}
	}
	return n
}

// defRef reports whether ref names a $defs (or definitions) entry
// directly, the form strict mode and Kimi resolve.
func defRef(ref string, defsOnly bool) bool {
	pres := []string{"#/$defs/", "#/definitions/"}
	if defsOnly {
		pres = pres[:1]
	}
	for _, pre := range pres {
		if rest, ok := strings.CutPrefix(ref, pre); ok && rest != "" && !strings.Contains(rest, "/") {
			return true
		}
	}
	return false
}

// eachRef calls fn on every $ref member's value node under n, at schema
// positions and in $defs.
func eachRef(n *tnode, depth int, fn func(owner *tnode, ref string)) {
	if n.kind != '{' || depth > maxSchemaNesting {
		return
	}
	if ref, ok := n.get("$ref").str(); ok {
		fn(n, ref)
	}
	children(n, func(c *tnode, _ string) *tnode {
		eachRef(c, depth+1, fn)
		return c
	})
}

// moveRefs gives every local reference that points elsewhere than a
// $defs entry (zod's "#/properties/a") a $defs entry of its own and
// points it there: strict mode and Kimi resolve only those, and recursion
// through them is what they can express.
func (p *prep) moveRefs() {
	if p.root.kind != '{' {
		return
	}
	targets := map[string]string{} // ref → its $defs name
	var order []string
	eachRef(p.root, 0, func(_ *tnode, ref string) {
		if ref != "#" && !strings.HasPrefix(ref, "#/") {
			// Outside the document, or an anchor ("#a"): nothing strict
			// mode or Kimi resolves.
			if p.r.untypedStrictOff && p.unfit == "" {
				p.unfit = "a reference outside the document"
			}
			if p.r.defsOnly && p.badRef == "" {
				p.badRef = ref
			}
			return
		}
		if ref == "#" || defRef(ref, p.r.defsOnly) {
			return
		}
		if _, ok := targets[ref]; !ok {
			targets[ref] = ""
			order = append(order, ref)
		}
	})
	if len(order) == 0 {
		return
	}
	defs := p.root.get("$defs")
	if defs == nil || defs.kind != '{' {
		defs = &tnode{kind: '{', dirty: true}
	}
	var copies []*tnode
	var names []string
	taken := make(map[string]bool, len(defs.keys)+len(order))
	for _, k := range defs.keys {
		taken[k] = true
	}
	for _, ref := range order {
		t := p.pointer(ref)
		if t == nil {
			if p.badRef == "" {
				p.badRef = ref
			}
			continue
		}
		toks := strings.Split(ref, "/")
		base := strings.ReplaceAll(strings.ReplaceAll(toks[len(toks)-1], "~1", "_"), "~0", "_")
		if base == "" {
			base = "def"
		}
		name := base
		for k := 2; taken[name]; k++ {
			name = base + "_" + strconv.Itoa(k)
		}
		taken[name] = true
		targets[ref] = name
		copies = append(copies, p.clone(t))
		names = append(names, name)
	}
	for i, c := range copies {
		c.dirty = true
		defs.keys = append(defs.keys, names[i])
		defs.vals = append(defs.vals, c)
	}
	defs.dirty = true
	p.root.set("$defs", defs)
	eachRef(p.root, 0, func(owner *tnode, ref string) {
		if name := targets[ref]; name != "" {
			owner.set("$ref", strNode("#/$defs/"+escapeToken(name)))
		}
	})
	if p.r.defsOnly {
		// Every reference into definitions points into $defs now.
		p.root.del("definitions")
	}
	markDirty(p.root)
	p.note("refs_to_defs")
}

func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// markDirty marks every container dirty that holds a dirty one.
func markDirty(n *tnode) bool {
	d := n.dirty
	for _, v := range n.vals {
		if markDirty(v) {
			d = true
		}
	}
	n.dirty = d
	return d
}

// findRecursive marks the $defs entries that reach themselves through
// references: one pass collects each entry's references, and a
// strongly-connected-components walk finds the cycles (linear in the
// entries and references).
func (p *prep) findRecursive() {
	p.recursive = map[string]bool{}
	edges := map[string][]string{}
	var nodes []string
	isNode := map[string]bool{}
	for _, kw := range []string{"$defs", "definitions"} {
		d := p.root.get(kw)
		if d == nil || d.kind != '{' {
			continue
		}
		for i, k := range d.keys {
			ref := "#/" + kw + "/" + escapeToken(k)
			nodes = append(nodes, ref)
			isNode[ref] = true
			eachRef(d.vals[i], 0, func(_ *tnode, to string) {
				edges[ref] = append(edges[ref], to)
			})
		}
	}
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	next := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range edges[v] {
			if w == v {
				p.recursive[v] = true
			}
			if _, seen := index[w]; !seen {
				if isNode[w] {
					visit(w)
					low[v] = min(low[v], low[w])
				}
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
			if w == "#" {
				p.recursive[v] = true
			}
		}
		if low[v] == index[v] {
			var comp []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 {
				for _, w := range comp {
					p.recursive[w] = true
				}
			}
		}
	}
	for _, v := range nodes {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
}
