package messagesbridge

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmtransform/caddy-llm-transform/internal/reasonenv"
	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// The response side's tests set the request's record up through
// rsHarness, a rule that is messages_to_chat with a request phase that
// only fills the record from its config: the response side is tested on
// its own, whatever the request side does.

func init() { caddy.RegisterModule(rsHarness{}) }

type rsHarness struct {
	MessagesToChat
	Rec struct {
		Model         string   `json:"model"`
		MaxTokens     int      `json:"max_tokens"`
		StopSequences []string `json:"stop_sequences"`
		Tools         []string `json:"tools"`
	} `json:"record"`
}

func (rsHarness) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  transforms.ModuleID("messages_to_chat_response_harness"),
		New: func() caddy.Module { return new(rsHarness) },
	}
}

func (h *rsHarness) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	rec := h.record(x)
	rec.bridged = true
	rec.model = h.Rec.Model
	rec.maxTokens = h.Rec.MaxTokens
	rec.stopSequences = h.Rec.StopSequences
	if h.Rec.Tools != nil {
		rec.tools = map[string]bool{}
		for _, n := range h.Rec.Tools {
			rec.tools[n] = true
		}
	}
	return body, nil
}

// rsRules is the harness rule with profile and the record's members.
func rsRules(profile, record string) string {
	if record == "" {
		record = `{"model":"claude-opus-5-5","max_tokens":32000}`
	}
	return `[{"transform":"messages_to_chat_response_harness","config":{"profile":"` + profile + `","record":` + record + `}}]`
}

// rsExchange is an exchange after the harness's request phase.
func rsExchange(t testing.TB, rules string) *transforms.Exchange {
	t.Helper()
	const body = `{"model":"claude-opus-5-5","max_tokens":32000,"messages":[{"role":"user","content":"hi"}],"stream":true}`
	x := transformtest.Begin(t, transformtest.Chain(t, rules), transforms.ProtocolMessages, []byte(body))
	x.Explain = true
	if _, err := x.RewriteRequest([]byte(body)); err != nil {
		t.Fatal(err)
	}
	return x
}

var (
	rsMsgIDs    = regexp.MustCompile(`msg_[0-9a-f]{24}`)
	rsEnvelopes = regexp.MustCompile(`llmt2\.[A-Za-z0-9_-]+`)
)

// rsNorm names every message id msg_ID and re-seals every envelope from
// its text: an envelope seals the text as the upstream escaped it, and the
// tests write the text.
func rsNorm(s string) string {
	s = rsMsgIDs.ReplaceAllString(s, "msg_ID")
	return rsEnvelopes.ReplaceAllStringFunc(s, func(env string) string {
		p, text, ok := reasonenv.Open(env, 1<<30)
		if !ok {
			return env
		}
		return reasonenv.SealText(p, []byte(text))
	})
}

// rsStream replays upstream through fresh exchanges at chunk sizes 1, 7
// and 4096, with the engine's claims on and off, requires one output
// (ids aside) that keeps the Messages grammar, and returns it normalised.
func rsStream(t testing.TB, rules, upstream string) string {
	t.Helper()
	var first string
	for i, n := range transformtest.ChunkSizes {
		for _, claims := range []bool{true, false} {
			got := rsNorm(transformtest.ReplayClaims(t, rsExchange(t, rules), upstream, n, claims))
			if i == 0 && claims {
				first = got
				if err := checkGrammar(got); err != nil {
					t.Fatalf("%v\n%s", err, got)
				}
			} else if got != first {
				t.Fatalf("chunk size %d (claims %v) changed the output:\n%s\n--- vs size 1:\n%s", n, claims, got, first)
			}
		}
	}
	return first
}

// rsEqual compares a stream with the expected one, event by event.
func rsEqual(t testing.TB, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n\n"), strings.Split(want, "\n\n")
	for i := 0; i < len(g) && i < len(w); i++ {
		if g[i] != w[i] {
			t.Fatalf("event %d differs:\n got: %s\nwant: %s\n--- whole stream:\n%s", i, g[i], w[i], got)
		}
	}
	t.Fatalf("%d events, want %d:\n%s\n--- want:\n%s", len(g), len(w), got, want)
}

// --- upstream chunks -----------------------------------------------------------

// rsChunk is a Chat chunk with delta and finish_reason (a JSON value).
func rsChunk(delta, finish string) string {
	return `data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1764400000,"model":"deepseek-v4-pro","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}` + "\n\n"
}

// rsUsageChunk is the choice-less chunk that carries usage.
func rsUsageChunk(usage string) string {
	return `data: {"id":"chatcmpl-7","object":"chat.completion.chunk","created":1764400000,"model":"deepseek-v4-pro","choices":[],"usage":` + usage + `}` + "\n\n"
}

const rsDone = "data: [DONE]\n\n"

// --- expected events -------------------------------------------------------------

func rsEv(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

// rsStart is message_start for the model claude-opus-5-5.
var rsStart = rsEv("message_start", `{"type":"message_start","message":{"id":"msg_ID","type":"message","role":"assistant","model":"claude-opus-5-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}}`)

func rsBlockStart(i int, block string) string {
	return rsEv("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":%s}`, i, block))
}

func rsThinkingStart(i int) string {
	return rsBlockStart(i, `{"type":"thinking","thinking":"","signature":"llmt.pending"}`)
}

func rsTextStart(i int) string { return rsBlockStart(i, `{"type":"text","text":""}`) }

func rsToolStart(i int, id, name string) string {
	return rsBlockStart(i, `{"type":"tool_use","id":`+rsStr(id)+`,"name":`+rsStr(name)+`,"input":{}}`)
}

func rsDelta(i int, typ, field, value string) string {
	return rsEv("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"%s","%s":%s}}`, i, typ, field, rsStr(value)))
}

func rsThinking(i int, text string) string { return rsDelta(i, "thinking_delta", "thinking", text) }
func rsText(i int, text string) string     { return rsDelta(i, "text_delta", "text", text) }
func rsArgs(i int, json string) string     { return rsDelta(i, "input_json_delta", "partial_json", json) }

// rsSignature is the signature_delta sealing text for profile.
func rsSignature(i int, profile, text string) string {
	return rsDelta(i, "signature_delta", "signature", reasonenv.SealText(profile, []byte(text)))
}

func rsStop(i int) string {
	return rsEv("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
}

// rsEnd is message_delta with the delta's members and usage, then
// message_stop.
func rsEnd(delta, usage string) string {
	return rsEv("message_delta", `{"type":"message_delta","delta":`+delta+`,"usage":`+usage+`}`) +
		rsEv("message_stop", `{"type":"message_stop"}`)
}

func rsError(typ, msg string) string {
	return rsEv("error", `{"type":"error","error":{"type":"`+typ+`","message":`+rsStr(msg)+`}}`)
}

// rsUsage is Messages usage; thinking < 0 leaves output_tokens_details out.
func rsUsage(in, out, created, read, thinking int) string {
	u := fmt.Sprintf(`{"input_tokens":%d,"output_tokens":%d,"cache_creation_input_tokens":%d,"cache_read_input_tokens":%d`, in, out, created, read)
	if thinking >= 0 {
		u += fmt.Sprintf(`,"output_tokens_details":{"thinking_tokens":%d}`, thinking)
	}
	return u + "}"
}

const rsNoUsage = `{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}`

// rsStr is a JSON string literal as the bridge writes it (no HTML escapes).
func rsStr(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// --- what a client makes of a stream ---------------------------------------------

// rsEvents splits a Messages stream into its events' names and data.
func rsEvents(s string) (names []string, data []map[string]any, err error) {
	for _, block := range strings.Split(strings.TrimSuffix(s, "\n\n"), "\n\n") {
		if block == "" {
			continue
		}
		var name, d string
		var nameN, dataN int
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
				nameN++
			case strings.HasPrefix(line, "data: "):
				d = strings.TrimPrefix(line, "data: ")
				dataN++
			case strings.HasPrefix(line, "id:"), strings.HasPrefix(line, "retry:"):
			default:
				return nil, nil, fmt.Errorf("unexpected line %q", line)
			}
		}
		if nameN != 1 || dataN != 1 {
			return nil, nil, fmt.Errorf("a frame without exactly one event and one data line: %q", block)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			return nil, nil, fmt.Errorf("data is not a JSON object: %q", d)
		}
		names = append(names, name)
		data = append(data, m)
	}
	return names, data, nil
}

// checkGrammar checks a Messages stream against the grammar the SDKs and
// Claude Code enforce (§3): every frame named as its data's type;
// message_start first and once; content blocks indexed 0, 1, 2… and
// opened one at a time, each started empty; deltas of the open block's
// kind; one signature_delta in every thinking block, after its thinking
// and before its stop; then message_delta and message_stop, or an error
// event last, with no block open but a call whose input never completed.
func checkGrammar(s string) error {
	names, evs, err := rsEvents(s)
	if err != nil {
		return err
	}
	started, deltaSeen, ended := false, false, false
	open, next := -1, 0
	openType, signed := "", false
	for i, e := range evs {
		typ, _ := e["type"].(string)
		if names[i] != typ {
			return fmt.Errorf("event %d: name %q, type %q", i, names[i], typ)
		}
		if ended {
			return fmt.Errorf("event %d (%s) after the end", i, typ)
		}
		if typ != "message_start" && !started {
			return fmt.Errorf("event %d (%s) before message_start", i, typ)
		}
		index := -2
		if f, ok := e["index"].(float64); ok {
			index = int(f)
		}
		switch typ {
		case "message_start":
			if started {
				return fmt.Errorf("event %d: a second message_start", i)
			}
			started = true
			m, _ := e["message"].(map[string]any)
			if m["stop_reason"] != nil || m["type"] != "message" || m["role"] != "assistant" || !strings.HasPrefix(fmt.Sprint(m["id"]), "msg_") {
				return fmt.Errorf("event %d: message_start's message %v", i, m)
			}
			if err := checkUsage(m["usage"]); err != nil {
				return fmt.Errorf("event %d: %v", i, err)
			}
		case "ping":
		case "content_block_start":
			if deltaSeen || open >= 0 || index != next {
				return fmt.Errorf("event %d: block %d starts (open %d, next %d, message_delta seen %v)", i, index, open, next, deltaSeen)
			}
			b, _ := e["content_block"].(map[string]any)
			openType, signed = fmt.Sprint(b["type"]), false
			switch openType {
			case "thinking":
				if b["thinking"] != "" || b["signature"] == "" || b["signature"] == nil {
					return fmt.Errorf("event %d: thinking block starts as %v", i, b)
				}
			case "text":
				if b["text"] != "" {
					return fmt.Errorf("event %d: text block starts as %v", i, b)
				}
			case "tool_use":
				if in, ok := b["input"].(map[string]any); !ok || len(in) != 0 || b["id"] == "" || b["name"] == "" {
					return fmt.Errorf("event %d: tool_use block starts as %v", i, b)
				}
			default:
				return fmt.Errorf("event %d: block type %q", i, openType)
			}
			open, next = index, next+1
		case "content_block_delta":
			if open < 0 || index != open {
				return fmt.Errorf("event %d: delta for block %d, open %d", i, index, open)
			}
			d, _ := e["delta"].(map[string]any)
			want := map[string]string{"text_delta": "text", "thinking_delta": "thinking", "signature_delta": "thinking", "input_json_delta": "tool_use"}[fmt.Sprint(d["type"])]
			if want != openType {
				return fmt.Errorf("event %d: %v in a %s block", i, d["type"], openType)
			}
			if openType == "thinking" && signed {
				return fmt.Errorf("event %d: %v after the signature", i, d["type"])
			}
			if d["type"] == "signature_delta" {
				if sig, _ := d["signature"].(string); sig == "" {
					return fmt.Errorf("event %d: an empty signature", i)
				}
				signed = true
			}
		case "content_block_stop":
			if open < 0 || index != open {
				return fmt.Errorf("event %d: stop for block %d, open %d", i, index, open)
			}
			if openType == "thinking" && !signed {
				return fmt.Errorf("event %d: a thinking block stops without its signature", i)
			}
			open = -1
		case "message_delta":
			if deltaSeen || open >= 0 {
				return fmt.Errorf("event %d: message_delta (seen %v, open %d)", i, deltaSeen, open)
			}
			deltaSeen = true
			d, _ := e["delta"].(map[string]any)
			switch d["stop_reason"] {
			case "end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "model_context_window_exceeded":
			default:
				return fmt.Errorf("event %d: stop_reason %v", i, d["stop_reason"])
			}
			if err := checkUsage(e["usage"]); err != nil {
				return fmt.Errorf("event %d: %v", i, err)
			}
		case "message_stop":
			if !deltaSeen {
				return fmt.Errorf("event %d: message_stop without message_delta", i)
			}
			ended = true
		case "error":
			if open >= 0 && openType != "tool_use" {
				return fmt.Errorf("event %d: error with %s block %d open", i, openType, open)
			}
			er, _ := e["error"].(map[string]any)
			if t, _ := er["type"].(string); t == "" || er["message"] == nil {
				return fmt.Errorf("event %d: error %v", i, er)
			}
			ended = true
		default:
			return fmt.Errorf("event %d: unknown type %q", i, typ)
		}
	}
	if !ended {
		return fmt.Errorf("the stream ends without message_stop or error")
	}
	return nil
}

// checkUsage requires the four counters, whole and not negative.
func checkUsage(u any) error {
	m, ok := u.(map[string]any)
	if !ok {
		return fmt.Errorf("usage %v", u)
	}
	for _, k := range []string{"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"} {
		if n, ok := m[k].(float64); !ok || n < 0 || n != float64(int64(n)) {
			return fmt.Errorf("usage %s = %v", k, m[k])
		}
	}
	return nil
}

// rsAccumulate builds the message a stream gives, as the SDKs'
// accumulators do: blocks appended at their index, text and thinking
// concatenated, a tool's input parsed from its partial_json at the end, a
// signature replaced by its delta, message_delta's members overwriting.
func rsAccumulate(t testing.TB, s string) map[string]any {
	t.Helper()
	_, evs, err := rsEvents(s)
	if err != nil {
		t.Fatal(err)
	}
	var msg map[string]any
	var content []map[string]any
	var inputs []string
	for _, e := range evs {
		switch e["type"] {
		case "message_start":
			msg = e["message"].(map[string]any)
		case "content_block_start":
			content = append(content, e["content_block"].(map[string]any))
			inputs = append(inputs, "")
		case "content_block_delta":
			i := int(e["index"].(float64))
			d := e["delta"].(map[string]any)
			b := content[i]
			switch d["type"] {
			case "text_delta":
				b["text"] = b["text"].(string) + d["text"].(string)
			case "thinking_delta":
				b["thinking"] = b["thinking"].(string) + d["thinking"].(string)
			case "signature_delta":
				b["signature"] = d["signature"]
			case "input_json_delta":
				inputs[i] += d["partial_json"].(string)
			}
		case "message_delta":
			for k, v := range e["delta"].(map[string]any) {
				msg[k] = v
			}
			msg["usage"] = e["usage"]
		}
	}
	for i, b := range content {
		if b["type"] == "tool_use" && inputs[i] != "" {
			var in any
			if err := json.Unmarshal([]byte(inputs[i]), &in); err != nil {
				t.Fatalf("block %d: input %q: %v", i, inputs[i], err)
			}
			b["input"] = in
		}
	}
	list := make([]any, len(content))
	for i, b := range content {
		list[i] = b
	}
	msg["content"] = list
	return msg
}

// rsSameMessage requires the JSON answer to be the message the stream
// gives.
func rsSameMessage(t testing.TB, stream, jsonBody string) {
	t.Helper()
	got := rsAccumulate(t, stream)
	var want map[string]any
	if err := json.Unmarshal([]byte(jsonBody), &want); err != nil {
		t.Fatalf("%v: %s", err, jsonBody)
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("the stream's message differs from the JSON answer:\n--- stream\n%s\n--- JSON\n%s", g, w)
	}
}

// rsJSON turns a Chat completion into the client's body, normalised.
func rsJSON(t testing.TB, rules, upstream string) string {
	t.Helper()
	x := rsExchange(t, rules)
	out, err := x.RewriteResponse([]byte(upstream))
	if err != nil {
		t.Fatal(err)
	}
	return rsNorm(string(out))
}

// rsDecisions lists the exchange's decisions as "tool action".
func rsDecisions(x *transforms.Exchange) []string {
	var out []string
	for _, d := range x.Decisions() {
		out = append(out, d.Tool+" "+d.Action)
	}
	return out
}

// sealed is the envelope of text for profile.
func sealed(profile, text string) string { return reasonenv.SealText(profile, []byte(text)) }

// replay runs upstream through x's stream, for its decisions and errors.
func replay(t testing.TB, x *transforms.Exchange, upstream string) string {
	t.Helper()
	return transformtest.Replay(t, x, upstream, 4096)
}
