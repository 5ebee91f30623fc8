package messagesbridge

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/internal/reasonenv"
)

// The answer's shape is the same on both paths: one thinking block (when
// the upstream reasoned) whose signature seals the reasoning, then text,
// then one tool_use block per call; stop_reason and usage mapped alike
// (stopReason, appendUsage). A stream may interleave text and calls, as
// they came; a JSON answer has one content string, so text comes first.

// signaturePending is the thinking block's signature in content_block_start:
// Claude Code wants one there, and the envelope is only known when the
// block ends (its signature_delta replaces it). It is no envelope, so a
// client that kept it sends nothing upstream from it.
const signaturePending = "llmt.pending"

// cutSignature marks a thinking block whose reasoning is not whole: cut
// at max_reasoning, or by the stream's failure (reasonenv.Cut, the mark
// responses_to_chat writes for a cut reasoning item).
func cutSignature(profile string) string { return reasonenv.Cut(profile) }

// newMessageID is "msg_" and 24 random hex digits.
func newMessageID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "msg_" + hex.EncodeToString(b[:])
}

// callID is a call's tool_use id: the upstream's, or, for an upstream that
// gives none, one derived from the completion's id, the call's place and
// name, so that the stream and the JSON answer name a call alike and two
// answers do not (Claude Code refuses a repeated tool_use id).
func callID(upstream, completion string, seq int, name string) string {
	if upstream != "" {
		return upstream
	}
	h := sha256.New()
	h.Write([]byte(completion))
	h.Write([]byte{0})
	h.Write(strconv.AppendInt(nil, int64(seq), 10))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return "call_" + hex.EncodeToString(h.Sum(nil)[:12])
}

// stop is how an answer ended, in Messages terms.
type stop struct {
	reason  string
	seq     string // the client's stop sequence that ended it, for stop_sequence
	refusal bool   // stop_details {"type":"refusal"}
}

// upstreamFailed reports finish reasons that say the answer did not end
// as the model meant it to: they are errors, never an end_turn.
func upstreamFailed(finish string) bool {
	return finish == "error" || finish == "insufficient_system_resource"
}

// stopReason maps a Chat finish_reason (§5.2). toolBlocks is the number of
// tool_use blocks the answer holds: a tool_use stop without one stalls
// Claude Code, and calls with a "stop" finish are still calls to run.
// matched is the stop string the upstream says it stopped at (vLLM's
// stop_reason, SGLang's matched_stop), which is a stop_sequence stop when
// it is one of the client's.
func stopReason(x *transforms.Exchange, rec *bridgeRecord, finish string, toolBlocks int, matched string) stop {
	switch finish {
	case "tool_calls", "function_call":
		if toolBlocks > 0 {
			return stop{reason: "tool_use"}
		}
		x.Decide("stop_reason", "end_turn", "finish_reason "+finish+" without a usable call")
		return stop{reason: "end_turn"}
	case "length":
		return stop{reason: "max_tokens"}
	case "model_context_window_exceeded":
		return stop{reason: "model_context_window_exceeded"}
	case "content_filter", "sensitive":
		return stop{reason: "refusal", refusal: true}
	}
	if toolBlocks > 0 {
		return stop{reason: "tool_use"}
	}
	switch finish {
	case "stop", "end_turn", "eos", "stop_sequence":
		if matched != "" {
			for _, s := range rec.stopSequences {
				if s == matched {
					return stop{reason: "stop_sequence", seq: s}
				}
			}
		}
	default:
		x.Decide("stop_reason", "end_turn", "an unknown finish_reason "+strconv.Quote(finish))
	}
	return stop{reason: "end_turn"}
}

// appendStop writes a message's stop_reason, stop_sequence and, for a
// refusal, stop_details, as members after a comma.
func appendStop(dst []byte, st stop) []byte {
	dst = append(dst, `"stop_reason":"`...)
	dst = append(dst, st.reason...)
	dst = append(dst, `","stop_sequence":`...)
	if st.seq != "" {
		dst = jsonspan.AppendStringStr(dst, st.seq)
	} else {
		dst = append(dst, "null"...)
	}
	if st.refusal {
		dst = append(dst, `,"stop_details":{"type":"refusal"}`...)
	}
	return dst
}

// zeroUsage is message_start's usage, and the end's when the upstream
// never said: every counter present, cache ones included (Claude Code reads
// them to size the context).
const zeroUsage = `{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}`

// usageFields are the members of a Chat usage object appendUsage reads.
var usageFields = []string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details",
	"prompt_cache_hit_tokens", "cached_tokens", "cache_creation_tokens", "cache_write_tokens", "prompt_cache_miss_tokens"}

// appendUsage maps the Chat usage object at u in doc to Messages usage
// (§5.3): Anthropic counts input without the cached part, so input is
// the prompt less what was read from or written to the cache. A missing
// usage is all zeros.
func appendUsage(dst, doc []byte, u jsonspan.Span) []byte {
	if u.Start < 0 || doc[u.Start] != '{' {
		return append(dst, zeroUsage...)
	}
	num := func(sp jsonspan.Span) int64 {
		if sp.Start < 0 {
			return 0
		}
		n, err := strconv.ParseInt(string(doc[sp.Start:sp.End]), 10, 64)
		if err != nil || n < 0 {
			// Some upstreams write counts as floats; nothing else counts.
			f, ferr := strconv.ParseFloat(string(doc[sp.Start:sp.End]), 64)
			if ferr != nil || f < 0 || f > 1e15 {
				return 0
			}
			return int64(f)
		}
		return n
	}
	var f [9]jsonspan.Span
	jsonspan.ObjectFields(doc, u.Start, usageFields, f[:])
	prompt, completion := num(f[0]), num(f[1])
	// DeepSeek counts cache hits in prompt_cache_hit_tokens, Kimi in a
	// top-level cached_tokens, OpenAI and most others in the details.
	read := max(num(f[4]), num(f[5]))
	written := max(num(f[6]), num(f[7]))
	if d := f[2]; d.Start >= 0 && doc[d.Start] == '{' {
		var g [3]jsonspan.Span
		jsonspan.ObjectFields(doc, d.Start, []string{"cached_tokens", "cache_creation_tokens", "cache_write_tokens"}, g[:])
		if c := num(g[0]); c > 0 {
			read = c
		}
		if c := max(num(g[1]), num(g[2])); c > 0 {
			written = c
		}
	}
	if f[0].Start < 0 && f[8].Start >= 0 {
		// DeepSeek's prompt is its cache hits and misses.
		prompt = num(f[8]) + read + written
	}
	thinking := jsonspan.NoSpan()
	if d := f[3]; d.Start >= 0 && doc[d.Start] == '{' {
		thinking = jsonspan.Lookup(doc, d.Start, "reasoning_tokens")
	}
	i := strconv.AppendInt
	dst = append(dst, `{"input_tokens":`...)
	dst = i(dst, max(prompt-read-written, 0), 10)
	dst = append(dst, `,"output_tokens":`...)
	dst = i(dst, completion, 10)
	dst = append(dst, `,"cache_creation_input_tokens":`...)
	dst = i(dst, written, 10)
	dst = append(dst, `,"cache_read_input_tokens":`...)
	dst = i(dst, read, 10)
	if thinking.Start >= 0 && !jsonspan.IsNull(doc, thinking) {
		dst = append(dst, `,"output_tokens_details":{"thinking_tokens":`...)
		dst = i(dst, num(thinking), 10)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendModel writes the client's model as a JSON string: Messages answers
// name the model the client asked for, not the one the upstream ran.
func appendModel(dst []byte, rec *bridgeRecord) []byte {
	return jsonspan.AppendStringStr(dst, rec.model)
}

// reasoningCutReason is the decision's reason when reasoning passes the
// cap.
func reasoningCutReason(limit int) string {
	return "reasoning past max_reasoning (" + strconv.Itoa(limit) + " bytes) is not sealed: the thinking block's signature says it was cut, so it is never sent back"
}

// --- JSON --------------------------------------------------------------------

// RewriteResponse implements ResponseRewriter: a Chat completion becomes a
// Messages object, its content in the order a stream of the same answer
// gives: thinking (with its signature), text, tool_use blocks.
//
// A call whose arguments are not a JSON object keeps them as
// {"_raw":"<arguments>"}: the call is neither lost nor run with made-up
// input, and the tool's input check tells the model what went wrong.
func (t *MessagesToChat) RewriteResponse(x *transforms.Exchange, body []byte) ([]byte, error) {
	rec := t.record(x)
	if !rec.bridged || !jsonspan.Valid(body) {
		return body, nil
	}
	start := jsonspan.SkipSpace(body, 0)
	if body[start] != '{' {
		return body, nil
	}
	var f [3]jsonspan.Span
	jsonspan.ObjectFields(body, start, []string{"choices", "usage", "id"}, f[:])
	if f[0].Start < 0 || body[f[0].Start] != '[' {
		return body, nil // an error object or something else: as it came
	}
	completion, _ := jsonspan.StringValue(body, f[2])
	var (
		content, reasoning []byte
		calls              []jsonCall
		finish, matched    string
		usage              = f[1]
	)
	jsonspan.EachElement(body, f[0].Start, func(c jsonspan.Span) bool {
		var g [5]jsonspan.Span
		jsonspan.ObjectFields(body, c.Start, []string{"message", "finish_reason", "stop_reason", "matched_stop", "usage"}, g[:])
		finish, _ = jsonspan.StringValue(body, g[1])
		matched, _ = jsonspan.StringValue(body, g[2])
		if matched == "" {
			matched, _ = jsonspan.StringValue(body, g[3])
		}
		if usage.Start < 0 || jsonspan.IsNull(body, usage) {
			usage = g[4] // Moonshot puts usage in the choice
		}
		msg := g[0]
		if msg.Start < 0 || body[msg.Start] != '{' {
			return false
		}
		var h [6]jsonspan.Span
		jsonspan.ObjectFields(body, msg.Start, []string{"content", "reasoning_content", "reasoning", "reasoning_details", "tool_calls", "refusal"}, h[:])
		content = stringBytes(body, h[0])
		if len(content) == 0 {
			content = stringBytes(body, h[5]) // a refusal is the answer's text
		}
		reasoning = stringBytes(body, h[1])
		if len(reasoning) == 0 {
			reasoning = stringBytes(body, h[2])
		}
		if d := h[3]; len(reasoning) == 0 && d.Start >= 0 && body[d.Start] == '[' {
			jsonspan.EachElement(body, d.Start, func(el jsonspan.Span) bool {
				reasoning = append(reasoning, stringBytes(body, jsonspan.Lookup(body, el.Start, "text"))...)
				return true
			})
		}
		if h[4].Start >= 0 && body[h[4].Start] == '[' {
			seq := 0
			jsonspan.EachElement(body, h[4].Start, func(tc jsonspan.Span) bool {
				var k [2]jsonspan.Span
				jsonspan.ObjectFields(body, tc.Start, []string{"id", "function"}, k[:])
				var c jsonCall
				c.seq = seq
				seq++
				c.id, _ = jsonspan.StringValue(body, k[0])
				if k[1].Start >= 0 && body[k[1].Start] == '{' {
					var n [2]jsonspan.Span
					jsonspan.ObjectFields(body, k[1].Start, []string{"name", "arguments"}, n[:])
					c.name, _ = jsonspan.StringValue(body, n[0])
					c.args = stringBytes(body, n[1])
					if n[1].Start >= 0 && body[n[1].Start] == '{' {
						c.args = body[n[1].Start:n[1].End] // an object where a string belongs
					}
				}
				if c.name == "" {
					x.Decide("tool call", "drop", "a tool call without a function name")
					return true
				}
				calls = append(calls, c)
				return true
			})
		}
		return false // the first choice: a message holds one answer
	})
	if upstreamFailed(finish) {
		// Not an answer: the client gets an error, as on a stream.
		return nil, &transforms.Error{Status: 502, Message: "the upstream ended the answer with finish_reason " + finish}
	}
	think, text := splitThink(content)
	reasoning = append(reasoning, think...)
	if isBlank(text) {
		text = nil // the stream drops white space that leads nothing
	}

	out := make([]byte, 0, 512+2*(len(reasoning)+len(text)))
	out = append(out, `{"id":"`...)
	out = append(out, newMessageID()...)
	out = append(out, `","type":"message","role":"assistant","model":`...)
	out = appendModel(out, rec)
	out = append(out, `,"content":[`...)
	n := 0
	sep := func() {
		if n > 0 {
			out = append(out, ',')
		}
		n++
	}
	if len(reasoning) > 0 {
		sep()
		sig := ""
		if len(reasoning) > t.maxReasoning {
			x.Decide("reasoning", "truncate", reasoningCutReason(t.maxReasoning))
			sig = cutSignature(t.Profile)
		} else {
			sig = reasonenv.SealText(t.Profile, reasoning)
		}
		out = append(out, `{"type":"thinking","thinking":`...)
		out = jsonspan.AppendString(out, reasoning)
		out = append(out, `,"signature":`...)
		out = jsonspan.AppendStringStr(out, sig)
		out = append(out, '}')
	}
	if len(text) > 0 {
		sep()
		out = append(out, `{"type":"text","text":`...)
		out = jsonspan.AppendString(out, text)
		out = append(out, '}')
	}
	for _, c := range calls {
		sep()
		noteUnknownTool(x, rec, c.name)
		out = append(out, `{"type":"tool_use","id":`...)
		out = jsonspan.AppendStringStr(out, callID(c.id, completion, c.seq, c.name))
		out = append(out, `,"name":`...)
		out = jsonspan.AppendStringStr(out, c.name)
		out = append(out, `,"input":`...)
		out = appendInput(out, x, c)
		out = append(out, '}')
	}
	out = append(out, "],"...)
	out = appendStop(out, stopReason(x, rec, finish, len(calls), matched))
	out = append(out, `,"usage":`...)
	out = appendUsage(out, body, usage)
	return append(out, '}'), nil
}

// jsonCall is one call of a JSON answer.
type jsonCall struct {
	seq      int
	id, name string
	args     []byte // decoded
}

// appendInput writes a call's input: its arguments when they are a JSON
// object, {} when there are none, else {"_raw": the arguments}.
func appendInput(dst []byte, x *transforms.Exchange, c jsonCall) []byte {
	a := bytes.TrimSpace(c.args)
	switch {
	case len(a) == 0:
		return append(dst, "{}"...)
	case a[0] == '{' && jsonspan.Valid(a):
		return append(dst, a...)
	}
	x.Decide(c.name, "wrap_arguments", "arguments that are not a JSON object are kept as the input's _raw string")
	dst = append(dst, `{"_raw":`...)
	dst = jsonspan.AppendString(dst, c.args)
	return append(dst, '}')
}

// noteUnknownTool records a call to a tool the request did not declare:
// it still goes to the client, which answers it (Claude Code with an
// error result the model can read), but the log says so.
func noteUnknownTool(x *transforms.Exchange, rec *bridgeRecord, name string) {
	if rec.tools != nil && !rec.tools[name] {
		x.Decide(name, "pass", "a call to a tool the request did not declare")
	}
}

// stringBytes decodes a JSON string value; anything else is nil.
func stringBytes(doc []byte, v jsonspan.Span) []byte {
	if v.Start < 0 || doc[v.Start] != '"' {
		return nil
	}
	return jsonspan.Unescape(make([]byte, 0, v.End-v.Start), doc[v.Start+1:v.End-1])
}

// isBlank reports whether b holds only white space.
func isBlank(b []byte) bool { return len(bytes.TrimLeft(b, " \t\r\n")) == 0 }
