package messagesbridge

import (
	"strings"
	"testing"
)

// The response scenarios of anthropic-messages-bridge.md §14, each as a
// stream (compared byte for byte, at chunk sizes 1, 7 and 4096) and, where
// the answer has a JSON form, as the JSON answer, which must be the message
// the stream gives.

// Scenario 11: reasoning_content, content, two tool calls in one chunk,
// finish_reason tool_calls, a usage-only chunk: the canonical stream of
// §3.3, DeepSeek's usage.
func TestMessagesStreamThinkTextTwoCalls(t *testing.T) {
	rules := rsRules("deepseek", "")
	upstream := rsChunk(`{"role":"assistant","content":null,"reasoning_content":"Both files "}`, "null") +
		rsChunk(`{"reasoning_content":"are needed."}`, "null") +
		rsChunk(`{"content":"Reading both files."}`, "null") +
		rsChunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"Read","arguments":"{\"file_path\":\"/a\"}"}},`+
			`{"index":1,"id":"call_b","type":"function","function":{"name":"Read","arguments":"{\"file_path\":\"/b\"}"}}]}`, "null") +
		rsChunk(`{}`, `"tool_calls"`) +
		rsUsageChunk(`{"prompt_tokens":4908,"completion_tokens":96,"total_tokens":5004,"prompt_cache_hit_tokens":4096,"prompt_cache_miss_tokens":812,"completion_tokens_details":{"reasoning_tokens":40}}`) +
		rsDone
	got := rsStream(t, rules, upstream)
	want := rsStart +
		rsThinkingStart(0) +
		rsThinking(0, "Both files ") +
		rsThinking(0, "are needed.") +
		rsSignature(0, "deepseek", "Both files are needed.") +
		rsStop(0) +
		rsTextStart(1) +
		rsText(1, "Reading both files.") +
		rsStop(1) +
		rsToolStart(2, "call_a", "Read") +
		rsArgs(2, `{"file_path":"/a"}`) +
		rsStop(2) +
		rsToolStart(3, "call_b", "Read") +
		rsArgs(3, `{"file_path":"/b"}`) +
		rsStop(3) +
		rsEnd(`{"stop_reason":"tool_use","stop_sequence":null}`, rsUsage(812, 96, 0, 4096, 40))
	rsEqual(t, got, want)

	body := rsJSON(t, rules, `{"id":"chatcmpl-7","object":"chat.completion","created":1764400000,"model":"deepseek-v4-pro","choices":[{"index":0,"message":{"role":"assistant",`+
		`"content":"Reading both files.","reasoning_content":"Both files are needed.","tool_calls":[`+
		`{"id":"call_a","type":"function","function":{"name":"Read","arguments":"{\"file_path\":\"/a\"}"}},`+
		`{"id":"call_b","type":"function","function":{"name":"Read","arguments":"{\"file_path\":\"/b\"}"}}]},"finish_reason":"tool_calls"}],`+
		`"usage":{"prompt_tokens":4908,"completion_tokens":96,"total_tokens":5004,"prompt_cache_hit_tokens":4096,"prompt_cache_miss_tokens":812,"completion_tokens_details":{"reasoning_tokens":40}}}`)
	wantJSON := `{"id":"msg_ID","type":"message","role":"assistant","model":"claude-opus-5-5","content":[` +
		`{"type":"thinking","thinking":"Both files are needed.","signature":` + rsStr(sealed("deepseek", "Both files are needed.")) + `},` +
		`{"type":"text","text":"Reading both files."},` +
		`{"type":"tool_use","id":"call_a","name":"Read","input":{"file_path":"/a"}},` +
		`{"type":"tool_use","id":"call_b","name":"Read","input":{"file_path":"/b"}}],` +
		`"stop_reason":"tool_use","stop_sequence":null,"usage":` + rsUsage(812, 96, 0, 4096, 40) + `}`
	if body != wantJSON {
		t.Fatalf("JSON:\n%s\nwant:\n%s", body, wantJSON)
	}
	rsSameMessage(t, got, body)
}

// Scenario 12: reasoning and content fragments that interleave give one
// thinking block, then one text block; the reasoning after the text began
// has no block to go in and is dropped, with a decision.
func TestMessagesStreamInterleavedReasoning(t *testing.T) {
	rules := rsRules("deepseek", "")
	upstream := rsChunk(`{"reasoning_content":"First."}`, "null") +
		rsChunk(`{"content":"Hel"}`, "null") +
		rsChunk(`{"reasoning_content":"Second thoughts."}`, "null") +
		rsChunk(`{"content":"lo."}`, "null") +
		rsChunk(`{}`, `"stop"`) +
		rsUsageChunk(`{"prompt_tokens":10,"completion_tokens":5}`) +
		rsDone
	got := rsStream(t, rules, upstream)
	want := rsStart +
		rsThinkingStart(0) + rsThinking(0, "First.") + rsSignature(0, "deepseek", "First.") + rsStop(0) +
		rsTextStart(1) + rsText(1, "Hel") + rsText(1, "lo.") + rsStop(1) +
		rsEnd(`{"stop_reason":"end_turn","stop_sequence":null}`, rsUsage(10, 5, 0, 0, -1))
	rsEqual(t, got, want)

	x := rsExchange(t, rules)
	replay(t, x, upstream)
	if d := strings.Join(rsDecisions(x), "; "); d != "reasoning drop" {
		t.Fatalf("decisions: %s", d)
	}
}

// Scenario 13: parallel calls whose argument deltas interleave (k = 0, 1,
// 0, 1) become two tool_use blocks one after the other, arguments whole:
// the second call's wait until the first call's are a whole object.
func TestMessagesStreamInterleavedCalls(t *testing.T) {
	rules := rsRules("openai_chat", "")
	upstream := rsChunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_0","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":1,"id":"call_1","type":"function","function":{"name":"get_time","arguments":""}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{\"tz\":"}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"\"CET\"}"}}]}`, "null") +
		rsChunk(`{}`, `"tool_calls"`) +
		rsUsageChunk(`{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":0}}`) +
		rsDone
	got := rsStream(t, rules, upstream)
	want := rsStart +
		rsToolStart(0, "call_0", "get_weather") +
		rsArgs(0, `{"city":`) +
		rsArgs(0, `"Paris"}`) +
		rsStop(0) +
		rsToolStart(1, "call_1", "get_time") +
		rsArgs(1, `{"tz":`) +
		rsArgs(1, `"CET"}`) +
		rsStop(1) +
		rsEnd(`{"stop_reason":"tool_use","stop_sequence":null}`, rsUsage(100, 20, 0, 0, -1))
	rsEqual(t, got, want)

	// Only the second call's first piece was held: {\"tz\": as escaped.
	x := rsExchange(t, rules)
	replay(t, x, upstream)
	if b := x.CallBuffers(); len(b) != 2 || b[0] != 0 || b[1] != 8 {
		t.Fatalf("bytes held per call: %v", b)
	}
}

// Calls that come one after another stream live: the second opens as soon
// as its arguments begin, the first's being whole.
func TestMessagesStreamSequentialCallsLive(t *testing.T) {
	rules := rsRules("openai_chat", "")
	upstream := rsChunk(`{"tool_calls":[{"index":0,"id":"call_0","type":"function","function":{"name":"Bash","arguments":""}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":"}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"ls\"}"}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":1,"id":"call_1","type":"function","function":{"name":"Bash","arguments":""}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{\"command\":"}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"\"pwd\"}"}}]}`, "null") +
		rsChunk(`{}`, `"tool_calls"`) + rsDone
	// Where each event is written: the second call opens before the
	// finish arrives.
	x := rsExchange(t, rules)
	s := x.NewStream()
	chunks := strings.SplitAfter(upstream, "\n\n")
	var out strings.Builder
	for i, c := range chunks {
		_ = s.Write([]byte(c))
		out.Write(s.Output())
		if i == 4 && !strings.Contains(rsNorm(out.String()), rsToolStart(1, "call_1", "Bash")+rsArgs(1, `{"command":`)) {
			t.Fatalf("the second call waits:\n%s", out.String())
		}
	}
	_ = s.Close()
	got := rsStream(t, rules, upstream)
	want := rsStart +
		rsToolStart(0, "call_0", "Bash") + rsArgs(0, `{"command":`) + rsArgs(0, `"ls"}`) + rsStop(0) +
		rsToolStart(1, "call_1", "Bash") + rsArgs(1, `{"command":`) + rsArgs(1, `"pwd"}`) + rsStop(1) +
		rsEnd(`{"stop_reason":"tool_use","stop_sequence":null}`, rsNoUsage)
	rsEqual(t, got, want)
}

// Scenario 14: finish_reason tool_calls with no call is end_turn (a
// tool_use stop with no tool block stalls Claude Code); calls with
// finish_reason stop are tool_use.
func TestMessagesStreamToolStopReasons(t *testing.T) {
	rules := rsRules("openai_chat", "")
	t.Run("tool_calls without a call", func(t *testing.T) {
		got := rsStream(t, rules, rsChunk(`{"content":"Done."}`, "null")+rsChunk(`{}`, `"tool_calls"`)+rsDone)
		rsEqual(t, got, rsStart+rsTextStart(0)+rsText(0, "Done.")+rsStop(0)+
			rsEnd(`{"stop_reason":"end_turn","stop_sequence":null}`, rsNoUsage))
		body := rsJSON(t, rules, rsCompletion(`{"role":"assistant","content":"Done."}`, "tool_calls", ""))
		rsSameMessage(t, got, body)
	})
	t.Run("calls with stop", func(t *testing.T) {
		got := rsStream(t, rules, rsChunk(`{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"Read","arguments":"{}"}}]}`, `"stop"`)+rsDone)
		rsEqual(t, got, rsStart+rsToolStart(0, "call_9", "Read")+rsArgs(0, `{}`)+rsStop(0)+
			rsEnd(`{"stop_reason":"tool_use","stop_sequence":null}`, rsNoUsage))
		body := rsJSON(t, rules, rsCompletion(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"function","function":{"name":"Read","arguments":"{}"}}]}`, "stop", ""))
		rsSameMessage(t, got, body)
	})
}

// Scenario 15: length is max_tokens; content_filter is a refusal, with
// stop_details.
func TestMessagesStreamLengthAndRefusal(t *testing.T) {
	rules := rsRules("openai_chat", "")
	for _, c := range []struct{ finish, delta string }{
		{"length", `{"stop_reason":"max_tokens","stop_sequence":null}`},
		{"content_filter", `{"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal"}}`},
		{"sensitive", `{"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal"}}`},
	} {
		t.Run(c.finish, func(t *testing.T) {
			got := rsStream(t, rules, rsChunk(`{"content":"Once upon"}`, "null")+rsChunk(`{}`, `"`+c.finish+`"`)+
				rsUsageChunk(`{"prompt_tokens":7,"completion_tokens":2}`)+rsDone)
			rsEqual(t, got, rsStart+rsTextStart(0)+rsText(0, "Once upon")+rsStop(0)+rsEnd(c.delta, rsUsage(7, 2, 0, 0, -1)))
			body := rsJSON(t, rules, rsCompletion(`{"role":"assistant","content":"Once upon"}`, c.finish, `{"prompt_tokens":7,"completion_tokens":2}`))
			rsSameMessage(t, got, body)
		})
	}
}

// Scenario 16: usage in Anthropic's terms: input without the cached part,
// cache reads and writes, output and thinking tokens; OpenAI's details,
// DeepSeek's prompt_cache_hit_tokens and a cache-write count.
func TestMessagesStreamUsage(t *testing.T) {
	for _, c := range []struct{ name, profile, usage, want string }{
		{"openai details", "openai_chat",
			`{"prompt_tokens":1000,"completion_tokens":50,"total_tokens":1050,"prompt_tokens_details":{"cached_tokens":600},"completion_tokens_details":{"reasoning_tokens":20}}`,
			rsUsage(400, 50, 0, 600, 20)},
		{"deepseek cache hits", "deepseek",
			`{"prompt_tokens":1000,"completion_tokens":50,"prompt_cache_hit_tokens":600,"prompt_cache_miss_tokens":400,"completion_tokens_details":{"reasoning_tokens":20}}`,
			rsUsage(400, 50, 0, 600, 20)},
		{"cache writes", "openai_chat",
			`{"prompt_tokens":1000,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":600,"cache_write_tokens":300}}`,
			rsUsage(100, 50, 300, 600, -1)},
		{"more cached than prompted", "openai_chat",
			`{"prompt_tokens":10,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":600}}`,
			rsUsage(0, 1, 0, 600, -1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			rules := rsRules(c.profile, "")
			got := rsStream(t, rules, rsChunk(`{"content":"ok"}`, "null")+rsChunk(`{}`, `"stop"`)+rsUsageChunk(c.usage)+rsDone)
			rsEqual(t, got, rsStart+rsTextStart(0)+rsText(0, "ok")+rsStop(0)+rsEnd(`{"stop_reason":"end_turn","stop_sequence":null}`, c.want))
			rsSameMessage(t, got, rsJSON(t, rules, rsCompletion(`{"role":"assistant","content":"ok"}`, "stop", c.usage)))
		})
	}
}

// Scenario 17: a stream cut mid-text, without a finish_reason, closes the
// text block and ends with an error event: no message_delta, no
// message_stop, no end_turn made up.
func TestMessagesStreamCutShort(t *testing.T) {
	rules := rsRules("deepseek", "")
	t.Run("EOF mid-text", func(t *testing.T) {
		got := rsStream(t, rules, rsChunk(`{"content":"The answer is"}`, "null"))
		rsEqual(t, got, rsStart+rsTextStart(0)+rsText(0, "The answer is")+rsStop(0)+
			rsError("api_error", "the upstream's stream ended before the answer was finished"))
		x := rsExchange(t, rules)
		replay(t, x, rsChunk(`{"content":"The answer is"}`, "null"))
		if x.StreamError() != "server_error" {
			t.Fatalf("stream error %q", x.StreamError())
		}
	})
	t.Run("[DONE] mid-thinking", func(t *testing.T) {
		got := rsStream(t, rules, rsChunk(`{"reasoning_content":"Hmm"}`, "null")+rsDone)
		// The cut reasoning's signature is the cut mark: never replayed.
		rsEqual(t, got, rsStart+rsThinkingStart(0)+rsThinking(0, "Hmm")+
			rsDelta(0, "signature_delta", "signature", cutSignature("deepseek"))+rsStop(0)+
			rsError("api_error", "the upstream's stream ended before the answer was finished"))
	})
	t.Run("EOF mid-call", func(t *testing.T) {
		got := rsStream(t, rules, rsChunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"Write","arguments":"{\"file_"}}]}`, "null")+
			`data: {"id":"chatcmpl-7","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"path\":"}}]}`)
		// The call's block is not stopped: a client may run a tool_use
		// once its block stops, and this input never completed.
		rsEqual(t, got, rsStart+rsToolStart(0, "call_1", "Write")+rsArgs(0, `{"file_`)+
			rsError("api_error", "the upstream's stream ended before the answer was finished"))
	})
	t.Run("an upstream error chunk", func(t *testing.T) {
		got := rsStream(t, rules, rsChunk(`{"content":"Partial"}`, "null")+
			`data: {"error":{"message":"Upstream overloaded, please retry","type":"server_error","code":"server_overloaded"}}`+"\n\n"+
			rsChunk(`{"content":" more"}`, "null")+rsDone)
		rsEqual(t, got, rsStart+rsTextStart(0)+rsText(0, "Partial")+rsStop(0)+
			rsError("overloaded_error", "Upstream overloaded, please retry"))
	})
	t.Run("finish_reason error", func(t *testing.T) {
		got := rsStream(t, rules, rsChunk(`{"content":"Partial"}`, "null")+rsChunk(`{}`, `"insufficient_system_resource"`)+rsDone)
		rsEqual(t, got, rsStart+rsTextStart(0)+rsText(0, "Partial")+rsStop(0)+
			rsError("api_error", "the upstream ended the answer with finish_reason insufficient_system_resource"))
	})
}

// Scenario 19: a <think> head cut anywhere between chunks is a thinking
// block; no tag text reaches the client, nor the white space after it.
func TestMessagesStreamThinkTags(t *testing.T) {
	rules := rsRules("minimax", "")
	upstream := rsChunk(`{"content":"\n<thi"}`, "null") +
		rsChunk(`{"content":"nk>Plan: "}`, "null") +
		rsChunk(`{"content":"greet.</th"}`, "null") +
		rsChunk(`{"content":"ink>\n\n"}`, "null") +
		rsChunk(`{"content":"Hi <b>there</b>."}`, "null") +
		rsChunk(`{}`, `"stop"`) + rsDone
	got := rsStream(t, rules, upstream)
	want := rsStart +
		rsThinkingStart(0) + rsThinking(0, "Plan: ") + rsThinking(0, "greet.") + rsSignature(0, "minimax", "Plan: greet.") + rsStop(0) +
		rsTextStart(1) + rsText(1, "Hi <b>there</b>.") + rsStop(1) +
		rsEnd(`{"stop_reason":"end_turn","stop_sequence":null}`, rsNoUsage)
	rsEqual(t, got, want)
	rsSameMessage(t, got, rsJSON(t, rules, rsCompletion(`{"role":"assistant","content":"\n<think>Plan: greet.</think>\n\nHi <b>there</b>."}`, "stop", "")))

	t.Run("escaped tags", func(t *testing.T) {
		got := rsStream(t, rules, rsChunk(`{"content":"\u003cthink\u003eA\u003c/think\u003eB"}`, `"stop"`)+rsDone)
		rsEqual(t, got, rsStart+rsThinkingStart(0)+rsThinking(0, "A")+rsSignature(0, "minimax", "A")+rsStop(0)+
			rsTextStart(1)+rsText(1, "B")+rsStop(1)+rsEnd(`{"stop_reason":"end_turn","stop_sequence":null}`, rsNoUsage))
	})
	t.Run("a tag that is not at the head is text", func(t *testing.T) {
		got := rsStream(t, rules, rsChunk(`{"content":"<thin"}`, "null")+rsChunk(`{"content":"g> is a tag"}`, `"stop"`)+rsDone)
		rsEqual(t, got, rsStart+rsTextStart(0)+rsText(0, "<thing> is a tag")+rsStop(0)+
			rsEnd(`{"stop_reason":"end_turn","stop_sequence":null}`, rsNoUsage))
	})
	t.Run("white space before a call leads nothing", func(t *testing.T) {
		got := rsStream(t, rules, rsChunk(`{"content":"\n\n"}`, "null")+
			rsChunk(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"Read","arguments":"{}"}}]}`, `"tool_calls"`)+rsDone)
		rsEqual(t, got, rsStart+rsToolStart(0, "c1", "Read")+rsArgs(0, "{}")+rsStop(0)+
			rsEnd(`{"stop_reason":"tool_use","stop_sequence":null}`, rsNoUsage))
		rsSameMessage(t, got, rsJSON(t, rules, rsCompletion(`{"role":"assistant","content":"\n\n","tool_calls":[{"id":"c1","type":"function","function":{"name":"Read","arguments":"{}"}}]}`, "tool_calls", "")))
	})
}

// rsCompletion is a Chat completion whose first choice is message, with
// finish and usage (none when "").
func rsCompletion(message, finish, usage string) string {
	s := `{"id":"chatcmpl-7","object":"chat.completion","created":1764400000,"model":"deepseek-v4-pro","choices":[{"index":0,"message":` + message + `,"finish_reason":"` + finish + `"}]`
	if usage != "" {
		s += `,"usage":` + usage
	}
	return s + "}"
}
