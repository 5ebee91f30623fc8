package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// nestedOptions is a transform whose options need a nested block, the
// shape a provider profile takes: `limits { tools 64 }`.
type nestedOptions struct {
	Limits map[string]string `json:"limits,omitempty"`
	Mode   string            `json:"mode,omitempty"`
}

func init() { caddy.RegisterModule(nestedOptions{}) }

func (nestedOptions) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("test_nested_options"), New: func() caddy.Module { return new(nestedOptions) }}
}

func (n *nestedOptions) RewriteRequest(_ *transforms.Exchange, b []byte) ([]byte, error) {
	return b, nil
}

func (n *nestedOptions) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	for d.NextBlock(0) {
		switch d.Val() {
		case "mode":
			if !d.NextArg() {
				return d.ArgErr()
			}
			n.Mode = d.Val()
		case "limits":
			n.Limits = map[string]string{}
			for nesting := d.Nesting(); d.NextBlock(nesting); {
				key := d.Val()
				if !d.NextArg() {
					return d.ArgErr()
				}
				n.Limits[key] = d.Val()
			}
		default:
			return d.Errf("unrecognized option %q", d.Val())
		}
	}
	return nil
}

// TestRuleBlockGoesToTheTransform: the rule's own lines, nested blocks
// included, reach the transform's UnmarshalCaddyfile; enabled and models
// stay the engine's, wherever they stand in the block.
func TestRuleBlockGoesToTheTransform(t *testing.T) {
	var h Handler
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`llm_transform {
		rule test_nested_options request {
			mode strict
			models gpt-* o?
			limits {
				tools 64
				name_length "40"
			}
			enabled false
		}
		rule field_custom_tools_to_function
	}`))
	if err != nil {
		t.Fatal(err)
	}
	r := h.Rules[0]
	if r.Transform != "test_nested_options" || r.Phase != "request" || r.Enabled == nil || *r.Enabled ||
		strings.Join(r.Models, " ") != "gpt-* o?" || string(r.Config) != `{"limits":{"name_length":"40","tools":"64"},"mode":"strict"}` {
		t.Fatalf("rule: %+v, config %s", r, r.Config)
	}
	if r := h.Rules[1]; r.Transform != "field_custom_tools_to_function" || r.Config != nil || r.Enabled != nil {
		t.Fatalf("bare rule: %+v", r)
	}
}

func TestRuleBlockErrors(t *testing.T) {
	for _, tc := range []struct{ block, want string }{
		{"rule field_custom_tools_to_function {\n names a\n names b\n}", "names already specified"},
		{"rule field_custom_tools_to_function {\n enabled true\n enabled false\n}", "rule 0 (field_custom_tools_to_function): enabled already specified"},
		{"rule field_custom_tools_to_function {\n models a\n models b\n}", "rule 0 (field_custom_tools_to_function): models already specified"},
		{"rule field_set {\n path a\n path b\n}", "path already specified"},
		{"rule field_set {\n colour blue\n}", `unrecognized option "colour"`},
		{"rule nope", `rule 0 (nope): unknown transform "nope" (known: `},
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_transform {\n" + tc.block + "\n}"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.block, err, tc.want)
		}
	}
}

func TestShortKeysRefused(t *testing.T) {
	var a App
	err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`llm_transform {
		api_key sk-short {
			rule field_set {
				path a
				value b
			}
		}
	}`))
	if err == nil || !strings.Contains(err.Error(), "api_key 0: the key is shorter than 32 characters") || strings.Contains(err.Error(), "sk-short") {
		t.Fatalf("got %v", err)
	}
}

func TestCaddyfileRepeatsAndSizes(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"protocol auto\nprotocol responses", "protocol already specified"},
		{"max_body_size 1MB\nmax_body_size 2MB", "max_body_size already specified"},
		{"max_call_buffer 1MB\nmax_call_buffer 2MB", "max_call_buffer already specified"},
		{"explain\nexplain false", "explain already specified"},
		{"max_body_size 12QB", `max_body_size: invalid size "12QB"`},
		{"max_call_buffer lots", `max_call_buffer: invalid size "lots"`},
		{"max_body_size 0", "max_body_size must be positive"},
		{"max_json_depth 0", `max_json_depth: "0" is not a positive whole number`},
		{"max_json_depth deep", `max_json_depth: "deep" is not a positive whole number`},
		{"max_json_depth 5\nmax_json_depth 6", "max_json_depth already specified"},
	} {
		var h Handler
		err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_transform {\n" + tc.in + "\n}"))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
	var a App
	err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_transform {\nkey_sources authorization\nkey_sources x-api-key\n}"))
	if err == nil || !strings.Contains(err.Error(), "key_sources already specified") {
		t.Errorf("key_sources twice: %v", err)
	}
}

// TestRoundOptions: max_rounds and max_round_time reach the exchange's
// limits; bad values are refused where they are written.
func TestRoundOptions(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_transform {\n max_rounds 2\n max_round_time 90s\n}")); err != nil {
		t.Fatal(err)
	}
	if l := h.limits(); l.MaxRounds != 2 || l.MaxRoundTime.String() != "1m30s" {
		t.Fatalf("limits %+v", l)
	}
	var none Handler
	if err := none.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_transform {\n max_rounds -1\n}")); err != nil || none.MaxRounds != -1 {
		t.Fatalf("max_rounds -1: %v %d", err, none.MaxRounds)
	}
	for _, bad := range []string{"max_rounds -2", "max_rounds x", "max_round_time 0s", "max_round_time soon", "max_rounds 1\n max_rounds 2"} {
		var b Handler
		if err := b.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_transform {\n " + bad + "\n}")); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
