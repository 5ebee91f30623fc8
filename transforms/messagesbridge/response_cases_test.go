package messagesbridge

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// A call without an id gets one made from the completion's id, its place
// and its name: the stream and the JSON answer agree, and another answer's
// call does not repeat it.
func TestMessagesCallIDMinted(t *testing.T) {
	rules := rsRules("openai_chat", "")
	id := callID("", "chatcmpl-7", 0, "now")
	if !strings.HasPrefix(id, "call_") || len(id) != 5+24 || id == callID("", "chatcmpl-8", 0, "now") || id == callID("", "chatcmpl-7", 1, "now") {
		t.Fatalf("minted ids: %s", id)
	}
	got := rsStream(t, rules, rsChunk(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"now","arguments":""}}]}`, "null")+
		rsChunk(`{}`, `"tool_calls"`)+rsDone)
	rsEqual(t, got, rsStart+rsToolStart(0, id, "now")+rsStop(0)+rsEnd(`{"stop_reason":"tool_use","stop_sequence":null}`, rsNoUsage))
	rsSameMessage(t, got, rsJSON(t, rules, rsCompletion(`{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"now","arguments":""}}]}`, "tool_calls", "")))
}

// A name streamed in pieces is announced whole, once its arguments begin.
func TestMessagesStreamNameInPieces(t *testing.T) {
	got := rsStream(t, rsRules("glm", ""), rsChunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"mcp__files__"}}]}`, "null")+
		rsChunk(`{"tool_calls":[{"index":0,"function":{"name":"read"}}]}`, "null")+
		rsChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"p\":1}"}}]}`, "null")+
		rsChunk(`{}`, `"tool_calls"`)+rsDone)
	rsEqual(t, got, rsStart+rsToolStart(0, "call_1", "mcp__files__read")+rsArgs(0, `{"p":1}`)+rsStop(0)+
		rsEnd(`{"stop_reason":"tool_use","stop_sequence":null}`, rsNoUsage))
}

// A call whose held arguments outgrow max_call_buffer ends the stream: the
// error event, the code the gateway counts, and nothing after.
func TestMessagesStreamMaxCallBuffer(t *testing.T) {
	upstream := rsChunk(`{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"A","arguments":"{\"x\":"}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"B","arguments":"{\"y\":\"0123456789"}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"0123456789\"}"}}]}`, "null") +
		rsChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}`, "null") +
		rsChunk(`{}`, `"tool_calls"`) + rsDone
	x := rsExchange(t, rsRules("openai_chat", ""))
	x.Limits.MaxCallBuffer = 24
	s := x.NewStream()
	var out strings.Builder
	var err error
	for _, c := range strings.SplitAfter(upstream, "\n\n") {
		if err = s.Write([]byte(c)); err != nil {
			break
		}
		out.Write(s.Output())
	}
	out.Write(s.Output())
	var ab *transforms.StreamAbort
	if !errors.As(err, &ab) || ab.Code != "max_call_buffer_exceeded" || !ab.Reported {
		t.Fatalf("error %v", err)
	}
	got := rsNorm(out.String())
	// (A's block stays open: its input never completed.)
	rsEqual(t, got, rsStart+rsToolStart(0, "a", "A")+rsArgs(0, `{"x":`)+
		rsError("api_error", `the arguments of tool call "B" exceed the gateway's max_call_buffer of 24 bytes (max_call_buffer_exceeded)`))
	if x.StreamError() != "max_call_buffer_exceeded" {
		t.Fatalf("stream error %q", x.StreamError())
	}
}

// Reasoning past max_reasoning still streams, but the signature is the cut
// mark, which no later turn replays; the JSON answer alike.
func TestMessagesMaxReasoning(t *testing.T) {
	rules := `[{"transform":"messages_to_chat_response_harness","config":{"profile":"deepseek","max_reasoning":8,"record":{"model":"claude-opus-5-5"}}}]`
	got := rsStream(t, rules, rsChunk(`{"reasoning_content":"12345"}`, "null")+rsChunk(`{"reasoning_content":"67890"}`, "null")+
		rsChunk(`{"content":"ok"}`, `"stop"`)+rsDone)
	rsEqual(t, got, rsStart+rsThinkingStart(0)+rsThinking(0, "12345")+rsThinking(0, "67890")+
		rsDelta(0, "signature_delta", "signature", cutSignature("deepseek"))+rsStop(0)+
		rsTextStart(1)+rsText(1, "ok")+rsStop(1)+rsEnd(`{"stop_reason":"end_turn","stop_sequence":null}`, rsNoUsage))
	x := rsExchange(t, rules)
	out, err := x.RewriteResponse([]byte(rsCompletion(`{"role":"assistant","content":"ok","reasoning_content":"1234567890"}`, "stop", "")))
	if err != nil {
		t.Fatal(err)
	}
	rsSameMessage(t, got, rsNorm(string(out)))
	if d := strings.Join(rsDecisions(x), "; "); d != "reasoning truncate" {
		t.Fatalf("decisions: %s", d)
	}
	if cutSignature("deepseek") != "llmt1.eyJwIjoiZGVlcHNlZWsiLCJjdXQiOnRydWV9" {
		t.Fatalf("the cut mark is not responses_to_chat's: %s", cutSignature("deepseek"))
	}
}

// A stop at one of the client's stop sequences, as vLLM and SGLang say it,
// is stop_sequence with the sequence; a stop string the client did not
// send is an end_turn.
func TestMessagesStopSequence(t *testing.T) {
	rules := rsRules("openai_chat", `{"model":"claude-opus-5-5","stop_sequences":["\n\nHuman:","END"]}`)
	chunk := func(field, value string) string {
		return `data: {"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop","` + field + `":` + value + `}]}` + "\n\n"
	}
	got := rsStream(t, rules, rsChunk(`{"content":"The end"}`, "null")+chunk("stop_reason", `"END"`)+rsDone)
	rsEqual(t, got, rsStart+rsTextStart(0)+rsText(0, "The end")+rsStop(0)+rsEnd(`{"stop_reason":"stop_sequence","stop_sequence":"END"}`, rsNoUsage))
	got = rsStream(t, rules, chunk("matched_stop", `"\n\nHuman:"`)+rsDone)
	rsEqual(t, got, rsStart+rsEnd(`{"stop_reason":"stop_sequence","stop_sequence":"\n\nHuman:"}`, rsNoUsage))
	got = rsStream(t, rules, chunk("stop_reason", `151645`)+rsDone)
	rsEqual(t, got, rsStart+rsEnd(`{"stop_reason":"end_turn","stop_sequence":null}`, rsNoUsage))

	body := rsJSON(t, rules, `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"The end"},"finish_reason":"stop","stop_reason":"END"}]}`)
	want := `{"id":"msg_ID","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"text","text":"The end"}],"stop_reason":"stop_sequence","stop_sequence":"END","usage":` + rsNoUsage + `}`
	if body != want {
		t.Fatalf("JSON:\n%s\nwant:\n%s", body, want)
	}
}

// The ends of a stream: usage with the finish (Moonshot's, in the choice)
// ends the message there, and what follows is nothing; [DONE] or the end
// of the stream after a finish without usage ends it with zeros; keep-alive
// comments become pings.
func TestMessagesStreamEnds(t *testing.T) {
	rules := rsRules("kimi", "")
	t.Run("usage in the finish chunk", func(t *testing.T) {
		got := rsStream(t, rules, ": keep-alive\n\n"+rsChunk(`{"content":"Hi"}`, "null")+
			`data: {"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":20,"completion_tokens":2,"cached_tokens":16}}]}`+"\n\n"+
			rsChunk(`{"content":"after the end"}`, "null")+rsDone)
		rsEqual(t, got, rsStart+rsEv("ping", `{"type":"ping"}`)+rsTextStart(0)+rsText(0, "Hi")+rsStop(0)+
			rsEnd(`{"stop_reason":"end_turn","stop_sequence":null}`, rsUsage(4, 2, 0, 16, -1)))
	})
	want := rsStart + rsTextStart(0) + rsText(0, "Hi") + rsStop(0) + rsEnd(`{"stop_reason":"end_turn","stop_sequence":null}`, rsNoUsage)
	t.Run("[DONE] without usage", func(t *testing.T) {
		rsEqual(t, rsStream(t, rules, rsChunk(`{"content":"Hi"}`, `"stop"`)+rsDone), want)
	})
	t.Run("EOF without usage", func(t *testing.T) {
		rsEqual(t, rsStream(t, rules, rsChunk(`{"content":"Hi"}`, `"stop"`)), want)
	})
	t.Run("usage before the finish", func(t *testing.T) {
		got := rsStream(t, rules, rsChunk(`{"content":"Hi"}`, "null")+rsUsageChunk(`{"prompt_tokens":5,"completion_tokens":1}`)+rsChunk(`{}`, `"stop"`)+rsDone)
		rsEqual(t, got, rsStart+rsTextStart(0)+rsText(0, "Hi")+rsStop(0)+rsEnd(`{"stop_reason":"end_turn","stop_sequence":null}`, rsUsage(5, 1, 0, 0, -1)))
	})
	t.Run("an empty stream", func(t *testing.T) {
		rsEqual(t, rsStream(t, rules, ""), rsStart+rsError("api_error", "the upstream's stream ended before the answer was finished"))
	})
}

// The JSON answer's edge cases: arguments that are not an object are kept
// under _raw, absent ones are {}; a refusal is the text; MiniMax's
// reasoning_details are the thinking; an unknown finish_reason is an
// end_turn; a call to an undeclared tool passes, with a decision; a
// finish_reason that says the upstream failed is an error.
func TestMessagesJSONCases(t *testing.T) {
	rules := rsRules("minimax", `{"model":"claude-opus-5-5","tools":["Read"]}`)
	x := rsExchange(t, rules)
	out, err := x.RewriteResponse([]byte(rsCompletion(`{"role":"assistant","content":null,"reasoning_details":[{"type":"reasoning.text","text":"Think "},{"type":"reasoning.text","text":"twice."}],`+
		`"tool_calls":[{"id":"c1","type":"function","function":{"name":"Read","arguments":"{\"path\": "}},{"id":"c2","type":"function","function":{"name":"Glob","arguments":""}}]}`, "tool_calls", "")))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"msg_ID","type":"message","role":"assistant","model":"claude-opus-5-5","content":[` +
		`{"type":"thinking","thinking":"Think twice.","signature":` + rsStr(sealed("minimax", "Think twice.")) + `},` +
		`{"type":"tool_use","id":"c1","name":"Read","input":{"_raw":"{\"path\": "}},` +
		`{"type":"tool_use","id":"c2","name":"Glob","input":{}}],"stop_reason":"tool_use","stop_sequence":null,"usage":` + rsNoUsage + `}`
	if got := rsNorm(string(out)); got != want {
		t.Fatalf("JSON:\n%s\nwant:\n%s", got, want)
	}
	if d := strings.Join(rsDecisions(x), "; "); d != "Read wrap_arguments; Glob pass" {
		t.Fatalf("decisions: %s", d)
	}

	x = rsExchange(t, rules)
	out, err = x.RewriteResponse([]byte(rsCompletion(`{"role":"assistant","content":"","refusal":"I can't help with that."}`, "weird", "")))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(rsNorm(string(out))), `{"id":"msg_ID","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"text","text":"I can't help with that."}],"stop_reason":"end_turn","stop_sequence":null,"usage":`+rsNoUsage+`}`)
	if d := strings.Join(rsDecisions(x), "; "); d != "stop_reason end_turn" {
		t.Fatalf("decisions: %s", d)
	}

	x = rsExchange(t, rules)
	if _, err := x.RewriteResponse([]byte(rsCompletion(`{"role":"assistant","content":"par"}`, "insufficient_system_resource", ""))); err == nil {
		t.Fatal("a failed answer passed as a message")
	}
	x = rsExchange(t, rules)
	if out, _ := x.RewriteResponse([]byte(`{"error":{"message":"boom"}}`)); string(out) != `{"error":{"message":"boom"}}` {
		t.Fatalf("a body that is no completion changed: %s", out)
	}
}

// reasoning beside reasoning_details (OpenRouter sends both) is read once.
func TestMessagesStreamReasoningOnce(t *testing.T) {
	got := rsStream(t, rsRules("openai_chat", ""), rsChunk(`{"reasoning":"Once.","reasoning_details":[{"type":"reasoning.text","text":"Once."}]}`, "null")+
		rsChunk(`{"content":"ok"}`, `"stop"`)+rsDone)
	rsEqual(t, got, rsStart+rsThinkingStart(0)+rsThinking(0, "Once.")+rsSignature(0, "openai_chat", "Once.")+rsStop(0)+
		rsTextStart(1)+rsText(1, "ok")+rsStop(1)+rsEnd(`{"stop_reason":"end_turn","stop_sequence":null}`, rsNoUsage))
}

// The answer Claude Code accepted (response-tool-use.sse: a Write call
// whose arguments came in 9-character pieces that cut escapes and
// multi-byte text), sent by a Chat upstream in the same pieces, gives the
// same content blocks, deltas and stop.
func TestMessagesStreamClaudeCodeToolUseShape(t *testing.T) {
	raw, err := os.ReadFile("../../../shared/fixtures/claude-code/response-tool-use.sse")
	if err != nil {
		t.Skip("the Claude Code fixtures are not here:", err)
	}
	_, ref, err := rsEvents(strings.ReplaceAll(string(raw), "\r\n", "\n"))
	if err != nil {
		t.Fatal(err)
	}
	upstream := ""
	for _, e := range ref {
		if d, ok := e["delta"].(map[string]any); ok && d["type"] == "input_json_delta" {
			upstream += rsChunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+rsStr(d["partial_json"].(string))+`}}]}`, "null")
		}
	}
	upstream = rsChunk(`{"tool_calls":[{"index":0,"id":"toolu_mock000000000001","type":"function","function":{"name":"Write","arguments":""}}]}`, "null") +
		upstream + rsChunk(`{}`, `"tool_calls"`) + rsDone
	_, got, err := rsEvents(rsStream(t, rsRules("deepseek", ""), upstream))
	if err != nil {
		t.Fatal(err)
	}
	keep := func(evs []map[string]any) []map[string]any {
		var out []map[string]any
		for _, e := range evs {
			switch e["type"] {
			case "content_block_start", "content_block_stop":
				out = append(out, e)
			case "content_block_delta":
				// The fixture's first delta is an empty string, which the
				// bridge has no cause to send.
				if d := e["delta"].(map[string]any); d["partial_json"] != "" {
					out = append(out, e)
				}
			case "message_delta":
				out = append(out, map[string]any{"type": "message_delta", "delta": e["delta"]})
			}
		}
		return out
	}
	if g, w := keep(got), keep(ref); !reflect.DeepEqual(g, w) {
		t.Fatalf("events differ:\n got %v\nwant %v", g, w)
	}
}

// White space written between a call's pieces (some models do) neither
// opens a text block nor closes the call.
func TestMessagesStreamSpaceBetweenCallPieces(t *testing.T) {
	got := rsStream(t, rsRules("qwen", ""), rsChunk(`{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"Read","arguments":"{\"a\":"}}]}`, "null")+
		rsChunk(`{"content":"\n"}`, "null")+
		rsChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}`, "null")+
		rsChunk(`{}`, `"tool_calls"`)+rsDone)
	rsEqual(t, got, rsStart+rsToolStart(0, "c", "Read")+rsArgs(0, `{"a":`)+rsArgs(0, `1}`)+rsStop(0)+
		rsEnd(`{"stop_reason":"tool_use","stop_sequence":null}`, rsNoUsage))
}
