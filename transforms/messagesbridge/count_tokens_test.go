package messagesbridge

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// ctRun runs a count_tokens request (Claude Code's path) through rules and
// returns the exchange and the answer the gateway gives; it fails the
// test when the request would go upstream.
func ctRun(t testing.TB, c *transforms.Chain, body string) (*transforms.Exchange, transforms.LocalAnswer) {
	t.Helper()
	x := transformtest.Begin(t, c, transforms.ProtocolMessages, []byte(body))
	x.SetUpstreamPath("/v1/messages/count_tokens")
	final, err := x.RewriteRequest([]byte(body))
	if err != nil {
		t.Fatalf("count_tokens refused: %v", err)
	}
	a, ok := x.LocalAnswer(final)
	switch {
	case !ok || !x.AnswersLocally():
		t.Fatal("count_tokens would go upstream")
	case x.UpstreamPath() != "/v1/messages/count_tokens":
		t.Fatalf("path changed to %q", x.UpstreamPath())
	case a.Status != 200 || a.ContentType != "application/json":
		t.Fatalf("answer %d %q", a.Status, a.ContentType)
	}
	return x, a
}

// ctCount is the input_tokens of count_tokens' answer for body.
func ctCount(t testing.TB, c *transforms.Chain, body string) int {
	t.Helper()
	_, a := ctRun(t, c, body)
	s, ok := strings.CutPrefix(string(a.Body), `{"input_tokens":`)
	s, ok2 := strings.CutSuffix(s, "}")
	n, err := strconv.Atoi(s)
	if !ok || !ok2 || err != nil || n < 1 {
		t.Fatalf("answer %s", a.Body)
	}
	return n
}

// TestCountTokensEstimate pins the heuristic on hand-counted Chat bodies
// (quarter tokens: 12 for the reply, 16 a message).
func TestCountTokensEstimate(t *testing.T) {
	tests := []struct {
		name, body string
		want       int
	}{
		{"nothing is never 0", ``, 1},
		{"not JSON is text, never 0", `x`, 1},
		{"no input: the reply's 3", `{}`, 3},
		{"model and knobs count nothing", `{"model":"a-very-long-model-name-indeed","max_tokens":32768,"stream":true,"thinking":{"type":"enabled"}}`, 3},
		// 12+16, hello 4, space 1, world 4: 37.
		{"words", `{"messages":[{"role":"user","content":"hello world"}]}`, 10},
		// get User Name 12, space 1, 12345 two groups 8, space 1, 你 好 8: 28+30.
		{"camelCase, digits, CJK", `{"messages":[{"role":"user","content":"getUserName 12345 你好"}]}`, 15},
		// a 4, newline 2, b 4, 中 4, the quote 4: 28+18.
		{"escapes count as what they stand for", `{"messages":[{"role":"user","content":"a\nb\u4e2d\""}]}`, 12},
		// 28 and an image's 6400, its data not read.
		{"an image part", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + strings.Repeat("QUFB", 1000) + `"}}]}]}`, 1607},
		// [{" 4, type 4, ":" 4, function 8, "}] 4: 12+24.
		{"tools as JSON, white space between tokens not", `{"tools":[ { "type" : "function" } ]}`, 9},
		// The role counts in the message's 16; tool_call_id is text.
		{"a tool message", `{"messages":[{"role":"tool","tool_call_id":"t1","content":"ok"}]}`, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := estimateTokens([]byte(tc.body)); got != tc.want {
				t.Errorf("estimateTokens = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestCountTokensAnswered: count_tokens is answered by the gateway for any
// model name, without max_tokens, with the estimate of the converted body.
func TestCountTokensAnswered(t *testing.T) {
	c := transformtest.Chain(t, rqRules(`{"profile":"openai_chat"}`))
	for _, model := range []string{"any-model", "claude-opus-4-8[1m]", "", "haiku"} {
		_, a := ctRun(t, c, `{"model":"`+model+`","messages":[{"role":"user","content":"hello world"}]}`)
		if string(a.Body) != `{"input_tokens":10}` {
			t.Errorf("%q: %s", model, a.Body)
		}
	}
	// Claude Code's billing line leaves the system prompt before
	// counting, as it does before sending.
	plain := rqBody(`,"system":"You are an agent."`, rqUserList)
	billed := rqBody(`,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=2.1.332; cch=abc;"},{"type":"text","text":"You are an agent."}]`, rqUserList)
	if a, b := ctCount(t, c, plain), ctCount(t, c, billed); a != b {
		t.Errorf("the billing line counted: %d vs %d", b, a)
	}
	// Messages' /v1/messages is still bridged.
	out, x, err := rqRun(t, rqRules(""), rqBody("", rqUserList))
	if err != nil || x.AnswersLocally() || x.UpstreamPath() != "/v1/chat/completions" || out == "" {
		t.Fatalf("a create request: %v %v %q", err, x.AnswersLocally(), x.UpstreamPath())
	}
}

// TestCountTokensConcurrent is Claude Code's /context: 25 count_tokens
// calls at once, each answered by the gateway, none sent upstream.
func TestCountTokensConcurrent(t *testing.T) {
	c := transformtest.Chain(t, rqRules(rqDeepSeek))
	body := func(i int) string {
		return rqBody(`,"tools":[`+rqBashTool+`]`, `{"role":"user","content":`+transformtest.JSONString(strings.Repeat("word ", i))+`}`)
	}
	want := make([]int, 25)
	for i := range want {
		want[i] = ctCount(t, c, body(i))
	}
	var wg sync.WaitGroup
	for i := range 25 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := ctCount(t, c, body(i)); got != want[i] {
				t.Errorf("call %d: %d, alone %d", i, got, want[i])
			}
		}()
	}
	wg.Wait()
	// "word " is 1¼ tokens: 24 of them are 30 more than none.
	if want[24]-want[0] != 30 {
		t.Errorf("counts %v", want)
	}
}

// TestCountTokensAfterLaterRules: the count is of the body the last rule
// left: tools_plan after the bridge gives a 90-character MCP tool a name
// of 64, and the count is that of the shorter name.
func TestCountTokensAfterLaterRules(t *testing.T) {
	const (
		long  = "mcp__a_very_verbose_servera_very_verbose_server__fetch_everythingfetch_everythingfetch_eve"
		short = "mcp__a_very_verbose_servera_very_verbose_server__fetch_ev_ib2uns" // as TestMessagesToChatLongToolNameThroughToolsPlan
	)
	tool := func(name string) string {
		return rqBody(`,"tools":[`+rqBashTool+`,{"name":"`+name+`","description":"Fetch.","input_schema":{"type":"object"}}]`, rqUserList)
	}
	bridge := transformtest.Chain(t, rqRules(rqDeepSeek))
	planned := transformtest.Chain(t, `[{"transform":"messages_to_chat","config":{"profile":"deepseek"}},{"transform":"tools_plan","config":{"profile":"deepseek"}}]`)
	before, after, direct := ctCount(t, bridge, tool(long)), ctCount(t, planned, tool(long)), ctCount(t, bridge, tool(short))
	if after != direct || after >= before {
		t.Fatalf("long name %d, renamed by tools_plan %d, short name sent %d", before, after, direct)
	}
}

// TestCountTokensRefusals: a body the bridge cannot read is refused as a
// create request would be, in Anthropic's error shape, and nothing is
// answered for it.
func TestCountTokensRefusals(t *testing.T) {
	c := transformtest.Chain(t, rqRules(rqDeepSeek))
	for _, tc := range []struct{ body, code, shape string }{
		{`{"model":"m","messages":{"role":"user"}}`, "invalid_request",
			`{"type":"error","error":{"type":"invalid_request_error","message":"messages_to_chat: messages must be an array of messages (invalid_request)"}}`},
		{`{"model":"m","messages":[`, "invalid_json", ""},
	} {
		x := transformtest.Begin(t, c, transforms.ProtocolMessages, []byte(tc.body))
		x.SetUpstreamPath("/v1/messages/count_tokens")
		_, err := x.RewriteRequest([]byte(tc.body))
		var e *transforms.Error
		if !errors.As(err, &e) || e.Status != 400 || e.Code != tc.code || x.AnswersLocally() {
			t.Fatalf("%s: %v (answers locally: %v)", tc.body, err, x.AnswersLocally())
		}
		if tc.shape != "" && string(e.JSONFor(transforms.ProtocolMessages)) != tc.shape {
			t.Errorf("%s", e.JSONFor(transforms.ProtocolMessages))
		}
	}
}

// TestCountTokensMonotonic: a larger request never gets a smaller count.
// A conversation grows the ways Claude Code's do, on a profile that reads
// images and on one that does not; then a text grows by random insertions
// of every kind of character.
func TestCountTokensMonotonic(t *testing.T) {
	// Each step sets a member (more of it than before) or adds a message.
	steps := []struct{ key, value, msg string }{
		{"", "", rqUserList},
		{"system", `"You are an agent."`, ""},
		{"system", `[{"type":"text","text":"x-anthropic-billing-header: cch=1;"},{"type":"text","text":"You are an agent."},{"type":"text","text":"Be brief."}]`, ""},
		{"tools", `[` + rqBashTool + `]`, ""},
		{"tools", `[` + rqBashTool + `,{"name":"Read","input_schema":{"type":"object","properties":{"path":{"type":"string","description":"where"}}}}]`, ""},
		{"", "", `{"role":"assistant","content":[{"type":"thinking","thinking":"think","signature":""},{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"path":"a.go"}}]}`},
		{"", "", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true,"content":[{"type":"text","text":"no such file"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]},{"type":"text","text":"try b.go 2024年"}]}`},
		{"", "", `{"role":"assistant","content":"Done: 42 lines.\n\tOK"}`},
		{"", "", `{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x.test/p.png"}},{"type":"document","title":"Spec","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"}},{"type":"text","text":"and this"}]}`},
		{"output_config", `{"format":{"type":"json_schema","schema":{"type":"object"}}}`, ""},
		{"stop_sequences", `["END"]`, `{"role":"assistant","content":"ok"}`},
		{"temperature", `0.5`, ""},
	}
	for _, cfg := range []string{`{"profile":"openai_chat"}`, rqDeepSeek, `{"profile":"kimi"}`} {
		c := transformtest.Chain(t, rqRules(cfg))
		model := map[string]string{`{"profile":"openai_chat"}`: "gpt-5", rqDeepSeek: "deepseek-v4-pro", `{"profile":"kimi"}`: "kimi-k2.5"}[cfg]
		var keys []string
		members := map[string]string{}
		var msgs []string
		prev, first := 0, 0
		for i, s := range steps {
			if s.key != "" {
				if _, ok := members[s.key]; !ok {
					keys = append(keys, s.key)
				}
				members[s.key] = s.value
			}
			if s.msg != "" {
				msgs = append(msgs, s.msg)
			}
			body := `{"model":"` + model + `"`
			for _, k := range keys {
				body += `,"` + k + `":` + members[k]
			}
			body += `,"messages":[` + strings.Join(msgs, ",") + `]}`
			n := ctCount(t, c, body)
			if n < prev {
				t.Errorf("%s step %d: %d after %d\n%s", cfg, i, n, prev, body)
			}
			if i == 0 {
				first = n
			}
			prev = n
		}
		if prev <= first {
			t.Errorf("%s: the whole conversation counts %d, its first message %d", cfg, prev, first)
		}
	}

	// Random insertions into a user's text: letters of both cases,
	// digits, punctuation, white space, escapes, CJK, emoji.
	units := []string{"a", "Z", "q", "7", "0", ".", "{", `\"`, " ", `\n`, `\t`, `\u00e9`, `\u4e2d`, "中", "é", "😀", "_", "-"}
	tt := t
	c := transformtest.Chain(t, rqRules(`{"profile":"openai_chat"}`))
	r := rand.New(rand.NewPCG(1, 2))
	var text []string
	prev := 0
	for i := range 400 {
		k := r.IntN(len(text) + 1)
		text = append(text[:k], append([]string{units[r.IntN(len(units))]}, text[k:]...)...)
		t := strings.Join(text, "")
		body := `{"model":"m","tools":[{"name":"T","description":"` + t + `","input_schema":{}}],"messages":[{"role":"user","content":"` + t + `"}]}`
		n := ctCount(tt, c, body)
		if n < prev {
			tt.Fatalf("insertion %d: %d after %d\n%s", i, n, prev, body)
		}
		prev = n
	}
}
