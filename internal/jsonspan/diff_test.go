package jsonspan

import (
	"bytes"
	"fmt"
	"testing"
)

// The string primitives are held to the reference implementations in
// ref_test.go: exhaustively on short strings over an alphabet that has
// every byte class they tell apart (including '#' and ']', which a word
// test's borrows can mistake for '"' and '\\'), and by fuzzing.

// call returns f's result, or the panic it raised as a string.
func call[T any](f func() T) (res T, panicked string) {
	defer func() {
		if r := recover(); r != nil {
			panicked = fmt.Sprint(r)
		}
	}()
	return f(), ""
}

// eachString calls fn for every string of up to n bytes over alphabet.
func eachString(alphabet string, n int, fn func(s []byte)) {
	buf := make([]byte, 0, n)
	var rec func()
	rec = func() {
		fn(buf)
		if len(buf) == n {
			return
		}
		for k := 0; k < len(alphabet); k++ {
			buf = append(buf, alphabet[k])
			rec()
			buf = buf[:len(buf)-1]
		}
	}
	rec()
}

// padded returns s in the middle of a longer document, so the word loops
// run over it, and the offset of s in it.
func padded(s []byte) ([]byte, int) {
	const pad = `{"k":`
	return append(append([]byte(pad), s...), `,"x":"12345678\\"}`...), len(pad)
}

func checkStringEnd(t *testing.T, doc []byte, i int) {
	t.Helper()
	got, gp := call(func() int { return StringEnd(doc, i) })
	want, wp := call(func() int { return refSkipStringFast(doc, i) })
	if got != want || gp != wp {
		t.Fatalf("StringEnd(%q, %d) = %d %q, reference %d %q", doc, i, got, gp, want, wp)
	}
}

func checkSkipString(t *testing.T, doc []byte, i int) {
	t.Helper()
	got, gp := call(func() int { return SkipString(doc, i) })
	want, wp := call(func() int { return refSkipString(doc, i) })
	if got != want || gp != wp {
		t.Fatalf("SkipString(%q, %d) = %d %q, reference %d %q", doc, i, got, gp, want, wp)
	}
}

func checkUnescape(t *testing.T, s []byte) {
	t.Helper()
	got, gp := call(func() []byte { return Unescape([]byte("x"), s) })
	want, wp := call(func() []byte { return refUnescape([]byte("x"), s) })
	if !bytes.Equal(got, want) || gp != wp {
		t.Fatalf("Unescape(%q) = %q %q, reference %q %q", s, got, gp, want, wp)
	}
}

func checkAppendString(t *testing.T, s []byte) {
	t.Helper()
	for _, dst := range [][]byte{nil, []byte("x"), make([]byte, 3, 7), make([]byte, 1, 1000)} {
		got := AppendString(bytes.Clone(dst), s)
		if want := refAppendString(bytes.Clone(dst), s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %q, reference %q", s, got, want)
		}
	}
}

func TestStringEndMatchesReference(t *testing.T) {
	eachString(`"\a#]`, 7, func(s []byte) {
		for i := -2; i <= len(s)+1; i++ {
			checkStringEnd(t, s, i)
		}
		doc, off := padded(s)
		checkStringEnd(t, doc, off-1)
		checkStringEnd(t, doc, off)
	})
	for _, tc := range benchSamples {
		for _, l := range tc.s.lit {
			doc, off := padded([]byte(l))
			for i := range len(l) {
				checkStringEnd(t, doc, off+i)
			}
		}
	}
}

func TestSkipStringMatchesReference(t *testing.T) {
	eachString("\"\\au0\x01\xe9#]", 5, func(s []byte) {
		for i := -1; i <= len(s); i++ {
			checkSkipString(t, s, i)
		}
		doc, off := padded(s)
		checkSkipString(t, doc, off-1)
		checkSkipString(t, doc, off)
	})
	for _, tc := range benchSamples {
		for _, l := range tc.s.lit {
			doc, off := padded([]byte(l))
			for i := range min(len(l), 64) {
				checkSkipString(t, doc, off+i)
			}
		}
	}
}

func TestUnescapeMatchesReference(t *testing.T) {
	eachString(`\"/nuD8dc0aé`, 5, func(s []byte) { checkUnescape(t, s) })
	for _, tc := range benchSamples {
		for _, l := range tc.s.lit {
			checkUnescape(t, []byte(l))
			checkUnescape(t, []byte(l[1:len(l)-1]))
		}
	}
}

func TestAppendStringMatchesReference(t *testing.T) {
	// Every single byte and pair of bytes, each alone and amid plain text
	// on both sides so the word loop meets it at every offset.
	var b [2]byte
	for c := range 256 {
		b[0] = byte(c)
		checkAppendString(t, b[:1])
		for d := range 256 {
			b[1] = byte(d)
			checkAppendString(t, b[:])
		}
	}
	eachString("a\"\\\n\x01\x7f\xe2\x80\xa8\xc3\xf0\x9f", 4, func(s []byte) {
		checkAppendString(t, s)
		for k := range 9 {
			checkAppendString(t, append(bytes.Repeat([]byte("p"), k), append(bytes.Clone(s), "0123456"...)...))
		}
	})
	for _, tc := range benchSamples {
		for _, r := range tc.s.raw {
			checkAppendString(t, []byte(r))
		}
	}
}

func FuzzStringEnd(f *testing.F) {
	f.Add([]byte(`"a\\\"b\\\\\\\"c\\" , "d"`), 0)
	f.Add([]byte(`x"12345678901234567890\\\\"`), 1)
	f.Fuzz(func(t *testing.T, doc []byte, i int) {
		checkStringEnd(t, doc, i%(len(doc)+3))
	})
}

func FuzzSkipString(f *testing.F) {
	f.Add([]byte(`"a\\\"b\u00e9\ud83e\udd80 12345678 \\\\\\\"c\\" , "d"`), 0)
	f.Add([]byte("\"tab\tin string\""), 0)
	f.Fuzz(func(t *testing.T, doc []byte, i int) {
		checkSkipString(t, doc, i%(len(doc)+2))
	})
}

// checkAppendUnquoted holds AppendUnquoted to StringEnd followed by
// Unescape, the two passes it stands for, at every quote of doc.
func checkAppendUnquoted(t *testing.T, doc []byte) {
	t.Helper()
	for i, c := range doc {
		if c != '"' {
			continue
		}
		got, end := AppendUnquoted([]byte("x"), doc, i)
		wantEnd := StringEnd(doc, i)
		if end != wantEnd {
			t.Fatalf("AppendUnquoted(%q, %d) ends at %d, StringEnd at %d", doc, i, end, wantEnd)
		}
		if end < 0 {
			continue
		}
		if want := Unescape([]byte("x"), doc[i+1:end-1]); !bytes.Equal(got, want) {
			t.Fatalf("AppendUnquoted(%q, %d) = %q, Unescape %q", doc, i, got, want)
		}
		// Into spare room, which it may write past what it keeps.
		roomy := append(make([]byte, 0, len(doc)+64), 'x')
		if again, _ := AppendUnquoted(roomy, doc, i); !bytes.Equal(again, got) {
			t.Fatalf("AppendUnquoted(%q, %d) into spare room = %q, else %q", doc, i, again, got)
		}
	}
}

func TestAppendUnquotedMatchesTwoPasses(t *testing.T) {
	eachString("\"\\au0D\xe9n", 7, func(s []byte) {
		checkAppendUnquoted(t, s)
		doc, _ := padded(s)
		checkAppendUnquoted(t, doc)
	})
	for _, tc := range benchSamples {
		for _, l := range tc.s.lit {
			doc, _ := padded([]byte(l))
			checkAppendUnquoted(t, doc)
		}
	}
}

func FuzzAppendUnquoted(f *testing.F) {
	f.Add([]byte(`"a\\\"b\u00e9\ud83e\udd80 12345678 \\\\\\\"c\\" , "d\x"`))
	f.Add([]byte(`{"delta":"\\\"Gr\u00fc\\\\n\"}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkAppendUnquoted(t, doc)
	})
}
