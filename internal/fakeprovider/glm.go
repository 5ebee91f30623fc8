package fakeprovider

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Zhipu's codes and texts. Zhipu answers {"error":{"code":"<n>",
// "message":…}}: 1211 an unknown model (its text, "模型不存在，请检查模型代码。"),
// 1214 a parameter it refuses (musistudio/claude-code-router#1004: "tools[0].type:type
// cannot be empty."); "Tool choice must be auto" is Z.AI's answer to any
// other tool_choice (vectorize-io/hindsight#4246).
const (
	GLMCodeModel = "1211"
	GLMCodeParam = "1214"

	MsgGLMModel  = "模型不存在，请检查模型代码。"
	MsgGLMChoice = "Tool choice must be auto"

	// MsgGLMPreservedTmpl refuses, with clear_thinking false ("preserved
	// thinking"), an assistant message whose reasoning_content is not the
	// reasoning GLM gave that turn, complete and in order. GLM itself
	// answers such a request (its quality drops); the mock refuses, in
	// its own words, so a test sees it.
	MsgGLMPreservedTmpl = "preserved thinking (thinking.clear_thinking false): messages[%d].reasoning_content must be the reasoning of that turn, complete, unmodified and in order"
)

// glmModels are the models GLMChat serves (all think unless
// thinking:{type:"disabled"}), with their output caps.
var glmModels = map[string]int{"glm-4.5": 98304, "glm-4.5-air": 98304, "glm-4.6": 131072, "glm-4.7": 131072, "glm-5": 131072, "glm-5.1": 131072}

// GLMChat is a strict imitation of Zhipu's GLM Chat Completions API
// (GLM-4.5 to 5.x, thinking by default) for the Messages bridge's tests.
// It serves POST …/chat/completions only and refuses, in Zhipu's shape
// ({"error":{"code":"1214","message":…}}):
//   - request members Zhipu does not know (reasoning_effort among them),
//     unknown models (1211), a malformed thinking;
//   - max_tokens past the model's cap;
//   - messages with members their role lacks, user parts other than text
//     (the text models see no images);
//   - calls and tool messages that do not pair up (OpenAI's texts);
//   - a tool_choice other than "auto" (MsgGLMChoice);
//   - with thinking on and clear_thinking false (preserved thinking):
//     the k-th assistant tool-call message without Turns[k].Reasoning as
//     its reasoning_content, exactly (MsgGLMPreservedTmpl; stricter than
//     GLM, which only degrades). With clear_thinking true (the default)
//     GLM drops earlier reasoning, and so does the mock: none is needed.
//
// Its streams are Zhipu's: chunks without "object", reasoning_content
// deltas, content, each call whole in one delta (no tool_stream), ids
// call_-<digits>, and the usage at the top of the finish chunk, always.
type GLMChat struct {
	ChatScript
	chatLog
}

var glmDialect = &chatDialect{
	name: "glm",
	writeErr: func(w http.ResponseWriter, e *thinkingError) {
		code := GLMCodeParam
		if s, ok := e.code.(string); ok {
			code = s
		}
		if e.status == http.StatusNotFound && e.code == nil {
			code = "404"
		}
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": e.message}})
		b = append(b, '\n')
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(e.status)
		_, _ = w.Write(b)
	},
	callID: func(turn, _, i int, _ string) string {
		x := uint64(turn*7919+i*104729+1) * 0x9E3779B97F4A7C15
		return "call_-" + strconv.FormatUint(x%9000000000000000000+100000000000000000, 10)
	},
	usage: func(prompt, completion, hit, _ int) jsonObj {
		return jsonObj{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"prompt_tokens_details", jsonObj{{"cached_tokens", hit}}}, {"total_tokens", prompt + completion}}
	},
	usageAt:     usageFinal,
	wholeCalls:  true,
	finishDelta: jsonObj{{"role", "assistant"}, {"content", ""}},
}

var glmParams = withParams([]string{"reasoning_effort", "parallel_tool_calls", "logprobs", "top_logprobs", "n", "frequency_penalty", "presence_penalty", "seed"},
	"do_sample", "request_id", "tool_stream", "user_id")

// ServeHTTP implements http.Handler.
func (g *GLMChat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	glmDialect.serve(&g.chatLog, &g.ChatScript, w, r, g.reject, func(req gjson.Result) byte {
		if req.Get("thinking.type").String() != "disabled" {
			return styleContent
		}
		return styleNone
	})
}

func (g *GLMChat) reject(req gjson.Result) *thinkingError {
	if u := unknownMember(req, glmParams); u != "" {
		return badRequest("%s: unknown parameter", u)
	}
	model := req.Get("model").String()
	limit, ok := glmModels[model]
	if !ok {
		return &thinkingError{status: http.StatusBadRequest, message: MsgGLMModel, code: GLMCodeModel}
	}
	if t := req.Get("thinking"); t.Exists() {
		typ := t.Get("type").String()
		if !t.IsObject() || (typ != "enabled" && typ != "disabled") {
			return badRequest("thinking.type: must be enabled or disabled")
		}
		if ct := t.Get("clear_thinking"); ct.Exists() && !ct.IsBool() {
			return badRequest("thinking.clear_thinking: must be a boolean")
		}
		var extra string
		t.ForEach(func(k, _ gjson.Result) bool {
			if k.String() != "type" && k.String() != "clear_thinking" {
				extra = k.String()
				return false
			}
			return true
		})
		if extra != "" {
			return badRequest("thinking.%s: unknown parameter", extra)
		}
	}
	if mt := req.Get("max_tokens"); mt.Exists() && (mt.Type != gjson.Number || mt.Num < 1 || mt.Num > float64(limit)) {
		return badRequest("max_tokens: must be between 1 and %d for %s", limit, model)
	}
	msgs := req.Get("messages")
	if !msgs.IsArray() || len(msgs.Array()) == 0 {
		return badRequest("messages: cannot be empty")
	}
	list := msgs.Array()
	for i, m := range list {
		if rej := checkMessage(m, i, nil, []string{"text"}); rej != nil {
			return rej
		}
	}
	if f := checkPairs(list); f != nil {
		switch f.kind {
		case 'u':
			return badRequest(MsgToolUnanswered, strings.Join(f.ids, ", "))
		case 'd':
			return badRequest("messages[%d].tool_calls: the id %s twice", f.at, f.ids[0])
		}
		return badRequest(MsgToolOrphan)
	}
	if rej := checkNames(req, func(name, path string) string {
		if !deepSeekName.MatchString(name) {
			return fmt.Sprintf("%s: %q does not match ^[a-zA-Z0-9_-]{1,64}$", path, name)
		}
		return ""
	}); rej != nil {
		return rej
	}
	if c := req.Get("tool_choice"); c.Exists() && c.String() != "auto" {
		return badRequest(MsgGLMChoice)
	}
	if GLMPreserved(req) {
		for k, i := range toolCallTurns(list) {
			if k >= len(g.Turns) {
				break
			}
			if rc := list[i].Get("reasoning_content"); rc.Type != gjson.String || rc.String() != g.Turns[k].Reasoning {
				return badRequest(MsgGLMPreservedTmpl, i)
			}
		}
	}
	return nil
}

// GLMPreserved reports whether a GLM request asked for preserved thinking
// (thinking on, clear_thinking false).
func GLMPreserved(req gjson.Result) bool {
	return req.Get("thinking.type").String() != "disabled" && req.Get("thinking.clear_thinking").Exists() && !req.Get("thinking.clear_thinking").Bool()
}

// Interface guard
var _ http.Handler = (*GLMChat)(nil)
