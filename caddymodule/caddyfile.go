package caddymodule

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("llm_transform", parseGlobalOption)
	httpcaddyfile.RegisterHandlerDirective("llm_transform", parseCaddyfile)
	// After encode: auth, rewrites and request_body limits have run, encode
	// compresses what we emit, and we still wrap handle/route blocks that
	// hold the reverse_proxy.
	httpcaddyfile.RegisterDirectiveOrder("llm_transform", httpcaddyfile.After, "encode")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var m Handler
	err := m.UnmarshalCaddyfile(h.Dispenser)
	return &m, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	llm_transform [<matcher>] {
//		protocol        auto|responses|chat_completions|messages
//		max_body_size   <size>
//		max_call_buffer <size>
//		max_json_depth  <levels>
//		max_rounds      <n>
//		max_round_time  <duration>
//		explain         [true|false]
//		rule <transform> [request|response] {
//			enabled true|false
//			models  <glob>...
//			<the transform's own options>
//		}
//	}
//
// A rule without a phase acts on requests and responses. Each transform
// documents its own options, e.g. `names apply_patch exec` for
// field_custom_tools_to_function; options may open blocks of their own.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		if err := once(d, seen, "protocol", "max_body_size", "max_call_buffer", "max_json_depth", "max_rounds", "max_round_time", "explain"); err != nil {
			return err
		}
		switch d.Val() {
		case "protocol":
			if !d.NextArg() {
				return d.ArgErr()
			}
			h.Protocol = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
		case "max_body_size", "max_call_buffer":
			opt := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := humanize.ParseBytes(d.Val())
			if err != nil || n > math.MaxInt64 {
				return d.Errf("%s: invalid size %q", opt, d.Val())
			}
			if n == 0 {
				// 0 in JSON means the default; written out here it is
				// more likely a mistake than a wish for the default.
				return d.Errf("%s must be positive, got %q", opt, d.Val())
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			if opt == "max_body_size" {
				h.MaxBodySize = int64(n)
			} else {
				h.MaxCallBuffer = int64(n)
			}
		case "max_json_depth":
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(d.Val())
			if err != nil || n <= 0 {
				return d.Errf("max_json_depth: %q is not a positive whole number", d.Val())
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			h.MaxJSONDepth = n
		case "max_rounds":
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(d.Val())
			if err != nil || n < -1 {
				return d.Errf("max_rounds: %q is not a whole number (-1 allows none)", d.Val())
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			h.MaxRounds = n
		case "max_round_time":
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil || dur <= 0 {
				return d.Errf("max_round_time: %q is not a positive duration", d.Val())
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			h.MaxRoundTime = caddy.Duration(dur)
		case "explain":
			v, err := optionalBool(d)
			if err != nil {
				return err
			}
			h.Explain = v
		case "rule":
			rc, err := unmarshalRule(d, len(h.Rules))
			if err != nil {
				return err
			}
			h.Rules = append(h.Rules, rc)
		default:
			return d.Errf("unrecognized llm_transform option %q", d.Val())
		}
	}
	return nil
}

// once refuses a second occurrence of the options named, which would
// otherwise silently replace the first.
func once(d *caddyfile.Dispenser, seen map[string]bool, options ...string) error {
	opt := d.Val()
	if !slices.Contains(options, opt) {
		return nil
	}
	if seen[opt] {
		return d.Errf("%s already specified", opt)
	}
	seen[opt] = true
	return nil
}

// minKeyLen is the shortest api_key the Caddyfile accepts.
const minKeyLen = 32

// optionalBool reads `<option> [true|false]`; the bare option means true.
func optionalBool(d *caddyfile.Dispenser) (bool, error) {
	opt := d.Val()
	args := d.RemainingArgs()
	switch len(args) {
	case 0:
		return true, nil
	case 1:
		v, err := strconv.ParseBool(args[0])
		if err != nil {
			return false, d.Errf("%s: %v", opt, err)
		}
		return v, nil
	}
	return false, d.ArgErr()
}

func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	if existing != nil {
		return nil, d.Err("llm_transform: the global option may appear only once")
	}
	var app App
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "llm_transform", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile sets up the app from the llm_transform global option.
// Syntax:
//
//	{
//		llm_transform {
//			key_sources <source>...
//			rule <transform> [request|response] {
//				...
//			}
//			api_key <key> {
//				rule <transform> [request|response] {
//					...
//				}
//			}
//		}
//	}
//
// Rules have the same syntax as in the handler directive. Global rules run
// after a handler's own rules; an api_key's rules run after the global ones
// on requests carrying that key. The key may be a placeholder such as
// {env.TEAM_A_KEY} or {file./run/secrets/team_a}; it is resolved when the
// Caddyfile is adapted and only its SHA-256 goes into the JSON config.
// key_sources are "authorization" (the token of `Authorization: Bearer`)
// or header names; default: authorization x-api-key.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // option name
	if d.NextArg() {
		return d.ArgErr()
	}
	repl := caddy.NewReplacer()
	seen := map[string]bool{}
	for d.NextBlock(0) {
		if err := once(d, seen, "key_sources"); err != nil {
			return err
		}
		switch d.Val() {
		case "key_sources":
			a.KeySources = d.RemainingArgs()
			if len(a.KeySources) == 0 {
				return d.ArgErr()
			}
		case "rule":
			rc, err := unmarshalRule(d, len(a.Rules))
			if err != nil {
				return fmt.Errorf("global %w", err)
			}
			a.Rules = append(a.Rules, rc)
		case "api_key":
			index := len(a.APIKeys)
			if !d.NextArg() {
				return d.ArgErr()
			}
			// Errors below name the key by its position only: the token may
			// be the key itself.
			key := repl.ReplaceKnown(d.Val(), "")
			if key == "" {
				return d.Errf("api_key %d: the key is empty (is its environment variable set?)", index)
			}
			if len(key) < minKeyLen {
				// Its unsalted SHA-256 is in the JSON config, which the
				// admin endpoint serves: a short key falls to a brute force.
				return d.Errf("api_key %d: the key is shorter than %d characters; use a long random key", index, minKeyLen)
			}
			if d.NextArg() {
				return d.Errf("api_key %d: expected one key and a block", index)
			}
			k := APIKeyRules{KeySHA256: HashAPIKey(key)}
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				if d.Val() != "rule" {
					return d.Errf("api_key %d: unrecognized option %q", index, d.Val())
				}
				rc, err := unmarshalRule(d, len(k.Rules))
				if err != nil {
					return fmt.Errorf("api_key %d %w", index, err)
				}
				k.Rules = append(k.Rules, rc)
			}
			a.APIKeys = append(a.APIKeys, k)
		default:
			return d.Errf("unrecognized llm_transform global option %q", d.Val())
		}
	}
	return nil
}

// unmarshalRule parses one `rule <transform> [request|response] { ... }`
// block, with the dispenser on the `rule` token; index names the rule in
// errors. enabled and models belong to every rule; every other line of the
// block is the transform's own, and goes to the transform module's
// UnmarshalCaddyfile as `<transform> { <its lines> }`, as Caddy hands
// blocks to sub-modules.
func unmarshalRule(d *caddyfile.Dispenser, index int) (transforms.RuleConfig, error) {
	var rc transforms.RuleConfig
	if !d.NextArg() {
		return rc, d.ArgErr()
	}
	rc.Transform = d.Val()
	head := d.Token()
	name := "rule " + strconv.Itoa(index) + " (" + rc.Transform + ")"
	id := string(transforms.ModuleID(rc.Transform))
	if _, err := caddy.GetModule(id); err != nil {
		return rc, d.Errf("%s: unknown transform %q (known: %s)", name, rc.Transform, strings.Join(transforms.Names(), ", "))
	}
	if d.NextArg() {
		rc.Phase = d.Val()
		if _, err := transforms.ParsePhase(rc.Phase); err != nil {
			return rc, d.Errf("%s: %v", name, err)
		}
		if d.NextArg() {
			return rc, d.ArgErr()
		}
	}
	own := caddyfile.Segment{head}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "enabled":
			if rc.Enabled != nil {
				return rc, d.Errf("%s: enabled already specified", name)
			}
			var arg string
			if !d.Args(&arg) || d.NextArg() {
				return rc, d.Errf("%s: enabled takes true or false", name)
			}
			v, err := strconv.ParseBool(arg)
			if err != nil {
				return rc, d.Errf("%s: enabled: %v", name, err)
			}
			rc.Enabled = &v
		case "models":
			if rc.Models != nil {
				return rc, d.Errf("%s: models already specified", name)
			}
			if rc.Models = d.RemainingArgs(); len(rc.Models) == 0 {
				return rc, d.Errf("%s: models needs at least one glob", name)
			}
		default:
			if len(own) == 1 {
				open := head
				open.Text = "{"
				own = append(own, open)
			}
			own = append(own, d.NextSegment()...)
		}
	}
	if len(own) == 1 {
		return rc, nil
	}
	end := head
	end.Text = "}"
	end.Line = own[len(own)-1].Line + 1
	own = append(own, end)
	sub := caddyfile.NewDispenser(own)
	sub.Next() // UnmarshalModule takes the segment from the current token
	mod, err := caddyfile.UnmarshalModule(sub, id)
	if err != nil {
		return rc, fmt.Errorf("%s: %w", name, err)
	}
	rc.Config = caddyconfig.JSON(mod, nil)
	return rc, nil
}

// Interface guards
var (
	_ caddyfile.Unmarshaler = (*Handler)(nil)
	_ caddyfile.Unmarshaler = (*App)(nil)
)
