// Command importcheck fails when a package under transforms/ imports a
// transform package along an arrow the table below does not declare. The
// engine and tool layer (transforms) import no transform; a transform
// imports transforms, internal/… and leaf packages, and another transform
// only where the table says so; transforms/all imports every transform.
// A new transform that needs another adds its line here, where a reviewer
// sees it. .ci/run runs it from the module root:
//
//	go run ./internal/importcheck
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
)

// arrows are the imports between transform packages that are allowed,
// by importing package, relative to the module root. Imports is what the
// package's production code imports; TestImports what its tests add (a
// test that chains another transform must register it).
var arrows = map[string]struct{ Imports, TestImports []string }{
	// The nested custom-tool conversion of tools_plan.
	"transforms/toolsplan": {Imports: []string{"transforms/customtools"}},
	// Schema tests chain tools_normalize_schema after tools_plan.
	"transforms/schema": {TestImports: []string{"transforms/toolsplan"}},
	// Bridge tests chain field_set and tools_plan with the bridge.
	"transforms/chatbridge":     {TestImports: []string{"transforms/fieldset", "transforms/toolsplan"}},
	"transforms/messagesbridge": {TestImports: []string{"transforms/toolsplan"}},
	// Preflight tests put tools_preflight behind the bridges.
	"transforms/preflight": {TestImports: []string{"transforms/preflight", "transforms/messagesbridge", "transforms/chatbridge"}},
	// tools_defer tests chain tools_plan after it.
	"transforms/tooldefer": {TestImports: []string{"transforms/tooldefer", "transforms/toolsplan"}},
	// The engine's external tests chain every transform.
	"transforms": {TestImports: []string{"transforms/all"}},
}

// notTransforms are the packages under transforms/ that are not
// transforms themselves.
var notTransforms = []string{"transforms", "transforms/all", "transforms/transformtest"}

func main() {
	bad, err := check(".", arrows)
	if err != nil {
		fmt.Fprintln(os.Stderr, "importcheck:", err)
		os.Exit(2)
	}
	for _, b := range bad {
		fmt.Fprintln(os.Stderr, b)
	}
	if len(bad) > 0 {
		fmt.Fprintf(os.Stderr, "importcheck: %d undeclared imports between transform packages; declare the arrow in internal/importcheck/main.go if it is meant\n", len(bad))
		os.Exit(1)
	}
}

type listed struct {
	ImportPath                string
	Module                    struct{ Path string }
	Imports, TestImports      []string
	XTestImports, TestGoFiles []string
}

// check lists the packages under transforms/ of the module in dir and
// returns one line per import of a transform package that arrows does
// not declare.
func check(dir string, arrows map[string]struct{ Imports, TestImports []string }) ([]string, error) {
	cmd := exec.Command("go", "list", "-e", "-json", "./transforms/...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("no packages under transforms/")
	}
	mod := pkgs[0].Module.Path + "/"
	rel := func(path string) string { return strings.TrimPrefix(path, mod) }
	isTransform := func(path string) bool {
		r := rel(path)
		return strings.HasPrefix(path, mod+"transforms/") && !slices.Contains(notTransforms, r)
	}
	var bad []string
	for _, p := range pkgs {
		from := rel(p.ImportPath)
		a := arrows[from]
		judge := func(imports, allowed []string, kind string) {
			for _, imp := range imports {
				r := rel(imp)
				switch {
				case !strings.HasPrefix(imp, mod+"transforms/"):
				case from == "transforms/all" && isTransform(imp):
				case !isTransform(imp) && r != "transforms/all":
				case slices.Contains(allowed, r):
				default:
					bad = append(bad, fmt.Sprintf("%s %s %s", from, kind, r))
				}
			}
		}
		judge(p.Imports, a.Imports, "imports")
		testAllowed := append(slices.Clone(a.Imports), a.TestImports...)
		judge(append(slices.Clone(p.TestImports), p.XTestImports...), testAllowed, "tests import")
	}
	sort.Strings(bad)
	return slices.Compact(bad), nil
}
