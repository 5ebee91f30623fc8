package fakeprovider

// The machinery the strict per-provider Chat mocks (KimiChat, GLMChat,
// QwenChat, MiniMaxChat) share: the request log, the routing, the script
// and the ways each provider streams. Each mock brings its own checks and
// error texts; DeepSeekChat keeps its own code.

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// ChatRequest is one request a scripted Chat mock received: its answer's
// status and error, and the scripted turn answered (-1 refused, -2
// answered by Aside).
type ChatRequest = DeepSeekRequest

// chatLog keeps every request a mock received.
type chatLog struct {
	mu  sync.Mutex
	log []ChatRequest
}

// Log returns every request received so far, oldest first.
func (l *chatLog) Log() []ChatRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.log)
}

// Refused returns the requests that were not answered 200.
func (l *chatLog) Refused() []ChatRequest {
	var out []ChatRequest
	for _, r := range l.Log() {
		if r.Status != http.StatusOK {
			out = append(out, r)
		}
	}
	return out
}

// ChatScript is what every scripted mock is told: the conversation, and
// how its streams are cut.
type ChatScript struct {
	// Turns is the script: a request whose history holds k assistant
	// tool-call messages gets Turns[k].
	Turns []Turn

	// DeltaSize is the size in bytes of the streamed argument pieces.
	// Default: DefaultDeltaSize.
	DeltaSize int

	// ContentPiece, when > 0, cuts streamed content in pieces of that
	// many bytes (so a <think> tag is cut anywhere) rather than before
	// each space.
	ContentPiece int

	// Now stamps the answers; nil means time.Now.
	Now func() time.Time

	// ExactReasoning refuses a history whose k-th assistant tool-call
	// message gives back other reasoning than Turns[k].Reasoning (each
	// mock says where it reads the reasoning from).
	ExactReasoning bool

	// Aside, if set, may answer a request outside the script (a client's
	// side request): when it returns true, its Turn answers as a first
	// turn, logged with Turn -2. It sees only requests that passed the
	// checks.
	Aside func(req gjson.Result) (Turn, bool)
}

// reasoning styles: how an answer carries its reasoning.
const (
	styleNone    = 0   // no reasoning (thinking off)
	styleContent = 'c' // reasoning_content
	styleDetails = 'd' // reasoning_details (MiniMax's reasoning_split)
	styleThink   = 't' // <think>…</think> at the head of content
)

// usage places.
const (
	usageChunk  = 'c' // a choice-less chunk, when stream_options.include_usage
	usageChoice = 'k' // in the finish chunk's choice (Moonshot)
	usageFinal  = 'f' // at the top of the finish chunk, always (Zhipu, MiniMax)
)

// chatDialect is how one provider answers.
type chatDialect struct {
	name     string
	object   bool // chunks and completions carry "object"
	writeErr func(w http.ResponseWriter, e *thinkingError)
	// callID is the id of call i of the scripted turn, seq calls into the
	// conversation.
	callID func(turn, seq, i int, name string) string
	// usage builds the usage object.
	usage   func(prompt, completion, hit, reasoning int) jsonObj
	usageAt byte
	// wholeCalls sends each call in one delta, arguments whole (GLM
	// without tool_stream).
	wholeCalls bool
	// emptyIDs: argument deltas after the first repeat "id":"" and the
	// type (DashScope).
	emptyIDs bool
	// finishDelta is the delta of the finish chunk.
	finishDelta jsonObj
	// finalExtra are more top-level members of the finish chunk.
	finalExtra jsonObj
}

// serve is the shared ServeHTTP: only POST …/chat/completions, a JSON
// object body, the mock's checks, then the script.
func (d *chatDialect) serve(l *chatLog, s *ChatScript, w http.ResponseWriter, r *http.Request,
	reject func(req gjson.Result) *thinkingError, style func(req gjson.Result) byte) {
	rec := ChatRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Turn: -1}
	sw := &errCapture{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		rec.Status = sw.status
		if sw.status != http.StatusOK {
			rec.Error = errorMessage(sw.body.Bytes())
		}
		l.mu.Lock()
		l.log = append(l.log, rec)
		l.mu.Unlock()
	}()
	if r.Method != http.MethodPost || (r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/chat/completions") {
		d.writeErr(sw, &thinkingError{status: http.StatusNotFound, message: "Not Found"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	rec.Body = body
	if err != nil {
		d.writeErr(sw, badRequest("could not read the request body: %s", err.Error()))
		return
	}
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		d.writeErr(sw, badRequest("Invalid request: the body is not a JSON object"))
		return
	}
	req := gjson.ParseBytes(body)
	if rej := reject(req); rej != nil {
		d.writeErr(sw, rej)
		return
	}
	turn, seq := thinkingTurn(req)
	rec.Turn = turn
	turns := s.Turns
	if s.Aside != nil {
		if t, ok := s.Aside(req); ok {
			rec.Turn, turn, seq = -2, 0, 0
			turns = []Turn{t}
		}
	}
	if turn >= len(turns) {
		rec.Turn = -1
		d.writeErr(sw, badRequest("fakeprovider: the script has %d turns and this request already holds %d tool-call turns", len(turns), turn))
		return
	}
	t := turns[turn]
	for _, c := range t.Calls {
		if !declaresChat(req.Get("tools"), c.Name) {
			rec.Turn = -1
			d.writeErr(sw, badRequest("fakeprovider: turn %d calls %s, which the request's tools do not declare", turn+1, c.Name))
			return
		}
	}
	d.reply(sw, s, req, t, turn, seq, len(req.Get("messages").Raw)+len(req.Get("tools").Raw), style(req))
}

// errorMessage finds a refusal's message in the shapes the mocks write.
func errorMessage(b []byte) string {
	for _, p := range []string{"error.message", "message"} {
		if m := gjson.GetBytes(b, p); m.Type == gjson.String {
			return m.String()
		}
	}
	return string(b)
}

type madeCall struct{ id, name, args string }

// reply answers with turn t: reasoning (in style), text, calls, as JSON
// or streamed the dialect's way. Everything depends on the conversation
// only, so a request sent with and without stream gets the same answer.
func (d *chatDialect) reply(w http.ResponseWriter, s *ChatScript, req gjson.Result, t Turn, turn, seq, bodyLen int, style byte) {
	reasoning := t.Reasoning
	if style == styleNone {
		reasoning = ""
	}
	content := t.Text
	if style == styleThink && reasoning != "" {
		content = "<think>\n" + reasoning + "\n</think>\n\n" + t.Text
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
		calls = nil
	}
	var made []madeCall
	argLen := 0
	for i, c := range calls {
		made = append(made, madeCall{d.callID(turn, seq, i, c.Name), c.Name, c.Arguments})
		argLen += len(c.Arguments)
	}
	created := time.Now().Unix()
	if s.Now != nil {
		created = s.Now().Unix()
	}
	model := req.Get("model").String()
	id := "chatcmpl-" + d.name + "-" + strconv.Itoa(turn+1)
	prompt := estimateTokens(bodyLen)
	completion := estimateTokens(len(reasoning) + len(content) + argLen)
	usage := d.usage(prompt, completion, CacheHitTokens(bodyLen), estimateTokens(len(reasoning)))
	details := func(text string) []any {
		return []any{jsonObj{{"type", "reasoning.text"}, {"id", "reasoning-text-1"}, {"format", "MiniMax-response-v1"}, {"index", 0}, {"text", text}}}
	}

	head := func(object string) jsonObj {
		o := jsonObj{{"id", id}}
		if d.object {
			o = append(o, jsonField{"object", object})
		}
		return append(o, jsonField{"created", created}, jsonField{"model", model})
	}
	if !req.Get("stream").Bool() {
		var c any
		if content != "" {
			c = content
		}
		msg := jsonObj{{"role", "assistant"}, {"content", c}}
		switch {
		case reasoning == "":
		case style == styleContent:
			msg = append(msg, jsonField{"reasoning_content", reasoning})
		case style == styleDetails:
			msg = append(msg, jsonField{"reasoning_details", details(reasoning)})
		}
		if len(made) > 0 {
			var tcs []any
			for _, c := range made {
				tcs = append(tcs, jsonObj{{"id", c.id}, {"type", "function"}, {"function", jsonObj{{"name", c.name}, {"arguments", c.args}}}})
			}
			msg = append(msg, jsonField{"tool_calls", tcs})
		}
		writeJSON(w, append(head("chat.completion"),
			jsonField{"choices", []any{jsonObj{{"index", 0}, {"message", msg}, {"finish_reason", finish}}}},
			jsonField{"usage", usage}))
		return
	}

	sse := newSSE(w, false, false)
	first := true
	delta := func(dl jsonObj) {
		if first {
			dl = append(jsonObj{{"role", "assistant"}}, dl...)
			first = false
		}
		sse.data(append(head("chat.completion.chunk"), jsonField{"choices", []any{jsonObj{{"index", 0}, {"delta", dl}, {"finish_reason", nil}}}}))
	}
	for _, piece := range splitWords(reasoning) {
		switch style {
		case styleContent:
			delta(jsonObj{{"content", nil}, {"reasoning_content", piece}})
		case styleDetails:
			delta(jsonObj{{"reasoning_details", details(piece)}})
		}
	}
	pieces := splitWords(content)
	if s.ContentPiece > 0 {
		pieces = splitBytes(content, s.ContentPiece)
	}
	for _, piece := range pieces {
		delta(jsonObj{{"content", piece}})
	}
	size := s.DeltaSize
	if size <= 0 {
		size = DefaultDeltaSize
	}
	for i, c := range made {
		if d.wholeCalls {
			delta(jsonObj{{"tool_calls", []any{jsonObj{{"index", i}, {"id", c.id}, {"type", "function"}, {"function", jsonObj{{"name", c.name}, {"arguments", c.args}}}}}}})
			continue
		}
		delta(jsonObj{{"tool_calls", []any{jsonObj{{"index", i}, {"id", c.id}, {"type", "function"}, {"function", jsonObj{{"name", c.name}, {"arguments", ""}}}}}}})
		for _, piece := range splitBytes(c.args, size) {
			tc := jsonObj{{"index", i}}
			if d.emptyIDs {
				tc = append(tc, jsonField{"id", ""}, jsonField{"type", "function"})
			}
			tc = append(tc, jsonField{"function", jsonObj{{"arguments", piece}}})
			delta(jsonObj{{"tool_calls", []any{tc}}})
		}
	}
	fd := d.finishDelta
	if fd == nil {
		fd = jsonObj{}
	}
	choice := jsonObj{{"index", 0}, {"delta", fd}, {"finish_reason", finish}}
	last := head("chat.completion.chunk")
	switch d.usageAt {
	case usageChoice:
		choice = append(choice, jsonField{"usage", usage})
		last = append(last, jsonField{"choices", []any{choice}})
	case usageFinal:
		last = append(last, jsonField{"choices", []any{choice}}, jsonField{"usage", usage})
	default:
		last = append(last, jsonField{"choices", []any{choice}})
	}
	sse.data(append(last, d.finalExtra...))
	if d.usageAt == usageChunk && req.Get("stream_options.include_usage").Bool() {
		sse.data(append(head("chat.completion.chunk"), jsonField{"choices", []any{}}, jsonField{"usage", usage}))
	}
	sse.raw("[DONE]")
}

// --- checks the mocks share ------------------------------------------------------

// unknownMember returns the first request member not in known, "" when
// there is none.
func unknownMember(req gjson.Result, known map[string]bool) string {
	var unknown string
	req.ForEach(func(k, _ gjson.Result) bool {
		if !known[k.String()] {
			unknown = k.String()
			return false
		}
		return true
	})
	return unknown
}

// withParams is chatParams without drop and with add.
func withParams(drop []string, add ...string) map[string]bool {
	m := map[string]bool{}
	for k := range chatParams {
		if !slices.Contains(drop, k) {
			m[k] = true
		}
	}
	for _, k := range add {
		m[k] = true
	}
	return m
}

// checkMessage checks one message's role, members, content and tool call
// shapes: assistantExtra are members an assistant message may have
// beyond the common ones, parts the content part types a user message may
// hold.
func checkMessage(m gjson.Result, i int, assistantExtra, parts []string) *thinkingError {
	path := "messages[" + strconv.Itoa(i) + "]"
	if !m.IsObject() {
		return badRequest("Invalid request: %s is not a message object", path)
	}
	role := m.Get("role").String()
	fields, ok := messageFields[role]
	if !ok {
		return badRequest("Invalid request: %s.role: unknown variant `%s`, expected one of `system`, `user`, `assistant`, `tool`", path, role)
	}
	if role == "assistant" {
		fields = append(slices.Clone(fields), assistantExtra...)
	}
	var rej *thinkingError
	m.ForEach(func(k, _ gjson.Result) bool {
		if !slices.Contains(fields, k.String()) {
			rej = badRequest("Invalid request: %s: unknown field `%s`", path, k.String())
			return false
		}
		return true
	})
	if rej != nil {
		return rej
	}
	c := m.Get("content")
	switch {
	case role == "assistant" && (!c.Exists() || c.Type == gjson.Null || c.Type == gjson.String):
	case role == "tool" && c.Type == gjson.String:
	case (role == "system" || role == "user") && c.Type == gjson.String:
	case (role == "system" || role == "user") && c.IsArray():
		for j, p := range c.Array() {
			typ := p.Get("type").String()
			if !slices.Contains(parts, typ) || (typ == "text" && p.Get("text").Type != gjson.String) {
				return badRequest("Invalid request: %s.content[%d]: unknown variant `%s`, expected one of `%s`", path, j, typ, strings.Join(parts, "`, `"))
			}
		}
	default:
		return badRequest("Invalid request: %s.content: invalid type for a %s message: %s", path, role, c.Raw)
	}
	if role == "tool" && m.Get("tool_call_id").String() == "" {
		return badRequest("Invalid request: %s: missing field `tool_call_id`", path)
	}
	if r := m.Get("reasoning_content"); r.Exists() && r.Type != gjson.String && r.Type != gjson.Null {
		return badRequest("Invalid request: %s.reasoning_content: invalid type, expected a string", path)
	}
	for j, tc := range m.Get("tool_calls").Array() {
		p := path + ".tool_calls[" + strconv.Itoa(j) + "]"
		switch {
		case tc.Get("id").String() == "":
			return badRequest("Invalid request: %s: missing field `id`", p)
		case tc.Get("type").String() != "function":
			return badRequest("Invalid request: %s.type: unknown variant `%s`, expected `function`", p, tc.Get("type").String())
		case tc.Get("function.name").String() == "" || tc.Get("function.arguments").Type != gjson.String:
			return badRequest("Invalid request: %s.function: expected a name and string arguments", p)
		}
	}
	return nil
}

// pairFault is what is wrong with the pairing of calls and tool messages.
type pairFault struct {
	kind byte     // 'o' a tool message answering no call before it, 'u' calls unanswered, 'd' an id twice
	at   int      // the message's index
	ids  []string // the orphan's id, the unanswered ids, the duplicate id
}

// checkPairs checks that the tool messages right after each assistant
// message with tool_calls answer each call once, and that no tool message
// stands anywhere else.
func checkPairs(list []gjson.Result) *pairFault {
	for i := 0; i < len(list); i++ {
		m := list[i]
		switch m.Get("role").String() {
		case "tool":
			return &pairFault{'o', i, []string{m.Get("tool_call_id").String()}}
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
				return &pairFault{'d', i, []string{id}}
			}
			open[id] = true
			order = append(order, id)
		}
		at := i
		for i+1 < len(list) && list[i+1].Get("role").String() == "tool" {
			i++
			id := list[i].Get("tool_call_id").String()
			if !open[id] {
				return &pairFault{'o', i, []string{id}}
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
			return &pairFault{'u', at, missing}
		}
	}
	return nil
}

// toolCallTurns returns the indexes of the assistant messages with
// tool_calls, in order.
func toolCallTurns(list []gjson.Result) []int {
	var out []int
	for i, m := range list {
		if m.Get("role").String() == "assistant" && len(m.Get("tool_calls").Array()) > 0 {
			out = append(out, i)
		}
	}
	return out
}

// checkNames applies rule (a name's check, "" when it passes) to the
// declared tools and the history's calls.
func checkNames(req gjson.Result, rule func(name, path string) string) *thinkingError {
	for i, t := range req.Get("tools").Array() {
		p := "tools[" + strconv.Itoa(i) + "]"
		if typ := t.Get("type").String(); typ != "function" {
			return badRequest("Invalid request: %s.type: unknown variant `%s`, expected `function`", p, typ)
		}
		if msg := rule(t.Get("function.name").String(), p+".function.name"); msg != "" {
			return badRequest("%s", msg)
		}
	}
	for i, m := range req.Get("messages").Array() {
		for j, tc := range m.Get("tool_calls").Array() {
			if msg := rule(tc.Get("function.name").String(), fmt.Sprintf("messages[%d].tool_calls[%d].function.name", i, j)); msg != "" {
				return badRequest("%s", msg)
			}
		}
	}
	return nil
}

// modelIn reports whether model is one of models, ignoring case when fold.
func modelIn(models []string, model string, fold bool) bool {
	for _, m := range models {
		if m == model || (fold && strings.EqualFold(m, model)) {
			return true
		}
	}
	return false
}
