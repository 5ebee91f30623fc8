package integration

// anthropic-messages-bridge.md §14 through the gateway: messages_to_chat
// in front of a Chat upstream that answers each response scenario as a
// stream (written in pieces of 1, 7 and 4096 bytes) or as the equivalent
// completion JSON; the official Anthropic SDK's MessageStream and
// BetaMessageStream accumulate every stream, and the final message must
// equal the JSON answer. The request-side scenarios go through once, and
// the upstream must get what the unit tests of transforms/messagesbridge
// expect, in a key point or two.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/reasonenv"
)

// msChunkSizes are the sizes of the pieces the upstream writes a stream
// in, flushing after each: a byte at a time, an odd size that cuts events
// and escapes anywhere, and whole events.
var msChunkSizes = []int{1, 7, 4096}

// msScenario is one upstream answer. A response scenario has chunks (the
// Chat stream's events) and completion (the same answer as one Chat
// completion, "" when a stream has no JSON form); an error scenario has
// status, header and body, whether the request streams or not.
type msScenario struct {
	name, profile string
	chunks        []string
	completion    string

	status int
	header map[string]string
	body   string

	// want are members of the JSON answer (gjson paths) and their
	// values, as JSON.
	want map[string]string
	// byDesign are the members the stream's message and the JSON answer
	// may differ in beyond the message id; why, in the scenario.
	byDesign []string
	// check looks further at the stream and the JSON answer.
	check func(t *testing.T, stream []byte, msg gjson.Result)
}

// --- the upstream's Chat pieces ------------------------------------------------

func msChunk(delta, finish string) string {
	return `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764400000,"model":"up-model","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}` + "\n\n"
}

func msUsageChunk(usage string) string {
	return `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764400000,"model":"up-model","choices":[],"usage":` + usage + `}` + "\n\n"
}

const msDone = "data: [DONE]\n\n"

// msCompletion is a Chat completion with message, finish and usage (none
// when "").
func msCompletion(message, finish, usage string) string {
	s := `{"id":"chatcmpl-9","object":"chat.completion","created":1764400000,"model":"up-model","choices":[{"index":0,"message":` + message + `,"logprobs":null,"finish_reason":"` + finish + `"}]`
	if usage != "" {
		s += `,"usage":` + usage
	}
	return s + "}"
}

// msUsage is Messages usage; thinking < 0 leaves output_tokens_details out.
func msUsage(in, out, created, read, thinking int) string {
	u := `{"input_tokens":` + strconv.Itoa(in) + `,"output_tokens":` + strconv.Itoa(out) +
		`,"cache_creation_input_tokens":` + strconv.Itoa(created) + `,"cache_read_input_tokens":` + strconv.Itoa(read)
	if thinking >= 0 {
		u += `,"output_tokens_details":{"thinking_tokens":` + strconv.Itoa(thinking) + `}`
	}
	return u + "}"
}

// msQuote is a JSON string as a provider writes it (no HTML escapes).
func msQuote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

var msSlugs = regexp.MustCompile(`[^a-z0-9]+`)

// msModel is the model that names a scenario to the upstream.
func msModel(name string) string {
	return "s-" + strings.Trim(msSlugs.ReplaceAllString(strings.ToLower(name), "-"), "-")
}

// --- the response scenarios ------------------------------------------------------

// msThinkTextTwoCalls is scenario 11 for profile: reasoning, text, two
// calls in one chunk, finish tool_calls, then usage; each profile's
// reasoning field and usage. The reasoning is the same in the stream and
// the JSON, so the signatures must be equal.
func msThinkTextTwoCalls(profile string) msScenario {
	const thought = "Both files are needed: \"a\" & <b>."
	reason := func(text string) string { return `"reasoning_content":` + msQuote(text) }
	usage := `{"prompt_tokens":4908,"completion_tokens":96,"total_tokens":5004,"prompt_tokens_details":{"cached_tokens":4096},"completion_tokens_details":{"reasoning_tokens":40}}`
	usageChunk := msUsageChunk(usage)
	finish := msChunk(`{}`, `"tool_calls"`)
	switch profile {
	case "deepseek":
		usage = `{"prompt_tokens":4908,"completion_tokens":96,"total_tokens":5004,"prompt_cache_hit_tokens":4096,"prompt_cache_miss_tokens":812,"completion_tokens_details":{"reasoning_tokens":40}}`
		usageChunk = msUsageChunk(usage)
	case "minimax":
		// MiniMax with reasoning_split: reasoning_details pieces.
		reason = func(text string) string {
			return `"reasoning_details":[{"type":"reasoning.text","id":"reasoning-text-1","format":"MiniMax-response-v1","index":0,"text":` + msQuote(text) + `}]`
		}
	case "kimi":
		// Moonshot puts usage in the finish chunk's choice.
		usage = `{"prompt_tokens":4908,"completion_tokens":96,"total_tokens":5004,"cached_tokens":4096}`
		usageChunk = ""
		finish = `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1764400000,"model":"up-model","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls","usage":` + usage + `}]}` + "\n\n"
	}
	calls := `{"index":0,"id":"call_a","type":"function","function":{"name":"Read","arguments":"{\"file_path\":\"/a\"}"}},` +
		`{"index":1,"id":"call_b","type":"function","function":{"name":"Read","arguments":"{\"file_path\":\"/b\"}"}}`
	thinking := 40
	if profile == "kimi" {
		thinking = -1
	}
	return msScenario{
		name: "11 think, text, two calls in one chunk (" + profile + ")", profile: profile,
		chunks: []string{
			msChunk(`{"role":"assistant","content":null,`+reason("Both files are needed: ")+`}`, "null"),
			msChunk(`{`+reason(`"a" & <b>.`)+`}`, "null"),
			msChunk(`{"content":"Reading both files."}`, "null"),
			msChunk(`{"tool_calls":[`+calls+`]}`, "null"),
			finish, usageChunk, msDone,
		},
		completion: msCompletion(`{"role":"assistant","content":"Reading both files.",`+reason(thought)+`,"tool_calls":[`+
			strings.ReplaceAll(strings.ReplaceAll(calls, `"index":0,`, ""), `"index":1,`, "")+`]}`, "tool_calls", usage),
		want: map[string]string{
			"content.#.type": `["thinking","text","tool_use","tool_use"]`,
			"content.0":      `{"type":"thinking","thinking":` + msQuote(thought) + `,"signature":` + msQuote(reasonenv.SealText(profile, []byte(thought))) + `}`,
			"content.2":      `{"type":"tool_use","id":"call_a","name":"Read","input":{"file_path":"/a"}}`,
			"content.3":      `{"type":"tool_use","id":"call_b","name":"Read","input":{"file_path":"/b"}}`,
			"stop_reason":    `"tool_use"`,
			"usage":          msUsage(812, 96, 0, 4096, thinking),
			"content.1.text": `"Reading both files."`,
		},
	}
}

// msResponseScenarios are the response scenarios, grouped by profile (one
// gateway each).
func msResponseScenarios() []msScenario {
	const cut = "the upstream's stream ended before the answer was finished"
	return []msScenario{
		msThinkTextTwoCalls("deepseek"),
		{
			// The reasoning that comes after the text began has no block
			// to go in, and the stream drops it; the JSON answer has it
			// all. So the thinking text, and the signature that seals
			// it, differ by design.
			name: "12 interleaved reasoning and content", profile: "deepseek",
			chunks: []string{
				msChunk(`{"reasoning_content":"First."}`, "null"),
				msChunk(`{"content":"Hel"}`, "null"),
				msChunk(`{"reasoning_content":"Second thoughts."}`, "null"),
				msChunk(`{"content":"lo."}`, "null"),
				msChunk(`{}`, `"stop"`),
				msUsageChunk(`{"prompt_tokens":10,"completion_tokens":5}`), msDone,
			},
			completion: msCompletion(`{"role":"assistant","content":"Hello.","reasoning_content":"First.Second thoughts."}`, "stop", `{"prompt_tokens":10,"completion_tokens":5}`),
			want: map[string]string{
				"content.#.type": `["thinking","text"]`, "content.0.thinking": `"First.Second thoughts."`,
				"content.1.text": `"Hello."`, "stop_reason": `"end_turn"`, "usage": msUsage(10, 5, 0, 0, -1),
			},
			byDesign: []string{"content.0.thinking", "content.0.signature"},
			check: func(t *testing.T, stream []byte, msg gjson.Result) {
				if got := msDeltas(stream, "thinking_delta", "thinking"); got != "First." {
					t.Errorf("the stream's thinking %q, want %q", got, "First.")
				}
				if got, want := msDeltas(stream, "signature_delta", "signature"), reasonenv.SealText("deepseek", []byte("First.")); got != want {
					t.Errorf("the stream's signature %q, want the seal of its thinking %q", got, want)
				}
				if got, want := msg.Get("content.0.signature").String(), reasonenv.SealText("deepseek", []byte("First.Second thoughts.")); got != want {
					t.Errorf("the JSON's signature %q, want %q", got, want)
				}
			},
		},
		{
			name: "16 usage: DeepSeek's cache hits and reasoning tokens", profile: "deepseek",
			chunks: []string{
				msChunk(`{"content":"ok"}`, "null"), msChunk(`{}`, `"stop"`),
				msUsageChunk(`{"prompt_tokens":1000,"completion_tokens":50,"prompt_cache_hit_tokens":600,"prompt_cache_miss_tokens":400,"completion_tokens_details":{"reasoning_tokens":20}}`), msDone,
			},
			completion: msCompletion(`{"role":"assistant","content":"ok"}`, "stop", `{"prompt_tokens":1000,"completion_tokens":50,"prompt_cache_hit_tokens":600,"prompt_cache_miss_tokens":400,"completion_tokens_details":{"reasoning_tokens":20}}`),
			want:       map[string]string{"usage": msUsage(400, 50, 0, 600, 20), "stop_reason": `"end_turn"`},
		},
		{
			name: "17 EOF mid-text", profile: "deepseek",
			chunks: []string{msChunk(`{"content":"The answer is"}`, "null")},
			check: func(t *testing.T, stream []byte, _ gjson.Result) {
				s := string(stream)
				if strings.Contains(s, "message_stop") || strings.Contains(s, "message_delta") || strings.Contains(s, "end_turn") {
					t.Errorf("a cut stream ends as if finished:\n%s", s)
				}
				want := "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
					"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"" + cut + "\"}}\n\n"
				if !strings.HasSuffix(s, want) {
					t.Errorf("the stream does not end with the text block's stop and an api_error:\n%s", s)
				}
				name, message := anthropicSDKRefusal(t, stream)
				if name != "APIError" || gjson.Get(message, "error.type").String() != "api_error" || gjson.Get(message, "error.message").String() != cut {
					t.Errorf("the SDK raised %s %q, want APIError with the api_error", name, message)
				}
			},
		},
		{
			name: "20 context length", profile: "deepseek", status: 400,
			body: `{"error":{"message":"This model's maximum context length is 131072 tokens. However, you requested 131134 tokens (122942 in the messages, 8192 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`,
			want: map[string]string{"": `{"type":"error","error":{"type":"invalid_request_error","message":"input length and ` + "`max_tokens`" + ` exceed context limit: 122942 + 8192 > 131072, decrease input length or ` + "`max_tokens`" + ` and try again"}}`},
		},
		{
			name: "21 rate limit", profile: "deepseek", status: 429, header: map[string]string{"Retry-After": "7"},
			body: `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`,
			want: map[string]string{"": `{"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached for requests"}}`},
		},
		{
			name: "21 overloaded", profile: "deepseek", status: 503,
			body: `{"error":{"message":"Service is too busy","type":"server_error"}}`,
			want: map[string]string{"": `{"type":"error","error":{"type":"overloaded_error","message":"Service is too busy"}}`},
		},

		{
			name: "13 interleaved parallel call arguments", profile: "openai_chat",
			chunks: []string{
				msChunk(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_0","type":"function","function":{"name":"get_weather","arguments":""}}]}`, "null"),
				msChunk(`{"tool_calls":[{"index":1,"id":"call_1","type":"function","function":{"name":"get_time","arguments":""}}]}`, "null"),
				msChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, "null"),
				msChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{\"tz\":"}}]}`, "null"),
				msChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, "null"),
				msChunk(`{"tool_calls":[{"index":1,"function":{"arguments":"\"CET\"}"}}]}`, "null"),
				msChunk(`{}`, `"tool_calls"`),
				msUsageChunk(`{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":0}}`), msDone,
			},
			completion: msCompletion(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},`+
				`{"id":"call_1","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"CET\"}"}}]}`, "tool_calls", `{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":0}}`),
			want: map[string]string{
				"content":     `[{"type":"tool_use","id":"call_0","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"call_1","name":"get_time","input":{"tz":"CET"}}]`,
				"stop_reason": `"tool_use"`, "usage": msUsage(100, 20, 0, 0, -1),
			},
		},
		{
			name: "14 tool_calls without a call", profile: "openai_chat",
			chunks:     []string{msChunk(`{"content":"Done."}`, "null"), msChunk(`{}`, `"tool_calls"`), msDone},
			completion: msCompletion(`{"role":"assistant","content":"Done."}`, "tool_calls", ""),
			want:       map[string]string{"content": `[{"type":"text","text":"Done."}]`, "stop_reason": `"end_turn"`},
		},
		{
			name: "14 calls with stop", profile: "openai_chat",
			chunks:     []string{msChunk(`{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"Read","arguments":"{}"}}]}`, `"stop"`), msDone},
			completion: msCompletion(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"function","function":{"name":"Read","arguments":"{}"}}]}`, "stop", ""),
			want:       map[string]string{"content": `[{"type":"tool_use","id":"call_9","name":"Read","input":{}}]`, "stop_reason": `"tool_use"`},
		},
		{
			name: "15 length", profile: "openai_chat",
			chunks: []string{msChunk(`{"content":"Once upon"}`, "null"), msChunk(`{}`, `"length"`),
				msUsageChunk(`{"prompt_tokens":7,"completion_tokens":2}`), msDone},
			completion: msCompletion(`{"role":"assistant","content":"Once upon"}`, "length", `{"prompt_tokens":7,"completion_tokens":2}`),
			want:       map[string]string{"stop_reason": `"max_tokens"`, "stop_details": ``, "usage": msUsage(7, 2, 0, 0, -1)},
		},
		{
			name: "15 content_filter", profile: "openai_chat",
			chunks: []string{msChunk(`{"content":"Once upon"}`, "null"), msChunk(`{}`, `"content_filter"`),
				msUsageChunk(`{"prompt_tokens":7,"completion_tokens":2}`), msDone},
			completion: msCompletion(`{"role":"assistant","content":"Once upon"}`, "content_filter", `{"prompt_tokens":7,"completion_tokens":2}`),
			want:       map[string]string{"stop_reason": `"refusal"`, "stop_details": `{"type":"refusal"}`, "content.0.text": `"Once upon"`},
		},
		{
			name: "16 usage: OpenAI's details", profile: "openai_chat",
			chunks: []string{msChunk(`{"content":"ok"}`, "null"), msChunk(`{}`, `"stop"`),
				msUsageChunk(`{"prompt_tokens":1000,"completion_tokens":50,"total_tokens":1050,"prompt_tokens_details":{"cached_tokens":600},"completion_tokens_details":{"reasoning_tokens":20}}`), msDone},
			completion: msCompletion(`{"role":"assistant","content":"ok"}`, "stop", `{"prompt_tokens":1000,"completion_tokens":50,"total_tokens":1050,"prompt_tokens_details":{"cached_tokens":600},"completion_tokens_details":{"reasoning_tokens":20}}`),
			want:       map[string]string{"usage": msUsage(400, 50, 0, 600, 20)},
		},
		{
			name: "16 usage: cache writes", profile: "openai_chat",
			chunks: []string{msChunk(`{"content":"ok"}`, "null"), msChunk(`{}`, `"stop"`),
				msUsageChunk(`{"prompt_tokens":1000,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":600,"cache_write_tokens":300}}`), msDone},
			completion: msCompletion(`{"role":"assistant","content":"ok"}`, "stop", `{"prompt_tokens":1000,"completion_tokens":50,"prompt_tokens_details":{"cached_tokens":600,"cache_write_tokens":300}}`),
			want:       map[string]string{"usage": msUsage(100, 50, 300, 600, -1)},
		},

		msThinkTextTwoCalls("kimi"),
		msThinkTextTwoCalls("glm"),
		msThinkTextTwoCalls("minimax"),
		{
			name: "19 <think> split across chunks", profile: "minimax",
			chunks: []string{
				msChunk(`{"content":"\n<thi"}`, "null"),
				msChunk(`{"content":"nk>Plan: "}`, "null"),
				msChunk(`{"content":"greet.</th"}`, "null"),
				msChunk(`{"content":"ink>\n\n"}`, "null"),
				msChunk(`{"content":"Hi <b>there</b>."}`, "null"),
				msChunk(`{}`, `"stop"`), msDone,
			},
			completion: msCompletion(`{"role":"assistant","content":"\n<think>Plan: greet.</think>\n\nHi <b>there</b>."}`, "stop", ""),
			want: map[string]string{
				"content": `[{"type":"thinking","thinking":"Plan: greet.","signature":` + msQuote(reasonenv.SealText("minimax", []byte("Plan: greet."))) + `},{"type":"text","text":"Hi <b>there</b>."}]`,
			},
			check: func(t *testing.T, stream []byte, _ gjson.Result) {
				if bytes.Contains(stream, []byte("think>")) || bytes.Contains(stream, []byte(`<th`)) {
					t.Errorf("tag text leaked into the stream:\n%s", stream)
				}
			},
		},
	}
}

// msTools are the tools the response scenarios' request declares.
const msTools = `[{"name":"Read","description":"Read a file.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}}}},` +
	`{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},` +
	`{"name":"get_time","input_schema":{"type":"object","properties":{"tz":{"type":"string"}}}}]`

// msRequest is the Messages request of a response scenario: its model
// names the scenario and the upstream's piece size.
func msRequest(model string, stream bool) string {
	return `{"model":` + msQuote(model) + `,"max_tokens":4096,"stream":` + strconv.FormatBool(stream) +
		`,"messages":[{"role":"user","content":"Read /a and /b."}],"tools":` + msTools + `}`
}

// --- the upstream ----------------------------------------------------------------

// msUpstream answers POST /v1/chat/completions by the request's model,
// "<scenario>@<piece size>", and keeps every request body by model. A
// model it does not know gets answer's reply, or a short text.
type msUpstream struct {
	scenarios map[string]msScenario
	answer    func(req gjson.Result) (chunks []string, completion string)

	mu  sync.Mutex
	got map[string][]byte
}

func (u *msUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := gjson.ParseBytes(body)
	model := req.Get("model").String()
	u.mu.Lock()
	u.got[model] = body
	u.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"Not Found"}}`, http.StatusNotFound)
		return
	}
	name, size, _ := strings.Cut(model, "@")
	n, _ := strconv.Atoi(size)
	if n <= 0 {
		n = 4096
	}
	sc, ok := u.scenarios[name]
	if !ok {
		sc.chunks = []string{msChunk(`{"role":"assistant","content":"ok"}`, "null"), msChunk(`{}`, `"stop"`), msDone}
		sc.completion = msCompletion(`{"role":"assistant","content":"ok"}`, "stop", "")
		if u.answer != nil {
			sc.chunks, sc.completion = u.answer(req)
		}
	}
	if sc.status != 0 {
		for k, v := range sc.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(sc.status)
		_, _ = io.WriteString(w, sc.body)
		return
	}
	if !req.Get("stream").Bool() {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, sc.completion)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	all := strings.Join(sc.chunks, "")
	for i := 0; i < len(all); i += n {
		if _, err := io.WriteString(w, all[i:min(i+n, len(all))]); err != nil {
			return
		}
		_ = rc.Flush()
	}
}

// body is the last request the upstream got for model.
func (u *msUpstream) body(model string) gjson.Result {
	u.mu.Lock()
	defer u.mu.Unlock()
	return gjson.ParseBytes(u.got[model])
}

// --- the client side -------------------------------------------------------------

// msPost sends a Messages request to the gateway as Claude Code does, on
// a fresh connection (tests reload Caddy between them).
func msPost(t *testing.T, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, gatewayURL+"/v1/messages?beta=true", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+claudeCodeToken)
	req.Header.Set("anthropic-version", "2023-06-01")
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// msWant checks members of a JSON document: a path whose value is ""
// must be absent; the path "" is the whole document.
func msWant(t *testing.T, doc []byte, want map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, path := range keys {
		w := want[path]
		got := gjson.ParseBytes(doc)
		if path != "" {
			got = got.Get(path)
		}
		switch {
		case w == "":
			if got.Exists() {
				t.Errorf("%s: %s, want none", path, got.Raw)
			}
		case !got.Exists() || !sameJSON(t, []byte(got.Raw), []byte(w)):
			t.Errorf("%s: %s, want %s\nin %s", path, got.Raw, w, doc)
		}
	}
}

// msDeltas joins the member field of a stream's deltas of type typ.
func msDeltas(stream []byte, typ, field string) string {
	var b strings.Builder
	for _, line := range strings.Split(string(stream), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if d := gjson.Get(data, "delta"); d.Get("type").String() == typ {
			b.WriteString(d.Get(field).String())
		}
	}
	return b.String()
}

// anthropicSDKRefusal runs the SDK's accumulators on a stream they must
// refuse and returns the error the SDK raised: its class and message.
func anthropicSDKRefusal(t *testing.T, stream []byte) (name, message string) {
	t.Helper()
	node, dir := anthropicSDKNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, anthropicSDKScript)
	cmd.Env = append(os.Environ(), "ANTHROPIC_SDK_DIR="+dir)
	cmd.Stdin = bytes.NewReader(stream)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err == nil || !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("the SDK did not refuse the stream (%v): %s%s\nstream:\n%s", err, stdout.String(), stderr.String(), stream)
	}
	out := gjson.ParseBytes(stdout.Bytes())
	if !out.Get("error").Exists() || out.Get("message").Exists() {
		t.Fatalf("script output: %s\n%s", stdout.String(), stderr.String())
	}
	return out.Get("error.name").String(), out.Get("error.message").String()
}

var msMessageID = regexp.MustCompile(`msg_[0-9A-Za-z]{16,}`)

// msBridge is the gateway's messages_to_chat rule for profile.
func msBridge(profile string) string {
	return "\t\trule messages_to_chat {\n\t\t\tprofile " + profile + "\n\t\t}"
}

// TestMessagesBridgeScenariosInTheSDK runs §14's response scenarios 11–17,
// 19, 20 and 21 through the gateway, every stream at piece sizes 1, 7 and
// 4096, each stream through the Anthropic SDK's accumulators against the
// JSON answer to the same request (scenario 11 also as Kimi, GLM and
// MiniMax answer it); then request scenarios 2, 3, 5, 6, 7, 9 and 10 once.
// The SDK's runs come last, in parallel, under SDK/: -run selects them
// only together with the scenario subtests that make their streams.
func TestMessagesBridgeScenariosInTheSDK(t *testing.T) {
	anthropicSDKNode(t)
	up := &msUpstream{scenarios: map[string]msScenario{}, got: map[string][]byte{}}
	scenarios := msResponseScenarios()
	for _, sc := range scenarios {
		up.scenarios[msModel(sc.name)] = sc
	}
	addr := serveUpstream(t, up)

	var sdk []msSDKRun
	profile := ""
	for _, sc := range scenarios {
		if sc.profile != profile {
			profile = sc.profile
			startGateway(t, msBridge(profile), addr)
		}
		t.Run(sc.name, func(t *testing.T) {
			if sc.status != 0 {
				msErrorScenario(t, sc)
				return
			}
			var whole []byte
			if sc.completion != "" {
				status, header, b := msPost(t, msRequest(msModel(sc.name), false))
				if status != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "application/json") {
					t.Fatalf("JSON: %d %s\n%s", status, header.Get("Content-Type"), b)
				}
				whole = b
				want := maps.Clone(sc.want)
				want["model"] = msQuote(msModel(sc.name))
				msWant(t, whole, want)
			}
			var first []byte
			for _, n := range msChunkSizes {
				model := msModel(sc.name) + "@" + strconv.Itoa(n)
				status, header, stream := msPost(t, msRequest(model, true))
				if status != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "text/event-stream") {
					t.Fatalf("stream at %d: %d %s\n%s", n, status, header.Get("Content-Type"), stream)
				}
				// The request's model names the piece size, which the answer
				// echoes.
				stream = bytes.ReplaceAll(stream, []byte(msQuote(model)), []byte(msQuote(msModel(sc.name))))
				norm := msMessageID.ReplaceAll(stream, []byte("msg_ID"))
				if first == nil {
					first = norm
				} else if !bytes.Equal(norm, first) {
					t.Errorf("piece size %d changed the stream:\n%s\n--- at size 1:\n%s", n, norm, first)
				}
				sdk = append(sdk, msSDKRun{sc.name + "/size " + strconv.Itoa(n), func(t *testing.T) {
					if sc.check != nil {
						sc.check(t, stream, gjson.ParseBytes(whole))
					}
					if whole != nil {
						anthropicSDKCheck(t, stream, whole, append([]string{"id"}, sc.byDesign...)...)
					}
				}})
			}
		})
	}

	t.Run("request side", func(t *testing.T) { msRequestScenarios(t, up, addr) })

	// The SDK's runs need no gateway: all of them at once, as many at a
	// time as -parallel allows (each is a node process).
	t.Run("SDK", func(t *testing.T) {
		for _, r := range sdk {
			t.Run(r.name, func(t *testing.T) {
				t.Parallel()
				r.run(t)
			})
		}
	})
}

// msSDKRun is a stream's check by the SDK, run after the gateway's part.
type msSDKRun struct {
	name string
	run  func(t *testing.T)
}

// msErrorScenario: the upstream's error, asked for with and without
// stream, is Anthropic's status and body, with the upstream's
// Retry-After.
func msErrorScenario(t *testing.T, sc msScenario) {
	wantStatus := map[int]int{400: 400, 429: 429, 503: 529}[sc.status]
	for _, stream := range []bool{false, true} {
		status, header, b := msPost(t, msRequest(msModel(sc.name), stream))
		if status != wantStatus || !strings.HasPrefix(header.Get("Content-Type"), "application/json") {
			t.Errorf("stream %v: %d %s, want %d JSON\n%s", stream, status, header.Get("Content-Type"), wantStatus, b)
		}
		msWant(t, b, sc.want)
		if ra := sc.header["Retry-After"]; ra != "" && header.Get("Retry-After") != ra {
			t.Errorf("stream %v: Retry-After %q, want %q", stream, header.Get("Retry-After"), ra)
		}
	}
}

// msRequestScenarios sends §14's request scenarios 2, 3, 5, 6, 7, 9 and
// 10 through the gateway, each once without stream, and checks what the
// upstream got; 7 also checks its answer's tool name, streamed and not.
func msRequestScenarios(t *testing.T, up *msUpstream, addr string) {
	reasoning := "I should run \"ls\" and pwd.\nThen answer."
	sealed := reasonenv.SealText("deepseek", []byte(reasoning))
	user := `{"role":"user","content":"list the files"}`
	turn := func(thinking string) string {
		return `{"role":"assistant","content":[{"type":"thinking","thinking":` + msQuote(thinking) + `,"signature":"` + sealed + `"},` +
			`{"type":"text","text":"Listing."},{"type":"tool_use","id":"toolu_a","name":"Bash","input":{"cmd":"ls"}},` +
			`{"type":"tool_use","id":"toolu_b","name":"Bash","input":{"cmd":"pwd"}}]}`
	}
	results := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"a.txt\nb.txt"},` +
		`{"type":"tool_result","tool_use_id":"toolu_b","content":[{"type":"text","text":"/work"}]},{"type":"text","text":"thanks"}]}`
	bash := `{"name":"Bash","description":"Run a command","input_schema":{"type":"object","properties":{"cmd":{"type":"string"}}}}`
	call := `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"Bash","input":{"cmd":"ls"}}]}`
	body := func(model, extra string, msgs ...string) string {
		return `{"model":"` + model + `","max_tokens":1000` + extra + `,"messages":[` + strings.Join(msgs, ",") + `]}`
	}
	// roles lists the upstream messages' roles, a tool message as
	// tool:<id>.
	roles := func(req gjson.Result) []string {
		var out []string
		for _, m := range req.Get("messages").Array() {
			r := m.Get("role").String()
			if r == "tool" {
				r += ":" + m.Get("tool_call_id").String()
			}
			out = append(out, r)
		}
		return out
	}
	toolLoop := func(t *testing.T, req gjson.Result) {
		if got, want := roles(req), []string{"user", "assistant", "tool:toolu_a", "tool:toolu_b", "user"}; !slices.Equal(got, want) {
			t.Errorf("roles %q, want %q", got, want)
		}
		a := req.Get("messages.1")
		if a.Get("reasoning_content").String() != reasoning || a.Get("content").String() != "Listing." || len(a.Get("tool_calls").Array()) != 2 {
			t.Errorf("the assistant message %s, want reasoning_content %q from the signature, the text and two calls", a.Raw, reasoning)
		}
		if strings.Contains(req.Raw, reasonenv.Prefix) {
			t.Errorf("an envelope went upstream: %s", req.Raw)
		}
	}
	cases := []struct {
		name, body string
		check      func(t *testing.T, req gjson.Result)
	}{
		{"2 tool loop", body("req-2", "", user, turn(reasoning), results), toolLoop},
		{"3 thinking text cleared", body("req-3", "", user, turn(""), results), toolLoop},
		{"5 tool_result error with text and an image", body("req-5", "", user,
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_s","name":"Screenshot","input":{}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_s","is_error":true,"content":[{"type":"text","text":"render failed"},`+
				`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"partial frame"}]}]}`),
			func(t *testing.T, req gjson.Result) {
				if got := req.Get("messages.2"); got.Get("role").String() != "tool" || got.Get("content").String() != "Error: render failed\n\npartial frame" {
					t.Errorf("the tool message %s, want the text with Error:", got.Raw)
				}
			}},
		{"6 any without parallel calls", body("req-6a", `,"tools":[`+bash+`],"tool_choice":{"type":"any","disable_parallel_tool_use":true}`, user),
			func(t *testing.T, req gjson.Result) {
				if req.Get("tool_choice").Raw != `"required"` || req.Get("parallel_tool_calls").Raw != "false" {
					t.Errorf("tool_choice %s parallel_tool_calls %s, want \"required\" false", req.Get("tool_choice").Raw, req.Get("parallel_tool_calls").Raw)
				}
			}},
		{"6 a choice of a dropped server tool", body("req-6b", `,"tools":[`+bash+`,{"type":"web_search_20250305","name":"web_search","max_uses":8}],"tool_choice":{"type":"tool","name":"web_search"}`, user),
			func(t *testing.T, req gjson.Result) {
				if req.Get("tool_choice").Raw != `"auto"` || req.Get("tools.#").Int() != 1 || req.Get("tools.0.function.name").String() != "Bash" {
					t.Errorf("tool_choice %s tools %s, want \"auto\" and Bash alone", req.Get("tool_choice").Raw, req.Get("tools").Raw)
				}
			}},
		{"9 system after a tool result", body("req-9", "", user, call,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"a.txt"}]}`, `{"role":"system","content":"Today is Monday."}`),
			func(t *testing.T, req gjson.Result) {
				if got, want := roles(req), []string{"user", "assistant", "tool:toolu_a", "user"}; !slices.Equal(got, want) ||
					req.Get("messages.3.content").String() != "<system>\nToday is Monday.\n</system>" {
					t.Errorf("messages %s, want the system text after the tool message", req.Get("messages").Raw)
				}
			}},
		{"10 orphan tool_use", body("req-10", "", user,
			`{"role":"assistant","content":[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_x","name":"Bash","input":{}}]}`,
			`{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]}`),
			func(t *testing.T, req gjson.Result) {
				if strings.Contains(req.Get("messages").Raw, "tool_calls") || strings.Contains(req.Get("messages").Raw, "toolu_x") ||
					req.Get("messages.1.content").String() != "Let me look." {
					t.Errorf("messages %s, want the orphan call gone and its text kept", req.Get("messages").Raw)
				}
			}},
	}
	startGateway(t, msBridge("deepseek"), addr)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, b := msPost(t, c.body)
			if status != http.StatusOK || gjson.GetBytes(b, "content.0.text").String() != "ok" {
				t.Fatalf("%d %s", status, b)
			}
			c.check(t, up.body(gjson.Get(c.body, "model").String()))
		})
	}

	// 7: tools_plan after the bridge gives the 90-character MCP name one
	// DeepSeek takes; the answer's call has the client's name again.
	t.Run("7 a 90-character MCP tool name", func(t *testing.T) {
		const long = "mcp__a_very_verbose_servera_very_verbose_server__fetch_everythingfetch_everythingfetch_eve"
		up.answer = func(req gjson.Result) ([]string, string) {
			name := msQuote(req.Get("tools.0.function.name").String())
			return []string{msChunk(`{"tool_calls":[{"index":0,"id":"call_m","type":"function","function":{"name":`+name+`,"arguments":"{\"q\":1}"}}]}`, "null"),
					msChunk(`{}`, `"tool_calls"`), msDone},
				msCompletion(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_m","type":"function","function":{"name":`+name+`,"arguments":"{\"q\":1}"}}]}`, "tool_calls", "")
		}
		defer func() { up.answer = nil }()
		startGateway(t, msBridge("deepseek")+"\n\t\trule tools_plan {\n\t\t\tprofile deepseek\n\t\t}", addr)
		req := func(stream bool) string {
			return `{"model":"req-7","max_tokens":1000,"stream":` + strconv.FormatBool(stream) + `,"tools":[{"name":"` + long +
				`","description":"Fetch.","input_schema":{"type":"object"}}],"messages":[` + user + `]}`
		}
		status, _, whole := msPost(t, req(false))
		if status != http.StatusOK {
			t.Fatalf("JSON: %d %s", status, whole)
		}
		sent := up.body("req-7").Get("tools.0.function.name").String()
		if len(sent) > 64 || sent == long || !strings.HasPrefix(sent, "mcp__a_very_verbose_server") {
			t.Errorf("the upstream got the tool name %q, want one of at most 64 characters", sent)
		}
		msWant(t, whole, map[string]string{"content": `[{"type":"tool_use","id":"call_m","name":"` + long + `","input":{"q":1}}]`, "stop_reason": `"tool_use"`})
		status, _, stream := msPost(t, req(true))
		if status != http.StatusOK {
			t.Fatalf("stream: %d %s", status, stream)
		}
		anthropicSDKCheck(t, stream, whole, "id")
	})
}
