// Package caddymodule is the Caddy glue of caddy-llm-transform: the
// http.handlers.llm_transform handler, its Caddyfile directive, and the
// response writer that feeds upstream responses through the rule engine.
// Importing it registers everything.
package caddymodule

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

func init() {
	caddy.RegisterModule(Handler{})
}

const (
	defaultMaxBodySize   = 32 << 20
	defaultMaxCallBuffer = 8 << 20
)

// Handler rewrites LLM API traffic with an ordered list of rules: tool
// definitions, history and tool_choice on the way to the upstream, and the
// upstream's tool calls on the way back, in JSON bodies and SSE streams.
// Traffic no rule touches passes through byte for byte.
type Handler struct {
	// The API the routed requests speak: "responses",
	// "chat_completions", "messages" (Anthropic's), or "auto" (the
	// default), which picks by the path suffix /responses,
	// /chat/completions or /v1/messages and passes anything else through
	// untouched. Errors the gateway answers itself come in the client's
	// protocol's shape.
	Protocol string `json:"protocol,omitempty"`

	// The most bytes of a request body read for rewriting, and of a non-streaming
	// response body buffered for rewriting; for a compressed
	// body it caps both the bytes received and the bytes decoded. A request
	// that announces a larger body is refused with 413 before its body is
	// read, and one that turns out larger when it is read. Must be positive;
	// 0, the same as absent, means the default: 32 MiB.
	MaxBodySize int64 `json:"max_body_size,omitempty"`

	// The most argument bytes held for one tool call in a stream, converted
	// by a rule or built by a bridge. A call that grows past it ends the stream with an error
	// event whose code is max_call_buffer_exceeded. Must be positive; 0,
	// the same as absent, means the default: 8 MiB.
	MaxCallBuffer int64 `json:"max_call_buffer,omitempty"`

	// The deepest nesting of a request body the rules read. When a rule
	// is bound to the request, a deeper body, like any body that is not
	// JSON (NaN and Infinity included), is refused with a 400 whose code
	// is invalid_json, and nothing reaches the upstream. 0, the same as
	// absent, means the default and maximum: 1000, the scanner's own
	// limit. The depth is checked in one flat pass before any rule walks
	// the body.
	MaxJSONDepth int `json:"max_json_depth,omitempty"`

	// The most upstream requests rules may add to one client request
	// (gateway rounds: tools_preflight's re-asks), across every rule that
	// takes them. 0, the same as absent, means the default: 3; -1 allows
	// none.
	MaxRounds int `json:"max_rounds,omitempty"`

	// The most wall time the added rounds of one request may take, from
	// the first round's start; a round still running then is cut and
	// counts as failed. 0, the same as absent, means the default: 60s.
	MaxRoundTime caddy.Duration `json:"max_round_time,omitempty"`

	// The rules of this handler, the provider scope. Requests go through
	// them in list order, then through the global rules and the rules of
	// the caller's API key from the llm_transform app; responses come back
	// through the same rules in reverse, so each rule undoes its own work
	// after every rule nearer the upstream has undone theirs.
	Rules []transforms.RuleConfig `json:"rules,omitempty"`

	// Adds an X-LLM-Transform-Explain response header that sums up
	// what the rules did to the request: the rules applied, the counts of
	// converted and restored calls, the rounds, and the decisions taken.
	// A stream, whose header goes out before its answer, also gets a
	// trailer of that name with the whole exchange. It shows tool names,
	// never bodies or keys. Default: false.
	Explain bool `json:"explain,omitempty"`

	protocol transforms.Protocol
	logger   *zap.Logger

	// Compiled at Provision and never changed afterwards: a request reads
	// the chain it picked for its whole life, so a reload, which provisions
	// a new Handler, cannot change the rules under a stream in flight.
	provider   []*transforms.Rule
	global     []*transforms.Rule
	chain      *transforms.Chain // provider, then global rules
	keys       []keyChain
	keySources []string
	anyRules   bool

	// Where the admin endpoint lists the handler: in the registry of its
	// config's app, which Cleanup takes it off.
	server   string
	index    int
	registry *handlerRegistry
}

// keyChain is the chain of requests that carry one API key.
type keyChain struct {
	sum   [sha256.Size]byte
	label string
	rules []*transforms.Rule
	chain *transforms.Chain // provider, global, then the key's rules
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_transform",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision compiles the rules once; requests only read the result, which a
// reload replaces wholesale, so streams in flight keep the rules they began
// with.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	switch h.Protocol {
	case "", "auto":
		h.protocol = transforms.ProtocolUnknown
	case "responses":
		h.protocol = transforms.ProtocolResponses
	case "chat_completions":
		h.protocol = transforms.ProtocolChat
	case "messages":
		h.protocol = transforms.ProtocolMessages
	default:
		return fmt.Errorf("protocol %q: want auto, responses, chat_completions or messages", h.Protocol)
	}
	if h.MaxBodySize == 0 {
		h.MaxBodySize = defaultMaxBodySize
	}
	if h.MaxCallBuffer == 0 {
		h.MaxCallBuffer = defaultMaxCallBuffer
	}
	var err error
	if h.provider, err = transforms.Compile(ctx, h.Rules, transforms.ScopeProvider, ""); err != nil {
		return err
	}
	srv, inServer := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	app, err := appFor(ctx, inServer)
	if err != nil {
		return err
	}
	if app != nil {
		// The app has compiled its rules once for every handler.
		h.global = app.global
		h.keySources = app.KeySources
		for _, k := range app.keys {
			h.keys = append(h.keys, keyChain{sum: k.sum, label: k.label, rules: k.compiled,
				chain: transforms.NewChain(h.provider, h.global, k.compiled)})
		}
	}
	h.chain = transforms.NewChain(h.provider, h.global)
	if err := h.chain.CheckOrder(); err != nil {
		return err
	}
	for _, k := range h.keys {
		if err := k.chain.CheckOrder(); err != nil {
			return fmt.Errorf("api_key %s: %w", k.label, err)
		}
	}
	h.anyRules = !h.chain.Empty()
	for _, k := range h.keys {
		h.anyRules = h.anyRules || !k.chain.Empty()
	}
	if err := registerMetrics(ctx.GetMetricsRegistry()); err != nil {
		return err
	}
	// Last, so a failed Provision leaves nothing listed.
	if inServer {
		h.server = srv.Name()
	}
	if app != nil {
		h.registry = app.handlers
		h.registry.add(h)
	}
	return nil
}

// appFor returns the llm_transform app of the handler's config, nil when
// there is none. A handler of a server gets one even when the config does
// not configure it, so that the admin endpoint lists it; Caddy creates it
// with no rules, as the http app does the apps it needs. A handler
// provisioned outside a server, as tests do with a bare context, may have
// no config to create it in, and uses the app only when it is configured.
func appFor(ctx caddy.Context, inServer bool) (*App, error) {
	var app any
	var err error
	if inServer {
		app, err = ctx.App("llm_transform")
	} else {
		app, err = ctx.AppIfConfigured("llm_transform")
	}
	switch {
	case err == nil:
		return app.(*App), nil
	case errors.Is(err, caddy.ErrNotConfigured):
		return nil, nil
	}
	return nil, err
}

// Validate checks limits that Provision cannot default.
func (h *Handler) Validate() error {
	if h.MaxBodySize < 0 {
		return fmt.Errorf("max_body_size must be positive, got %d", h.MaxBodySize)
	}
	if h.MaxCallBuffer < 0 {
		return fmt.Errorf("max_call_buffer must be positive, got %d", h.MaxCallBuffer)
	}
	if h.MaxJSONDepth < 0 || h.MaxJSONDepth > jsonspan.MaxDepth {
		return fmt.Errorf("max_json_depth must be between 1 and %d, got %d", jsonspan.MaxDepth, h.MaxJSONDepth)
	}
	if h.MaxRounds < -1 {
		return fmt.Errorf("max_rounds must be -1 (none), 0 (the default) or more, got %d", h.MaxRounds)
	}
	if h.MaxRoundTime < 0 {
		return fmt.Errorf("max_round_time must be positive, got %v", time.Duration(h.MaxRoundTime))
	}
	return nil
}

// Cleanup only takes the handler off the admin listing. It runs while
// streams that began on this config may still be in flight, so it releases
// nothing they read: compiled rules are plain values that the requests
// holding them keep alive.
func (h *Handler) Cleanup() error {
	if h.registry != nil {
		h.registry.remove(h)
	}
	return nil
}

// chainFor picks the chain of the caller's key, or the provider and global
// rules when the request carries no configured key. Ambiguous credentials
// get an error to send instead.
func (h *Handler) chainFor(r *http.Request) (*transforms.Chain, *transforms.Error) {
	if len(h.keys) == 0 {
		return h.chain, nil
	}
	key, ok := callerKey(r, h.keySources)
	if !ok {
		return nil, &transforms.Error{
			Status:  http.StatusUnauthorized,
			Type:    "invalid_request_error",
			Code:    "ambiguous_api_key",
			Message: "the request carries several API keys that differ (" + strings.Join(h.keySources, ", ") + "); send one",
		}
	}
	if key == "" {
		return h.chain, nil
	}
	sum := sha256.Sum256([]byte(key))
	if i := matchKey(h.keys, &sum); i >= 0 {
		return h.keys[i].chain, nil
	}
	return h.chain, nil
}

func (h *Handler) protocolFor(r *http.Request) transforms.Protocol {
	if h.protocol != transforms.ProtocolUnknown {
		return h.protocol
	}
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case strings.HasSuffix(p, "/responses"):
		return transforms.ProtocolResponses
	case strings.HasSuffix(p, "/chat/completions"):
		return transforms.ProtocolChat
	case strings.HasSuffix(p, "/v1/messages"), strings.HasSuffix(p, "/v1/messages/count_tokens"):
		// Anthropic's paths, under any prefix: a bare /messages would
		// take in OpenAI's /v1/threads/{id}/messages. (Claude Code adds
		// ?beta=true, no part of the path.) count_tokens has a Messages
		// body; a bridge answers it itself.
		return transforms.ProtocolMessages
	}
	return transforms.ProtocolUnknown
}

// ServeHTTP runs a request through the rules bound to it, and the
// upstream's response back through them; a request no rule binds passes
// through untouched.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	proto, chain, refusal := h.selectChain(r)
	if refusal != nil {
		return reject(w, refusal, proto)
	}
	if chain == nil {
		return next.ServeHTTP(w, r)
	}
	// The body's buffers, read and rewritten, go back to their pools once
	// this handler is done and every reader of the body has been closed.
	lease := &bodyLease{}
	lease.acquire()
	defer lease.release()
	body, err := h.leaseBody(r, lease)
	if err != nil {
		return refuseBody(w, r, err, proto)
	}
	x := h.newExchange(r, proto)
	if h.Explain {
		w = newExplainWriter(w, x)
	}
	model, refusal := h.requestModel(chain, x, body)
	if refusal != nil {
		return reject(w, refusal, proto)
	}
	if !chain.Begin(x, model) {
		return next.ServeHTTP(w, r)
	}
	lease.x = x // its rewritten bodies go back with the lease
	// Deferred so that streams are counted when they end, also when the
	// proxy aborts them with a panic.
	defer observe(r, x)
	final, err := h.rewriteRequest(r, x, body, lease)
	if err != nil {
		return h.refuseRewrite(w, err, proto)
	}
	if x.AnswersLocally() {
		a, _ := x.LocalAnswer(final.Bytes())
		// A rule answers this request itself: the upstream never sees it.
		w.Header().Set("Content-Type", a.ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(a.Body)))
		w.WriteHeader(a.Status)
		_, err := w.Write(a.Body)
		return err
	}
	if !x.WantsResponse() {
		return next.ServeHTTP(w, r)
	}
	return h.forward(w, r, next, x, lease)
}

// selectChain picks the rules for a request. No chain means the request
// passes through untouched: it is not a POST of an API the rules know, or
// neither the handler nor the caller's key has rules. A refusal answers
// ambiguous credentials, which must not choose a key's rules.
func (h *Handler) selectChain(r *http.Request) (transforms.Protocol, *transforms.Chain, *transforms.Error) {
	proto := h.protocolFor(r)
	if proto == transforms.ProtocolUnknown || r.Method != http.MethodPost || !h.anyRules || r.Body == nil {
		return proto, nil, nil
	}
	chain, refusal := h.chainFor(r)
	if refusal != nil {
		return proto, nil, refusal
	}
	if chain.Empty() {
		return proto, nil, nil
	}
	return proto, chain, nil
}

// leaseBody reads the body into buffers the lease owns and puts it back as
// the request's body, so the upstream gets it unchanged when no rule
// rewrites it, and a retrying proxy can read it again.
func (h *Handler) leaseBody(r *http.Request, lease *bodyLease) ([]byte, error) {
	body, err := h.readBody(r, lease)
	if err != nil {
		return nil, err
	}
	metrics.buffered.WithLabelValues("request_body").Observe(float64(len(body)))
	setLeasedBody(r, body, lease)
	return body, nil
}

// refuseBody answers a body that could not be read: in the client's error
// format when the gateway refused it, with a plain 400 when reading it
// failed.
func refuseBody(w http.ResponseWriter, r *http.Request, err error, proto transforms.Protocol) error {
	var te *transforms.Error
	if !errors.As(err, &te) {
		return caddyhttp.Error(http.StatusBadRequest, err)
	}
	if te.Status == http.StatusRequestEntityTooLarge && r.ProtoMajor == 1 {
		// Otherwise net/http reads up to 256 KiB of a body nobody
		// wants before it answers, and with Expect: 100-continue
		// asks the client to send it.
		w.Header().Set("Connection", "close")
	}
	return reject(w, te, proto)
}

// newExchange starts the record of what the rules do to one request and its
// response; the limits it carries bound what they may buffer.
func (h *Handler) newExchange(r *http.Request, proto transforms.Protocol) *transforms.Exchange {
	x := transforms.NewExchange(proto, h.limits(), h.logger)
	x.Explain = h.Explain
	x.Replacer, _ = r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	return x
}

// limits is what the handler's options let one exchange hold.
func (h *Handler) limits() transforms.Limits {
	return transforms.Limits{
		MaxCallBuffer: int(h.MaxCallBuffer),
		MaxEvent:      int(h.MaxBodySize),
		MaxDepth:      h.MaxJSONDepth,
		MaxRounds:     h.MaxRounds,
		MaxRoundTime:  time.Duration(h.MaxRoundTime),
	}
}

// requestModel reads the model that rules scoped to models bind by, when
// the chain has such rules. A body whose model cannot be read binds none of
// them, yet may hold one nobody can read: it is refused unless it is JSON,
// rather than let it pass the rules that model would bind. The rules' own
// validating walks refuse a body they cannot read.
func (h *Handler) requestModel(chain *transforms.Chain, x *transforms.Exchange, body []byte) (string, *transforms.Error) {
	if !chain.MatchesModels() {
		return "", nil
	}
	model := transforms.RequestModel(body)
	if model == "" {
		if te := transforms.CheckJSON(body, h.limits()); te != nil {
			x.Decide("request", "reject", te.Message)
			return "", te
		}
	}
	return model, nil
}

// rewriteRequest runs the request rules and makes what they produced the
// body and path the upstream receives.
func (h *Handler) rewriteRequest(r *http.Request, x *transforms.Exchange, body []byte, lease *bodyLease) (*transforms.RequestBody, error) {
	x.SetUpstreamPath(r.URL.Path)
	out, err := x.RewriteRequestBody(body)
	if err != nil {
		return nil, err
	}
	if len(x.Applied()) > 0 { // a rule changed the body
		setLeasedReader(r, out.Len(), out.NewReader, lease)
		if !out.Deferred() && !x.TakesRounds() {
			// Nothing reads the body as the client sent it any more: its
			// buffer can serve the next request while this one is
			// proxied. A large rewritten body is built from it as the
			// upstream reads, instead of held as a second copy.
			lease.releaseRead()
		}
	}
	if p := x.UpstreamPath(); p != r.URL.Path {
		// A bridge changed the protocol and with it the endpoint;
		// reverse_proxy forwards the request's own path.
		r.URL.Path, r.URL.RawPath = p, ""
	}
	if x.ClientProtocol() == transforms.ProtocolMessages && x.UpstreamProtocol() != transforms.ProtocolMessages {
		// Claude Code's ?beta=true is Anthropic's to read; an upstream
		// of another protocol may refuse a query it does not know.
		if q := r.URL.Query(); q.Has("beta") {
			q.Del("beta")
			r.URL.RawQuery = q.Encode()
		}
	}
	return out, nil
}

// refuseRewrite answers a request the rules refused, in the client's error
// format; any other failure of the rewrite is the gateway's own, a 500.
func (h *Handler) refuseRewrite(w http.ResponseWriter, err error, proto transforms.Protocol) error {
	var te *transforms.Error
	if !errors.As(err, &te) {
		return caddyhttp.Error(http.StatusInternalServerError, err)
	}
	h.logger.Debug("request rejected", zap.String("code", te.Code), zap.String("reason", te.Message))
	return reject(w, te, proto)
}

// forward sends the request on with a response writer that runs the
// response through the rules, and counts how the response ended.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, x *transforms.Exchange, lease *bodyLease) error {
	// Rewriting needs the bytes as the upstream wrote them; encode, placed
	// before us, compresses the result for the client.
	r.Header.Set("Accept-Encoding", "identity")
	rw := &responseWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, h: h, x: x}
	// A response that ends without finish must not leave a decoder waiting.
	defer rw.abandon()
	defer func() {
		// reverse_proxy panics with http.ErrAbortHandler when a stream
		// breaks; count it and let the panic go on to the server.
		if p := recover(); p != nil {
			if rw.mode == modeStream {
				metrics.streamErrors.WithLabelValues(stopReason(rw, x, "aborted")).Inc()
			}
			panic(p)
		}
	}()
	if err := next.ServeHTTP(rw, r); err != nil {
		if rw.mode == modeStream {
			metrics.streamErrors.WithLabelValues(stopReason(rw, x, "upstream")).Inc()
		}
		return err
	}
	err := rw.finish()
	if err == nil && x.PendingRound() != nil {
		err = h.runRounds(rw, r, next, x, lease)
	}
	if h.Explain && rw.mode == modeStream {
		// A stream's explain header went out before its answer: a
		// trailer of the same name sums up the whole exchange, its
		// restorations and rounds included.
		w.Header().Set(http.TrailerPrefix+ExplainHeader, explain(x))
	}
	observeResponse(rw, x)
	return err
}

// observeResponse counts a response the upstream finished: the size of a
// buffered body, or why the gateway refused it or stopped its stream.
func observeResponse(rw *responseWriter, x *transforms.Exchange) {
	switch {
	case rw.mode == modeBuffer && rw.tooBig:
		metrics.rejections.WithLabelValues("response_too_large").Inc()
	case rw.mode == modeBuffer:
		metrics.buffered.WithLabelValues("response_body").Observe(float64(rw.buf.Len()))
	case rw.mode == modeStream && rw.stream.Stopped():
		metrics.streamErrors.WithLabelValues(stopReason(rw, x, "")).Inc()
	}
}

// stopReason names why a stream ended early. A stream the gateway stopped
// (a rule's abort, or an oversized event) fails the upstream copy on
// purpose, so reverse_proxy's abort then carries the gateway's reason, not
// its own.
func stopReason(rw *responseWriter, x *transforms.Exchange, otherwise string) string {
	if rw.stream == nil || !rw.stream.Stopped() {
		return otherwise
	}
	if reason := x.StreamError(); reason != "" {
		return reason
	}
	return "stream_event_too_large"
}

// observe records one request's rule work in metrics and, when Caddy logs
// the request, in its access log entry.
func observe(r *http.Request, x *transforms.Exchange) {
	observeExchange(x)
	extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields)
	if !ok {
		return
	}
	applied := make([]string, 0, len(x.Applied()))
	for _, rule := range x.Applied() {
		applied = append(applied, rule.Scope().String()+"/"+rule.TransformID())
	}
	// Set, not Add: with nested handlers the outermost, which finishes
	// last, reports, and the entry never carries a key twice.
	extra.Set(zap.Strings("llm_transform_rules", applied))
	c := x.Counts()
	extra.Set(zap.Int("llm_transform_converted", c.Converted))
	extra.Set(zap.Int("llm_transform_restored", c.Restored))
}

// readBody reads the whole request body, decoded when it came compressed,
// refusing more than MaxBodySize, before or after decoding, with a 413 and
// an encoding it cannot decode with a 415, in the client's error format.
func (h *Handler) readBody(r *http.Request, lease *bodyLease) ([]byte, error) {
	tooLarge := &transforms.Error{
		Status:  http.StatusRequestEntityTooLarge,
		Type:    "invalid_request_error",
		Code:    "request_too_large",
		Message: fmt.Sprintf("request body exceeds the gateway's max_body_size of %d bytes", h.MaxBodySize),
	}
	if r.ContentLength > h.MaxBodySize {
		return nil, tooLarge
	}
	b, pooled, err := readLimited(r.Body, h.MaxBodySize, r.ContentLength)
	var mbe *http.MaxBytesError
	if errors.Is(err, errTooLarge) || errors.As(err, &mbe) {
		return nil, tooLarge
	}
	if err != nil {
		return nil, err
	}
	enc := r.Header.Values("Content-Encoding")
	if len(enc) == 0 {
		lease.keep(pooled)
		return b, nil
	}
	// Decoded into a buffer of its own: the compressed one is done with.
	defer putRead(pooled)
	// The rules must see what the upstream will parse: a compressed body
	// they cannot read would carry its custom tools past them.
	var dec []byte
	if len(enc) == 1 {
		dec, err = decodeAll(enc[0], bytes.NewReader(b), h.MaxBodySize)
	} else {
		err = errUnsupportedEncoding
	}
	switch {
	case errors.Is(err, errTooLarge):
		return nil, tooLarge
	case err != nil:
		return nil, &transforms.Error{
			Status:  http.StatusUnsupportedMediaType,
			Type:    "invalid_request_error",
			Code:    "unsupported_content_encoding",
			Message: fmt.Sprintf("the gateway cannot decode a request body with Content-Encoding %q; send it as gzip, zstd or uncompressed", strings.Join(enc, ", ")),
		}
	}
	r.Header.Del("Content-Encoding")
	return dec, nil
}

// bodyLease hands a request's pooled buffers back once its count drops to
// zero: one for the handler, one for each reader of the request body.
// net/http may close, and so read, a request body after RoundTrip returns,
// so the handler returning is not enough.
type bodyLease struct {
	n    atomic.Int32
	x    *transforms.Exchange // its rewritten bodies, once it exists
	read *[]byte              // the read buffer, when pooled
}

func (l *bodyLease) acquire() { l.n.Add(1) }

func (l *bodyLease) keep(read *[]byte) { l.read = read }

// releaseRead hands the read buffer back early, once the body that goes
// upstream is the rewritten one.
func (l *bodyLease) releaseRead() {
	putRead(l.read)
	l.read = nil
}

func (l *bodyLease) release() {
	if l.n.Add(-1) == 0 {
		if l.x != nil {
			l.x.Release()
		}
		putRead(l.read)
	}
}

// leasedBody is a request body reader that ends its hold on the lease when
// closed (once: transports may close twice). A transport may close the body
// on one goroutine while it reads it on another (HTTP/2 does, when the
// upstream answers early): Close waits for a Read under way, since the
// lease's release hands back what the read uses (the client's bytes, and
// the walk a deferred body's replacements are written from), and a Read
// after Close finds the body closed.
type leasedBody struct {
	io.Reader
	mu     sync.Mutex
	closed bool
	lease  *bodyLease
}

var errBodyClosed = errors.New("llm_transform: read on a closed request body")

func (b *leasedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errBodyClosed
	}
	return b.Reader.Read(p)
}

func (b *leasedBody) Close() error {
	b.mu.Lock()
	was := b.closed
	b.closed = true
	b.mu.Unlock()
	if !was {
		b.lease.release()
	}
	return nil
}

func setLeasedBody(r *http.Request, b []byte, l *bodyLease) {
	setLeasedReader(r, len(b), func() io.Reader { return bytes.NewReader(b) }, l)
}

// setLeasedReader makes the request's body size bytes that newReader
// reads, from the start each time it is called.
func setLeasedReader(r *http.Request, size int, newReader func() io.Reader, l *bodyLease) {
	if old, ok := r.Body.(*leasedBody); ok {
		// The body it replaces will never be read: its hold ends now, or
		// the lease would never come back to zero.
		_ = old.Close()
	}
	open := func() io.ReadCloser {
		l.acquire()
		return &leasedBody{Reader: newReader(), lease: l}
	}
	r.Body = open()
	r.ContentLength = int64(size)
	r.TransferEncoding = nil
	r.Header.Set("Content-Length", strconv.Itoa(size))
	r.GetBody = func() (io.ReadCloser, error) { return open(), nil }
}

// reject answers with a refusal of the gateway or a rule, and counts it by
// its code.
func reject(w http.ResponseWriter, e *transforms.Error, proto transforms.Protocol) error {
	metrics.rejections.WithLabelValues(e.Code).Inc()
	return writeError(w, proto, e)
}

// writeError sends e in the error envelope of the client's protocol.
func writeError(w http.ResponseWriter, proto transforms.Protocol, e *transforms.Error) error {
	body := e.JSONFor(proto)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(e.Status)
	_, err := w.Write(body)
	return err
}

// ExplainHeader is the response header the explain option adds.
const ExplainHeader = "X-LLM-Transform-Explain"

// maxExplain caps the header, well below the 4–8 KiB many clients accept
// for all headers together.
const maxExplain = 1024

// explainWriter sets the explain header when the final status line is
// written. It sits beneath the response rewriter, so a buffered JSON
// response is explained after its rewrite, with its restorations; a stream
// is explained when it starts, with what the request phase did.
type explainWriter struct {
	*caddyhttp.ResponseWriterWrapper
	x    *transforms.Exchange
	done bool
}

func newExplainWriter(w http.ResponseWriter, x *transforms.Exchange) *explainWriter {
	return &explainWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, x: x}
}

func (ew *explainWriter) WriteHeader(status int) {
	if !ew.done && status >= 200 {
		ew.done = true
		ew.Header().Set(ExplainHeader, explain(ew.x))
	}
	ew.ResponseWriter.WriteHeader(status)
}

func (ew *explainWriter) Write(p []byte) (int, error) {
	if !ew.done {
		ew.WriteHeader(http.StatusOK)
	}
	return ew.ResponseWriter.Write(p)
}

// ReadFrom goes through Write, so the header cannot be skipped by an
// io.Copy into the inner writer.
func (ew *explainWriter) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{ew}, r)
}

// FlushError writes the header first: a flush before any body would send
// the status line without it.
func (ew *explainWriter) FlushError() error {
	if !ew.done {
		ew.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(ew.ResponseWriter).Flush()
}

// Flush is for callers that still type-assert http.Flusher.
func (ew *explainWriter) Flush() { _ = ew.FlushError() }

// explain renders the explain header, e.g.
//
//	applied=provider/field_set@request,global/field_custom_tools_to_function@request; converted=2; restored=0; decisions=set_field:tier,convert_definition:apply_patch
func explain(x *transforms.Exchange) string {
	b := make([]byte, 0, 256)
	b = append(b, "applied="...)
	if len(x.Applications()) == 0 {
		b = append(b, '-')
	}
	for i, a := range x.Applications() {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, a.Rule.Scope().String()...)
		b = append(b, '/')
		b = append(b, a.Rule.TransformID()...)
		b = append(b, '@')
		b = append(b, a.Phase.String()...)
	}
	c := x.Counts()
	b = append(b, "; converted="...)
	b = strconv.AppendInt(b, int64(c.Converted), 10)
	b = append(b, "; restored="...)
	b = strconv.AppendInt(b, int64(c.Restored), 10)
	if rs := x.Rounds(); len(rs) > 0 {
		// round=k kind=… ms=… per round, as one list.
		b = append(b, "; rounds="...)
		for i, rd := range rs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendHeaderSafe(b, rd.Reason)
			b = append(b, ':')
			if rd.Err != nil {
				b = append(b, "failed:"...)
			}
			b = strconv.AppendInt(b, rd.Duration.Milliseconds(), 10)
			b = append(b, "ms"...)
		}
	}
	b = append(b, "; decisions="...)
	if len(x.Decisions()) == 0 {
		b = append(b, '-')
	}
	for i, d := range x.Decisions() {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendHeaderSafe(b, d.Action)
		b = append(b, ':')
		b = appendHeaderSafe(b, d.Tool)
	}
	if len(b) > maxExplain {
		b = append(b[:maxExplain-3], "..."...)
	}
	return string(b)
}

// appendHeaderSafe percent-encodes what could break the header's syntax:
// tool names come from clients and may hold anything.
func appendHeaderSafe(b []byte, s string) []byte {
	const hexDigits = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '_', c == '-', c == '.', c == '/', c == '*':
			b = append(b, c)
		default:
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&0xf])
		}
	}
	return b
}

// Interface guards
var (
	_ http.ResponseWriter             = (*explainWriter)(nil)
	_ io.ReaderFrom                   = (*explainWriter)(nil)
	_ interface{ FlushError() error } = (*explainWriter)(nil)
	_ http.Flusher                    = (*explainWriter)(nil)

	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
