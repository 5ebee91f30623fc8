package transforms

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/dustin/go-humanize"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// RuleBlock reads the options of a transform's rule block one line at a
// time, the same way for every transform: an option given twice is an
// error naming it (unless it is one of the repeatable ones), and each
// option's arguments are checked by the helpers below.
type RuleBlock struct {
	d          *caddyfile.Dispenser
	repeatable []string
	seen       map[string]bool
	// Opt is the option of the current line, Args its arguments.
	Opt  string
	Args []string
}

// NewRuleBlock starts reading a transform's rule block, for its
// UnmarshalCaddyfile; repeatable lists the options that may be given more
// than once. It consumes the transform's name.
func NewRuleBlock(d *caddyfile.Dispenser, repeatable ...string) *RuleBlock {
	d.Next() // the transform's name
	return &RuleBlock{d: d, repeatable: repeatable, seen: map[string]bool{}}
}

// Next moves to the block's next line.
func (b *RuleBlock) Next() (bool, error) {
	if !b.d.NextBlock(0) {
		return false, nil
	}
	b.Opt = b.d.Val()
	if b.seen[b.Opt] && !slices.Contains(b.repeatable, b.Opt) {
		return false, b.d.Errf("%s already specified", b.Opt)
	}
	b.seen[b.Opt] = true
	b.Args = b.d.RemainingArgs()
	return true, nil
}

// One sets dst to the line's single argument.
func (b *RuleBlock) One(dst *string) error {
	if len(b.Args) != 1 {
		return b.d.ArgErr()
	}
	*dst = b.Args[0]
	return nil
}

// List sets dst to the line's arguments, of which there must be some.
func (b *RuleBlock) List(dst *[]string) error {
	if len(b.Args) == 0 {
		return b.d.ArgErr()
	}
	*dst = b.Args
	return nil
}

// Number reads the line's single argument as a whole number.
func (b *RuleBlock) Number() (int, error) {
	if len(b.Args) != 1 {
		return 0, b.d.ArgErr()
	}
	n, err := strconv.Atoi(b.Args[0])
	if err != nil || n < 0 {
		return 0, b.d.Errf("%s: %q is not a whole number", b.Opt, b.Args[0])
	}
	return n, nil
}

// Size reads the line's single argument as a positive size in bytes,
// written as humans do: 4MiB, 512KB, 1000.
func (b *RuleBlock) Size() (int64, error) {
	if len(b.Args) != 1 {
		return 0, b.d.ArgErr()
	}
	n, err := humanize.ParseBytes(b.Args[0])
	if err != nil || n == 0 || n > math.MaxInt64 {
		// (0 would mean the default in JSON; written out it is a
		// mistake more likely than a wish for the default.)
		return 0, b.d.Errf("%s: %q is not a positive size", b.Opt, b.Args[0])
	}
	return int64(n), nil
}

// Duration reads the line's single argument as a positive duration, as
// Caddy writes them: 10s, 250ms, 1d.
func (b *RuleBlock) Duration() (time.Duration, error) {
	if len(b.Args) != 1 {
		return 0, b.d.ArgErr()
	}
	d, err := caddy.ParseDuration(b.Args[0])
	if err != nil || d <= 0 {
		return 0, b.d.Errf("%s: %q is not a positive duration", b.Opt, b.Args[0])
	}
	return d, nil
}

// Flag sets dst from a switch: no argument is true, else true or false.
func (b *RuleBlock) Flag(dst **bool) error {
	v := true
	switch {
	case len(b.Args) == 0:
	case len(b.Args) == 1 && (b.Args[0] == "true" || b.Args[0] == "false"):
		v = b.Args[0] == "true"
	default:
		return b.d.Errf("%s: want true or false", b.Opt)
	}
	*dst = &v
	return nil
}

// Unknown is the error for an option the transform does not have.
func (b *RuleBlock) Unknown() error { return b.d.Errf("unrecognized option %q", b.Opt) }
