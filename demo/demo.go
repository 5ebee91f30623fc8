// Package demo registers the Caddy module http.handlers.llm_transform_demo_upstream:
// a scripted, strict function-only LLM provider for the quick start, so that
// Caddyfile.example works on a fresh machine without network or API keys.
//
// It is a demo, not a model. The module root package, which
// `xcaddy build --with github.com/llmtransform/caddy-llm-transform` imports,
// does not import this package, so production builds do not contain it;
// cmd/caddy-llm-transform does.
package demo

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

func init() {
	caddy.RegisterModule(Upstream{})
	httpcaddyfile.RegisterHandlerDirective("llm_transform_demo_upstream", parseCaddyfile)
	// Terminal like respond, so it needs no order line in demo Caddyfiles.
	httpcaddyfile.RegisterDirectiveOrder("llm_transform_demo_upstream", httpcaddyfile.Before, "respond")
}

// Upstream answers like a strict function-only provider (as DeepSeek or
// Bedrock are): it refuses Codex's freeform custom tools and custom tool
// calls with a 400 in OpenAI's error shape, and otherwise follows a fixed
// script. Offered an apply_patch function tool, it calls it once with a
// patch; given the tool's output, it answers with text. It serves
// POST .../responses and POST .../chat/completions, JSON or SSE, and answers
// anything else with 404. It is a terminal handler.
//
// It keeps only the last few request bodies, each capped, so a client that
// talks to it for hours does not grow it.
type Upstream struct {
	// Patch is the apply_patch text sent as the "input" argument of the
	// scripted function call. The default is a sloppy patch (marker suffixes,
	// added lines without "+") that only applies after the gateway has
	// normalised it.
	Patch string `json:"patch,omitempty"`

	// DeltaSize is the size in bytes of each streamed fragment of the
	// function call arguments. Fragments split the JSON text anywhere, even
	// inside escape sequences, but never inside a UTF-8 character. Default: 8.
	DeltaSize int `json:"delta_size,omitempty"`

	provider *fakeprovider.Provider
}

// CaddyModule returns the Caddy module information.
func (Upstream) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_transform_demo_upstream",
		New: func() caddy.Module { return new(Upstream) },
	}
}

// Provision sets up the provider.
func (u *Upstream) Provision(caddy.Context) error {
	u.provider = &fakeprovider.Provider{Patch: u.Patch, DeltaSize: u.DeltaSize}
	return nil
}

// Validate ensures the configuration is usable.
func (u *Upstream) Validate() error {
	if u.DeltaSize < 0 {
		return fmt.Errorf("delta_size must not be negative, got %d", u.DeltaSize)
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler. It always answers the
// request itself and never calls next.
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	u.provider.ServeHTTP(w, r)
	return nil
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	u := new(Upstream)
	err := u.UnmarshalCaddyfile(h.Dispenser)
	return u, err
}

// UnmarshalCaddyfile sets up the demo upstream from Caddyfile tokens. Syntax:
//
//	llm_transform_demo_upstream [<matcher>] {
//		patch      <text>
//		delta_size <bytes>
//	}
//
// Quoted tokens do not interpret \n, so write a multi-line patch as a heredoc
// (patch <<EOF ... EOF) or a backtick-quoted token.
func (u *Upstream) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "patch":
			if !d.NextArg() {
				return d.ArgErr()
			}
			u.Patch = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
		case "delta_size":
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(d.Val())
			if err != nil || n <= 0 {
				return d.Errf("delta_size must be a positive integer, got %q", d.Val())
			}
			u.DeltaSize = n
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return d.Errf("unrecognized subdirective %q", d.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Module                = (*Upstream)(nil)
	_ caddy.Provisioner           = (*Upstream)(nil)
	_ caddy.Validator             = (*Upstream)(nil)
	_ caddyhttp.MiddlewareHandler = (*Upstream)(nil)
	_ caddyfile.Unmarshaler       = (*Upstream)(nil)
)
