package wholeprocess

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	tt "github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// The tools_preflight benchmarks have six processes and an upstream of
// their own:
//
//   - pfA, the Codex chain of the other rows (`field_custom_tools_to_function
//     { names * }`), and pfB, the same chain with `tools_preflight` first,
//     both sent the real Codex CLI turn-1 request (transformtest.CodexRequest:
//     ten tools, apply_patch a custom tool, exec_command's ten-member schema);
//   - pfPlain, a plain reverse_proxy (the empty chain), and pfOnly,
//     `tools_preflight` alone, both sent a Chat request declaring the same
//     tools as functions;
//   - pfBrA and pfBrB, Codex behind responses_to_chat (the bridge rows).
//
// Each row compares a process with tools_preflight (B) against the same
// chain without it (A), in the stream table's rounds (see
// streamtable_test.go: two streams at a time, A and B taking turns, five
// rounds, x_median the median of the rounds' ratios of B's CPU to A's):
//
//   - BenchmarkPreflightStream/responses/<upstream>: a Responses stream in
//     OpenAI's layout, 2,317 events: 500 text deltas, then three valid calls
//     in 8-byte argument deltas (apply_patch, 1,528 deltas, which the chain
//     turns back into a custom tool call; exec_command with seven members,
//     264; write_stdin, 7).
//     A request that needs no repair: the target is ≤ 1.1×.
//   - BenchmarkPreflightStream/chat/<upstream>: the stream table's
//     1,939-chunk DeepSeek-style Chat stream (reasoning, text, apply_patch
//     and exec_command in 12-byte pieces), plain against tools_preflight
//     alone. Target ≤ 1.1×.
//   - BenchmarkPreflightStream/bridge/<upstream>: Codex's request through
//     the canonical DeepSeek chain (tools_plan and responses_to_chat,
//     profile deepseek) without (pfBrA) and with tools_preflight first
//     (pfBrB), answered with the chat row's stream. Target ≤ 1.1×.
//   - BenchmarkPreflightStream/repair/<upstream>: the Responses stream with
//     its write_stdin call invalid (session_id missing, yield_time_ms a
//     string). A hands the invalid call on; B holds it, asks the model again
//     in a hidden round, and hands on the re-ask's valid call (the upstream
//     answers a request that carries the invalid call's output with a short
//     stream: five text deltas and the corrected call). The cost of one
//     repair round: informative, no target.
//   - BenchmarkPreflightJSON/{responses,chat}: the same, not streamed: the
//     valid answer's response object, and a Chat completion with text and
//     two valid calls.
//
// Each row logs its rounds' ratios in order. To run them all (about two
// minutes on two cores, most of it in the paced rows):
//
//	go test -run '^$' -bench '^BenchmarkPreflight' ./integration/wholeprocess/
var (
	pfOnce          sync.Once
	pfErr           error
	pfUp            *httptest.Server
	pfA, pfB        *proc
	pfPlain, pfOnly *proc
	pfBrA, pfBrB    *proc
	pfCases         = map[string]*tableStream{} // written before pfUp starts
	pfJSON          = map[string][]byte{}       // "responses", "chat"
	pfReasks        atomic.Int64                // re-asks the upstream answered

	pfResponsesBody, pfResponsesJSONBody []byte
	pfChatBody, pfChatJSONBody           []byte
)

// pfCall is one call of a scripted Responses answer.
type pfCall struct{ name, callID, args string }

// The calls of the answers: all valid, or write_stdin's invalid (and the
// re-ask's answer with it corrected).
var (
	pfPatch    = escapeHeavyPatch(1, 80)
	pfExecArgs = `{"cmd":` + jsonString(strings.Repeat(`grep -rn "naïve \"x\"" C:\\src | head; `, 40)) +
		`,"workdir":"/work/src","justification":"Check the edit before running the tests","sandbox_permissions":"use_default","prefix_rule":["rg","-n"],"max_output_tokens":4000,"yield_time_ms":1000}`
	pfStdinArgs = `{"session_id":7,"chars":"y\n","yield_time_ms":500}`
	pfBadArgs   = `{"chars":"y\n","yield_time_ms":"500"}`

	pfValidCalls = []pfCall{
		{"apply_patch", "call_1", `{"input":` + jsonString(pfPatch) + `}`},
		{"exec_command", "call_2", pfExecArgs},
		{"write_stdin", "call_3", pfStdinArgs},
	}
	pfInvalidCalls = []pfCall{pfValidCalls[0], pfValidCalls[1], {"write_stdin", "call_pf_bad", pfBadArgs}}
	pfFixCalls     = []pfCall{{"write_stdin", "call_pf_fix", pfStdinArgs}}
)

// pfResponsesEvents renders a Responses stream in OpenAI's layout (as
// responsesEvents does): response.created and in_progress with the whole
// response object, a message of textDeltas text deltas, the calls with
// their arguments in 8-byte deltas, and response.completed holding the
// whole output. It also returns that response object and the text.
func pfResponsesEvents(id string, textDeltas int, calls []pfCall) (evs [][]byte, final, text string) {
	seq := 0
	ev := func(format string, a ...any) {
		data := fmt.Sprintf(format, a...)
		if !gjson.Valid(data) {
			panic("pfResponsesEvents: not JSON: " + data)
		}
		evs = append(evs, []byte("event: "+gjson.Get(data, "type").String()+"\ndata: "+data+"\n\n"))
		seq++
	}
	const tools = `[{"type":"function","description":"Apply a patch","name":"apply_patch","parameters":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"],"additionalProperties":false},"strict":false}]`
	response := func(status, output, usage string) string {
		return `{"id":"resp_` + id + `","object":"response","created_at":1764400000,"status":"` + status + `","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-5.5","output":` + output + `,"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":"01a2278a-0000-7000-8000-000000000000","reasoning":{"effort":"medium","summary":null},"safety_identifier":null,"service_tier":"default","store":false,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":` + tools + `,"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":` + usage + `,"user":null,"metadata":{}}`
	}
	words := []string{"I'll ", "update ", "`src/módulo_1.py` ", "and ", "then ", "run ", `"grep" `, "to ", "check ", "the ", "result ", "✓.\n"}
	var tb strings.Builder
	msgID := "msg_" + id
	ev(`{"type":"response.created","sequence_number":%d,"response":%s}`, seq, response("in_progress", "[]", "null"))
	ev(`{"type":"response.in_progress","sequence_number":%d,"response":%s}`, seq, response("in_progress", "[]", "null"))
	ev(`{"type":"response.output_item.added","sequence_number":%d,"output_index":0,"item":{"id":"%s","type":"message","status":"in_progress","content":[],"role":"assistant"}}`, seq, msgID)
	ev(`{"type":"response.content_part.added","sequence_number":%d,"item_id":"%s","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`, seq, msgID)
	for k := 0; k < textDeltas; k++ {
		w := words[k%len(words)]
		tb.WriteString(w)
		ev(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"%s","output_index":0,"content_index":0,"delta":%s,"logprobs":[],"obfuscation":"%s"}`, seq, msgID, jsonString(w), "abcdefghijklmnop"[:4+k%12])
	}
	t := jsonString(tb.String())
	part := `{"type":"output_text","annotations":[],"logprobs":[],"text":` + t + `}`
	msg := `{"id":"` + msgID + `","type":"message","status":"completed","content":[` + part + `],"role":"assistant"}`
	ev(`{"type":"response.output_text.done","sequence_number":%d,"item_id":"%s","output_index":0,"content_index":0,"text":%s,"logprobs":[]}`, seq, msgID, t)
	ev(`{"type":"response.content_part.done","sequence_number":%d,"item_id":"%s","output_index":0,"content_index":0,"part":%s}`, seq, msgID, part)
	ev(`{"type":"response.output_item.done","sequence_number":%d,"output_index":0,"item":%s}`, seq, msg)
	output := []string{msg}
	for i, c := range calls {
		oi, itemID := i+1, fmt.Sprintf("fc_%s_%d", id, i+1)
		ev(`{"type":"response.output_item.added","sequence_number":%d,"output_index":%d,"item":{"id":"%s","type":"function_call","status":"in_progress","arguments":"","call_id":"%s","name":"%s"}}`, seq, oi, itemID, c.callID, c.name)
		for k, p := range pieces(c.args, 8) {
			ev(`{"type":"response.function_call_arguments.delta","sequence_number":%d,"item_id":"%s","output_index":%d,"delta":%s,"obfuscation":"%s"}`, seq, itemID, oi, jsonString(p), "abcdefghijklmnop"[:2+k%14])
		}
		ev(`{"type":"response.function_call_arguments.done","sequence_number":%d,"item_id":"%s","output_index":%d,"arguments":%s}`, seq, itemID, oi, jsonString(c.args))
		item := fmt.Sprintf(`{"id":"%s","type":"function_call","status":"completed","arguments":%s,"call_id":"%s","name":"%s"}`, itemID, jsonString(c.args), c.callID, c.name)
		ev(`{"type":"response.output_item.done","sequence_number":%d,"output_index":%d,"item":%s}`, seq, oi, item)
		output = append(output, item)
	}
	final = response("completed", "["+strings.Join(output, ",")+"]",
		`{"input_tokens":41211,"input_tokens_details":{"cached_tokens":40960},"output_tokens":5120,"output_tokens_details":{"reasoning_tokens":900},"total_tokens":46331}`)
	ev(`{"type":"response.completed","sequence_number":%d,"response":%s}`, seq, final)
	return evs, final, tb.String()
}

// pfChatRequest is a Chat request declaring the Codex request's function
// tools, and apply_patch as a function of one string, input.
func pfChatRequest(codex []byte, stream bool) []byte {
	var tools []string
	gjson.GetBytes(codex, "tools").ForEach(func(_, t gjson.Result) bool {
		if t.Get("type").String() == "function" {
			tools = append(tools, `{"type":"function","function":{"name":`+t.Get("name").Raw+`,"description":`+t.Get("description").Raw+`,"parameters":`+t.Get("parameters").Raw+`}}`)
		}
		return true
	})
	tools = append(tools, `{"type":"function","function":{"name":"apply_patch","description":"Apply a patch","parameters":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"],"additionalProperties":false}}}`)
	s := `{"model":"deepseek-v4-pro","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"Edit the files"}],"tools":[` + strings.Join(tools, ",") + `],"tool_choice":"auto","parallel_tool_calls":true,"max_tokens":32768`
	if stream {
		s += `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return []byte(s + "}")
}

// setupPreflight renders the answers and starts the upstream and the four
// processes once; TestMain's stopAll stops the processes.
func setupPreflight(b *testing.B) {
	b.Helper()
	pfOnce.Do(func() {
		codex := []byte(gjson.ParseBytes(tt.CodexRequest(b)).Get("@ugly").Raw)
		if !gjson.GetBytes(codex, "stream").Bool() || !bytes.Contains(codex, []byte(`"stream":true`)) {
			pfErr = errors.New("the Codex request is not a streaming one")
			return
		}
		pfResponsesBody = codex
		pfResponsesJSONBody = bytes.Replace(codex, []byte(`"stream":true`), []byte(`"stream":false`), 1)
		pfChatBody, pfChatJSONBody = pfChatRequest(codex, true), pfChatRequest(codex, false)

		evs, final, _ := pfResponsesEvents("1", 500, pfValidCalls)
		pfCases["responses"] = &tableStream{evs: evs, body: bytes.Join(evs, nil)}
		pfJSON["responses"] = []byte(final)
		evs, _, _ = pfResponsesEvents("1", 500, pfInvalidCalls)
		pfCases["repair"] = &tableStream{evs: evs, body: bytes.Join(evs, nil)}
		evs, _, _ = pfResponsesEvents("2", 5, pfFixCalls)
		pfCases["repair:reask"] = &tableStream{evs: evs, body: bytes.Join(evs, nil)}
		evs = chatChunks(300, 300, 92, layoutOpenAI)
		pfCases["chat"] = &tableStream{evs: evs, body: bytes.Join(evs, nil)}
		pfJSON["chat"] = []byte(`{"id":"0f9e4c1a-5b7d-4e21-9c3a-8d6f2b1e0a47","object":"chat.completion","created":1764400000,"model":"deepseek-v4-pro","choices":[{"index":0,"message":{"role":"assistant","content":` + jsonString(bridgeText.content) +
			`,"reasoning_content":` + jsonString(bridgeText.reasoning) + `,"tool_calls":[{"id":"call_00_kw66qXbR4jVn1m8s","type":"function","function":{"name":"apply_patch","arguments":` + jsonString(bridgeText.patch) +
			`}},{"id":"call_01_Zp3tLq9wE2aYc7Hd","type":"function","function":{"name":"exec_command","arguments":` + jsonString(pfExecArgs) + `}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":41211,"completion_tokens":5120,"total_tokens":46331}}`)
		for k, j := range pfJSON {
			if !json.Valid(j) {
				pfErr = fmt.Errorf("the %s JSON answer is not JSON", k)
				return
			}
		}

		pfUp = httptest.NewServer(http.HandlerFunc(servePreflightUpstream))
		up := strings.TrimPrefix(pfUp.URL, "http://")
		chain := "\t\trule field_custom_tools_to_function {\n\t\t\tnames *\n\t\t}\n"
		// Codex on DeepSeek, as the README's canonical bridge chain.
		bridge := "\t\trule tools_plan {\n\t\t\tprofile deepseek\n\t\t}\n\t\trule responses_to_chat {\n\t\t\tprofile deepseek\n\t\t}\n"
		for _, s := range []struct {
			p     **proc
			name  string
			route string
		}{
			{&pfA, "pfA", "\tllm_transform {\n" + chain + "\t}\n\treverse_proxy " + up},
			{&pfB, "pfB", "\tllm_transform {\n\t\trule tools_preflight\n" + chain + "\t}\n\treverse_proxy " + up},
			{&pfPlain, "pfPlain", "\treverse_proxy " + up},
			{&pfOnly, "pfOnly", "\tllm_transform {\n\t\trule tools_preflight\n\t}\n\treverse_proxy " + up},
			{&pfBrA, "pfBrA", "\tllm_transform {\n" + bridge + "\t}\n\treverse_proxy " + up},
			{&pfBrB, "pfBrB", "\tllm_transform {\n\t\trule tools_preflight\n" + bridge + "\t}\n\treverse_proxy " + up},
		} {
			if *s.p, pfErr = startCaddy(s.name, s.route); pfErr != nil {
				return
			}
		}
		pfErr = pin(os.Getpid(), pfA, pfB, pfPlain, pfOnly, pfBrA, pfBrB)
	})
	if pfErr != nil {
		b.Fatal(pfErr)
	}
}

// servePreflightUpstream answers by X-Bench-Case: a stream of pfCases
// written as X-Bench-Upstream says, or a JSON answer ("json:<kind>"). A
// request for "repair" that carries the invalid call's output is a re-ask,
// answered with the corrected call.
func servePreflightUpstream(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	kase := r.Header.Get("X-Bench-Case")
	kase, _ = strings.CutSuffix(kase, "bridge") // the bridged rows' upstream is the Chat one's
	if kase == "" || kase == "json:" {
		kase += "chat"
	}
	if kind, ok := strings.CutPrefix(kase, "json:"); ok {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(pfJSON[kind])
		return
	}
	if kase == "repair" && bytes.Contains(body, []byte(`"call_pf_bad"`)) {
		pfReasks.Add(1)
		kase = "repair:reask"
	}
	t := pfCases[kase]
	if t == nil {
		http.Error(w, "no such case", http.StatusNotFound)
		return
	}
	writeTable(w, r, t)
}

// pfCompleted returns a Responses answer's events after checking that each
// is named after its type and numbered in order from 0, and that
// response.completed, once, is last.
func pfCompleted(out []byte) (map[string]int, gjson.Result, error) {
	evs := strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n")
	count := map[string]int{}
	var last gjson.Result
	for i, e := range evs {
		name, data, ok := strings.Cut(e, "\ndata: ")
		typ := gjson.Get(data, "type").String()
		if !ok || name != "event: "+typ || !gjson.Valid(data) {
			return nil, last, fmt.Errorf("event %d is not a named Responses event: %.200q", i, e)
		}
		if n := gjson.Get(data, "sequence_number"); !n.Exists() || n.Int() != int64(i) {
			return nil, last, fmt.Errorf("event %d (%s) has sequence_number %s", i, typ, n.Raw)
		}
		count[typ]++
		last = gjson.Parse(data)
	}
	if typ := last.Get("type").String(); typ != "response.completed" || count[typ] != 1 {
		return nil, last, fmt.Errorf("the stream ends with %s; counts %v", typ, count)
	}
	return count, last.Get("response"), nil
}

// pfCheckBridged checks the output of the Chat answer bridged for Codex:
// the reasoning, the text, apply_patch as a custom tool call holding the
// patch, and exec_command with its arguments as the upstream sent them.
func pfCheckBridged(r gjson.Result, exec string) error {
	if got := fmt.Sprint(r.Get("output.#.type").Value()); got != "[reasoning message custom_tool_call function_call]" {
		return fmt.Errorf("output %s", got)
	}
	if r.Get("output.1.content.0.text").String() != bridgeText.content {
		return errors.New("the message does not hold the text")
	}
	if c := r.Get("output.2"); c.Get("name").String() != "apply_patch" || c.Get("input").String() != gjson.Get(bridgeText.patch, "input").String() {
		return fmt.Errorf("the custom call is not apply_patch with the patch: %.200s", c.Raw)
	}
	if c := r.Get("output.3"); c.Get("name").String() != "exec_command" || c.Get("arguments").String() != exec {
		return fmt.Errorf("the function call is not exec_command with its arguments: %.300s", c.Raw)
	}
	return nil
}

// pfCheckOutput checks a Responses answer's output: the message with the
// text, apply_patch as a custom tool call holding the patch, then the
// function calls with exactly the arguments given.
func pfCheckOutput(r gjson.Result, text string, calls []pfCall) error {
	types := []string{"message", "custom_tool_call"}
	for range calls[1:] {
		types = append(types, "function_call")
	}
	if got := fmt.Sprint(r.Get("output.#.type").Value()); got != "["+strings.Join(types, " ")+"]" {
		return fmt.Errorf("output %s, want %v", got, types)
	}
	if r.Get("output.0.content.0.text").String() != text {
		return errors.New("the message does not hold the text")
	}
	if c := r.Get("output.1"); c.Get("input").String() != pfPatch || c.Get("name").String() != "apply_patch" || c.Get("call_id").String() != calls[0].callID {
		return fmt.Errorf("the custom call is not apply_patch with the patch: %.200s", c.Raw)
	}
	for i, c := range calls[1:] {
		got := r.Get(fmt.Sprintf("output.%d", i+2))
		if got.Get("name").String() != c.name || got.Get("call_id").String() != c.callID || got.Get("arguments").String() != c.args {
			return fmt.Errorf("call %d is not %s %s with its arguments: %.300s", i+2, c.name, c.callID, got.Raw)
		}
	}
	return nil
}

// pfCheckStream checks a Responses answer to the Codex request whole: the
// events (pfCompleted), the 500 text deltas adding up to the text, the
// custom call's input deltas to the patch, each function call's argument
// deltas to its arguments, and response.completed's output.
func pfCheckStream(out []byte, text string, calls []pfCall) error {
	count, r, err := pfCompleted(out)
	if err != nil {
		return err
	}
	var tx, input strings.Builder
	args := map[int64]*strings.Builder{}
	for _, e := range strings.Split(string(out), "\n\n") {
		_, data, _ := strings.Cut(e, "\ndata: ")
		ev := gjson.Parse(data)
		switch ev.Get("type").String() {
		case "response.output_text.delta":
			tx.WriteString(ev.Get("delta").String())
		case "response.custom_tool_call_input.delta":
			input.WriteString(ev.Get("delta").String())
		case "response.function_call_arguments.delta":
			o := ev.Get("output_index").Int()
			if args[o] == nil {
				args[o] = &strings.Builder{}
			}
			args[o].WriteString(ev.Get("delta").String())
		}
	}
	if tx.String() != text || count["response.output_text.delta"] != 500 {
		return fmt.Errorf("%d text deltas, %d bytes of text; want 500, %d", count["response.output_text.delta"], tx.Len(), len(text))
	}
	if input.String() != pfPatch || count["response.custom_tool_call_input.done"] != 1 {
		return fmt.Errorf("the custom call's input deltas add up to %d bytes, want the patch's %d; counts %v", input.Len(), len(pfPatch), count)
	}
	for i, c := range calls[1:] {
		if a := args[int64(i+2)]; a == nil || a.String() != c.args {
			return fmt.Errorf("the argument deltas of call %d do not add up to its arguments", i+2)
		}
	}
	if count["response.output_item.added"] != 1+len(calls) || count["response.output_item.done"] != 1+len(calls) {
		return fmt.Errorf("counts %v", count)
	}
	return pfCheckOutput(r, text, calls)
}

// pfRow is one row: each process's answer checked whole once, then every
// answer compared with it byte for byte.
type pfRow struct {
	name, kind string
	pa, pb     *proc
	path       string
	body       []byte
	check      func(p *proc, out []byte) error
	events     int
	unit       string
}

func (r pfRow) run(b *testing.B, mode string) {
	want := map[*proc][]byte{}
	for _, p := range []*proc{r.pa, r.pb} {
		out, err := get(p, r.path, r.kind, mode, r.body)
		if err == nil {
			err = r.check(p, out)
		}
		if err != nil {
			b.Fatalf("%s: %v", p.name, err)
		}
		want[p] = out
	}
	b.Logf("A's answer %d bytes, B's %d; the same: %v", len(want[r.pa]), len(want[r.pb]), bytes.Equal(want[r.pa], want[r.pb]))
	var streamsB atomic.Int64
	reasks0 := pfReasks.Load()
	r.measure(b, mode, func(p *proc, m string) error {
		if p == r.pb {
			streamsB.Add(1)
		}
		out, err := get(p, r.path, r.kind, m, r.body)
		if err == nil && strings.HasSuffix(r.kind, "bridge") && len(out) == len(want[p]) {
			return nil // the bridge's ids are new on every request
		}
		if err == nil && !bytes.Equal(out, want[p]) {
			err = fmt.Errorf("%s: %d bytes differ from the checked answer's %d", p.name, len(out), len(want[p]))
		}
		return err
	})
	if r.kind == "repair" {
		if got, want := pfReasks.Load()-reasks0, streamsB.Load(); got != want {
			b.Fatalf("the upstream answered %d re-asks for B's %d answers", got, want)
		}
		b.ReportMetric(1, "reasks/stream")
	}
}

// measure runs the row as the stream table does (tableRow.run): warm-up,
// profiles, alternated rounds, each round's ratio logged.
func (r pfRow) measure(b *testing.B, mode string, stream func(p *proc, mode string) error) {
	tableRow{name: r.name, pa: r.pa, pb: r.pb, stream: stream, events: r.events, unit: r.unit}.run(b, mode)
}

// BenchmarkPreflightStream: CPU of tools_preflight in front of a chain (B)
// over the same chain without it (A), streamed; one row per answer and
// upstream (see the top of this file and streamtable_test.go).
func BenchmarkPreflightStream(b *testing.B) {
	setupPreflight(b)
	_, _, text := pfResponsesEvents("1", 500, nil)
	for _, kind := range []string{"responses", "chat", "bridge", "repair"} {
		for _, mode := range tableUpstreams() {
			b.Run(kind+"/"+mode, func(b *testing.B) {
				t := pfCases[kind]
				if kind == "bridge" {
					t = pfCases["chat"]
				}
				r := pfRow{name: "preflight/" + kind + "/" + mode, kind: kind, pa: pfA, pb: pfB,
					path: responsesPath, body: pfResponsesBody, events: len(t.evs), unit: "event"}
				switch kind {
				case "responses":
					r.check = func(p *proc, out []byte) error { return pfCheckStream(out, text, pfValidCalls) }
				case "repair":
					r.check = func(p *proc, out []byte) error {
						if p == pfA { // the invalid call handed on
							return pfCheckStream(out, text, pfInvalidCalls)
						}
						// B: the first answer's text and valid calls, then
						// the re-ask's call in place of the invalid one,
						// and nothing else of the re-ask's answer.
						_, resp, err := pfCompleted(out)
						if err == nil {
							err = pfCheckOutput(resp, text, []pfCall{pfValidCalls[0], pfValidCalls[1], pfFixCalls[0]})
						}
						if err == nil && (bytes.Contains(out, []byte("call_pf_bad")) || bytes.Contains(out, []byte("msg_2"))) {
							err = errors.New("the client saw the invalid call or the re-ask's message")
						}
						return err
					}
				case "bridge":
					r.pa, r.pb, r.unit = pfBrA, pfBrB, "chunk"
					r.check = func(p *proc, out []byte) error {
						_, resp, err := pfCompleted(out)
						if err == nil {
							err = pfCheckBridged(resp, bridgeText.exec)
						}
						return err
					}
				case "chat":
					r.pa, r.pb, r.path, r.body, r.unit = pfPlain, pfOnly, chatPath, pfChatBody, "chunk"
					// Valid calls pass as they came: both answers are the
					// upstream's bytes.
					r.check = func(p *proc, out []byte) error {
						if !bytes.Equal(out, t.body) {
							return fmt.Errorf("%d bytes, want the upstream's %d", len(out), len(t.body))
						}
						return nil
					}
				}
				r.run(b, mode)
			})
		}
	}
}

// BenchmarkPreflightJSON: the same for answers not streamed: the valid
// Responses answer's response object to the Codex request with stream
// false (Codex chain against tools_preflight and the chain), and a Chat
// completion with text and two valid calls (plain against tools_preflight
// alone).
func BenchmarkPreflightJSON(b *testing.B) {
	setupPreflight(b)
	_, _, text := pfResponsesEvents("1", 500, nil)
	for _, kind := range []string{"responses", "chat", "bridge"} {
		b.Run(kind, func(b *testing.B) {
			r := pfRow{name: "preflight/json/" + kind, kind: "json:" + kind, pa: pfA, pb: pfB,
				path: responsesPath, body: pfResponsesJSONBody, events: 1, unit: "response",
				check: func(p *proc, out []byte) error {
					if !gjson.ValidBytes(out) {
						return fmt.Errorf("not JSON: %.200s", out)
					}
					return pfCheckOutput(gjson.ParseBytes(out), text, pfValidCalls)
				}}
			if kind == "bridge" {
				r.pa, r.pb = pfBrA, pfBrB
				r.check = func(p *proc, out []byte) error {
					if !gjson.ValidBytes(out) {
						return fmt.Errorf("not JSON: %.200s", out)
					}
					return pfCheckBridged(gjson.ParseBytes(out), pfExecArgs)
				}
			}
			if kind == "chat" {
				r.pa, r.pb, r.path, r.body = pfPlain, pfOnly, chatPath, pfChatJSONBody
				r.check = func(p *proc, out []byte) error {
					if !bytes.Equal(out, pfJSON["chat"]) {
						return fmt.Errorf("%d bytes, want the upstream's %d: %.300s", len(out), len(pfJSON["chat"]), out)
					}
					return nil
				}
			}
			r.run(b, upBurst)
		})
	}
}
