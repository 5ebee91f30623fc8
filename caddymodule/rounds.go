package caddymodule

import (
	"bytes"
	"context"
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

// A round (transforms.Exchange.StartRound) is one more trip through the
// handlers after ours (reverse_proxy) within the client's request: a
// clone of the request with the round's body, under the request's context
// (a client that leaves cancels it) and the rounds' deadline. Its answer
// never writes the client's status line: a stream goes on into the
// client's stream, a JSON body is buffered for the rules. An answer that
// is not what the client's response needs (an error status, JSON for a
// stream) fails the round, and the rule that asked ends its answer.

// errRoundAborted is a round whose proxy aborted (reverse_proxy panics
// with http.ErrAbortHandler when a copy breaks).
var errRoundAborted = errors.New("the round's upstream stream broke")

// runRounds sends the rounds the rules ask for until none is pending,
// finishing the response after each.
func (h *Handler) runRounds(rw *responseWriter, r *http.Request, next caddyhttp.Handler, x *transforms.Exchange, lease *bodyLease) error {
	for x.PendingRound() != nil {
		if err := h.runRound(rw, r, next, x, lease); err != nil {
			return err
		}
	}
	return nil
}

func (h *Handler) runRound(rw *responseWriter, r *http.Request, next caddyhttp.Handler, x *transforms.Exchange, lease *bodyLease) error {
	// A stream's keep-alives run on their own goroutine, under rw.mu,
	// through the exchange: what the round does to it outside the proxy's
	// copy (which locks in writeStream) is done under rw.mu too.
	lock := func() {}
	unlock := lock
	if rw.stopTick != nil {
		lock, unlock = rw.mu.Lock, rw.mu.Unlock
	}
	lock()
	body, err := x.RoundRequest()
	unlock()
	rr := &roundWriter{rw: rw, header: http.Header{}}
	if err == nil {
		err = h.sendRound(rr, r, next, x, body, lease)
	}
	if err == nil {
		err = rr.failure()
	}
	lock()
	if rw.mode == modeStream && (rw.stream.Stopped() || x.AnswerEnded()) {
		// The gateway itself ended the stream in the round's answer (a
		// rule's error event), or the answer's end went out and the
		// client left before the proxy's copy ended: the round answered.
		err = nil
	}
	if err != nil {
		h.logger.Debug("round failed", zap.Error(err))
	}
	x.EndRound(err)
	unlock()
	metrics.rounds.WithLabelValues(x.Rounds()[len(x.Rounds())-1].Reason, roundOutcome(err, r)).Inc()
	if rr.dec != nil {
		if derr := rr.dec.Close(); derr != nil && !errors.Is(derr, errStreamAborted) {
			h.logger.Debug("decoding the round's stream failed", zap.Error(derr))
		}
	}
	switch rw.mode {
	case modeStream:
		return rw.finishStream()
	case modeBuffer:
		var out []byte
		var rerr error
		if err != nil {
			out, rerr = x.ResumeResponse(nil)
		} else {
			out, rerr = x.ResumeResponse(rr.body())
		}
		return rw.finishJSON(out, rerr)
	}
	return nil
}

// roundOutcome labels a round in rounds_total: a client that left (the
// openai SDKs close a Chat stream at its [DONE], which may come before
// reverse_proxy has ended the round's copy) is not an upstream failure.
func roundOutcome(err error, r *http.Request) string {
	switch {
	case err == nil:
		return "answered"
	case r.Context().Err() != nil:
		return "client_gone"
	}
	return "failed"
}

// sendRound sends a round's body on through the handlers after ours.
func (h *Handler) sendRound(rr *roundWriter, r *http.Request, next caddyhttp.Handler, x *transforms.Exchange, body []byte, lease *bodyLease) (err error) {
	ctx, cancel := context.WithDeadline(r.Context(), x.RoundDeadline())
	defer cancel()
	r2 := r.Clone(ctx)
	// Under the request's lease: the round's body may sit in a buffer the
	// exchange hands back to its pool, and the transport may read it
	// after the proxy has returned.
	setLeasedBody(r2, body, lease)
	r2.Header.Set("Content-Length", strconv.Itoa(len(body)))
	r2.Header.Del("Content-Encoding")
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			err = errRoundAborted
		}
	}()
	if err := next.ServeHTTP(rr, r2); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("round: %w", ctx.Err())
	}
	return nil
}

// roundWriter takes a round's answer: a stream into the client's stream,
// a JSON body into a buffer.
type roundWriter struct {
	rw     *responseWriter
	header http.Header
	status int
	stream bool // the answer goes on into the client's stream
	buf    bytes.Buffer
	tooBig bool
	err    error
	dec    *pushDecoder
}

func (rr *roundWriter) Header() http.Header { return rr.header }

func (rr *roundWriter) WriteHeader(status int) {
	if rr.status != 0 || status >= 100 && status < 200 {
		return
	}
	rr.status = status
	mt, _, _ := mime.ParseMediaType(rr.header.Get("Content-Type"))
	if status < 200 || status > 299 {
		rr.err = fmt.Errorf("the round's upstream answered %d", status)
		return
	}
	switch rr.rw.mode {
	case modeStream:
		if mt != "text/event-stream" {
			rr.err = fmt.Errorf("the round's upstream answered %s to a stream", mt)
			return
		}
	case modeBuffer:
		if mt != "application/json" && !(len(mt) > 5 && mt[len(mt)-5:] == "+json") {
			rr.err = fmt.Errorf("the round's upstream answered %s, not JSON", mt)
			return
		}
	}
	if ce := rr.header.Values("Content-Encoding"); len(ce) > 0 && !(len(ce) == 1 && ce[0] == "identity") {
		if len(ce) != 1 || !decodable(ce[0]) {
			rr.err = fmt.Errorf("the round's upstream answered in encoding %v", ce)
			return
		}
		if rr.rw.mode == modeStream {
			rr.dec = newPushDecoder(ce[0], rr.rw.h.MaxBodySize, writerOnly{streamWriter{rr.rw}})
		} else {
			rr.err = errors.New("the round's upstream compressed its JSON answer")
			return
		}
	}
	if rr.rw.mode == modeStream {
		rr.stream = true
		rr.rw.mu.Lock()
		rr.rw.stream.ResumeRound()
		rr.rw.mu.Unlock()
	}
}

func (rr *roundWriter) Write(p []byte) (int, error) {
	if rr.status == 0 {
		rr.WriteHeader(http.StatusOK)
	}
	switch {
	case rr.err != nil:
		return len(p), nil // an answer the round cannot use: read and dropped
	case rr.stream && rr.dec != nil:
		return rr.dec.Write(p)
	case rr.stream:
		return rr.rw.writeStream(p)
	}
	if rr.tooBig || int64(rr.buf.Len()+len(p)) > rr.rw.h.MaxBodySize {
		rr.tooBig = true
		return len(p), nil
	}
	return rr.buf.Write(p)
}

// ReadFrom routes io.Copy through Write.
func (rr *roundWriter) ReadFrom(r io.Reader) (int64, error) { return io.Copy(writerOnly{rr}, r) }

// FlushError pushes out what the round's events made of the client's
// stream so far.
func (rr *roundWriter) FlushError() error {
	if rr.stream && rr.err == nil {
		return rr.rw.FlushError()
	}
	return nil
}

func (rr *roundWriter) Flush() { _ = rr.FlushError() }

// failure is why the answer could not serve the round, nil when it did.
func (rr *roundWriter) failure() error {
	switch {
	case rr.err != nil:
		return rr.err
	case rr.status == 0:
		return errors.New("the round's upstream answered nothing")
	case rr.tooBig:
		return fmt.Errorf("the round's answer exceeds max_body_size")
	}
	return nil
}

func (rr *roundWriter) body() []byte { return rr.buf.Bytes() }
