package fakeprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// MiniMax's texts: its 400s read "invalid params, … (2013)" in the shape
// {"type":"error","error":{"type":"bad_request_error","message":…,
// "http_code":"400"}} (anomalyco/opencode#32608 and PR#32609).
const (
	// MsgMiniMaxNotFollow refuses calls whose results do not follow them
	// right away.
	MsgMiniMaxNotFollow = "invalid params, tool call result does not follow tool call (2013)"

	// MsgMiniMaxIDNotFoundTmpl refuses a tool result answering no call.
	MsgMiniMaxIDNotFoundTmpl = "invalid params, tool result's tool id(%s) not found (2013)"

	// MsgMiniMaxReasoningTmpl refuses a tool-call turn of the current user
	// turn that gives no reasoning back, or other reasoning than the
	// turn's with ExactReasoning. MiniMax answers it ("performance will be
	// negatively affected"); the mock refuses, in its own words.
	MsgMiniMaxReasoningTmpl = "invalid params, messages[%d]: interleaved thinking wants this turn's reasoning back in its original form (reasoning_details, reasoning_content or <think> in content) (2013)"
)

// miniMaxModels are the models MiniMaxChat serves, matched ignoring case
// (MiniMax takes both spellings).
var miniMaxModels = []string{"MiniMax-M2", "MiniMax-M2.1", "MiniMax-M2.1-lightning", "MiniMax-M2.5", "MiniMax-M3"}

// MiniMaxChat is a strict imitation of MiniMax's OpenAI-compatible Chat
// Completions API (M2 to M3, interleaved thinking) for the Messages
// bridge's tests. It serves POST …/chat/completions only and refuses, in
// MiniMax's shape and with its "(2013)" texts:
//   - request members MiniMax does not know (reasoning_effort among
//     them), unknown models, a reasoning_split that is not a boolean, a
//     thinking whose type is not adaptive, enabled or disabled;
//   - messages with members their role lacks (an assistant message may
//     carry reasoning_details), user parts other than text;
//   - tool results that do not follow their calls (MsgMiniMaxNotFollow),
//     or answer no call (MsgMiniMaxIDNotFoundTmpl);
//   - while thinking: a tool-call message after the last user message
//     that gives no reasoning back (MsgMiniMaxReasoningTmpl; stricter
//     than MiniMax, whose answers only get worse), read from
//     reasoning_details, reasoning_content or a leading <think> in
//     content; with ExactReasoning, the k-th tool-call message's
//     reasoning must be Turns[k].Reasoning wherever it stands.
//
// It thinks unless thinking:{type:"disabled"}. With reasoning_split true
// the reasoning comes as reasoning_details (type reasoning.text, format
// MiniMax-response-v1), else as <think>…</think> at the head of content,
// and always so with InlineThink. Streams end with a finish chunk that
// carries the usage at its top, and base_resp; ids are
// call_function_<digits>_<n>.
type MiniMaxChat struct {
	ChatScript
	chatLog

	// InlineThink puts the reasoning in content as <think>…</think> even
	// with reasoning_split (as a host that ignores the switch does).
	InlineThink bool
}

var miniMaxDialect = &chatDialect{
	name: "minimax", object: true,
	writeErr: func(w http.ResponseWriter, e *thinkingError) {
		typ := "bad_request_error"
		if e.status == http.StatusNotFound {
			typ = "not_found_error"
		}
		b, _ := json.Marshal(jsonObj{{"type", "error"}, {"error", jsonObj{{"type", typ}, {"message", e.message}, {"http_code", strconv.Itoa(e.status)}}}})
		b = append(b, '\n')
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(e.status)
		_, _ = w.Write(b)
	},
	callID: func(turn, _, i int, _ string) string {
		x := uint32(turn*7919+i*104729+1) * 2654435761
		return "call_function_" + strconv.FormatUint(uint64(x)%9000000000+1000000000, 10) + "_" + strconv.Itoa(i+1)
	},
	usage: func(prompt, completion, _, reasoning int) jsonObj {
		return jsonObj{{"total_tokens", prompt + completion}, {"prompt_tokens", prompt}, {"completion_tokens", completion},
			{"completion_tokens_details", jsonObj{{"reasoning_tokens", reasoning}}}}
	},
	usageAt:    usageFinal,
	finalExtra: jsonObj{{"input_sensitive", false}, {"output_sensitive", false}, {"base_resp", jsonObj{{"status_code", 0}, {"status_msg", ""}}}},
}

var miniMaxParams = withParams([]string{"reasoning_effort"}, "reasoning_split", "mask_sensitive_info")

// ServeHTTP implements http.Handler.
func (m *MiniMaxChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	miniMaxDialect.serve(&m.chatLog, &m.ChatScript, w, r, m.reject, func(req gjson.Result) byte {
		switch {
		case req.Get("thinking.type").String() == "disabled":
			return styleNone
		case req.Get("reasoning_split").Bool() && !m.InlineThink:
			return styleDetails
		}
		return styleThink
	})
}

// MiniMaxReasoning returns the reasoning an assistant message gives back:
// reasoning_details' texts, else reasoning_content, else a leading
// <think>…</think> of content; ok false when there is none.
func MiniMaxReasoning(m gjson.Result) (string, bool) {
	if d := m.Get("reasoning_details"); d.IsArray() && len(d.Array()) > 0 {
		var b strings.Builder
		for _, e := range d.Array() {
			b.WriteString(e.Get("text").String())
		}
		return b.String(), true
	}
	if rc := m.Get("reasoning_content"); rc.Type == gjson.String {
		return rc.String(), true
	}
	c := strings.TrimLeft(m.Get("content").String(), " \n")
	if rest, ok := strings.CutPrefix(c, "<think>"); ok {
		if body, _, ok := strings.Cut(rest, "</think>"); ok {
			return strings.TrimSuffix(strings.TrimPrefix(body, "\n"), "\n"), true
		}
	}
	return "", false
}

func (m *MiniMaxChat) reject(req gjson.Result) *thinkingError {
	if u := unknownMember(req, miniMaxParams); u != "" {
		return badRequest("invalid params, unknown parameter %s (2013)", u)
	}
	model := req.Get("model").String()
	if !modelIn(miniMaxModels, model, true) {
		return badRequest("invalid params, unknown model '%s' (2013)", model)
	}
	if rs := req.Get("reasoning_split"); rs.Exists() && !rs.IsBool() {
		return badRequest("invalid params, reasoning_split must be a boolean (2013)")
	}
	if t := req.Get("thinking"); t.Exists() {
		switch t.Get("type").String() {
		case "adaptive", "enabled", "disabled":
		default:
			return badRequest("invalid params, thinking.type must be adaptive, enabled or disabled (2013)")
		}
	}
	msgs := req.Get("messages")
	if !msgs.IsArray() || len(msgs.Array()) == 0 {
		return badRequest("invalid params, messages is empty (2013)")
	}
	list := msgs.Array()
	for i, msg := range list {
		if rej := checkMessage(msg, i, []string{"reasoning_details"}, []string{"text"}); rej != nil {
			return rej
		}
	}
	if f := checkPairs(list); f != nil {
		if f.kind == 'o' {
			// A result right after another call's results does not
			// follow its own call; one after nothing has none.
			prev := f.at - 1
			for prev >= 0 && list[prev].Get("role").String() == "tool" {
				prev--
			}
			if prev >= 0 && len(list[prev].Get("tool_calls").Array()) > 0 {
				return badRequest(MsgMiniMaxNotFollow)
			}
			return badRequest(MsgMiniMaxIDNotFoundTmpl, f.ids[0])
		}
		return badRequest(MsgMiniMaxNotFollow)
	}
	if rej := checkNames(req, func(name, path string) string {
		if !deepSeekName.MatchString(name) {
			return fmt.Sprintf("invalid params, %s %q is not a valid function name (2013)", path, name)
		}
		return ""
	}); rej != nil {
		return rej
	}
	if c := req.Get("tool_choice"); c.IsObject() && !declaresChat(req.Get("tools"), c.Get("function.name").String()) {
		return badRequest("invalid params, tool_choice names %q, which tools do not declare (2013)", c.Get("function.name").String())
	}
	if req.Get("thinking.type").String() != "disabled" {
		lastUser := -1
		for i, msg := range list {
			if msg.Get("role").String() == "user" {
				lastUser = i
			}
		}
		for k, i := range toolCallTurns(list) {
			r, ok := MiniMaxReasoning(list[i])
			switch {
			case i > lastUser && !ok:
				return badRequest(MsgMiniMaxReasoningTmpl, i)
			case m.ExactReasoning && k < len(m.Turns) && r != m.Turns[k].Reasoning:
				return badRequest(MsgMiniMaxReasoningTmpl, i)
			}
		}
	}
	return nil
}

// Interface guard
var _ http.Handler = (*MiniMaxChat)(nil)
