package transforms

import (
	"bytes"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/streambuf"
)

// The scanner below walks JSON and validates it in the same pass (RFC 8259
// grammar; string contents are not checked for UTF-8, as encoding/json does
// not reject it either). It yields byte spans instead of decoded values, so
// a rewrite copies every untouched byte verbatim and skips large values
// (message text, encrypted reasoning) without decoding or allocating. Any
// malformed byte makes the walk report failure, and a rule that sees a
// failed walk leaves the document alone.

// maxDepth bounds nesting so hostile input cannot exhaust the stack; deeper
// documents are treated as invalid and pass through untouched.
const maxDepth = 1000

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// plainByte marks the bytes a string literal may hold without a second look.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipString returns the index just past the string literal starting at
// b[i] == '"', or -1 if it is unterminated or malformed (bad escape, raw
// control character). Table lookups, four bytes per test, measured faster
// here than eight-byte SWAR tests and than gjson's validator.
func skipString(b []byte, i int) int {
	i++
	for {
		for i+4 <= len(b) && plainByte[b[i]] && plainByte[b[i+1]] && plainByte[b[i+2]] && plainByte[b[i+3]] {
			i += 4
		}
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			return -1
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if _, ok := hex4(b[i:]); !ok {
					return -1
				}
				i += 6
			default:
				return -1
			}
		case c < 0x20:
			return -1
		default:
			i++
		}
	}
}

// skipValue returns the index just past the value starting at b[i], or -1
// when it is not a valid JSON value.
func skipValue(b []byte, i int) int {
	return skipDepth(b, i, 0)
}

func skipDepth(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		return skipString(b, i)
	// The container loops repeat walkMembers and walkElements by hand: this
	// is the validator's innermost recursion, and a callback per value
	// costs it about half its speed.
	case '{':
		if depth >= maxDepth {
			return -1
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1
		}
		for i < len(b) {
			if b[i] != '"' {
				return -1
			}
			if i = skipString(b, i); i < 0 {
				return -1
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return -1
			}
			if i = skipDepth(b, skipSpace(b, i+1), depth+1); i < 0 {
				return -1
			}
			if i = skipSpace(b, i); i >= len(b) {
				return -1
			}
			if b[i] == '}' {
				return i + 1
			}
			if b[i] != ',' {
				return -1
			}
			i = skipSpace(b, i+1)
		}
		return -1
	case '[':
		if depth >= maxDepth {
			return -1
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1
		}
		for i < len(b) {
			if i = skipDepth(b, i, depth+1); i < 0 {
				return -1
			}
			if i = skipSpace(b, i); i >= len(b) {
				return -1
			}
			if b[i] == ']' {
				return i + 1
			}
			if b[i] != ',' {
				return -1
			}
			i = skipSpace(b, i+1)
		}
		return -1
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	default:
		return skipNumber(b, i)
	}
}

func literal(b []byte, i int, lit string) int {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit)
	}
	return -1
}

// skipNumber validates -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// validDocument reports whether doc is exactly one valid JSON value with
// nothing but white space around it.
func validDocument(doc []byte) bool {
	i := skipValue(doc, skipSpace(doc, 0))
	return i >= 0 && skipSpace(doc, i) == len(doc)
}

// span is a half-open byte range [start, end) in a document.
type span struct{ start, end int }

// member is one key/value pair of an object, as spans of the document.
type member struct {
	key   span // the key literal, quotes included
	value span
}

// keyIs reports whether the member's key, unescaped, equals name.
func (m member) keyIs(doc []byte, name string) bool { return keyIs(doc, m.key, name) }

// stopWalk is returned by a walk callback, and then by the walk, to end a
// walk early without calling the document malformed.
const stopWalk = -2

// walkMembers visits the members of the object at doc[start]; fn gets the
// key and the start of the value and returns the end of the value, so a
// caller can walk into a value instead of skipping it and walking it again.
// It returns the index just past the object, -1 when it is malformed, or
// stopWalk when fn stopped the walk.
func walkMembers(doc []byte, start int, fn func(key span, value int) int) int {
	i := skipSpace(doc, start)
	if i >= len(doc) || doc[i] != '{' {
		return -1
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return i + 1
	}
	for i < len(doc) {
		if doc[i] != '"' {
			return -1
		}
		ke := skipString(doc, i)
		if ke < 0 {
			return -1
		}
		key := span{i, ke}
		i = skipSpace(doc, ke)
		if i >= len(doc) || doc[i] != ':' {
			return -1
		}
		ve := fn(key, skipSpace(doc, i+1))
		if ve < 0 {
			return ve
		}
		i = skipSpace(doc, ve)
		if i >= len(doc) {
			return -1
		}
		if doc[i] == '}' {
			return i + 1
		}
		if doc[i] != ',' {
			return -1
		}
		i = skipSpace(doc, i+1)
	}
	return -1
}

// walkElements is walkMembers for arrays: fn gets the start of each element
// and returns its end.
func walkElements(doc []byte, start int, fn func(value int) int) int {
	i := skipSpace(doc, start)
	if i >= len(doc) || doc[i] != '[' {
		return -1
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		return i + 1
	}
	for i < len(doc) {
		ve := fn(i)
		if ve < 0 {
			return ve
		}
		i = skipSpace(doc, ve)
		if i >= len(doc) {
			return -1
		}
		if doc[i] == ']' {
			return i + 1
		}
		if doc[i] != ',' {
			return -1
		}
		i = skipSpace(doc, i+1)
	}
	return -1
}

// keyIs reports whether the key literal at k, once unescaped, equals name.
// Escaped keys are rare, but a model that writes "\u0069nput" means input,
// and the streaming decoder reads it that way too.
func keyIs(doc []byte, k span, name string) bool {
	body := doc[k.start+1 : k.end-1]
	if len(body) == len(name) && string(body) == name {
		return true
	}
	if len(body) <= len(name) || bytes.IndexByte(body, '\\') < 0 {
		return false
	}
	return string(unescapeJSON(nil, body)) == name
}

// eachMember calls fn for every member of the object starting at doc[start]
// and stops early when fn returns false. It reports whether the value was an
// object that could be walked (to its end, or to where fn stopped).
func eachMember(doc []byte, start int, fn func(m member) bool) bool {
	end := walkMembers(doc, start, func(k span, v int) int {
		ve := skipValue(doc, v)
		if ve < 0 {
			return -1
		}
		if !fn(member{key: k, value: span{v, ve}}) {
			return stopWalk
		}
		return ve
	})
	return end >= 0 || end == stopWalk
}

// eachElement calls fn for every element of the array starting at
// doc[start]. It returns the index just past the array, or a negative value
// when the array is malformed or fn stopped early.
func eachElement(doc []byte, start int, fn func(v span) bool) int {
	return walkElements(doc, start, func(v int) int {
		ve := skipValue(doc, v)
		if ve < 0 || !fn(span{v, ve}) {
			return -1
		}
		return ve
	})
}

// eachObject walks the array at doc[start] and, for every element that is
// an object, collects the named members into fields (span{-1,-1} when
// absent) while finding the element's end, so each element is scanned
// once whatever the order of its keys. Other elements are skipped. It
// returns the index just past the array, or a negative value.
func eachObject(doc []byte, start int, names []string, fields []span, fn func(el span, fields []span) bool) int {
	return walkElements(doc, start, func(v int) int {
		if doc[v] != '{' {
			return skipValue(doc, v)
		}
		ve := scanObject(doc, v, names, fields)
		if ve < 0 || !fn(span{v, ve}, fields) {
			return -1
		}
		return ve
	})
}

// scanObject walks the object at doc[start], storing the first occurrence
// of each named member in out, and returns the index just past the object
// (-1 when malformed).
func scanObject(doc []byte, start int, names []string, out []span) int {
	for k := range out {
		out[k] = span{-1, -1}
	}
	return walkMembers(doc, start, func(key span, v int) int {
		ve := skipValue(doc, v)
		if ve < 0 {
			return -1
		}
		for k, n := range names {
			if out[k].start < 0 && keyIs(doc, key, n) {
				out[k] = span{v, ve}
			}
		}
		return ve
	})
}

// objectFields finds the values of the named top-level members of the object
// at doc[start] in one walk. Absent members keep span{-1, -1}; the first
// occurrence of a duplicated key wins, as in gjson.
func objectFields(doc []byte, start int, names []string, out []span) {
	i := skipSpace(doc, start)
	if i >= len(doc) || doc[i] != '{' {
		for k := range out {
			out[k] = span{-1, -1}
		}
		return
	}
	scanObject(doc, i, names, out)
}

// stringValue returns the decoded string at sp, and false when sp is not a
// string literal. Only small values (names, types, ids) go through here.
func stringValue(doc []byte, sp span) (string, bool) {
	if sp.start < 0 || sp.end-sp.start < 2 || doc[sp.start] != '"' {
		return "", false
	}
	body := doc[sp.start+1 : sp.end-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body), true
	}
	return string(unescapeJSON(nil, body)), true
}

// isString reports whether sp is a string literal equal to s (no escapes).
func isString(doc []byte, sp span, s string) bool {
	return sp.start >= 0 && sp.end-sp.start == len(s)+2 && doc[sp.start] == '"' &&
		string(doc[sp.start+1:sp.end-1]) == s
}

// unescapeJSON appends the decoded content of a JSON string body (without
// quotes) to dst. Invalid escapes and lone surrogates become U+FFFD, as in
// encoding/json.
func unescapeJSON(dst, s []byte) []byte {
	for len(s) > 0 {
		i := bytes.IndexByte(s, '\\')
		if i < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:i]...)
		s = s[i:]
		if len(s) < 2 {
			return utf8.AppendRune(dst, utf8.RuneError)
		}
		switch c := s[1]; c {
		case '"', '\\', '/':
			dst = append(dst, c)
			s = s[2:]
		case 'b':
			dst, s = append(dst, '\b'), s[2:]
		case 'f':
			dst, s = append(dst, '\f'), s[2:]
		case 'n':
			dst, s = append(dst, '\n'), s[2:]
		case 'r':
			dst, s = append(dst, '\r'), s[2:]
		case 't':
			dst, s = append(dst, '\t'), s[2:]
		case 'u':
			r, n := decodeU(s)
			if n == 0 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
				s = s[2:]
				continue
			}
			dst = utf8.AppendRune(dst, r)
			s = s[n:]
		default:
			dst = utf8.AppendRune(dst, utf8.RuneError)
			s = s[2:]
		}
	}
	return dst
}

// decodeU decodes a \uXXXX escape (and its low surrogate when paired) at the
// start of s, returning the rune and the bytes consumed (0 if malformed).
func decodeU(s []byte) (rune, int) {
	r, ok := hex4(s)
	if !ok {
		return 0, 0
	}
	if r >= 0xD800 && r < 0xDC00 {
		if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if lo, ok := hex4(s[6:]); ok && lo >= 0xDC00 && lo < 0xE000 {
				return (r-0xD800)<<10 + (lo - 0xDC00) + 0x10000, 12
			}
		}
		return utf8.RuneError, 6
	}
	if r >= 0xDC00 && r < 0xE000 {
		return utf8.RuneError, 6
	}
	return r, 6
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// lookup returns the value span of the first member called name in the
// object at doc[start], or span{-1, -1}. It stops at the match, so looking
// up a leading key such as "type" costs almost nothing on a large object.
func lookup(doc []byte, start int, name string) span {
	res := span{-1, -1}
	eachMember(doc, start, func(m member) bool {
		if m.keyIs(doc, name) {
			res = m.value
			return false
		}
		return true
	})
	return res
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(dst []byte, s string) []byte {
	return streambuf.AppendJSONString(dst, []byte(s))
}

// appendQuotedJSON appends raw JSON text as the content of a JSON string
// literal. Valid JSON text has no raw control characters, so only quotes and
// backslashes need escaping; this is how arguments get wrapped exactly once.
func appendQuotedJSON(dst []byte, parts ...[]byte) []byte {
	dst = append(dst, '"')
	for _, p := range parts {
		for len(p) > 0 {
			i := bytes.IndexAny(p, "\"\\")
			if i < 0 {
				dst = append(dst, p...)
				break
			}
			dst = append(dst, p[:i]...)
			dst = append(dst, '\\', p[i])
			p = p[i+1:]
		}
	}
	return append(dst, '"')
}
