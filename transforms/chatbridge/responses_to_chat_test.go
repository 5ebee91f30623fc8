package chatbridge

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// Tests of responses_to_chat: a Responses client (Codex) in front of a Chat
// Completions upstream. Ids the bridge mints are random per request, so
// outputs are compared after rcNorm; everything else is compared whole.
// The request phase is tested in responses_to_chat_request_test.go, JSON
// answers and streams in responses_to_chat_response_test.go, upstream
// errors in responses_to_chat_error_test.go; this file holds the shared
// helpers (prefixed rc, for responses_to_chat), the configuration, and
// what spans both phases.

// The provenance envelopes, written out by hand: "llmt1." and the
// unpadded base64url of {"p":"<profile>"}.
const (
	envDeepSeek   = "llmt1.eyJwIjoiZGVlcHNlZWsifQ"
	envKimi       = "llmt1.eyJwIjoia2ltaSJ9"
	envGLM        = "llmt1.eyJwIjoiZ2xtIn0"
	envOpenAIChat = "llmt1.eyJwIjoib3BlbmFpX2NoYXQifQ"
	envMiniMax    = "llmt1.eyJwIjoibWluaW1heCJ9"
)

// rcIDs matches the ids the bridge mints: a prefix and 24 hex digits.
var rcIDs = regexp.MustCompile(`\b(resp|rs|msg|fc|call)_[0-9a-f]{24}`)

// rcNorm replaces the random part of minted ids with "ID".
func rcNorm(s string) string {
	s = rcIDs.ReplaceAllString(s, "${1}_ID")
	// An envelope seals the text as the upstream escaped it; tests write
	// the text and compare the envelope of its canonical escaping.
	return rcEnvelopes.ReplaceAllStringFunc(s, func(env string) string {
		p, text, ok := openEnvelope(env, 1<<30)
		if !ok {
			return env
		}
		return textEnvelopeOf(p, []byte(text))
	})
}

// rcEnvelopes matches the envelopes that seal reasoning text.
var rcEnvelopes = regexp.MustCompile(`llmt2\.[A-Za-z0-9_-]+`)

// rcCreatedAt matches created_at, which is the clock's when the upstream
// sent none.
var rcCreatedAt = regexp.MustCompile(`"created_at":[0-9]+`)

// rcNormTime sets every created_at to the one the test chunks carry.
func rcNormTime(s string) string { return rcCreatedAt.ReplaceAllString(s, `"created_at":1764400000`) }

// rcStr is a JSON string literal as the bridge writes it (no HTML escapes).
func rcStr(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func rcRules(config string) string {
	if config == "" {
		return `[{"transform":"responses_to_chat"}]`
	}
	return `[{"transform":"responses_to_chat","config":` + config + `}]`
}

// rcExchange binds rules to a Responses exchange whose upstream path is
// path, with decisions recorded.
func rcExchange(t testing.TB, rules, path string) *transforms.Exchange {
	t.Helper()
	x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{MaxCallBuffer: 1 << 20, MaxEvent: 1 << 20}, nil)
	x.Explain = true
	transformtest.Chain(t, rules).Begin(x, "gpt-5.5")
	x.SetUpstreamPath(path)
	return x
}

// rcRequest runs the request phase of rules over body.
func rcRequest(t testing.TB, rules, body string) (string, *transforms.Exchange, error) {
	t.Helper()
	x := rcExchange(t, rules, "/v1/responses")
	out, err := x.RewriteRequest([]byte(body))
	return string(out), x, err
}

// rcStreamExchange is a bridged streaming request, ready for the answer.
func rcStreamExchange(t testing.TB, rules string) *transforms.Exchange {
	t.Helper()
	x := rcExchange(t, rules, "/v1/responses")
	if _, err := x.RewriteRequest([]byte(`{"model":"gpt-5.5","input":"hi","stream":true}`)); err != nil {
		t.Fatal(err)
	}
	return x
}

func rcDecisions(x *transforms.Exchange) []string {
	var ds []string
	for _, d := range x.Decisions() {
		ds = append(ds, d.Tool+" "+d.Action)
	}
	return ds
}

// Input item builders for requests.
func rcMsg(role, text string) string {
	part := "input_text"
	if role == "assistant" {
		part = "output_text"
	}
	return `{"type":"message","role":"` + role + `","content":[{"type":"` + part + `","text":` + rcStr(text) + `}]}`
}

func rcReasoning(env, text string) string {
	return `{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":` + rcStr(text) + `}],"encrypted_content":"` + env + `"}`
}

func rcCall(callID, name, args string) string {
	return `{"type":"function_call","id":"fc_1","status":"completed","call_id":` + rcStr(callID) + `,"name":"` + name + `","arguments":` + rcStr(args) + `}`
}

func rcOutput(callID, out string) string {
	return `{"type":"function_call_output","call_id":` + rcStr(callID) + `,"output":` + rcStr(out) + `}`
}

func rcInput(items ...string) string {
	return `{"model":"gpt-5.5","input":[` + strings.Join(items, ",") + `]}`
}

// Chat tool call and messages for expectations.
func rcToolCall(id, name, args string) string {
	return `{"id":` + rcStr(id) + `,"type":"function","function":{"name":"` + name + `","arguments":` + rcStr(args) + `}}`
}

func rcChat(extra string, msgs ...string) string {
	return `{"model":"gpt-5.5","messages":[` + strings.Join(msgs, ",") + `]` + extra + `}`
}

func TestResponsesToChatEnvelope(t *testing.T) {
	for p, want := range map[string]string{"deepseek": envDeepSeek, "kimi": envKimi, "glm": envGLM, "openai_chat": envOpenAIChat, "minimax": envMiniMax} {
		if got := reasoningEnvelope(p, false); got != want {
			t.Errorf("envelope of %s = %q, want %q", p, got, want)
		}
	}
}

func TestResponsesToChatConfig(t *testing.T) {
	var r ResponsesToChat
	block := "responses_to_chat {\n\tprofile kimi\n\tmax_tokens_field max_completion_tokens\n\tdefault_max_tokens 8192\n\tdeveloper system\n\treasoning replay\n}"
	if err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block)); err != nil {
		t.Fatal(err)
	}
	if r.Profile != "kimi" || r.MaxTokensField != "max_completion_tokens" || r.DefaultMaxTokens == nil || *r.DefaultMaxTokens != 8192 ||
		r.Developer != "system" || r.Reasoning != "replay" {
		t.Fatalf("%+v", r)
	}
	for _, bad := range []string{
		"responses_to_chat {\n\tprofile kimi\n\tprofile glm\n}",
		"responses_to_chat {\n\tcolour blue\n}",
		"responses_to_chat {\n\tdefault_max_tokens -1\n}",
		"responses_to_chat {\n\tprofile\n}",
		"responses_to_chat {\n\tprofile a b\n}",
	} {
		var r ResponsesToChat
		if err := r.UnmarshalCaddyfile(caddyfile.NewTestDispenser(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	for _, cfg := range []string{`{"profile":"nope"}`, `{"max_tokens_field":"tokens"}`, `{"developer":"assistant"}`, `{"reasoning":"sometimes"}`, `{"default_max_tokens":-5}`} {
		var cfgs []transforms.RuleConfig
		if err := json.Unmarshal([]byte(rcRules(cfg)), &cfgs); err != nil {
			t.Fatal(err)
		}
		if _, err := transforms.Compile(transformtest.Context(t), cfgs, transforms.ScopeProvider, ""); err == nil {
			t.Errorf("config %s accepted", cfg)
		}
	}
	// The reasoning option overrides the profile's policy.
	out, _, err := rcRequest(t, rcRules(`{"profile":"glm","reasoning":"strip"}`), rcInput(rcMsg("user", "q"), rcReasoning(envGLM, "R"), rcMsg("assistant", "A")))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(out), rcChat(`,"max_tokens":32768,"thinking":{"type":"enabled","clear_thinking":false}`, `{"role":"user","content":"q"}`, `{"role":"assistant","content":"A"}`))
}

func TestResponsesToChatPathProtocolAndPassthrough(t *testing.T) {
	x := rcExchange(t, rcRules(""), "/openai/v1/responses")
	if _, err := x.RewriteRequest([]byte(`{"model":"gpt-5.5","input":"q"}`)); err != nil {
		t.Fatal(err)
	}
	if x.UpstreamPath() != "/openai/v1/chat/completions" || x.UpstreamProtocol() != transforms.ProtocolChat {
		t.Fatalf("path %q, upstream %s", x.UpstreamPath(), x.UpstreamProtocol())
	}

	// A Chat client is not the bridge's business, either way.
	const chatReq = `{"model":"m","messages":[{"role":"user","content":"q"}],"stream":true}`
	cx := transforms.NewExchange(transforms.ProtocolChat, transforms.Limits{MaxCallBuffer: 1 << 20, MaxEvent: 1 << 20}, nil)
	transformtest.Chain(t, rcRules("")).Begin(cx, "m")
	cx.SetUpstreamPath("/v1/chat/completions")
	out, err := cx.RewriteRequest([]byte(chatReq))
	if err != nil || string(out) != chatReq || cx.UpstreamPath() != "/v1/chat/completions" {
		t.Fatalf("chat request: %v %s %s", err, out, cx.UpstreamPath())
	}
	if cx.WantsResponse() || cx.NewStream() != nil {
		t.Fatal("the bridge wants a Chat client's response")
	}

	// JSON that is not an object is the upstream's to judge; a body the
	// bridge cannot read is refused, never sent on unbridged.
	if got, _, err := rcRequest(t, rcRules(""), `[1,2]`); err != nil || got != `[1,2]` {
		t.Errorf("[1,2]: %v %s", err, got)
	}
	for _, body := range []string{`not json`, `{"model":`, `{"model":"m","input":"hi","x":NaN}`} {
		got, _, err := rcRequest(t, rcRules(""), body)
		var sent []byte
		if got != "" {
			sent = []byte(got)
		}
		transformtest.Rejected(t, sent, err, "invalid_json")
	}
}

// --- the reasoning round trip ------------------------------------------------

// TestResponsesToChatReasoningRoundTrip: the reasoning item a stream
// delivered goes back, as Codex sends it, with the call and its output in
// the next turn; the Chat request carries its exact text as
// reasoning_content on the assistant tool-call message.
func TestResponsesToChatReasoningRoundTrip(t *testing.T) {
	const thought = "Need \"ls\" first — é🦀\n<think>not a tag</think> \\path\tand a tab"
	const args = `{"cmd":"ls -la","workdir":"/tmp/é"}`
	rules := rcRules(`{"profile":"deepseek"}`)
	upstream := rcData(
		rcChunk(`{"role":"assistant","content":null,"reasoning_content":`+rcStr(thought[:10])+`}`, "null"),
		rcChunk(`{"reasoning_content":`+rcStr(thought[10:])+`}`, "null"),
		rcChunk(`{"tool_calls":[{"index":0,"id":"call_00_kw66q","type":"function","function":{"name":"exec_command","arguments":`+rcStr(args)+`}}]}`, "null"),
		rcChunk(`{}`, `"tool_calls"`),
	) + "data: [DONE]\n\n"
	raw := transformtest.Replay(t, rcStreamExchange(t, rules), upstream, 7)
	rcSDKCheck(t, raw)
	var items []string
	for _, e := range transformtest.SDKEvents(t, raw) {
		if e.Type == "response.output_item.done" {
			items = append(items, e.AsResponseOutputItemDone().JSON.Item.Raw())
		}
	}
	if len(items) != 2 {
		t.Fatalf("items %v", items)
	}
	next := `{"model":"gpt-5.5","stream":true,"input":[` + rcMsg("user", "list") + `,` + items[0] + `,` + items[1] + `,` +
		rcOutput("call_00_kw66q", "a.txt\n") + `],"reasoning":{"effort":"high"}}`
	out, _, err := rcRequest(t, rules, next)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(out), rcChat(`,"stream":true,"stream_options":{"include_usage":true},"max_tokens":32768,"thinking":{"type":"enabled"},"reasoning_effort":"high"`,
		`{"role":"user","content":"list"}`,
		`{"role":"assistant","content":"","reasoning_content":`+rcStr(thought)+`,"tool_calls":[`+rcToolCall("call_00_kw66q", "exec_command", args)+`]}`,
		`{"role":"tool","tool_call_id":"call_00_kw66q","content":"a.txt\n"}`))

	// The same through a JSON answer.
	body, _ := rcJSON(t, `{"profile":"deepseek"}`, rcCompletionHead+`{"role":"assistant","content":"","reasoning_content":`+rcStr(thought)+`,"tool_calls":[`+
		rcToolCall("call_01", "exec_command", args)+`]},"finish_reason":"tool_calls"}]}`)
	r := transformtest.SDKResponse(t, []byte(body))
	var back []string
	for _, it := range r.Output {
		back = append(back, it.RawJSON())
	}
	out, _, err = rcRequest(t, rules, `{"model":"gpt-5.5","input":[`+rcMsg("user", "list")+`,`+strings.Join(back, ",")+`,`+rcOutput("call_01", "ok")+`]}`)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, []byte(out), rcChat(`,"max_tokens":32768`, `{"role":"user","content":"list"}`,
		`{"role":"assistant","content":"","reasoning_content":`+rcStr(thought)+`,"tool_calls":[`+rcToolCall("call_01", "exec_command", args)+`]}`,
		`{"role":"tool","tool_call_id":"call_01","content":"ok"}`))

	// DeepSeek's reasoning is never fed to Kimi.
	out, x, err := rcRequest(t, rcRules(`{"profile":"kimi"}`), next)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "é🦀") || strings.Join(rcDecisions(x), ",") != "reasoning drop" {
		t.Fatalf("foreign reasoning went upstream: %s %v", out, rcDecisions(x))
	}
}

// TestResponsesToChatModelEcho: with field_set routing gpt-5.5 to DeepSeek
// (the canonical configuration), the upstream gets DeepSeek's model and
// the client sees the model it asked for, in JSON and on the stream.
func TestResponsesToChatModelEcho(t *testing.T) {
	rules := `[{"transform":"field_set","models":["gpt-5.5"],"config":{"path":"model","value":"deepseek-v4-pro"}},{"transform":"responses_to_chat","config":{"profile":"deepseek"}}]`
	x := rcExchange(t, rules, "/v1/responses")
	out, err := x.RewriteRequest([]byte(`{"model":"gpt-5.5","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"model":"deepseek-v4-pro","messages":[{"role":"user","content":"hi"}],"max_tokens":32768}`)
	body, err := x.RewriteResponse([]byte(rcCompletionHead + `{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := transformtest.SDKResponse(t, body); r.Model != "gpt-5.5" {
		t.Errorf("JSON model %q", r.Model)
	}
	got := rcStream(t, rules, rcData(rcChunk(`{"content":"Hi"}`, `"stop"`))+"data: [DONE]\n\n")
	if strings.Count(got, `"model":"gpt-5.5"`) != 3 || strings.Contains(got, "deepseek-v4-pro") {
		t.Errorf("stream models:\n%s", got)
	}
}
