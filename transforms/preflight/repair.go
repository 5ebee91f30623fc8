package preflight

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// The fixes repairJSON names, as metrics and the explain header show them.
const (
	fixBOM           = "bom"
	fixCodeFence     = "code_fence"
	fixTrailingComma = "trailing_comma"
)

const (
	maskBOM = 1 << iota
	maskCodeFence
	maskTrailingComma
)

// fixLists holds every combination of fixes, indexed by mask, so that a
// repair names its fixes without allocating. The lists are shared: callers
// must not modify them (their capacity is their length, so an append
// copies).
var fixLists = func() (t [8][]string) {
	names := [...]string{fixBOM, fixCodeFence, fixTrailingComma}
	for m := 1; m < len(t); m++ {
		for i, n := range names {
			if m&(1<<i) != 0 {
				t[m] = append(t[m], n)
			}
		}
		t[m] = t[m][:len(t[m]):len(t[m])]
	}
	return t
}()

var utf8BOM = []byte("\xef\xbb\xbf")

// repairJSON applies the cheap, deterministic fixes to a tool call's
// arguments text that does not parse, in order, and returns the text after
// the first of them that yields a valid JSON object, with the names of the
// fixes applied so far. The fixes are cumulative: a fenced object with a
// trailing comma is "code_fence" then "trailing_comma".
//
// Only mistakes that lose no information are fixed: a byte-order mark, a
// Markdown code fence around the whole text, and commas before a closing
// bracket. Truncated JSON (an unterminated string, object or array) is
// never completed, since what is missing cannot be known; nor is empty
// text, which the caller reads as {} itself. ok is false, and fixed nil,
// when no fix gives a valid object.
//
// fixed may share memory with raw; fixes is shared and must not be
// modified. Nothing is allocated except the copy a trailing-comma fix
// needs.
func repairJSON(raw []byte) (fixed []byte, fixes []string, ok bool) {
	mask := 0
	s := bytes.TrimSpace(raw)
	if bytes.HasPrefix(s, utf8BOM) {
		s = bytes.TrimSpace(s[len(utf8BOM):])
		mask |= maskBOM
		if isJSONObject(s) {
			return s, fixLists[mask], true
		}
	}
	if len(s) == 0 {
		return nil, nil, false
	}
	if inner, fenced := stripCodeFence(s); fenced {
		s = inner
		mask |= maskCodeFence
		if isJSONObject(s) {
			return s, fixLists[mask], true
		}
	}
	if out, changed := dropTrailingCommas(s); changed {
		mask |= maskTrailingComma
		if isJSONObject(out) {
			return out, fixLists[mask], true
		}
	}
	return nil, nil, false
}

// isJSONObject reports whether s (trimmed) is one valid JSON object.
func isJSONObject(s []byte) bool {
	return len(s) > 0 && s[0] == '{' && jsonspan.Valid(s)
}

// stripCodeFence returns what a Markdown code fence encloses when the fence
// spans all of s (trimmed): "```json\n{...}\n```", "``` {...} ```" and the
// like. Text around the fence means the model wrote prose as well, and
// picking the JSON out of prose is a guess, not a repair.
func stripCodeFence(s []byte) ([]byte, bool) {
	const fence = "```"
	if len(s) < 2*len(fence) || !bytes.HasPrefix(s, []byte(fence)) || !bytes.HasSuffix(s, []byte(fence)) {
		return nil, false
	}
	body := s[len(fence) : len(s)-len(fence)]
	// The info string ("json", "JSON", "javascript") is a word right after
	// the opening fence. Without a line break it must still be followed by
	// something that is not a word character, or it is the content itself.
	w := 0
	for w < len(body) && isInfoByte(body[w]) {
		w++
	}
	if w > 0 && (w == len(body) || !(body[w] == '{' || body[w] == '[' || isSpaceByte(body[w]))) {
		w = 0
	}
	return bytes.TrimSpace(body[w:]), true
}

func isInfoByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '+' || c == '.'
}

func isSpaceByte(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// dropTrailingCommas returns s without the commas that are followed, past
// white space, by '}' or ']', and whether there were any. Strings are
// crossed whole so that ",}" inside one stays; an unterminated or malformed
// string stops the fix, as the text cannot be valid after it anyway. One
// pass: the white space after a comma is read at most twice.
func dropTrailingCommas(s []byte) ([]byte, bool) {
	var out []byte
	last := 0 // s[last:i] is not copied to out yet
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			j := jsonspan.SkipString(s, i)
			if j < 0 {
				return nil, false
			}
			i = j - 1
		case ',':
			k := jsonspan.SkipSpace(s, i+1)
			if k < len(s) && (s[k] == '}' || s[k] == ']') {
				if out == nil {
					out = make([]byte, 0, len(s))
				}
				out = append(out, s[last:i]...)
				last = i + 1
			}
		}
	}
	if out == nil {
		return nil, false
	}
	return append(out, s[last:]...), true
}

// nameIndex matches a tool name the model got slightly wrong to the one
// declared tool it must mean: "GetWeather", "get-weather" and
// "functions.get_weather:0" all mean "get_weather" when no other declared
// tool reads the same after normalization. Two declared names that
// normalize alike make that form ambiguous, and neither is matched through
// it: a guess between two tools is not a repair.
type nameIndex struct {
	declared map[string]struct{}
	// byNorm maps a normalized form to its declared name's index in
	// names, or -1 when more than one declared name has that form.
	byNorm map[string]int
	names  []string
}

// newNameIndex indexes the declared tool names, in time linear in their
// total length.
func newNameIndex(names []string) *nameIndex {
	ix := &nameIndex{
		declared: make(map[string]struct{}, len(names)),
		byNorm:   make(map[string]int, len(names)),
		names:    names,
	}
	var buf []byte
	for i, n := range names {
		if _, dup := ix.declared[n]; dup {
			continue
		}
		ix.declared[n] = struct{}{}
		buf = normalizeName(buf[:0], n)
		if len(buf) == 0 {
			continue
		}
		if _, seen := ix.byNorm[string(buf)]; seen {
			ix.byNorm[string(buf)] = -1
		} else {
			ix.byNorm[string(buf)] = i
		}
	}
	return ix
}

// match returns the one declared name that name normalizes to, and false
// when there is none, when it is ambiguous, or when name is declared
// itself (it needs no repair).
func (ix *nameIndex) match(name string) (string, bool) {
	if ix == nil {
		return "", false
	}
	if _, ok := ix.declared[name]; ok {
		return "", false
	}
	var arr [64]byte
	k := normalizeName(arr[:0], name)
	if len(k) == 0 {
		return "", false
	}
	i, ok := ix.byNorm[string(k)]
	if !ok || i < 0 {
		return "", false
	}
	return ix.names[i], true
}

// namePrefixes are the namespaces models put before a tool's name: Kimi's
// "functions." (its call ids are "functions.name:idx") and Gemini's
// "default_api." from its Python-style calls.
var namePrefixes = [...]string{"functions.", "default_api.", "default_api:"}

// normalizeName appends name's normalized form to dst: white space
// trimmed, cut at a leaked special token ("<|" or "<｜"), without a
// namespace prefix or a trailing ":<digits>" call index, lowercased, and
// without the separators '-', '_', '.' and ' '.
func normalizeName(dst []byte, name string) []byte {
	s := strings.TrimSpace(name)
	if i := strings.Index(s, "<|"); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, "<｜"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	for _, p := range namePrefixes {
		if len(s) >= len(p) && strings.EqualFold(s[:len(p)], p) {
			s = s[len(p):]
			break
		}
	}
	s = trimCallIndex(s)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == '-' || c == '_' || c == '.' || c == ' ':
			case c >= 'A' && c <= 'Z':
				dst = append(dst, c+'a'-'A')
			default:
				dst = append(dst, c)
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
	}
	return dst
}

// trimCallIndex drops a trailing ":<digits>", the index in a Kimi call id
// ("functions.read_file:3") that models copy into names.
func trimCallIndex(s string) string {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	if i < len(s) && i > 0 && s[i-1] == ':' {
		return s[:i-1]
	}
	return s
}
