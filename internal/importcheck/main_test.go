package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The module's own packages follow the declared arrows.
func TestModuleFollowsTheDeclaredArrows(t *testing.T) {
	bad, err := check("../..", arrows)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("undeclared imports: %v", bad)
	}
}

// A transform that imports another along an undeclared arrow is reported,
// in production code and in tests; a declared arrow, the engine, all and
// non-transform packages are not.
func TestUndeclaredImportIsReported(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("transforms/engine.go", "package transforms\n")
	write("transforms/transformtest/tt.go", "package transformtest\n\nimport _ \"example.com/m/transforms\"\n")
	write("transforms/a/a.go", "package a\n\nimport _ \"example.com/m/transforms\"\n")
	// b reaches into a: the forbidden import.
	write("transforms/b/b.go", "package b\n\nimport (\n\t_ \"example.com/m/transforms\"\n\t_ \"example.com/m/transforms/a\"\n\t_ \"example.com/m/transforms/transformtest\"\n)\n")
	// c's tests import a.
	write("transforms/c/c.go", "package c\n")
	write("transforms/c/c_test.go", "package c\n\nimport _ \"example.com/m/transforms/a\"\n")
	// d may import a: declared.
	write("transforms/d/d.go", "package d\n\nimport _ \"example.com/m/transforms/a\"\n")
	write("transforms/all/all.go", "package all\n\nimport (\n\t_ \"example.com/m/transforms/a\"\n\t_ \"example.com/m/transforms/b\"\n)\n")

	table := map[string]struct{ Imports, TestImports []string }{
		"transforms/d": {Imports: []string{"transforms/a"}},
	}
	bad, err := check(dir, table)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"transforms/b imports transforms/a", "transforms/c tests import transforms/a"}
	if !slices.Equal(bad, want) {
		t.Fatalf("reported %q, want %q", bad, want)
	}

	// Declared, the same imports pass.
	table["transforms/b"] = struct{ Imports, TestImports []string }{Imports: []string{"transforms/a"}}
	table["transforms/c"] = struct{ Imports, TestImports []string }{TestImports: []string{"transforms/a"}}
	if bad, err := check(dir, table); err != nil || len(bad) > 0 {
		t.Fatalf("declared arrows reported: %v %v", bad, err)
	}
}
