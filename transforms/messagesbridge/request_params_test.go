package messagesbridge

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/internal/providers"
	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// TestMessagesToChatParameters maps the members beside the conversation.
func TestMessagesToChatParameters(t *testing.T) {
	tests := []struct {
		name, config, body, want string
		decisions                []string
	}{
		{
			name:   "sampling kept, top_k and Anthropic-only members dropped, stop_sequences become stop, a short user_id becomes user",
			config: "",
			body: `{"model":"gpt-5.5","max_tokens":100,"messages":[{"role":"user","content":"q"}],"temperature":0.2,"top_p":0.9,"top_k":40,` +
				`"stop_sequences":["END","\n\nHuman:"],"metadata":{"user_id":"u-42"},"context_management":{"edits":[]},"service_tier":"auto",` +
				`"container":"c1","inference_geo":"us","cache_control":{"type":"ephemeral"},"anthropic_version":"2023-06-01","stream":false}`,
			want: `{"model":"gpt-5.5","messages":[{"role":"user","content":"q"}],"temperature":0.2,"top_p":0.9,"stop":["END","\n\nHuman:"],"user":"u-42",` +
				`"stream":false,"max_completion_tokens":100}`,
			decisions: []string{"top_k drop", "context_management drop", "service_tier drop", "container drop", "inference_geo drop", "cache_control drop", "anthropic_version drop"},
		},
		{
			name:   "Claude Code's user_id (a JSON document with a device id) and other metadata stay behind",
			config: "",
			body: `{"model":"gpt-5.5","max_tokens":100,"messages":[{"role":"user","content":"q"}],` +
				`"metadata":{"user_id":"{\"device_id\":\"0000000000000000000000000000000000000000000000000000000000000000\",\"session_id\":\"s\"}","tag":"x"}}`,
			want:      `{"model":"gpt-5.5","messages":[{"role":"user","content":"q"}],"max_completion_tokens":100}`,
			decisions: []string{"metadata.user_id drop", "metadata drop"},
		},
		{
			name:   "a stream asks for usage",
			config: "",
			body:   `{"model":"gpt-5.5","max_tokens":100,"messages":[{"role":"user","content":"q"}],"stream":true}`,
			want:   `{"model":"gpt-5.5","messages":[{"role":"user","content":"q"}],"stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":100}`,
		},
		{
			name:   "output_config.format json_schema becomes response_format; effort without thinking goes with output_config",
			config: "",
			body: `{"model":"gpt-5.5","max_tokens":100,"messages":[{"role":"user","content":"title?"}],` +
				`"output_config":{"effort":"medium","format":{"type":"json_schema","schema":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}}}}`,
			want: `{"model":"gpt-5.5","messages":[{"role":"user","content":"title?"}],"max_completion_tokens":100,` +
				`"response_format":{"type":"json_schema","json_schema":{"name":"response","strict":true,"schema":{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}}}}`,
			decisions: []string{"output_config drop"},
		},
		{
			name:   "DeepSeek takes json_object only: the schema is told in the system message",
			config: `{"profile":"deepseek"}`,
			body: `{"model":"deepseek-v4-flash","max_tokens":100,"system":"Make a title.","messages":[{"role":"user","content":"title?"}],` +
				`"output_config":{"format":{"type":"json_schema","schema":{"type": "object", "properties": {"title": {"type": "string"}}}}}}`,
			want: `{"model":"deepseek-v4-flash","messages":[{"role":"system","content":"Make a title.\n\nAnswer with a JSON object that matches this JSON schema: {\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\"}}}"},` +
				`{"role":"user","content":"title?"}],"max_tokens":100,"response_format":{"type":"json_object"}}`,
			decisions: []string{"output_config drop", "output_config.format degrade"},
		},
		{
			name:      "max_tokens over the model's cap is clamped (deepseek-chat: 8192)",
			config:    `{"profile":"deepseek"}`,
			body:      `{"model":"deepseek-chat","max_tokens":32000,"messages":[{"role":"user","content":"q"}]}`,
			want:      `{"model":"deepseek-chat","messages":[{"role":"user","content":"q"}],"max_tokens":8192}`,
			decisions: []string{"max_tokens clamp"},
		},
		{
			name:   "no max_tokens: the profile's default; a model without a known cap is not clamped",
			config: `{"profile":"kimi","max_tokens_field":"max_completion_tokens"}`,
			body:   `{"model":"my-kimi-proxy","messages":[{"role":"user","content":"q"}]}`,
			want:   `{"model":"my-kimi-proxy","messages":[{"role":"user","content":"q"}],"max_completion_tokens":32768}`,
		},
		{
			name:   "not a Messages request member order: a repeated model is read last, as upstreams do",
			config: "",
			body:   `{"model":"a","model":"b","max_tokens":1,"messages":[{"role":"user","content":"q"}]}`,
			want:   `{"model":"b","messages":[{"role":"user","content":"q"}],"max_completion_tokens":1}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, x, err := rqRun(t, rqRules(tc.config), tc.body)
			transformtest.Accepted(t, []byte(out), err, tc.want)
			if got, want := strings.Join(rqDecisions(x), ", "), strings.Join(tc.decisions, ", "); got != want {
				t.Errorf("decisions %q, want %q", got, want)
			}
		})
	}
}

// TestMessagesToChatThinking maps thinking and output_config.effort to
// each profile's knob.
func TestMessagesToChatThinking(t *testing.T) {
	tests := []struct {
		profile, thinking, effort string
		stream                    bool
		want                      string // the members after the token limit
		thinks                    bool
	}{
		{"deepseek", `{"type":"disabled"}`, "", false, `,"thinking":{"type":"disabled"}`, false},
		{"deepseek", `{"type":"enabled","budget_tokens":1024}`, "", false, `,"thinking":{"type":"enabled"},"reasoning_effort":"high"`, true},
		{"deepseek", `{"type":"enabled","budget_tokens":31999}`, "", false, `,"thinking":{"type":"enabled"},"reasoning_effort":"high"`, true},
		{"deepseek", `{"type":"enabled","budget_tokens":64000}`, "", false, `,"thinking":{"type":"enabled"},"reasoning_effort":"max"`, true},
		{"deepseek", `{"type":"adaptive","display":"summarized"}`, "max", false, `,"thinking":{"type":"enabled"},"reasoning_effort":"max"`, true},
		{"deepseek", "", "", false, ``, false},
		{"openai_chat", `{"type":"enabled","budget_tokens":1024}`, "", false, `,"reasoning_effort":"low"`, true},
		{"openai_chat", `{"type":"enabled","budget_tokens":8000}`, "", false, `,"reasoning_effort":"medium"`, true},
		{"openai_chat", `{"type":"enabled","budget_tokens":31999}`, "", false, `,"reasoning_effort":"high"`, true},
		{"openai_chat", `{"type":"enabled","budget_tokens":100000}`, "", false, `,"reasoning_effort":"xhigh"`, true},
		{"openai_chat", `{"type":"adaptive"}`, "", false, `,"reasoning_effort":"high"`, true},
		{"openai_chat", `{"type":"adaptive"}`, "low", false, `,"reasoning_effort":"low"`, true},
		{"openai_chat", `{"type":"enabled","budget_tokens":31999}`, "medium", false, `,"reasoning_effort":"medium"`, true},
		{"openai_chat", `{"type":"disabled"}`, "", false, `,"reasoning_effort":"none"`, false},
		{"kimi", `{"type":"disabled"}`, "", false, `,"thinking":{"type":"disabled"}`, false},
		{"kimi", `{"type":"adaptive"}`, "high", false, ``, true},
		{"glm", `{"type":"disabled"}`, "", false, `,"thinking":{"type":"disabled"}`, false},
		{"qwen", `{"type":"adaptive"}`, "", true, `,"enable_thinking":true`, true},
		{"qwen", `{"type":"adaptive"}`, "", false, `,"enable_thinking":false`, true},
		{"minimax", `{"type":"adaptive"}`, "", false, `,"reasoning_split":true,"thinking":{"type":"adaptive"}`, true},
		{"bedrock", `{"type":"adaptive"}`, "", false, ``, true},
	}
	for _, tc := range tests {
		t.Run(tc.profile+"/"+tc.thinking+"/"+tc.effort, func(t *testing.T) {
			extra := ""
			if tc.thinking != "" {
				extra += `,"thinking":` + tc.thinking
			}
			if tc.effort != "" {
				extra += `,"output_config":{"effort":"` + tc.effort + `"}`
			}
			stream := "false"
			if tc.stream {
				stream = "true"
			}
			out, rec, err := rqDirect(t, MessagesToChat{Profile: tc.profile}, "", `{"model":"m","max_tokens":100,"stream":`+stream+extra+`,"messages":[{"role":"user","content":"q"}]}`)
			field := "max_tokens"
			if tc.profile == "openai_chat" {
				field = "max_completion_tokens"
			}
			want := `{"model":"m","messages":[{"role":"user","content":"q"}],"stream":` + stream
			if tc.stream {
				want += `,"stream_options":{"include_usage":true}`
			}
			transformtest.Accepted(t, []byte(out), err, want+`,"`+field+`":100`+tc.want+`}`)
			if rec.thinking != tc.thinks {
				t.Errorf("record thinking = %v, want %v", rec.thinking, tc.thinks)
			}
		})
	}
}

// TestMessagesToChatRecord: what the request leaves for the response side.
func TestMessagesToChatRecord(t *testing.T) {
	body := `{"model":"claude-opus-5-5","max_tokens":500000,"stream":true,"stop_sequences":["##"],"thinking":{"type":"adaptive"},` +
		`"tools":[{"name":"Bash","input_schema":{}},{"name":"Later","defer_loading":true},{"type":"web_search_20250305","name":"web_search"}],` +
		`"messages":[{"role":"user","content":"q"}]}`
	// A rule before the bridge routed the model; the record keeps the
	// client's.
	routed := strings.Replace(body, "claude-opus-5-5", "deepseek-v4-pro", 1)
	_, rec, err := rqDirect(t, MessagesToChat{Profile: "deepseek"}, "claude-opus-5-5", routed)
	if err != nil {
		t.Fatal(err)
	}
	want := &bridgeRecord{bridged: true, model: "claude-opus-5-5", maxTokens: 393216, stopSequences: []string{"##"}, stream: true, thinking: true,
		tools: map[string]bool{"Bash": true, "Later": true}}
	if !reflect.DeepEqual(rec, want) {
		t.Errorf("record %+v, want %+v", rec, want)
	}
}

// TestMessagesToChatPassesOtherProtocols: a Chat request is no business
// of this bridge.
func TestMessagesToChatPassesOtherProtocols(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"q"}],"max_tokens":5}`
	x := transformtest.Begin(t, transformtest.Chain(t, rqRules("")), transforms.ProtocolChat, []byte(body))
	x.SetUpstreamPath("/v1/chat/completions")
	out, err := x.RewriteRequest([]byte(body))
	if err != nil || string(out) != body || x.WantsResponse() {
		t.Fatalf("changed a Chat request: %s %v", out, err)
	}
}

// TestMessagesToChatRefuses: what the bridge cannot read or send is a 400
// naming it, before anything goes upstream.
func TestMessagesToChatRefuses(t *testing.T) {
	const q = `{"role":"user","content":"q"}`
	tests := []struct {
		name, body, code, param string
	}{
		{"not an object", `["messages"]`, "invalid_request", ""},
		{"no messages", `{"model":"m","max_tokens":1}`, "invalid_request", "messages"},
		{"messages not an array", `{"model":"m","max_tokens":1,"messages":{"role":"user"}}`, "invalid_request", "messages"},
		{"a message not an object", rqBody("", `"hi"`), "invalid_request", "messages[0]"},
		{"an unknown role", rqBody("", `{"role":"developer","content":"x"}`), "invalid_request", "messages[0].role"},
		{"content missing", rqBody("", `{"role":"user"}`), "invalid_request", "messages[0].content"},
		{"a block without a type", rqBody("", `{"role":"user","content":[{"text":"x"}]}`), "invalid_request", "messages[0].content[0].type"},
		{"an unknown block type", rqBody("", `{"role":"user","content":[{"type":"hologram"}]}`), "unsupported_content", "messages[0].content[0].type"},
		// (A PDF or an image the upstream cannot take is a placeholder
		// or a 400 as unsupported_content says: request_rich_test.go.)
		{"an image source of an unknown type", rqBody("", `{"role":"user","content":[{"type":"image","source":{"type":"bytes","data":"x"}}]}`), "invalid_request", "messages[0].content[0].source"},
		{"a base64 image without its media_type", rqBody("", `{"role":"user","content":[{"type":"image","source":{"type":"base64","data":"x"}}]}`), "invalid_request", "messages[0].content[0].source"},
		{"a document source of an unknown type", rqBody("", `{"role":"user","content":[{"type":"document","source":{"type":"bytes"}}]}`), "invalid_request", "messages[0].content[0].source"},
		// Blocks without a source: a 400, not a crash of the request.
		{"an image without a source", rqBody("", `{"role":"user","content":[{"type":"image"}]}`), "invalid_request", "messages[0].content[0].source"},
		{"a document without a source", rqBody("", `{"role":"user","content":[{"type":"document","title":"t"}]}`), "invalid_request", "messages[0].content[0].source"},
		{"a tool result's image without a source", rqBody("", q, `{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"Read","input":{}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":null}]}]}`), "invalid_request", "messages[2].content[0].content[0].source"},
		{"system of numbers", rqBody(`,"system":7`, q), "invalid_request", "system"},
		{"a system block not text", rqBody(`,"system":[{"type":"image"}]`, q), "invalid_request", "system[0]"},
		{"max_tokens zero", `{"model":"m","max_tokens":0,"messages":[` + q + `]}`, "invalid_request", "max_tokens"},
		{"max_tokens a string", `{"model":"m","max_tokens":"10","messages":[` + q + `]}`, "invalid_request", "max_tokens"},
		{"stop_sequences of numbers", rqBody(`,"stop_sequences":[1]`, q), "invalid_request", "stop_sequences"},
		{"thinking of an unknown type", rqBody(`,"thinking":{"type":"deep"}`, q), "invalid_request", "thinking.type"},
		{"a negative budget", rqBody(`,"thinking":{"type":"enabled","budget_tokens":-1}`, q), "invalid_request", "thinking.budget_tokens"},
		{"an unknown effort", rqBody(`,"output_config":{"effort":"extreme"}`, q), "invalid_request", "output_config.effort"},
		{"a format not json_schema", rqBody(`,"output_config":{"format":{"type":"xml"}}`, q), "invalid_request", "output_config.format"},
		{"tools not an array", rqBody(`,"tools":{}`, q), "invalid_request", "tools"},
		{"a tool without a name", rqBody(`,"tools":[{"input_schema":{}}]`, q), "invalid_request", "tools[0].name"},
		{"an unknown tool type", rqBody(`,"tools":[{"type":"hologram_20990101","name":"h"}]`, q), "unsupported_tool", "tools[0].type"},
		{"two tools with one name", rqBody(`,"tools":[{"name":"a"},{"name":"a"}]`, q), "tool_name_conflict", "tools[1].name"},
		{"an unknown tool_choice", rqBody(`,"tools":[{"name":"a"}],"tool_choice":{"type":"all"}`, q), "invalid_request", "tool_choice.type"},
		{"a tool_use without a name", rqBody("", q, `{"role":"assistant","content":[{"type":"tool_use","id":"t","input":{}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}`), "invalid_request", "messages[1].content[0].name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := rqRun(t, rqRules(`{"profile":"deepseek"}`), tc.body)
			var outB []byte
			if out != "" {
				outB = []byte(out)
			}
			e := transformtest.Rejected(t, outB, err, tc.code)
			if e.Param != tc.param || !strings.HasPrefix(e.Message, "messages_to_chat: ") {
				t.Errorf("param %q (want %q), message %q", e.Param, tc.param, e.Message)
			}
		})
	}
	// A body that is not JSON the gateway reads: the engine's 400
	// invalid_json.
	_, _, err := rqRun(t, rqRules(""), `{"model":"m","messages":[NaN]}`)
	var te *transforms.Error
	if !errors.As(err, &te) || te.Code != "invalid_json" {
		t.Fatalf("err = %v, want invalid_json", err)
	}
}

// TestMessagesToChatCaddyfile reads every option, and refuses bad values.
func TestMessagesToChatCaddyfile(t *testing.T) {
	d := caddyfile.NewTestDispenser(`messages_to_chat {
		profile kimi
		max_tokens_field max_completion_tokens
		reasoning strip
		system_messages system
		max_reasoning 1MiB
	}`)
	var got MessagesToChat
	if err := got.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	want := MessagesToChat{Profile: "kimi", MaxTokensField: "max_completion_tokens", Reasoning: "strip", SystemMessages: "system", MaxReasoning: 1 << 20}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if err := got.Provision(transformtest.Context(t)); err != nil {
		t.Fatal(err)
	}
	if got.knobs.MaxTokensField != "max_completion_tokens" || got.knobs.Reasoning != providers.ReasoningStrip || got.maxReasoning != 1<<20 {
		t.Errorf("knobs %+v, max_reasoning %d", got.knobs, got.maxReasoning)
	}
	for _, bad := range []string{
		"messages_to_chat {\n profile nosuch\n}",
		"messages_to_chat {\n max_tokens_field tokens\n}",
		"messages_to_chat {\n reasoning always\n}",
		"messages_to_chat {\n system_messages developer\n}",
		"messages_to_chat {\n max_reasoning lots\n}",
		"messages_to_chat {\n frobnicate on\n}",
	} {
		var m MessagesToChat
		err := m.UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad))
		if err == nil {
			err = m.Provision(transformtest.Context(t))
		}
		if err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestOutputCaps reads the provider table's caps per model glob.
func TestOutputCaps(t *testing.T) {
	for _, tc := range []struct {
		profile, model string
		want           int
	}{
		{"deepseek", "deepseek-v4-pro", 393216},
		{"deepseek", "deepseek-v4-flash", 393216},
		{"deepseek", "deepseek-chat", 8192},
		{"deepseek", "deepseek-reasoner", 65536},
		{"deepseek", "deepseek-chat-v9", 0},
		{"kimi", "kimi-k2.6", 262144},
		{"kimi", "moonshot-v1-8k-vision-preview", 8192},
		{"glm", "glm-4.5-air", 98304},
		{"glm", "GLM-4.6", 131072},
		{"qwen", "qwen3-max-preview", 65536},
		{"qwen", "qwen-max", 8192},
		{"qwen", "qwen-plus", 0},
		{"minimax", "MiniMax-M2.1-lightning", 131072},
		{"minimax", "MiniMax-M2", 204800},
		{"openai_chat", "gpt-5.5", 0},
	} {
		p, _ := providers.Lookup(tc.profile)
		if got := p.OutputCap(tc.model); got != tc.want {
			t.Errorf("%s %s: cap %d, want %d", tc.profile, tc.model, got, tc.want)
		}
	}
	if !slices.ContainsFunc(providers.Names(), func(n string) bool { p, _ := providers.Lookup(n); return len(p.OutputCaps) > 0 }) {
		t.Error("no profile has caps")
	}
}
