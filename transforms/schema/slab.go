package schema

import "sync"

// slab hands out values and slices of T from chunks it keeps: a request's
// schemas are read into thousands of small nodes and lists, which one by
// one would cost an allocation each and the collector's time after. The
// chunks serve the next request once reset.
type slab[T any] struct {
	chunks [][]T
	ci     int // the chunk being cut
	off    int // where in it
}

const slabChunk = 2048

// cut copies src into a slice of its own length (and capacity), nil for
// an empty one.
func (s *slab[T]) cut(src []T) []T {
	n := len(src)
	if n == 0 {
		return nil
	}
	if n > slabChunk/4 {
		return append(make([]T, 0, n), src...) // rare: not worth a chunk
	}
	if s.ci < len(s.chunks) && s.off+n > len(s.chunks[s.ci]) {
		s.ci, s.off = s.ci+1, 0
	}
	if s.ci == len(s.chunks) {
		s.chunks = append(s.chunks, make([]T, slabChunk))
	}
	out := s.chunks[s.ci][s.off : s.off+n : s.off+n]
	s.off += n
	copy(out, src)
	return out
}

// one returns a zero T of the slab's.
func (s *slab[T]) one() *T {
	if s.ci < len(s.chunks) && s.off == len(s.chunks[s.ci]) {
		s.ci, s.off = s.ci+1, 0
	}
	if s.ci == len(s.chunks) {
		s.chunks = append(s.chunks, make([]T, slabChunk))
	}
	p := &s.chunks[s.ci][s.off]
	s.off++
	return p
}

// reset zeroes what was handed out, so that nothing it pointed to is
// kept alive, and makes it all available again.
func (s *slab[T]) reset() {
	for i := 0; i <= s.ci && i < len(s.chunks); i++ {
		clear(s.chunks[i])
	}
	s.ci, s.off = 0, 0
}

// parsers recycle the first pass's readers, slabs and indexes included.
var parsers = sync.Pool{New: func() any { return new(treeParser) }}

func getParser() *treeParser { return parsers.Get().(*treeParser) }

// putParser gives p back once nothing read with it is used any more.
func putParser(p *treeParser) {
	p.nodes.reset()
	p.keySlab.reset()
	p.valSlab.reset()
	p.memSlab.reset()
	p.spnSlab.reset()
	clear(p.keys[:cap(p.keys)])
	clear(p.vals[:cap(p.vals)])
	p.keys, p.vals, p.members, p.spans = p.keys[:0], p.vals[:0], p.members[:0], p.spans[:0]
	p.parsed.reset(0, 0)
	p.written.reset(0, 0)
	p.ix = nil
	parsers.Put(p)
}
