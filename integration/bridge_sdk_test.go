package integration

// responses_to_chat end to end without Codex: the official openai-go
// client and its strict accumulator read the stream the bridge makes of a
// thinking provider's Chat chunks, through Caddy with the canonical
// configuration.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// bridgeRules is the canonical configuration for a Responses client (Codex
// with gpt-5.5) on a Chat-only provider: the model renamed, the tools
// fitted to the provider, the protocol bridged.
func bridgeRules(profile, model string) string {
	return `		rule field_set {
			models gpt-5.5
			path model
			value ` + model + `
		}
		rule tools_plan {
			profile ` + profile + `
		}
		rule responses_to_chat {
			profile ` + profile + `
		}`
}

// bridgeModels are the upstream models the canonical rules name per
// profile.
var bridgeModels = map[fakeprovider.Thinking]string{
	fakeprovider.DeepSeek: "deepseek-v4-pro",
	fakeprovider.Kimi:     "kimi-k2.6",
}

// bridgeReasoning is what the provider thinks on each turn of the task:
// quotes, a backslash, newlines and CJK, all of which must come back
// byte for byte.
var bridgeReasoning = [3]string{
	"The user wants hello.txt, but first a \"look around\":\nlist the files and read README.md, both at once. 中文 \\ ok",
	"README.md says to greet. Now write hello.txt with apply_patch:\n\tone added file.",
	"The patch applied (\"Success\"). Report back.",
}

const (
	// bridgePatch is the provider's apply_patch input, already well formed.
	bridgePatch = "*** Begin Patch\n*** Add File: hello.txt\n+Hello through the bridge\n+second line: \"quoted\" and 中文\n*** End Patch\n"

	// bridgeHello is the file bridgePatch creates.
	bridgeHello = "Hello through the bridge\nsecond line: \"quoted\" and 中文\n"

	// bridgeAnswer is the provider's final answer.
	bridgeAnswer = "Created hello.txt after reading README.md."

	// bridgeReadme is the README.md the task reads.
	bridgeReadme = "# Greeting\nPlease greet in hello.txt.\n"
)

// bridgeTask is the provider's side of the task: two parallel
// exec_command calls, an apply_patch call, the final answer.
func bridgeTask() []fakeprovider.Turn {
	return []fakeprovider.Turn{
		{Reasoning: bridgeReasoning[0], Calls: []fakeprovider.Call{
			{Name: "exec_command", Arguments: `{"cmd":"ls"}`},
			{Name: "exec_command", Arguments: `{"cmd":"cat README.md"}`},
		}},
		{Reasoning: bridgeReasoning[1], Calls: []fakeprovider.Call{
			{Name: "apply_patch", Arguments: fakeprovider.PatchArguments(bridgePatch)},
		}},
		{Reasoning: bridgeReasoning[2], Text: bridgeAnswer},
	}
}

// startBridge starts Caddy with the canonical rules in front of a strict
// thinking provider following turns.
func startBridge(t *testing.T, th fakeprovider.Thinking, turns []fakeprovider.Turn) *fakeprovider.Provider {
	t.Helper()
	up := &fakeprovider.Provider{Thinking: th, Turns: turns}
	startGateway(t, bridgeRules(string(th), bridgeModels[th]), serveUpstream(t, up))
	return up
}

// bridgeParams is a Codex-like request: instructions, a custom apply_patch
// (tools_plan makes it a function), exec_command, reasoning effort.
func bridgeParams() responses.ResponseNewParams {
	p := codexLikeParams()
	p.Instructions = openai.String("You are a coding agent.")
	p.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffortMedium}
	return p
}

// assertResponsesGrammar checks a Responses event stream the way strict
// clients read it: event name = type; sequence_number 0, 1, 2, …;
// response.created then response.in_progress first; each item added at
// the next output_index and done once; content parts added before their
// deltas; arguments only for an open call; exactly one terminal event, the
// last, whose output lists the finished items in order. It returns the
// terminal event.
func assertResponsesGrammar(t *testing.T, evs []sseEvent) gjson.Result {
	t.Helper()
	openItems := map[int64]string{} // output_index → item id, added and not done
	var doneIDs []string
	parts := map[string]bool{} // item id / content_index with a part added
	added := int64(0)
	var terminal gjson.Result
	for i, ev := range evs {
		if ev.data == "[DONE]" {
			t.Fatalf("event %d: [DONE] in a Responses stream", i)
		}
		d := gjson.Parse(ev.data)
		typ := d.Get("type").String()
		if ev.name != typ {
			t.Errorf("event %d: name %q, type %q", i, ev.name, typ)
		}
		if got := d.Get("sequence_number"); got.Type != gjson.Number || got.Int() != int64(i) {
			t.Errorf("event %d (%s): sequence_number %s", i, typ, got.Raw)
		}
		if terminal.Exists() {
			t.Fatalf("event %d (%s) after the terminal event", i, typ)
		}
		if (i == 0 && typ != "response.created") || (i == 1 && typ != "response.in_progress") {
			t.Fatalf("event %d is %s", i, typ)
		}
		idx, item := d.Get("output_index").Int(), d.Get("item_id").String()
		part := item + "/" + d.Get("content_index").String()
		switch typ {
		case "response.output_item.added":
			if idx != added {
				t.Errorf("event %d: item added at output_index %d, want %d", i, idx, added)
			}
			added++
			openItems[idx] = d.Get("item.id").String()
		case "response.output_item.done":
			if id, ok := openItems[idx]; !ok || id != d.Get("item.id").String() {
				t.Errorf("event %d: done for %s at %d, which is not open (%q)", i, d.Get("item.id"), idx, id)
			}
			delete(openItems, idx)
			doneIDs = append(doneIDs, d.Get("item.id").String())
		case "response.content_part.added":
			if openItems[idx] != item {
				t.Errorf("event %d: part for %s at %d, not open", i, item, idx)
			}
			parts[part] = true
		case "response.output_text.delta", "response.output_text.done", "response.reasoning_text.delta",
			"response.reasoning_text.done", "response.content_part.done":
			if openItems[idx] != item || !parts[part] {
				t.Errorf("event %d: %s for %s without an open item and part", i, typ, part)
			}
		case "response.function_call_arguments.delta", "response.function_call_arguments.done":
			if openItems[idx] != item {
				t.Errorf("event %d: %s for %s at %d, not open", i, typ, item, idx)
			}
		case "response.completed", "response.incomplete", "response.failed":
			terminal = d
		case "response.created", "response.in_progress":
		default:
			t.Errorf("event %d: unexpected type %s", i, typ)
		}
	}
	if !terminal.Exists() {
		t.Fatalf("no terminal event in %d events", len(evs))
	}
	if len(openItems) > 0 && terminal.Get("type").String() == "response.completed" {
		t.Errorf("response.completed with items still open: %v", openItems)
	}
	var outIDs []string
	for _, it := range terminal.Get("response.output").Array() {
		outIDs = append(outIDs, it.Get("id").String())
	}
	if strings.Join(outIDs, ",") != strings.Join(doneIDs, ",") {
		t.Errorf("terminal output %q, items done %q", outIDs, doneIDs)
	}
	return terminal
}

// sdkStream runs one streamed request with openai-go, feeding every event
// to the SDK's strict accumulator (responses.ResponseAccumulator, which
// refuses malformed events and anything after a terminal one). It returns
// the events and the accumulator.
func sdkStream(t *testing.T, params responses.ResponseNewParams) ([]sseEvent, *responses.ResponseAccumulator) {
	t.Helper()
	client := sdkClient()
	stream := client.Responses.NewStreaming(context.Background(), params)
	defer stream.Close()
	var acc responses.ResponseAccumulator
	var evs []sseEvent
	for stream.Next() {
		ev := stream.Current()
		evs = append(evs, sseEvent{name: ev.Type, data: ev.RawJSON()})
		var se responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(ev.RawJSON()), &se); err != nil {
			t.Fatalf("event %d does not decode: %v\n%s", len(evs)-1, err, ev.RawJSON())
		}
		if err := acc.AddEvent(se); err != nil {
			t.Fatalf("accumulator refused event %d: %v\n%s", len(evs)-1, err, ev.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return evs, &acc
}

// lastUpstream is the last request the provider received.
func lastUpstream(t *testing.T, up *fakeprovider.Provider) gjson.Result {
	t.Helper()
	reqs := up.Requests()
	if len(reqs) == 0 {
		t.Fatal("the provider received nothing")
	}
	return gjson.ParseBytes(reqs[len(reqs)-1])
}

// assertUsage checks the Responses usage maps the provider's Chat usage
// for the request body it received: DeepSeek's prompt_cache_hit_tokens
// (Kimi's prompt_tokens_details) become cached_tokens.
func assertUsage(t *testing.T, usage gjson.Result, upstreamBody []byte) {
	t.Helper()
	prompt, cached := fakeprovider.PromptTokens(len(upstreamBody)), fakeprovider.CacheHitTokens(len(upstreamBody))
	if usage.Get("input_tokens").Int() != int64(prompt) || usage.Get("input_tokens_details.cached_tokens").Int() != int64(cached) ||
		!usage.Get("output_tokens_details.reasoning_tokens").Exists() || usage.Get("output_tokens").Int() <= 0 ||
		usage.Get("total_tokens").Int() != usage.Get("input_tokens").Int()+usage.Get("output_tokens").Int() {
		t.Errorf("usage %s, want input_tokens %d with cached_tokens %d", usage.Raw, prompt, cached)
	}
	if cached == 0 {
		t.Errorf("the provider reported no cache hit for a %d-byte body: the test proves nothing", len(upstreamBody))
	}
}

// TestBridgeStreamWithSDK: a thinking provider's turn (reasoning, text,
// two parallel calls) reaches openai-go as a stream its accumulator takes,
// ending in response.completed; the client sends the items back, and the
// provider's next request carries the reasoning, the text and the calls in
// one assistant message, followed by the two tool messages.
func TestBridgeStreamWithSDK(t *testing.T) {
	for _, th := range []fakeprovider.Thinking{fakeprovider.DeepSeek, fakeprovider.Kimi} {
		t.Run(string(th), func(t *testing.T) {
			turns := bridgeTask()
			turns[0].Text = "I'll look around first."
			turns[1] = fakeprovider.Turn{Reasoning: bridgeReasoning[2], Text: bridgeAnswer}
			up := startBridge(t, th, turns)

			evs, acc := sdkStream(t, bridgeParams())
			terminal := assertResponsesGrammar(t, evs)
			snap := acc.Snapshot()
			if snap.TerminalEvent != "response.completed" || terminal.Get("type").String() != "response.completed" {
				t.Fatalf("terminal event %q / %s", snap.TerminalEvent, terminal.Get("type"))
			}
			final, err := acc.ReconstructedResponse()
			if err != nil {
				t.Fatal(err)
			}
			ids := up.CallIDs()
			var got []string
			for _, it := range final.Output {
				switch it.Type {
				case "reasoning":
					r := it.AsReasoning()
					if len(r.Content) != 1 || r.Content[0].Text != turns[0].Reasoning || r.EncryptedContent == "" {
						t.Errorf("reasoning item %s", it.RawJSON())
					}
					got = append(got, "reasoning")
				case "message":
					got = append(got, "message:"+it.AsMessage().Content[0].Text)
				case "function_call":
					c := it.AsFunctionCall()
					got = append(got, "function_call:"+c.CallID+":"+c.Name+":"+c.Arguments)
				default:
					got = append(got, it.Type)
				}
			}
			want := []string{"reasoning", "message:I'll look around first.",
				"function_call:" + ids[0] + `:exec_command:{"cmd":"ls"}`,
				"function_call:" + ids[1] + `:exec_command:{"cmd":"cat README.md"}`}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("output\n got %q\nwant %q", got, want)
			}
			if final.Model != "gpt-5.5" || final.Status != "completed" {
				t.Errorf("model %q status %q", final.Model, final.Status)
			}
			turn1 := up.Requests()[0]
			assertUsage(t, terminal.Get("response.usage"), turn1)
			if th == fakeprovider.Kimi && (ids[0] != "functions.exec_command:0" || ids[1] != "functions.exec_command:1") {
				t.Errorf("Kimi ids %q", ids)
			}

			// Turn 2: the client sends the output back with the calls'
			// outputs, as Codex does, in a plain JSON request.
			var items []string
			for _, it := range final.Output {
				items = append(items, it.RawJSON())
			}
			status, out := postTurn2(t, items, ids)
			if status != http.StatusOK {
				t.Fatalf("turn 2: %d %s", status, out)
			}
			if r := gjson.ParseBytes(out); r.Get("status").String() != "completed" || r.Get(`output.#(type=="message").content.0.text`).String() != bridgeAnswer {
				t.Errorf("turn 2 response %s", out)
			}
			msgs := lastUpstream(t, up).Get("messages").Array()
			if len(msgs) != 5 {
				t.Fatalf("turn 2 messages: %d, want system, user, assistant, tool, tool", len(msgs))
			}
			assistant := msgs[2]
			if assistant.Get("role").String() != "assistant" || assistant.Get("content").String() != "I'll look around first." ||
				assistant.Get("reasoning_content").String() != turns[0].Reasoning ||
				assistant.Get("tool_calls.#.id").Raw != mustJSON(ids) {
				t.Errorf("turn 2 assistant message %s", assistant.Raw)
			}
			for i, id := range ids {
				if m := msgs[3+i]; m.Get("role").String() != "tool" || m.Get("tool_call_id").String() != id {
					t.Errorf("turn 2 message %d: %s", 3+i, m.Raw)
				}
			}
		})
	}
}

// postTurn2 sends a second turn as a plain JSON request, the way Codex
// builds one: the prompt, the items of turn 1 as the client received them
// (raw), and an output for each call id.
func postTurn2(t *testing.T, items, ids []string) (int, []byte) {
	t.Helper()
	input := []json.RawMessage{json.RawMessage(`{"type":"message","role":"user","content":"Create hello.txt"}`)}
	for _, it := range items {
		input = append(input, json.RawMessage(it))
	}
	for i, id := range ids {
		input = append(input, json.RawMessage(`{"type":"function_call_output","call_id":`+strconv.Quote(id)+`,"output":"out `+strconv.Itoa(i)+`"}`))
	}
	body := mustJSON(map[string]any{
		"model": "gpt-5.5", "instructions": "You are a coding agent.", "input": input, "store": false,
		"include": []string{"reasoning.encrypted_content"}, "reasoning": map[string]any{"effort": "medium"},
		"tools": []any{map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}}},
	})
	resp, err := http.Post(gatewayURL+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// TestBridgeProvidersRefuseLostReasoning shows the fakes are as strict as
// the providers: with the bridge told to strip reasoning (`reasoning
// strip`), the second turn is refused with the provider's own 400, which
// the client gets with its status.
func TestBridgeProvidersRefuseLostReasoning(t *testing.T) {
	for th, want := range map[fakeprovider.Thinking]string{
		fakeprovider.DeepSeek: `{"error":{"message":` + strconv.Quote(fakeprovider.MsgDeepSeekReasoning) + `,"type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
		fakeprovider.Kimi:     `{"error":{"message":"thinking is enabled but reasoning_content is missing in assistant tool call message at index 2","type":"invalid_request_error","code":20015},"type":"error"}`,
	} {
		t.Run(string(th), func(t *testing.T) {
			up := &fakeprovider.Provider{Thinking: th, Turns: bridgeTask()}
			rules := strings.TrimSuffix(bridgeRules(string(th), bridgeModels[th]), "\n\t\t}") + "\n\t\t\treasoning strip\n\t\t}"
			startGateway(t, rules, serveUpstream(t, up))
			client := sdkClient()
			resp, err := client.Responses.New(context.Background(), bridgeParams())
			if err != nil {
				t.Fatal(err)
			}
			var items []string
			for _, it := range resp.Output {
				items = append(items, it.RawJSON())
			}
			status, out := postTurn2(t, items, up.CallIDs())
			if status != http.StatusBadRequest {
				t.Fatalf("turn 2 without reasoning: %d %s", status, out)
			}
			assertJSON(t, out, want)
			if rc := lastUpstream(t, up).Get(`messages.#(role=="assistant").reasoning_content`); rc.Exists() {
				t.Errorf("reasoning %s went upstream despite reasoning strip", rc.Raw)
			}
		})
	}
}

// mustJSON is v as compact JSON.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// lengthTurn is a provider answer cut by its token limit.
var lengthTurn = []fakeprovider.Turn{{Reasoning: "A long thought.", Text: "The answer is cut", Finish: "length"}}

// TestBridgeLengthWithSDK: finish_reason length ends the stream in
// response.incomplete with incomplete_details.reason max_output_tokens,
// which openai-go's accumulator takes as the terminal event; without a
// stream the response object says the same.
func TestBridgeLengthWithSDK(t *testing.T) {
	up := startBridge(t, fakeprovider.DeepSeek, lengthTurn)
	evs, acc := sdkStream(t, bridgeParams())
	terminal := assertResponsesGrammar(t, evs)
	if snap := acc.Snapshot(); snap.TerminalEvent != "response.incomplete" || snap.OutputText() != "The answer is cut" {
		t.Fatalf("terminal %q, text %q", snap.TerminalEvent, snap.OutputText())
	}
	final, err := acc.ReconstructedResponse()
	if err != nil {
		t.Fatal(err)
	}
	if final.Status != "incomplete" || final.IncompleteDetails.Reason != "max_output_tokens" {
		t.Errorf("status %q reason %q: %s", final.Status, final.IncompleteDetails.Reason, terminal.Raw)
	}
	assertUsage(t, terminal.Get("response.usage"), up.Requests()[0])

	client := sdkClient()
	resp, err := client.Responses.New(context.Background(), bridgeParams())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "incomplete" || resp.IncompleteDetails.Reason != "max_output_tokens" || resp.OutputText() != "The answer is cut" {
		t.Errorf("non-streaming: status %q reason %q text %q\n%s", resp.Status, resp.IncompleteDetails.Reason, resp.OutputText(), resp.RawJSON())
	}
	if len(resp.Output) == 0 || resp.Output[0].Type != "reasoning" || resp.Output[0].AsReasoning().Content[0].Text != "A long thought." {
		t.Errorf("non-streaming output: %s", resp.RawJSON())
	}
	if lastUpstream(t, up).Get("stream").Bool() {
		t.Error("the non-streaming request went upstream as a stream")
	}
}

// TestBridgeJSONWithSDK: the non-streaming form of a tool turn: the Chat
// completion becomes a Responses object openai-go decodes, with the
// reasoning item first and the calls under the provider's ids.
func TestBridgeJSONWithSDK(t *testing.T) {
	up := startBridge(t, fakeprovider.Kimi, bridgeTask())
	client := sdkClient()
	resp, err := client.Responses.New(context.Background(), bridgeParams())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "completed" || len(resp.Output) != 3 || resp.Output[0].Type != "reasoning" {
		t.Fatalf("response %s", resp.RawJSON())
	}
	if r := resp.Output[0].AsReasoning(); r.Content[0].Text != bridgeReasoning[0] {
		t.Errorf("reasoning %s", resp.Output[0].RawJSON())
	}
	for i, id := range []string{"functions.exec_command:0", "functions.exec_command:1"} {
		if c := resp.Output[1+i].AsFunctionCall(); c.CallID != id || c.Name != "exec_command" {
			t.Errorf("call %d: %s", i, resp.Output[1+i].RawJSON())
		}
	}
	assertUsage(t, gjson.Parse(resp.Usage.RawJSON()), up.Requests()[0])
}
