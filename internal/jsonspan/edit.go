package jsonspan

import (
	"cmp"
	"fmt"
	"io"
	"slices"
)

// Edit replaces doc[Start:End] with Repl; Start == End inserts.
type Edit struct {
	Start, End int
	Repl       []byte
	// Write, when set, stands in for Repl: it appends the replacement to
	// the document being built, so a large replacement is written once, in
	// place, instead of being built apart and copied in. Size is its
	// expected length, for sizing the output; it need not be exact unless
	// Exact says so.
	Write func(dst []byte) []byte
	Size  int
	// Exact says Size is the length Write appends: a document built as it
	// is read (EditReader) announces its length before it is built.
	Exact bool
}

// EditedSize returns the length of doc once edits are applied, so the
// caller can size the output buffer once.
func EditedSize(doc []byte, edits []Edit) int {
	n := len(doc)
	for _, e := range edits {
		if e.Write != nil {
			n += e.Size - (e.End - e.Start)
		} else {
			n += len(e.Repl) - (e.End - e.Start)
		}
	}
	return n
}

// ExactSize returns the length of doc once edits are applied and true, or
// false when a replacement's length is only an estimate.
func ExactSize(doc []byte, edits []Edit) (int, bool) {
	for _, e := range edits {
		if e.Write != nil && !e.Exact {
			return 0, false
		}
	}
	return EditedSize(doc, edits), true
}

// SortEdits orders edits by Start, as AppendEdits and EditReader need them,
// and panics on an overlap, as AppendEdits does.
func SortEdits(edits []Edit) {
	slices.SortStableFunc(edits, func(a, b Edit) int { return cmp.Compare(a.Start, b.Start) })
	for k := 1; k < len(edits); k++ {
		if p, e := edits[k-1], edits[k]; e.Start < p.End {
			panic(fmt.Sprintf("jsonspan: overlapping edits [%d,%d) and [%d,%d)", p.Start, p.End, e.Start, e.End))
		}
	}
}

// EditReader reads doc with edits applied without building it whole: the
// unchanged bytes come straight from doc, and a replacement is built when
// the reader reaches it, in a buffer reused from one to the next. A large
// request body that goes on to the upstream is then held once, as it
// came, not twice. The edits must be sorted (SortEdits) and stay valid,
// with whatever their Write functions read, until the reader is done.
type EditReader struct {
	doc   []byte
	edits []Edit
	pos   int    // the next byte of doc to copy
	k     int    // the next edit
	pend  []byte // a replacement, or what is left of it
	buf   []byte // where Write builds a replacement
}

// NewEditReader returns a reader of doc with edits applied, which buf may
// hold the replacements in.
func NewEditReader(doc []byte, edits []Edit, buf []byte) *EditReader {
	return &EditReader{doc: doc, edits: edits, buf: buf[:0]}
}

func (r *EditReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(r.pend) > 0 {
			c := copy(p[n:], r.pend)
			r.pend = r.pend[c:]
			n += c
			continue
		}
		end := len(r.doc)
		if r.k < len(r.edits) {
			end = r.edits[r.k].Start
		}
		if r.pos < end {
			c := copy(p[n:], r.doc[r.pos:end])
			r.pos += c
			n += c
			continue
		}
		if r.k == len(r.edits) {
			if n == 0 {
				return 0, io.EOF
			}
			break
		}
		e := &r.edits[r.k]
		r.k++
		r.pos = e.End
		if e.Write != nil && e.Exact && e.Size <= len(p)-n {
			// It fits: written straight into p, not built apart first.
			w := e.Write(p[n:n:len(p)])
			if len(w) != e.Size {
				return n, fmt.Errorf("jsonspan: the replacement of [%d,%d) is %d bytes, not the %d announced", e.Start, e.End, len(w), e.Size)
			}
			if len(w) > 0 && &w[0] != &p[n] {
				copy(p[n:], w) // the writer wanted more room than it used
			}
			n += e.Size
			continue
		}
		if e.Write != nil {
			r.buf = e.Write(r.buf[:0])
			r.pend = r.buf
			if e.Exact && len(r.buf) != e.Size {
				// The length announced for the document is wrong: better
				// no document than one cut short or running over.
				return n, fmt.Errorf("jsonspan: the replacement of [%d,%d) is %d bytes, not the %d announced", e.Start, e.End, len(r.buf), e.Size)
			}
		} else {
			r.pend = e.Repl
		}
	}
	return n, nil
}

// Buffer returns the replacement buffer, for reuse once the reader is done.
func (r *EditReader) Buffer() []byte { return r.buf[:0] }

// Apply returns doc with the edits applied, in a new slice, or doc itself
// when there are none.
func Apply(doc []byte, edits []Edit) []byte {
	if len(edits) == 0 {
		return doc
	}
	return AppendEdits(make([]byte, 0, EditedSize(doc, edits)), doc, edits)
}

// AppendEdits appends doc with the edits applied to out, copying every
// byte outside the edits verbatim. It sorts edits by Start in place; their
// order in the slice does not matter, but they must not overlap: two
// rules rewriting the same bytes is a programming error, and AppendEdits
// panics naming both edits rather than guess which one wins.
func AppendEdits(out, doc []byte, edits []Edit) []byte {
	SortEdits(edits)
	pos := 0
	for _, e := range edits {
		out = append(out, doc[pos:e.Start]...)
		if e.Write != nil {
			out = e.Write(out)
		} else {
			out = append(out, e.Repl...)
		}
		pos = e.End
	}
	return append(out, doc[pos:]...)
}

// ObjWriter builds a rewritten JSON object member by member. B is the
// output so far; callers append member values to it directly.
type ObjWriter struct {
	B     []byte
	first bool
}

// NewObj starts an object at the end of dst.
func NewObj(dst []byte) ObjWriter { return ObjWriter{B: append(dst, '{'), first: true} }

// Sep writes the comma that separates a member from the one before it.
func (w *ObjWriter) Sep() {
	if !w.first {
		w.B = append(w.B, ',')
	}
	w.first = false
}

// Raw copies a member unchanged.
func (w *ObjWriter) Raw(doc []byte, m Member) {
	w.Sep()
	w.B = append(w.B, doc[m.Key.Start:m.Key.End]...)
	w.B = append(w.B, ':')
	w.B = append(w.B, doc[m.Value.Start:m.Value.End]...)
}

// Key starts a member whose value the caller appends. k is written as it
// is: keys are the rules' own constants and need no escaping.
func (w *ObjWriter) Key(k string) {
	w.Sep()
	w.B = append(w.B, '"')
	w.B = append(w.B, k...)
	w.B = append(w.B, '"', ':')
}

// Close ends the object and returns the output.
func (w *ObjWriter) Close() []byte { return append(w.B, '}') }

// Retype writes the object at obj with its "type" member set to typ. fn
// sees every other member first and reports whether it wrote, or
// deliberately dropped, that member; the members it declines are copied
// unchanged. This is the shape of every item and selector conversion.
func Retype(w *ObjWriter, doc []byte, obj Span, typ string, fn func(w *ObjWriter, m Member) bool) {
	RetypeKnown(w, doc, obj, NoSpan(), typ, fn)
}

// RetypeKnown is Retype for a caller that already validated the value at
// known, one of the object's members (a call's arguments, megabytes
// perhaps): the walk steps over it instead of crossing it again.
func RetypeKnown(w *ObjWriter, doc []byte, obj, known Span, typ string, fn func(w *ObjWriter, m Member) bool) {
	WalkMembers(doc, obj.Start, func(k Span, v int) int {
		ve := known.End
		if v != known.Start {
			if ve = SkipValue(doc, v); ve < 0 {
				return ve
			}
		}
		switch m := (Member{Key: k, Value: Span{v, ve}}); {
		case m.KeyIs(doc, "type"):
			w.Key("type")
			w.B = append(w.B, '"')
			w.B = append(w.B, typ...)
			w.B = append(w.B, '"')
		case fn == nil || !fn(w, m):
			w.Raw(doc, m)
		}
		return ve
	})
}

// DropMember is a Retype callback that removes the members named.
func DropMember(doc []byte, names ...string) func(*ObjWriter, Member) bool {
	return func(_ *ObjWriter, m Member) bool {
		for _, n := range names {
			if m.KeyIs(doc, n) {
				return true
			}
		}
		return false
	}
}

// SameSlice reports whether a and b are the same bytes in memory, not just
// equal ones: how callers learn that a rewrite handed back its input, i.e.
// changed nothing, without comparing megabytes.
func SameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// RemoveMember returns the edit that deletes the member whose value is at
// v from the object around it, with the comma that separates it from a
// neighbour, leaving the object valid. The key must hold no quote (names
// such as "id" never do): it is found by looking back from the value.
func RemoveMember(doc []byte, v Span) Edit {
	return RemoveRun(doc, KeyStart(doc, v), v.End)
}

// KeyStart returns where the key of the member whose value is at v begins.
// The key must hold no quote.
func KeyStart(doc []byte, v Span) int {
	colon := v.Start - 1
	for doc[colon] != ':' {
		colon--
	}
	end := colon - 1
	for doc[end] != '"' {
		end--
	}
	start := end - 1
	for doc[start] != '"' {
		start--
	}
	return start
}

// RemoveRun returns the edit that deletes doc[start:end], one or more
// adjacent members of an object or elements of an array, with the comma
// that separates the run from a neighbour: the one after it, or for a run
// at the end, the one before. Runs removed this way from one container
// never overlap when kept elements separate them.
func RemoveRun(doc []byte, start, end int) Edit {
	if next := SkipSpace(doc, end); next < len(doc) && doc[next] == ',' {
		return Edit{Start: start, End: SkipSpace(doc, next+1)}
	}
	prev := start - 1
	for prev >= 0 && (doc[prev] == ' ' || doc[prev] == '\t' || doc[prev] == '\n' || doc[prev] == '\r') {
		prev--
	}
	if prev >= 0 && doc[prev] == ',' {
		return Edit{Start: prev, End: end}
	}
	return Edit{Start: start, End: end}
}

// RemoveMembers returns the edits that delete the members of one object
// whose values are at vals, in document order, each with a comma. Members
// next to each other go as one run, so the edits never claim the same
// comma.
func RemoveMembers(doc []byte, vals []Span) []Edit {
	var edits []Edit
	for i := 0; i < len(vals); {
		start, end := KeyStart(doc, vals[i]), vals[i].End
		j := i + 1
		for ; j < len(vals); j++ {
			next := SkipSpace(doc, end)
			if next >= len(doc) || doc[next] != ',' || SkipSpace(doc, next+1) != KeyStart(doc, vals[j]) {
				break
			}
			end = vals[j].End
		}
		edits = append(edits, RemoveRun(doc, start, end))
		i = j
	}
	return edits
}

// AppendArray appends a JSON array of the values at spans in doc.
func AppendArray(dst, doc []byte, spans []Span) []byte {
	dst = append(dst, '[')
	for i, sp := range spans {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, doc[sp.Start:sp.End]...)
	}
	return append(dst, ']')
}
