package fakeprovider

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Moonshot's own texts (responses-chat-bridge.md §3.1; the pairing and
// unknown-id ones as Kimi answered them in MoonshotAI/kimi-cli#1977 and
// langbot-app/LangBot#1040).
const (
	// MsgKimiUnansweredTmpl refuses tool calls the tool messages after
	// them do not answer, with the ids.
	MsgKimiUnansweredTmpl = "an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s"

	// MsgKimiCallNotFoundTmpl refuses a tool message whose tool_call_id
	// answers no call right before it.
	MsgKimiCallNotFoundTmpl = "Invalid request: tool_call_id %s is not found"

	// MsgKimiTokenLimitTmpl refuses a request whose input and max_tokens
	// together pass the model's window.
	MsgKimiTokenLimitTmpl = "Invalid request: Your request exceeded model token limit: %d"

	// MsgKimiIDTmpl refuses a history call whose id is not the one Kimi
	// gave it (functions.<name>:<n>, n counting the conversation's
	// calls): the real API takes it, and the model, trained on its own
	// ids, derails. The mock's text.
	MsgKimiIDTmpl = "Invalid request: messages[%d].tool_calls[%d].id %q: expected %q, the id Kimi gave the call (kept verbatim)"

	// MsgKimiThinkingChoice refuses a forced tool_choice while thinking
	// (Kimi's thinking models take auto and none).
	MsgKimiThinkingChoice = "Invalid request: tool_choice 'required' or a named function is not supported when thinking is enabled; use 'auto' or 'none'"

	// MsgKimiNameTmpl refuses a tool name outside KimiNamePattern (the
	// profile's rule; the mock's text).
	MsgKimiNameTmpl = "Invalid request: %s %q must start with a letter or an underscore, hold only letters, digits, underscores and dashes, and be 3 to 64 characters long"
)

// KimiWindow is the context window of the K2.x models: input and
// max_tokens together must fit in it.
const KimiWindow = 262144

// KimiNamePattern is the tool name rule of the kimi profile.
var KimiNamePattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_-]{2,63}$`)

// kimiModels are the models KimiChat serves; the -thinking ones always
// think, the others think unless thinking:{type:"disabled"}, except the
// 0905 preview, which never does.
var kimiModels = []string{"kimi-k2.6", "kimi-k2.5", "kimi-k2-thinking", "kimi-k2-thinking-turbo", "kimi-k2-0905-preview"}

// KimiChat is a strict imitation of Moonshot's Kimi Chat Completions API
// (K2.5/K2.6 thinking by default) for the Messages bridge's tests. It
// serves POST /v1/chat/completions and POST /chat/completions only and
// refuses, in Moonshot's error shape ({"error":{message,type[,code]},
// "type":"error"}) and with Moonshot's texts where known:
//   - unknown request members (reasoning_effort among them: Kimi's knob is
//     thinking), unknown models (a 404), a malformed thinking;
//   - max_tokens that with the input passes the 256K window
//     (MsgKimiTokenLimitTmpl);
//   - messages with members their role lacks, user parts other than text
//     and image_url;
//   - tool calls unanswered (MsgKimiUnansweredTmpl), tool messages that
//     answer no call before them (MsgKimiCallNotFoundTmpl);
//   - while thinking: an assistant tool-call message without
//     reasoning_content (MsgKimiReasoningTmpl, code 20015; "" passes, as
//     on Kimi), a forced tool_choice (MsgKimiThinkingChoice);
//   - a history call whose id is not the functions.<name>:<n> Kimi gave
//     it, n counting the conversation's calls (MsgKimiIDTmpl: stricter
//     than Kimi, which derails instead);
//   - tool names outside KimiNamePattern.
//
// With ExactReasoning, the k-th tool-call message's reasoning_content must
// be Turns[k].Reasoning (code 20015 too).
//
// Its streams are Moonshot's: reasoning_content deltas, content, calls
// with ids functions.<name>:<n>, and the usage (cached_tokens at its top)
// in the finish chunk's choice, whether or not stream_options asked.
type KimiChat struct {
	ChatScript
	chatLog
}

// kimiDialect is how Kimi answers.
var kimiDialect = &chatDialect{
	name: "kimi", object: true,
	writeErr: func(w http.ResponseWriter, e *thinkingError) { e.write(w, Kimi) },
	callID: func(_, seq, i int, name string) string {
		return "functions." + name + ":" + strconv.Itoa(seq+i)
	},
	usage: func(prompt, completion, hit, _ int) jsonObj {
		return jsonObj{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion}, {"cached_tokens", hit}}
	},
	usageAt: usageChoice,
}

var kimiParams = withParams([]string{"reasoning_effort"})

// ServeHTTP implements http.Handler.
func (k *KimiChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kimiDialect.serve(&k.chatLog, &k.ChatScript, w, r, k.reject, func(req gjson.Result) byte {
		if kimiThinking(req) {
			return styleContent
		}
		return styleNone
	})
}

// kimiThinking reports whether a Kimi request thinks.
func kimiThinking(req gjson.Result) bool {
	model := req.Get("model").String()
	switch {
	case strings.Contains(model, "-thinking"):
		return true
	case model == "kimi-k2-0905-preview":
		return false
	}
	return req.Get("thinking.type").String() != "disabled"
}

func (k *KimiChat) reject(req gjson.Result) *thinkingError {
	if u := unknownMember(req, kimiParams); u != "" {
		return badRequest("Invalid request: Unrecognized request argument supplied: %s", u)
	}
	model := req.Get("model").String()
	if !modelIn(kimiModels, model, false) {
		return &thinkingError{status: http.StatusNotFound, message: "Not found the model " + model + " or Permission denied"}
	}
	if t := req.Get("thinking"); t.Exists() {
		if !t.IsObject() {
			return badRequest("Invalid request: thinking must be an object")
		}
		if typ := t.Get("type").String(); typ != "enabled" && typ != "disabled" {
			return badRequest("Invalid request: thinking.type must be `enabled` or `disabled`, got %q", typ)
		}
	}
	msgs := req.Get("messages")
	if !msgs.IsArray() || len(msgs.Array()) == 0 {
		return badRequest("Invalid request: messages must not be empty")
	}
	list := msgs.Array()
	if mt := req.Get("max_tokens"); mt.Exists() {
		if mt.Type != gjson.Number || mt.Num < 1 || mt.Num != float64(int64(mt.Num)) {
			return badRequest("Invalid request: max_tokens must be a positive integer")
		}
		if int(mt.Num)+estimateTokens(len(msgs.Raw)+len(req.Get("tools").Raw)) > KimiWindow {
			return badRequest(MsgKimiTokenLimitTmpl, KimiWindow)
		}
	}
	for i, m := range list {
		if rej := checkMessage(m, i, nil, []string{"text", "image_url"}); rej != nil {
			return rej
		}
	}
	if f := checkPairs(list); f != nil {
		switch f.kind {
		case 'u':
			return badRequest(MsgKimiUnansweredTmpl, strings.Join(f.ids, ", "))
		case 'd':
			return badRequest("Invalid request: duplicate tool_call_id %s in messages[%d]", f.ids[0], f.at)
		}
		return badRequest(MsgKimiCallNotFoundTmpl, f.ids[0])
	}
	thinking := kimiThinking(req)
	if thinking {
		for k2, i := range toolCallTurns(list) {
			rc := list[i].Get("reasoning_content")
			if rc.Type != gjson.String || (k.ExactReasoning && k2 < len(k.Turns) && rc.String() != k.Turns[k2].Reasoning) {
				return &thinkingError{status: http.StatusBadRequest, message: fmt.Sprintf(MsgKimiReasoningTmpl, i), code: KimiReasoningCode}
			}
		}
	}
	n := 0
	for i, m := range list {
		for j, tc := range m.Get("tool_calls").Array() {
			want := "functions." + tc.Get("function.name").String() + ":" + strconv.Itoa(n)
			if id := tc.Get("id").String(); id != want {
				return badRequest(MsgKimiIDTmpl, i, j, id, want)
			}
			n++
		}
	}
	if rej := checkNames(req, func(name, path string) string {
		if !KimiNamePattern.MatchString(name) {
			return fmt.Sprintf(MsgKimiNameTmpl, path, name)
		}
		return ""
	}); rej != nil {
		return rej
	}
	c := req.Get("tool_choice")
	if thinking && (c.String() == "required" || c.IsObject()) {
		return badRequest(MsgKimiThinkingChoice)
	}
	if c.IsObject() && !declaresChat(req.Get("tools"), c.Get("function.name").String()) {
		return badRequest("Invalid request: tool_choice names %q, which tools do not declare", c.Get("function.name").String())
	}
	return nil
}

// Interface guard
var _ http.Handler = (*KimiChat)(nil)
