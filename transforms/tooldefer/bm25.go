package tooldefer

import (
	"hash/maphash"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// bm25 ranks the deferred tools for a query by Okapi BM25 over the words
// of each tool's name, description and parameter names (the name's words
// count twice: a tool is found by what it is called first). Built once per
// request, at its first search, in one pass over the definitions.
type bm25 struct {
	names []string
	docs  []map[string]int // term -> count, per tool
	lens  []int
	df    map[string]int
	avg   float64
}

const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// indexes keeps the indexes built for recent requests, keyed by a hash
// of the deferred tools' definitions: a client sends the same tools with
// every turn, and building an index over hundreds of them costs
// milliseconds. It changes no answer (an index is a pure function of the
// definitions, and a hit is checked against the names); it is bounded.
var indexes = struct {
	sync.Mutex
	m map[uint64]*bm25
}{m: map[uint64]*bm25{}}

const maxIndexes = 64

var indexSeed = maphash.MakeSeed()

// indexFor returns the index of the deferred tools, from the cache when
// the same definitions were indexed before.
func indexFor(names []string, defs map[string][]byte) *bm25 {
	var h maphash.Hash
	h.SetSeed(indexSeed)
	for _, n := range names {
		h.WriteString(n)
		h.WriteByte(0)
		h.Write(defs[n])
		h.WriteByte(0)
	}
	k := h.Sum64()
	indexes.Lock()
	ix, ok := indexes.m[k]
	indexes.Unlock()
	if ok && slices.Equal(ix.names, names) {
		return ix
	}
	ix = newBM25(names, defs)
	indexes.Lock()
	if len(indexes.m) >= maxIndexes {
		for old := range indexes.m {
			delete(indexes.m, old)
			break
		}
	}
	indexes.m[k] = ix
	indexes.Unlock()
	return ix
}

func newBM25(names []string, defs map[string][]byte) *bm25 {
	ix := &bm25{names: slices.Clone(names), df: map[string]int{}}
	total := 0
	for _, n := range names {
		terms := map[string]int{}
		size := 0
		var buf []string
		add := func(s string, weight int) {
			buf = appendWords(buf[:0], s)
			for _, t := range buf {
				terms[t] += weight
				size += weight
			}
		}
		add(n, 2)
		def := defs[n]
		obj := 0
		if fn := jsonspan.Lookup(def, 0, "function"); fn.Start >= 0 && def[fn.Start] == '{' {
			obj = fn.Start // Chat's nested shape
		}
		if desc, ok := jsonspan.StringValue(def, jsonspan.Lookup(def, obj, "description")); ok {
			add(desc, 1)
		}
		if ps := jsonspan.Lookup(def, obj, "parameters"); ps.Start >= 0 && def[ps.Start] == '{' {
			if props := jsonspan.Lookup(def, ps.Start, "properties"); props.Start >= 0 && def[props.Start] == '{' {
				jsonspan.EachMember(def, props.Start, func(m jsonspan.Member) bool {
					add(jsonspan.KeyName(def, m.Key), 1)
					return true
				})
			}
		}
		for t := range terms {
			ix.df[t]++
		}
		ix.docs = append(ix.docs, terms)
		ix.lens = append(ix.lens, size)
		total += size
	}
	if len(names) > 0 {
		ix.avg = float64(total) / float64(len(names))
	}
	return ix
}

// search returns the names of the k best tools for query, best first;
// only tools sharing a word with it.
func (ix *bm25) search(query string, k int) []string {
	q := words(query)
	n := float64(len(ix.names))
	type hit struct {
		i     int
		score float64
	}
	var hits []hit
	for i, terms := range ix.docs {
		score := 0.0
		for _, t := range q {
			f := float64(terms[t])
			if f == 0 {
				continue
			}
			df := float64(ix.df[t])
			idf := logf((n-df+0.5)/(df+0.5) + 1)
			score += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*float64(ix.lens[i])/ix.avg))
		}
		if score > 0 {
			hits = append(hits, hit{i, score})
		}
	}
	sort.SliceStable(hits, func(a, b int) bool { return hits[a].score > hits[b].score })
	var out []string
	for _, h := range hits[:min(k, len(hits))] {
		out = append(out, ix.names[h.i])
	}
	return out
}

// words splits text into lower-case words: at anything not a letter or
// digit, and within names at case changes (createIssue, HTTPServer).
func words(s string) []string {
	return appendWords(nil, s)
}

func appendWords(out []string, s string) []string {
	start := -1 // the current word's first byte
	var prev rune
	flush := func(end int) {
		if start >= 0 && (end-start > 1 || end-start == 1 && s[start] >= '0' && s[start] <= '9') {
			w := strings.ToLower(s[start:end])
			if !stopWords[w] {
				out = append(out, w)
			}
		}
		start = -1
	}
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if start >= 0 && unicode.IsUpper(r) && (unicode.IsLower(prev) ||
				unicode.IsUpper(prev) && i+size < len(s) && nextIsLower(s[i+size:])) {
				flush(i)
			}
			if start < 0 {
				start = i
			}
		default:
			flush(i)
		}
		prev = r
		i += size
	}
	flush(len(s))
	return out
}

func nextIsLower(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsLower(r)
}

var stopWords = map[string]bool{
	"the": true, "a": true, "an": true, "of": true, "to": true, "and": true, "or": true, "in": true,
	"on": true, "for": true, "with": true, "is": true, "it": true, "this": true, "that": true, "be": true,
	"by": true, "as": true, "at": true, "from": true, "are": true, "if": true, "can": true, "use": true,
}

func logf(v float64) float64 { return math.Log(v) }
