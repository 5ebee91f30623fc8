package reasonenv

import (
	"strings"
	"testing"
)

func TestSealedTextOpensAsItWas(t *testing.T) {
	text := "Let me think: \"quotes\", back\\slashes, ünïcode and\nnew lines."
	env := SealText("deepseek", []byte(text))
	if !strings.HasPrefix(env, Prefix) || strings.ContainsAny(env, "+/=") {
		t.Fatalf("not a base64url envelope: %s", env)
	}
	p, got, ok := Open(env, 1<<20)
	if !ok || p != "deepseek" || got != text {
		t.Fatalf("opened %q %q %v", p, got, ok)
	}
	// Escaped blocks seal the same text.
	if env2 := Seal("deepseek", [][]byte{[]byte(`Let me think: \"quotes\", back\\slashes, `), []byte(`ünïcode and\nnew lines.`)}); env2 != env {
		t.Errorf("blocks sealed another envelope:\n%s\n%s", env2, env)
	}
	// Past the limit, and anything not ours, does not open.
	for _, bad := range []string{"", "llmt1.abc", "ErUBCkgIAhABGAIiQ...", Prefix + "!!!", env[:len(env)-5]} {
		if _, _, ok := Open(bad, 1<<20); ok {
			t.Errorf("opened %q", bad)
		}
	}
	if _, _, ok := Open(env, 10); ok {
		t.Errorf("opened past the limit")
	}
}

// TestCutMarkAndMax: the cut mark holds no text (Open refuses it) and is
// the bytes both bridges write; max_reasoning's 0 is the default.
func TestCutMarkAndMax(t *testing.T) {
	if got := Cut("deepseek"); got != "llmt1.eyJwIjoiZGVlcHNlZWsiLCJjdXQiOnRydWV9" {
		t.Errorf("cut mark %s", got)
	}
	if _, _, ok := Open(Cut("deepseek"), 1<<20); ok {
		t.Error("a cut mark opened")
	}
	if n, err := Max(0); n != DefaultMax || err != nil {
		t.Errorf("%d %v", n, err)
	}
	if n, err := Max(1000); n != 1000 || err != nil {
		t.Errorf("%d %v", n, err)
	}
	if _, err := Max(-1); err == nil {
		t.Error("a negative max_reasoning taken")
	}
}
