package messagesbridge

import (
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/internal/providers"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// rqProfile is what each profile writes around the same conversation:
// the reasoning_content a tool-call turn carries (or none), and the
// members after the messages for max_tokens 1000 and no thinking asked.
type rqProfile struct {
	profile, textModel, visionModel string
	callReasoning, tail             string
}

var rqProfiles = []rqProfile{
	{"deepseek", "deepseek-v4-pro", "", `,"reasoning_content":""`, `,"max_tokens":1000`},
	{"kimi", "kimi-k2-0905-preview", "kimi-k2.5", `,"reasoning_content":""`, `,"max_tokens":1000`},
	{"glm", "glm-4.6", "glm-4.5v", `,"reasoning_content":""`, `,"max_tokens":1000,"thinking":{"type":"enabled","clear_thinking":false}`},
	{"qwen", "qwen3-max", "qwen3-vl-plus", ``, `,"max_tokens":1000,"enable_thinking":false`},
	{"minimax", "MiniMax-M2.7", "", `,"reasoning_content":""`, `,"max_tokens":1000,"reasoning_split":true`},
	{"openai_chat", "gpt-3.5-turbo", "gpt-5", ``, `,"max_completion_tokens":1000`},
}

// rqScenario5 is §14 scenario 5 for model: a tool_result of text and a
// base64 image with is_error, then the user's image by URL and text.
func rqScenario5(model string) string {
	return `{"model":"` + model + `","max_tokens":1000,"messages":[` + rqUserList +
		`,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_s","name":"Screenshot","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_s","is_error":true,"content":[{"type":"text","text":"render failed"},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"partial frame"}]},` +
		`{"type":"image","source":{"type":"url","url":"https://x.test/ref.png"}},{"type":"text","text":"compare with this"}]}]}`
}

// TestMessagesToChatScenario5PerProfile: the tool's image follows its tool
// message in a user message; the user's own image stays with its text. A
// model that reads images gets them as image_url parts; one that does not
// gets a placeholder saying so, with a decision, and all-text messages as
// strings; Kimi takes base64 images but no URLs.
func TestMessagesToChatScenario5PerProfile(t *testing.T) {
	const (
		tool        = `{"role":"tool","tool_call_id":"toolu_s","content":"Error: render failed\n\npartial frame"}`
		toolImage   = `{"role":"user","content":[{"type":"text","text":"[image from tool toolu_s]"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}`
		userImage   = `{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x.test/ref.png"}},{"type":"text","text":"compare with this"}]}`
		toolNoImage = `{"role":"user","content":"[image from tool toolu_s omitted: the model cannot read images]"}`
		userNoImage = `{"role":"user","content":"[image omitted: the model cannot read images]\n\ncompare with this"}`
		userNoURL   = `{"role":"user","content":"[image omitted: the upstream takes images as base64 data, not by URL]\n\ncompare with this"}`
	)
	both := []string{"messages[2].content[0].content[1] placeholder", "messages[2].content[1] placeholder"}
	for _, p := range rqProfiles {
		call := `{"role":"assistant","content":""` + p.callReasoning + `,"tool_calls":[{"id":"toolu_s","type":"function","function":{"name":"Screenshot","arguments":"{}"}}]}`
		chat := func(model string, rest ...string) string {
			return `{"model":"` + model + `","messages":[` + rqChatList + `,` + call + `,` + tool + `,` + strings.Join(rest, ",") + `]` + p.tail + `}`
		}
		cases := []struct {
			model, want string
			decisions   []string
		}{{p.textModel, chat(p.textModel, toolNoImage, userNoImage), both}}
		switch p.profile {
		case "kimi":
			cases = append(cases, struct {
				model, want string
				decisions   []string
			}{p.visionModel, chat(p.visionModel, toolImage, userNoURL), []string{"messages[2].content[1] placeholder"}})
		case "deepseek", "minimax":
		default:
			cases = append(cases, struct {
				model, want string
				decisions   []string
			}{p.visionModel, chat(p.visionModel, toolImage, userImage), nil})
		}
		for _, tc := range cases {
			t.Run(p.profile+"/"+tc.model, func(t *testing.T) {
				out, x, err := rqRun(t, rqRules(`{"profile":"`+p.profile+`"}`), rqScenario5(tc.model))
				transformtest.Accepted(t, []byte(out), err, tc.want)
				if got, want := strings.Join(rqDecisions(x), ", "), strings.Join(tc.decisions, ", "); got != want {
					t.Errorf("decisions %q, want %q", got, want)
				}
			})
		}
	}
}

// TestMessagesToChatScenario8PerProfile is §14 scenario 8 on every
// profile: of the deferred tools only the one a tool_reference loaded is
// sent, and the reference reads as text in the tool message.
func TestMessagesToChatScenario8PerProfile(t *testing.T) {
	for _, p := range rqProfiles {
		t.Run(p.profile, func(t *testing.T) {
			body := `{"model":"` + p.textModel + `","max_tokens":1000,"tools":[{"name":"ToolSearch","input_schema":{"type":"object"}},` +
				`{"name":"Cron","defer_loading":true,"input_schema":{"type":"object","properties":{"at":{"type":"string"}}}},` +
				`{"name":"Mail","defer_loading":true,"input_schema":{}}],"messages":[` + rqUserList + `,` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_q","name":"ToolSearch","input":{"query":"cron"}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_q","content":[{"type":"tool_reference","tool_name":"Cron"}]}]}]}`
			want := `{"model":"` + p.textModel + `","messages":[` + rqChatList + `,` +
				`{"role":"assistant","content":""` + p.callReasoning + `,"tool_calls":[{"id":"toolu_q","type":"function","function":{"name":"ToolSearch","arguments":"{\"query\":\"cron\"}"}}]},` +
				`{"role":"tool","tool_call_id":"toolu_q","content":"Tool Cron is now available."}],` +
				`"tools":[{"type":"function","function":{"name":"ToolSearch","parameters":{"type":"object"}}},` +
				`{"type":"function","function":{"name":"Cron","parameters":{"type":"object","properties":{"at":{"type":"string"}}}}}]` + p.tail + `}`
			out, x, err := rqRun(t, rqRules(`{"profile":"`+p.profile+`"}`), body)
			transformtest.Accepted(t, []byte(out), err, want)
			if got := strings.Join(rqDecisions(x), ", "); got != "Mail defer" {
				t.Errorf("decisions %q", got)
			}
		})
	}
}

// TestMessagesToChatDocuments: text documents are their text; a PDF (or a
// document by URL or file) no Chat upstream reads becomes a placeholder
// after its title, in the user's content and in a tool result alike.
func TestMessagesToChatDocuments(t *testing.T) {
	body := rqBody("", `{"role":"user","content":[{"type":"document","title":"Spec","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}},`+
		`{"type":"document","source":{"type":"url","url":"https://x.test/a.pdf"}},{"type":"document","title":"Notes","source":{"type":"text","media_type":"text/plain","data":"n1"}},`+
		`{"type":"text","text":"summarise"}]}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_r","name":"Read","input":{"path":"b.pdf"}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_r","content":[{"type":"text","text":"read b.pdf"},{"type":"document","source":{"type":"file","file_id":"file_1"}}]}]}`)
	const omitted = `[document omitted: a Chat Completions upstream cannot read PDF or file documents]`
	want := `{"model":"deepseek-v4-pro","messages":[{"role":"user","content":"Spec\n\n` + omitted + `\n\n` + omitted + `\n\nNotes\n\nn1\n\nsummarise"},` +
		`{"role":"assistant","content":"","reasoning_content":"","tool_calls":[{"id":"toolu_r","type":"function","function":{"name":"Read","arguments":"{\"path\":\"b.pdf\"}"}}]},` +
		`{"role":"tool","tool_call_id":"toolu_r","content":"read b.pdf\n\n` + omitted + `"}],"max_tokens":1000}`
	// A model that reads images reads no PDF either.
	for _, model := range []string{"deepseek-v4-pro", "gpt-5"} {
		profile := map[string]string{"deepseek-v4-pro": rqDeepSeek, "gpt-5": `{"profile":"openai_chat"}`}[model]
		t.Run(model, func(t *testing.T) {
			b := strings.Replace(body, "deepseek-v4-pro", model, 1)
			w := strings.Replace(want, "deepseek-v4-pro", model, 1)
			if model == "gpt-5" {
				w = strings.Replace(strings.Replace(w, `"reasoning_content":"",`, "", 1), `"max_tokens"`, `"max_completion_tokens"`, 1)
			}
			out, x, err := rqRun(t, rqRules(profile), b)
			transformtest.Accepted(t, []byte(out), err, w)
			want := "messages[0].content[0] placeholder, messages[0].content[1] placeholder, messages[2].content[0].content[1] placeholder"
			if got := strings.Join(rqDecisions(x), ", "); got != want {
				t.Errorf("decisions %q, want %q", got, want)
			}
		})
	}
}

// TestMessagesToChatUnsupportedContentReject: with unsupported_content
// reject, what the upstream cannot take is a 400 naming the block and
// why; what it takes passes.
func TestMessagesToChatUnsupportedContentReject(t *testing.T) {
	const (
		png    = `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}`
		byURL  = `{"type":"image","source":{"type":"url","url":"https://x.test/a.png"}}`
		byFile = `{"type":"image","source":{"type":"file","file_id":"file_1"}}`
		pdf    = `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}`
		call   = `{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Shot","input":{}}]}`
	)
	user := func(blocks string) string { return `{"role":"user","content":[` + blocks + `]}` }
	tests := []struct {
		name, profile, model, msgs, param, message string
	}{
		{"an image, a text-only model", "deepseek", "deepseek-v4-pro", user(png), "messages[0].content[0]",
			"messages_to_chat: messages[0].content[0] is an image, and the model cannot read images"},
		{"a tool's image, a text-only model", "minimax", "MiniMax-M2.7", rqUserList + "," + call + "," + user(`{"type":"tool_result","tool_use_id":"t","content":[`+png+`]}`),
			"messages[2].content[0].content[0]", "messages_to_chat: messages[2].content[0].content[0] is an image, and the model cannot read images"},
		{"an image by URL to Kimi", "kimi", "kimi-k2.5", user(`{"type":"text","text":"see"},` + byURL), "messages[0].content[1]",
			"messages_to_chat: messages[0].content[1] is an image, and the upstream takes images as base64 data, not by URL"},
		{"a Files API image", "openai_chat", "gpt-5", user(byFile), "messages[0].content[0]",
			"messages_to_chat: messages[0].content[0] is an image, and an image of Anthropic's Files API cannot be sent to a Chat Completions upstream"},
		{"a PDF", "openai_chat", "gpt-5", user(pdf), "messages[0].content[0]",
			"messages_to_chat: messages[0].content[0] is a document, and a Chat Completions upstream cannot read PDF or file documents"},
		{"a PDF in a tool result", "glm", "glm-4.5v", rqUserList + "," + call + "," + user(`{"type":"tool_result","tool_use_id":"t","content":[`+pdf+`]}`),
			"messages[2].content[0].content[0]", "messages_to_chat: messages[2].content[0].content[0] is a document, and a Chat Completions upstream cannot read PDF or file documents"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"` + tc.model + `","max_tokens":10,"messages":[` + tc.msgs + `]}`
			out, _, err := rqRun(t, rqRules(`{"profile":"`+tc.profile+`","unsupported_content":"reject"}`), body)
			var outB []byte
			if out != "" {
				outB = []byte(out)
			}
			e := transformtest.Rejected(t, outB, err, "unsupported_content")
			if e.Param != tc.param || e.Message != tc.message || e.Status != 400 {
				t.Errorf("%d param %q message %q", e.Status, e.Param, e.Message)
			}
		})
	}
	// What the model reads passes under reject, unchanged.
	out, x, err := rqRun(t, rqRules(`{"profile":"kimi","unsupported_content":"reject"}`),
		`{"model":"kimi-k2.5","max_tokens":10,"messages":[`+user(png+`,{"type":"text","text":"what is it?"}`)+`]}`)
	transformtest.Accepted(t, []byte(out), err, `{"model":"kimi-k2.5","messages":[{"role":"user","content":[`+
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},{"type":"text","text":"what is it?"}]}],"max_tokens":10}`)
	if d := rqDecisions(x); len(d) != 0 {
		t.Errorf("decisions %q", d)
	}
}

// TestMessagesToChatServerTools: server tools are dropped by default, a
// choice naming one degrading to auto (never forced); server_tools
// reject refuses the request, naming the tool.
func TestMessagesToChatServerTools(t *testing.T) {
	const tools = `,"tools":[` + rqBashTool + `,{"type":"web_fetch_20250910","name":"web_fetch","max_uses":3}],"tool_choice":{"type":"tool","name":"web_fetch"}`
	body := rqBody(`,"thinking":{"type":"disabled"}`+tools, rqUserList)

	out, x, err := rqRun(t, rqRules(`{"profile":"deepseek","server_tools":"drop"}`), body)
	transformtest.Accepted(t, []byte(out), err, rqChat(`,"tools":[`+rqBashChat+`],"tool_choice":"auto"`+rqMax+`,"thinking":{"type":"disabled"}`, rqChatList))
	if got := strings.Join(rqDecisions(x), ", "); got != "web_fetch drop, tool_choice degrade, cache_control drop" {
		t.Errorf("decisions %q", got)
	}

	out, _, err = rqRun(t, rqRules(`{"profile":"deepseek","server_tools":"reject"}`), body)
	var outB []byte
	if out != "" {
		outB = []byte(out)
	}
	e := transformtest.Rejected(t, outB, err, "unsupported_tool")
	const msg = `messages_to_chat: tools[1] is the server tool "web_fetch" (web_fetch_20250910), which runs at Anthropic: a Chat Completions upstream has no such tool`
	if e.Status != 400 || e.Param != "tools[1].type" || e.Message != msg {
		t.Errorf("%d param %q message %q", e.Status, e.Param, e.Message)
	}

	// Reject refuses server tools only: client tools, and server tool
	// blocks left in the history, pass as they do under drop.
	out, _, err = rqRun(t, rqRules(`{"profile":"deepseek","server_tools":"reject"}`), rqBody(`,"tools":[`+rqBashTool+`]`, rqUserList,
		`{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}},{"type":"text","text":"Found."}]}`))
	transformtest.Accepted(t, []byte(out), err, rqChat(`,"tools":[`+rqBashChat+`]`+rqMax, rqChatList, `{"role":"assistant","content":"Found."}`))
}

// TestProvidersVision: which models of each profile read images.
func TestProvidersVision(t *testing.T) {
	tests := []struct {
		profile string
		vision  []string
		text    []string
	}{
		{"deepseek", nil, []string{"deepseek-v4-pro", "deepseek-v4-flash", "deepseek-chat", "deepseek-reasoner"}},
		{"kimi", []string{"kimi-k2.5", "kimi-k2.6", "kimi-k2.7-code", "moonshot-v1-8k-vision-preview", "Moonshot-V1-128K-Vision-Preview", "kimi-latest"},
			[]string{"kimi-k2-0905-preview", "kimi-k2-thinking", "kimi-k2-turbo-preview", "moonshot-v1-8k", "moonshot-v1-auto"}},
		{"glm", []string{"glm-4.5v", "GLM-4.6V", "glm-4.6v-flash", "glm-4v-plus"}, []string{"glm-4.6", "glm-4.7", "glm-5", "glm-4.5-air"}},
		{"qwen", []string{"qwen-vl-max", "qwen3-vl-plus", "qwen2.5-vl-72b-instruct", "qvq-max", "qwen3-omni-flash", "qwen-omni-turbo"},
			[]string{"qwen3-max", "qwen-plus", "qwen3-coder-plus", "qwq-plus"}},
		{"minimax", nil, []string{"MiniMax-M2", "MiniMax-M2.7-highspeed", "MiniMax-M3"}},
		{"openai_chat", []string{"gpt-5", "gpt-4o", "gpt-4.1-mini", "o3", "gpt-4-turbo"}, []string{"gpt-3.5-turbo", "gpt-4", "gpt-4-0613", "o3-mini", "gpt-oss-120b"}},
	}
	for _, tc := range tests {
		p, ok := providers.Lookup(tc.profile)
		if !ok {
			t.Fatal(tc.profile)
		}
		for _, m := range tc.vision {
			if !p.Vision(m) {
				t.Errorf("%s %s: want vision", tc.profile, m)
			}
		}
		for _, m := range tc.text {
			if p.Vision(m) {
				t.Errorf("%s %s: want text only", tc.profile, m)
			}
		}
	}
}
