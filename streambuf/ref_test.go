package streambuf

// refParser is Parser as it was before the single-line fast path (commit
// 89359bb), kept as the reference FuzzParser compares the parser with.
// Only the names differ.

import "bytes"

type refParser struct {
	// MaxEvent limits the size of one event in bytes, including the bytes
	// held for an incomplete event between calls to Feed. 0 means no
	// limit. Exceeding it makes Feed return ErrEventTooLarge.
	MaxEvent int

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
func (p *refParser) Feed(b []byte, fn func(*Event) error) error {
	if p.err != nil {
		return p.err
	}
	if len(b) == 0 {
		return nil
	}
	var ls refLines
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
		var bl refLines
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
		end, off, ok := p.parse(&ls, i)
		if !ok {
			p.buf = append(p.buf[:0], b[i:]...)
			p.off = off - i
			return p.limit(nil)
		}
		if p.MaxEvent > 0 && end-i > p.MaxEvent {
			return p.fail(ErrEventTooLarge, b[i:])
		}
		p.ev.Raw = b[i:end:end]
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
func (p *refParser) complete(ls *refLines, b []byte) (int, bool) {
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
func (p *refParser) limit(rest []byte) error {
	if p.MaxEvent > 0 && len(p.buf) > p.MaxEvent {
		p.buf = append(p.buf, rest...)
		p.err = ErrEventTooLarge
		return p.err
	}
	return nil
}

// fail makes err sticky and keeps the undelivered bytes for Rest.
func (p *refParser) fail(err error, rest []byte) error {
	p.buf = append(p.buf[:0], rest...)
	p.off = 0
	p.err = err
	return err
}

// parse reads the lines of the event starting at i into p.ev. It returns
// the index just past the event's blank line; when the event is not
// complete, ok is false and off is the start of its unterminated line.
func (p *refParser) parse(ls *refLines, i int) (end, off int, ok bool) {
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
func (p *refParser) field(line []byte) {
	var name, val []byte
	// Nearly every line is "data: " or "event: "; recognising them by
	// prefix saves a search for the colon.
	switch {
	case len(line) > 5 && string(line[:6]) == "data: ":
		name, val = line[:4], line[6:]
	case len(line) > 6 && string(line[:7]) == "event: ":
		name, val = line[:5], line[7:]
	default:
		name, val = refSplitField(line)
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
		if len(val) > 0 && refAllDigits(val) {
			p.ev.Retry = val[:len(val):len(val)]
		}
	}
}

func refAllDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// splitField splits a line into field name and value as the SSE
// specification says; name is nil for a comment.
func refSplitField(line []byte) (name, val []byte) {
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
func (p *refParser) Rest() []byte {
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
func (p *refParser) Finish(fn func(*Event) error) error {
	if p.err != nil {
		return p.err
	}
	b := p.Rest()
	if len(b) == 0 {
		return nil
	}
	var ls refLines
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

// refLines finds line terminators in s. It remembers the next '\n' and '\r'
// positions it found, so that each byte is searched only once per kind even
// when one of them is far away or absent.
type refLines struct {
	s      []byte
	nl, cr int // next '\n' / '\r' at or after the last query; -1 none left
}

func (ls *refLines) reset(s []byte) {
	ls.s = s
	ls.nl, ls.cr = -2, -2
}

// next finds the line starting at i. It returns the index of the line's
// terminator and the index just after it; ok is false when the line is not
// terminated within s, including when s ends in '\r'.
func (ls *refLines) next(i int) (end, after int, ok bool) {
	s := ls.s
	if ls.nl != -1 && ls.nl < i {
		ls.nl = refIndex(s, i, '\n')
	}
	if ls.cr != -1 && ls.cr < i {
		ls.cr = refIndex(s, i, '\r')
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
func refIndex(s []byte, i int, c byte) int {
	if j := bytes.IndexByte(s[i:], c); j >= 0 {
		return i + j
	}
	return -1
}
