package patchfmt

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The seed corpus lives in testdata/fuzz, in Go's corpus file format, so
// that plain "go test" runs every seed. It is generated from the test
// tables; after changing them, run
//
//	go test ./patchfmt -run TestSeedCorpus -update-seeds
var updateSeeds = flag.Bool("update-seeds", false, "rewrite testdata/fuzz from the test tables")

func FuzzNormalize(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		got := Normalize(s)
		checkNormalized(t, s, got)
		checkStreaming(t, s)
	})
}

func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		checkValidate(t, s, err)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ParseError", err)
			}
			if lines := strings.Count(s, "\n") + 1; pe.Line < 1 || pe.Line > lines+1 {
				t.Fatalf("error line %d outside 1..%d: %v", pe.Line, lines+1, err)
			}
			if !strings.HasPrefix(pe.Msg, "expected ") {
				t.Fatalf("message does not say what was expected: %v", err)
			}
			if grammar.MatchString(s) {
				t.Fatalf("Parse rejected text the grammar accepts: %v\n%q", err, s)
			}
			return
		}
		checkParsed(t, s, p)
		if !blankName(p) {
			checkStillValid(t, s)
		}
	})
}

// blankName reports whether a path or the environment is only white space,
// which Normalize trims away along with the marker line's white space.
func blankName(p *Patch) bool {
	if p.Environment != "" && trimSpace(p.Environment) == "" {
		return true
	}
	for _, h := range p.Hunks {
		if trimSpace(h.Path) == "" || h.MoveTo != "" && trimSpace(h.MoveTo) == "" {
			return true
		}
	}
	return false
}

// seeds returns the fuzz seeds by target and name.
func seeds() map[string]map[string]string {
	norm := map[string]string{}
	for _, tc := range normalizeCases {
		norm[tc.name] = tc.in
	}
	parse := map[string]string{}
	for name, p := range validCorpus {
		norm["valid-"+name] = p
		parse["valid-"+name] = p
		parse["valid-"+name+"-no-final-lf"] = strings.TrimSuffix(p, "\n")
	}
	for _, tc := range normalizeCases {
		parse["normalized-"+tc.name] = Normalize(tc.in)
	}
	parse["raw-fixture"] = normalizeCases[0].in
	parse["update-forms"] = "*** Begin Patch\n*** Update File: a\n ctx\n-x\n+\n@@\n@@ class A\n@@  indented\n \n" +
		"*** End of File\n*** Update File: b\n*** Update File: c\n*** Move to: d\n*** End Patch\n"
	parse["change-after-eof"] = "*** Begin Patch\n*** Update File: a\n-x\n*** End of File\n+y\n*** End Patch\n"
	parse["bad-at-at"] = "*** Begin Patch\n*** Update File: a\n@@ \n*** End Patch\n"
	parse["trailing-text"] = "*** Begin Patch\n*** Delete File: a\n*** End Patch\n\n"
	return map[string]map[string]string{"FuzzNormalize": norm, "FuzzParse": parse}
}

func seedFile(s string) string {
	return fmt.Sprintf("go test fuzz v1\nstring(%q)\n", s)
}

// TestSeedCorpus checks that testdata/fuzz holds every seed.
func TestSeedCorpus(t *testing.T) {
	for target, byName := range seeds() {
		dir := filepath.Join("testdata", "fuzz", target)
		if *updateSeeds {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		names := make([]string, 0, len(byName))
		for name := range byName {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			path := filepath.Join(dir, name)
			want := seedFile(byName[name])
			if *updateSeeds {
				if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != want {
				t.Errorf("seed %s is missing or stale; run go test -run TestSeedCorpus -update-seeds", path)
			}
		}
	}
}

var (
	randomRuns = flag.Int("random-runs", 3000, "inputs TestNormalizeRandomPatches generates")
	randomSeed = flag.Uint64("random-seed", 1, "seed of TestNormalizeRandomPatches")
)

// fragments are the pieces TestNormalizeRandomPatches builds inputs from:
// the markers, prefixes and white space the rules react to.
var fragments = []string{
	"*** Begin Patch", "*** End Patch", "*** Begin Patch ***", " *** End Patch *** ",
	"*** Add File: a", "*** Delete File: b", "*** Update File: c", "*** Move to: d",
	"*** End of File", "*** end of file ***", "*** Environment ID: e", "***", " ***",
	"@@", "@@ f", " @@ g", "\t@@", "+x", "-x", "+y", "-y", " x", "x", "\\ No newline", "+", "-",
	"<invoke>", "<invoke name=\"apply_patch\">", "</invoke>", "</inv", "oke>", "<inv",
	"\n", "\n", "\n", "\n", "\r\n", "\r", " ", "\t", "", "🦀", "\"", "\\",
}

// TestNormalizeRandomPatches checks the Normalize properties on generated
// near-patches, which reach deeper states than byte-level fuzzing does
// quickly.
func TestNormalizeRandomPatches(t *testing.T) {
	r := rand.New(rand.NewPCG(*randomSeed, 2))
	for range *randomRuns {
		var b strings.Builder
		for range r.IntN(40) {
			b.WriteString(fragments[r.IntN(len(fragments))])
			if r.IntN(3) == 0 {
				b.WriteString("\n")
			}
		}
		s := b.String()
		checkNormalized(t, s, Normalize(s))
		checkStreaming(t, s)
	}
}

// parseLines are the lines TestParseRandom builds inputs from.
var parseLines = []string{
	"*** Begin Patch", "*** End Patch", "*** Add File: a", "*** Add File: ", "*** Delete File: b",
	"*** Update File: c", "*** Move to: d", "*** Move to: ", "*** End of File", "*** Environment ID: e",
	"@@", "@@ f", "@@ ", "@@x", "+", "+x", "-", "-x", " ", " x", "", "x", "*** Begin Patch\r",
}

// randomPatch builds a valid patch as lines.
func randomPatch(r *rand.Rand) []string {
	pick := func(s ...string) string { return s[r.IntN(len(s))] }
	lines := []string{"*** Begin Patch"}
	if r.IntN(5) == 0 {
		lines = append(lines, "*** Environment ID: e")
	}
	for range 1 + r.IntN(4) {
		switch r.IntN(3) {
		case 0:
			lines = append(lines, pick("*** Add File: a", "*** Add File: 文 b"))
			for range 1 + r.IntN(3) {
				lines = append(lines, pick("+", "+x", "+ y", "+*** End Patch"))
			}
		case 1:
			lines = append(lines, "*** Delete File: b")
		default:
			lines = append(lines, "*** Update File: c")
			if r.IntN(3) == 0 {
				lines = append(lines, "*** Move to: d")
			}
			n := r.IntN(5)
			for i := range n {
				if i == 0 && r.IntN(2) == 0 {
					lines = append(lines, pick(" x", "-x", "+y"))
					continue
				}
				lines = append(lines, pick("@@", "@@ f", "@@  g", " x", "-x", "+y", " ", "-", "+"))
			}
			if n > 0 && r.IntN(3) == 0 {
				lines = append(lines, "*** End of File")
			}
		}
	}
	return append(lines, "*** End Patch")
}

// TestParseRandom checks Parse against the grammar on generated patches,
// half of them broken by one edit.
func TestParseRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(*randomSeed, 3))
	accepted := 0
	for range *randomRuns {
		lines := randomPatch(r)
		if r.IntN(2) == 0 {
			i := r.IntN(len(lines) + 1)
			l := parseLines[r.IntN(len(parseLines))]
			switch {
			case r.IntN(3) == 0:
				lines = slices.Insert(lines, i, l)
			case i < len(lines) && r.IntN(2) == 0:
				lines = slices.Delete(lines, i, i+1)
			case i < len(lines):
				lines[i] = l
			}
		}
		s := strings.Join(lines, "\n")
		if r.IntN(3) > 0 {
			s += "\n"
		}
		p, err := Parse(s)
		checkValidate(t, s, err)
		if (err == nil) != grammar.MatchString(s) {
			t.Fatalf("Parse and the grammar disagree on %q: %v", s, err)
		}
		if err == nil {
			accepted++
			checkParsed(t, s, p)
			checkStillValid(t, s)
		}
	}
	t.Logf("%d of %d inputs valid", accepted, *randomRuns)
	if accepted == 0 && *randomRuns >= 1000 {
		t.Fatalf("no generated input was valid")
	}
}

// checkStillValid checks that normalising the valid patch s keeps it valid,
// unless every hunk was a no-op.
func checkStillValid(t testing.TB, s string) {
	t.Helper()
	q := Normalize(s)
	p, err := Parse(q)
	if err != nil {
		if !strings.HasSuffix(q, "\n*** End Patch\n") || strings.Count(q, "\n") > 3 ||
			strings.Count(q, "\n") == 3 && !strings.Contains(q, envPrefix) {
			t.Fatalf("Normalize broke a valid patch: %v\n in %q\nout %q", err, s, q)
		}
		return
	}
	if p.String() != q {
		t.Fatalf("a normalised valid patch is not canonical:\n%q\n%q", q, p.String())
	}
}
