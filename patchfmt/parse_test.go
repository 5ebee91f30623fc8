package patchfmt

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// grammar is Codex's Lark grammar as a regular expression (plus the
// optional Environment ID line): an independent check of Parse.
var grammar = regexp.MustCompile(`^\*\*\* Begin Patch\n` +
	`(?:\*\*\* Environment ID: .+\n)?` +
	`(?:` +
	`\*\*\* Add File: .+\n(?:\+.*\n)+` +
	`|\*\*\* Delete File: .+\n` +
	`|\*\*\* Update File: .+\n(?:\*\*\* Move to: .+\n)?(?:(?:@@\n|@@ .+\n|[ +-].*\n)+(?:\*\*\* End of File\n)?)?` +
	`)+` +
	`\*\*\* End Patch\n?$`)

// parseCases are valid patches and what Parse makes of them.
var parseCases = []struct {
	name string
	in   string
	want *Patch
}{
	{
		name: "codex-example",
		in: "*** Begin Patch\n*** Add File: hello.txt\n+Hello world\n*** Update File: src/app.py\n*** Move to: src/main.py\n" +
			"@@ def greet():\n-print(\"Hi\")\n+print(\"Hello, world!\")\n*** Delete File: obsolete.txt\n*** End Patch\n",
		want: &Patch{Hunks: []Hunk{
			{Kind: AddFile, Path: "hello.txt", Lines: []string{"Hello world"}},
			{Kind: UpdateFile, Path: "src/app.py", MoveTo: "src/main.py", Chunks: []Chunk{{
				Context: "def greet():",
				Lines:   []Line{{'-', `print("Hi")`}, {'+', `print("Hello, world!")`}},
			}}},
			{Kind: DeleteFile, Path: "obsolete.txt"},
		}},
	},
	{
		name: "end-patch-without-line-feed",
		in:   "*** Begin Patch\n*** Delete File: a\n*** End Patch",
		want: &Patch{Hunks: []Hunk{{Kind: DeleteFile, Path: "a"}}},
	},
	{
		name: "update-forms",
		in: "*** Begin Patch\n*** Update File: a\n ctx\n-x\n+\n@@\n@@ class A\n@@  indented\n \n*** End of File\n" +
			"*** Update File: b\n*** Update File: c\n*** Move to: d\n*** End Patch\n",
		want: &Patch{Hunks: []Hunk{
			{Kind: UpdateFile, Path: "a", EndOfFile: true, Chunks: []Chunk{
				{Unmarked: true, Lines: []Line{{' ', "ctx"}, {'-', "x"}, {'+', ""}}},
				{},
				{Context: "class A"},
				{Context: " indented", Lines: []Line{{' ', ""}}},
			}},
			{Kind: UpdateFile, Path: "b"},
			{Kind: UpdateFile, Path: "c", MoveTo: "d"},
		}},
	},
	{
		name: "environment",
		in:   "*** Begin Patch\n*** Environment ID: dev-1\n*** Add File: a\n+\n+x\n*** End Patch\n",
		want: &Patch{Environment: "dev-1", Hunks: []Hunk{{Kind: AddFile, Path: "a", Lines: []string{"", "x"}}}},
	},
	{
		name: "unicode-and-quotes",
		in:   "*** Begin Patch\n*** Add File: 文档/🦀.md\n+多行 \"q\" 'q' \\ \\n \r\n*** End Patch\n",
		want: &Patch{Hunks: []Hunk{{Kind: AddFile, Path: "文档/🦀.md", Lines: []string{"多行 \"q\" 'q' \\ \\n \r"}}}},
	},
	{
		name: "marker-text-as-content",
		in:   "*** Begin Patch\n*** Add File: a\n+*** End Patch\n*** Update File: b\n ***\n-*** End of File\n+@@\n*** End Patch\n",
		want: &Patch{Hunks: []Hunk{
			{Kind: AddFile, Path: "a", Lines: []string{"*** End Patch"}},
			{Kind: UpdateFile, Path: "b", Chunks: []Chunk{{Unmarked: true, Lines: []Line{{' ', "***"}, {'-', "*** End of File"}, {'+', "@@"}}}}},
		}},
	},
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Parse:\n got %#v\nwant %#v", got, tc.want)
			}
			checkParsed(t, tc.in, got)
		})
	}
}

// checkParsed checks String against an accepted input.
func checkParsed(t testing.TB, in string, p *Patch) {
	t.Helper()
	s := p.String()
	if s != in && s != in+"\n" {
		t.Fatalf("String does not reproduce the input:\n in %q\nout %q", in, s)
	}
	again, err := Parse(s)
	if err != nil {
		t.Fatalf("String's output does not parse: %v", err)
	}
	if !reflect.DeepEqual(again, p) {
		t.Fatalf("String's output parses differently:\n got %#v\nwant %#v", again, p)
	}
	if !grammar.MatchString(in) {
		t.Fatalf("Parse accepted text outside the grammar: %q", in)
	}
}

// parseErrorCases are texts Parse rejects, with the line of the error and
// a part of its message.
var parseErrorCases = []struct {
	name string
	in   string
	line int
	msg  string
}{
	{"empty", "", 1, `expected "*** Begin Patch", found end of input`},
	{"decorated-begin", "*** Begin Patch ***\n", 1, `expected "*** Begin Patch", found "*** Begin Patch ***"`},
	{"crlf", "*** Begin Patch\r\n*** End Patch\r\n", 1, `expected "*** Begin Patch", found "*** Begin Patch\r"`},
	{"begin-without-line-feed", "*** Begin Patch", 1, `expected a line feed after "*** Begin Patch"`},
	{"only-markers", "*** Begin Patch\n*** End Patch\n", 2, `expected a hunk header ("*** Add File: ", "*** Delete File: " or "*** Update File: "), found "*** End Patch"`},
	{"no-end", "*** Begin Patch\n*** Delete File: a\n", 3, `expected a hunk header ("*** Add File: ", "*** Delete File: " or "*** Update File: ") or "*** End Patch", found end of input`},
	{"no-hunk", "*** Begin Patch\n", 2, `expected a hunk header ("*** Add File: ", "*** Delete File: " or "*** Update File: "), found end of input`},
	{"add-without-plus", "*** Begin Patch\n*** Add File: a\nhello\n*** End Patch\n", 3, `expected an added line starting with "+", found "hello"`},
	{"add-at-end", "*** Begin Patch\n*** Add File: a\n", 3, `expected an added line starting with "+", found end of input`},
	{"add-line-without-line-feed", "*** Begin Patch\n*** Add File: a\n+x", 3, `expected a line feed after "+x"`},
	{"empty-path", "*** Begin Patch\n*** Delete File: \n*** End Patch\n", 2, `expected a path after "*** Delete File: ", found "*** Delete File: "`},
	{"empty-move", "*** Begin Patch\n*** Update File: a\n*** Move to: \n*** End Patch\n", 3, `expected a path after "*** Move to: ", found "*** Move to: "`},
	{"no-space-after-colon", "*** Begin Patch\n*** Add File:a\n+x\n*** End Patch\n", 2, `expected a hunk header`},
	{"bad-at-at", "*** Begin Patch\n*** Update File: a\n@@x\n*** End Patch\n", 3, `expected "@@" or "@@ " followed by context, found "@@x"`},
	{"at-at-space-only", "*** Begin Patch\n*** Update File: a\n@@ \n*** End Patch\n", 3, `expected "@@" or "@@ " followed by context, found "@@ "`},
	{"blank-in-update", "*** Begin Patch\n*** Update File: a\n-x\n\n+y\n*** End Patch\n", 4, `expected a hunk header ("*** Add File: ", "*** Delete File: " or "*** Update File: ") or "*** End Patch", found ""`},
	{"eof-without-change", "*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch\n", 3, `expected a change line or "@@" before "*** End of File", found "*** End of File"`},
	{"change-after-eof", "*** Begin Patch\n*** Update File: a\n-x\n*** End of File\n+y\n*** End Patch\n", 5, `found "+y"`},
	{"late-move", "*** Begin Patch\n*** Update File: a\n-x\n*** Move to: b\n*** End Patch\n", 4, `found "*** Move to: b"`},
	{"late-environment", "*** Begin Patch\n*** Delete File: a\n*** Environment ID: e\n*** End Patch\n", 3, `found "*** Environment ID: e"`},
	{"trailing-text", "*** Begin Patch\n*** Delete File: a\n*** End Patch\n\n", 4, `expected end of input after "*** End Patch", found ""`},
	{"long-line-shortened", "*** Begin Patch\n" + strings.Repeat("x", 100) + "\n", 2, `found "` + strings.Repeat("x", 40) + `"...`},
}

func TestParseErrors(t *testing.T) {
	for _, tc := range parseErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.in)
			if err == nil {
				t.Fatalf("Parse accepted %q as %#v", tc.in, p)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ParseError", err)
			}
			if pe.Line != tc.line || !strings.Contains(pe.Msg, tc.msg) {
				t.Fatalf("error %q, want line %d and %q", err, tc.line, tc.msg)
			}
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Fatalf("error %q does not start with its line", err)
			}
			if grammar.MatchString(tc.in) {
				t.Fatalf("the grammar accepts %q", tc.in)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{AddFile: "add", DeleteFile: "delete", UpdateFile: "update", 0: "Kind(0)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

func TestParseErrorMessage(t *testing.T) {
	_, err := Parse("*** Begin Patch\n*** Add File: a\n*** End Patch\n")
	if got, want := err.Error(), `line 3: expected an added line starting with "+", found "*** End Patch"`; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}

func TestParseSharesSlicesSafely(t *testing.T) {
	p, err := Parse("*** Begin Patch\n*** Update File: a\n@@\n-x\n@@\n+y\n*** End Patch\n")
	if err != nil {
		t.Fatal(err)
	}
	c := p.Hunks[0].Chunks
	_ = append(c[0].Lines, Line{'+', "appended"})
	if c[1].Lines[0].Text != "y" {
		t.Fatalf("appending to one chunk's lines overwrote the next chunk")
	}
}
