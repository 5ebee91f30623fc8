package patchfmt

import (
	"strings"
	"testing"
	"unsafe"
)

// normalizeCases is shared by the table test, the streaming tests and the
// fuzz seed corpus.
var normalizeCases = []struct {
	name, in, want string
}{
	// The fixture of monoize-transforms.md §3.6.
	{
		name: "fixture",
		in:   "*** Begin Patch ***\n*** Add File: x\nhello\n*** End Patch ***",
		want: "*** Begin Patch\n*** Add File: x\n+hello\n*** End Patch\n",
	},

	// Degenerate input.
	{name: "empty", in: "", want: ""},
	{name: "only-newlines", in: "\n\r\n\n", want: ""},
	{name: "only-spaces", in: "   ", want: "   \n"},
	{
		name: "only-markers",
		in:   "*** Begin Patch\n*** End Patch",
		want: "*** Begin Patch\n*** End Patch\n",
	},
	{
		name: "only-markers-decorated",
		in:   "  *** Begin Patch ***  \r\n*** End Patch ***\r\n\r\n",
		want: "*** Begin Patch\n*** End Patch\n",
	},
	{
		name: "one-line-add-without-newline",
		in:   "*** Begin Patch\n*** Add File: a.txt\nhello",
		want: "*** Begin Patch\n*** Add File: a.txt\n+hello\n",
	},
	{
		name: "end-patch-without-newline",
		in:   "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch",
		want: "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch\n",
	},

	// Text that is not a patch only has its line endings normalised.
	{
		name: "not-a-patch",
		in:   "hello\r\n*** Add File: x\n  @@ keep  \nEnd of File\r\r\n\n",
		want: "hello\n*** Add File: x\n  @@ keep  \nEnd of File\n",
	},
	{
		name: "not-a-patch-json",
		in:   `{"input":"*** Begin Patch\n*** End Patch"}`,
		want: `{"input":"*** Begin Patch\n*** End Patch"}` + "\n",
	},
	{
		name: "text-around-patch",
		in:   "Here you go:\n  @@ x \n*** Begin Patch\n*** Delete File: a\n*** End Patch\n  @@ y \nbye",
		want: "Here you go:\n  @@ x \n*** Begin Patch\n*** Delete File: a\n*** End Patch\n  @@ y \nbye\n",
	},

	// Line endings.
	{
		name: "crlf",
		in:   "*** Begin Patch\r\n*** Update File: a\r\n@@\r\n-x\r\n+y\r\n*** End Patch\r\n",
		want: "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** End Patch\n",
	},
	{
		name: "bare-cr-kept-inside-line",
		in:   "*** Begin Patch\n*** Add File: a\n+x\ry\r\r\n*** End Patch\r",
		want: "*** Begin Patch\n*** Add File: a\n+x\ry\n*** End Patch\n",
	},
	{
		name: "trailing-blank-lines",
		in:   "*** Begin Patch\n*** Delete File: a\n*** End Patch\n\n\r\n\n",
		want: "*** Begin Patch\n*** Delete File: a\n*** End Patch\n",
	},

	// The <invoke> wrapper.
	{
		name: "invoke",
		in:   "<invoke name=\"apply_patch\">\n*** Begin Patch\n*** Add File: a\nhi\n*** End Patch\n</invoke>",
		want: "*** Begin Patch\n*** Add File: a\n+hi\n*** End Patch\n",
	},
	{
		name: "invoke-trimmed",
		in:   " \r\n\t<invoke>  \r\n  *** Begin Patch\n*** Add File: a\nhi  \n \t\r\n  </invoke> \n",
		want: "*** Begin Patch\n*** Add File: a\n+hi\n",
	},
	{
		name: "invoke-last-close-wins",
		in:   "<invoke>*** Begin Patch\n*** Add File: a\nx</invoke>y\n</invoke>\nz</invoke>tail",
		want: "*** Begin Patch\n*** Add File: a\n+x</invoke>y\n+</invoke>\n+z\n",
	},
	{
		name: "invoke-unclosed",
		in:   "<invoke>\n*** Begin Patch\n*** Delete File: a\n*** End Patch\n\n",
		want: "*** Begin Patch\n*** Delete File: a\n*** End Patch\n",
	},
	{
		name: "invoke-text-before-patch",
		in:   "<invoke>\nnote\n*** Begin Patch\n*** Delete File: a\n*** End Patch</invoke>",
		want: "note\n*** Begin Patch\n*** Delete File: a\n*** End Patch\n",
	},
	{
		name: "invoke-not-a-patch",
		in:   "<invoke name=\"x\">\r\nhello\r\n</invoke>\r\n*** Begin Patch\r\nraw",
		want: "<invoke name=\"x\">\nhello\n</invoke>\n*** Begin Patch\nraw\n",
	},
	{
		name: "invoke-empty",
		in:   "<invoke></invoke>",
		want: "<invoke></invoke>\n",
	},
	{
		name: "invoke-nested",
		in:   "<invoke><invoke>\n*** Begin Patch\n*** Add File: a\nx\n</invoke></invoke>",
		want: "<invoke><invoke>\n*** Begin Patch\n*** Add File: a\nx\n</invoke></invoke>\n",
	},
	{
		name: "invoke-without-gt",
		in:   "<invoke\n*** Begin Patch\n*** Add File: a\nx",
		want: "<invoke\n*** Begin Patch\n*** Add File: a\n+x\n",
	},
	{
		name: "invoke-prefix-is-enough",
		in:   "<invokes>\n*** Begin Patch ***\n*** End Patch",
		want: "*** Begin Patch\n*** End Patch\n",
	},

	// Marker lines.
	{
		name: "markers-anywhere",
		in:   "*** Begin Patch  \n*** Add File: a\nx\n  *** End Patch *** \n",
		want: "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\n",
	},
	{
		name: "marker-lines-trimmed",
		in:   "*** Begin Patch\n  *** Delete File: a  \n\t*** Update File: b \n\t@@ def f():  \n-x\n+y\n*** Environment ID: e \n*** End Patch\n",
		want: "*** Begin Patch\n*** Delete File: a\n*** Update File: b\n@@ def f():\n-x\n+y\n*** Environment ID: e\n*** End Patch\n",
	},
	{
		name: "second-begin",
		in:   "*** Begin Patch\n*** Add File: a\nx\n*** Begin Patch\ny\n*** End Patch",
		want: "*** Begin Patch\n*** Add File: a\n+x\n*** Begin Patch\ny\n*** End Patch\n",
	},

	// Add File lines.
	{
		name: "add-prefixing",
		in: "*** Begin Patch\n*** Add File: a\nplain\n\n  indented\n+kept\n  +kept too\n-minus\n\\ backslash\n" +
			"\t\n*** End Patch\n",
		want: "*** Begin Patch\n*** Add File: a\n+plain\n+\n+  indented\n+kept\n  +kept too\n-minus\n\\ backslash\n" +
			"+\t\n*** End Patch\n",
	},
	{
		name: "add-ends-at-markers",
		in:   "*** Begin Patch\n*** Add File: a\nx\n@@\ny\n*** Add File: b\nz\n*** Delete File: c\nw\n*** End Patch\n",
		want: "*** Begin Patch\n*** Add File: a\n+x\n@@\ny\n*** Add File: b\n+z\n*** Delete File: c\nw\n*** End Patch\n",
	},
	{
		name: "add-blank-lines-before-end",
		in:   "*** Begin Patch\n*** Add File: a\nx\n\n\n*** End Patch\n",
		want: "*** Begin Patch\n*** Add File: a\n+x\n+\n+\n*** End Patch\n",
	},

	// End of File.
	{
		name: "end-of-file-dropped",
		in: "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** End of File\n*** Update File: b\n@@\n-p\n+q\n" +
			"\t*** end of FILE ***  \n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** Update File: b\n@@\n-p\n+q\n*** End Patch\n",
	},
	{
		name: "end-of-file-keeps-add-mode",
		in:   "*** Begin Patch\n*** Add File: a\nx\n*** End of File\ny\n*** End Patch\n",
		want: "*** Begin Patch\n*** Add File: a\n+x\n+y\n*** End Patch\n",
	},

	// No-op hunks.
	{
		name: "noop-hunk-dropped",
		in:   "*** Begin Patch\n*** Update File: a\n@@ one\n-x\n+x\n@@ two\n-p\n+q\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a\n@@ two\n-p\n+q\n*** End Patch\n",
	},
	{
		name: "noop-multi-line-interleaved",
		in:   "*** Begin Patch\n*** Update File: a\n@@\n+x\n-x\n-y\n-z\n+y\n+z\n@@\n-k\n+K\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a\n@@\n-k\n+K\n*** End Patch\n",
	},
	{
		name: "noop-first-unmarked-hunk",
		in:   "*** Begin Patch\n*** Update File: a\n-x\n+x\n@@ f\n-p\n+q\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a\n@@ f\n-p\n+q\n*** End Patch\n",
	},
	{
		name: "noop-section-dropped",
		in:   "*** Begin Patch\n*** Update File: a\n@@\n-x\n+x\n*** Delete File: b\n*** End Patch\n",
		want: "*** Begin Patch\n*** Delete File: b\n*** End Patch\n",
	},
	{
		name: "noop-only-patch",
		in:   "*** Begin Patch\n*** Update File: a\n@@\n-x\n+x\n*** End Patch\n",
		want: "*** Begin Patch\n*** End Patch\n",
	},
	{
		name: "empty-update-dropped",
		in:   "*** Begin Patch\n*** Update File: a\n*** Update File: a\n@@\n-x\n+y\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** End Patch\n",
	},
	{
		name: "noop-unterminated",
		in:   "*** Begin Patch\n*** Update File: a\n@@\n-x\n+x",
		want: "*** Begin Patch\n",
	},
	{
		name: "hunks-kept",
		in: "*** Begin Patch\n*** Update File: a\n@@ context\n x\n-x\n+x\n@@\n-only deleted\n@@\n+only added\n@@\n-a\n+b\n" +
			"@@ bare context marker\n@@\n-p\n-q\n+p\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a\n@@ context\n x\n-x\n+x\n@@\n-only deleted\n@@\n+only added\n@@\n-a\n+b\n" +
			"@@ bare context marker\n@@\n-p\n-q\n+p\n*** End Patch\n",
	},
	{
		name: "unprefixed-line-is-context",
		in:   "*** Begin Patch\n*** Update File: a\n@@\n-x\nstray\n+x\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a\n@@\n-x\nstray\n+x\n*** End Patch\n",
	},
	{
		name: "context-lines-not-markers",
		in:   "*** Begin Patch\n*** Update File: README.md\n@@\n ***\n @@ x  \n *** End of File\n-old\n+new\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: README.md\n@@\n ***\n @@ x  \n *** End of File\n-old\n+new\n*** End Patch\n",
	},

	// Bug 1: a Move to right after the header belongs to the section.
	{
		name: "bug1-move-with-noop-hunk",
		in:   "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n@@\n-x\n+x\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n*** End Patch\n",
	},
	{
		name: "bug1-move-without-hunks",
		in:   "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n*** Delete File: c\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n*** Delete File: c\n*** End Patch\n",
	},
	{
		name: "bug1-move-with-change",
		in:   "*** Begin Patch\n*** Update File: src/app.py\n\t*** Move to: src/main.py  \n@@ def greet():\n-print(\"Hi\")\n+print(\"Hello, world!\")\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: src/app.py\n*** Move to: src/main.py\n@@ def greet():\n-print(\"Hi\")\n+print(\"Hello, world!\")\n*** End Patch\n",
	},

	{
		name: "bug1-blank-lines-before-move",
		in:   "*** Begin Patch\n*** Update File: a\n\n\\ x\n*** Move to: b\n@@\n-x\n+y\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@\n-x\n+y\n*** End Patch\n",
	},
	{
		name: "neutral-unmarked-hunk-dropped",
		in:   "*** Begin Patch\n*** Update File: a\n\n\\ x\n\n*** Delete File: b\n*** End Patch\n",
		want: "*** Begin Patch\n*** Delete File: b\n*** End Patch\n",
	},
	{
		name: "blank-lines-before-dropped-section",
		in:   "*** Begin Patch\n*** Add File: a\n+x\n*** Delete File: b\n\n\n*** Update File: c\n",
		want: "*** Begin Patch\n*** Add File: a\n+x\n*** Delete File: b\n",
	},

	// Bug 2: consecutive Update sections are separate.
	{
		name: "bug2-noop-then-change",
		in:   "*** Begin Patch\n*** Update File: a\n@@\n-x\n+x\n*** Update File: b\n@@\n-y\n+z\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: b\n@@\n-y\n+z\n*** End Patch\n",
	},
	{
		name: "bug2-change-then-noop",
		in:   "*** Begin Patch\n*** Update File: a\n@@\n-y\n+z\n*** Update File: b\n@@\n-x\n+x\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a\n@@\n-y\n+z\n*** End Patch\n",
	},
	{
		name: "bug2-three-sections",
		in: "*** Begin Patch\n*** Update File: a\n@@\n-1\n+2\n*** Update File: b\n-same\n+same\n*** Update File: c\n" +
			"*** Move to: d\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a\n@@\n-1\n+2\n*** Update File: c\n*** Move to: d\n*** End Patch\n",
	},

	// Bug 3: blank and "\" lines are not context.
	{
		name: "bug3-blank-line-not-context",
		in:   "*** Begin Patch\n*** Update File: a\n@@\n-x\n\n+x\n\n*** Update File: b\n@@\n-p\n+q\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: b\n@@\n-p\n+q\n*** End Patch\n",
	},
	{
		name: "bug3-backslash-not-context",
		in:   "*** Begin Patch\n*** Update File: a\n@@\n-x\n\\ No newline at end of file\n+x\n\\ No newline at end of file\n*** End Patch\n",
		want: "*** Begin Patch\n*** End Patch\n",
	},
	{
		name: "bug3-blank-kept-in-live-hunk",
		in:   "*** Begin Patch\n*** Update File: a\n@@\n-x\n\n+y\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a\n@@\n-x\n\n+y\n*** End Patch\n",
	},
	{
		name: "bug3-blank-only-hunk-kept",
		in:   "*** Begin Patch\n*** Update File: a\n@@ f\n\n@@ g\n-x\n+y\n*** End Patch\n",
		want: "*** Begin Patch\n*** Update File: a\n@@ f\n\n@@ g\n-x\n+y\n*** End Patch\n",
	},

	// Content characters.
	{
		name: "unicode-emoji-quotes-backslashes",
		in: "*** Begin Patch ***\r\n*** Add File: 文档/说明.md\r\n多行 \"quoted\" \\ slash 🦀\r\n'single' `tick` \\n \\\"\r\n" +
			"*** Update File: src/ünï.go\r\n@@ func 你好() {\r\n-\treturn \"🦀\"\r\n+\treturn \"🦀\\n\"\r\n*** End Patch ***",
		want: "*** Begin Patch\n*** Add File: 文档/说明.md\n+多行 \"quoted\" \\ slash 🦀\n+'single' `tick` \\n \\\"\n" +
			"*** Update File: src/ünï.go\n@@ func 你好() {\n-\treturn \"🦀\"\n+\treturn \"🦀\\n\"\n*** End Patch\n",
	},
	{
		name: "unicode-space-is-content",
		in:   "*** Begin Patch\n*** Add File: a\n\u00a0x\u3000\n\u2028\n*** End Patch\n",
		want: "*** Begin Patch\n*** Add File: a\n+\u00a0x\u3000\n+\u2028\n*** End Patch\n",
	},
	{
		name: "invalid-utf8",
		in:   "*** Begin Patch\n*** Add File: a\n\xff\xfe\x00\n*** End Patch\n",
		want: "*** Begin Patch\n*** Add File: a\n+\xff\xfe\x00\n*** End Patch\n",
	},

	// Codex's example from wire-formats.md §5.2, already canonical.
	{
		name: "codex-example",
		in: "*** Begin Patch\n*** Add File: hello.txt\n+Hello world\n*** Update File: src/app.py\n*** Move to: src/main.py\n" +
			"@@ def greet():\n-print(\"Hi\")\n+print(\"Hello, world!\")\n*** Delete File: obsolete.txt\n*** End Patch\n",
		want: "*** Begin Patch\n*** Add File: hello.txt\n+Hello world\n*** Update File: src/app.py\n*** Move to: src/main.py\n" +
			"@@ def greet():\n-print(\"Hi\")\n+print(\"Hello, world!\")\n*** Delete File: obsolete.txt\n*** End Patch\n",
	},
}

func TestNormalize(t *testing.T) {
	for _, tc := range normalizeCases {
		t.Run(tc.name, func(t *testing.T) {
			got := Normalize(tc.in)
			if got != tc.want {
				t.Fatalf("Normalize(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			checkNormalized(t, tc.in, got)
		})
	}
}

// checkNormalized checks the properties every result of Normalize has.
func checkNormalized(t testing.TB, in, got string) {
	t.Helper()
	if again := Normalize(got); again != got {
		t.Fatalf("not idempotent for %q:\nonce  %q\ntwice %q", in, got, again)
	}
	if got != "" && (!strings.HasSuffix(got, "\n") || strings.HasSuffix(got, "\n\n")) {
		t.Fatalf("result of %q does not end in exactly one line feed: %q", in, got)
	}
	if strings.Contains(got, "\r\n") {
		t.Fatalf("result of %q keeps a CRLF: %q", in, got)
	}
	if !strings.Contains(in, beginPatch) {
		if want := lineEndings(in); got != want {
			t.Fatalf("text without a patch changed beyond line endings:\n in %q\ngot %q\nwant %q", in, got, want)
		}
	}
}

// lineEndings is a plain model of the changes Normalize makes to text that
// is not a patch.
func lineEndings(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, "\r")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

func TestNormalizeReturnsCanonicalInput(t *testing.T) {
	in := "*** Begin Patch\n*** Add File: a\n+x\n*** End Patch\n"
	if got := Normalize(in); got != in || !sameString(got, in) {
		t.Fatalf("Normalize copied canonical input: %q", got)
	}
	if padded := in + "\n\n"; Normalize(padded) != in || !sameString(Normalize(padded), padded) {
		t.Fatalf("Normalize copied input with trailing blank lines")
	}
}

func sameString(a, b string) bool {
	return unsafe.StringData(a) == unsafe.StringData(b)
}
