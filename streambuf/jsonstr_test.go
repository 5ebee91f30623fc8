package streambuf

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestAppendJSONString(t *testing.T) {
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
		got := AppendJSONString([]byte("x"), []byte(tt.in))
		if string(got) != "x"+tt.want {
			t.Errorf("AppendJSONString(%q) = %s, want %s", tt.in, got[1:], tt.want)
		}
		if want := stdJSONString(t, []byte(tt.in)); string(got[1:]) != want {
			t.Errorf("AppendJSONString(%q) = %s, encoding/json %s", tt.in, got[1:], want)
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

func TestAppendJSONStringAllocs(t *testing.T) {
	s := patchArgs(50)
	dst := make([]byte, 0, 2*len(s)+2)
	if a := testing.AllocsPerRun(20, func() { dst = AppendJSONString(dst[:0], s) }); a != 0 {
		t.Errorf("%v allocs, want 0", a)
	}
}
