package preflight_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	tt "github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// chatText streams content in pieces of n bytes and finishes with stop.
func chatText(text string, n int) string {
	head := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",`
	chunks := []string{head + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`}
	for len(text) > 0 {
		k := min(n, len(text))
		for k < len(text) && !utf8.RuneStart(text[k]) {
			k++ // upstreams split text between characters
		}
		chunks = append(chunks, head+`"choices":[{"index":0,"delta":{"content":`+jsonString(text[:k])+`},"finish_reason":null}]}`)
		text = text[k:]
	}
	chunks = append(chunks, head+`"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	return tt.ChatSSE(chunks...)
}

func TestChatStreamMarkupBecomesCalls(t *testing.T) {
	cases := map[string]string{
		"glm":    "<tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>a.txt</arg_value>\n<arg_key>limit</arg_key>\n<arg_value>10</arg_value>\n</tool_call>",
		"dsml":   "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"read_file\">\n<｜DSML｜parameter name=\"path\" string=\"true\">a.txt</｜DSML｜parameter>\n<｜DSML｜parameter name=\"limit\" string=\"false\">10</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>",
		"hermes": "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\", \"limit\": 10}}\n</tool_call>",
	}
	for name, markup := range cases {
		for _, piece := range []int{1, 5, 1000} {
			up, _ := script(chatText("Let me read it.\n"+markup, piece))
			x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolChat, []byte(chatReq))
			out, sent := tt.RunStream(t, x, []byte(chatReq), up, 7)
			if len(sent) != 1 {
				t.Fatalf("%s: %d upstream requests", name, len(sent))
			}
			chunks, done := tt.ChatChunks(t, out)
			if !done {
				t.Fatalf("%s: no [DONE]", name)
			}
			var text strings.Builder
			var calls []any
			finish := ""
			for _, c := range chunks {
				for _, ch := range c["choices"].([]any) {
					ch := ch.(map[string]any)
					d := ch["delta"].(map[string]any)
					if s, ok := d["content"].(string); ok {
						text.WriteString(s)
					}
					if tc, ok := d["tool_calls"].([]any); ok {
						calls = append(calls, tc...)
					}
					if f, ok := ch["finish_reason"].(string); ok {
						finish += f
					}
				}
			}
			if text.String() != "Let me read it.\n" || finish != "tool_calls" || len(calls) != 1 {
				t.Fatalf("%s/%d: text %q finish %q calls %v\n%s", name, piece, text.String(), finish, calls, out)
			}
			c := calls[0].(map[string]any)
			fn := c["function"].(map[string]any)
			var args map[string]any
			_ = json.Unmarshal([]byte(fn["arguments"].(string)), &args)
			if fn["name"] != "read_file" || args["path"] != "a.txt" || args["limit"] != float64(10) || c["index"] != float64(0) ||
				!strings.HasPrefix(c["id"].(string), "call_") {
				t.Fatalf("%s: call %v", name, c)
			}
		}
	}
}

func TestChatStreamTextMentioningMarkupStaysText(t *testing.T) {
	text := "Use <tool_call> tags? No: here is <b>bold</b> and a < b."
	for _, piece := range []int{1, 4, 1000} {
		up, _ := script(chatText(text, piece))
		x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolChat, []byte(chatReq))
		out, _ := tt.RunStream(t, x, []byte(chatReq), up, 4096)
		chunks, _ := tt.ChatChunks(t, out)
		var got strings.Builder
		for _, c := range chunks {
			for _, ch := range c["choices"].([]any) {
				if s, ok := ch.(map[string]any)["delta"].(map[string]any)["content"].(string); ok {
					got.WriteString(s)
				}
			}
		}
		if got.String() != text {
			t.Fatalf("piece %d: text %q, want %q", piece, got.String(), text)
		}
	}
}

// responsesText streams a message's text in pieces of about n bytes.
func responsesText(text string, n int) string {
	var evs []string
	evs = append(evs,
		`{"type":"response.created","sequence_number":"SEQ","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":"SEQ","output_index":0,"item":{"type":"message","id":"msg_1","status":"in_progress","role":"assistant","content":[]}}`,
		`{"type":"response.content_part.added","sequence_number":"SEQ","item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`)
	rest := text
	for len(rest) > 0 {
		k := min(n, len(rest))
		for k < len(rest) && !utf8.RuneStart(rest[k]) {
			k++
		}
		evs = append(evs, `{"type":"response.output_text.delta","sequence_number":"SEQ","item_id":"msg_1","output_index":0,"content_index":0,"delta":`+jsonString(rest[:k])+`}`)
		rest = rest[k:]
	}
	part := `{"type":"output_text","text":` + jsonString(text) + `,"annotations":[]}`
	msg := `{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[` + part + `]}`
	evs = append(evs,
		`{"type":"response.output_text.done","sequence_number":"SEQ","item_id":"msg_1","output_index":0,"content_index":0,"text":`+jsonString(text)+`}`,
		`{"type":"response.content_part.done","sequence_number":"SEQ","item_id":"msg_1","output_index":0,"content_index":0,"part":`+part+`}`,
		`{"type":"response.output_item.done","sequence_number":"SEQ","output_index":0,"item":`+msg+`}`,
		`{"type":"response.completed","sequence_number":"SEQ","response":{"id":"resp_1","object":"response","status":"completed","output":[`+msg+`],"usage":`+usage1+`}}`)
	return seqSSE(evs...)
}

func TestResponsesStreamMarkupBecomesCalls(t *testing.T) {
	markup := "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"read_file\">\n<｜DSML｜parameter name=\"path\" string=\"true\">a.txt</｜DSML｜parameter>\n<｜DSML｜parameter name=\"limit\" string=\"false\">10</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>"
	for _, piece := range []int{1, 6, 1000} {
		for _, n := range tt.ChunkSizes {
			up, _ := script(responsesText("Let me read it.\n"+markup, piece))
			// A Responses upstream's own stream is searched on request.
			x := tt.Begin(t, tt.Chain(t, `[{"transform":"tools_preflight","config":{"markup":"on"}}]`), transforms.ProtocolResponses, []byte(responsesReq))
			out, sent := tt.RunStream(t, x, []byte(responsesReq), up, n)
			if len(sent) != 1 {
				t.Fatalf("%d upstream requests", len(sent))
			}
			evs := tt.Events(t, out)
			if got := tt.ConcatDeltas(evs, "response.output_text.delta"); got != "Let me read it.\n" {
				t.Fatalf("piece %d chunk %d: text deltas %q\n%s", piece, n, got, out)
			}
			var done []string
			for _, e := range evs {
				switch e["type"] {
				case "response.output_text.done":
					if e["text"] != "Let me read it.\n" {
						t.Errorf("text.done %q", e["text"])
					}
				case "response.output_item.done":
					b, _ := json.Marshal(e["item"])
					done = append(done, string(b))
					if e["output_index"].(float64) != float64(len(done)-1) {
						t.Errorf("item %d at output_index %v", len(done)-1, e["output_index"])
					}
				}
			}
			if len(done) != 2 {
				t.Fatalf("items done %v", done)
			}
			call := evs[len(evs)-2]["item"].(map[string]any)
			var args map[string]any
			_ = json.Unmarshal([]byte(call["arguments"].(string)), &args)
			if call["type"] != "function_call" || call["name"] != "read_file" || args["path"] != "a.txt" || args["limit"] != float64(10) {
				t.Fatalf("call %v", call)
			}
			final := evs[len(evs)-1]["response"].(map[string]any)["output"].([]any)
			if len(final) != 2 || final[1].(map[string]any)["call_id"] != call["call_id"] {
				t.Fatalf("final output %v", final)
			}
			if msg := final[0].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]; msg != "Let me read it.\n" {
				t.Fatalf("final message text %q", msg)
			}
		}
	}
}

func TestJSONMarkupBecomesCalls(t *testing.T) {
	markup := "<tool_call>\n<function=read_file>\n<parameter=path>\na.txt\n</parameter>\n<parameter=limit>\n10\n</parameter>\n</function>\n</tool_call>"
	t.Run("chat", func(t *testing.T) {
		req := strings.Replace(chatReq, `"stream":true`, `"stream":false`, 1)
		up, _ := script(`{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + jsonString("On it.\n"+markup) + `},"finish_reason":"stop"}],"usage":` + chatUsage1 + `}`)
		x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolChat, []byte(req))
		out, _, err := tt.RunJSON(t, x, []byte(req), up)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Choices []struct {
				Message struct {
					Content   string `json:"content"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(out, &m); err != nil || len(m.Choices) != 1 {
			t.Fatalf("%v %s", err, out)
		}
		c := m.Choices[0]
		if c.Message.Content != "On it.\n" || c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 ||
			c.Message.ToolCalls[0].Function.Name != "read_file" || c.Message.ToolCalls[0].Function.Arguments != `{"path":"a.txt","limit":10}` {
			t.Fatalf("%s", out)
		}
	})
	t.Run("responses", func(t *testing.T) {
		req := strings.Replace(responsesReq, `"stream":true`, `"stream":false`, 1)
		up, _ := script(`{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":` + jsonString("On it.\n"+markup) + `,"annotations":[]}]}],"usage":` + usage1 + `}`)
		// A Responses upstream's text is searched with markup on.
		x := tt.Begin(t, tt.Chain(t, `[{"transform":"tools_preflight","config":{"markup":"on"}}]`), transforms.ProtocolResponses, []byte(req))
		out, _, err := tt.RunJSON(t, x, []byte(req), up)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Output []struct {
				Type      string `json:"type"`
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
				Content   []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		}
		if err := json.Unmarshal(out, &m); err != nil || len(m.Output) != 2 {
			t.Fatalf("%v %s", err, out)
		}
		if m.Output[0].Content[0].Text != "On it.\n" || m.Output[1].Type != "function_call" || m.Output[1].Name != "read_file" || m.Output[1].Arguments != `{"path":"a.txt","limit":10}` {
			t.Fatalf("%s", out)
		}
	})
}

// TestJSONMarkupFollowsTheOption: a complete answer's text is searched
// where a stream's is: not under markup off, and not in a Responses
// upstream's answer under auto; the body then passes as it came.
func TestJSONMarkupFollowsTheOption(t *testing.T) {
	markup := "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>"
	t.Run("chat/off", func(t *testing.T) {
		req := strings.Replace(chatReq, `"stream":true`, `"stream":false`, 1)
		answer := `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + jsonString("On it.\n"+markup) + `},"finish_reason":"stop"}],"usage":` + chatUsage1 + `}`
		up, _ := script(answer)
		x := tt.Begin(t, tt.Chain(t, `[{"transform":"tools_preflight","config":{"markup":"off"}}]`), transforms.ProtocolChat, []byte(req))
		out, _, err := tt.RunJSON(t, x, []byte(req), up)
		if err != nil || string(out) != answer {
			t.Fatalf("%v\n%s\nwant\n%s", err, out, answer)
		}
	})
	t.Run("responses/auto", func(t *testing.T) {
		req := strings.Replace(responsesReq, `"stream":true`, `"stream":false`, 1)
		answer := `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":` + jsonString("On it.\n"+markup) + `,"annotations":[]}]}],"usage":` + usage1 + `}`
		up, _ := script(answer)
		x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolResponses, []byte(req))
		out, _, err := tt.RunJSON(t, x, []byte(req), up)
		if err != nil || string(out) != answer {
			t.Fatalf("%v\n%s\nwant\n%s", err, out, answer)
		}
	})
}

// TestResponsesUpstreamTextIsNotSearchedByDefault: a Responses upstream
// parses its calls itself; its text keeps the engine's fast way.
func TestResponsesUpstreamTextIsNotSearchedByDefault(t *testing.T) {
	text := "See <tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>"
	answer := responsesText(text, 5)
	up, _ := script(answer)
	x := tt.Begin(t, tt.Chain(t, rules), transforms.ProtocolResponses, []byte(responsesReq))
	out, _ := tt.RunStream(t, x, []byte(responsesReq), up, 4096)
	if out != answer {
		t.Fatalf("the stream changed:\n%s", out)
	}
}
