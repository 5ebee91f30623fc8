package preflight

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"sync"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// toolKind is what a declared tool takes as its call's input.
type toolKind uint8

const (
	kindFunction toolKind = iota + 1 // JSON arguments, maybe a schema
	kindCustom                       // freeform input: not checked
)

// toolIndex is the request's tool declarations, read once per request and
// only when the answer has a call to check.
type toolIndex struct {
	kinds   map[string]toolKind // by key(namespace, name)
	schemas *schemaSet          // by key
	names   *nameIndex          // top-level function names, for repairs
	raw     map[string][]byte   // parameter schemas, by key, for markup's values
	list    []string            // the declared names, for the model
}

// key names a tool within its namespace ("" at the top level).
func key(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "\x00" + name
}

// readTools reads the tool declarations of a request body in proto: the
// Responses shapes (flat functions, custom tools, namespaces holding
// either) and Chat's nested ones.
//
// A client sends the same tools with every turn, so the index of a tools
// array is kept across requests (see indexCache), built from a copy of
// its bytes: it is only read once built, and its schemas compile once.
func readTools(body []byte, proto transforms.Protocol) *toolIndex {
	tools := jsonspan.Lookup(body, 0, "tools")
	if tools.Start < 0 || body[tools.Start] != '[' {
		return buildIndex(nil, proto)
	}
	raw := body[tools.Start:tools.End]
	if len(raw) > maxIndexedTools {
		return buildIndex(raw, proto)
	}
	return indexCache.get(raw, proto)
}

// buildIndex reads a tools array (nil for none).
func buildIndex(tools []byte, proto transforms.Protocol) *toolIndex {
	ix := &toolIndex{kinds: map[string]toolKind{}, schemas: newSchemaSet(), raw: map[string][]byte{}}
	if tools != nil {
		ix.read(tools, 0, "", proto)
	}
	var top []string
	for _, n := range ix.list {
		if !strings.Contains(n, "/") {
			top = append(top, n)
		}
	}
	ix.names = newNameIndex(top)
	return ix
}

// indexCache keeps the indexes of the tools arrays requests declared, by
// protocol and bytes, within a budget of bytes; past it, about half goes.
var indexCache = toolIndexCache{m: map[transforms.Protocol]map[string]*toolIndex{}}

const maxIndexedTools = 4 << 20 // a larger tools array is read for its request only

// maxIndexBytes is the cache's budget: its keys and the index's copies,
// summed (a variable for the tests).
var maxIndexBytes = 32 << 20

type toolIndexCache struct {
	sync.Mutex
	m     map[transforms.Protocol]map[string]*toolIndex // by protocol, then the array
	bytes int
}

func (c *toolIndexCache) get(tools []byte, proto transforms.Protocol) *toolIndex {
	c.Lock()
	ix, ok := c.m[proto][string(tools)] // (no copy of tools for the lookup)
	c.Unlock()
	if ok {
		return ix
	}
	// The index's spans point into a copy of the array, which no
	// request's buffer shares.
	ix = buildIndex(bytes.Clone(tools), proto)
	c.Lock()
	defer c.Unlock()
	if old, ok := c.m[proto][string(tools)]; ok {
		return old // built meanwhile by another request
	}
	size := 2 * len(tools) // the map's key and the index's copy
	if c.bytes+size > maxIndexBytes {
	evict:
		for _, m := range c.m {
			for k := range m {
				delete(m, k)
				c.bytes -= 2 * len(k)
				if c.bytes <= maxIndexBytes/2 {
					break evict
				}
			}
		}
	}
	if c.m[proto] == nil {
		c.m[proto] = map[string]*toolIndex{}
	}
	c.m[proto][string(tools)] = ix
	c.bytes += size
	return ix
}

func (ix *toolIndex) read(body []byte, at int, ns string, proto transforms.Protocol) {
	jsonspan.EachElement(body, at, func(el jsonspan.Span) bool {
		if body[el.Start] != '{' {
			return true
		}
		typ, _ := jsonspan.StringValue(body, jsonspan.Lookup(body, el.Start, "type"))
		obj := el.Start
		if proto == transforms.ProtocolChat {
			// {"type":"function","function":{…}}, {"type":"custom","custom":{…}}
			if inner := jsonspan.Lookup(body, el.Start, typ); inner.Start >= 0 && body[inner.Start] == '{' {
				obj = inner.Start
			}
		}
		name, _ := jsonspan.StringValue(body, jsonspan.Lookup(body, obj, "name"))
		switch typ {
		case "function":
			if name == "" {
				return true
			}
			k := key(ns, name)
			if _, dup := ix.kinds[k]; dup {
				return true
			}
			ix.kinds[k] = kindFunction
			if ps := jsonspan.Lookup(body, obj, "parameters"); ps.Start >= 0 && body[ps.Start] == '{' {
				ix.schemas.add(k, body[ps.Start:ps.End])
				ix.raw[k] = body[ps.Start:ps.End]
			}
			ix.list = append(ix.list, qualified(ns, name))
		case "custom":
			if name != "" {
				ix.kinds[key(ns, name)] = kindCustom
				ix.list = append(ix.list, qualified(ns, name))
			}
		case "namespace":
			if inner := jsonspan.Lookup(body, el.Start, "tools"); inner.Start >= 0 && body[inner.Start] == '[' && name != "" {
				ix.read(body, inner.Start, name, proto)
			}
		}
		return true
	})
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// verdict is the check of one call.
type verdict struct {
	ns, name string // the tool the client gets the call for
	args     []byte // the arguments the client gets
	changed  bool   // name or arguments repaired
	fixes    []string
	reason   string // why the call is invalid; "" when it is valid
	message  string // for the model: what is wrong and what to do
	dup      bool   // a repeat of an earlier call of the answer
}

func (v *verdict) valid() bool { return v.reason == "" }

// summary is the first line of the message, for a client's error.
func (v *verdict) summary() string {
	s, _, _ := strings.Cut(v.message, "\n")
	return s
}

// check checks one call of the answer: name, arguments as JSON, the
// schema, and (for a call that passes) whether the answer made it before.
func (p *Preflight) check(x *transforms.Exchange, rec *record, ns, name string, args []byte) verdict {
	v := verdict{ns: ns, name: name, args: args}
	ix := rec.index()
	kind, ok := ix.kinds[key(ns, name)]
	if !ok && ns == "" {
		if fixed, found := ix.names.match(name); found {
			v.name, v.changed = fixed, true
			v.fixes = append(v.fixes, "name")
			kind = ix.kinds[key("", fixed)]
			ok = true
		}
	}
	if !ok {
		v.reason = "unknown_tool"
		v.message = unknownTool(qualified(ns, name), ix.list)
		return v
	}
	if kind == kindCustom {
		return v
	}
	doc := bytes.TrimSpace(args)
	if len(doc) == 0 {
		doc = []byte("{}")
	} else if !jsonspan.Valid(doc) {
		fixed, fixes, ok := repairJSON(args)
		if !ok {
			off, why := jsonspan.Diagnose(args)
			v.reason = "invalid_json"
			v.message = fmt.Sprintf("The arguments of the call to tool '%s' are not valid JSON (at byte %d: %s).\nCall '%s' again with its arguments as one JSON object.",
				qualified(ns, v.name), off, why, qualified(ns, v.name))
			return v
		}
		v.args, v.changed, doc = fixed, true, fixed
		v.fixes = append(v.fixes, fixes...)
	}
	problems, checked, err := ix.schemas.check(key(ns, v.name), doc)
	if err != nil && !checked {
		x.Decide(qualified(ns, v.name), "preflight_unchecked", err.Error())
	}
	if len(problems) > 0 {
		v.reason = "schema"
		v.message = describeProblems(qualified(ns, v.name), problems)
		return v
	}
	if p.dedup && rec.repeats(key(ns, v.name), doc) {
		v.dup = true
	}
	return v
}

// seenTool is what the answer's valid calls of one tool were, for finding
// repeats: the first call's arguments as they came, and, from the second
// call on, every call's canonical form (worked out only then: most
// answers call a tool once).
type seenTool struct {
	first  []byte
	canons map[string]bool
}

// repeats reports whether a call of tool k with arguments doc repeats an
// earlier call of the answer, and notes it otherwise.
func (rec *record) repeats(k string, doc []byte) bool {
	st := rec.seen[k]
	if st == nil {
		if rec.seen == nil {
			rec.seen = map[string]*seenTool{}
		}
		rec.seen[k] = &seenTool{first: bytes.Clone(doc)}
		return false
	}
	if st.canons == nil {
		st.canons = map[string]bool{canonical(st.first): true}
	}
	c := canonical(doc)
	if st.canons[c] {
		return true
	}
	st.canons[c] = true
	return false
}

// cloneSeen copies the answer's seen calls, for going back to them.
func cloneSeen(m map[string]*seenTool) map[string]*seenTool {
	out := make(map[string]*seenTool, len(m))
	for k, st := range m {
		c := &seenTool{first: st.first}
		if st.canons != nil {
			c.canons = maps.Clone(st.canons)
		}
		out[k] = c
	}
	return out
}

// canonical is the arguments' text with members sorted and numbers as
// written, so calls that differ only in layout compare equal.
func canonical(doc []byte) string {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return string(doc)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return string(doc)
	}
	return string(out)
}

// unknownTool is the re-ask text for a call to a tool the request did not
// declare.
func unknownTool(name string, declared []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "There is no tool named '%s'.", clip(name, 64))
	if len(declared) > 0 {
		names := append([]string(nil), declared...)
		sort.Strings(names)
		b.WriteString(" The tools you can call are: ")
		for i, n := range names {
			if i == 40 {
				fmt.Fprintf(&b, " and %d more", len(names)-40)
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(clip(n, 64))
		}
		b.WriteString(".")
	}
	b.WriteString("\nCall one of the declared tools instead, with arguments that match its parameters.")
	return b.String()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// validNote is the output a re-ask gives a call of the same answer that
// was valid: the client has it and runs it.
const validNote = "This call is valid and was passed on to be run; its result will come later. Do not repeat it."

// tallyVerdict counts a checked call.
func tallyVerdict(x *transforms.Exchange, v *verdict) {
	for _, f := range v.fixes {
		x.Tally("preflight_repaired", f)
	}
	if v.reason != "" {
		x.Tally("preflight_invalid", v.reason)
		x.Decide(qualified(v.ns, v.name), "preflight_invalid", v.reason)
	}
	if v.dup {
		x.Tally("preflight_dedup", "repeat")
		x.Decide(qualified(v.ns, v.name), "preflight_dedup", "repeats an earlier call of the answer")
	}
}

// paramType is the JSON type a top-level tool's schema gives a parameter
// ("" when it says none), for typing the values of leaked markup.
func (ix *toolIndex) paramType(tool, param string) string {
	sch := ix.raw[tool]
	if sch == nil {
		return ""
	}
	props := jsonspan.Lookup(sch, 0, "properties")
	if props.Start < 0 || sch[props.Start] != '{' {
		return ""
	}
	var t jsonspan.Span
	found := false
	jsonspan.EachMember(sch, props.Start, func(m jsonspan.Member) bool {
		if m.KeyIs(sch, param) && sch[m.Value.Start] == '{' {
			t, found = jsonspan.Lookup(sch, m.Value.Start, "type"), true
			return false
		}
		return true
	})
	if !found || t.Start < 0 {
		return ""
	}
	if sch[t.Start] == '"' {
		s, _ := jsonspan.StringValue(sch, t)
		return s
	}
	typ := ""
	jsonspan.EachElement(sch, t.Start, func(el jsonspan.Span) bool {
		if s, _ := jsonspan.StringValue(sch, el); s != "null" && s != "" {
			typ = s
			return false
		}
		return true
	})
	return typ
}

// leakedID names a call recovered from markup, which the upstream gave no
// id: random, as ids must not repeat within a conversation.
func leakedID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
