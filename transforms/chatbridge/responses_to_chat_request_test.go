package chatbridge

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// TestResponsesToChatRequest has one row per mapping rule of issue 11 and
// responses-chat-bridge.md §6.1.
func TestResponsesToChatRequest(t *testing.T) {
	const ds = `{"profile":"deepseek"}`
	const dsMax = `,"max_tokens":32768`
	tests := []struct {
		name, config, body, want string
		decisions                []string
	}{
		{
			name:   "instructions and leading system/developer messages are one system message",
			config: "",
			body: `{"model":"gpt-5.5","instructions":"Be brief.","input":[` + rcMsg("developer", "Rules A") + `,{"role":"system","content":"Rules B"},` +
				`{"type":"message","role":"developer","content":[{"type":"input_text","text":"C1"},{"type":"input_text","text":"C2"}]},` + rcMsg("user", "hi") + `]}`,
			want: rcChat("", `{"role":"system","content":"Be brief.\n\nRules A\n\nRules B\n\nC1\n\nC2"}`, `{"role":"user","content":"hi"}`),
		},
		{
			name:   "later developer messages become user text, never a second system message",
			config: "",
			body: rcInput(rcMsg("developer", "D"), rcMsg("user", "hi"), rcMsg("assistant", "hello"), rcMsg("developer", "Turn context"),
				`{"role":"system","content":"late system"}`, rcMsg("user", "go")),
			want: rcChat("", `{"role":"system","content":"D\n\nlate system"}`, `{"role":"user","content":"hi"}`, `{"role":"assistant","content":"hello"}`,
				`{"role":"user","content":"Turn context"}`, `{"role":"user","content":"go"}`),
		},
		{
			name:   "developer system hoists later developer messages",
			config: `{"developer":"system"}`,
			body: rcInput(rcMsg("developer", "D"), rcMsg("user", "hi"), rcMsg("assistant", "hello"), rcMsg("developer", "Turn context"),
				`{"role":"system","content":"late system"}`, rcMsg("user", "go")),
			want: rcChat("", `{"role":"system","content":"D\n\nTurn context\n\nlate system"}`, `{"role":"user","content":"hi"}`,
				`{"role":"assistant","content":"hello"}`, `{"role":"user","content":"go"}`),
		},
		{
			name:   "input as a plain string",
			config: "",
			body:   `{"model":"gpt-5.5","instructions":"I","input":"hello"}`,
			want:   rcChat("", `{"role":"system","content":"I"}`, `{"role":"user","content":"hello"}`),
		},
		{
			name:   "user and assistant messages, easy messages and joined text parts",
			config: "",
			body: rcInput(`{"role":"user","content":"plain"}`, rcMsg("assistant", "answer"),
				`{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}`),
			want: rcChat("", `{"role":"user","content":"plain"}`, `{"role":"assistant","content":"answer"}`, `{"role":"user","content":"a\n\nb"}`),
		},
		{
			name:   "input_image becomes image_url parts",
			config: "",
			body: rcInput(`{"type":"message","role":"user","content":[{"type":"input_text","text":"What is this?"},` +
				`{"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"high"},{"type":"input_image","image_url":"https://x.test/y.png"}]}`),
			want: rcChat("", `{"role":"user","content":[{"type":"text","text":"What is this?"},`+
				`{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"high"}},{"type":"image_url","image_url":{"url":"https://x.test/y.png"}}]}`),
		},
		{
			name:   "assistant refusal parts are text",
			config: "",
			body:   rcInput(rcMsg("user", "do it"), `{"type":"message","role":"assistant","content":[{"type":"refusal","refusal":"I can't help with that."}]}`, rcMsg("user", "ok")),
			want:   rcChat("", `{"role":"user","content":"do it"}`, `{"role":"assistant","content":"I can't help with that."}`, `{"role":"user","content":"ok"}`),
		},
		{
			name:   "deepseek: reasoning, text and consecutive calls are one assistant message",
			config: ds,
			body: rcInput(rcMsg("user", "list files"), rcReasoning(envDeepSeek, "Need to list files."), rcMsg("assistant", "Listing."),
				rcCall("call_00_a", "exec_command", `{"cmd":"ls"}`), rcCall("call_01_b", "exec_command", `{"cmd":"pwd"}`),
				rcOutput("call_00_a", "a.txt\n"), rcOutput("call_01_b", "/w\n"), rcMsg("assistant", "Two files."), rcMsg("user", "thanks")),
			want: rcChat(dsMax, `{"role":"user","content":"list files"}`,
				`{"role":"assistant","content":"Listing.","reasoning_content":"Need to list files.","tool_calls":[`+
					rcToolCall("call_00_a", "exec_command", `{"cmd":"ls"}`)+`,`+rcToolCall("call_01_b", "exec_command", `{"cmd":"pwd"}`)+`]}`,
				`{"role":"tool","tool_call_id":"call_00_a","content":"a.txt\n"}`, `{"role":"tool","tool_call_id":"call_01_b","content":"/w\n"}`,
				`{"role":"assistant","content":"Two files."}`, `{"role":"user","content":"thanks"}`),
		},
		{
			name:   "deepseek: reasoning replayed on text turns, empty on tool-call turns without reasoning",
			config: ds,
			body: rcInput(rcMsg("user", "q"), rcReasoning(envDeepSeek, "R1"), rcMsg("assistant", "A1"), rcMsg("user", "more"),
				rcCall("c1", "exec_command", `{"cmd":"ls"}`), rcOutput("c1", "x")),
			want: rcChat(dsMax, `{"role":"user","content":"q"}`, `{"role":"assistant","content":"A1","reasoning_content":"R1"}`, `{"role":"user","content":"more"}`,
				`{"role":"assistant","content":"","reasoning_content":"","tool_calls":[`+rcToolCall("c1", "exec_command", `{"cmd":"ls"}`)+`]}`,
				`{"role":"tool","tool_call_id":"c1","content":"x"}`),
		},
		{
			name:   "deepseek: several reasoning items join with a newline; a summary-only item of ours counts",
			config: ds,
			body: rcInput(rcMsg("user", "q"),
				`{"type":"reasoning","summary":[{"type":"summary_text","text":"S"}],"content":null,"encrypted_content":"`+envDeepSeek+`"}`,
				rcReasoning(envDeepSeek, "T"), rcCall("c1", "exec_command", `{}`), rcOutput("c1", "x")),
			want: rcChat(dsMax, `{"role":"user","content":"q"}`,
				`{"role":"assistant","content":"","reasoning_content":"S\nT","tool_calls":[`+rcToolCall("c1", "exec_command", `{}`)+`]}`,
				`{"role":"tool","tool_call_id":"c1","content":"x"}`),
		},
		{
			name:   "deepseek: the envelope carries the text back when the client kept only it and the summary (the Vercel AI SDK)",
			config: ds,
			body: rcInput(rcMsg("user", "q"),
				`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"`+textEnvelopeOf("deepseek", []byte("Need \"ls\".\nThen pwd."))+`"}`,
				rcCall("c1", "exec_command", `{}`), rcOutput("c1", "x")),
			want: rcChat(dsMax, `{"role":"user","content":"q"}`,
				`{"role":"assistant","content":"","reasoning_content":"Need \"ls\".\nThen pwd.","tool_calls":[`+rcToolCall("c1", "exec_command", `{}`)+`]}`,
				`{"role":"tool","tool_call_id":"c1","content":"x"}`),
		},
		{
			name:   "deepseek: another profile's sealed text, or an envelope that does not open, never goes upstream",
			config: ds,
			body: rcInput(rcMsg("user", "q"),
				`{"type":"reasoning","summary":[],"encrypted_content":"`+textEnvelopeOf("kimi", []byte("kimi thoughts"))+`"}`,
				`{"type":"reasoning","summary":[],"encrypted_content":"llmt2.bm90IGRlZmxhdGU"}`,
				rcCall("c1", "exec_command", `{}`), rcOutput("c1", "x")),
			want: rcChat(dsMax, `{"role":"user","content":"q"}`,
				`{"role":"assistant","content":"","reasoning_content":"","tool_calls":[`+rcToolCall("c1", "exec_command", `{}`)+`]}`,
				`{"role":"tool","tool_call_id":"c1","content":"x"}`),
			decisions: []string{"reasoning drop", "reasoning drop"},
		},
		{
			name:   "kimi: reasoning only on tool-call messages, ids verbatim",
			config: `{"profile":"kimi"}`,
			body: rcInput(rcMsg("user", "q"), rcReasoning(envKimi, "think A"), rcMsg("assistant", "text only"), rcMsg("user", "go"),
				rcReasoning(envKimi, "think B"), rcCall("functions.exec_command:0", "exec_command", `{"cmd":"ls"}`), rcOutput("functions.exec_command:0", "a"),
				rcCall("functions.exec_command:1", "exec_command", `{"cmd":"pwd"}`), rcOutput("functions.exec_command:1", "b")),
			want: rcChat(dsMax, `{"role":"user","content":"q"}`, `{"role":"assistant","content":"text only"}`, `{"role":"user","content":"go"}`,
				`{"role":"assistant","content":"","reasoning_content":"think B","tool_calls":[`+rcToolCall("functions.exec_command:0", "exec_command", `{"cmd":"ls"}`)+`]}`,
				`{"role":"tool","tool_call_id":"functions.exec_command:0","content":"a"}`,
				`{"role":"assistant","content":"","reasoning_content":"","tool_calls":[`+rcToolCall("functions.exec_command:1", "exec_command", `{"cmd":"pwd"}`)+`]}`,
				`{"role":"tool","tool_call_id":"functions.exec_command:1","content":"b"}`),
		},
		{
			name:   "glm keeps reasoning with preserved thinking",
			config: `{"profile":"glm"}`,
			body:   rcInput(rcMsg("user", "q"), rcReasoning(envGLM, "R"), rcCall("c1", "exec_command", `{}`), rcOutput("c1", "x")),
			want: rcChat(dsMax+`,"thinking":{"type":"enabled","clear_thinking":false}`, `{"role":"user","content":"q"}`, `{"role":"assistant","content":"","reasoning_content":"R","tool_calls":[`+rcToolCall("c1", "exec_command", `{}`)+`]}`,
				`{"role":"tool","tool_call_id":"c1","content":"x"}`),
		},
		{
			name:   "openai_chat strips reasoning",
			config: "",
			body:   rcInput(rcMsg("user", "q"), rcReasoning(envOpenAIChat, "R"), rcMsg("assistant", "A"), rcCall("c1", "exec_command", `{}`), rcOutput("c1", "x")),
			want: rcChat("", `{"role":"user","content":"q"}`, `{"role":"assistant","content":"A","tool_calls":[`+rcToolCall("c1", "exec_command", `{}`)+`]}`,
				`{"role":"tool","tool_call_id":"c1","content":"x"}`),
		},
		{
			name:   "foreign reasoning (OpenAI gAAA…, another provider's envelope) never goes upstream",
			config: ds,
			body: rcInput(rcMsg("user", "q"),
				`{"type":"reasoning","summary":[{"type":"summary_text","text":"openai summary"}],"encrypted_content":"gAAAAABoZmFrZS1vcGVuYWktYmxvYg=="}`,
				rcReasoning(envKimi, "kimi thinking"), rcCall("c1", "exec_command", `{}`), rcOutput("c1", "x")),
			want: rcChat(dsMax, `{"role":"user","content":"q"}`,
				`{"role":"assistant","content":"","reasoning_content":"","tool_calls":[`+rcToolCall("c1", "exec_command", `{}`)+`]}`,
				`{"role":"tool","tool_call_id":"c1","content":"x"}`),
			decisions: []string{"reasoning drop", "reasoning drop"},
		},
		{
			name:   "function_call_output parts are the tool message's text",
			config: "",
			body: rcInput(rcMsg("user", "q"), rcCall("c1", "exec_command", `{}`),
				`{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"line1"},{"type":"input_text","text":"line2"}]}`),
			want: rcChat("", `{"role":"user","content":"q"}`, `{"role":"assistant","content":"","tool_calls":[`+rcToolCall("c1", "exec_command", `{}`)+`]}`,
				`{"role":"tool","tool_call_id":"c1","content":"line1\n\nline2"}`),
		},
		{
			name:   "orphan calls and outputs are dropped with a decision",
			config: "",
			body: rcInput(rcMsg("user", "q"), rcCall("lonely", "exec_command", `{}`), rcOutput("lost", "x"),
				rcCall("c1", "exec_command", `{}`), rcOutput("c1", "y")),
			want: rcChat("", `{"role":"user","content":"q"}`, `{"role":"assistant","content":"","tool_calls":[`+rcToolCall("c1", "exec_command", `{}`)+`]}`,
				`{"role":"tool","tool_call_id":"c1","content":"y"}`),
			decisions: []string{"input[1] drop", "input[2] drop"},
		},
		{
			name:   "a namespace on a call is flattened; empty or missing arguments are {}",
			config: "",
			body: rcInput(rcMsg("user", "q"),
				`{"type":"function_call","call_id":"c1","namespace":"github","name":"get_issue","arguments":""}`,
				`{"type":"function_call","call_id":"c2","name":"now"}`,
				rcOutput("c1", "issue"), rcOutput("c2", "noon")),
			want: rcChat("", `{"role":"user","content":"q"}`,
				`{"role":"assistant","content":"","tool_calls":[`+rcToolCall("c1", "github__get_issue", `{}`)+`,`+rcToolCall("c2", "now", `{}`)+`]}`,
				`{"role":"tool","tool_call_id":"c1","content":"issue"}`, `{"role":"tool","tool_call_id":"c2","content":"noon"}`),
		},
		{
			name:   "web_search_call and compaction items are dropped with a decision",
			config: "",
			body: rcInput(rcMsg("user", "q"), `{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"x"}}`,
				`{"type":"compaction","encrypted_content":"abc"}`, rcMsg("assistant", "found")),
			want:      rcChat("", `{"role":"user","content":"q"}`, `{"role":"assistant","content":"found"}`),
			decisions: []string{"input[1] drop", "input[2] drop"},
		},
		{
			name:   "function tools are nested; additional_tools are appended",
			config: "",
			body: `{"model":"gpt-5.5","tools":[{"type":"function","name":"a","description":"A","parameters":{"type":"object","properties":{"x":{"type":"string"}}},"strict":true},` +
				`{"type":"function","name":"bare","defer_loading":true}],` +
				`"input":[{"type":"additional_tools","tools":[{"type":"function","name":"b","parameters":{"type":"object","properties":{}}}]},` + rcMsg("user", "q") + `]}`,
			want: rcChat(`,"tools":[{"type":"function","function":{"name":"a","description":"A","parameters":{"type":"object","properties":{"x":{"type":"string"}}},"strict":true}},`+
				`{"type":"function","function":{"name":"bare","parameters":{"type":"object","properties":{}}}},`+
				`{"type":"function","function":{"name":"b","parameters":{"type":"object","properties":{}}}}]`, `{"role":"user","content":"q"}`),
		},
		{
			name:   "tool_choice as a string",
			config: "",
			body:   `{"model":"gpt-5.5","input":"q","tools":[{"type":"function","name":"a"}],"tool_choice":"required"}`,
			want:   rcChat(`,"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{}}}}],"tool_choice":"required"`, `{"role":"user","content":"q"}`),
		},
		{
			name:   "a named tool_choice is nested and its namespace flattened",
			config: "",
			body:   `{"model":"gpt-5.5","input":"q","tools":[{"type":"function","name":"a"}],"tool_choice":{"type":"function","namespace":"ns","name":"a"}}`,
			want: rcChat(`,"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{}}}}],`+
				`"tool_choice":{"type":"function","function":{"name":"ns__a"}}`, `{"role":"user","content":"q"}`),
		},
		{
			name:   "allowed_tools tool_choice is nested",
			config: "",
			body: `{"model":"gpt-5.5","input":"q","tools":[{"type":"function","name":"a"},{"type":"function","name":"b"}],` +
				`"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"a"},{"type":"function","name":"b"}]}}`,
			want: rcChat(`,"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{}}}},{"type":"function","function":{"name":"b","parameters":{"type":"object","properties":{}}}}],`+
				`"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"required","tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}]}}`,
				`{"role":"user","content":"q"}`),
		},
		{
			name:   "max_output_tokens is max_completion_tokens for openai_chat",
			config: "",
			body:   `{"model":"gpt-5.5","input":"q","max_output_tokens":1000}`,
			want:   rcChat(`,"max_completion_tokens":1000`, `{"role":"user","content":"q"}`),
		},
		{
			name:   "max_output_tokens is max_tokens for deepseek",
			config: ds,
			body:   `{"model":"gpt-5.5","input":"q","max_output_tokens":1000}`,
			want:   rcChat(`,"max_tokens":1000`, `{"role":"user","content":"q"}`),
		},
		{
			name:   "deepseek sends its default limit when the client sets none",
			config: ds,
			body:   `{"model":"gpt-5.5","input":"q","max_output_tokens":null}`,
			want:   rcChat(dsMax, `{"role":"user","content":"q"}`),
		},
		{
			name:   "openai_chat has no default limit",
			config: "",
			body:   `{"model":"gpt-5.5","input":"q"}`,
			want:   rcChat("", `{"role":"user","content":"q"}`),
		},
		{
			name:   "default_max_tokens 0 sends none; max_tokens_field overrides the profile",
			config: `{"profile":"deepseek","default_max_tokens":0}`,
			body:   `{"model":"gpt-5.5","input":"q"}`,
			want:   rcChat("", `{"role":"user","content":"q"}`),
		},
		{
			name:   "max_tokens_field and default_max_tokens override the profile",
			config: `{"max_tokens_field":"max_tokens","default_max_tokens":4096}`,
			body:   `{"model":"gpt-5.5","input":"q"}`,
			want:   rcChat(`,"max_tokens":4096`, `{"role":"user","content":"q"}`),
		},
		{
			name:   "text.format json_schema becomes response_format; verbosity passes for openai_chat",
			config: "",
			body:   `{"model":"gpt-5.5","input":"q","text":{"format":{"type":"json_schema","name":"answer","schema":{"type":"object"},"strict":true},"verbosity":"low"}}`,
			want:   rcChat(`,"response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object"},"strict":true}},"verbosity":"low"`, `{"role":"user","content":"q"}`),
		},
		{
			name:   "text.format json_object; verbosity dropped for deepseek",
			config: ds,
			body:   `{"model":"gpt-5.5","input":"q","text":{"format":{"type":"json_object"},"verbosity":"low"}}`,
			want:   rcChat(dsMax+`,"response_format":{"type":"json_object"}`, `{"role":"user","content":"q"}`),
		},
		{
			name:   "text.format text is Chat's default",
			config: "",
			body:   `{"model":"gpt-5.5","input":"q","text":{"format":{"type":"text"}}}`,
			want:   rcChat("", `{"role":"user","content":"q"}`),
		},
		{
			name:   "a stream asks for usage",
			config: "",
			body:   `{"model":"gpt-5.5","input":"q","stream":true}`,
			want:   rcChat(`,"stream":true,"stream_options":{"include_usage":true}`, `{"role":"user","content":"q"}`),
		},
		{
			name:   "no stream, no stream_options",
			config: "",
			body:   `{"model":"gpt-5.5","input":"q","stream":false}`,
			want:   rcChat(`,"stream":false`, `{"role":"user","content":"q"}`),
		},
		{
			name:   "Responses-only fields are dropped, sampling fields pass",
			config: "",
			body: `{"model":"gpt-5.5","input":"q","store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"k","client_metadata":{"a":"b"},` +
				`"service_tier":"auto","metadata":{"x":"y"},"truncation":"auto","max_tool_calls":3,"prompt":{"id":"p"},"previous_response_id":null,"conversation":null,"background":false,` +
				`"reasoning":{"summary":"auto"},"temperature":0.5,"top_p":0.9,"parallel_tool_calls":true,"user":"u1"}`,
			want: rcChat(`,"temperature":0.5,"top_p":0.9,"parallel_tool_calls":true,"user":"u1"`, `{"role":"user","content":"q"}`),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, x, err := rcRequest(t, rcRules(tc.config), tc.body)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			transformtest.JSONEqual(t, []byte(out), tc.want)
			if got := strings.Join(rcDecisions(x), ", "); got != strings.Join(tc.decisions, ", ") {
				t.Errorf("decisions %q, want %q", got, strings.Join(tc.decisions, ", "))
			}
			if x.UpstreamPath() != "/v1/chat/completions" {
				t.Errorf("path %q", x.UpstreamPath())
			}
		})
	}
}

// TestResponsesToChatEffort maps reasoning.effort to each provider's knob
// (responses-chat-bridge.md §3.6).
func TestResponsesToChatEffort(t *testing.T) {
	tests := []struct {
		profile, effort string
		stream          bool
		want            string // the fields after the token limit
	}{
		{"deepseek", "none", false, `,"thinking":{"type":"disabled"}`},
		{"deepseek", "minimal", false, `,"thinking":{"type":"enabled"},"reasoning_effort":"high"`},
		{"deepseek", "low", false, `,"thinking":{"type":"enabled"},"reasoning_effort":"high"`},
		{"deepseek", "medium", false, `,"thinking":{"type":"enabled"},"reasoning_effort":"high"`},
		{"deepseek", "high", false, `,"thinking":{"type":"enabled"},"reasoning_effort":"high"`},
		{"deepseek", "xhigh", false, `,"thinking":{"type":"enabled"},"reasoning_effort":"max"`},
		{"kimi", "none", false, `,"thinking":{"type":"disabled"}`},
		{"kimi", "high", false, ``},
		{"glm", "none", false, `,"thinking":{"type":"disabled"}`},
		{"glm", "high", false, `,"thinking":{"type":"enabled","clear_thinking":false}`},
		{"qwen", "none", true, `,"enable_thinking":false`},
		{"qwen", "high", true, `,"enable_thinking":true`},
		// DashScope answers 400 "parameter.enable_thinking must be set to
		// false for non-streaming calls" (responses-chat-bridge.md §3.1).
		{"qwen", "high", false, `,"enable_thinking":false`},
		{"minimax", "none", false, `,"reasoning_split":true,"thinking":{"type":"disabled"}`},
		{"minimax", "high", false, `,"reasoning_split":true,"thinking":{"type":"adaptive"}`},
		{"openai_chat", "low", false, `,"reasoning_effort":"low"`},
		{"openai_chat", "", false, ``},
		{"bedrock", "high", false, ``},
	}
	for _, tc := range tests {
		t.Run(tc.profile+"/"+tc.effort+"/stream="+strconv.FormatBool(tc.stream), func(t *testing.T) {
			reasoning := `{"summary":"auto"}`
			if tc.effort != "" {
				reasoning = `{"effort":"` + tc.effort + `","summary":"auto"}`
			}
			stream := strconv.FormatBool(tc.stream)
			out, _, err := rcRequest(t, rcRules(`{"profile":"`+tc.profile+`"}`), `{"model":"gpt-5.5","input":"q","stream":`+stream+`,"reasoning":`+reasoning+`}`)
			if err != nil {
				t.Fatal(err)
			}
			extra := `,"stream":` + stream
			if tc.stream {
				extra += `,"stream_options":{"include_usage":true}`
			}
			if tc.profile != "openai_chat" {
				extra += `,"max_tokens":32768`
			}
			transformtest.JSONEqual(t, []byte(out), rcChat(extra+tc.want, `{"role":"user","content":"q"}`))
		})
	}
}

// TestResponsesToChatRequestErrors: what the bridge cannot send is a 400
// that names it, before anything goes upstream.
func TestResponsesToChatRequestErrors(t *testing.T) {
	tests := []struct {
		name, body, code, param string
		says                    []string
	}{
		{"previous_response_id", `{"model":"m","input":"q","previous_response_id":"resp_1"}`, "unsupported_parameter", "previous_response_id", []string{"no state"}},
		{"conversation id", `{"model":"m","input":"q","conversation":"conv_1"}`, "unsupported_parameter", "conversation", []string{"no state"}},
		{"conversation object", `{"model":"m","input":"q","conversation":{"id":"conv_1"}}`, "unsupported_parameter", "conversation", []string{"no state"}},
		{"background", `{"model":"m","input":"q","background":true}`, "unsupported_parameter", "background", []string{"no state"}},
		{"custom_tool_call", rcInput(rcMsg("user", "q"), `{"type":"custom_tool_call","call_id":"c1","name":"apply_patch","input":"*** Begin Patch"}`),
			"unsupported_input_item", "input[1]", []string{"custom_tool_call", "tools_plan"}},
		{"custom_tool_call_output", rcInput(rcMsg("user", "q"), `{"type":"custom_tool_call_output","call_id":"c1","output":"ok"}`),
			"unsupported_input_item", "input[1]", []string{"custom_tool_call_output", "tools_plan"}},
		{"local_shell_call", rcInput(`{"type":"local_shell_call","call_id":"c1","action":{"type":"exec","command":["ls"]}}`),
			"unsupported_input_item", "input[0]", []string{"local_shell_call", "tools_plan"}},
		{"tool_search_call", rcInput(rcMsg("user", "q"), `{"type":"tool_search_call","call_id":"c1","arguments":{}}`),
			"unsupported_input_item", "input[1]", []string{"tool_search_call", "tools_plan"}},
		{"compaction_trigger", rcInput(rcMsg("user", "q"), `{"type":"compaction_trigger"}`), "unsupported_input_item", "input[1]", []string{`"compaction_trigger"`}},
		{"item_reference", rcInput(`{"type":"item_reference","id":"msg_1"}`), "item_reference_unsupported", "input[0]", []string{"item_reference", "no state", "store to false"}},
		{"unknown item type", rcInput(rcMsg("user", "q"), `{"type":"frobnicate"}`), "unsupported_input_item", "input[1]", []string{`"frobnicate"`}},
		{"custom tool", `{"model":"m","input":"q","tools":[{"type":"function","name":"a"},{"type":"custom","name":"apply_patch"}]}`,
			"unsupported_tool", "tools[1]", []string{`"custom"`, "tools_plan"}},
		{"web_search tool", `{"model":"m","input":"q","tools":[{"type":"web_search"}]}`, "unsupported_tool", "tools[0]", []string{`"web_search"`, "tools_plan"}},
		{"namespace tool", `{"model":"m","input":"q","tools":[{"type":"namespace","name":"ns","tools":[]}]}`, "unsupported_tool", "tools[0]", []string{`"namespace"`}},
		{"custom tool in additional_tools", rcInput(`{"type":"additional_tools","tools":[{"type":"custom","name":"x"}]}`, rcMsg("user", "q")),
			"unsupported_tool", "input.additional_tools", []string{`"custom"`}},
		{"custom tool_choice", `{"model":"m","input":"q","tools":[{"type":"function","name":"a"}],"tool_choice":{"type":"custom","name":"apply_patch"}}`,
			"unsupported_tool_choice", "tool_choice", []string{`"custom"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := rcRequest(t, rcRules(`{"profile":"deepseek"}`), tc.body)
			e, ok := err.(*transforms.Error)
			if !ok {
				t.Fatalf("err = %v, body %s", err, out)
			}
			if e.Status != http.StatusBadRequest || e.Type != "invalid_request_error" || e.Code != tc.code || e.Param != tc.param {
				t.Fatalf("error %+v, want 400 %s at %s", e, tc.code, tc.param)
			}
			for _, s := range tc.says {
				if !strings.Contains(e.Message, s) {
					t.Errorf("message %q does not say %q", e.Message, s)
				}
			}
		})
	}
}

// TestResponsesToChatToolOutputImages: Chat tool messages hold text, so
// the images of a tool's output follow it as a user message with their
// image_url parts (responses-chat-bridge.md §6.1): never lost without a word.
func TestResponsesToChatToolOutputImages(t *testing.T) {
	body := rcInput(rcMsg("user", "look"), rcCall("c1", "view_image", `{"path":"a.png"}`),
		`{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"the image:"},{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}]}`,
		rcMsg("user", "and?"))
	out, x, err := rcRequest(t, rcRules(""), body)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(out), rcChat("", `{"role":"user","content":"look"}`,
		`{"role":"assistant","content":"","tool_calls":[`+rcToolCall("c1", "view_image", `{"path":"a.png"}`)+`]}`,
		`{"role":"tool","tool_call_id":"c1","content":"the image:"}`,
		`{"role":"user","content":[{"type":"text","text":"The images the tool calls returned:"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}}]}`,
		`{"role":"user","content":"and?"}`))
	if len(x.Decisions()) != 0 {
		t.Errorf("decisions %v", rcDecisions(x))
	}
}

// TestResponsesToChatCodexRequest runs Codex 0.169's real first request
// through the canonical pipeline: tools_plan fits the tools, the bridge
// makes the Chat request.
func TestResponsesToChatCodexRequest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "integration", "testdata", "codex", "codex-0.169-gpt-5.5-responses-request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Input []struct {
			Role    string `json:"role"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"input"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	// What the one system message and the user messages must hold.
	var system []string
	var users []string
	for _, it := range req.Input {
		var parts []string
		for _, c := range it.Content {
			parts = append(parts, c.Text)
		}
		if it.Role == "developer" {
			system = append(system, parts...)
		} else {
			users = append(users, strings.Join(parts, "\n\n"))
		}
	}
	rules := `[{"transform":"tools_plan","config":{"profile":"deepseek"}},{"transform":"responses_to_chat","config":{"profile":"deepseek"}}]`
	out, x, err := rcRequest(t, rules, string(raw))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
		ToolChoice json.RawMessage `json:"tool_choice"`
		Rest       map[string]json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &got.Rest); err != nil {
		t.Fatal(err)
	}
	if got.Model != "gpt-5.5" || x.UpstreamPath() != "/v1/chat/completions" {
		t.Fatalf("model %q, path %q", got.Model, x.UpstreamPath())
	}
	wantRoles := "system"
	for range users {
		wantRoles += ",user"
	}
	var roles []string
	for _, m := range got.Messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != wantRoles {
		t.Fatalf("roles %v, want %s", roles, wantRoles)
	}
	if got.Messages[0].Content != strings.Join(system, "\n\n") {
		t.Errorf("system message %q, want %q", got.Messages[0].Content, strings.Join(system, "\n\n"))
	}
	for i, u := range users {
		if got.Messages[i+1].Content != u {
			t.Errorf("user message %d %q, want %q", i, got.Messages[i+1].Content, u)
		}
	}
	var names []string
	for _, tl := range got.Tools {
		if tl.Type != "function" {
			t.Errorf("a %q tool reached the upstream", tl.Type)
		}
		names = append(names, tl.Function.Name)
	}
	if !strings.Contains(","+strings.Join(names, ",")+",", ",apply_patch,") || !strings.Contains(","+strings.Join(names, ",")+",", ",exec_command,") {
		t.Errorf("tools %v lack apply_patch or exec_command", names)
	}
	want := map[string]string{
		"stream": `true`, "stream_options": `{"include_usage":true}`, "parallel_tool_calls": `true`,
		"max_tokens": `32768`, "thinking": `{"type":"enabled"}`, "reasoning_effort": `"high"`, "tool_choice": `"auto"`,
	}
	for k, v := range want {
		if string(got.Rest[k]) != v {
			t.Errorf("%s = %s, want %s", k, got.Rest[k], v)
		}
	}
	for k := range got.Rest {
		if _, ok := want[k]; !ok && k != "model" && k != "messages" && k != "tools" {
			t.Errorf("unexpected field %s = %s", k, got.Rest[k])
		}
	}
}

// chatInvariants checks what strict Chat providers enforce: one system
// message, first; every tool message answers a call of the assistant
// message just before the run of tool messages; every call is answered;
// no empty assistant message.
func chatInvariants(t *testing.T, body string) {
	t.Helper()
	if !json.Valid([]byte(body)) {
		t.Fatalf("not JSON: %s", body)
	}
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	var open map[string]bool
	for i, m := range req.Messages {
		if m.Role == "system" && i != 0 {
			t.Fatalf("messages[%d] is a second system message: %s", i, body)
		}
		if m.Role == "tool" {
			if !open[m.ToolCallID] {
				t.Fatalf("messages[%d] answers %q, not a call of the assistant message before it: %s", i, m.ToolCallID, body)
			}
			delete(open, m.ToolCallID)
			continue
		}
		if len(open) > 0 {
			t.Fatalf("messages[%d] comes before every call was answered (%v): %s", i, open, body)
		}
		if m.Role == "assistant" {
			if len(m.ToolCalls) == 0 && (m.Content == nil || m.Content == "") {
				t.Fatalf("messages[%d] is an empty assistant message: %s", i, body)
			}
			open = map[string]bool{}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		}
	}
	if len(open) > 0 {
		t.Fatalf("calls %v are never answered: %s", open, body)
	}
}

// TestResponsesToChatHistoryFollowsStrictChatOrder: however a Responses
// history orders its items (parallel calls, an image output, reasoning
// between calls, outputs interleaved with calls, an output before its
// call, a message between a call and its output), the Chat request keeps
// the message order strict providers enforce (chatInvariants), or they
// refuse it. Reasoning between the calls of one turn stays on the one
// assistant message; consecutive assistant messages become one; a
// tool_choice without tools is not sent.
func TestResponsesToChatHistoryFollowsStrictChatOrder(t *testing.T) {
	img := `{"type":"function_call_output","call_id":"a","output":[{"type":"input_image","image_url":"data:image/png;base64,AA=="}]}`
	for name, items := range map[string][]string{
		"parallel calls, the first output an image": {rcMsg("user", "q"), rcCall("a", "view_image", `{}`), rcCall("b", "f", `{}`), img, rcOutput("b", "B")},
		"reasoning between calls":                   {rcMsg("user", "q"), rcReasoning(envDeepSeek, "r1"), rcCall("a", "f", `{}`), rcReasoning(envDeepSeek, "r2"), rcCall("b", "f", `{}`), rcOutput("a", "A"), rcOutput("b", "B")},
		"calls and outputs interleaved":             {rcMsg("user", "q"), rcCall("a", "f", `{}`), rcCall("b", "f", `{}`), rcOutput("a", "A"), rcCall("c", "f", `{}`), rcOutput("b", "B"), rcOutput("c", "C")},
		"an output before its call":                 {rcMsg("user", "q"), rcOutput("a", "A"), rcCall("a", "f", `{}`), rcMsg("user", "next")},
		"a message between a call and its output":   {rcMsg("user", "q"), rcCall("a", "f", `{}`), rcMsg("developer", "context"), rcOutput("a", "A")},
	} {
		t.Run(name, func(t *testing.T) {
			out, _, err := rcRequest(t, rcRules(`{"profile":"deepseek"}`), rcInput(items...))
			if err != nil {
				t.Fatal(err)
			}
			chatInvariants(t, out)
		})
	}
	// Reasoning between calls of one turn stays on the one message.
	out, _, err := rcRequest(t, rcRules(`{"profile":"deepseek"}`), rcInput(rcMsg("user", "q"), rcReasoning(envDeepSeek, "r1"), rcCall("a", "f", `{}`), rcReasoning(envDeepSeek, "r2"), rcCall("b", "f", `{}`), rcOutput("a", "A"), rcOutput("b", "B")))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(out), rcChat(`,"max_tokens":32768`, `{"role":"user","content":"q"}`,
		`{"role":"assistant","content":"","reasoning_content":"r1\nr2","tool_calls":[`+rcToolCall("a", "f", `{}`)+`,`+rcToolCall("b", "f", `{}`)+`]}`,
		`{"role":"tool","tool_call_id":"a","content":"A"}`, `{"role":"tool","tool_call_id":"b","content":"B"}`))
	// Consecutive assistant messages keep apart; no tool_choice without tools.
	out, _, err = rcRequest(t, rcRules(`{"profile":"deepseek"}`), `{"model":"gpt-5.5","tools":[],"tool_choice":"auto","input":[`+rcMsg("assistant", "Hello.")+`,`+rcMsg("assistant", "World.")+`]}`)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(out), rcChat(`,"max_tokens":32768`, `{"role":"assistant","content":"Hello.\n\nWorld."}`))
}
