package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
)

// benchEvents renders about n SSE events: runs of text deltas with an
// apply_patch function call after each run, its arguments in small deltas.
func benchEvents(n int, chat bool) []string {
	args := `{"input":"*** Begin Patch\n*** Update File: src/app.py\n@@ def greet():\n-print(\"Hi\")\n+print(\"Hello, world!\")\n*** End Patch\n"}`
	var evs []string
	seq := 0
	ev := func(data string) {
		if chat {
			evs = append(evs, "data: "+data+"\n\n")
			return
		}
		typ := data[9 : strings.IndexByte(data[9:], '"')+9]
		evs = append(evs, "event: "+typ+"\ndata: "+data+"\n\n")
		seq++
	}
	q := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) }
	head := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[`
	for call := 0; len(evs) < n; call++ {
		for k := 0; k < 40; k++ {
			if chat {
				ev(head + `{"index":0,"delta":{"content":"some streamed words "},"finish_reason":null}]}`)
			} else {
				ev(fmt.Sprintf(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg","output_index":0,"content_index":0,"delta":"some streamed words ","logprobs":[]}`, seq))
			}
		}
		id := fmt.Sprintf("fc_%d", call)
		if chat {
			ev(head + fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"%s","type":"function","function":{"name":"apply_patch","arguments":""}}]},"finish_reason":null}]}`, call, id))
		} else {
			ev(fmt.Sprintf(`{"type":"response.output_item.added","sequence_number":%d,"output_index":%d,"item":{"id":"%s","type":"function_call","arguments":"","call_id":"c%d","name":"apply_patch"}}`, seq, call+1, id, call))
		}
		for i := 0; i < len(args); i += 12 {
			piece := q(args[i:min(i+12, len(args))])
			if chat {
				ev(head + fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":"%s"}}]},"finish_reason":null}]}`, call, piece))
			} else {
				ev(fmt.Sprintf(`{"type":"response.function_call_arguments.delta","sequence_number":%d,"item_id":"%s","output_index":%d,"delta":"%s"}`, seq, id, call+1, piece))
			}
		}
		if !chat {
			ev(fmt.Sprintf(`{"type":"response.output_item.done","sequence_number":%d,"output_index":%d,"item":{"id":"%s","type":"function_call","arguments":"%s","call_id":"c%d","name":"apply_patch"}}`, seq, call+1, id, q(args), call))
		}
	}
	if chat {
		ev(head + `{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
		evs = append(evs, "data: [DONE]\n\n")
	} else {
		ev(fmt.Sprintf(`{"type":"response.completed","sequence_number":%d,"response":{"id":"r","status":"completed","output":[]}}`, seq))
	}
	return evs
}

// benchProxy measures the stream through Caddy's reverse_proxy with the
// rule (/rules/...) against the same route without llm_transform
// (/plain/...), alternating, in the same benchmark. The upstream flushes
// after every event, as a model provider does.
func benchProxy(b *testing.B, chat bool) {
	evs := benchEvents(10000, chat)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, e := range evs {
			_, _ = io.WriteString(w, e)
			_ = rc.Flush()
		}
	}))
	defer upstream.Close()
	up := strings.TrimPrefix(upstream.URL, "http://")
	tester := caddytest.NewTester(b).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: time.Minute})
	tester.InitServer(globalOptions+`
:9080 {
	handle_path /plain/* {
		reverse_proxy `+up+`
	}
	handle_path /rules/* {
		llm_transform {
			rule field_custom_tools_to_function
		}
		reverse_proxy `+up+`
	}
}
`, "caddyfile")
	path, body := "/v1/responses", `{"model":"m","stream":true,"tools":[{"type":"custom","name":"apply_patch"}]}`
	if chat {
		path, body = "/v1/chat/completions", `{"model":"m","stream":true,"tools":[{"type":"custom","custom":{"name":"apply_patch"}}]}`
	}
	fetch := func(prefix string) (time.Duration, uint64, string) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		start := time.Now()
		resp, err := tester.Client.Post(gatewayURL+prefix+path, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		d := time.Since(start)
		runtime.ReadMemStats(&ms)
		return d, ms.Mallocs - before, string(out)
	}
	_, _, plain := fetch("/plain")
	_, _, rules := fetch("/rules")
	if strings.Contains(plain, "custom_tool_call") || strings.Contains(plain, `"type":"custom"`) || !strings.Contains(rules, "custom") || strings.Contains(rules, `"function"`) && chat {
		b.Fatal("the routes do not do what the benchmark assumes")
	}
	var tPlain, tRules time.Duration
	var aPlain, aRules uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, a, _ := fetch("/plain")
		tPlain += d
		aPlain += a
		d, a, _ = fetch("/rules")
		tRules += d
		aRules += a
	}
	n := float64(b.N * len(evs))
	b.ReportMetric(float64(tRules)/float64(tPlain), "x_passthrough")
	b.ReportMetric(float64(tRules.Nanoseconds())/n, "ns/event")
	b.ReportMetric(float64(aRules)/n, "allocs/event")
	b.ReportMetric(float64(aPlain)/n, "passthrough_allocs/event")
}

func BenchmarkStream(b *testing.B)     { benchProxy(b, false) }
func BenchmarkChatStream(b *testing.B) { benchProxy(b, true) }
