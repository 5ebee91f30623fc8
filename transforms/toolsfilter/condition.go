package toolsfilter

import (
	"fmt"
	"slices"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/caddyserver/caddy/v2"
)

// Condition is a test on the request written with Caddy placeholders:
// "{http.request.header.X-Team} == research". Both sides are expanded by
// the request's replacer (an unknown placeholder is empty), then compared
// with one operator:
//
//	==  equal
//	!=  not equal
//	~   the left side matches the right side as a glob (* any run, ? one
//	    character, anchored at both ends)
//	!~  it does not
//
// It is the same expression in a Caddyfile (three or more tokens) and in
// JSON (one string).
type Condition struct {
	left, op, right string
}

// conditionOps are the operators, two-character ones first so "!=" is
// not read as "!" followed by "=".
var conditionOps = []string{"==", "!=", "!~", "~"}

// ParseCondition reads "left op right", the operator standing apart with
// blanks on both sides.
func ParseCondition(s string) (Condition, error) {
	// The operator is the first token after a value that is one; the
	// values keep their inner blanks as written ("red  team").
	sawOp := ""
	for i := 0; i < len(s); {
		for i < len(s) && isBlank(s[i]) {
			i++
		}
		j := i
		for j < len(s) && !isBlank(s[j]) {
			j++
		}
		tok := s[i:j]
		for _, op := range conditionOps {
			if tok != op {
				continue
			}
			left, right := strings.TrimSpace(s[:i]), strings.TrimSpace(s[j:])
			if left == "" {
				break // a value that reads like an operator
			}
			if right == "" {
				return Condition{}, fmt.Errorf("condition %q: the operator %s needs a value on both sides", s, op)
			}
			return Condition{left: left, op: op, right: right}, nil
		}
		if sawOp == "" && slices.Contains(conditionOps, tok) {
			sawOp = tok
		}
		i = j
	}
	if sawOp != "" {
		return Condition{}, fmt.Errorf("condition %q: the operator %s needs a value on both sides", s, sawOp)
	}
	return Condition{}, fmt.Errorf("condition %q: no operator (want <value> ==, !=, ~ or !~ <value>, apart with spaces)", s)
}

// String gives the condition back as written, for messages.
func (c Condition) String() string { return c.left + " " + c.op + " " + c.right }

// Holds evaluates the condition for one request.
func (c Condition) Holds(repl *caddy.Replacer) bool {
	if repl == nil {
		repl = caddy.NewReplacer()
	}
	l, r := repl.ReplaceAll(c.left, ""), repl.ReplaceAll(c.right, "")
	switch c.op {
	case "==":
		return l == r
	case "!=":
		return l != r
	case "~":
		return transforms.GlobMatch(r, l)
	default: // "!~"
		return !transforms.GlobMatch(r, l)
	}
}

// parseConditions compiles a rule's when list.
func parseConditions(list []string) ([]Condition, error) {
	out := make([]Condition, 0, len(list))
	for _, s := range list {
		c, err := ParseCondition(s)
		if err != nil {
			return nil, fmt.Errorf("when: %v", err)
		}
		out = append(out, c)
	}
	return out, nil
}

// allHold reports whether every condition holds for the exchange's
// request; no condition always holds.
func allHold(x *transforms.Exchange, conds []Condition) bool {
	for _, c := range conds {
		if !c.Holds(x.Replacer) {
			return false
		}
	}
	return true
}

// isBlank is a character that separates a condition's tokens.
func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
