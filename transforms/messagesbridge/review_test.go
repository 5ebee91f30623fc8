package messagesbridge

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// rvCutDeepSeek is the cut mark for deepseek, written by hand: "llmt1."
// and base64url of {"p":"deepseek","cut":true}, the bytes
// responses_to_chat writes for a cut reasoning item.
const rvCutDeepSeek = "llmt1.eyJwIjoiZGVlcHNlZWsiLCJjdXQiOnRydWV9"

// TestMessagesToChatGatewayMarksNotReplayed: a thinking block the gateway
// marked as not whole (cut at max_reasoning, or by a failed stream) and
// one that kept content_block_start's placeholder give back nothing: not
// the block's visible text, which is a part passing for the whole. A
// tool turn then carries the empty reasoning_content DeepSeek and Kimi
// want, and each drop is a decision.
func TestMessagesToChatGatewayMarksNotReplayed(t *testing.T) {
	if got := cutSignature("deepseek"); got != rvCutDeepSeek {
		t.Fatalf("cutSignature = %s", got)
	}
	for _, tc := range []struct{ name, config, sig string }{
		{"deepseek, cut", rqDeepSeek, rvCutDeepSeek},
		{"deepseek, the placeholder", rqDeepSeek, "llmt.pending"},
		{"kimi, cut", `{"profile":"kimi"}`, "llmt1.eyJwIjoia2ltaSIsImN1dCI6dHJ1ZX0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := rqBody("", rqUserList, rqThinkingTurn("the first part of a long thought", tc.sig), rqResultsTwo)
			out, x, err := rqRun(t, rqRules(tc.config), body)
			if err != nil {
				t.Fatal(err)
			}
			transformtest.JSONEqual(t, []byte(out), rqChat(rqMax, rqChatList, rqCallsTurn(""), rqToolsTwo))
			if d := rqDecisions(x); !slices.Equal(d, []string{"messages[1].content[0] drop"}) {
				t.Fatalf("decisions %q", d)
			}
		})
	}
}

// TestMessagesToChatCutRoundTrip: the signature of an answer whose
// reasoning passed max_reasoning, as the response side wrote it, makes
// the next request send no reasoning of that turn.
func TestMessagesToChatCutRoundTrip(t *testing.T) {
	rules := `[{"transform":"messages_to_chat_response_harness","config":{"profile":"deepseek","max_reasoning":8,"record":{"model":"claude-opus-5-5","max_tokens":32000}}}]`
	answer := rsJSON(t, rules, rsCompletion(`{"role":"assistant","content":null,"reasoning_content":"more than eight bytes of thought",`+
		`"tool_calls":[{"id":"toolu_a","type":"function","function":{"name":"Bash","arguments":"{\"cmd\":\"ls\"}"}}]}`, "tool_calls", ""))
	var msg struct {
		Content []json.RawMessage
	}
	if err := json.Unmarshal([]byte(answer), &msg); err != nil || len(msg.Content) != 2 {
		t.Fatalf("answer %s (%v)", answer, err)
	}
	want := `{"type":"thinking","thinking":"more than eight bytes of thought","signature":"` + rvCutDeepSeek + `"}`
	if string(msg.Content[0]) != want {
		t.Fatalf("thinking block %s, want %s", msg.Content[0], want)
	}
	body := rqBody("", rqUserList, `{"role":"assistant","content":[`+string(msg.Content[0])+`,`+string(msg.Content[1])+`]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"a.txt"}]}`)
	out, _, err := rqRun(t, rqRules(rqDeepSeek), body)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(out), rqChat(rqMax, rqChatList,
		`{"role":"assistant","content":"","reasoning_content":"","tool_calls":[{"id":"toolu_a","type":"function","function":{"name":"Bash","arguments":"{\"cmd\":\"ls\"}"}}]}`,
		`{"role":"tool","tool_call_id":"toolu_a","content":"a.txt"}`))
}

// TestMessagesToChatEnvelopeBounds: an envelope deflates its text, so a
// request of kilobytes could carry gigabytes of "reasoning". One holding
// more than max_reasoning (which the response side never seals) is
// dropped, and all of a request's envelopes give back at most eight times
// the body and one max_reasoning; the rest are dropped, with decisions.
func TestMessagesToChatEnvelopeBounds(t *testing.T) {
	const maxReasoning = 1000
	config := `{"profile":"deepseek","max_reasoning":1000}`
	call := `{"type":"tool_use","id":"toolu_a","name":"Bash","input":{}}`
	result := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"ok"}]}`
	thinking := func(sig string) string { return `{"type":"thinking","thinking":"","signature":"` + sig + `"}` }

	// Over max_reasoning: dropped.
	big := sealed("deepseek", strings.Repeat("a", maxReasoning+1))
	out, x, err := rqRun(t, rqRules(config), rqBody("", rqUserList, `{"role":"assistant","content":[`+thinking(big)+`,`+call+`]}`, result))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"reasoning_content":""`) || !slices.Equal(rqDecisions(x), []string{"messages[1].content[0] drop"}) {
		t.Fatalf("over max_reasoning: %s %q", out, rqDecisions(x))
	}

	// Many small envelopes of max_reasoning bytes each, far more text
	// than body.
	one := sealed("deepseek", strings.Repeat("a", maxReasoning))
	blocks := make([]string, 200)
	for i := range blocks {
		blocks[i] = thinking(one)
	}
	body := rqBody("", rqUserList, `{"role":"assistant","content":[`+strings.Join(blocks, ",")+`,`+call+`]}`, result)
	out, x, err = rqRun(t, rqRules(config), body)
	if err != nil {
		t.Fatal(err)
	}
	budget := 8*len(body) + maxReasoning
	if 200*maxReasoning <= budget {
		t.Fatalf("the test's envelopes (%d bytes of text) fit the bound %d", 200*maxReasoning, budget)
	}
	var got struct {
		Messages []struct {
			Reasoning *string `json:"reasoning_content"`
		}
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	// Joined with a newline each: whole envelopes while they fit.
	kept := budget / maxReasoning
	r := got.Messages[1].Reasoning
	if r == nil || len(*r) != kept*maxReasoning+kept-1 {
		t.Fatalf("reasoning of %d bytes, want %d envelopes", len(*r), kept)
	}
	if n := len(rqDecisions(x)); n != 200-kept {
		t.Fatalf("%d decisions, want %d", n, 200-kept)
	}
}

// TestMessagesToChatBillingLineInString: a system string whose first line
// is the billing line goes without it.
func TestMessagesToChatBillingLineInString(t *testing.T) {
	for _, tc := range []struct{ system, want string }{
		{`"x-anthropic-billing-header: cc_version=2.1.332.d60; cch=ab12;\nYou are Claude Code.\nBe brief."`, `{"role":"system","content":"You are Claude Code.\nBe brief."},`},
		{`"x-anthropic-billing-header: cc_version=2.1.332.d60; cch=ab12;"`, ``},
		// Not at the start: the text is the client's.
		{`"Quote: x-anthropic-billing-header: a\\nb"`, `{"role":"system","content":"Quote: x-anthropic-billing-header: a\\nb"},`},
	} {
		out, x, err := rqRun(t, rqRules(rqDeepSeek), rqBody(`,"system":`+tc.system, rqUserList))
		if err != nil {
			t.Fatal(err)
		}
		want := `{"model":"deepseek-v4-pro","messages":[` + tc.want + rqChatList + `],"max_tokens":1000}`
		if out != want {
			t.Fatalf("got  %s\nwant %s", out, want)
		}
		if d := rqDecisions(x); (tc.want != `{"role":"system","content":"Quote: x-anthropic-billing-header: a\\nb"},`) != slices.Equal(d, []string{"system drop_line"}) {
			t.Fatalf("decisions %q", d)
		}
	}
	if got := string(afterLine([]byte(`a\\nb\nc`))); got != "c" {
		t.Fatalf("afterLine: %q", got)
	}
}

// TestMessagesStreamTick: during an upstream silence the stream sends a
// ping (Claude Code gives up after 5 minutes without events): first
// message_start when nothing came yet, inside an open block as well, and
// nothing once the message ended.
func TestMessagesStreamTick(t *testing.T) {
	m := &MessagesToChat{Profile: "deepseek"}
	if err := m.Provision(transformtest.Context(t)); err != nil {
		t.Fatal(err)
	}
	x := transforms.NewExchange(transforms.ProtocolMessages, transforms.Limits{}, nil)
	rec := m.record(x)
	rec.bridged, rec.model = true, "claude-opus-5-5"
	s := m.NewStream(x).(*chatToMessages)
	if s.TickInterval() != 10*time.Second {
		t.Fatalf("default interval %v", s.TickInterval())
	}
	m2 := &MessagesToChat{PingInterval: caddy.Duration(5 * time.Millisecond)}
	if err := m2.Provision(transformtest.Context(t)); err != nil {
		t.Fatal(err)
	}
	m2.record(x).bridged = true
	if iv := m2.NewStream(x).(transforms.Ticker).TickInterval(); iv != 5*time.Millisecond {
		t.Fatalf("ping_interval 5ms: %v", iv)
	}
	var out strings.Builder
	emit := func(e *transforms.Event) error {
		out.WriteString(rsEv(string(e.Name), string(e.Data)))
		return nil
	}
	chunk := func(delta, finish string) {
		d := strings.TrimSuffix(strings.TrimPrefix(rsChunk(delta, finish), "data: "), "\n\n")
		if err := s.Event(&transforms.Event{Data: []byte(d)}, emit); err != nil {
			t.Fatal(err)
		}
	}
	tick := func() {
		if err := s.Tick(emit); err != nil {
			t.Fatal(err)
		}
	}
	ping := rsEv("ping", `{"type":"ping"}`)
	tick()
	chunk(`{"content":"Hi"}`, "null")
	tick()
	chunk(`{}`, `"stop"`)
	if err := s.End(emit); err != nil {
		t.Fatal(err)
	}
	tick()
	got := rsMsgIDs.ReplaceAllString(out.String(), "msg_ID")
	want := rsStart + ping + rsTextStart(0) + rsText(0, "Hi") + ping + rsStop(0) +
		rsEnd(`{"stop_reason":"end_turn","stop_sequence":null}`, rsNoUsage)
	rsEqual(t, got, want)
	if err := checkGrammar(got); err != nil {
		t.Fatal(err)
	}
}

// TestMessagesUsageDeepSeekCounters: DeepSeek's prompt is its cache hits
// and misses; without prompt_tokens the misses are the input.
func TestMessagesUsageDeepSeekCounters(t *testing.T) {
	for _, tc := range []struct{ usage, want string }{
		{`{"prompt_tokens":4908,"completion_tokens":96,"prompt_cache_hit_tokens":4096,"prompt_cache_miss_tokens":812}`, rsUsage(812, 96, 0, 4096, -1)},
		{`{"completion_tokens":96,"prompt_cache_hit_tokens":4096,"prompt_cache_miss_tokens":812}`, rsUsage(812, 96, 0, 4096, -1)},
		{`{"completion_tokens":5,"prompt_cache_miss_tokens":30}`, rsUsage(30, 5, 0, 0, -1)},
	} {
		doc := []byte(tc.usage)
		if got := string(appendUsage(nil, doc, jsonspan.Span{Start: 0, End: len(doc)})); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.usage, got, tc.want)
		}
	}
}

// TestMessagesToChatThinkingWithoutKnobSaysSo: a profile that switches
// thinking by model, not by a field (Kimi), sends nothing for the client's
// thinking settings; a decision says they decided nothing. Turning
// thinking off it can say (thinking disabled), and says it.
func TestMessagesToChatThinkingWithoutKnobSaysSo(t *testing.T) {
	user := `{"role":"user","content":"hi"}`
	out, x, err := rqRun(t, rqRules(`{"profile":"kimi"}`), rqBody(`,"thinking":{"type":"adaptive"},"output_config":{"effort":"high"}`, user))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "thinking") || !slices.Contains(rqDecisions(x), "thinking ignore") {
		t.Errorf("%s %q", out, rqDecisions(x))
	}
	out, x, err = rqRun(t, rqRules(`{"profile":"kimi"}`), rqBody(`,"thinking":{"type":"disabled"}`, user))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"thinking":{"type":"disabled"}`) || slices.Contains(rqDecisions(x), "thinking ignore") {
		t.Errorf("%s %q", out, rqDecisions(x))
	}
}
