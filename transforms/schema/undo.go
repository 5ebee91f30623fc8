package schema

import (
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

// undo is what to undo in the value at one schema position.
type undo struct {
	props    map[string]*undo  // by the member's name upstream
	names    map[string]string // upstream name → the tool's
	dropNull map[string]bool   // by upstream name: a null there is the rewrite's
	items    *undo
	tuple    []*undo           // items (or prefixItems) as a list: by position
	extra    *undo             // additionalProperties' values
	all      []*undo           // allOf and a reference's target: each applies
	any      []*undo           // anyOf and oneOf: the first that changes the value
	enums    map[string]string // the string sent → the enum value's JSON text
	decode   bool              // the value travels as JSON text
	anyValue bool              // decode: the tool takes any value, a string too
	unwrap   string            // the root's arguments travel as this member's JSON text
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
			for _, e := range l.vals {
				if c := b.build(e); c != nil {
					u.any = append(u.any, c)
				}
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
				u.props[k] = c
			}
			if orig, ok := renamed[k]; ok {
				if u.names == nil {
					u.names = map[string]string{}
				}
				u.names[k] = orig
			}
			if closing && !required[k] && !(v.kind == '{' && v.get("required").text() == "true") && !allowsNull(b.p, v, 0) {
				if u.dropNull == nil {
					u.dropNull = map[string]bool{}
				}
				u.dropNull[k] = true
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
				if v.kind == 0 && len(v.raw) > 0 && v.raw[0] != '"' && v.text() != "null" {
					u.enum(v.text())
				}
			}
		}
	}
	if r.constEnum {
		if c := n.get("const"); c != nil && c.kind == 0 && len(c.raw) > 0 && c.raw[0] != '"' && c.text() != "null" {
			u.enum(c.text())
		}
	}
	if u.empty() {
		// Still shared through the memo by a recursive schema: harmless,
		// it undoes nothing.
		return nil
	}
	return u
}

// enum records a value the dialect sends as a string: its JSON text,
// which is also the string (10 goes as "10").
func (u *undo) enum(text string) {
	if u.enums == nil {
		u.enums = map[string]string{}
	}
	u.enums[text] = text
}

func (u *undo) empty() bool {
	return !hasUndo(u.props) && len(u.names) == 0 && len(u.dropNull) == 0 && u.items == nil && u.tuple == nil && u.extra == nil &&
		len(u.all) == 0 && len(u.any) == 0 && len(u.enums) == 0 && !u.decode && u.unwrap == ""
}

// allowsNull reports whether the tool's schema n takes null.
func allowsNull(p *prep, n *tnode, depth int) bool {
	if n == nil || depth > 32 {
		return true
	}
	if n.kind != '{' {
		return n.text() != "false"
	}
	if t := n.get("type"); t != nil {
		if t.isStr("null") {
			return true
		}
		if t.kind == '[' {
			for _, e := range t.vals {
				if e.isStr("null") {
					return true
				}
			}
		}
	}
	if n.get("nullable").text() == "true" {
		return true
	}
	if e := n.get("enum"); e != nil && e.kind == '[' {
		for _, v := range e.vals {
			if v.text() == "null" {
				return true
			}
		}
		return false
	}
	if c := n.get("const"); c != nil {
		return c.text() == "null"
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if l := n.get(kw); l != nil && l.kind == '[' {
			for _, e := range l.vals {
				if allowsNull(p, e, depth+1) {
					return true
				}
			}
			return false
		}
	}
	if ref, ok := n.get("$ref").str(); ok {
		return allowsNull(p, p.pointer(ref), depth+1)
	}
	return n.get("type") == nil && !n.has("properties")
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
		inner := v.get(u.unwrap)
		s, ok := inner.str()
		if !ok {
			return args, "json_text"
		}
		b := []byte(s)
		if !jsonspan.Valid(b) {
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
	for _, a := range u.any {
		// The first branch that finds something to undo is the one the
		// value took; a branch that fails leaves no reason behind.
		try := applyState{budget: st.budget}
		nv, c := a.apply(v, &try, depth+1)
		st.budget = try.budget
		if try.fail == "too_deep" {
			st.fail = "too_deep"
			return v, false
		}
		if c && try.fail == "" {
			v, changed = nv, true
			break
		}
	}
	switch v.kind {
	case '{':
		if u.props == nil && u.names == nil && u.dropNull == nil && u.extra == nil {
			break
		}
		j := 0
		for i, k := range v.keys {
			val := v.vals[i]
			if u.dropNull[k] && val.text() == "null" {
				changed = true
				continue
			}
			child, declared := u.props[k]
			if !declared {
				child = u.extra
			}
			if child != nil {
				nv, c := child.apply(val, st, depth+1)
				if c {
					val, changed = nv, true
				}
			}
			if orig, ok := u.names[k]; ok {
				k, changed = orig, true
			}
			v.keys[j], v.vals[j] = k, val
			j++
		}
		v.keys, v.vals = v.keys[:j], v.vals[:j]
	case '[':
		for i, e := range v.vals {
			each := u.items
			if i < len(u.tuple) {
				each = u.tuple[i]
			}
			if nv, c := each.apply(e, st, depth+1); c {
				v.vals[i], changed = nv, true
			}
		}
	case 0:
		if s, ok := v.str(); ok && u.enums != nil {
			if text, ok := u.enums[s]; ok {
				return scalar(text), true
			}
		}
	}
	if changed {
		v.dirty = true
	}
	return v, changed
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
