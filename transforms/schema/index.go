package schema

import (
	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// spanIndex holds the members of every object and the elements of every
// array of one schema, by where they start, read in one pass. The writer
// walks a schema object by object, and walking each object's members
// skips over everything nested in them: without the index, bytes nested
// d deep are read d times.
type spanIndex struct {
	objs map[int][]jsonspan.Member
	arrs map[int][]jsonspan.Span
}

// indexSchema indexes the value at v of doc; nil when it is not one JSON
// value or nests too deep (the writer then reads as it would without).
func indexSchema(doc []byte, v jsonspan.Span) *spanIndex {
	ix := &spanIndex{objs: map[int][]jsonspan.Member{}, arrs: map[int][]jsonspan.Span{}}
	if end := ix.value(doc[:v.End], v.Start, 0); end != v.End {
		return nil
	}
	return ix
}

// value indexes the value at doc[i] and returns the index past it, -1
// when it is not JSON.
func (ix *spanIndex) value(doc []byte, i, depth int) int {
	if depth > maxSchemaNesting+1 || i >= len(doc) {
		return -1
	}
	start := i
	switch doc[i] {
	case '{':
		var ms []jsonspan.Member
		i = jsonspan.SkipSpace(doc, i+1)
		if i < len(doc) && doc[i] == '}' {
			ix.objs[start] = ms
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
			ve := ix.value(doc, vs, depth+1)
			if ve < 0 {
				return -1
			}
			ms = append(ms, jsonspan.Member{Key: k, Value: jsonspan.Span{Start: vs, End: ve}})
			i = jsonspan.SkipSpace(doc, ve)
			if i < len(doc) && doc[i] == ',' {
				i = jsonspan.SkipSpace(doc, i+1)
				continue
			}
			if i < len(doc) && doc[i] == '}' {
				ix.objs[start] = ms
				return i + 1
			}
			return -1
		}
		return -1
	case '[':
		var els []jsonspan.Span
		i = jsonspan.SkipSpace(doc, i+1)
		if i < len(doc) && doc[i] == ']' {
			ix.arrs[start] = els
			return i + 1
		}
		for i < len(doc) {
			e := ix.value(doc, i, depth+1)
			if e < 0 {
				return -1
			}
			els = append(els, jsonspan.Span{Start: i, End: e})
			i = jsonspan.SkipSpace(doc, e)
			if i < len(doc) && doc[i] == ',' {
				i = jsonspan.SkipSpace(doc, i+1)
				continue
			}
			if i < len(doc) && doc[i] == ']' {
				ix.arrs[start] = els
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
		if ms, ok := s.index.objs[start]; ok {
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
		if els, ok := s.index.arrs[start]; ok {
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
