package schemaargs

import (
	"math"
	"regexp"
	"strconv"
)

// Generate returns a JSON value valid against the JSON Schema schema, or
// ok=false when it cannot make one.
//
// With full=false the value is minimal: objects hold their required
// properties only (and as many more as minProperties asks), arrays
// minItems elements, strings "x" (or minLength x's), numbers the allowed
// value nearest 0, booleans false, enums their first value, type lists
// their first non-null type (null when it is the only one left), formats
// a fixed example ("2024-01-02T03:04:05Z", "a@example.com", ...),
// patterns a string sampled from the regexp or, failing that, the first
// of a few candidates it matches. With full=true every declared property
// is present, arrays hold at least one element, a map
// (additionalProperties as a schema) one entry "k1", a free-form object
// one entry "k1": "x", booleans are true and enums take their last
// non-null value; a $ref target nested in itself more than 4 times is
// generated minimal from there on.
//
// The value is deterministic: properties are visited in document order,
// anyOf/oneOf take their first branch that can be generated (a branch
// leading back into a reference that encloses it is tried last, so a
// linked list ends at its null branch), and the output is compact JSON
// with members in that order. That a oneOf value matches only one branch
// is not checked.
//
// Keywords read: type (names and lists), enum, const, $ref (local: "#",
// "#/$defs/x", "#/definitions/x", "#/properties/a/...", percent-encoded,
// ~0/~1 escaped), allOf (all branches apply at once), anyOf, oneOf,
// properties, required (and draft-03 "required": true on a property),
// additionalProperties, patternProperties (they constrain the members
// written; none is generated for them), propertyNames, minProperties,
// maxProperties, items, prefixItems, additionalItems, minItems, maxItems,
// uniqueItems, minLength, maxLength, pattern, format, minimum, maximum,
// exclusiveMinimum, exclusiveMaximum (numbers and draft-04 booleans),
// multipleOf, and the boolean schemas. Annotations (title, description,
// default, examples, BFCL's optional) are ignored. A schema without type
// is read as the type its keywords are for (properties: object, items:
// array, ...); with none of those it is any value: "x", or in full
// {"k":"v"}.
//
// ok is false when schema is not JSON, for the schema false (also as a
// required property or a needed element), a $ref that is not local or
// does not resolve, types or enums with nothing in common, a pattern Go's
// regexp cannot read or none of the candidate strings matches, a format
// value that breaks the length limits, a minLength over 4096, bounds no
// number fits, too few distinct items for uniqueItems, a recursion that
// never ends (a required property leading back to itself), and when the
// work grows past a fixed budget (64 nested values, 100000 schema
// visits).
func Generate(schema []byte, full bool) (args []byte, ok bool) {
	root, err := parse(schema)
	if err != nil {
		return nil, false
	}
	g := &generator{
		res:     newResolver(root),
		onPath:  map[*node]int{},
		regexps: map[string]*regexp.Regexp{},
	}
	v, ok := g.value([]*node{root}, full, 0)
	if !ok || g.steps > maxSteps {
		// Past the budget, optional members may have been dropped
		// half-way: no value rather than a quietly partial one.
		return nil, false
	}
	return encode(v), true
}

// generator holds one Generate call's state.
type generator struct {
	res     *resolver
	onPath  map[*node]int // $ref targets enclosing the value being made, with their count
	regexps map[string]*regexp.Regexp
	steps   int // schema objects visited, against maxSteps
}

const (
	// maxRecursion is how often a $ref target may enclose itself before
	// full generation turns minimal below it.
	maxRecursion = 4
	// maxDepth bounds the nesting of generated values.
	maxDepth = 64
	// maxSteps bounds the schema objects one Generate visits, so that
	// anyOf backtracking and references fanning out stay cheap.
	maxSteps = 100000
	// maxChain bounds a chain of $ref and allOf at one place.
	maxChain = 64
)

// conj is what applies at one place of the value: the schema objects
// that all hold, the anyOf/oneOf groups of which one branch each must
// hold too, and the $ref targets passed through to get there.
type conj struct {
	nodes   []*node
	choices [][]*node
	targets []*node
}

// flatten adds the schema s to c, following $ref and allOf; false when s
// can hold no value (the schema false, an unresolved reference).
func (g *generator) flatten(s *node, c *conj, depth int) bool {
	g.steps++
	if depth > maxChain {
		return false
	}
	switch s.k {
	case kBool:
		return s.b
	case kObj:
	default:
		return false
	}
	c.nodes = append(c.nodes, s)
	if r := s.get("$ref"); r != nil {
		t := g.res.resolve(r.str())
		if t == nil {
			return false
		}
		c.targets = append(c.targets, t)
		if !g.flatten(t, c, depth+1) {
			return false
		}
	}
	if a := s.get("allOf"); a != nil && a.k == kArr {
		for _, b := range a.arr {
			if !g.flatten(b, c, depth+1) {
				return false
			}
		}
	}
	for _, kw := range [...]string{"anyOf", "oneOf"} {
		if a := s.get(kw); a != nil && a.k == kArr {
			if len(a.arr) == 0 {
				return false
			}
			c.choices = append(c.choices, a.arr)
		}
	}
	return true
}

// value generates a value meeting every schema in list.
func (g *generator) value(list []*node, full bool, depth int) (*node, bool) {
	g.steps++
	if depth > maxDepth || g.steps > maxSteps {
		return nil, false
	}
	var c conj
	for _, s := range list {
		if !g.flatten(s, &c, 0) {
			return nil, false
		}
	}
	return g.choose(&c, 0, full, depth)
}

// choose picks, for each anyOf/oneOf group from the ith on, the first
// branch with which a value can be generated.
func (g *generator) choose(c *conj, i int, full bool, depth int) (*node, bool) {
	if i == len(c.choices) {
		return g.build(c, full, depth)
	}
	// Branches leading back into a reference that already encloses this
	// place (in full: maxRecursion times) come last, so that recursion
	// stops at the first branch that lets it: a linked list's next is
	// null, not the next node.
	limit := 1
	if full {
		limit = maxRecursion
	}
	n, ch, t := len(c.nodes), len(c.choices), len(c.targets)
	for pass := range 2 {
		for _, b := range c.choices[i] {
			if g.flatten(b, c, 0) && g.recurses(c.targets[t:], limit) == (pass == 1) {
				if v, ok := g.choose(c, i+1, full, depth); ok {
					return v, true
				}
			}
			c.nodes, c.choices, c.targets = c.nodes[:n], c.choices[:ch], c.targets[:t]
			if g.steps > maxSteps {
				return nil, false
			}
		}
	}
	return nil, false
}

// recurses reports whether one of the reference targets already encloses
// the place being generated limit times or more.
func (g *generator) recurses(targets []*node, limit int) bool {
	for _, t := range targets {
		if g.onPath[t] >= limit {
			return true
		}
	}
	return false
}

// build generates the value once every group has its branch.
func (g *generator) build(c *conj, full bool, depth int) (*node, bool) {
	nodes, targets := c.nodes, c.targets
	if full {
		for _, t := range targets {
			if g.onPath[t] >= maxRecursion {
				full = false
				break
			}
		}
	}
	for _, t := range targets {
		g.onPath[t]++
	}
	defer func() {
		for _, t := range targets {
			g.onPath[t]--
		}
	}()

	for _, s := range nodes {
		if v := s.get("const"); v != nil {
			return v, true
		}
	}
	mask, declared := tAll, false
	var order []string
	for _, s := range nodes {
		if m, d := typesOf(s); d {
			mask &= m
			if !declared {
				order, declared = typeNames(s.get("type")), true
			}
		}
	}
	if mask == 0 {
		return nil, false
	}
	if v, found, ok := enumValue(nodes, mask, full); found {
		return v, ok
	}
	if !declared {
		order = inferTypes(nodes)
		if len(order) == 0 {
			return untyped(full), true
		}
	}
	// The first non-null type that works; null last.
	for _, name := range order {
		if name == "null" {
			continue
		}
		m := maskOf(name)
		if m == tAll {
			return untyped(full), true
		}
		if v, ok := g.ofType(m&mask, nodes, full, depth); ok {
			return v, true
		}
	}
	if mask&tNull != 0 {
		return &node{k: kNull}, true
	}
	return nil, false
}

// ofType generates a value of the types m (one name's worth).
func (g *generator) ofType(m typeMask, nodes []*node, full bool, depth int) (*node, bool) {
	switch {
	case m == 0:
		return nil, false
	case m&tObj != 0:
		return g.object(nodes, full, depth)
	case m&tArr != 0:
		return g.array(nodes, full, depth)
	case m&tStr != 0:
		return g.str(nodes)
	case m&tNumber != 0:
		return number(nodes, m&tFrac == 0)
	case m&tBool != 0:
		return &node{k: kBool, b: full}, true
	}
	return &node{k: kNull}, true
}

// untyped is the value of a schema that says nothing of its type.
func untyped(full bool) *node {
	if full {
		v := &node{k: kObj}
		v.set("k", strNode("v"))
		return v
	}
	return strNode("x")
}

// inferTypes names the types an untyped schema's keywords are about, in
// the order tried.
func inferTypes(nodes []*node) []string {
	var names []string
	groups := [...]struct {
		name string
		kws  []string
	}{
		{"object", []string{"properties", "required", "additionalProperties", "patternProperties", "minProperties", "maxProperties", "propertyNames"}},
		{"array", []string{"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains"}},
		{"string", []string{"minLength", "maxLength", "pattern", "format"}},
		{"number", []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}},
	}
	for _, gr := range groups {
	next:
		for _, s := range nodes {
			for _, kw := range gr.kws {
				if s.has(kw) {
					names = append(names, gr.name)
					break next
				}
			}
		}
	}
	return names
}

// enumValue picks the enum value: the values of the first enum that every
// other enum holds too and the types allow; the first, or in full the last
// non-null. found is false without an enum.
func enumValue(nodes []*node, mask typeMask, full bool) (v *node, found, ok bool) {
	var first *node
	for _, s := range nodes {
		if e := s.get("enum"); e != nil && e.k == kArr {
			first = e
			break
		}
	}
	if first == nil {
		return nil, false, false
	}
	var cands []*node
	for _, v := range first.arr {
		if valueMask(v)&mask == 0 {
			continue
		}
		inAll := true
		for _, s := range nodes {
			if e := s.get("enum"); e != nil && e.k == kArr && e != first && !contains(e, v) {
				inAll = false
				break
			}
		}
		if inAll {
			cands = append(cands, v)
		}
	}
	if len(cands) == 0 {
		return nil, true, false
	}
	if full {
		for i := len(cands) - 1; i >= 0; i-- {
			if cands[i].k != kNull {
				return cands[i], true, true
			}
		}
	}
	return cands[0], true, true
}

// object generates an object for the object keywords of nodes.
func (g *generator) object(nodes []*node, full bool, depth int) (*node, bool) {
	var names []string // declared properties, in document order
	declared := map[string]bool{}
	for _, s := range nodes {
		if p := s.get("properties"); p != nil && p.k == kObj {
			for _, k := range p.keys {
				if !declared[k] {
					declared[k] = true
					names = append(names, k)
				}
			}
		}
	}
	required := map[string]bool{}
	var reqOrder []string
	addReq := func(k string) {
		if !required[k] {
			required[k] = true
			reqOrder = append(reqOrder, k)
		}
	}
	minProps, maxProps := 0, -1
	isMap, closed := false, false
	for _, s := range nodes {
		if r := s.get("required"); r != nil && r.k == kArr {
			for _, v := range r.arr {
				if v.k == kStr {
					addReq(v.s)
				}
			}
		}
		if p := s.get("properties"); p != nil && p.k == kObj {
			for i, k := range p.keys {
				if p.vals[i].get("required").isTrue() { // draft-03
					addReq(k)
				}
			}
		}
		if n, ok := intMember(s, "minProperties"); ok && n > minProps {
			minProps = n
		}
		if n, ok := intMember(s, "maxProperties"); ok && (maxProps < 0 || n < maxProps) {
			maxProps = n
		}
		switch ap := s.get("additionalProperties"); {
		case ap == nil || ap.isTrue():
		case ap.k == kObj:
			isMap = true
		default:
			closed = true
		}
		if s.has("patternProperties") {
			closed = true // no generated key need match them
		}
	}

	// keys: the declared properties in document order (minimal: the
	// required ones), the undeclared required ones, then as many optional
	// ones as minProperties asks.
	var keys []string
	taken := map[string]bool{}
	add := func(k string) {
		if !taken[k] {
			taken[k] = true
			keys = append(keys, k)
		}
	}
	for _, k := range names {
		if full || required[k] {
			add(k)
		}
	}
	for _, k := range reqOrder {
		add(k)
	}
	for _, k := range names {
		if len(keys) < minProps {
			add(k)
		}
	}
	extras := 0
	if full && (isMap || (len(names) == 0 && !closed)) {
		extras = 1
	}
	if len(keys) < minProps {
		extras = max(extras, minProps-len(keys))
	}
	for i := 1; extras > 0 && i < 1000; i++ {
		k := g.extraKey(nodes, i, taken)
		if k == "" {
			break
		}
		add(k)
		extras--
	}
	if maxProps >= 0 && len(keys) > maxProps {
		if len(reqOrder) > maxProps {
			return nil, false
		}
		// Drop optional keys from the end.
		kept := keys[:0]
		room := maxProps - len(reqOrder)
		for _, k := range keys {
			if required[k] {
				kept = append(kept, k)
			} else if room > 0 {
				kept = append(kept, k)
				room--
			}
		}
		keys = kept
	}

	obj := &node{k: kObj}
	for _, k := range keys {
		schemas, allowed := g.memberSchemas(nodes, k)
		var v *node
		ok := false
		if allowed {
			// A free-form entry is a plain "x"; declared ones follow full.
			v, ok = g.value(schemas, full && (declared[k] || isMap), depth+1)
		}
		if !ok {
			if required[k] {
				return nil, false
			}
			continue
		}
		obj.set(k, v)
	}
	if len(obj.keys) < minProps {
		return nil, false
	}
	return obj, true
}

// extraKey is the ith name for an undeclared member: from propertyNames
// when it says what names look like, else "k1", "k2"...; "" when no name
// fits.
func (g *generator) extraKey(nodes []*node, i int, taken map[string]bool) string {
	for _, s := range nodes {
		if pn := s.get("propertyNames"); pn != nil && i == 1 {
			if v, ok := g.value([]*node{pn}, false, maxDepth-1); ok && v.k == kStr && !taken[v.s] {
				return v.s
			}
		}
	}
	for ; i < 1000; i++ {
		k := "k" + strconv.Itoa(i)
		if taken[k] {
			continue
		}
		if _, ok := g.memberSchemas(nodes, k); ok {
			return k
		}
	}
	return ""
}

// memberSchemas lists the schemas an object member named key must meet:
// its property schemas, the patternProperties it matches, and
// additionalProperties where neither applies. allowed is false when
// additionalProperties is false for it or propertyNames rules it out.
func (g *generator) memberSchemas(nodes []*node, key string) (schemas []*node, allowed bool) {
	for _, s := range nodes {
		matched := false
		if p := s.get("properties"); p != nil && p.k == kObj {
			if v := p.get(key); v != nil {
				schemas = append(schemas, v)
				matched = true
			}
		}
		if pp := s.get("patternProperties"); pp != nil && pp.k == kObj {
			for i, pat := range pp.keys {
				if re := g.compile(pat); re != nil && re.MatchString(key) {
					schemas = append(schemas, pp.vals[i])
					matched = true
				}
			}
		}
		if !matched {
			if ap := s.get("additionalProperties"); ap != nil {
				if ap.isFalse() {
					return nil, false
				}
				schemas = append(schemas, ap)
			}
		}
		if pn := s.get("propertyNames"); pn != nil && !g.fitsString(pn, key) {
			return nil, false
		}
	}
	return schemas, true
}

// array generates an array for the array keywords of nodes.
func (g *generator) array(nodes []*node, full bool, depth int) (*node, bool) {
	minItems, maxItems, tupleLen := 0, -1, 0
	unique := false
	for _, s := range nodes {
		if n, ok := intMember(s, "minItems"); ok && n > minItems {
			minItems = n
		}
		if n, ok := intMember(s, "maxItems"); ok && (maxItems < 0 || n < maxItems) {
			maxItems = n
		}
		if tuple, _ := itemSchemas(s); len(tuple) > tupleLen {
			tupleLen = len(tuple)
		}
		unique = unique || s.get("uniqueItems").isTrue()
	}
	n := minItems
	if full {
		n = max(n, tupleLen, 1)
	}
	if maxItems >= 0 && n > maxItems {
		n = maxItems
	}
	if n < minItems {
		return nil, false
	}
	arr := &node{k: kArr}
	seen := map[string]bool{}
	for i := range n {
		schemas, allowed := elemSchemas(nodes, i)
		var v *node
		ok := false
		if allowed {
			v, ok = g.value(schemas, full, depth+1)
		}
		if ok && unique {
			enc := string(encode(v))
			ok = !seen[enc]
			seen[enc] = true
		}
		if !ok {
			if i < minItems {
				return nil, false
			}
			break
		}
		arr.arr = append(arr.arr, v)
	}
	return arr, true
}

// itemSchemas splits the schema s's item keywords into the tuple (per
// position: prefixItems, or a draft-04 items array) and the schema of the
// elements past it (items, or additionalItems after an items array).
func itemSchemas(s *node) (tuple []*node, rest *node) {
	if p := s.get("prefixItems"); p != nil && p.k == kArr {
		return p.arr, s.get("items")
	}
	if it := s.get("items"); it != nil && it.k == kArr {
		return it.arr, s.get("additionalItems")
	}
	return nil, s.get("items")
}

// elemSchemas lists the schemas the ith element must meet; allowed is
// false where the element may not be.
func elemSchemas(nodes []*node, i int) (schemas []*node, allowed bool) {
	for _, s := range nodes {
		tuple, rest := itemSchemas(s)
		switch {
		case i < len(tuple):
			schemas = append(schemas, tuple[i])
		case rest.isFalse():
			return nil, false
		case rest != nil:
			schemas = append(schemas, rest)
		}
	}
	return schemas, true
}

// number generates the number (an integer when integer is set) nearest 0
// within the bounds and multiples of nodes.
func number(nodes []*node, integer bool) (*node, bool) {
	lo, hi := math.Inf(-1), math.Inf(1)
	loEx, hiEx := false, false
	var mults []float64
	tightenLo := func(v float64, ex bool) {
		if v > lo || (v == lo && ex) {
			lo, loEx = v, ex
		}
	}
	tightenHi := func(v float64, ex bool) {
		if v < hi || (v == hi && ex) {
			hi, hiEx = v, ex
		}
	}
	for _, s := range nodes {
		if v, ok := s.get("minimum").num(); ok {
			tightenLo(v, s.get("exclusiveMinimum").isTrue())
		}
		if v, ok := s.get("exclusiveMinimum").num(); ok {
			tightenLo(v, true)
		}
		if v, ok := s.get("maximum").num(); ok {
			tightenHi(v, s.get("exclusiveMaximum").isTrue())
		}
		if v, ok := s.get("exclusiveMaximum").num(); ok {
			tightenHi(v, true)
		}
		if v, ok := s.get("multipleOf").num(); ok && v > 0 {
			mults = append(mults, v)
		}
	}
	fits := func(v float64) bool {
		if v < lo || (v == lo && loEx) || v > hi || (v == hi && hiEx) {
			return false
		}
		if integer && v != math.Trunc(v) {
			return false
		}
		for _, m := range mults {
			if q := v / m; math.Abs(q-math.Round(q)) > 1e-9 {
				return false
			}
		}
		return true
	}
	if fits(0) {
		return numNode(0), true
	}
	var v float64
	var ok bool
	if lo >= 0 {
		v, ok = nearest(lo, loEx, hi, integer, mults, fits)
	} else {
		// All allowed values are below 0: mirror the search.
		v, ok = nearest(-hi, hiEx, -lo, integer, mults, func(x float64) bool { return fits(-x) })
		v = -v
	}
	if !ok {
		return nil, false
	}
	return numNode(v), true
}

// nearest finds the allowed value nearest the lower bound lo > 0.
func nearest(lo float64, loEx bool, hi float64, integer bool, mults []float64, fits func(float64) bool) (float64, bool) {
	if math.IsInf(lo, 0) || math.IsNaN(lo) {
		return 0, false
	}
	step, start := 1.0, lo
	switch {
	case len(mults) > 0:
		step = mults[0]
		if integer && step != math.Trunc(step) {
			// An integer multiple of a fraction: step through integers.
			step = 1
			start = math.Ceil(lo)
		} else {
			start = math.Ceil(lo/step) * step
		}
	case integer:
		start = math.Ceil(lo)
	case loEx:
		// lo itself is out: a little above it, below hi.
		if lo+1 < hi {
			start = lo + 1
		} else {
			start = lo + (hi-lo)/2
		}
	}
	for i := 0; i < 1000; i++ {
		v := start + float64(i)*step
		if v > hi {
			break
		}
		if fits(v) {
			return v, true
		}
	}
	return 0, false
}

// numNode writes v as a JSON number: integral values without a fraction.
func numNode(v float64) *node {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return &node{k: kNum, s: strconv.FormatInt(int64(v), 10)}
	}
	return &node{k: kNum, s: strconv.FormatFloat(v, 'g', -1, 64)}
}
