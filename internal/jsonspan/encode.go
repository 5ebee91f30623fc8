package jsonspan

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// plain reports the bytes that stand for themselves inside a JSON string
// both ways: printable ASCII (DEL included) except '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendPlain appends the run of plain bytes at s[i:] (printable ASCII
// other than '"' and '\\') to dst and returns it with the index of the
// first byte that is not plain, or len(s).
func AppendPlain(dst, s []byte, i int) ([]byte, int) { return appendRun(dst, s, i, &plain) }

// appendRun appends the bytes of s from i up to the first one that pass
// does not mark, and returns dst with where it stopped: the one loop over
// the runs of bytes the encoders and decoders copy as they are. A byte at
// a time, inlined in the caller. In code a quote, backslash or non-ASCII
// rune comes every few bytes, and an eight-bytes-at-a-time loop behind a
// call cost more than it saved: BenchmarkStreamEngine ran 3.95 M
// instructions per stream with this loop, 3.92 M with a copy of the
// eight-byte loop in each caller and 4.22 M with one behind a call
// (medians of five runs).
func appendRun(dst, s []byte, i int, pass *[256]bool) ([]byte, int) {
	for i < len(s) && pass[s[i]] {
		dst = append(dst, s[i])
		i++
	}
	return dst, i
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal (with quotes), escaping
// like encoding/json but without HTML escaping (<, > and & stay literal):
// '"', '\\' and control characters are escaped (\b, \f, \n, \r and \t in
// short form, others as \u00XX), U+2028 and U+2029 become \u2028 and
// \u2029, and each byte of invalid UTF-8 becomes \ufffd.
func AppendString(dst []byte, s []byte) []byte {
	dst = append(slices.Grow(dst, len(s)+2), '"')
	for i := 0; ; {
		if dst, i = appendRun(dst, s, i, &plain); i == len(s) {
			return append(dst, '"')
		}
		c := s[i]
		if c < utf8.RuneSelf {
			dst = appendEscaped(dst, c)
			i++
			continue
		}
		switch validRuneLen(s[i:]) {
		case 2:
			dst = append(dst, c, s[i+1])
			i += 2
			continue
		case 3:
			dst = append(dst, c, s[i+1], s[i+2])
			i += 3
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but not valid JavaScript; encoding/json escapes
			// them unconditionally and so do we.
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
}

// validRuneLen returns the length of the valid two- or three-byte UTF-8
// rune at the start of s, other than U+2028 and U+2029, and 0 for anything
// else (four-byte runes, invalid bytes), which utf8.DecodeRune sorts out.
// Most non-ASCII text (Latin letters, punctuation like "—") is in that
// range, and this check costs less than utf8.DecodeRune (measured about
// 5% of AppendString on escape-dense text). The ranges are
// UTF-8's: no overlong forms (C0, C1, E0 80-9F), no surrogates (ED A0-BF);
// U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
func validRuneLen(s []byte) int {
	switch c := s[0]; {
	case c < 0xc2:
	case c < 0xe0:
		if len(s) >= 2 && s[1]&0xc0 == 0x80 {
			return 2
		}
	case c < 0xf0:
		if len(s) < 3 {
			return 0
		}
		c1, c2 := s[1], s[2]
		if c1&0xc0 == 0x80 && c2&0xc0 == 0x80 && (c != 0xe0 || c1 >= 0xa0) && (c != 0xed || c1 < 0xa0) &&
			(c != 0xe2 || c1 != 0x80 || c2&^1 != 0xa8) {
			return 3
		}
	}
	return 0
}

// appendEscaped appends the escape of an ASCII byte that cannot stand for
// itself in a string literal: a quote, a backslash or a control character.
func appendEscaped(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// AppendStringStr is AppendString for the names, ids and short texts the
// rules hold as strings.
func AppendStringStr(dst []byte, s string) []byte {
	return AppendString(dst, []byte(s))
}

// AppendQuoted appends raw JSON text as the content of a JSON string
// literal; this is how arguments get wrapped exactly once. Valid JSON text
// holds quotes and backslashes, and raw control characters only as white
// space between tokens: those are escaped, everything else is copied.
func AppendQuoted(dst []byte, parts ...[]byte) []byte {
	dst = append(dst, '"')
	for _, p := range parts {
		for i := 0; ; i++ {
			if dst, i = appendRun(dst, p, i, &plainByte); i == len(p) {
				break
			}
			dst = appendEscaped(dst, p[i])
		}
	}
	return append(dst, '"')
}

// QuotedLen returns the length AppendQuoted appends for parts, without
// building it: a body built as it is read announces its length first.
func QuotedLen(parts ...[]byte) int {
	n := 2
	for _, p := range parts {
		n += len(p)
		for _, c := range p {
			if !plainByte[c] {
				var esc [6]byte
				n += len(appendEscaped(esc[:0], c)) - 1
			}
		}
	}
	return n
}

// LiteralQuotedLen is what a string literal adds to QuotedLen as one of
// its parts. A valid literal holds no control byte, so its quotes and
// backslashes are all there is to count.
func LiteralQuotedLen(lit []byte) int {
	return len(lit) + bytes.Count(lit, quoteByte) + bytes.Count(lit, backslashByte)
}

var quoteByte, backslashByte = []byte{'"'}, []byte{'\\'}
