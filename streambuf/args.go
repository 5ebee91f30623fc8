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
}

// Write appends a fragment of the raw arguments text and returns the newly
// decoded text of the top-level "input" string value (empty when nothing new
// is decodable yet, e.g. half an escape sequence or half a UTF-8 character).
// The result is only valid until the next call to Write or Reset.
//
// Write returns ErrLimit, without recording frag, when the raw total would
// exceed Limit; the error is sticky until Reset.
func (d *ArgsDecoder) Write(frag []byte) (decoded []byte, err error) {
	if d.err != nil {
		return nil, d.err
	}
	if d.Limit > 0 && len(d.raw)+len(frag) > d.Limit {
		d.err = ErrLimit
		return nil, d.err
	}
	d.raw = append(d.raw, frag...)
	d.out = d.out[:0]
	if d.st < stDone {
		d.run()
	}
	return d.out, nil
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

// run advances the state machine over the unconsumed raw bytes. A unit that
// is not complete yet (an escape, a UTF-8 sequence, a literal) is left
// unconsumed and examined again by the next Write.
func (d *ArgsDecoder) run() {
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
			var r int
			d.out, i, r = unquote(d.out, s, i)
			switch r {
			case strMore:
				break loop
			case strEnd:
				d.complete = true
				d.st = stDone
			default:
				d.st = stFail
			}
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

// unquote decodes JSON string content from s[i:] onto dst until the closing
// quote, the end of s or an error, with the same results as encoding/json.
// It returns the extended dst and the index after what it consumed; an
// incomplete escape or UTF-8 sequence at the end of s is left unconsumed.
func unquote(dst, s []byte, i int) ([]byte, int, int) {
	for {
		n := jsonspan.PlainRun(s[i:])
		dst = append(dst, s[i:i+n]...)
		if i += n; i == len(s) {
			return dst, i, strMore
		}
		switch c := s[i]; {
		case c == '"':
			return dst, i + 1, strEnd
		case c == '\\':
			var m int
			if dst, m = jsonspan.DecodeEscape(dst, s[i:]); m <= 0 {
				if m == 0 {
					return dst, i, strMore
				}
				return dst, i, strBad
			}
			i += m
		case c < 0x20:
			return dst, i, strBad
		default:
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
		}
	}
}
