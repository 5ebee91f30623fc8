package fakeprovider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Thinking names a Chat-only provider in thinking mode that the fake
// imitates; see Provider.Thinking.
type Thinking string

const (
	// DeepSeek imitates DeepSeek V4 in thinking mode (deepseek-v4-pro,
	// deepseek-v4-flash): tool call ids call_00_<24 characters>, the
	// cache hits in usage as prompt_cache_hit_tokens.
	DeepSeek Thinking = "deepseek"

	// Kimi imitates Moonshot's Kimi K2.5/K2.6 in thinking mode: tool call
	// ids functions.<name>:<n>, n counting the calls of the conversation.
	Kimi Thinking = "kimi"
)

// The providers' own error texts (responses-chat-bridge.md §3.1).
const (
	// MsgDeepSeekReasoning is DeepSeek V4's 400 for an assistant tool-call
	// message without reasoning_content while thinking.
	MsgDeepSeekReasoning = "The `reasoning_content` in the thinking mode must be passed back to the API."

	// MsgKimiReasoningTmpl is Kimi's 400 (code KimiReasoningCode) for the
	// same, with the message's index in messages.
	MsgKimiReasoningTmpl = "thinking is enabled but reasoning_content is missing in assistant tool call message at index %d"

	// KimiReasoningCode is the code of Kimi's missing-reasoning 400.
	KimiReasoningCode = 20015

	// MsgSystemFirst refuses a system message anywhere but first, or a
	// second one (the text strict chat templates answer).
	MsgSystemFirst = "System message must be at the beginning."

	// MsgToolUnanswered and MsgToolOrphan are OpenAI's texts for tool
	// calls and tool messages that do not pair up.
	MsgToolUnanswered = "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s"
	MsgToolOrphan     = "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
)

// Turn is one scripted answer of a thinking provider (Provider.Turns).
type Turn struct {
	// Reasoning is streamed first, as reasoning_content; it is also what
	// the provider expects back on the assistant message next turn (the
	// test checks that: the provider, like the real ones, only checks it
	// is there).
	Reasoning string

	// Calls are made together, as parallel tool calls, after Reasoning.
	// Each must name a function the request declares.
	Calls []Call

	// Text is the assistant content, after Reasoning; with no Calls it is
	// the final answer.
	Text string

	// Finish is the finish_reason. Default: tool_calls with Calls, else
	// stop. "length" imitates a cut answer: the text is sent, the calls
	// are not.
	Finish string
}

// Call is a scripted tool call.
type Call struct {
	Name      string // a function tool the request declares, verbatim
	Arguments string // JSON text
}

// thinkingModels are the model ids each imitation answers to; others get
// the provider's unknown-model error.
var thinkingModels = map[Thinking][]string{
	DeepSeek: {"deepseek-v4-pro", "deepseek-v4-flash", "deepseek-chat", "deepseek-reasoner"},
	Kimi:     {"kimi-k2.6", "kimi-k2.5", "kimi-k2-thinking", "kimi-k2-thinking-turbo"},
}

// chatParams are the request members a Chat provider knows; anything else
// (a Responses field leaking through a bridge, say) is refused.
var chatParams = map[string]bool{
	"model": true, "messages": true, "tools": true, "tool_choice": true, "parallel_tool_calls": true,
	"stream": true, "stream_options": true, "max_tokens": true, "max_completion_tokens": true,
	"temperature": true, "top_p": true, "stop": true, "seed": true, "n": true, "user": true,
	"frequency_penalty": true, "presence_penalty": true, "logprobs": true, "top_logprobs": true,
	"response_format": true, "thinking": true, "reasoning_effort": true,
}

// messageFields are the members each role's message may have.
var messageFields = map[string][]string{
	"system":    {"role", "content", "name"},
	"user":      {"role", "content", "name"},
	"assistant": {"role", "content", "name", "tool_calls", "reasoning_content", "prefix", "partial"},
	"tool":      {"role", "content", "tool_call_id", "name"},
}

// thinkingError is a refusal in the imitated provider's shape.
type thinkingError struct {
	status  int
	message string
	code    any // string or number; nil is null
}

func (e *thinkingError) write(w http.ResponseWriter, th Thinking) {
	typ := "invalid_request_error"
	if e.status == http.StatusNotFound {
		typ = "resource_not_found_error"
	}
	var body jsonObj
	switch th {
	case Kimi:
		// Moonshot's shape: no param, a numeric code where it has one.
		errObj := jsonObj{{"message", e.message}, {"type", typ}}
		if e.code != nil {
			errObj = append(errObj, jsonField{"code", e.code})
		}
		body = jsonObj{{"error", errObj}, {"type", "error"}}
	default:
		// DeepSeek's: OpenAI's, with the type repeated as the code.
		code := e.code
		if code == nil {
			code = typ
		}
		body = jsonObj{{"error", jsonObj{{"message", e.message}, {"type", typ}, {"param", nil}, {"code", code}}}}
	}
	b := append(mustMarshal(body), '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.status)
	_, _ = w.Write(b)
}

func badRequest(format string, a ...any) *thinkingError {
	return &thinkingError{status: http.StatusBadRequest, message: fmt.Sprintf(format, a...)}
}

// thinkingOn reports whether the request leaves thinking on: both
// providers think unless told thinking:{type:"disabled"}.
func thinkingOn(req gjson.Result) bool {
	return req.Get("thinking.type").String() != "disabled"
}

// rejectThinking applies the checks of a strict thinking-mode Chat
// provider, in the order a request would fail them.
func rejectThinking(req gjson.Result, th Thinking) *thinkingError {
	var unknown string
	req.ForEach(func(k, _ gjson.Result) bool {
		if !chatParams[k.String()] {
			unknown = k.String()
			return false
		}
		return true
	})
	if unknown != "" {
		return badRequest("Unrecognized request argument supplied: %s", unknown)
	}
	model := req.Get("model").String()
	if !slices.Contains(thinkingModels[th], model) {
		if th == Kimi {
			return &thinkingError{status: http.StatusNotFound, message: "Not found the model " + model + " or Permission denied"}
		}
		return badRequest("Model Not Exist")
	}
	switch t := req.Get("thinking"); {
	case !t.Exists():
	case !t.IsObject():
		return badRequest("Failed to deserialize the JSON body into the target type: thinking: invalid type: %s, expected struct Thinking", t.Type)
	default:
		if typ := t.Get("type").String(); typ != "enabled" && typ != "disabled" {
			return badRequest("Failed to deserialize the JSON body into the target type: thinking.type: unknown variant `%s`, expected `enabled` or `disabled`", typ)
		}
	}
	if e := req.Get("reasoning_effort"); e.Exists() {
		if th == Kimi {
			return badRequest("Unrecognized request argument supplied: reasoning_effort")
		}
		switch e.String() {
		case "low", "medium", "high", "max", "xhigh":
		default:
			return badRequest("Failed to deserialize the JSON body into the target type: reasoning_effort: unknown variant `%s`, expected one of `low`, `medium`, `high`, `max`, `xhigh`", e.String())
		}
	}
	msgs := req.Get("messages")
	if !msgs.IsArray() || len(msgs.Array()) == 0 {
		return badRequest("Failed to deserialize the JSON body into the target type: missing field `messages`")
	}
	list := msgs.Array()
	for i, m := range list {
		if rej := rejectMessage(m, i); rej != nil {
			return rej
		}
	}
	for i, m := range list {
		if m.Get("role").String() == "system" && i != 0 {
			return badRequest(MsgSystemFirst)
		}
	}
	if rej := rejectPairing(list); rej != nil {
		return rej
	}
	if thinkingOn(req) {
		for i, m := range list {
			if m.Get("role").String() != "assistant" || len(m.Get("tool_calls").Array()) == 0 {
				continue
			}
			if m.Get("reasoning_content").Type == gjson.String {
				continue
			}
			if th == Kimi {
				return &thinkingError{status: http.StatusBadRequest, message: fmt.Sprintf(MsgKimiReasoningTmpl, i), code: KimiReasoningCode}
			}
			return badRequest(MsgDeepSeekReasoning)
		}
	}
	if th == Kimi {
		// Kimi's model was trained on its own ids: one rewritten by a
		// gateway derails it. The fake is stricter and refuses it.
		for i, m := range list {
			for j, tc := range m.Get("tool_calls").Array() {
				if id, name := tc.Get("id").String(), tc.Get("function.name").String(); !kimiID(id, name) {
					return badRequest("Invalid messages[%d].tool_calls[%d].id %q: expected functions.%s:<index>, the id Kimi gave the call", i, j, id, name)
				}
			}
		}
	}
	if rej := rejectChat(req, true); rej != nil {
		return badRequest("%s", rej.message)
	}
	return nil
}

// kimiID reports whether id is Kimi's functions.<name>:<n> for name.
func kimiID(id, name string) bool {
	rest, ok := strings.CutPrefix(id, "functions."+name+":")
	if !ok || rest == "" {
		return false
	}
	_, err := strconv.ParseUint(rest, 10, 32)
	return err == nil
}

// rejectMessage checks one message's role, members and tool calls.
func rejectMessage(m gjson.Result, i int) *thinkingError {
	path := "messages[" + strconv.Itoa(i) + "]"
	if !m.IsObject() {
		return badRequest("Failed to deserialize the JSON body into the target type: %s: invalid type, expected a message object", path)
	}
	role := m.Get("role").String()
	fields, ok := messageFields[role]
	if !ok {
		return badRequest("Failed to deserialize the JSON body into the target type: %s: unknown variant `%s`, expected one of `system`, `user`, `assistant`, `tool`", path, role)
	}
	var rej *thinkingError
	m.ForEach(func(k, _ gjson.Result) bool {
		if !slices.Contains(fields, k.String()) {
			rej = badRequest("Failed to deserialize the JSON body into the target type: %s: unknown field `%s`, expected one of `%s`", path, k.String(), strings.Join(fields, "`, `"))
			return false
		}
		return true
	})
	if rej != nil {
		return rej
	}
	switch c := m.Get("content"); {
	case role == "assistant" && (!c.Exists() || c.Type == gjson.Null || c.Type == gjson.String):
	case role == "tool" && c.Type == gjson.String:
	case (role == "system" || role == "user") && (c.Type == gjson.String || c.IsArray()):
	default:
		return badRequest("Failed to deserialize the JSON body into the target type: %s.content: invalid type for a %s message: %s", path, role, c.Raw)
	}
	if role == "tool" && m.Get("tool_call_id").String() == "" {
		return badRequest("Failed to deserialize the JSON body into the target type: %s: missing field `tool_call_id`", path)
	}
	if r := m.Get("reasoning_content"); r.Exists() && r.Type != gjson.String && r.Type != gjson.Null {
		return badRequest("Failed to deserialize the JSON body into the target type: %s.reasoning_content: invalid type, expected a string", path)
	}
	for j, tc := range m.Get("tool_calls").Array() {
		p := path + ".tool_calls[" + strconv.Itoa(j) + "]"
		var bad string
		tc.ForEach(func(k, _ gjson.Result) bool {
			if k.String() != "id" && k.String() != "type" && k.String() != "function" {
				bad = k.String()
				return false
			}
			return true
		})
		switch {
		case bad != "":
			return badRequest("Failed to deserialize the JSON body into the target type: %s: unknown field `%s`, expected one of `id`, `type`, `function`", p, bad)
		case tc.Get("id").String() == "":
			return badRequest("Failed to deserialize the JSON body into the target type: %s: missing field `id`", p)
		case tc.Get("type").String() != "function":
			return badRequest("Failed to deserialize the JSON body into the target type: %s.type: unknown variant `%s`, expected `function`", p, tc.Get("type").String())
		case tc.Get("function.name").String() == "" || tc.Get("function.arguments").Type != gjson.String:
			return badRequest("Failed to deserialize the JSON body into the target type: %s.function: expected a name and string arguments", p)
		}
	}
	return nil
}

// rejectPairing checks that the tool messages right after an assistant
// message with tool_calls answer each of its calls once, and that no tool
// message stands anywhere else.
func rejectPairing(list []gjson.Result) *thinkingError {
	for i := 0; i < len(list); i++ {
		m := list[i]
		switch m.Get("role").String() {
		case "tool":
			return badRequest(MsgToolOrphan)
		case "assistant":
		default:
			continue
		}
		calls := m.Get("tool_calls").Array()
		if len(calls) == 0 {
			continue
		}
		open := map[string]bool{}
		var order []string
		for _, tc := range calls {
			id := tc.Get("id").String()
			if open[id] {
				return badRequest("Invalid parameter: messages[%d].tool_calls has the id %s twice.", i, id)
			}
			open[id] = true
			order = append(order, id)
		}
		for i+1 < len(list) && list[i+1].Get("role").String() == "tool" {
			i++
			id := list[i].Get("tool_call_id").String()
			if !open[id] {
				return badRequest(MsgToolOrphan)
			}
			delete(open, id)
		}
		var missing []string
		for _, id := range order {
			if open[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return badRequest(MsgToolUnanswered, strings.Join(missing, ", "))
		}
	}
	return nil
}

// thinkingTurn picks the scripted turn of a request: the number of
// assistant tool-call messages the conversation already holds. seq is the
// number of tool calls in it, which Kimi's ids count on from.
func thinkingTurn(req gjson.Result) (turn, seq int) {
	for _, m := range req.Get("messages").Array() {
		if n := len(m.Get("tool_calls").Array()); m.Get("role").String() == "assistant" && n > 0 {
			turn++
			seq += n
		}
	}
	return turn, seq
}

// deepSeekID is a DeepSeek-style tool call id, call_<i, two digits>_ and
// 24 characters, deterministic in the request's arrival number n.
func deepSeekID(n, i int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 24)
	x := uint32(n*7919 + i*104729 + 1)
	for k := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[k] = alphabet[x%uint32(len(alphabet))]
	}
	return fmt.Sprintf("call_%02d_%s", i, b)
}

// declaresChat reports a function tool named name in a Chat tools array.
func declaresChat(tools gjson.Result, name string) bool {
	for _, t := range tools.Array() {
		if t.Get("type").String() == "function" && t.Get("function.name").String() == name {
			return true
		}
	}
	return false
}

// replyThinking answers with the request's scripted turn: reasoning, then
// text, then the tool calls, as the thinking providers stream them.
func (p *Provider) replyThinking(w http.ResponseWriter, req gjson.Result, n, bodyLen int) {
	turn, seq := thinkingTurn(req)
	if turn >= len(p.Turns) {
		(&thinkingError{status: http.StatusBadRequest, message: fmt.Sprintf(
			"fakeprovider: the script has %d turns and this request already holds %d tool-call turns", len(p.Turns), turn)}).write(w, p.Thinking)
		return
	}
	t := p.Turns[turn]
	for _, c := range t.Calls {
		if !declaresChat(req.Get("tools"), c.Name) {
			(&thinkingError{status: http.StatusBadRequest, message: fmt.Sprintf(
				"fakeprovider: turn %d calls %s, which the request's tools do not declare", turn+1, c.Name)}).write(w, p.Thinking)
			return
		}
	}
	reasoning := t.Reasoning
	if !thinkingOn(req) {
		reasoning = ""
	}
	finish := t.Finish
	if finish == "" {
		finish = "stop"
		if len(t.Calls) > 0 {
			finish = "tool_calls"
		}
	}
	calls := t.Calls
	if finish == "length" {
		calls = nil // cut short before any call was written
	}
	type issued struct{ id, name, args string }
	var made []issued
	argLen := 0
	for i, c := range calls {
		id := deepSeekID(n, i)
		if p.Thinking == Kimi {
			id = "functions." + c.Name + ":" + strconv.Itoa(seq+i)
		}
		made = append(made, issued{id, c.Name, c.Arguments})
		argLen += len(c.Arguments)
	}
	p.mu.Lock()
	for _, c := range made {
		p.issued = append(p.issued, c.id)
	}
	p.mu.Unlock()

	model := req.Get("model").String()
	created := p.clock()
	id := "chatcmpl-" + string(p.Thinking) + "-" + strconv.Itoa(n)
	prompt := estimateTokens(bodyLen)
	completion := estimateTokens(len(reasoning) + len(t.Text) + argLen)
	usage := jsonObj{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}}
	hit := CacheHitTokens(bodyLen)
	if p.Thinking == DeepSeek {
		// DeepSeek reports cache hits in its own fields.
		usage = append(usage, jsonField{"prompt_cache_hit_tokens", hit}, jsonField{"prompt_cache_miss_tokens", prompt - hit})
	} else {
		usage = append(usage, jsonField{"prompt_tokens_details", jsonObj{{"cached_tokens", hit}}})
	}
	usage = append(usage, jsonField{"completion_tokens_details", jsonObj{{"reasoning_tokens", estimateTokens(len(reasoning))}}})

	if !req.Get("stream").Bool() {
		var content any
		if t.Text != "" {
			content = t.Text
		}
		msg := jsonObj{{"role", "assistant"}, {"content", content}}
		if reasoning != "" {
			msg = append(msg, jsonField{"reasoning_content", reasoning})
		}
		if len(made) > 0 {
			var tcs []any
			for _, c := range made {
				tcs = append(tcs, jsonObj{{"id", c.id}, {"type", "function"}, {"function", jsonObj{{"name", c.name}, {"arguments", c.args}}}})
			}
			msg = append(msg, jsonField{"tool_calls", tcs})
		}
		writeChatCompletion(w, id, created, model, msg, finish, usage)
		return
	}

	s := newSSE(w, false, false)
	chunk := chatChunker(s, req, id, created, model)
	first := true
	delta := func(d jsonObj, finishReason any) {
		if first {
			d = append(jsonObj{{"role", "assistant"}}, d...)
			first = false
		}
		chunk([]any{jsonObj{{"index", 0}, {"delta", d}, {"logprobs", nil}, {"finish_reason", finishReason}}}, nil)
	}
	for _, piece := range splitWords(reasoning) {
		delta(jsonObj{{"content", nil}, {"reasoning_content", piece}}, nil)
	}
	for _, piece := range splitWords(t.Text) {
		delta(jsonObj{{"content", piece}, {"reasoning_content", nil}}, nil)
	}
	for i, c := range made {
		delta(jsonObj{{"content", nil}, {"reasoning_content", nil}, {"tool_calls", []any{jsonObj{
			{"index", i}, {"id", c.id}, {"type", "function"}, {"function", jsonObj{{"name", c.name}, {"arguments", ""}}},
		}}}}, nil)
		for _, piece := range splitBytes(c.args, p.deltaSize()) {
			delta(jsonObj{{"tool_calls", []any{jsonObj{{"index", i}, {"function", jsonObj{{"arguments", piece}}}}}}}, nil)
		}
	}
	delta(jsonObj{{"content", ""}, {"reasoning_content", nil}}, finish)
	if req.Get("stream_options.include_usage").Bool() {
		chunk([]any{}, usage)
	}
	s.raw("[DONE]")
}

// PromptTokens is the prompt_tokens a thinking provider reports for a
// request body of bodyLen bytes.
func PromptTokens(bodyLen int) int { return estimateTokens(bodyLen) }

// CacheHitTokens is the cache hit a thinking provider reports for a
// request body of bodyLen bytes: its prompt tokens, rounded down to
// DeepSeek's 64-token cache granularity.
func CacheHitTokens(bodyLen int) int {
	prompt := estimateTokens(bodyLen)
	return prompt - prompt%64
}

// CallIDs returns the ids of every tool call the provider made, in order.
func (p *Provider) CallIDs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.issued)
}

// PatchArguments encodes {"input": patch} the way a model writes it,
// without Go's HTML escaping: the arguments of an apply_patch function.
func PatchArguments(patch string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"input": patch})
	return strings.TrimSuffix(buf.String(), "\n")
}
