package patchfmt

import (
	"strings"
	"testing"
)

// validCorpus holds canonical patches: valid under the grammar and already
// normalised.
var validCorpus = map[string]string{
	"add-one-line": "*** Begin Patch\n*** Add File: hello.txt\n+Hello\n*** End Patch\n",
	"add-empty-lines": "*** Begin Patch\n*** Add File: notes/empty-lines.md\n+# Title\n+\n+\n+body  \n+\t\n" +
		"*** End Patch\n",
	"delete":      "*** Begin Patch\n*** Delete File: obsolete.txt\n*** End Patch\n",
	"rename-only": "*** Begin Patch\n*** Update File: a.go\n*** Move to: b.go\n*** End Patch\n",
	"codex-example": "*** Begin Patch\n*** Add File: hello.txt\n+Hello world\n*** Update File: src/app.py\n" +
		"*** Move to: src/main.py\n@@ def greet():\n-print(\"Hi\")\n+print(\"Hello, world!\")\n" +
		"*** Delete File: obsolete.txt\n*** End Patch\n",
	"go-edit": "*** Begin Patch\n*** Update File: internal/server/server.go\n@@ func (s *Server) Start() error {\n" +
		" \tif s.started {\n-\t\treturn nil\n+\t\treturn errors.New(\"already started\")\n \t}\n" +
		"@@ func (s *Server) Stop() {\n-\ts.ln.Close()\n+\t_ = s.ln.Close()\n*** End Patch\n",
	"nested-context": "*** Begin Patch\n*** Update File: pkg/a.py\n@@ class Foo:\n@@     def bar(self):\n" +
		"-        return 1\n+        return 2\n*** End Patch\n",
	"unmarked-first-chunk": "*** Begin Patch\n*** Update File: Makefile\n all: build\n-\tgo build ./...\n" +
		"+\tgo build -trimpath ./...\n*** End Patch\n",
	"markdown-rules": "*** Begin Patch\n*** Update File: README.md\n@@\n # Title\n ***\n-old text\n+new text\n" +
		" @@ not a marker\n*** End Patch\n",
	"unicode": "*** Begin Patch\n*** Add File: docs/说明.md\n+你好，世界 🦀\n+\"quoted\" 'single' `tick`\n" +
		"+back\\slash \\n \\\" \\\\\n*** Update File: src/ünï.rs\n@@ fn main() {\n-    println!(\"🦀\");\n" +
		"+    println!(\"🦀 {}\", \"\\u{1F980}\");\n*** End Patch\n",
	"many-hunks": "*** Begin Patch\n*** Add File: a\n+1\n*** Update File: b\n@@\n-2\n+3\n*** Delete File: c\n" +
		"*** Update File: d\n*** Move to: e\n@@ x\n y\n-z\n*** Add File: f\n+\n*** End Patch\n",
	"environment": "*** Begin Patch\n*** Environment ID: sandbox-2\n*** Delete File: tmp.log\n*** End Patch\n",
	"pure-additions": "*** Begin Patch\n*** Update File: CHANGELOG.md\n@@ ## Unreleased\n+- Fixed the thing.\n" +
		"+- Fixed another thing.\n*** End Patch\n",
}

func TestValidCorpusRoundTrip(t *testing.T) {
	for name, p := range validCorpus {
		t.Run(name, func(t *testing.T) {
			if got := Normalize(p); got != p {
				t.Fatalf("Normalize changed a canonical patch:\n in %q\nout %q", p, got)
			}
			parsed, err := Parse(p)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if s := parsed.String(); s != p {
				t.Fatalf("String:\n got %q\nwant %q", s, p)
			}
			checkParsed(t, p, parsed)
			checkStreaming(t, p)
		})
	}
}

// TestRepairs feeds patches a model might write through Normalize and
// checks that the result is the canonical patch Codex would accept.
func TestRepairs(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"decorated-markers-crlf", "*** Begin Patch ***\r\n*** Delete File: obsolete.txt\r\n*** End Patch ***\r\n", "delete"},
		{"add-without-plus", "*** Begin Patch\n*** Add File: hello.txt\nHello\n*** End Patch", "add-one-line"},
		{
			"add-blank-and-indented",
			"*** Begin Patch\n*** Add File: notes/empty-lines.md\n# Title\n\n\nbody  \n\t\n*** End Patch\n\n",
			"add-empty-lines",
		},
		{
			"wrapped",
			"<invoke name=\"apply_patch\">\n*** Begin Patch\n*** Update File: a.go\n*** Move to: b.go\n*** End Patch\n</invoke>",
			"rename-only",
		},
		{
			"rename-with-noop-hunk",
			"*** Begin Patch\n*** Update File: a.go\n*** Move to: b.go\n@@ package a\n-import \"x\"\n+import \"x\"\n*** End Patch",
			"rename-only",
		},
		{
			"noop-sections-and-end-of-file",
			"*** Begin Patch\n*** Update File: README.md\n@@\n-same\n+same\n*** Update File: README.md\n@@\n # Title\n ***\n" +
				"-old text\n+new text\n @@ not a marker\n*** End of File\n*** Update File: other\n-a\n\n+a\n*** End Patch\n",
			"markdown-rules",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := validCorpus[tc.want]
			got := Normalize(tc.in)
			if got != want {
				t.Fatalf("Normalize:\n got %q\nwant %q", got, want)
			}
			if _, err := Parse(got); err != nil {
				t.Fatalf("Parse(Normalize(in)): %v", err)
			}
			checkStreaming(t, tc.in)
		})
	}
}

// TestValidStaysValid checks that Normalize keeps valid, non-canonical
// patches valid.
func TestValidStaysValid(t *testing.T) {
	for name, p := range validCorpus {
		// Add what Normalize removes: End of File markers, CRLF, trailing
		// blank lines.
		in := strings.ReplaceAll(p, "\n*** Update File", "\n*** End of File\n*** Update File")
		in = strings.ReplaceAll(in, "\n", "\r\n") + "\r\n"
		got := Normalize(in)
		if _, err := Parse(got); err != nil {
			t.Errorf("%s: Parse(Normalize(p)): %v\n%q", name, err, got)
		}
	}
}
