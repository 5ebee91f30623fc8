package fakeprovider

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// DeepSeek's own error texts, as its API answers them (reported verbatim
// in public issue trackers; the reasoning one is MsgDeepSeekReasoning).
const (
	// MsgDeepSeekToolUnanswered refuses an assistant message with
	// tool_calls that the tool messages right after it do not answer in
	// full.
	MsgDeepSeekToolUnanswered = "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. (insufficient tool messages following tool_calls message)"

	// MsgDeepSeekToolOrphan refuses a tool message that answers no call
	// of the assistant message before it.
	MsgDeepSeekToolOrphan = "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'"

	// MsgDeepSeekSystemTmpl refuses a system message that is not the
	// first message, or a second one (deepseek-reasoner's text, with the
	// request's model).
	MsgDeepSeekSystemTmpl = "The system message of %s must be put on the beginning of the message sequence"

	// MsgDeepSeekMaxTokensTmpl refuses max_tokens outside [1, the model's
	// output cap].
	MsgDeepSeekMaxTokensTmpl = "Invalid max_tokens value, the valid range of max_tokens is [1, %d]"

	// MsgDeepSeekThinkingChoice refuses a forced tool_choice (required or
	// a named function) while thinking.
	MsgDeepSeekThinkingChoice = "Thinking mode does not support this tool_choice"

	// MsgDeepSeekEffortDisabled refuses reasoning_effort with thinking
	// switched off.
	MsgDeepSeekEffortDisabled = "thinking options type cannot be disabled when reasoning_effort is set"

	// MsgDeepSeekNameTmpl refuses a tool name outside ^[a-zA-Z0-9_-]+$
	// (the length limit, 64, is OpenAI's text, see checkName).
	MsgDeepSeekNameTmpl = "Invalid '%s': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
)

// DeepSeekMaxTokens are the output caps (the top of max_tokens' valid
// range) of the models DeepSeekChat serves: V4's 393216 as its 400 says
// (anthropic-messages-bridge.md §4), the legacy deepseek-chat's 8192
// (CLIProxyAPI#599) and deepseek-reasoner's 64K.
var DeepSeekMaxTokens = map[string]int{
	"deepseek-v4-pro":   393216,
	"deepseek-v4-flash": 393216,
	"deepseek-chat":     8192,
	"deepseek-reasoner": 65536,
}

// deepSeekName is the rule tool names must follow: DeepSeek's pattern,
// and OpenAI's length limit.
var deepSeekName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// DeepSeekChat is a strict imitation of DeepSeek's Chat Completions API
// (V4, thinking mode on by default) for the Messages bridge's tests. It
// serves POST /v1/chat/completions and POST /chat/completions only, and
// refuses, in DeepSeek's error shape and with DeepSeek's texts where they
// are known, what DeepSeek refuses:
//   - request members Chat does not know, unknown models, a malformed
//     thinking or reasoning_effort, reasoning_effort with thinking off;
//   - max_tokens (or max_completion_tokens) outside [1, the model's cap]
//     (MsgDeepSeekMaxTokensTmpl, caps in DeepSeekMaxTokens);
//   - messages with members their role does not have, content parts other
//     than text;
//   - more than one system message, or one that is not first
//     (MsgDeepSeekSystemTmpl);
//   - an assistant message with tool_calls not followed by one tool
//     message per call id (MsgDeepSeekToolUnanswered), a tool message
//     that answers no call right before it (MsgDeepSeekToolOrphan);
//   - tool names, in tools and in history calls, outside
//     ^[a-zA-Z0-9_-]{1,64}$, tool types other than function;
//   - while thinking: an assistant message with tool_calls without
//     reasoning_content (MsgDeepSeekReasoning), a forced tool_choice
//     (MsgDeepSeekThinkingChoice).
//
// It is stricter than DeepSeek in one way when ExactReasoning is set: the
// reasoning_content of the k-th assistant tool-call message must be the
// very reasoning of Turns[k].
//
// It answers with a scripted conversation: a request whose history holds
// k assistant tool-call messages gets Turns[k], JSON or streamed as
// DeepSeek streams (reasoning_content deltas, content deltas, tool_calls
// deltas with ids call_<nn>_<24 chars> and arguments in DeltaSize pieces,
// finish_reason, a usage chunk with prompt_cache_hit_tokens when
// stream_options.include_usage, [DONE]). Ids and usage depend only on the
// conversation, not on stream or on arrival order, so the same request
// sent with and without stream gets the same answer.
//
// Every request is recorded (Log) with its answer's status.
type DeepSeekChat struct {
	// Turns is the script; see Turn.
	Turns []Turn

	// DeltaSize is the size in bytes of the streamed argument pieces.
	// Default: DefaultDeltaSize.
	DeltaSize int

	// Now stamps the answers; nil means time.Now.
	Now func() time.Time

	// ExactReasoning refuses, with MsgDeepSeekReasoning, a history whose
	// k-th assistant tool-call message carries another reasoning_content
	// than Turns[k].Reasoning.
	ExactReasoning bool

	// Aside, if set, may answer a request outside the script (a client's
	// side request, say, that declares other tools): when it returns true,
	// its Turn answers the request, which is logged with Turn -2. It sees
	// only requests that passed the checks.
	Aside func(req gjson.Result) (Turn, bool)

	mu  sync.Mutex
	log []DeepSeekRequest
}

// DeepSeekRequest is one request DeepSeekChat received.
type DeepSeekRequest struct {
	Method, Path string
	Header       http.Header
	Body         []byte
	// Status is the answer's HTTP status; Error the refusal's message
	// ("" when answered).
	Status int
	Error  string
	// Turn is the index of the scripted turn answered, -1 when refused,
	// -2 when Aside answered.
	Turn int
}

// Log returns every request received so far, oldest first.
func (d *DeepSeekChat) Log() []DeepSeekRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.log)
}

// Refused returns the requests that were not answered 200.
func (d *DeepSeekChat) Refused() []DeepSeekRequest {
	var out []DeepSeekRequest
	for _, r := range d.Log() {
		if r.Status != http.StatusOK {
			out = append(out, r)
		}
	}
	return out
}

// ServeHTTP implements http.Handler.
func (d *DeepSeekChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := DeepSeekRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Turn: -1}
	sw := &errCapture{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		rec.Status = sw.status
		if sw.status != http.StatusOK {
			rec.Error = gjson.GetBytes(sw.body.Bytes(), "error.message").String()
		}
		d.mu.Lock()
		d.log = append(d.log, rec)
		d.mu.Unlock()
	}()

	if r.Method != http.MethodPost || (r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/chat/completions") {
		(&thinkingError{status: http.StatusNotFound, message: "Not Found"}).write(sw, DeepSeek)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	rec.Body = body
	if err != nil {
		badRequest("could not read the request body: %s", err.Error()).write(sw, DeepSeek)
		return
	}
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		badRequest("Failed to deserialize the JSON body into the target type: expected a JSON object").write(sw, DeepSeek)
		return
	}
	req := gjson.ParseBytes(body)
	if rej := d.reject(req); rej != nil {
		rej.write(sw, DeepSeek)
		return
	}
	turn, _ := thinkingTurn(req)
	rec.Turn = turn
	p := &Provider{Thinking: DeepSeek, Turns: d.Turns, DeltaSize: d.DeltaSize, Now: d.Now}
	if d.Aside != nil {
		if t, ok := d.Aside(req); ok {
			rec.Turn, turn = -2, 0
			p.Turns = []Turn{t}
			// thinkingTurn counts the history's tool-call turns; an
			// aside answers as a first turn whatever the history.
			req = gjson.Parse(`{"model":` + req.Get("model").Raw + `,"stream":` + strconv.FormatBool(req.Get("stream").Bool()) +
				`,"stream_options":` + orNull(req.Get("stream_options").Raw) + `,"tools":` + orNull(req.Get("tools").Raw) +
				`,"thinking":` + orNull(req.Get("thinking").Raw) + `}`)
		}
	}
	// The arrival number makes the ids; the turn's number keeps them the
	// same for the same conversation. The prompt's size leaves out what
	// stream and stream_options add.
	p.replyThinking(sw, req, turn+1, len(req.Get("messages").Raw)+len(req.Get("tools").Raw))
	if sw.status != http.StatusOK {
		rec.Turn = -1
	}
}

// orNull is raw JSON, or null when there is none.
func orNull(raw string) string {
	if raw == "" {
		return "null"
	}
	return raw
}

// reject applies DeepSeek's checks in the order a request fails them.
func (d *DeepSeekChat) reject(req gjson.Result) *thinkingError {
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
	limit, ok := DeepSeekMaxTokens[model]
	if !ok {
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
		switch e.String() {
		case "low", "medium", "high", "max", "xhigh":
		default:
			return badRequest("Failed to deserialize the JSON body into the target type: reasoning_effort: unknown variant `%s`, expected one of `low`, `medium`, `high`, `max`, `xhigh`", e.String())
		}
		if !thinkingOn(req) {
			return badRequest(MsgDeepSeekEffortDisabled)
		}
	}
	for _, field := range []string{"max_tokens", "max_completion_tokens"} {
		mt := req.Get(field)
		if !mt.Exists() || mt.Type == gjson.Null {
			continue
		}
		if mt.Type != gjson.Number || mt.Num != float64(int64(mt.Num)) {
			return badRequest("Failed to deserialize the JSON body into the target type: %s: invalid type: %s, expected u32", field, mt.Raw)
		}
		if n := int64(mt.Num); n < 1 || n > int64(limit) {
			return badRequest(MsgDeepSeekMaxTokensTmpl, limit)
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
		if c := m.Get("content"); c.IsArray() {
			for j, part := range c.Array() {
				if typ := part.Get("type").String(); typ != "text" || part.Get("text").Type != gjson.String {
					return badRequest("Failed to deserialize the JSON body into the target type: messages[%d].content[%d]: unknown variant `%s`, expected `text`", i, j, typ)
				}
			}
		}
	}
	for i, m := range list {
		if m.Get("role").String() == "system" && i != 0 {
			return badRequest(MsgDeepSeekSystemTmpl, model)
		}
	}
	if rej := rejectDeepSeekPairing(list); rej != nil {
		return rej
	}

	for i, t := range req.Get("tools").Array() {
		p := "tools[" + strconv.Itoa(i) + "]"
		if typ := t.Get("type").String(); typ != "function" {
			return badRequest("Failed to deserialize the JSON body into the target type: %s.type: unknown variant `%s`, expected `function`", p, typ)
		}
		if rej := deepSeekCheckName(t.Get("function.name"), p+".function.name"); rej != nil {
			return rej
		}
	}
	for i, m := range list {
		for j, tc := range m.Get("tool_calls").Array() {
			if rej := deepSeekCheckName(tc.Get("function.name"), "messages["+strconv.Itoa(i)+"].tool_calls["+strconv.Itoa(j)+"].function.name"); rej != nil {
				return rej
			}
		}
	}

	if thinkingOn(req) {
		k := 0
		for _, m := range list {
			if m.Get("role").String() != "assistant" || len(m.Get("tool_calls").Array()) == 0 {
				continue
			}
			rc := m.Get("reasoning_content")
			if rc.Type != gjson.String {
				return badRequest(MsgDeepSeekReasoning)
			}
			if d.ExactReasoning && k < len(d.Turns) && rc.String() != d.Turns[k].Reasoning {
				return badRequest(MsgDeepSeekReasoning)
			}
			k++
		}
		switch c := req.Get("tool_choice"); {
		case c.String() == "required", c.IsObject():
			return badRequest(MsgDeepSeekThinkingChoice)
		}
	}
	if c := req.Get("tool_choice"); c.IsObject() {
		name := c.Get("function.name").String()
		if !declaresChat(req.Get("tools"), name) {
			return badRequest("Tool choice '%s' not found in 'tools' parameter.", name)
		}
	}
	return nil
}

// deepSeekCheckName applies DeepSeek's tool name rule to the name at path.
func deepSeekCheckName(name gjson.Result, path string) *thinkingError {
	s := name.String()
	switch {
	case name.Type != gjson.String || s == "":
		return badRequest("Failed to deserialize the JSON body into the target type: %s: missing field `name`", path)
	case len(s) > 64:
		return badRequest("Invalid '%s': string too long. Expected a string with maximum length 64, but got a string with length %d instead.", path, len(s))
	case !deepSeekName.MatchString(s):
		return badRequest(MsgDeepSeekNameTmpl, path)
	}
	return nil
}

// rejectDeepSeekPairing checks that the tool messages right after each
// assistant message with tool_calls answer each call once, and that no tool
// message stands anywhere else.
func rejectDeepSeekPairing(list []gjson.Result) *thinkingError {
	for i := 0; i < len(list); i++ {
		m := list[i]
		switch m.Get("role").String() {
		case "tool":
			return badRequest(MsgDeepSeekToolOrphan)
		case "assistant":
		default:
			continue
		}
		calls := m.Get("tool_calls").Array()
		if len(calls) == 0 {
			continue
		}
		open := map[string]bool{}
		for _, tc := range calls {
			id := tc.Get("id").String()
			if open[id] {
				return badRequest("Duplicate value for 'tool_call_id' of %s in message[%d]", id, i)
			}
			open[id] = true
		}
		for i+1 < len(list) && list[i+1].Get("role").String() == "tool" {
			i++
			id := list[i].Get("tool_call_id").String()
			if !open[id] {
				return badRequest(MsgDeepSeekToolOrphan)
			}
			delete(open, id)
		}
		if len(open) > 0 {
			return badRequest(MsgDeepSeekToolUnanswered)
		}
	}
	return nil
}

// errCapture notes the status and keeps the body of a refusal; it unwraps
// for http.ResponseController, so streams still flush.
type errCapture struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *errCapture) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *errCapture) Write(p []byte) (int, error) {
	if w.status >= 400 && w.body.Len() < 4096 {
		w.body.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

func (w *errCapture) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// String summarises the request for test failures: its answer, then its
// assistant and tool messages.
func (r DeepSeekRequest) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d %s (turn %d)\n", r.Method, r.Path, r.Status, r.Error, r.Turn)
	req := gjson.ParseBytes(r.Body)
	fmt.Fprintf(&b, "  model %s stream %s max_tokens %s thinking %s reasoning_effort %s tool_choice %s\n",
		req.Get("model").Raw, req.Get("stream").Raw, req.Get("max_tokens").Raw, req.Get("thinking").Raw,
		req.Get("reasoning_effort").Raw, req.Get("tool_choice").Raw)
	for k, m := range req.Get("messages").Array() {
		raw := m.Raw
		if role := m.Get("role").String(); role == "system" || role == "user" {
			if len(raw) > 200 {
				raw = raw[:200] + "…"
			}
		}
		fmt.Fprintf(&b, "  messages[%d] %s\n", k, raw)
	}
	return b.String()
}

// Interface guard
var _ http.Handler = (*DeepSeekChat)(nil)
