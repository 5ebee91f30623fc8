package schemaargs

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// formatValues are the strings generated for the formats a string schema
// may name; other formats are annotations here.
var formatValues = map[string]string{
	"date-time":             "2024-01-02T03:04:05Z",
	"date":                  "2024-01-02",
	"time":                  "03:04:05Z", // RFC 3339 full-time: with its offset
	"duration":              "P1D",
	"email":                 "a@example.com",
	"idn-email":             "a@example.com",
	"hostname":              "example.com",
	"idn-hostname":          "example.com",
	"uri":                   "https://example.com",
	"iri":                   "https://example.com",
	"uri-reference":         "https://example.com",
	"iri-reference":         "https://example.com",
	"url":                   "https://example.com",
	"uri-template":          "https://example.com",
	"uuid":                  "123e4567-e89b-12d3-a456-426614174000",
	"ipv4":                  "192.0.2.1",
	"ipv6":                  "2001:db8::1",
	"json-pointer":          "/a",
	"relative-json-pointer": "0",
	"regex":                 "x",
}

// fallbackStrings are tried, after the pattern's own sample, when a pattern
// or length rules out the plain "x".
var fallbackStrings = []string{
	"x", "a", "A", "1", "0", "xx", "aa", "AA", "11", "1d", "a1", "abc", "ABC",
	"123", "a-b", "a_b", "a.b", "abc123", "https://example.com", "a@example.com",
	"2024-01-02", "2024-01-02T03:04:05Z", "",
}

// compile is the Go regexp of a JSON Schema pattern, cached; nil when Go's
// syntax cannot read it (lookarounds, backreferences).
func (g *generator) compile(pattern string) *regexp.Regexp {
	if re, ok := g.regexps[pattern]; ok {
		return re
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		re = nil
	}
	g.regexps[pattern] = re
	return re
}

// str generates a string meeting the string keywords of every schema in
// nodes: format, pattern, minLength and maxLength.
func (g *generator) str(nodes []*node) (*node, bool) {
	minL, maxL := 0, -1
	var pats []*regexp.Regexp
	format := ""
	for _, s := range nodes {
		if n, ok := intMember(s, "minLength"); ok && n > minL {
			minL = n
		}
		if n, ok := intMember(s, "maxLength"); ok && (maxL < 0 || n < maxL) {
			maxL = n
		}
		if p := s.get("pattern"); p != nil && p.k == kStr {
			re := g.compile(p.s)
			if re == nil {
				return nil, false
			}
			pats = append(pats, re)
		}
		if f := s.get("format"); f != nil && f.k == kStr && format == "" {
			if _, known := formatValues[f.s]; known {
				format = f.s
			}
		}
	}
	if minL > maxSampleLen {
		return nil, false
	}
	fits := func(c string) bool {
		n := utf8.RuneCountInString(c)
		if n < minL || (maxL >= 0 && n > maxL) {
			return false
		}
		for _, re := range pats {
			if !re.MatchString(c) {
				return false
			}
		}
		return true
	}
	if format != "" {
		// A format's value is the only one tried: another string would
		// not be one of that format.
		if c := formatValues[format]; fits(c) {
			return strNode(c), true
		}
		return nil, false
	}
	n := max(minL, 1)
	if maxL >= 0 && n > maxL {
		n = maxL
	}
	cands := []string{strings.Repeat("x", n)}
	for _, re := range pats {
		if s, ok := sample(re.String()); ok {
			cands = append(cands, s)
			if short := minL - utf8.RuneCountInString(s); short > 0 {
				cands = append(cands, s+strings.Repeat("x", short), strings.Repeat("x", short)+s)
			}
		}
	}
	cands = append(cands, fallbackStrings...)
	for _, c := range cands {
		if fits(c) {
			return strNode(c), true
		}
	}
	return nil, false
}

// fitsString reports whether the string s meets the schema sch's string
// keywords (enum, const, pattern, lengths): propertyNames' check of a
// generated key.
func (g *generator) fitsString(sch *node, s string) bool {
	if sch.isFalse() {
		return false
	}
	if sch.k != kObj {
		return true
	}
	v := strNode(s)
	if c := sch.get("const"); c != nil && !equal(c, v) {
		return false
	}
	if e := sch.get("enum"); e != nil && e.k == kArr && !contains(e, v) {
		return false
	}
	if p := sch.get("pattern"); p != nil && p.k == kStr {
		re := g.compile(p.s)
		if re == nil || !re.MatchString(s) {
			return false
		}
	}
	n := utf8.RuneCountInString(s)
	if m, ok := intMember(sch, "minLength"); ok && n < m {
		return false
	}
	if m, ok := intMember(sch, "maxLength"); ok && n > m {
		return false
	}
	return true
}

// sample is a short string the regular expression matches, built from its
// syntax tree: the first alternative, the fewest repeats, a plain pick of
// each character class. The caller checks it against the pattern.
func sample(pattern string) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	var b strings.Builder
	if !sampleInto(&b, re, 0) {
		return "", false
	}
	return b.String(), true
}

// maxSampleLen bounds a sample: a{1000000} is not worth writing out.
const maxSampleLen = 1 << 12

func sampleInto(b *strings.Builder, re *syntax.Regexp, depth int) bool {
	if depth > 100 || b.Len() > maxSampleLen {
		return false
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return false
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			b.WriteRune(r)
		}
	case syntax.OpCharClass:
		r, ok := pickRune(re.Rune)
		if !ok {
			return false
		}
		b.WriteRune(r)
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		b.WriteByte('x')
	case syntax.OpCapture:
		return sampleInto(b, re.Sub[0], depth+1)
	case syntax.OpPlus:
		return sampleInto(b, re.Sub[0], depth+1)
	case syntax.OpRepeat:
		for range re.Min {
			if !sampleInto(b, re.Sub[0], depth+1) {
				return false
			}
		}
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !sampleInto(b, sub, depth+1) {
				return false
			}
		}
	case syntax.OpAlternate:
		mark := b.String()
		for _, sub := range re.Sub {
			if sampleInto(b, sub, depth+1) {
				return true
			}
			b.Reset()
			b.WriteString(mark)
		}
		return false
	}
	// OpEmptyMatch, anchors, word boundaries, OpStar, OpQuest: nothing.
	return true
}

// pickRune picks a character of a class (pairs of inclusive ranges):
// a plain one of "xa1A0" when the class has it, else the class's first
// printable character.
func pickRune(ranges []rune) (rune, bool) {
	in := func(r rune) bool {
		for i := 0; i+1 < len(ranges); i += 2 {
			if ranges[i] <= r && r <= ranges[i+1] {
				return true
			}
		}
		return false
	}
	for _, r := range "xa1A0" {
		if in(r) {
			return r, true
		}
	}
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i+1] >= 0x21 {
			return max(ranges[i], 0x21), true
		}
	}
	if len(ranges) >= 2 {
		return ranges[0], true
	}
	return 0, false
}

// contains reports whether the array arr holds a value equal to v.
func contains(arr, v *node) bool {
	for _, w := range arr.arr {
		if equal(w, v) {
			return true
		}
	}
	return false
}

// intMember is the non-negative integer member key of the schema s.
func intMember(s *node, key string) (int, bool) {
	f, ok := s.get(key).num()
	if !ok || f < 0 || f > 1<<30 {
		return 0, false
	}
	return int(f), true
}
