package jsonspan

import (
	"bytes"
	"encoding/binary"
	"math/bits"
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

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// PlainRun returns the length of the run of plain bytes at the start of s:
// printable ASCII other than '"' and '\\', which both the encoder and the
// streaming decoder copy as they are. It checks eight bytes at a time:
// plain text is most of what passes through, and encoding/json's
// byte-at-a-time loop is the cost to beat.
func PlainRun(s []byte) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := binary.LittleEndian.Uint64(s[i:])
		q := w ^ (lsb * '"')
		bs := w ^ (lsb * '\\')
		// A high bit survives for a byte that is >= 0x80, < 0x20, '"' or
		// '\\' (borrows may flag later bytes too; the byte loop sorts
		// that out).
		if (w|(w-lsb*0x20)|((q-lsb)&^q)|((bs-lsb)&^bs))&msb != 0 {
			break
		}
	}
	for i < len(s) && plain[s[i]] {
		i++
	}
	return i
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
		// Eight bytes at a time, stored before they are known to be plain:
		// the bytes up to the first other one are kept and the rest written
		// over. Tool arguments and code have a quote, backslash or
		// non-ASCII rune every few bytes, and a copy call per run between
		// them cost more than the run.
		for i+8 <= len(s) {
			n := len(dst)
			if cap(dst)-n < 8 {
				dst = slices.Grow(dst, len(s)-i+8)
			}
			w := binary.LittleEndian.Uint64(s[i:])
			binary.LittleEndian.PutUint64(dst[n:n+8], w)
			m := PlainMask(w)
			if m == 0 {
				dst = dst[:n+8]
				i += 8
				continue
			}
			k := bits.TrailingZeros64(m) >> 3
			dst = dst[:n+k]
			i += k
			goto special
		}
		for i < len(s) && plain[s[i]] {
			dst = append(dst, s[i])
			i++
		}
		if i == len(s) {
			return append(dst, '"')
		}
	special:
		c := s[i]
		if c < utf8.RuneSelf {
			dst = appendEscaped(dst, c)
			// Escapes come in runs in code (\" is two): the next one is
			// taken without going back to the plain loop.
			if i++; i < len(s) && !plain[s[i]] {
				goto special
			}
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

// PlainMask sets the high bit of the lowest byte of w that is not plain
// (>= 0x80, < 0x20, '"' or '\\'), PlainRun's test. Borrows may flag bytes
// above it too, but never one below, so the lowest flag is exact.
func PlainMask(w uint64) uint64 {
	q := w ^ (lsb * '"')
	bs := w ^ (lsb * '\\')
	return (w | (w - lsb*0x20) | ((q - lsb) &^ q) | ((bs - lsb) &^ bs)) & msb
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
		// Written by index into room made up front: a patch full of quotes
		// and line breaks has something to escape every few bytes, and an
		// append per run would cost more than the copying.
		n := len(dst)
		b := dst[:cap(dst)]
		for i := 0; i < len(p); {
			if len(b)-n < 8*6 {
				b = slices.Grow(b[:n], len(p)-i+(len(p)-i)/4+8*6)
				b = b[:cap(b)]
			}
			if i+8 <= len(p) {
				if w := binary.LittleEndian.Uint64(p[i:]); quoteFreeWord(w) {
					binary.LittleEndian.PutUint64(b[n:], w)
					n, i = n+8, i+8
					continue
				}
			}
			// A word with something to escape: byte by byte through it.
			for end := min(i+8, len(p)); i < end; i++ {
				switch c := p[i]; {
				case !quoteEscape[c]:
					b[n] = c
					n++
				case c == '"' || c == '\\':
					b[n], b[n+1] = '\\', c
					n += 2
				default:
					n += len(appendEscaped(b[n:n], c))
				}
			}
		}
		dst = b[:n]
	}
	return append(dst, '"')
}

// QuotedLen returns the length AppendQuoted appends for parts, without
// building it: a body built as it is read announces its length first.
func QuotedLen(parts ...[]byte) int {
	n := 2
	for _, p := range parts {
		n += len(p) + bytes.Count(p, quoteByte) + bytes.Count(p, backslashByte)
		// Control bytes are rare (white space between tokens): words
		// without one are stepped over.
		for i := 0; i < len(p); {
			if i+8 <= len(p) {
				if w := binary.LittleEndian.Uint64(p[i:]); (w-lsb*0x20)&^w&msb == 0 {
					i += 8
					continue
				}
			}
			for end := min(i+8, len(p)); i < end; i++ {
				if c := p[i]; c < 0x20 {
					var esc [6]byte
					n += len(appendEscaped(esc[:0], c)) - 1
				}
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

// quoteEscape marks the bytes that cannot stand for themselves in a string
// literal: quotes, backslashes and control characters. Unlike PlainRun's
// table it passes non-ASCII bytes, which raw JSON text keeps as they are.
var quoteEscape = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// quoteFreeWord reports whether none of the eight bytes of w needs
// escaping. Masking with ^q, ^bs and ^w keeps bytes >= 0x80 from being
// flagged; a control byte is one below 0x20.
func quoteFreeWord(w uint64) bool {
	q := w ^ (lsb * '"')
	bs := w ^ (lsb * '\\')
	return ((q-lsb)&^q|(bs-lsb)&^bs|(w-lsb*0x20)&^w)&msb == 0
}
