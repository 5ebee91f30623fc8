package schema

import (
	"strings"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// tnode is a JSON value read into a tree for the rewrites that move
// things around a schema (references into $defs, unions, encoded
// values): objects keep their members in order and repeated keys as
// they are, and a value no rewrite touched is written back as its
// original bytes.
type tnode struct {
	raw   []byte // the value's original bytes; nil for a built one
	kind  byte   // '{', '[' or 0 for a scalar
	keys  []string
	vals  []*tnode
	dirty bool // changed, or something below changed
}

// readTree reads the value at v of doc; nil when it nests deeper than
// the writer takes (the writer then says so).
func readTree(doc []byte, v jsonspan.Span, depth int) *tnode {
	if depth > maxSchemaNesting+1 {
		return nil
	}
	n := &tnode{raw: doc[v.Start:v.End]}
	switch doc[v.Start] {
	case '{':
		n.kind = '{'
		ok := true
		jsonspan.EachMember(doc, v.Start, func(m jsonspan.Member) bool {
			c := readTree(doc, m.Value, depth+1)
			if c == nil {
				ok = false
				return false
			}
			k := jsonspan.KeyName(doc, m.Key)
			if !utf8.ValidString(k) {
				// As it is written out again, and as the model
				// writes it back: with U+FFFD for the bad bytes.
				k = strings.ToValidUTF8(k, "\uFFFD")
			}
			n.keys = append(n.keys, k)
			n.vals = append(n.vals, c)
			return true
		})
		if !ok {
			return nil
		}
	case '[':
		n.kind = '['
		ok := true
		jsonspan.EachElement(doc, v.Start, func(el jsonspan.Span) bool {
			c := readTree(doc, el, depth+1)
			if c == nil {
				ok = false
				return false
			}
			n.vals = append(n.vals, c)
			return true
		})
		if !ok {
			return nil
		}
	}
	return n
}

// scalar builds a leaf from its JSON text.
func scalar(text string) *tnode { return &tnode{raw: []byte(text), dirty: true} }

// strNode builds a string leaf.
func strNode(s string) *tnode {
	return &tnode{raw: jsonspan.AppendStringStr(nil, s), dirty: true}
}

// objNode builds an object from keys and values in turn.
func objNode(kv ...any) *tnode {
	n := &tnode{kind: '{', dirty: true}
	for i := 0; i+1 < len(kv); i += 2 {
		n.keys = append(n.keys, kv[i].(string))
		n.vals = append(n.vals, kv[i+1].(*tnode))
	}
	return n
}

// get returns the first member named k, as everywhere (nil: none).
func (n *tnode) get(k string) *tnode {
	if n == nil || n.kind != '{' {
		return nil
	}
	for i, key := range n.keys {
		if key == k {
			return n.vals[i]
		}
	}
	return nil
}

// has reports whether the object has a member named k.
func (n *tnode) has(k string) bool { return n.get(k) != nil }

// set replaces the first member named k, or appends it.
func (n *tnode) set(k string, v *tnode) {
	v.dirty = v.dirty || v.raw == nil
	n.dirty = true
	for i, key := range n.keys {
		if key == k {
			n.vals[i] = v
			return
		}
	}
	n.keys = append(n.keys, k)
	n.vals = append(n.vals, v)
}

// del removes every member named k, reporting whether there was one.
func (n *tnode) del(k string) bool {
	j := 0
	for i, key := range n.keys {
		if key == k {
			continue
		}
		n.keys[j], n.vals[j] = key, n.vals[i]
		j++
	}
	if j == len(n.keys) {
		return false
	}
	n.keys, n.vals = n.keys[:j], n.vals[:j]
	n.dirty = true
	return true
}

// str returns a string leaf's value.
func (n *tnode) str() (string, bool) {
	if n == nil || n.kind != 0 || len(n.raw) == 0 || n.raw[0] != '"' {
		return "", false
	}
	return jsonspan.StringValue(n.raw, jsonspan.Span{Start: 0, End: len(n.raw)})
}

// isStr reports whether n is the string s.
func (n *tnode) isStr(s string) bool {
	v, ok := n.str()
	return ok && v == s
}

// text is a leaf's JSON text.
func (n *tnode) text() string {
	if n == nil {
		return ""
	}
	return string(n.raw)
}

// append writes n compactly, or as it came when nothing in it changed.
func (n *tnode) append(out []byte) []byte {
	if !n.dirty && n.raw != nil {
		return append(out, n.raw...)
	}
	switch n.kind {
	case '{':
		out = append(out, '{')
		for i, k := range n.keys {
			if i > 0 {
				out = append(out, ',')
			}
			out = jsonspan.AppendStringStr(out, k)
			out = append(out, ':')
			out = n.vals[i].append(out)
		}
		return append(out, '}')
	case '[':
		out = append(out, '[')
		for i, v := range n.vals {
			if i > 0 {
				out = append(out, ',')
			}
			out = v.append(out)
		}
		return append(out, ']')
	}
	return append(out, n.raw...)
}

// clone copies n deeply enough that changing the copy leaves n alone.
func (n *tnode) clone() *tnode {
	c := &tnode{raw: n.raw, kind: n.kind, dirty: n.dirty}
	if n.kind != 0 {
		c.keys = append([]string(nil), n.keys...)
		c.vals = make([]*tnode, len(n.vals))
		for i, v := range n.vals {
			c.vals[i] = v.clone()
		}
	}
	return c
}
