package caddymodule

import (
	"encoding/json"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

func init() {
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
//		protocol        auto|responses|chat_completions
//		max_body_size   <size>
//		max_call_buffer <size>
//		rule <transform> [request|response] {
//			enabled true|false
//			models  <glob>...
//			<option> <values>...
//		}
//	}
//
// A rule without a phase acts on requests and responses. Options are the
// transform's JSON config keys, e.g. `names apply_patch exec`.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
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
			if err != nil {
				return d.Errf("%s: %v", opt, err)
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			if opt == "max_body_size" {
				h.MaxBodySize = int64(n)
			} else {
				h.MaxCallBuffer = int64(n)
			}
		case "rule":
			rc, err := UnmarshalRule(d, len(h.Rules))
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

// UnmarshalRule parses one `rule <transform> [phase] { ... }` block, with
// the dispenser on the `rule` token. index names the rule in errors. The
// global options block uses it too.
func UnmarshalRule(d *caddyfile.Dispenser, index int) (transforms.RuleConfig, error) {
	var rc transforms.RuleConfig
	if !d.NextArg() {
		return rc, d.ArgErr()
	}
	rc.Transform = d.Val()
	name := "rule " + strconv.Itoa(index) + " (" + rc.Transform + ")"
	def, ok := transforms.Lookup(rc.Transform)
	if !ok {
		return rc, d.Errf("%s: unknown transform %q", name, rc.Transform)
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
	opts := map[string]any{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		key := d.Val()
		args := d.RemainingArgs()
		switch key {
		case "enabled":
			if len(args) != 1 {
				return rc, d.Errf("%s: enabled takes true or false", name)
			}
			v, err := strconv.ParseBool(args[0])
			if err != nil {
				return rc, d.Errf("%s: enabled: %v", name, err)
			}
			rc.Enabled = &v
			continue
		case "models":
			if len(args) == 0 {
				return rc, d.Errf("%s: models needs at least one glob", name)
			}
			rc.Models = append(rc.Models, args...)
			continue
		}
		kind, ok := def.Options[key]
		if !ok {
			return rc, d.Errf("%s: unknown option %q", name, key)
		}
		v, err := optionValue(kind, args)
		if err != nil {
			return rc, d.Errf("%s: %s: %v", name, key, err)
		}
		opts[key] = v
	}
	if len(opts) > 0 {
		raw, err := json.Marshal(opts)
		if err != nil {
			return rc, err
		}
		rc.Config = raw
	}
	return rc, nil
}

func optionValue(kind transforms.OptionKind, args []string) (any, error) {
	switch kind {
	case transforms.OptionStrings:
		if len(args) == 0 {
			return nil, errArgs("at least one value")
		}
		return args, nil
	case transforms.OptionString:
		if len(args) != 1 {
			return nil, errArgs("exactly one value")
		}
		return args[0], nil
	case transforms.OptionBool:
		if len(args) != 1 {
			return nil, errArgs("true or false")
		}
		return strconv.ParseBool(args[0])
	case transforms.OptionInt:
		if len(args) != 1 {
			return nil, errArgs("one integer")
		}
		return strconv.Atoi(args[0])
	}
	return nil, errArgs("a known option kind")
}

type errArgs string

func (e errArgs) Error() string { return "expected " + string(e) }

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)
