package fakeprovider

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func newNoTools() *Provider {
	p := newTestDemo()
	p.NoTools = true
	return p
}

func TestNoToolsRejects(t *testing.T) {
	const user = `{"role":"user","content":"hi"}`
	for _, tc := range []struct {
		name, path, body, param, message, code string
	}{
		{
			name:    "responses tools",
			path:    "/v1/responses",
			body:    `{"model":"llama3","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`,
			param:   "tools",
			message: "llama3 does not support tools (request member 'tools')",
		},
		{
			name:    "responses empty tools still count",
			path:    "/v1/responses",
			body:    `{"model":"llama3","input":"hi","tools":[]}`,
			param:   "tools",
			message: "llama3 does not support tools (request member 'tools')",
		},
		{
			name:    "responses tool_choice alone",
			path:    "/v1/responses",
			body:    `{"model":"llama3","input":"hi","tool_choice":"none"}`,
			param:   "tool_choice",
			message: "llama3 does not support tools (request member 'tool_choice')",
		},
		{
			name:    "responses parallel_tool_calls",
			path:    "/v1/responses",
			body:    `{"model":"llama3","input":"hi","parallel_tool_calls":false}`,
			param:   "parallel_tool_calls",
			message: "llama3 does not support tools (request member 'parallel_tool_calls')",
		},
		{
			name:    "no model named",
			path:    "/v1/responses",
			body:    `{"input":"hi","tools":null}`,
			param:   "tools",
			message: "this model does not support tools (request member 'tools')",
		},
		{
			name:    "responses function_call item",
			path:    "/v1/responses",
			body:    `{"model":"llama3","input":[` + user + `,{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`,
			param:   "input[1].type",
			message: "llama3 does not support tools (input[1] is a 'function_call' item)",
		},
		{
			name:    "responses function_call_output item",
			path:    "/v1/responses",
			body:    `{"model":"llama3","input":[{"type":"function_call_output","call_id":"c","output":"ok"}]}`,
			param:   "input[0].type",
			message: "llama3 does not support tools (input[0] is a 'function_call_output' item)",
		},
		{
			name:    "responses custom_tool_call item",
			path:    "/v1/responses",
			body:    `{"model":"llama3","input":[` + user + `,{"type":"reasoning","summary":[]},{"type":"custom_tool_call","call_id":"c","name":"apply_patch","input":"x"}]}`,
			param:   "input[2].type",
			message: "llama3 does not support tools (input[2] is a 'custom_tool_call' item)",
		},
		{
			name:    "responses local_shell_call item",
			path:    "/v1/responses",
			body:    `{"model":"llama3","input":[{"type":"local_shell_call","call_id":"c","action":{}}]}`,
			param:   "input[0].type",
			message: "llama3 does not support tools (input[0] is a 'local_shell_call' item)",
		},
		{
			name:    "responses message with role tool",
			path:    "/v1/responses",
			body:    `{"model":"llama3","input":[` + user + `,{"type":"message","role":"tool","content":"ok"}]}`,
			param:   "input[1].role",
			message: "Invalid value: 'tool'. Supported values are: 'user', 'assistant', 'system', and 'developer'.",
			code:    "invalid_value",
		},
		{
			name:    "responses easy message without type, role tool",
			path:    "/v1/responses",
			body:    `{"model":"llama3","input":[{"role":"tool","content":"ok"}]}`,
			param:   "input[0].role",
			message: "Invalid value: 'tool'. Supported values are: 'user', 'assistant', 'system', and 'developer'.",
			code:    "invalid_value",
		},
		{
			name:    "responses message without role",
			path:    "/v1/responses",
			body:    `{"model":"llama3","input":[{"type":"message","content":"ok"}]}`,
			param:   "input[0].role",
			message: "Missing required parameter: 'input[0].role'.",
			code:    "missing_required_parameter",
		},
		{
			name:    "responses tool_result content part",
			path:    "/v1/responses",
			body:    `{"model":"llama3","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"tool_result","tool_use_id":"t","content":"ok"}]}]}`,
			param:   "input[0].content[1].type",
			message: "Invalid value: 'tool_result'. Supported values are: 'input_text', 'output_text', 'input_image', 'input_file', and 'refusal'.",
			code:    "invalid_value",
		},
		{
			name:    "responses content part without type",
			path:    "/v1/responses",
			body:    `{"model":"llama3","input":[{"type":"message","role":"assistant","content":[{"text":"a"}]}]}`,
			param:   "input[0].content[0].type",
			message: "Missing required parameter: 'input[0].content[0].type'.",
			code:    "missing_required_parameter",
		},
		{
			name:    "chat tools",
			path:    "/v1/chat/completions",
			body:    `{"model":"llama3","messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f"}}]}`,
			param:   "tools",
			message: "llama3 does not support tools (request member 'tools')",
		},
		{
			name:    "chat legacy functions",
			path:    "/v1/chat/completions",
			body:    `{"model":"llama3","messages":[` + user + `],"functions":[{"name":"f"}]}`,
			param:   "functions",
			message: "llama3 does not support tools (request member 'functions')",
		},
		{
			name:    "chat legacy function_call",
			path:    "/v1/chat/completions",
			body:    `{"model":"llama3","messages":[` + user + `],"function_call":"auto"}`,
			param:   "function_call",
			message: "llama3 does not support tools (request member 'function_call')",
		},
		{
			name:    "chat members are checked in a fixed order",
			path:    "/v1/chat/completions",
			body:    `{"model":"llama3","function_call":"auto","messages":[` + user + `],"tool_choice":"auto"}`,
			param:   "tool_choice",
			message: "llama3 does not support tools (request member 'tool_choice')",
		},
		{
			name:    "chat tool message",
			path:    "/v1/chat/completions",
			body:    `{"model":"llama3","messages":[` + user + `,{"role":"assistant","content":"x"},{"role":"tool","tool_call_id":"c","content":"ok"}]}`,
			param:   "messages[2].role",
			message: "llama3 does not support tools (messages[2] has role 'tool')",
		},
		{
			name:    "chat function message",
			path:    "/v1/chat/completions",
			body:    `{"model":"llama3","messages":[{"role":"function","name":"f","content":"ok"}]}`,
			param:   "messages[0].role",
			message: "llama3 does not support tools (messages[0] has role 'function')",
		},
		{
			name:    "chat assistant tool_calls",
			path:    "/v1/chat/completions",
			body:    `{"model":"llama3","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			param:   "messages[1].tool_calls",
			message: "llama3 does not support tools (messages[1] carries 'tool_calls')",
		},
		{
			name:    "chat assistant empty tool_calls",
			path:    "/v1/chat/completions",
			body:    `{"model":"llama3","messages":[{"role":"assistant","content":"x","tool_calls":[]}]}`,
			param:   "messages[0].tool_calls",
			message: "llama3 does not support tools (messages[0] carries 'tool_calls')",
		},
		{
			name:    "chat assistant function_call",
			path:    "/v1/chat/completions",
			body:    `{"model":"llama3","messages":[{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}}]}`,
			param:   "messages[0].function_call",
			message: "llama3 does not support tools (messages[0] carries 'function_call')",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := demoDo(t, newNoTools(), http.MethodPost, tc.path, tc.body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status = %d, body %s", rec.Code, rec.Body)
			}
			if got, want := rec.Body.String(), strictErrorBody(tc.message, tc.param, tc.code); got != want {
				t.Errorf("body:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestNoToolsOffLetsToolsThrough guards the default: the same request that
// a no-tools provider refuses is scripted as before without the flag.
func TestNoToolsOffLetsToolsThrough(t *testing.T) {
	body := `{"model":"llama3","input":"hi","tools":[{"type":"function","name":"apply_patch","parameters":{"type":"object"}}]}`
	rec := demoDo(t, newTestDemo(), http.MethodPost, "/v1/responses", body)
	if rec.Code != http.StatusOK || gjson.Get(rec.Body.String(), "output.1.type").String() != "function_call" {
		t.Fatalf("status %d, body %s", rec.Code, rec.Body)
	}
}

func TestNoToolsAnswersText(t *testing.T) {
	const responsesInput = `[{"role":"system","content":"be brief"},{"type":"reasoning","summary":[]},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"earlier"}]},` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"},{"type":"input_image","image_url":"data:,"}]}]`
	const chatMessages = `[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"again"}]`
	const threeMessages = "I cannot call tools, so here is plain text: I read 3 input messages."
	const fourMessages = "I cannot call tools, so here is plain text: I read 4 input messages."

	t.Run("responses json", func(t *testing.T) {
		rec := demoDo(t, newNoTools(), http.MethodPost, "/v1/responses", `{"model":"llama3","input":`+responsesInput+`}`)
		if rec.Code != http.StatusOK {
			t.Fatalf("status = %d, body %s", rec.Code, rec.Body)
		}
		out := gjson.Get(rec.Body.String(), "output")
		if n := len(out.Array()); n != 1 {
			t.Fatalf("%d output items, want one message: %s", n, out.Raw)
		}
		if got := out.Get("0.content.0.text").String(); got != threeMessages {
			t.Errorf("text = %q, want %q", got, threeMessages)
		}
		if got := gjson.Get(rec.Body.String(), "tools").Raw; got != "[]" {
			t.Errorf("tools = %s", got)
		}
	})

	t.Run("responses string input streamed", func(t *testing.T) {
		rec := demoDo(t, newNoTools(), http.MethodPost, "/v1/responses", `{"model":"llama3","input":"hi","stream":true}`)
		if rec.Code != http.StatusOK {
			t.Fatalf("status = %d, body %s", rec.Code, rec.Body)
		}
		const want = "I cannot call tools, so here is plain text: I read 1 input message."
		var deltas strings.Builder
		var done, completed string
		for _, f := range parseSSE(t, rec.Body.String()) {
			ev := gjson.Parse(f.data)
			switch f.event {
			case "response.output_text.delta":
				deltas.WriteString(ev.Get("delta").String())
			case "response.output_text.done":
				done = ev.Get("text").String()
			case "response.completed":
				completed = ev.Get("response.output.0.content.0.text").String()
				if n := len(ev.Get("response.output").Array()); n != 1 {
					t.Errorf("%d output items in response.completed", n)
				}
			case "response.function_call_arguments.delta", "response.function_call_arguments.done":
				t.Errorf("function call event %s", f.event)
			}
		}
		if deltas.String() != want || done != want || completed != want {
			t.Errorf("deltas %q, done %q, completed %q; want %q", deltas.String(), done, completed, want)
		}
	})

	t.Run("chat json", func(t *testing.T) {
		rec := demoDo(t, newNoTools(), http.MethodPost, "/v1/chat/completions", `{"model":"llama3","messages":`+chatMessages+`}`)
		if rec.Code != http.StatusOK {
			t.Fatalf("status = %d, body %s", rec.Code, rec.Body)
		}
		choice := gjson.Get(rec.Body.String(), "choices.0")
		if got := choice.Get("message.content").String(); got != fourMessages {
			t.Errorf("content = %q, want %q", got, fourMessages)
		}
		if choice.Get("message.tool_calls").Exists() || choice.Get("finish_reason").String() != "stop" {
			t.Errorf("choice = %s", choice.Raw)
		}
	})

	t.Run("chat streamed", func(t *testing.T) {
		rec := demoDo(t, newNoTools(), http.MethodPost, "/v1/chat/completions",
			`{"model":"llama3","messages":`+chatMessages+`,"stream":true,"stream_options":{"include_usage":true}}`)
		if rec.Code != http.StatusOK {
			t.Fatalf("status = %d, body %s", rec.Code, rec.Body)
		}
		var text strings.Builder
		finish := ""
		for _, c := range chunks(t, rec.Body.String()) {
			d := c.Get("choices.0.delta")
			if d.Get("tool_calls").Exists() {
				t.Errorf("tool_calls delta: %s", c.Raw)
			}
			text.WriteString(d.Get("content").String())
			if f := c.Get("choices.0.finish_reason"); f.Type == gjson.String {
				finish = f.String()
			}
		}
		if text.String() != fourMessages || finish != "stop" {
			t.Errorf("text %q, finish %q", text.String(), finish)
		}
	})
}
