package jsonspan

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestValidDocument(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{}`, true}, {` [1, -0.5e+3, "a\u00e9\n", true, false, null, {"k": []}] `, true},
		{`{"a":1,}`, false}, {`[1 2]`, false}, {`{"a" 1}`, false}, {`"\x"`, false}, {"\"\x01\"", false},
		{`01`, false}, {`1.`, false}, {`-`, false}, {`1e`, false}, {`tru`, false}, {`nul`, false},
		{`{} {}`, false}, {`"\ud83e\udd80"`, true}, {`"\u12G4"`, false}, {``, false}, {`"abc`, false},
		{"\"tab\tin string\"", false}, {`{"a":"b"}x`, false}, {`[` + string(bytes.Repeat([]byte("["), 1001)) + `]`, false},
	} {
		if got := Valid([]byte(tc.in)); got != tc.want {
			t.Errorf("Valid(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func validSeeds() []string {
	return []string{`{"a":[1,2,{"b":"c\"d"}]}`, `[1e5,-0.0,"\u00e9"]`, `{"a":}`, `"\ud800"`, `[[[[]]]]`}
}

// FuzzValid holds the scanner to encoding/json's verdict on every input
// shallower than the scanner's depth limit.
func FuzzValid(f *testing.F) {
	for _, s := range validSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if bytes.Count([]byte(s), []byte("["))+bytes.Count([]byte(s), []byte("{")) >= maxDepth {
			return
		}
		if got, want := Valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", s, got, want)
		}
	})
}

var updateSeeds = flag.Bool("update-seeds", false, "write the fuzz seed corpora to testdata/fuzz")

// TestSeedCorpus keeps testdata/fuzz/FuzzValid in step with validSeeds; run
// with -update-seeds after changing them.
func TestSeedCorpus(t *testing.T) {
	for i, v := range validSeeds() {
		name := fmt.Sprintf("testdata/fuzz/FuzzValid/seed-%02d", i)
		want := fmt.Sprintf("go test fuzz v1\nstring(%q)\n", v)
		if *updateSeeds {
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(name); err != nil || string(got) != want {
			t.Errorf("%s is stale; run go test -run TestSeedCorpus -update-seeds", name)
		}
	}
}

func TestLastMember(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"model":"a","input":[{"x":"y\"}]"}],"model":"b"}`, `"b"`},
		{` { "model" : 5 } `, `5`},
		{`{"input":"\\","model":null}`, `null`},
		{`{"m\u006fdel":"escaped","other":{"model":"nested"}}`, `"escaped"`},
		{`{"input":[1,{"model":"deep"}]}`, ``},
		{`[{"model":"x"}]`, ``},
	} {
		sp := LastMember([]byte(tc.doc), "model")
		got := ""
		if sp.Start >= 0 {
			got = tc.doc[sp.Start:sp.End]
		}
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.doc, got, tc.want)
		}
	}
}

// FuzzLastMember holds LastMember to a last-wins JSON parser on every valid
// object.
func FuzzLastMember(f *testing.F) {
	f.Add(`{"model":"a","input":[{"x":"y\"}]"}],"model":"b"}`)
	f.Add(`{"model":1.5e3,"model":{"a":[true,false]}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(doc), &m) != nil || m == nil {
			return
		}
		want, ok := m["model"]
		sp := LastMember([]byte(doc), "model")
		if !ok {
			if sp.Start >= 0 {
				t.Fatalf("%s: found %s", doc, doc[sp.Start:sp.End])
			}
			return
		}
		if sp.Start < 0 {
			t.Fatalf("%s: not found, want %s", doc, want)
		}
		var g, w any
		if json.Unmarshal([]byte(doc[sp.Start:sp.End]), &g) != nil || json.Unmarshal(want, &w) != nil || !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: got %s, want %s", doc, doc[sp.Start:sp.End], want)
		}
	})
}

func TestRemoveMember(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"id":"x","a":1}`, `{"a":1}`},
		{`{"a":1,"id":"x"}`, `{"a":1}`},
		{`{"a":1, "id" : "x" ,"b":2}`, `{"a":1, "b":2}`},
		{`{ "id":{"nested":"}"} }`, `{  }`},
		{`{"a":[1],` + "\n\t" + `"\u0069d":7}`, `{"a":[1]}`},
	} {
		doc := []byte(tc.doc)
		var v Span
		EachMember(doc, 0, func(m Member) bool {
			if m.KeyIs(doc, "id") {
				v = m.Value
			}
			return true
		})
		got := string(Apply(doc, []Edit{RemoveMember(doc, v)}))
		if got != tc.want || !json.Valid([]byte(got)) {
			t.Errorf("%s: got %s, want %s", tc.doc, got, tc.want)
		}
	}
}
