package streambuf

import (
	"errors"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// ErrLimit is returned by ArgsDecoder.Write when the raw arguments grow
// beyond ArgsDecoder.Limit bytes.
var ErrLimit = errors.New("function call arguments exceed size limit")

// argsState is where ArgsDecoder is in the top-level object.
type argsState uint8

const (
	stStart  argsState = iota // before the top-level value
	stObject                  // after '{': a key or '}'
	stKey                     // inside a key
	stColon                   // after a key
	stValue                   // after ':'
	stInput                   // inside the "input" string
	stString                  // inside another string value (skipped)
	stNested                  // inside an object or array value (skipped)
	stScalar                  // inside a number or literal (skipped)
	stNext                    // after a value: ',' or '}'
	stComma                   // after ',': a key
	stDone                    // nothing more to decode (stays here)
	stFail                    // malformed input (stays here)
)

// ArgsDecoder accumulates a function call's JSON arguments, received as
// fragments split at arbitrary bytes, and while the value of the top-level
// "input" key is being received decodes it progressively.
//
// Only the first top-level key named exactly "input" (compared after
// unescaping) whose value is a string is decoded; a top-level value that is
// not an object is never decoded. The text decoded over all calls to Write
// equals what encoding/json decodes for that value when the whole text is a
// valid object: invalid UTF-8 and lone or invalid surrogate escapes become
// U+FFFD. Decoding stops for good at the first malformed byte (an invalid
// escape, a raw control character, an unexpected token); text already
// returned stays returned, so callers that need certainty must still check
// InputComplete and validate Raw when the call ends. Other keys' values are
// skipped without full validation, and nothing after the input's closing
// quote is examined.
//
// The zero ArgsDecoder is ready to use. It is not safe for concurrent use.
type ArgsDecoder struct {
	// Limit is the maximum number of raw bytes accepted; 0 means no limit.
	Limit int

	raw      []byte
	pos      int // raw[:pos] has been consumed by the state machine
	st       argsState
	key      []byte // unescaped key being read
	out      []byte // text decoded by the current Write
	stack    []byte // closers of the open nested values being skipped
	inStr    bool   // inside a string within a nested value
	started  bool
	complete bool
	err      error
	// The input string literal in raw, quotes included: its opening
	// quote once started, its end once complete.
	inStart, inEnd int
}

// Write appends a fragment of the raw arguments text and returns the newly
// decoded text of the top-level "input" string value (empty when nothing new
// is decodable yet, e.g. half an escape sequence or half a UTF-8 character).
// The result is only valid until the next call to Write or Reset.
//
// Write returns ErrLimit, without recording frag, when the raw total would
// exceed Limit; the error is sticky until Reset.
func (d *ArgsDecoder) Write(frag []byte) (decoded []byte, err error) {
	out, err := d.AppendWrite(d.out[:0], frag)
	if err != nil {
		return nil, err
	}
	d.out = out
	return out, nil
}

// AppendWrite is Write for callers that collect the decoded text in a
// buffer of their own: it records frag as Write does and appends the newly
// decoded text to dst instead of to an internal buffer, saving the caller
// a copy. It returns the extended dst, which is dst itself when nothing new
// is decodable, and on error dst unchanged with Write's error. dst may be
// nil; it must not share memory with the result of Raw.
func (d *ArgsDecoder) AppendWrite(dst, frag []byte) ([]byte, error) {
	if d.err != nil {
		return dst, d.err
	}
	if d.Limit > 0 && len(d.raw)+len(frag) > d.Limit {
		d.err = ErrLimit
		return dst, d.err
	}
	d.raw = append(d.raw, frag...)
	return d.decode(dst), nil
}

// decode decodes what was last appended to raw onto dst.
func (d *ArgsDecoder) decode(dst []byte) []byte {
	if d.st == stInput {
		// Nearly every fragment lands inside the input string; decoding it
		// directly skips run's state dispatch.
		return d.input(dst)
	}
	if d.st < stDone {
		dst = d.run(dst)
	}
	return dst
}

// AppendWriteQuoted is AppendWrite for a fragment that arrives as the JSON
// string literal starting at doc[at], a streamed delta's value: the literal
// is decoded straight into the raw arguments rather than into a buffer of
// the caller's first. It also returns the index just after the literal, or
// -1 when doc ends inside it, in which case nothing is recorded. A literal
// that would take the raw total beyond Limit is not recorded either, and
// ErrLimit is returned as by Write.
func (d *ArgsDecoder) AppendWriteQuoted(dst, doc []byte, at int) ([]byte, int, error) {
	if d.err != nil {
		return dst, -1, d.err
	}
	// Nearly every delta goes on with the input string, where the last
	// one stopped. Its two levels of escaping are then undone in one
	// pass, and whatever that pass does not take, the usual way from
	// there. The literal decodes to no more bytes than it has, so a
	// literal that fits with room to spare needs no check of Limit.
	if d.st == stInput && d.pos == len(d.raw) && (d.Limit <= 0 || len(d.raw)+len(doc)-at <= d.Limit) {
		raw, out, j, end := quotedInput(d.raw, dst, doc, at+1)
		if end >= 0 {
			d.raw, d.pos = raw, len(raw)
			return out, end, nil
		}
		pos := len(raw)
		if raw, end = jsonspan.AppendUnquotedFrom(raw, doc, at, j); end < 0 {
			return dst, -1, nil
		}
		d.raw, d.pos = raw, pos
		return d.decode(out), end, nil
	}
	// Decoded past raw's length; raw keeps its length unless the literal
	// is taken.
	raw, end := jsonspan.AppendUnquoted(d.raw, doc, at)
	switch {
	case end < 0:
		return dst, -1, nil
	case d.Limit > 0 && len(raw) > d.Limit:
		d.err = ErrLimit
		return dst, end, d.err
	}
	d.raw = raw
	return d.decode(dst), end, nil
}

// quotedInput decodes a delta's literal in doc from j, inside the input
// string, through both of its levels of escaping at once: the literal
// decoded once is arguments text, appended to raw, and decoded again it is
// input text, appended to dst. It takes plain text, valid UTF-8 and the
// escapes that code is full of (\\\" for a quote, \\\\ for a backslash,
// \\n for a line feed and so on), and stops before anything else, with
// next where it stopped: the input string's end, a \u escape, an escape
// cut by the literal's end, anything malformed, the end of doc. end is
// past the literal's closing quote once it reaches it, else -1. What it
// took is whole at both levels, so the usual way can go on from next.
// Like append it may write anywhere in raw's and dst's spare capacity.
func quotedInput(raw, dst, doc []byte, j int) (rawOut, dstOut []byte, next, end int) {
	for {
		start := j
		raw, j = jsonspan.AppendPlain(raw, doc, j)
		dst = append(dst, doc[start:j]...)
		if j == len(doc) {
			return raw, dst, j, -1
		}
		switch c := doc[j]; {
		case c == '\\':
			// Only an escaped backslash starts an escape of the
			// arguments; the next unit of the literal says which one.
			if j+2 >= len(doc) || doc[j+1] != '\\' {
				// The input's end (\"), a raw control character in the
				// arguments (\n), \u, or malformed text: the usual way.
				return raw, dst, j, -1
			}
			e := doc[j+2]
			if e != '\\' {
				// \\n and the like; a quote here is the literal's end.
				if e == '"' || e == 'u' || shortEscape[e] == 0 {
					return raw, dst, j, -1
				}
				raw, dst = append(raw, '\\', e), append(dst, shortEscape[e])
				j += 3
				continue
			}
			// \\\" and \\\\: the arguments escape a quote or a backslash.
			if j+3 == len(doc) {
				return raw, dst, j, -1
			}
			if e = doc[j+3]; e != '"' && e != '\\' && e != '/' {
				return raw, dst, j, -1
			}
			raw, dst = append(raw, '\\', e), append(dst, e)
			j += 4
		case c == '"':
			return raw, dst, j, j + 1
		case c >= utf8.RuneSelf:
			// Byte by byte: a copy call would cost more than the rune.
			switch validUTF8(doc[j:]) {
			case 2:
				raw, dst = append(raw, c, doc[j+1]), append(dst, c, doc[j+1])
				j += 2
			case 3:
				raw, dst = append(raw, c, doc[j+1], doc[j+2]), append(dst, c, doc[j+1], doc[j+2])
				j += 3
			case 4:
				raw, dst = append(raw, doc[j:j+4]...), append(dst, doc[j:j+4]...)
				j += 4
			default:
				return raw, dst, j, -1
			}
		default:
			return raw, dst, j, -1 // a control character
		}
	}
}

// Raw returns all raw argument bytes received so far. The result is only
// valid until the next call to Write or Reset.
func (d *ArgsDecoder) Raw() []byte { return d.raw }

// Streaming reports whether the value of "input" began as a string, i.e.
// whether Write decodes (or has decoded) input text.
func (d *ArgsDecoder) Streaming() bool { return d.started }

// InputComplete reports whether the closing quote of the "input" string has
// been seen.
func (d *ArgsDecoder) InputComplete() bool { return d.complete }

// InputSpan returns where the "input" string literal lies in Raw, quotes
// included, once InputComplete reports true. The literal has been checked
// as JSON while it was decoded (escapes, control characters), so a caller
// that needs to know whether all of Raw is valid JSON can check what lies
// around it with the literal emptied, instead of the whole text again.
func (d *ArgsDecoder) InputSpan() (start, end int) { return d.inStart, d.inEnd }

// Failed reports whether decoding stopped at malformed input.
func (d *ArgsDecoder) Failed() bool { return d.st == stFail }

// Reset clears the decoder for reuse, keeping its buffers and Limit.
func (d *ArgsDecoder) Reset() {
	*d = ArgsDecoder{
		Limit: d.Limit,
		raw:   d.raw[:0],
		key:   d.key[:0],
		out:   d.out[:0],
		stack: d.stack[:0],
	}
}

// input decodes the unconsumed raw bytes of the input string onto dst, in
// state stInput, and returns the extended dst.
func (d *ArgsDecoder) input(dst []byte) []byte {
	dst, i, r := unquote(dst, d.raw, d.pos)
	d.pos = i
	switch r {
	case strEnd:
		d.complete = true
		d.inEnd = i
		d.st = stDone
	case strBad:
		d.st = stFail
	}
	return dst
}

// run advances the state machine over the unconsumed raw bytes, appending
// decoded input text to dst, and returns the extended dst. A unit that is
// not complete yet (an escape, a UTF-8 sequence, a literal) is left
// unconsumed and examined again by the next Write.
func (d *ArgsDecoder) run(dst []byte) []byte {
	s, i := d.raw, d.pos
loop:
	for i < len(s) && d.st < stDone {
		switch d.st {
		case stStart:
			if i = jsonspan.SkipSpace(s, i); i == len(s) {
				break loop
			}
			if s[i] != '{' {
				d.st = stDone
				break loop
			}
			i++
			d.st = stObject
		case stObject, stComma:
			if i = jsonspan.SkipSpace(s, i); i == len(s) {
				break loop
			}
			switch {
			case s[i] == '"':
				i++
				d.key = d.key[:0]
				d.st = stKey
			case s[i] == '}' && d.st == stObject:
				d.st = stDone
			default:
				d.st = stFail
			}
		case stKey:
			var r int
			d.key, i, r = unquote(d.key, s, i)
			if r == strMore {
				break loop
			}
			d.st = stColon
			if r == strBad {
				d.st = stFail
			}
		case stColon:
			if i = jsonspan.SkipSpace(s, i); i == len(s) {
				break loop
			}
			if s[i] != ':' {
				d.st = stFail
				break
			}
			i++
			d.st = stValue
		case stValue:
			if i = jsonspan.SkipSpace(s, i); i == len(s) {
				break loop
			}
			switch c := s[i]; {
			case c == '"':
				i++
				d.st = stString
				if !d.started && string(d.key) == "input" {
					d.started = true
					d.inStart = i - 1
					d.st = stInput
				}
			case c == '{' || c == '[':
				i++
				d.stack = append(d.stack[:0], c+2) // '}' and ']' follow their openers by two
				d.inStr = false
				d.st = stNested
			case c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z':
				d.st = stScalar
			default:
				d.st = stFail
			}
		case stInput:
			d.pos = i
			return d.input(dst) // nothing after the input is examined
		case stString:
			var done bool
			if i, done = skipString(s, i); !done {
				break loop
			}
			d.st = stNext
		case stNested:
			if i = d.skipNested(s, i); d.st == stNested {
				break loop
			}
		case stScalar:
			for i < len(s) && scalar(s[i]) {
				i++
			}
			if i == len(s) {
				break loop
			}
			d.st = stNext
		case stNext:
			if i = jsonspan.SkipSpace(s, i); i == len(s) {
				break loop
			}
			switch s[i] {
			case ',':
				d.st = stComma
			case '}':
				d.st = stDone
			default:
				d.st = stFail
			}
			i++
		}
	}
	d.pos = i
	return dst
}

// skipNested skips through a nested object or array, tracking its strings
// and bracket nesting only. It sets d.st to stNext at the value's end.
func (d *ArgsDecoder) skipNested(s []byte, i int) int {
	for i < len(s) {
		if d.inStr {
			var done bool
			if i, done = skipString(s, i); !done {
				return i
			}
			d.inStr = false
			continue
		}
		switch c := s[i]; c {
		case '"':
			d.inStr = true
		case '{', '[':
			d.stack = append(d.stack, c+2)
		case '}', ']':
			if d.stack[len(d.stack)-1] != c {
				d.st = stFail
				return i
			}
			d.stack = d.stack[:len(d.stack)-1]
			if len(d.stack) == 0 {
				d.st = stNext
				return i + 1
			}
		}
		i++
	}
	return i
}

// skipString skips string content starting at s[i] up to and including the
// closing quote. When the string goes on past s it returns where to resume
// (before a trailing backslash, whose escape is not known yet) and false.
// Unlike jsonspan.SkipString it does not validate: values other than the
// input are skipped, not checked, and it must be able to stop anywhere.
func skipString(s []byte, i int) (int, bool) {
	for i < len(s) {
		switch s[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 == len(s) {
				return i, false
			}
			i += 2
		default:
			i++
		}
	}
	return len(s), false
}

// scalar reports bytes that may occur in a number or literal.
func scalar(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E'
}

// Results of unquote.
const (
	strMore = iota // more input is needed
	strEnd         // the closing quote was consumed
	strBad         // malformed string
)

// shortEscape maps the byte after a backslash to what the two-byte escape
// decodes to; 0 for 'u' and for bytes that make no valid escape (no
// two-byte escape decodes to 0).
var shortEscape = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// unquote decodes JSON string content from s[i:] onto dst until the closing
// quote, the end of s or an error, with the same results as encoding/json.
// It returns the extended dst and the index after what it consumed; an
// incomplete escape or UTF-8 sequence at the end of s is left unconsumed.
// Like append it may write anywhere in dst's spare capacity, a few bytes
// past what it returns too.
//
// Code in arguments has an escape or a non-ASCII character every few
// bytes: a copy call per run between them cost more than the run, so runs
// are copied a byte at a time as they are found (jsonspan.AppendPlain).
// Two-byte escapes are decoded in place; only \u escapes, invalid or
// incomplete UTF-8 and errors take the general path.
func unquote(dst, s []byte, i int) ([]byte, int, int) {
	for {
		if dst, i = jsonspan.AppendPlain(dst, s, i); i == len(s) {
			return dst, i, strMore
		}
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			if n := validUTF8(s[i:]); n > 0 {
				// Valid UTF-8 is copied as it is, as encoding/json does.
				dst = append(dst, s[i:i+n]...)
				i += n
				continue
			}
			// Invalid or incomplete UTF-8.
			if !utf8.FullRune(s[i:]) {
				return dst, i, strMore
			}
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
		case c == '"':
			return dst, i + 1, strEnd
		case c == '\\':
			if i+1 < len(s) {
				if e := shortEscape[s[i+1]]; e != 0 {
					dst = append(dst, e)
					i += 2
					continue
				}
			}
			var m int
			if dst, m = jsonspan.DecodeEscape(dst, s[i:]); m <= 0 {
				if m == 0 {
					return dst, i, strMore
				}
				return dst, i, strBad
			}
			i += m
		default: // a control character
			return dst, i, strBad
		}
	}
}

// validUTF8 returns the length of the complete, valid multi-byte UTF-8
// sequence at the start of s, or 0 when there is none (an invalid byte, or
// a sequence s cuts short). It is utf8.DecodeRune's check, inlined for the
// sequences that text has every few bytes, without decoding the rune.
func validUTF8(s []byte) int {
	c := s[0]
	switch {
	case c >= 0xc2 && c < 0xe0:
		if len(s) >= 2 && s[1]&0xc0 == 0x80 {
			return 2
		}
	case c >= 0xe0 && c < 0xf0:
		// E0 needs A0..BF after it (no overlong forms), ED 80..9F (no
		// surrogates).
		lo, hi := byte(0x80), byte(0xbf)
		if c == 0xe0 {
			lo = 0xa0
		} else if c == 0xed {
			hi = 0x9f
		}
		if len(s) >= 3 && s[1] >= lo && s[1] <= hi && s[2]&0xc0 == 0x80 {
			return 3
		}
	case c >= 0xf0 && c < 0xf5:
		// F0 needs 90..BF after it (no overlong forms), F4 80..8F (nothing
		// beyond U+10FFFF).
		lo, hi := byte(0x80), byte(0xbf)
		if c == 0xf0 {
			lo = 0x90
		} else if c == 0xf4 {
			hi = 0x8f
		}
		if len(s) >= 4 && s[1] >= lo && s[1] <= hi && s[2]&0xc0 == 0x80 && s[3]&0xc0 == 0x80 {
			return 4
		}
	}
	return 0
}
