package toolsplan

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// nameRule is an upstream's rule for tool names, in the one shape every
// provider documents: an optional class for the first character, a class
// for the others, and a length range. It is compiled from a pattern such
// as ^[a-zA-Z_][a-zA-Z0-9_-]{2,63}$ so that names can be repaired character
// by character, not only checked.
type nameRule struct {
	pattern   string
	re        *regexp.Regexp
	first     *regexp.Regexp // nil: the first character follows rest
	rest      *regexp.Regexp
	asciiOK   [2][128]bool // [0] first position, [1] the others
	min, max  int
	firstFill byte // put in front of a name whose first character is not allowed
}

// rulePattern is the shape name patterns must have.
var rulePattern = regexp.MustCompile(`^\^(\[[^\]]+\])?(\[[^\]]+\])(\{(\d+),(\d+)\}|\+)\$$`)

// compileNameRule reads a pattern of the form ^[first][rest]{min,max}$,
// ^[rest]{min,max}$ or ^[rest]+$; maxLen, when positive, lowers the
// maximum. The repaired names use '_' and lowercase letters and digits for
// their hash suffix, so the rest class must allow them.
func compileNameRule(pattern string, maxLen int) (*nameRule, error) {
	m := rulePattern.FindStringSubmatch(pattern)
	if m == nil {
		return nil, fmt.Errorf("name_pattern %q: want the form ^[first][rest]{min,max}$, ^[rest]{min,max}$ or ^[rest]+$", pattern)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("name_pattern %q: %v", pattern, err)
	}
	r := &nameRule{pattern: pattern, re: re, min: 1, max: 1 << 30}
	if m[1] != "" {
		r.first = regexp.MustCompile("^" + m[1] + "$")
	}
	r.rest = regexp.MustCompile("^" + m[2] + "$")
	if m[4] != "" {
		lo, _ := strconv.Atoi(m[4])
		hi, _ := strconv.Atoi(m[5])
		if lo > hi {
			return nil, fmt.Errorf("name_pattern %q: length range %d,%d is empty", pattern, lo, hi)
		}
		// The pattern counts the characters after a separate first one.
		if r.first != nil {
			lo, hi = lo+1, hi+1
		}
		r.min, r.max = max(lo, 1), hi
	}
	if maxLen > 0 {
		r.max = min(r.max, maxLen)
	}
	if r.max < hashSuffixLen+2 || r.max < r.min {
		return nil, fmt.Errorf("name_pattern %q with max_name_length %d: names need room for at least %d characters", pattern, maxLen, hashSuffixLen+2)
	}
	for c := 0; c < 128; c++ {
		s := string(rune(c))
		r.asciiOK[1][c] = r.rest.MatchString(s)
		r.asciiOK[0][c] = r.asciiOK[1][c]
		if r.first != nil {
			r.asciiOK[0][c] = r.first.MatchString(s)
		}
	}
	for _, c := range "_abcdefghijklmnopqrstuvwxyz0123456789" {
		if !r.asciiOK[1][c] {
			return nil, fmt.Errorf("name_pattern %q must allow %q after the first character: repaired names use it", pattern, c)
		}
	}
	for _, c := range []byte("_t") {
		if r.asciiOK[0][c] {
			r.firstFill = c
			break
		}
	}
	if r.firstFill == 0 {
		return nil, fmt.Errorf("name_pattern %q must allow '_' or 't' as a first character", pattern)
	}
	return r, nil
}

// allowed reports whether c may stand at position i of a name.
func (r *nameRule) allowed(c rune, i int) bool {
	pos := min(i, 1)
	if c < utf8.RuneSelf {
		return r.asciiOK[pos][c]
	}
	re := r.rest
	if pos == 0 && r.first != nil {
		re = r.first
	}
	return re.MatchString(string(c))
}

// Valid reports whether name already satisfies the rule: a loop over the
// character tables, since every tool of every request is checked.
func (r *nameRule) Valid(name string) bool {
	i := 0
	for _, c := range name {
		if !r.allowed(c, i) {
			return false
		}
		i++
	}
	return i >= r.min && i <= r.max
}

const hashSuffixLen = 7 // "_" and six base32 characters

var nameHash = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// hashSuffix is "_" and six characters of the SHA-256 of key: a function
// of the identity alone, so every turn encodes a tool the same way, also
// when its definition is no longer declared.
func hashSuffix(key string) string {
	sum := sha256.Sum256([]byte(key))
	var enc [8]byte
	nameHash.Encode(enc[:], sum[:5])
	return "_" + string(enc[:hashSuffixLen-1])
}

// sanitize replaces every character the rule does not allow with '_' and
// repairs the first one. It reports whether the name changed.
func (r *nameRule) sanitize(name string) (string, bool) {
	if r.Valid(name) {
		return name, false
	}
	b := make([]byte, 0, len(name)+1)
	i := 0
	for k := 0; k < len(name); k++ {
		// ASCII by the tables; anything else is one '_' per character.
		if c := name[k]; c < utf8.RuneSelf {
			if i == 0 && !r.asciiOK[0][c] && r.asciiOK[1][c] {
				b = append(b, r.firstFill)
				i++
			}
			switch {
			case r.asciiOK[min(i, 1)][c]:
				b = append(b, c)
			case i == 0:
				b = append(b, r.firstFill) // '_' may not start a name
			default:
				b = append(b, '_')
			}
			i++
			continue
		}
		c, size := utf8.DecodeRuneInString(name[k:])
		k += size - 1
		if i == 0 && !r.allowed(c, 0) && r.allowed(c, 1) {
			b = append(b, r.firstFill)
			i++
		}
		switch {
		case r.allowed(c, i):
			b = utf8.AppendRune(b, c)
		case i == 0:
			b = append(b, r.firstFill)
		default:
			b = append(b, '_')
		}
		i++
	}
	if i == 0 {
		b = append(b, r.firstFill)
	}
	return string(b), true
}

// withHash cuts base so that the hash suffix of key fits, and appends it.
func (r *nameRule) withHash(base, key string) string {
	keep := r.max - hashSuffixLen
	if n := utf8.RuneCountInString(base); n > keep {
		cut := 0
		for i := range base {
			if cut == keep {
				base = base[:i]
				break
			}
			cut++
		}
	}
	return base + hashSuffix(key)
}

// nameCodec encodes one request's client tool identities as upstream names.
// The encoding of an identity depends only on it and on which other
// identities of the request share its repaired name, never on their order:
// a name the rule accepts stays as it is; a repaired one is cut to the
// maximum and, when it was cut or shares its repaired form with another
// identity, gets a hash suffix of its identity.
type nameCodec struct {
	rule *nameRule
	// scoped: the upstream keeps namespaces, so names need only be
	// unique within one.
	scoped bool
	wants  map[codecKey]string // identity -> its name before repair
	names  map[codecKey]string // identity -> upstream name, after resolve
	by     map[string]codecKey // upstream name -> identity, after resolve
}

// codecKey is a client identity as the codec sees it.
type codecKey struct{ typ, ns, name string }

func (k codecKey) hashKey() string { return k.typ + "\x00" + k.ns + "\x00" + k.name }

func newNameCodec(rule *nameRule, size int) *nameCodec {
	return &nameCodec{rule: rule, wants: make(map[codecKey]string, size)}
}

// add registers an identity and the name it would like upstream.
func (c *nameCodec) add(k codecKey, want string) {
	if _, ok := c.wants[k]; !ok {
		c.wants[k] = want
	}
}

// nameClash is two identities that end up with one upstream name.
type nameClash struct {
	a, b codecKey
	name string
}

// resolve encodes every identity added. A clash is two different
// identities that still share one name: both wanted the same valid name.
func (c *nameCodec) resolve() *nameClash {
	type cand struct {
		k       codecKey
		base    string
		changed bool
	}
	cands := make([]cand, 0, len(c.wants))
	groups := make(map[string]int, len(c.wants)) // base -> identities sharing it
	for k, want := range c.wants {
		base, changed := c.rule.sanitize(want)
		if utf8.RuneCountInString(base) > c.rule.max {
			base = c.rule.withHash(base, k.hashKey())
			changed = false // the hash already makes it unique
		} else if utf8.RuneCountInString(base) < c.rule.min {
			base = c.rule.withHash(base, k.hashKey())
			changed = false
		}
		cands = append(cands, cand{k, base, changed})
		groups[c.scope(k)+base]++
	}
	c.names = make(map[codecKey]string, len(cands))
	c.by = make(map[string]codecKey, len(cands))
	for _, cd := range cands {
		name := cd.base
		if cd.changed && groups[c.scope(cd.k)+cd.base] > 1 {
			name = c.rule.withHash(cd.base, cd.k.hashKey())
		}
		c.names[cd.k] = name
	}
	// A deterministic report: of every pair sharing a name, the two
	// identities that sort first.
	var clash *nameClash
	less := func(a, b nameClash) bool {
		if a.a.hashKey() != b.a.hashKey() {
			return a.a.hashKey() < b.a.hashKey()
		}
		return a.b.hashKey() < b.b.hashKey()
	}
	var shared map[string][]codecKey
	for k, name := range c.names {
		key := c.scope(k) + name
		if other, ok := c.by[key]; ok {
			if shared == nil {
				shared = map[string][]codecKey{}
			}
			if shared[key] == nil {
				shared[key] = []codecKey{other}
			}
			shared[key] = append(shared[key], k)
			continue
		}
		c.by[key] = k
	}
	for _, keys := range shared {
		slices.SortFunc(keys, func(a, b codecKey) int { return strings.Compare(a.hashKey(), b.hashKey()) })
		name := c.names[keys[0]]
		if cand := (nameClash{keys[0], keys[1], name}); clash == nil || less(cand, *clash) {
			clash = &cand
		}
	}
	return clash
}

// scope is the part of the upstream's identity besides the name: the
// namespace of a function, when the upstream keeps namespaces.
func (c *nameCodec) scope(k codecKey) string {
	if c.scoped && k.typ == "function" && k.ns != "" {
		return k.ns + "\x00"
	}
	return ""
}

// name returns an identity's upstream name; resolve must have run.
func (c *nameCodec) name(k codecKey) string { return c.names[k] }
