package transforms

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Rule is a compiled RuleConfig: a provisioned transform module bound to a
// phase, a scope and model globs. Rules are immutable and shared by every
// request of a config.
type Rule struct {
	name      string
	transform string
	phase     Phase
	scope     Scope
	models    []string
	req       RequestRewriter
	resp      ResponseRewriter
	bridge    ProtocolBridge
	hits      atomic.Uint64
}

// Name identifies the rule in messages, e.g. `rule 2 (field_custom_tools_to_function)`.
func (r *Rule) Name() string { return r.name }

// TransformID is the name of the rule's transform.
func (r *Rule) TransformID() string { return r.transform }

// Phase is the rule's effective phase.
func (r *Rule) Phase() Phase { return r.phase }

// Scope is where the rule was configured.
func (r *Rule) Scope() Scope { return r.scope }

// Models is the rule's model globs (nil: every model).
func (r *Rule) Models() []string { return r.models }

// Hits counts the requests the rule has applied to.
func (r *Rule) Hits() uint64 { return r.hits.Load() }

func (r *Rule) matches(model string) bool {
	if len(r.models) == 0 {
		return true
	}
	for _, g := range r.models {
		if GlobMatch(g, model) {
			return true
		}
	}
	return false
}

// GlobMatch reports whether the whole of s matches pattern, where `*` matches
// any run of characters and `?` exactly one; every other character is
// literal, so "openai/gpt-*" works as written (path.Match would stop `*` at
// the slash). It backtracks only to the last star, which keeps it linear in
// practice and never exponential.
func GlobMatch(pattern, s string) bool {
	var p, i, starP, starI = 0, 0, -1, 0
	for i < len(s) {
		if p < len(pattern) {
			switch c := pattern[p]; c {
			case '*':
				starP, starI = p, i
				p++
				continue
			case '?':
				_, n := utf8.DecodeRuneInString(s[i:])
				p, i = p+1, i+n
				continue
			default:
				if s[i] == c {
					p, i = p+1, i+1
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[starI:])
		starI += n
		p, i = starP+1, starI
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// ModuleID returns the Caddy module ID of the transform called name.
func ModuleID(name string) caddy.ModuleID { return caddy.ModuleID(Namespace + "." + name) }

// Names lists the transforms registered as Caddy modules, sorted.
func Names() []string {
	mods := caddy.GetModules(Namespace)
	names := make([]string, 0, len(mods))
	for _, m := range mods {
		names = append(names, m.ID.Name())
	}
	sort.Strings(names)
	return names
}

// Compile loads the rules of one scope with Caddy's module loader, so each
// transform's config is decoded strictly, provisioned and validated in ctx,
// and cleaned up with it. Disabled rules are loaded and checked too, then
// left out: a typo must not wait until someone enables the rule. prefix
// names the location in error messages (e.g. "global" or "api_key 3f2a9c…").
func Compile(ctx caddy.Context, cfgs []RuleConfig, scope Scope, prefix string) ([]*Rule, error) {
	rules := make([]*Rule, 0, len(cfgs))
	for i, c := range cfgs {
		name := fmt.Sprintf("rule %d (%s)", i, c.Transform)
		if prefix != "" {
			name = prefix + " " + name
		}
		r, err := compileRule(ctx, c, scope, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		if c.Enabled == nil || *c.Enabled {
			rules = append(rules, r)
		}
	}
	return rules, nil
}

func compileRule(ctx caddy.Context, c RuleConfig, scope Scope, name string) (*Rule, error) {
	if c.Transform == "" {
		return nil, errors.New("no transform named")
	}
	id := string(ModuleID(c.Transform))
	if _, err := caddy.GetModule(id); err != nil {
		return nil, fmt.Errorf("unknown transform %q (known: %s)", c.Transform, strings.Join(Names(), ", "))
	}
	mod, err := ctx.LoadModuleByID(id, c.Config)
	if err != nil {
		return nil, err
	}
	r := &Rule{name: name, transform: c.Transform, scope: scope, models: c.Models}
	r.req, _ = mod.(RequestRewriter)
	r.resp, _ = mod.(ResponseRewriter)
	r.bridge, _ = mod.(ProtocolBridge)
	var supported Phase
	if r.req != nil {
		supported |= PhaseRequest
	}
	if r.resp != nil {
		supported |= PhaseResponse
	}
	if supported == 0 {
		return nil, fmt.Errorf("module %s is neither a request nor a response rewriter", id)
	}
	if sl, ok := mod.(ScopeLimiter); ok && sl.Scopes()&scope == 0 {
		return nil, fmt.Errorf("transform does not support the %s scope", scope)
	}
	ph, err := ParsePhase(c.Phase)
	if err != nil {
		return nil, err
	}
	if ph&supported != ph {
		if c.Phase != "" {
			return nil, fmt.Errorf("transform has no %s phase", ph)
		}
		ph &= supported
	}
	if pp, ok := mod.(PairedPhases); ok && ph != PhaseBoth {
		return nil, fmt.Errorf("phase %s: the transform needs both phases: %s", ph, pp.PairedPhases())
	}
	if r.bridge != nil && ph != PhaseBoth {
		return nil, fmt.Errorf("phase %s: a protocol bridge needs both phases, or the client gets answers in the upstream's protocol", ph)
	}
	r.phase = ph
	for _, g := range c.Models {
		if g == "" {
			return nil, errors.New("empty model glob")
		}
	}
	return r, nil
}

// Chain is an ordered, immutable list of compiled rules: the provider rules,
// then the global ones, then those of the caller's key.
type Chain struct {
	rules []*Rule
}

// OrderRequirer is implemented by transforms that must stand on the
// client's side of other transforms wherever both are in one chain
// (tools_defer before tools_plan): such a chain fails to load.
type OrderRequirer interface {
	// Precedes names the transforms a rule of this one must come before,
	// and why.
	Precedes() (transforms []string, why string)
}

// CheckOrder returns the error of the first two rules of the chain that
// stand in an order one of them forbids (OrderRequirer), nil when none
// does. The handler checks every chain it builds when it loads.
func (c *Chain) CheckOrder() error {
	for i, r := range c.rules {
		var t any = r.req
		if t == nil {
			t = r.resp
		}
		or, ok := t.(OrderRequirer)
		if !ok {
			continue
		}
		names, why := or.Precedes()
		for _, e := range c.rules[:i] {
			if slices.Contains(names, e.transform) {
				return fmt.Errorf("%s must come before %s in the chain (%s scope before %s scope, rules in order): %s", r.name, e.name, e.scope, r.scope, why)
			}
		}
	}
	return nil
}

// NewChain concatenates rule lists in the order given.
func NewChain(lists ...[]*Rule) *Chain {
	c := &Chain{}
	for _, l := range lists {
		c.rules = append(c.rules, l...)
	}
	return c
}

// MatchesModels reports whether any rule of the chain is limited to some
// models, i.e. whether Begin needs the request's model at all: finding the
// last "model" of a large body is a pass over it, worth skipping.
func (c *Chain) MatchesModels() bool {
	if c == nil {
		return false
	}
	for _, r := range c.rules {
		if len(r.models) > 0 {
			return true
		}
	}
	return false
}

// Rules returns the chain's rules in request order.
func (c *Chain) Rules() []*Rule { return c.rules }

// Empty reports whether the chain has no rules at all.
func (c *Chain) Empty() bool { return c == nil || len(c.rules) == 0 }

// RequestModel returns the model a request body names, for matching rules:
// the last top-level "model" member, as the upstream's JSON parser reads a
// body that repeats the key, so rules match the model that is served. A
// body that is not a JSON object names none.
func RequestModel(body []byte) string {
	s, _ := jsonspan.StringValue(body, jsonspan.LastMember(body, "model"))
	return s
}
