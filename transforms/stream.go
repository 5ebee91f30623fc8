package transforms

import (
	"errors"
	"strconv"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/streambuf"
)

// Event is one server-sent event flowing through the stream rules.
type Event = streambuf.Event

// Emit passes an event to the next stage of a stream.
type Emit func(*Event) error

// StreamAbort ends a stream early with a protocol-shaped error event, e.g.
// when a call outgrows the buffer limit. Nothing after it reaches the client.
type StreamAbort struct {
	Code    string
	Message string
}

func (e *StreamAbort) Error() string { return e.Message }

// Stream runs the response phase of an Exchange over an SSE body. Bytes go in
// through Write as the upstream sends them; complete, rewritten events come
// out of Output. Events no rule touches keep their exact bytes.
type Stream struct {
	x      *Exchange
	parser streambuf.Parser
	stages []StreamTransform
	emits  []Emit
	out    []byte

	dataOnly bool  // the upstream frames events without "event:" lines
	seq      int64 // next sequence_number to hand out
	seqKnown bool
	stopped  bool
	scratch  []byte
}

// NewStream prepares the stream rules bound to x. It returns nil when no rule
// has anything to do, so the caller can copy the body straight through.
func (x *Exchange) NewStream() *Stream {
	s := &Stream{x: x}
	for _, r := range x.rules {
		if r.phase&PhaseResponse == 0 {
			continue
		}
		if st := r.t.NewStream(x); st != nil {
			s.stages = append(s.stages, st)
		}
	}
	if len(s.stages) == 0 {
		return nil
	}
	s.parser.MaxEvent = x.Limits.MaxEvent
	s.emits = make([]Emit, len(s.stages))
	for i := range s.stages {
		next := i + 1
		s.emits[i] = func(ev *Event) error { return s.push(next, ev) }
	}
	return s
}

// Write consumes upstream bytes. Its error is only ever a StreamAbort that
// has already been rendered into Output; the caller should stop copying.
func (s *Stream) Write(p []byte) error {
	if s.stopped {
		return nil
	}
	err := s.parser.Feed(p, s.handle)
	return s.fail(err)
}

// Close runs the rules' end-of-stream work and releases any trailing bytes
// that never formed a complete event, unchanged.
func (s *Stream) Close() error {
	if s.stopped {
		return nil
	}
	// An upstream may close right after its last data line (a Chat
	// "data: [DONE]" without the blank line): that event still counts.
	if err := s.parser.Finish(s.handle); err != nil {
		if ab := s.fail(err); ab != nil {
			return ab
		}
	}
	for i, st := range s.stages {
		if err := st.End(s.emits[i]); err != nil {
			return s.fail(err)
		}
	}
	s.out = append(s.out, s.parser.Rest()...)
	return nil
}

// Output returns the bytes ready for the client and empties the buffer. The
// slice is valid until the next Write or Close.
func (s *Stream) Output() []byte {
	o := s.out
	s.out = s.out[:0]
	return o
}

// Stopped reports whether the stream was cut by an abort.
func (s *Stream) Stopped() bool { return s.stopped }

func (s *Stream) handle(ev *Event) error {
	if ev.Data != nil {
		s.dataOnly = ev.Name == nil
	}
	return s.push(0, ev)
}

func (s *Stream) push(i int, ev *Event) error {
	if i == len(s.stages) {
		s.write(ev)
		return nil
	}
	return s.stages[i].Event(ev, s.emits[i])
}

func (s *Stream) fail(err error) error {
	if err == nil {
		return nil
	}
	var ab *StreamAbort
	if !errors.As(err, &ab) {
		ab = &StreamAbort{Code: "stream_event_too_large", Message: err.Error()}
		if !errors.Is(err, streambuf.ErrEventTooLarge) {
			ab.Code = "stream_transform_failed"
		}
	}
	s.write(s.abortEvent(ab))
	s.stopped = true
	return ab
}

func (s *Stream) abortEvent(ab *StreamAbort) *Event {
	if s.x.Protocol == ProtocolChat {
		e := &Error{Type: "server_error", Code: ab.Code, Message: ab.Message}
		return &Event{Data: e.JSON()}
	}
	d := []byte(`{"type":"error","sequence_number":0,"code":`)
	d = jsonspan.AppendStringStr(d, ab.Code)
	d = append(d, `,"message":`...)
	d = jsonspan.AppendStringStr(d, ab.Message)
	d = append(d, `,"param":null}`...)
	return &Event{Name: []byte("error"), Data: d}
}

// write renders an event for the client. On Responses streams it keeps
// sequence_number strictly increasing by one across dropped and synthesized
// events, touching the bytes only where the number is actually off.
func (s *Stream) write(ev *Event) {
	if ev.Data != nil && s.x.Protocol == ProtocolResponses {
		if sp := jsonspan.Lookup(ev.Data, 0, "sequence_number"); sp.Start >= 0 {
			n, err := strconv.ParseInt(string(ev.Data[sp.Start:sp.End]), 10, 64)
			if err == nil {
				if !s.seqKnown {
					s.seq, s.seqKnown = n, true
				}
				if n != s.seq {
					// Once a call's deltas are merged or dropped, every later
					// event needs a new number; build it in a reused buffer
					// rather than allocating per event.
					s.scratch = append(s.scratch[:0], ev.Data[:sp.Start]...)
					s.scratch = strconv.AppendInt(s.scratch, s.seq, 10)
					s.scratch = append(s.scratch, ev.Data[sp.End:]...)
					renumbered := Event{Name: ev.Name, Data: s.scratch}
					ev = &renumbered
				}
				s.seq++
			}
		}
	}
	if ev.Raw == nil && s.dataOnly {
		ev.Name = nil
	}
	s.out = ev.AppendTo(s.out)
}
