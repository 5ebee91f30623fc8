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
// the writer takes (the writer then says so), or is not one JSON value.
// One pass: each byte is read once, whatever the nesting.
func readTree(doc []byte, v jsonspan.Span, depth int) *tnode {
	n, _ := readTreeIndexed(doc, v, depth, false)
	return n
}

// readTreeIndexed is readTree that also indexes the value's objects and
// arrays for the writer (spanIndex) when asked, in the same pass.
func readTreeIndexed(doc []byte, v jsonspan.Span, depth int, index bool) (*tnode, *spanIndex) {
	var p treeParser
	return p.read(doc, v, depth, index)
}

// read is readTreeIndexed with p's slabs, which the trees of one request
// share.
func (p *treeParser) read(doc []byte, v jsonspan.Span, depth int, index bool) (*tnode, *spanIndex) {
	p.ix = nil
	if index {
		p.ix = &p.parsed
		p.ix.reset(v.Start, v.End-v.Start)
	}
	n, end := p.parse(doc[:v.End], v.Start, depth)
	if n == nil || jsonspan.SkipSpace(doc[:v.End], end) != v.End {
		return nil, nil
	}
	return n, p.ix
}

// treeParser reads a tree, its nodes allocated in slabs rather than one
// by one (a schema has thousands of values), and indexes it when ix is
// set.
type treeParser struct {
	nodes slab[tnode]
	ix    *spanIndex
	// parsed indexes the schema as read, written the one the first pass
	// wrote when it changed it.
	parsed, written spanIndex
	// The members and elements of the containers being read, innermost
	// last, and the slabs their final slices are cut from: appending to
	// each container's own slices cost more than the rest of the parse.
	keys    []string
	vals    []*tnode
	members []jsonspan.Member
	spans   []jsonspan.Span
	out     []byte // the schema the first pass changed, as bytes
	keySlab slab[string]
	valSlab slab[*tnode]
	memSlab slab[jsonspan.Member]
	spnSlab slab[jsonspan.Span]
}

func (p *treeParser) node() *tnode { return p.nodes.one() }

// parse reads the value starting at doc[i] and returns it with the index
// past it; nil when it is not JSON or nests too deep.
func (p *treeParser) parse(doc []byte, i, depth int) (*tnode, int) {
	if depth > maxSchemaNesting+1 || i >= len(doc) {
		return nil, -1
	}
	start := i
	switch doc[i] {
	case '{':
		n := p.node()
		n.kind = '{'
		kb, vb, mb := len(p.keys), len(p.vals), len(p.members)
		i = jsonspan.SkipSpace(doc, i+1)
		if i < len(doc) && doc[i] == '}' {
			n.raw = doc[start : i+1]
			if p.ix != nil {
				p.ix.setObj(start, nil)
			}
			return n, i + 1
		}
		for i < len(doc) && doc[i] == '"' {
			ke := jsonspan.SkipString(doc, i)
			if ke < 0 {
				return nil, -1
			}
			k := jsonspan.KeyName(doc, jsonspan.Span{Start: i, End: ke})
			if !utf8.ValidString(k) {
				// As it is written out again, and as the model
				// writes it back: with U+FFFD for the bad bytes.
				k = strings.ToValidUTF8(k, "\uFFFD")
			}
			ks := i
			i = jsonspan.SkipSpace(doc, ke)
			if i >= len(doc) || doc[i] != ':' {
				return nil, -1
			}
			vs := jsonspan.SkipSpace(doc, i+1)
			c, e := p.parse(doc, vs, depth+1)
			if c == nil {
				return nil, -1
			}
			p.keys = append(p.keys, k)
			p.vals = append(p.vals, c)
			if p.ix != nil {
				p.members = append(p.members, jsonspan.Member{Key: jsonspan.Span{Start: ks, End: ke}, Value: jsonspan.Span{Start: vs, End: e}})
			}
			i = jsonspan.SkipSpace(doc, e)
			if i < len(doc) && doc[i] == ',' {
				i = jsonspan.SkipSpace(doc, i+1)
				continue
			}
			if i < len(doc) && doc[i] == '}' {
				n.raw = doc[start : i+1]
				n.keys, n.vals = p.keySlab.cut(p.keys[kb:]), p.valSlab.cut(p.vals[vb:])
				p.keys, p.vals = p.keys[:kb], p.vals[:vb]
				if p.ix != nil {
					p.ix.setObj(start, p.memSlab.cut(p.members[mb:]))
					p.members = p.members[:mb]
				}
				return n, i + 1
			}
			return nil, -1
		}
		return nil, -1
	case '[':
		n := p.node()
		n.kind = '['
		vb, sb := len(p.vals), len(p.spans)
		i = jsonspan.SkipSpace(doc, i+1)
		if i < len(doc) && doc[i] == ']' {
			n.raw = doc[start : i+1]
			if p.ix != nil {
				p.ix.setArr(start, nil)
			}
			return n, i + 1
		}
		for i < len(doc) {
			c, e := p.parse(doc, i, depth+1)
			if c == nil {
				return nil, -1
			}
			p.vals = append(p.vals, c)
			if p.ix != nil {
				p.spans = append(p.spans, jsonspan.Span{Start: i, End: e})
			}
			i = jsonspan.SkipSpace(doc, e)
			if i < len(doc) && doc[i] == ',' {
				i = jsonspan.SkipSpace(doc, i+1)
				continue
			}
			if i < len(doc) && doc[i] == ']' {
				n.raw = doc[start : i+1]
				n.vals = p.valSlab.cut(p.vals[vb:])
				p.vals = p.vals[:vb]
				if p.ix != nil {
					p.ix.setArr(start, p.spnSlab.cut(p.spans[sb:]))
					p.spans = p.spans[:sb]
				}
				return n, i + 1
			}
			return nil, -1
		}
		return nil, -1
	}
	e := jsonspan.SkipValue(doc, i) // a scalar: no nesting to read twice
	if e < 0 {
		return nil, -1
	}
	n := p.node()
	n.raw = doc[start:e]
	return n, e
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
