package schema

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// A rewrite that loses something a model's arguments then carry in the
// rewritten form (a null strict mode made it send for an optional
// member, an integer enum value sent as a string, a map sent as JSON
// text, a property under another name) records how to undo it, per
// request: an undo tree mirroring the schema, kept in the exchange. A
// call to such a tool is held until its arguments are complete, given
// back in the tool's own schema, and sent on; every other call streams
// as it comes.

// undo is what to undo in the value at one schema position. It outlives
// the request's body, which the names the tree read alias (the body's
// buffer serves another request once sent): every name it keeps is its
// own copy.
type undo struct {
	props    map[string]*undo  // by the member's name upstream
	names    map[string]string // upstream name → the tool's
	dropNull map[string]bool   // by upstream name: a null there is the rewrite's
	items    *undo
	tuple    []*undo           // items (or prefixItems) as a list: by position
	extra    *undo             // additionalProperties' values
	all      []*undo           // allOf and a reference's target: each applies
	any      []branch          // anyOf and oneOf, every branch, nil undo or not
	enums    map[string]string // the string sent → the enum value's JSON text
	decode   bool              // the value travels as JSON text
	anyValue bool              // decode: the tool takes any value, a string too
	unwrap   string            // the root's arguments travel as this member's JSON text
}

// branch is one of a union's: its undo (nil: nothing to undo) and the
// values the rewritten branch takes, by which the value's branch is told.
type branch struct {
	u     *undo
	shape shape
}

// shape is what a model bound to a rewritten schema writes there: the
// JSON kinds it takes (0: any), and for an object the members it
// declares (by their upstream names) and requires; closed: it takes no
// others.
type shape struct {
	kinds    uint8
	declared map[string]bool
	required []string
	closed   bool
}

const (
	kindObject uint8 = 1 << iota
	kindArray
	kindString
	kindNumber
	kindBool
	kindNull
)

var kindOfType = map[string]uint8{
	"object": kindObject, "array": kindArray, "string": kindString,
	"number": kindNumber, "integer": kindNumber, "boolean": kindBool, "null": kindNull,
}

// kindOf is the JSON kind of a value.
func kindOf(v *tnode) uint8 {
	switch {
	case v.kind == '{':
		return kindObject
	case v.kind == '[':
		return kindArray
	case len(v.raw) == 0:
		return 0
	}
	switch v.raw[0] {
	case '"':
		return kindString
	case 't', 'f':
		return kindBool
	case 'n':
		return kindNull
	}
	return kindNumber
}

// fits reports whether the value v is one the branch's shape takes.
func (s *shape) fits(v *tnode) bool {
	if s.kinds != 0 && s.kinds&kindOf(v) == 0 {
		return false
	}
	if v.kind != '{' || s.declared == nil {
		return true
	}
	if s.closed {
		for _, k := range v.keys {
			if !s.declared[k] {
				return false
			}
		}
	}
	for _, k := range s.required {
		if !v.has(k) {
			return false
		}
	}
	return true
}

// shapeOf is the shape of the rewritten schema n, whose undo is u.
func (b *undoBuilder) shapeOf(n *tnode, u *undo) shape {
	for hops := 0; hops < 64 && n != nil && n.kind == '{'; hops++ {
		ref, ok := n.get("$ref").str()
		if !ok || n.has("type") || n.has("properties") {
			break
		}
		n = b.p.pointer(ref)
	}
	var s shape
	if n == nil || n.kind != '{' {
		return s
	}
	if _, ok := b.p.encoded[n]; ok {
		return s // a string, or the value itself when the model wrote it
	}
	switch t := n.get("type"); {
	case t == nil:
	case t.kind == '[':
		for _, e := range t.vals {
			if name, ok := e.str(); ok {
				s.kinds |= kindOfType[name]
			}
		}
	default:
		name, _ := t.str()
		s.kinds = kindOfType[name]
	}
	if s.kinds != 0 && (n.get("nullable").text() == "true") {
		s.kinds |= kindNull
	}
	if s.kinds != 0 && u != nil && len(u.enums) > 0 {
		s.kinds |= kindString // enum values sent as strings
	}
	if props := n.get("properties"); props != nil && props.kind == '{' && s.kinds&^(kindObject|kindNull) == 0 {
		s.declared = make(map[string]bool, len(props.keys))
		for _, k := range props.keys {
			s.declared[strings.Clone(k)] = true
		}
		closing := b.strict && b.p.r.requireAll && b.p.r.closeObjects
		s.closed = closing || n.get("additionalProperties").text() == "false"
		if closing {
			for _, k := range props.keys {
				s.required = append(s.required, strings.Clone(k))
			}
		} else if req := n.get("required"); req != nil && req.kind == '[' {
			for _, e := range req.vals {
				if k, ok := e.str(); ok && s.declared[k] {
					s.required = append(s.required, strings.Clone(k))
				}
			}
		}
	}
	return s
}

// undoBuilder builds the undo tree of one prepared schema.
type undoBuilder struct {
	p      *prep
	strict bool // requireAll applies
	memo   map[*tnode]*undo
	depth  int
}

// build returns the undo tree of the schema n, nil when its arguments
// come back as the tool's schema wants them.
func (b *undoBuilder) build(n *tnode) *undo {
	if n == nil {
		return nil
	}
	if what, ok := b.p.encoded[n]; ok {
		return &undo{decode: true, anyValue: what == "any"}
	}
	if n.kind != '{' {
		return nil
	}
	if u, ok := b.memo[n]; ok {
		return u
	}
	b.depth++
	defer func() { b.depth-- }()
	if b.depth > maxSchemaNesting {
		return nil
	}
	u := &undo{}
	b.memo[n] = u // a recursive schema shares its undo
	r := b.p.r
	if ref, ok := n.get("$ref").str(); ok {
		if c := b.build(b.p.pointer(ref)); c != nil {
			u.all = append(u.all, c)
		}
	}
	for _, kw := range []string{"allOf"} {
		if l := n.get(kw); l != nil && l.kind == '[' {
			for _, e := range l.vals {
				if c := b.build(e); c != nil {
					u.all = append(u.all, c)
				}
			}
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if l := n.get(kw); l != nil && l.kind == '[' {
			some := false
			for _, e := range l.vals {
				c := b.build(e)
				some = some || c != nil
				u.any = append(u.any, branch{c, b.shapeOf(e, c)})
			}
			if !some {
				u.any = u.any[:len(u.any)-len(l.vals)]
			}
		}
	}
	if ap := n.get("additionalProperties"); ap != nil && ap.kind == '{' {
		u.extra = b.build(ap)
	}
	props := n.get("properties")
	if props != nil && props.kind == '{' {
		renamed := b.p.renamed[n]
		required := map[string]bool{}
		if req := n.get("required"); req != nil && req.kind == '[' {
			for _, e := range req.vals {
				if s, ok := e.str(); ok {
					required[s] = true
				}
			}
		}
		closing := b.strict && r.requireAll && r.closeObjects
		for i, k := range props.keys {
			v := props.vals[i]
			if c := b.build(v); c != nil || u.extra != nil {
				// (With a schema for the other members, every declared
				// one is listed, so that it does not take that schema.)
				if u.props == nil {
					u.props = map[string]*undo{}
				}
				u.props[strings.Clone(k)] = c
			}
			if orig, ok := renamed[k]; ok {
				if u.names == nil {
					u.names = map[string]string{}
				}
				u.names[strings.Clone(k)] = strings.Clone(orig)
			}
			if closing && !required[k] && !(v.kind == '{' && v.get("required").text() == "true") && !b.p.allowsNull(v) {
				if u.dropNull == nil {
					u.dropNull = map[string]bool{}
				}
				u.dropNull[strings.Clone(k)] = true
			}
		}
	}
	for _, kw := range []string{"prefixItems", "items"} {
		it := n.get(kw)
		switch {
		case it == nil:
		case it.kind == '[' && u.tuple == nil:
			for _, e := range it.vals {
				u.tuple = append(u.tuple, b.build(e))
			}
			if !hasUndoList(u.tuple) {
				u.tuple = nil
			}
		case it.kind != '[':
			u.items = b.build(it)
		}
	}
	if r.enumString {
		if e := n.get("enum"); e != nil && e.kind == '[' {
			for _, v := range e.vals {
				u.enumValue(v)
			}
		}
	}
	if r.constEnum {
		if c := n.get("const"); c != nil {
			u.enumValue(c)
		}
	}
	if u.empty() {
		// Still shared through the memo by a recursive schema: harmless,
		// it undoes nothing.
		return nil
	}
	return u
}

// enumValue records an enum value the dialect sends as a string (any
// but a string or null): its JSON text, which is also the string (10 goes
// as "10", [1, 2] as "[1, 2]"); a list or an object also by its compact
// text, as a model may write it.
func (u *undo) enumValue(v *tnode) {
	if v.kind == 0 && (len(v.raw) == 0 || v.raw[0] == '"' || v.text() == "null") {
		return
	}
	if u.enums == nil {
		u.enums = map[string]string{}
	}
	text := string(v.append(nil))
	u.enums[text] = text
	if v.kind != 0 {
		var c bytes.Buffer
		if json.Compact(&c, v.raw) == nil {
			u.enums[c.String()] = text
		}
	}
}

func (u *undo) empty() bool {
	return !hasUndo(u.props) && len(u.names) == 0 && len(u.dropNull) == 0 && u.items == nil && u.tuple == nil && u.extra == nil &&
		len(u.all) == 0 && len(u.any) == 0 && len(u.enums) == 0 && !u.decode && u.unwrap == ""
}

const (
	nullPending uint8 = iota + 1
	nullNo
	nullYes
)

// allowsNull reports whether the tool's schema n takes null: every
// keyword of it must (a type, an enum, a const, a union, allOf, a
// reference). Each node is judged once: a schema reached again while it
// is being judged (recursion) counts as not taking null through that
// path, and unions of references to unions cost no more than the schema.
func (p *prep) allowsNull(n *tnode) bool {
	if n == nil {
		return true
	}
	if n.kind != '{' {
		return n.text() != "false"
	}
	if p.nulls == nil {
		p.nulls = map[*tnode]uint8{}
	}
	switch p.nulls[n] {
	case nullPending, nullNo:
		return false
	case nullYes:
		return true
	}
	p.nulls[n] = nullPending
	ok := p.judgeNull(n)
	p.nulls[n] = nullNo
	if ok {
		p.nulls[n] = nullYes
	}
	return ok
}

func (p *prep) judgeNull(n *tnode) bool {
	p.judged++
	if n.get("nullable").text() == "true" {
		return true
	}
	ok, said := true, false
	if t := n.get("type"); t != nil {
		said = true
		// (A name that is no type says nothing of null.)
		takes := func(e *tnode) bool {
			name, _ := e.str()
			return name == "null" || kindOfType[name] == 0
		}
		switch {
		case t.kind == '[':
			ok = false
			for _, e := range t.vals {
				ok = ok || takes(e)
			}
		case t.kind == 0:
			ok = takes(t)
		}
	}
	if e := n.get("enum"); e != nil && e.kind == '[' {
		said = true
		in := false
		for _, v := range e.vals {
			in = in || v.text() == "null"
		}
		ok = ok && in
	}
	if c := n.get("const"); c != nil {
		said = true
		ok = ok && c.text() == "null"
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if l := n.get(kw); ok && l != nil && l.kind == '[' {
			said = true
			some := false
			for _, e := range l.vals {
				if p.allowsNull(e) {
					some = true
					break
				}
			}
			ok = some
		}
	}
	if l := n.get("allOf"); ok && l != nil && l.kind == '[' {
		said = true
		for _, e := range l.vals {
			ok = ok && p.allowsNull(e)
		}
	}
	if ref, isRef := n.get("$ref").str(); ok && isRef {
		said = true
		ok = p.allowsNull(p.pointer(ref))
	}
	// Untyped with properties: an object, as tools read it.
	return ok && (said || !n.has("properties"))
}

// restoreArgs gives arguments back in the tool's own schema: args itself
// when nothing changes, and ok false (args as they came) when they cannot
// be read.
func restoreArgs(u *undo, args []byte) (out []byte, reason string) {
	i := jsonspan.SkipSpace(args, 0)
	if i == len(args) || !jsonspan.Valid(args) {
		return args, "invalid_json"
	}
	end := jsonspan.SkipValue(args, i)
	v := readTree(args, jsonspan.Span{Start: i, End: end}, 0)
	if v == nil {
		return args, "too_deep"
	}
	if u.unwrap != "" {
		// The arguments as JSON text; or the object itself when the model
		// wrote it so.
		inner := v.get(u.unwrap)
		if inner != nil && inner.kind == '{' {
			return inner.append(nil), ""
		}
		s, ok := inner.str()
		b := bytes.TrimSpace([]byte(s))
		if !ok || len(b) == 0 || !jsonspan.Valid(b) {
			return args, "json_text"
		}
		return b, ""
	}
	st := applyState{budget: 64 * (len(args) + 64)}
	nv, changed := u.apply(v, &st, 0)
	if st.fail != "" {
		return args, st.fail
	}
	if !changed {
		return args, ""
	}
	return nv.append(nil), ""
}

// applyState is one restoration's: the reason a step could not be
// undone, and the steps left. Unions are tried branch by branch, so a
// schema of unions nested in unions could make that exponential in the
// arguments' depth; the budget, a multiple of their size, bounds it.
type applyState struct {
	fail   string
	budget int
}

// apply undoes u in the value v, returning the value and whether it
// changed.
func (u *undo) apply(v *tnode, st *applyState, depth int) (*tnode, bool) {
	if u == nil {
		return v, false
	}
	if st.budget--; st.budget < 0 || depth > 2*maxSchemaNesting {
		if st.fail == "" {
			st.fail = "too_deep"
		}
		return v, false
	}
	changed := false
	if u.decode {
		s, ok := v.str()
		if !ok {
			return v, false // the model wrote the value itself: keep it
		}
		b := []byte(s)
		i := jsonspan.SkipSpace(b, 0)
		if i == len(b) || !jsonspan.Valid(b) {
			if !u.anyValue {
				st.fail = "json_text"
			}
			return v, false
		}
		d := readTree(b, jsonspan.Span{Start: i, End: jsonspan.SkipValue(b, i)}, 0)
		if d == nil {
			st.fail = "json_text"
			return v, false
		}
		d.dirty = true
		return d, true
	}
	for _, a := range u.all {
		var c bool
		v, c = a.apply(v, st, depth+1)
		changed = changed || c
	}
	if len(u.any) > 0 {
		var c bool
		if v, c = u.applyUnion(v, st, depth); c {
			changed = true
		}
		if st.fail == "too_deep" {
			return v, false
		}
	}
	// Containers are copied where something changes, never changed in
	// place: a union's branch that is tried and not taken leaves the
	// value as it was.
	switch v.kind {
	case '{':
		st.budget -= len(v.keys)
		if u.props == nil && u.names == nil && u.dropNull == nil && u.extra == nil {
			break
		}
		var keys []string
		var vals []*tnode
		for i, k := range v.keys {
			val := v.vals[i]
			drop := u.dropNull[k] && val.text() == "null"
			nk, nval := k, val
			if !drop {
				child, declared := u.props[k]
				if !declared {
					child = u.extra
				}
				if child != nil {
					if cv, c := child.apply(val, st, depth+1); c {
						nval = cv
					}
				}
				if orig, ok := u.names[k]; ok {
					nk = orig
				}
			}
			if keys == nil && (drop || nk != k || nval != val) {
				keys = append(make([]string, 0, len(v.keys)), v.keys[:i]...)
				vals = append(make([]*tnode, 0, len(v.vals)), v.vals[:i]...)
			}
			if keys != nil && !drop {
				keys, vals = append(keys, nk), append(vals, nval)
			}
		}
		if keys != nil {
			v, changed = &tnode{kind: '{', keys: keys, vals: vals}, true
		}
	case '[':
		st.budget -= len(v.vals)
		if u.items == nil && u.tuple == nil {
			break
		}
		var vals []*tnode
		for i, e := range v.vals {
			each := u.items
			if i < len(u.tuple) {
				each = u.tuple[i]
			}
			if nv, c := each.apply(e, st, depth+1); c {
				if vals == nil {
					vals = append([]*tnode(nil), v.vals...)
				}
				vals[i] = nv
			}
		}
		if vals != nil {
			v, changed = &tnode{kind: '[', vals: vals}, true
		}
	case 0:
		if s, ok := v.str(); ok && u.enums != nil {
			if text, ok := u.enums[s]; ok {
				return scalar(text), true
			}
			if t := bytes.TrimSpace([]byte(s)); len(t) > 0 && (t[0] == '[' || t[0] == '{') {
				var c bytes.Buffer
				if json.Compact(&c, t) == nil {
					if text, ok := u.enums[c.String()]; ok {
						return scalar(text), true
					}
				}
			}
		}
	}
	if changed {
		v.dirty = true
	}
	return v, changed
}

// applyUnion undoes a union in v: the first branch whose shape takes
// the value is the one the value took, and its undo applies (none, when
// it has nothing to undo); when no branch's shape takes it, the first
// branch that finds something to undo, as none can be told from the
// value.
func (u *undo) applyUnion(v *tnode, st *applyState, depth int) (*tnode, bool) {
	for _, b := range u.any {
		if b.shape.fits(v) {
			if b.u == nil {
				return v, false
			}
			return b.u.apply(v, st, depth+1)
		}
	}
	for _, b := range u.any {
		if b.u == nil {
			continue
		}
		// A branch that fails leaves no reason behind.
		try := applyState{budget: st.budget}
		nv, c := b.u.apply(v, &try, depth+1)
		st.budget = try.budget
		if try.fail == "too_deep" {
			st.fail = "too_deep"
			return v, false
		}
		if c && try.fail == "" {
			return nv, true
		}
	}
	return v, false
}

// schemaRecord is what a rule's request phase leaves its response phase:
// the undo tree of each tool whose calls need one, by the name the
// upstream calls it.
type schemaRecord struct {
	undo map[string]*undo
}

func toolKey(namespace, name string) string { return namespace + "\x00" + name }

func (t *ToolsNormalizeSchema) record(x *transforms.Exchange) *schemaRecord {
	return x.Record(t, func() any { return &schemaRecord{} }).(*schemaRecord)
}

// WantsResponse implements ResponseRewriter: only when a tool's
// arguments must be given back in its own schema.
func (t *ToolsNormalizeSchema) WantsResponse(x *transforms.Exchange) bool {
	return len(t.record(x).undo) > 0
}

// RewriteResponse implements ResponseRewriter.
func (t *ToolsNormalizeSchema) RewriteResponse(x *transforms.Exchange, body []byte) ([]byte, error) {
	rec := t.record(x)
	if len(rec.undo) == 0 {
		return body, nil
	}
	return transforms.RestoreCalls(x, argsPolicy{rec}, body), nil
}

// NewStream implements ResponseRewriter.
func (t *ToolsNormalizeSchema) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	rec := t.record(x)
	if len(rec.undo) == 0 {
		return nil
	}
	return transforms.NewCallStream(x, argsPolicy{rec})
}

// argsPolicy opens the calls of tools whose arguments need undoing.
type argsPolicy struct{ rec *schemaRecord }

// OpenCall implements transforms.CallPolicy.
func (p argsPolicy) OpenCall(x *transforms.Exchange, up transforms.ToolID) (transforms.ToolID, transforms.CallHandler, bool) {
	u := p.rec.undo[toolKey(up.Namespace, up.Name)]
	if u == nil {
		return up, nil, false
	}
	return up, &argsHandler{x: x, u: u, tool: up}, true
}

// argsHandler holds a call's arguments until they are complete: whether
// a null or a string is the rewrite's can only be told of the whole.
type argsHandler struct {
	transforms.PassArgs
	x    *transforms.Exchange
	u    *undo
	tool transforms.ToolID
}

// Delta implements CallHandler: nothing is revealed before the end.
func (h *argsHandler) Delta(frag []byte) ([]byte, error) {
	_, err := h.PassArgs.Delta(frag)
	return nil, err
}

// Finish implements CallHandler.
func (h *argsHandler) Finish(raw []byte) []byte {
	out, reason := restoreArgs(h.u, raw)
	if reason != "" {
		h.x.CountArgsUnrestored(reason)
		h.x.Decide(h.tool.Display(), "args_unrestored", reason)
	}
	return out
}

func hasUndoList(l []*undo) bool {
	for _, u := range l {
		if u != nil {
			return true
		}
	}
	return false
}

func hasUndo(m map[string]*undo) bool {
	for _, u := range m {
		if u != nil {
			return true
		}
	}
	return false
}
