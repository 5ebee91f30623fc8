// Package messagesbridge is the messages_to_chat transform, a protocol
// bridge: it turns an Anthropic Messages request (Claude Code, the
// Anthropic SDKs) into a Chat Completions request for upstreams that speak
// only Chat (DeepSeek, Kimi, GLM, Qwen, MiniMax…), and the Chat answer,
// JSON or stream, back into a Messages object or event stream, carrying
// thinking across turns without state in the thinking blocks' signatures.
package messagesbridge

import (
	"fmt"
	"time"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/internal/providers"
	"github.com/llmtransform/caddy-llm-transform/internal/reasonenv"
)

func init() {
	caddy.RegisterModule(MessagesToChat{})
}

// MessagesToChat lets Messages API clients (Claude Code) use upstreams
// that only speak Chat Completions. The request becomes a Chat request
// sent to …/chat/completions; the answer, JSON or stream, becomes a
// Messages object or event stream in the grammar the Anthropic SDKs and
// Claude Code enforce. Thinking is carried across turns without state: it
// goes to the client as thinking blocks whose signature seals the text
// (internal/reasonenv), and comes back as reasoning_content where the
// provider wants it.
//
// Rules before it see Messages, rules after it Chat: tools_plan,
// tools_normalize_schema and tools_filter belong after it.
type MessagesToChat struct {
	// Profile names the upstream provider, with the same names as
	// tools_plan: openai_chat (the default), deepseek, kimi, glm, qwen,
	// minimax, and the others of the provider table. It decides the
	// token limit field and the model's output cap, the tool_choice modes
	// taken while thinking, how thinking is switched and how earlier
	// reasoning is sent back.
	Profile string `json:"profile,omitempty"`

	// MaxTokensField is the Chat field max_tokens becomes: "max_tokens"
	// or "max_completion_tokens". Default: the profile's.
	MaxTokensField string `json:"max_tokens_field,omitempty"`

	// Reasoning says how thinking from earlier turns goes upstream:
	// "replay" (as reasoning_content on the assistant message it came
	// with), "tool_calls" (only on tool-call messages) or "strip".
	// Default: the profile's.
	Reasoning string `json:"reasoning,omitempty"`

	// SystemMessages says where a system message after the first turn
	// goes: "user" (as a user message marking it a system note, placed
	// after any tool results: the default, every Chat upstream takes it
	// and the cached prefix stays put) or "system" (a system message in
	// place, for upstreams that take several).
	SystemMessages string `json:"system_messages,omitempty"`

	// MaxReasoning is the most bytes of the upstream's reasoning kept,
	// per answer, for the thinking block's signature; past it the text
	// still streams but the signature keeps only what came before and
	// says it was cut. Default 4 MiB.
	MaxReasoning int64 `json:"max_reasoning,omitempty"`

	// PingInterval is how long the upstream may be silent in a stream
	// before the client gets a ping (Claude Code gives up on a stream
	// without events). Default 10s.
	PingInterval caddy.Duration `json:"ping_interval,omitempty"`

	// ServerTools says what becomes of Anthropic's server tools
	// (web_search_*, web_fetch_*, code_execution_*, …), which a Chat
	// upstream cannot run: "drop" (the default: left out, with a
	// decision) or "reject" (a 400 naming the tool).
	ServerTools string `json:"server_tools,omitempty"`

	// UnsupportedContent says what becomes of an image or document the
	// profile's upstream cannot take: "placeholder" (the default: a short
	// text saying what was left out, with a decision) or "reject" (a 400).
	UnsupportedContent string `json:"unsupported_content,omitempty"`

	knobs        providers.Profile
	maxReasoning int
}

// CaddyModule returns the Caddy module information.
func (MessagesToChat) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  transforms.ModuleID("messages_to_chat"),
		New: func() caddy.Module { return new(MessagesToChat) },
	}
}

// Provision settles the profile's knobs.
func (t *MessagesToChat) Provision(caddy.Context) error {
	if t.Profile == "" {
		t.Profile = "openai_chat"
	}
	k, err := providers.Bridged(t.Profile, t.MaxTokensField, t.Reasoning)
	if err != nil {
		return err
	}
	switch t.SystemMessages {
	case "", "user", "system":
	default:
		return fmt.Errorf("system_messages %q: want user or system", t.SystemMessages)
	}
	if t.maxReasoning, err = reasonenv.Max(t.MaxReasoning); err != nil {
		return err
	}
	switch {
	case t.PingInterval < 0:
		return fmt.Errorf("ping_interval %v is negative", time.Duration(t.PingInterval))
	case t.PingInterval == 0:
		t.PingInterval = caddy.Duration(defaultPingInterval)
	}
	switch t.ServerTools {
	case "", "drop", "reject":
	default:
		return fmt.Errorf("server_tools %q: want drop or reject", t.ServerTools)
	}
	switch t.UnsupportedContent {
	case "", "placeholder", "reject":
	default:
		return fmt.Errorf("unsupported_content %q: want placeholder or reject", t.UnsupportedContent)
	}
	t.knobs = k
	return nil
}

// defaultPingInterval keeps a silent stream alive well within Claude
// Code's 20 s stall hint and 5 minute abort.
const defaultPingInterval = 10 * time.Second

// UnmarshalCaddyfile sets up the transform from its rule block. Syntax:
//
//	rule messages_to_chat {
//		profile <name>
//		max_tokens_field max_tokens|max_completion_tokens
//		reasoning replay|tool_calls|strip
//		system_messages user|system
//		max_reasoning <size>
//		ping_interval <duration>
//		server_tools drop|reject
//		unsupported_content placeholder|reject
//	}
func (t *MessagesToChat) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
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
		case "reasoning":
			err = b.One(&t.Reasoning)
		case "system_messages":
			err = b.One(&t.SystemMessages)
		case "ping_interval":
			var dur time.Duration
			dur, err = b.Duration()
			t.PingInterval = caddy.Duration(dur)
		case "server_tools":
			err = b.One(&t.ServerTools)
		case "unsupported_content":
			err = b.One(&t.UnsupportedContent)
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
func (*MessagesToChat) PairedPhases() string {
	return "the request phase turns a Messages request into a Chat request, and only the response phase of the same rule turns the Chat answer back"
}

// BridgedProtocol implements ProtocolBridge.
func (*MessagesToChat) BridgedProtocol(in transforms.Protocol) transforms.Protocol {
	if in == transforms.ProtocolMessages {
		return transforms.ProtocolChat
	}
	return in
}

// ReadsProtocol implements ProtocolReader: the bridge reads Messages, and
// passes other protocols on untouched.
func (*MessagesToChat) ReadsProtocol(transforms.Protocol) bool { return true }

// bridgeRecord is what the request phase leaves for the response phase.
type bridgeRecord struct {
	bridged bool
	// model is the client's model, as it wrote it (message_start and the
	// message's model say it).
	model string
	// maxTokens is the output cap sent upstream, which some providers'
	// context-length errors count in (Kimi).
	maxTokens int
	// stopSequences are the client's, to tell a stop_sequence stop.
	stopSequences []string
	// stream: the client asked for a stream.
	stream bool
	// thinking: the client asked for thinking (enabled or adaptive).
	thinking bool
	// tools are the client's tool names the request declared, so that a
	// call to another one is told apart (the rules after the bridge give
	// calls back their client names before the bridge sees them).
	tools map[string]bool
}

func (t *MessagesToChat) record(x *transforms.Exchange) *bridgeRecord {
	return x.Record(t, func() any { return &bridgeRecord{} }).(*bridgeRecord)
}

// WantsResponse implements ResponseRewriter.
func (t *MessagesToChat) WantsResponse(x *transforms.Exchange) bool { return t.record(x).bridged }

// Interface guards
var (
	_ caddy.Provisioner           = (*MessagesToChat)(nil)
	_ caddyfile.Unmarshaler       = (*MessagesToChat)(nil)
	_ transforms.RequestRewriter  = (*MessagesToChat)(nil)
	_ transforms.ResponseRewriter = (*MessagesToChat)(nil)
	_ transforms.PairedPhases     = (*MessagesToChat)(nil)
	_ transforms.ProtocolBridge   = (*MessagesToChat)(nil)
	_ transforms.ErrorRewriter    = (*MessagesToChat)(nil)
	_ transforms.ProtocolReader   = (*MessagesToChat)(nil)
)
