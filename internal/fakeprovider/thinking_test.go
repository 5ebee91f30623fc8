package fakeprovider

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

const thinkTools = `"tools":[{"type":"function","function":{"name":"exec_command","parameters":{"type":"object"}}},` +
	`{"type":"function","function":{"name":"apply_patch","parameters":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}}}]`

func thinkTurns() []Turn {
	return []Turn{
		{Reasoning: "List and read, both at once.", Calls: []Call{{"exec_command", `{"cmd":"ls"}`}, {"exec_command", `{"cmd":"cat README.md"}`}}},
		{Reasoning: "Now patch.", Calls: []Call{{"apply_patch", PatchArguments("*** Begin Patch\n*** End Patch\n")}}},
		{Reasoning: "Done.", Text: "All done."},
	}
}

// thinkBody is a Chat request with messages (a JSON array's inside).
func thinkBody(model, messages, extra string) string {
	return `{"model":"` + model + `","messages":[` + messages + `],` + thinkTools + extra + `}`
}

// historyMsgs is a valid conversation after turn 1 with ids a and b.
func historyMsgs(reasoning, a, b string) string {
	return `{"role":"system","content":"sys"},{"role":"user","content":"go"},` +
		`{"role":"assistant","content":""` + reasoning + `,"tool_calls":[` +
		`{"id":"` + a + `","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\":\"ls\"}"}},` +
		`{"id":"` + b + `","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\":\"cat README.md\"}"}}]},` +
		`{"role":"tool","tool_call_id":"` + a + `","content":"README.md"},{"role":"tool","tool_call_id":"` + b + `","content":"# Hi"}`
}

func deepSeekErr(msg string) string {
	return `{"error":{"message":` + strconv.Quote(msg) + `,"type":"invalid_request_error","param":null,"code":"invalid_request_error"}}` + "\n"
}

func TestThinkingRejects(t *testing.T) {
	const ds, kimi = "deepseek-v4-pro", "kimi-k2.6"
	const rc = `,"reasoning_content":"r"`
	kimiHist := func(reasoning string) string {
		return historyMsgs(reasoning, "functions.exec_command:0", "functions.exec_command:1")
	}
	for _, tc := range []struct {
		name   string
		th     Thinking
		body   string
		status int
		want   string
	}{
		{"deepseek missing reasoning", DeepSeek, thinkBody(ds, historyMsgs("", "a", "b"), ""), 400,
			deepSeekErr("The `reasoning_content` in the thinking mode must be passed back to the API.")},
		{"deepseek null reasoning", DeepSeek, thinkBody(ds, historyMsgs(`,"reasoning_content":null`, "a", "b"), ""), 400,
			deepSeekErr(MsgDeepSeekReasoning)},
		{"kimi missing reasoning", Kimi, thinkBody(kimi, kimiHist(""), ""), 400,
			`{"error":{"message":"thinking is enabled but reasoning_content is missing in assistant tool call message at index 2","type":"invalid_request_error","code":20015},"type":"error"}` + "\n"},
		{"kimi rewritten id", Kimi, thinkBody(kimi, historyMsgs(rc, "call_1", "functions.exec_command:1"), ""), 400,
			`{"error":{"message":"Invalid messages[2].tool_calls[0].id \"call_1\": expected functions.exec_command:\u003cindex\u003e, the id Kimi gave the call","type":"invalid_request_error"},"type":"error"}` + "\n"},
		{"kimi id of another function", Kimi, thinkBody(kimi, historyMsgs(rc, "functions.apply_patch:0", "functions.exec_command:1"), ""), 400, ""},
		{"second system message", DeepSeek, thinkBody(ds, `{"role":"system","content":"a"},{"role":"system","content":"b"},{"role":"user","content":"go"}`, ""), 400,
			deepSeekErr(MsgSystemFirst)},
		{"system not first", DeepSeek, thinkBody(ds, `{"role":"user","content":"go"},{"role":"system","content":"b"}`, ""), 400,
			deepSeekErr(MsgSystemFirst)},
		{"unanswered call", DeepSeek, thinkBody(ds, strings.TrimSuffix(historyMsgs(rc, "a", "b"), `,{"role":"tool","tool_call_id":"b","content":"# Hi"}`), ""), 400,
			deepSeekErr(strings.Replace(MsgToolUnanswered, "%s", "b", 1))},
		{"tool message for another call", DeepSeek, thinkBody(ds, strings.Replace(historyMsgs(rc, "a", "b"), `"tool_call_id":"b"`, `"tool_call_id":"c"`, 1), ""), 400,
			deepSeekErr(MsgToolOrphan)},
		{"tool message after a user message", DeepSeek, thinkBody(ds, historyMsgs(rc, "a", "b")+`,{"role":"user","content":"x"},{"role":"tool","tool_call_id":"a","content":"again"}`, ""), 400,
			deepSeekErr(MsgToolOrphan)},
		{"unknown message field", DeepSeek, thinkBody(ds, `{"role":"user","content":"go","phase":"x"}`, ""), 400,
			deepSeekErr("Failed to deserialize the JSON body into the target type: messages[0]: unknown field `phase`, expected one of `role`, `content`, `name`")},
		{"unknown tool call field", DeepSeek, thinkBody(ds, strings.Replace(historyMsgs(rc, "a", "b"), `"type":"function","function"`, `"type":"function","status":"completed","function"`, 1), ""), 400,
			deepSeekErr("Failed to deserialize the JSON body into the target type: messages[2].tool_calls[0]: unknown field `status`, expected one of `id`, `type`, `function`")},
		{"developer role", DeepSeek, thinkBody(ds, `{"role":"developer","content":"x"}`, ""), 400, ""},
		{"responses member", DeepSeek, thinkBody(ds, `{"role":"user","content":"go"}`, `,"store":false`), 400,
			deepSeekErr("Unrecognized request argument supplied: store")},
		{"unknown model", DeepSeek, thinkBody("gpt-5.5", `{"role":"user","content":"go"}`, ""), 400, deepSeekErr("Model Not Exist")},
		{"kimi unknown model", Kimi, thinkBody("gpt-5.5", `{"role":"user","content":"go"}`, ""), 404,
			`{"error":{"message":"Not found the model gpt-5.5 or Permission denied","type":"resource_not_found_error"},"type":"error"}` + "\n"},
		{"bad effort", DeepSeek, thinkBody(ds, `{"role":"user","content":"go"}`, `,"reasoning_effort":"huge"`), 400, ""},
		{"kimi effort", Kimi, thinkBody(kimi, `{"role":"user","content":"go"}`, `,"reasoning_effort":"high"`), 400, ""},
		{"bad thinking", DeepSeek, thinkBody(ds, `{"role":"user","content":"go"}`, `,"thinking":{"type":"on"}`), 400, ""},
		{"custom tool", DeepSeek, `{"model":"` + ds + `","messages":[{"role":"user","content":"go"}],"tools":[{"type":"custom","custom":{"name":"apply_patch"}}]}`, 400, ""},
		{"past the script", DeepSeek, thinkBody(ds, historyMsgs(rc, "a", "b")+`,{"role":"assistant","content":"","reasoning_content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"apply_patch","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"},{"role":"assistant","content":"x","reasoning_content":"","tool_calls":[{"id":"d","type":"function","function":{"name":"apply_patch","arguments":"{}"}}]},{"role":"tool","tool_call_id":"d","content":"ok"}`, ""), 400,
			deepSeekErr("fakeprovider: the script has 3 turns and this request already holds 3 tool-call turns")},
		{"undeclared tool", DeepSeek, `{"model":"` + ds + `","messages":[{"role":"user","content":"go"}]}`, 400,
			deepSeekErr("fakeprovider: turn 1 calls exec_command, which the request's tools do not declare")},
		// Accepted: thinking off needs no reasoning, Kimi's ids, "" as
		// reasoning.
		{"thinking disabled", DeepSeek, thinkBody(ds, historyMsgs("", "a", "b"), `,"thinking":{"type":"disabled"}`), 200, ""},
		{"empty reasoning", DeepSeek, thinkBody(ds, historyMsgs(`,"reasoning_content":""`, "a", "b"), ""), 200, ""},
		{"kimi history", Kimi, thinkBody(kimi, kimiHist(rc), ""), 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Provider{Thinking: tc.th, Turns: thinkTurns(), Now: newTestDemo().Now}
			rec := demoDo(t, p, http.MethodPost, "/v1/chat/completions", tc.body)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.want != "" && rec.Body.String() != tc.want {
				t.Errorf("body\n got %s\nwant %s", rec.Body, tc.want)
			}
			if tc.status != 200 && !gjson.Get(rec.Body.String(), "error.message").Exists() {
				t.Errorf("refusal without an error message: %s", rec.Body)
			}
		})
	}
}

func TestThinkingChatOnly(t *testing.T) {
	for _, th := range []Thinking{DeepSeek, Kimi} {
		p := &Provider{Thinking: th, Turns: thinkTurns()}
		rec := demoDo(t, p, http.MethodPost, "/v1/responses", `{"model":"deepseek-v4-pro","input":"hi"}`)
		if rec.Code != http.StatusNotFound || len(p.Requests()) != 0 {
			t.Errorf("%s: /v1/responses answered %d %s", th, rec.Code, rec.Body)
		}
	}
}

// chunks are the data payloads of a Chat stream, which must end in
// [DONE], without it.
func chunks(t *testing.T, body string) []gjson.Result {
	t.Helper()
	frames := parseSSE(t, body)
	if frames[len(frames)-1].data != "[DONE]" {
		t.Fatalf("stream does not end in [DONE]: %s", body)
	}
	var out []gjson.Result
	for _, f := range frames[:len(frames)-1] {
		if f.event != "" {
			t.Errorf("event line %q in a Chat stream", f.event)
		}
		out = append(out, gjson.Parse(f.data))
	}
	return out
}

func TestThinkingStream(t *testing.T) {
	body := thinkBody("deepseek-v4-pro", `{"role":"system","content":"sys"},{"role":"user","content":"go"}`, `,"stream":true,"stream_options":{"include_usage":true}`)
	p := &Provider{Thinking: DeepSeek, Turns: thinkTurns(), Now: newTestDemo().Now, DeltaSize: 5}
	rec := demoDo(t, p, http.MethodPost, "/v1/chat/completions", body)
	if rec.Code != 200 {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	cs := chunks(t, rec.Body.String())
	// Reasoning first, then the calls by index, then the finish, then the
	// usage alone; every chunk before it says "usage":null.
	var reasoning strings.Builder
	args := map[int64]*strings.Builder{}
	var ids, phases []string
	for i, c := range cs {
		if c.Get("id").String() != "chatcmpl-deepseek-1" || c.Get("model").String() != "deepseek-v4-pro" || c.Get("object").String() != "chat.completion.chunk" {
			t.Errorf("chunk %d head: %s", i, c.Raw)
		}
		if i < len(cs)-1 && c.Get("usage").Type != gjson.Null {
			t.Errorf("chunk %d usage %s", i, c.Get("usage").Raw)
		}
		d := c.Get("choices.0.delta")
		phase := ""
		switch {
		case i == len(cs)-1:
			phase = "usage"
			if len(c.Get("choices").Array()) != 0 {
				t.Errorf("usage chunk has choices: %s", c.Raw)
			}
		case c.Get("choices.0.finish_reason").String() != "":
			phase = "finish:" + c.Get("choices.0.finish_reason").String()
		case d.Get("reasoning_content").Type == gjson.String:
			phase = "reasoning"
			reasoning.WriteString(d.Get("reasoning_content").String())
		case d.Get("tool_calls").Exists():
			phase = "calls"
			tc := d.Get("tool_calls.0")
			if id := tc.Get("id").String(); id != "" {
				ids = append(ids, id)
				args[tc.Get("index").Int()] = &strings.Builder{}
			}
			args[tc.Get("index").Int()].WriteString(tc.Get("function.arguments").String())
		}
		if i == 0 && d.Get("role").String() != "assistant" {
			t.Errorf("first delta without the role: %s", c.Raw)
		}
		if len(phases) == 0 || phases[len(phases)-1] != phase {
			phases = append(phases, phase)
		}
	}
	if got := strings.Join(phases, " "); got != "reasoning calls finish:tool_calls usage" {
		t.Errorf("phases %q", got)
	}
	if reasoning.String() != "List and read, both at once." {
		t.Errorf("reasoning %q", reasoning.String())
	}
	if len(ids) != 2 || !strings.HasPrefix(ids[0], "call_00_") || !strings.HasPrefix(ids[1], "call_01_") || len(ids[0]) != 32 ||
		strings.Join(p.CallIDs(), ",") != strings.Join(ids, ",") {
		t.Errorf("ids %q, recorded %q", ids, p.CallIDs())
	}
	if args[0].String() != `{"cmd":"ls"}` || args[1].String() != `{"cmd":"cat README.md"}` {
		t.Errorf("arguments %q %q", args[0], args[1])
	}
	u := cs[len(cs)-1].Get("usage")
	prompt := PromptTokens(len(body))
	if u.Get("prompt_tokens").Int() != int64(prompt) || u.Get("prompt_cache_hit_tokens").Int() != int64(CacheHitTokens(len(body))) ||
		u.Get("prompt_cache_miss_tokens").Int() != int64(prompt-CacheHitTokens(len(body))) || u.Get("prompt_tokens_details").Exists() ||
		u.Get("completion_tokens_details.reasoning_tokens").Int() <= 0 {
		t.Errorf("usage %s", u.Raw)
	}
}

func TestThinkingTurns(t *testing.T) {
	// Kimi's ids count on across the conversation; the turn follows the
	// tool-call messages already there.
	p := &Provider{Thinking: Kimi, Turns: thinkTurns()}
	body := thinkBody("kimi-k2.6", historyMsgs(`,"reasoning_content":"r"`, "functions.exec_command:0", "functions.exec_command:1"), "")
	rec := demoDo(t, p, http.MethodPost, "/v1/chat/completions", body)
	r := gjson.Parse(rec.Body.String())
	if rec.Code != 200 || r.Get("choices.0.finish_reason").String() != "tool_calls" ||
		r.Get("choices.0.message.reasoning_content").String() != "Now patch." ||
		r.Get("choices.0.message.tool_calls.0.id").String() != "functions.apply_patch:2" ||
		r.Get("choices.0.message.tool_calls.0.function.arguments").String() != PatchArguments("*** Begin Patch\n*** End Patch\n") ||
		r.Get("usage.prompt_tokens_details.cached_tokens").Int() != int64(CacheHitTokens(len(body))) {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}

	// A length-cut turn sends its text, not its calls.
	p = &Provider{Thinking: DeepSeek, Turns: []Turn{{Reasoning: "r", Text: "cut", Calls: []Call{{"exec_command", "{}"}}, Finish: "length"}}}
	rec = demoDo(t, p, http.MethodPost, "/v1/chat/completions", thinkBody("deepseek-v4-flash", `{"role":"user","content":"go"}`, ""))
	r = gjson.Parse(rec.Body.String())
	if r.Get("choices.0.finish_reason").String() != "length" || r.Get("choices.0.message.content").String() != "cut" ||
		r.Get("choices.0.message.tool_calls").Exists() || len(p.CallIDs()) != 0 {
		t.Errorf("%s", rec.Body)
	}

	// Thinking off: no reasoning at all.
	p = &Provider{Thinking: DeepSeek, Turns: []Turn{{Reasoning: "r", Text: "plain"}}}
	rec = demoDo(t, p, http.MethodPost, "/v1/chat/completions", thinkBody("deepseek-v4-pro", `{"role":"user","content":"go"}`, `,"thinking":{"type":"disabled"},"stream":true`))
	if strings.Contains(rec.Body.String(), `"reasoning_content":"r"`) || !strings.Contains(rec.Body.String(), `"content":"plain"`) {
		t.Errorf("%s", rec.Body)
	}
}
