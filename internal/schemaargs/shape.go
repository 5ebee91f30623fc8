package schemaargs

import "fmt"

// Shape returns the arguments args, valid against the schema original,
// as a model bound to the schema rewritten would write them: what the
// gateway's restoration gets back from the model, and must turn into args
// again.
//
// The value is walked with both schemas side by side, each $ref resolved
// within its own document, allOf read as all its branches at once, and an
// anyOf/oneOf taken at the branch that admits the value's JSON type (a
// type list counts as each of its types; among several, an object goes to
// the branch declaring most of its keys, a tie to the branch at the index
// the original's anyOf took there). Then, at each place:
//
//   - a value whose JSON type the rewritten schema does not admit, where
//     it admits a string, becomes a string holding the value's compact
//     JSON: a number, boolean or null under a string enum (Gemini's integer
//     enums: 10 becomes "10", true "true"), and an object, array or other
//     non-string under a "type": "string" (a map or free-form value sent
//     as a JSON string). A string-only enum without type counts as a
//     string type. Strings stay as they are;
//   - an object member k the rewritten schema does not declare, where it
//     declares k followed by one or more underscores, is written under
//     that name;
//   - a property the rewritten object lists in required that the object
//     lacks is added as null, after the object's members (a strict model
//     sends null for an optional member);
//   - everything else is kept, and objects and arrays shaped member by
//     member.
//
// The result is compact JSON with members in the value's order. The error
// is for input that is not JSON.
func Shape(original, rewritten, args []byte) ([]byte, error) {
	o, err := parse(original)
	if err != nil {
		return nil, fmt.Errorf("original schema: %w", err)
	}
	r, err := parse(rewritten)
	if err != nil {
		return nil, fmt.Errorf("rewritten schema: %w", err)
	}
	v, err := parse(args)
	if err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	s := &shaper{orig: newResolver(o), rew: newResolver(r)}
	return encode(s.shape(v, []*node{o}, []*node{r})), nil
}

// shaper holds one Shape call's two documents.
type shaper struct {
	orig, rew *resolver
}

// shape shapes v, found at a place the original schemas orig and the
// rewritten schemas rew describe (neither flattened yet).
func (s *shaper) shape(v *node, orig, rew []*node) *node {
	var picked []int
	of := s.orig.flat(orig, v, nil, &picked)
	rf := s.rew.flat(rew, v, picked, nil)

	if v.k != kStr && len(rf) > 0 && !allows(rf, valueMask(v)) && allows(rf, tStr) {
		return strNode(string(encode(v)))
	}
	switch v.k {
	case kObj:
		out := &node{k: kObj}
		for i, k := range v.keys {
			name := rename(rf, k)
			out.set(name, s.shape(v.vals[i], members(of, k), members(rf, name)))
		}
		for _, n := range rf {
			r := n.get("required")
			if r == nil || r.k != kArr {
				continue
			}
			for _, k := range r.arr {
				if k.k == kStr && !out.has(k.s) {
					out.set(k.s, &node{k: kNull})
				}
			}
		}
		return out
	case kArr:
		out := &node{k: kArr}
		for i, e := range v.arr {
			oe, _ := elemSchemas(of, i)
			re, _ := elemSchemas(rf, i)
			out.arr = append(out.arr, s.shape(e, oe, re))
		}
		return out
	}
	return v
}

// flat resolves the schemas list at the place of the value v into the
// schema objects that apply there: $ref followed, allOf spread, one
// branch of each anyOf/oneOf. hints are the branch indices to prefer on
// ties, group by group; picked, when set, gets the indices taken.
func (r *resolver) flat(list []*node, v *node, hints []int, picked *[]int) []*node {
	var out []*node
	group := 0
	var add func(s *node, depth int)
	add = func(s *node, depth int) {
		if s == nil || s.k != kObj || depth > maxChain {
			return
		}
		out = append(out, s)
		if ref := s.get("$ref"); ref != nil {
			add(r.resolve(ref.str()), depth+1)
		}
		if a := s.get("allOf"); a != nil && a.k == kArr {
			for _, b := range a.arr {
				add(b, depth+1)
			}
		}
		for _, kw := range [...]string{"anyOf", "oneOf"} {
			a := s.get(kw)
			if a == nil || a.k != kArr || len(a.arr) == 0 {
				continue
			}
			hint := -1
			if group < len(hints) {
				hint = hints[group]
			}
			group++
			i := r.pickBranch(a.arr, v, hint)
			if picked != nil {
				*picked = append(*picked, i)
			}
			add(a.arr[i], depth+1)
		}
	}
	for _, s := range list {
		add(s, 0)
	}
	return out
}

// pickBranch is the index of the branch of an anyOf/oneOf that v goes
// to: the first admitting v's type with the best score (an object: how
// many of its keys the branch declares), hint first among equals; with
// none admitting, the first admitting a string (v will be encoded), else
// the first.
func (r *resolver) pickBranch(branches []*node, v *node, hint int) int {
	key := pickKey{&branches[0], v, hint}
	if i, ok := r.picks[key]; ok {
		return i
	}
	i := r.scoreBranches(branches, v, hint)
	if r.picks == nil {
		r.picks = map[pickKey]int{}
	}
	r.picks[key] = i
	return i
}

// pickKey memoizes pickBranch: nested anyOf are scored once per value.
type pickKey struct {
	branches **node
	v        *node
	hint     int
}

func (r *resolver) scoreBranches(branches []*node, v *node, hint int) int {
	vm := valueMask(v)
	best, bestScore := -1, -1
	str := -1
	for i, b := range branches {
		fl := r.flat([]*node{b}, v, nil, nil)
		if !allows(fl, vm) {
			if str < 0 && allows(fl, tStr) {
				str = i
			}
			continue
		}
		score := 0
		if v.k == kObj {
			for _, k := range v.keys {
				if declares(fl, rename(fl, k)) {
					score++
				}
			}
		}
		if score > bestScore || (score == bestScore && i == hint) {
			best, bestScore = i, score
		}
	}
	switch {
	case best >= 0:
		return best
	case str >= 0 && v.k != kStr:
		return str
	}
	return 0
}

// declares reports whether one of the schema objects nodes declares the
// property name.
func declares(nodes []*node, name string) bool {
	for _, s := range nodes {
		if p := s.get("properties"); p != nil && p.k == kObj && p.has(name) {
			return true
		}
	}
	return false
}

// rename is the name the rewritten schema objects nodes give the member
// k: k where they declare it (or declare nothing like it), else k followed
// by the fewest underscores they declare.
func rename(nodes []*node, k string) string {
	if declares(nodes, k) {
		return k
	}
	n := k
	for range 8 {
		n += "_"
		if declares(nodes, n) {
			return n
		}
	}
	return k
}

// members lists the schemas of the object member key: its property
// schemas, or additionalProperties where a schema object declares none.
func members(nodes []*node, key string) []*node {
	var out []*node
	for _, s := range nodes {
		if p := s.get("properties"); p != nil && p.k == kObj {
			if v := p.get(key); v != nil {
				out = append(out, v)
				continue
			}
		}
		if ap := s.get("additionalProperties"); ap != nil && ap.k == kObj {
			out = append(out, ap)
		}
	}
	return out
}
