package toolsfilter

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// Conditions (condition.go): a value, an operator set apart by blanks, a
// value; placeholders are replaced at request time and compared as data.

// TestConditionParse: the operator stands apart, with a value on both
// sides.
func TestConditionParse(t *testing.T) {
	for _, bad := range []string{
		"",
		"{http.request.header.X-Team} research",
		"{http.request.header.X-Team}==research",
		"{http.request.header.X-Team} = research",
		"== research",
		"{http.request.header.X-Team} ==",
		"!~",
	} {
		if c, err := ParseCondition(bad); err == nil {
			t.Errorf("%q parsed as %q", bad, c)
		}
	}
	_, err := ParseCondition("{a} research")
	if err == nil || !strings.Contains(err.Error(), "no operator") {
		t.Errorf("no operator: %v", err)
	}
	_, err = ParseCondition("{a} ==")
	if err == nil || !strings.Contains(err.Error(), "both sides") {
		t.Errorf("missing side: %v", err)
	}

	repl := caddy.NewReplacer()
	repl.Set("a", "hello world")
	for _, tc := range []struct {
		in, str string
		holds   bool
	}{
		{"{a}  ==   hello world", "{a} == hello world", true},
		{"{a} != hello", "{a} != hello", true},
		{"{a} !~ hello*", "{a} !~ hello*", false},
		{"{a} ~ *o?w*", "{a} ~ *o?w*", true},
		{"{a} ~ hello", "{a} ~ hello", false},
		{"x{a}y == xhello worldy", "x{a}y == xhello worldy", true},
	} {
		c, err := ParseCondition(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if c.String() != tc.str {
			t.Errorf("%q reads back as %q, want %q", tc.in, c.String(), tc.str)
		}
		if c.Holds(repl) != tc.holds {
			t.Errorf("%q holds %v, want %v", tc.in, !tc.holds, tc.holds)
		}
	}
	// A nil replacer leaves placeholders empty.
	c, _ := ParseCondition("{a} == hello world")
	if c.Holds(nil) {
		t.Error("held without a replacer")
	}
	c, _ = ParseCondition("x{a} == x")
	if !c.Holds(nil) {
		t.Error("an unknown placeholder is not empty")
	}
}

// TestConditionScannerAcceptsOnlyItsGrammar: tabs and runs of blanks set
// the operator apart, the values keep their inner blanks, an operator-like
// token first or on the right is a value, and a lone operator (or one not
// set apart) is an error that says so.
func TestConditionScannerAcceptsOnlyItsGrammar(t *testing.T) {
	for _, tc := range []struct{ in, left, op, right, err string }{
		{in: "a\t==\tb", left: "a", op: "==", right: "b"},
		{in: "{h}  ==  red  team", left: "{h}", op: "==", right: "red  team"},
		{in: " a == b\t", left: "a", op: "==", right: "b"},
		{in: "a == ==", left: "a", op: "==", right: "=="},
		{in: "x !~ ~", left: "x", op: "!~", right: "~"},
		{in: "== == b", left: "==", op: "==", right: "b"},
		{in: "a ~ b ~ c", left: "a", op: "~", right: "b ~ c"},
		{in: "{http.request.header.X-Team} != research", left: "{http.request.header.X-Team}", op: "!=", right: "research"},
		{in: "a ==", err: "the operator == needs a value on both sides"},
		{in: "== b", err: "the operator == needs a value on both sides"},
		{in: "a==b", err: "no operator"},
	} {
		c, err := ParseCondition(tc.in)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: got %v, want an error with %q", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case c.left != tc.left || c.op != tc.op || c.right != tc.right:
			t.Errorf("%q: got %q %q %q, want %q %q %q", tc.in, c.left, c.op, c.right, tc.left, tc.op, tc.right)
		}
	}
}

// TestConditionLineBreakIsABlank: a line break is a blank like a space or a
// tab (a JSON config written across lines, a value pasted with a CRLF):
// "a\n== b" is a == b.
func TestConditionLineBreakIsABlank(t *testing.T) {
	for _, s := range []string{"a\n== b", "a ==\r\nb"} {
		c, err := ParseCondition(s)
		if err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		if c.left != "a" || c.op != "==" || c.right != "b" {
			t.Errorf("%q: got %q %q %q", s, c.left, c.op, c.right)
		}
	}
}

// TestConditionKeepsBlanksInValues: a value keeps its inner blanks as
// written, only trimmed around the operator, so a header "red team" can
// match "red team".
func TestConditionKeepsBlanksInValues(t *testing.T) {
	c, err := ParseCondition("{http.request.header.X-Team} == red  team")
	if err != nil {
		t.Fatal(err)
	}
	repl := caddy.NewReplacer()
	repl.Set("http.request.header.X-Team", "red  team")
	if !c.Holds(repl) {
		t.Errorf("%q does not hold for the header %q", c, "red  team")
	}
}

// TestConditionOperatorTokenAsLeftValue: the operator is the first one with
// a value on both sides: in "~ == {http.request.header.X-Sep}" the tilde is
// the left value.
func TestConditionOperatorTokenAsLeftValue(t *testing.T) {
	c, err := ParseCondition("~ == {http.request.header.X-Sep}")
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	if c.String() != "~ == {http.request.header.X-Sep}" {
		t.Errorf("read as %q", c)
	}
}

// TestConditionPlaceholderValuesAreData: a placeholder whose value holds
// operators or glob characters is compared as data, never parsed: a header
// cannot change the condition.
func TestConditionPlaceholderValuesAreData(t *testing.T) {
	c, err := ParseCondition("{http.request.header.X-Team} == research")
	if err != nil {
		t.Fatal(err)
	}
	repl := caddy.NewReplacer()
	repl.Set("http.request.header.X-Team", "x != research")
	if c.Holds(repl) {
		t.Error("a header holding an operator changed the comparison")
	}
	g, _ := ParseCondition("{http.request.header.X-Team} ~ res*")
	repl.Set("http.request.header.X-Team", "*")
	if g.Holds(repl) {
		t.Error("a header holding * matched as a pattern")
	}
}
