package fakeprovider

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/tidwall/gjson"
)

// A gateway's hidden round (tools_preflight's re-ask, say) puts a turn into
// the provider's conversation that the client never sees: the re-ask holds
// the model's invalid call and the gateway's tool message about it, and the
// client's next request holds only the repaired call. Counting the
// history's tool-call turns, as Turns does, then picks the same turn for
// the re-ask and for the client's next request. InOrder scripts such a
// conversation by the order the requests come in instead.

// ReplyTurn answers req, a request that passed the thinking provider's
// checks, with t as Turns would answer it: t's calls must be declared, ids
// come from the arrival number of the request being served (DeepSeek) or
// the calls the history holds (Kimi), and they count in CallIDs. It is
// for a Reply hook of a provider with Thinking set.
func (p *Provider) ReplyTurn(w http.ResponseWriter, req gjson.Result, t Turn) {
	k, _ := thinkingTurn(req)
	turns := make([]Turn, k+1)
	turns[k] = t
	p.mu.Lock()
	n := p.served
	p.mu.Unlock()
	q := &Provider{Thinking: p.Thinking, Turns: turns, DeltaSize: p.DeltaSize, Now: p.Now}
	q.replyThinking(w, req, n, len(req.Raw))
	p.mu.Lock()
	p.issued = append(p.issued, q.issued...)
	p.mu.Unlock()
}

// InOrder returns a Reply hook that answers the k-th request that passes
// the checks with turns[k], whatever its history holds, and a request past
// the script with a 400 that says so. answered reports how many requests
// it answered (a request the checks refused never reaches it). Requests
// must come one at a time, as an agent's turns do.
func (p *Provider) InOrder(turns []Turn) (reply func(http.ResponseWriter, gjson.Result), answered func() int) {
	var mu sync.Mutex
	next := 0
	reply = func(w http.ResponseWriter, req gjson.Result) {
		mu.Lock()
		k := next
		next++
		mu.Unlock()
		if k >= len(turns) {
			(&thinkingError{status: http.StatusBadRequest, message: "fakeprovider: the script has " +
				strconv.Itoa(len(turns)) + " answers and this is request " + strconv.Itoa(k+1)}).write(w, p.Thinking)
			return
		}
		p.ReplyTurn(w, req, turns[k])
	}
	answered = func() int {
		mu.Lock()
		defer mu.Unlock()
		return min(next, len(turns))
	}
	return reply, answered
}
