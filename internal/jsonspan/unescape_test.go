package jsonspan

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestUnescape(t *testing.T) {
	const bad = "\uFFFD"
	for _, tc := range []struct{ in, want string }{
		{`plain é`, "plain é"},
		{`\"\\\/\b\f\n\r\t`, "\"\\/\b\f\n\r\t"},
		{`\u00e9\uD83E\udd80`, "é🦀"},
		{`\ud800\udc00`, "\U00010000"},
		// Malformed input decodes as encoding/json would, or as the
		// scanner did before the escape decoder was shared with the
		// streaming decoder: a cut-short escape at the end of a whole
		// string is final.
		{`a\`, "a" + bad},
		{`\x`, bad},
		{`\u`, bad},
		{`\u12`, bad + "12"},
		{`\u12zz`, bad + "12zz"},
		{`\udc00`, bad},
		{`\ud800`, bad},
		{`\ud800x`, bad + "x"},
		{`\ud800\`, bad + bad},
		{`\ud800\u12`, bad + bad + "12"},
		{`\ud800\u00e9`, bad + "é"},
		{`\ud800\ud800\udc00`, bad + "\U00010000"},
	} {
		if got := string(Unescape([]byte("x"), []byte(tc.in))); got != "x"+tc.want {
			t.Errorf("Unescape(%q) = %q, want %q", tc.in, got[1:], tc.want)
		}
	}
}

// FuzzUnescape holds Unescape to its reference implementation on every
// input, and to encoding/json on every valid string literal.
func FuzzUnescape(f *testing.F) {
	for _, s := range []string{`"a\u00e9\ud83e\udd80\n"`, `"\ud800\u0041\udd80"`, `"\ud800\ud800\udc00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		checkUnescape(t, lit)
		// encoding/json also replaces invalid UTF-8, which Unescape copies
		// as it is; compare on valid text only.
		var want string
		if len(lit) < 2 || lit[0] != '"' || SkipString(lit, 0) != len(lit) || !utf8.Valid(lit) || json.Unmarshal(lit, &want) != nil {
			return
		}
		if got := Unescape(nil, lit[1:len(lit)-1]); string(got) != want {
			t.Fatalf("Unescape(%s) = %q, encoding/json %q", lit, got, want)
		}
	})
}
