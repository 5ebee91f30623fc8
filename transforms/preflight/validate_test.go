package preflight

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/internal/schemaargs"
)

// checkOne declares schema as tool "t" in a fresh set and checks args.
func checkOne(t *testing.T, schema, args string) ([]problem, bool, error) {
	t.Helper()
	s := newSchemaSet()
	s.add("t", []byte(schema))
	return s.check("t", []byte(args))
}

// wantProblems checks args against schema and wants exactly want.
func wantProblems(t *testing.T, schema, args string, want ...problem) {
	t.Helper()
	got, checked, err := checkOne(t, schema, args)
	if !checked || err != nil {
		t.Fatalf("not checked: %v", err)
	}
	if len(want) == 0 {
		want = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("args %s:\n got  %#v\n want %#v", args, got, want)
	}
}

const readFile = `{
	"type": "object",
	"properties": {
		"path": {"type": "string"},
		"count": {"type": "integer", "minimum": 1},
		"mode": {"type": "string", "enum": ["read", "stat"]}
	},
	"required": ["path"],
	"additionalProperties": false
}`

func TestCheckWrongTypeAndMissingRequired(t *testing.T) {
	wantProblems(t, readFile, `{"count": "7"}`,
		problem{Path: "", SchemaPath: "/required", Message: "missing property 'path'"},
		problem{Path: "/count", SchemaPath: "/properties/count/type", Message: "expected integer, but got string"},
	)
}

func TestCheckValidArguments(t *testing.T) {
	for _, args := range []string{
		`{"path": "a.txt"}`,
		`{"path": "a.txt", "count": 3, "mode": "stat"}`,
		`{"path": "a.txt", "count": 3.0}`,                   // an integer still
		`{"path": "a.txt", "count": 100000000000000000001}`, // exact, not a float64
	} {
		wantProblems(t, readFile, args)
	}
}

func TestCheckEmptyArgumentsAreTheEmptyObject(t *testing.T) {
	wantProblems(t, readFile, "  ",
		problem{Path: "", SchemaPath: "/required", Message: "missing property 'path'"})
	wantProblems(t, `{"type":"object","properties":{}}`, "")
}

func TestCheckNestedPaths(t *testing.T) {
	schema := `{
		"type": "object",
		"properties": {
			"edits": {
				"type": "array",
				"items": {
					"type": "object",
					"properties": {
						"old": {"type": "string"},
						"lines": {"type": "array", "items": {"type": "integer"}},
						"a/b~c": {"type": "boolean"}
					},
					"required": ["old", "new"]
				}
			}
		}
	}`
	wantProblems(t, schema, `{"edits": [{"old": "x", "new": "y"}, {"new": "y", "lines": [1, "2", 3, null], "a/b~c": 1}]}`,
		problem{Path: "/edits/1", SchemaPath: "/properties/edits/items/required", Message: "missing property 'old'"},
		problem{Path: "/edits/1/a~1b~0c", SchemaPath: "/properties/edits/items/properties/a~1b~0c/type", Message: "expected boolean, but got number"},
		problem{Path: "/edits/1/lines/1", SchemaPath: "/properties/edits/items/properties/lines/items/type", Message: "expected integer, but got string"},
		problem{Path: "/edits/1/lines/3", SchemaPath: "/properties/edits/items/properties/lines/items/type", Message: "expected integer, but got null"},
	)
}

func TestCheckLocalRefDefs(t *testing.T) {
	schema := `{
		"type": "object",
		"properties": {
			"from": {"$ref": "#/$defs/point"},
			"to": {"$ref": "#/$defs/point"},
			"next": {"$ref": "#"}
		},
		"required": ["from"],
		"$defs": {
			"point": {
				"type": "object",
				"properties": {"x": {"type": "number"}, "y": {"type": "number"}},
				"required": ["x", "y"]
			}
		}
	}`
	wantProblems(t, schema, `{"from": {"x": 1, "y": 2}, "next": {"from": {"x": 1}}}`,
		problem{Path: "/next/from", SchemaPath: "/$defs/point/required", Message: "missing property 'y'"},
	)
	wantProblems(t, schema, `{"from": {"x": "1", "y": 2}, "to": []}`,
		problem{Path: "/from/x", SchemaPath: "/$defs/point/properties/x/type", Message: "expected number, but got string"},
		problem{Path: "/to", SchemaPath: "/$defs/point/type", Message: "expected object, but got array"},
	)
	// A zod-style reference into the schema's own properties.
	wantProblems(t, `{"type":"object","properties":{"a":{"type":"string"},"b":{"$ref":"#/properties/a"}}}`, `{"b": 2}`,
		problem{Path: "/b", SchemaPath: "/properties/a/type", Message: "expected string, but got number"},
	)
}

func TestCheckDraft07Definitions(t *testing.T) {
	schema := `{
		"$schema": "http://json-schema.org/draft-07/schema#",
		"type": "object",
		"properties": {
			"repo": {"$ref": "#/definitions/repo"},
			"email": {"type": "string", "format": "email"},
			"when": {"type": "string", "format": "date-time"}
		},
		"required": ["repo"],
		"definitions": {
			"repo": {
				"type": "object",
				"properties": {"owner": {"type": "string"}, "name": {"type": "string", "minLength": 1}},
				"required": ["owner", "name"],
				"additionalProperties": false
			}
		}
	}`
	// Formats are hints, even in draft-07, which asserts them by default.
	wantProblems(t, schema, `{"repo": {"owner": "o", "name": "n"}, "email": "not an address", "when": "yesterday"}`)
	wantProblems(t, schema, `{"repo": {"owner": "o", "name": "", "branch": "main"}}`,
		problem{Path: "/repo", SchemaPath: "/definitions/repo/additionalProperties", Message: "property 'branch' is not allowed"},
		problem{Path: "/repo/name", SchemaPath: "/definitions/repo/properties/name/minLength", Message: "must be at least 1 character long, but has 0"},
	)
}

func TestCheckDraft04(t *testing.T) {
	schema := `{
		"$schema": "http://json-schema.org/draft-04/schema#",
		"type": "object",
		"properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": true}},
		"dependencies": {"n": ["unit"]}
	}`
	wantProblems(t, schema, `{"n": 0}`,
		problem{Path: "", SchemaPath: "/dependencies/n", Message: "missing property 'unit', required when 'n' is present"},
		problem{Path: "/n", SchemaPath: "/properties/n/exclusiveMinimum", Message: "must be > 0"},
	)
}

func TestCheckDraft2019AndRootFalse(t *testing.T) {
	schema := `{
		"$schema": "https://json-schema.org/draft/2019-09/schema",
		"type": "object",
		"properties": {"tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}, "maxItems": 2}},
		"$defs": {"tag": {"type": "string", "maxLength": 4}}
	}`
	wantProblems(t, schema, `{"tags": ["ok", "too long", "x"]}`,
		problem{Path: "/tags", SchemaPath: "/properties/tags/maxItems", Message: "must have at most 2 items, but has 3"},
		problem{Path: "/tags/1", SchemaPath: "/$defs/tag/maxLength", Message: "must be at most 4 characters long, but has 8"},
	)
	wantProblems(t, `false`, `{}`, problem{Path: "", SchemaPath: "", Message: "no value is allowed here"})
}

// The library shares the instance location of a propertyNames failure
// with the members it visits later; the path is found again.
func TestCheckPropertyNamesPath(t *testing.T) {
	schema := `{"properties": {"cfg": {"properties": {
		"aa": {"type": "string"},
		"env": {"type": "object", "propertyNames": {"pattern": "^[A-Z_]+$"}},
		"zz": {"type": "object"}
	}}}}`
	for range 20 { // members are visited in map order
		wantProblems(t, schema, `{"cfg": {"aa": "a", "env": {"bad-name": "SECRET-123", "OK": "x"}, "zz": {"m": 1}, "yy": [1, 2]}}`,
			problem{Path: "/cfg/env", SchemaPath: "/properties/cfg/properties/env/propertyNames", Message: "property name 'bad-name' is not allowed"},
		)
	}
}

func TestCheckConcurrently(t *testing.T) {
	s := newSchemaSet()
	s.add("t", []byte(readFile))
	done := make(chan []problem)
	for range 8 {
		go func() {
			p, _, _ := s.check("t", []byte(`{"count": 0, "path": "p"}`))
			done <- p
		}()
	}
	want := []problem{{Path: "/count", SchemaPath: "/properties/count/minimum", Message: "must be >= 1"}}
	for range 8 {
		if got := <-done; !reflect.DeepEqual(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	}
}

func TestCheckAdditionalPropertiesNamesEveryExtra(t *testing.T) {
	wantProblems(t, readFile, `{"path": "a", "zeta": 1, "alpha": "SECRET-123"}`,
		problem{Path: "", SchemaPath: "/additionalProperties", Message: "property 'alpha' is not allowed"},
		problem{Path: "", SchemaPath: "/additionalProperties", Message: "property 'zeta' is not allowed"},
	)
}

func TestCheckEnum(t *testing.T) {
	wantProblems(t, readFile, `{"path": "a", "mode": "write"}`,
		problem{Path: "/mode", SchemaPath: "/properties/mode/enum", Message: `must be one of the allowed values: "read", "stat"`},
	)
	// Values not shown when they are not scalars.
	wantProblems(t, `{"enum": [[1], {"a": 1}]}`, `[2]`,
		problem{Path: "", SchemaPath: "/enum", Message: "must be one of the allowed values"},
	)
	wantProblems(t, `{"properties": {"v": {"const": 2}}}`, `{"v": 3}`,
		problem{Path: "/v", SchemaPath: "/properties/v/const", Message: "must be 2"},
	)
}

func TestCheckAnyOfIsOneProblem(t *testing.T) {
	schema := `{
		"type": "object",
		"properties": {
			"limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
			"target": {"oneOf": [
				{"type": "object", "properties": {"file": {"type": "string"}}, "required": ["file"]},
				{"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}
			]},
			"pick": {"oneOf": [{"type": "integer"}, {"type": "number", "maximum": 10}]}
		}
	}`
	wantProblems(t, schema, `{"limit": "ten", "target": {"path": "x"}, "pick": 3}`,
		problem{Path: "/limit", SchemaPath: "/properties/limit/anyOf", Message: "does not match any allowed shape: expected integer or null, but got string"},
		problem{Path: "/pick", SchemaPath: "/properties/pick/oneOf", Message: "matches more than one allowed shape (alternatives 0 and 1), but must match exactly one"},
		problem{Path: "/target", SchemaPath: "/properties/target/oneOf", Message: "does not match any allowed shape"},
	)
}

func TestCheckRemoteRefIsNotCheckable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the validator fetched %s", r.URL)
		w.Write([]byte(`{"type": "string"}`))
	}))
	defer srv.Close()
	for _, schema := range []string{
		`{"type": "object", "properties": {"x": {"$ref": "` + srv.URL + `/defs.json"}}}`,
		`{"type": "object", "properties": {"x": {"$ref": "defs.json#/x"}}}`, // relative to the tool's schema
		`{"$schema": "` + srv.URL + `/meta", "type": "object"}`,
	} {
		s := newSchemaSet()
		s.add("t", []byte(schema))
		for range 2 {
			problems, checked, err := s.check("t", []byte(`{"x": 1}`))
			if checked || problems != nil || err == nil {
				t.Errorf("%s: checked=%v problems=%v err=%v, want not checkable", schema, checked, problems, err)
			}
		}
		t.Logf("%v", s.tools["t"].err)
	}
}

func TestCheckUncompilableSchemasAreNotCheckable(t *testing.T) {
	for name, schema := range map[string]string{
		"lookahead":           `{"type": "object", "properties": {"x": {"type": "string", "pattern": "^(?=x)"}}}`,
		"draft-07 lookbehind": `{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"x": {"pattern": "(?<!a)b"}}}`,
		"unknown draft":       `{"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"}`,
		"not JSON":            `{"type": `,
		"bad type":            `{"type": "text"}`,
		"missing $def":        `{"properties": {"x": {"$ref": "#/$defs/nowhere"}}}`,
		"draft-3 required":    `{"properties": {"x": {"type": "string", "required": true}}}`,
	} {
		problems, checked, err := checkOne(t, schema, `{"x": "x"}`)
		if checked || problems != nil || err == nil {
			t.Errorf("%s: checked=%v problems=%v err=%v, want not checkable", name, checked, problems, err)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
}

func TestCheckUnknownTool(t *testing.T) {
	s := newSchemaSet()
	s.add("read_file", []byte(readFile))
	if s.has("write_file") || !s.has("read_file") {
		t.Fatal("has")
	}
	problems, checked, err := s.check("write_file", []byte(`{}`))
	if checked || problems != nil || err == nil {
		t.Errorf("checked=%v problems=%v err=%v, want not checkable", checked, problems, err)
	}
}

func TestSchemaSetCopiesKeepsFirstAndCompilesLazily(t *testing.T) {
	s := newSchemaSet()
	buf := []byte(`{"type": "object", "required": ["a"]}`)
	s.add("t", buf)
	copy(buf, `{"type": "string"                    }`) // the caller reuses its buffer
	s.add("t", []byte(`{"type": "array"}`))
	s.add("broken", []byte(`{"type": 7}`))
	for name, ts := range s.tools {
		if ts.compiled {
			t.Errorf("%s compiled before any check", name)
		}
	}
	problems, checked, err := s.check("t", []byte(`{}`))
	want := []problem{{Path: "", SchemaPath: "/required", Message: "missing property 'a'"}}
	if !checked || err != nil || !reflect.DeepEqual(problems, want) {
		t.Errorf("got %v %v %v, want %v", problems, checked, err, want)
	}
	if s.tools["broken"].compiled {
		t.Error("a tool never checked was compiled")
	}
	_, _, err1 := s.check("broken", []byte(`{}`))
	_, _, err2 := s.check("broken", []byte(`{}`))
	if err1 == nil || err1 != err2 {
		t.Errorf("compile error not kept: %v, %v", err1, err2)
	}
}

func TestCheckMessagesNeverEchoValues(t *testing.T) {
	const secret = "SECRET-123"
	schema := `{
		"type": "object",
		"properties": {
			"a": {"type": "integer"},
			"b": {"enum": ["x", "y"]},
			"c": {"const": "x"},
			"d": {"type": "string", "pattern": "^[a-z]+$"},
			"e": {"type": "string", "maxLength": 3},
			"f": {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": "^[0-9]+$"}]},
			"g": {"type": "string", "format": "email"},
			"h": {"not": {"type": "string"}},
			"i": {"type": "array", "uniqueItems": true, "items": {"type": "string", "minLength": 20}},
			"j": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}},
			"k": {"type": "number", "maximum": 5},
			"l": {"type": "array", "contains": {"const": "x"}},
			"m": {"oneOf": [{"type": "string"}, {"type": "string", "minLength": 2}]},
			"n": false
		},
		"additionalProperties": {"type": "integer"}
	}`
	n := `123456789.987654321`
	args := `{"a": "` + secret + `", "b": "` + secret + `", "c": "` + secret + `", "d": "` + secret + `",
		"e": "` + secret + `", "f": "` + secret + `", "g": "` + secret + `", "h": "` + secret + `",
		"i": ["` + secret + `", "` + secret + `"], "j": {"X1": "` + secret + `"}, "k": ` + n + `,
		"l": ["` + secret + `"], "m": "` + secret + `", "n": "` + secret + `", "o": "` + secret + `"}`
	problems, checked, err := checkOne(t, schema, args)
	if !checked || err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range problems {
		seen[p.Path] = true
		t.Logf("%+v", p)
		for _, s := range []string{p.Message, p.Path, p.SchemaPath} {
			if strings.Contains(s, secret) || strings.Contains(s, "123456789") {
				t.Errorf("a value is echoed: %+v", p)
			}
		}
	}
	for _, p := range []string{"/a", "/b", "/c", "/d", "/e", "/f", "/h", "/i", "/i/0", "/i/1", "/j", "/k", "/l", "/m", "/n", "/o"} {
		if !seen[p] {
			t.Errorf("no problem at %s", p)
		}
	}
	if seen["/g"] {
		t.Error("format asserted")
	}
	text := describeProblems("t", problems)
	if strings.Contains(text, secret) {
		t.Errorf("the re-ask echoes a value:\n%s", text)
	}
}

func TestDescribeProblems(t *testing.T) {
	got := describeProblems("read_file", []problem{
		{Path: "", SchemaPath: "/required", Message: "missing property 'path'"},
		{Path: "/count", SchemaPath: "/properties/count/type", Message: "expected integer, but got string"},
	})
	want := `The arguments of the call to tool 'read_file' do not match the tool's parameters schema (2 problems):
- at the root (schema /required): missing property 'path'
- at /count (schema /properties/count/type): expected integer, but got string
Call 'read_file' again with corrected arguments.`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestDescribeProblemsCapsAtEight(t *testing.T) {
	var ps []problem
	for i := range 11 {
		ps = append(ps, problem{Path: "/items/" + strconv.Itoa(i), SchemaPath: "/properties/items/items/type", Message: "expected string, but got number"})
	}
	got := describeProblems("t", ps)
	want := `The arguments of the call to tool 't' do not match the tool's parameters schema (11 problems):
- at /items/0 (schema /properties/items/items/type): expected string, but got number
- at /items/1 (schema /properties/items/items/type): expected string, but got number
- at /items/2 (schema /properties/items/items/type): expected string, but got number
- at /items/3 (schema /properties/items/items/type): expected string, but got number
- at /items/4 (schema /properties/items/items/type): expected string, but got number
- at /items/5 (schema /properties/items/items/type): expected string, but got number
- at /items/6 (schema /properties/items/items/type): expected string, but got number
- at /items/7 (schema /properties/items/items/type): expected string, but got number
- and 3 more problems not listed
Call 't' again with corrected arguments.`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestDescribeProblemsStaysSmall(t *testing.T) {
	long := strings.Repeat("x", 500)
	var ps []problem
	for range 20 {
		ps = append(ps, problem{Path: "/" + long, SchemaPath: "/properties/" + long, Message: "missing property '" + long + "'"})
	}
	got := describeProblems(long, ps)
	if len(got) >= 1500 {
		t.Errorf("%d bytes:\n%s", len(got), got)
	}
	if !strings.Contains(got, "more problems not listed\n") || !strings.HasSuffix(got, "again with corrected arguments.") {
		t.Errorf("the end is missing:\n%s", got)
	}
}

// TestValidateRealSchemas compiles every public corpus tool schema
// (../shared/fixtures/tool-schemas; skipped when absent, except in CI):
// each compiles or is reported not checkable with a reason, and the
// arguments internal/schemaargs generates from it (minimal and full) have
// no problems.
func TestValidateRealSchemas(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "fixtures", "tool-schemas")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the public schema corpus is not at %s", dir)
		}
		t.Skipf("no schema corpus at %s", dir)
	}
	s := newSchemaSet()
	tools, notCheckable, calls := 0, 0, 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var tool struct {
			ID         string          `json:"id"`
			Parameters json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := filepath.Base(f)
		s.add(name, tool.Parameters)
		tools++
		for _, full := range []bool{false, true} {
			args, ok := schemaargs.Generate(tool.Parameters, full)
			if !ok {
				args = []byte(`{}`)
			}
			problems, checked, err := s.check(name, args)
			switch {
			case !checked && err == nil:
				t.Errorf("%s: not checked, and no reason", name)
			case !checked:
				if full {
					notCheckable++
					t.Logf("%s: %v", name, err)
				}
			case !ok:
				// Nothing generated; {} was only a probe of the schema.
			case problems != nil:
				t.Errorf("%s full=%v: generated arguments %s have problems: %+v", name, full, args, problems)
			default:
				calls++
			}
		}
	}
	t.Logf("%d tools, %d not checkable, %d generated calls valid", tools, notCheckable, calls)
	if notCheckable*10 > tools {
		t.Errorf("%d of %d tools not checkable", notCheckable, tools)
	}
}
