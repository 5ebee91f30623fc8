package patchfmt

import (
	"bytes"
	"strings"
	"unsafe"
)

const (
	beginPatch = "*** Begin Patch"
	endPatch   = "*** End Patch"
	openTag    = "<invoke"
	closeTag   = "</invoke>"
)

// Normalize repairs apply_patch text as described in the package
// documentation. It returns s itself, without allocating, when s is
// already normalised.
func Normalize(s string) string {
	n := Normalizer{src: s, alias: true, oneShot: true}
	n.write(s)
	n.finish()
	if n.alias {
		return s[:n.pos]
	}
	// n dies here and its output buffer is never written again.
	return unsafe.String(unsafe.SliceData(n.out), len(n.out))
}

// wstate tracks the "<invoke" wrapper in front of the line machine.
type wstate uint8

const (
	wDetect wstate = iota // leading text not yet known to start with "<invoke"
	wPlain                // no wrapper: text goes straight to the lines
	wHeader               // inside the start tag, waiting for its ">"
	wLead                 // skipping white space at the start of the wrapped text
	wBody                 // wrapped text
	wClosed               // a "</invoke>" was seen; the rest waits for Finish
)

// Normalizer normalises apply_patch text that arrives in pieces. Its output,
// joined, is exactly what Normalize returns for the whole text. The zero
// value is ready to use, and Finish makes it ready for new text.
type Normalizer struct {
	// wrapper stage
	st        wstate
	tagk      int    // wDetect, wLead: bytes of "<invoke" matched; wBody: bytes of "</invoke>" at the end of hold
	raw       []byte // input kept while an "<invoke" wrapper is unconfirmed
	hold      []byte // wBody: trailing white space, then part of a "</invoke>"
	fresh     bool   // hold follows text directly, so the line end at its start may still be released
	tail      []byte // wClosed: text from the white space before the first "</invoke>"
	wrapped   bool   // the text is unwrapped unless it turns out not to be a patch
	confirmed bool   // the wrapped text is a patch
	verbatim  bool   // the wrapped text is not a patch: only line endings change
	preOut    []byte // output produced while the wrapper is unconfirmed

	// line splitting
	pend    string // partial line, not yet copied
	part    []byte // partial line built from several pieces; reused line after line
	scratch bool   // the line being ruled on is a view of part: see keep
	kept    []byte // copies of scratch lines held in hdr or hunk: see keep
	blanks  int    // blank lines not yet known not to be trailing

	// line rules
	inPatch  bool
	add      bool     // in an Add File section
	sec      bool     // in an Update File section
	hdr      string   // its header, until written (then "")
	hdrOut   bool     // the header has been written
	afterHdr bool     // a Move to line would still belong to the header
	live     bool     // the current hunk is not a no-op and is written as it comes
	marked   bool     // the current hunk opens with an "@@" line
	hunk     []string // lines of the current hunk while it may be a no-op
	minus    []int    // indexes of its "-" lines
	plus     []int    // indexes of its "+" lines
	cmp      int      // leading "-"/"+" pairs already found equal

	// output
	oblanks int // blank output lines, dropped if nothing follows them
	out     []byte
	src     string // Normalize: the whole input
	pos     int    // while alias is set, the output so far is src[:pos]
	alias   bool
	oneShot bool
	grow    int // Write: capacity to give the output once something is released
}

// Write consumes the next piece of raw text and returns the normalised text
// that has become final (possibly empty). Returned text is never revised.
func (n *Normalizer) Write(piece string) string {
	// Most pieces come out about as long as they went in.
	n.grow = len(piece) + len(piece)/16
	n.write(piece)
	s := string(n.out)
	n.out = n.out[:0]
	return s
}

// AppendWrite is Write appending the output to dst: a caller that copies
// the text on anyway saves a string per piece.
func (n *Normalizer) AppendWrite(dst []byte, piece string) []byte {
	n.grow = len(piece) + len(piece)/16
	n.write(piece)
	if len(n.out) > 0 {
		// Most pieces release nothing: not even a call to copy it.
		dst = append(dst, n.out...)
		n.out = n.out[:0]
	}
	return dst
}

// Holds reports whether n would only hold piece, releasing nothing: once
// past any "<invoke" wrapper, text is released line by line, and piece
// ends no line. A caller whose pieces lie one after another in the same
// memory may give such pieces later, joined with the one that ends their
// line: the output is the same, for one call instead of several.
func (n *Normalizer) Holds(piece []byte) bool {
	return n.st == wPlain && bytes.IndexByte(piece, '\n') < 0
}

// Finish returns the remaining normalised output at end of input and resets
// n.
func (n *Normalizer) Finish() string {
	n.finish()
	s := string(n.out)
	*n = Normalizer{}
	return s
}

func (n *Normalizer) write(p string) {
	if n.st == wPlain {
		n.feed(p)
		return
	}
	if n.st == wDetect {
		i := 0
		for ; i < len(p); i++ {
			c := p[i]
			if n.tagk == 0 && isSpace(c) {
				continue
			}
			if c != openTag[n.tagk] {
				if !n.oneShot && len(n.raw) == 0 {
					// The usual case, a patch that starts in the first
					// piece: the piece is the whole input so far, and
					// replaying it needs no copy.
					n.replay(false, p)
					return
				}
				n.keepRaw(p)
				n.fallback(false)
				return
			}
			n.tagk++
			if n.tagk == len(openTag) {
				break
			}
		}
		n.keepRaw(p)
		if i == len(p) {
			return
		}
		n.st, n.tagk, n.wrapped = wHeader, 0, true
		p = p[i+1:]
		n.wrap(p)
		return
	}
	n.keepRaw(p)
	n.wrap(p)
}

// keepRaw records input that fallback may have to replay.
func (n *Normalizer) keepRaw(p string) {
	if !n.oneShot && !n.confirmed {
		n.raw = append(n.raw, p...)
	}
}

// wrap runs the wrapper states over p.
func (n *Normalizer) wrap(p string) {
	for len(p) > 0 {
		switch n.st {
		case wHeader:
			i := strings.IndexByte(p, '>')
			if i < 0 {
				return
			}
			n.st, p = wLead, p[i+1:]
		case wLead:
			i := 0
			for ; i < len(p); i++ {
				c := p[i]
				if n.tagk == 0 && isSpace(c) {
					continue
				}
				if c != openTag[n.tagk] {
					break
				}
				n.tagk++
				if n.tagk == len(openTag) {
					// A nested wrapper would still start the output,
					// and a second pass would unwrap it again.
					n.fallback(true)
					return
				}
			}
			if i == len(p) {
				return
			}
			k := n.tagk
			n.st, n.tagk = wBody, 0
			n.body(openTag[:k])
			p = p[i:]
		case wBody:
			p = n.body(p)
		case wClosed:
			n.tail = append(n.tail, p...)
			return
		default:
			n.feed(p)
			return
		}
	}
}

// body passes wrapped text on to the lines, holding back white space that
// may turn out to be trailing and anything that may start a "</invoke>". It
// returns what is left of p once a "</invoke>" ends the body.
func (n *Normalizer) body(p string) string {
	if n.tagk > 0 {
		k, j := n.tagk, 0
		for j < len(p) && k < len(closeTag) && p[j] == closeTag[k] {
			j++
			k++
		}
		n.hold = append(n.hold, p[:j]...)
		p = p[j:]
		if k == len(closeTag) {
			n.close("")
			return p
		}
		if p == "" {
			n.tagk = k
			return ""
		}
		n.tagk = 0
		n.feedHold()
	}
	seg, rest, closed := p, "", false
	if i := strings.Index(p, closeTag); i >= 0 {
		seg, rest, closed = p[:i], p[i:], true
	}
	k := 0
	if !closed {
		k = tagSuffix(seg)
	}
	text := seg[:len(seg)-k]
	w := len(text)
	for w > 0 && isSpace(text[w-1]) {
		w--
	}
	if w > 0 {
		n.feedHold()
		n.feed(text[:w])
		n.fresh = true
	}
	old := len(n.hold)
	n.hold = append(n.hold, text[w:]...)
	if n.fresh {
		// The end of a line that is followed by more white space is final
		// either way; releasing it lets the line go out. While fresh, hold
		// is only "\r"s, so the scan starts at the new bytes.
		j := old
		for j < len(n.hold) && n.hold[j] == '\r' {
			j++
		}
		if j < len(n.hold) {
			n.fresh = false
			if n.hold[j] == '\n' {
				n.feed(string(n.hold[:j+1]))
				n.hold = append(n.hold[:0], n.hold[j+1:]...)
			}
		}
	}
	if closed {
		n.close(rest)
		return ""
	}
	n.hold = append(n.hold, seg[len(seg)-k:]...)
	n.tagk = k
	return ""
}

// close starts holding everything from the first "</invoke>"; rest follows
// what is already in hold.
func (n *Normalizer) close(rest string) {
	n.tail = append(n.hold, rest...)
	n.hold, n.tagk, n.st = nil, 0, wClosed
}

// feedHold releases held white space that turned out not to be trailing.
func (n *Normalizer) feedHold() {
	if len(n.hold) > 0 {
		n.feed(string(n.hold))
		n.hold = n.hold[:0]
	}
	n.fresh = true
}

// tagSuffix returns the length of the longest proper prefix of "</invoke>"
// that s ends with.
func tagSuffix(s string) int {
	for k := min(len(closeTag)-1, len(s)); k > 0; k-- {
		if s[len(s)-k:] == closeTag[:k] {
			return k
		}
	}
	return 0
}

// fallback abandons the wrapper and replays the input as plain text, or as
// verbatim text when a wrapper was recognised but cannot be removed.
func (n *Normalizer) fallback(verbatim bool) {
	raw := n.src
	if !n.oneShot {
		raw = string(n.raw)
	}
	n.replay(verbatim, raw)
}

// replay is fallback with the whole input so far given as raw.
func (n *Normalizer) replay(verbatim bool, raw string) {
	n.resetLines()
	n.st, n.tagk, n.wrapped, n.verbatim = wPlain, 0, false, verbatim
	n.raw, n.hold, n.tail, n.preOut, n.fresh = nil, nil, nil, nil, false
	n.feed(raw)
}

func (n *Normalizer) resetLines() {
	n.pend, n.part, n.blanks, n.oblanks = "", n.part[:0], 0, 0
	n.inPatch, n.add = false, false
	n.sec, n.hdr, n.hdrOut, n.afterHdr, n.live = false, "", false, false, false
	n.resetHunk()
}

func (n *Normalizer) finish() {
	switch n.st {
	case wDetect, wHeader, wLead:
		n.fallback(n.st == wLead)
	case wBody:
		if n.tagk > 0 {
			n.feed(string(n.hold))
		}
	case wClosed:
		i := bytes.LastIndex(n.tail, []byte(closeTag))
		n.feed(string(trimRightSpace(n.tail[:i])))
	}
	n.flush()
	if n.wrapped && !n.confirmed {
		n.fallback(true)
		n.flush()
	}
	n.endSection()
}

// feed splits text into lines.
func (n *Normalizer) feed(p string) {
	for {
		i := indexLF(p)
		if i < 0 {
			break
		}
		n.line(n.join(p[:i]))
		n.scratch = false
		p = p[i+1:]
	}
	switch {
	case p == "":
	case n.pend == "" && len(n.part) == 0:
		n.pend = p
	default:
		if cap(n.part) == 0 {
			// Room for a typical line at once, rather than growing to it.
			n.part = make([]byte, 0, max(len(n.pend)+len(p), 256))
		}
		n.part = append(n.part, n.pend...)
		n.part = append(n.part, p...)
		n.pend = ""
	}
}

// join completes the partial line with s. A line built from several pieces
// is returned as a view of part, valid until part is next written: only
// while the line is ruled on, so that a line costs no allocation. What
// holds on to a line longer copies it with keep.
func (n *Normalizer) join(s string) string {
	if len(n.part) == 0 {
		if n.pend == "" {
			return s
		}
		if s == "" {
			s, n.pend = n.pend, ""
			return s
		}
	}
	n.part = append(n.part, n.pend...)
	n.part = append(n.part, s...)
	n.pend = ""
	s = unsafe.String(unsafe.SliceData(n.part), len(n.part))
	n.part = n.part[:0]
	n.scratch = true
	return s
}

// keep returns s, part of the line being ruled on, in memory that outlives
// the line: hdr and hunk hold lines beyond it. Pieces and what Normalize
// reads stay valid as they are; a view of part is copied to kept. Bytes of
// kept are not written again while hdr or hunk may refer to them, and
// release recycles kept once neither does, so that a patch costs a few
// buffers rather than a string per held line.
func (n *Normalizer) keep(s string) string {
	if !n.scratch || s == "" {
		return s
	}
	if cap(n.kept)-len(n.kept) < len(s) {
		// A new block: the old one still backs the held lines and is
		// left to them.
		n.kept = make([]byte, 0, max(2*cap(n.kept), len(s), 512))
	}
	start := len(n.kept)
	n.kept = append(n.kept, s...)
	b := n.kept[start:]
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// release lets kept be written over once no held line refers to it.
func (n *Normalizer) release() {
	if n.hdr == "" && len(n.hunk) == 0 {
		n.kept = n.kept[:0]
	}
}

// flush ends the last line if the input did not.
func (n *Normalizer) flush() {
	if n.pend != "" || len(n.part) > 0 {
		n.line(n.join(""))
		n.scratch = false
	}
}

func (n *Normalizer) line(l string) {
	for l != "" && l[len(l)-1] == '\r' {
		l = l[:len(l)-1]
	}
	if l == "" {
		n.blanks++
		return
	}
	for ; n.blanks > 0; n.blanks-- {
		n.rule("")
	}
	n.rule(l)
}

// rule applies the line rules to one complete line.
func (n *Normalizer) rule(l string) {
	if !n.inPatch {
		if !n.verbatim && strings.HasPrefix(trimSpace(l), beginPatch) {
			n.confirm()
			n.inPatch = true
			n.emitLine(beginPatch)
			return
		}
		n.emitLine(l)
		return
	}
	if n.sec && l != "" && l[0] == ' ' {
		n.body1(l)
		return
	}
	t := trimSpace(l)
	if t == "" || (t[0] != '*' && t[0] != '@') {
		n.content(l)
		return
	}
	switch {
	case isEndOfFile(t):
		// Dropped. Add mode goes on: see the package documentation.
	case strings.HasPrefix(t, beginPatch):
		n.endSection()
		n.add = false
		n.emitLine(beginPatch)
	case strings.HasPrefix(t, endPatch):
		n.endSection()
		n.add, n.inPatch = false, false
		n.emitLine(endPatch)
	case strings.HasPrefix(t, "*** Add File"):
		n.endSection()
		n.add = true
		n.emitLine(t)
	case strings.HasPrefix(t, "***"):
		n.add = false
		if n.sec && n.afterHdr && strings.HasPrefix(t, "*** Move to") {
			// Only blank and "\" lines can be held here; they say
			// nothing and would separate the two headers.
			n.resetHunk()
			n.afterHdr = false
			n.emitHeader()
			n.emitLine(t)
			return
		}
		n.endSection()
		if strings.HasPrefix(t, "*** Update File") {
			n.sec, n.hdr, n.afterHdr = true, n.keep(t), true
			return
		}
		n.emitLine(t)
	case strings.HasPrefix(t, "@@"):
		n.add = false
		if n.sec {
			n.finishHunk()
			n.afterHdr, n.marked = false, true
			n.hunk = append(n.hunk, n.keep(t))
			return
		}
		n.emitLine(t)
	default:
		n.content(l)
	}
}

// content handles a line that is not a marker.
func (n *Normalizer) content(l string) {
	switch {
	case n.add:
		lt := trimLeftSpace(l)
		if lt == "" || (lt[0] != '+' && lt[0] != '-' && lt[0] != '\\' && !strings.HasPrefix(lt, "@@")) {
			n.emitLine2("+", l)
			return
		}
		n.emitLine(l)
	case n.sec:
		n.body1(l)
	default:
		n.emitLine(l)
	}
}

// body1 adds a line to the current hunk of an Update section.
func (n *Normalizer) body1(l string) {
	if n.live {
		n.emitLine(l)
		return
	}
	n.hunk = append(n.hunk, n.keep(l))
	if l == "" || l[0] == '\\' {
		return
	}
	n.afterHdr = false
	switch l[0] {
	case '-':
		n.minus = append(n.minus, len(n.hunk)-1)
	case '+':
		n.plus = append(n.plus, len(n.hunk)-1)
	default:
		n.goLive()
		return
	}
	for n.cmp < len(n.minus) && n.cmp < len(n.plus) {
		if n.hunk[n.minus[n.cmp]][1:] != n.hunk[n.plus[n.cmp]][1:] {
			n.goLive()
			return
		}
		n.cmp++
	}
}

// goLive writes the held hunk once it cannot be a no-op any more.
func (n *Normalizer) goLive() {
	n.emitHeader()
	for _, l := range n.hunk {
		n.emitLine(l)
	}
	n.resetHunk()
	n.live = true
}

// finishHunk writes or drops the current hunk at its end.
func (n *Normalizer) finishHunk() {
	if !n.live && len(n.hunk) > 0 {
		// An unmarked hunk with no change holds only blank and "\"
		// lines: nothing, and keeping it would let trailing blank lines
		// decide whether the section survives.
		noop := len(n.minus) > 0 && len(n.minus) == len(n.plus) && n.cmp == len(n.minus) ||
			!n.marked && len(n.minus)+len(n.plus) == 0
		if !noop {
			n.goLive()
		}
	}
	n.resetHunk()
	n.live = false
}

func (n *Normalizer) resetHunk() {
	clear(n.hunk)
	n.hunk, n.minus, n.plus, n.cmp, n.marked = n.hunk[:0], n.minus[:0], n.plus[:0], 0, false
	n.release()
}

func (n *Normalizer) endSection() {
	if !n.sec {
		return
	}
	n.finishHunk()
	n.sec, n.hdr, n.hdrOut, n.afterHdr = false, "", false, false
	n.release()
}

func (n *Normalizer) emitHeader() {
	if !n.hdrOut {
		n.emitLine(n.hdr)
		// Written, the header is not read again and need not be kept.
		n.hdr, n.hdrOut = "", true
	}
}

// confirm notes that wrapped text is a patch and releases what it held.
func (n *Normalizer) confirm() {
	if n.wrapped && !n.confirmed {
		n.confirmed, n.raw = true, nil
		if len(n.preOut) > 0 {
			n.emit(string(n.preOut))
		}
		n.preOut = nil
	}
}

// emitLine writes a line. Blank lines wait for a line that is not blank:
// input blank lines before a dropped hunk or section must not end the
// output.
func (n *Normalizer) emitLine(l string) {
	if l == "" {
		n.oblanks++
		return
	}
	n.emitLine2("", l)
}

func (n *Normalizer) emitLine2(prefix, l string) {
	for ; n.oblanks > 0; n.oblanks-- {
		n.emit("\n")
	}
	if n.alias && prefix == "" && (!n.wrapped || n.confirmed) {
		if end := n.pos + len(l); end < len(n.src) && n.src[end] == '\n' && n.src[n.pos:end] == l {
			n.pos = end + 1
			return
		}
	}
	if prefix != "" {
		n.emit(prefix)
	}
	n.emit(l)
	n.emit("\n")
}

func (n *Normalizer) emit(s string) {
	if n.wrapped && !n.confirmed {
		n.preOut = append(n.preOut, s...)
		return
	}
	if n.alias {
		// Already normalised input is the common case: the output stays
		// a prefix of the input until it first differs.
		if end := n.pos + len(s); end <= len(n.src) && n.src[n.pos:end] == s {
			n.pos = end
			return
		}
		n.alias = false
		n.out = make([]byte, 0, len(n.src)+len(n.src)/16+64)
		n.out = append(n.out, n.src[:n.pos]...)
	}
	if cap(n.out) == 0 {
		// Small pieces release whole lines, or a held hunk at once: room
		// for a few lines spares the first growth steps of append.
		n.out = make([]byte, 0, max(n.grow, len(s), 512))
	}
	n.out = append(n.out, s...)
}

// indexLF is strings.IndexByte(s, '\n'), by hand for the short pieces a
// stream is cut into, where the call and setup of the vector search cost
// more than the bytes.
func indexLF(s string) int {
	if len(s) > 16 {
		return strings.IndexByte(s, '\n')
	}
	for i := range len(s) {
		if s[i] == '\n' {
			return i
		}
	}
	return -1
}

func isEndOfFile(t string) bool {
	return strings.EqualFold(t, "*** End of File") || strings.EqualFold(t, "*** End of File ***")
}

// isSpace reports ASCII white space. Unicode spaces are content: a piece
// boundary may split them, and trimming them would change file text.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func trimSpace(s string) string {
	return trimRight(trimLeftSpace(s))
}

func trimLeftSpace(s string) string {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return s[i:]
}

func trimRight(s string) string {
	i := len(s)
	for i > 0 && isSpace(s[i-1]) {
		i--
	}
	return s[:i]
}

func trimRightSpace(b []byte) []byte {
	i := len(b)
	for i > 0 && isSpace(b[i-1]) {
		i--
	}
	return b[:i]
}
