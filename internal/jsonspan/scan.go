package jsonspan

import "bytes"

// The scanner below walks JSON and validates it in the same pass (RFC 8259
// grammar; string contents are not checked for UTF-8, as encoding/json does
// not reject it either). It yields byte spans instead of decoded values, so
// a rewrite copies every untouched byte verbatim and skips large values
// (message text, encrypted reasoning) without decoding or allocating. Any
// malformed byte makes the walk report failure, and the engine refuses a
// request its rules cannot read.

// maxDepth bounds nesting so hostile input cannot exhaust the stack; deeper
// documents are treated as invalid (the engine then refuses the request).
const maxDepth = 1000

// SkipSpace returns the index of the first non-space byte at or after i.
// A negative i (the Start of a span that is not there) is the end: a walk
// from it finds nothing, rather than reading before the document.
func SkipSpace(b []byte, i int) int {
	if i < 0 {
		return len(b)
	}
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

// plainByte marks the bytes a string literal may hold without a second
// look, and raw JSON text inside one needs no escape for (AppendQuoted).
// Unlike plain it passes bytes >= 0x80: the validator does not check UTF-8,
// so it has no reason to stop there.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// shortEscape marks the bytes that make a two-byte escape after a
// backslash.
var shortEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// SkipString returns the index just past the string literal starting at
// b[i] == '"', or -1 if it is unterminated or malformed (bad escape, raw
// control character). Table lookups, four bytes per test, measured faster
// here than eight-byte SWAR tests and than gjson's validator.
func SkipString(b []byte, i int) int {
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
		// In doubly escaped JSON text (tool arguments) escapes come in
		// runs (\\\\\\\" is four), so a run is taken here without going
		// back through the plain loops after each escape.
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			for {
				if i+1 >= len(b) {
					return -1
				}
				if e := b[i+1]; shortEscape[e] {
					i += 2
				} else if e == 'u' {
					if _, n := Hex4(b[i+2:]); n <= 0 {
						return -1
					}
					i += 6
				} else {
					return -1
				}
				if i >= len(b) || b[i] != '\\' {
					break
				}
			}
		case c < 0x20:
			return -1
		default:
			i++
		}
	}
}

// SkipValue returns the index just past the value starting at b[i], or -1
// when it is not a valid JSON value.
func SkipValue(b []byte, i int) int {
	return skipDepth(b, i, 0)
}

func skipDepth(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		return SkipString(b, i)
	// The container loops repeat WalkMembers and WalkElements by hand: this
	// is the validator's innermost recursion, and a callback per value
	// costs it about half its speed.
	case '{':
		if depth >= maxDepth {
			return -1
		}
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1
		}
		for i < len(b) {
			if b[i] != '"' {
				return -1
			}
			if i = SkipString(b, i); i < 0 {
				return -1
			}
			i = SkipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return -1
			}
			if i = skipDepth(b, SkipSpace(b, i+1), depth+1); i < 0 {
				return -1
			}
			if i = SkipSpace(b, i); i >= len(b) {
				return -1
			}
			if b[i] == '}' {
				return i + 1
			}
			if b[i] != ',' {
				return -1
			}
			i = SkipSpace(b, i+1)
		}
		return -1
	case '[':
		if depth >= maxDepth {
			return -1
		}
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1
		}
		for i < len(b) {
			if i = skipDepth(b, i, depth+1); i < 0 {
				return -1
			}
			if i = SkipSpace(b, i); i >= len(b) {
				return -1
			}
			if b[i] == ']' {
				return i + 1
			}
			if b[i] != ',' {
				return -1
			}
			i = SkipSpace(b, i+1)
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

// Valid reports whether doc is exactly one valid JSON value with nothing
// but white space around it.
func Valid(doc []byte) bool {
	i := SkipValue(doc, SkipSpace(doc, 0))
	return i >= 0 && SkipSpace(doc, i) == len(doc)
}

// Span is a half-open byte range [Start, End) in a document. A negative
// Start means absent (see NoSpan).
type Span struct{ Start, End int }

// NoSpan is the span of a member or value that is not there.
func NoSpan() Span { return Span{-1, -1} }

// Member is one key/value pair of an object, as spans of the document.
type Member struct {
	Key   Span // the key literal, quotes included
	Value Span
}

// KeyIs reports whether the member's key, unescaped, equals name.
func (m Member) KeyIs(doc []byte, name string) bool { return KeyIs(doc, m.Key, name) }

// StopWalk is returned by a walk callback, and then by the walk, to end a
// walk early without calling the document malformed.
const StopWalk = -2

// WalkMembers visits the members of the object at doc[start]; fn gets the
// key and the start of the value and returns the end of the value, so a
// caller can walk into a value instead of skipping it and walking it again.
// It returns the index just past the object, -1 when it is malformed, or
// StopWalk when fn stopped the walk.
func WalkMembers(doc []byte, start int, fn func(key Span, value int) int) int {
	i := SkipSpace(doc, start)
	if i >= len(doc) || doc[i] != '{' {
		return -1
	}
	i = SkipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return i + 1
	}
	return WalkMembersAt(doc, i, fn)
}

// WalkMembersAt is WalkMembers from the member whose key starts at i,
// inside an object, to the object's end: a caller that found a member
// without parsing the ones before it walks the rest.
func WalkMembersAt(doc []byte, i int, fn func(key Span, value int) int) int {
	for i < len(doc) {
		if doc[i] != '"' {
			return -1
		}
		ke := SkipString(doc, i)
		if ke < 0 {
			return -1
		}
		key := Span{i, ke}
		i = SkipSpace(doc, ke)
		if i >= len(doc) || doc[i] != ':' {
			return -1
		}
		ve := fn(key, SkipSpace(doc, i+1))
		if ve < 0 {
			return ve
		}
		i = SkipSpace(doc, ve)
		if i >= len(doc) {
			return -1
		}
		if doc[i] == '}' {
			return i + 1
		}
		if doc[i] != ',' {
			return -1
		}
		i = SkipSpace(doc, i+1)
	}
	return -1
}

// WalkElements is WalkMembers for arrays: fn gets the start of each element
// and returns its end.
func WalkElements(doc []byte, start int, fn func(value int) int) int {
	i := SkipSpace(doc, start)
	if i >= len(doc) || doc[i] != '[' {
		return -1
	}
	i = SkipSpace(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		return i + 1
	}
	for i < len(doc) {
		ve := fn(i)
		if ve < 0 {
			return ve
		}
		i = SkipSpace(doc, ve)
		if i >= len(doc) {
			return -1
		}
		if doc[i] == ']' {
			return i + 1
		}
		if doc[i] != ',' {
			return -1
		}
		i = SkipSpace(doc, i+1)
	}
	return -1
}

// KeyIs reports whether the key literal at k, once unescaped, equals name.
// Escaped keys are rare, but a model that writes "\u0069nput" means input,
// and the streaming decoder reads it that way too.
func KeyIs(doc []byte, k Span, name string) bool {
	body := doc[k.Start+1 : k.End-1]
	if len(body) == len(name) && string(body) == name {
		return true
	}
	if len(body) <= len(name) || bytes.IndexByte(body, '\\') < 0 {
		return false
	}
	return string(Unescape(nil, body)) == name
}

// EachMember calls fn for every member of the object starting at doc[start]
// and stops early when fn returns false. It reports whether the value was an
// object that could be walked (to its end, or to where fn stopped).
func EachMember(doc []byte, start int, fn func(m Member) bool) bool {
	end := WalkMembers(doc, start, func(k Span, v int) int {
		ve := SkipValue(doc, v)
		if ve < 0 {
			return -1
		}
		if !fn(Member{Key: k, Value: Span{v, ve}}) {
			return StopWalk
		}
		return ve
	})
	return end >= 0 || end == StopWalk
}

// EachElement calls fn for every element of the array starting at
// doc[start]. It returns the index just past the array, or a negative value
// when the array is malformed or fn stopped early.
func EachElement(doc []byte, start int, fn func(v Span) bool) int {
	return WalkElements(doc, start, func(v int) int {
		ve := SkipValue(doc, v)
		if ve < 0 || !fn(Span{v, ve}) {
			return -1
		}
		return ve
	})
}

// EachObject walks the array at doc[start] and, for every element that is
// an object, collects the named members into fields (NoSpan when absent)
// while finding the element's end, so each element is scanned once
// whatever the order of its keys. Other elements are skipped. It returns
// the index just past the array, or a negative value.
func EachObject(doc []byte, start int, names []string, fields []Span, fn func(el Span, fields []Span) bool) int {
	return WalkElements(doc, start, func(v int) int {
		if doc[v] != '{' {
			return SkipValue(doc, v)
		}
		ve := scanObject(doc, v, names, fields)
		if ve < 0 || !fn(Span{v, ve}, fields) {
			return -1
		}
		return ve
	})
}

// scanObject walks the object at doc[start], storing the first occurrence
// of each named member in out, and returns the index just past the object
// (-1 when malformed).
func scanObject(doc []byte, start int, names []string, out []Span) int {
	return scanFields(doc, start, names, out, false)
}

// scanFields is scanObject that, with early, stops once every name is found
// (returning StopWalk) instead of walking to the end of the object.
func scanFields(doc []byte, start int, names []string, out []Span, early bool) int {
	for k := range out {
		out[k] = NoSpan()
	}
	missing := len(names)
	return WalkMembers(doc, start, func(key Span, v int) int {
		ve := SkipValue(doc, v)
		if ve < 0 {
			return -1
		}
		for k, n := range names {
			if out[k].Start < 0 && KeyIs(doc, key, n) {
				out[k] = Span{v, ve}
				missing--
			}
		}
		if early && missing == 0 {
			return StopWalk
		}
		return ve
	})
}

// ObjectFieldsEnd is ObjectFields for a caller that also needs the end of
// the object: it validates the whole object in the same walk and returns
// the index just past it, or -1 when it is malformed. Looking up a member
// of a large object and then finding its end would cross it twice.
func ObjectFieldsEnd(doc []byte, start int, names []string, out []Span) int {
	return scanObject(doc, start, names, out)
}

// ObjectFields finds the values of the named top-level members of the
// object at doc[start] in one walk, which ends as soon as all are found.
// Absent members keep NoSpan; the first occurrence of a duplicated key
// wins, as in gjson.
func ObjectFields(doc []byte, start int, names []string, out []Span) {
	i := SkipSpace(doc, start)
	if i >= len(doc) || doc[i] != '{' {
		for k := range out {
			out[k] = NoSpan()
		}
		return
	}
	scanFields(doc, i, names, out, true)
}

// Lookup returns the value span of the first member called name in the
// object at doc[start], or NoSpan. It stops at the match, so looking up a
// leading key such as "type" costs almost nothing on a large object.
func Lookup(doc []byte, start int, name string) Span {
	res := NoSpan()
	EachMember(doc, start, func(m Member) bool {
		if m.KeyIs(doc, name) {
			res = m.Value
			return false
		}
		return true
	})
	return res
}

// StringValue returns the decoded string at sp, and false when sp is not a
// string literal. Only small values (names, types, ids) go through here.
func StringValue(doc []byte, sp Span) (string, bool) {
	if sp.Start < 0 || sp.End-sp.Start < 2 || doc[sp.Start] != '"' {
		return "", false
	}
	body := doc[sp.Start+1 : sp.End-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body), true
	}
	return string(Unescape(nil, body)), true
}

// IsString reports whether sp is a string literal equal to s (no escapes).
func IsString(doc []byte, sp Span, s string) bool {
	return sp.Start >= 0 && sp.End-sp.Start == len(s)+2 && doc[sp.Start] == '"' &&
		string(doc[sp.Start+1:sp.End-1]) == s
}

// IsNull reports whether sp is the literal null.
func IsNull(doc []byte, sp Span) bool {
	return sp.End-sp.Start == 4 && string(doc[sp.Start:sp.End]) == "null"
}

// LastMember returns the value of the last member called name in the object
// at doc[0] (after white space), or NoSpan. It does not validate: values are
// skipped by their brackets and quotes alone, with strings crossed by
// memchr, so finding the last of a repeated key costs a fraction of a
// validating pass. A malformed document may give a wrong answer or NoSpan;
// whoever relies on the document validates it elsewhere.
func LastMember(doc []byte, name string) Span {
	found := NoSpan()
	i := SkipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return found
	}
	i = SkipSpace(doc, i+1)
	for i < len(doc) && doc[i] == '"' {
		ke := skipStringFast(doc, i)
		if ke < 0 {
			return found
		}
		key := Span{i, ke}
		i = SkipSpace(doc, ke)
		if i >= len(doc) || doc[i] != ':' {
			return found
		}
		v := SkipSpace(doc, i+1)
		ve := skipFast(doc, v)
		if ve < 0 {
			return found
		}
		if KeyIs(doc, key, name) {
			found = Span{v, ve}
		}
		i = SkipSpace(doc, ve)
		if i >= len(doc) || doc[i] != ',' {
			return found
		}
		i = SkipSpace(doc, i+1)
	}
	return found
}

// StringEnd returns the end of the string literal at doc[i] without
// validating its content, or -1: memchr to each quote, and a look back at
// the backslashes before it. For text already known or not needed to be
// valid, at a fraction of SkipString's cost.
func StringEnd(doc []byte, i int) int { return skipStringFast(doc, i) }

// skipStringFast returns the end of the string literal at doc[i] without
// validating its content, or -1.
//
// Going from quote to quote with memchr stays cheaper than scanning
// forward, even on doubly escaped tool arguments: there the backslashes
// outnumber the quotes several times over, and word-at-a-time forward
// scans (a step per escape, or bit masks with an escape table) measured
// up to 1.8 times slower on those and on short strings (see
// BenchmarkStringEnd and TestStringEndMatchesReference).
func skipStringFast(doc []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(doc[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		b := j - 1
		for b > i && doc[b] == '\\' {
			b--
		}
		if (j-1-b)%2 == 0 {
			return j + 1
		}
		j++
	}
}

// skipFast returns the end of the value at doc[i] without validating it,
// or -1 when the document ends first.
func skipFast(doc []byte, i int) int {
	depth := 0
	for i < len(doc) {
		switch doc[i] {
		case '"':
			if i = skipStringFast(doc, i); i < 0 {
				return -1
			}
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of a scalar that ends its container
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	if depth == 0 {
		return i
	}
	return -1
}
