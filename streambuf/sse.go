package streambuf

import (
	"bytes"
	"errors"
)

// ErrEventTooLarge is returned by Parser.Feed when one event grows beyond
// Parser.MaxEvent bytes.
var ErrEventTooLarge = errors.New("sse event exceeds size limit")

// Event is one server-sent event.
type Event struct {
	// Raw holds the exact bytes received for the event, including its
	// terminating blank line. It is nil once the event has been modified or
	// when it was synthesized; AppendTo then serialises Name and Data.
	Raw []byte

	// Name is the value of the event's "event:" field (nil when absent).
	Name []byte

	// Data is the event's data: its "data:" lines joined with "\n". It is nil
	// when the event has no data line (comment, keep-alive or retry-only
	// event); a bare "data:" line gives an empty, non-nil Data.
	Data []byte

	// ID is the value of the event's last "id:" field (nil when absent; an
	// empty value, which resets the client's last event ID, is non-nil).
	// A value with a NUL byte is ignored, as clients ignore it.
	ID []byte

	// Retry is the value of the event's last "retry:" field, when it is
	// all ASCII digits (clients ignore any other); nil when absent.
	Retry []byte
}

// AppendTo appends the wire form of e to dst and returns the extended slice:
// Raw when set; otherwise "event: <Name>\n" (only if Name != nil), "id:" and
// "retry:" lines (only if ID or Retry != nil), then one "data: <line>\n" per
// line of Data, then the blank line "\n". An ID or Retry holding a line
// break, which only a caller can put there, is left out rather than break
// the framing.
//
// Data is split on "\n"; "\r\n" and "\r" also count as line breaks there,
// because writing them raw would break the framing for every reader.
func (e *Event) AppendTo(dst []byte) []byte {
	if e.Raw != nil {
		return append(dst, e.Raw...)
	}
	if e.Name != nil {
		dst = append(dst, "event: "...)
		dst = append(dst, e.Name...)
		dst = append(dst, '\n')
	}
	dst = appendField(dst, "id: ", e.ID)
	dst = appendField(dst, "retry: ", e.Retry)
	if e.Data != nil {
		d := e.Data
		cr := bytes.IndexByte(d, '\r') >= 0
		for {
			n, skip := bytes.IndexByte(d, '\n'), 1
			if cr {
				n, skip = lineBreak(d)
			}
			dst = append(dst, "data: "...)
			if n < 0 {
				dst = append(dst, d...)
				dst = append(dst, '\n')
				break
			}
			dst = append(dst, d[:n]...)
			dst = append(dst, '\n')
			d = d[n+skip:]
		}
	}
	return append(dst, '\n')
}

// AppendHead appends what AppendTo writes before the data of an event whose
// Data is one line: the event, id and retry lines and "data: ". The
// caller writes Data and "\n\n" after it, which lets a large event go to a
// writer without a second copy of its data. It reports false, appending
// nothing, when e is Raw or its Data is nil or holds a line break.
func (e *Event) AppendHead(dst []byte) ([]byte, bool) {
	if e.Raw != nil || e.Data == nil || bytes.IndexByte(e.Data, '\n') >= 0 || bytes.IndexByte(e.Data, '\r') >= 0 {
		return dst, false
	}
	if e.Name != nil {
		dst = append(dst, "event: "...)
		dst = append(dst, e.Name...)
		dst = append(dst, '\n')
	}
	dst = appendField(dst, "id: ", e.ID)
	dst = appendField(dst, "retry: ", e.Retry)
	return append(dst, "data: "...), true
}

// appendField appends one "<prefix><value>\n" line unless v is nil or would
// break the line.
func appendField(dst []byte, prefix string, v []byte) []byte {
	if v == nil || bytes.ContainsAny(v, "\r\n") {
		return dst
	}
	dst = append(dst, prefix...)
	dst = append(dst, v...)
	return append(dst, '\n')
}

// lineBreak returns the index and length of the first line break in d, or
// -1 when there is none.
func lineBreak(d []byte) (int, int) {
	for i, c := range d {
		switch c {
		case '\n':
			return i, 1
		case '\r':
			if i+1 < len(d) && d[i+1] == '\n' {
				return i, 2
			}
			return i, 1
		}
	}
	return -1, 0
}

// Parser splits a byte stream into events.
//
// Lines end in "\n", "\r\n" or "\r"; a "\r" at the end of a chunk waits for
// the next chunk, since only then is it known whether a "\n" belongs to it
// (Raw must hold the exact bytes). An event ends at a blank line. Comment
// lines (": ...") and events without data are still delivered as events
// (Data == nil), so callers can pass them through byte for byte; a lone
// blank line is delivered as an event whose Raw is just that line.
// Fields are parsed as the WHATWG SSE specification says: one optional
// space after the colon is stripped and a line without a colon is a field
// with an empty value. "event", "data", "id" and "retry" are exposed; other
// fields remain in Raw. A leading byte order mark is not stripped.
//
// The zero Parser is ready to use. It is not safe for concurrent use.
type Parser struct {
	// MaxEvent limits the size of one event in bytes, including the bytes
	// held for an incomplete event between calls to Feed. 0 means no
	// limit. Exceeding it makes Feed return ErrEventTooLarge.
	MaxEvent int

	// Claim, when set, is offered each event that starts in what Feed is
	// given, after any event held from an earlier Feed and only when no
	// line of b ends in '\r', before the parser reads it. It returns the
	// end of the event at b[i:] when it took the whole event itself, or -1
	// to leave the event to the parser. It must find that end as the
	// parser would, at the event's blank line, and take no event longer
	// than MaxEvent. A caller that knows the shape of a run of events
	// takes them this way, without the parser's general reading of each.
	// An error stops Feed as fn's does, end being the end of the event it
	// came from.
	Claim func(b []byte, i int) (end int, err error)

	buf     []byte // bytes of the incomplete event held since the last Feed
	off     int    // start in buf of its unterminated last line
	scratch []byte // joined data of multi-line events
	multi   bool   // ev.Data lives in scratch
	ev      Event
	err     error
}

// Feed consumes b and calls fn for every completed event, in order.
//
// The event and its slices (Raw, Name, Data) are only valid during fn: they
// alias b or internal buffers that are reused. Callers that keep them must
// copy (see Event.Clone). fn may modify the event it is given. Bytes of an
// incomplete trailing event are copied and kept until a later Feed completes
// them; a whole event inside b is delivered without copying.
//
// The returned error is fn's error or ErrEventTooLarge. Feed then stops, and
// it keeps returning that error until Rest is called. Rest returns the bytes
// not yet delivered: those after the event fn failed on, or those of the
// oversized event and everything after it, so that a caller can fall back to
// plain passthrough without losing bytes.
func (p *Parser) Feed(b []byte, fn func(*Event) error) error {
	if p.err != nil {
		return p.err
	}
	if len(b) == 0 {
		return nil
	}
	var ls lines
	ls.reset(b)
	i := 0
	if len(p.buf) > 0 {
		end, ok := p.complete(&ls, b)
		if !ok {
			return p.limit(nil)
		}
		// Copy only the missing part of the held event, then deliver it
		// from buf; the rest of b is handled in place below.
		p.buf = append(p.buf, b[:end]...)
		if err := p.limit(b[end:]); err != nil {
			return err
		}
		var bl lines
		bl.reset(p.buf)
		p.parse(&bl, 0)
		p.ev.Raw = p.buf
		err := fn(&p.ev)
		p.buf, p.off = p.buf[:0], 0
		if err != nil {
			return p.fail(err, b[end:])
		}
		i = end
	}
	for i < len(b) {
		// Without a '\r' in b, most events take the fast path; any other
		// shape, or an event b does not complete, goes through parse.
		end, ok := 0, false
		if ls.cr < 0 {
			if p.Claim != nil {
				end, err := p.Claim(b, i)
				if err != nil {
					return p.fail(err, b[end:])
				}
				if end >= 0 {
					i = end
					continue
				}
			}
			end, ok = p.simple(b, i)
		}
		if !ok {
			var off int
			if end, off, ok = p.parse(&ls, i); !ok {
				p.buf = append(p.buf[:0], b[i:]...)
				p.off = off - i
				return p.limit(nil)
			}
			p.ev.Raw = b[i:end:end]
		}
		if p.MaxEvent > 0 && end-i > p.MaxEvent {
			return p.fail(ErrEventTooLarge, b[i:])
		}
		if err := fn(&p.ev); err != nil {
			return p.fail(err, b[end:])
		}
		i = end
	}
	return nil
}

// complete looks for the end of the held event in b. It returns the index
// in b just past the event's blank line. When b does not complete the event,
// it appends b to the held bytes and updates off.
func (p *Parser) complete(ls *lines, b []byte) (int, bool) {
	j := 0 // start in b of the next line
	if tail := p.buf[p.off:]; len(tail) > 0 {
		if tail[len(tail)-1] == '\r' {
			// The held line ended in '\r'; a '\n' now is part of its
			// terminator.
			if b[0] == '\n' {
				j = 1
			}
			if len(tail) == 1 {
				return j, true // the held line was blank
			}
		} else {
			_, after, ok := ls.next(0)
			if !ok {
				p.buf = append(p.buf, b...) // the held line goes on
				return 0, false
			}
			j = after
		}
	}
	for {
		end, after, ok := ls.next(j)
		if !ok {
			p.off = len(p.buf) + j
			p.buf = append(p.buf, b...)
			return 0, false
		}
		if end == j {
			return after, true
		}
		j = after
	}
}

// limit enforces MaxEvent on the held bytes; rest are the bytes of the
// current Feed after them, which Rest must also return on failure.
func (p *Parser) limit(rest []byte) error {
	if p.MaxEvent > 0 && len(p.buf) > p.MaxEvent {
		p.buf = append(p.buf, rest...)
		p.err = ErrEventTooLarge
		return p.err
	}
	return nil
}

// fail makes err sticky and keeps the undelivered bytes for Rest.
func (p *Parser) fail(err error, rest []byte) error {
	p.buf = append(p.buf[:0], rest...)
	p.off = 0
	p.err = err
	return err
}

// simple reads the event at b[i:] into p.ev when it has the shape nearly
// every event has: an optional "event: " line, one "data: " line and the
// blank line, each ending in "\n". It returns the index just past the blank
// line, or false, changing nothing, for any other shape and for an event
// that b does not complete; parse then handles it. Feed calls it only for a
// b without '\r', so "\n" ends every line and these lines mean what field
// makes of them: two line searches per event instead of parse's three, and
// none of its per-line work.
func (p *Parser) simple(b []byte, i int) (int, bool) {
	s := b[i:]
	var name []byte
	if len(s) > 7 && string(s[:7]) == "event: " {
		n := bytes.IndexByte(s[7:], '\n')
		if n < 0 {
			return 0, false
		}
		name = s[7 : 7+n : 7+n]
		s = s[8+n:]
	}
	if len(s) < 6 || string(s[:6]) != "data: " {
		return 0, false
	}
	// s[6+n] ends the data line; the blank line must follow it.
	n := bytes.IndexByte(s[6:], '\n')
	if n < 0 || 7+n >= len(s) || s[7+n] != '\n' {
		return 0, false
	}
	end := len(b) - len(s) + 8 + n
	// Every field is set, as fn may have changed them in the previous
	// event, but one by one: a composite literal is built on the stack and
	// copied, and that copy's wide loads of just-stored words stall
	// (store-to-load forwarding fails), which measured a third of the cost
	// of the whole fast path.
	p.ev.Raw = b[i:end:end]
	p.ev.Name = name
	p.ev.Data = s[6 : 6+n : 6+n]
	p.ev.ID = nil
	p.ev.Retry = nil
	p.multi = false
	return end, true
}

// parse reads the lines of the event starting at i into p.ev. It returns
// the index just past the event's blank line; when the event is not
// complete, ok is false and off is the start of its unterminated line.
func (p *Parser) parse(ls *lines, i int) (end, off int, ok bool) {
	p.ev = Event{}
	p.multi = false
	for {
		e, after, ok := ls.next(i)
		if !ok {
			return 0, i, false
		}
		if e == i {
			return after, 0, true
		}
		p.field(ls.s[i:e])
		i = after
	}
}

// field records one non-empty line of an event.
func (p *Parser) field(line []byte) {
	var name, val []byte
	// Nearly every line is "data: " or "event: "; recognising them by
	// prefix saves a search for the colon.
	switch {
	case len(line) > 5 && string(line[:6]) == "data: ":
		name, val = line[:4], line[6:]
	case len(line) > 6 && string(line[:7]) == "event: ":
		name, val = line[:5], line[7:]
	default:
		name, val = splitField(line)
		if name == nil {
			return // comment
		}
	}
	switch string(name) {
	case "data":
		switch {
		case p.ev.Data == nil:
			// The common single-line case aliases the input.
			p.ev.Data = val[:len(val):len(val)]
		case !p.multi:
			p.scratch = append(p.scratch[:0], p.ev.Data...)
			p.multi = true
			fallthrough
		default:
			p.scratch = append(p.scratch, '\n')
			p.scratch = append(p.scratch, val...)
			p.ev.Data = p.scratch
		}
	case "event":
		p.ev.Name = val[:len(val):len(val)]
	case "id":
		if bytes.IndexByte(val, 0) < 0 {
			p.ev.ID = val[:len(val):len(val)]
		}
	case "retry":
		if len(val) > 0 && allDigits(val) {
			p.ev.Retry = val[:len(val):len(val)]
		}
	}
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// splitField splits a line into field name and value as the SSE
// specification says; name is nil for a comment.
func splitField(line []byte) (name, val []byte) {
	switch c := bytes.IndexByte(line, ':'); {
	case c == 0:
		return // comment
	case c < 0:
		name, val = line, line[len(line):]
	default:
		name, val = line[:c], line[c+1:]
		if len(val) > 0 && val[0] == ' ' {
			val = val[1:]
		}
	}
	return name, val
}

// Rest returns the bytes of an incomplete trailing event (for passthrough at
// EOF), or after an error the bytes Feed did not deliver, and resets the
// parser. The result is only valid until the next call to Feed.
func (p *Parser) Rest() []byte {
	r := p.buf
	p.buf, p.off, p.err = p.buf[:0], 0, nil
	if len(r) == 0 {
		return nil
	}
	return r
}

// Finish delivers the bytes of an incomplete trailing event to fn as if the
// stream had terminated it, and resets the parser. Browsers drop such an
// event, but upstreams that close the stream right after their last
// "data:" line are common; Raw holds exactly the held bytes, so passing it
// through writes what was received. Finish does nothing when no bytes are
// held, and returns fn's error. After a failed Feed it only returns that
// error; use Rest instead.
func (p *Parser) Finish(fn func(*Event) error) error {
	if p.err != nil {
		return p.err
	}
	b := p.Rest()
	if len(b) == 0 {
		return nil
	}
	var ls lines
	ls.reset(b)
	// Held bytes never contain a blank line, so parse stops at the
	// unterminated last line.
	if _, off, ok := p.parse(&ls, 0); !ok {
		line := b[off:]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) > 0 {
			p.field(line)
		}
	}
	p.ev.Raw = b
	return fn(&p.ev)
}

// lines finds line terminators in s. It remembers the next '\n' and '\r'
// positions it found, so that each byte is searched only once per kind even
// when one of them is far away or absent.
type lines struct {
	s      []byte
	nl, cr int // next '\n' / '\r' at or after the last query; -1 none left
}

// reset starts on s. It looks for the first '\r' at once (next would on
// its first call anyway), so that Feed knows whether s has one.
func (ls *lines) reset(s []byte) {
	ls.s = s
	ls.nl, ls.cr = -2, bytes.IndexByte(s, '\r')
}

// next finds the line starting at i. It returns the index of the line's
// terminator and the index just after it; ok is false when the line is not
// terminated within s, including when s ends in '\r'.
func (ls *lines) next(i int) (end, after int, ok bool) {
	s := ls.s
	if ls.nl != -1 && ls.nl < i {
		ls.nl = index(s, i, '\n')
	}
	if ls.cr != -1 && ls.cr < i {
		ls.cr = index(s, i, '\r')
	}
	t := ls.nl
	if ls.cr >= 0 && (t < 0 || ls.cr < t) {
		t = ls.cr
		if t+1 == len(s) {
			return 0, 0, false
		}
		if s[t+1] == '\n' {
			return t, t + 2, true
		}
		return t, t + 1, true
	}
	if t < 0 {
		return 0, 0, false
	}
	return t, t + 1, true
}

// index returns the position of c in s at or after i, or -1.
func index(s []byte, i int, c byte) int {
	if j := bytes.IndexByte(s[i:], c); j >= 0 {
		return i + j
	}
	return -1
}
