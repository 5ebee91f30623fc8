package fakeprovider

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// The strict per-provider mocks: what each refuses, with its texts and
// shape, and how each streams.

const psTools = `"tools":[{"type":"function","function":{"name":"Write","parameters":{"type":"object"}}},` +
	`{"type":"function","function":{"name":"Bash","parameters":{"type":"object"}}}]`

func psScript() ChatScript {
	return ChatScript{Turns: []Turn{
		{Reasoning: `Write it: "q" \ 中文.`, Text: "Writing.", Calls: []Call{{"Write", `{"file_path":"/a","content":"x"}`}, {"Bash", `{"command":"ls"}`}}},
		{Reasoning: "Done.", Text: "All done."},
	}}
}

func psBody(model, messages, extra string) string {
	return `{"model":"` + model + `","messages":[` + messages + `],` + psTools + extra + `}`
}

const psUser = `{"role":"user","content":"go"}`

// psHist is the history after turn 1 with ids a and b, the assistant
// message's extra members, and both calls answered.
func psHist(a, b, extra string) string {
	return psUser + `,{"role":"assistant","content":"Writing."` + extra + `,"tool_calls":[` +
		`{"id":"` + a + `","type":"function","function":{"name":"Write","arguments":"{}"}},` +
		`{"id":"` + b + `","type":"function","function":{"name":"Bash","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"` + a + `","content":"ok"},{"role":"tool","tool_call_id":"` + b + `","content":"ok"}`
}

func psPost(t *testing.T, h http.Handler, path, body string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// psChunks reads a Chat stream's data lines; done reports [DONE].
func psChunks(t *testing.T, body string) (chunks []gjson.Result, done bool) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		if !gjson.Valid(data) {
			t.Fatalf("chunk %q is not JSON", data)
		}
		chunks = append(chunks, gjson.Parse(data))
	}
	return chunks, done
}

type psCase struct {
	name, body string
	status     int
	msg        string // the refusal's message, a prefix of it when it ends in "…"
}

func psRun(t *testing.T, h http.Handler, msgPath string, cases []psCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := psPost(t, h, "/v1/chat/completions", tc.body)
			got := gjson.Get(body, msgPath).String()
			want, prefix := strings.CutSuffix(tc.msg, "…")
			if status != tc.status || (prefix && !strings.HasPrefix(got, want)) || (!prefix && got != want) {
				t.Errorf("%d %s\nwant %d %q", status, body, tc.status, tc.msg)
			}
		})
	}
}

func TestKimiChatRefuses(t *testing.T) {
	const m = "kimi-k2.6"
	const rc = `,"reasoning_content":"` + `Write it: \"q\" \\ 中文.` + `"`
	ok := psHist("functions.Write:0", "functions.Bash:1", rc)
	k := &KimiChat{ChatScript: psScript()}
	k.ExactReasoning = true
	psRun(t, k, "error.message", []psCase{
		{"unknown member", psBody(m, psUser, `,"reasoning_effort":"high"`), 400, "Invalid request: Unrecognized request argument supplied: reasoning_effort"},
		{"unknown model", psBody("kimi-k9", psUser, ""), 404, "Not found the model kimi-k9 or Permission denied"},
		{"window", psBody(m, psUser, `,"max_tokens":262144`), 400, "Invalid request: Your request exceeded model token limit: 262144"},
		{"reasoning missing", psBody(m, psHist("functions.Write:0", "functions.Bash:1", ""), ""), 400,
			"thinking is enabled but reasoning_content is missing in assistant tool call message at index 1"},
		{"other reasoning", psBody(m, psHist("functions.Write:0", "functions.Bash:1", `,"reasoning_content":"x"`), ""), 400,
			"thinking is enabled but reasoning_content is missing in assistant tool call message at index 1"},
		{"rewritten id", psBody(m, psHist("call_0", "functions.Bash:1", rc), ""), 400,
			`Invalid request: messages[1].tool_calls[0].id "call_0": expected "functions.Write:0", the id Kimi gave the call (kept verbatim)`},
		{"renumbered id", psBody(m, psHist("functions.Write:0", "functions.Bash:0", rc), ""), 400, `Invalid request: messages[1].tool_calls[1].id…`},
		{"unanswered", psBody(m, strings.TrimSuffix(ok, `,{"role":"tool","tool_call_id":"functions.Bash:1","content":"ok"}`), ""), 400,
			"an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: functions.Bash:1"},
		{"orphan", psBody(m, psUser+`,{"role":"tool","tool_call_id":"functions.X:0","content":"ok"}`, ""), 400, "Invalid request: tool_call_id functions.X:0 is not found"},
		{"forced choice while thinking", psBody(m, psUser, `,"tool_choice":"required"`), 400, MsgKimiThinkingChoice},
		{"name rule", strings.Replace(psBody(m, psUser, ""), `"Bash"`, `"9sh"`, 1), 400, `Invalid request: tools[1].function.name "9sh" must start…`},
		{"image part ok, audio not", psBody(m, `{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}`, ""), 400, "Invalid request: messages[0].content[0]: unknown variant `input_audio`…"},
	})
	// The 20015 code, Moonshot's shape.
	_, body := psPost(t, k, "/v1/chat/completions", psBody(m, psHist("functions.Write:0", "functions.Bash:1", ""), ""))
	if gjson.Get(body, "error.code").Int() != KimiReasoningCode || gjson.Get(body, "type").String() != "error" {
		t.Errorf("20015 shape: %s", body)
	}
	// Accepted: the exact history; thinking off needs no reasoning.
	for _, body := range []string{psBody(m, ok, ""), psBody(m, psHist("functions.Write:0", "functions.Bash:1", ""), `,"thinking":{"type":"disabled"}`),
		psBody(m, `{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}`, "")} {
		if status, b := psPost(t, k, "/v1/chat/completions", body); status != 200 {
			t.Errorf("refused %s: %d %s", body, status, b)
		}
	}
}

func TestKimiChatStream(t *testing.T) {
	k := &KimiChat{ChatScript: psScript()}
	status, body := psPost(t, k, "/v1/chat/completions", psBody("kimi-k2.6", psUser, `,"stream":true`))
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	chunks, done := psChunks(t, body)
	var reasoning, ids []string
	for _, c := range chunks {
		reasoning = append(reasoning, c.Get("choices.0.delta.reasoning_content").String())
		for _, tc := range c.Get("choices.0.delta.tool_calls").Array() {
			if id := tc.Get("id").String(); id != "" {
				ids = append(ids, id)
			}
		}
	}
	last := chunks[len(chunks)-1]
	if !done || strings.Join(reasoning, "") != psScript().Turns[0].Reasoning || strings.Join(ids, ",") != "functions.Write:0,functions.Bash:1" ||
		last.Get("choices.0.finish_reason").String() != "tool_calls" || last.Get("choices.0.usage.cached_tokens").Type != gjson.Number || last.Get("usage").Exists() {
		t.Errorf("stream:\n%s", body)
	}
	// Turn 2 continues the numbering; the JSON answer is the same turn.
	hist := psHist("functions.Write:0", "functions.Bash:1", `,"reasoning_content":"x"`)
	if status, body := psPost(t, k, "/v1/chat/completions", psBody("kimi-k2.6", hist, "")); status != 200 || gjson.Get(body, "choices.0.message.content").String() != "All done." ||
		gjson.Get(body, "usage.cached_tokens").Type != gjson.Number {
		t.Errorf("turn 2: %d %s", status, body)
	}
	if n := len(k.Log()); n != 2 || len(k.Refused()) != 0 {
		t.Errorf("log %v", k.Log())
	}
}

func TestGLMChatRefuses(t *testing.T) {
	const m = "glm-4.6"
	g := &GLMChat{ChatScript: psScript()}
	id0, id1 := glmDialect.callID(0, 0, 0, ""), glmDialect.callID(0, 0, 1, "")
	preserved := `,"thinking":{"type":"enabled","clear_thinking":false}`
	rc := `,"reasoning_content":"` + `Write it: \"q\" \\ 中文.` + `"`
	psRun(t, g, "error.message", []psCase{
		{"unknown model", psBody("glm-9", psUser, ""), 400, MsgGLMModel},
		{"reasoning_effort", psBody(m, psUser, `,"reasoning_effort":"high"`), 400, "reasoning_effort: unknown parameter"},
		{"thinking member", psBody(m, psUser, `,"thinking":{"type":"enabled","keep":"all"}`), 400, "thinking.keep: unknown parameter"},
		{"max_tokens", psBody(m, psUser, `,"max_tokens":131073`), 400, "max_tokens: must be between 1 and 131072 for glm-4.6"},
		{"required", psBody(m, psUser, `,"tool_choice":"required"`), 400, MsgGLMChoice},
		{"named", psBody(m, psUser, `,"tool_choice":{"type":"function","function":{"name":"Bash"}}`), 400, MsgGLMChoice},
		{"image", psBody(m, `{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}`, ""), 400, "Invalid request: messages[0].content[0]: unknown variant `image_url`…"},
		{"preserved without reasoning", psBody(m, psHist(id0, id1, ""), preserved), 400, "preserved thinking (thinking.clear_thinking false): messages[1]…"},
		{"preserved, other reasoning", psBody(m, psHist(id0, id1, `,"reasoning_content":"x"`), preserved), 400, "preserved thinking…"},
		{"orphan", psBody(m, psUser+`,{"role":"tool","tool_call_id":"a","content":"ok"}`, ""), 400, MsgToolOrphan},
	})
	_, body := psPost(t, g, "/v1/chat/completions", psBody(m, psUser, `,"tool_choice":"required"`))
	if gjson.Get(body, "error.code").String() != GLMCodeParam {
		t.Errorf("shape: %s", body)
	}
	for _, body := range []string{psBody(m, psHist(id0, id1, rc), preserved), psBody(m, psHist(id0, id1, ""), ""), psBody(m, psUser, `,"tool_choice":"auto"`)} {
		if status, b := psPost(t, g, "/v1/chat/completions", body); status != 200 {
			t.Errorf("refused %s: %d %s", body, status, b)
		}
	}
}

func TestGLMChatStream(t *testing.T) {
	g := &GLMChat{ChatScript: psScript()}
	status, body := psPost(t, g, "/v1/chat/completions", psBody("glm-4.6", psUser, `,"stream":true`))
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	chunks, done := psChunks(t, body)
	var calls []gjson.Result
	for _, c := range chunks {
		if c.Get("object").Exists() {
			t.Errorf("a GLM chunk with object: %s", c.Raw)
		}
		calls = append(calls, c.Get("choices.0.delta.tool_calls").Array()...)
	}
	last := chunks[len(chunks)-1]
	if !done || len(calls) != 2 || calls[0].Get("function.arguments").String() != psScript().Turns[0].Calls[0].Arguments ||
		!strings.HasPrefix(calls[0].Get("id").String(), "call_-") || last.Get("usage.prompt_tokens_details.cached_tokens").Type != gjson.Number {
		t.Errorf("stream:\n%s", body)
	}
}

func TestQwenChatRefuses(t *testing.T) {
	q := &QwenChat{ChatScript: psScript()}
	psRun(t, q, "error.message", []psCase{
		{"non-stream thinking", psBody("qwen3-max", psUser, `,"enable_thinking":true`), 400, MsgQwenNonStreamThinking},
		{"open model thinks by default", psBody("qwen3-235b-a22b", psUser, ""), 400, MsgQwenNonStreamThinking},
		{"thinking-only model", psBody("qwq-plus", psUser, `,"enable_thinking":false`), 400, MsgQwenStreamOnly},
		{"thinking member", psBody("qwen3-max", psUser, `,"thinking":{"type":"enabled"}`), 400, "<400> InternalError.Algo.InvalidParameter: Unrecognized request argument supplied: thinking"},
		{"unknown model", psBody("qwen9", psUser, ""), 404, "The model `qwen9` does not exist or you do not have access to it."},
		{"system not first", psBody("qwen3-max", psUser+`,{"role":"system","content":"s"}`, ""), 400, MsgSystemFirst},
		{"unanswered", psBody("qwen3-max", psUser+`,{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"Bash","arguments":"{}"}}]},`+psUser, ""), 400,
			strings.Replace(MsgQwenUnansweredTmpl, "%d", "2", 1)},
		{"forced choice while thinking", psBody("qwen3-max", psUser, `,"stream":true,"enable_thinking":true,"tool_choice":"required"`), 400, MsgQwenThinkingChoice},
	})
	_, body := psPost(t, q, "/v1/chat/completions", psBody("qwen3-max", psUser, `,"enable_thinking":true`))
	if gjson.Get(body, "error.code").String() != QwenCodeParam || gjson.Get(body, "error.type").String() != "invalid_request_error" || !gjson.Get(body, "request_id").Exists() {
		t.Errorf("shape: %s", body)
	}
	// Non-streaming without thinking: no reasoning; reasoning in history
	// is taken and ignored.
	status, body := psPost(t, q, "/v1/chat/completions", psBody("qwen3-max", psUser, `,"enable_thinking":false`))
	if status != 200 || gjson.Get(body, "choices.0.message.reasoning_content").Exists() {
		t.Errorf("%d %s", status, body)
	}
}

func TestQwenChatStream(t *testing.T) {
	q := &QwenChat{ChatScript: psScript()}
	status, body := psPost(t, q, "/v1/chat/completions", psBody("qwen3-max", psUser, `,"stream":true,"stream_options":{"include_usage":true},"enable_thinking":true`))
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	chunks, done := psChunks(t, body)
	var reasoning strings.Builder
	emptyIDs := 0
	for _, c := range chunks {
		reasoning.WriteString(c.Get("choices.0.delta.reasoning_content").String())
		for _, tc := range c.Get("choices.0.delta.tool_calls").Array() {
			if id := tc.Get("id"); id.Exists() && id.String() == "" {
				emptyIDs++
			}
		}
	}
	last := chunks[len(chunks)-1]
	if !done || reasoning.String() != psScript().Turns[0].Reasoning || emptyIDs == 0 || len(last.Get("choices").Array()) != 0 ||
		last.Get("usage.completion_tokens_details.reasoning_tokens").Int() == 0 {
		t.Errorf("stream:\n%s", body)
	}
	// Without enable_thinking qwen3-max does not think.
	_, body = psPost(t, q, "/v1/chat/completions", psBody("qwen3-max", psUser, `,"stream":true`))
	if strings.Contains(body, "reasoning_content") || strings.Contains(body, `"usage"`) {
		t.Errorf("no thinking, no usage asked:\n%s", body)
	}
}

func TestMiniMaxChatRefuses(t *testing.T) {
	const m = "MiniMax-M2.5"
	mm := &MiniMaxChat{ChatScript: psScript()}
	mm.ExactReasoning = true
	details := `,"reasoning_details":[{"type":"reasoning.text","id":"reasoning-text-1","format":"MiniMax-response-v1","index":0,"text":"` + `Write it: \"q\" \\ 中文.` + `"}]`
	psRun(t, mm, "error.message", []psCase{
		{"unknown model", psBody("minimax-m9", psUser, ""), 400, "invalid params, unknown model 'minimax-m9' (2013)"},
		{"reasoning_effort", psBody(m, psUser, `,"reasoning_effort":"high"`), 400, "invalid params, unknown parameter reasoning_effort (2013)"},
		{"not following", psBody(m, psUser+`,{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"Bash","arguments":"{}"}}]},`+
			psUser+`,{"role":"tool","tool_call_id":"c","content":"x"}`, ""), 400, MsgMiniMaxNotFollow},
		{"after another call's result", psBody(m, psHist("a", "b", details)+`,{"role":"tool","tool_call_id":"z","content":"x"}`, ""), 400, MsgMiniMaxNotFollow},
		{"id not found", psBody(m, psUser+`,{"role":"tool","tool_call_id":"z","content":"x"}`, ""), 400, "invalid params, tool result's tool id(z) not found (2013)"},
		{"reasoning missing in the current turn", psBody(m, psHist("a", "b", ""), ""), 400, "invalid params, messages[1]: interleaved thinking…"},
		{"other reasoning", psBody(m, psHist("a", "b", `,"reasoning_content":"x"`), ""), 400, "invalid params, messages[1]: interleaved thinking…"},
	})
	_, body := psPost(t, mm, "/v1/chat/completions", psBody("minimax-m9", psUser, ""))
	if gjson.Get(body, "type").String() != "error" || gjson.Get(body, "error.type").String() != "bad_request_error" || gjson.Get(body, "error.http_code").String() != "400" {
		t.Errorf("shape: %s", body)
	}
	for _, body := range []string{
		psBody(m, psHist("a", "b", details), `,"reasoning_split":true`),
		psBody(m, psHist("a", "b", `,"reasoning_content":"Write it: \"q\" \\ 中文."`), ""),
		strings.Replace(psBody(m, psHist("a", "b", ""), ""), `"content":"Writing."`, `"content":"<think>\nWrite it: \"q\" \\ 中文.\n</think>\n\nWriting."`, 1),
		psBody(strings.ToLower(m), psHist("a", "b", ""), `,"thinking":{"type":"disabled"}`),
	} {
		if status, b := psPost(t, mm, "/v1/chat/completions", body); status != 200 {
			t.Errorf("refused %s: %d %s", body, status, b)
		}
	}
}

func TestMiniMaxChatStream(t *testing.T) {
	want := psScript().Turns[0]
	for _, tc := range []struct {
		name, extra string
		inline      bool
	}{{"reasoning_split", `,"reasoning_split":true`, false}, {"think in content", "", false}, {"inline think despite the split", `,"reasoning_split":true`, true}} {
		t.Run(tc.name, func(t *testing.T) {
			mm := &MiniMaxChat{ChatScript: psScript(), InlineThink: tc.inline}
			mm.ContentPiece = 3
			status, body := psPost(t, mm, "/v1/chat/completions", psBody("MiniMax-M2.5", psUser, `,"stream":true`+tc.extra))
			if status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			chunks, done := psChunks(t, body)
			var details, content strings.Builder
			for _, c := range chunks {
				for _, d := range c.Get("choices.0.delta.reasoning_details").Array() {
					details.WriteString(d.Get("text").String())
				}
				content.WriteString(c.Get("choices.0.delta.content").String())
			}
			last := chunks[len(chunks)-1]
			if !done || last.Get("usage.total_tokens").Type != gjson.Number || last.Get("base_resp.status_code").Int() != 0 || last.Get("choices.0.finish_reason").String() != "tool_calls" {
				t.Errorf("the finish chunk %s", last.Raw)
			}
			split := tc.extra != "" && !tc.inline
			wantContent := want.Text
			if !split {
				wantContent = "<think>\n" + want.Reasoning + "\n</think>\n\n" + want.Text
			}
			if (split && details.String() != want.Reasoning) || (!split && details.Len() > 0) || content.String() != wantContent {
				t.Errorf("details %q content %q", details.String(), content.String())
			}
		})
	}
}
