package caddymodule

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// errStreamAborted fails the upstream copy once a rule has ended a stream.
var errStreamAborted = errors.New("llm_transform: stream ended by the gateway")

type writerMode uint8

const (
	modeUndecided writerMode = iota
	modePass                 // bytes go straight through
	modeStream               // SSE, rewritten event by event
	modeBuffer               // JSON, rewritten once complete
)

// responseWriter feeds an upstream response through the response phase. It
// picks its mode once, when the status line is written, and overrides Write,
// ReadFrom and FlushError so neither a flush nor an io.Copy can bypass the
// rules (ResponseWriterWrapper alone would promote ReadFrom and let
// ResponseController unwrap straight past us).
type responseWriter struct {
	*caddyhttp.ResponseWriterWrapper
	h *Handler
	x *transforms.Exchange

	mode    writerMode
	status  int
	stream  *transforms.Stream
	buf     bytes.Buffer
	tooBig  bool
	written bool
}

func (rw *responseWriter) WriteHeader(status int) {
	if rw.mode != modeUndecided {
		return
	}
	// Informational responses are not the final header; pass them on.
	if status >= 100 && status < 200 {
		rw.ResponseWriter.WriteHeader(status)
		return
	}
	rw.status = status
	rw.mode = rw.pickMode(status)
	hdr := rw.Header()
	switch rw.mode {
	case modeStream:
		hdr.Del("Content-Length")
		hdr.Del("Accept-Ranges")
		hdr.Del("ETag")
		rw.ResponseWriter.WriteHeader(status)
	case modeBuffer:
		// Written in finish, once the rewritten length is known.
	default:
		rw.ResponseWriter.WriteHeader(status)
	}
}

func (rw *responseWriter) pickMode(status int) writerMode {
	// The upstream's own errors are the client's business, untouched.
	if status < 200 || status > 299 {
		return modePass
	}
	hdr := rw.Header()
	if ce := hdr.Get("Content-Encoding"); ce != "" && ce != "identity" {
		rw.h.logger.Warn("upstream response is encoded despite Accept-Encoding: identity; passing it through unmodified",
			zap.String("content_encoding", ce))
		return modePass
	}
	mt, _, _ := mime.ParseMediaType(hdr.Get("Content-Type"))
	switch {
	case mt == "text/event-stream":
		rw.stream = rw.x.NewStream()
		if rw.stream == nil {
			return modePass
		}
		return modeStream
	case mt == "application/json" || (len(mt) > 5 && mt[len(mt)-5:] == "+json"):
		return modeBuffer
	}
	return modePass
}

func (rw *responseWriter) Write(p []byte) (int, error) {
	if rw.mode == modeUndecided {
		rw.WriteHeader(http.StatusOK)
	}
	switch rw.mode {
	case modeStream:
		err := rw.stream.Write(p)
		if out := rw.stream.Output(); len(out) > 0 {
			if _, werr := rw.ResponseWriter.Write(out); werr != nil {
				return 0, werr
			}
		}
		if rw.stream.Stopped() {
			// The client has the error event; flush it, then fail the copy
			// so reverse_proxy stops reading (and the provider stops
			// billing) a stream nobody will see.
			rw.h.logger.Debug("stream ended by the gateway", zap.Error(err))
			_ = http.NewResponseController(rw.ResponseWriter).Flush()
			return len(p), errStreamAborted
		}
		return len(p), nil
	case modeBuffer:
		if rw.tooBig {
			return len(p), nil
		}
		if int64(rw.buf.Len()+len(p)) > rw.h.MaxBodySize {
			rw.tooBig = true
			rw.buf.Reset()
			return len(p), nil
		}
		return rw.buf.Write(p)
	}
	return rw.ResponseWriter.Write(p)
}

// ReadFrom routes io.Copy through Write; the embedded wrapper's ReadFrom
// would hand the raw reader to the inner writer.
func (rw *responseWriter) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{rw}, r)
}

// FlushError pushes out what is complete. Half an event is never flushed:
// it stays in the parser until its terminating blank line arrives.
func (rw *responseWriter) FlushError() error {
	if rw.mode == modeBuffer {
		return nil
	}
	if rw.mode == modeUndecided {
		rw.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(rw.ResponseWriter).Flush()
}

// Flush is for callers that still type-assert http.Flusher.
func (rw *responseWriter) Flush() { _ = rw.FlushError() }

// finish completes the response after the upstream handler returned without
// error. On error (or a panic such as http.ErrAbortHandler) it is not called,
// so nothing is written to a response that was already abandoned.
func (rw *responseWriter) finish() error {
	switch rw.mode {
	case modeStream:
		err := rw.stream.Close()
		if out := rw.stream.Output(); len(out) > 0 {
			if _, werr := rw.ResponseWriter.Write(out); werr != nil {
				return werr
			}
		}
		if err != nil {
			rw.h.logger.Debug("stream ended by the gateway", zap.Error(err))
		}
		return nil
	case modeBuffer:
		if rw.tooBig {
			return writeError(rw.ResponseWriter, &transforms.Error{
				Status:  http.StatusBadGateway,
				Type:    "server_error",
				Code:    "response_too_large",
				Message: fmt.Sprintf("upstream response exceeds the gateway's max_body_size of %d bytes", rw.h.MaxBodySize),
			})
		}
		body := rw.buf.Bytes()
		if out, err := rw.x.RewriteResponse(body); err != nil {
			rw.h.logger.Error("response rewrite failed", zap.Error(err))
			metrics.rejections.WithLabelValues("transform_failed").Inc()
			return writeError(rw.ResponseWriter, &transforms.Error{
				Status: http.StatusBadGateway, Type: "server_error", Code: "transform_failed", Message: err.Error(),
			})
		} else {
			body = out
		}
		rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
		rw.ResponseWriter.WriteHeader(rw.status)
		_, err := rw.ResponseWriter.Write(body)
		return err
	}
	return nil
}

// writerOnly hides ReadFrom so io.Copy uses Write.
type writerOnly struct{ io.Writer }

// Interface guards
var (
	_ http.ResponseWriter             = (*responseWriter)(nil)
	_ io.ReaderFrom                   = (*responseWriter)(nil)
	_ interface{ FlushError() error } = (*responseWriter)(nil)
	_ http.Flusher                    = (*responseWriter)(nil)
)
