package preflight

import (
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// answer is the check of one upstream answer (one round's): it knows
// whether the answer is a re-ask's, whose text the client never sees, and
// what becomes of its invalid calls.
type answer struct {
	p      *Preflight
	x      *transforms.Exchange
	rec    *record
	repair bool // the answer to a re-ask: only its calls reach the client
	failed bool // the re-ask for it failed: it is answered again, for good
	// reaskable: an invalid call may still go back to the model.
	reaskable bool
	invalid   int // invalid calls found
	valid     int // valid calls found
}

// beginAnswer starts the check of the answer the rule is handed now.
func (p *Preflight) beginAnswer(x *transforms.Exchange, rec *record) *answer {
	a := &answer{p: p, x: x, rec: rec}
	if rd := rec.round; rd != nil && rd.Err != nil && !rec.failHandled {
		// The engine hands the answer that asked for the failed round
		// again: its calls are judged afresh, with no round left.
		rec.failHandled = true
		a.failed = true
		a.repair = rec.rounds > 1
		rec.seen = cloneSeen(rec.seenBefore)
		return a
	}
	a.repair = rec.rounds > 0
	a.reaskable = p.canReask(x, rec)
	rec.seenBefore = cloneSeen(rec.seen)
	return a
}

// judge checks one call and counts what it found.
func (a *answer) judge(ns, name string, args []byte) verdict {
	v := a.p.check(a.x, a.rec, ns, name, args)
	if !a.failed {
		tallyVerdict(a.x, &v)
	}
	switch {
	case !v.valid():
		a.invalid++
	case !v.dup:
		a.valid++
		if a.repair && !a.failed && a.rec.pending > 0 {
			a.rec.pending--
			a.x.Tally("preflight_repaired", "reask")
		}
	}
	return v
}

// reask asks for a round with body, built by the caller; false when none
// is left.
func (a *answer) reask(body []byte) bool {
	rd, err := a.x.StartRound(body, "repair")
	if err != nil {
		a.x.Decide("preflight", "no_reask", err.Error())
		return false
	}
	a.rec.round, a.rec.failHandled = rd, false
	a.rec.rounds++
	a.rec.pending = a.invalid
	a.rec.last = body
	return true
}

// outcome counts an invalid call the client gets per on_failure.
func (a *answer) outcome(v *verdict) {
	label := [...]string{failPass: "pass", failDrop: "drop", failError: "error"}[a.p.onFailure]
	a.x.Tally("preflight_failed", label)
	a.x.Decide(qualified(v.ns, v.name), "preflight_failed", label)
}

// reaskBase is the request a re-ask extends: the last re-ask's, so a
// second re-ask keeps the first's history.
func (rec *record) reaskBase() []byte {
	if rec.last != nil {
		return rec.last
	}
	return rec.body
}
