package transforms

import (
	"bytes"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/streambuf"
	"github.com/tidwall/gjson"
)

// The scanner below walks JSON that gjson.ValidBytes has already accepted.
// It yields byte spans instead of decoded values so a rewrite can copy every
// untouched byte verbatim and skip over large values (message text, encrypted
// reasoning) without decoding or allocating. Bounds are still checked, so
// malformed input ends the walk instead of panicking.

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

// skipString returns the index just past the string literal starting at
// b[i] == '"', or -1 if it is unterminated. It jumps between quotes with the
// vectorised IndexByte and counts the backslashes before each one, which is
// several times faster than inspecting every byte.
func skipString(b []byte, i int) int {
	open := i
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		i += j
		k := i - 1
		for k > open && b[k] == '\\' {
			k--
		}
		if (i-1-k)%2 == 0 {
			return i + 1
		}
		i++
	}
}

// skipValue returns the index just past the value starting at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				if i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// span is a half-open byte range [start, end) in a document.
type span struct{ start, end int }

// member is one key/value pair of an object, as spans of the document.
type member struct {
	key   span // the key literal, quotes included
	value span
}

// keyIs reports whether the member's key literal equals the unescaped name.
// Keys we look for are plain ASCII, so an escaped key never matches; that is
// the conservative choice (the member is then treated as unknown and kept).
func (m member) keyIs(doc []byte, name string) bool {
	k := doc[m.key.start:m.key.end]
	return len(k) == len(name)+2 && string(k[1:len(k)-1]) == name
}

// eachMember calls fn for every member of the object starting at doc[start]
// and stops early when fn returns false. It reports whether the value was an
// object that could be walked to its end.
func eachMember(doc []byte, start int, fn func(m member) bool) bool {
	i := skipSpace(doc, start)
	if i >= len(doc) || doc[i] != '{' {
		return false
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return true
	}
	for i < len(doc) {
		if doc[i] != '"' {
			return false
		}
		ke := skipString(doc, i)
		if ke < 0 {
			return false
		}
		m := member{key: span{i, ke}}
		i = skipSpace(doc, ke)
		if i >= len(doc) || doc[i] != ':' {
			return false
		}
		i = skipSpace(doc, i+1)
		ve := skipValue(doc, i)
		if ve < 0 {
			return false
		}
		m.value = span{i, ve}
		if !fn(m) {
			return true
		}
		i = skipSpace(doc, ve)
		if i >= len(doc) {
			return false
		}
		if doc[i] == '}' {
			return true
		}
		if doc[i] != ',' {
			return false
		}
		i = skipSpace(doc, i+1)
	}
	return false
}

// eachElement calls fn for every element of the array starting at doc[start].
func eachElement(doc []byte, start int, fn func(v span) bool) bool {
	i := skipSpace(doc, start)
	if i >= len(doc) || doc[i] != '[' {
		return false
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		return true
	}
	for i < len(doc) {
		ve := skipValue(doc, i)
		if ve < 0 {
			return false
		}
		if !fn(span{i, ve}) {
			return true
		}
		i = skipSpace(doc, ve)
		if i >= len(doc) {
			return false
		}
		if doc[i] == ']' {
			return true
		}
		if doc[i] != ',' {
			return false
		}
		i = skipSpace(doc, i+1)
	}
	return false
}

// eachObject walks the array at doc[start] and, for every element that is
// an object, collects the named members into fields (span{-1,-1} when
// absent) while finding the element's end, so each element is scanned
// once whatever the order of its keys. Other elements are skipped.
func eachObject(doc []byte, start int, names []string, fields []span, fn func(el span, fields []span) bool) bool {
	i := skipSpace(doc, start)
	if i >= len(doc) || doc[i] != '[' {
		return false
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		return true
	}
	for i < len(doc) {
		var end int
		if doc[i] == '{' {
			end = scanObject(doc, i, names, fields)
		} else {
			end = skipValue(doc, i)
		}
		if end < 0 {
			return false
		}
		if doc[i] == '{' && !fn(span{i, end}, fields) {
			return true
		}
		i = skipSpace(doc, end)
		if i >= len(doc) {
			return false
		}
		if doc[i] == ']' {
			return true
		}
		if doc[i] != ',' {
			return false
		}
		i = skipSpace(doc, i+1)
	}
	return false
}

// scanObject walks the object at doc[start], storing the first occurrence
// of each named member in out, and returns the index just past the object
// (-1 when malformed).
func scanObject(doc []byte, start int, names []string, out []span) int {
	for k := range out {
		out[k] = span{-1, -1}
	}
	i := skipSpace(doc, start+1)
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
		key := doc[i+1 : ke-1]
		i = skipSpace(doc, ke)
		if i >= len(doc) || doc[i] != ':' {
			return -1
		}
		i = skipSpace(doc, i+1)
		ve := skipValue(doc, i)
		if ve < 0 {
			return -1
		}
		for k, n := range names {
			if out[k].start < 0 && string(key) == n {
				out[k] = span{i, ve}
			}
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

// validJSON reports whether b is one well-formed JSON value.
func validJSON(b []byte) bool { return gjson.ValidBytes(b) }
