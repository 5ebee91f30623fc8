package preflight

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Schema validation of tool-call arguments, with
// github.com/santhosh-tekuri/jsonschema/v6: a complete validator for
// drafts 4, 6, 7, 2019-09 and 2020-12 that reports every failure with its
// instance location and its schema location.
//
// A tool's schema is compiled only when a call to that tool is first
// checked, and only once (a compile failure is kept as well). The
// compiler never fetches anything: a reference to a document other than
// the tool's own schema (a remote $ref, a custom metaschema) fails, so the
// tool is not checkable and its calls pass. Format assertions are off in
// every draft, because tools use "format" as a hint.

// toolSchemaURL is where every tool's schema is placed for the compiler. A
// relative $ref resolves against it to another mem: document, which no
// loader serves.
const toolSchemaURL = "mem:///tool-parameters.json"

// schemaSet holds one request's tool schemas and compiles each lazily,
// once, the first time a call to that tool is checked. It is safe for
// concurrent use.
type schemaSet struct {
	mu    sync.Mutex
	tools map[string]*toolSchema
}

// toolSchema is one declared tool's parameters schema, compiled or not
// yet.
type toolSchema struct {
	raw      []byte // the schema text, the set's own copy
	compiled bool   // compile has run; sch or err holds its outcome
	sch      *jsonschema.Schema
	err      error
	plan     *plain // the one-walk check of a plain schema, or nil
}

func newSchemaSet() *schemaSet {
	return &schemaSet{tools: map[string]*toolSchema{}}
}

// add registers the parameters schema of tool name. The set keeps a copy
// of schema: the caller's bytes may belong to a buffer that is reused. A
// tool added twice keeps its first schema.
func (s *schemaSet) add(name string, schema []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tools[name]; ok {
		return
	}
	s.tools[name] = &toolSchema{raw: bytes.Clone(schema)}
}

// has reports whether tool name was declared with a schema (usable or
// not).
func (s *schemaSet) has(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.tools[name]
	return ok
}

// check validates args, a JSON text, against tool name's schema. problems
// is nil when the arguments are valid. checked is false when the tool has
// no usable schema (none declared, or it does not compile: an unknown
// draft, a pattern Go's regexp cannot read, a reference to another
// document, a schema its metaschema rejects); err then says why. Empty
// arguments (only white space) are checked as the empty object.
func (s *schemaSet) check(name string, args []byte) (problems []problem, checked bool, err error) {
	sch, plan, err := s.compiled(name)
	if err != nil {
		return nil, false, err
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = []byte("{}")
	}
	if plan != nil {
		// Most calls of plain tools are valid: said in one walk.
		if ok, end := plan.valid(args, 0); ok && jsonspan.SkipSpace(args, end) == len(args) {
			return nil, true, nil
		}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		// The caller parses first, so this is rare (say, past the
		// decoder's depth limit); the model still has to resend.
		return []problem{{Message: "the arguments are not valid JSON"}}, true, nil
	}
	verr := sch.Validate(inst)
	if verr == nil {
		return nil, true, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(verr, &ve) {
		return nil, false, fmt.Errorf("tool %q: validation: %w", name, verr)
	}
	problems = flattenErrors(ve, inst, nil)
	if len(problems) == 0 {
		// Only format failures, which are hints, not assertions.
		return nil, true, nil
	}
	slices.SortStableFunc(problems, func(a, b problem) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		if c := strings.Compare(a.SchemaPath, b.SchemaPath); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.Compact(problems), true, nil
}

// compiled returns tool name's compiled schema, compiling it on the first
// call.
func (s *schemaSet) compiled(name string) (*jsonschema.Schema, *plain, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tools[name]
	if !ok {
		return nil, nil, fmt.Errorf("tool %q: no schema declared", name)
	}
	if !t.compiled {
		t.sch, t.err = compileSchema(t.raw)
		if t.err != nil {
			t.err = fmt.Errorf("tool %q: schema not checkable: %w", name, t.err)
		} else {
			t.plan = plainFor(t.raw)
		}
		t.compiled = true
		t.raw = nil
	}
	return t.sch, t.plan, t.err
}

// noLoader is the compiler's loader: it has nothing to give. The built-in
// metaschemas of the known drafts never reach it.
type noLoader struct{}

func (noLoader) Load(string) (any, error) {
	return nil, errors.New("nothing is fetched: only the tool's own schema and the known drafts' metaschemas are at hand")
}

// hintFormats are the formats the library knows and would assert under
// drafts before 2019-09. Each is replaced by one that accepts anything;
// unknown formats are never asserted, and a "regex" failure, which cannot
// be replaced, is dropped from the problems.
var hintFormats = []string{
	"json-pointer", "relative-json-pointer", "uuid", "duration", "period",
	"ipv4", "ipv6", "hostname", "email", "date", "time", "date-time",
	"uri", "iri", "uri-reference", "iri-reference", "uri-template", "semver",
}

func acceptAnyFormat(any) error { return nil }

// compiledSchemas keeps compiled schemas across requests, keyed by the
// schema's bytes: a client sends the same tools with every request of a
// conversation, and one compile costs about half a millisecond and a
// hundred kilobytes. It changes no answer (compiling is a pure function
// of the bytes); it is bounded, and a compiled schema is only read.
var compiledSchemas = struct {
	sync.Mutex
	m map[string]compiledSchema
}{m: map[string]compiledSchema{}}

type compiledSchema struct {
	sch *jsonschema.Schema
	err error
}

// maxCompiledSchemas bounds the cache; past it, half goes.
const maxCompiledSchemas = 4096

// compileSchema returns one tool's parameters schema compiled, from the
// cache when the same bytes were compiled before.
func compileSchema(raw []byte) (*jsonschema.Schema, error) {
	compiledSchemas.Lock()
	c, ok := compiledSchemas.m[string(raw)]
	compiledSchemas.Unlock()
	if ok {
		return c.sch, c.err
	}
	sch, err := compileSchemaUncached(raw)
	compiledSchemas.Lock()
	if len(compiledSchemas.m) >= maxCompiledSchemas {
		n := 0
		for k := range compiledSchemas.m {
			delete(compiledSchemas.m, k)
			if n++; n >= maxCompiledSchemas/2 {
				break
			}
		}
	}
	compiledSchemas.m[string(raw)] = compiledSchema{sch, err}
	compiledSchemas.Unlock()
	return sch, err
}

// compileSchemaUncached compiles one tool's parameters schema, by its
// "$schema" when that names a known draft, else as draft 2020-12.
func compileSchemaUncached(raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	for _, f := range hintFormats {
		c.RegisterFormat(&jsonschema.Format{Name: f, Validate: acceptAnyFormat})
	}
	if err := c.AddResource(toolSchemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(toolSchemaURL)
}

// problem is one reason a call's arguments do not match the schema.
type problem struct {
	Path       string // JSON pointer into the arguments, "" for the root, e.g. "/count"
	SchemaPath string // JSON pointer into the tool's schema of the failing keyword, e.g. "/properties/count/type"
	Message    string // short, says what is wanted, never echoes the model's value
}

// flattenErrors appends the leaf failures under e to out. $ref, allOf and the
// groups the library makes of several failures at one place are looked
// through; a failed anyOf or oneOf is one problem at its own place, not
// its branches' failures.
func flattenErrors(e *jsonschema.ValidationError, inst any, out []problem) []problem {
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		for _, c := range e.Causes {
			out = flattenErrors(c, inst, out)
		}
		return out
	case *kind.Format:
		return out // a hint
	case *kind.Required:
		for _, m := range k.Missing {
			out = append(out, problemAt(e, "missing property "+quoteName(m)))
		}
		return out
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			out = append(out, problemAt(e, "property "+quoteName(p)+" is not allowed"))
		}
		return out
	case *kind.Dependency:
		for _, m := range k.Missing {
			out = append(out, problem{
				Path:       instancePointer(e.InstanceLocation),
				SchemaPath: schemaPointer(e.SchemaURL, "dependencies", k.Prop),
				Message:    "missing property " + quoteName(m) + ", required when " + quoteName(k.Prop) + " is present",
			})
		}
		return out
	case *kind.DependentRequired:
		for _, m := range k.Missing {
			out = append(out, problemAt(e, "missing property "+quoteName(m)+", required when "+quoteName(k.Prop)+" is present"))
		}
		return out
	case *kind.Not:
		// The library gives "not" no keyword path.
		return append(out, problem{
			Path:       instancePointer(e.InstanceLocation),
			SchemaPath: schemaPointer(e.SchemaURL, "not"),
			Message:    problemMessage(e),
		})
	case *kind.PropertyNames:
		// SchemaURL already is the propertyNames subschema. The
		// library's InstanceLocation here shares its array with the
		// places it visits later, so only its length holds: the object
		// is looked up at that depth by the name it holds.
		return append(out, problem{
			Path:       objectWithKey(inst, len(e.InstanceLocation), k.Property),
			SchemaPath: schemaPointer(e.SchemaURL),
			Message:    "property name " + quoteName(k.Property) + " is not allowed",
		})
	}
	return append(out, problemAt(e, problemMessage(e)))
}

// objectWithKey is the JSON pointer of the first object (in key order)
// depth levels down in v that has the member key; "" when there is none.
func objectWithKey(v any, depth int, key string) string {
	var tokens []string
	var found string
	var walk func(v any) bool
	walk = func(v any) bool {
		if len(tokens) == depth {
			if obj, ok := v.(map[string]any); ok {
				if _, ok := obj[key]; ok {
					found = instancePointer(tokens)
					return true
				}
			}
			return false
		}
		switch v := v.(type) {
		case map[string]any:
			keys := slices.Sorted(maps.Keys(v))
			for _, k := range keys {
				tokens = append(tokens, k)
				if walk(v[k]) {
					return true
				}
				tokens = tokens[:len(tokens)-1]
			}
		case []any:
			for i, item := range v {
				tokens = append(tokens, strconv.Itoa(i))
				if walk(item) {
					return true
				}
				tokens = tokens[:len(tokens)-1]
			}
		}
		return false
	}
	walk(v)
	return found
}

// problemAt is the problem e reports, with msg.
func problemAt(e *jsonschema.ValidationError, msg string) problem {
	return problem{
		Path:       instancePointer(e.InstanceLocation),
		SchemaPath: schemaPointer(e.SchemaURL, e.ErrorKind.KeywordPath()...),
		Message:    msg,
	}
}

// problemMessage says what the keyword behind e wants, from the schema's side
// only: the library's own texts quote the instance (a pattern's subject,
// a number out of range), so none is used.
func problemMessage(e *jsonschema.ValidationError) string {
	switch k := e.ErrorKind.(type) {
	case *kind.Type:
		return "expected " + strings.Join(k.Want, " or ") + ", but got " + k.Got
	case *kind.Enum:
		if vals, ok := schemaValues(k.Want); ok {
			return "must be one of the allowed values: " + vals
		}
		return "must be one of the allowed values"
	case *kind.Const:
		if val, ok := schemaValues([]any{k.Want}); ok {
			return "must be " + val
		}
		return "must equal the constant value in the schema"
	case *kind.AnyOf:
		return "does not match any allowed shape" + typeHint(e)
	case *kind.OneOf:
		if len(k.Subschemas) >= 2 {
			return fmt.Sprintf("matches more than one allowed shape (alternatives %d and %d), but must match exactly one", k.Subschemas[0], k.Subschemas[1])
		}
		return "does not match any allowed shape" + typeHint(e)
	case *kind.Not:
		return "must not match the schema under 'not'"
	case *kind.FalseSchema:
		return "no value is allowed here"
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d %s long, but has %d", k.Want, pluralWord(k.Want, "character", "characters"), k.Got)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d %s long, but has %d", k.Want, pluralWord(k.Want, "character", "characters"), k.Got)
	case *kind.Pattern:
		return "must match the pattern " + clipText(strconv.Quote(k.Want), 80)
	case *kind.Minimum:
		return "must be >= " + ratText(k.Want)
	case *kind.Maximum:
		return "must be <= " + ratText(k.Want)
	case *kind.ExclusiveMinimum:
		return "must be > " + ratText(k.Want)
	case *kind.ExclusiveMaximum:
		return "must be < " + ratText(k.Want)
	case *kind.MultipleOf:
		return "must be a multiple of " + ratText(k.Want)
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %d items, but has %d", k.Want, k.Got)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d items, but has %d", k.Want, k.Got)
	case *kind.AdditionalItems:
		return fmt.Sprintf("has %d more items than allowed", k.Count)
	case *kind.UniqueItems:
		return fmt.Sprintf("items must be unique, but items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])
	case *kind.Contains:
		return "must contain an item matching the schema under 'contains'"
	case *kind.MinContains:
		return fmt.Sprintf("must contain at least %d items matching the schema under 'contains', but has %d", k.Want, len(k.Got))
	case *kind.MaxContains:
		return fmt.Sprintf("must contain at most %d items matching the schema under 'contains', but has %d", k.Want, len(k.Got))
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %d properties, but has %d", k.Want, k.Got)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %d properties, but has %d", k.Want, k.Got)
	case *kind.RefCycle:
		return "the schema's references loop here without checking anything"
	case *kind.ContentEncoding, *kind.ContentMediaType, *kind.ContentSchema:
		return "the string's content does not match the schema's content keywords"
	}
	if kw := e.ErrorKind.KeywordPath(); len(kw) > 0 {
		return "does not satisfy the schema keyword " + quoteName(kw[0])
	}
	return "does not match the schema"
}

// typeHint says which types a failed anyOf/oneOf allows, when every
// branch failed only on its type at the combinator's own place (the
// common nullable shape, anyOf [{"type":"string"},{"type":"null"}]).
func typeHint(e *jsonschema.ValidationError) string {
	var want []string
	got := ""
	for _, c := range e.Causes {
		for {
			if _, ok := c.ErrorKind.(*kind.Reference); ok && len(c.Causes) == 1 {
				c = c.Causes[0]
				continue
			}
			break
		}
		t, ok := c.ErrorKind.(*kind.Type)
		if !ok || !slices.Equal(c.InstanceLocation, e.InstanceLocation) {
			return ""
		}
		got = t.Got
		for _, w := range t.Want {
			if !slices.Contains(want, w) {
				want = append(want, w)
			}
		}
	}
	if len(want) == 0 {
		return ""
	}
	return ": expected " + strings.Join(want, " or ") + ", but got " + got
}

// schemaValues renders values taken from the schema (an enum's, a
// const's) as JSON, when they are scalars and short.
func schemaValues(vals []any) (string, bool) {
	var b strings.Builder
	for i, v := range vals {
		if i > 0 {
			b.WriteString(", ")
		}
		switch v := v.(type) {
		case string:
			b.WriteString(strconv.Quote(v))
		case nil:
			b.WriteString("null")
		case bool:
			b.WriteString(strconv.FormatBool(v))
		default:
			s := fmt.Sprint(v)
			if _, ok := new(big.Rat).SetString(s); !ok {
				return "", false // an object or array
			}
			b.WriteString(s)
		}
		if b.Len() > 200 {
			return "", false
		}
	}
	return b.String(), true
}

// ratText renders a schema bound.
func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// instancePointer is the JSON pointer of tokens.
func instancePointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapePointerToken(t))
	}
	return b.String()
}

func escapePointerToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// schemaPointer is the JSON pointer, in the tool's schema, of keyword
// under the schema at location (an absolute URL whose fragment is a JSON
// pointer, as the library gives it). The library places every
// subschema, one with its own $id too, by its pointer in the tool's
// document; a location anywhere else would keep its URL.
func schemaPointer(location string, keyword ...string) string {
	base, frag, _ := strings.Cut(location, "#")
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	if base != toolSchemaURL {
		frag = base + "#" + frag
	}
	return frag + instancePointer(keyword)
}

// quoteName quotes a property name (names are shown, values never):
// single quotes when it is plain, Go's quoting otherwise, at most 64
// characters.
func quoteName(s string) string {
	s = clipText(s, 64)
	plain := true
	for _, r := range s {
		if r == '\'' || r == '\\' || r == utf8.RuneError || !unicode.IsPrint(r) {
			plain = false
			break
		}
	}
	if plain {
		return "'" + s + "'"
	}
	return strconv.Quote(s)
}

// clipText cuts s to at most n bytes, on a rune boundary, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// The re-ask text's bounds.
const (
	maxListed    = 8    // problems listed
	maxLine      = 160  // bytes per problem line
	maxDescribed = 1500 // bytes in all
)

// describeProblems renders the re-ask text for one call of tool: a line
// naming the tool, one line per problem with its place in the arguments,
// its place in the schema and what is wanted, and a last line asking for
// the call again. At most 8 problems are listed (a line says how many
// more there are), and the whole stays under 1.5 KB.
func describeProblems(tool string, problems []problem) string {
	name := quoteName(tool)
	head := fmt.Sprintf("The arguments of the call to tool %s do not match the tool's parameters schema (%d %s):\n", name, len(problems), pluralWord(len(problems), "problem", "problems"))
	tail := "Call " + name + " again with corrected arguments."
	var b strings.Builder
	b.WriteString(head)
	listed := 0
	for _, p := range problems {
		if listed == maxListed {
			break
		}
		at := "the root"
		if p.Path != "" {
			at = p.Path
		}
		line := clipText(fmt.Sprintf("- at %s (schema %s): %s", at, schemaPlace(p.SchemaPath), p.Message), maxLine) + "\n"
		// Leave room for the "more" line and the tail.
		if b.Len()+len(line)+64+len(tail) > maxDescribed {
			break
		}
		b.WriteString(line)
		listed++
	}
	if more := len(problems) - listed; more > 0 {
		fmt.Fprintf(&b, "- and %d more %s not listed\n", more, pluralWord(more, "problem", "problems"))
	}
	b.WriteString(tail)
	return b.String()
}

func schemaPlace(ptr string) string {
	if ptr == "" {
		return "root"
	}
	return ptr
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
