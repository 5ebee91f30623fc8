package preflight

import (
	"bytes"
	"encoding/json"
	"testing"
)

// fuzzParamType types parameters by their first letter, so that the fuzzer
// reaches every typing branch without a schema.
func fuzzParamType(_, param string) string {
	if param == "" {
		return ""
	}
	switch param[0] {
	case 's':
		return "string"
	case 'i':
		return "integer"
	case 'o':
		return "object"
	case 'b':
		return "boolean"
	}
	return ""
}

// FuzzExtractMarkup checks, for any text: no panic; a found section lies
// between before and after, starts with an opener where holdFrom says, and
// gives calls with a valid name and a JSON object as arguments; and a
// stream fed in chunks releases and holds what holdFrom gives for the
// whole text.
func FuzzExtractMarkup(f *testing.F) {
	for _, c := range markupCases {
		f.Add([]byte(c.text()))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		before, calls, after, found := extractMarkup(text, fuzzParamType)
		p := holdFrom(text)
		if !found {
			if !bytes.Equal(before, text) || calls != nil || after != nil {
				t.Fatalf("not found, but before=%q calls=%q after=%q", before, calls, after)
			}
		} else {
			if len(before)+len(after) >= len(text) ||
				!bytes.Equal(before, text[:len(before)]) || !bytes.Equal(after, text[len(text)-len(after):]) {
				t.Fatalf("before %q and after %q do not frame a section of %q", before, after, text)
			}
			if p != len(before) {
				t.Fatalf("section at %d, holdFrom says %d", len(before), p)
			}
			if i, o := findOpener(text[len(before):]); i != 0 || o == nil {
				t.Fatalf("section %q does not start with an opener", text[len(before):len(text)-len(after)])
			}
			if len(calls) == 0 {
				t.Fatal("found without calls")
			}
			for _, c := range calls {
				if !validName([]byte(c.Name)) {
					t.Fatalf("call name %q", c.Name)
				}
				var m map[string]any
				if !json.Valid(c.Args) || json.Unmarshal(c.Args, &m) != nil || m == nil {
					t.Fatalf("call %q: args %q are not a JSON object", c.Name, c.Args)
				}
			}
			// The held section reads the same.
			_, again, rest, ok := extractMarkup(text[len(before):], fuzzParamType)
			if !ok || len(again) != len(calls) || !bytes.Equal(rest, after) {
				t.Fatalf("the section alone reads differently")
			}
		}
		_, o := findOpener(text)
		for _, n := range []int{1, 7, len(text) + 1} {
			var h markupHold
			var released []byte
			for i := 0; i < len(text); i += n {
				r, _ := h.feed(text[i:min(i+n, len(text))])
				released = append(released, r...)
			}
			sec, rest := h.section(), h.flush()
			if !bytes.Equal(released, text[:p]) {
				t.Fatalf("chunk %d: released %q, want %q", n, released, text[:p])
			}
			held := rest
			if o != nil {
				held = sec
				if rest != nil {
					t.Fatalf("chunk %d: flush returned %q with a section held", n, rest)
				}
			} else if sec != nil {
				t.Fatalf("chunk %d: section %q without an opener", n, sec)
			}
			if !bytes.Equal(held, text[p:]) {
				t.Fatalf("chunk %d: held %q, want %q", n, held, text[p:])
			}
		}
	})
}
