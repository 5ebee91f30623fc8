package messagesbridge

import (
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/internal/reasonenv"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// Building blocks of the conversations below.
const (
	rqUserList   = `{"role":"user","content":"list the files"}`
	rqChatList   = `{"role":"user","content":"list the files"}`
	rqAnthropic  = "ErUBCkgIAhABGAIiQKnownAnthropicSignatureBytes"
	rqMax        = `,"max_tokens":1000`
	rqDeepSeek   = `{"profile":"deepseek"}`
	rqBashTool   = `{"name":"Bash","description":"Run a command","input_schema":{"type":"object","properties":{"cmd":{"type":"string"}}},"cache_control":{"type":"ephemeral"}}`
	rqBashChat   = `{"type":"function","function":{"name":"Bash","description":"Run a command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}}}`
	rqResultsTwo = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"a.txt\nb.txt"},` +
		`{"type":"tool_result","tool_use_id":"toolu_b","content":[{"type":"text","text":"/work"}]},{"type":"text","text":"thanks"}]}`
	rqToolsTwo = `{"role":"tool","tool_call_id":"toolu_a","content":"a.txt\nb.txt"},{"role":"tool","tool_call_id":"toolu_b","content":"/work"},{"role":"user","content":"thanks"}`
)

// rqThinkingTurn is an assistant turn of Claude Code: thinking, text and
// two calls.
func rqThinkingTurn(thinking, signature string) string {
	return `{"role":"assistant","content":[{"type":"thinking","thinking":` + transformtest.JSONString(thinking) + `,"signature":"` + signature + `"},` +
		`{"type":"text","text":"Listing."},{"type":"tool_use","id":"toolu_a","name":"Bash","input":{"cmd": "ls"}},` +
		`{"type":"tool_use","id":"toolu_b","name":"Bash","input":{ "cmd" : "pwd" , "n" : [1, 2] }}]}`
}

// rqCallsTurn is the Chat assistant message of rqThinkingTurn.
func rqCallsTurn(reasoning string) string {
	r := ""
	if reasoning != "-" {
		r = `,"reasoning_content":` + transformtest.JSONString(reasoning)
	}
	return `{"role":"assistant","content":"Listing."` + r + `,"tool_calls":[` +
		`{"id":"toolu_a","type":"function","function":{"name":"Bash","arguments":"{\"cmd\":\"ls\"}"}},` +
		`{"id":"toolu_b","type":"function","function":{"name":"Bash","arguments":"{\"cmd\":\"pwd\",\"n\":[1,2]}"}}]}`
}

// TestMessagesToChatScenarios holds the request scenarios of
// anthropic-messages-bridge.md §14 (2–4, 6, 8–10) and the mapping rules of
// §4; 5 and 8 per profile are in request_rich_test.go.
func TestMessagesToChatScenarios(t *testing.T) {
	sealed := reasonenv.SealText("deepseek", []byte("I should run \"ls\" and pwd.\nThen answer."))
	tests := []struct {
		name, config, body, want string
		decisions                []string
	}{
		{
			name:   "2: the tool loop: reasoning from the envelope, text kept, both calls, tool messages first, then the user's text",
			config: rqDeepSeek,
			body:   rqBody("", rqUserList, rqThinkingTurn("I should run \"ls\" and pwd.\nThen answer.", sealed), rqResultsTwo),
			want:   rqChat(rqMax, rqChatList, rqCallsTurn("I should run \"ls\" and pwd.\nThen answer."), rqToolsTwo),
		},
		{
			name:   "3: thinking text cleared by context management: the signature still brings the reasoning back",
			config: rqDeepSeek,
			body:   rqBody("", rqUserList, rqThinkingTurn("", sealed), rqResultsTwo),
			want:   rqChat(rqMax, rqChatList, rqCallsTurn("I should run \"ls\" and pwd.\nThen answer."), rqToolsTwo),
		},
		{
			name:   "4: an Anthropic signature (model switch) is never sent: the block's own text stands in",
			config: rqDeepSeek,
			body:   rqBody("", rqUserList, rqThinkingTurn("Claude's summary", rqAnthropic), rqResultsTwo),
			want:   rqChat(rqMax, rqChatList, rqCallsTurn("Claude's summary"), rqToolsTwo),
		},
		{
			name:   "4: an Anthropic signature with its text cleared: an empty reasoning_content, so DeepSeek does not refuse the turn",
			config: rqDeepSeek,
			body:   rqBody("", rqUserList, rqThinkingTurn("", rqAnthropic), rqResultsTwo),
			want:   rqChat(rqMax, rqChatList, rqCallsTurn(""), rqToolsTwo),
		},
		{
			name:      "4: another provider's envelope is dropped, with a decision",
			config:    rqDeepSeek,
			body:      rqBody("", rqUserList, rqThinkingTurn("kimi's thoughts", reasonenv.SealText("kimi", []byte("kimi's thoughts"))), rqResultsTwo),
			want:      rqChat(rqMax, rqChatList, rqCallsTurn(""), rqToolsTwo),
			decisions: []string{"messages[1].content[0] drop"},
		},
		{
			name:      "4: an envelope that does not open is dropped, with a decision",
			config:    rqDeepSeek,
			body:      rqBody("", rqUserList, rqThinkingTurn("", reasonenv.Prefix+"!!not-base64"), rqResultsTwo),
			want:      rqChat(rqMax, rqChatList, rqCallsTurn(""), rqToolsTwo),
			decisions: []string{"messages[1].content[0] drop"},
		},
		{
			name:   "kimi: reasoning only on tool-call turns",
			config: `{"profile":"kimi"}`,
			body: rqBody("", rqUserList, `{"role":"assistant","content":[{"type":"thinking","thinking":"T1","signature":"`+reasonenv.SealText("kimi", []byte("T1"))+`"},{"type":"text","text":"Sure."}]}`,
				`{"role":"user","content":"go"}`, rqThinkingTurn("", reasonenv.SealText("kimi", []byte("T2"))), rqResultsTwo),
			want: `{"model":"deepseek-v4-pro","messages":[` + rqChatList + `,{"role":"assistant","content":"Sure."},{"role":"user","content":"go"},` +
				rqCallsTurn("T2") + `,` + rqToolsTwo + `],"max_tokens":1000}`,
		},
		{
			name:   "strip: no reasoning_content at all",
			config: `{"profile":"deepseek","reasoning":"strip"}`,
			body:   rqBody("", rqUserList, rqThinkingTurn("x", sealed), rqResultsTwo),
			want:   rqChat(rqMax, rqChatList, rqCallsTurn("-"), rqToolsTwo),
		},
		{
			name:   "replay: text turns carry their reasoning; several thinking blocks join with a newline; redacted thinking goes",
			config: rqDeepSeek,
			body: rqBody("", rqUserList, `{"role":"assistant","content":[{"type":"thinking","thinking":"A","signature":"`+reasonenv.SealText("deepseek", []byte("A"))+`"},`+
				`{"type":"redacted_thinking","data":"opaque"},{"type":"thinking","thinking":"B","signature":""},{"type":"text","text":"Done."}]}`),
			want:      rqChat(rqMax, rqChatList, `{"role":"assistant","content":"Done.","reasoning_content":"A\nB"}`),
			decisions: []string{"messages[1].content[1] drop"},
		},
		// 5 is per profile, with and without vision: request_rich_test.go.
		{
			name:      "6: any with disable_parallel_tool_use, thinking off: required and parallel_tool_calls false",
			config:    rqDeepSeek,
			body:      rqBody(`,"thinking":{"type":"disabled"},"tools":[`+rqBashTool+`],"tool_choice":{"type":"any","disable_parallel_tool_use":true}`, rqUserList),
			want:      rqChat(`,"tools":[`+rqBashChat+`],"tool_choice":"required","parallel_tool_calls":false`+rqMax+`,"thinking":{"type":"disabled"}`, rqChatList),
			decisions: []string{"cache_control drop"},
		},
		{
			// DeepSeek refuses "required" in thinking mode, and V4 is
			// in it unless the request switches it off.
			name:      "6: DeepSeek V4 thinks unless switched off: any without thinking is auto",
			config:    rqDeepSeek,
			body:      rqBody(`,"tools":[`+rqBashTool+`],"tool_choice":{"type":"any"}`, rqUserList),
			want:      rqChat(`,"tools":[`+rqBashChat+`],"tool_choice":"auto"`+rqMax, rqChatList),
			decisions: []string{"tool_choice degrade", "cache_control drop"},
		},
		{
			name:      "6: a choice of the dropped web_search server tool: auto, the tool removed",
			config:    rqDeepSeek,
			body:      rqBody(`,"tools":[`+rqBashTool+`,{"type":"web_search_20250305","name":"web_search","max_uses":8}],"tool_choice":{"type":"tool","name":"web_search"}`, rqUserList),
			want:      rqChat(`,"tools":[`+rqBashChat+`],"tool_choice":"auto"`+rqMax, rqChatList),
			decisions: []string{"web_search drop", "tool_choice degrade", "cache_control drop"},
		},
		{
			name:      "6: only server tools: no tools and no tool_choice",
			config:    rqDeepSeek,
			body:      rqBody(`,"tools":[{"type":"web_search_20250305","name":"web_search"},{"type":"code_execution_20250825","name":"code_execution"}],"tool_choice":{"type":"tool","name":"web_search"}`, rqUserList),
			want:      rqChat(rqMax, rqChatList),
			decisions: []string{"web_search drop", "code_execution drop", "tool_choice degrade", "tool_choice drop"},
		},
		{
			name:   "6: a named choice and none pass; strict is kept",
			config: "",
			body:   rqBody(`,"tools":[{"name":"Read","input_schema":{"type":"object"},"strict":true,"eager_input_streaming":true,"input_examples":[{}]}],"tool_choice":{"type":"tool","name":"Read"}`, rqUserList),
			want: `{"model":"deepseek-v4-pro","messages":[` + rqChatList + `],"tools":[{"type":"function","function":{"name":"Read","parameters":{"type":"object"},"strict":true}}],` +
				`"tool_choice":{"type":"function","function":{"name":"Read"}},"max_completion_tokens":1000}`,
		},
		{
			name:      "6: DeepSeek while thinking takes no forced choice: auto",
			config:    rqDeepSeek,
			body:      rqBody(`,"thinking":{"type":"enabled","budget_tokens":2048},"tools":[`+rqBashTool+`],"tool_choice":{"type":"tool","name":"Bash"}`, rqUserList),
			want:      rqChat(`,"tools":[`+rqBashChat+`],"tool_choice":"auto"`+rqMax+`,"thinking":{"type":"enabled"},"reasoning_effort":"high"`, rqChatList),
			decisions: []string{"tool_choice degrade", "cache_control drop"},
		},
		{
			name:   "6: GLM takes auto only: none sends no tools",
			config: `{"profile":"glm"}`,
			body:   rqBody(`,"tools":[`+rqBashTool+`],"tool_choice":{"type":"none"}`, rqUserList),
			// GLM's knob asks for preserved thinking even with no effort.
			want:      rqChat(rqMax+`,"thinking":{"type":"enabled","clear_thinking":false}`, rqChatList),
			decisions: []string{"tool_choice degrade", "cache_control drop"},
		},
		{
			name:   "8: deferred tools: only the ones a tool_reference loaded are sent; the reference reads as text",
			config: rqDeepSeek,
			body: rqBody(`,"tools":[{"name":"ToolSearch","input_schema":{"type":"object"}},{"name":"Cron","defer_loading":true,"input_schema":{"type":"object","properties":{"at":{"type":"string"}}}},`+
				`{"name":"DeferredToolPlaceholder","defer_loading":true,"input_schema":{}}]`, rqUserList,
				`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_q","name":"ToolSearch","input":{"query":"cron"}}]}`,
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_q","content":[{"type":"tool_reference","tool_name":"Cron"}]}]}`),
			want: rqChat(`,"tools":[{"type":"function","function":{"name":"ToolSearch","parameters":{"type":"object"}}},{"type":"function","function":{"name":"Cron","parameters":{"type":"object","properties":{"at":{"type":"string"}}}}}]`+rqMax,
				rqChatList, `{"role":"assistant","content":"","reasoning_content":"","tool_calls":[{"id":"toolu_q","type":"function","function":{"name":"ToolSearch","arguments":"{\"query\":\"cron\"}"}}]}`,
				`{"role":"tool","tool_call_id":"toolu_q","content":"Tool Cron is now available."}`),
			decisions: []string{"DeferredToolPlaceholder defer"},
		},
		{
			name:   "9: a system message after a tool-result turn: a marked user message after the tool messages",
			config: rqDeepSeek,
			body: rqBody("", rqUserList, `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"Bash","input":{"cmd":"ls"}}]}`,
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"a.txt"}]}`, `{"role":"system","content":"Today is Monday."}`),
			want: rqChat(rqMax, rqChatList, `{"role":"assistant","content":"","reasoning_content":"","tool_calls":[{"id":"toolu_a","type":"function","function":{"name":"Bash","arguments":"{\"cmd\":\"ls\"}"}}]}`,
				`{"role":"tool","tool_call_id":"toolu_a","content":"a.txt"}`, `{"role":"user","content":"<system>\nToday is Monday.\n</system>"}`),
		},
		{
			name:   "9: a system message between a call and its result waits for the tool messages; mid_conv_system blocks trail their message",
			config: rqDeepSeek,
			body: rqBody("", rqUserList, `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"Bash","input":{"cmd":"ls"}}]}`,
				`{"role":"system","content":[{"type":"text","text":"Env changed."}]}`,
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"a.txt"},{"type":"text","text":"and?"},{"type":"mid_conv_system","content":[{"type":"text","text":"Be terse."}]}]}`),
			want: rqChat(rqMax, rqChatList, `{"role":"assistant","content":"","reasoning_content":"","tool_calls":[{"id":"toolu_a","type":"function","function":{"name":"Bash","arguments":"{\"cmd\":\"ls\"}"}}]}`,
				`{"role":"tool","tool_call_id":"toolu_a","content":"a.txt"}`, `{"role":"user","content":"<system>\nEnv changed.\n</system>"}`,
				`{"role":"user","content":"and?"}`, `{"role":"user","content":"<system>\nBe terse.\n</system>"}`),
		},
		{
			name:   "9: system_messages system: a system message in place; leading ones join the first",
			config: `{"profile":"deepseek","system_messages":"system"}`,
			body: rqBody(`,"system":"Base."`, `{"role":"system","content":"Early."}`, rqUserList, `{"role":"assistant","content":"ok"}`,
				`{"role":"system","content":"Today is Monday."}`, `{"role":"user","content":"next"}`),
			want: rqChat(rqMax, `{"role":"system","content":"Base.\n\nEarly."}`, rqChatList, `{"role":"assistant","content":"ok"}`,
				`{"role":"system","content":"Today is Monday."}`, `{"role":"user","content":"next"}`),
		},
		{
			name:   "10: an orphan tool_use (aborted turn) and an orphan tool_result are dropped, the text stays",
			config: rqDeepSeek,
			body: rqBody("", rqUserList, `{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_x","name":"Bash","input":{}}]}`,
				`{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]}`,
				`{"role":"assistant","content":"Stopped."}`,
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_gone","content":"late"},{"type":"text","text":"go on"}]}`),
			want: rqChat(rqMax, rqChatList, `{"role":"assistant","content":"Let me look."}`, `{"role":"user","content":"[Request interrupted by user]"}`,
				`{"role":"assistant","content":"Stopped."}`, `{"role":"user","content":"go on"}`),
			decisions: []string{"messages[1].content[1] drop", "messages[4].content[0] drop"},
		},
		{
			name:   "10: a repeated tool_use id and a repeated tool_result are sent once",
			config: `{"profile":"openai_chat"}`,
			body: rqBody("", rqUserList, `{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}},{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}`,
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"one"},{"type":"tool_result","tool_use_id":"t1","content":"two"}]}`),
			want: `{"model":"deepseek-v4-pro","messages":[` + rqChatList + `,{"role":"assistant","content":"","tool_calls":[{"id":"t1","type":"function","function":{"name":"Bash","arguments":"{}"}}]},` +
				`{"role":"tool","tool_call_id":"t1","content":"one"}],"max_completion_tokens":1000}`,
			decisions: []string{"messages[1].content[1] drop", "messages[2].content[1] drop"},
		},
		{
			name:   "system blocks: the billing line goes, the rest joins; cache_control goes",
			config: rqDeepSeek,
			body: rqBody(`,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.332.d60; cc_entrypoint=sdk-cli;"},`+
				`{"type":"text","text":"You are an agent.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Be careful."}]`,
				`{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b"}]}`),
			want:      rqChat(rqMax, `{"role":"system","content":"You are an agent.\n\nBe careful."}`, `{"role":"user","content":"a\n\nb"}`),
			decisions: []string{"system[0] drop", "cache_control drop"},
		},
		{
			name:   "documents with text and search results are text; server tool blocks in the history go",
			config: rqDeepSeek,
			body: rqBody("", `{"role":"user","content":[{"type":"document","title":"Notes","source":{"type":"text","media_type":"text/plain","data":"line 1"}},`+
				`{"type":"search_result","title":"Go","source":"https://go.dev","content":[{"type":"text","text":"Go is a language."}]}]}`,
				`{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"go"}},`+
					`{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},{"type":"text","text":"Found it."}]}`),
			want:      rqChat(rqMax, `{"role":"user","content":"Notes\n\nline 1\n\nGo\n\nGo is a language."}`, `{"role":"assistant","content":"Found it."}`),
			decisions: []string{"messages[1].content[0] drop", "messages[1].content[1] drop"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, x, err := rqRun(t, rqRules(tc.config), tc.body)
			transformtest.Accepted(t, []byte(out), err, tc.want)
			if got, want := strings.Join(rqDecisions(x), ", "), strings.Join(tc.decisions, ", "); got != want {
				t.Errorf("decisions %q, want %q", got, want)
			}
			if strings.Contains(out, rqAnthropic) || strings.Contains(out, reasonenv.Prefix) {
				t.Errorf("a signature went upstream: %s", out)
			}
			if p := x.UpstreamPath(); p != "/v1/chat/completions" {
				t.Errorf("path %q", p)
			}
		})
	}
}
