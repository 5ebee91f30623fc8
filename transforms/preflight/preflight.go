// Package preflight is the tools_preflight transform: it checks each of
// the upstream's tool calls against the tools the same request declared
// before the client sees the call complete (the tool exists, the
// arguments are JSON and match the tool's JSON schema, the call does not
// repeat within the answer), repairs what it can without the model
// (arguments in code fences or with trailing commas, a name off only in
// case or separators), and asks the model again, in hidden gateway
// rounds, for a call that stays wrong, telling it exactly what was wrong.
package preflight

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

func init() {
	caddy.RegisterModule(Preflight{})
}

// Preflight checks the upstream's tool calls against the request's own
// tool declarations and repairs or re-asks for the invalid ones before
// the client sees them. Text keeps streaming while a call is checked; a
// call that passes is released at once.
//
// Place it where it sees the tools as the client declared them and the
// calls as the client will get them: first in a chain for Responses and
// Chat clients (before tools_plan, tools_normalize_schema and
// responses_to_chat), right after messages_to_chat for Messages clients.
type Preflight struct {
	// MaxRepairs is how many hidden rounds one answer may take to ask the
	// model again for its invalid calls; each counts against the handler's
	// max_rounds. 0 turns re-asking off (the cheap repairs still apply).
	// Default: 1.
	MaxRepairs *int `json:"max_repairs,omitempty"`

	// OnFailure is what the client gets for a call still invalid after the
	// last re-ask (or when no round is left): "pass" (the default) hands
	// on the model's last call as it made it, "drop" removes it, "error"
	// ends the answer with an error (a 502, or an error event in a
	// stream) whose code is tool_call_invalid.
	OnFailure string `json:"on_failure,omitempty"`

	// Dedup removes a call that repeats an earlier call of the same answer
	// (same tool, same arguments once parsed), a loop some models fall
	// into. Calls are never compared across the client's turns. Default:
	// true.
	Dedup *bool `json:"dedup,omitempty"`

	// Markup says where calls leaked into the text as markup are looked
	// for: "auto" (the default) in answers that come from a Chat upstream
	// (directly or behind a bridge), whose serving stacks leak them;
	// "on" also in a Responses upstream's own streams, which then lose
	// the engine's fast way for text; "off" nowhere.
	Markup string `json:"markup,omitempty"`

	maxRepairs int
	onFailure  failure
	dedup      bool
}

type failure uint8

const (
	failPass failure = iota
	failDrop
	failError
)

// CaddyModule returns the Caddy module information.
func (Preflight) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  transforms.ModuleID("tools_preflight"),
		New: func() caddy.Module { return new(Preflight) },
	}
}

// Provision applies the defaults.
func (p *Preflight) Provision(caddy.Context) error {
	p.maxRepairs = 1
	if p.MaxRepairs != nil {
		p.maxRepairs = *p.MaxRepairs
	}
	p.dedup = p.Dedup == nil || *p.Dedup
	switch p.OnFailure {
	case "", "pass":
		p.onFailure = failPass
	case "drop":
		p.onFailure = failDrop
	case "error":
		p.onFailure = failError
	}
	return nil
}

// Validate checks the options.
func (p *Preflight) Validate() error {
	if p.MaxRepairs != nil && (*p.MaxRepairs < 0 || *p.MaxRepairs > 5) {
		return fmt.Errorf("max_repairs must be between 0 and 5, got %d", *p.MaxRepairs)
	}
	switch p.OnFailure {
	case "", "pass", "drop", "error":
	default:
		return fmt.Errorf("on_failure: %q (want pass, drop or error)", p.OnFailure)
	}
	switch p.Markup {
	case "", "auto", "on", "off":
	default:
		return fmt.Errorf("markup: %q (want auto, on or off)", p.Markup)
	}
	return nil
}

// markup reports whether the answers of this request are searched for
// calls leaked as markup.
func (p *Preflight) markup(x *transforms.Exchange) bool {
	switch p.Markup {
	case "on":
		return true
	case "off":
		return false
	}
	return x.Protocol() == transforms.ProtocolChat || x.UpstreamProtocol() != transforms.ProtocolResponses
}

// UnmarshalCaddyfile reads the rule's options. Syntax:
//
//	rule tools_preflight {
//		max_repairs <n>
//		on_failure  pass|drop|error
//		dedup       true|false
//		markup      auto|on|off
//	}
func (p *Preflight) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	b := transforms.NewRuleBlock(d)
	for {
		more, err := b.Next()
		if !more || err != nil {
			return err
		}
		switch b.Opt {
		case "max_repairs":
			n, err := b.Number()
			if err != nil {
				return err
			}
			p.MaxRepairs = &n
		case "on_failure":
			err = b.One(&p.OnFailure)
		case "dedup":
			err = b.Flag(&p.Dedup)
		case "markup":
			err = b.One(&p.Markup)
		default:
			err = b.Unknown()
		}
		if err != nil {
			return err
		}
	}
}

// PairedPhases implements transforms.PairedPhases: the response side
// checks calls against what the request side kept.
func (Preflight) PairedPhases() string {
	return "tools_preflight checks the response's calls against the tools its request phase read"
}

// ReadsProtocol implements transforms.ProtocolReader: Responses and Chat
// (Messages clients put it after messages_to_chat).
func (Preflight) ReadsProtocol(p transforms.Protocol) bool {
	return p == transforms.ProtocolResponses || p == transforms.ProtocolChat
}

// exchangeKey keys the rule's record in an exchange.
type exchangeKey struct{ p *Preflight }

// record is what one request keeps for its answer.
type record struct {
	body  []byte // the request as the rule was handed it
	proto transforms.Protocol
	tools *toolIndex // read from body on the first call checked
	// seen is every valid call of the answer so far (dedup), seenBefore
	// what it was before the answer being checked.
	seen, seenBefore map[string]*seenTool
	rounds           int               // re-asks taken
	round            *transforms.Round // the last re-ask
	failHandled      bool              // its failure was answered
	pending          int               // invalid calls the last re-ask asked for again
	last             []byte            // the last re-ask's request
}

func (p *Preflight) record(x *transforms.Exchange) *record {
	return x.Record(exchangeKey{p}, func() any { return &record{} }).(*record)
}

// RewriteRequest keeps the request: its tools are read only once a call
// needs checking, and a re-ask is built from it.
func (p *Preflight) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	rec := p.record(x)
	// Again when a rule nearer the client takes a round: its request is
	// the one a re-ask now extends, with the tools it declares.
	rec.body, rec.proto, rec.tools, rec.last = body, x.Protocol(), nil, nil
	return body, nil
}

// TakesRounds implements transforms.RoundTaker.
func (p *Preflight) TakesRounds(x *transforms.Exchange) bool {
	rec := p.record(x)
	return rec.body != nil
}

// WantsResponse implements transforms.ResponseRewriter.
func (p *Preflight) WantsResponse(x *transforms.Exchange) bool { return p.record(x).body != nil }

// tools returns the request's tool index, read on first use.
func (rec *record) index() *toolIndex {
	if rec.tools == nil {
		rec.tools = readTools(rec.body, rec.proto)
	}
	return rec.tools
}

// canReask reports whether an invalid call of this answer may go back to
// the model in a round.
func (p *Preflight) canReask(x *transforms.Exchange, rec *record) bool {
	return rec.rounds < p.maxRepairs && x.RoundsLeft()
}

// invalidError is the client's error for on_failure error.
func invalidError(v *verdict) *transforms.Error {
	return &transforms.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "tool_call_invalid",
		Message: "the model's call to " + strconv.Quote(v.name) + " is invalid and could not be repaired: " + v.summary()}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Preflight)(nil)
	_ caddy.Validator             = (*Preflight)(nil)
	_ caddyfile.Unmarshaler       = (*Preflight)(nil)
	_ transforms.RequestRewriter  = (*Preflight)(nil)
	_ transforms.ResponseRewriter = (*Preflight)(nil)
	_ transforms.RoundTaker       = (*Preflight)(nil)
)
