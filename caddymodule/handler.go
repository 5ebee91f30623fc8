// Package caddymodule is the Caddy glue of caddy-llm-transform: the
// http.handlers.llm_transform handler, its Caddyfile directive, and the
// response writer that feeds upstream responses through the rule engine.
// Importing it registers everything.
package caddymodule

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

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
	// Protocol is the API the routed requests speak: "responses",
	// "chat_completions", or "auto" (the default), which picks by the path
	// suffix /responses or /chat/completions and passes anything else
	// through untouched.
	Protocol string `json:"protocol,omitempty"`

	// MaxBodySize caps request bodies read for rewriting, and non-streaming
	// response bodies buffered for rewriting, in bytes. A larger request is
	// refused with 413. Default: 32 MiB.
	MaxBodySize int64 `json:"max_body_size,omitempty"`

	// MaxCallBuffer caps the argument bytes held for one converted tool call
	// in a stream. A call that grows past it ends the stream with an error
	// event whose code is max_call_buffer_exceeded. Default: 8 MiB.
	MaxCallBuffer int64 `json:"max_call_buffer,omitempty"`

	// Rules run in list order on requests and on responses, each seeing the
	// output of the one before.
	Rules []transforms.RuleConfig `json:"rules,omitempty"`

	protocol transforms.Protocol
	chain    *transforms.Chain
	logger   *zap.Logger
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
	default:
		return fmt.Errorf("protocol %q: want auto, responses or chat_completions", h.Protocol)
	}
	if h.MaxBodySize == 0 {
		h.MaxBodySize = defaultMaxBodySize
	}
	if h.MaxCallBuffer == 0 {
		h.MaxCallBuffer = defaultMaxCallBuffer
	}
	rules, err := transforms.Compile(h.Rules, transforms.ScopeProvider, "")
	if err != nil {
		return err
	}
	h.chain = transforms.NewChain(rules)
	return nil
}

// Validate checks limits that Provision cannot default.
func (h *Handler) Validate() error {
	if h.MaxBodySize < 0 {
		return fmt.Errorf("max_body_size must not be negative")
	}
	if h.MaxCallBuffer < 0 {
		return fmt.Errorf("max_call_buffer must not be negative")
	}
	return nil
}

// Cleanup releases nothing a request could still be reading: compiled rules
// are plain values owned by the requests that hold them.
func (h *Handler) Cleanup() error { return nil }

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
	}
	return transforms.ProtocolUnknown
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	proto := h.protocolFor(r)
	if proto == transforms.ProtocolUnknown || r.Method != http.MethodPost || h.chain.Empty() || r.Body == nil {
		return next.ServeHTTP(w, r)
	}
	body, err := h.readBody(r)
	if err != nil {
		var te *transforms.Error
		if errors.As(err, &te) {
			return writeError(w, te)
		}
		return caddyhttp.Error(http.StatusBadRequest, err)
	}
	setBody(r, body)
	x := transforms.NewExchange(proto, transforms.Limits{
		MaxCallBuffer: int(h.MaxCallBuffer),
		MaxEvent:      int(h.MaxBodySize),
	}, h.logger)
	// A body that is not JSON yields no model here, and the rules' own
	// validating walk then hands it upstream untouched.
	if !h.chain.Begin(x, gjson.GetBytes(body, "model").String()) {
		return next.ServeHTTP(w, r)
	}
	// The rewritten body may live in a pooled buffer; the upstream round
	// trip has consumed it by the time next returns.
	defer x.Release()
	out, err := x.RewriteRequest(body)
	if err != nil {
		var te *transforms.Error
		if errors.As(err, &te) {
			h.logger.Debug("request rejected", zap.String("code", te.Code), zap.String("reason", te.Message))
			return writeError(w, te)
		}
		return caddyhttp.Error(http.StatusInternalServerError, err)
	}
	if !sameBytes(out, body) {
		setBody(r, out)
	}
	if !x.WantsResponse() {
		return next.ServeHTTP(w, r)
	}
	// Rewriting needs the bytes as the upstream wrote them; encode, placed
	// before us, compresses the result for the client.
	r.Header.Set("Accept-Encoding", "identity")
	rw := &responseWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, h: h, x: x}
	if err := next.ServeHTTP(rw, r); err != nil {
		return err
	}
	return rw.finish()
}

// readBody reads the whole request body, refusing more than MaxBodySize
// with a 413 in the client's error format.
func (h *Handler) readBody(r *http.Request) ([]byte, error) {
	tooLarge := &transforms.Error{
		Status:  http.StatusRequestEntityTooLarge,
		Type:    "invalid_request_error",
		Code:    "request_too_large",
		Message: fmt.Sprintf("request body exceeds the gateway's max_body_size of %d bytes", h.MaxBodySize),
	}
	if r.ContentLength > h.MaxBodySize {
		return nil, tooLarge
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	n, err := buf.ReadFrom(io.LimitReader(r.Body, h.MaxBodySize+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		return nil, err
	}
	if n > h.MaxBodySize {
		return nil, tooLarge
	}
	return buf.Bytes(), nil
}

func setBody(r *http.Request, b []byte) {
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
	r.TransferEncoding = nil
	r.Header.Set("Content-Length", fmt.Sprint(len(b)))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func writeError(w http.ResponseWriter, e *transforms.Error) error {
	body := e.JSON()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(e.Status)
	_, err := w.Write(body)
	return err
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
