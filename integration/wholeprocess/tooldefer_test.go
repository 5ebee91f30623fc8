package wholeprocess

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"
)

// BenchmarkDeferRequest: the whole-process cost of a request over the
// provider's tool cap whose tool search takes one hidden round, against
// the same request to a provider that takes all its tools.
//
// Both processes are sent the same client request: schemaToolsBody's 300
// MCP-style function tools (650 kB; Responses, or the same tools and task
// as Chat Completions), JSON or streamed. The scripted upstream is the
// same model in both cases, ending with the same call of
// github__update_issue:
//
//   - A, the baseline, is a plain reverse_proxy to an upstream that accepts
//     all 300 tools: one upstream request, answered with the call directly.
//   - B is `llm_transform { rule tools_defer; rule tools_plan { profile
//     openai_chat } }` in front of the same upstream: it sends the
//     upstream the search tool alone, the upstream answers with a
//     tool_search call, B answers the search itself (BM25 over the 299
//     deferred tools) and asks again in a hidden round with the tools
//     found, and the upstream answers that with the call. Two upstream
//     requests, one client answer.
//
// The rows <protocol>/<json|sse> are that first turn. The rows
// <protocol>/json/next are the next turn, its history holding the call and
// the tool's output, answered with text: B sends the upstream the tool the
// history calls and the search tool, with no search and no round; A the
// 300 tools. They give what tools_defer costs on a turn that does not
// search.
//
// The answers are OpenAI's shapes: a Responses response object echoes the
// request's tools (so A's client gets the 300 tools back from the
// upstream, B's from the gateway, which gives the client its own tools
// back), Chat answers do not. Before measuring, each process's answer is
// checked whole (A's is the upstream's bytes, B's holds the call under its
// name and nothing of the search, and B's upstream got the search tool
// alone and then the round with the tool found); every later answer must
// be the checked one byte for byte, and each B request must have made
// exactly two upstream requests. Requests alternate A and B, one at a time,
// in LLMT_WP_ROUNDS rounds (at least and by default 5): x_median, x_min
// and x_max are the rounds' ratios of B's CPU to A's, added_us/request B's
// CPU beyond A's, valid_passes_added that in gjson.ValidBytes passes over
// the client's body.
//
//	go test -run '^$' -bench '^BenchmarkDeferRequest$' -benchtime=200x ./integration/wholeprocess/
var (
	deferOnce     sync.Once
	deferErr      error
	procDeferA    *proc
	procDeferB    *proc
	deferUp       *httptest.Server
	deferBodies   = map[string][]byte{} // "<protocol>/<json|sse>" → the client's request
	deferSearches atomic.Int64          // search answers the upstream gave
	deferRounds   atomic.Int64          // answers to a request carrying the search's output
	deferDirect   atomic.Int64          // answers to a request declaring every tool
	deferTexts    atomic.Int64          // answers to a next turn
	deferGotMu    sync.Mutex
	deferGot      [][]byte // bodies of requests marked X-Bench-Check
)

const (
	deferTarget     = "github__update_issue"
	deferTargetArgs = `{"owner":"acme","repo":"web","issue_number":4217,"labels":["bug","needs-triage"],"title":"Checkout crashes when the cart is empty","state":"open"}`
	deferQuery      = "update github issue labels"
	deferSearchID   = "call_wp_search_01"
	deferCallID     = "call_wp_update_02"
)

// setupDefer builds the requests and starts the upstream and both
// processes once; TestMain's stopAll stops the processes.
func setupDefer(b *testing.B) {
	b.Helper()
	deferOnce.Do(func() {
		doc, n := schemaToolsBody()
		if n != 300 || !gjson.ValidBytes(doc) {
			deferErr = fmt.Errorf("the 300-tool request is not JSON or has %d tools", n)
			return
		}
		deferBodies["responses/json"] = doc
		deferBodies["responses/sse"] = bytes.Replace(doc, []byte(`"stream":false`), []byte(`"stream":true`), 1)
		deferBodies["chat/json"] = deferChatBody(doc, false)
		deferBodies["chat/sse"] = deferChatBody(doc, true)
		deferBodies["responses/json/next"] = deferNextTurn(deferBodies["responses/json"], false)
		deferBodies["chat/json/next"] = deferNextTurn(deferBodies["chat/json"], true)
		for k, body := range deferBodies {
			if !gjson.ValidBytes(body) || len(gjson.GetBytes(body, "tools").Array()) != 300 {
				deferErr = fmt.Errorf("the %s request is not JSON with 300 tools", k)
				return
			}
		}
		deferUp = httptest.NewServer(http.HandlerFunc(serveDeferUpstream))
		procDeferA, procDeferB, deferErr = startPair("deferA", "deferB", deferUp, `		rule tools_defer
		rule tools_plan {
			profile openai_chat
		}
`)
	})
	if deferErr != nil {
		b.Fatal(deferErr)
	}
}

// deferChatBody is the Responses request's task and tools as a Chat
// request.
func deferChatBody(doc []byte, stream bool) []byte {
	var tools []string
	gjson.GetBytes(doc, "tools").ForEach(func(_, t gjson.Result) bool {
		tools = append(tools, `{"type":"function","function":{"name":`+t.Get("name").Raw+`,"description":`+t.Get("description").Raw+`,"parameters":`+t.Get("parameters").Raw+`}}`)
		return true
	})
	s := `{"model":"gpt-4.1","messages":[{"role":"system","content":` + gjson.GetBytes(doc, "instructions").Raw + `},{"role":"user","content":` + gjson.GetBytes(doc, "input.0.content.0.text").Raw +
		`}],"tools":[` + strings.Join(tools, ",") + `],"tool_choice":"auto","parallel_tool_calls":true,"max_tokens":4096`
	if stream {
		s += `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return []byte(s + "}")
}

// deferNextTurn is the request's next turn: its history holds the call
// and the tool's output.
func deferNextTurn(body []byte, chat bool) []byte {
	hist := `,{"type":"function_call","id":"fc_wp_1","call_id":"` + deferCallID + `","name":"` + deferTarget + `","arguments":` + jsonString(deferTargetArgs) + `,"status":"completed"}` +
		`,{"type":"function_call_output","call_id":"` + deferCallID + `","output":"Updated issue #4217: labels bug, needs-triage."}`
	if chat {
		hist = `,{"role":"assistant","content":null,"tool_calls":[{"id":"` + deferCallID + `","type":"function","function":{"name":"` + deferTarget + `","arguments":` + jsonString(deferTargetArgs) + `}}]}` +
			`,{"role":"tool","tool_call_id":"` + deferCallID + `","content":"Updated issue #4217: labels bug, needs-triage."}`
	}
	i := bytes.Index(body, []byte(`],"tools":`))
	return slices.Concat(body[:i], []byte(hist), body[i:])
}

// serveDeferUpstream is the model: a request carrying the search's output
// gets the call of the target (the round), a request declaring the search
// tool gets a search, any other (all 300 tools) the call directly. It
// answers in the request's protocol, JSON or streamed, echoing a
// Responses request's tools as OpenAI does.
func serveDeferUpstream(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get("X-Bench-Check") != "" {
		deferGotMu.Lock()
		deferGot = append(deferGot, body)
		deferGotMu.Unlock()
	}
	chat := strings.HasSuffix(r.URL.Path, "/chat/completions")
	stream := gjson.GetBytes(body, "stream").Bool()
	switch {
	case bytes.Contains(body, []byte(`"`+deferCallID+`"`)) && !bytes.Contains(body, []byte(`"`+deferSearchID+`"`)):
		deferTexts.Add(1)
		deferText(w, body, chat)
	case bytes.Contains(body, []byte(`"`+deferSearchID+`"`)):
		deferRounds.Add(1)
		deferAnswer(w, body, chat, stream, "2", deferCallID, deferTarget, deferTargetArgs, [3]int{41500, 61, 41561})
	case bytes.Contains(body, []byte(`"name":"tool_search"`)):
		deferSearches.Add(1)
		deferAnswer(w, body, chat, stream, "1", deferSearchID, "tool_search", `{"query":"`+deferQuery+`"}`, [3]int{1320, 18, 1338})
	default:
		deferDirect.Add(1)
		deferAnswer(w, body, chat, stream, "1", deferCallID, deferTarget, deferTargetArgs, [3]int{81200, 61, 81261})
	}
}

// deferAnswer writes one call as OpenAI answers it.
func deferAnswer(w http.ResponseWriter, body []byte, chat, stream bool, id, callID, name, args string, u [3]int) {
	rc := http.NewResponseController(w)
	if chat {
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0}}`, u[0], u[1], u[2])
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"chatcmpl-wp-`+id+`","object":"chat.completion","created":1764400000,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"`+callID+`","type":"function","function":{"name":"`+name+`","arguments":`+jsonString(args)+`}}],"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":`+usage+`,"service_tier":"default","system_fingerprint":"fp_wp"}`)
			return
		}
		head := `data: {"id":"chatcmpl-wp-` + id + `","object":"chat.completion.chunk","created":1764400000,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_wp","choices":`
		var s strings.Builder
		s.WriteString(head + `[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"` + callID + `","type":"function","function":{"name":"` + name + `","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
		for _, p := range pieces(args, 8) {
			s.WriteString(head + `[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":` + jsonString(p) + `}}]},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
		}
		s.WriteString(head + `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}` + "\n\n")
		s.WriteString(head + `[],"usage":` + usage + "}\n\n")
		s.WriteString("data: [DONE]\n\n")
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, s.String())
		_ = rc.Flush()
		return
	}
	tools := gjson.GetBytes(body, "tools").Raw
	usage := fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}`, u[0], u[1], u[2])
	response := func(status, output, usage string) string {
		return `{"id":"resp_wp_` + id + `","object":"response","created_at":1764400000,"status":"` + status + `","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":4096,"model":"gpt-4.1-2025-04-14","output":` + output +
			`,"parallel_tool_calls":true,"previous_response_id":null,"store":false,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":` + tools + `,"top_p":1.0,"truncation":"disabled","usage":` + usage + `,"metadata":{}}`
	}
	fcID := "fc_wp_" + id
	item := func(status, a string) string {
		return `{"id":"` + fcID + `","type":"function_call","status":"` + status + `","arguments":` + jsonString(a) + `,"call_id":"` + callID + `","name":"` + name + `"}`
	}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, response("completed", "["+item("completed", args)+"]", usage))
		return
	}
	var s strings.Builder
	seq := 0
	ev := func(typ, rest string) {
		fmt.Fprintf(&s, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, rest)
		seq++
	}
	ev("response.created", `"response":`+response("in_progress", "[]", "null"))
	ev("response.in_progress", `"response":`+response("in_progress", "[]", "null"))
	ev("response.output_item.added", `"output_index":0,"item":`+item("in_progress", ""))
	for k, p := range pieces(args, 8) {
		ev("response.function_call_arguments.delta", `"item_id":"`+fcID+`","output_index":0,"delta":`+jsonString(p)+`,"obfuscation":"`+"abcdefghijklmnop"[:2+k%14]+`"`)
	}
	ev("response.function_call_arguments.done", `"item_id":"`+fcID+`","output_index":0,"arguments":`+jsonString(args))
	ev("response.output_item.done", `"output_index":0,"item":`+item("completed", args))
	ev("response.completed", `"response":`+response("completed", "["+item("completed", args)+"]", usage))
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, s.String())
	_ = rc.Flush()
}

// deferText answers a next turn with text.
func deferText(w http.ResponseWriter, body []byte, chat bool) {
	const text = "I labelled issue #4217 as a bug and asked for triage."
	w.Header().Set("Content-Type", "application/json")
	if chat {
		_, _ = io.WriteString(w, `{"id":"chatcmpl-wp-3","object":"chat.completion","created":1764400000,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":`+jsonString(text)+`,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":81300,"completion_tokens":14,"total_tokens":81314},"service_tier":"default","system_fingerprint":"fp_wp"}`)
		return
	}
	_, _ = io.WriteString(w, `{"id":"resp_wp_3","object":"response","created_at":1764400000,"status":"completed","error":null,"incomplete_details":null,"model":"gpt-4.1-2025-04-14","output":[{"id":"msg_wp_3","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":`+jsonString(text)+`}],"role":"assistant"}],"parallel_tool_calls":true,"store":false,"tool_choice":"auto","tools":`+gjson.GetBytes(body, "tools").Raw+`,"usage":{"input_tokens":81300,"output_tokens":14,"total_tokens":81314},"metadata":{}}`)
}

// deferChecked sends body to p marked X-Bench-Check and returns the
// client's answer and the bodies the upstream got for it.
func deferChecked(b *testing.B, p *proc, path string, body []byte) ([]byte, [][]byte) {
	b.Helper()
	deferGotMu.Lock()
	deferGot = nil
	deferGotMu.Unlock()
	req, _ := http.NewRequest(http.MethodPost, p.url+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Bench-Check", "1")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: %d %v: %.500s", p.name, resp.StatusCode, err, out)
	}
	deferGotMu.Lock()
	defer deferGotMu.Unlock()
	return out, slices.Clone(deferGot)
}

// deferCheckB checks B's upstream requests: the search tool alone, then
// the round declaring the target and carrying the search and its answer.
func deferCheckB(b *testing.B, got [][]byte, chat bool) {
	b.Helper()
	if len(got) != 2 {
		b.Fatalf("B: the upstream got %d requests, want 2", len(got))
	}
	names := func(body []byte) string {
		if chat {
			return gjson.GetBytes(body, "tools.#.function.name").Raw
		}
		return gjson.GetBytes(body, "tools.#.name").Raw
	}
	if n := names(got[0]); n != `["tool_search"]` {
		b.Fatalf("B: the first request declared %s", n)
	}
	n := names(got[1])
	if !strings.Contains(n, `"`+deferTarget+`"`) || !strings.Contains(n, `"tool_search"`) || len(gjson.Parse(n).Array()) > 6 {
		b.Fatalf("B: the round declared %s", n)
	}
	hist := gjson.GetBytes(got[1], "input")
	if chat {
		hist = gjson.GetBytes(got[1], "messages")
	}
	if !strings.Contains(hist.Raw, deferSearchID) || !strings.Contains(hist.Raw, "- "+deferTarget+":") {
		b.Fatalf("B: the round's history has no search answer listing %s: %.1000s", deferTarget, hist.Raw)
	}
	b.Logf("B: the round declared %s", n)
}

// deferCheckAnswer checks a client's answer holds the call and nothing of
// the search.
func deferCheckAnswer(b *testing.B, who string, out []byte, chat, stream bool) {
	b.Helper()
	if bytes.Contains(out, []byte("tool_search")) || bytes.Contains(out, []byte(deferSearchID)) {
		b.Fatalf("%s: the client saw the search", who)
	}
	var name, args string
	switch {
	case chat && !stream:
		c := gjson.GetBytes(out, "choices.0.message.tool_calls.0")
		name, args = c.Get("function.name").String(), c.Get("function.arguments").String()
	case chat:
		var a strings.Builder
		for _, line := range strings.Split(string(out), "\n") {
			d, ok := strings.CutPrefix(line, "data: ")
			if !ok || d == "[DONE]" {
				continue
			}
			gjson.Get(d, "choices.0.delta.tool_calls").ForEach(func(_, tc gjson.Result) bool {
				if n := tc.Get("function.name").String(); n != "" {
					name = n
				}
				a.WriteString(tc.Get("function.arguments").String())
				return true
			})
		}
		args = a.String()
	case !stream:
		c := gjson.GetBytes(out, `output.#(type=="function_call")`)
		name, args = c.Get("name").String(), c.Get("arguments").String()
		if len(gjson.GetBytes(out, "tools").Array()) != 300 {
			b.Fatalf("%s: the answer echoes %d tools", who, len(gjson.GetBytes(out, "tools").Array()))
		}
	default:
		i := bytes.LastIndex(out, []byte("data: "))
		last := gjson.ParseBytes(out[i+6:])
		c := last.Get(`response.output.#(type=="function_call")`)
		name, args = c.Get("name").String(), c.Get("arguments").String()
		if last.Get("type").String() != "response.completed" || len(last.Get("response.tools").Array()) != 300 {
			b.Fatalf("%s: the stream does not end with response.completed echoing the 300 tools", who)
		}
	}
	if name != deferTarget || args != deferTargetArgs {
		b.Fatalf("%s: the call is %q %q: %.1000s", who, name, args, out)
	}
}

func BenchmarkDeferRequest(b *testing.B) {
	setupDefer(b)
	for _, kase := range []string{"responses/json", "responses/sse", "chat/json", "chat/sse", "responses/json/next", "chat/json/next"} {
		b.Run(kase, func(b *testing.B) {
			chat, stream, next := strings.HasPrefix(kase, "chat"), strings.HasSuffix(kase, "sse"), strings.HasSuffix(kase, "/next")
			path := responsesPath
			if chat {
				path = chatPath
			}
			doc := deferBodies[kase]
			pa, pb := procDeferA, procDeferB

			// A: the client's body goes up as it is, the upstream's answer
			// comes back as it is.
			wantA, got := deferChecked(b, pa, path, doc)
			if len(got) != 1 || !bytes.Equal(got[0], doc) {
				b.Fatalf("A: the upstream got %d requests, not the client's body", len(got))
			}
			wantB, gotB := deferChecked(b, pb, path, doc)
			if next {
				// The next turn: B declares the tool the history calls and
				// the search tool, and the answer is the upstream's.
				names := gjson.GetBytes(gotB[0], "tools.#.name").Raw
				if chat {
					names = gjson.GetBytes(gotB[0], "tools.#.function.name").Raw
				}
				if len(gotB) != 1 || names != `["`+deferTarget+`","tool_search"]` {
					b.Fatalf("B: the upstream got %d requests, the first declaring %s", len(gotB), names)
				}
				if !bytes.Equal(wantA, wantB) || !bytes.Contains(wantA, []byte("labelled issue #4217")) {
					b.Fatalf("the answers differ or hold no text:\nA %.300s\nB %.300s", wantA, wantB)
				}
			} else {
				deferCheckAnswer(b, "A", wantA, chat, stream)
				deferCheckB(b, gotB, chat)
				deferCheckAnswer(b, "B", wantB, chat, stream)
			}

			one := func(p *proc) {
				out, err := get(p, path, "defer", "", doc)
				if err != nil {
					b.Fatal(err)
				}
				want := wantA
				if p == pb {
					want = wantB
				}
				if !bytes.Equal(out, want) {
					b.Fatalf("%s: %d bytes differ from the checked answer's %d", p.name, len(out), len(want))
				}
			}
			b.StopTimer()
			for i := 0; i < warmRounds; i++ {
				one(pa)
				one(pb)
			}
			profile(b, "defer-"+strings.ReplaceAll(kase, "/", "-"), pa, pb, one)

			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			n := tableRounds()
			per := max(1, (b.N+n-1)/n)
			s0, r0, d0, t0 := deferSearches.Load(), deferRounds.Load(), deferDirect.Load(), deferTexts.Load()
			ratios, cpuA, cpuB, valid := alternateRequests(b, pa, pb, one, doc, n, per)
			reqs := int64(n * per)
			want := [4]int64{reqs, reqs, reqs, 0} // B's search and round, A's direct call
			if next {
				want = [4]int64{0, 0, 0, 2 * reqs}
			}
			if got := [4]int64{deferSearches.Load() - s0, deferRounds.Load() - r0, deferDirect.Load() - d0, deferTexts.Load() - t0}; got != want {
				b.Fatalf("for %d requests each the upstream answered [searches rounds direct texts] %v, want %v", reqs, got, want)
			}
			slices.Sort(ratios)
			perValid := float64(valid) / float64(reqs)
			b.ReportMetric(ratios[len(ratios)/2], "x_median")
			b.ReportMetric(ratios[0], "x_min")
			b.ReportMetric(ratios[len(ratios)-1], "x_max")
			b.ReportMetric(float64(cpuB)/float64(cpuA), "x_passthrough_cpu")
			b.ReportMetric(float64(cpuA)/1e3/float64(reqs), "A_cpu_us/request")
			b.ReportMetric(float64(cpuB)/1e3/float64(reqs), "B_cpu_us/request")
			b.ReportMetric(float64(cpuB-cpuA)/1e3/float64(reqs), "added_us/request")
			b.ReportMetric(float64(cpuB-cpuA)/float64(reqs)/perValid, "valid_passes_added")
			b.ReportMetric(float64(len(doc))/1e3, "body_kB")
			b.ReportMetric(float64(len(wantA))/1e3, "answer_kB")
			b.ReportMetric(float64(n), "rounds")
		})
	}
}
