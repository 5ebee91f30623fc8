package caddymodule

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

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

	mode   writerMode
	status int
	stream *transforms.Stream
	// rc flushes the writer under ours; made once, as a stream flushes
	// after every read.
	rc     *http.ResponseController
	buf    bytes.Buffer
	tooBig bool
	// In a stream: whether the header went out with a flush, and whether
	// bytes were written since the last one. reverse_proxy flushes after
	// every read, also when the rules held or dropped all of it.
	flushed, unflushed bool

	// The upstream's Content-Encoding when it compressed the body despite
	// Accept-Encoding: identity, and, in a stream, the decoder the body
	// goes through first.
	encoding string
	dec      *pushDecoder
	// upstreamError: the buffered body is the upstream's error, for the
	// rules that rewrite errors.
	upstreamError bool

	// A stream whose rules send keep-alives while the upstream is silent
	// (transforms.Ticker) is written by the proxy and by a timer: mu
	// serializes them. lastData is when upstream bytes last came; ticking
	// stops (stopTick closed, ticked false) once the stream ends.
	mu       sync.Mutex
	lastData time.Time
	ticking  bool
	stopTick chan struct{}
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
	hdr := rw.Header()
	mt, _, _ := mime.ParseMediaType(hdr.Get("Content-Type"))
	json := mt == "application/json" || (len(mt) > 5 && mt[len(mt)-5:] == "+json")
	mode := modePass
	switch {
	case status < 200 || status > 299:
		// The upstream's own errors are the client's business, untouched,
		// unless a rule puts them in its client's terms (a bridge).
		if status < 400 || !json || !rw.x.WantsError() {
			return modePass
		}
		rw.upstreamError = true
		mode = modeBuffer
	case mt == "text/event-stream":
		if rw.stream = rw.x.NewStream(); rw.stream != nil {
			rw.stream.SpillTo(spillWriter{rw})
			mode = modeStream
			if iv := rw.stream.TickInterval(); iv > 0 {
				rw.ticking, rw.lastData, rw.stopTick = true, time.Now(), make(chan struct{})
				go rw.keepAlive(iv)
			}
		}
	case json:
		mode = modeBuffer
	}
	if mode == modePass {
		return mode
	}
	// Some upstreams compress whatever the request asked for. Rewriting
	// needs the decoded bytes, and the client gets them decoded; its own
	// encode handler compresses them again if it wants.
	switch ce := hdr.Values("Content-Encoding"); {
	case len(ce) == 0 || len(ce) == 1 && ce[0] == "identity":
	case len(ce) == 1 && decodable(ce[0]):
		rw.encoding = ce[0]
		hdr.Del("Content-Encoding")
		hdr.Del("Content-Length")
		if mode == modeStream {
			rw.dec = newPushDecoder(rw.encoding, rw.h.MaxBodySize, writerOnly{streamWriter{rw}})
		}
	default:
		rw.h.logger.Warn("upstream response has an encoding the gateway cannot decode; passing it through unmodified",
			zap.Strings("content_encoding", ce))
		return modePass
	}
	return mode
}

func (rw *responseWriter) Write(p []byte) (int, error) {
	if rw.mode == modeUndecided {
		rw.WriteHeader(http.StatusOK)
	}
	switch rw.mode {
	case modeStream:
		if rw.dec != nil {
			n, err := rw.dec.Write(p)
			if err != nil && !errors.Is(err, errStreamAborted) {
				rw.h.logger.Warn("decoding the upstream's stream failed", zap.String("content_encoding", rw.encoding), zap.Error(err))
			}
			return n, err
		}
		return rw.writeStream(p)
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

// keepAlive asks the stream's rules for their keep-alive whenever the
// upstream has been silent for iv, until the stream ends.
func (rw *responseWriter) keepAlive(iv time.Duration) {
	t := time.NewTimer(iv)
	defer t.Stop()
	for {
		select {
		case <-rw.stopTick:
			return
		case <-t.C:
		}
		rw.mu.Lock()
		if !rw.ticking {
			rw.mu.Unlock()
			return
		}
		next := iv - time.Since(rw.lastData)
		if next <= 0 {
			next = iv
			err := rw.stream.Tick()
			out := rw.stream.Output()
			if len(out) > 0 {
				if _, werr := rw.ResponseWriter.Write(out); werr == nil {
					_ = rw.controller().Flush()
				}
			}
			if err != nil || rw.stream.Stopped() {
				rw.ticking = false
			}
		}
		rw.mu.Unlock()
		t.Reset(next)
	}
}

// endTicks stops the keep-alive timer; the caller holds mu.
func (rw *responseWriter) endTicks() {
	if rw.ticking {
		rw.ticking = false
		close(rw.stopTick)
	}
}

// writeStream feeds decoded stream bytes to the rules.
func (rw *responseWriter) writeStream(p []byte) (int, error) {
	if rw.stopTick != nil {
		rw.mu.Lock()
		defer rw.mu.Unlock()
		rw.lastData = time.Now()
	}
	err := rw.stream.Write(p)
	if out := rw.stream.Output(); len(out) > 0 {
		rw.unflushed = true
		if _, werr := rw.ResponseWriter.Write(out); werr != nil {
			return 0, werr
		}
	}
	if rw.stream.Stopped() {
		// The client has the error event; flush it, then fail the copy
		// so reverse_proxy stops reading (and the provider stops
		// billing) a stream nobody will see.
		rw.h.logger.Debug("stream ended by the gateway", zap.Error(err))
		_ = rw.controller().Flush()
		return len(p), errStreamAborted
	}
	return len(p), nil
}

// spillWriter takes a stream's output in the middle of a large upstream
// read (transforms.Stream.SpillTo).
type spillWriter struct{ rw *responseWriter }

func (w spillWriter) Write(p []byte) (int, error) {
	w.rw.unflushed = true
	return w.rw.ResponseWriter.Write(p)
}

// streamWriter is where a stream's decoder writes.
type streamWriter struct{ rw *responseWriter }

func (w streamWriter) Write(p []byte) (int, error) { return w.rw.writeStream(p) }

// abandon stops a stream's decoder and keep-alives when the response ends
// without finish.
func (rw *responseWriter) abandon() {
	if rw.stopTick != nil {
		rw.mu.Lock()
		rw.endTicks()
		rw.mu.Unlock()
	}
	if rw.dec != nil {
		rw.dec.abandon()
	}
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
	if rw.mode == modeStream {
		if rw.stopTick != nil {
			rw.mu.Lock()
			defer rw.mu.Unlock()
		}
		if rw.flushed && !rw.unflushed {
			// Nothing new since the last flush: a read whose events the
			// rules hold (a converted call's partial line) costs no
			// flush, and no write deadline reset under it.
			return nil
		}
		rw.flushed, rw.unflushed = true, false
	}
	return rw.controller().Flush()
}

func (rw *responseWriter) controller() *http.ResponseController {
	if rw.rc == nil {
		rw.rc = http.NewResponseController(rw.ResponseWriter)
	}
	return rw.rc
}

// Flush is for callers that still type-assert http.Flusher.
func (rw *responseWriter) Flush() { _ = rw.FlushError() }

// finish completes the response after the upstream handler returned without
// error. On error (or a panic such as http.ErrAbortHandler) it is not called,
// so nothing is written to a response that was already abandoned.
func (rw *responseWriter) finish() error {
	switch rw.mode {
	case modeStream:
		if rw.dec != nil {
			if err := rw.dec.Close(); err != nil {
				rw.endStream()
				if errors.Is(err, errStreamAborted) {
					return nil
				}
				rw.h.logger.Warn("decoding the upstream's stream failed", zap.String("content_encoding", rw.encoding), zap.Error(err))
				return err
			}
		}
		return rw.finishStream()
	case modeBuffer:
		if rw.tooBig {
			return writeError(rw.ResponseWriter, rw.x.ClientProtocol(), &transforms.Error{
				Status:  http.StatusBadGateway,
				Type:    "server_error",
				Code:    "response_too_large",
				Message: fmt.Sprintf("upstream response exceeds the gateway's max_body_size of %d bytes", rw.h.MaxBodySize),
			})
		}
		body := rw.buf.Bytes()
		if rw.encoding != "" {
			dec, err := decodeAll(rw.encoding, bytes.NewReader(body), rw.h.MaxBodySize)
			if err != nil {
				// Nothing to restore in what cannot be read; the client
				// gets the upstream's bytes, as it sent them.
				rw.h.logger.Warn("decoding the upstream's response failed; passing it through unmodified",
					zap.String("content_encoding", rw.encoding), zap.Error(err))
				rw.Header().Set("Content-Encoding", rw.encoding)
				return rw.writeBuffered(body)
			}
			body = dec
		}
		if rw.upstreamError {
			out := rw.x.RewriteError(rw.status, body)
			rw.status = rw.x.RewriteErrorStatus(rw.status)
			return rw.writeBuffered(out)
		}
		out, err := rw.x.RewriteResponse(body)
		return rw.finishJSON(out, err)
	}
	return nil
}

// finishStream runs the stages' end of a stream (again after a round) and
// writes what it produced. While a rule waits for a round, the stream stays
// open, keep-alives included.
func (rw *responseWriter) finishStream() error {
	if rw.stopTick != nil {
		rw.mu.Lock()
		defer rw.mu.Unlock()
	}
	err := rw.stream.Close()
	if out := rw.stream.Output(); len(out) > 0 {
		if _, werr := rw.ResponseWriter.Write(out); werr != nil {
			rw.endTicks()
			return werr
		}
	}
	if rw.stream.RoundPending() {
		rw.unflushed = true
		_ = rw.controller().Flush()
		return nil
	}
	rw.endTicks()
	rw.stream.Release()
	if err != nil {
		rw.h.logger.Debug("stream ended by the gateway", zap.Error(err))
	}
	return nil
}

// endStream stops the keep-alives of a stream that ends without its
// stages' end.
func (rw *responseWriter) endStream() {
	if rw.stopTick != nil {
		rw.mu.Lock()
		rw.endTicks()
		rw.mu.Unlock()
	}
}

// finishJSON writes the rules' result for a JSON answer, unless a rule
// asked for a round first.
func (rw *responseWriter) finishJSON(out []byte, err error) error {
	var te *transforms.Error
	if errors.As(err, &te) {
		// A rule's answer for the client (tools_preflight's
		// on_failure error).
		rw.h.logger.Debug("response refused by a rule", zap.String("code", te.Code), zap.String("reason", te.Message))
		return writeError(rw.ResponseWriter, rw.x.ClientProtocol(), te)
	}
	if err != nil {
		// The error may tell how the gateway works inside; it goes to
		// the log, the client gets a fixed message.
		rw.h.logger.Error("response rewrite failed", zap.Error(err))
		metrics.rejections.WithLabelValues("transform_failed").Inc()
		return writeError(rw.ResponseWriter, rw.x.ClientProtocol(), &transforms.Error{
			Status: http.StatusBadGateway, Type: "server_error", Code: "transform_failed",
			Message: "the gateway could not rewrite the upstream's response",
		})
	}
	if out == nil && rw.x.PendingRound() != nil {
		return nil
	}
	return rw.writeBuffered(out)
}

// writeBuffered sends a whole body with its length.
func (rw *responseWriter) writeBuffered(body []byte) error {
	rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
	rw.ResponseWriter.WriteHeader(rw.status)
	_, err := rw.ResponseWriter.Write(body)
	return err
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
