package integration

// Keep-alive through the gateway (issue 27, item 5): messages_to_chat with
// ping_interval 20ms in front of a DeepSeek-style Chat upstream that goes
// silent for 300 ms (standing for a 30 s think, scaled down with the
// interval). The client must get `event: ping` while the upstream is
// silent, as the silence goes on (not held back until it ends), none after
// message_stop, and the whole message; the Anthropic SDK's MessageStream
// and BetaMessageStream must read the stream, pings and all, into the
// same message as the JSON answer to the same request.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

const (
	// kaPause is the upstream's silence, kaInterval the rule's
	// ping_interval: about 15 pings' worth.
	kaPause    = 300 * time.Millisecond
	kaInterval = "20ms"
	// kaTail is how long the upstream stays open after [DONE]: time for
	// a stray ping after message_stop.
	kaTail = 150 * time.Millisecond
	// kaMinPings is the fewest pings the silence must bring.
	kaMinPings = 5
	kaModel    = "deepseek-v4-pro"
)

// The answer, as DeepSeek streams it and as one completion.
var (
	kaReasoning = []string{"The user wants ", `/a read: "quoted" & `, "naïve ✓."}
	kaText      = "I'll read it."
	kaCallID    = "call_00_kw66qXbR4jVn1m8s"
	kaArgs      = `{"file_path":"/a"}`
	kaUsage     = `{"prompt_tokens":1200,"completion_tokens":40,"total_tokens":1240,"prompt_cache_hit_tokens":1024,"prompt_cache_miss_tokens":176,"completion_tokens_details":{"reasoning_tokens":20}}`
)

func kaChunk(delta, finish string) string {
	return `data: {"id":"0f9e4c1a-5b7d-4e21-9c3a-8d6f2b1e0a47","object":"chat.completion.chunk","created":1764400000,"model":"` + kaModel +
		`","system_fingerprint":"fp_8802369eaa_prod0820_fp8_kvcache","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}` + "\n\n"
}

// kaChunks is the stream; the pause comes before chunk kaChunks()[at].
func kaChunks() []string {
	c := []string{kaChunk(`{"role":"assistant","content":null,"reasoning_content":""}`, "null")}
	for _, r := range kaReasoning {
		c = append(c, kaChunk(`{"content":null,"reasoning_content":`+msQuote(r)+`}`, "null"))
	}
	c = append(c,
		kaChunk(`{"content":`+msQuote(kaText)+`,"reasoning_content":null}`, "null"),
		kaChunk(`{"tool_calls":[{"index":0,"id":"`+kaCallID+`","type":"function","function":{"name":"Read","arguments":""}}]}`, "null"),
		kaChunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+msQuote(kaArgs[:9])+`}}]}`, "null"),
		kaChunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+msQuote(kaArgs[9:])+`}}]}`, "null"),
		kaChunk(`{"content":"","reasoning_content":null}`, `"tool_calls"`),
		`data: {"id":"0f9e4c1a-5b7d-4e21-9c3a-8d6f2b1e0a47","object":"chat.completion.chunk","created":1764400000,"model":"`+kaModel+`","system_fingerprint":"fp_8802369eaa_prod0820_fp8_kvcache","choices":[],"usage":`+kaUsage+"}\n\n",
		msDone)
	return c
}

func kaCompletion() string {
	return `{"id":"0f9e4c1a-5b7d-4e21-9c3a-8d6f2b1e0a47","object":"chat.completion","created":1764400000,"model":"` + kaModel +
		`","system_fingerprint":"fp_8802369eaa_prod0820_fp8_kvcache","choices":[{"index":0,"message":{"role":"assistant","content":` + msQuote(kaText) +
		`,"reasoning_content":` + msQuote(strings.Join(kaReasoning, "")) +
		`,"tool_calls":[{"id":"` + kaCallID + `","type":"function","function":{"name":"Read","arguments":` + msQuote(kaArgs) + `}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":` + kaUsage + `}`
}

// kaUpstream answers Chat requests on /v1/chat/completions: a stream,
// flushed chunk by chunk, silent for kaPause before chunk pauseAt (0: after
// the header, before any chunk; 2: after the first reasoning chunk), and
// open for kaTail after [DONE]; or, not streaming, the completion after
// the same silence.
//
// It counts the requests marked with run in kaRunHeader: the integration
// tests share fixed ports (gatewayURL, adminAddr), so on a shared host a
// concurrent run of the package can load its config into this test's Caddy
// and send it requests of its own; those are only logged.
type kaUpstream struct {
	pauseAt int
	run     string

	mu      sync.Mutex
	seen    []string // "<path> stream=<bool>", this run's requests
	foreign int
}

// kaRunHeader marks the test's requests, through the gateway, for the
// upstream.
const kaRunHeader = "X-Keepalive-Run"

func (u *kaUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := gjson.ParseBytes(body)
	u.mu.Lock()
	if r.Header.Get(kaRunHeader) == u.run {
		u.seen = append(u.seen, r.URL.Path+" stream="+req.Get("stream").String())
	} else {
		u.foreign++
	}
	u.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" || !req.Get("messages").IsArray() {
		http.Error(w, `{"error":{"message":"Not Found"}}`, http.StatusNotFound)
		return
	}
	if !req.Get("stream").Bool() {
		time.Sleep(kaPause)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, kaCompletion())
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	for i, c := range kaChunks() {
		if i == u.pauseAt {
			time.Sleep(kaPause)
		}
		if _, err := io.WriteString(w, c); err != nil {
			return
		}
		_ = rc.Flush()
	}
	time.Sleep(kaTail)
}

// kaEvent is one event the client got, and when (since the request).
type kaEvent struct {
	name string
	data gjson.Result
	at   time.Duration
}

// kaRequest is a Claude-Code-like Messages request declaring Read.
func kaRequest(stream bool) string {
	s := "false"
	if stream {
		s = "true"
	}
	return `{"model":"` + kaModel + `","max_tokens":8192,"stream":` + s + `,"system":[{"type":"text","text":"You are a coding agent."}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"Read /a."}]}],` +
		`"tools":[{"name":"Read","description":"Read a file.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}}]}`
}

// kaPost sends the Messages request to the gateway as Claude Code does,
// marked with run, on a fresh connection; the caller closes the body.
func kaPost(t *testing.T, run string, stream bool) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, gatewayURL+"/v1/messages?beta=true", strings.NewReader(kaRequest(stream)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+claudeCodeToken)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set(kaRunHeader, run)
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// kaStream sends the streaming request and reads the answer event by event
// as it comes, each stamped with its arrival.
func kaStream(t *testing.T, run string) ([]byte, []kaEvent) {
	t.Helper()
	t0 := time.Now()
	resp := kaPost(t, run, true)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %s %s\n%s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	var raw bytes.Buffer
	var evs []kaEvent
	var name, data string
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		raw.WriteString(line)
		switch l := strings.TrimRight(line, "\r\n"); {
		case l == "" && strings.HasSuffix(line, "\n"):
			if name != "" || data != "" {
				if !gjson.Valid(data) {
					t.Fatalf("event %d (%s): data is not JSON: %q", len(evs), name, data)
				}
				evs = append(evs, kaEvent{name, gjson.Parse(data), time.Since(t0)})
			}
			name, data = "", ""
		case strings.HasPrefix(l, "event: "):
			name = l[len("event: "):]
		case strings.HasPrefix(l, "data: "):
			data += l[len("data: "):]
		}
		if err == io.EOF {
			if line != "" || name != "" || data != "" {
				t.Fatalf("the stream ends inside an event: %q", line)
			}
			return raw.Bytes(), evs
		}
		if err != nil {
			t.Fatalf("reading the stream: %v\n%s", err, raw.Bytes())
		}
	}
}

// kaCheckMessage checks the stream's events make the whole answer: each
// named after its type, message_start first, message_stop once and last
// (no ping after it), one message_delta with stop_reason tool_use and the
// usage, and blocks thinking (with a signature), text and tool_use
// holding the upstream's reasoning, text and call.
func kaCheckMessage(t *testing.T, evs []kaEvent) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	var thinking, sig, text, input strings.Builder
	var blocks []string
	var delta gjson.Result
	count := map[string]int{}
	for i, e := range evs {
		typ := e.data.Get("type").String()
		if e.name != typ {
			t.Errorf("event %d is named %q but is a %q", i, e.name, typ)
		}
		count[typ]++
		switch typ {
		case "content_block_start":
			blocks = append(blocks, e.data.Get("content_block.type").String())
			if e.data.Get("content_block.type").String() == "tool_use" &&
				(e.data.Get("content_block.id").String() != kaCallID || e.data.Get("content_block.name").String() != "Read") {
				t.Errorf("tool_use block: %s", e.data.Raw)
			}
		case "content_block_delta":
			d := e.data.Get("delta")
			thinking.WriteString(d.Get("thinking").String())
			sig.WriteString(d.Get("signature").String())
			text.WriteString(d.Get("text").String())
			input.WriteString(d.Get("partial_json").String())
		case "message_delta":
			delta = e.data
		}
	}
	if first := evs[0].name; first != "message_start" {
		t.Errorf("the first event is %s, want message_start", first)
	}
	if last := evs[len(evs)-1].name; last != "message_stop" || count["message_stop"] != 1 {
		t.Errorf("the last event is %s (%d message_stop), want message_stop once, last: nothing after it", last, count["message_stop"])
	}
	if count["message_start"] != 1 || count["message_delta"] != 1 || count["error"] != 0 || count["content_block_start"] != count["content_block_stop"] {
		t.Errorf("event counts %v", count)
	}
	if got := strings.Join(blocks, " "); got != "thinking text tool_use" {
		t.Errorf("blocks %s, want thinking text tool_use", got)
	}
	if thinking.String() != strings.Join(kaReasoning, "") || sig.Len() == 0 || text.String() != kaText || !sameJSON(t, []byte(input.String()), []byte(kaArgs)) {
		t.Errorf("thinking %q (signature %d bytes), text %q, input %q", thinking.String(), sig.Len(), text.String(), input.String())
	}
	if delta.Get("delta.stop_reason").String() != "tool_use" || delta.Get("usage.output_tokens").Int() != 40 || delta.Get("usage.cache_read_input_tokens").Int() != 1024 {
		t.Errorf("message_delta %s", delta.Raw)
	}
}

// kaPings returns the indexes of the ping events, each checked to be
// {"type":"ping"}.
func kaPings(t *testing.T, evs []kaEvent) []int {
	t.Helper()
	var at []int
	for i, e := range evs {
		if e.name == "ping" {
			if e.data.Raw != `{"type":"ping"}` {
				t.Errorf("ping %d: %s", i, e.data.Raw)
			}
			at = append(at, i)
		}
	}
	return at
}

// kaTrace is the stream's events, one a line, for failures.
func kaTrace(evs []kaEvent) string {
	var b strings.Builder
	for i, e := range evs {
		d := e.data.Get("delta").Raw
		if d == "" {
			d = e.data.Get("content_block").Raw
		}
		b.WriteString(strings.Join([]string{"", e.at.Round(time.Millisecond).String(), e.name, d}, "\t"))
		if i < len(evs)-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// TestMessagesKeepAlive runs both silences through the gateway: after the
// first reasoning chunk (pings between the first thinking delta and the
// next), and before the upstream's first chunk (message_start first, then
// pings). Each stream must hold the whole answer, pings only during the
// silence and none after message_stop, the pings must reach the client
// while the upstream is still silent, and the SDK must read the stream
// into the JSON answer to the same request.
func TestMessagesKeepAlive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pauseAt int
	}{
		{"mid_reasoning", 2},
		{"before_first_chunk", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := fmt.Sprintf("%d-%s", time.Now().UnixNano(), tc.name)
			up := &kaUpstream{pauseAt: tc.pauseAt, run: run}
			startGateway(t, "\t\trule messages_to_chat {\n\t\t\tprofile deepseek\n\t\t\tping_interval "+kaInterval+"\n\t\t}", serveUpstream(t, up))

			raw, evs := kaStream(t, run)
			trace := kaTrace(evs)
			kaCheckMessage(t, evs)
			pings := kaPings(t, evs)
			if len(pings) < kaMinPings {
				t.Errorf("%d pings during a %v silence at ping_interval %s, want at least %d\n%s", len(pings), kaPause, kaInterval, kaMinPings, trace)
			}
			// Where the pings are: all in one run, right after the event
			// the silence follows, and before what the upstream sent next.
			// firstAfter is the first event the upstream's resumption
			// brought.
			var before, firstAfter int
			switch tc.pauseAt {
			case 0:
				// Nothing but message_start before the silence: the first
				// tick brings it, then the pings.
				before, firstAfter = 0, 1+len(pings)
			default:
				// The first thinking delta (after message_start and the
				// thinking block's start), then the pings.
				before = -1
				for i, e := range evs {
					if e.name == "content_block_delta" && e.data.Get("delta.type").String() == "thinking_delta" {
						before = i
						break
					}
				}
				firstAfter = before + 1 + len(pings)
				if before < 0 || evs[before].data.Get("delta.thinking").String() != kaReasoning[0] {
					t.Fatalf("no first thinking delta %q before the silence\n%s", kaReasoning[0], trace)
				}
			}
			for k, i := range pings {
				if i != before+1+k {
					t.Fatalf("ping at event %d, want the pings in one run right after event %d (%s)\n%s", i, before, evs[before].name, trace)
				}
			}
			if firstAfter >= len(evs) || evs[firstAfter].name == "message_stop" {
				t.Fatalf("nothing after the pings\n%s", trace)
			}
			if tc.pauseAt == 0 && evs[firstAfter].name != "content_block_start" {
				t.Errorf("after the pings came %s, want the thinking block's start\n%s", evs[firstAfter].name, trace)
			}
			if tc.pauseAt != 0 && (evs[firstAfter].name != "content_block_delta" || evs[firstAfter].data.Get("delta.thinking").String() != kaReasoning[1]) {
				t.Errorf("after the pings came %s %s, want the second thinking delta\n%s", evs[firstAfter].name, evs[firstAfter].data.Raw, trace)
			}
			// The pings came while the upstream was silent, not held back
			// until it spoke again: the first ping (message_start when
			// there was nothing before) reached the client well before the
			// events the silence held up (a third of the pause, for a
			// busy host).
			lead := evs[firstAfter].at - evs[pings[0]].at
			if tc.pauseAt == 0 {
				lead = evs[firstAfter].at - evs[0].at
			}
			if lead < kaPause/3 {
				t.Errorf("the pings came %v before the upstream's next events, want them during the %v silence\n%s", lead, kaPause, trace)
			}

			// The same request without stream: the JSON answer the SDK's
			// accumulators must make of the stream.
			resp := kaPost(t, run, false)
			whole, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("JSON: %s %s (%v)\n%s", resp.Status, resp.Header.Get("Content-Type"), err, whole)
			}
			var types []string
			for _, b := range gjson.GetBytes(whole, "content.#.type").Array() {
				types = append(types, b.String())
			}
			if strings.Join(types, " ") != "thinking text tool_use" || gjson.GetBytes(whole, "stop_reason").String() != "tool_use" {
				t.Fatalf("JSON answer %s", whole)
			}
			up.mu.Lock()
			seen, foreign := append([]string(nil), up.seen...), up.foreign
			up.mu.Unlock()
			if foreign > 0 {
				t.Logf("the upstream also got %d requests not of this run (a concurrent run of the package sharing the gateway's ports)", foreign)
			}
			if want := []string{"/v1/chat/completions stream=true", "/v1/chat/completions stream=false"}; strings.Join(seen, ",") != strings.Join(want, ",") {
				t.Errorf("the upstream got %q, want %q", seen, want)
			}
			anthropicSDKCheck(t, raw, whole, "id", "content.0.signature")

			// The SDK's decoder drops pings by design (core/streaming.js
			// skips `event: ping`): its stream events must be the
			// stream's others, in order, none lost around the pings.
			var others []string
			for _, e := range evs {
				if e.name != "ping" {
					others = append(others, e.name)
				}
			}
			for name, events := range anthropicSDKEvents(t, raw) {
				if strings.Join(events, " ") != strings.Join(others, " ") {
					t.Errorf("the SDK's %s emitted %v, want the stream's events less the pings %v", name, events, others)
				}
			}
		})
	}
}

// anthropicSDKEvents runs the SDK check's script on stream and returns the
// type of every stream event MessageStream and BetaMessageStream emitted,
// in order (the script's "events" and "beta_events").
func anthropicSDKEvents(t *testing.T, stream []byte) map[string][]string {
	t.Helper()
	node, dir := anthropicSDKNode(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, anthropicSDKScript)
	cmd.Env = append(os.Environ(), "ANTHROPIC_SDK_DIR="+dir)
	cmd.Stdin = bytes.NewReader(stream)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the Anthropic SDK refused the stream: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	var out struct {
		Events     []string `json:"events"`
		BetaEvents []string `json:"beta_events"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.Events) == 0 || len(out.BetaEvents) == 0 {
		t.Fatalf("script output (%v): %s\n%s", err, stdout.String(), stderr.String())
	}
	return map[string][]string{"MessageStream": out.Events, "BetaMessageStream": out.BetaEvents}
}
