package integration

// messages_to_chat on every provider profile, each against its own strict
// mock (internal/fakeprovider): a three-request tool loop (tools → two
// parallel calls → their results and the thinking block whose signature
// came back → one call → its result → the answer), every request sent
// streamed and not. The upstream must accept every request and get the
// earlier reasoning as the profile wants it (DeepSeek, Kimi, GLM and
// MiniMax: back, exactly; Qwen: never), Kimi's call ids byte for byte;
// and the official SDK's accumulators must turn each stream into the JSON
// answer to the same request. Then §14 scenario 19 on MiniMax: <think> in
// content, cut anywhere.

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
	"github.com/llmtransform/caddy-llm-transform/internal/reasonenv"
)

// mpReasoning is what the upstream thinks on each turn: quotes, a
// backslash, a tab, newlines and CJK, to come back byte for byte.
var mpReasoning = []string{
	"Two things at once: write \"a.txt\" and list the folder \\ 日本語.\nBoth calls now.",
	"Written and listed.\n\tNow the Edit.",
	"Edited. Answer briefly, 中文 ok.",
}

const mpAnswer = "Done: a.txt written, listed and edited."

// mpTurns is the upstream's side of the loop.
func mpTurns(t *testing.T) []fakeprovider.Turn {
	return []fakeprovider.Turn{
		{Reasoning: mpReasoning[0], Text: "I'll write the file and list the folder.", Calls: []fakeprovider.Call{
			{Name: "Write", Arguments: jsonArgs(t, map[string]any{"file_path": "/w/a.txt", "content": "He said \"hi\"\n\\o/ 🚀\n"})},
			{Name: "Bash", Arguments: jsonArgs(t, map[string]any{"command": "ls /w", "description": "List"})},
		}},
		{Reasoning: mpReasoning[1], Calls: []fakeprovider.Call{
			{Name: "Edit", Arguments: jsonArgs(t, map[string]any{"file_path": "/w/a.txt", "old_string": "hi", "new_string": "hello"})},
		}},
		{Reasoning: mpReasoning[2], Text: mpAnswer},
	}
}

// mpMock is what the tests need of a mock: its handler and its log.
type mpMock interface {
	http.Handler
	Log() []fakeprovider.ChatRequest
}

// mpProfile is one profile's run: the mock, the upstream model, and the
// check of what the upstream got for request k (streamed and not).
type mpProfile struct {
	profile, model string
	mock           mpMock
	check          func(t *testing.T, k int, stream, whole gjson.Result)
}

// mpRules are the gateway's rules for profile: the bridge, the model
// routed to the upstream's, the tools fitted to the profile.
func mpRules(profile, model string) string {
	return "\t\trule messages_to_chat {\n\t\t\tprofile " + profile + "\n\t\t}\n" +
		"\t\trule field_set {\n\t\t\tmodels claude-*\n\t\t\tpath model\n\t\t\tvalue " + model + "\n\t\t}\n" +
		"\t\trule tools_plan {\n\t\t\tprofile " + profile + "\n\t\t}"
}

// mpRequest is a Claude-Code-like Messages request over messages.
func mpRequest(t *testing.T, messages []any, stream bool) string {
	t.Helper()
	var req map[string]any
	if err := json.Unmarshal([]byte(bridgeMessagesRequest), &req); err != nil {
		t.Fatal(err)
	}
	req["messages"] = messages
	req["stream"] = stream
	return jsonArgs(t, req)
}

// mpToolCalls returns the tool-call assistant messages of an upstream
// request.
func mpToolCalls(req gjson.Result) []gjson.Result {
	var out []gjson.Result
	for _, m := range req.Get("messages").Array() {
		if m.Get("role").String() == "assistant" && len(m.Get("tool_calls").Array()) > 0 {
			out = append(out, m)
		}
	}
	return out
}

// mpReplayed checks that the k tool-call messages carry the reasoning of
// their turns, read by get.
func mpReplayed(t *testing.T, k int, req gjson.Result, get func(gjson.Result) (string, bool)) {
	t.Helper()
	calls := mpToolCalls(req)
	if len(calls) != k {
		t.Fatalf("request %d: %d tool-call messages upstream, want %d: %s", k, len(calls), k, req.Get("messages").Raw)
	}
	for i, m := range calls {
		if r, ok := get(m); !ok || r != mpReasoning[i] {
			t.Errorf("request %d: tool-call message %d gives back reasoning %q (%v), want %q", k, i, r, ok, mpReasoning[i])
		}
	}
}

func reasoningContent(m gjson.Result) (string, bool) {
	rc := m.Get("reasoning_content")
	return rc.String(), rc.Type == gjson.String
}

// mpProfiles are the five profiles and their mocks.
func mpProfiles(t *testing.T) []mpProfile {
	script := func() fakeprovider.ChatScript {
		return fakeprovider.ChatScript{Turns: mpTurns(t), ExactReasoning: true}
	}
	both := func(f func(t *testing.T, k int, req gjson.Result)) func(t *testing.T, k int, stream, whole gjson.Result) {
		return func(t *testing.T, k int, stream, whole gjson.Result) {
			f(t, k, stream)
			f(t, k, whole)
		}
	}
	replay := both(func(t *testing.T, k int, req gjson.Result) { mpReplayed(t, k, req, reasoningContent) })
	return []mpProfile{
		{profile: "deepseek", model: "deepseek-v4-pro", mock: &fakeprovider.DeepSeekChat{Turns: mpTurns(t), ExactReasoning: true}, check: replay},
		{profile: "kimi", model: "kimi-k2.6", mock: &fakeprovider.KimiChat{ChatScript: script()}, check: both(func(t *testing.T, k int, req gjson.Result) {
			mpReplayed(t, k, req, reasoningContent)
			// Kimi's ids, verbatim, in the calls and the tool messages.
			want := []string{"functions.Write:0", "functions.Bash:1", "functions.Edit:2"}
			var ids, answered []string
			for _, m := range req.Get("messages").Array() {
				for _, tc := range m.Get("tool_calls").Array() {
					ids = append(ids, tc.Get("id").String())
				}
				if m.Get("role").String() == "tool" {
					answered = append(answered, m.Get("tool_call_id").String())
				}
			}
			n := map[int]int{0: 0, 1: 2, 2: 3}[k]
			if !slices.Equal(ids, want[:n]) || !slices.Equal(answered, want[:n]) {
				t.Errorf("request %d: call ids %q, tool messages answer %q, want %q", k, ids, answered, want[:n])
			}
		})},
		{profile: "glm", model: "glm-4.6", mock: &fakeprovider.GLMChat{ChatScript: script()}, check: both(func(t *testing.T, k int, req gjson.Result) {
			if !fakeprovider.GLMPreserved(req) {
				t.Errorf("request %d: thinking %s, want preserved thinking (clear_thinking false)", k, req.Get("thinking").Raw)
			}
			mpReplayed(t, k, req, reasoningContent)
		})},
		{profile: "qwen", model: "qwen3-max", mock: &fakeprovider.QwenChat{ChatScript: script()}, check: func(t *testing.T, k int, stream, whole gjson.Result) {
			// Thinking on the stream only; reasoning never goes back.
			if !fakeprovider.QwenThinks(stream) || fakeprovider.QwenThinks(whole) {
				t.Errorf("request %d: enable_thinking %s streamed, %s not, want true and false", k, stream.Get("enable_thinking").Raw, whole.Get("enable_thinking").Raw)
			}
			for _, req := range []gjson.Result{stream, whole} {
				if len(mpToolCalls(req)) != k || strings.Contains(req.Get("messages").Raw, "reasoning_content") {
					t.Errorf("request %d: messages %s, want %d tool-call messages and no reasoning (strip)", k, req.Get("messages").Raw, k)
				}
			}
		}},
		{profile: "minimax", model: "MiniMax-M2.5", mock: &fakeprovider.MiniMaxChat{ChatScript: script()}, check: both(func(t *testing.T, k int, req gjson.Result) {
			if !req.Get("reasoning_split").Bool() {
				t.Errorf("request %d: reasoning_split %s, want true", k, req.Get("reasoning_split").Raw)
			}
			mpReplayed(t, k, req, fakeprovider.MiniMaxReasoning)
		})},
	}
}

// mpReport lists what the upstream received, for failures.
func mpReport(m mpMock) string {
	var b strings.Builder
	for i, r := range m.Log() {
		b.WriteString("upstream request " + strconv.Itoa(i+1) + ": " + r.String())
	}
	return b.String()
}

// mpTurn sends messages streamed, then not, and returns the stream and
// the JSON answer, after checking the upstream answered both from
// scripted turn k.
func mpTurn(t *testing.T, m mpMock, k int, messages []any) (stream, whole []byte, up [2]gjson.Result) {
	t.Helper()
	status, ctype, stream := postMessages(t, mpRequest(t, messages, true))
	if status != http.StatusOK || !strings.HasPrefix(ctype, "text/event-stream") {
		t.Fatalf("request %d streamed: %d %s\n%s\n%s", k, status, ctype, stream, mpReport(m))
	}
	status, ctype, whole = postMessages(t, mpRequest(t, messages, false))
	if status != http.StatusOK || !strings.HasPrefix(ctype, "application/json") {
		t.Fatalf("request %d: %d %s\n%s\n%s", k, status, ctype, whole, mpReport(m))
	}
	log := m.Log()
	for i, r := range log[len(log)-2:] {
		if r.Status != http.StatusOK || r.Turn != k {
			t.Fatalf("request %d reached the upstream as %s\n%s", k, r, mpReport(m))
		}
		up[i] = gjson.ParseBytes(r.Body)
	}
	return stream, whole, up
}

// mpWantThinking checks the JSON answer's thinking block: the turn's
// reasoning, sealed for profile.
func mpWantThinking(t *testing.T, profile string, k int, msg gjson.Result) {
	t.Helper()
	want := `{"type":"thinking","thinking":` + msQuote(mpReasoning[k]) + `,"signature":` + msQuote(reasonenv.SealText(profile, []byte(mpReasoning[k]))) + `}`
	if got := msg.Get("content.0"); !sameJSON(t, []byte(got.Raw), []byte(want)) {
		t.Errorf("request %d: the answer's first block %s, want %s", k, got.Raw, want)
	}
}

// TestMessagesProfiles runs the tool loop on each profile against its
// strict mock.
func TestMessagesProfiles(t *testing.T) {
	anthropicSDKNode(t)
	for _, p := range mpProfiles(t) {
		t.Run(p.profile, func(t *testing.T) {
			addr := serveUpstream(t, p.mock)
			startGateway(t, mpRules(p.profile, p.model), addr)
			messages := []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": claudeCodePrompt}}}}
			turns := mpTurns(t)
			for k := range turns {
				stream, whole, up := mpTurn(t, p.mock, k, messages)
				p.check(t, k, up[0], up[1])
				msg := gjson.ParseBytes(whole)

				// The JSON answer is the turn: thinking, text, calls.
				var names []string
				for _, b := range msg.Get("content").Array() {
					if b.Get("type").String() == "tool_use" {
						names = append(names, b.Get("name").String())
					}
				}
				var wantNames []string
				for _, c := range turns[k].Calls {
					wantNames = append(wantNames, c.Name)
				}
				if !slices.Equal(names, wantNames) || msg.Get("model").String() != claudeCodeModel {
					t.Errorf("request %d: calls %q model %s, want %q %s\n%s", k, names, msg.Get("model").String(), wantNames, claudeCodeModel, whole)
				}
				if p.profile == "kimi" {
					ids := msg.Get("content.#(type==\"tool_use\")#.id").Raw
					want := map[int]string{0: `["functions.Write:0","functions.Bash:1"]`, 1: `["functions.Edit:2"]`, 2: `[]`}[k]
					if !sameJSON(t, []byte(ids), []byte(want)) {
						t.Errorf("request %d: tool_use ids %s, want Kimi's %s", k, ids, want)
					}
				}

				want := whole
				if p.profile == "qwen" {
					// By design: DashScope thinks on streams only, so the
					// non-streaming request asks no thinking, and its
					// answer has no thinking block and counts no thinking
					// tokens. The stream's message must be that answer
					// with the turn's thinking block first (sealed for
					// qwen) and the thinking tokens counted.
					if msg.Get(`content.#(type=="thinking")`).Exists() {
						t.Errorf("request %d: the non-streaming answer thinks: %s", k, whole)
					}
					want = mpQwenWant(t, k, whole, turns[k])
				} else {
					mpWantThinking(t, p.profile, k, msg)
				}
				anthropicSDKCheck(t, stream, want, "id")

				// Next: the streamed answer as history (what Claude Code
				// keeps), each call answered.
				final, _ := anthropicSDKFinal(t, stream)
				var content []any
				if err := json.Unmarshal([]byte(gjson.GetBytes(final, "content").Raw), &content); err != nil {
					t.Fatal(err)
				}
				var results []any
				for _, b := range gjson.GetBytes(final, "content").Array() {
					if b.Get("type").String() == "tool_use" {
						results = append(results, map[string]any{"type": "tool_result", "tool_use_id": b.Get("id").String(), "content": "ok: " + b.Get("name").String()})
					}
				}
				if k < len(turns)-1 {
					messages = append(messages, map[string]any{"role": "assistant", "content": content}, map[string]any{"role": "user", "content": results})
				} else if got := msg.Get("content.#(type==\"text\").text").String(); got != mpAnswer || msg.Get("stop_reason").String() != "end_turn" {
					t.Errorf("the last answer %s, want %q", whole, mpAnswer)
				}
			}
		})
	}
	t.Run("minimax 19 think in content", mpThinkInContent)
}

// mpQwenWant is the JSON answer to a non-streaming Qwen request as the
// stream's message must read: the turn's thinking block first, sealed for
// qwen, and output tokens that count the reasoning (the mock counts
// (bytes+3)/4 of reasoning, content and arguments).
func mpQwenWant(t *testing.T, k int, whole []byte, turn fakeprovider.Turn) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(whole, &m); err != nil {
		t.Fatal(err)
	}
	block := map[string]any{"type": "thinking", "thinking": mpReasoning[k], "signature": reasonenv.SealText("qwen", []byte(mpReasoning[k]))}
	m["content"] = append([]any{block}, m["content"].([]any)...)
	args := 0
	for _, c := range turn.Calls {
		args += len(c.Arguments)
	}
	u := m["usage"].(map[string]any)
	u["output_tokens"] = fakeprovider.PromptTokens(len(turn.Reasoning) + len(turn.Text) + args)
	u["output_tokens_details"] = map[string]any{"thinking_tokens": fakeprovider.PromptTokens(len(turn.Reasoning))}
	b, _ := json.Marshal(m)
	return b
}

// mpThinkInContent is §14 scenario 19 on MiniMax: the upstream puts its
// reasoning in content as <think>…</think> (even with reasoning_split),
// streamed in pieces of 1 and 5 bytes, so the tags are cut anywhere. The
// answer has a thinking block with the reasoning and a text block
// without a tag; the stream equals the JSON answer in the SDK; and the
// next request gives the reasoning back.
func mpThinkInContent(t *testing.T) {
	for _, piece := range []int{1, 5} {
		t.Run("piece "+strconv.Itoa(piece), func(t *testing.T) {
			up := &fakeprovider.MiniMaxChat{ChatScript: fakeprovider.ChatScript{Turns: mpTurns(t), ContentPiece: piece}, InlineThink: true}
			addr := serveUpstream(t, up)
			startGateway(t, mpRules("minimax", "MiniMax-M2.5"), addr)
			messages := []any{map[string]any{"role": "user", "content": claudeCodePrompt}}
			stream, whole, _ := mpTurn(t, up, 0, messages)
			if strings.Contains(string(stream), "think>") || strings.Contains(string(stream), "<th") {
				t.Errorf("tag text leaked into the stream:\n%s", stream)
			}
			msg := gjson.ParseBytes(whole)
			thinking := msg.Get("content.0.thinking").String()
			if msg.Get("content.0.type").String() != "thinking" || strings.TrimSpace(thinking) != mpReasoning[0] ||
				msg.Get("content.1.type").String() != "text" || msg.Get("content.1.text").String() != mpTurns(t)[0].Text {
				t.Errorf("the answer %s, want a thinking block with %q and the text without tags", whole, mpReasoning[0])
			}
			if thinking != mpReasoning[0] {
				t.Logf("the thinking block keeps the white space inside the tags: %q", thinking)
			}
			anthropicSDKCheck(t, stream, whole, "id")

			var content []any
			if err := json.Unmarshal([]byte(msg.Get("content").Raw), &content); err != nil {
				t.Fatal(err)
			}
			var results []any
			for _, b := range msg.Get("content").Array() {
				if b.Get("type").String() == "tool_use" {
					results = append(results, map[string]any{"type": "tool_result", "tool_use_id": b.Get("id").String(), "content": "ok"})
				}
			}
			messages = append(messages, map[string]any{"role": "assistant", "content": content}, map[string]any{"role": "user", "content": results})
			_, _, next := mpTurn(t, up, 1, messages)
			for _, req := range next {
				calls := mpToolCalls(req)
				if r, ok := fakeprovider.MiniMaxReasoning(calls[0]); len(calls) != 1 || !ok || strings.TrimSpace(r) != mpReasoning[0] {
					t.Errorf("the next request gives back %q (%v), want %q", r, ok, mpReasoning[0])
				}
			}
		})
	}
}
