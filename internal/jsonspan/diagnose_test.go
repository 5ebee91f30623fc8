package jsonspan

import (
	"strings"
	"testing"
)

// Diagnose points at the first byte at fault and says what is wrong there.
func TestDiagnoseNamesWhatAndWhere(t *testing.T) {
	deep := `{"a":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`
	for _, tc := range []struct {
		doc    string
		offset int
		reason string
	}{
		{`{"metadata":{"n":NaN}}`, 17, "invalid character 'N' looking for beginning of value"},
		{`{"x":-Infinity}`, 6, "invalid character 'I' in numeric literal"},
		{`{"a":1,}`, 7, "invalid character '}' looking for beginning of object key string"},
		{`{"a":"b`, 7, "unexpected end of JSON input"},
		// The 1,001st container: the object and 1,000 arrays.
		{deep, 5 + 999, "nested deeper than 1000 levels"},
		// A bracket inside a string is no nesting.
		{`{"s":"` + strings.Repeat("[", 2000) + `","n":NaN}`, 2012, "invalid character 'N' looking for beginning of value"},
		{`{"ok":[1,2]}`, -1, ""},
	} {
		off, reason := Diagnose([]byte(tc.doc))
		if off != tc.offset || reason != tc.reason {
			t.Errorf("%.40s: got %d %q, want %d %q", tc.doc, off, reason, tc.offset, tc.reason)
		}
	}
}
