// Package chatbridge is the responses_to_chat transform, a protocol
// bridge: it turns a Responses API request into a Chat Completions
// request for upstreams that speak only Chat, and the Chat answer, JSON
// or stream, back into a Responses object or event stream, carrying
// reasoning across turns without state.
package chatbridge

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmtransform/caddy-llm-transform/internal/providers"
	"github.com/llmtransform/caddy-llm-transform/internal/reasonenv"
)

func init() {
	caddy.RegisterModule(ResponsesToChat{})
}

// ResponsesToChat lets Responses API clients (Codex CLI) use upstreams that
// only speak Chat Completions. The request becomes a Chat request (one
// system message, grouped tool calls, tool messages, the provider's knobs
// for token limits and reasoning) sent to …/chat/completions; the answer,
// JSON or stream, becomes a Responses object or event stream again.
// Reasoning is carried across turns without state: it goes to the client
// in the reasoning item's content, marked as ours in encrypted_content, and
// comes back as reasoning_content on the assistant message it preceded.
//
// Rules before it see Responses, rules after it Chat; only function tools
// may reach it (tools_plan fits the others first).
type ResponsesToChat struct {
	// Profile names the upstream provider, with the same names as
	// tools_plan: openai_chat (the default), function_only, deepseek,
	// kimi, glm, qwen, minimax, gemini, bedrock. It decides the token
	// limit field and default, how reasoning effort is expressed, and how
	// earlier reasoning is sent back.
	Profile string `json:"profile,omitempty"`

	// MaxTokensField is the Chat field max_output_tokens becomes:
	// "max_tokens" or "max_completion_tokens". Default: the profile's.
	MaxTokensField string `json:"max_tokens_field,omitempty"`

	// DefaultMaxTokens is sent when the client sets no limit, so patches
	// are not cut by a provider's small default; 0 sends none. Default:
	// the profile's (32768 for every provider but openai_chat).
	DefaultMaxTokens *int `json:"default_max_tokens,omitempty"`

	// Developer says where developer messages after the first user or
	// assistant message go: "user" (as user text, the default: the cached
	// prefix stays put) or "system" (appended to the one system message).
	Developer string `json:"developer,omitempty"`

	// Reasoning says how reasoning from earlier turns goes upstream:
	// "replay" (as reasoning_content on the assistant message it came
	// with, and "" on tool-call messages without any), "tool_calls" (only
	// on tool-call messages, "" where there is none), or "strip". Default:
	// the profile's.
	Reasoning string `json:"reasoning,omitempty"`

	// MaxReasoning is the most bytes of the upstream's reasoning kept, per
	// answer, for the reasoning item the client stores and sends back
	// (counted as the upstream escaped them on streams, decoded in JSON).
	// Reasoning past it still streams to the client as deltas, but the
	// item keeps only what came before, and its encrypted_content says it
	// was cut: the next turn drops it with a decision rather than send the
	// upstream part of its reasoning as if whole. A decision records the
	// cut. It bounds what a stream holds: no model reasons megabytes in
	// one answer, an upstream stuck in a loop can. Default 4 MiB.
	MaxReasoning int64 `json:"max_reasoning,omitempty"`

	// ReasoningDisplay says how the upstream's reasoning is shown: "raw"
	// (the reasoning item's content and response.reasoning_text.*
	// events, which Codex and the OpenAI SDKs read), "summary" (its
	// summary and response.reasoning_summary_text.* events, which the
	// Vercel AI SDK and other clients render) or "both". Whichever it is,
	// the next turn sends the upstream its reasoning back: the item's
	// encrypted_content carries the text. Default "raw".
	ReasoningDisplay string `json:"reasoning_display,omitempty"`

	knobs providers.Profile
	// showRaw and showSummary are ReasoningDisplay's parts.
	showRaw, showSummary bool
	// The reasoning envelopes of the profile, whole and cut, and the
	// reasoning cap in effect.
	envelope, envelopeCut string
	maxReasoning          int
}

// CaddyModule returns the Caddy module information.
func (ResponsesToChat) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  transforms.ModuleID("responses_to_chat"),
		New: func() caddy.Module { return new(ResponsesToChat) },
	}
}

// Provision settles the profile's knobs.
func (t *ResponsesToChat) Provision(caddy.Context) error {
	if t.Profile == "" {
		t.Profile = "openai_chat"
	}
	k, err := providers.Bridged(t.Profile, t.MaxTokensField, t.Reasoning)
	if err != nil {
		return err
	}
	if t.DefaultMaxTokens != nil {
		if *t.DefaultMaxTokens < 0 {
			return fmt.Errorf("default_max_tokens %d is negative", *t.DefaultMaxTokens)
		}
		k.MaxTokens = *t.DefaultMaxTokens
	}
	switch t.Developer {
	case "", "user", "system":
	default:
		return fmt.Errorf("developer %q: want user or system", t.Developer)
	}
	if t.maxReasoning, err = reasonenv.Max(t.MaxReasoning); err != nil {
		return err
	}
	switch t.ReasoningDisplay {
	case "", "raw":
		t.showRaw = true
	case "summary":
		t.showSummary = true
	case "both":
		t.showRaw, t.showSummary = true, true
	default:
		return fmt.Errorf("responses_to_chat: reasoning_display %q is not raw, summary or both", t.ReasoningDisplay)
	}
	t.knobs = k
	t.envelope, t.envelopeCut = reasoningEnvelope(t.Profile, false), reasoningEnvelope(t.Profile, true)
	return nil
}

// UnmarshalCaddyfile sets up the transform from its rule block. Syntax:
//
//	rule responses_to_chat {
//		profile <name>
//		max_tokens_field max_tokens|max_completion_tokens
//		default_max_tokens <n>
//		developer user|system
//		reasoning replay|tool_calls|strip
//		max_reasoning <size>
//		reasoning_display raw|summary|both
//	}
func (t *ResponsesToChat) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	b := transforms.NewRuleBlock(d)
	for {
		more, err := b.Next()
		if !more || err != nil {
			return err
		}
		switch b.Opt {
		case "profile":
			err = b.One(&t.Profile)
		case "max_tokens_field":
			err = b.One(&t.MaxTokensField)
		case "default_max_tokens":
			var n int
			if n, err = b.Number(); err == nil {
				t.DefaultMaxTokens = &n
			}
		case "developer":
			err = b.One(&t.Developer)
		case "reasoning":
			err = b.One(&t.Reasoning)
		case "reasoning_display":
			err = b.One(&t.ReasoningDisplay)
		case "max_reasoning":
			t.MaxReasoning, err = b.Size()
		default:
			return b.Unknown()
		}
		if err != nil {
			return err
		}
	}
}

// PairedPhases implements PairedPhases.
func (*ResponsesToChat) PairedPhases() string {
	return "the request phase turns a Responses request into a Chat request, and only the response phase of the same rule turns the Chat answer back"
}

// BridgedProtocol implements ProtocolBridge.
func (*ResponsesToChat) BridgedProtocol(in transforms.Protocol) transforms.Protocol {
	if in == transforms.ProtocolResponses {
		return transforms.ProtocolChat
	}
	return in
}

// bridgeRecord is what the request phase leaves for the response phase.
type bridgeRecord struct {
	bridged bool
	model   []byte // the client's model, as it wrote it
	echo    []byte // the request members Response objects echo (appendEcho)
	id      string // the hex that response and item ids share
}

func (t *ResponsesToChat) record(x *transforms.Exchange) *bridgeRecord {
	return x.Record(t, func() any { return &bridgeRecord{} }).(*bridgeRecord)
}

// newID returns 24 random hex digits for the ids the bridge mints.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// reasoningEnvelope marks a reasoning item as one this bridge made from the
// profile's upstream: "llmt1." and the base64 of {"p":<profile>}. It holds
// no text and no secret; the text travels in the item's content. An item
// cut at max_reasoning says so, {"p":<profile>,"cut":true}, so that no
// later turn sends its part of the reasoning upstream as the whole.
func reasoningEnvelope(profile string, cut bool) string {
	if cut {
		return reasonenv.Cut(profile)
	}
	return "llmt1." + base64.RawURLEncoding.EncodeToString([]byte(`{"p":`+strconv.Quote(profile)+`}`))
}

// bridgeError is a 400 in the client's shape.
func bridgeError(code, param, format string, a ...any) *transforms.Error {
	return &transforms.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: code, Param: param, Message: fmt.Sprintf(format, a...)}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*ResponsesToChat)(nil)
	_ caddyfile.Unmarshaler       = (*ResponsesToChat)(nil)
	_ transforms.RequestRewriter  = (*ResponsesToChat)(nil)
	_ transforms.ResponseRewriter = (*ResponsesToChat)(nil)
	_ transforms.PairedPhases     = (*ResponsesToChat)(nil)
	_ transforms.ProtocolBridge   = (*ResponsesToChat)(nil)
	_ transforms.ErrorRewriter    = (*ResponsesToChat)(nil)
)
