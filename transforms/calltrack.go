package transforms

import (
	"fmt"
	"hash/maphash"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/streambuf"
)

// The call tracker is the response side every tool rule shares. It finds the
// upstream's calls in JSON bodies and in both stream flavours (Responses
// items and their argument events; Chat tool_calls fragments keyed by
// choice and index), asks the rule's CallPolicy which calls are its own,
// and gives those back to the client in the client's shape, progressively:
// a call's header goes out at once, its arguments as soon as the handler
// can tell what they mean to the client. Calls that are interrupted are
// dropped, never completed from fragments; calls that only appear in
// response.completed are delivered as the items a client expects.

// CallPolicy is a tool rule's response side on top of the call tracker.
type CallPolicy interface {
	// OpenCall is asked about each function call of the upstream's
	// response (up.Type is "function"; Chat calls have no namespace). It
	// returns the identity the client must see, with Type "custom",
	// "function" or, with a handler that is an ItemBuilder, a built-in
	// type, and the handler of the call's arguments; ok false leaves
	// the call alone. It is the "opened" step of a call's life: the
	// handler then sees the argument deltas, and the call ends finished
	// (Finish) or abandoned (the handler is dropped).
	OpenCall(x *Exchange, up ToolID) (client ToolID, h CallHandler, ok bool)
}

// CallHandler turns one call's arguments from the upstream's form into the
// client's: the input text of a custom call, or the arguments of a
// function call.
type CallHandler interface {
	// Delta takes the next fragment of the raw arguments and returns the
	// client text it reveals now (possibly none), valid until the next
	// call. An error ends the stream with max_call_buffer_exceeded.
	Delta(frag []byte) ([]byte, error)
	// Raw returns every raw argument byte received so far.
	Raw() []byte
	// Finish returns the client's complete text for the complete raw
	// arguments. The client has already seen what Delta returned; when
	// that is not a prefix of the result, the done event carries the
	// result and the mismatch is logged.
	Finish(raw []byte) []byte
}

// ItemBuilder is implemented by call handlers whose client item is a
// built-in call (local_shell_call, shell_call, apply_patch_call,
// computer_call, tool_search_call) rather than a function or custom call.
// Such an item has no argument events a client could follow, so the
// tracker passes none of the call's events on while it streams: once the
// arguments are complete it asks for the item and sends its added and done
// events together. Only this call waits; every other event flows as it
// comes. The Responses tracker honours it; Chat has no built-in items.
type ItemBuilder interface {
	// BuildItem appends the client's item for the complete raw arguments
	// to dst. ref carries the upstream item's id, call id and status. ok
	// false means the arguments do not fit the item: the call then goes
	// to the client as a function_call under the client's name, with the
	// arguments as they came.
	BuildItem(dst, raw []byte, ref CallRef) (item []byte, ok bool)
}

// CallRef is what the upstream's call item says about itself.
type CallRef struct {
	ItemID, CallID, Status string
}

// CallAbandoner is implemented by call handlers that want to know when their
// call is dropped unfinished (an upstream error, a cut stream, a length
// stop, the buffer limit): the client then never sees the call completed.
type CallAbandoner interface {
	Abandon(reason string)
}

// CallReleaser is implemented by call handlers that hold buffers worth
// recycling. The tracker calls Release once the call is finished or
// dropped; the handler is not used again, and nothing Finish returned may
// live in what it releases.
type CallReleaser interface {
	Release()
}

// CallRelayer is implemented by call handlers that only pass a call on to
// a later stage of the same rule, which restores it further: the call is
// counted once, by that stage.
type CallRelayer interface{ RelaysCall() }

// countRestored counts a call given back its client shape, once per rule.
func countRestored(x *Exchange, h CallHandler) {
	if _, relay := h.(CallRelayer); !relay {
		x.counts.Restored++
	}
}

// releaseCall ends a handler's use.
func releaseCall(h CallHandler) {
	if r, ok := h.(CallReleaser); ok {
		r.Release()
	}
}

// abandonCall logs and reports a call dropped unfinished.
func abandonCall(x *Exchange, client ToolID, h CallHandler, reason string) {
	x.Decide(client.String(), "drop_partial_call", reason)
	x.CallBuffered(len(h.Raw()))
	if a, ok := h.(CallAbandoner); ok {
		a.Abandon(reason)
	}
}

// PassArgs is the CallHandler of a call whose arguments the client takes as
// they are (a renamed function): every fragment is handed on as it comes.
// Its zero value holds a call to the exchange's max_call_buffer.
type PassArgs struct {
	// Limit is the most raw bytes held. 0 means the exchange's
	// Limits.MaxCallBuffer, which the call tracker sets when it opens the
	// call (for a handler that embeds PassArgs too), and no limit when the
	// exchange has none. A negative Limit sets none of PassArgs' own.
	Limit int
	raw   []byte
}

// callLimiter is a handler whose buffer limit defaults to the exchange's:
// PassArgs, and any handler embedding it.
type callLimiter interface{ defaultLimit(n int) }

func (p *PassArgs) defaultLimit(n int) {
	if p.Limit == 0 {
		p.Limit = n
	}
}

// limitCalls gives the handlers p opens the exchange's max_call_buffer
// where they leave it to the exchange.
func limitCalls(p CallPolicy) CallPolicy { return limitedPolicy{p} }

type limitedPolicy struct{ CallPolicy }

func (l limitedPolicy) OpenCall(x *Exchange, up ToolID) (ToolID, CallHandler, bool) {
	client, h, ok := l.CallPolicy.OpenCall(x, up)
	if c, is := h.(callLimiter); ok && is {
		c.defaultLimit(x.Limits.MaxCallBuffer)
	}
	return client, h, ok
}

// Delta implements CallHandler.
func (p *PassArgs) Delta(frag []byte) ([]byte, error) {
	if p.Limit > 0 && len(p.raw)+len(frag) > p.Limit {
		return nil, streambuf.ErrLimit
	}
	p.raw = append(p.raw, frag...)
	return frag, nil
}

// Raw implements CallHandler.
func (p *PassArgs) Raw() []byte { return p.raw }

// Finish implements CallHandler.
func (p *PassArgs) Finish(raw []byte) []byte { return raw }

// NewCallStream returns the stream stage that restores p's calls in a
// stream of x's upstream-side protocol at the running rule.
func NewCallStream(x *Exchange, p CallPolicy) StreamTransform {
	if j, ok := p.(JudgeOnly); ok {
		if x.Protocol() != ProtocolResponses && x.Protocol() != ProtocolChat {
			return nil
		}
		return newJudgedStream(x, j.CallJudge, nil)
	}
	var st StreamTransform
	switch x.Protocol() {
	case ProtocolResponses:
		st = newResponsesCalls(x, limitCalls(p))
	case ProtocolChat:
		st = newChatCalls(x, limitCalls(p))
	default:
		return nil
	}
	if j, ok := p.(CallJudge); ok {
		return newJudgedStream(x, j, st)
	}
	return st
}

// RestoreCalls rewrites p's calls in a complete response body of the
// running rule's upstream-side protocol, returning body itself when none
// is there.
func RestoreCalls(x *Exchange, p CallPolicy, body []byte) []byte {
	if !jsonspan.Valid(body) {
		return body
	}
	if j, ok := p.(JudgeOnly); ok {
		return x.ApplyEdits(body, judgeBody(x, j.CallJudge, body))
	}
	if j, ok := p.(CallJudge); ok {
		body = x.ApplyEdits(body, judgeBody(x, j, body))
	}
	switch x.Protocol() {
	case ProtocolResponses:
		items := readOutput(body, jsonspan.Lookup(body, jsonspan.SkipSpace(body, 0), "output"), nil)
		return x.ApplyEdits(body, restoreOutput(x, limitCalls(p), body, items, nil, false))
	case ProtocolChat:
		return x.ApplyEdits(body, restoreChatMessage(x, limitCalls(p), body))
	}
	return body
}

func overLimit(x *Exchange, client ToolID) *StreamAbort {
	return &StreamAbort{
		Code:    "max_call_buffer_exceeded",
		Message: fmt.Sprintf("the arguments of tool call %q exceed the gateway's max_call_buffer of %d bytes", client.String(), x.Limits.MaxCallBuffer),
	}
}

// sentText remembers what the client has been sent of a call's text by its
// length and hash rather than a copy: a patch can be megabytes, and all the
// finish needs to know is whether the final text continues it. maphash
// runs at memory speed, and a stream hashes every byte of its calls twice.
type sentText struct {
	n int
	h maphash.Hash
}

// textSeed seeds every sentText: hashes are compared within one process.
var textSeed = maphash.MakeSeed()

func (t *sentText) add(b []byte) {
	if t.n == 0 {
		t.h.SetSeed(textSeed)
	}
	_, _ = t.h.Write(b)
	t.n += len(b)
}

// rest returns what final adds to the text sent, and false when final does
// not begin with it.
func (t *sentText) rest(final []byte) ([]byte, bool) {
	if t.n == 0 {
		return final, true
	}
	if len(final) < t.n || maphash.Bytes(textSeed, final[:t.n]) != t.h.Sum64() {
		return nil, false
	}
	return final[t.n:], true
}
