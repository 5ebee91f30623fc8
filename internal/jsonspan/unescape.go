package jsonspan

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"
)

// Unescape appends the decoded content of a JSON string body (without
// quotes) to dst. Invalid escapes and lone surrogates become U+FFFD, as in
// encoding/json; so does an escape cut short by the end of s.
func Unescape(dst, s []byte) []byte {
	for len(s) > 0 {
		// Escaped JSON text (tool arguments) has runs of escapes, \\\\\\\"
		// and the like: look for the next backslash only when s does not
		// start with one, and decode the two-byte escapes here rather than
		// through DecodeEscape's call.
		if s[0] != '\\' {
			i := bytes.IndexByte(s, '\\')
			if i < 0 {
				return append(dst, s...)
			}
			dst = append(dst, s[:i]...)
			s = s[i:]
		}
		if len(s) >= 2 {
			if c := unescapeByte[s[1]]; c != 0 {
				dst = append(dst, c)
				s = s[2:]
				continue
			}
		}
		var n int
		if dst, n = DecodeEscape(dst, s); n > 0 {
			s = s[n:]
			continue
		}
		// DecodeEscape is made for input that may continue; here nothing
		// follows s. A malformed or truncated escape becomes U+FFFD and
		// decoding resumes after its first two bytes, except for a complete
		// high surrogate waiting for a partner (the only way to get 0 with
		// six bytes or more), which stands alone.
		skip := min(2, len(s))
		if n == 0 && len(s) >= 6 {
			skip = 6
		}
		dst = utf8.AppendRune(dst, utf8.RuneError)
		s = s[skip:]
	}
	return dst
}

// unescapeByte maps the byte after a backslash to the byte a two-byte
// escape stands for, and to 0 for \u and invalid escapes.
var unescapeByte = [256]byte{
	'"': '"', '\\': '\\', '/': '/',
	'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t',
}

// DecodeEscape decodes the escape sequence at the start of s (s[0] ==
// '\\') onto dst. It returns the number of bytes consumed, 0 when s ends
// before the sequence can be decoded, or -1 when the escape is invalid; for
// 0 and -1 dst is returned unchanged. The three-way result lets the
// streaming decoder wait for the next fragment where a whole-string decoder
// would give up.
func DecodeEscape(dst, s []byte) ([]byte, int) {
	if len(s) < 2 {
		return dst, 0
	}
	switch s[1] {
	case '"', '\\', '/':
		return append(dst, s[1]), 2
	case 'b':
		return append(dst, '\b'), 2
	case 'f':
		return append(dst, '\f'), 2
	case 'n':
		return append(dst, '\n'), 2
	case 'r':
		return append(dst, '\r'), 2
	case 't':
		return append(dst, '\t'), 2
	case 'u':
	default:
		return dst, -1
	}
	r, n := Hex4(s[2:])
	if n <= 0 {
		return dst, n
	}
	if !utf16.IsSurrogate(r) {
		return utf8.AppendRune(dst, r), 6
	}
	// Like encoding/json, pair a surrogate with an immediately following
	// \uXXXX when the two decode together, and otherwise replace it alone
	// with U+FFFD. Deciding needs to see the next escape, or enough of it.
	if r < 0xdc00 {
		t := s[6:]
		switch {
		case len(t) == 0:
			return dst, 0
		case t[0] != '\\':
		case len(t) == 1:
			return dst, 0
		case t[1] != 'u':
		default:
			r2, n2 := Hex4(t[2:])
			if n2 == 0 {
				return dst, 0
			}
			if n2 > 0 {
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					return utf8.AppendRune(dst, dec), 12
				}
			}
		}
	}
	return utf8.AppendRune(dst, utf8.RuneError), 6
}

// Hex4 parses the four hex digits at the start of s. n is 4 on success, 0
// when s is too short to tell and -1 for a non-hex digit; a caller that has
// the whole input treats both failures as malformed.
func Hex4(s []byte) (r rune, n int) {
	for k := 0; k < 4; k++ {
		if k == len(s) {
			return 0, 0
		}
		c := s[k]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, -1
		}
		r = r<<4 | rune(c)
	}
	return r, 4
}

// AppendUnquoted appends the decoded content of the string literal at
// doc[i] (a quote) to dst and returns it with the literal's end, as
// StringEnd and Unescape would give, in one forward pass: for a short
// literal (a streamed delta) finding its end first and decoding after
// crosses it twice. The end is -1 when doc stops inside the literal; dst
// then holds what was decoded so far. Like append it may write anywhere in
// dst's spare capacity, a few bytes past what it returns too, so dst must
// not share memory with doc.
func AppendUnquoted(dst, doc []byte, i int) ([]byte, int) {
	return AppendUnquotedFrom(dst, doc, i, i+1)
}

// AppendUnquotedFrom is AppendUnquoted for a caller that decoded the
// literal at doc[i] itself up to j, a position between two of its
// characters, and leaves the rest to it.
func AppendUnquotedFrom(dst, doc []byte, i, j int) ([]byte, int) {
	for {
		if dst, j = appendRun(dst, doc, j, &unquotedPlain); j == len(doc) {
			return dst, -1
		}
		// In doubly escaped text escapes come in runs (\\\" is two): a
		// run is taken here before going back to the plain loop.
		for {
			if doc[j] == '"' {
				return dst, j + 1
			}
			if j+1 == len(doc) {
				return dst, -1
			}
			c := unescapeByte[doc[j+1]]
			if c == 0 {
				// A \u escape or a malformed one, whose decoding depends
				// on where the literal ends: the rest goes the two-pass
				// way.
				end := skipStringFast(doc, i)
				if end < 0 {
					return dst, -1
				}
				return Unescape(dst, doc[j:end-1]), end
			}
			dst = append(dst, c)
			if j += 2; j == len(doc) || unquotedPlain[doc[j]] {
				break
			}
		}
	}
}

// unquotedPlain marks the bytes AppendUnquoted copies as they are: all but
// the quote and the backslash (Unescape leaves control bytes alone too).
var unquotedPlain = func() (t [256]bool) {
	for c := range t {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
