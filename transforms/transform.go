package transforms

import (
	"encoding/json"
	"fmt"
)

// Namespace is the Caddy module namespace of transforms. A transform named
// "field_set" is the module llm_transform.transforms.field_set, and a rule
// refers to it as {"transform":"field_set"}.
const Namespace = "llm_transform.transforms"

// A transform is a Caddy module in Namespace that implements
// RequestRewriter, ResponseRewriter or both. Its exported struct fields are
// its JSON config (documented for Caddy's docs like any module's), it may
// implement caddy.Provisioner and caddy.Validator, and it should implement
// caddyfile.Unmarshaler for its options inside a Caddyfile rule block. One
// provisioned value serves every request of a config concurrently, so it
// must not change after Provision: per-request state lives in the Exchange
// and in the stream stages.

// RequestRewriter is a transform's request phase.
type RequestRewriter interface {
	// RewriteRequest returns the body for the next rule (and, after the
	// last, the upstream), or body itself when the rule changes nothing.
	// x.Protocol() is the protocol body is in. An *Error rejects the
	// request; nothing of any rule's work is then forwarded.
	RewriteRequest(x *Exchange, body []byte) ([]byte, error)
}

// ResponseRewriter is a transform's response phase. Response phases run in
// the reverse of the request order, so each rule undoes its own work after
// every rule nearer the upstream has undone theirs.
type ResponseRewriter interface {
	// WantsResponse reports, after the request phase, whether the response
	// needs the rule. When no rule does, the response is neither buffered
	// nor parsed.
	WantsResponse(x *Exchange) bool
	// RewriteResponse rewrites a complete, non-streaming body, returning
	// body itself when it changes nothing.
	RewriteResponse(x *Exchange, body []byte) ([]byte, error)
	// NewStream returns the rule's stage for one SSE response, or nil when
	// the rule has nothing to do on it (events then skip the rule).
	NewStream(x *Exchange) StreamTransform
}

// StreamTransform is one rule's stage of a response stream.
type StreamTransform interface {
	// Event handles one event and passes zero or more events to emit. The
	// event's slices are valid only during the call: keep copies. To change
	// an event, emit a new one whose Raw is nil; emitting ev itself counts
	// as leaving it untouched.
	Event(ev *Event, emit Emit) error
	// End runs when the upstream stream has ended.
	End(emit Emit) error
}

// ErrorRewriter is implemented by response rewriters that also put the
// upstream's JSON error bodies into their client's terms (a bridge naming a
// context-length error as its client knows it). Every other rule sees no
// error: the upstream's errors pass through untouched, status included.
type ErrorRewriter interface {
	// RewriteError returns the body the client gets for the upstream's
	// error body; the status stays, unless the rewriter is also an
	// ErrorStatusRewriter.
	RewriteError(x *Exchange, status int, body []byte) []byte
}

// ErrorStatusRewriter is implemented by ErrorRewriters whose client
// protocol has its own status for an upstream error (Anthropic's 529 for
// an overloaded upstream's 503).
type ErrorStatusRewriter interface {
	RewriteErrorStatus(x *Exchange, status int) int
}

// ScopeLimiter is implemented by transforms that may only be configured in
// some scopes; others are allowed in all of them.
type ScopeLimiter interface {
	Scopes() Scope
}

// PairedPhases is implemented by transforms whose response phase undoes
// what their request phase did, so that one phase alone would break the
// client (a conversion never restored, or a restoration with nothing to
// restore). Such a rule configured with a lone phase fails to load, with
// the reason PairedPhases returns.
type PairedPhases interface {
	PairedPhases() string
}

// ProtocolBridge is implemented by transforms that turn a request of one
// protocol into another (and the response back). Rules before a bridge see
// the client's protocol, rules after it the bridged one, and the response
// stream is parsed in the upstream's framing and written in the client's.
type ProtocolBridge interface {
	// BridgedProtocol returns the protocol a request in protocol in has
	// after the rule: in itself when the rule does not bridge it.
	BridgedProtocol(in Protocol) Protocol
}

// Protocol is an API a body speaks.
type Protocol uint8

const (
	// ProtocolUnknown marks traffic no rule understands; it passes through.
	ProtocolUnknown Protocol = iota
	// ProtocolResponses is the OpenAI Responses API (/v1/responses).
	ProtocolResponses
	// ProtocolChat is the OpenAI Chat Completions API (/v1/chat/completions).
	ProtocolChat
	// ProtocolMessages is Anthropic's Messages API (/v1/messages), which
	// Claude Code speaks. Only rules that say they read it (ProtocolReader)
	// may stand where a body is in it: the others refuse the request.
	ProtocolMessages
)

func (p Protocol) String() string {
	switch p {
	case ProtocolResponses:
		return "responses"
	case ProtocolChat:
		return "chat_completions"
	case ProtocolMessages:
		return "messages"
	}
	return "unknown"
}

// ProtocolReader is implemented by transforms that say which protocols
// they read. A transform that does not implement it reads Responses and
// Chat Completions: the engine refuses a request that would hand it a
// body in any other protocol (a tool rule placed before messages_to_chat)
// rather than let it pass the body on unread.
type ProtocolReader interface {
	ReadsProtocol(p Protocol) bool
}

// readsProtocol reports whether the transform t reads bodies in p.
func readsProtocol(t any, p Protocol) bool {
	if pr, ok := t.(ProtocolReader); ok {
		return pr.ReadsProtocol(p)
	}
	return p == ProtocolResponses || p == ProtocolChat || p == ProtocolUnknown
}

// Phase selects the direction a rule acts on.
type Phase uint8

const (
	// PhaseRequest rewrites what goes to the upstream.
	PhaseRequest Phase = 1 << iota
	// PhaseResponse rewrites what comes back.
	PhaseResponse
	// PhaseBoth is the default when a rule names no phase.
	PhaseBoth = PhaseRequest | PhaseResponse
)

func (p Phase) String() string {
	switch p {
	case PhaseRequest:
		return "request"
	case PhaseResponse:
		return "response"
	case PhaseBoth:
		return "both"
	}
	return "none"
}

// ParsePhase maps the config spelling to a Phase; "" means both phases.
func ParsePhase(s string) (Phase, error) {
	switch s {
	case "", "both":
		return PhaseBoth, nil
	case "request":
		return PhaseRequest, nil
	case "response":
		return PhaseResponse, nil
	}
	return 0, fmt.Errorf("unknown phase %q (want request, response or both)", s)
}

// Scope says where a rule was configured. On the way to the upstream,
// chains run Provider, then Global, then APIKey rules; on the way back the
// reverse.
type Scope uint8

const (
	// ScopeProvider is a handler's own rules, next to one upstream.
	ScopeProvider Scope = 1 << iota
	// ScopeGlobal is the rules every handler shares.
	ScopeGlobal
	// ScopeAPIKey is the rules bound to one caller key.
	ScopeAPIKey
	// AllScopes is what most transforms support.
	AllScopes = ScopeProvider | ScopeGlobal | ScopeAPIKey
)

func (s Scope) String() string {
	switch s {
	case ScopeProvider:
		return "provider"
	case ScopeGlobal:
		return "global"
	case ScopeAPIKey:
		return "api_key"
	}
	return "mixed"
}

// RuleConfig is one rule as written in JSON. The shape matches Monoize's
// rule objects, so their configurations carry over verbatim.
type RuleConfig struct {
	// The name of the transform: the last label of its module ID in the
	// llm_transform.transforms namespace, such as
	// "field_custom_tools_to_function".
	Transform string `json:"transform"`
	// Switches the rule off without deleting it. A disabled rule is still
	// loaded and checked. Default: true.
	Enabled *bool `json:"enabled,omitempty"`
	// "request", "response", or empty for both phases. Transforms whose
	// phases only work together refuse a lone phase.
	Phase string `json:"phase,omitempty"`
	// Limits the rule to requests whose model matches one of these
	// anchored, case-sensitive globs (`*` any run, `?` one character).
	// Empty means every model.
	Models []string `json:"models,omitempty"`
	// The transform's own config: the JSON of the module
	// llm_transform.transforms.<transform>.
	Config json.RawMessage `json:"config,omitempty"`
}
