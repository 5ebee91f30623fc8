package preflight

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/llmtransform/caddy-llm-transform/internal/schemaargs"
)

const fastSchema = `{"type":"object","properties":{"cmd":{"type":"string"},"n":{"type":"integer"},"x":{"type":["number","null"]},` +
	`"mode":{"type":"string","enum":["a","b"]},"tags":{"type":"array","items":{"type":"string"}},"o":{"type":"object","properties":{"k":{"type":"boolean"}},"required":["k"]}},` +
	`"required":["cmd"],"additionalProperties":false}`

// TestPlainCheckSaysValidOnlyWhenTheValidatorDoes: each case's fast
// answer, and the validator agrees wherever the fast check says valid.
func TestPlainCheckSaysValidOnlyWhenTheValidatorDoes(t *testing.T) {
	plan, ok := compilePlain([]byte(fastSchema), 0, 0)
	if !ok {
		t.Fatal("the schema is plain")
	}
	sch, err := compileSchemaUncached([]byte(fastSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args string
		fast bool
	}{
		{`{"cmd":"ls"}`, true},
		{`{"cmd":"ls","n":3,"x":null,"mode":"b","tags":["a","b"],"o":{"k":true}}`, true},
		{` { "cmd" : "l\"s" , "x": 1.5e3 } `, true},
		{`{"n":3}`, false},                 // cmd missing
		{`{"cmd":1}`, false},               // wrong type
		{`{"cmd":"ls","n":1.0}`, false},    // an integer the validator must judge
		{`{"cmd":"ls","n":"3"}`, false},    // wrong type
		{`{"cmd":"ls","mode":"c"}`, false}, // not in the enum
		{`{"cmd":"ls","extra":1}`, false},  // closed
		{`{"cmd":"ls","tags":[1]}`, false}, // items
		{`{"cmd":"ls","o":{}}`, false},     // nested required
		{`{"cmd":"ls","o":{"k":"y"}}`, false},
		{`{"c\u006dd":"ls"}`, false}, // an escaped name: the validator reads it
	} {
		got, end := plan.valid([]byte(c.args), 0)
		got = got && end == len(strings.TrimRight(c.args, " "))
		if got != c.fast {
			t.Errorf("%s: fast %v, want %v", c.args, got, c.fast)
		}
		if got {
			problems, checked, _ := checkWith(sch, []byte(c.args))
			if !checked || problems != nil {
				t.Errorf("%s: the fast check says valid, the validator %+v", c.args, problems)
			}
		}
	}
	for _, s := range []string{`{"anyOf":[{"type":"string"}]}`, `{"type":"object","properties":{"a":{"$ref":"#/x"}}}`,
		`{"type":"string","minLength":1}`, `{"type":"object","additionalProperties":{"type":"string"}}`, `{"enum":["a\n"]}`} {
		if _, ok := compilePlain([]byte(s), 0, 0); ok {
			t.Errorf("%s is not plain", s)
		}
	}
}

// checkWith validates args with a compiled schema alone, as
// schemaSet.check does past its fast check.
func checkWith(sch *jsonschema.Schema, args []byte) ([]problem, bool, error) {
	s := newSchemaSet()
	s.tools["t"] = &toolSchema{compiled: true, sch: sch}
	return s.check("t", args)
}

// TestPlainCheckOnRealSchemas: on every plain schema of the public corpus,
// over generated arguments and their mutations, the fast check never says
// valid where the validator finds a problem.
func TestPlainCheckOnRealSchemas(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "fixtures", "tool-schemas")
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the public schema corpus is not at %s", dir)
		}
		t.Skipf("no schema corpus at %s", dir)
	}
	plains, fastValid, checked := 0, 0, 0
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		var tool struct {
			Parameters json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatal(err)
		}
		plan, ok := compilePlain(tool.Parameters, 0, 0)
		if !ok {
			continue
		}
		plains++
		sch, err := compileSchemaUncached(tool.Parameters)
		if err != nil {
			continue
		}
		var cases [][]byte
		for _, full := range []bool{false, true} {
			args, ok := schemaargs.Generate(tool.Parameters, full)
			if !ok {
				continue
			}
			cases = append(cases, args)
			var m map[string]json.RawMessage
			if json.Unmarshal(args, &m) != nil {
				continue
			}
			for k := range m {
				for _, v := range []string{`1`, `1.5`, `"x"`, `null`, `[]`, `{}`, `true`, `[1,"a"]`} {
					c := map[string]json.RawMessage{}
					for k2, v2 := range m {
						c[k2] = v2
					}
					c[k] = json.RawMessage(v)
					b, _ := json.Marshal(c)
					cases = append(cases, b)
				}
				c := map[string]json.RawMessage{}
				for k2, v2 := range m {
					if k2 != k {
						c[k2] = v2
					}
				}
				b, _ := json.Marshal(c)
				cases = append(cases, b)
			}
		}
		for _, args := range cases {
			checked++
			ok, end := plan.valid(args, 0)
			if !ok || end != len(args) {
				continue
			}
			fastValid++
			if problems, _, _ := checkWith(sch, args); problems != nil {
				t.Errorf("%s: %s: the fast check says valid, the validator %+v", filepath.Base(f), args, problems)
			}
		}
	}
	t.Logf("%d of %d schemas plain; %d of %d argument sets valid by the fast check, every one confirmed", plains, len(files), fastValid, checked)
	if plains == 0 || fastValid == 0 {
		t.Fatal("the fast check never ran")
	}
}
