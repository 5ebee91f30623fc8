// Package transforms is the rule engine of caddy-llm-transform: it compiles
// rule configurations into immutable chains, runs them over request bodies,
// complete response bodies and SSE event streams, and keeps the per-request
// record that lets a response phase undo exactly what the request phase of
// the same request did. It has no Caddy dependency; caddymodule supplies the
// HTTP plumbing.
package transforms

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Protocol is the client-facing API a request speaks.
type Protocol uint8

const (
	// ProtocolUnknown marks traffic no rule understands; it passes through.
	ProtocolUnknown Protocol = iota
	// ProtocolResponses is the OpenAI Responses API (/v1/responses).
	ProtocolResponses
	// ProtocolChat is the OpenAI Chat Completions API (/v1/chat/completions).
	ProtocolChat
)

func (p Protocol) String() string {
	switch p {
	case ProtocolResponses:
		return "responses"
	case ProtocolChat:
		return "chat_completions"
	}
	return "unknown"
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

// Scope says where a rule was configured. Chains run Provider, then Global,
// then APIKey.
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

// OptionKind says how a Caddyfile option's arguments map to JSON.
type OptionKind uint8

const (
	// OptionStrings takes one or more arguments and becomes a JSON array.
	OptionStrings OptionKind = iota
	// OptionString takes exactly one argument.
	OptionString
	// OptionBool takes true or false.
	OptionBool
	// OptionInt takes one integer.
	OptionInt
	// OptionJSON takes one argument holding a JSON value; an argument that
	// is not valid JSON is taken as a string, so `value high` means "high"
	// and `value 3` means 3.
	OptionJSON
)

// Definition describes a transform to the registry.
type Definition struct {
	// ID is the name rules refer to, e.g. "field_custom_tools_to_function".
	ID string
	// Phases the transform can act in; rules asking for others fail to load.
	Phases Phase
	// Scopes the transform may be configured in.
	Scopes Scope
	// Options lists the config keys and how the Caddyfile spells them. The
	// Caddyfile option name equals the JSON key.
	Options map[string]OptionKind
	// New parses a rule's JSON config (which may be empty) and compiles it.
	// It must reject unknown keys.
	New func(config json.RawMessage) (Transform, error)
}

var (
	registryMu sync.RWMutex
	registry   = map[string]*Definition{}
)

// Register adds a transform; it is meant for init functions and panics on a
// duplicate ID, which is a programming error.
func Register(d Definition) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[d.ID]; dup {
		panic("transforms: duplicate transform " + d.ID)
	}
	registry[d.ID] = &d
}

// Lookup returns the definition registered under id.
func Lookup(id string) (*Definition, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	d, ok := registry[id]
	return d, ok
}

// IDs lists the registered transform IDs in sorted order.
func IDs() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	ids := make([]string, 0, len(registry))
	for id := range registry {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Transform is a compiled rule's behaviour. Implementations are immutable and
// shared by all requests; per-request state lives in the Exchange and in the
// value returned by NewStream.
type Transform interface {
	// RewriteRequest returns the request body for the upstream, or body
	// itself when the rule changes nothing. An *Error rejects the request.
	RewriteRequest(x *Exchange, body []byte) ([]byte, error)
	// RewriteResponse rewrites a complete, non-streaming response body.
	RewriteResponse(x *Exchange, body []byte) ([]byte, error)
	// NewStream returns the rule's state for one SSE response, or nil when
	// the rule has nothing to do on it (the events then skip the rule).
	NewStream(x *Exchange) StreamTransform
	// WantsResponse reports, after the request phase, whether the response
	// of this request needs the rule. When no rule does, the response is
	// not buffered or parsed at all.
	WantsResponse(x *Exchange) bool
}

// StreamTransform processes the events of one response stream.
type StreamTransform interface {
	// Event handles one event and passes zero or more events to emit. The
	// event's slices are only valid during the call; keep copies.
	Event(ev *Event, emit Emit) error
	// End runs when the upstream stream ends.
	End(emit Emit) error
}

// RuleConfig is one rule as written in JSON. The shape matches Monoize's rule
// objects so configurations can be carried over verbatim.
type RuleConfig struct {
	// Transform is the ID of a registered transform, such as
	// "field_custom_tools_to_function".
	Transform string `json:"transform"`
	// Enabled switches the rule off without deleting it. Default: true.
	Enabled *bool `json:"enabled,omitempty"`
	// Phase is "request", "response" or empty for both phases.
	Phase string `json:"phase,omitempty"`
	// Models limits the rule to requests whose model matches one of these
	// anchored, case-sensitive globs (`*` any run, `?` one character). Empty
	// means every model.
	Models []string `json:"models,omitempty"`
	// Config is the transform's own options object.
	Config json.RawMessage `json:"config,omitempty"`
}

// Rule is a compiled RuleConfig.
type Rule struct {
	name   string
	def    *Definition
	phase  Phase
	scope  Scope
	models []string
	t      Transform
	hits   atomic.Uint64
}

// Name identifies the rule in messages, e.g. `rule 2 (field_custom_tools_to_function)`.
func (r *Rule) Name() string { return r.name }

// TransformID is the ID of the rule's transform.
func (r *Rule) TransformID() string { return r.def.ID }

// Phase is the rule's effective phase.
func (r *Rule) Phase() Phase { return r.phase }

// Scope is where the rule was configured.
func (r *Rule) Scope() Scope { return r.scope }

// Models is the rule's model globs (nil: every model).
func (r *Rule) Models() []string { return r.models }

// Hits counts the requests the rule has applied to.
func (r *Rule) Hits() uint64 { return r.hits.Load() }

func (r *Rule) matches(model string, p Phase) bool {
	if r.phase&p == 0 {
		return false
	}
	if len(r.models) == 0 {
		return true
	}
	for _, g := range r.models {
		if globMatch(g, model) {
			return true
		}
	}
	return false
}

// validGlob rejects what cannot be meant as a model pattern. Every character
// but `*` and `?` is literal, so "openai/gpt-*" works as written (path.Match
// would stop `*` at the slash).
func validGlob(g string) error {
	if g == "" {
		return fmt.Errorf("empty model glob")
	}
	return nil
}

// globMatch reports whether the whole of s matches pattern, where `*` matches
// any run of characters and `?` exactly one. It backtracks only to the last
// star, which keeps it linear in practice and never exponential.
func globMatch(pattern, s string) bool {
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

// Compile turns configs of one scope into rules. prefix names the location in
// error messages (e.g. "handler" or "api_key 3f2a9c…").
func Compile(cfgs []RuleConfig, scope Scope, prefix string) ([]*Rule, error) {
	rules := make([]*Rule, 0, len(cfgs))
	for i, c := range cfgs {
		name := fmt.Sprintf("rule %d (%s)", i, c.Transform)
		if prefix != "" {
			name = prefix + " " + name
		}
		if c.Enabled != nil && !*c.Enabled {
			continue
		}
		def, ok := Lookup(c.Transform)
		if !ok {
			return nil, fmt.Errorf("%s: unknown transform %q (known: %s)", name, c.Transform, strings.Join(IDs(), ", "))
		}
		if def.Scopes&scope == 0 {
			return nil, fmt.Errorf("%s: transform does not support the %s scope", name, scope)
		}
		ph, err := ParsePhase(c.Phase)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		if ph&def.Phases != ph {
			if c.Phase != "" {
				return nil, fmt.Errorf("%s: transform has no %s phase", name, ph)
			}
			ph &= def.Phases
		}
		for _, g := range c.Models {
			if err := validGlob(g); err != nil {
				return nil, fmt.Errorf("%s: %v", name, err)
			}
		}
		t, err := def.New(c.Config)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		r := &Rule{name: name, def: def, phase: ph, scope: scope, models: c.Models}
		// Stream stages are built from r.t by the stream pipeline; wrapping
		// here lets the engine see which rules changed a stream without the
		// pipeline or any transform having to report it.
		r.t = trackedTransform{Transform: t, r: r}
		rules = append(rules, r)
	}
	return rules, nil
}

// DecodeConfig strictly decodes a transform's JSON config into v; an empty
// config leaves v's defaults alone.
func DecodeConfig(raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("config: %v", err)
	}
	return nil
}

// Limits bound what the engine buffers for one request.
type Limits struct {
	// MaxCallBuffer is the most argument bytes held for one converted call.
	MaxCallBuffer int
	// MaxEvent is the most bytes held for one incomplete SSE event.
	MaxEvent int
}

// Exchange is the per-request conversion record. The request and response
// phases of every rule see the same Exchange, so a response can restore only
// what this request converted. It is used by one goroutine at a time.
type Exchange struct {
	// Protocol is the client-facing API of the request.
	Protocol Protocol
	// Model is the request's model, read before any rule ran.
	Model string
	// Limits apply to this request.
	Limits Limits
	// Logger receives debug decision logs; nil disables them.
	Logger *zap.Logger

	// Explain makes Decide keep the decisions for Decisions, so they can be
	// reported back to the client.
	Explain bool

	rules     []*Rule
	records   map[any]any
	applied   []*Rule
	apps      []Application
	decisions []Decision
	pooled    []*[]byte
	streamErr string
	callBufs  []int

	// Invalid is set when a rule found the request body not to be valid
	// JSON; such a body is forwarded exactly as received.
	Invalid bool

	// Converted counts tool definitions and calls rewritten on the way out.
	Converted int
	// Restored counts calls given back their client-side shape.
	Restored int
}

// NewExchange prepares the record for one request.
func NewExchange(p Protocol, limits Limits, logger *zap.Logger) *Exchange {
	return &Exchange{Protocol: p, Limits: limits, Logger: logger}
}

// Record returns the value stored under key, creating it with mk on first
// use. Transforms keep their conversion state here; the key is usually a
// private type so rules of the same transform share one record.
func (x *Exchange) Record(key any, mk func() any) any {
	if v, ok := x.records[key]; ok {
		return v
	}
	if x.records == nil {
		x.records = make(map[any]any, 1)
	}
	v := mk()
	x.records[key] = v
	return v
}

// Applied lists the rules that ran on this request, in order.
func (x *Exchange) Applied() []*Rule { return x.applied }

// Application is one rule having changed one phase of a request.
type Application struct {
	Rule  *Rule
	Phase Phase
}

// Applications lists, in the order they happened, the phases in which each
// rule changed something: at most one entry per rule and phase.
func (x *Exchange) Applications() []Application { return x.apps }

// Decision is one logged rule decision.
type Decision struct {
	Tool, Action, Reason string
}

// maxDecisions bounds what an explained request keeps: a request with
// thousands of history calls must not grow an unbounded list.
const maxDecisions = 64

// Decisions returns the decisions kept for an explained request (at most
// 64), in order; it is empty unless Explain is set.
func (x *Exchange) Decisions() []Decision { return x.decisions }

// Decide logs one rule decision at debug level. Names of tools are fine to
// log; bodies and keys are not.
func (x *Exchange) Decide(tool, action, reason string) {
	if x.Explain && len(x.decisions) < maxDecisions {
		x.decisions = append(x.decisions, Decision{Tool: tool, Action: action, Reason: reason})
	}
	if x.Logger == nil {
		return
	}
	if ce := x.Logger.Check(zapcore.DebugLevel, "llm_transform decision"); ce != nil {
		ce.Write(zap.String("tool", tool), zap.String("action", action), zap.String("reason", reason))
	}
}

// CallBuffered records that n argument bytes were held for one tool call,
// for the buffered-bytes histogram.
func (x *Exchange) CallBuffered(n int) { x.callBufs = append(x.callBufs, n) }

// CallBuffers returns what CallBuffered recorded, one entry per call.
func (x *Exchange) CallBuffers() []int { return x.callBufs }

// StreamError is the code of the error a stream rule ended the stream
// with ("" if none did), e.g. max_call_buffer_exceeded.
func (x *Exchange) StreamError() string { return x.streamErr }

// markApplied counts r as having changed phase p of this request. Hits
// count requests, so a rule acting on both phases is one hit.
func (x *Exchange) markApplied(r *Rule, p Phase) {
	for _, a := range x.apps {
		if a.Rule == r && a.Phase == p {
			return
		}
	}
	x.apps = append(x.apps, Application{Rule: r, Phase: p})
	for _, a := range x.applied {
		if a == r {
			return
		}
	}
	r.hits.Add(1)
	x.applied = append(x.applied, r)
}

// Error is a rejection the client sees in its own protocol's error shape.
type Error struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
}

func (e *Error) Error() string { return e.Message }

// JSON renders the OpenAI error envelope.
func (e *Error) JSON() []byte {
	b := []byte(`{"error":{"message":`)
	b = jsonspan.AppendStringStr(b, e.Message)
	b = append(b, `,"type":`...)
	b = jsonspan.AppendStringStr(b, e.Type)
	b = append(b, `,"param":`...)
	if e.Param == "" {
		b = append(b, "null"...)
	} else {
		b = jsonspan.AppendStringStr(b, e.Param)
	}
	b = append(b, `,"code":`...)
	if e.Code == "" {
		b = append(b, "null"...)
	} else {
		b = jsonspan.AppendStringStr(b, e.Code)
	}
	return append(b, "}}"...)
}

// Chain is an ordered, immutable list of compiled rules: the provider rules,
// then the global ones, then those of the caller's key.
type Chain struct {
	rules []*Rule
}

// NewChain concatenates rule lists in the order given.
func NewChain(lists ...[]*Rule) *Chain {
	c := &Chain{}
	for _, l := range lists {
		c.rules = append(c.rules, l...)
	}
	return c
}

// Rules returns the chain's rules in order.
func (c *Chain) Rules() []*Rule { return c.rules }

// Empty reports whether the chain has no rules at all.
func (c *Chain) Empty() bool { return c == nil || len(c.rules) == 0 }

// Begin selects the rules that apply to a request for model and binds them
// to x. It returns false when none applies, so callers can take the
// zero-cost passthrough path.
func (c *Chain) Begin(x *Exchange, model string) bool {
	x.Model = model
	x.rules = x.rules[:0]
	if c == nil {
		return false
	}
	for _, r := range c.rules {
		if r.matches(model, PhaseBoth) {
			x.rules = append(x.rules, r)
		}
	}
	return len(x.rules) > 0
}

// RewriteRequest runs the request phase of the bound rules in order, each
// feeding the next. On error nothing is forwarded, so no rule's partial work
// can leak.
func (x *Exchange) RewriteRequest(body []byte) ([]byte, error) {
	orig := body
	for _, r := range x.rules {
		if r.phase&PhaseRequest == 0 {
			continue
		}
		out, err := r.t.RewriteRequest(x, body)
		if err != nil {
			return nil, err
		}
		if x.Invalid {
			return orig, nil
		}
		if !jsonspan.SameSlice(out, body) {
			x.markApplied(r, PhaseRequest)
		}
		body = out
	}
	return body, nil
}

// WantsResponse reports whether any bound rule needs to see the response.
func (x *Exchange) WantsResponse() bool {
	for _, r := range x.rules {
		if r.phase&PhaseResponse != 0 && r.t.WantsResponse(x) {
			return true
		}
	}
	return false
}

// RewriteResponse runs the response phase over a complete body.
func (x *Exchange) RewriteResponse(body []byte) ([]byte, error) {
	for _, r := range x.rules {
		if r.phase&PhaseResponse == 0 {
			continue
		}
		out, err := r.t.RewriteResponse(x, body)
		if err != nil {
			return nil, err
		}
		if !jsonspan.SameSlice(out, body) {
			x.markApplied(r, PhaseResponse)
		}
		body = out
	}
	return body, nil
}

// trackedTransform is a rule's transform as the engine hands it out: it
// wraps each stream stage so the engine learns which rules changed a stream
// and how a stage ended one.
type trackedTransform struct {
	Transform
	r *Rule
}

func (t trackedTransform) NewStream(x *Exchange) StreamTransform {
	st := t.Transform.NewStream(x)
	if st == nil {
		return nil
	}
	ts := &trackedStream{inner: st, r: t.r, x: x}
	ts.wrapped = ts.forward
	return ts
}

// trackedStream watches one stage. A stage applied to the stream when it
// emitted something other than the event it was given, unchanged, or
// dropped that event. Once that is known the stage runs unwatched, so a
// long stream pays for the checks only until the rule's first change.
type trackedStream struct {
	inner   StreamTransform
	r       *Rule
	x       *Exchange
	emit    Emit
	wrapped Emit

	cur      *Event
	curName  []byte
	curData  []byte
	emitted  int
	detected bool
}

func (t *trackedStream) forward(ev *Event) error {
	t.emitted++
	if !t.detected && (ev != t.cur || !jsonspan.SameSlice(ev.Data, t.curData) || !jsonspan.SameSlice(ev.Name, t.curName)) {
		t.detected = true
		t.x.markApplied(t.r, PhaseResponse)
	}
	return t.emit(ev)
}

func (t *trackedStream) Event(ev *Event, emit Emit) error {
	if t.detected {
		return t.failed(t.inner.Event(ev, emit))
	}
	t.emit = emit
	t.cur, t.curName, t.curData, t.emitted = ev, ev.Name, ev.Data, 0
	err := t.inner.Event(ev, t.wrapped)
	if err == nil && t.emitted == 0 && !t.detected {
		t.detected = true
		t.x.markApplied(t.r, PhaseResponse)
	}
	t.cur = nil
	return t.failed(err)
}

func (t *trackedStream) End(emit Emit) error {
	if t.detected {
		return t.failed(t.inner.End(emit))
	}
	t.emit = emit
	t.cur = nil // anything emitted at the end is the stage's own
	return t.failed(t.inner.End(t.wrapped))
}

func (t *trackedStream) failed(err error) error {
	if err != nil && t.x.streamErr == "" {
		t.x.streamErr = "stream_transform_failed"
		var ab *StreamAbort
		if errors.As(err, &ab) {
			t.x.streamErr = ab.Code
		}
	}
	return err
}
