package patchfmt

import (
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"testing"
)

// streamed normalises the pieces with one Normalizer.
func streamed(pieces ...string) string {
	var n Normalizer
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(n.Write(p))
	}
	b.WriteString(n.Finish())
	return b.String()
}

// randomSplit cuts s at pseudo-random points derived from s and seed.
func randomSplit(s string, seed uint64) []string {
	h := fnv.New64a()
	h.Write([]byte(s))
	r := rand.New(rand.NewPCG(h.Sum64(), seed))
	var pieces []string
	for len(s) > 0 {
		k := 1 + r.IntN(min(len(s), 1+r.IntN(16)))
		pieces = append(pieces, s[:k])
		s = s[k:]
	}
	return pieces
}

// checkStreaming checks Write+Finish against Normalize for splits of s,
// and everything against the legacy copy.
func checkStreaming(t testing.TB, s string) {
	t.Helper()
	checkLegacy(t, s)
	want := Normalize(s)
	if got := streamed(s); got != want {
		t.Fatalf("one piece: got %q, want %q", got, want)
	}
	bytewise := make([]string, len(s))
	for i := range len(s) {
		bytewise[i] = s[i : i+1]
	}
	if got := streamed(bytewise...); got != want {
		t.Fatalf("byte by byte: got %q, want %q", got, want)
	}
	for seed := range uint64(4) {
		pieces := randomSplit(s, seed)
		if got := streamed(pieces...); got != want {
			t.Fatalf("pieces %q:\n got %q\nwant %q", pieces, got, want)
		}
		if got := appended(pieces...); got != want {
			t.Fatalf("AppendWrite, pieces %q:\n got %q\nwant %q", pieces, got, want)
		}
		if got := heldBack(t, pieces...); got != want {
			t.Fatalf("pieces held while Holds, %q:\n got %q\nwant %q", pieces, got, want)
		}
	}
}

// appended is streamed through AppendWrite, into one growing buffer.
func appended(pieces ...string) string {
	var n Normalizer
	var out []byte
	for _, p := range pieces {
		out = n.AppendWrite(out, p)
	}
	return string(out) + n.Finish()
}

// heldBack writes the pieces the way a caller that trusts Holds does: a
// piece Holds says would only be held waits and goes with the next one
// that is written. It checks on the way that such a piece, written on its
// own, releases nothing.
func heldBack(t testing.TB, pieces ...string) string {
	t.Helper()
	var n, probe Normalizer
	var out []byte
	held := ""
	for _, p := range pieces {
		if n.Holds([]byte(p)) {
			if got := probe.Write(p); got != "" {
				t.Fatalf("Holds(%q) but writing it released %q", p, got)
			}
			held += p
			continue
		}
		probe.Write(p)
		out = n.AppendWrite(out, held+p)
		held = ""
	}
	out = n.AppendWrite(out, held)
	return string(out) + n.Finish()
}

func TestNormalizerMatchesNormalize(t *testing.T) {
	for _, tc := range normalizeCases {
		t.Run(tc.name, func(t *testing.T) {
			checkStreaming(t, tc.in)
			// Every split into two and three pieces.
			want := Normalize(tc.in)
			for i := 0; i <= len(tc.in); i++ {
				if got := streamed(tc.in[:i], tc.in[i:]); got != want {
					t.Fatalf("split at %d: got %q, want %q", i, got, want)
				}
				for j := i; j <= len(tc.in) && len(tc.in) <= 100; j++ {
					if got := streamed(tc.in[:i], tc.in[i:j], tc.in[j:]); got != want {
						t.Fatalf("split at %d, %d: got %q, want %q", i, j, got, want)
					}
				}
			}
		})
	}
}

// step is one Write and the output it must release at once.
type step struct{ in, out string }

func TestNormalizerReleasesEarly(t *testing.T) {
	tests := []struct {
		name   string
		steps  []step
		finish string
	}{
		{
			name: "plain-lines",
			steps: []step{
				{"*** Begin Patch ***\n", "*** Begin Patch\n"},
				{"*** Add File: a\n", "*** Add File: a\n"},
				{"hel", ""},
				{"lo\r", ""},
				{"\n", "+hello\n"},
				{"*** Delete File: b\n", "*** Delete File: b\n"},
				{"*** End Patch", ""},
			},
			finish: "*** End Patch\n",
		},
		{
			name: "update-released-once-live",
			steps: []step{
				{"*** Begin Patch\n", "*** Begin Patch\n"},
				{"*** Update File: a\n", ""},
				{"@@ ctx\n", ""},
				{"-x\n", ""},
				{"+x\n", ""},
				{"-y\n", ""},
				{"+z\n", "*** Update File: a\n@@ ctx\n-x\n+x\n-y\n+z\n"},
				{" tail\n", " tail\n"},
				{"@@\n", ""},
				{" context\n", "@@\n context\n"},
				{"*** End Patch\n", "*** End Patch\n"},
			},
		},
		{
			name: "context-line-releases-hunk",
			steps: []step{
				{"*** Begin Patch\n*** Update File: a\n", "*** Begin Patch\n"},
				{" keep\n", "*** Update File: a\n keep\n"},
				{"-old\n", "-old\n"},
			},
			finish: "",
		},
		{
			name: "noop-hunk-never-released",
			steps: []step{
				{"*** Begin Patch\n*** Update File: a\n@@\n-x\n", "*** Begin Patch\n"},
				{"+x\n", ""},
				{"*** Update File: b\n", ""},
				{"-p\n+q\n", "*** Update File: b\n-p\n+q\n"},
			},
		},
		{
			name: "deletion-held-until-hunk-ends",
			steps: []step{
				{"*** Begin Patch\n*** Update File: a\n@@\n-x\n", "*** Begin Patch\n"},
				{"@@\n", "*** Update File: a\n@@\n-x\n"},
			},
			finish: "@@\n",
		},
		{
			name: "move-releases-header",
			steps: []step{
				{"*** Begin Patch\n*** Update File: a\n", "*** Begin Patch\n"},
				{"*** Move to: b\n", "*** Update File: a\n*** Move to: b\n"},
				{"@@\n-x\n+x\n", ""},
			},
			finish: "",
		},
		{
			name: "blank-lines-held",
			steps: []step{
				{"*** Begin Patch\n*** Add File: a\nx\n", "*** Begin Patch\n*** Add File: a\n+x\n"},
				{"\n\r\n", ""},
				{"y\n", "+\n+\n+y\n"},
				{"\n\n", ""},
			},
		},
		{
			name: "invoke-held-until-patch-then-until-finish",
			steps: []step{
				{"<invoke name=\"apply_patch\">", ""},
				{"\n*** Begin Patch\n", "*** Begin Patch\n"},
				{"*** Add File: a\nx\n", "*** Add File: a\n+x\n"},
				{"y  \n", ""},
				{"z\n</invoke>", "+y  \n+z\n"},
				{"more\n", ""},
				{"</invoke>", ""},
			},
			finish: "+</invoke>more\n",
		},
		{
			name: "invoke-partial-close-tag",
			steps: []step{
				{"<invoke>*** Begin Patch\n", "*** Begin Patch\n"},
				{"*** Add File: a\nx</inv", "*** Add File: a\n"},
				{"oker>\n", "+x</invoker>\n"},
			},
		},
		{
			name: "invoke-not-a-patch",
			steps: []step{
				{"<invoke>", ""},
				{"hello\n", ""},
				{"</invoke>", ""},
			},
			finish: "<invoke>hello\n</invoke>\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var n Normalizer
			var all strings.Builder
			for i, s := range tc.steps {
				got := n.Write(s.in)
				if got != s.out {
					t.Fatalf("step %d: Write(%q) = %q, want %q", i, s.in, got, s.out)
				}
				all.WriteString(s.in)
			}
			if got := n.Finish(); got != tc.finish {
				t.Fatalf("Finish() = %q, want %q", got, tc.finish)
			}
			checkStreaming(t, all.String())
		})
	}
}

func TestNormalizerReuse(t *testing.T) {
	var n Normalizer
	n.Write("<invoke>\n*** Begin Patch\n*** Update File: a\n@@\n-x\n")
	n.Finish()
	if got := n.Write("plain\n"); got != "plain\n" {
		t.Fatalf("after Finish, Write = %q", got)
	}
	if got := n.Finish(); got != "" {
		t.Fatalf("after Finish, Finish = %q", got)
	}
}

// TestNormalizerLinear streams inputs that stress the held state one byte
// at a time. Quadratic work on any of them would not finish in time.
func TestNormalizerLinear(t *testing.T) {
	const n = 100_000
	inputs := map[string]string{
		"leading-space":   strings.Repeat(" ", n) + "<invoke>*** Begin Patch\n",
		"no-gt":           "<invoke" + strings.Repeat("x", n),
		"wrapped-cr":      "<invoke>*** Begin Patch\nx" + strings.Repeat("\r", n) + "y",
		"wrapped-space":   "<invoke>*** Begin Patch\nx" + strings.Repeat(" \n", n) + "y",
		"wrapped-lt":      "<invoke>*** Begin Patch\n" + strings.Repeat("<", n),
		"wrapped-tags":    "<invoke>*** Begin Patch\n" + strings.Repeat("</invoke>", n/9),
		"unconfirmed":     "<invoke>" + strings.Repeat("line\n", n/5),
		"long-line":       "*** Begin Patch\n*** Add File: a\n" + strings.Repeat("x", n),
		"blank-lines":     "*** Begin Patch\n" + strings.Repeat("\r\n", n/2) + "x",
		"noop-hunk":       "*** Begin Patch\n*** Update File: a\n@@\n" + strings.Repeat("-x\n", n/6) + strings.Repeat("+x\n", n/6),
		"empty-sections":  "*** Begin Patch\n" + strings.Repeat("*** Update File: a\n", n/19),
		"neutral-hunk":    "*** Begin Patch\n*** Update File: a\n" + strings.Repeat("\\\n\n", n/3),
		"blank-in-output": "*** Begin Patch\n*** Update File: a\n@@\n x\n" + strings.Repeat("\n", n) + "*** Update File: b\n",
	}
	for name, s := range inputs {
		t.Run(name, func(t *testing.T) {
			var nz Normalizer
			var b strings.Builder
			for i := range len(s) {
				b.WriteString(nz.Write(s[i : i+1]))
			}
			b.WriteString(nz.Finish())
			if got, want := b.String(), Normalize(s); got != want {
				t.Fatalf("streamed output differs from Normalize")
			}
		})
	}
}

// checkLegacy checks Normalize, and Write, AppendWrite and Finish call by
// call, against the copy of the implementation in legacy_test.go, for
// splits of s: in one piece, byte by byte, in the 12-byte pieces of a
// stream and at random points. One Normalizer of each kind serves every
// split, so that reuse after Finish is compared too.
func checkLegacy(t testing.TB, s string) {
	t.Helper()
	if got, want := Normalize(s), legacyNormalize(s); got != want {
		t.Fatalf("Normalize(%q) = %q, legacy %q", s, got, want)
	}
	splits := [][]string{{s}, fixedSplit(s, 1), fixedSplit(s, 12)}
	for seed := range uint64(3) {
		splits = append(splits, randomSplit(s, seed+100))
	}
	var n Normalizer
	var old legacyNormalizer
	var dst, oldDst []byte
	for _, pieces := range splits {
		for i, p := range pieces {
			if i%2 == 0 {
				if got, want := n.Write(p), old.Write(p); got != want {
					t.Fatalf("pieces %q: Write #%d = %q, legacy %q", pieces, i, got, want)
				}
				continue
			}
			dst, oldDst = n.AppendWrite(dst[:0], p), old.AppendWrite(oldDst[:0], p)
			if string(dst) != string(oldDst) {
				t.Fatalf("pieces %q: AppendWrite #%d = %q, legacy %q", pieces, i, dst, oldDst)
			}
		}
		if got, want := n.Finish(), old.Finish(); got != want {
			t.Fatalf("pieces %q: Finish = %q, legacy %q", pieces, got, want)
		}
	}
}

// fixedSplit cuts s into pieces of k bytes, the last one shorter.
func fixedSplit(s string, k int) []string {
	var pieces []string
	for len(s) > k {
		pieces = append(pieces, s[:k])
		s = s[k:]
	}
	if s != "" {
		pieces = append(pieces, s)
	}
	return pieces
}
