package tooldefer

import (
	"math"
	"sort"
	"strings"
	"unicode"

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

func newBM25(names []string, defs map[string][]byte) *bm25 {
	ix := &bm25{names: names, df: map[string]int{}}
	total := 0
	for _, n := range names {
		terms := map[string]int{}
		size := 0
		add := func(s string, weight int) {
			for _, t := range words(s) {
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
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 1 || len(cur) == 1 && unicode.IsDigit(cur[0]) {
			w := strings.ToLower(string(cur))
			if !stopWords[w] {
				out = append(out, w)
			}
		}
		cur = cur[:0]
	}
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if unicode.IsUpper(r) && len(cur) > 0 && (unicode.IsLower(cur[len(cur)-1]) ||
				i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(cur[len(cur)-1])) {
				flush()
			}
			cur = append(cur, r)
		default:
			flush()
		}
	}
	flush()
	return out
}

var stopWords = map[string]bool{
	"the": true, "a": true, "an": true, "of": true, "to": true, "and": true, "or": true, "in": true,
	"on": true, "for": true, "with": true, "is": true, "it": true, "this": true, "that": true, "be": true,
	"by": true, "as": true, "at": true, "from": true, "are": true, "if": true, "can": true, "use": true,
}

func logf(v float64) float64 { return math.Log(v) }
