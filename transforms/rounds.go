package transforms

import (
	"errors"
	"fmt"
	"time"
)

// Rounds let a rule answer part of the upstream's answer itself and ask
// again before the client sees it: a call that fails its schema goes back
// to the model with what was wrong (tools_preflight), a search the
// gateway answers adds tools (tools_defer). A round is one more upstream
// request within the client's one request. The rule's response phase asks
// for it (StartRound) with a body in the protocol of its upstream side,
// built from the body its request phase was handed plus what it learned;
// the engine runs the request phases of the rules nearer the upstream on
// that body again, sends it, and hands the answer through those rules'
// response phases back to the rule, whose stage carries on. The rules on
// the client's side of it see one answer: the engine joins the rounds
// (one response.created and one terminal event, dense output_index, usage
// summed; for Chat one id, the role once, one finish and one usage chunk).
// Everything stays in the Exchange: nothing outlives the request.

// RoundTaker is implemented by transforms whose response phase may take
// rounds.
type RoundTaker interface {
	// TakesRounds reports, after the request phase, whether this request
	// may need a round. For such a request the engine keeps the request
	// bodies alive for the whole exchange (a rule may keep the body its
	// request phase was handed, to build a round's request from) and joins
	// the rounds' answers for the client.
	TakesRounds(x *Exchange) bool
}

// DefaultMaxRounds is the most rounds added to one client request, across
// every rule that takes them, when Limits.MaxRounds is 0.
const DefaultMaxRounds = 3

// DefaultMaxRoundTime bounds the wall time rounds add to one request when
// Limits.MaxRoundTime is 0.
const DefaultMaxRoundTime = 60 * time.Second

// ErrNoRoundLeft is StartRound's refusal once a request has taken its
// rounds or their time: the rule ends its answer as if the round had not
// helped.
var ErrNoRoundLeft = errors.New("transforms: no round left for this request (max_rounds or max_round_time)")

// Round is one upstream request added to a client request.
type Round struct {
	// Reason labels the round in metrics and the explain header
	// ("repair", "search").
	Reason string
	// N counts the request's added rounds from 1.
	N int
	// Err is set by the engine when the round's upstream call failed (an
	// error status, a cut or undecodable stream, a timeout, the client
	// gone) or its request could not be built: the rule then ends its
	// answer as if the round had not helped.
	Err error
	// Duration is the round's wall time, once it ended.
	Duration time.Duration

	body    []byte
	rule    int // the bound rule that asked
	started time.Time
	ended   bool
}

// maxRounds is the request's cap on added rounds; 0 or less allows none.
func (x *Exchange) maxRounds() int {
	if x.Limits.MaxRounds == 0 {
		return DefaultMaxRounds
	}
	return x.Limits.MaxRounds
}

func (x *Exchange) maxRoundTime() time.Duration {
	if x.Limits.MaxRoundTime <= 0 {
		return DefaultMaxRoundTime
	}
	return x.Limits.MaxRoundTime
}

// RoundsLeft reports whether StartRound could take one more round now.
func (x *Exchange) RoundsLeft() bool {
	if len(x.rounds) >= x.maxRounds() || x.round != nil {
		return false
	}
	return len(x.rounds) == 0 || time.Since(x.rounds[0].started) < x.maxRoundTime()
}

// StartRound asks, from the running rule's response phase, for another
// upstream request with body, in the protocol of the rule's upstream side.
// The rule must be a RoundTaker; a stream stage asks no later than when it
// handles the upstream's terminal event (Responses' response.completed,
// incomplete or failed; Chat's finish or [DONE]) or in End, and passes
// that event on as usual: the engine holds it until it knows whether the
// round answered. A JSON response phase returns the part of the answer
// the client is to see of this round. The round's answer then comes
// through the same stage (or RewriteResponse) as the upstream's next
// events; once every round ended, End runs. ErrNoRoundLeft refuses a
// round over the request's caps.
func (x *Exchange) StartRound(body []byte, reason string) (*Round, error) {
	if !x.response || x.pos < 0 || x.pos >= len(x.rules) {
		return nil, errors.New("transforms: StartRound outside a response phase")
	}
	if rt, ok := x.rules[x.pos].resp.(RoundTaker); !ok || !x.roundTaker(x.pos) {
		_ = rt
		return nil, fmt.Errorf("transforms: rule %s takes no rounds", x.rules[x.pos].TransformID())
	}
	if !x.RoundsLeft() {
		return nil, ErrNoRoundLeft
	}
	rd := &Round{Reason: reason, N: len(x.rounds) + 1, body: body, rule: x.pos}
	x.round = rd
	return rd, nil
}

// roundTaker reports whether bound rule i may take rounds on this request,
// asked once per exchange.
func (x *Exchange) roundTaker(i int) bool {
	if x.takers == nil {
		x.takers = make([]bool, len(x.rules))
		for j, r := range x.rules {
			if rt, ok := r.resp.(RoundTaker); ok && r.phase&PhaseResponse != 0 && r.phase&PhaseRequest != 0 {
				at, resp := x.pos, x.response
				x.at(j, true)
				x.takers[j] = rt.TakesRounds(x)
				x.at(at, resp)
			}
		}
	}
	return x.takers[i]
}

// TakesRounds reports whether a bound rule may take rounds on this
// request: the handler then keeps the request bodies for the whole
// exchange.
func (x *Exchange) TakesRounds() bool {
	for i := range x.rules {
		if x.roundTaker(i) {
			return true
		}
	}
	return false
}

// PendingRound returns the round a rule asked for and the engine has not
// sent yet, or nil.
func (x *Exchange) PendingRound() *Round { return x.round }

// Rounds lists the rounds this request took, in order.
func (x *Exchange) Rounds() []*Round { return x.rounds }

// RoundRequest starts the pending round: it runs the request phases of the
// rules nearer the upstream than the one that asked over the round's
// body and returns what goes upstream. A failure is the round's: Err is
// set, the round is over, and the engine lets the rule end its answer.
func (x *Exchange) RoundRequest() ([]byte, error) {
	rd := x.round
	if rd == nil {
		return nil, errors.New("transforms: no round pending")
	}
	x.round = nil
	x.answerEnded = false // the answer's end is this round's to reach
	rd.started = time.Now()
	x.rounds = append(x.rounds, rd)
	x.Decide("round", rd.Reason, fmt.Sprintf("round %d asked by %s", rd.N, x.rules[rd.rule].TransformID()))
	body, err := x.rewriteFrom(rd.rule+1, rd.body)
	if err != nil {
		x.EndRound(err)
		return nil, err
	}
	return body, nil
}

// EndRound records the end of the round the engine sent last: err is why
// its upstream call failed, nil when its answer came.
func (x *Exchange) EndRound(err error) {
	if len(x.rounds) == 0 {
		return
	}
	rd := x.rounds[len(x.rounds)-1]
	if rd.ended {
		return
	}
	rd.ended, rd.Duration = true, time.Since(rd.started)
	if err != nil {
		rd.Err = err
		x.Decide("round", "failed", err.Error())
	}
}

// RoundDeadline is when the request's round time runs out; zero before the
// first round.
func (x *Exchange) RoundDeadline() time.Time {
	if len(x.rounds) == 0 {
		return time.Time{}
	}
	return x.rounds[0].started.Add(x.maxRoundTime())
}

// rewriteFrom runs the request phases of the bound rules from the one at
// index from on body, as a round's request: built whole, never deferred.
func (x *Exchange) rewriteFrom(from int, body []byte) ([]byte, error) {
	defer x.at(-1, false)
	at := x.deferAt
	x.deferAt = -1
	defer func() { x.deferAt = at }()
	for i := from; i < len(x.rules); i++ {
		r := x.rules[i]
		if r.phase&PhaseRequest == 0 {
			continue
		}
		x.at(i, false)
		out, err := r.req.RewriteRequest(x, body)
		x.releaseWalks()
		if errors.Is(err, ErrInvalidJSON) || x.invalid {
			return nil, fmt.Errorf("rule %s could not read the round's request", r.TransformID())
		}
		if err != nil {
			return nil, err
		}
		body = out
	}
	return body, nil
}

// lastRound is the round sent last, nil before any.
func (x *Exchange) lastRound() *Round {
	if len(x.rounds) == 0 {
		return nil
	}
	return x.rounds[len(x.rounds)-1]
}
