package transforms

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/streambuf"
)

// Event is one server-sent event flowing through the stream rules.
type Event = streambuf.Event

// Emit passes an event to the next stage of a stream.
type Emit func(*Event) error

// StreamAbort ends a stream early with an error event in the client's
// protocol, e.g. when a call outgrows the buffer limit. Nothing after it
// reaches the client.
type StreamAbort struct {
	Code    string
	Message string
	// Reported is set by a stage that has already told the client in the
	// protocol's own terms (a bridge's response.failed): the engine stops
	// the stream and counts the error, and writes no error event after it.
	Reported bool
}

func (e *StreamAbort) Error() string { return e.Message }

// Stream runs the response phase of an Exchange over an SSE body. Bytes go in
// through Write as the upstream sends them, parsed in the upstream's
// framing; complete, rewritten events come out of Output in the client's.
// Stages run from the rule nearest the upstream back to the client's side.
// Events no rule touches keep their exact bytes.
type Stream struct {
	x      *Exchange
	parser streambuf.Parser
	stages []StreamTransform
	emits  []Emit
	out    []byte

	client  Protocol
	bridged bool // the client and the upstream speak different protocols
	// upResponses: the upstream's events are Responses events, whose
	// heads the engine reads once for every stage.
	upResponses bool
	dataOnly    bool  // the upstream frames events without "event:" lines
	seq         int64 // next sequence_number to hand out
	seqKnown    bool
	sawDone     bool
	stopped     bool
	echo        bool // lifecycle events get the client's tools back
	scratch     []byte

	// The upstream event being handled. Rules build new events rather
	// than edit the one they get; what they write while handling it
	// carries its id and retry.
	cur *Event

	// runs is the first stage's rule when it takes runs of argument
	// deltas (claim), nil otherwise; runStage is that stage.
	runs     runTaker
	runStage *trackedStream
	// passHead is the head, up to its sequence number, of the last
	// upstream event that no stage handles, as it was written: the events
	// after it with the same head, most often a long answer's text deltas,
	// are written from their bytes (claim).
	passHead []byte

	// sink, when set, takes the output whenever it passes spillAt bytes
	// while an upstream read is handled (SpillTo).
	sink    io.Writer
	sinkErr error // the sink's first failed write

	// lastID and lastRetry are the last id: and retry: the upstream sent,
	// for the events stages write once it has ended.
	lastID, lastRetry []byte
	ending            bool // the stages' End runs

	// Rounds: parsed says the upstream body's parser has been finished;
	// endFrom is the first stage whose End is still to run.
	parsed  bool
	endFrom int
	// filterGen is the exchange's filterGen passHead was noted under.
	filterGen uint32
}

// spillAt is how much output a stream with a sink holds before handing it
// on: enough that ordinary reads are written in one piece.
const spillAt = 64 << 10

// runTaker is implemented by stream stages that place the argument deltas
// of a call they restore by bytes the call's deltas share: a delta of the
// current run can then be given to them straight from the upstream's
// bytes (Stream.claim), without the engine's general reading of an event.
type runTaker interface {
	// runKey returns the bytes every delta of the current run holds
	// between its sequence number and its value's opening quote, that
	// quote included, or nil when the stage is in no run. take reports
	// whether the run's deltas are for the stage (runDelta); the others'
	// the stage passes on as they came.
	runKey() (key []byte, take bool)
	// runDelta handles a delta of the current run, whose data is d and
	// whose sequence number is at seq.
	runDelta(d []byte, seq jsonspan.Span, emit Emit) error
}

// NewStream prepares the stream rules bound to x. It returns nil when no
// rule has anything to do, so the caller can copy the body straight
// through. It may be called once for every upstream response of the
// exchange.
func (x *Exchange) NewStream() *Stream {
	defer x.at(-1, false)
	up := x.UpstreamProtocol()
	s := &Stream{x: x, client: x.client, bridged: x.client != up, upResponses: up == ProtocolResponses}
	s.stages = s.newStages(nil, len(x.rules)-1, 0)
	s.echo = x.echoes()
	if len(s.stages) == 0 && !s.echo {
		return nil
	}
	s.reset()
	if p, ok := outPool.Get().(*[]byte); ok {
		s.out = (*p)[:0]
	}
	if p, ok := outPool.Get().(*[]byte); ok {
		s.scratch = (*p)[:0]
	}
	return s
}

// newStages appends to dst the stages of the bound rules from index from
// down to index to, nearest the upstream first; a rule that takes rounds
// on this request gets its joiner after its stage.
func (s *Stream) newStages(dst []StreamTransform, from, to int) []StreamTransform {
	x := s.x
	for i := from; i >= to; i-- {
		r := x.rules[i]
		if r.phase&PhaseResponse == 0 {
			continue
		}
		x.at(i, true)
		st := r.resp.NewStream(x)
		if st != nil {
			dst = append(dst, newTracked(x, r, i, st))
		}
		if x.roundTaker(i) {
			if j := newJoiner(x, i, x.protos[i]); j != nil {
				if cj, ok := j.(*chatJoin); ok {
					cj.shown, _ = st.(CallsShown)
				}
				t := newTracked(x, r, i, j)
				t.joiner = true
				dst = append(dst, t)
			}
		}
	}
	return dst
}

func newTracked(x *Exchange, r *Rule, i int, st StreamTransform) *trackedStream {
	t := &trackedStream{inner: st, r: r, ri: i, x: x}
	t.forwardFn = t.forward // one closure per stage, not per event
	t.filter, _ = st.(typeFilter)
	return t
}

// reset readies the parser, the claims and the stages' links for an
// upstream body: the first, or a round's.
func (s *Stream) reset() {
	s.parser = streambuf.Parser{MaxEvent: s.x.Limits.MaxEvent}
	s.runs, s.runStage, s.passHead = nil, nil, nil
	if !s.bridged && s.upResponses {
		s.parser.Claim = s.claim
		if s.sink != nil {
			s.parser.Claim = s.claimSpilling
		}
		if len(s.stages) > 0 {
			s.runStage = s.stages[0].(*trackedStream)
			s.runs, _ = s.runStage.inner.(runTaker)
		}
	}
	s.emits = make([]Emit, len(s.stages))
	for i := range s.stages {
		next := i + 1
		s.emits[i] = func(ev *Event) error { return s.push(next, ev) }
	}
	s.parsed, s.endFrom, s.ending = false, 0, false
}

// ResumeRound readies the stream for the answer of the round just sent:
// the rules nearer the upstream than the one that asked get new stages,
// the rest carry on. Call it once the round's answer turned out to be a
// stream, before its first Write.
func (s *Stream) ResumeRound() {
	rd := s.x.lastRound()
	if rd == nil {
		return
	}
	defer s.x.at(-1, false)
	k := 0
	for k < len(s.stages) && s.stages[k].(*trackedStream).ri > rd.rule {
		k++
	}
	fresh := s.newStages(nil, len(s.x.rules)-1, rd.rule+1)
	s.stages = append(fresh, s.stages[k:]...)
	s.reset()
}

// RoundPending reports whether Close stopped for a round a rule asked for:
// the caller sends it (Exchange.RoundRequest), then calls ResumeRound and
// writes its answer, or records its failure (Exchange.EndRound), and
// calls Close again.
func (s *Stream) RoundPending() bool { return !s.stopped && s.x.round != nil }

// DisableClaims makes every event of the stream take the general way
// through the parser, the head and the stages, instead of runs of like
// events being claimed from their bytes. The output must be the same
// either way: tests replay streams both ways and compare. Call it before
// the first Write.
func (s *Stream) DisableClaims() { s.parser.Claim = nil }

// SpillTo makes the stream write its output to w whenever it passes 64
// KiB while one upstream read is handled, instead of holding every event
// of that read until Output: an upstream that sends a long answer in one
// write (a large call's done events and the final object together) then
// costs the gateway about one event's bytes, not the read's. Output
// returns what is left. A failed write to w ends the stream as an abort
// does. Call it before the first Write.
func (s *Stream) SpillTo(w io.Writer) {
	s.sink = w
	if s.parser.Claim != nil {
		s.parser.Claim = s.claimSpilling
	}
}

// Write consumes upstream bytes. Its error is only ever a StreamAbort that
// has already been rendered into Output; the caller should stop copying.
func (s *Stream) Write(p []byte) error {
	if s.stopped {
		return nil
	}
	if s.sink != nil {
		return s.fail(s.parser.Feed(p, s.handleSpilling))
	}
	return s.fail(s.parser.Feed(p, s.handle))
}

func (s *Stream) handleSpilling(ev *Event) error {
	if err := s.handle(ev); err != nil {
		return err
	}
	return s.spill()
}

func (s *Stream) claimSpilling(b []byte, i int) (int, error) {
	end, err := s.claim(b, i)
	if err == nil && end >= 0 {
		err = s.spill()
	}
	return end, err
}

// spill hands the output to the sink once it has grown past spillAt.
func (s *Stream) spill() error {
	if s.sink == nil || len(s.out) < spillAt {
		return s.sinkErr
	}
	s.toSink(s.out)
	s.out = s.out[:0]
	return s.sinkErr
}

func (s *Stream) toSink(b []byte) {
	if s.sinkErr == nil {
		_, s.sinkErr = s.sink.Write(b)
	}
}

// writeLarge writes an event of spillAt bytes or more straight to the
// sink, after the output before it: copying it into the output first
// would hold it twice (a bridged call's done event carries all of its
// arguments, the final object every call's).
func (s *Stream) writeLarge(ev *Event) bool {
	if s.sink == nil || len(ev.Data) < spillAt {
		return false
	}
	out, ok := ev.AppendHead(s.out)
	if !ok {
		return false
	}
	s.toSink(out)
	s.toSink(ev.Data)
	s.out = append(out[:0], "\n\n"...)
	return true
}

// Close runs the rules' end-of-stream work and releases any trailing bytes
// that never formed a complete event, unchanged.
func (s *Stream) Close() error {
	if s.stopped {
		return nil
	}
	if !s.parsed {
		// An upstream may close right after its last data line (a Chat
		// "data: [DONE]" without the blank line): that event still counts.
		s.parsed = true
		if err := s.parser.Finish(s.handle); err != nil {
			if ab := s.fail(err); ab != nil {
				return ab
			}
		}
	}
	s.ending = true
	for i := s.endFrom; i < len(s.stages); i++ {
		st := s.stages[i]
		if err := st.End(s.emits[i]); err != nil {
			return s.fail(err)
		}
		if err := s.spill(); err != nil {
			return s.fail(err)
		}
		if s.x.asked(st.(*trackedStream).ri) {
			// The rule asked for a round: the stages after it end once
			// the rounds have; if the round fails, the rule ends again.
			// Meanwhile the stream is open: keep-alives tick.
			s.endFrom, s.ending = i, false
			return nil
		}
	}
	if s.bridged && s.client == ProtocolChat && !s.sawDone {
		// Chat clients wait for the terminator that only Chat upstreams send.
		s.out = append(s.out, "data: [DONE]\n\n"...)
	}
	s.out = append(s.out, s.parser.Rest()...)
	return nil
}

// Ticker is implemented by stream stages that emit while the upstream is
// silent: a bridge whose client aborts a stream without events (Claude
// Code) sends its protocol's keep-alive. The handler calls Tick when no
// upstream bytes came for TickInterval; events Tick emits go on to the
// client like any other.
type Ticker interface {
	// TickInterval is how long the upstream may be silent before Tick;
	// zero or less: never.
	TickInterval() time.Duration
	// Tick emits what the stage sends during a silence.
	Tick(emit Emit) error
}

// TickInterval is the shortest of the stages' silences before a Tick, 0
// when no stage ticks.
func (s *Stream) TickInterval() time.Duration {
	var d time.Duration
	for _, st := range s.stages {
		if t, ok := st.(*trackedStream).inner.(Ticker); ok {
			if i := t.TickInterval(); i > 0 && (d == 0 || i < d) {
				d = i
			}
		}
	}
	return d
}

// Tick asks the stages that tick for what they send during a silence; the
// result is in Output. Between events only: the caller serializes it with
// Write and Close.
func (s *Stream) Tick() error {
	if s.stopped || s.ending {
		return nil
	}
	for i, st := range s.stages {
		if t, ok := st.(*trackedStream).inner.(Ticker); ok && t.TickInterval() > 0 {
			if err := t.Tick(s.emits[i]); err != nil {
				return s.fail(err)
			}
		}
	}
	return nil
}

// Output returns the bytes ready for the client and empties the buffer. The
// slice is valid until the next Write or Close.
func (s *Stream) Output() []byte {
	o := s.out
	s.out = s.out[:0]
	return o
}

// outPool recycles the buffers streams write their output into: grown
// from nothing by every stream to the size of its largest read, they are
// garbage a busy gateway makes per request.
var outPool sync.Pool // of *[]byte

// maxPooledOut keeps a freak stream's buffer out of the pool.
const maxPooledOut = 1 << 20

// Release hands the stream's output and renumbering buffers back for
// another stream. Call
// it once the stream is closed and its last Output written; neither may
// be used afterwards.
func (s *Stream) Release() {
	for _, st := range s.stages {
		if r, ok := st.(*trackedStream).inner.(StreamReleaser); ok {
			r.Release()
		}
	}
	for _, b := range [][]byte{s.out, s.scratch} {
		if b != nil && cap(b) <= maxPooledOut {
			b = b[:0]
			outPool.Put(&b)
		}
	}
	s.out, s.scratch = nil, nil
}

// StreamReleaser is implemented by stream stages that hold buffers worth
// recycling: Release runs once the stream is done, and nothing of the
// stage is used after.
type StreamReleaser interface{ Release() }

// Stopped reports whether the stream was cut by an abort.
func (s *Stream) Stopped() bool { return s.stopped }

func (s *Stream) handle(ev *Event) error {
	if ev.Data != nil {
		s.dataOnly = ev.Name == nil
	}
	first := -1 // the first stage that handles the event, once known
	if ev.Data != nil && s.upResponses {
		h := &s.x.head
		h.typ, h.seq, h.ok = openAIHead(ev.Data)
		if !h.ok {
			// Any other layout is read in one walk too, member by member,
			// so that no stage and no later step walks the event again
			// for its type or the fields it needs (Exchange.eventFields).
			h.typ, h.seq, h.members, h.indexed = indexEvent(ev.Data, h.members[:0])
		}
		if h.known = h.typ.Start >= 0 && ev.Data[h.typ.Start] == '"'; h.known {
			// push's search, written out here: as a function it cost
			// about 1 % of the engine's instructions.
			typ := ev.Data[h.typ.Start:h.typ.End]
			first = 0
			for first < len(s.stages) && s.stages[first].(*trackedStream).skips(typ) {
				first++
			}
			if first == len(s.stages) {
				passed := s.passThrough(ev, h.typ, h.seq)
				if h.ok && (passed || !s.echo || !isLifecycle(ev.Data, h.typ)) {
					s.notePass(ev, h.seq) // (write renumbers it)
				}
				if passed {
					s.x.head = eventHead{members: h.members[:0]}
					return nil
				}
			}
		}
		h.data = ev.Data
	}
	if !s.seqKnown && !s.bridged && s.client == ProtocolResponses && ev.Data != nil {
		// Numbering starts where the upstream's does, even when the
		// first event the client gets is one a stage built later.
		if _, sp := s.head(ev.Data); sp.Start >= 0 {
			s.seq, s.seqKnown = parseSeq(ev.Data[sp.Start:sp.End])
		}
	}
	s.cur = ev
	if ev.ID != nil {
		s.lastID = append(append(s.lastID[:0], ev.ID...), 0)[:len(ev.ID)] // never nil: an empty id resets the client's
	}
	if ev.Retry != nil {
		s.lastRetry = append(s.lastRetry[:0], ev.Retry...)
	}
	var err error
	switch {
	case first < 0:
		err = s.push(0, ev)
	case first == len(s.stages):
		s.write(ev)
	default:
		err = s.stages[first].Event(ev, s.emits[first])
	}
	s.cur = nil
	s.x.head = eventHead{members: s.x.head.members[:0]}
	return err
}

// The heads of an argument delta laid out the simple way (see streambuf's
// Parser), with and without an event line, up to its sequence number.
const (
	deltaData      = `{"type":"response.function_call_arguments.delta","sequence_number":`
	deltaHeadNamed = "event: response.function_call_arguments.delta\ndata: " + deltaData
	deltaHeadData  = "data: " + deltaData
)

// claim is the parser's Claim. Most events of a long stream come in runs
// of the same few bytes around what they carry: an answer's text deltas,
// which no stage handles, and a call's argument deltas, each a head, a
// number and the call's keys. An event of the run in progress, laid out
// exactly as the event that started it, goes from the upstream's bytes to
// where the general way would take it: to the client, renumbered if need
// be, or to the first stage. The parser's reading, the head, the stages'
// filters and the stage's dispatch were done for it already by the event
// that started the run. Anything else is left to the parser.
func (s *Stream) claim(b []byte, i int) (int, error) {
	if !s.seqKnown {
		return -1, nil
	}
	ev := b[i:]
	if s.filterGen != s.x.filterGen {
		s.filterGen, s.passHead = s.x.filterGen, s.passHead[:0]
	}
	if h := len(s.passHead); h > 0 && len(ev) > h && string(ev[:h]) == string(s.passHead) {
		return s.claimPass(ev, i, h), nil
	}
	if s.runs == nil {
		return -1, nil
	}
	t := s.runStage
	if !t.detected {
		return -1, nil
	}
	key, take := s.runs.runKey()
	if key == nil || !take && len(s.stages) > 1 {
		// Passed on, a delta would meet the later stages: theirs is the
		// general way.
		return -1, nil
	}
	h := len(deltaHeadData)
	switch {
	case len(ev) > len(deltaHeadNamed) && string(ev[:len(deltaHeadNamed)]) == deltaHeadNamed:
		h = len(deltaHeadNamed)
	case len(ev) > len(deltaHeadData) && string(ev[:len(deltaHeadData)]) == deltaHeadData:
	default:
		return -1, nil
	}
	j := digitsEnd(ev, h)
	if j == h || len(ev)-j < len(key) || string(ev[j:j+len(key)]) != string(key) {
		return -1, nil
	}
	n := s.dataLineEnd(ev, j+len(key))
	if n < 0 {
		return -1, nil
	}
	// As handle does: what the engine builds next follows the framing
	// of the upstream's last event.
	s.dataOnly = h == len(deltaHeadData)
	if !take {
		return s.writeRenumbered(ev, i, h, j, n), nil
	}
	data := h - len(deltaData)
	err := t.failed(s.runs.runDelta(ev[data:n:n], jsonspan.Span{Start: h - data, End: j - data}, s.emits[0]))
	return i + n + 2, err
}

// claimPass takes the event at ev, whose first h bytes are passHead, when
// the rest of it is a sequence number and a data line: the general way
// would write it as it came, renumbered if need be (passThrough, write).
func (s *Stream) claimPass(ev []byte, i, h int) int {
	j := digitsEnd(ev, h)
	if j == h || j == len(ev) || ev[j] != ',' && ev[j] != '}' {
		return -1
	}
	n := s.dataLineEnd(ev, j)
	if n < 0 {
		return -1
	}
	s.dataOnly = ev[0] == 'd' // "data: ", not "event: " (notePass)
	return s.writeRenumbered(ev, i, h, j, n)
}

// dataLineEnd returns the end of the data line of the event at ev, looked
// for from j, when the blank line follows it and the event is within the
// parser's limit; else -1.
func (s *Stream) dataLineEnd(ev []byte, j int) int {
	n := bytes.IndexByte(ev[j:], '\n')
	if n < 0 {
		return -1
	}
	n += j
	if n+1 == len(ev) || ev[n+1] != '\n' || s.parser.MaxEvent > 0 && n+2 > s.parser.MaxEvent {
		return -1
	}
	return n
}

// writeRenumbered writes the event at ev, whose data line ends at n and
// whose sequence number is ev[h:j], as write would: as it came when the
// number is the next one, else with the next one. It returns the end of
// the event in the parser's bytes, which start i before ev, or -1 when the
// number is no number write would read.
func (s *Stream) writeRenumbered(ev []byte, i, h, j, n int) int {
	seq, ok := parseSeq(ev[h:j])
	if !ok {
		return -1
	}
	if seq == s.seq {
		s.out = append(s.out, ev[:n+2]...)
	} else {
		s.out = appendRenumbered(s.out, ev[:n+2], jsonspan.Span{Start: h, End: j}, s.seq)
	}
	s.seq++
	return i + n + 2
}

// appendRenumbered appends b to dst with seq in place of the number at sp.
func appendRenumbered(dst, b []byte, sp jsonspan.Span, seq int64) []byte {
	dst = append(dst, b[:sp.Start]...)
	dst = strconv.AppendInt(dst, seq, 10)
	return append(dst, b[sp.End:]...)
}

// notePass makes the head of ev, an upstream event that no stage handles,
// the one claim passes events on by, when the event is laid out the simple
// way: an optional "event: " line, one "data: " line and the blank line,
// no id or retry. Written from its bytes, such an event comes out as write
// would build it from its name and data.
func (s *Stream) notePass(ev *Event, seq jsonspan.Span) {
	if s.parser.Claim == nil || !s.seqKnown || seq.Start < 0 || ev.ID != nil || ev.Retry != nil || ev.Data == nil {
		return
	}
	raw := ev.Raw
	off := len("data: ")
	if ev.Name != nil {
		off += len("event: ") + len(ev.Name) + 1
		if len(raw) < off || string(raw[:len("event: ")]) != "event: " ||
			string(raw[len("event: "):len("event: ")+len(ev.Name)]) != string(ev.Name) || raw[off-len("data: ")-1] != '\n' {
			return
		}
	}
	if len(raw) != off+len(ev.Data)+2 || string(raw[off-len("data: "):off]) != "data: " ||
		!jsonspan.SameSlice(raw[off:off+len(ev.Data)], ev.Data) || string(raw[len(raw)-2:]) != "\n\n" {
		return
	}
	s.passHead = append(s.passHead[:0], raw[:off+seq.Start]...)
}

// passThrough writes an upstream event that no stage handles as it came,
// when its number is the next one: what write would do with it, without
// its general checks. It is most events of a long answer (text deltas),
// and reports false for anything else.
func (s *Stream) passThrough(ev *Event, typ, seq jsonspan.Span) bool {
	if ev.Raw == nil || s.bridged || s.client != ProtocolResponses || !s.seqKnown || seq.Start < 0 {
		return false
	}
	if n, ok := parseSeq(ev.Data[seq.Start:seq.End]); !ok || n != s.seq {
		return false
	}
	if s.echo && isLifecycle(ev.Data, typ) {
		return false
	}
	s.out = append(s.out, ev.Raw...)
	s.seq++
	return true
}

// head reads an event's head, the upstream event's from the exchange's
// memo.
func (s *Stream) head(d []byte) (typ, seq jsonspan.Span) { return s.x.headOf(d) }

func (s *Stream) push(i int, ev *Event) error {
	if ev == s.cur && s.x.head.known && jsonspan.SameSlice(ev.Data, s.x.head.data) {
		// The upstream's event as it came (a stage may have given it new
		// data): stages that do not handle its type pass it on without
		// being asked.
		typ := ev.Data[s.x.head.typ.Start:s.x.head.typ.End]
		for i < len(s.stages) && s.stages[i].(*trackedStream).skips(typ) {
			i++
		}
	} else if i < len(s.stages) && s.stages[i].(*trackedStream).filter != nil && ev.Data != nil {
		// An event a stage made (a call's delta in the client's shape,
		// say): the stages that leave its type alone need not see it
		// either.
		if t := EventType(ev.Data); t.Start >= 0 {
			typ := ev.Data[t.Start:t.End]
			for i < len(s.stages) && s.stages[i].(*trackedStream).skips(typ) {
				i++
			}
		}
	}
	if i == len(s.stages) {
		s.write(ev)
		return nil
	}
	// The stage that emitted carries on as the running rule.
	pos, resp := s.x.pos, s.x.response
	err := s.stages[i].Event(ev, s.emits[i])
	s.x.pos, s.x.response = pos, resp
	return err
}

// typeFilter is implemented by stream stages that handle Responses events
// of some types only and pass every other event on unchanged: the engine
// then skips them for the rest, which on a long stream of text deltas is
// most of its events.
type typeFilter interface {
	// Handles reports whether the stage may do anything with an event
	// whose "type" is typ, a JSON string literal as the event wrote it.
	// When it reports true the engine passes that event to the stage's
	// Event next, so the stage may keep what it worked out about typ. The
	// answer for a type changes only after the stage calls
	// Exchange.FiltersChanged: the engine passes later events of a type
	// no stage handles on without asking again (Stream.claim).
	Handles(typ []byte) bool
}

// skips reports whether the stage leaves an upstream event of type typ
// alone.
func (t *trackedStream) skips(typ []byte) bool {
	return t.filter != nil && !t.filter.Handles(typ)
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
	if !ab.Reported {
		s.write(s.abortEvent(ab))
	}
	s.stopped = true
	return ab
}

func (s *Stream) abortEvent(ab *StreamAbort) *Event {
	if s.client == ProtocolMessages {
		e := &Error{Status: http.StatusInternalServerError, Code: ab.Code, Message: ab.Message}
		return &Event{Name: []byte("error"), Data: e.JSONFor(ProtocolMessages)}
	}
	if s.client == ProtocolChat {
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

var doneData = []byte("[DONE]")

// write renders an event for the client. On Responses streams it keeps
// sequence_number strictly increasing by one across dropped and synthesized
// events, touching the bytes only where the number is actually off.
func (s *Stream) write(ev *Event) {
	if ev.Data != nil && s.client == ProtocolResponses {
		typ, sp := s.head(ev.Data)
		if s.echo && isLifecycle(ev.Data, typ) {
			if d := s.x.echoEvent(ev.Data); d != nil {
				ev = &Event{Name: ev.Name, Data: d}
				_, sp = head(d)
			}
		}
		if sp.Start >= 0 {
			n, ok := parseSeq(ev.Data[sp.Start:sp.End])
			if ok {
				if !s.seqKnown {
					s.seq, s.seqKnown = n, true
				}
				if n != s.seq {
					// Once a call's deltas are merged or dropped, every later
					// event needs a new number; build it in a reused buffer
					// rather than allocating per event.
					s.scratch = appendRenumbered(s.scratch[:0], ev.Data, sp, s.seq)
					renumbered := Event{Name: ev.Name, Data: s.scratch}
					ev = &renumbered
				}
				s.seq++
			}
		}
	}
	var id, retry []byte
	switch {
	case s.cur != nil:
		id, retry = s.cur.ID, s.cur.Retry
	case s.ending:
		// What stages write once the upstream has ended (a bridge's
		// terminal event) follows its last event.
		id, retry = s.lastID, s.lastRetry
	}
	if ev.Raw == nil && (id != nil && ev.ID == nil || retry != nil && ev.Retry == nil) {
		// A copy: a stage may emit the same event again after the
		// upstream event, whose bytes these alias, is gone.
		c := *ev
		if c.ID == nil {
			c.ID = id
		}
		if c.Retry == nil {
			c.Retry = retry
		}
		ev = &c
	}
	if ev.Raw == nil {
		switch {
		case !s.bridged:
			// Same protocol on both sides: synthesized events follow the
			// upstream's framing, so the client sees one style throughout.
			if s.dataOnly {
				ev.Name = nil
			}
		case s.client == ProtocolChat:
			ev.Name = nil
		case ev.Name == nil && ev.Data != nil:
			// Responses clients dispatch on the event name.
			if t := jsonspan.Lookup(ev.Data, 0, "type"); t.Start >= 0 && ev.Data[t.Start] == '"' {
				ev.Name = ev.Data[t.Start+1 : t.End-1]
			}
		}
	}
	if s.client == ProtocolChat && bytes.Equal(bytes.TrimSpace(ev.Data), doneData) {
		s.sawDone = true
	}
	if s.writeLarge(ev) {
		return
	}
	s.out = ev.AppendTo(s.out)
}

// head finds an event's type and sequence_number. Both lead every event
// OpenAI sends, so the walk stops after a few bytes.
func head(d []byte) (typ, seq jsonspan.Span) {
	if typ, seq, ok := openAIHead(d); ok {
		return typ, seq
	}
	return headWalk(d)
}

// indexEvent reads every top-level member of the event d into members, in
// one walk, with its type and sequence_number; ok is false when d is not
// a well-formed object (members is then not to be used).
func indexEvent(d []byte, members []jsonspan.Member) (typ, seq jsonspan.Span, _ []jsonspan.Member, ok bool) {
	typ, seq = jsonspan.NoSpan(), jsonspan.NoSpan()
	i := jsonspan.SkipSpace(d, 0)
	end := jsonspan.WalkMembers(d, i, func(k jsonspan.Span, v int) int {
		e := jsonspan.SkipValue(d, v)
		if e < 0 {
			return e
		}
		members = append(members, jsonspan.Member{Key: k, Value: jsonspan.Span{Start: v, End: e}})
		switch {
		case typ.Start < 0 && jsonspan.KeyIs(d, k, "type"):
			typ = jsonspan.Span{Start: v, End: e}
		case seq.Start < 0 && jsonspan.KeyIs(d, k, "sequence_number"):
			seq = jsonspan.Span{Start: v, End: e}
		}
		return e
	})
	return typ, seq, members, end >= 0 && jsonspan.SkipSpace(d, end) == len(d)
}

// headWalk is head for an event laid out any way: one walk of its members,
// stopped once both are found.
func headWalk(d []byte) (typ, seq jsonspan.Span) {
	typ, seq = jsonspan.NoSpan(), jsonspan.NoSpan()
	jsonspan.WalkMembers(d, 0, func(k jsonspan.Span, v int) int {
		e := jsonspan.SkipValue(d, v)
		switch {
		case e < 0:
			return e
		case typ.Start < 0 && jsonspan.KeyIs(d, k, "type"):
			typ = jsonspan.Span{Start: v, End: e}
		case seq.Start < 0 && jsonspan.KeyIs(d, k, "sequence_number"):
			seq = jsonspan.Span{Start: v, End: e}
		}
		if typ.Start >= 0 && seq.Start >= 0 {
			return jsonspan.StopWalk
		}
		return e
	})
	return typ, seq
}

// parseSeq reads a sequence_number: the digits of a non-negative integer.
// strconv would take a string, and converting the bytes costs an
// allocation per event.
func parseSeq(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// digitsEnd returns the index of the first byte from i on in b that is not
// an ASCII digit (one comparison each), len(b) if there is none.
func digitsEnd(b []byte, i int) int {
	for i < len(b) && b[i]-'0' < 10 {
		i++
	}
	return i
}

// EventType returns the span of an event's "type".
func EventType(d []byte) jsonspan.Span {
	if typ, _, ok := openAIHead(d); ok {
		return typ
	}
	return jsonspan.Lookup(d, 0, "type")
}

// openAIHead reads the head of an event written the way OpenAI writes every
// one, {"type":"…","sequence_number":N, with plain byte tests; anything
// else reports false and takes the general walk. It is the one look the
// engine takes at every event.
func openAIHead(d []byte) (typ, seq jsonspan.Span, ok bool) {
	const typeKey, seqKey = `{"type":"`, `,"sequence_number":`
	if len(d) < len(typeKey) || string(d[:len(typeKey)]) != typeKey {
		return typ, seq, false
	}
	end := bytes.IndexByte(d[len(typeKey):], '"')
	if end < 0 {
		return typ, seq, false
	}
	end += len(typeKey)
	if d[end-1] == '\\' {
		// Perhaps an escaped quote: the general walk decides. A quote
		// with no backslash before it always ends the string, and escapes
		// earlier in it only keep the type from matching a known one.
		return typ, seq, false
	}
	typ = jsonspan.Span{Start: len(typeKey) - 1, End: end + 1}
	rest := d[end+1:]
	// In two comparisons with constants of at most 16 bytes, which the
	// compiler makes word loads rather than a memequal call.
	const seqKeyHead, seqKeyTail = `,"sequence_numbe`, `r":`
	if len(rest) < len(seqKey) || string(rest[:len(seqKeyHead)]) != seqKeyHead || string(rest[len(seqKeyHead):len(seqKey)]) != seqKeyTail {
		return typ, jsonspan.NoSpan(), len(rest) > 0 && rest[0] == ',' && !bytes.Contains(rest, []byte(`"sequence_number"`))
	}
	i := end + 1 + len(seqKey)
	j := digitsEnd(d, i)
	if j == i || j >= len(d) || d[j] != ',' && d[j] != '}' {
		return typ, seq, false
	}
	return typ, jsonspan.Span{Start: i, End: j}, true
}

// trackedStream is a rule's stage as the engine runs it: it learns whether
// the stage changed the stream and how it ended one. A stage applied to the
// stream when it emitted something other than the event it was given,
// unchanged, or dropped that event. Once that is known the stage runs
// unwatched, so a long stream pays for the checks only until the rule's
// first change.
type trackedStream struct {
	inner StreamTransform
	r     *Rule
	ri    int // the rule's index among the bound rules
	// joiner: the stage is the engine's joiner of r's rounds, not r's.
	joiner bool
	x      *Exchange
	emit   Emit

	forwardFn Emit
	filter    typeFilter // nil: the stage sees every event
	cur       *Event
	curName   []byte
	curData   []byte
	emitted   int
	detected  bool
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
	// The stage's rule is the running one: what it asks of the exchange
	// (a round, a tally) is its own.
	t.x.pos, t.x.response = t.ri, true
	if t.detected {
		return t.failed(t.inner.Event(ev, emit))
	}
	t.emit = emit
	t.cur, t.curName, t.curData, t.emitted = ev, ev.Name, ev.Data, 0
	err := t.inner.Event(ev, t.forwardFn)
	if err == nil && t.emitted == 0 && !t.detected {
		t.detected = true
		t.x.markApplied(t.r, PhaseResponse)
	}
	t.cur = nil
	return t.failed(err)
}

func (t *trackedStream) End(emit Emit) error {
	t.x.pos, t.x.response = t.ri, true
	if t.detected {
		return t.failed(t.inner.End(emit))
	}
	t.emit = emit
	t.cur = nil // anything emitted at the end is the stage's own
	return t.failed(t.inner.End(t.forwardFn))
}

func (t *trackedStream) failed(err error) error {
	if err != nil {
		code := "stream_transform_failed"
		var ab *StreamAbort
		if errors.As(err, &ab) {
			code = ab.Code
		}
		t.x.FailStream(code)
	}
	return err
}
