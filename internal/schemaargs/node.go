// Package schemaargs is test support for checking the schema rewrite's round
// trip: arguments are generated from a tool's ORIGINAL JSON Schema
// (Generate), shaped the way a model bound to the REWRITTEN schema would
// send them (Shape), and the gateway's restoration of the shaped arguments
// must give back the generated originals.
//
// Both functions work on an ordered JSON tree of their own, so that
// properties are visited in document order and outputs keep the members'
// order: the results are deterministic and compact.
package schemaargs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// kind is a JSON value's type.
type kind uint8

const (
	kNull kind = iota
	kBool
	kNum
	kStr
	kArr
	kObj
)

// node is one JSON value. Objects keep their members in document order
// (a repeated key is kept as often as written; lookups see the last, as
// encoding/json does).
type node struct {
	k    kind
	b    bool    // kBool
	s    string  // kStr: the string; kNum: the number as written
	arr  []*node // kArr
	keys []string
	vals []*node
	idx  map[string]int // built on first lookup in a large object
}

// indexAt is the object size from which lookups use an index: $defs with
// thousands of entries are resolved once each, not scanned once each.
const indexAt = 16

// get is the value of the object member key, or nil.
func (n *node) get(key string) *node {
	if n == nil || n.k != kObj {
		return nil
	}
	if len(n.keys) >= indexAt {
		if n.idx == nil {
			n.idx = make(map[string]int, len(n.keys))
			for i, k := range n.keys {
				n.idx[k] = i
			}
		}
		if i, ok := n.idx[key]; ok {
			return n.vals[i]
		}
		return nil
	}
	for i := len(n.keys) - 1; i >= 0; i-- {
		if n.keys[i] == key {
			return n.vals[i]
		}
	}
	return nil
}

// has reports whether the object n has a member key.
func (n *node) has(key string) bool { return n.get(key) != nil }

// str is the string value of n, or "" when n is not a string.
func (n *node) str() string {
	if n == nil || n.k != kStr {
		return ""
	}
	return n.s
}

// num is the value of the number n; ok is false for a non-number.
func (n *node) num() (float64, bool) {
	if n == nil || n.k != kNum {
		return 0, false
	}
	f, err := strconv.ParseFloat(n.s, 64)
	return f, err == nil
}

// isTrue reports whether n is the JSON literal true.
func (n *node) isTrue() bool { return n != nil && n.k == kBool && n.b }

// isFalse reports whether n is the JSON literal false.
func (n *node) isFalse() bool { return n != nil && n.k == kBool && !n.b }

// set appends or replaces the member key of the object n.
func (n *node) set(key string, v *node) {
	n.keys = append(n.keys, key)
	n.vals = append(n.vals, v)
	n.idx = nil
}

func strNode(s string) *node { return &node{k: kStr, s: s} }

// maxParseDepth bounds nesting when parsing, far beyond any real schema.
const maxParseDepth = 512

// parse reads one JSON value (and nothing after it).
func parse(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("schemaargs: data after the JSON value")
	}
	return n, nil
}

func parseValue(dec *json.Decoder, depth int) (*node, error) {
	if depth > maxParseDepth {
		return nil, errors.New("schemaargs: JSON nested too deep")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &node{k: kNull}, nil
	case bool:
		return &node{k: kBool, b: t}, nil
	case json.Number:
		return &node{k: kNum, s: string(t)}, nil
	case string:
		return strNode(t), nil
	case json.Delim:
		switch t {
		case '[':
			n := &node{k: kArr}
			for dec.More() {
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.arr = append(n.arr, v)
			}
			_, err := dec.Token()
			return n, err
		case '{':
			n := &node{k: kObj}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := kt.(string)
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				n.set(key, v)
			}
			_, err := dec.Token()
			return n, err
		}
	}
	return nil, fmt.Errorf("schemaargs: unexpected token %v", tok)
}

// encode is the compact JSON of n, members in order, with no HTML escaping.
func encode(n *node) []byte { return appendJSON(nil, n) }

func appendJSON(b []byte, n *node) []byte {
	switch n.k {
	case kNull:
		return append(b, "null"...)
	case kBool:
		return strconv.AppendBool(b, n.b)
	case kNum:
		return append(b, n.s...)
	case kStr:
		return appendString(b, n.s)
	case kArr:
		b = append(b, '[')
		for i, v := range n.arr {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, v)
		}
		return append(b, ']')
	default:
		b = append(b, '{')
		for i, k := range n.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendJSON(b, n.vals[i])
		}
		return append(b, '}')
	}
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string: quotes, backslashes and control
// characters escaped, everything else (valid UTF-8 by construction) as is.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
		case c < utf8.RuneSelf:
			b = append(b, c)
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		i++
	}
	return append(b, '"')
}

// equal reports whether a and b are the same JSON value (numbers compared
// by value, object members regardless of order).
func equal(a, b *node) bool {
	if a.k != b.k {
		return false
	}
	switch a.k {
	case kNull:
		return true
	case kBool:
		return a.b == b.b
	case kNum:
		x, _ := a.num()
		y, _ := b.num()
		return a.s == b.s || x == y
	case kStr:
		return a.s == b.s
	case kArr:
		if len(a.arr) != len(b.arr) {
			return false
		}
		for i := range a.arr {
			if !equal(a.arr[i], b.arr[i]) {
				return false
			}
		}
		return true
	default:
		if len(a.keys) != len(b.keys) {
			return false
		}
		for i, k := range a.keys {
			w := b.get(k)
			if w == nil || !equal(a.vals[i], w) {
				return false
			}
		}
		return true
	}
}

// resolver resolves local references ("#", "#/$defs/x", "#/properties/a/..",
// percent-encoded, ~0/~1 escaped) within one schema document, memoizing
// each reference string.
type resolver struct {
	root *node
	memo map[string]*node // nil value: does not resolve
	// picks memoizes Shape's anyOf branch choices.
	picks map[pickKey]int
}

func newResolver(root *node) *resolver {
	return &resolver{root: root, memo: map[string]*node{}}
}

// resolve is the schema the reference ref names, or nil.
func (r *resolver) resolve(ref string) *node {
	if n, ok := r.memo[ref]; ok {
		return n
	}
	n := r.walk(ref)
	r.memo[ref] = n
	return n
}

func (r *resolver) walk(ref string) *node {
	if len(ref) == 0 || ref[0] != '#' {
		return nil // not a local reference: not ours to fetch
	}
	frag, err := unescapePercent(ref[1:])
	if err != nil {
		return nil
	}
	cur := r.root
	if frag == "" {
		return cur
	}
	if frag[0] != '/' {
		return nil // a plain-name anchor
	}
	for _, tok := range splitPointer(frag[1:]) {
		switch cur.k {
		case kObj:
			cur = cur.get(tok)
		case kArr:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(cur.arr) || tok != strconv.Itoa(i) {
				return nil
			}
			cur = cur.arr[i]
		default:
			return nil
		}
		if cur == nil {
			return nil
		}
	}
	return cur
}

// splitPointer splits a JSON pointer (without its leading "/") into its
// unescaped reference tokens.
func splitPointer(p string) []string {
	var toks []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			toks = append(toks, unescapeToken(p[start:i]))
			start = i + 1
		}
	}
	return toks
}

// unescapeToken undoes a pointer token's ~1 ("/") and ~0 ("~").
func unescapeToken(t string) string {
	if !bytesContains(t, '~') {
		return t
	}
	b := make([]byte, 0, len(t))
	for i := 0; i < len(t); i++ {
		if t[i] == '~' && i+1 < len(t) && (t[i+1] == '0' || t[i+1] == '1') {
			if t[i+1] == '0' {
				b = append(b, '~')
			} else {
				b = append(b, '/')
			}
			i++
			continue
		}
		b = append(b, t[i])
	}
	return string(b)
}

func bytesContains(s string, c byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return true
		}
	}
	return false
}

// unescapePercent decodes %XX escapes of a URI fragment.
func unescapePercent(s string) (string, error) {
	if !bytesContains(s, '%') {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errors.New("schemaargs: bad percent escape")
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", errors.New("schemaargs: bad percent escape")
		}
		b = append(b, byte(v))
		i += 2
	}
	return string(b), nil
}
