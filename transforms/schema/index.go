package schema

import (
	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// spanIndex holds the members of every object and the elements of every
// array of one schema, by where they start, read in one pass. The writer
// walks a schema object by object, and walking each object's members
// skips over everything nested in them: without the index, bytes nested
// d deep are read d times. at has a slot per byte of the schema (cleared
// in its length, unlike a map), +k for objs[k-1], -k for arrs[k-1].
type spanIndex struct {
	base int
	at   []int32
	objs [][]jsonspan.Member
	arrs [][]jsonspan.Span
}

// reset readies the index for a schema of size bytes at base.
func (ix *spanIndex) reset(base, size int) {
	ix.base = base
	if cap(ix.at) < size {
		ix.at = make([]int32, size)
	} else {
		ix.at = ix.at[:size]
		clear(ix.at)
	}
	clear(ix.objs)
	clear(ix.arrs)
	ix.objs, ix.arrs = ix.objs[:0], ix.arrs[:0]
}

func (ix *spanIndex) setObj(start int, ms []jsonspan.Member) {
	ix.objs = append(ix.objs, ms)
	ix.at[start-ix.base] = int32(len(ix.objs))
}

func (ix *spanIndex) setArr(start int, els []jsonspan.Span) {
	ix.arrs = append(ix.arrs, els)
	ix.at[start-ix.base] = -int32(len(ix.arrs))
}

func (ix *spanIndex) obj(start int) ([]jsonspan.Member, bool) {
	if i := start - ix.base; i >= 0 && i < len(ix.at) && ix.at[i] > 0 {
		return ix.objs[ix.at[i]-1], true
	}
	return nil, false
}

func (ix *spanIndex) arr(start int) ([]jsonspan.Span, bool) {
	if i := start - ix.base; i >= 0 && i < len(ix.at) && ix.at[i] < 0 {
		return ix.arrs[-ix.at[i]-1], true
	}
	return nil, false
}

// index indexes the value at v of doc into p.written, for a schema the
// first pass changed; nil when it is not one JSON value or nests too deep
// (the writer then reads as it would without).
func (p *treeParser) index(doc []byte, v jsonspan.Span) *spanIndex {
	ix := &p.written
	ix.reset(v.Start, v.End-v.Start)
	if end := p.indexValue(ix, doc[:v.End], v.Start, 0); end != v.End {
		return nil
	}
	return ix
}

// indexValue indexes the value at doc[i] and returns the index past it,
// -1 when it is not JSON.
func (p *treeParser) indexValue(ix *spanIndex, doc []byte, i, depth int) int {
	if depth > maxSchemaNesting+1 || i >= len(doc) {
		return -1
	}
	start := i
	switch doc[i] {
	case '{':
		mb := len(p.members)
		i = jsonspan.SkipSpace(doc, i+1)
		if i < len(doc) && doc[i] == '}' {
			ix.setObj(start, nil)
			return i + 1
		}
		for i < len(doc) && doc[i] == '"' {
			ke := jsonspan.SkipString(doc, i)
			if ke < 0 {
				return -1
			}
			k := jsonspan.Span{Start: i, End: ke}
			i = jsonspan.SkipSpace(doc, ke)
			if i >= len(doc) || doc[i] != ':' {
				return -1
			}
			vs := jsonspan.SkipSpace(doc, i+1)
			ve := p.indexValue(ix, doc, vs, depth+1)
			if ve < 0 {
				return -1
			}
			p.members = append(p.members, jsonspan.Member{Key: k, Value: jsonspan.Span{Start: vs, End: ve}})
			i = jsonspan.SkipSpace(doc, ve)
			if i < len(doc) && doc[i] == ',' {
				i = jsonspan.SkipSpace(doc, i+1)
				continue
			}
			if i < len(doc) && doc[i] == '}' {
				ix.setObj(start, p.memSlab.cut(p.members[mb:]))
				p.members = p.members[:mb]
				return i + 1
			}
			return -1
		}
		return -1
	case '[':
		sb := len(p.spans)
		i = jsonspan.SkipSpace(doc, i+1)
		if i < len(doc) && doc[i] == ']' {
			ix.setArr(start, nil)
			return i + 1
		}
		for i < len(doc) {
			e := p.indexValue(ix, doc, i, depth+1)
			if e < 0 {
				return -1
			}
			p.spans = append(p.spans, jsonspan.Span{Start: i, End: e})
			i = jsonspan.SkipSpace(doc, e)
			if i < len(doc) && doc[i] == ',' {
				i = jsonspan.SkipSpace(doc, i+1)
				continue
			}
			if i < len(doc) && doc[i] == ']' {
				ix.setArr(start, p.spnSlab.cut(p.spans[sb:]))
				p.spans = p.spans[:sb]
				return i + 1
			}
			return -1
		}
		return -1
	}
	return jsonspan.SkipValue(doc, i)
}

// eachMember is jsonspan.EachMember over the writer's document, from the
// index when there is one.
func (s *schemaWriter) eachMember(start int, fn func(m jsonspan.Member) bool) {
	if s.index != nil {
		if ms, ok := s.index.obj(start); ok {
			for _, m := range ms {
				if !fn(m) {
					return
				}
			}
			return
		}
	}
	jsonspan.EachMember(s.doc, start, fn)
}

// eachElement is jsonspan.EachElement over the writer's document, from
// the index when there is one.
func (s *schemaWriter) eachElement(start int, fn func(el jsonspan.Span) bool) {
	if s.index != nil {
		if els, ok := s.index.arr(start); ok {
			for _, el := range els {
				if !fn(el) {
					return
				}
			}
			return
		}
	}
	jsonspan.EachElement(s.doc, start, fn)
}
