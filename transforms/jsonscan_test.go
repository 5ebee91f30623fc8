package transforms

import (
	"bytes"
	"encoding/json"
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
		if got := validDocument([]byte(tc.in)); got != tc.want {
			t.Errorf("validDocument(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzValidDocument holds the scanner to encoding/json's verdict on every
// input shallower than the scanner's depth limit.
func validSeeds() []string {
	return []string{`{"a":[1,2,{"b":"c\"d"}]}`, `[1e5,-0.0,"\u00e9"]`, `{"a":}`, `"\ud800"`, `[[[[]]]]`}
}

func FuzzValidDocument(f *testing.F) {
	for _, s := range validSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if bytes.Count([]byte(s), []byte("["))+bytes.Count([]byte(s), []byte("{")) >= maxDepth {
			return
		}
		if got, want := validDocument([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Fatalf("validDocument(%q) = %v, encoding/json says %v", s, got, want)
		}
	})
}
