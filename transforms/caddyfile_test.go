package transforms_test

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// TestRuleBlockSizesAndDurations: sizes as humans write them and Caddy's
// durations read as the transforms' options want them, positive; a zero,
// a negative, a word or a second argument is an error naming the option.
func TestRuleBlockSizesAndDurations(t *testing.T) {
	read := func(block string) (size int64, dur time.Duration, err error) {
		b := transforms.NewRuleBlock(caddyfile.NewTestDispenser(block))
		for {
			more, err := b.Next()
			if !more || err != nil {
				return size, dur, err
			}
			switch b.Opt {
			case "size":
				size, err = b.Size()
			case "every":
				dur, err = b.Duration()
			}
			if err != nil {
				return size, dur, err
			}
		}
	}
	size, dur, err := read("r {\n\tsize 4MiB\n\tevery 250ms\n}")
	if err != nil || size != 4<<20 || dur != 250*time.Millisecond {
		t.Fatalf("%d %v %v", size, dur, err)
	}
	if size, _, err := read("r {\n\tsize 1000\n}"); err != nil || size != 1000 {
		t.Fatalf("%d %v", size, err)
	}
	for _, bad := range []string{"size 0", "size -1", "size lots", "size 1 2", "size", "every 0s", "every -1s", "every soon", "every 1s 2s"} {
		if _, _, err := read("r {\n\t" + bad + "\n}"); err == nil {
			t.Errorf("%q read", bad)
		}
	}
}
