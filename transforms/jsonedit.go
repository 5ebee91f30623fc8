package transforms

import (
	"github.com/llmtransform/caddy-llm-transform/streambuf"
	"sort"
	"sync"
)

// edit replaces doc[start:end] with repl.
type edit struct {
	start, end int
	repl       []byte
}

// applyEdits builds the rewritten document in one copy. Large documents
// are built in pooled buffers: a fresh multi-megabyte allocation per request
// costs more in page faults and zeroing than the rewrite itself.
func (x *Exchange) applyEdits(doc []byte, edits []edit) []byte {
	if len(edits) == 0 {
		return doc
	}
	out := x.buffer(editedSize(doc, edits))
	return appendEdits(out, doc, edits)
}

func editedSize(doc []byte, edits []edit) int {
	n := len(doc)
	for _, e := range edits {
		n += len(e.repl) - (e.end - e.start)
	}
	return n
}

// applyEdits returns doc with the edits applied, in a new slice.
func applyEdits(doc []byte, edits []edit) []byte {
	if len(edits) == 0 {
		return doc
	}
	return appendEdits(make([]byte, 0, editedSize(doc, edits)), doc, edits)
}

func appendEdits(out, doc []byte, edits []edit) []byte {
	sort.Slice(edits, func(i, j int) bool { return edits[i].start < edits[j].start })
	pos := 0
	for _, e := range edits {
		out = append(out, doc[pos:e.start]...)
		out = append(out, e.repl...)
		pos = e.end
	}
	return append(out, doc[pos:]...)
}

// objWriter builds a rewritten JSON object member by member.
type objWriter struct {
	b     []byte
	first bool
}

func newObj(dst []byte) objWriter { return objWriter{b: append(dst, '{'), first: true} }

func (w *objWriter) sep() {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
}

// raw copies a member unchanged.
func (w *objWriter) raw(doc []byte, m member) {
	w.sep()
	w.b = append(w.b, doc[m.key.start:m.key.end]...)
	w.b = append(w.b, ':')
	w.b = append(w.b, doc[m.value.start:m.value.end]...)
}

// key starts a member whose value the caller appends.
func (w *objWriter) key(k string) {
	w.sep()
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

func (w *objWriter) close() []byte { return append(w.b, '}') }

// Buffers of at least pooledMin bytes are recycled between requests.
const pooledMin = 64 << 10

var bodyPool sync.Pool // of *[]byte

func (x *Exchange) buffer(n int) []byte {
	if n < pooledMin {
		return make([]byte, 0, n)
	}
	if p, ok := bodyPool.Get().(*[]byte); ok && cap(*p) >= n {
		b := (*p)[:0]
		x.pooled = append(x.pooled, p)
		return b
	} else if ok {
		bodyPool.Put(p)
	}
	b := make([]byte, 0, n+n/8)
	x.pooled = append(x.pooled, &b)
	return b
}

// Release returns the request's large body buffers to the pool. Call it
// only when nothing reads the rewritten request body any more, i.e. after
// the upstream round trip has finished.
func (x *Exchange) Release() {
	for _, p := range x.pooled {
		bodyPool.Put(p)
	}
	x.pooled = nil
}

// retype writes the object at obj with its "type" member set to typ. fn
// sees every other member first and reports whether it wrote, or
// deliberately dropped, that member; the members it declines are copied
// unchanged. This is the shape of every item and selector conversion.
func retype(w *objWriter, doc []byte, obj span, typ string, fn func(w *objWriter, m member) bool) {
	eachMember(doc, obj.start, func(m member) bool {
		switch {
		case m.keyIs(doc, "type"):
			w.key("type")
			w.b = append(w.b, '"')
			w.b = append(w.b, typ...)
			w.b = append(w.b, '"')
		case fn == nil || !fn(w, m):
			w.raw(doc, m)
		}
		return true
	})
}

// dropMember is a retype callback that removes the members named.
func dropMember(doc []byte, names ...string) func(*objWriter, member) bool {
	return func(_ *objWriter, m member) bool {
		for _, n := range names {
			if m.keyIs(doc, n) {
				return true
			}
		}
		return false
	}
}

// appendJSONBytes appends s as a JSON string literal.
func appendJSONBytes(dst, s []byte) []byte { return streambuf.AppendJSONString(dst, s) }
