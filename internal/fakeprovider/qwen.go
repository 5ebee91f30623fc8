package fakeprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
)

// DashScope's texts, as its OpenAI-compatible mode answers them
// (responses-chat-bridge.md §3.1; the error shape and code in
// OpenBMB/UltraRAG#287, infiniflow/ragflow#8972; the pairing text in
// QwenLM/qwen-code#315).
const (
	// MsgQwenNonStreamThinking refuses a non-streaming call that thinks.
	MsgQwenNonStreamThinking = "parameter.enable_thinking must be set to false for non-streaming calls"

	// MsgQwenStreamOnly refuses a non-streaming call to a model that only
	// thinks (QwQ, the -thinking- models).
	MsgQwenStreamOnly = "This model only support stream mode, please enable the stream parameter."

	// MsgQwenUnansweredTmpl refuses calls the next messages leave
	// unanswered (the index and role of the message that stands there).
	MsgQwenUnansweredTmpl = `<400> InternalError.Algo.InvalidParameter: An assistant message with "tool_calls" must be followed by tool messages responding to each "tool_call_id". The following tool_call_ids did not have response messages: message[%d].role`

	// MsgQwenThinkingChoice refuses a forced tool_choice while thinking
	// (the mock's text: DashScope takes auto and none in thinking mode).
	MsgQwenThinkingChoice = "<400> InternalError.Algo.InvalidParameter: The tool_choice parameter does not support being set to required or a specific function in thinking mode"

	// QwenCodeParam is DashScope's code for a parameter it refuses.
	QwenCodeParam = "invalid_parameter_error"
)

// qwenModels are the models QwenChat serves and whether each thinks by
// default ('d'efault off, 'o'n by default, 'a'lways): the commercial
// qwen3-max and qwen-plus think only when enable_thinking is true, the
// open-weight qwen3 models unless it is false, QwQ and the -thinking-
// models always.
var qwenModels = map[string]byte{
	"qwen3-max": 'd', "qwen-plus": 'd', "qwen3-coder-plus": 'd', "qwen3-235b-a22b": 'o', "qwen3-32b": 'o',
	"qwen3-235b-a22b-thinking-2507": 'a', "qwq-plus": 'a',
}

// QwenChat is a strict imitation of Alibaba Cloud DashScope's
// OpenAI-compatible Chat Completions API (Qwen3) for the Messages
// bridge's tests. It serves POST …/chat/completions only and refuses, in
// DashScope's shape ({"error":{"code":"invalid_parameter_error","param":
// null,"message":…,"type":"invalid_request_error"},"request_id":…}):
//   - request members DashScope does not know (thinking and
//     reasoning_effort among them: its knob is enable_thinking), unknown
//     models (404 model_not_found), a non-boolean enable_thinking;
//   - a non-streaming call that thinks (MsgQwenNonStreamThinking), or
//     to a model that always thinks (MsgQwenStreamOnly);
//   - messages with members their role lacks, user parts other than text;
//   - a system message anywhere but first (MsgSystemFirst, as Qwen3's
//     chat template answers);
//   - calls unanswered (MsgQwenUnansweredTmpl), tool messages that answer
//     no call (OpenAI's text);
//   - a forced tool_choice while thinking (MsgQwenThinkingChoice).
//
// It wants no reasoning back (Qwen3's template renders reasoning only
// after the last user message) and ignores reasoning_content in history.
// It thinks only on streams: reasoning_content deltas, content, calls
// whose argument deltas repeat "id":"" and the type (as DashScope sends
// them), and a choice-less usage chunk when stream_options.include_usage.
type QwenChat struct {
	ChatScript
	chatLog
}

var qwenDialect = &chatDialect{
	name: "qwen", object: true,
	writeErr: func(w http.ResponseWriter, e *thinkingError) {
		code := any(QwenCodeParam)
		typ := "invalid_request_error"
		if e.code != nil {
			code = e.code
		}
		if e.status == http.StatusNotFound {
			code = "model_not_found"
		}
		b, _ := json.Marshal(jsonObj{{"error", jsonObj{{"code", code}, {"param", nil}, {"message", e.message}, {"type", typ}}},
			{"request_id", "00000000-0000-4000-8000-000000000000"}})
		b = append(b, '\n')
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(e.status)
		_, _ = w.Write(b)
	},
	callID: func(turn, _, i int, _ string) string {
		x := uint64(turn*7919+i*104729+1) * 0x9E3779B97F4A7C15
		return fmt.Sprintf("call_%016x%08x", x, uint32(x>>7))
	},
	usage: func(prompt, completion, hit, reasoning int) jsonObj {
		u := jsonObj{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion},
			{"prompt_tokens_details", jsonObj{{"cached_tokens", hit}}}}
		if reasoning > 0 {
			u = append(u, jsonField{"completion_tokens_details", jsonObj{{"reasoning_tokens", reasoning}}})
		}
		return u
	},
	usageAt:  usageChunk,
	emptyIDs: true,
}

var qwenParams = withParams([]string{"thinking", "reasoning_effort"}, "enable_thinking", "thinking_budget", "enable_search", "top_k", "repetition_penalty")

// QwenThinks reports whether a DashScope request thinks.
func QwenThinks(req gjson.Result) bool {
	switch qwenModels[req.Get("model").String()] {
	case 'a':
		return true
	case 'o':
		et := req.Get("enable_thinking")
		return !et.Exists() || et.Bool()
	}
	return req.Get("enable_thinking").Bool()
}

// ServeHTTP implements http.Handler.
func (q *QwenChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	qwenDialect.serve(&q.chatLog, &q.ChatScript, w, r, q.reject, func(req gjson.Result) byte {
		if QwenThinks(req) {
			return styleContent
		}
		return styleNone
	})
}

func (q *QwenChat) reject(req gjson.Result) *thinkingError {
	if u := unknownMember(req, qwenParams); u != "" {
		return badRequest("<400> InternalError.Algo.InvalidParameter: Unrecognized request argument supplied: %s", u)
	}
	model := req.Get("model").String()
	kind, ok := qwenModels[model]
	if !ok {
		return &thinkingError{status: http.StatusNotFound, message: "The model `" + model + "` does not exist or you do not have access to it."}
	}
	if et := req.Get("enable_thinking"); et.Exists() && !et.IsBool() {
		return badRequest("<400> InternalError.Algo.InvalidParameter: enable_thinking must be a boolean")
	}
	stream := req.Get("stream").Bool()
	switch {
	case !stream && kind == 'a':
		return badRequest(MsgQwenStreamOnly)
	case !stream && QwenThinks(req):
		return badRequest(MsgQwenNonStreamThinking)
	}
	msgs := req.Get("messages")
	if !msgs.IsArray() || len(msgs.Array()) == 0 {
		return badRequest("<400> InternalError.Algo.InvalidParameter: messages must not be empty")
	}
	list := msgs.Array()
	for i, m := range list {
		if rej := checkMessage(m, i, nil, []string{"text"}); rej != nil {
			return rej
		}
	}
	for i, m := range list {
		if m.Get("role").String() == "system" && i != 0 {
			return badRequest(MsgSystemFirst)
		}
	}
	if f := checkPairs(list); f != nil {
		switch f.kind {
		case 'u':
			next := f.at + 1
			for next < len(list) && list[next].Get("role").String() == "tool" {
				next++
			}
			return badRequest(MsgQwenUnansweredTmpl, next)
		case 'd':
			return badRequest("<400> InternalError.Algo.InvalidParameter: duplicate tool_call_id %s", f.ids[0])
		}
		return badRequest(MsgToolOrphan)
	}
	if rej := checkNames(req, func(name, path string) string {
		if !deepSeekName.MatchString(name) {
			return fmt.Sprintf("<400> InternalError.Algo.InvalidParameter: %s %q does not match ^[a-zA-Z0-9_-]{1,64}$", path, name)
		}
		return ""
	}); rej != nil {
		return rej
	}
	c := req.Get("tool_choice")
	if QwenThinks(req) && (c.String() == "required" || c.IsObject()) {
		return badRequest(MsgQwenThinkingChoice)
	}
	if c.IsObject() && !declaresChat(req.Get("tools"), c.Get("function.name").String()) {
		return badRequest("<400> InternalError.Algo.InvalidParameter: tool_choice names %q, which tools do not declare", c.Get("function.name").String())
	}
	return nil
}

// Interface guard
var _ http.Handler = (*QwenChat)(nil)
