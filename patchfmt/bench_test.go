package patchfmt

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// benchPatch builds a canonical patch of about size bytes: mostly updates
// with context, some added and deleted files, some non-ASCII text.
func benchPatch(size int) string {
	var b strings.Builder
	b.Grow(size + 4096)
	b.WriteString("*** Begin Patch\n")
	for i := 0; b.Len() < size; i++ {
		switch i % 8 {
		case 0:
			fmt.Fprintf(&b, "*** Add File: docs/new_%d.md\n", i)
			for j := range 20 {
				fmt.Fprintf(&b, "+Line %d of the new file: \"quoted\", 🦀 and 中文 text.\n", j)
			}
		case 1:
			fmt.Fprintf(&b, "*** Delete File: old/file_%d.txt\n", i)
		default:
			fmt.Fprintf(&b, "*** Update File: src/pkg%d/file.go\n", i)
			if i%5 == 0 {
				fmt.Fprintf(&b, "*** Move to: src/pkg%d/moved.go\n", i)
			}
			for h := range 4 {
				fmt.Fprintf(&b, "@@ func handler%d(w http.ResponseWriter, r *http.Request) {\n", h)
				b.WriteString(" \tctx := r.Context()\n \tif err := validate(ctx, r); err != nil {\n")
				fmt.Fprintf(&b, "-\t\treturn fmt.Errorf(\"validate %d: %%w\", err)\n", h)
				fmt.Fprintf(&b, "+\t\treturn fmt.Errorf(\"validating request %d: %%w\", err)\n", h)
				b.WriteString(" \t}\n")
			}
		}
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

// dirtyPatch turns a canonical patch into what a model might send: CRLF,
// decorated markers, Add lines without "+", End of File markers and no-op
// hunks, so that Normalize must rewrite nearly every line.
func dirtyPatch(p string) string {
	var b strings.Builder
	b.Grow(len(p) + len(p)/4)
	for l := range strings.Lines(p) {
		l = strings.TrimSuffix(l, "\n")
		switch {
		case l == beginPatch || l == endPatch:
			l += " ***"
		case strings.HasPrefix(l, "+Line "):
			l = l[1:]
		case strings.HasPrefix(l, "@@ func handler3"):
			b.WriteString("@@\r\n-same\r\n+same\r\n")
		case strings.HasPrefix(l, deletePrefix):
			b.WriteString("*** End of File\r\n")
		}
		b.WriteString(l)
		b.WriteString("\r\n")
	}
	return b.String()
}

var (
	cloneNs sync.Map // input length -> ns per bytes.Clone
	sink    []byte
)

// cloneTime returns the time of a bytes.Clone of in: as the baseline
// sub-benchmark measured it, or measured here when that was filtered out.
// (testing.Benchmark cannot run inside a benchmark.)
func cloneTime(in string) float64 {
	if v, ok := cloneNs.Load(len(in)); ok {
		return v.(float64)
	}
	// The median of a few runs resists the GC noise of earlier benchmarks.
	b, runs := []byte(in), make([]float64, 21)
	for i := range runs {
		start := time.Now()
		sink = bytes.Clone(b)
		runs[i] = float64(time.Since(start).Nanoseconds())
	}
	slices.Sort(runs)
	ns := runs[len(runs)/2]
	cloneNs.Store(len(in), ns)
	return ns
}

// BenchmarkPatch reports MB/s of each operation next to a bytes.Clone of
// the same input, and as x-clone how many times slower than that copy the
// operation is.
func BenchmarkPatch(b *testing.B) {
	for _, size := range []int{1 << 20, 10 << 20} {
		clean := benchPatch(size)
		dirty := dirtyPatch(clean)
		if Normalize(clean) != clean {
			b.Fatal("benchPatch is not canonical")
		}
		if _, err := Parse(Normalize(dirty)); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			run := func(name, in string, op func(string)) {
				b.Run(name, func(b *testing.B) {
					b.SetBytes(int64(len(in)))
					b.ReportAllocs()
					for b.Loop() {
						op(in)
					}
					ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
					if strings.HasPrefix(name, "baseline-") {
						cloneNs.Store(len(in), ns)
					}
					b.ReportMetric(ns/cloneTime(in), "x-clone")
				})
			}
			cleanBytes, dirtyBytes := []byte(clean), []byte(dirty)
			run("baseline-clone", clean, func(string) { sink = bytes.Clone(cleanBytes) })
			run("baseline-clone-dirty", dirty, func(string) { sink = bytes.Clone(dirtyBytes) })
			run("normalize", clean, func(s string) { _ = Normalize(s) })
			run("normalize-dirty", dirty, func(s string) { _ = Normalize(s) })
			run("normalizer-4KiB-dirty", dirty, func(s string) {
				var n Normalizer
				for len(s) > 0 {
					k := min(len(s), 4096)
					_ = n.Write(s[:k])
					s = s[k:]
				}
				_ = n.Finish()
			})
			run("parse", clean, func(s string) { _, _ = Parse(s) })
		})
	}
}

// streamPatch is the kind of patch a model streams: about 15 KB of
// Update File hunks with quotes, backslashes and non-ASCII text on every
// changed line.
func streamPatch() string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n")
	for i := range 92 {
		if i%4 == 0 {
			fmt.Fprintf(&b, "*** Update File: src/módulo_%d.py\n", i/4)
		}
		b.WriteString("@@ def grüße():\n")
		fmt.Fprintf(&b, "-    print(\"Hallo \\\"%d\\\"\", r\"C:\\temp\\alt_%d\") # naïve\n", i, i)
		fmt.Fprintf(&b, "+    print(\"Grüße, \\\"Welt\\\" — %d 🦀\", r\"C:\\Users\\José\\neu_%d\") # ça\n", i, i)
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

// BenchmarkStream feeds streamPatch to a fresh Normalizer in 12-byte pieces
// through AppendWrite into a reused buffer, as the stream engine does with
// the argument deltas of an apply_patch call.
func BenchmarkStream(b *testing.B) {
	in := streamPatch()
	if Normalize(in) != in {
		b.Fatal("streamPatch is not canonical")
	}
	var pieces []string
	for s := in; len(s) > 0; {
		k := min(len(s), 12)
		pieces = append(pieces, s[:k])
		s = s[k:]
	}
	var dst []byte
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		n := new(Normalizer)
		for _, p := range pieces {
			dst = n.AppendWrite(dst[:0], p)
		}
		sink = append(dst[:0], n.Finish()...)
	}
}

// BenchmarkParseStream parses streamPatch, as the stream engine checks each
// restored patch.
func BenchmarkParseStream(b *testing.B) {
	in := streamPatch()
	if _, err := Parse(in); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Parse(in)
	}
}

// BenchmarkValidate checks streamPatch as BenchmarkParseStream parses it,
// which is all the stream engine needs of a restored patch.
func BenchmarkValidate(b *testing.B) {
	in := streamPatch()
	if err := Validate(in); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		_ = Validate(in)
	}
}
