package preflight

import (
	"bytes"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Tool calls leaked into text. Open models served without their tool
// parser (or with the wrong one) emit their native call syntax as plain
// assistant content: the client sees markup and no call. The formats below
// are the ones seen leaking through gateways; each is parsed strictly, and
// anything that does not parse completely stays text (fail-open: a call is
// never invented from something that only looks like one).
//
// The token spellings follow the open-source parsers that decode them
// (vLLM's hermes, glm4_moe/glm47, qwen3coder, deepseekv3/deepseekv31,
// deepseekv32 and kimi_k2 tool parsers) and the DSML reports in cline#11473
// and cline#13348 (DeepSeek V4 leaking `<｜DSML｜tool_calls>`, both with the
// fullwidth bar U+FF5C and with ASCII '|').

// leakedCall is one call recovered from markup. Args is a JSON object text
// that the call owns (it does not share memory with the input).
type leakedCall struct {
	Name string
	Args []byte
}

// Tags of the formats opened by <tool_call>: Hermes/Qwen2.5 JSON, GLM-4.5+
// arg_key/arg_value and Qwen3-Coder XML.
const (
	tagToolCall    = "<tool_call>"
	tagToolCallEnd = "</tool_call>"
	tagArgKey      = "<arg_key>"
	tagArgKeyEnd   = "</arg_key>"
	tagArgValue    = "<arg_value>"
	tagArgValueEnd = "</arg_value>"
	tagFunction    = "<function="
	tagFunctionEnd = "</function>"
	tagParam       = "<parameter="
	tagParamEnd    = "</parameter>"
)

// DeepSeek V3/R1 and V3.1 special tokens: fullwidth bars (U+FF5C) and
// U+2581 in place of spaces.
const (
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"
)

// Kimi K2 special tokens.
const (
	kimiSectionBegin = "<|tool_calls_section_begin|>"
	kimiSectionEnd   = "<|tool_calls_section_end|>"
	kimiCallBegin    = "<|tool_call_begin|>"
	kimiArgBegin     = "<|tool_call_argument_begin|>"
	kimiCallEnd      = "<|tool_call_end|>"
)

// dsmlTags are the tag prefixes of DeepSeek's DSML (V3.2 and V4): its
// special-token bar is the fullwidth U+FF5C, but hosts that detokenize
// differently have been seen to emit ASCII '|', and a section uses one or
// the other throughout.
type dsmlTags struct{ open, close string }

var (
	dsmlFullwidth = &dsmlTags{open: "<｜DSML｜", close: "</｜DSML｜"}
	dsmlASCII     = &dsmlTags{open: "<|DSML|", close: "</|DSML|"}
)

type markupKind uint8

const (
	kindToolCall     markupKind = iota // <tool_call> blocks, back to back
	kindDeepSeek                       // <｜tool▁calls▁begin｜> … <｜tool▁calls▁end｜>
	kindDeepSeekBare                   // <｜tool▁call▁begin｜> blocks without the section tokens
	kindDSML                           // <｜DSML｜function_calls> or <｜DSML｜tool_calls>
	kindKimi                           // <|tool_calls_section_begin|> … <|tool_calls_section_end|>
)

// opener is a tag that starts a markup section.
type opener struct {
	tag   string
	kind  markupKind
	dsml  *dsmlTags
	block string // DSML: the section's name, which its closing tag repeats
}

// openers are every tag that starts a section. extractMarkup, holdFrom and
// markupHold share this list, so a held section starts exactly where
// extractMarkup looks for it.
var openers = []opener{
	{tag: tagToolCall, kind: kindToolCall},
	{tag: dsCallsBegin, kind: kindDeepSeek},
	{tag: dsCallBegin, kind: kindDeepSeekBare},
	{tag: dsmlFullwidth.open + "function_calls>", kind: kindDSML, dsml: dsmlFullwidth, block: "function_calls"},
	{tag: dsmlFullwidth.open + "tool_calls>", kind: kindDSML, dsml: dsmlFullwidth, block: "tool_calls"},
	{tag: dsmlASCII.open + "function_calls>", kind: kindDSML, dsml: dsmlASCII, block: "function_calls"},
	{tag: dsmlASCII.open + "tool_calls>", kind: kindDSML, dsml: dsmlASCII, block: "tool_calls"},
	{tag: kimiSectionBegin, kind: kindKimi},
}

// maxOpenerLen is the length of the longest opener: only a tail shorter
// than it can be an opener cut short.
var maxOpenerLen = func() int {
	n := 0
	for _, o := range openers {
		n = max(n, len(o.tag))
	}
	return n
}()

// findOpener returns the offset of the first complete opener in text and
// which it is, or -1 and nil. Every opener starts with '<', so the scan
// jumps from '<' to '<' and compares a bounded number of bytes at each.
func findOpener(text []byte) (int, *opener) {
	for i := 0; ; {
		j := bytes.IndexByte(text[i:], '<')
		if j < 0 {
			return -1, nil
		}
		i += j
		for k := range openers {
			if hasAt(text, i, openers[k].tag) {
				return i, &openers[k]
			}
		}
		i++
	}
}

// partialOpener returns the offset of the earliest tail of text that is a
// proper prefix of an opener ("<tool_c", "<｜", even a lone '<'), or
// len(text). Only the last maxOpenerLen-1 bytes can hold one.
func partialOpener(text []byte) int {
	for i := max(0, len(text)-maxOpenerLen+1); i < len(text); i++ {
		if text[i] != '<' {
			continue
		}
		t := text[i:]
		for k := range openers {
			if tag := openers[k].tag; len(t) < len(tag) && tag[:len(t)] == string(t) {
				return i
			}
		}
	}
	return len(text)
}

// holdFrom returns the offset in text (one content part's text so far)
// from which it must be held back because it is, or may become, tool-call
// markup: the first complete opener, else a tail that may grow into one,
// else len(text). It reads all of text, so a stream calls markupHold.feed
// with each delta instead of this with the text so far.
func holdFrom(text []byte) int {
	if i, o := findOpener(text); o != nil {
		return i
	}
	return partialOpener(text)
}

// extractMarkup finds the first tool-call markup section in text and parses
// it completely. A section may hold several calls. before and after are
// the text around the section (slices of text); the caller may call again
// on after, which can hold another section.
//
// Only the first opener is tried: found is false when text has no opener,
// or when the section it starts is malformed, incomplete (a truncated
// stream) or holds no call; before is then text. Trying later openers could
// take time quadratic in the text, and markup that starts badly is not
// trusted further on.
//
// paramType returns the JSON-schema type of a tool's parameter ("string",
// "integer", "number", "boolean", "object", "array", or "" when unknown),
// keyed by the name as the markup spells it; it may be nil. Formats that
// write values as bare text use it to type them (see appendTypedValue).
func extractMarkup(text []byte, paramType func(tool, param string) string) (before []byte, calls []leakedCall, after []byte, found bool) {
	start, o := findOpener(text)
	if o == nil {
		return text, nil, nil, false
	}
	p := markupParser{b: text, i: start, paramType: paramType}
	var ok bool
	switch o.kind {
	case kindToolCall:
		ok = p.toolCallSection()
	case kindDeepSeek, kindDeepSeekBare:
		ok = p.deepSeekSection(o.kind == kindDeepSeek)
	case kindDSML:
		ok = p.dsmlSection(o)
	case kindKimi:
		ok = p.kimiSection()
	}
	if !ok || len(p.calls) == 0 {
		return text, nil, nil, false
	}
	return text[:start], p.calls, text[p.i:], true
}

// markupParser reads one section. Each step either consumes what it scans
// or fails the whole section, so a parse is linear in the text: searches
// for a closing tag run forward from the cursor only, and names end at the
// next '<' rather than at a tag searched for further on.
type markupParser struct {
	b         []byte
	i         int
	paramType func(tool, param string) string
	calls     []leakedCall
	args      argsBuilder
}

func (p *markupParser) ws() { p.i = jsonspan.SkipSpace(p.b, p.i) }

// lit consumes tag if the text continues with it.
func (p *markupParser) lit(tag string) bool {
	if hasAt(p.b, p.i, tag) {
		p.i += len(tag)
		return true
	}
	return false
}

// until consumes up to and including the next end, and returns what came
// before it.
func (p *markupParser) until(end string) ([]byte, bool) {
	j := bytes.Index(p.b[p.i:], []byte(end))
	if j < 0 {
		return nil, false
	}
	v := p.b[p.i : p.i+j]
	p.i += j + len(end)
	return v, true
}

// name consumes the text up to the next '<' and returns it trimmed, when
// it is a plausible tool or parameter name.
func (p *markupParser) name() (string, bool) {
	j := bytes.IndexByte(p.b[p.i:], '<')
	if j < 0 {
		return "", false
	}
	n := bytes.TrimSpace(p.b[p.i : p.i+j])
	p.i += j
	return string(n), validName(n)
}

// tagName consumes the name of <function=NAME> or <parameter=NAME> up to
// its '>'.
func (p *markupParser) tagName() (string, bool) {
	j := bytes.IndexByte(p.b[p.i:], '>')
	if j < 0 {
		return "", false
	}
	n := bytes.TrimSpace(p.b[p.i : p.i+j])
	p.i += j + 1
	return string(n), validName(n)
}

// jsonObject consumes a JSON object (after white space) and returns a
// copy of it.
func (p *markupParser) jsonObject() ([]byte, bool) {
	p.ws()
	if p.i >= len(p.b) || p.b[p.i] != '{' {
		return nil, false
	}
	end := jsonspan.SkipValue(p.b, p.i)
	if end < 0 {
		return nil, false
	}
	v := bytes.Clone(p.b[p.i:end])
	p.i = end
	return v, true
}

// validName rejects what cannot be a tool or parameter name, so that prose
// which happens to follow an opener ("<tool_call> tags are …") is not
// read as a call: empty, white space or control bytes inside, or markup
// and JSON punctuation.
func validName(n []byte) bool {
	if len(n) == 0 {
		return false
	}
	for _, c := range n {
		if c <= ' ' || c == 0x7f || c == '<' || c == '>' || c == '"' || c == '{' || c == '}' {
			return false
		}
	}
	return true
}

func (p *markupParser) add(name string, args []byte) {
	p.calls = append(p.calls, leakedCall{Name: name, Args: args})
}

// toolCallSection reads <tool_call> blocks separated by white space only.
// The section ends after the last block's </tool_call>: white space after
// it stays in after.
func (p *markupParser) toolCallSection() bool {
	for {
		p.i += len(tagToolCall)
		if !p.toolCallBody() {
			return false
		}
		end := p.i
		p.ws()
		if !hasAt(p.b, p.i, tagToolCall) {
			p.i = end
			return true
		}
	}
}

// toolCallBody reads what follows <tool_call> up to and including
// </tool_call>. The body's first bytes tell the three formats apart: '{'
// is Hermes JSON, <function= is Qwen3-Coder, anything else GLM's name.
func (p *markupParser) toolCallBody() bool {
	p.ws()
	switch {
	case p.i < len(p.b) && p.b[p.i] == '{':
		if !p.hermesCall() {
			return false
		}
	case hasAt(p.b, p.i, tagFunction):
		for {
			if !p.qwenFunction() {
				return false
			}
			p.ws()
			if !hasAt(p.b, p.i, tagFunction) {
				break
			}
		}
	default:
		if !p.glmCall() {
			return false
		}
	}
	p.ws()
	return p.lit(tagToolCallEnd)
}

// hermesCall reads {"name": "x", "arguments": {...}}. Arguments given as a
// string holding an object (as OpenAI's wire format has them) are taken
// too, and "parameters" stands for "arguments" as in Llama-style output.
func (p *markupParser) hermesCall() bool {
	obj, ok := p.jsonObject()
	if !ok {
		return false
	}
	name, ok := jsonspan.StringValue(obj, jsonspan.Lookup(obj, 0, "name"))
	if !ok || !validName([]byte(name)) {
		return false
	}
	sp := jsonspan.Lookup(obj, 0, "arguments")
	if sp.Start < 0 {
		sp = jsonspan.Lookup(obj, 0, "parameters")
	}
	var args []byte
	switch {
	case sp.Start < 0 || jsonspan.IsNull(obj, sp):
		args = []byte("{}")
	case obj[sp.Start] == '{':
		args = obj[sp.Start:sp.End]
	case obj[sp.Start] == '"':
		s, _ := jsonspan.StringValue(obj, sp)
		t := bytes.TrimSpace([]byte(s))
		if !isJSONObject(t) {
			return false
		}
		args = t
	default:
		return false
	}
	p.add(name, args)
	return true
}

// qwenFunction reads <function=NAME> <parameter=K>V</parameter>…
// </function>. Values are bare text, typed by appendTypedValue.
func (p *markupParser) qwenFunction() bool {
	p.i += len(tagFunction)
	name, ok := p.tagName()
	if !ok {
		return false
	}
	p.args.reset()
	for {
		p.ws()
		switch {
		case p.lit(tagParam):
			key, ok := p.tagName()
			if !ok {
				return false
			}
			v, ok := p.until(tagParamEnd)
			if !ok {
				return false
			}
			p.args.set(key, p.typed(name, key, v))
		case p.lit(tagFunctionEnd):
			p.add(name, p.args.object())
			return true
		default:
			return false
		}
	}
}

// glmCall reads GLM's NAME <arg_key>K</arg_key> <arg_value>V</arg_value>…
// (GLM-4.5 puts a newline after the name, GLM-4.7 and later may not, and a
// call without arguments is the name alone). The closing </tool_call> is
// left to the caller.
func (p *markupParser) glmCall() bool {
	name, ok := p.name()
	if !ok {
		return false
	}
	p.args.reset()
	for p.lit(tagArgKey) {
		key, ok := p.name()
		if !ok || !p.lit(tagArgKeyEnd) {
			return false
		}
		p.ws()
		if !p.lit(tagArgValue) {
			return false
		}
		v, ok := p.until(tagArgValueEnd)
		if !ok {
			return false
		}
		p.args.set(key, p.typed(name, key, v))
		p.ws()
	}
	p.add(name, p.args.object())
	return true
}

// deepSeekSection reads DeepSeek V3/V3.1 calls: inside the section tokens,
// or (bare) a run of call blocks whose section tokens were dropped, with
// a stray closing section token taken along.
func (p *markupParser) deepSeekSection(section bool) bool {
	if section {
		p.i += len(dsCallsBegin)
		p.ws()
	}
	for {
		if !p.lit(dsCallBegin) || !p.deepSeekCall() {
			return false
		}
		end := p.i
		p.ws()
		if hasAt(p.b, p.i, dsCallBegin) {
			continue
		}
		if p.lit(dsCallsEnd) {
			return true
		}
		p.i = end
		return !section
	}
}

// deepSeekCall reads one call after <｜tool▁call▁begin｜> up to and
// including <｜tool▁call▁end｜>. V3.1 writes NAME<｜tool▁sep｜>{...}; V3
// and R1 write function<｜tool▁sep｜>NAME\n```json\n{...}\n```. An object
// right after the separator tells V3.1, which also reads a tool that is
// itself called "function" right.
func (p *markupParser) deepSeekCall() bool {
	head, ok := p.name()
	if !ok || !p.lit(dsSep) {
		return false
	}
	name := head
	if j := jsonspan.SkipSpace(p.b, p.i); j >= len(p.b) || p.b[j] != '{' {
		if head != "function" {
			return false
		}
		nl := bytes.IndexByte(p.b[p.i:], '\n')
		if nl < 0 {
			return false
		}
		n := bytes.TrimSpace(p.b[p.i : p.i+nl])
		if !validName(n) {
			return false
		}
		name = string(n)
		p.i += nl + 1
		p.ws()
		if !p.lit("```") {
			return false
		}
		for p.i < len(p.b) && isInfoByte(p.b[p.i]) {
			p.i++
		}
		args, ok := p.jsonObject()
		if !ok {
			return false
		}
		p.ws()
		if !p.lit("```") {
			return false
		}
		p.ws()
		p.add(name, args)
		return p.lit(dsCallEnd)
	}
	args, ok := p.jsonObject()
	if !ok {
		return false
	}
	p.ws()
	p.add(name, args)
	return p.lit(dsCallEnd)
}

// dsmlSection reads DSML: <｜DSML｜function_calls> (V3.2; V4 writes
// tool_calls) holding <｜DSML｜invoke name="x"> elements, each holding
// <｜DSML｜parameter name="k" string="true|false">v</｜DSML｜parameter>.
// string="true" marks a literal string, "false" a JSON value.
func (p *markupParser) dsmlSection(o *opener) bool {
	t := o.dsml
	p.i += len(o.tag)
	for {
		p.ws()
		switch {
		case p.lit(t.open + "invoke"):
			if !p.dsmlInvoke(t) {
				return false
			}
		case p.lit(t.close + o.block + ">"):
			return true
		default:
			return false
		}
	}
}

func (p *markupParser) dsmlInvoke(t *dsmlTags) bool {
	name, _, selfClosing, ok := p.attrs()
	if !ok || !validName([]byte(name)) {
		return false
	}
	p.args.reset()
	if selfClosing {
		p.add(name, p.args.object())
		return true
	}
	for {
		p.ws()
		switch {
		case p.lit(t.open + "parameter"):
			key, str, selfClosing, ok := p.attrs()
			if !ok || selfClosing || !validName([]byte(key)) {
				return false
			}
			v, ok := p.until(t.close + "parameter>")
			if !ok {
				return false
			}
			var val []byte
			if str == "true" {
				val = jsonspan.AppendString(nil, v)
			} else if j := bytes.TrimSpace(v); str == "false" && jsonspan.Valid(j) {
				val = bytes.Clone(j)
			} else {
				// A string="false" value that is not JSON is typed like
				// a value without the attribute, rather than dropped.
				val = p.typed(name, key, v)
			}
			p.args.set(key, val)
		case p.lit(t.close + "invoke>"):
			p.add(name, p.args.object())
			return true
		default:
			return false
		}
	}
}

// attrs reads a tag's attributes up to its '>' (or "/>"): name="…" and
// string="…"; others are skipped. A tag without white space before an
// attribute is malformed.
func (p *markupParser) attrs() (name, str string, selfClosing, ok bool) {
	for {
		j := p.i
		p.ws()
		switch {
		case p.lit(">"):
			return name, str, false, true
		case p.lit("/>"):
			return name, str, true, true
		case p.i == j:
			return "", "", false, false
		}
		k := p.i
		for p.i < len(p.b) && (isInfoByte(p.b[p.i]) || p.b[p.i] == ':') {
			p.i++
		}
		attr := string(p.b[k:p.i])
		if attr == "" || !p.lit(`="`) {
			return "", "", false, false
		}
		q := bytes.IndexByte(p.b[p.i:], '"')
		if q < 0 {
			return "", "", false, false
		}
		v := string(p.b[p.i : p.i+q])
		p.i += q + 1
		switch attr {
		case "name":
			name = v
		case "string":
			str = v
		}
	}
}

// kimiSection reads Kimi K2's section: calls of the form
// <|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}<|tool_call_end|>.
func (p *markupParser) kimiSection() bool {
	p.i += len(kimiSectionBegin)
	for {
		p.ws()
		switch {
		case p.lit(kimiCallBegin):
			id, ok := p.name()
			if !ok || !p.lit(kimiArgBegin) {
				return false
			}
			name := kimiName(id)
			if name == "" {
				return false
			}
			args, ok := p.jsonObject()
			if !ok {
				return false
			}
			p.ws()
			if !p.lit(kimiCallEnd) {
				return false
			}
			p.add(name, args)
		case p.lit(kimiSectionEnd):
			return true
		default:
			return false
		}
	}
}

// kimiName returns the tool name in a Kimi call id: "functions.NAME:IDX",
// or NAME:IDX without the namespace.
func kimiName(id string) string {
	id = trimCallIndex(id)
	if len(id) > len("functions.") && id[:len("functions.")] == "functions." {
		id = id[len("functions."):]
	}
	return id
}

// typed returns the JSON text of a bare-text parameter value.
func (p *markupParser) typed(tool, key string, v []byte) []byte {
	typ := ""
	if p.paramType != nil {
		typ = p.paramType(tool, key)
	}
	return appendTypedValue(nil, typ, v)
}

// appendTypedValue appends the JSON text of a parameter value the markup
// wrote as bare text, by the parameter's declared JSON-schema type. A
// string is the text itself, less the one newline the formats put after
// the opening tag and before the closing one. A declared non-string type
// takes the text as JSON when it parses (42, true, {"a":1}) and as a
// string otherwise, so that the schema check reports the mismatch rather
// than the markup being dropped. An unknown type takes a JSON value other
// than a string literal as JSON, anything else as a string: "\"x\"" stays
// the quoted text the model wrote.
func appendTypedValue(dst []byte, typ string, v []byte) []byte {
	s := trimOneNewline(v)
	if typ == "string" {
		return jsonspan.AppendString(dst, s)
	}
	t := bytes.TrimSpace(v)
	if len(t) > 0 && (typ != "" || t[0] != '"') && jsonspan.Valid(t) {
		return append(dst, t...)
	}
	return jsonspan.AppendString(dst, s)
}

// trimOneNewline drops one line break after the start and one before the
// end of v.
func trimOneNewline(v []byte) []byte {
	if bytes.HasPrefix(v, []byte("\r\n")) {
		v = v[2:]
	} else if len(v) > 0 && v[0] == '\n' {
		v = v[1:]
	}
	if bytes.HasSuffix(v, []byte("\r\n")) {
		v = v[:len(v)-2]
	} else if len(v) > 0 && v[len(v)-1] == '\n' {
		v = v[:len(v)-1]
	}
	return v
}

// argsBuilder collects one call's parameters. A parameter written twice
// keeps its first place and its last value, as a Python dict (the
// reference parsers) does.
type argsBuilder struct {
	keys []string
	vals [][]byte
	at   map[string]int // key → index, once there are enough keys to need it
}

func (a *argsBuilder) reset() {
	a.keys, a.vals = a.keys[:0], a.vals[:0]
	clear(a.at)
}

// indexMin is where a linear search for a repeated key gives way to the
// map.
const indexMin = 8

func (a *argsBuilder) set(k string, v []byte) {
	if len(a.keys) < indexMin {
		for i, x := range a.keys {
			if x == k {
				a.vals[i] = v
				return
			}
		}
	} else {
		if len(a.at) == 0 {
			if a.at == nil {
				a.at = make(map[string]int)
			}
			for i, x := range a.keys {
				a.at[x] = i
			}
		}
		if i, ok := a.at[k]; ok {
			a.vals[i] = v
			return
		}
		a.at[k] = len(a.keys)
	}
	a.keys = append(a.keys, k)
	a.vals = append(a.vals, v)
}

// object returns the collected parameters as a new JSON object text.
func (a *argsBuilder) object() []byte {
	n := 2
	for i, k := range a.keys {
		n += len(k) + len(a.vals[i]) + 4
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, k := range a.keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = jsonspan.AppendStringStr(out, k)
		out = append(out, ':')
		out = append(out, a.vals[i]...)
	}
	return append(out, '}')
}

// hasAt reports whether b continues with s at i.
func hasAt(b []byte, i int, s string) bool {
	return i >= 0 && len(b)-i >= len(s) && string(b[i:i+len(s)]) == s
}

// markupHold holds back the part of a streamed content part that is or may
// become tool-call markup, and releases the rest as it arrives. It is the
// streaming form of holdFrom, linear over the whole part: a delta is read
// once, plus the few bytes of a partial opener held from the delta before.
//
//	var h markupHold // h.max = limit
//	for each content delta of the part {
//		release, _ := h.feed(delta) // emit release as text now
//	}
//	// at the end of the part:
//	sec := h.section()
//	rest := h.flush() // nil when sec is not
//	if sec != nil {
//		before, calls, after, found := extractMarkup(sec, paramType)
//		// found: emit before and after as text, and calls as calls;
//		// otherwise emit sec as text
//	} else {
//		// emit rest as text
//	}
//
// From the first complete opener on, everything is held until the end of
// the part: whether a section is complete, and what follows it, is only
// known there (Hermes blocks may follow one another). A hold that would
// exceed max bytes is given up: everything held is released as text and
// the rest of the part passes through. The slices feed, section and flush
// return are valid until the next call to feed.
type markupHold struct {
	// max bounds the bytes held; zero means defaultMarkupHoldMax.
	max int

	held     []byte // held back: a partial opener, or from a complete one on
	out      []byte // what feed releases when it joined held and a delta
	inMarkup bool   // held starts with a complete opener
	off      bool   // the hold was given up for the rest of the part
}

// defaultMarkupHoldMax is the hold bound when max is zero: large enough for
// a call that writes a sizeable file, small enough to bound memory per
// stream.
const defaultMarkupHoldMax = 1 << 20

func (h *markupHold) limit() int {
	if h.max > 0 {
		return h.max
	}
	return defaultMarkupHoldMax
}

// feed takes the part's next delta and returns the text that can be
// emitted now, and whether bytes remain held.
func (h *markupHold) feed(delta []byte) (release []byte, holding bool) {
	if h.off {
		return delta, false
	}
	if h.inMarkup {
		h.held = append(h.held, delta...)
		if len(h.held) > h.limit() {
			return h.giveUp(), false
		}
		return nil, true
	}
	text := delta
	if len(h.held) > 0 {
		h.out = append(append(h.out[:0], h.held...), delta...)
		text = h.out
	}
	k, o := findOpener(text)
	if o != nil {
		h.inMarkup = true
	} else {
		k = partialOpener(text)
	}
	h.held = append(h.held[:0], text[k:]...)
	if len(h.held) > h.limit() {
		// Only a section can be this long; what came before it goes with
		// it, in order.
		h.out = append(h.out[:0], text...)
		h.held, h.inMarkup, h.off = h.held[:0], false, true
		return h.out, false
	}
	if k == 0 {
		return nil, len(h.held) > 0
	}
	return text[:k], len(h.held) > 0
}

// giveUp releases everything held and passes the rest of the part through.
func (h *markupHold) giveUp() []byte {
	b := h.held
	h.held, h.inMarkup, h.off = nil, false, true
	return b
}

// section returns the held markup section, from its opener to what has
// arrived of the part so far, or nil when no complete opener is held.
func (h *markupHold) section() []byte {
	if !h.inMarkup {
		return nil
	}
	return h.held
}

// flush ends the part and resets the hold for the next one. It returns
// what is still held when that never became markup (a partial opener the
// part ended on); a held section is nil here, taken with section before.
func (h *markupHold) flush() []byte {
	b := h.held
	if h.inMarkup || len(b) == 0 {
		b = nil
	}
	h.held, h.inMarkup, h.off = h.held[:0], false, false
	return b
}
