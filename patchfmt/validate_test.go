package patchfmt

import (
	"reflect"
	"testing"
)

// checkValidate checks that Validate returns for s what Parse returned:
// nil for nil, else an equal *ParseError with the same text.
func checkValidate(t testing.TB, s string, parseErr error) {
	t.Helper()
	err := Validate(s)
	if (err == nil) != (parseErr == nil) || !reflect.DeepEqual(err, parseErr) ||
		err != nil && err.Error() != parseErr.Error() {
		t.Fatalf("Validate and Parse disagree on %q:\nValidate: %#v (%v)\n   Parse: %#v (%v)", s, err, err, parseErr, parseErr)
	}
}

// validateInputs returns the test tables' texts, valid and not, by name.
func validateInputs() map[string]string {
	in := map[string]string{}
	for _, tc := range parseCases {
		in["parse/"+tc.name] = tc.in
	}
	for _, tc := range parseErrorCases {
		in["error/"+tc.name] = tc.in
	}
	for name, s := range validCorpus {
		in["corpus/"+name] = s
	}
	for name, s := range seeds()["FuzzParse"] {
		in["seed/"+name] = s
	}
	in["stream"] = streamPatch()
	// Texts whose outcome rests on the counts that stand in for the built
	// Patch under checkOnly: a chunk opened by "@@" alone, hunks counted
	// for "*** End Patch", and an Add File with and without lines.
	in["at-at-then-eof"] = "*** Begin Patch\n*** Update File: a\n@@\n*** End of File\n*** End Patch\n"
	in["move-then-eof"] = "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End of File\n*** End Patch\n"
	in["update-then-end"] = "*** Begin Patch\n*** Update File: a\n*** End Patch\n"
	in["env-then-end"] = "*** Begin Patch\n*** Environment ID: e\n*** End Patch\n"
	in["add-then-add"] = "*** Begin Patch\n*** Add File: a\n+x\n*** Add File: b\n*** End Patch\n"
	return in
}

func TestValidate(t *testing.T) {
	for name, s := range validateInputs() {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(s)
			checkValidate(t, s, err)
			// Every prefix of the text stops the parser in another state,
			// which reaches most of the error paths.
			for i := range len(s) {
				_, err := Parse(s[:i])
				checkValidate(t, s[:i], err)
			}
		})
	}
}

// TestValidateAllocs checks the point of Validate: a valid patch costs no
// allocation.
func TestValidateAllocs(t *testing.T) {
	for name, s := range validateInputs() {
		if _, err := Parse(s); err != nil {
			continue
		}
		if n := testing.AllocsPerRun(20, func() { _ = Validate(s) }); n != 0 {
			t.Errorf("Validate(%s) allocates %v times, want 0", name, n)
		}
	}
}
