package wholeprocess

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
)

// The stream table: BenchmarkStream (field_custom_tools_to_function) and
// BenchmarkBridgeStream (responses_to_chat) run one sub-benchmark per row,
// <layout>/<upstream>:
//
//   - layout openai: every object's keys in the order OpenAI writes them
//     (type and sequence_number first; DeepSeek's order for Chat chunks);
//     layout sorted: every object's keys sorted, at every level, so type
//     is not first.
//   - upstream burst: the upstream writes the whole stream at once, so a
//     proxy reads as many events as its buffer holds; upstream paced: the
//     upstream writes and flushes each event alone, LLMT_WP_PACE (default
//     1ms) after the one before, so each event is a read of its own, as
//     from a model generating tokens.
//
// Each row sends two streams at a time to one process, then two to the
// other, A and B taking turns, in LLMT_WP_ROUNDS rounds (at least and by
// default 5) of ceil(b.N/rounds) turns each; x_median, x_min and x_max are
// the median, least and greatest of the rounds' ratios of B's CPU to A's,
// x_passthrough_cpu the ratio over all rounds. CPU is each process's
// CPU clock (clock_gettime on its CPUCLOCK_SCHED), exact to the
// nanosecond, so short rounds need no minimum of clock ticks. A paced
// stream takes about 2.5 s, so at the default -benchtime a paced row runs
// 5 rounds of one turn each (about 30 s a row; the whole table about 2¼
// minutes on two cores), and a -benchtime of 100x would take 100 turns:
//
//	go test -run '^$' -bench '^Benchmark(Bridge)?Stream$' ./integration/wholeprocess/
//	go test -run '^$' -bench '^BenchmarkStream$/openai/paced' ./integration/wholeprocess/
//
// LLMT_WP_UPSTREAMS=burst,paced,flush adds rows whose upstream writes and
// flushes each event with no pause (as the first version of this
// benchmark did).
const (
	layoutOpenAI = "openai"
	layoutSorted = "sorted"

	upBurst = "burst"
	upPaced = "paced"
	upFlush = "flush"

	// concurrent is how many streams a process gets at a time.
	concurrent = 2
)

var tableLayouts = []string{layoutOpenAI, layoutSorted}

func tableUpstreams() []string {
	if s := os.Getenv("LLMT_WP_UPSTREAMS"); s != "" {
		return strings.Split(s, ",")
	}
	return []string{upBurst, upPaced}
}

func pace() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("LLMT_WP_PACE")); err == nil {
		return d
	}
	return time.Millisecond
}

func tableRounds() int {
	if n, err := strconv.Atoi(os.Getenv("LLMT_WP_ROUNDS")); err == nil && n > 5 {
		return n
	}
	return 5
}

// tableStream is one stream the upstream can send: its events, and the
// same bytes in one piece for a burst.
type tableStream struct {
	evs  [][]byte
	body []byte
}

// tableStreams holds the table's streams, "responses:<layout>" and
// "chat:<layout>", made once by initTables before the upstream starts and
// only read after.
var (
	tableStreams = map[string]*tableStream{}
	tableText    struct{ text, patch, exec string } // what responsesEvents streams
)

func initTables() {
	for _, l := range tableLayouts {
		for kind, evs := range map[string][][]byte{
			"responses": responsesEvents(l),
			"chat":      chatChunks(300, 300, 92, l),
		} {
			tableStreams[kind+":"+l] = &tableStream{evs: evs, body: bytes.Join(evs, nil)}
		}
	}
}

// writeTable sends a table stream as X-Bench-Upstream says.
func writeTable(w http.ResponseWriter, r *http.Request, t *tableStream) {
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	switch r.Header.Get("X-Bench-Upstream") {
	case upPaced:
		gap := pace()
		for i, e := range t.evs {
			if i > 0 {
				time.Sleep(gap)
			}
			_, _ = w.Write(e)
			_ = rc.Flush()
		}
	case upFlush:
		for _, e := range t.evs {
			_, _ = w.Write(e)
			_ = rc.Flush()
		}
	default:
		_, _ = w.Write(t.body)
		_ = rc.Flush()
	}
}

// sortKeys re-encodes a JSON text with every object's keys sorted, numbers
// and string escapes as encoding/json writes them (as jsonString does).
func sortKeys(js string) string {
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		panic(fmt.Sprintf("sortKeys: %v: %.200s", err, js))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// responsesEvents renders the Responses stream of BenchmarkStream's table,
// the shape, about 2.3k events: response.created and in_progress
// with the whole response object, a message of 500 text deltas with its
// content part, an apply_patch function call (the custom tool B converts)
// whose escape-heavy arguments arrive in 8-byte deltas, a native
// exec_command call in 8-byte deltas, and response.completed holding the
// whole output. Keys are in OpenAI's order, or sorted for layoutSorted.
func responsesEvents(layout string) [][]byte {
	const textDeltas, patchLines, piece = 500, 80, 8
	var evs [][]byte
	seq := 0
	ev := func(format string, a ...any) {
		data := fmt.Sprintf(format, a...)
		if !gjson.Valid(data) {
			panic("responsesEvents: not JSON: " + data)
		}
		typ := gjson.Get(data, "type").String()
		if layout == layoutSorted {
			data = sortKeys(data)
		}
		evs = append(evs, []byte("event: "+typ+"\ndata: "+data+"\n\n"))
		seq++
	}
	const tools = `[{"type":"function","description":"Apply a patch","name":"apply_patch","parameters":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"],"additionalProperties":false},"strict":false},{"type":"function","description":"Run a command","name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"],"additionalProperties":false},"strict":false}]`
	response := func(status, output, usage string) string {
		return `{"id":"resp_1","object":"response","created_at":1764400000,"status":"` + status + `","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"max_tool_calls":null,"model":"gpt-5.1-codex","output":` + output + `,"parallel_tool_calls":true,"previous_response_id":null,"prompt_cache_key":"0199a1b2-c3d4","reasoning":{"effort":"medium","summary":null},"safety_identifier":null,"service_tier":"default","store":false,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":` + tools + `,"top_logprobs":0,"top_p":1.0,"truncation":"disabled","usage":` + usage + `,"user":null,"metadata":{}}`
	}
	words := []string{"I'll ", "update ", "`src/módulo_1.py` ", "and ", "then ", "run ", `"grep" `, "to ", "check ", "the ", "result ", "✓.\n"}
	var text strings.Builder
	ev(`{"type":"response.created","sequence_number":%d,"response":%s}`, seq, response("in_progress", "[]", "null"))
	ev(`{"type":"response.in_progress","sequence_number":%d,"response":%s}`, seq, response("in_progress", "[]", "null"))
	ev(`{"type":"response.output_item.added","sequence_number":%d,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","content":[],"role":"assistant"}}`, seq)
	ev(`{"type":"response.content_part.added","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`, seq)
	for k := 0; k < textDeltas; k++ {
		w := words[k%len(words)]
		text.WriteString(w)
		ev(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"delta":%s,"logprobs":[],"obfuscation":"%s"}`, seq, jsonString(w), "abcdefghijklmnop"[:4+k%12])
	}
	t := jsonString(text.String())
	part := `{"type":"output_text","annotations":[],"logprobs":[],"text":` + t + `}`
	msg := `{"id":"msg_1","type":"message","status":"completed","content":[` + part + `],"role":"assistant"}`
	ev(`{"type":"response.output_text.done","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"text":%s,"logprobs":[]}`, seq, t)
	ev(`{"type":"response.content_part.done","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"part":%s}`, seq, part)
	ev(`{"type":"response.output_item.done","sequence_number":%d,"output_index":0,"item":%s}`, seq, msg)
	call := func(oi int, id, callID, name, args string) string {
		ev(`{"type":"response.output_item.added","sequence_number":%d,"output_index":%d,"item":{"id":"%s","type":"function_call","status":"in_progress","arguments":"","call_id":"%s","name":"%s"}}`, seq, oi, id, callID, name)
		for k, p := range pieces(args, piece) {
			ev(`{"type":"response.function_call_arguments.delta","sequence_number":%d,"item_id":"%s","output_index":%d,"delta":%s,"obfuscation":"%s"}`, seq, id, oi, jsonString(p), "abcdefghijklmnop"[:2+k%14])
		}
		ev(`{"type":"response.function_call_arguments.done","sequence_number":%d,"item_id":"%s","output_index":%d,"arguments":%s}`, seq, id, oi, jsonString(args))
		item := fmt.Sprintf(`{"id":"%s","type":"function_call","status":"completed","arguments":%s,"call_id":"%s","name":"%s"}`, id, jsonString(args), callID, name)
		ev(`{"type":"response.output_item.done","sequence_number":%d,"output_index":%d,"item":%s}`, seq, oi, item)
		return item
	}
	patch := escapeHeavyPatch(1, patchLines)
	exec := `{"cmd":` + jsonString(strings.Repeat(`grep -rn "naïve \"x\"" C:\\src | head; `, 40)) + `}`
	fc1 := call(1, "fc_1", "call_1", "apply_patch", `{"input":`+jsonString(patch)+`}`)
	fc2 := call(2, "fc_2", "call_2", "exec_command", exec)
	ev(`{"type":"response.completed","sequence_number":%d,"response":%s}`, seq, response("completed", "["+msg+","+fc1+","+fc2+"]",
		`{"input_tokens":41211,"input_tokens_details":{"cached_tokens":40960},"output_tokens":5120,"output_tokens_details":{"reasoning_tokens":900},"total_tokens":46331}`))
	tableText.text, tableText.patch, tableText.exec = text.String(), patch, exec
	return evs
}

// procCPU is the process's CPU time so far, all threads, those that ended
// included, in nanoseconds: clock_gettime on the process's CPU clock
// (clock_getcpuclockid), the scheduler's own account, where /proc/<pid>/stat
// rounds to clock ticks.
func (p *proc) procCPU(tb testing.TB) int64 {
	const cpuClockSched = 2
	clock := uintptr((^p.cmd.Process.Pid)<<3 | cpuClockSched)
	var ts syscall.Timespec
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clock, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return p.cpu(tb) * (1e9 / ticksPerSecond)
	}
	return ts.Nano()
}

// get sends one request and returns the body; unlike fetch it may run off
// the benchmark's goroutine.
func get(p *proc, path, kase, upstreamMode string, body []byte) ([]byte, error) {
	req, err := http.NewRequest(http.MethodPost, p.url+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer test")
	req.Header.Set("X-Bench-Case", kase)
	req.Header.Set("X-Bench-Upstream", upstreamMode)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s: %.500s", p.name, resp.Status, out)
	}
	return out, err
}

// together runs n copies of one at once and returns the first error.
func together(n int, one func() error) error {
	errs := make(chan error, n)
	for range n {
		go func() { errs <- one() }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// tableRow is what a row needs: the two processes, and a function that
// sends one stream to a process with the given upstream and checks what
// came back.
type tableRow struct {
	name   string // for profiles and warm-up
	pa, pb *proc
	stream func(p *proc, upstreamMode string) error
	events int    // upstream events (or chunks) per stream
	unit   string // "event" or "chunk"
}

var warmed sync.Map

// run warms both processes up once per row (with a burst upstream, so a
// paced row does not spend minutes on it), profiles them with
// LLMT_WP_PROFILE, and measures the rounds.
func (r tableRow) run(b *testing.B, upstreamMode string) {
	turn := func(p *proc, mode string) {
		if err := together(concurrent, func() error { return r.stream(p, mode) }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if _, done := warmed.LoadOrStore(r.name, true); !done {
		for i := 0; i < warmRounds; i++ {
			turn(r.pa, upBurst)
			turn(r.pb, upBurst)
		}
	}
	profile(b, strings.ReplaceAll(r.name, "/", "-"), r.pa, r.pb, func(p *proc) { turn(p, upstreamMode) })

	n := tableRounds()
	per := max(1, (b.N+n-1)/n)
	ratios := make([]float64, 0, n)
	var cpuA, cpuB int64
	ua0, _ := r.pa.cpuSplit(b)
	ub0, _ := r.pb.cpuSplit(b)
	ioA, ioB := r.pa.syscalls(), r.pb.syscalls()
	b.ResetTimer()
	b.StartTimer()
	for round := 0; round < n; round++ {
		a0, b0 := r.pa.procCPU(b), r.pb.procCPU(b)
		for i := 0; i < per; i++ {
			first, second := r.pa, r.pb
			if (round*per+i)%2 == 1 {
				first, second = second, first
			}
			turn(first, upstreamMode)
			turn(second, upstreamMode)
		}
		da, db := r.pa.procCPU(b)-a0, r.pb.procCPU(b)-b0
		cpuA += da
		cpuB += db
		ratios = append(ratios, float64(db)/float64(da))
	}
	b.StopTimer()
	rounds := make([]string, len(ratios))
	for i, x := range ratios {
		rounds[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	b.Logf("%d rounds of %d turns, B/A CPU: %s", n, per, strings.Join(rounds, " "))
	streams := float64(n * per * concurrent)
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "x_median")
	b.ReportMetric(ratios[0], "x_min")
	b.ReportMetric(ratios[len(ratios)-1], "x_max")
	b.ReportMetric(float64(cpuB)/float64(cpuA), "x_passthrough_cpu")
	b.ReportMetric(float64(cpuA)/1e6/streams, "A_cpu_ms/stream")
	b.ReportMetric(float64(cpuB)/1e6/streams, "B_cpu_ms/stream")
	ua, _ := r.pa.cpuSplit(b)
	ub, _ := r.pb.cpuSplit(b)
	b.ReportMetric(float64(ua-ua0)*1e3/ticksPerSecond/streams, "A_user_ms/stream")
	b.ReportMetric(float64(ub-ub0)*1e3/ticksPerSecond/streams, "B_user_ms/stream")
	// The added CPU per upstream event holds steadier than the ratio: A's
	// cost per event (mostly system calls) swings with the machine's load
	// and with how many events a read finds.
	b.ReportMetric(float64(cpuB-cpuA)/1e3/streams/float64(r.events), "added_us/"+r.unit)
	for _, m := range []struct {
		unit   string
		p      *proc
		before [3]int64
	}{{"A", r.pa, ioA}, {"B", r.pb, ioB}} {
		after := m.p.syscalls()
		if m.before[0] >= 0 && after[0] >= 0 {
			b.ReportMetric(float64(after[0]-m.before[0])/streams, m.unit+"_reads/stream")
			b.ReportMetric(float64(after[1]-m.before[1])/streams, m.unit+"_writes/stream")
		}
		if m.before[2] >= 0 && after[2] >= 0 {
			b.ReportMetric(float64(after[2]-m.before[2])/streams, m.unit+"_sleeps/stream")
		}
	}
	b.ReportMetric(float64(n), "rounds")
	b.ReportMetric(float64(r.events), r.unit+"s")
}

// BenchmarkStream: CPU of B (field_custom_tools_to_function) over CPU of A
// (plain reverse_proxy) for the Responses stream of responsesEvents, the
// request declaring apply_patch as a custom tool so the rule converts the
// upstream's function call back into a custom tool call; one row per
// layout and upstream (see the top of this file).
func BenchmarkStream(b *testing.B) {
	setup(b)
	for _, layout := range tableLayouts {
		for _, mode := range tableUpstreams() {
			b.Run(layout+"/"+mode, func(b *testing.B) {
				kase := "responses:" + layout
				t := tableStreams[kase]
				// A passes the upstream's bytes; B's answer is checked
				// whole once per row, then compared with that.
				if out, err := get(procA, responsesPath, kase, mode, streamBody); err != nil || !bytes.Equal(out, t.body) {
					b.Fatalf("A: the stream did not pass through untouched (%d bytes, want %d): %v", len(out), len(t.body), err)
				}
				want, err := get(procB, responsesPath, kase, mode, streamBody)
				if err != nil {
					b.Fatal(err)
				}
				checkCustom(b, want)
				row := tableRow{name: "stream/" + layout + "/" + mode, pa: procA, pb: procB, events: len(t.evs), unit: "event",
					stream: func(p *proc, m string) error {
						out, err := get(p, responsesPath, kase, m, streamBody)
						if err == nil && p == procA && !bytes.Equal(out, t.body) {
							err = fmt.Errorf("A: %d bytes, want the upstream's %d", len(out), len(t.body))
						}
						if err == nil && p == procB && !bytes.Equal(out, want) {
							err = fmt.Errorf("B: %d bytes differ from the checked answer's %d", len(out), len(want))
						}
						return err
					}}
				row.run(b, mode)
			})
		}
	}
}

// checkCustom checks that B's answer to responsesEvents is the stream the
// client must see: every event named after its type and numbered in order
// from 0; the text deltas all there; the apply_patch call a custom tool
// call whose input deltas add up to the patch, with no trace of the
// function call; the native call's argument deltas adding up to its
// arguments; and response.completed, once and last, holding the message,
// the custom call and the native call.
func checkCustom(b *testing.B, out []byte) {
	b.Helper()
	if len(out) == 0 {
		b.Fatal("B: empty answer")
	}
	evs := strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n")
	count := map[string]int{}
	var text, input, args strings.Builder
	var last gjson.Result
	for i, e := range evs {
		name, data, ok := strings.Cut(e, "\ndata: ")
		typ := gjson.Get(data, "type").String()
		if !ok || name != "event: "+typ || !gjson.Valid(data) {
			b.Fatalf("B: event %d is not a named Responses event: %.200q", i, e)
		}
		if n := gjson.Get(data, "sequence_number"); !n.Exists() || n.Int() != int64(i) {
			b.Fatalf("B: event %d (%s) has sequence_number %s", i, typ, n.Raw)
		}
		ev := gjson.Parse(data)
		switch typ {
		case "response.output_text.delta":
			text.WriteString(ev.Get("delta").String())
		case "response.custom_tool_call_input.delta":
			input.WriteString(ev.Get("delta").String())
		case "response.custom_tool_call_input.done":
			if ev.Get("input").String() != tableText.patch {
				b.Fatalf("B: custom_tool_call_input.done does not hold the patch: %.200s", data)
			}
		case "response.function_call_arguments.delta", "response.function_call_arguments.done":
			if ev.Get("output_index").Int() != 2 {
				b.Fatalf("B: a function call event for the custom tool call: %.200s", data)
			}
			args.WriteString(ev.Get("delta").String())
		}
		count[typ]++
		last = ev
	}
	if text.String() != tableText.text || count["response.output_text.delta"] != 500 {
		b.Fatalf("B: %d text deltas, %d bytes of text; want 500, %d", count["response.output_text.delta"], text.Len(), len(tableText.text))
	}
	if input.String() != tableText.patch || count["response.custom_tool_call_input.done"] != 1 {
		b.Fatalf("B: the custom call's input deltas add up to %d bytes, want the patch's %d; counts %v", input.Len(), len(tableText.patch), count)
	}
	if args.String() != tableText.exec {
		b.Fatalf("B: the native call's argument deltas add up to %q", args.String())
	}
	r := last.Get("response")
	got := fmt.Sprint(r.Get("output.#.type").Value())
	if typ := last.Get("type").String(); typ != "response.completed" || count[typ] != 1 {
		b.Fatalf("B: the stream ends with %s; counts %v", typ, count)
	}
	if got != "[message custom_tool_call function_call]" ||
		r.Get("output.0.content.0.text").String() != tableText.text ||
		r.Get("output.1.input").String() != tableText.patch || r.Get("output.1.call_id").String() != "call_1" || r.Get("output.1.name").String() != "apply_patch" ||
		r.Get("output.2.arguments").String() != tableText.exec || r.Get("output.2.call_id").String() != "call_2" {
		b.Fatalf("B: response.completed does not hold what the upstream sent: output %s", got)
	}
}

// BenchmarkBridgeStream: CPU of a Responses client's stream bridged from a
// Chat upstream by responses_to_chat (B) over the CPU of the same Chat
// stream passed through untouched to a Chat client (A): a 1,939-chunk
// DeepSeek-style stream with reasoning, text, and two calls whose
// escape-heavy arguments arrive in 12-byte pieces; one row per layout of
// the Chat chunks and upstream (see the top of this file).
func BenchmarkBridgeStream(b *testing.B) {
	setupBridge(b)
	for _, layout := range tableLayouts {
		for _, mode := range tableUpstreams() {
			b.Run(layout+"/"+mode, func(b *testing.B) {
				kase := "chat:" + layout
				t := tableStreams[kase]
				// A forwards the upstream's bytes; B sends the upstream a
				// Chat request on the Chat path and answers with Responses
				// events, checked whole once per row; after that each
				// answer must have as many events and end with
				// response.completed.
				if out, err := get(procA, chatPath, kase, mode, bridgeChatBody); err != nil || !bytes.Equal(out, t.body) {
					b.Fatalf("A: the Chat stream did not pass through untouched (%d bytes, want %d): %v", len(out), len(t.body), err)
				}
				req, err := http.NewRequest(http.MethodPost, procBridge.url+responsesPath, bytes.NewReader(bridgeResponsesBody))
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Bench-Case", kase)
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
				events := checkBridged(b, out)
				completed := []byte("\n\nevent: response.completed\ndata: ")
				row := tableRow{name: "bridge/" + layout + "/" + mode, pa: procA, pb: procBridge, events: len(t.evs), unit: "chunk",
					stream: func(p *proc, m string) error {
						if p == procA {
							out, err := get(p, chatPath, kase, m, bridgeChatBody)
							if err == nil && !bytes.Equal(out, t.body) {
								err = fmt.Errorf("A: %d bytes, want the upstream's %d", len(out), len(t.body))
							}
							return err
						}
						out, err := get(p, responsesPath, kase, m, bridgeResponsesBody)
						if err != nil {
							return err
						}
						end := bytes.LastIndex(out, completed)
						if n := bytes.Count(out, []byte("\n\n")); n != events || end < 0 || bytes.IndexByte(out[end+len(completed):], '\n') != len(out)-end-len(completed)-2 {
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
