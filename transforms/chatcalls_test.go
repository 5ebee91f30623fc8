package transforms_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// A tool_calls entry is read whatever the order of its members: index, id,
// type, name and the arguments as escaped, for functions and custom tools.
func TestReadChatFragmentInAnyKeyOrder(t *testing.T) {
	for _, tc := range []struct{ entry, want string }{
		{`{"index":2,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}`,
			`index 2 true id "c1" custom false typed true name f true args {\"a\": call true`},
		{`{"function":{"arguments":"x\\n","name":"f"},"type":"function","id":"c1","index":0}`,
			`index 0 true id "c1" custom false typed true name f true args x\\n call true`},
		{`{"index":1,"function":{"arguments":"1}"}}`,
			`index 1 true id  custom false typed false name  false args 1} call true`},
		{`{"type":"custom","custom":{"name":"apply_patch","input":"*** Begin"},"id":"c2"}`,
			`index 0 false id "c2" custom true typed true name apply_patch true args *** Begin call true`},
		{`{"index":"x","id":7}`,
			`index 0 false id  custom false typed false name  false args  call false`},
	} {
		f, end := transforms.ReadChatFragment([]byte(tc.entry), 0)
		got := fmt.Sprintf("index %d %v id %s custom %v typed %v name %s %v args %s call %v", f.Index, f.HasIndex, f.ID, f.Custom, f.Typed, f.Name, f.HasName, f.Args, f.Call)
		if got != tc.want || end != len(tc.entry) {
			t.Errorf("%s:\n got %s (end %d)\nwant %s (end %d)", tc.entry, got, end, tc.want, len(tc.entry))
		}
	}
	if _, end := transforms.ReadChatFragment([]byte(`{"index":0,"id":"c`), 0); end != -1 {
		t.Fatalf("a cut entry read to %d", end)
	}
}

// Fragments go to their call by choice and index; an upstream that numbers
// none is followed by id: a new id opens a call, none continues the last.
// A name sent in pieces is put together; one repeated in every fragment is
// kept once.
func TestChatCallsPlaceFragments(t *testing.T) {
	var calls transforms.ChatCalls[int]
	var log []string
	for _, e := range []struct {
		choice int64
		entry  string
	}{
		{0, `{"index":0,"id":"a","function":{"name":"exec_","arguments":""}}`},
		{0, `{"index":0,"function":{"name":"command","arguments":"{}"}}`},
		{1, `{"index":0,"id":"b","function":{"name":"g"}}`},
		{2, `{"id":"u1","function":{"name":"h","arguments":"{"}}`},
		{2, `{"function":{"arguments":"}"}}`},
		{2, `{"id":"u2","function":{"name":"k"}}`},
		{2, `{"id":"u2","function":{"arguments":"{}"}}`},
		{3, `{"index":0,"id":"r","function":{"name":"read_file","arguments":""}}`},
		{3, `{"index":0,"function":{"name":"read_file","arguments":"{}"}}`},
	} {
		f, _ := transforms.ReadChatFragment([]byte(e.entry), 0)
		c, opened := calls.Place(e.choice, &f)
		c.State++
		log = append(log, fmt.Sprintf("%d/%d seq %d id %s name %s opened %v fragments %d", c.Key.Choice, c.Key.Index, c.Seq, c.ID, c.Name, opened, c.State))
	}
	want := []string{
		`0/0 seq 0 id "a" name exec_ opened true fragments 1`,
		`0/0 seq 0 id "a" name exec_command opened false fragments 2`,
		`1/0 seq 1 id "b" name g opened true fragments 1`,
		`2/0 seq 2 id "u1" name h opened true fragments 1`,
		`2/0 seq 2 id "u1" name h opened false fragments 2`,
		`2/1 seq 3 id "u2" name k opened true fragments 1`,
		`2/1 seq 3 id "u2" name k opened false fragments 2`,
		`3/0 seq 4 id "r" name read_file opened true fragments 1`,
		`3/0 seq 4 id "r" name read_file opened false fragments 2`,
	}
	if strings.Join(log, "\n") != strings.Join(want, "\n") {
		t.Fatalf("placed:\n%s\nwant\n%s", strings.Join(log, "\n"), strings.Join(want, "\n"))
	}
	if calls.Len() != 5 || len(calls.Of(2)) != 2 || calls.Get(transforms.ChatCallKey{Choice: 1}).Name != "g" {
		t.Fatalf("%d calls, %d in choice 2", calls.Len(), len(calls.Of(2)))
	}
}

// ReadChatFragment never reads past the entry nor panics, and an entry it
// reads whole ends where it says.
func FuzzReadChatFragment(f *testing.F) {
	for _, s := range []string{
		`{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}`,
		`{"type":"custom","custom":{"name":"apply_patch","input":"x"}}`,
		`{"index":-1,"function":null}`,
		`{"\u0069ndex":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		fr, end := transforms.ReadChatFragment(d, 0)
		if end > len(d) || end < -2 {
			t.Fatalf("end %d of %d", end, len(d))
		}
		if end > 0 && fr.Args != nil && len(fr.Args) > end {
			t.Fatalf("arguments longer than the entry")
		}
	})
}
