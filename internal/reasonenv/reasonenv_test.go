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
