package patchfmt

import (
	"strconv"
	"strings"
)

// Kind is the operation a hunk performs on its file.
type Kind uint8

// The hunk kinds of the grammar.
const (
	AddFile Kind = iota + 1
	DeleteFile
	UpdateFile
)

func (k Kind) String() string {
	switch k {
	case AddFile:
		return "add"
	case DeleteFile:
		return "delete"
	case UpdateFile:
		return "update"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Patch is a parsed apply_patch text.
type Patch struct {
	// Environment is the value of an "*** Environment ID: " line, which
	// Codex's multi-environment grammar allows after "*** Begin Patch".
	// Empty when there is none.
	Environment string
	Hunks       []Hunk
}

// Hunk is one file operation.
type Hunk struct {
	Kind Kind
	Path string
	// MoveTo is the new path of an updated file, empty if it keeps its path.
	MoveTo string
	// Lines holds an added file's lines, without their "+".
	Lines []string
	// Chunks holds an update's changes, which may be none.
	Chunks []Chunk
	// EndOfFile reports whether an update's changes end with
	// "*** End of File". It needs at least one chunk.
	EndOfFile bool
}

// Chunk is a run of change lines, normally opened by an "@@" line.
type Chunk struct {
	// Unmarked reports that no "@@" line opens the chunk, which only the
	// first chunk of an update may do, and then it has at least one line.
	Unmarked bool
	// Context is the text after "@@ "; empty for a bare "@@".
	Context string
	Lines   []Line
}

// Line is a change line.
type Line struct {
	Op   byte // ' ' (context), '-' or '+'
	Text string
}

// ParseError reports where a patch departs from the grammar.
type ParseError struct {
	Line int // 1-based; one past the last line when the text ends too early
	Msg  string
}

func (e *ParseError) Error() string {
	return "line " + strconv.Itoa(e.Line) + ": " + e.Msg
}

const (
	addPrefix    = "*** Add File: "
	deletePrefix = "*** Delete File: "
	updatePrefix = "*** Update File: "
	movePrefix   = "*** Move to: "
	envPrefix    = "*** Environment ID: "
	endOfFile    = "*** End of File"
)

// arena hands out runs of Ts from blocks it never reallocates, so that
// the parsed lines cost their own size and a partly used last block, not
// the copies and spare capacity of a doubling slice.
type arena[T any] struct {
	block []T
	lo    int // start of the open run
	hint  int // if not 0, the size of the first block
}

func (a *arena[T]) add(v T) {
	if len(a.block) == cap(a.block) {
		// Start a bigger block and move the open run, which must stay
		// contiguous; the old block keeps the runs already taken.
		run := a.block[a.lo:]
		size := max(64, min(2*cap(a.block), 8192), 2*len(run))
		if cap(a.block) == 0 && a.hint > 0 {
			size = a.hint
		}
		a.block = append(make([]T, 0, size), run...)
		a.lo = 0
	}
	a.block = append(a.block, v)
}

// len is the length of the open run.
func (a *arena[T]) len() int { return len(a.block) - a.lo }

// last points to the last element of the open run, which must exist.
func (a *arena[T]) last() *T { return &a.block[len(a.block)-1] }

// take closes the open run and returns it, nil if empty. Its capacity ends
// with it, so appending to it cannot overwrite the next run.
func (a *arena[T]) take() []T {
	n := len(a.block)
	if a.lo == n {
		return nil
	}
	run := a.block[a.lo:n:n]
	a.lo = n
	return run
}

type parser struct {
	s    string
	off  int // start of the next line
	num  int // number of the current line
	line string
	lf   bool // the current line ends in "\n"
	back bool // the current line is to be read again

	// checkOnly makes the parser only check the grammar, for Validate:
	// it still reads every line and makes every decision, but it skips
	// presize and leaves env, hunks and the arenas empty. The decisions
	// therefore rest on nhunks and local counts, never on what was built,
	// so that both modes share one grammar and return the same errors.
	checkOnly bool
	nhunks    int // hunks read so far, built or not

	env    string
	hunks  []Hunk
	chunks arena[Chunk]
	lines  arena[Line]
	adds   arena[string]
}

// next makes the next line current; it reports false at the end of the
// text.
func (p *parser) next() bool {
	if p.back {
		p.back = false
		return true
	}
	if p.off >= len(p.s) {
		return false
	}
	p.num++
	rest := p.s[p.off:]
	if i := strings.IndexByte(rest, '\n'); i >= 0 {
		p.line, p.lf, p.off = rest[:i], true, p.off+i+1
	} else {
		p.line, p.lf, p.off = rest, false, len(p.s)
	}
	return true
}

// unread makes next return the current line again.
func (p *parser) unread() { p.back = true }

// errHere reports that the current line is not what was expected.
func (p *parser) errHere(expected string) error {
	return &ParseError{Line: p.num, Msg: "expected " + expected + ", found " + quote(p.line)}
}

// errEnd reports that the text ended where expected was due.
func (p *parser) errEnd(expected string) error {
	return &ParseError{Line: p.num + 1, Msg: "expected " + expected + ", found end of input"}
}

// errNext reports the line that stopped a run: the unread current line, or
// the end of the text.
func (p *parser) errNext(expected string) error {
	if p.back {
		return p.errHere(expected)
	}
	return p.errEnd(expected)
}

// needLF rejects a line other than "*** End Patch" without its "\n".
func (p *parser) needLF() error {
	if !p.lf {
		return &ParseError{Line: p.num, Msg: "expected a line feed after " + quote(p.line)}
	}
	return nil
}

// Parse parses s under the grammar Codex declares for apply_patch. Line
// texts and paths in the result share memory with s.
func Parse(s string) (*Patch, error) {
	p := parser{s: s}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return &Patch{Environment: p.env, Hunks: p.hunks}, nil
}

// Validate returns the error Parse would return for s, nil if Parse would
// accept it, without building the Patch. A caller that only needs to know
// whether a patch keeps to the grammar, as the stream engine does for every
// restored apply_patch, thus pays for reading s and for the error, if any,
// but allocates nothing for the hunks and lines it would throw away. It
// runs Parse's own parser, so the two cannot disagree.
func Validate(s string) error {
	p := parser{s: s, checkOnly: true}
	return p.parse()
}

const (
	expectHunk      = `a hunk header ("*** Add File: ", "*** Delete File: " or "*** Update File: ")`
	expectHunkOrEnd = `a hunk header ("*** Add File: ", "*** Delete File: " or "*** Update File: ") or "*** End Patch"`
)

func (p *parser) parse() error {
	if !p.next() {
		return p.errEnd(quote(beginPatch))
	}
	if p.line != beginPatch {
		return p.errHere(quote(beginPatch))
	}
	if err := p.needLF(); err != nil {
		return err
	}
	if !p.checkOnly {
		p.presize()
	}
	if p.next() {
		if env, ok := strings.CutPrefix(p.line, envPrefix); ok {
			if env == "" {
				return p.errHere("an environment id after " + quote(envPrefix))
			}
			if err := p.needLF(); err != nil {
				return err
			}
			if !p.checkOnly {
				p.env = env
			}
		} else {
			p.unread()
		}
	}
	for {
		expect := expectHunkOrEnd
		if p.nhunks == 0 {
			expect = expectHunk
		}
		if !p.next() {
			return p.errEnd(expect)
		}
		l := p.line
		switch {
		case l == endPatch && p.nhunks > 0:
			if p.next() {
				return &ParseError{Line: p.num, Msg: "expected end of input after " + quote(endPatch) + ", found " + quote(p.line)}
			}
			return nil
		case strings.HasPrefix(l, addPrefix):
			if err := p.path(addPrefix); err != nil {
				return err
			}
			n := 0
			for p.next() {
				if !strings.HasPrefix(p.line, "+") {
					p.unread()
					break
				}
				if err := p.needLF(); err != nil {
					return err
				}
				n++
				if !p.checkOnly {
					p.adds.add(p.line[1:])
				}
			}
			if n == 0 {
				return p.errNext(`an added line starting with "+"`)
			}
			p.nhunks++
			if !p.checkOnly {
				p.hunks = append(p.hunks, Hunk{Kind: AddFile, Path: l[len(addPrefix):], Lines: p.adds.take()})
			}
		case strings.HasPrefix(l, deletePrefix):
			if err := p.path(deletePrefix); err != nil {
				return err
			}
			p.nhunks++
			if !p.checkOnly {
				p.hunks = append(p.hunks, Hunk{Kind: DeleteFile, Path: l[len(deletePrefix):]})
			}
		case strings.HasPrefix(l, updatePrefix):
			if err := p.update(); err != nil {
				return err
			}
		default:
			return p.errHere(expect)
		}
	}
}

// presize sizes the hunks and the arenas' first blocks from a count of the
// lines that can fill them, once the text opens like a patch: one block
// each of the size needed, instead of the doubling blocks that the arenas
// would leave partly used. A count that falls short only means more
// blocks.
func (p *parser) presize() {
	hunks, updates, ats, adds, lines := 0, 0, 0, 0, 0
	add := false
	for s := p.s[p.off:]; s != ""; {
		switch s[0] {
		case '*':
			hunks++
			add = strings.HasPrefix(s, addPrefix)
			if strings.HasPrefix(s, updatePrefix) {
				updates++
			}
		case '@':
			ats++
		case '+':
			if add {
				adds++
			} else {
				lines++
			}
		case ' ', '-':
			lines++
		}
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		s = s[i+1:]
	}
	// Every "*** " line but "*** End Patch" may open a hunk; each update
	// may start with an unmarked chunk.
	p.hunks = make([]Hunk, 0, max(hunks-1, 0))
	p.chunks.hint, p.adds.hint, p.lines.hint = ats+updates, adds, lines
}

// path checks the header line just read, which starts with prefix.
func (p *parser) path(prefix string) error {
	if len(p.line) == len(prefix) {
		return p.errHere("a path after " + quote(prefix))
	}
	return p.needLF()
}

// update parses an Update File hunk whose header is the current line.
func (p *parser) update() error {
	if err := p.path(updatePrefix); err != nil {
		return err
	}
	h := Hunk{Kind: UpdateFile, Path: p.line[len(updatePrefix):]}
	if p.next() {
		if to, ok := strings.CutPrefix(p.line, movePrefix); ok {
			if err := p.path(movePrefix); err != nil {
				return err
			}
			h.MoveTo = to
		} else {
			p.unread()
		}
	}
	// chunked reports that a chunk is open, so that the checks below do not
	// depend on the chunks arena, which stays empty under checkOnly.
	chunked := false
	for p.next() {
		l := p.line
		switch {
		case l != "" && (l[0] == ' ' || l[0] == '-' || l[0] == '+'):
			if err := p.needLF(); err != nil {
				return err
			}
			if !chunked {
				chunked = true
				if !p.checkOnly {
					p.chunks.add(Chunk{Unmarked: true})
				}
			}
			if !p.checkOnly {
				p.lines.add(Line{Op: l[0], Text: l[1:]})
			}
			continue
		case strings.HasPrefix(l, "@@"):
			ctx := ""
			if l != "@@" {
				if !strings.HasPrefix(l, "@@ ") || len(l) == 3 {
					return p.errHere(`"@@" or "@@ " followed by context`)
				}
				ctx = l[3:]
			}
			if err := p.needLF(); err != nil {
				return err
			}
			chunked = true
			if !p.checkOnly {
				p.closeChunk()
				p.chunks.add(Chunk{Context: ctx})
			}
			continue
		case l == endOfFile:
			if !chunked {
				return p.errHere(`a change line or "@@" before ` + quote(endOfFile))
			}
			if err := p.needLF(); err != nil {
				return err
			}
			h.EndOfFile = true
			p.addUpdate(h)
			return nil
		}
		p.unread()
		p.addUpdate(h)
		return nil
	}
	p.addUpdate(h)
	return nil
}

// closeChunk gives the open chunk, if any, the lines read for it.
func (p *parser) closeChunk() {
	if p.chunks.len() > 0 {
		p.chunks.last().Lines = p.lines.take()
	}
}

// addUpdate ends the update h, which under checkOnly only counts.
func (p *parser) addUpdate(h Hunk) {
	p.nhunks++
	if p.checkOnly {
		return
	}
	p.closeChunk()
	h.Chunks = p.chunks.take()
	p.hunks = append(p.hunks, h)
}

// quote shows a line in an error, shortened.
func quote(s string) string {
	const max = 40
	if len(s) > max {
		return strconv.Quote(s[:max]) + "..."
	}
	return strconv.Quote(s)
}

// String writes the patch in the grammar's canonical form. For a Patch
// returned by Parse, Parse(p.String()) returns an equal Patch.
func (p *Patch) String() string {
	var b strings.Builder
	b.Grow(p.size())
	b.WriteString(beginPatch + "\n")
	if p.Environment != "" {
		b.WriteString(envPrefix)
		b.WriteString(p.Environment)
		b.WriteByte('\n')
	}
	for i := range p.Hunks {
		h := &p.Hunks[i]
		switch h.Kind {
		case AddFile:
			writeLine(&b, addPrefix, h.Path)
			for _, l := range h.Lines {
				writeLine(&b, "+", l)
			}
		case DeleteFile:
			writeLine(&b, deletePrefix, h.Path)
		case UpdateFile:
			writeLine(&b, updatePrefix, h.Path)
			if h.MoveTo != "" {
				writeLine(&b, movePrefix, h.MoveTo)
			}
			for _, c := range h.Chunks {
				switch {
				case c.Unmarked:
				case c.Context == "":
					b.WriteString("@@\n")
				default:
					writeLine(&b, "@@ ", c.Context)
				}
				for _, l := range c.Lines {
					b.WriteByte(l.Op)
					b.WriteString(l.Text)
					b.WriteByte('\n')
				}
			}
			if h.EndOfFile {
				b.WriteString(endOfFile + "\n")
			}
		}
	}
	b.WriteString(endPatch + "\n")
	return b.String()
}

// size is the length of String's result, so that it allocates once.
func (p *Patch) size() int {
	n := len(beginPatch) + len(endPatch) + 2
	if p.Environment != "" {
		n += len(envPrefix) + len(p.Environment) + 1
	}
	for i := range p.Hunks {
		h := &p.Hunks[i]
		switch h.Kind {
		case AddFile:
			n += len(addPrefix) + len(h.Path) + 1
			for _, l := range h.Lines {
				n += len(l) + 2
			}
		case DeleteFile:
			n += len(deletePrefix) + len(h.Path) + 1
		case UpdateFile:
			n += len(updatePrefix) + len(h.Path) + 1
			if h.MoveTo != "" {
				n += len(movePrefix) + len(h.MoveTo) + 1
			}
			for _, c := range h.Chunks {
				if !c.Unmarked {
					n += 3 + len(c.Context) + 1
				}
				for _, l := range c.Lines {
					n += len(l.Text) + 2
				}
			}
			if h.EndOfFile {
				n += len(endOfFile) + 1
			}
		}
	}
	return n
}

func writeLine(b *strings.Builder, prefix, text string) {
	b.WriteString(prefix)
	b.WriteString(text)
	b.WriteByte('\n')
}
