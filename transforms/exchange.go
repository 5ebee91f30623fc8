package transforms

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Limits bound what the engine buffers for one request.
type Limits struct {
	// MaxCallBuffer is the most argument bytes held for one tool call.
	MaxCallBuffer int
	// MaxEvent is the most bytes held for one incomplete SSE event.
	MaxEvent int
	// MaxDepth is the deepest nesting of a request body the rules read;
	// a deeper body is refused with invalid_json (or a DepthRefuser's
	// answer). 0 means, and values above it are capped at, the scanner's
	// own limit (jsonspan.MaxDepth, 1,000).
	MaxDepth int
	// DeferMin is the smallest rewritten request body that
	// RewriteRequestBody leaves unbuilt, to build as the upstream reads it:
	// below it, a copy costs less. 0 means 256 KiB; a negative value
	// defers every size, which tests use to hold small bodies to the bytes
	// large ones get.
	DeferMin int
	// MaxRounds is the most upstream requests rules may add to one
	// client request (StartRound), across every rule that takes rounds.
	// 0 means DefaultMaxRounds; a negative value allows none.
	MaxRounds int
	// MaxRoundTime bounds the wall time added rounds may take, from the
	// first round's start; 0 means DefaultMaxRoundTime.
	MaxRoundTime time.Duration
}

// Exchange is the per-request record. The request and response phases of
// every rule see the same Exchange, so a response can restore exactly what
// this request converted. Nothing in it outlives the request. It is used by
// one goroutine at a time.
type Exchange struct {
	// Model is the request's model, read before any rule ran.
	Model string
	// Limits apply to this request.
	Limits Limits
	// Logger receives debug decision logs; nil disables them.
	Logger *zap.Logger

	// Explain makes Decide keep the decisions for Decisions, so they can be
	// reported back to the client.
	Explain bool

	counts     Counts
	invalid    bool              // a rule or walk found the request body unreadable
	unexpected map[string]string // call key -> the reason it is counted under

	// Replacer resolves Caddy placeholders for rules with conditions on
	// the request; the handler sets the request's own. Nil resolves only
	// the global placeholders.
	Replacer *caddy.Replacer

	client Protocol
	// local is the answer a rule gives itself (AnswerLocally).
	local func([]byte) LocalAnswer
	// protos[i] is the protocol of the request body as bound rule i gets
	// it; protos[len(rules)] is the upstream's.
	protos []Protocol
	rules  []*Rule
	// pos is the bound rule running now, and response whether it runs its
	// response phase: together they say which side's protocol it sees.
	pos      int
	response bool
	path     string

	orig      []byte   // the client's request body
	echo      echoSnap // the client's tools and tool_choice, for responses
	records   map[any]any
	tools     ToolMap
	walks     []*ToolWalk // of the rule running now
	applied   []*Rule
	apps      []Application
	decisions []Decision
	pooled    []*[]byte
	// deferAt is the rule whose rewrite may be left unbuilt (see
	// RewriteRequestBody), -1 for none; deferred is that rewrite.
	deferAt   int
	deferred  *RequestBody
	streamErr string
	callBufs  []int
	// The head of the upstream event a stream is handling, read once: the
	// call tracker and the engine's numbering both look at every event's.
	head eventHead

	// Rounds (rounds.go): the round asked for and not yet sent, those
	// sent, which bound rules take rounds on this request (nil until
	// asked), and the join of a JSON answer's rounds.
	round          *Round
	rounds         []*Round
	takers         []bool
	itemsRewritten bool
	jsonJoins      map[int]*jsonJoin // by the rule that takes the rounds
	tallies        []Tally
	// filterGen changes when a stage starts handling event types it
	// declared it left alone: the stream forgets what it passes unasked.
	filterGen uint32
	// answerEnded: a joiner handed the stream's end on (AnswerEnded).
	answerEnded bool
}

// eventHead is the head of one event's data (its type and
// sequence_number), keyed by the data's address: valid while the event is
// handled, as its bytes are. known says typ and seq were read, in one walk
// whatever the order of the members; ok that they lead the event the way
// OpenAI writes them, which the fast paths that work on bytes need.
type eventHead struct {
	data      []byte
	typ, seq  jsonspan.Span
	ok, known bool
	// members are the event's top-level members, when the general walk
	// read them (any layout but OpenAI's): stages look their fields up
	// here rather than walk the event again.
	members []jsonspan.Member
	indexed bool
}

// openAIHead is openAIHead, read from the memo when d is the event being
// handled.
func (x *Exchange) openAIHead(d []byte) (typ, seq jsonspan.Span, ok bool) {
	if h := &x.head; h.data != nil && jsonspan.SameSlice(d, h.data) {
		return h.typ, h.seq, h.ok
	}
	return openAIHead(d)
}

// eventFields is jsonspan.ObjectFields for the top level of an event: from
// the memo's members when d is the event being handled and the engine
// read it member by member, in one walk otherwise.
func (x *Exchange) eventFields(d []byte, names []string, out []jsonspan.Span) {
	if x == nil || !x.head.indexed || !jsonspan.SameSlice(d, x.head.data) {
		jsonspan.ObjectFields(d, 0, names, out)
		return
	}
	for k := range out {
		out[k] = jsonspan.NoSpan()
	}
	for _, m := range x.head.members {
		for k, n := range names {
			if out[k].Start < 0 && jsonspan.KeyIs(d, m.Key, n) {
				out[k] = m.Value
			}
		}
	}
}

// headOf is head, read from the memo when d is the event being handled.
func (x *Exchange) headOf(d []byte) (typ, seq jsonspan.Span) {
	if h := &x.head; h.known && jsonspan.SameSlice(d, h.data) {
		return h.typ, h.seq
	}
	return head(d)
}

// NewExchange prepares the record for one request in the client's protocol.
func NewExchange(client Protocol, limits Limits, logger *zap.Logger) *Exchange {
	return &Exchange{client: client, Limits: limits, Logger: logger, pos: -1, deferAt: -1}
}

// ClientProtocol is the protocol the client speaks.
func (x *Exchange) ClientProtocol() Protocol { return x.client }

// UpstreamProtocol is the protocol the upstream gets: the client's, unless
// a bound rule bridges it.
func (x *Exchange) UpstreamProtocol() Protocol {
	if len(x.protos) == 0 {
		return x.client
	}
	return x.protos[len(x.protos)-1]
}

// Protocol is the protocol of the body the running rule is handed: on the
// request, the one it gets from the rule before it; on the response, the
// one it gets from the rule after it (the upstream side). Only a bridge
// sees two different protocols, and it knows both.
func (x *Exchange) Protocol() Protocol {
	if x.pos < 0 || x.pos >= len(x.rules) {
		return x.client
	}
	if x.response {
		return x.protos[x.pos+1]
	}
	return x.protos[x.pos]
}

// SetUpstreamPath records the path the request goes to; the handler sets
// the client's path before the rules run.
func (x *Exchange) SetUpstreamPath(p string) { x.path = p }

// UpstreamPath is the path the request goes to after the request phase.
func (x *Exchange) UpstreamPath() string { return x.path }

// ReplacePathSuffix changes the upstream path's final segments from suffix
// to repl, keeping any prefix (a gateway's /openai/v1/responses becomes
// /openai/v1/chat/completions), and reports whether the path had suffix.
func (x *Exchange) ReplacePathSuffix(suffix, repl string) bool {
	p := strings.TrimSuffix(x.path, "/")
	if !strings.HasSuffix(p, suffix) {
		return false
	}
	x.path = p[:len(p)-len(suffix)] + repl
	return true
}

// LocalAnswer is a response the gateway gives a request itself, without
// calling the upstream.
type LocalAnswer struct {
	Status      int
	ContentType string
	Body        []byte
}

// AnswerLocally has the gateway answer this request itself once every
// request phase has run (a bridge answering Anthropic's count_tokens for
// an upstream that has none): answer gets the body as the last rule left
// it, and the upstream is never called. The last rule to ask wins.
func (x *Exchange) AnswerLocally(answer func(final []byte) LocalAnswer) { x.local = answer }

// LocalAnswer is the answer a rule asked the gateway to give for final,
// the body the request phases produced; ok is false when the request goes
// upstream.
func (x *Exchange) LocalAnswer(final []byte) (a LocalAnswer, ok bool) {
	if x.local == nil {
		return LocalAnswer{}, false
	}
	return x.local(final), true
}

// AnswersLocally reports whether a rule asked to answer the request
// itself (LocalAnswer).
func (x *Exchange) AnswersLocally() bool { return x.local != nil }

// Record returns the value stored under key, creating it with mk on first
// use. Transforms keep per-request state here; the key is usually a value
// of a private type, one per rule when rules of one transform must not
// share state.
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

// Tools is the request's tool identity map, shared by all rules.
func (x *Exchange) Tools() *ToolMap { return &x.tools }

// Applied lists the rules that changed this request or its response, in
// the order they first did.
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

// Deciding reports whether decisions go anywhere, so a rule can skip
// composing reasons nobody reads.
func (x *Exchange) Deciding() bool {
	return x.Explain || (x.Logger != nil && x.Logger.Core().Enabled(zapcore.DebugLevel))
}

// CallBuffered records that n argument bytes were held for one tool call,
// for the buffered-bytes histogram.
func (x *Exchange) CallBuffered(n int) { x.callBufs = append(x.callBufs, n) }

// CallBuffers returns what CallBuffered recorded, one entry per call.
func (x *Exchange) CallBuffers() []int { return x.callBufs }

// Counts is what the rules did to one request's tools and calls, for the
// handler's metrics, access log fields and explain header.
type Counts struct {
	// Converted counts the tool definitions, history calls, call outputs
	// and tool_choice selectors rules rewrote into another tool's shape on
	// the way to the upstream: the tool walk counts each node a rule's
	// node edits (Replace, Rename, EditNode…) convert, once the rule's
	// body is rewritten, as the call tracker counts what it restores.
	Converted int
	// Restored counts the upstream's calls given back their client-side
	// shape: the call tracker counts each call once per rule that restores
	// it (a CallRelayer's call is counted by the stage it relays to).
	Restored int
	// PatchInvalid counts restored apply_patch inputs that normalisation
	// could not bring into Codex's grammar (CountPatchInvalid).
	PatchInvalid int
	// UndeclaredCalls counts the response's calls to tools the client
	// never declared, once per call (CountUnexpectedCall).
	UndeclaredCalls int
	// FilteredCalls counts the response's calls to tools a rule filtered
	// out of the request, once per call (CountUnexpectedCall).
	FilteredCalls int
	// DroppedCalls counts the unexpected calls a rule removed from the
	// response (CountUnexpectedCall with dropped).
	DroppedCalls int
	// ArgsUnrestored counts, by reason, calls whose arguments a rule had
	// to give back in the tool's own schema and could not: they reach
	// the client as the upstream sent them (CountArgsUnrestored).
	ArgsUnrestored UnrestoredArgs
}

// UnrestoredArgs counts calls whose arguments could not be given back in
// the tool's own schema, by reason.
type UnrestoredArgs struct {
	// InvalidJSON: the arguments are not JSON.
	InvalidJSON int
	// JSONText: a value the model was to write as JSON text is not.
	JSONText int
	// TooDeep: the arguments nest too deep to be read.
	TooDeep int
}

// Reasons returns the counts by their metric label.
func (u UnrestoredArgs) Reasons() map[string]int {
	return map[string]int{"invalid_json": u.InvalidJSON, "json_text": u.JSONText, "too_deep": u.TooDeep}
}

// Counts returns what the rules have counted so far for this request.
func (x *Exchange) Counts() Counts { return x.counts }

// CountArgsUnrestored records one call whose arguments could not be given
// back in the tool's own schema, by its reason: "invalid_json",
// "json_text" or "too_deep" (UnrestoredArgs).
func (x *Exchange) CountArgsUnrestored(reason string) {
	switch reason {
	case "invalid_json":
		x.counts.ArgsUnrestored.InvalidJSON++
	case "json_text":
		x.counts.ArgsUnrestored.JSONText++
	default:
		x.counts.ArgsUnrestored.TooDeep++
	}
}

// Tally is a count a rule kept for metrics (Exchange.Tally).
type Tally struct {
	// Transform is the rule's transform; Event what it counts
	// ("preflight_invalid"); Label a reason or kind ("schema").
	Transform, Event, Label string
	N                       int
}

// Tally counts one event of the running rule under label, for the
// gateway's metrics: tools_preflight's events have metrics of their own
// (caddy_llm_transform_<event>_total{reason}), any other transform's are
// counted in caddy_llm_transform_rule_events_total{transform,event,label}.
func (x *Exchange) Tally(event, label string) { x.TallyN(event, label, 1) }

// TallyN counts n events of the running rule under label (see Tally).
func (x *Exchange) TallyN(event, label string, n int) {
	tr := ""
	if x.pos >= 0 && x.pos < len(x.rules) {
		tr = x.rules[x.pos].TransformID()
	}
	for i := range x.tallies {
		if t := &x.tallies[i]; t.Transform == tr && t.Event == event && t.Label == label {
			t.N += n
			return
		}
	}
	x.tallies = append(x.tallies, Tally{Transform: tr, Event: event, Label: label, N: n})
}

// Tallies returns what the rules counted with Tally.
func (x *Exchange) Tallies() []Tally { return x.tallies }

// CountPatchInvalid records one restored apply_patch input that
// normalisation could not bring into Codex's grammar.
func (x *Exchange) CountPatchInvalid() { x.counts.PatchInvalid++ }

// CountUnexpectedCall records one of the response's calls to a tool the
// request did not offer: reason "undeclared" for a tool the client never
// declared (Counts.UndeclaredCalls), any other reason, the one a rule
// filtered it for, for a tool removed from the request
// (Counts.FilteredCalls); dropped says the rule removes the call
// (Counts.DroppedCalls). key identifies the call across rules (its call
// id, or item id), "" when it has none: a call counted before under the
// same key, by a rule nearer the upstream, is counted once, under the
// later reason (a rule that filtered the tool knows better than one that
// never saw it). The call is also a decision (drop_unexpected_call or
// pass_unexpected_call on tool, with reason) and a warning in the log.
func (x *Exchange) CountUnexpectedCall(tool ToolID, key, reason string, dropped bool) {
	if key != "" {
		if x.unexpected == nil {
			x.unexpected = map[string]string{}
		}
		prev, ok := x.unexpected[key]
		x.unexpected[key] = reason
		if ok {
			if prev == "undeclared" {
				x.counts.UndeclaredCalls--
			} else {
				x.counts.FilteredCalls--
			}
		}
	}
	if reason == "undeclared" {
		x.counts.UndeclaredCalls++
	} else {
		x.counts.FilteredCalls++
	}
	action := "pass_unexpected_call"
	if dropped {
		x.counts.DroppedCalls++
		action = "drop_unexpected_call"
	}
	x.Decide(tool.Display(), action, reason)
	if x.Logger != nil {
		x.Logger.Warn("llm_transform: upstream called a tool the request did not offer",
			zap.String("tool", tool.Display()), zap.String("reason", reason), zap.Bool("dropped", dropped))
	}
}

// MarkToolsChanged records that the rule changed the tools or tool_choice
// the client declared, so that responses echoing them get the client's
// back. ToolWalk edits that say so mark it themselves.
func (x *Exchange) MarkToolsChanged() { x.echo.needed = true }

// ClientBody is the request body as the client sent it, before any rule.
func (x *Exchange) ClientBody() []byte { return x.orig }

// FailStream records that a stream stage ended its response with the
// error code (e.g. a bridge that wrote the upstream's failure in its
// client's terms). The first failure recorded stands. A stage that ends
// the stream by returning an error needs no call: a *StreamAbort's code,
// or stream_transform_failed, is recorded for it.
func (x *Exchange) FailStream(code string) {
	if x.streamErr == "" {
		x.streamErr = code
	}
}

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

// Begin selects the rules of c that apply to a request for model and binds
// them to x, working out the protocol on each side of every rule. It
// returns false when none applies, so callers can take the zero-cost
// passthrough path.
func (c *Chain) Begin(x *Exchange, model string) bool {
	x.Model = model
	x.rules = x.rules[:0]
	x.protos = x.protos[:0]
	if c == nil {
		return false
	}
	p := x.client
	for _, r := range c.rules {
		if !r.matches(model) {
			continue
		}
		x.rules = append(x.rules, r)
		x.protos = append(x.protos, p)
		if r.bridge != nil {
			p = r.bridge.BridgedProtocol(p)
		}
	}
	x.protos = append(x.protos, p)
	return len(x.rules) > 0
}

// DepthRefuser is implemented by transforms that name a body nested past
// the gateway's limit more precisely than invalid_json when the nesting
// is in what they own (a schema too deep to normalise). The engine asks
// the bound request rules in order; the first answer wins.
type DepthRefuser interface {
	// RefuseDepth returns the rejection for body nested past limit at
	// byte offset at, or nil to leave it to the engine.
	RefuseDepth(body []byte, at, limit int) *Error
}

func (x *Exchange) tooDeepFor(body []byte, at, limit int) *Error {
	for _, r := range x.rules {
		if dr, ok := r.req.(DepthRefuser); ok && r.phase&PhaseRequest != 0 {
			if e := dr.RefuseDepth(body, at, limit); e != nil {
				return e
			}
		}
	}
	return tooDeep(at, limit)
}

// readsRequest reports whether a bound rule has a request phase: only
// then is the body read, and refused when it cannot be.
func (x *Exchange) readsRequest() bool {
	for _, r := range x.rules {
		if r.phase&PhaseRequest != 0 {
			return true
		}
	}
	return false
}

// unreadProtocol is the refusal of a request one of whose bound rules
// would get a body in a protocol it does not read (either phase: its
// response side sees the same protocol); nil when every rule reads its
// side's.
func (x *Exchange) unreadProtocol() *Error {
	for i, r := range x.rules {
		var t any = r.req
		if r.req == nil {
			t = r.resp
		}
		if p := x.protos[i]; !readsProtocol(t, p) {
			return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "rule_protocol_unsupported",
				Message: fmt.Sprintf("rule %s does not read the %s protocol; put it after the bridge that turns %s into what it reads (e.g. after messages_to_chat)", r.TransformID(), p, p)}
		}
	}
	return nil
}

// at positions x on bound rule i for one of its phases.
func (x *Exchange) at(i int, response bool) { x.pos, x.response = i, response }

// RewriteRequest runs the request phase of the bound rules in chain order,
// each feeding the next. On error nothing is forwarded, so no rule's partial
// work can leak.
func (x *Exchange) RewriteRequest(body []byte) ([]byte, error) {
	x.deferAt = -1
	return x.rewriteRequest(body)
}

func (x *Exchange) rewriteRequest(body []byte) ([]byte, error) {
	defer x.at(-1, false)
	x.orig = body
	if e := x.unreadProtocol(); e != nil {
		x.Decide("request", "reject", e.Message)
		return nil, e
	}
	if x.readsRequest() {
		// Nesting is checked in one flat pass before any rule walks the
		// body: a walk that recursed into whatever nesting the client
		// sent could exhaust the stack, and walks that restart their
		// count at each value they skip would miss a body nested past
		// the limit across them.
		d := x.Limits.MaxDepth
		if d <= 0 || d > jsonspan.MaxDepth {
			d = jsonspan.MaxDepth
		}
		if at := jsonspan.DepthOver(body, d); at >= 0 {
			e := x.tooDeepFor(body, at, d)
			x.Decide("request", "reject", e.Message)
			return nil, e
		}
	}
	for i, r := range x.rules {
		if r.phase&PhaseRequest == 0 {
			continue
		}
		x.at(i, false)
		out, err := r.req.RewriteRequest(x, body)
		if x.deferred != nil && (err != nil || x.invalid || out != nil) {
			// Nothing goes upstream as this rule planned it: an error, a
			// body found malformed after all, or (a rule's bug) a result
			// other than the unbuilt one.
			x.deferred = nil
			if err == nil && !x.invalid {
				err = fmt.Errorf("transforms: rule %s returned a body besides its unbuilt rewrite", r.TransformID())
			}
		}
		if x.deferred == nil {
			// A deferred rewrite's replacements read the walk as the body
			// is read: Release lets it go.
			x.releaseWalks()
		}
		if errors.Is(err, ErrInvalidJSON) {
			x.invalid, err = true, nil
		}
		if err != nil {
			return nil, err
		}
		if x.invalid {
			// A rule must act on what it cannot read: nothing goes
			// upstream with the rules skipped.
			return nil, x.invalidJSON(body)
		}
		if !jsonspan.SameSlice(out, body) {
			x.markApplied(r, PhaseRequest)
		}
		body = out
	}
	x.takeEcho()
	return body, nil
}

// RewriteRequestBody is RewriteRequest for a caller that sends the body on
// as a stream, the gateway's handler: when the last rule's rewrite of a
// large body is edits of known lengths, it is not built here but as the
// body is read (RequestBody.NewReader), so the body is held once, as the
// client sent it, instead of twice. Until Release, the returned body may
// read the one passed in.
func (x *Exchange) RewriteRequestBody(body []byte) (*RequestBody, error) {
	x.deferAt = -1
	for i, r := range x.rules {
		if r.phase&PhaseRequest != 0 {
			x.deferAt = i
		}
	}
	out, err := x.rewriteRequest(body)
	x.deferAt = -1
	if err != nil {
		return nil, err
	}
	if d := x.deferred; d != nil {
		x.deferred = nil
		return d, nil
	}
	return &RequestBody{doc: out, size: len(out)}, nil
}

// canDefer reports whether the running rule's rewrite may be left
// unbuilt: it is the last to rewrite the request, for a caller that
// streams the body on.
func (x *Exchange) canDefer() bool {
	return x.deferAt >= 0 && x.pos == x.deferAt && !x.response && x.deferred == nil
}

// RewriteNested runs a rule's request phase inside another rule's: its
// result is the outer rule's input, not the body that goes upstream, so
// it is built whole.
func (x *Exchange) RewriteNested(r RequestRewriter, body []byte) ([]byte, error) {
	at := x.deferAt
	x.deferAt = -1
	defer func() { x.deferAt = at }()
	return r.RewriteRequest(x, body)
}

// deferMin is the smallest rewritten body left unbuilt (Limits.DeferMin).
func (x *Exchange) deferMin() int {
	switch {
	case x.Limits.DeferMin < 0:
		return 0
	case x.Limits.DeferMin == 0:
		return 256 << 10
	}
	return x.Limits.DeferMin
}

// RequestBody is a rewritten request body: built, or a document and the
// edits that make it, applied as the body is read.
type RequestBody struct {
	doc   []byte
	edits []jsonspan.Edit // sorted; none when doc is the body
	size  int
}

// Len is the body's length in bytes.
func (b *RequestBody) Len() int { return b.size }

// Deferred reports whether the body is built only as it is read.
func (b *RequestBody) Deferred() bool { return b.edits != nil }

// Bytes returns the body whole, building a deferred one in a new buffer
// through a reader of its own, so it may run alongside other readers.
func (b *RequestBody) Bytes() []byte {
	if b.edits == nil {
		return b.doc
	}
	out := make([]byte, b.size)
	n, _ := io.ReadFull(b.NewReader(), out)
	return out[:n]
}

// NewReader returns a reader of the body from its start. Readers of a
// deferred body build its replacements each on their own, so several may
// run at once (a retried upstream request).
func (b *RequestBody) NewReader() io.Reader {
	if b.edits == nil {
		return bytes.NewReader(b.doc)
	}
	return jsonspan.NewEditReader(b.doc, b.edits, nil)
}

// WantsResponse reports whether any bound rule needs to see the response.
func (x *Exchange) WantsResponse() bool {
	defer x.at(-1, false)
	if x.echoes() {
		return true
	}
	for i, r := range x.rules {
		x.at(i, true)
		if r.phase&PhaseResponse != 0 && r.resp.WantsResponse(x) {
			return true
		}
	}
	return false
}

// WantsError reports whether a bound rule rewrites the upstream's error
// bodies (an ErrorRewriter whose response phase this request needs).
func (x *Exchange) WantsError() bool {
	defer x.at(-1, false)
	for i, r := range x.rules {
		x.at(i, true)
		if _, ok := r.resp.(ErrorRewriter); ok && r.phase&PhaseResponse != 0 && r.resp.WantsResponse(x) {
			return true
		}
	}
	return false
}

// RewriteErrorStatus runs the ErrorStatusRewriters over an upstream error's
// status, in reverse order as responses go: the status the client gets.
func (x *Exchange) RewriteErrorStatus(status int) int {
	defer x.at(-1, false)
	for i := len(x.rules) - 1; i >= 0; i-- {
		r := x.rules[i]
		sr, ok := r.resp.(ErrorStatusRewriter)
		if !ok || r.phase&PhaseResponse == 0 {
			continue
		}
		x.at(i, true)
		status = sr.RewriteErrorStatus(x, status)
	}
	return status
}

// RewriteError runs the ErrorRewriters over an upstream error body, in
// reverse order as responses go.
func (x *Exchange) RewriteError(status int, body []byte) []byte {
	defer x.at(-1, false)
	for i := len(x.rules) - 1; i >= 0; i-- {
		r := x.rules[i]
		er, ok := r.resp.(ErrorRewriter)
		if !ok || r.phase&PhaseResponse == 0 {
			continue
		}
		x.at(i, true)
		out := er.RewriteError(x, status, body)
		if !jsonspan.SameSlice(out, body) {
			x.markApplied(r, PhaseResponse)
		}
		body = out
	}
	return body
}

// RewriteResponse runs the response phase over a complete body, from the
// rule nearest the upstream back to the client's side. When a rule asks
// for a round (StartRound), it returns nil and no error:
// the caller sends the round (RoundRequest) and hands its answer to
// ResumeResponse.
func (x *Exchange) RewriteResponse(body []byte) ([]byte, error) {
	return x.rewriteResponse(len(x.rules)-1, body)
}

// ResumeResponse carries on the response phase that asked for the round
// sent last, with that round's complete answer: through the rules nearer
// the upstream, then the rule that asked, whose answers of every round
// are joined, then the rest. When the round failed (its Err set; body is
// then ignored), the rule that asked gets its previous answer again. Like
// RewriteResponse it returns nil and no error when a rule asks for another
// round.
func (x *Exchange) ResumeResponse(body []byte) ([]byte, error) {
	rd := x.lastRound()
	if rd == nil || x.jsonJoins[rd.rule] == nil {
		return nil, errors.New("transforms: no round to resume")
	}
	j := x.jsonJoins[rd.rule]
	if rd.Err != nil {
		// The failed round's part is answered again, as if it were the
		// last.
		j.parts = j.parts[:len(j.parts)-1]
		return x.rewriteResponse(rd.rule, j.input)
	}
	return x.rewriteResponse(len(x.rules)-1, body)
}

// jsonJoin is what a JSON answer's rounds leave for the join: the body
// the rule that takes them was handed last, and the part of each earlier
// round's answer it let through.
type jsonJoin struct {
	rule  int
	input []byte
	parts [][]byte
}

func (x *Exchange) rewriteResponse(from int, body []byte) ([]byte, error) {
	defer x.at(-1, false)
	for i := from; i >= 0; i-- {
		r := x.rules[i]
		if r.phase&PhaseResponse == 0 {
			continue
		}
		x.at(i, true)
		out, err := r.resp.RewriteResponse(x, body)
		if err != nil {
			return nil, err
		}
		if x.asked(i) {
			if x.jsonJoins == nil {
				x.jsonJoins = map[int]*jsonJoin{}
			}
			j := x.jsonJoins[i]
			if j == nil {
				j = &jsonJoin{rule: i}
				x.jsonJoins[i] = j
			}
			j.input = body
			j.parts = append(j.parts, out)
			return nil, nil
		}
		if j := x.jsonJoins[i]; j != nil {
			// The rule's rounds are over: its answer is one. Should a rule
			// nearer the client take a round after, this rule's answer to
			// it stands alone, as that rule joins.
			out = joinJSON(x.protos[i], append(j.parts, out))
			delete(x.jsonJoins, i)
		}
		if !jsonspan.SameSlice(out, body) {
			x.markApplied(r, PhaseResponse)
		}
		body = out
	}
	return x.restoreEcho(body), nil
}

// CheckJSON returns the invalid_json rejection for a request body that is
// not JSON the rules can read (RFC 8259: no NaN or Infinity; nested at
// most MaxDepth deep), naming what is wrong and at which byte offset, or
// nil for a body they read. Rules that walk the body check it as they
// go; the handler calls CheckJSON where no rule would read it, so that an
// unreadable body never passes a rule that might have acted on it.
func CheckJSON(body []byte, limits Limits) *Error {
	if jsonspan.Valid(body) {
		if limits.MaxDepth <= 0 || limits.MaxDepth >= jsonspan.MaxDepth {
			return nil
		}
		if at := jsonspan.DepthOver(body, limits.MaxDepth); at >= 0 {
			return tooDeep(at, limits.MaxDepth)
		}
		return nil
	}
	at, reason := jsonspan.Diagnose(body)
	return invalidJSONAt(at, reason)
}

func tooDeep(at, limit int) *Error {
	return invalidJSONAt(at, fmt.Sprintf("nested deeper than %d levels", limit))
}

func invalidJSONAt(at int, reason string) *Error {
	return BadRequest("invalid_json", "", "the request body is not JSON the gateway reads: %s at byte offset %d", reason, at)
}

// ErrInvalidJSON is what a rule's RewriteRequest returns for a body it must
// act on but cannot read as JSON: the engine answers the client 400
// invalid_json, naming what and where, and nothing goes upstream.
var ErrInvalidJSON = errors.New("transforms: the request body is not JSON the gateway can read")

// Unreadable reports whether a rule, or the tool walk, found the request
// body not to be JSON the gateway can read.
func (x *Exchange) Unreadable() bool { return x.invalid }

// invalidJSON is the rejection of a body a rule found unreadable, told in
// the explanation too.
func (x *Exchange) invalidJSON(body []byte) *Error {
	e := CheckJSON(body, Limits{})
	if e == nil {
		// The rule saw a depth or value the scanner reads elsewhere;
		// refuse it all the same.
		e = invalidJSONAt(0, "unreadable")
	}
	x.Decide("request", "reject", e.Message)
	return e
}

// BadRequest is a 400 invalid_request_error with the given code, the
// request member it concerns (param) and a formatted message.
func BadRequest(code, param, format string, a ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: code, Param: param, Message: fmt.Sprintf(format, a...)}
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

// JSONFor renders the error in the client's protocol: Anthropic's
// envelope for Messages, where the gateway's code goes into the message,
// OpenAI's otherwise.
func (e *Error) JSONFor(p Protocol) []byte {
	if p != ProtocolMessages {
		return e.JSON()
	}
	b := []byte(`{"type":"error","error":{"type":`)
	b = jsonspan.AppendStringStr(b, AnthropicErrorType(e.Status))
	b = append(b, `,"message":`...)
	msg := e.Message
	if e.Code != "" {
		msg += " (" + e.Code + ")"
	}
	b = jsonspan.AppendStringStr(b, msg)
	return append(b, "}}"...)
}

// AnthropicErrorType is the Messages API's error type for an HTTP status.
func AnthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

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
