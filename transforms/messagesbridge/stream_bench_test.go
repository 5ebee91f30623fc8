package messagesbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// benchChatStream is a DeepSeek-style Chat stream like the whole-process
// benchmark's (integration/wholeprocess chatChunks): a role chunk, 300
// reasoning_content deltas, 300 content deltas, two calls whose arguments
// (an escape-heavy patch, a long command) come in 12-byte pieces, the
// finish, a usage chunk and [DONE]; about 2,000 chunks. sorted writes
// every object's members in key order, as some upstreams do.
func benchChatStream(sorted bool) [][]byte {
	var evs [][]byte
	data := func(js string) {
		if sorted {
			var v any
			dec := json.NewDecoder(strings.NewReader(js))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				panic(err)
			}
			js = benchJSON(v)
		}
		evs = append(evs, []byte("data: "+js+"\n\n"))
	}
	const head = `{"id":"0f9e4c1a-5b7d-4e21-9c3a-8d6f2b1e0a47","object":"chat.completion.chunk","created":1764400000,"model":"deepseek-v4-pro","system_fingerprint":"fp_8802369eaa_prod0820_fp8_kvcache",`
	chunk := func(delta, finish string) {
		data(head + `"choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}`)
	}
	reasoning := []string{"The user ", "wants ", "módulo_1.py ", "edited: ", "replace ", `print("Hallo") `, "with ", "the ", `"Grüße" `, "line, ", `keeping C:\temp `, "paths.\n"}
	content := []string{"I'll ", "update ", "`src/módulo_1.py` ", "and ", "then ", "run ", `"grep" `, "to ", "check ", "the ", "result ", "✓.\n"}
	chunk(`{"role":"assistant","content":null,"reasoning_content":""}`, "null")
	for k := range 300 {
		chunk(`{"content":null,"reasoning_content":`+benchJSON(reasoning[k%len(reasoning)])+`}`, "null")
	}
	for k := range 300 {
		chunk(`{"content":`+benchJSON(content[k%len(content)])+`,"reasoning_content":null}`, "null")
	}
	call := func(i int, id, name, args string) {
		chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"%s","type":"function","function":{"name":"%s","arguments":""}}]}`, i, id, name), "null")
		for p := 0; p < len(args); {
			q := min(p+12, len(args))
			for q < len(args) && args[q]&0xC0 == 0x80 { // runes whole
				q++
			}
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, benchJSON(args[p:q])), "null")
			p = q
		}
	}
	var patch strings.Builder
	patch.WriteString("*** Begin Patch\n*** Update File: src/módulo_1.py\n@@ def grüße():\n")
	for k := range 92 {
		fmt.Fprintf(&patch, "-    print(\"Hallo \\\"%d\\\"\", r\"C:\\temp\\alt_%d\") # naïve\n", k, k)
		fmt.Fprintf(&patch, "+    print(\"Grüße, \\\"Welt\\\" — %d 🦀\", r\"C:\\Users\\José\\neu_%d\") # ça\n", k, k)
	}
	patch.WriteString("*** End Patch\n")
	call(0, "call_00_kw66qXbR4jVn1m8s", "apply_patch", `{"input":`+benchJSON(patch.String())+`}`)
	call(1, "call_01_Zp3tLq9wE2aYc7Hd", "exec_command", `{"cmd":`+benchJSON(strings.Repeat(`grep -rn "naïve \"x\"" C:\\src | head; `, 40))+`}`)
	chunk(`{"content":"","reasoning_content":null}`, `"tool_calls"`)
	data(head + `"choices":[],"usage":{"prompt_tokens":41211,"completion_tokens":5120,"total_tokens":46331,"prompt_tokens_details":{"cached_tokens":40960},"completion_tokens_details":{"reasoning_tokens":900},"prompt_cache_hit_tokens":40960,"prompt_cache_miss_tokens":251}}`)
	return append(evs, []byte("data: [DONE]\n\n"))
}

// benchJSON is v as JSON, with <, > and & as they are.
func benchJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// benchStreamRun returns a run of the bridge's stream over reads, in a
// fresh exchange of a deepseek messages_to_chat rule after a Claude-Code-
// like request, and the client's bytes.
func benchStreamRun(b *testing.B) func(reads [][]byte, out []byte) []byte {
	chain := transformtest.Chain(b, rqRules(rqDeepSeek))
	body := []byte(`{"model":"deepseek-v4-pro","max_tokens":32768,"stream":true,"system":[{"type":"text","text":"You are a coding agent."}],"messages":[{"role":"user","content":[{"type":"text","text":"Edit the files"}]}],"tools":[{"name":"apply_patch","description":"Apply a patch","input_schema":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}},{"name":"exec_command","description":"Run a command","input_schema":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}}],"thinking":{"type":"enabled","budget_tokens":16000}}`)
	return func(reads [][]byte, out []byte) []byte {
		x := transforms.NewExchange(transforms.ProtocolMessages, transforms.Limits{MaxCallBuffer: 8 << 20, MaxEvent: 32 << 20}, nil)
		chain.Begin(x, "deepseek-v4-pro")
		x.SetUpstreamPath("/v1/messages")
		if _, err := x.RewriteRequest(body); err != nil {
			b.Fatal(err)
		}
		s := x.NewStream()
		for _, r := range reads {
			_ = s.Write(r)
			out = append(out, s.Output()...)
		}
		_ = s.Close()
		out = append(out, s.Output()...)
		s.Release()
		x.Release()
		return out
	}
}

// BenchmarkMessagesStreamChunks puts the DeepSeek-style Chat stream
// through messages_to_chat's stream in reads of eight chunks, as a proxy
// reads a flushing upstream: the bridge's CPU per chunk, what the
// whole-process flush and burst rows of BenchmarkMessagesBridgeStream add.
//
//	go test -run '^$' -bench MessagesStreamChunks -benchmem ./transforms/messagesbridge/
func BenchmarkMessagesStreamChunks(b *testing.B) {
	run := benchStreamRun(b)
	for _, layout := range []string{"openai", "sorted"} {
		evs := benchChatStream(layout == "sorted")
		var reads [][]byte
		for i := 0; i < len(evs); i += 8 {
			reads = append(reads, bytes.Join(evs[i:min(i+8, len(evs))], nil))
		}
		b.Run(layout, func(b *testing.B) {
			got := string(run(reads, nil))
			if !strings.HasSuffix(got, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") || strings.Contains(got, "event: error") {
				b.Fatalf("the stream did not end with message_stop:\n%.2000s", got)
			}
			if err := checkGrammar(got); err != nil {
				b.Fatal(err)
			}
			out := make([]byte, 0, 2*len(got))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				out = run(reads, out[:0])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/chunk")
		})
	}
}
