// Package tooldefer is the tools_defer transform: over a provider's tool
// cap, the upstream gets the tools the conversation already uses plus a
// search tool, and the gateway answers the model's searches itself, in
// hidden rounds, loading the tools found for the next round. The client
// never sees a search.
package tooldefer

import (
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/internal/providers"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

func init() {
	caddy.RegisterModule(Defer{})
}

// Defer sends a request with more tools than the upstream takes as the
// tools its history uses plus a tool search the gateway answers. A search
// the model makes is answered in a hidden round: the tools found (BM25
// over names, descriptions and parameter names) are added to the next
// round's request, and the model calls them as if they had been there.
// Nothing is kept between requests: the next turn loads every tool the
// history calls. A client that brings its own search (Codex's
// tool_search, a tool named ToolSearch) keeps it: the rule does nothing.
//
// It must stand on the client's side of tools_plan (which fits what is
// left to the provider); a chain with it after tools_plan fails to load.
type Defer struct {
	// Profile names the provider whose tool cap is the default Threshold
	// (tools_plan's profiles; default openai_chat, 128 tools).
	Profile string `json:"profile,omitempty"`

	// Threshold is the most tools a request may declare before the rule
	// defers them; 0 means the profile's cap.
	Threshold int `json:"threshold,omitempty"`

	// Always defers every request's tools, whatever their number.
	Always bool `json:"always,omitempty"`

	// TopK is how many tools one search loads at most. Default: 5.
	TopK int `json:"top_k,omitempty"`

	// ListNames adds the names of the deferred tools, in one line, to the
	// search tool's description, so the model knows what it may find.
	// Default: false.
	ListNames bool `json:"list_names,omitempty"`

	threshold int
	topK      int
}

// CaddyModule returns the Caddy module information.
func (Defer) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  transforms.ModuleID("tools_defer"),
		New: func() caddy.Module { return new(Defer) },
	}
}

// Provision applies the defaults.
func (d *Defer) Provision(caddy.Context) error {
	name := d.Profile
	if name == "" {
		name = "openai_chat"
	}
	p, ok := providers.Lookup(name)
	if !ok {
		return providers.Unknown("profile", name)
	}
	d.threshold = d.Threshold
	if d.threshold == 0 {
		d.threshold = p.MaxTools
	}
	if d.threshold <= 0 {
		d.threshold = providers.SafeMaxTools
	}
	d.topK = d.TopK
	if d.topK == 0 {
		d.topK = 5
	}
	return nil
}

// Validate checks the options.
func (d *Defer) Validate() error {
	if d.Threshold < 0 {
		return fmt.Errorf("threshold must be positive, got %d", d.Threshold)
	}
	if d.TopK < 0 || d.TopK > 50 {
		return fmt.Errorf("top_k must be between 1 and 50, got %d", d.TopK)
	}
	return nil
}

// UnmarshalCaddyfile reads the rule's options. Syntax:
//
//	rule tools_defer {
//		profile    <name>
//		threshold  <n>|always
//		top_k      <n>
//		list_names [true|false]
//	}
func (d *Defer) UnmarshalCaddyfile(disp *caddyfile.Dispenser) error {
	b := transforms.NewRuleBlock(disp)
	for {
		more, err := b.Next()
		if !more || err != nil {
			return err
		}
		switch b.Opt {
		case "profile":
			err = b.One(&d.Profile)
		case "threshold":
			if len(b.Args) == 1 && b.Args[0] == "always" {
				d.Always = true
				break
			}
			var n int
			if n, err = b.Number(); err == nil {
				d.Threshold = n
			}
		case "top_k":
			var n int
			if n, err = b.Number(); err == nil {
				d.TopK = n
			}
		case "list_names":
			var v *bool
			if err = b.Flag(&v); err == nil {
				d.ListNames = *v
			}
		default:
			err = b.Unknown()
		}
		if err != nil {
			return err
		}
	}
}

// Precedes implements transforms.OrderRequirer.
func (Defer) Precedes() ([]string, string) {
	return []string{"tools_plan"}, "tools_defer decides which of the client's tools the upstream sees, which tools_plan then fits to the provider; put tools_defer first"
}

// PairedPhases implements transforms.PairedPhases.
func (Defer) PairedPhases() string {
	return "tools_defer answers on the response side the searches its request side offers"
}

// ReadsProtocol implements transforms.ProtocolReader.
func (Defer) ReadsProtocol(p transforms.Protocol) bool {
	return p == transforms.ProtocolResponses || p == transforms.ProtocolChat
}

// TakesRounds implements transforms.RoundTaker.
func (d *Defer) TakesRounds(x *transforms.Exchange) bool { return d.record(x).active }

// WantsResponse implements transforms.ResponseRewriter.
func (d *Defer) WantsResponse(x *transforms.Exchange) bool { return d.record(x).active }

type recordKey struct{ d *Defer }

func (d *Defer) record(x *transforms.Exchange) *record {
	return x.Record(recordKey{d}, func() any { return &record{} }).(*record)
}

// searchDescription is the search tool's description; names is the
// optional list of what may be found.
func searchDescription(deferred int, names []string) string {
	s := "Search the " + strconv.Itoa(deferred) + " further tools available in this conversation and load the best matches. " +
		"Describe the capability you need in a few keywords (e.g. \"create github issue\"). " +
		"The tools found become callable right away; call them directly afterwards."
	if len(names) > 0 {
		s += " Tools that can be found: "
		for i, n := range names {
			if i > 0 {
				s += ", "
			}
			s += n
		}
		s += "."
	}
	return s
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Defer)(nil)
	_ caddy.Validator             = (*Defer)(nil)
	_ caddyfile.Unmarshaler       = (*Defer)(nil)
	_ transforms.RequestRewriter  = (*Defer)(nil)
	_ transforms.ResponseRewriter = (*Defer)(nil)
	_ transforms.RoundTaker       = (*Defer)(nil)
	_ transforms.OrderRequirer    = (*Defer)(nil)
	_ transforms.ProtocolReader   = (*Defer)(nil)
	_ transforms.PairedPhases     = (*Defer)(nil)
)
