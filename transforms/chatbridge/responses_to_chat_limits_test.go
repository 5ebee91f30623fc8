package chatbridge

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// Tests of what bounds the bridge's work and memory: max_call_buffer on
// streamed calls, max_reasoning, and the orders that once took quadratic
// time (their scaling is in responses_to_chat_bench_test.go).

// envDeepSeekCut is the envelope of a reasoning item cut at max_reasoning,
// by hand: "llmt1." and base64url of {"p":"deepseek","cut":true}.
const envDeepSeekCut = "llmt1.eyJwIjoiZGVlcHNlZWsiLCJjdXQiOnRydWV9"

// rcLimitExchange is rcStreamExchange with max_call_buffer limit.
func rcLimitExchange(t testing.TB, rules string, limit int) *transforms.Exchange {
	t.Helper()
	x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{MaxCallBuffer: limit, MaxEvent: 1 << 20}, nil)
	x.Explain = true
	transformtest.Chain(t, rules).Begin(x, "gpt-5.5")
	x.SetUpstreamPath("/v1/responses")
	if _, err := x.RewriteRequest([]byte(`{"model":"gpt-5.5","input":"hi","stream":true}`)); err != nil {
		t.Fatal(err)
	}
	return x
}

// rcReplayAll is transformtest.ReplayAll for the bridge, whose ids are
// random per exchange: outputs are compared after rcNorm, which it returns.
// Streams the engine stops fail the SDK check by design, so none is made.
func rcReplayAll(t *testing.T, fresh func() *transforms.Exchange, upstream string) string {
	t.Helper()
	var first string
	for i, n := range transformtest.ChunkSizes {
		got := rcNorm(transformtest.ReplayClaims(t, fresh(), upstream, n, true))
		if general := rcNorm(transformtest.ReplayClaims(t, fresh(), upstream, n, false)); general != got {
			t.Fatalf("chunk size %d: claims changed the output:\n%s\n--- without claims:\n%s", n, got, general)
		}
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("chunk size %d changed the output:\n%s\n--- vs size 1:\n%s", n, got, first)
		}
	}
	return first
}

// TestResponsesToChatStreamCallBuffer: a call whose arguments grow past
// max_call_buffer ends the stream: response.failed with the code every
// tracker uses, holding what finished before, and nothing after it (no
// second terminal event); the engine stops, and records the code and the
// bytes held. A
// call exactly at the limit is delivered. The limit counts the arguments
// as the upstream escaped them, held before the name is known too.
func TestResponsesToChatStreamCallBuffer(t *testing.T) {
	const named = `the arguments of tool call "exec_command" exceed the gateway's max_call_buffer of 16 bytes`
	const unnamed = `the arguments of an unnamed tool call exceed the gateway's max_call_buffer of 16 bytes`
	// {\"cmd\": is 9 bytes held, \"ls -la /tmp\"} 16 more.
	first := rcChunk(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"exec_command","arguments":"{\"cmd\":"}}]}`, "null")
	second := rcChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"ls -la /tmp\"}"}}]}`, "null")
	rs := rcRsItem("rs_ID_1", envDeepSeek, "R")
	tests := []struct {
		name, upstream string
		limit          int
		want           []string
		decisions      []string
		buffered       []int
		streamErr      string
	}{
		{
			name:     "past the limit",
			upstream: rcData(rcChunk(`{"role":"assistant","reasoning_content":"R"}`, "null"), first, second, rcChunk(`{}`, `"tool_calls"`)) + "data: [DONE]\n\n",
			limit:    16,
			want: rcJoin(rcStart(), rcRsOpen("rs_ID_1", 0), []string{rcRsDelta("rs_ID_1", 0, "R")}, rcRsClose("rs_ID_1", 0, envDeepSeek, "R"), []string{
				rcFcAdded(1, "c1", "exec_command"),
				rcFcDelta(1, `{"cmd":`),
				rcTerminal("response.failed", rcResp("failed", []string{rs}, "null", `{"code":"max_call_buffer_exceeded","message":`+rcStr(named)+`}`, "null")),
			}),
			decisions: []string{"exec_command drop_partial_call"},
			buffered:  []int{9},
			streamErr: "max_call_buffer_exceeded",
		},
		{
			name: "held before its name",
			upstream: rcData(
				rcChunk(`{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"arguments":"{\"cmd\":"}}]}`, "null"),
				second, rcChunk(`{"tool_calls":[{"index":0,"function":{"name":"exec_command"}}]}`, "null"), rcChunk(`{}`, `"tool_calls"`)) + "data: [DONE]\n\n",
			limit: 16,
			want: rcJoin(rcStart(), []string{
				rcTerminal("response.failed", rcResp("failed", nil, "null", `{"code":"max_call_buffer_exceeded","message":`+rcStr(unnamed)+`}`, "null")),
			}),
			buffered:  []int{9},
			streamErr: "max_call_buffer_exceeded",
		},
		{
			name:     "exactly at the limit",
			upstream: rcData(first, second, rcChunk(`{}`, `"tool_calls"`)) + "data: [DONE]\n\n",
			limit:    25,
			want: rcJoin(rcStart(), []string{
				rcFcAdded(0, "c1", "exec_command"),
				rcFcDelta(0, `{"cmd":`),
				rcFcDelta(0, `"ls -la /tmp"}`),
			}, rcFcClose(0, "c1", "exec_command", `{"cmd":"ls -la /tmp"}`), []string{
				rcTerminal("response.completed", rcResp("completed", []string{rcFcItem(0, "completed", "c1", "exec_command", `{"cmd":"ls -la /tmp"}`)}, "null", "null", "null")),
			}),
			buffered: []int{25},
		},
	}
	rules := rcRules(`{"profile":"deepseek"}`)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := rcReplayAll(t, func() *transforms.Exchange { return rcLimitExchange(t, rules, tc.limit) }, tc.upstream)
			if want := rcSeq(tc.want...); got != want {
				t.Fatalf("stream\n%s\n--- want\n%s", got, want)
			}
			x := rcLimitExchange(t, rules, tc.limit)
			s := x.NewStream()
			err := s.Write([]byte(tc.upstream))
			if err == nil {
				err = s.Close()
			}
			var ab *transforms.StreamAbort
			switch {
			case tc.streamErr == "" && (err != nil || s.Stopped()):
				t.Errorf("the stream stopped: %v", err)
			case tc.streamErr != "" && (!errors.As(err, &ab) || ab.Code != tc.streamErr || !s.Stopped()):
				t.Errorf("ended with %v, stopped %v; want a StreamAbort %s", err, s.Stopped(), tc.streamErr)
			}
			if x.StreamError() != tc.streamErr {
				t.Errorf("stream error %q, want %q", x.StreamError(), tc.streamErr)
			}
			if got, want := strings.Join(rcDecisions(x), ", "), strings.Join(tc.decisions, ", "); got != want {
				t.Errorf("decisions %q, want %q", got, want)
			}
			if got := fmt.Sprint(x.CallBuffers()); got != fmt.Sprint(tc.buffered) {
				t.Errorf("buffered %s, want %v", got, tc.buffered)
			}
		})
	}
}

// TestResponsesToChatStreamReasoningCap: reasoning past max_reasoning
// still streams, but the item keeps only the whole deltas that came
// before the cap, and its envelope says it was cut; reasoning items after
// it keep nothing. Each cut item is a decision.
func TestResponsesToChatStreamReasoningCap(t *testing.T) {
	upstream := rcData(
		rcChunk(`{"role":"assistant","reasoning_content":"abcd"}`, "null"),
		rcChunk(`{"reasoning_content":"efgh"}`, "null"),
		rcChunk(`{"reasoning_content":"ijkl"}`, "null"),
		rcChunk(`{"content":"ok"}`, "null"),
		rcChunk(`{"reasoning_content":"mn"}`, "null"),
		rcChunk(`{"content":"!"}`, "null"),
		rcChunk(`{}`, `"stop"`),
	) + "data: [DONE]\n\n"
	rules := rcRules(`{"profile":"deepseek","max_reasoning":10}`)
	got := rcStream(t, rules, upstream)
	want := rcSeq(rcJoin(rcStart(),
		rcRsOpen("rs_ID_1", 0), []string{rcRsDelta("rs_ID_1", 0, "abcd"), rcRsDelta("rs_ID_1", 0, "efgh"), rcRsDelta("rs_ID_1", 0, "ijkl")},
		rcRsClose("rs_ID_1", 0, envDeepSeekCut, "abcdefgh"),
		rcMsgOpen("msg_ID_2", 1), []string{rcMsgDelta("msg_ID_2", 1, "ok")}, rcMsgClose("msg_ID_2", 1, "ok"),
		rcRsOpen("rs_ID_3", 2), []string{rcRsDelta("rs_ID_3", 2, "mn")}, rcRsClose("rs_ID_3", 2, envDeepSeekCut, ""),
		rcMsgOpen("msg_ID_4", 3), []string{rcMsgDelta("msg_ID_4", 3, "!")}, rcMsgClose("msg_ID_4", 3, "!"),
		[]string{rcTerminal("response.completed", rcResp("completed", []string{
			rcRsItem("rs_ID_1", envDeepSeekCut, "abcdefgh"), rcMsgItem("msg_ID_2", "ok"), rcRsItem("rs_ID_3", envDeepSeekCut, ""), rcMsgItem("msg_ID_4", "!"),
		}, "null", "null", "null"))})...)
	if got != want {
		t.Fatalf("stream\n%s\n--- want\n%s", got, want)
	}
	x := rcStreamExchange(t, rules)
	transformtest.Replay(t, x, upstream, 4096)
	if got := strings.Join(rcDecisions(x), ", "); got != "reasoning truncate, reasoning truncate" {
		t.Errorf("decisions %q", got)
	}
	// Under the cap nothing changes.
	x = rcStreamExchange(t, rcRules(`{"profile":"deepseek","max_reasoning":14}`))
	if out := rcNorm(transformtest.Replay(t, x, upstream, 4096)); strings.Contains(out, envDeepSeekCut) || len(x.Decisions()) != 0 {
		t.Errorf("cut under the cap: %v\n%s", rcDecisions(x), out)
	}
}

// TestResponsesToChatJSONReasoningCap: in JSON the cap counts decoded
// bytes and never splits a character.
func TestResponsesToChatJSONReasoningCap(t *testing.T) {
	out, x := rcJSON(t, `{"profile":"deepseek","max_reasoning":2}`, rcCompletionHead+`{"role":"assistant","content":"A","reasoning_content":"héllo"},"finish_reason":"stop"}]}`)
	transformtest.JSONEqual(t, []byte(rcNorm(out)), `{"id":"resp_ID","object":"response","created_at":1764400000,"status":"completed","model":"gpt-5.5","output":[`+
		`{"id":"rs_ID","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"h"}],"encrypted_content":"`+envDeepSeekCut+`"},`+
		`{"id":"msg_ID","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"A","annotations":[],"logprobs":[]}]}],`+
		`"usage":null,"error":null,"incomplete_details":null`+rcEcho+`}`)
	if got := strings.Join(rcDecisions(x), ", "); got != "reasoning truncate" {
		t.Errorf("decisions %q", got)
	}
}

// TestResponsesToChatCutReasoningNotReplayed: the next turn drops a cut
// reasoning item with a decision; the tool-call message it led to gets
// the empty reasoning_content the profile sends when there is none.
func TestResponsesToChatCutReasoningNotReplayed(t *testing.T) {
	out, x, err := rcRequest(t, rcRules(`{"profile":"deepseek"}`), rcInput(rcMsg("user", "q"), rcReasoning(envDeepSeekCut, "abcdefgh"), rcCall("c1", "f", `{}`), rcOutput("c1", "O")))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(out), rcChat(`,"max_tokens":32768`, `{"role":"user","content":"q"}`,
		`{"role":"assistant","content":"","reasoning_content":"","tool_calls":[`+rcToolCall("c1", "f", `{}`)+`]}`,
		`{"role":"tool","tool_call_id":"c1","content":"O"}`))
	if got := strings.Join(rcDecisions(x), ", "); got != "reasoning drop" {
		t.Errorf("decisions %q", got)
	}
}

func TestResponsesToChatMaxReasoningConfig(t *testing.T) {
	var r ResponsesToChat
	if err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser("responses_to_chat {\n\tmax_reasoning 2MiB\n}")); err != nil {
		t.Fatal(err)
	}
	if r.MaxReasoning != 2<<20 {
		t.Fatalf("max_reasoning %d", r.MaxReasoning)
	}
	for _, bad := range []string{"max_reasoning 0", "max_reasoning lots", "max_reasoning", "max_reasoning 1MiB 2MiB"} {
		var r ResponsesToChat
		if err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser("responses_to_chat {\n\t" + bad + "\n}")); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	var d ResponsesToChat
	if err := d.Provision(transformtest.Context(t)); err != nil || d.maxReasoning != 4<<20 {
		t.Errorf("default max_reasoning %d, %v", d.maxReasoning, err)
	}
	d = ResponsesToChat{MaxReasoning: -1}
	if err := d.Provision(transformtest.Context(t)); err == nil {
		t.Error("a negative max_reasoning is accepted")
	}
}

// TestResponsesToChatHistoryRunsApart: outputs of a later run of calls
// placed inside an earlier run do not end it; the first output of the
// run does. Each run is one assistant message followed by its tool
// messages.
func TestResponsesToChatHistoryRunsApart(t *testing.T) {
	out, x, err := rcRequest(t, rcRules(`{"profile":"deepseek"}`), rcInput(
		rcMsg("user", "q"),
		rcCall("a0", "f", `{"i":0}`), rcOutput("b0", "B0"),
		rcCall("a1", "f", `{"i":1}`), rcOutput("b1", "B1"),
		rcOutput("a0", "A0"), rcOutput("a1", "A1"),
		rcCall("b0", "g", `{}`), rcCall("b1", "g", `{}`),
		rcMsg("user", "next")))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(out), rcChat(`,"max_tokens":32768`, `{"role":"user","content":"q"}`,
		`{"role":"assistant","content":"","reasoning_content":"","tool_calls":[`+rcToolCall("a0", "f", `{"i":0}`)+`,`+rcToolCall("a1", "f", `{"i":1}`)+`]}`,
		`{"role":"tool","tool_call_id":"a0","content":"A0"}`, `{"role":"tool","tool_call_id":"a1","content":"A1"}`,
		`{"role":"assistant","content":"","reasoning_content":"","tool_calls":[`+rcToolCall("b0", "g", `{}`)+`,`+rcToolCall("b1", "g", `{}`)+`]}`,
		`{"role":"tool","tool_call_id":"b0","content":"B0"}`, `{"role":"tool","tool_call_id":"b1","content":"B1"}`,
		`{"role":"user","content":"next"}`))
	if len(x.Decisions()) != 0 {
		t.Errorf("decisions %v", rcDecisions(x))
	}
}

// TestResponsesToChatHistoryDuplicateCallID: a second function_call with
// a call_id already sent is dropped: the one output answers the first,
// and is not sent again for each copy.
func TestResponsesToChatHistoryDuplicateCallID(t *testing.T) {
	out, x, err := rcRequest(t, rcRules(`{"profile":"deepseek"}`), rcInput(
		rcMsg("user", "q"), rcCall("x", "f", `{"n":1}`), rcCall("x", "f", `{"n":2}`), rcOutput("x", "X"),
		rcCall("x", "f", `{"n":3}`), rcMsg("user", "next")))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(out), rcChat(`,"max_tokens":32768`, `{"role":"user","content":"q"}`,
		`{"role":"assistant","content":"","reasoning_content":"","tool_calls":[`+rcToolCall("x", "f", `{"n":1}`)+`]}`,
		`{"role":"tool","tool_call_id":"x","content":"X"}`, `{"role":"user","content":"next"}`))
	if got := strings.Join(rcDecisions(x), ", "); got != "input[2] drop, input[4] drop" {
		t.Errorf("decisions %q", got)
	}
}

// TestResponsesToChatStreamCallsNamedInReverse: calls are announced as
// their names arrive, so the last call named first takes output_index 0;
// their done events follow the order the calls came in, and the final
// object lists them by output_index.
func TestResponsesToChatStreamCallsNamedInReverse(t *testing.T) {
	var chunks []string
	for i := range 3 {
		chunks = append(chunks, rcChunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"c%d","type":"function","function":{"arguments":"{\"i\":%d}"}}]}`, i, i, i), "null"))
	}
	for i := 2; i >= 0; i-- {
		chunks = append(chunks, rcChunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"name":"f%d"}}]}`, i, i), "null"))
	}
	chunks = append(chunks, rcChunk(`{}`, `"tool_calls"`))
	got := rcStream(t, rcRules(`{"profile":"deepseek"}`), rcData(chunks...)+"data: [DONE]\n\n")
	want := rcSeq(rcJoin(rcStart(), []string{
		rcFcAdded(0, "c2", "f2"), rcFcDelta(0, `{"i":2}`),
		rcFcAdded(1, "c1", "f1"), rcFcDelta(1, `{"i":1}`),
		rcFcAdded(2, "c0", "f0"), rcFcDelta(2, `{"i":0}`),
	}, rcFcClose(2, "c0", "f0", `{"i":0}`), rcFcClose(1, "c1", "f1", `{"i":1}`), rcFcClose(0, "c2", "f2", `{"i":2}`), []string{
		rcTerminal("response.completed", rcResp("completed", []string{
			rcFcItem(0, "completed", "c2", "f2", `{"i":2}`),
			rcFcItem(1, "completed", "c1", "f1", `{"i":1}`),
			rcFcItem(2, "completed", "c0", "f0", `{"i":0}`),
		}, "null", "null", "null")),
	})...)
	if got != want {
		t.Fatalf("stream\n%s\n--- want\n%s", got, want)
	}
}

// TestResponsesToChatThinkCloseInsideEscapes: closing tags that begin
// inside an escape (an escaped backslash, then u003c/think\u003e) are not
// the end of the thinking; the real one after them is.
func TestResponsesToChatThinkCloseInsideEscapes(t *testing.T) {
	fake := strings.Repeat(`\\u003c/think\u003e`, 3)
	got := rcStream(t, rcRules(`{"profile":"deepseek"}`), rcData(
		rcChunk(`{"role":"assistant","content":"<think>`+fake+`"}`, "null"),
		rcChunk(`{"content":"\u003c/think\u003eok"}`, "null"),
		rcChunk(`{}`, `"stop"`),
	)+"data: [DONE]\n\n")
	// The text as decoded; the bridge passes the upstream's escapes on,
	// so the expected events spell > the way the upstream did.
	text := strings.Repeat(`\u003c/think>`, 3)
	want := rcSeq(rcJoin(rcStart(),
		rcRsOpen("rs_ID_1", 0), []string{rcRsDelta("rs_ID_1", 0, text)}, rcRsClose("rs_ID_1", 0, envDeepSeek, text),
		rcMsgOpen("msg_ID_2", 1), []string{rcMsgDelta("msg_ID_2", 1, "ok")}, rcMsgClose("msg_ID_2", 1, "ok"),
		[]string{rcTerminal("response.completed", rcResp("completed", []string{rcRsItem("rs_ID_1", envDeepSeek, text), rcMsgItem("msg_ID_2", "ok")}, "null", "null", "null"))})...)
	want = strings.ReplaceAll(want, `/think>`, `/think\u003e`)
	if got != want {
		t.Fatalf("stream\n%s\n--- want\n%s", got, want)
	}
}
