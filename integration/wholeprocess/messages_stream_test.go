package wholeprocess

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// BenchmarkMessagesBridgeStream has a pair of processes of its own, in
// front of an upstream of its own: A a plain reverse_proxy sent a Chat
// request, B the same route behind `messages_to_chat { profile deepseek }`
// sent a Messages request on /v1/messages. Both get the stream table's
// DeepSeek-style Chat stream (chatChunks: 1,939 chunks of reasoning_content,
// text, two calls whose arguments arrive in 12-byte pieces, a usage chunk
// with prompt_cache_hit_tokens, [DONE]), written as X-Bench-Upstream says;
// A passes it through to its Chat client, B bridges it to a Messages
// stream. One row per layout and upstream (see streamtable_test.go):
//
//	go test -run '^$' -bench '^BenchmarkMessagesBridgeStream$' ./integration/wholeprocess/
var (
	msgsOnce    sync.Once
	msgsErr     error
	procMsgsA   *proc
	procMsgsB   *proc
	msgsUp      *httptest.Server
	msgsStreams = map[string]*tableStream{} // by layout; written before msgsUp starts
	msgsText    struct{ reasoning, content, patch, exec string }
	msgsN       struct{ reasoning, content, patch, exec int }
)

// The requests of BenchmarkMessagesBridgeStream: a Claude-Code-like
// Messages request to B, and to A a Chat request like the one the bridge
// makes of it.
var (
	msgsMessagesBody = []byte(`{"model":"deepseek-v4-pro","max_tokens":32768,"stream":true,"system":[{"type":"text","text":"You are a coding agent."}],"messages":[{"role":"user","content":[{"type":"text","text":"Edit the files"}]}],"tools":[{"name":"apply_patch","description":"Apply a patch","input_schema":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}},{"name":"exec_command","description":"Run a command","input_schema":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}}],"thinking":{"type":"enabled","budget_tokens":16000}}`)
	msgsChatBody     = []byte(`{"model":"deepseek-v4-pro","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"Edit the files"}],"tools":[{"type":"function","function":{"name":"apply_patch","description":"Apply a patch","parameters":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}}},{"type":"function","function":{"name":"exec_command","description":"Run a command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}}}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":32768,"thinking":{"type":"enabled"}}`)
)

const messagesPath = "/v1/messages"

// setupMessages renders the streams and starts the upstream and both
// processes once; TestMain's stopAll stops the processes.
func setupMessages(b *testing.B) {
	b.Helper()
	msgsOnce.Do(func() {
		for _, l := range tableLayouts {
			evs := chatChunks(300, 300, 92, l)
			msgsStreams[l] = &tableStream{evs: evs, body: bytes.Join(evs, nil)}
		}
		// chatChunks records the texts in bridgeText and bridgeN; the same
		// for every layout. Kept apart so nothing here races with them.
		msgsText = bridgeText
		msgsN = bridgeN
		msgsUp = httptest.NewServer(http.HandlerFunc(serveMessagesUpstream))
		procMsgsA, procMsgsB, msgsErr = startPair("msgsA", "msgsB", msgsUp, `		rule messages_to_chat {
			profile deepseek
		}
`)
	})
	if msgsErr != nil {
		b.Fatal(msgsErr)
	}
}

// serveMessagesUpstream answers with the Chat stream of the layout named by
// X-Bench-Case, written as X-Bench-Upstream says; with X-Bench-Check it
// also says whether it got a Chat request, and on which path.
func serveMessagesUpstream(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Bench-Check") != "" {
		body, _ := io.ReadAll(r.Body)
		req := gjson.ParseBytes(body)
		w.Header().Set("X-Saw-Chat", strconv.FormatBool(req.Get("messages").IsArray() && req.Get("stream").Bool() &&
			req.Get("tools.0.function.name").String() == "apply_patch" && !req.Get("system").Exists()))
		w.Header().Set("X-Saw-Path", r.URL.Path)
	} else {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	t := msgsStreams[r.Header.Get("X-Bench-Case")]
	if t == nil {
		http.Error(w, "no such case", http.StatusNotFound)
		return
	}
	writeTable(w, r, t)
}

// BenchmarkMessagesBridgeStream: CPU of a Messages client's stream bridged
// from a Chat upstream by messages_to_chat (B) over the CPU of the same
// Chat stream passed through untouched to a Chat client (A); one row per
// layout of the Chat chunks and upstream (see streamtable_test.go).
func BenchmarkMessagesBridgeStream(b *testing.B) {
	setupMessages(b)
	for _, layout := range tableLayouts {
		for _, mode := range tableUpstreams() {
			b.Run(layout+"/"+mode, func(b *testing.B) {
				t := msgsStreams[layout]
				// A forwards the upstream's bytes; B sends the upstream a
				// Chat request on the Chat path and answers with Messages
				// events, checked whole once per row; after that each
				// answer must have as many events and end with
				// message_stop.
				if out, err := get(procMsgsA, chatPath, layout, mode, msgsChatBody); err != nil || !bytes.Equal(out, t.body) {
					b.Fatalf("A: the Chat stream did not pass through untouched (%d bytes, want %d): %v", len(out), len(t.body), err)
				}
				req, err := http.NewRequest(http.MethodPost, procMsgsB.url+messagesPath, bytes.NewReader(msgsMessagesBody))
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer test")
				req.Header.Set("anthropic-version", "2023-06-01")
				req.Header.Set("X-Bench-Case", layout)
				req.Header.Set("X-Bench-Upstream", mode)
				req.Header.Set("X-Bench-Check", "1")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				out, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("B: %s: %v: %.500s", resp.Status, err, out)
				}
				if resp.Header.Get("X-Saw-Chat") != "true" || resp.Header.Get("X-Saw-Path") != chatPath || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
					b.Fatalf("B: the upstream got a Chat request: %s, on %s; content type %q", resp.Header.Get("X-Saw-Chat"), resp.Header.Get("X-Saw-Path"), resp.Header.Get("Content-Type"))
				}
				events := checkMessagesBridged(b, out)
				stop := []byte("\n\nevent: message_stop\ndata: ")
				row := tableRow{name: "messages/" + layout + "/" + mode, pa: procMsgsA, pb: procMsgsB, events: len(t.evs), unit: "chunk",
					stream: func(p *proc, m string) error {
						if p == procMsgsA {
							out, err := get(p, chatPath, layout, m, msgsChatBody)
							if err == nil && !bytes.Equal(out, t.body) {
								err = fmt.Errorf("A: %d bytes, want the upstream's %d", len(out), len(t.body))
							}
							return err
						}
						out, err := get(p, messagesPath, layout, m, msgsMessagesBody)
						if err != nil {
							return err
						}
						end := bytes.LastIndex(out, stop)
						if n := bytes.Count(out, []byte("\n\n")); n != events || end < 0 || bytes.IndexByte(out[end+len(stop):], '\n') != len(out)-end-len(stop)-2 {
							return errors.New("B: the bridged stream is not the one checked: " + strconv.Itoa(n) + " events")
						}
						return nil
					}}
				row.run(b, mode)
				b.ReportMetric(float64(events), "events_out")
			})
		}
	}
}

// checkMessagesBridged checks that B's answer is the Messages stream the
// benchmark assumes and returns its number of events: every event named
// after its type; message_start first and message_stop, once, last; a
// thinking block holding the reasoning with a signature, a text block
// holding the text, two tool_use blocks whose input_json_delta pieces add
// up to each call's arguments, with the upstream's call ids, blocks opened
// and closed in order at indexes 0–3; one message_delta with stop_reason
// tool_use and the usage (cache_read_input_tokens from
// prompt_cache_hit_tokens); no ping, no error.
func checkMessagesBridged(b *testing.B, out []byte) int {
	b.Helper()
	if len(out) == 0 {
		b.Fatal("B: empty answer")
	}
	evs := strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n")
	count := map[string]int{}
	var thinking, text, sig strings.Builder
	inputs := map[int64]*strings.Builder{}
	var blocks []gjson.Result // content_block_start's blocks by index
	open := int64(-1)
	var delta gjson.Result
	for i, e := range evs {
		name, data, ok := strings.Cut(e, "\ndata: ")
		ev := gjson.Parse(data)
		typ := ev.Get("type").String()
		if !ok || name != "event: "+typ || !gjson.Valid(data) {
			b.Fatalf("B: event %d is not a named Messages event: %.200q", i, e)
		}
		count[typ]++
		switch {
		case i == 0 && typ != "message_start", i == len(evs)-1 && typ != "message_stop":
			b.Fatalf("B: event %d of %d is %s", i, len(evs), typ)
		}
		switch typ {
		case "message_start":
			if m := ev.Get("message"); m.Get("role").String() != "assistant" || !strings.HasPrefix(m.Get("id").String(), "msg_") || m.Get("content.#").Int() != 0 {
				b.Fatalf("B: message_start %.300s", data)
			}
		case "content_block_start":
			idx := ev.Get("index").Int()
			if open != -1 || idx != int64(len(blocks)) {
				b.Fatalf("B: block %d starts with block %d open, after %d blocks", idx, open, len(blocks))
			}
			open = idx
			blocks = append(blocks, ev.Get("content_block"))
		case "content_block_delta":
			if ev.Get("index").Int() != open {
				b.Fatalf("B: a delta for block %d with block %d open", ev.Get("index").Int(), open)
			}
			d := ev.Get("delta")
			switch d.Get("type").String() {
			case "thinking_delta":
				thinking.WriteString(d.Get("thinking").String())
			case "signature_delta":
				sig.WriteString(d.Get("signature").String())
			case "text_delta":
				text.WriteString(d.Get("text").String())
			case "input_json_delta":
				if inputs[open] == nil {
					inputs[open] = &strings.Builder{}
				}
				inputs[open].WriteString(d.Get("partial_json").String())
			default:
				b.Fatalf("B: delta %.200s", data)
			}
			count[d.Get("type").String()]++
		case "content_block_stop":
			if ev.Get("index").Int() != open {
				b.Fatalf("B: block %d stops with block %d open", ev.Get("index").Int(), open)
			}
			open = -1
		case "message_delta":
			delta = ev
		case "message_stop":
		default:
			b.Fatalf("B: event %d: %.300s", i, data)
		}
	}
	if count["message_start"] != 1 || count["message_stop"] != 1 || count["message_delta"] != 1 || open != -1 {
		b.Fatalf("B: counts %v, block %d left open", count, open)
	}
	types := make([]string, len(blocks))
	for i, bl := range blocks {
		types[i] = bl.Get("type").String()
	}
	if got := strings.Join(types, " "); got != "thinking text tool_use tool_use" {
		b.Fatalf("B: blocks %s", got)
	}
	if thinking.String() != msgsText.reasoning || sig.Len() == 0 || text.String() != msgsText.content {
		b.Fatalf("B: thinking %d bytes (want %d), signature %d bytes, text %d bytes (want %d)", thinking.Len(), len(msgsText.reasoning), sig.Len(), text.Len(), len(msgsText.content))
	}
	for i, want := range []struct{ id, name, args string }{
		{"call_00_kw66qXbR4jVn1m8s", "apply_patch", msgsText.patch},
		{"call_01_Zp3tLq9wE2aYc7Hd", "exec_command", msgsText.exec},
	} {
		bl, in := blocks[2+i], inputs[int64(2+i)]
		if bl.Get("id").String() != want.id || bl.Get("name").String() != want.name || in == nil || in.String() != want.args {
			b.Fatalf("B: tool_use block %d: %s; input %d bytes, want %d", 2+i, bl.Raw, func() int {
				if in == nil {
					return -1
				}
				return in.Len()
			}(), len(want.args))
		}
	}
	u := delta.Get("usage")
	if delta.Get("delta.stop_reason").String() != "tool_use" || u.Get("cache_read_input_tokens").Int() != 40960 || u.Get("output_tokens").Int() != 5120 {
		b.Fatalf("B: message_delta %s", delta.Raw)
	}
	b.Logf("B: %d events: %v", len(evs), count)
	return len(evs)
}
