package jsonspan

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// The string primitives run once per server-sent event in the streaming
// gateway. The samples below model the two kinds of text that reach them:
// tool arguments, a JSON document whose string values hold source code
// (quotes, backslashes and non-ASCII every few bytes) and that is itself
// sent as a JSON string, so its escapes are escaped again; and plain prose
// deltas. Both come as 12-byte pieces (the deltas of a stream) and whole
// (the arguments of the done event, some 30 KB).

// densePatch returns patch text with quotes, backslashes and non-ASCII
// characters on every line.
func densePatch() string {
	lines := []string{
		"*** Update File: src/grüße/main.py\n",
		"@@ def greet(name: str) -> None:\n",
		"-    print(\"Grüße, \\\"Welt\\\" — 3 🦀\", r\"C:\\Users\\José\\neu_3\")  # ça va\n",
		"+    print(f\"Grüße, \\\"{name}\\\" — 4 🦀\", r\"C:\\Users\\José\\neu_4\\\")  # ça ira\n",
		"+    path = \"\\\\\\\\server\\\\share\\\\Ünïcødé\\\\\" + name + \"\\\\\"\n",
		"     return {\"key\": \"väl\\\"ue\", 'tab': '\\t', \"€\": [1, 2]}\n",
	}
	var b strings.Builder
	for b.Len() < 17000 {
		for _, l := range lines {
			b.WriteString(l)
		}
	}
	return b.String()
}

// marshal returns v as JSON without HTML escaping, as the gateway writes it.
func marshal(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// pieces cuts s into pieces of about n bytes, each ending on a rune
// boundary, as a model streams its output.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && !utf8.RuneStart(s[k]) {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

type benchSample struct {
	raw []string // decoded text: the encoder's input
	lit []string // JSON string literals of raw, quotes included
}

func newSample(text string) benchSample {
	var s benchSample
	s.raw = pieces(text, 12)
	for _, p := range s.raw {
		s.lit = append(s.lit, marshal(p))
	}
	return s
}

var (
	// args is the arguments of a tool call: {"input":"<patch>"}, which a
	// stream carries as a JSON string, so its escapes are escaped again.
	benchArgs = marshal(map[string]string{"input": densePatch()})
	// prose is plain ASCII text, the bulk of message deltas.
	benchProse = strings.Repeat("some streamed words ", 1500)

	benchSamples = []struct {
		name string
		s    benchSample
	}{
		{"dense-pieces", newSample(benchArgs)},
		{"dense-whole", benchSample{raw: []string{benchArgs}, lit: []string{marshal(benchArgs)}}},
		{"plain-pieces", newSample(benchProse[:1200])},
		{"plain-whole", benchSample{raw: []string{benchProse}, lit: []string{marshal(benchProse)}}},
	}
)

// litBytes returns each literal followed by the rest of an event, as the
// scanners see it in a document.
func litBytes(s benchSample) (docs [][]byte, n int64) {
	for _, l := range s.lit {
		docs = append(docs, []byte(l+`,"item_id":"fc_1"}`))
		n += int64(len(l))
	}
	return docs, n
}

// benchLiterals runs each sample's literals, as litBytes lays them out,
// through scan, which returns an end or -1.
func benchLiterals(b *testing.B, scan func(doc []byte) int) {
	for _, tc := range benchSamples {
		docs, n := litBytes(tc.s)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(n)
			for b.Loop() {
				for _, d := range docs {
					if scan(d) < 0 {
						b.Fatal("malformed")
					}
				}
			}
		})
	}
}

func BenchmarkStringEnd(b *testing.B) {
	benchLiterals(b, func(d []byte) int { return StringEnd(d, 0) })
}

func BenchmarkSkipString(b *testing.B) {
	benchLiterals(b, func(d []byte) int { return SkipString(d, 0) })
}

func BenchmarkUnescape(b *testing.B) {
	for _, tc := range benchSamples {
		var bodies [][]byte
		var n int64
		for _, l := range tc.s.lit {
			bodies = append(bodies, []byte(l[1:len(l)-1]))
			n += int64(len(l) - 2)
		}
		dst := make([]byte, 0, 64<<10)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(n)
			for b.Loop() {
				for _, s := range bodies {
					dst = Unescape(dst[:0], s)
				}
			}
		})
	}
}

// rawBytes returns a sample's texts as byte slices, and their total size.
func rawBytes(texts []string) ([][]byte, int64) {
	var raws [][]byte
	var n int64
	for _, r := range texts {
		raws = append(raws, []byte(r))
		n += int64(len(r))
	}
	return raws, n
}

func BenchmarkAppendStringDense(b *testing.B) {
	for _, tc := range benchSamples {
		raws, n := rawBytes(tc.s.raw)
		dst := make([]byte, 0, 128<<10)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(n)
			for b.Loop() {
				for _, s := range raws {
					dst = AppendString(dst[:0], s)
				}
			}
		})
	}
}

// BenchmarkAppendUnquoted is StringEnd then Unescape (two-pass) against
// AppendUnquoted (one-pass) on the same literals.
func BenchmarkAppendUnquoted(b *testing.B) {
	dst := make([]byte, 0, 64<<10)
	b.Run("two-pass", func(b *testing.B) {
		benchLiterals(b, func(d []byte) int {
			end := StringEnd(d, 0)
			dst = Unescape(dst[:0], d[1:end-1])
			return end
		})
	})
	b.Run("one-pass", func(b *testing.B) {
		benchLiterals(b, func(d []byte) (end int) {
			dst, end = AppendUnquoted(dst[:0], d, 0)
			return end
		})
	})
}
