package wholeprocess

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"
)

// BenchmarkBridgeMemory: how far the resident memory of a Caddy process
// running responses_to_chat rises while it bridges one large Chat stream
// to a Responses client, each case in a process of its own (a heap that
// grew in an earlier case would hide the next one's rise). The peak is
// VmHWM from /proc/<pid>/status, reset through clear_refs before the
// request; the rise is over VmRSS just before it.
//
//	go test -run '^$' -bench BridgeMemory -benchtime=1x ./integration/wholeprocess/
//
// The cases, with what the client must see:
//
//   - call30MB_limit1MiB: one call whose arguments grow to 30 MB under
//     max_call_buffer 1MiB: the stream fails with max_call_buffer_exceeded
//     as soon as the arguments pass 1 MiB.
//   - call30MB_limit64MiB: the same call under max_call_buffer 64MiB:
//     delivered whole.
//   - reasoning50MB: 50 MB of reasoning_content, then a short answer, under
//     the default max_reasoning: every delta reaches the client; the
//     reasoning item keeps no text past the cap.
//   - calls24x4MB: 24 calls of 4 MB one after another in one answer under
//     the default max_call_buffer (8 MiB): all delivered. Every call's
//     done events wait for finish_reason and response.completed carries
//     all 24, so the answer's calls are all held at once.
//   - requests24x4MB: 24 answers of one 4 MB call each, one request after
//     the other: the rise over all of them.
//
// MB_rss_rise is the rise in MB, x_payload the rise over the bytes of
// arguments or reasoning one answer sends.
func BenchmarkBridgeMemory(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("needs Linux /proc")
	}
	up := httptest.NewServer(http.HandlerFunc(serveBigChat))
	defer up.Close()
	host := strings.TrimPrefix(up.URL, "http://")
	const mb = 1 << 20
	cases := []struct {
		name, global string
		kase         string
		requests     int // one after the other
		payload      int // the bytes of arguments or reasoning one answer sends
		check        func(b *testing.B, p *proc, s bridgeSummary)
	}{
		{"call30MB_limit1MiB", "max_call_buffer 1MiB", "call:1:30", 1, 30 * mb, func(b *testing.B, p *proc, s bridgeSummary) {
			s.failedWith(b, "max_call_buffer_exceeded")
			if s.argBytes > 2*mb || s.count["error"] != 1 {
				b.Fatalf("%d argument bytes and %d error events reached the client, want at most about 1 MiB and one", s.argBytes, s.count["error"])
			}
			if n := streamErrors(b, p, "max_call_buffer_exceeded"); n < 1 {
				b.Fatalf("stream_errors_total for max_call_buffer_exceeded is %v", n)
			}
		}},
		{"call30MB_limit64MiB", "max_call_buffer 64MiB", "call:1:30", 1, 30 * mb, func(b *testing.B, _ *proc, s bridgeSummary) {
			s.completedWith(b, 1, 30*mb)
		}},
		{"reasoning50MB", "", "reasoning:50", 1, 50 * mb, func(b *testing.B, _ *proc, s bridgeSummary) {
			if s.terminal != "response.completed" || s.reasoningBytes != 50*mb {
				b.Fatalf("ended with %s after %d reasoning bytes, want response.completed after %d", s.terminal, s.reasoningBytes, 50*mb)
			}
			if env := s.last.Get("response.output.0.encrypted_content").String(); env != "llmt1.eyJwIjoiZGVlcHNlZWsiLCJjdXQiOnRydWV9" {
				b.Fatalf("the reasoning item's envelope is %q, want the cut one", env)
			}
		}},
		{"calls24x4MB", "", "call:24:4", 1, 96 * mb, func(b *testing.B, _ *proc, s bridgeSummary) {
			s.completedWith(b, 24, 4*mb)
		}},
		{"requests24x4MB", "", "call:1:4", 24, 4 * mb, func(b *testing.B, _ *proc, s bridgeSummary) {
			s.completedWith(b, 1, 4*mb)
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			p, err := startCaddy("bridge-mem", fmt.Sprintf(`	llm_transform {
		%s
		rule responses_to_chat {
			profile deepseek
		}
	}
	reverse_proxy %s`, c.global, host))
			if err != nil {
				b.Fatal(err)
			}
			defer stopProc(p)
			pid := p.cmd.Process.Pid
			var rise, base float64
			for i := 0; i < b.N; i++ {
				if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
					b.Skipf("cannot reset the peak resident size: %v", err)
				}
				before := procStatus(b, pid, "VmRSS:")
				for range c.requests {
					s := bridgeBig(b, p, c.kase)
					c.check(b, p, s)
				}
				rise = max(rise, float64(procStatus(b, pid, "VmHWM:")-before))
				base = float64(before)
			}
			b.ReportMetric(rise/mb, "MB_rss_rise")
			b.ReportMetric(rise/float64(c.payload), "x_payload")
			b.ReportMetric(base/mb, "MB_rss_before")
		})
	}
}

// streamErrors reads caddy_llm_transform_stream_errors_total for reason
// from p's metrics.
func streamErrors(b *testing.B, p *proc, reason string) float64 {
	resp, err := http.Get(p.admin + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	prefix := `caddy_llm_transform_stream_errors_total{reason="` + reason + `"} `
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}

// stopProc ends one process of this file's before the others.
func stopProc(p *proc) {
	mu.Lock()
	defer mu.Unlock()
	_ = p.cmd.Process.Kill()
	<-p.done
	_ = os.RemoveAll(p.dir)
	for i, q := range started {
		if q == p {
			started = append(started[:i], started[i+1:]...)
			break
		}
	}
}

// bridgeSummary is what a client read from a bridged stream, without
// keeping it: event counts, the bytes of argument and reasoning deltas,
// and the terminal event.
type bridgeSummary struct {
	count          map[string]int
	argBytes       int // decoded bytes of function_call_arguments deltas
	reasoningBytes int // decoded bytes of reasoning_text deltas
	terminal       string
	last           gjson.Result
}

func (s bridgeSummary) failedWith(b *testing.B, code string) {
	b.Helper()
	if s.terminal != "response.failed" || s.last.Get("response.error.code").String() != code {
		b.Fatalf("ended with %s %s, want response.failed with %s; events %v", s.terminal, s.last.Get("response.error").Raw, code, s.count)
	}
}

// completedWith checks that the stream completed with n calls whose
// arguments are size bytes each, in the done items and the final object.
func (s bridgeSummary) completedWith(b *testing.B, n, size int) {
	b.Helper()
	out := s.last.Get("response.output")
	if s.terminal != "response.completed" || s.count["response.output_item.done"] != n || len(out.Array()) != n || s.argBytes != n*size {
		b.Fatalf("ended with %s: %d items done, %d in the final object, %d argument bytes; want %d calls of %d", s.terminal, s.count["response.output_item.done"], len(out.Array()), s.argBytes, n, size)
	}
	for i, it := range out.Array() {
		if a := it.Get("arguments").String(); len(a) != size || it.Get("call_id").String() != "call_"+strconv.Itoa(i) {
			b.Fatalf("output[%d]: %d argument bytes, call_id %s", i, len(a), it.Get("call_id").String())
		}
	}
}

// bridgeBig sends the streaming Responses request for kase and reads the
// answer event by event.
func bridgeBig(b *testing.B, p *proc, kase string) bridgeSummary {
	b.Helper()
	resp := post(b, p, responsesPath, kase, []byte(`{"model":"deepseek-v4-pro","stream":true,"input":"go","tools":[{"type":"function","name":"write","parameters":{"type":"object"}}]}`))
	defer resp.Body.Close()
	s := bridgeSummary{count: map[string]int{}}
	r := bufio.NewReaderSize(resp.Body, 1<<16)
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long data line (a done event, the final object): read it whole.
			head := append([]byte(nil), line...) // ReadBytes reuses the buffer
			rest, err2 := r.ReadBytes('\n')
			line, err = append(head, rest...), err2
		}
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			d = bytes.TrimSpace(d)
			typ := gjson.GetBytes(d, "type").String()
			s.count[typ]++
			switch typ {
			case "response.function_call_arguments.delta":
				s.argBytes += len(gjson.GetBytes(d, "delta").String())
			case "response.reasoning_text.delta":
				s.reasoningBytes += len(gjson.GetBytes(d, "delta").String())
			case "response.completed", "response.failed", "response.incomplete", "error":
				if s.terminal == "" {
					s.terminal = typ
					s.last = gjson.ParseBytes(append([]byte(nil), d...))
				}
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF && s.count["error"] > 0 {
			// A stream the gateway ends early is cut after its error event.
			return s
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// bigPiece is the argument text each delta carries, JSON-escaped in the
// chunk: 16 KiB decoded, with a quote and a newline escape in every line,
// as a patch has.
var bigPiece = func() string {
	line := `+	fmt.Println("a line of the patch, as it goes into the file")` + "\n"
	var sb strings.Builder
	for sb.Len()+len(line) <= 16<<10 {
		sb.WriteString(line)
	}
	s := sb.String()
	return s + strings.Repeat("x", 16<<10-len(s))
}()

var bigPieceJSON = sync.OnceValue(func() string { return jsonString(bigPiece) })

// serveBigChat is the upstream of BenchmarkBridgeMemory: a Chat stream
// written as it is generated, after X-Bench-Case, "call:<n>:<MB>" (n
// calls of MB megabytes each, then finish_reason tool_calls) or
// "reasoning:<MB>" (that much reasoning_content, then a short answer).
func serveBigChat(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	bw := bufio.NewWriterSize(w, 1<<16)
	rc := http.NewResponseController(w)
	chunk := func(delta, finish string) {
		_, _ = bw.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","created":1764400000,"model":"deepseek-v4-pro","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + "}]}\n\n")
	}
	flush := func() { _ = bw.Flush(); _ = rc.Flush() }
	piece := bigPieceJSON()
	f := strings.Split(r.Header.Get("X-Bench-Case"), ":")
	chunk(`{"role":"assistant","content":null}`, "null")
	finish := `"stop"`
	switch f[0] {
	case "call":
		n, _ := strconv.Atoi(f[1])
		size, _ := strconv.Atoi(f[2])
		for i := range n {
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"call_%d","type":"function","function":{"name":"write","arguments":""}}]}`, i, i), "null")
			for k := 0; k < size<<20/len(bigPiece); k++ {
				chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, piece), "null")
				if k%16 == 15 {
					flush()
				}
			}
		}
		finish = `"tool_calls"`
	case "reasoning":
		size, _ := strconv.Atoi(f[1])
		for k := 0; k < size<<20/len(bigPiece); k++ {
			chunk(`{"content":null,"reasoning_content":`+piece+`}`, "null")
			if k%16 == 15 {
				flush()
			}
		}
		chunk(`{"content":"Done."}`, "null")
	}
	chunk(`{}`, finish)
	_, _ = bw.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","created":1764400000,"model":"deepseek-v4-pro","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}` + "\n\ndata: [DONE]\n\n")
	flush()
}
