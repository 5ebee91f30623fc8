package jsonspan

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestAppendString(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", `""`},
		{"plain text, long enough for the word loop", `"plain text, long enough for the word loop"`},
		{`<a href="x">&amp;</a>`, `"<a href=\"x\">&amp;</a>"`},
		{"back\\slash", `"back\\slash"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"\x00\x01\x1f\x7f", `"\u0000\u0001\u001f` + "\x7f\""},
		{"é 🦀 世界", `"é 🦀 世界"`},
		{"a\u2028b\u2029c", `"a\u2028b\u2029c"`},
		{"bad \xff utf8 \xe2\x82", `"bad \ufffd utf8 \ufffd\ufffd"`},
		{"\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`},
		{"12345678\"12345678\n", `"12345678\"12345678\n"`},
	}
	for _, tt := range tests {
		got := AppendString([]byte("x"), []byte(tt.in))
		if string(got) != "x"+tt.want {
			t.Errorf("AppendString(%q) = %s, want %s", tt.in, got[1:], tt.want)
		}
		if want := stdJSONString(t, []byte(tt.in)); string(got[1:]) != want {
			t.Errorf("AppendString(%q) = %s, encoding/json %s", tt.in, got[1:], want)
		}
	}
}

// stdJSONString encodes s with encoding/json, without HTML escaping.
func stdJSONString(t testing.TB, s []byte) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(string(s)); err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

func TestAppendStringAllocs(t *testing.T) {
	s := sampleText(50)
	dst := make([]byte, 0, 2*len(s)+2)
	if a := testing.AllocsPerRun(20, func() { dst = AppendString(dst[:0], s) }); a != 0 {
		t.Errorf("%v allocs, want 0", a)
	}
}

// sampleText returns about n lines of patch text, mostly plain ASCII with
// some escapes and multi-byte characters, like the tool arguments the
// encoder spends its time on.
func sampleText(n int) []byte {
	lines := []string{
		"@@ func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) error {\n",
		"-\tif err := h.validate(r); err != nil {\n",
		"+\tif err := h.validate(r); err != nil && !errors.Is(err, errSkip) {\n",
		" \t\treturn caddyhttp.Error(http.StatusBadRequest, err)\n",
		"+\t// Sentinel “quotes” <tags> & unicode: é 🦀 \"escaped\" \\ path\n",
	}
	var b []byte
	for i := 0; i < n; i++ {
		b = append(b, lines[i%len(lines)]...)
	}
	return b
}

func TestAppendQuoted(t *testing.T) {
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{nil, `""`},
		{[]string{`{"a":"b\"c"}`}, `"{\"a\":\"b\\\"c\"}"`},
		{[]string{`{"k":`, `"v\u00e9 é long enough for the word loop"`, `}`}, `"{\"k\":\"v\\u00e9 é long enough for the word loop\"}"`},
		{[]string{"non-ASCII \xff stays, \"quotes\" do not"}, "\"non-ASCII \xff stays, \\\"quotes\\\" do not\""},
		// White space between tokens: raw control characters would make
		// the literal invalid.
		{[]string{"{\n\t\"a\": 1\r\n}\x01"}, `"{\n\t\"a\": 1\r\n}\u0001"`},
	} {
		var parts [][]byte
		for _, p := range tc.parts {
			parts = append(parts, []byte(p))
		}
		if got := AppendQuoted(nil, parts...); string(got) != tc.want {
			t.Errorf("AppendQuoted(%q) = %s, want %s", tc.parts, got, tc.want)
		}
	}
}

// FuzzAppendQuoted checks that quoting valid JSON text gives a string
// literal that decodes back to that text.
func FuzzAppendQuoted(f *testing.F) {
	f.Add([]byte(`{"input":"a \"b\" \\ \u00e9 é and more text than eight bytes"}`), 3)
	f.Add([]byte("{\"a\":\t[1,\r\n2]}\x00\x1f\x7f"), 9)
	f.Add([]byte(`"Gr\u00fc\u00dfe \\\"x\\\" é"`), 4)
	f.Fuzz(func(t *testing.T, doc []byte, cut int) {
		cut = min(max(cut, 0), len(doc))
		q := AppendQuoted(nil, doc[:cut], doc[cut:])
		if n := QuotedLen(doc[:cut], doc[cut:]); n != len(q) {
			t.Fatalf("QuotedLen(%q) = %d, AppendQuoted wrote %d bytes", doc, n, len(q))
		}
		if !json.Valid(doc) {
			return
		}
		if len(doc) > 0 && doc[0] == '"' && SkipString(doc, 0) == len(doc) {
			if n := QuotedLen() + LiteralQuotedLen(doc); n != len(q) {
				t.Fatalf("LiteralQuotedLen(%s) = %d, AppendQuoted wrote %d bytes", doc, n-2, len(q)-2)
			}
		}
		var back string
		if err := json.Unmarshal(q, &back); err != nil {
			t.Fatalf("AppendQuoted(%q) = %s: %v", doc, q, err)
		}
		if !utf8.Valid(doc) {
			return // encoding/json replaces invalid UTF-8 when decoding
		}
		if back != string(doc) {
			t.Fatalf("AppendQuoted(%q) decodes to %q", doc, back)
		}
	})
}

func FuzzAppendString(f *testing.F) {
	f.Add([]byte("<tag> & \"q\" \\ \n\x00\x7f é \u2028 \xff"))
	f.Fuzz(func(t *testing.T, s []byte) {
		checkAppendString(t, s)
		got := AppendString(nil, s)
		if want := stdJSONString(t, s); string(got) != want {
			t.Fatalf("AppendString(%q) = %s, encoding/json %s", s, got, want)
		}
	})
}

func BenchmarkAppendString(b *testing.B) {
	s := sampleText(400)
	dst := make([]byte, 0, 2*len(s))
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendString(dst[:0], s)
	}
}

func TestQuotedLen(t *testing.T) {
	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{nil, `""`},
		{[]string{`{"input":`, `"a \"b\" \\ é"`, `}`}, `"{\"input\":\"a \\\"b\\\" \\\\ é\"}"`},
		{[]string{"\t\n\x00\x1f long enough for a word\x7f"}, `"\t\n\u0000\u001f long enough for a word` + "\x7f" + `"`},
	} {
		var parts [][]byte
		for _, p := range tc.parts {
			parts = append(parts, []byte(p))
		}
		if got := string(AppendQuoted(nil, parts...)); got != tc.want {
			t.Fatalf("AppendQuoted(%q) = %s, want %s", tc.parts, got, tc.want)
		}
		if n := QuotedLen(parts...); n != len(tc.want) {
			t.Errorf("QuotedLen(%q) = %d, want %d", tc.parts, n, len(tc.want))
		}
	}
}
