package chatbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/streambuf"
	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// --- JSON responses ----------------------------------------------------------

// rcJSON bridges a non-streaming request with config and turns the Chat
// completion upstream into the client's body.
func rcJSON(t *testing.T, config, upstream string) (string, *transforms.Exchange) {
	t.Helper()
	x := rcExchange(t, rcRules(config), "/v1/responses")
	if _, err := x.RewriteRequest([]byte(`{"model":"gpt-5.5","input":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	if !x.WantsResponse() {
		t.Fatal("the bridge does not want the response")
	}
	out, err := x.RewriteResponse([]byte(upstream))
	if err != nil {
		t.Fatal(err)
	}
	return string(out), x
}

// rcEcho is what every Response object echoes of a request that sets none
// of the members it echoes.
const rcEcho = `,"instructions":null,"metadata":{},"parallel_tool_calls":true,"temperature":1,"tool_choice":"auto","tools":[],"top_p":1,"access_programs":{"cyber":"standard"}`

const rcCompletionHead = `{"id":"chatcmpl-1","object":"chat.completion","created":1764400000,"model":"deepseek-v4-pro","choices":[{"index":0,"message":`

func TestResponsesToChatJSON(t *testing.T) {
	const noUsage = `,"usage":null,"error":null,"incomplete_details":null` + rcEcho + `}`
	tests := []struct{ name, config, upstream, want string }{
		{
			name:   "reasoning, text and calls become items; DeepSeek usage",
			config: `{"profile":"deepseek"}`,
			upstream: rcCompletionHead + `{"role":"assistant","content":"Running both.","reasoning_content":"Need ls and pwd.","tool_calls":[` +
				`{"id":"functions.exec_command:0","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\":\"ls\"}"}},` +
				`{"id":"functions.exec_command:1","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\":\"pwd\"}"}}]},"finish_reason":"tool_calls"}],` +
				`"usage":{"prompt_tokens":41211,"completion_tokens":96,"total_tokens":41307,"prompt_cache_hit_tokens":40960,"prompt_cache_miss_tokens":251,"completion_tokens_details":{"reasoning_tokens":64}}}`,
			want: `{"id":"resp_ID","object":"response","created_at":1764400000,"status":"completed","model":"gpt-5.5","output":[` +
				`{"id":"rs_ID","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"Need ls and pwd."}],"encrypted_content":"` + textEnvelopeOf("deepseek", []byte("Need ls and pwd.")) + `"},` +
				`{"id":"msg_ID","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Running both.","annotations":[],"logprobs":[]}]},` +
				`{"id":"fc_ID_0","type":"function_call","status":"completed","call_id":"functions.exec_command:0","name":"exec_command","arguments":"{\"cmd\":\"ls\"}"},` +
				`{"id":"fc_ID_1","type":"function_call","status":"completed","call_id":"functions.exec_command:1","name":"exec_command","arguments":"{\"cmd\":\"pwd\"}"}],` +
				`"usage":{"input_tokens":41211,"input_tokens_details":{"cached_tokens":40960,"cache_write_tokens":0},"output_tokens":96,"output_tokens_details":{"reasoning_tokens":64},"total_tokens":41307},` +
				`"error":null,"incomplete_details":null` + rcEcho + `}`,
		},
		{
			name:     "OpenAI usage details; a missing total is the sum; details always present",
			config:   "",
			upstream: rcCompletionHead + `{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":4}}}`,
			want: `{"id":"resp_ID","object":"response","created_at":1764400000,"status":"completed","model":"gpt-5.5","output":[` +
				`{"id":"msg_ID","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hi","annotations":[],"logprobs":[]}]}],` +
				`"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":4,"cache_write_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15},` +
				`"error":null,"incomplete_details":null` + rcEcho + `}`,
		},
		{
			name:     "a call without an id gets one of ours; no usage",
			config:   "",
			upstream: rcCompletionHead + `{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"now","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
			want: `{"id":"resp_ID","object":"response","created_at":1764400000,"status":"completed","model":"gpt-5.5","output":[` +
				`{"id":"fc_ID_0","type":"function_call","status":"completed","call_id":"call_ID_0","name":"now","arguments":"{}"}]` + noUsage,
		},
		{
			name:     "stop with tool calls is completed",
			config:   "",
			upstream: rcCompletionHead + `{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"now","arguments":"{}"}}]},"finish_reason":"stop"}]}`,
			want: `{"id":"resp_ID","object":"response","created_at":1764400000,"status":"completed","model":"gpt-5.5","output":[` +
				`{"id":"fc_ID_0","type":"function_call","status":"completed","call_id":"c1","name":"now","arguments":"{}"}]` + noUsage,
		},
		{
			name:     "length is incomplete: max_output_tokens",
			config:   `{"profile":"deepseek"}`,
			upstream: rcCompletionHead + `{"role":"assistant","content":"","reasoning_content":"Thinking very long"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":7,"total_tokens":10}}`,
			want: `{"id":"resp_ID","object":"response","created_at":1764400000,"status":"incomplete","model":"gpt-5.5","output":[` +
				`{"id":"rs_ID","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"Thinking very long"}],"encrypted_content":"` + textEnvelopeOf("deepseek", []byte("Thinking very long")) + `"}],` +
				`"usage":{"input_tokens":3,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":10},` +
				`"error":null,"incomplete_details":{"reason":"max_output_tokens"}` + rcEcho + `}`,
		},
		{
			name:     "content_filter is incomplete: content_filter",
			config:   "",
			upstream: rcCompletionHead + `{"role":"assistant","content":null},"finish_reason":"content_filter"}]}`,
			want:     `{"id":"resp_ID","object":"response","created_at":1764400000,"status":"incomplete","model":"gpt-5.5","output":[],"usage":null,"error":null,"incomplete_details":{"reason":"content_filter"}` + rcEcho + `}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := rcJSON(t, tc.config, tc.upstream)
			transformtest.JSONEqual(t, []byte(rcNorm(out)), tc.want)
			transformtest.SDKResponse(t, []byte(out))
			if m := transformtest.MissingRequired([]byte(out)); len(m) > 0 {
				t.Fatalf("the response lacks the members openai-go requires: %v", m)
			}
		})
	}
}

func TestResponsesToChatJSONErrorPassesThrough(t *testing.T) {
	for _, body := range []string{
		`{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 140000 tokens.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
		`{"error":{"message":"thinking is enabled but reasoning_content is missing in assistant tool call message at index 2","type":"invalid_request_error"}}`,
		`upstream exploded`,
	} {
		if out, _ := rcJSON(t, `{"profile":"kimi"}`, body); out != body {
			t.Errorf("error body changed:\n%s\n--- want\n%s", out, body)
		}
	}
}

// TestResponsesToChatJSONEmptyArguments: a call with empty arguments is
// "{}", as on the stream (§6.3 rule 4), so the client can parse them.
func TestResponsesToChatJSONEmptyArguments(t *testing.T) {
	out, _ := rcJSON(t, "", rcCompletionHead+`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"now","arguments":""}}]},"finish_reason":"tool_calls"}]}`)
	transformtest.JSONEqual(t, []byte(rcNorm(out)), `{"id":"resp_ID","object":"response","created_at":1764400000,"status":"completed","model":"gpt-5.5","output":[`+
		`{"id":"fc_ID_0","type":"function_call","status":"completed","call_id":"c1","name":"now","arguments":"{}"}],"usage":null,"error":null,"incomplete_details":null`+rcEcho+`}`)
}

// TestResponsesToChatJSONCutCall: a call cut short by the token limit is
// not delivered as a completed call the client would run, as on the
// stream.
func TestResponsesToChatJSONCutCall(t *testing.T) {
	out, _ := rcJSON(t, `{"profile":"deepseek"}`, rcCompletionHead+`{"role":"assistant","content":"","reasoning_content":"R","tool_calls":[`+
		`{"id":"c1","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n*** Add File: a.txt\\n+hel"}}]},"finish_reason":"length"}]}`)
	transformtest.JSONEqual(t, []byte(rcNorm(out)), `{"id":"resp_ID","object":"response","created_at":1764400000,"status":"incomplete","model":"gpt-5.5","output":[`+
		`{"id":"rs_ID","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"R"}],"encrypted_content":"`+textEnvelopeOf("deepseek", []byte("R"))+`"}],`+
		`"usage":null,"error":null,"incomplete_details":{"reason":"max_output_tokens"}`+rcEcho+`}`)
}

// TestResponsesToChatJSONMessageCutShort: a message the token limit cut short
// is an incomplete item, as OpenAI reports it, in JSON and on the stream.
func TestResponsesToChatJSONMessageCutShort(t *testing.T) {
	out, _ := rcJSON(t, "", rcCompletionHead+`{"role":"assistant","content":"The answer is"},"finish_reason":"length"}]}`)
	transformtest.JSONEqual(t, []byte(rcNorm(out)), `{"id":"resp_ID","object":"response","created_at":1764400000,"status":"incomplete","model":"gpt-5.5","output":[`+
		`{"id":"msg_ID","type":"message","status":"incomplete","role":"assistant","content":[{"type":"output_text","text":"The answer is","annotations":[],"logprobs":[]}]}],`+
		`"usage":null,"error":null,"incomplete_details":{"reason":"max_output_tokens"}`+rcEcho+`}`)
}

func TestResponsesToChatStreamMessageCutShort(t *testing.T) {
	got := rcStream(t, rcRules(""), rcData(rcChunk(`{"role":"assistant","content":"The answer is"}`, "null"), rcChunk(`{}`, `"length"`))+"data: [DONE]\n\n")
	msg := `{"id":"msg_ID_1","type":"message","status":"incomplete","role":"assistant","content":[{"type":"output_text","text":"The answer is","annotations":[],"logprobs":[]}]}`
	want := rcSeq(rcJoin(rcStart(), rcMsgOpen("msg_ID_1", 0), []string{rcMsgDelta("msg_ID_1", 0, "The answer is")},
		[]string{
			rcTextDone("msg_ID_1", 0, "The answer is"),
			rcPart("response.content_part.done", "msg_ID_1", 0, rcMsgPart("The answer is")),
			rcItemDone(0, msg),
			rcTerminal("response.incomplete", rcResp("incomplete", []string{msg}, "null", "null", `{"reason":"max_output_tokens"}`)),
		})...)
	if got != want {
		t.Fatalf("stream\n%s\n--- want\n%s", got, want)
	}
}

// --- streams -----------------------------------------------------------------

const rcChunkHead = `{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764400000,"model":"deepseek-v4-pro","choices":[`

func rcChunk(delta, finish string) string {
	return rcChunkHead + `{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
}

func rcUsageChunk(usage string) string {
	return rcChunkHead + `],"usage":` + usage + `}`
}

// rcData frames Chat chunks as data-only events, without [DONE].
func rcData(chunks ...string) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString("data: " + c + "\n\n")
	}
	return b.String()
}

// rcSeq frames expected events as the engine writes them for a Responses
// client: an event line with the type, and the data with its "#" sequence
// number replaced by the next one from 0. Entries starting with ":" are
// comments and pass as they are.
func rcSeq(evs ...string) string {
	var b strings.Builder
	n := 0
	for _, e := range evs {
		if strings.HasPrefix(e, ":") {
			b.WriteString(e + "\n\n")
			continue
		}
		d := strings.Replace(e, `"sequence_number":#`, `"sequence_number":`+strconv.Itoa(n), 1)
		var v struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(d), &v); err != nil {
			panic("bad expected event " + d)
		}
		b.WriteString("event: " + v.Type + "\ndata: " + d + "\n\n")
		n++
	}
	return b.String()
}

func rcJoin(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// Expected event builders, one per event shape of responses-chat-bridge.md §2.6.
func rcResp(status string, output []string, usage, errObj, incomplete string) string {
	return `{"id":"resp_ID","object":"response","created_at":1764400000,"status":"` + status + `","model":"gpt-5.5","output":[` + strings.Join(output, ",") +
		`],"usage":` + usage + `,"error":` + errObj + `,"incomplete_details":` + incomplete + rcEcho + `}`
}

func rcStart() []string {
	r := rcResp("in_progress", nil, "null", "null", "null")
	return []string{
		`{"type":"response.created","sequence_number":#,"response":` + r + `}`,
		`{"type":"response.in_progress","sequence_number":#,"response":` + r + `}`,
	}
}

func rcTerminal(typ, resp string) string {
	return `{"type":"` + typ + `","sequence_number":#,"response":` + resp + `}`
}

func rcAdded(idx int, item string) string {
	return `{"type":"response.output_item.added","sequence_number":#,"output_index":` + strconv.Itoa(idx) + `,"item":` + item + `}`
}

func rcItemDone(idx int, item string) string {
	return `{"type":"response.output_item.done","sequence_number":#,"output_index":` + strconv.Itoa(idx) + `,"item":` + item + `}`
}

func rcPart(typ, id string, idx int, part string) string {
	return `{"type":"` + typ + `","sequence_number":#,"item_id":"` + id + `","output_index":` + strconv.Itoa(idx) + `,"content_index":0,"part":` + part + `}`
}

// rcRsItem is a finished reasoning item. env is its envelope; envDeepSeek
// and envKimi stand for the envelope a whole item of that profile gets,
// which seals its text (the version-1 constants are what earlier turns
// carry).
func rcRsItem(id, env, text string) string {
	switch env {
	case envDeepSeek:
		env = textEnvelopeOf("deepseek", []byte(text))
	case envKimi:
		env = textEnvelopeOf("kimi", []byte(text))
	case envMiniMax:
		env = textEnvelopeOf("minimax", []byte(text))
	}
	return `{"id":"` + id + `","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":` + rcStr(text) + `}],"encrypted_content":"` + env + `"}`
}

func rcRsOpen(id string, idx int) []string {
	return []string{
		rcAdded(idx, `{"id":"`+id+`","type":"reasoning","summary":[],"content":[]}`),
		rcPart("response.content_part.added", id, idx, `{"type":"reasoning_text","text":""}`),
	}
}

func rcRsDelta(id string, idx int, d string) string {
	return `{"type":"response.reasoning_text.delta","sequence_number":#,"item_id":"` + id + `","output_index":` + strconv.Itoa(idx) + `,"content_index":0,"delta":` + rcStr(d) + `}`
}

func rcRsClose(id string, idx int, env, text string) []string {
	return []string{
		`{"type":"response.reasoning_text.done","sequence_number":#,"item_id":"` + id + `","output_index":` + strconv.Itoa(idx) + `,"content_index":0,"text":` + rcStr(text) + `}`,
		rcPart("response.content_part.done", id, idx, `{"type":"reasoning_text","text":`+rcStr(text)+`}`),
		rcItemDone(idx, rcRsItem(id, env, text)),
	}
}

func rcMsgPart(text string) string {
	return `{"type":"output_text","text":` + rcStr(text) + `,"annotations":[],"logprobs":[]}`
}

func rcMsgItem(id, text string) string {
	return `{"id":"` + id + `","type":"message","status":"completed","role":"assistant","content":[` + rcMsgPart(text) + `]}`
}

func rcMsgOpen(id string, idx int) []string {
	return []string{
		rcAdded(idx, `{"id":"`+id+`","type":"message","status":"in_progress","role":"assistant","content":[]}`),
		rcPart("response.content_part.added", id, idx, rcMsgPart("")),
	}
}

func rcMsgDelta(id string, idx int, d string) string {
	return `{"type":"response.output_text.delta","sequence_number":#,"item_id":"` + id + `","output_index":` + strconv.Itoa(idx) + `,"content_index":0,"delta":` + rcStr(d) + `,"logprobs":[]}`
}

func rcTextDone(id string, idx int, text string) string {
	return `{"type":"response.output_text.done","sequence_number":#,"item_id":"` + id + `","output_index":` + strconv.Itoa(idx) + `,"content_index":0,"text":` + rcStr(text) + `}`
}

func rcMsgClose(id string, idx int, text string) []string {
	return []string{
		rcTextDone(id, idx, text),
		rcPart("response.content_part.done", id, idx, rcMsgPart(text)),
		rcItemDone(idx, rcMsgItem(id, text)),
	}
}

func rcFcItem(idx int, status, callID, name, args string) string {
	return `{"id":"fc_ID_` + strconv.Itoa(idx) + `","type":"function_call","status":"` + status + `","call_id":` + rcStr(callID) + `,"name":"` + name + `","arguments":` + rcStr(args) + `}`
}

func rcFcAdded(idx int, callID, name string) string {
	return rcAdded(idx, rcFcItem(idx, "in_progress", callID, name, ""))
}

func rcFcDelta(idx int, d string) string {
	return `{"type":"response.function_call_arguments.delta","sequence_number":#,"item_id":"fc_ID_` + strconv.Itoa(idx) + `","output_index":` + strconv.Itoa(idx) + `,"delta":` + rcStr(d) + `}`
}

func rcFcClose(idx int, callID, name, args string) []string {
	return []string{
		`{"type":"response.function_call_arguments.done","sequence_number":#,"item_id":"fc_ID_` + strconv.Itoa(idx) + `","output_index":` + strconv.Itoa(idx) + `,"name":"` + name + `","arguments":` + rcStr(args) + `}`,
		rcItemDone(idx, rcFcItem(idx, "completed", callID, name, args)),
	}
}

func rcUsage(in, cached, out, reasoning, total int) string {
	return `{"input_tokens":` + strconv.Itoa(in) + `,"input_tokens_details":{"cached_tokens":` + strconv.Itoa(cached) + `,"cache_write_tokens":0},"output_tokens":` + strconv.Itoa(out) +
		`,"output_tokens_details":{"reasoning_tokens":` + strconv.Itoa(reasoning) + `},"total_tokens":` + strconv.Itoa(total) + `}`
}

// rcStream replays upstream through a fresh bridged exchange at chunk
// sizes 1, 7 and 4096, requires the same output from each (ids aside),
// checks it with the openai-go SDK and returns it with ids normalised.
func rcStream(t *testing.T, rules, upstream string) string {
	t.Helper()
	var first string
	for i, n := range transformtest.ChunkSizes {
		raw := transformtest.Replay(t, rcStreamExchange(t, rules), upstream, n)
		rcSDKCheck(t, raw)
		got := rcNorm(raw)
		if i == 0 {
			first = got
		} else if rcNormTime(got) != rcNormTime(first) {
			t.Fatalf("chunk size %d changed the output:\n%s\n--- vs size 1:\n%s", n, got, first)
		}
	}
	return first
}

// deepSeekToolTurn is DeepSeek's answer of responses-chat-bridge.md §3.5:
// reasoning, one tool call, finish_reason, a usage-only chunk, [DONE],
// with keep-alive comments between.
var deepSeekToolTurn = ": keep-alive\n\n" + rcData(
	rcChunk(`{"role":"assistant","content":null,"reasoning_content":"Need to list"}`, "null"),
	rcChunk(`{"reasoning_content":" files first."}`, "null"),
) + ": keep-alive\n\n" + rcData(
	rcChunk(`{"tool_calls":[{"index":0,"id":"call_00_kw66q","type":"function","function":{"name":"exec_command","arguments":""}}]}`, "null"),
	rcChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"cmd\":"}}]}`, "null"),
	rcChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"ls\"}"}}]}`, "null"),
	rcChunk(`{}`, `"tool_calls"`),
	rcUsageChunk(`{"prompt_tokens":41211,"completion_tokens":96,"total_tokens":41307,"prompt_cache_hit_tokens":40960,"prompt_cache_miss_tokens":251,"completion_tokens_details":{"reasoning_tokens":64}}`),
) + "data: [DONE]\n\n"

// TestResponsesToChatStreamDeepSeekToolTurn is the stream of §2.6, byte
// for byte.
func TestResponsesToChatStreamDeepSeekToolTurn(t *testing.T) {
	rs := `{"id":"rs_ID_1","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"Need to list files first."}],"encrypted_content":"` + textEnvelopeOf("deepseek", []byte("Need to list files first.")) + `"}`
	const fc = `{"id":"fc_ID_1","type":"function_call","status":"completed","call_id":"call_00_kw66q","name":"exec_command","arguments":"{\"cmd\":\"ls\"}"}`
	const inProgress = `{"id":"resp_ID","object":"response","created_at":1764400000,"status":"in_progress","model":"gpt-5.5","output":[],"usage":null,"error":null,"incomplete_details":null` + rcEcho + `}`
	want := ": keep-alive\n\n" +
		"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":" + inProgress + "}\n\n" +
		"event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":" + inProgress + "}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":2,\"output_index\":0,\"item\":{\"id\":\"rs_ID_1\",\"type\":\"reasoning\",\"summary\":[],\"content\":[]}}\n\n" +
		"event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":3,\"item_id\":\"rs_ID_1\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"reasoning_text\",\"text\":\"\"}}\n\n" +
		"event: response.reasoning_text.delta\ndata: {\"type\":\"response.reasoning_text.delta\",\"sequence_number\":4,\"item_id\":\"rs_ID_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Need to list\"}\n\n" +
		"event: response.reasoning_text.delta\ndata: {\"type\":\"response.reasoning_text.delta\",\"sequence_number\":5,\"item_id\":\"rs_ID_1\",\"output_index\":0,\"content_index\":0,\"delta\":\" files first.\"}\n\n" +
		": keep-alive\n\n" +
		"event: response.reasoning_text.done\ndata: {\"type\":\"response.reasoning_text.done\",\"sequence_number\":6,\"item_id\":\"rs_ID_1\",\"output_index\":0,\"content_index\":0,\"text\":\"Need to list files first.\"}\n\n" +
		"event: response.content_part.done\ndata: {\"type\":\"response.content_part.done\",\"sequence_number\":7,\"item_id\":\"rs_ID_1\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"reasoning_text\",\"text\":\"Need to list files first.\"}}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":8,\"output_index\":0,\"item\":" + rs + "}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":9,\"output_index\":1,\"item\":{\"id\":\"fc_ID_1\",\"type\":\"function_call\",\"status\":\"in_progress\",\"call_id\":\"call_00_kw66q\",\"name\":\"exec_command\",\"arguments\":\"\"}}\n\n" +
		"event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":10,\"item_id\":\"fc_ID_1\",\"output_index\":1,\"delta\":\"{\\\"cmd\\\":\"}\n\n" +
		"event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":11,\"item_id\":\"fc_ID_1\",\"output_index\":1,\"delta\":\"\\\"ls\\\"}\"}\n\n" +
		"event: response.function_call_arguments.done\ndata: {\"type\":\"response.function_call_arguments.done\",\"sequence_number\":12,\"item_id\":\"fc_ID_1\",\"output_index\":1,\"name\":\"exec_command\",\"arguments\":\"{\\\"cmd\\\":\\\"ls\\\"}\"}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":13,\"output_index\":1,\"item\":" + fc + "}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":14,\"response\":{\"id\":\"resp_ID\",\"object\":\"response\",\"created_at\":1764400000,\"status\":\"completed\",\"model\":\"gpt-5.5\"," +
		"\"output\":[" + rs + "," + fc + "],\"usage\":{\"input_tokens\":41211,\"input_tokens_details\":{\"cached_tokens\":40960,\"cache_write_tokens\":0},\"output_tokens\":96,\"output_tokens_details\":{\"reasoning_tokens\":64},\"total_tokens\":41307}," +
		"\"error\":null,\"incomplete_details\":null" + rcEcho + "}}\n\n"
	if got := rcStream(t, rcRules(`{"profile":"deepseek"}`), deepSeekToolTurn); got != want {
		t.Fatalf("stream\n%s\n--- want\n%s", got, want)
	}
}

func TestResponsesToChatStreams(t *testing.T) {
	tests := []struct {
		name, config, upstream string
		want                   []string
		decisions              []string
		streamErr              string
		clock                  bool // no chunk says when: created_at is the clock's
	}{
		{
			name:   "two parallel calls interleaved by index, the second's name in a later chunk",
			config: `{"profile":"deepseek"}`,
			upstream: rcData(
				rcChunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"exec_command","arguments":""}}]}`, "null"),
				rcChunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"arguments":"{\"cmd\":"}}]}`, "null"),
				rcChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"cmd\":\"ls\"}"}}]}`, "null"),
				rcChunk(`{"tool_calls":[{"index":1,"function":{"name":"exec_command","arguments":"\"pwd\"}"}}]}`, "null"),
				rcChunk(`{}`, `"tool_calls"`),
				rcUsageChunk(`{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120}`),
			) + "data: [DONE]\n\n",
			want: rcJoin(rcStart(), []string{
				rcFcAdded(0, "call_a", "exec_command"),
				rcFcDelta(0, `{"cmd":"ls"}`),
				rcFcAdded(1, "call_b", "exec_command"),
				rcFcDelta(1, `{"cmd":"pwd"}`),
			}, rcFcClose(0, "call_a", "exec_command", `{"cmd":"ls"}`), rcFcClose(1, "call_b", "exec_command", `{"cmd":"pwd"}`), []string{
				rcTerminal("response.completed", rcResp("completed", []string{
					rcFcItem(0, "completed", "call_a", "exec_command", `{"cmd":"ls"}`),
					rcFcItem(1, "completed", "call_b", "exec_command", `{"cmd":"pwd"}`),
				}, rcUsage(100, 0, 20, 0, 120), "null", "null")),
			}),
		},
		{
			name:   "text, then a Kimi tool call with its id verbatim; an empty-argument call is {}",
			config: `{"profile":"kimi"}`,
			upstream: rcData(
				rcChunk(`{"role":"assistant","content":"Let me "}`, "null"),
				rcChunk(`{"content":"check."}`, "null"),
				rcChunk(`{"tool_calls":[{"index":0,"id":"functions.exec_command:0","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\":\"ls\"}"}}]}`, "null"),
				rcChunk(`{"tool_calls":[{"index":1,"id":"functions.get_goal:1","type":"function","function":{"name":"get_goal","arguments":""}}]}`, "null"),
				rcChunk(`{}`, `"tool_calls"`),
				rcUsageChunk(`{"prompt_tokens":50,"completion_tokens":10,"total_tokens":60,"prompt_tokens_details":{"cached_tokens":32}}`),
			) + "data: [DONE]\n\n",
			want: rcJoin(rcStart(), rcMsgOpen("msg_ID_1", 0), []string{rcMsgDelta("msg_ID_1", 0, "Let me "), rcMsgDelta("msg_ID_1", 0, "check.")},
				rcMsgClose("msg_ID_1", 0, "Let me check."), []string{
					rcFcAdded(1, "functions.exec_command:0", "exec_command"),
					rcFcDelta(1, `{"cmd":"ls"}`),
					rcFcAdded(2, "functions.get_goal:1", "get_goal"),
				}, rcFcClose(1, "functions.exec_command:0", "exec_command", `{"cmd":"ls"}`), rcFcClose(2, "functions.get_goal:1", "get_goal", `{}`), []string{
					rcTerminal("response.completed", rcResp("completed", []string{
						rcMsgItem("msg_ID_1", "Let me check."),
						rcFcItem(1, "completed", "functions.exec_command:0", "exec_command", `{"cmd":"ls"}`),
						rcFcItem(2, "completed", "functions.get_goal:1", "get_goal", `{}`),
					}, rcUsage(50, 32, 10, 0, 60), "null", "null")),
				}),
		},
		{
			name:   "reasoning after text opens a new reasoning item",
			config: `{"profile":"deepseek"}`,
			upstream: rcData(
				rcChunk(`{"role":"assistant","reasoning_content":"a"}`, "null"),
				rcChunk(`{"content":"b"}`, "null"),
				rcChunk(`{"reasoning_content":"c"}`, "null"),
				rcChunk(`{"content":"d"}`, "null"),
				rcChunk(`{}`, `"stop"`),
			) + "data: [DONE]\n\n",
			want: rcJoin(rcStart(),
				rcRsOpen("rs_ID_1", 0), []string{rcRsDelta("rs_ID_1", 0, "a")}, rcRsClose("rs_ID_1", 0, envDeepSeek, "a"),
				rcMsgOpen("msg_ID_2", 1), []string{rcMsgDelta("msg_ID_2", 1, "b")}, rcMsgClose("msg_ID_2", 1, "b"),
				rcRsOpen("rs_ID_3", 2), []string{rcRsDelta("rs_ID_3", 2, "c")}, rcRsClose("rs_ID_3", 2, envDeepSeek, "c"),
				rcMsgOpen("msg_ID_4", 3), []string{rcMsgDelta("msg_ID_4", 3, "d")}, rcMsgClose("msg_ID_4", 3, "d"),
				[]string{rcTerminal("response.completed", rcResp("completed", []string{
					rcRsItem("rs_ID_1", envDeepSeek, "a"), rcMsgItem("msg_ID_2", "b"), rcRsItem("rs_ID_3", envDeepSeek, "c"), rcMsgItem("msg_ID_4", "d"),
				}, "null", "null", "null"))}),
		},
		{
			name:   "finish_reason length mid tool call: the call is closed as incomplete, never completed, and the response is incomplete",
			config: `{"profile":"deepseek"}`,
			upstream: rcData(
				rcChunk(`{"role":"assistant","content":"Patching."}`, "null"),
				rcChunk(`{"tool_calls":[{"index":0,"id":"call_p","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin"}}]}`, "null"),
				rcChunk(`{}`, `"length"`),
				rcUsageChunk(`{"prompt_tokens":10,"completion_tokens":32768,"total_tokens":32778}`),
			) + "data: [DONE]\n\n",
			want: rcJoin(rcStart(), rcMsgOpen("msg_ID_1", 0), []string{rcMsgDelta("msg_ID_1", 0, "Patching.")}, rcMsgClose("msg_ID_1", 0, "Patching."), []string{
				rcFcAdded(1, "call_p", "apply_patch"),
				rcFcDelta(1, `{"input":"*** Begin`),
				rcItemDone(1, rcFcItem(1, "incomplete", "call_p", "apply_patch", `{"input":"*** Begin`)),
				rcTerminal("response.incomplete", rcResp("incomplete", []string{rcMsgItem("msg_ID_1", "Patching."), rcFcItem(1, "incomplete", "call_p", "apply_patch", `{"input":"*** Begin`)},
					rcUsage(10, 0, 32768, 0, 32778), "null", `{"reason":"max_output_tokens"}`)),
			}),
			decisions: []string{"apply_patch drop_partial_call"},
		},
		{
			name:   "content_filter is incomplete",
			config: `{"profile":"deepseek"}`,
			upstream: rcData(
				rcChunk(`{"role":"assistant","reasoning_content":"hmm"}`, "null"),
				rcChunk(`{}`, `"content_filter"`),
			) + "data: [DONE]\n\n",
			want: rcJoin(rcStart(), rcRsOpen("rs_ID_1", 0), []string{rcRsDelta("rs_ID_1", 0, "hmm")}, rcRsClose("rs_ID_1", 0, envDeepSeek, "hmm"), []string{
				rcTerminal("response.incomplete", rcResp("incomplete", []string{rcRsItem("rs_ID_1", envDeepSeek, "hmm")}, "null", "null", `{"reason":"content_filter"}`)),
			}),
		},
		{
			name:   "no finish_reason before [DONE] is a failure",
			config: "",
			upstream: rcData(
				rcChunk(`{"role":"assistant","content":"partial"}`, "null"),
			) + "data: [DONE]\n\n",
			want: rcJoin(rcStart(), rcMsgOpen("msg_ID_1", 0), []string{rcMsgDelta("msg_ID_1", 0, "partial")}, rcMsgClose("msg_ID_1", 0, "partial"), []string{
				rcTerminal("response.failed", rcResp("failed", []string{rcMsgItem("msg_ID_1", "partial")}, "null",
					`{"code":"server_error","message":"the upstream's stream ended without a finish_reason"}`, "null")),
			}),
			streamErr: "server_error",
		},
		{
			name:   "EOF without [DONE] after a finish_reason completes, with the usage",
			config: "",
			upstream: rcData(
				rcChunk(`{"role":"assistant","content":"ok"}`, "null"),
				rcChunk(`{}`, `"stop"`),
				rcUsageChunk(`{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`),
			),
			want: rcJoin(rcStart(), rcMsgOpen("msg_ID_1", 0), []string{rcMsgDelta("msg_ID_1", 0, "ok")}, rcMsgClose("msg_ID_1", 0, "ok"), []string{
				rcTerminal("response.completed", rcResp("completed", []string{rcMsgItem("msg_ID_1", "ok")}, rcUsage(1, 0, 1, 0, 2), "null", "null")),
			}),
		},
		{
			name:     "EOF without anything is a failure",
			config:   "",
			upstream: "",
			want: rcJoin(rcStart(), []string{
				rcTerminal("response.failed", rcResp("failed", nil, "null", `{"code":"server_error","message":"the upstream's stream ended without a finish_reason"}`, "null")),
			}),
			streamErr: "server_error",
			clock:     true,
		},
		{
			name:   "an error chunk after some text closes the text and fails with its code",
			config: `{"profile":"deepseek"}`,
			upstream: rcData(
				rcChunk(`{"role":"assistant","content":"Hel"}`, "null"),
				`{"error":{"message":"Rate limit reached, try again in 1.5s","type":"requests","code":"rate_limit_exceeded"}}`,
				rcChunk(`{"content":"lo"}`, "null"),
				rcChunk(`{}`, `"stop"`),
			) + "data: [DONE]\n\n",
			want: rcJoin(rcStart(), rcMsgOpen("msg_ID_1", 0), []string{rcMsgDelta("msg_ID_1", 0, "Hel")}, rcMsgClose("msg_ID_1", 0, "Hel"), []string{
				rcTerminal("response.failed", rcResp("failed", []string{rcMsgItem("msg_ID_1", "Hel")}, "null",
					`{"code":"rate_limit_exceeded","message":"Rate limit reached, try again in 1.5s"}`, "null")),
			}),
			streamErr: "rate_limit_exceeded",
		},
		{
			name:   "an error chunk mid call drops the call",
			config: `{"profile":"deepseek"}`,
			upstream: rcData(
				rcChunk(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"exec_command","arguments":"{\"cmd"}}]}`, "null"),
				`{"error":{"message":"upstream overloaded"}}`,
			),
			want: rcJoin(rcStart(), []string{
				rcFcAdded(0, "c1", "exec_command"),
				rcFcDelta(0, `{"cmd`),
				rcTerminal("response.failed", rcResp("failed", nil, "null", `{"code":"server_error","message":"upstream overloaded"}`, "null")),
			}),
			decisions: []string{"exec_command drop_partial_call"},
			streamErr: "server_error",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := rcStream(t, rcRules(tc.config), tc.upstream)
			if tc.clock {
				got = rcNormTime(got)
			}
			if want := rcSeq(tc.want...); got != want {
				t.Fatalf("stream\n%s\n--- want\n%s", got, want)
			}
			x := rcStreamExchange(t, rcRules(tc.config))
			transformtest.Replay(t, x, tc.upstream, 4096)
			if got := strings.Join(rcDecisions(x), ", "); got != strings.Join(tc.decisions, ", ") {
				t.Errorf("decisions %q, want %q", got, strings.Join(tc.decisions, ", "))
			}
			if x.StreamError() != tc.streamErr {
				t.Errorf("stream error %q, want %q", x.StreamError(), tc.streamErr)
			}
		})
	}
}

// TestResponsesToChatStreamEscapes: however the upstream escapes its text,
// the client's deltas add up to the done text and the final item, and
// both say what the upstream said.
func TestResponsesToChatStreamEscapes(t *testing.T) {
	upstream := rcData(
		rcChunk(`{"reasoning_content":"caf\u00e9 \/ \"q\""}`, "null"),
		rcChunk(`{"reasoning_content":"\ttab\n"}`, "null"),
		rcChunk(`{"content":"\u003cb\u003e \ud83e\udd80"}`, "null"),
		rcChunk(`{"content":" \\ end"}`, "null"),
		rcChunk(`{}`, `"stop"`),
	) + "data: [DONE]\n\n"
	got := rcStream(t, rcRules(`{"profile":"deepseek"}`), upstream)
	evs := transformtest.Events(t, got)
	want := map[string]string{"response.reasoning_text": "caf\u00e9 / \"q\"\ttab\n", "response.output_text": "<b> \U0001F980 \\ end"}
	for prefix, text := range want {
		if d := transformtest.ConcatDeltas(evs, prefix+".delta"); d != text {
			t.Errorf("%s deltas %q, want %q", prefix, d, text)
		}
		for _, e := range evs {
			if e["type"] == prefix+".done" && e["text"] != text {
				t.Errorf("%s.done %q, want %q", prefix, e["text"], text)
			}
		}
	}
	resp := evs[len(evs)-1]["response"].(map[string]any)
	b, _ := json.Marshal(resp["output"])
	var items []struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(b, &items)
	if len(items) != 2 || items[0].Content[0].Text != want["response.reasoning_text"] || items[1].Content[0].Text != want["response.output_text"] {
		t.Errorf("final items %s", b)
	}
}

// TestResponsesToChatStreamContextLength: the providers' context-length
// errors become the code Codex treats as a full context window (§2.4).
func TestResponsesToChatStreamContextLength(t *testing.T) {
	for _, tc := range []struct{ name, errObj string }{
		{"deepseek", `{"message":"This model's maximum context length is 131072 tokens. However, you requested 140000 tokens (140000 in the messages, 0 in the completion).","type":"invalid_request_error","param":null,"code":"invalid_request_error"}`},
		{"openai code", `{"message":"Input too long.","type":"invalid_request_error","code":"context_length_exceeded"}`},
		{"kimi", `{"message":"Invalid request: Your request exceeded model token limit: 262144 (requested: 269030)","type":"invalid_request_error"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rcStream(t, rcRules(`{"profile":"kimi"}`), rcData(`{"error":`+tc.errObj+`}`))
			evs := transformtest.Events(t, got)
			last := evs[len(evs)-1]
			resp, _ := last["response"].(map[string]any)
			e, _ := resp["error"].(map[string]any)
			if last["type"] != "response.failed" || e["code"] != "context_length_exceeded" {
				t.Fatalf("terminal event %v", last)
			}
		})
	}
}

// TestResponsesToChatStreamUsageInChoice: Moonshot (Kimi) puts a stream's
// usage, its cache hits in a top-level cached_tokens, in choices[0].usage
// of the finishing chunk, not at the top level
// (higress#1568, earendil-works/pi#2017). Without it Codex sees no token
// count and never compacts.
func TestResponsesToChatStreamUsageInChoice(t *testing.T) {
	upstream := rcData(
		rcChunk(`{"role":"assistant","content":"Hi"}`, "null"),
		rcChunkHead+`{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":19,"completion_tokens":13,"total_tokens":32,"cached_tokens":16}}]}`,
	) + "data: [DONE]\n\n"
	got := rcStream(t, rcRules(`{"profile":"kimi"}`), upstream)
	evs := transformtest.Events(t, got)
	resp, _ := evs[len(evs)-1]["response"].(map[string]any)
	u, _ := json.Marshal(resp["usage"])
	// Kimi's top-level cached_tokens is the cache hit count.
	if want := `{"input_tokens":19,"input_tokens_details":{"cache_write_tokens":0,"cached_tokens":16},"output_tokens":13,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":32}`; string(u) != want {
		t.Fatalf("usage %s, want %s", u, want)
	}
}

// TestResponsesToChatStreamNonJSONData: a data line that is not a Chat
// chunk is not forwarded to a Responses client: openai-go decodes every
// data payload as an event and would end the stream with an error.
func TestResponsesToChatStreamNonJSONData(t *testing.T) {
	upstream := rcData(rcChunk(`{"role":"assistant","content":"Hi"}`, "null"), "PROCESSING", rcChunk(`{}`, `"stop"`)) + "data: [DONE]\n\n"
	got := rcStream(t, rcRules(""), upstream)
	if strings.Contains(got, "PROCESSING") {
		t.Fatalf("forwarded:\n%s", got)
	}
}

// TestResponsesToChatStreamCutMidLine: an upstream that breaks off in the
// middle of a line (here inside "data: [DONE]" or a keep-alive comment)
// still leaves the client a stream it can read to its terminal event: the
// partial line must not run into the event lines written after it.
func TestResponsesToChatStreamCutMidLine(t *testing.T) {
	for _, tail := range []string{"data: [DON", ": keep-al", "0"} {
		t.Run(tail, func(t *testing.T) {
			upstream := rcData(rcChunk(`{"role":"assistant","content":"Hel"}`, "null")) + tail
			for _, n := range transformtest.ChunkSizes {
				out := transformtest.Replay(t, rcStreamExchange(t, rcRules("")), upstream, n)
				if err := rcSDKProblem(out); err != nil {
					t.Fatalf("chunk size %d: %v\n%s", n, err, out)
				}
			}
		})
	}
}

// TestResponsesToChatStreamTruncatedChunks: an upstream cut off inside a
// chunk (the connection dropped, the proxy gave up) leaves a partial JSON
// object as the last event. The bridge must not panic on it, and the
// client gets response.failed.
func TestResponsesToChatStreamTruncatedChunks(t *testing.T) {
	for _, tail := range []string{
		`{"choices":`, `{"usage":`, `{"error":`, `{"created":`, `{"id":"c","choices":[`, `{"choices":[{"index":0,"delta":`,
		`{"choices":[{"index":0,"delta":{"content":`, `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":`, `{"choices":[{"index":0,"finish_reason":`,
	} {
		t.Run(tail, func(t *testing.T) {
			upstream := rcData(rcChunk(`{"role":"assistant","content":"Hel"}`, "null")) + "data: " + tail + "\n\n"
			for _, n := range transformtest.ChunkSizes {
				var out string
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("chunk size %d: panic: %v", n, r)
						}
					}()
					out = transformtest.Replay(t, rcStreamExchange(t, rcRules("")), upstream, n)
				}()
				if err := rcSDKProblem(out); err != nil {
					t.Fatalf("chunk size %d: %v\n%s", n, err, out)
				}
				if !strings.Contains(out, "event: response.failed") {
					t.Fatalf("chunk size %d: no response.failed\n%s", n, out)
				}
			}
		})
	}
}

// TestResponsesToChatJSONMiniMaxReasoningDetails: with reasoning_split, which
// the minimax profile always asks for, MiniMax sends its thinking in
// reasoning_details[].text (responses-chat-bridge.md §3.1, §6.2); it has to
// become the reasoning item like reasoning_content does.
func TestResponsesToChatJSONMiniMaxReasoningDetails(t *testing.T) {
	out, _ := rcJSON(t, `{"profile":"minimax"}`, rcCompletionHead+`{"role":"assistant","content":"Done.","reasoning_details":[{"type":"reasoning.text","id":"reasoning-text-1","format":"MiniMax-response-v1","index":0,"text":"Think it through."}]},"finish_reason":"stop"}]}`)
	transformtest.JSONEqual(t, []byte(rcNorm(out)), `{"id":"resp_ID","object":"response","created_at":1764400000,"status":"completed","model":"gpt-5.5","output":[`+
		`{"id":"rs_ID","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"Think it through."}],"encrypted_content":"`+textEnvelopeOf("minimax", []byte("Think it through."))+`"},`+
		`{"id":"msg_ID","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Done.","annotations":[],"logprobs":[]}]}],`+
		`"usage":null,"error":null,"incomplete_details":null`+rcEcho+`}`)
}

func TestResponsesToChatStreamMiniMaxReasoningDetails(t *testing.T) {
	got := rcStream(t, rcRules(`{"profile":"minimax"}`), rcData(
		rcChunk(`{"role":"assistant","reasoning_details":[{"type":"reasoning.text","id":"reasoning-text-1","format":"MiniMax-response-v1","index":0,"text":"Think"}]}`, "null"),
		rcChunk(`{"reasoning_details":[{"type":"reasoning.text","id":"reasoning-text-1","format":"MiniMax-response-v1","index":0,"text":" it through."}]}`, "null"),
		rcChunk(`{"content":"Done."}`, "null"),
		rcChunk(`{}`, `"stop"`),
	)+"data: [DONE]\n\n")
	want := rcSeq(rcJoin(rcStart(),
		rcRsOpen("rs_ID_1", 0), []string{rcRsDelta("rs_ID_1", 0, "Think"), rcRsDelta("rs_ID_1", 0, " it through.")},
		rcRsClose("rs_ID_1", 0, envMiniMax, "Think it through."),
		rcMsgOpen("msg_ID_2", 1), []string{rcMsgDelta("msg_ID_2", 1, "Done.")}, rcMsgClose("msg_ID_2", 1, "Done."),
		[]string{rcTerminal("response.completed", rcResp("completed", []string{rcRsItem("rs_ID_1", envMiniMax, "Think it through."), rcMsgItem("msg_ID_2", "Done.")}, "null", "null", "null"))})...)
	if got != want {
		t.Fatalf("stream\n%s\n--- want\n%s", got, want)
	}
}

// streamOutput runs a Chat stream through the bridge and returns the
// texts of the final response's items by type, checking every event.
func streamOutput(t *testing.T, config, upstream string) (map[string]string, string) {
	t.Helper()
	out := rcNorm(transformtest.Replay(t, rcStreamExchange(t, rcRules(config)), upstream, 4096))
	if _, err := rcEventsProblem(out, true); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var final struct {
		Type     string `json:"type"`
		Response struct {
			Output []struct {
				Type      string `json:"type"`
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
				Content   []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		} `json:"response"`
	}
	for _, block := range strings.Split(out, "\n\n") {
		if _, data, ok := strings.Cut(block, "data: "); ok && strings.Contains(data, `"response":{`) {
			if err := json.Unmarshal([]byte(data), &final); err != nil {
				t.Fatalf("%v: %s", err, data)
			}
		}
	}
	got := map[string]string{"terminal": final.Type}
	for _, it := range final.Response.Output {
		switch it.Type {
		case "function_call":
			got["call "+it.Name] = it.Arguments
		default:
			for _, c := range it.Content {
				got[it.Type] += c.Text
			}
		}
	}
	return got, out
}

// TestResponsesToChatStreamProviderQuirks: chunk shapes providers send
// (finish_reason on the last content delta, a call in the finishing chunk,
// calls without index, an unknown finish reason, an error in the choice,
// escaped think tags, white space after </think>, a refusal) give the
// client the right terminal event and final items; a long run of white
// space before the text is not looked at again on every delta.
func TestResponsesToChatStreamProviderQuirks(t *testing.T) {
	for _, tc := range []struct {
		name, config, upstream string
		want                   map[string]string
	}{
		{
			name:     "finish_reason before the delta it ends (MiniMax's order)",
			upstream: "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"Hello \"}}]}\n\ndata: {\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"delta\":{\"content\":\"world\"}}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.completed", "message": "Hello world"},
		},
		{
			name:     "a call in the finishing chunk",
			upstream: "data: {\"choices\":[{\"finish_reason\":\"tool_calls\",\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"t1\",\"function\":{\"name\":\"bash\",\"arguments\":\"{}\"}}]}}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.completed", "call bash": "{}"},
		},
		{
			name:     "calls without index (Gemini)",
			upstream: "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"id\":\"b\",\"function\":{\"name\":\"g\",\"arguments\":\"{\\\"y\\\":2}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.completed", "call f": `{"x":1}`, "call g": `{"y":2}`},
		},
		{
			name:     "an unknown finish reason fails",
			upstream: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"half\"},\"finish_reason\":\"insufficient_system_resource\"}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.failed", "message": "half"},
		},
		{
			name:     "an error in the choice fails",
			upstream: "data: {\"choices\":[{\"index\":0,\"delta\":{},\"error\":{\"message\":\"boom\"},\"finish_reason\":\"error\"}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.failed"},
		},
		{
			name:     "an escaped backslash before an escaped closing tag is not the tag",
			upstream: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\u003cthink\\u003ex\\\\u003c/think\\u003ey\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.completed", "reasoning": `x\u003c/think>y`},
		},
		{
			name:     "white space after </think> in its own delta",
			upstream: "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"<think>r</think>\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\n\\n\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"text\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.completed", "reasoning": "r", "message": "text"},
		},
		{
			name:     "a refusal is the answer's text",
			upstream: "data: {\"choices\":[{\"index\":0,\"delta\":{\"refusal\":\"I can't help with that.\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
			want:     map[string]string{"terminal": "response.completed", "message": "I can't help with that."},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config := tc.config
			if config == "" {
				config = `{"profile":"function_only"}`
			}
			got, out := streamOutput(t, config, tc.upstream)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v\n%s", got, tc.want, out)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("%s: got %q, want %q (all %v)\n%s", k, got[k], v, got, out)
				}
			}
		})
	}
	// Leading white space is not looked at again on every delta.
	var up strings.Builder
	for range 100000 {
		up.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" \"}}]}\n\n")
	}
	up.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	got, _ := streamOutput(t, `{"profile":"function_only"}`, up.String())
	if got["message"] != strings.Repeat(" ", 100000)+"x" {
		t.Fatalf("the white space and the text: %d bytes", len(got["message"]))
	}
}

// --- what strict clients need ------------------------------------------------

// rcSDKCheck holds a bridged stream to what the strict clients need (see
// rcSDKProblem).
func rcSDKCheck(t testing.TB, stream string) {
	t.Helper()
	if err := rcSDKProblem(stream); err != nil {
		t.Fatalf("%v\n%s", err, stream)
	}
}

// rcSDKProblem says what a strict client would refuse in a bridged stream:
// rcEventsProblem's rules, and the SDK's own SSE reader, over HTTP, reads
// the stream to its end without error.
func rcSDKProblem(stream string) error {
	n, err := rcEventsProblem(stream, false)
	if err != nil {
		return err
	}
	return rcSDKReads(stream, n)
}

// rcEventsProblem checks the events of a bridged stream as strict clients
// do and returns how many there are: every event decodes as the openai-go SDK's event union with a known type
// and an event line naming it; sequence_number runs 0, 1, 2…; the rules
// openai-node's accumulator enforces hold (response.created first,
// output_index dense and append-only, a content part before its deltas,
// item ids matching); exactly one terminal event comes last, and its
// response object parses as responses.Response with the status of its
// event and exactly the items the stream finished; nothing with data
// follows it. With other set, data that is not a JSON object is passed
// over instead of refused.
func rcEventsProblem(stream string, other bool) (int, error) {
	var evs []responses.ResponseStreamEventUnion
	var perr error
	terminal := false
	p := streambuf.Parser{}
	collect := func(ev *transforms.Event) error {
		if ev.Data == nil {
			return nil
		}
		if terminal {
			perr = fmt.Errorf("data after the terminal event: %q", ev.Data)
			return perr
		}
		if other && (len(bytes.TrimSpace(ev.Data)) == 0 || bytes.TrimSpace(ev.Data)[0] != '{') {
			return nil
		}
		var u responses.ResponseStreamEventUnion
		if err := json.Unmarshal(ev.Data, &u); err != nil {
			perr = fmt.Errorf("the SDK cannot decode %s: %v", ev.Data, err)
			return perr
		}
		if string(ev.Name) != u.Type {
			perr = fmt.Errorf("event line %q for a %q payload", ev.Name, u.Type)
			return perr
		}
		if u.SequenceNumber != int64(len(evs)) || !u.JSON.SequenceNumber.Valid() {
			perr = fmt.Errorf("event %d has sequence_number %s", len(evs), u.JSON.SequenceNumber.Raw())
			return perr
		}
		evs = append(evs, u)
		switch u.Type {
		case "response.completed", "response.incomplete", "response.failed":
			terminal = true
			fallthrough
		case "response.created", "response.in_progress":
			if m := transformtest.MissingRequired([]byte(u.Response.RawJSON())); len(m) > 0 {
				perr = fmt.Errorf("the %s object lacks the members openai-go requires: %v", u.Type, m)
				return perr
			}
		}
		return nil
	}
	_ = p.Feed([]byte(stream), collect)
	_ = p.Finish(collect)
	if perr != nil {
		return 0, perr
	}
	type item struct {
		id, typ   string
		parts     []string
		summaries int
		done      string
	}
	var out []*item
	terminals := 0
	for i, e := range evs {
		if e.AsAny() == nil {
			return 0, fmt.Errorf("event %d: the SDK does not know the type %q", i, e.Type)
		}
		if i == 0 && e.Type != "response.created" {
			return 0, fmt.Errorf("first event is %s", e.Type)
		}
		at := func(idx int64, id string) (*item, error) {
			if idx < 0 || int(idx) >= len(out) {
				return nil, fmt.Errorf("event %d (%s): no output at index %d", i, e.Type, idx)
			}
			if out[idx].id != id {
				return nil, fmt.Errorf("event %d (%s): item %q at index %d is %q", i, e.Type, id, idx, out[idx].id)
			}
			return out[idx], nil
		}
		var it *item
		var err error
		switch e.Type {
		case "response.output_item.added":
			a := e.AsResponseOutputItemAdded()
			if int(a.OutputIndex) != len(out) {
				return 0, fmt.Errorf("event %d: output_item.added at index %d with %d items", i, a.OutputIndex, len(out))
			}
			for _, o := range out {
				if o.id == a.Item.ID {
					return 0, fmt.Errorf("event %d: item id %s used twice", i, o.id)
				}
			}
			out = append(out, &item{id: a.Item.ID, typ: a.Item.Type})
		case "response.content_part.added":
			a := e.AsResponseContentPartAdded()
			if it, err = at(a.OutputIndex, a.ItemID); err != nil {
				return 0, err
			}
			if it.typ == "reasoning" && a.Part.Type != "reasoning_text" || it.typ == "message" && a.Part.Type != "output_text" || int(a.ContentIndex) != len(it.parts) {
				return 0, fmt.Errorf("event %d: a %s part at %d for a %s item", i, a.Part.Type, a.ContentIndex, it.typ)
			}
			it.parts = append(it.parts, a.Part.Type)
		case "response.output_text.delta":
			a := e.AsResponseOutputTextDelta()
			if it, err = at(a.OutputIndex, a.ItemID); err != nil {
				return 0, err
			}
			if it.typ != "message" || int(a.ContentIndex) >= len(it.parts) || it.parts[a.ContentIndex] != "output_text" || it.done != "" {
				return 0, fmt.Errorf("event %d: text delta without its output_text part", i)
			}
		case "response.reasoning_text.delta":
			a := e.AsResponseReasoningTextDelta()
			if it, err = at(a.OutputIndex, a.ItemID); err != nil {
				return 0, err
			}
			if it.typ != "reasoning" || int(a.ContentIndex) >= len(it.parts) || it.parts[a.ContentIndex] != "reasoning_text" || it.done != "" {
				return 0, fmt.Errorf("event %d: reasoning delta without its reasoning_text part", i)
			}
		case "response.reasoning_summary_part.added":
			a := e.AsResponseReasoningSummaryPartAdded()
			if it, err = at(a.OutputIndex, a.ItemID); err != nil {
				return 0, err
			}
			if it.typ != "reasoning" || int(a.SummaryIndex) != it.summaries || it.done != "" {
				return 0, fmt.Errorf("event %d: summary part %d of a %s item with %d", i, a.SummaryIndex, it.typ, it.summaries)
			}
			it.summaries++
		case "response.reasoning_summary_text.delta":
			a := e.AsResponseReasoningSummaryTextDelta()
			if it, err = at(a.OutputIndex, a.ItemID); err != nil {
				return 0, err
			}
			if int(a.SummaryIndex) >= it.summaries || it.done != "" {
				return 0, fmt.Errorf("event %d: summary delta without its summary part", i)
			}
		case "response.reasoning_summary_text.done":
			a := e.AsResponseReasoningSummaryTextDone()
			_, err = at(a.OutputIndex, a.ItemID)
		case "response.reasoning_summary_part.done":
			a := e.AsResponseReasoningSummaryPartDone()
			_, err = at(a.OutputIndex, a.ItemID)
		case "response.function_call_arguments.delta":
			a := e.AsResponseFunctionCallArgumentsDelta()
			if it, err = at(a.OutputIndex, a.ItemID); err != nil {
				return 0, err
			}
			if it.typ != "function_call" || it.done != "" {
				return 0, fmt.Errorf("event %d: arguments delta for a %s item", i, it.typ)
			}
		case "response.function_call_arguments.done":
			a := e.AsResponseFunctionCallArgumentsDone()
			_, err = at(a.OutputIndex, a.ItemID)
		case "response.output_text.done":
			a := e.AsResponseOutputTextDone()
			_, err = at(a.OutputIndex, a.ItemID)
		case "response.reasoning_text.done":
			a := e.AsResponseReasoningTextDone()
			_, err = at(a.OutputIndex, a.ItemID)
		case "response.content_part.done":
			a := e.AsResponseContentPartDone()
			_, err = at(a.OutputIndex, a.ItemID)
		case "response.output_item.done":
			a := e.AsResponseOutputItemDone()
			if it, err = at(a.OutputIndex, a.Item.ID); err != nil {
				return 0, err
			}
			if it.done != "" || it.typ != a.Item.Type {
				return 0, fmt.Errorf("event %d: item %s done twice or as another type", i, it.id)
			}
			it.done = a.JSON.Item.Raw()
		case "response.completed", "response.incomplete", "response.failed":
			terminals++
			if i != len(evs)-1 {
				return 0, fmt.Errorf("terminal event %d of %d", i, len(evs))
			}
			var raw string
			switch e.Type {
			case "response.completed":
				raw = e.AsResponseCompleted().JSON.Response.Raw()
			case "response.incomplete":
				raw = e.AsResponseIncomplete().JSON.Response.Raw()
			default:
				raw = e.AsResponseFailed().JSON.Response.Raw()
			}
			var r responses.Response
			if err := json.Unmarshal([]byte(raw), &r); err != nil {
				return 0, fmt.Errorf("the SDK cannot parse the response: %v", err)
			}
			if want := strings.TrimPrefix(e.Type, "response."); string(r.Status) != want {
				return 0, fmt.Errorf("a %s event with status %q", e.Type, r.Status)
			}
			var finished, got []string
			for _, it := range out {
				if it.done != "" {
					finished = append(finished, it.done)
				}
			}
			for _, o := range r.Output {
				got = append(got, o.RawJSON())
			}
			if strings.Join(got, ",") != strings.Join(finished, ",") {
				return 0, fmt.Errorf("terminal output\n%s\n--- the stream finished\n%s", strings.Join(got, ","), strings.Join(finished, ","))
			}
		case "response.created", "response.in_progress":
		default:
			return 0, fmt.Errorf("event %d: unexpected type %s", i, e.Type)
		}
		if err != nil {
			return 0, err
		}
	}
	if terminals != 1 {
		return 0, fmt.Errorf("%d terminal events", terminals)
	}
	return len(evs), nil
}

// rcSDKReads has the openai-go SDK read stream over HTTP, to its end
// without error, and find n events.
func rcSDKReads(stream string, n int) error {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(stream))
	}))
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("k"), option.WithMaxRetries(0))
	s := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: "gpt-5.5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	got := 0
	for s.Next() {
		got++
	}
	if err := s.Err(); err != nil || got != n {
		return fmt.Errorf("openai-go stream: %d of %d events, err %v", got, n, err)
	}
	return nil
}

// TestResponsesToChatSDKCheckRejects: rcSDKProblem finds what strict
// clients refuse, so that its passing means something.
func TestResponsesToChatSDKCheckRejects(t *testing.T) {
	good := transformtest.Replay(t, rcStreamExchange(t, rcRules(`{"profile":"deepseek"}`)), deepSeekToolTurn, 4096)
	if err := rcSDKProblem(good); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"index reused":          strings.Replace(good, `"output_index":1,"item":{"id":"fc_`, `"output_index":0,"item":{"id":"fc_`, 1),
		"no terminal":           good[:strings.LastIndex(good, "event: response.completed")],
		"two terminals":         good + good[strings.LastIndex(good, "event: response.completed"):],
		"unknown type":          strings.Replace(good, `response.in_progress`, `response.reasoning_text_part.added`, 2),
		"sequence gap":          rcDropEvent(good, "response.in_progress"),
		"not json":              good[:strings.LastIndex(good, "event: response.completed")] + "data: PROCESSING\n\n" + good[strings.LastIndex(good, "event: response.completed"):],
		"part not before delta": strings.Replace(good, `"content_index":0,"delta":"Need`, `"content_index":1,"delta":"Need`, 1),
	} {
		if rcSDKProblem(bad) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// rcDropEvent removes the first event of type typ from a client stream.
func rcDropEvent(stream, typ string) string {
	var b strings.Builder
	dropped := false
	p := streambuf.Parser{}
	emit := func(ev *transforms.Event) error {
		if !dropped && string(ev.Name) == typ {
			dropped = true
			return nil
		}
		b.Write(ev.Raw)
		return nil
	}
	_ = p.Feed([]byte(stream), emit)
	_ = p.Finish(emit)
	return b.String()
}

// TestResponsesToChatReasoningDisplay: with reasoning_display summary the
// reasoning streams as a summary (the events the Vercel AI SDK renders),
// with both as the summary and the raw text; the done item carries what
// was shown and, either way, the envelope sealing the text.
func TestResponsesToChatReasoningDisplay(t *testing.T) {
	upstream := rcData(
		rcChunk(`{"role":"assistant","reasoning_content":"Th"}`, "null"),
		rcChunk(`{"reasoning_content":"ink \"hard\"."}`, "null"),
		rcChunk(`{"content":"Hi"}`, `"stop"`),
	) + "data: [DONE]\n\n"
	const text = `Think "hard".`
	env := textEnvelopeOf("deepseek", []byte(text))
	ref := func(typ string) string {
		return `{"type":"` + typ + `","sequence_number":#,"item_id":"rs_ID_1","output_index":0,"summary_index":0`
	}
	summaryOpen := ref("response.reasoning_summary_part.added") + `,"part":{"type":"summary_text","text":""}}`
	summaryDelta := func(d string) string {
		return ref("response.reasoning_summary_text.delta") + `,"delta":` + rcStr(d) + `}`
	}
	summaryClose := []string{
		ref("response.reasoning_summary_text.done") + `,"text":` + rcStr(text) + `}`,
		ref("response.reasoning_summary_part.done") + `,"part":{"type":"summary_text","text":` + rcStr(text) + `}}`,
	}
	rawClose := rcRsClose("rs_ID_1", 0, env, text)[:2]
	msg := rcJoin(rcMsgOpen("msg_ID_2", 1), []string{rcMsgDelta("msg_ID_2", 1, "Hi")}, rcMsgClose("msg_ID_2", 1, "Hi"))
	item := func(summary, content string) string {
		return `{"id":"rs_ID_1","type":"reasoning","summary":[` + summary + `],"content":[` + content + `],"encrypted_content":"` + env + `"}`
	}
	summaryPart := `{"type":"summary_text","text":` + rcStr(text) + `}`
	rawPart := `{"type":"reasoning_text","text":` + rcStr(text) + `}`
	end := func(rs string) []string {
		return []string{rcTerminal("response.completed", rcResp("completed", []string{rs, rcMsgItem("msg_ID_2", "Hi")}, "null", "null", "null"))}
	}
	tests := map[string][]string{
		"summary": rcJoin(rcStart(), []string{rcAdded(0, `{"id":"rs_ID_1","type":"reasoning","summary":[],"content":[]}`), summaryOpen,
			summaryDelta("Th"), summaryDelta(`ink "hard".`)}, summaryClose, []string{rcItemDone(0, item(summaryPart, ""))}, msg, end(item(summaryPart, ""))),
		"both": rcJoin(rcStart(), []string{rcAdded(0, `{"id":"rs_ID_1","type":"reasoning","summary":[],"content":[]}`), summaryOpen,
			rcPart("response.content_part.added", "rs_ID_1", 0, `{"type":"reasoning_text","text":""}`),
			summaryDelta("Th"), rcRsDelta("rs_ID_1", 0, "Th"), summaryDelta(`ink "hard".`), rcRsDelta("rs_ID_1", 0, `ink "hard".`)},
			summaryClose, rawClose, []string{rcItemDone(0, item(summaryPart, rawPart))}, msg, end(item(summaryPart, rawPart))),
	}
	for display, want := range tests {
		t.Run(display, func(t *testing.T) {
			got := rcStream(t, rcRules(`{"profile":"deepseek","reasoning_display":"`+display+`"}`), upstream)
			if w := rcSeq(want...); got != w {
				t.Fatalf("stream\n%s\n--- want\n%s", got, w)
			}
		})
	}
	// A JSON answer carries the same item.
	x := rcExchange(t, rcRules(`{"profile":"deepseek","reasoning_display":"both"}`), "/v1/responses")
	if _, err := x.RewriteRequest([]byte(`{"model":"gpt-5.5","input":"hi"}`)); err != nil {
		t.Fatal(err)
	}
	out, err := x.RewriteResponse([]byte(rcCompletionHead + `{"role":"assistant","content":"Hi","reasoning_content":` + rcStr(text) + `},"finish_reason":"stop"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `"output":[` + strings.Replace(item(summaryPart, rawPart), "rs_ID_1", "rs_ID", 1) + `,`; !strings.Contains(rcNorm(string(out)), want) {
		t.Fatalf("body %s\nwant it to hold %s", rcNorm(string(out)), want)
	}
}

// TestResponsesToChatStreamKeepsIDLines: every event the bridge writes for
// a Chat chunk carries that chunk's id: line, and the terminal event
// written when the upstream ends without [DONE] carries the last one, at
// every chunk size.
func TestResponsesToChatStreamKeepsIDLines(t *testing.T) {
	var up strings.Builder
	for i, c := range []string{
		rcChunk(`{"role":"assistant","reasoning_content":"R"}`, "null"),
		rcChunk(`{"content":"Hi"}`, "null"),
		rcChunk(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`, "null"),
		rcChunk(`{}`, `"tool_calls"`),
	} {
		fmt.Fprintf(&up, "id: %d\nretry: 500\ndata: %s\n\n", i+1, c)
	}
	want := "1 response.created,1 response.in_progress,1 response.output_item.added,1 response.content_part.added,1 response.reasoning_text.delta," +
		"2 response.reasoning_text.done,2 response.content_part.done,2 response.output_item.done,2 response.output_item.added,2 response.content_part.added,2 response.output_text.delta," +
		"3 response.output_text.done,3 response.content_part.done,3 response.output_item.done,3 response.output_item.added,3 response.function_call_arguments.delta," +
		"4 response.function_call_arguments.done,4 response.output_item.done,4 response.completed"
	for _, n := range transformtest.ChunkSizes {
		out := transformtest.Replay(t, rcStreamExchange(t, rcRules(`{"profile":"deepseek"}`)), up.String(), n)
		var got []string
		p := streambuf.Parser{}
		collect := func(ev *transforms.Event) error {
			if string(ev.Retry) != "500" {
				t.Errorf("chunk size %d: %s has retry %q", n, ev.Name, ev.Retry)
			}
			got = append(got, string(ev.ID)+" "+string(ev.Name))
			return nil
		}
		_ = p.Feed([]byte(out), collect)
		_ = p.Finish(collect)
		if strings.Join(got, ",") != want {
			t.Fatalf("chunk size %d: ids and events\n%s\nwant\n%s", n, strings.Join(got, ","), want)
		}
	}
}

// TestResponsesToChatStreamNameInPieces: a tool name the upstream streams
// in pieces is announced whole, once the arguments begin, or, for a call
// without arguments, at the next call or the end of the answer.
func TestResponsesToChatStreamNameInPieces(t *testing.T) {
	upstream := rcData(
		rcChunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"exec_"}}]}`, "null"),
		rcChunk(`{"tool_calls":[{"index":0,"function":{"name":"command"}}]}`, "null"),
		rcChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"cmd\":\"ls\"}"}}]}`, "null"),
		rcChunk(`{"tool_calls":[{"index":1,"id":"c2","type":"function","function":{"name":"get_"}}]}`, "null"),
		rcChunk(`{"tool_calls":[{"index":1,"function":{"name":"goal"}}]}`, "null"),
		rcChunk(`{}`, `"tool_calls"`),
	) + "data: [DONE]\n\n"
	want := rcJoin(rcStart(), []string{
		rcFcAdded(0, "c1", "exec_command"),
		rcFcDelta(0, `{"cmd":"ls"}`),
		rcFcAdded(1, "c2", "get_goal"),
	}, rcFcClose(0, "c1", "exec_command", `{"cmd":"ls"}`), rcFcClose(1, "c2", "get_goal", `{}`), []string{
		rcTerminal("response.completed", rcResp("completed", []string{rcFcItem(0, "completed", "c1", "exec_command", `{"cmd":"ls"}`), rcFcItem(1, "completed", "c2", "get_goal", `{}`)}, "null", "null", "null")),
	})
	if got, w := rcStream(t, rcRules(`{"profile":"deepseek"}`), upstream), rcSeq(want...); got != w {
		t.Fatalf("stream\n%s\n--- want\n%s", got, w)
	}
}
