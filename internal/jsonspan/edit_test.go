package jsonspan

import (
	"bytes"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// readAll reads r in reads of n bytes.
func readAll(t *testing.T, r io.Reader, n int) []byte {
	t.Helper()
	var out []byte
	p := make([]byte, n)
	for {
		k, err := r.Read(p)
		if k == 0 && err == nil {
			t.Fatal("Read returned nothing and no error")
		}
		out = append(out, p[:k]...)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// randomEdits plans up to n non-overlapping edits of doc, in random order:
// replacements, insertions, deletions, some written in place.
func randomEdits(rng *rand.Rand, doc []byte, n int) []Edit {
	var cuts []int
	for range 2 * n {
		cuts = append(cuts, rng.IntN(len(doc)+1))
	}
	slicesSort(cuts)
	var edits []Edit
	for k := 0; k+1 < len(cuts); k += 2 {
		if k > 0 && cuts[k] == cuts[k-1] {
			continue // two edits at one place have no order
		}
		repl := bytes.Repeat([]byte{byte('A' + k%26)}, rng.IntN(40))
		e := Edit{Start: cuts[k], End: cuts[k+1]}
		switch rng.IntN(3) {
		case 0:
			e.Write = func(dst []byte) []byte { return append(dst, repl...) }
			e.Size, e.Exact = len(repl), true
		case 1:
			// A writer that asks for more room than it uses, as
			// AppendQuoted does: it may move even where it would fit.
			e.Write = func(dst []byte) []byte { return append(slices.Grow(dst, len(repl)+64), repl...) }
			e.Size, e.Exact = len(repl), true
		default:
			e.Repl = repl
		}
		edits = append(edits, e)
	}
	rng.Shuffle(len(edits), func(i, j int) { edits[i], edits[j] = edits[j], edits[i] })
	return edits
}

func slicesSort(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

func TestEditReaderMatchesAppendEdits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	doc := []byte(`{"model":"m","input":[{"type":"custom_tool_call","input":"*** Begin Patch\n"},{"type":"message"}],"tools":[]}`)
	for round := range 500 {
		edits := randomEdits(rng, doc, round%7)
		want := AppendEdits(nil, doc, append([]Edit(nil), edits...))
		SortEdits(edits)
		size, exact := ExactSize(doc, edits)
		if !exact || size != len(want) {
			t.Fatalf("ExactSize = %d %v, built %d bytes", size, exact, len(want))
		}
		for _, n := range []int{1, 3, 16, 4096} {
			if got := readAll(t, NewEditReader(doc, edits, nil), n); !bytes.Equal(got, want) {
				t.Fatalf("round %d, reads of %d: EditReader gave\n%s\nAppendEdits\n%s", round, n, got, want)
			}
		}
	}
}

func TestExactSizeNeedsExactWrites(t *testing.T) {
	edits := []Edit{{Start: 0, End: 1, Write: func(dst []byte) []byte { return append(dst, "xy"...) }, Size: 4}}
	if _, exact := ExactSize([]byte("ab"), edits); exact {
		t.Fatal("an estimated Write size counted as exact")
	}
}

func TestSortEditsPanicsOnOverlap(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("overlapping edits were accepted")
		}
	}()
	SortEdits([]Edit{{Start: 3, End: 6}, {Start: 1, End: 4}})
}

func FuzzEditReader(f *testing.F) {
	f.Add([]byte(`{"a":"b","c":[1,2,3]}`), uint64(7), uint8(3), uint16(5))
	f.Fuzz(func(t *testing.T, doc []byte, seed uint64, n uint8, read uint16) {
		rng := rand.New(rand.NewPCG(seed, 0))
		edits := randomEdits(rng, doc, int(n%9))
		want := AppendEdits(nil, doc, append([]Edit(nil), edits...))
		SortEdits(edits)
		if got := readAll(t, NewEditReader(doc, edits, nil), int(read%5000)+1); !bytes.Equal(got, want) {
			t.Fatalf("EditReader gave %q, AppendEdits %q", got, want)
		}
	})
}

func TestEditReaderRefusesAWrongExactSize(t *testing.T) {
	edits := []Edit{{Start: 1, End: 2, Write: func(dst []byte) []byte { return append(dst, "xyz"...) }, Size: 2, Exact: true}}
	_, err := io.ReadAll(NewEditReader([]byte("abc"), edits, nil))
	if err == nil || !strings.Contains(err.Error(), "3 bytes, not the 2 announced") {
		t.Fatalf("err = %v", err)
	}
}
