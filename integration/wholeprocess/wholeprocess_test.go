// Package wholeprocess measures llm_transform from outside, as the OS sees
// it: two Caddy processes started from this one test binary, process A with
// a plain reverse_proxy route and process B with the same route behind
// llm_transform, driven with the same load, their CPU time read from
// /proc/<pid>/stat. BenchmarkBridgeStream has a B of its own, whose
// llm_transform bridges Responses clients to a Chat upstream.
//
// All the work is in Benchmark functions, so `go test ./...` only compiles
// this package. BenchmarkStream and BenchmarkBridgeStream are a table of
// rows (layout × upstream, see streamtable_test.go) whose paced rows take
// about half a minute each whatever -benchtime asks, so run them at the
// default -benchtime and the others with a count:
//
//	go test -run '^$' -bench '^Benchmark(Bridge)?Stream$' ./integration/wholeprocess/
//	go test -run '^$' -bench 'Request|TTFB|InProcess' -benchtime=100x ./integration/wholeprocess/
//
// With LLMT_WP_PIN=0/1 the benchmark process, which is the upstream and
// the client, runs on CPU 0 and the Caddy processes on CPU 1 (taskset), as
// on a gateway whose upstream and clients are other machines; unpinned,
// the three share both CPUs as the scheduler places them.
//
// With LLMT_WP_PROFILE=<dir> each benchmark first drives its load for
// LLMT_WP_PROFILE_SECONDS (default 10) while it fetches a CPU profile of both
// processes from their admin endpoints, written to <dir>/<case>-{A,B}.pprof.
package wholeprocess

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/tidwall/gjson"

	_ "github.com/llmtransform/caddy-llm-transform"
	"github.com/llmtransform/caddy-llm-transform/streambuf"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// The test binary doubles as the Caddy binary: with envCaddy set it runs
// `caddy run` on the Caddyfile named by envConfig and never returns.
const (
	envCaddy  = "LLMT_CADDY"
	envConfig = "LLMT_CADDY_CONFIG"
)

func TestMain(m *testing.M) {
	if os.Getenv(envCaddy) == "1" {
		os.Args = []string{"caddy", "run", "--config", os.Getenv(envConfig), "--adapter", "caddyfile"}
		caddycmd.Main()
		return
	}
	code := m.Run()
	stopAll()
	os.Exit(code)
}

// proc is one Caddy process.
type proc struct {
	name  string
	cmd   *exec.Cmd
	url   string // the site, http://127.0.0.1:port
	admin string // the admin endpoint, http://127.0.0.1:port
	dir   string
	done  chan struct{}
}

// cpu is the process's user+system CPU time so far, all threads, from
// /proc/<pid>/stat, in clock ticks (1/100 s on Linux).
func (p *proc) cpu(tb testing.TB) int64 {
	ut, st := p.cpuSplit(tb)
	return ut + st
}

// cpuSplit returns the process's CPU time so far in clock ticks, in user
// mode and in the kernel: the kernel's share is the system calls and the
// sleeping and waking of threads, user mode the proxy's own work.
func (p *proc) cpuSplit(tb testing.TB) (user, sys int64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	ut, err1 := strconv.ParseInt(f[14-3], 10, 64)
	st, err2 := strconv.ParseInt(f[15-3], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("unreadable /proc stat: %q", raw)
	}
	return ut, st
}

const ticksPerSecond = 100 // USER_HZ, fixed at 100 on Linux for /proc

var (
	setupOnce sync.Once
	setupErr  error
	procA     *proc // plain reverse_proxy
	procB     *proc // llm_transform in front of the same reverse_proxy
	upstream  *httptest.Server
	client    = &http.Client{Transport: &http.Transport{
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}}
	started []*proc
	mu      sync.Mutex
)

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startCaddy runs this binary as Caddy with route as the site's body and
// waits until the site answers.
func startCaddy(name, route string) (*proc, error) {
	if runtime.GOOS != "linux" {
		return nil, errors.New("needs Linux /proc")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	adminPort, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "llmt-wholeprocess-"+name+"-")
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	persist_config off
	auto_https off
	skip_install_trust
	grace_period 1ns
	log {
		level WARN
	}
}
:%d {
%s
}
`, adminPort, port, route)
	cfg := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "caddy.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envCaddy+"=1", envConfig+"="+cfg,
		"HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Killed with this process too, should it die without stopAll.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, dir: dir, done: make(chan struct{}),
		url: fmt.Sprintf("http://127.0.0.1:%d", port), admin: fmt.Sprintf("http://127.0.0.1:%d", adminPort)}
	mu.Lock()
	started = append(started, p)
	mu.Unlock()
	go func() { _ = cmd.Wait(); logf.Close(); close(p.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-p.done:
			log, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("caddy %s exited: %s", name, log)
		default:
		}
		if resp, err := client.Get(p.url + "/ready"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return p, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("caddy %s not ready after 30s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stopAll() {
	mu.Lock()
	defer mu.Unlock()
	for _, p := range started {
		_ = p.cmd.Process.Kill()
		<-p.done
		_ = os.RemoveAll(p.dir)
	}
	started = nil
	if upstream != nil {
		upstream.Close()
	}
}

// setup starts the canned upstream and both Caddy processes once for the
// whole benchmark binary; TestMain stops them.
func setup(b *testing.B) {
	b.Helper()
	setupOnce.Do(func() {
		initTables() // before the upstream serves them
		upstream = httptest.NewServer(http.HandlerFunc(serveUpstream))
		procA, procB, setupErr = startPair("A", "B", upstream, `		rule field_custom_tools_to_function {
			names *
		}
`)
	})
	if setupErr != nil {
		b.Fatal(setupErr)
	}
}

// startPair starts the two processes of a benchmark in front of up: A a
// plain reverse_proxy, B the same behind llm_transform with rules (the
// Caddyfile lines inside its block), and pins them (see pin).
func startPair(nameA, nameB string, up *httptest.Server, rules string) (a, b *proc, err error) {
	addr := strings.TrimPrefix(up.URL, "http://")
	if a, err = startCaddy(nameA, "\treverse_proxy "+addr); err != nil {
		return nil, nil, err
	}
	if b, err = startCaddy(nameB, "\tllm_transform {\n"+rules+"\t}\n\treverse_proxy "+addr); err != nil {
		return nil, nil, err
	}
	return a, b, pin(os.Getpid(), a, b)
}

// pin, when LLMT_WP_PIN is "<cpus>/<cpus>" (taskset lists, e.g. 0/1),
// moves every thread of process load (this one: the upstream and the
// client; 0 for none) to the first CPUs and those of the Caddy processes
// to the second, as on a gateway whose upstream and clients are other
// machines.
func pin(load int, caddies ...*proc) error {
	spec := os.Getenv("LLMT_WP_PIN")
	if spec == "" {
		return nil
	}
	loadCPUs, caddyCPUs, ok := strings.Cut(spec, "/")
	if !ok {
		return fmt.Errorf("LLMT_WP_PIN=%q: want <cpus of the load>/<cpus of Caddy>", spec)
	}
	set := func(cpus string, pid int) error {
		if out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput(); err != nil {
			return fmt.Errorf("taskset -c %s %d: %v: %s", cpus, pid, err, out)
		}
		return nil
	}
	if load != 0 {
		if err := set(loadCPUs, load); err != nil {
			return err
		}
	}
	for _, p := range caddies {
		if err := set(caddyCPUs, p.cmd.Process.Pid); err != nil {
			return err
		}
	}
	return nil
}

// The upstream answers with canned bytes chosen by X-Bench-Case: a stream
// of the table (tableStreams, "responses:<layout>" or "chat:<layout>"),
// written as X-Bench-Upstream says (see writeTable), or one of the fixed
// cases below; with X-Bench-Check it also says whether the body it got
// still had a custom tool call in it, whether it was a Chat request, and
// its path.
var (
	streamOnce  sync.Once
	streamEvs   [][]byte // BenchmarkStreamInProcess and BenchmarkStreamEngine
	ttfbEvs     [][]byte
	tinyJSON    = []byte(`{"id":"resp_1","object":"response","status":"completed","model":"m","output":[{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"ok"}]}]}`)
	streamBody  = []byte(`{"model":"m","stream":true,"tools":[{"type":"custom","name":"apply_patch"},{"type":"function","name":"exec_command","parameters":{"type":"object"}}],"input":"Edit the files"}`)
	requestOnce sync.Once
	requestDoc  []byte
	requestN    int
)

func serveUpstream(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Bench-Check") != "" {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Saw-Custom", strconv.FormatBool(bytes.Contains(body, []byte(`"custom_tool_call"`)) || bytes.Contains(body, []byte(`"type":"custom"`))))
		w.Header().Set("X-Saw-Chat", strconv.FormatBool(gjson.GetBytes(body, "messages").IsArray() && !gjson.GetBytes(body, "input").Exists()))
		w.Header().Set("X-Saw-Path", r.URL.Path)
	} else {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	kase := r.Header.Get("X-Bench-Case")
	if t := tableStreams[kase]; t != nil {
		writeTable(w, r, t)
		return
	}
	var evs [][]byte
	switch kase {
	case "ttfb":
		evs = ttfbEvs
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(tinyJSON)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	for i, e := range evs {
		_, _ = w.Write(e)
		_ = rc.Flush()
		if i == 0 && r.Header.Get("X-Bench-Gap") != "" {
			time.Sleep(20 * time.Millisecond) // a first event must not wait for the next
		}
	}
}

func jsonString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// escapeHeavyPatch is an apply_patch input whose every line has quotes,
// backslashes and non-ASCII text.
func escapeHeavyPatch(i, lines int) string {
	var p strings.Builder
	fmt.Fprintf(&p, "*** Begin Patch\n*** Update File: src/módulo_%d.py\n@@ def grüße():\n", i)
	for k := 0; k < lines; k++ {
		fmt.Fprintf(&p, "-    print(\"Hallo \\\"%d\\\"\", r\"C:\\temp\\alt_%d\") # naïve\n", k, k)
		fmt.Fprintf(&p, "+    print(\"Grüße, \\\"Welt\\\" — %d 🦀\", r\"C:\\Users\\José\\neu_%d\") # ça\n", k, k)
	}
	p.WriteString("*** End Patch\n")
	return p.String()
}

// pieces cuts s into pieces of n bytes, longer where a rune would be cut.
func pieces(s string, n int) []string {
	var out []string
	for i := 0; i < len(s); {
		j := min(i+n, len(s))
		for j < len(s) && s[j]&0xC0 == 0x80 { // keep runes whole
			j++
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// streamEvents renders a Responses stream of about 2.3k events: text deltas,
// one apply_patch function call (a converted custom tool) whose arguments
// arrive in about a thousand 12-byte deltas, and one native exec_command
// call. It was BenchmarkStream's stream before the table (responsesEvents);
// the in-process benchmarks keep it so their figures stay comparable.
func streamEvents(textDeltas, patchLines int) [][]byte {
	var evs [][]byte
	seq := 0
	ev := func(format string, a ...any) {
		data := fmt.Sprintf(format, a...)
		typ := gjson.Get(data, "type").String()
		evs = append(evs, []byte("event: "+typ+"\ndata: "+data+"\n\n"))
		seq++
	}
	ev(`{"type":"response.created","sequence_number":%d,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`, seq)
	ev(`{"type":"response.output_item.added","sequence_number":%d,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`, seq)
	for k := 0; k < textDeltas; k++ {
		ev(`{"type":"response.output_text.delta","sequence_number":%d,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"some streamed words ","logprobs":[],"obfuscation":"abcdefgh"}`, seq)
	}
	ev(`{"type":"response.output_item.done","sequence_number":%d,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[]}}`, seq)
	call := func(oi int, id, callID, name, args string) {
		ev(`{"type":"response.output_item.added","sequence_number":%d,"output_index":%d,"item":{"id":"%s","type":"function_call","status":"in_progress","arguments":"","call_id":"%s","name":"%s"}}`, seq, oi, id, callID, name)
		for _, piece := range pieces(args, 12) {
			ev(`{"type":"response.function_call_arguments.delta","sequence_number":%d,"item_id":"%s","output_index":%d,"delta":%s,"obfuscation":"abc"}`, seq, id, oi, jsonString(piece))
		}
		ev(`{"type":"response.function_call_arguments.done","sequence_number":%d,"item_id":"%s","output_index":%d,"arguments":%s}`, seq, id, oi, jsonString(args))
		ev(`{"type":"response.output_item.done","sequence_number":%d,"output_index":%d,"item":{"id":"%s","type":"function_call","status":"completed","arguments":%s,"call_id":"%s","name":"%s"}}`, seq, oi, id, jsonString(args), callID, name)
	}
	call(1, "fc_1", "call_1", "apply_patch", `{"input":`+jsonString(escapeHeavyPatch(1, patchLines))+`}`)
	call(2, "fc_2", "call_2", "exec_command", `{"cmd":`+jsonString(strings.Repeat(`grep -rn "naïve \"x\"" C:\\src | head; `, 40))+`}`)
	ev(`{"type":"response.completed","sequence_number":%d,"response":{"id":"resp_1","object":"response","status":"completed","output":[]}}`, seq)
	return evs
}

func initStreams() {
	streamOnce.Do(func() {
		streamEvs = streamEvents(1000, 92)
		ttfbEvs = streamEvents(20, 2)
	})
}

// escapeHeavyRequest builds a ~1 MB Codex-like Responses request around the
// real Codex turn-1 body (as transforms' codexLikeRequest does), with 244
// rounds of history: a message, encrypted reasoning, an apply_patch custom
// call whose patch has quotes, backslashes and non-ASCII text on every line,
// its output, and an exec_command function call with a long output.
func escapeHeavyRequest(b *testing.B) ([]byte, int) {
	requestOnce.Do(func() { requestDoc, requestN = escapeHeavyBody(b, 244), 244 })
	return requestDoc, requestN
}

// escapeHeavyBody builds a Codex-like request around the real Codex turn
// with rounds rounds of history, each with a custom apply_patch call and
// its output.
func escapeHeavyBody(b *testing.B, rounds int) []byte {
	raw, err := os.ReadFile("../../transforms/transformtest/testdata/codex-request.json")
	if err != nil {
		b.Fatal(err)
	}
	compact := gjson.ParseBytes(raw).Get("@ugly").Raw
	input := gjson.Get(compact, "input")
	inputEnd := input.Index + len(input.Raw) - 1 // the closing ]
	output := jsonString(strings.Repeat("Chunk ID: 1\nOutput:\nREADME.md\nsrc/módulo.py \"quoted\" \\ path ✓\n", 18))
	var hist strings.Builder
	for i := 0; i < rounds; i++ {
		id := fmt.Sprintf("call_%d", i)
		fmt.Fprintf(&hist, `,{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Working on step %s: \"naïve\" C:\\src"}]}`, id)
		fmt.Fprintf(&hist, `,{"type":"reasoning","summary":[],"encrypted_content":"%s"}`, strings.Repeat("gAAAAB", 100))
		fmt.Fprintf(&hist, `,{"type":"custom_tool_call","id":"ctc_%s","status":"completed","call_id":"%s","name":"apply_patch","input":%s}`, id, id, jsonString(escapeHeavyPatch(i, 8)))
		fmt.Fprintf(&hist, `,{"type":"custom_tool_call_output","id":"ctco_%s","call_id":"%s","output":"Success. Updated the following files:\nM src/módulo_%d.py\n"}`, id, id, i)
		fmt.Fprintf(&hist, `,{"type":"function_call","call_id":"%sx","name":"exec_command","arguments":%s}`, id, jsonString(`{"cmd":"rg -n \"naïve\" C:\\src"}`))
		fmt.Fprintf(&hist, `,{"type":"function_call_output","call_id":"%sx","output":%s}`, id, output)
	}
	doc := []byte(compact[:inputEnd] + hist.String() + compact[inputEnd:])
	if !json.Valid(doc) {
		b.Fatal("generated request is not JSON")
	}
	return doc
}

// The paths the clients post to.
const (
	responsesPath = "/v1/responses"
	chatPath      = "/v1/chat/completions"
)

// post sends body to path on p with the case header and returns the
// response; the caller reads and closes it.
func post(b *testing.B, p *proc, path, kase string, body []byte, extra ...string) *http.Response {
	req, err := http.NewRequest(http.MethodPost, p.url+path, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer test")
	req.Header.Set("X-Bench-Case", kase)
	for _, h := range extra {
		req.Header.Set(h, "1")
	}
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		b.Fatalf("%s: %s: %s", p.name, resp.Status, msg)
	}
	return resp
}

func fetch(b *testing.B, p *proc, path, kase string, body []byte) []byte {
	resp := post(b, p, path, kase, body)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// measure runs one request to each process per iteration, alternating which
// goes first, and returns each process's CPU ticks over the loop.
func measure(b *testing.B, pa, pb *proc, one func(p *proc)) (ticksA, ticksB int64) {
	// Unmeasured rounds first: a gateway runs for days, and what it costs
	// then is with its pools filled and its heap grown, not its first few
	// requests' start-up, which a short run would otherwise weigh heavily.
	b.StopTimer()
	for i := 0; i < warmRounds; i++ {
		one(pa)
		one(pb)
	}
	b.StartTimer()
	a0, b0 := pa.cpu(b), pb.cpu(b)
	ua0, _ := pa.cpuSplit(b)
	ub0, _ := pb.cpuSplit(b)
	ioA, ioB := pa.syscalls(), pb.syscalls()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			one(pa)
			one(pb)
		} else {
			one(pb)
			one(pa)
		}
	}
	ticksA, ticksB = pa.cpu(b)-a0, pb.cpu(b)-b0
	ua, _ := pa.cpuSplit(b)
	ub, _ := pb.cpuSplit(b)
	b.ReportMetric(float64(ua-ua0)*1e3/ticksPerSecond/float64(b.N), "A_user_ms/op")
	b.ReportMetric(float64(ub-ub0)*1e3/ticksPerSecond/float64(b.N), "B_user_ms/op")
	// Reads and writes per request: a proxy that reads several events at
	// once makes fewer syscalls per event, and how many it gets per read
	// depends on how fast it is against the upstream, which is what makes
	// the stream ratio move from run to run.
	for _, m := range []struct {
		unit   string
		p      *proc
		before [3]int64
	}{{"A", pa, ioA}, {"B", pb, ioB}} {
		after := m.p.syscalls()
		if m.before[0] >= 0 && after[0] >= 0 {
			b.ReportMetric(float64(after[0]-m.before[0])/float64(b.N), m.unit+"_reads/op")
			b.ReportMetric(float64(after[1]-m.before[1])/float64(b.N), m.unit+"_writes/op")
		}
		if m.before[2] >= 0 && after[2] >= 0 {
			b.ReportMetric(float64(after[2]-m.before[2])/float64(b.N), m.unit+"_sleeps/op")
		}
	}
	return ticksA, ticksB
}

// syscalls returns the process's read and write system calls so far
// (syscr and syscw of /proc/<pid>/io) and its threads' voluntary context
// switches, or -1s when they cannot be read. A thread sleeps when the
// runtime finds no goroutine to run, so the switches count how often the
// proxy ran dry: each costs a trip through the scheduler and the poller.
func (p *proc) syscalls() [3]int64 {
	n := [3]int64{-1, -1, -1}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", p.cmd.Process.Pid))
	if err != nil {
		return n
	}
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		c, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil:
		case k == "syscr":
			n[0] = c
		case k == "syscw":
			n[1] = c
		}
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", p.cmd.Process.Pid))
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that ended
		}
		_, v, ok := strings.Cut(string(raw), "voluntary_ctxt_switches:")
		if !ok || strings.HasPrefix(v, "non") {
			continue
		}
		v, _, _ = strings.Cut(v, "\n")
		if c, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			n[2] = max(n[2], 0) + c
		}
	}
	return n
}

// warmRounds is how many requests each process gets before a measurement.
const warmRounds = 30

func reportCPU(b *testing.B, ticksA, ticksB int64) {
	b.ReportMetric(float64(ticksA)*1e3/ticksPerSecond/float64(b.N), "A_cpu_ms/op")
	b.ReportMetric(float64(ticksB)*1e3/ticksPerSecond/float64(b.N), "B_cpu_ms/op")
	if ticksA < 100 {
		b.Logf("only %d clock ticks of CPU in A: raise -benchtime for a steadier ratio", ticksA)
	}
}

// profile, when LLMT_WP_PROFILE names a directory, drives load at both
// processes while it fetches a CPU profile of each from its admin endpoint.
var profiled sync.Map

func profile(b *testing.B, kase string, pa, pb *proc, one func(p *proc)) {
	dir := os.Getenv("LLMT_WP_PROFILE")
	if dir == "" {
		return
	}
	if _, done := profiled.LoadOrStore(kase, true); done {
		return
	}
	secs := 10
	if s, err := strconv.Atoi(os.Getenv("LLMT_WP_PROFILE_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, p := range []*proc{pa, pb} {
		wg.Go(func() {
			resp, err := http.Get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", p.admin, secs))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, kase+"-"+p.name+".pprof"), data, 0o644)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	stop := time.Now().Add(time.Duration(secs)*time.Second + 500*time.Millisecond)
	for time.Now().Before(stop) {
		one(pa)
		one(pb)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	// What each process allocated since it started, for the garbage
	// collector's share of the CPU.
	for _, p := range []*proc{pa, pb} {
		resp, err := http.Get(p.admin + "/debug/pprof/allocs")
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, kase+"-"+p.name+"-allocs.pprof"), data, 0o644)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// The bridge benchmark's own process: a Responses client in front of a Chat
// upstream through responses_to_chat. Its process A is procA, the plain
// reverse_proxy, sent the Chat request for the same stream.
var (
	bridgeOnce sync.Once
	bridgeErr  error
	procBridge *proc
	bridgeText struct{ reasoning, content, patch, exec string }
	bridgeN    struct{ reasoning, content, patch, exec int } // deltas of each kind
)

// The requests of BenchmarkBridgeStream: a Codex-like Responses request to
// B, and to A the Chat request the bridge makes of it.
var (
	bridgeResponsesBody = []byte(`{"model":"deepseek-v4-pro","stream":true,"instructions":"You are a coding agent.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Edit the files"}]}],"tools":[{"type":"function","name":"apply_patch","description":"Apply a patch","parameters":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}},{"type":"function","name":"exec_command","description":"Run a command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}}],"tool_choice":"auto","parallel_tool_calls":true,"reasoning":{"effort":"high","summary":"auto"},"store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"0199a1b2-c3d4"}`)
	bridgeChatBody      = []byte(`{"model":"deepseek-v4-pro","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"Edit the files"}],"tools":[{"type":"function","function":{"name":"apply_patch","description":"Apply a patch","parameters":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}}},{"type":"function","function":{"name":"exec_command","description":"Run a command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}},"required":["cmd"]}}}],"tool_choice":"auto","stream":true,"parallel_tool_calls":true,"stream_options":{"include_usage":true},"max_tokens":32768,"thinking":{"type":"enabled"},"reasoning_effort":"high"}`)
)

// setupBridge starts process B of the bridge benchmark once, after the
// shared upstream and process A.
func setupBridge(b *testing.B) {
	b.Helper()
	setup(b)
	bridgeOnce.Do(func() {
		up := strings.TrimPrefix(upstream.URL, "http://")
		procBridge, bridgeErr = startCaddy("B", `	llm_transform {
		rule responses_to_chat {
			profile deepseek
		}
	}
	reverse_proxy `+up)
		if bridgeErr == nil {
			bridgeErr = pin(0, procBridge)
		}
	})
	if bridgeErr != nil {
		b.Fatal(bridgeErr)
	}
}

// chatChunks renders a DeepSeek-style Chat chunk stream: a role chunk,
// reasoning_content deltas a word or two long, content deltas, two tool
// calls one after the other (apply_patch with the escape-heavy patch of
// BenchmarkStream, exec_command) whose arguments arrive in 12-byte pieces,
// the finish_reason chunk, a usage-only chunk and [DONE]. Its keys are in
// DeepSeek's order (as OpenAI writes Chat chunks) or, for layoutSorted,
// sorted at every level. It records the texts and delta counts in
// bridgeText and bridgeN for the checks.
func chatChunks(reasoningDeltas, contentDeltas, patchLines int, layout string) [][]byte {
	var evs [][]byte
	data := func(js string) {
		if layout == layoutSorted {
			js = sortKeys(js)
		}
		evs = append(evs, []byte("data: "+js+"\n\n"))
	}
	chunk := func(delta, finish string) {
		data(`{"id":"0f9e4c1a-5b7d-4e21-9c3a-8d6f2b1e0a47","object":"chat.completion.chunk","created":1764400000,"model":"deepseek-v4-pro","system_fingerprint":"fp_8802369eaa_prod0820_fp8_kvcache","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]}`)
	}
	reasoning := []string{"The user ", "wants ", "módulo_1.py ", "edited: ", "replace ", `print("Hallo") `, "with ", "the ", `"Grüße" `, "line, ", `keeping C:\temp `, "paths.\n"}
	content := []string{"I'll ", "update ", "`src/módulo_1.py` ", "and ", "then ", "run ", `"grep" `, "to ", "check ", "the ", "result ", "✓.\n"}
	chunk(`{"role":"assistant","content":null,"reasoning_content":""}`, "null")
	var rt, ct strings.Builder
	for k := 0; k < reasoningDeltas; k++ {
		w := reasoning[k%len(reasoning)]
		rt.WriteString(w)
		chunk(`{"content":null,"reasoning_content":`+jsonString(w)+`}`, "null")
	}
	for k := 0; k < contentDeltas; k++ {
		w := content[k%len(content)]
		ct.WriteString(w)
		chunk(`{"content":`+jsonString(w)+`,"reasoning_content":null}`, "null")
	}
	call := func(i int, id, name, args string) int {
		chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"%s","type":"function","function":{"name":"%s","arguments":""}}]}`, i, id, name), "null")
		ps := pieces(args, 12)
		for _, piece := range ps {
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, jsonString(piece)), "null")
		}
		return len(ps)
	}
	patch := `{"input":` + jsonString(escapeHeavyPatch(1, patchLines)) + `}`
	exec := `{"cmd":` + jsonString(strings.Repeat(`grep -rn "naïve \"x\"" C:\\src | head; `, 40)) + `}`
	np := call(0, "call_00_kw66qXbR4jVn1m8s", "apply_patch", patch)
	ne := call(1, "call_01_Zp3tLq9wE2aYc7Hd", "exec_command", exec)
	chunk(`{"content":"","reasoning_content":null}`, `"tool_calls"`)
	data(`{"id":"0f9e4c1a-5b7d-4e21-9c3a-8d6f2b1e0a47","object":"chat.completion.chunk","created":1764400000,"model":"deepseek-v4-pro","system_fingerprint":"fp_8802369eaa_prod0820_fp8_kvcache","choices":[],"usage":{"prompt_tokens":41211,"completion_tokens":5120,"total_tokens":46331,"prompt_tokens_details":{"cached_tokens":40960},"completion_tokens_details":{"reasoning_tokens":900},"prompt_cache_hit_tokens":40960,"prompt_cache_miss_tokens":251}}`)
	evs = append(evs, []byte("data: [DONE]\n\n"))
	bridgeText.reasoning, bridgeText.content, bridgeText.patch, bridgeText.exec = rt.String(), ct.String(), patch, exec
	bridgeN.reasoning, bridgeN.content, bridgeN.patch, bridgeN.exec = reasoningDeltas, contentDeltas, np, ne
	return evs
}

// checkBridged checks that B's answer is the Responses event stream the
// benchmark assumes: every event named after its type, sequence numbers
// from 0 without a gap, response.created and in_progress first, one delta
// event per upstream delta, and response.completed, the only terminal
// event, last, holding the reasoning (with its envelope), the message and
// both calls with their exact arguments and call ids, and the usage.
func checkBridged(b *testing.B, out []byte) int {
	b.Helper()
	evs := strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n")
	count := map[string]int{}
	var last gjson.Result
	for i, e := range evs {
		name, data, ok := strings.Cut(e, "\ndata: ")
		typ := gjson.Get(data, "type").String()
		if !ok || name != "event: "+typ || !gjson.Valid(data) {
			b.Fatalf("B: event %d is not a named Responses event: %.200q", i, e)
		}
		if n := gjson.Get(data, "sequence_number"); n.Int() != int64(i) || !n.Exists() {
			b.Fatalf("B: event %d (%s) has sequence_number %s", i, typ, n.Raw)
		}
		if want := []string{"response.created", "response.in_progress"}; i < 2 && typ != want[i] {
			b.Fatalf("B: event %d is %s, want %s", i, typ, want[i])
		}
		count[typ]++
		last = gjson.Parse(data)
	}
	if typ := last.Get("type").String(); typ != "response.completed" || count["response.completed"] != 1 || count["response.incomplete"]+count["response.failed"]+count["error"] != 0 {
		b.Fatalf("B: the stream ends with %s; counts %v", typ, count)
	}
	for typ, want := range map[string]int{
		"response.reasoning_text.delta":          bridgeN.reasoning,
		"response.output_text.delta":             bridgeN.content,
		"response.function_call_arguments.delta": bridgeN.patch + bridgeN.exec,
		"response.output_item.added":             4,
		"response.output_item.done":              4,
	} {
		if count[typ] != want {
			b.Fatalf("B: %d %s events, want %d", count[typ], typ, want)
		}
	}
	r := last.Get("response")
	got := fmt.Sprint(r.Get("output.#.type").Value())
	if got != "[reasoning message function_call function_call]" ||
		r.Get("output.0.content.0.text").String() != bridgeText.reasoning ||
		!strings.HasPrefix(r.Get("output.0.encrypted_content").String(), "llmt2.") ||
		r.Get("output.1.content.0.text").String() != bridgeText.content ||
		r.Get("output.2.arguments").String() != bridgeText.patch || r.Get("output.2.call_id").String() != "call_00_kw66qXbR4jVn1m8s" ||
		r.Get("output.3.arguments").String() != bridgeText.exec || r.Get("output.3.call_id").String() != "call_01_Zp3tLq9wE2aYc7Hd" ||
		r.Get("usage.input_tokens_details.cached_tokens").Int() != 40960 || r.Get("usage.output_tokens_details.reasoning_tokens").Int() != 900 {
		b.Fatalf("B: response.completed does not hold what the upstream sent: output %s, usage %s", got, r.Get("usage").Raw)
	}
	return len(evs)
}

// BenchmarkRequest: the CPU B spends on a ~1 MB escape-heavy Codex-like
// request beyond what A spends forwarding it, in units of one
// gjson.ValidBytes pass over the same body timed here (thread CPU time).
func BenchmarkRequest(b *testing.B) {
	setup(b)
	doc, calls := escapeHeavyRequest(b)
	for _, p := range []*proc{procA, procB} {
		resp := post(b, p, responsesPath, "request", doc, "X-Bench-Check")
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want := p == procA; resp.Header.Get("X-Saw-Custom") != strconv.FormatBool(want) {
			b.Fatalf("%s: upstream saw custom tools: %s, want %v", p.name, resp.Header.Get("X-Saw-Custom"), want)
		}
	}
	one := func(p *proc) { fetch(b, p, responsesPath, "request", doc) }
	profile(b, "request", procA, procB, one)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// The baseline pass rides along with each B request so both share the
	// loop measure drives; thread CPU time keeps it out of the processes'.
	var valid time.Duration
	b.ResetTimer()
	ta, tb := measure(b, procA, procB, func(p *proc) {
		one(p)
		if p != procB {
			return
		}
		t0 := threadCPU()
		if !gjson.ValidBytes(doc) {
			b.Fatal("invalid")
		}
		valid += threadCPU() - t0
	})
	b.StopTimer()
	reportCPU(b, ta, tb)
	perValid := valid / time.Duration(b.N)
	added := time.Duration(tb-ta) * time.Second / ticksPerSecond / time.Duration(b.N)
	b.ReportMetric(float64(added)/float64(perValid), "valid_passes_added")
	b.ReportMetric(float64(perValid.Microseconds()), "valid_us")
	b.ReportMetric(float64(tb)/float64(ta), "x_passthrough_cpu")
	b.ReportMetric(float64(len(doc))/1e6, "MB_doc")
	b.ReportMetric(float64(calls), "custom_calls")
}

// threadCPU is the calling thread's CPU time from
// clock_gettime(CLOCK_THREAD_CPUTIME_ID), exact to the nanosecond (getrusage
// scales tick samples and is off by far more than one pass over short
// spans). The caller keeps its goroutine on one thread.
func threadCPU() time.Duration {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic(errno)
	}
	return time.Duration(ts.Nano())
}

// BenchmarkTTFB: time from sending a streaming request to the first byte of
// the response body, A and B alternating; medians and their ratio.
func BenchmarkTTFB(b *testing.B) {
	setup(b)
	initStreams()
	first := func(p *proc, extra ...string) time.Duration {
		t0 := time.Now()
		resp := post(b, p, responsesPath, "ttfb", streamBody, extra...)
		defer resp.Body.Close()
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		if _, err := br.ReadByte(); err != nil {
			b.Fatal(err)
		}
		d := time.Since(t0)
		_, _ = io.Copy(io.Discard, br)
		return d
	}
	for i := 0; i < 20; i++ { // warm connections
		first(procA)
		first(procB)
	}
	// With a 20 ms pause after the upstream's first event, the first byte
	// must still come at once: nothing holds an event back for the next.
	var ga, gb []time.Duration
	for i := 0; i < 5; i++ {
		ga = append(ga, first(procA, "X-Bench-Gap"))
		gb = append(gb, first(procB, "X-Bench-Gap"))
	}
	profile(b, "ttfb", procA, procB, func(p *proc) { first(p) })
	var da, db []time.Duration
	a0, b0 := procA.cpu(b), procB.cpu(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			da = append(da, first(procA))
			db = append(db, first(procB))
		} else {
			db = append(db, first(procB))
			da = append(da, first(procA))
		}
	}
	b.StopTimer()
	reportCPU(b, procA.cpu(b)-a0, procB.cpu(b)-b0)
	ma, mb := median(da), median(db)
	b.ReportMetric(float64(ma.Nanoseconds())/1e3, "A_ttfb_us")
	b.ReportMetric(float64(mb.Nanoseconds())/1e3, "B_ttfb_us")
	b.ReportMetric(float64(mb)/float64(ma), "ttfb_ratio")
	b.ReportMetric(float64(median(ga).Nanoseconds())/1e3, "A_gap_ttfb_us")
	b.ReportMetric(float64(median(gb).Nanoseconds())/1e3, "B_gap_ttfb_us")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkRequestInProcess is BenchmarkRequest's rewrite alone, in this
// process, on the same body: what the handler's exchange costs per request
// (thread CPU), in gjson.ValidBytes passes, so the whole-process figure can
// be split into the rewrite and everything around it. As in the handler,
// the large rewritten body is built as it is read, here into a buffer the
// size of the transport's, and reading it counts.
func BenchmarkRequestInProcess(b *testing.B) {
	doc, _ := escapeHeavyRequest(b)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	rules, err := transforms.Compile(ctx, []transforms.RuleConfig{{Transform: "field_custom_tools_to_function", Config: json.RawMessage(`{"names":["*"]}`)}}, transforms.ScopeProvider, "")
	if err != nil {
		b.Fatal(err)
	}
	chain := transforms.NewChain(rules)
	sendBuf := make([]byte, 32<<10)
	rewrite := func(check bool) {
		x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
		chain.Begin(x, gjson.GetBytes(doc, "model").String())
		out, err := x.RewriteRequestBody(doc)
		if err != nil || x.Unreadable() || !out.Deferred() || check && bytes.Contains(out.Bytes(), []byte(`"custom_tool_call"`)) {
			b.Fatal("rewrite failed", err)
		}
		r := out.NewReader()
		for {
			if _, err := r.Read(sendBuf); err == io.EOF {
				break
			}
		}
		x.Release()
	}
	rewrite(true)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var valid, rw time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := threadCPU()
		gjson.ValidBytes(doc)
		t1 := threadCPU()
		rewrite(false)
		t2 := threadCPU()
		valid += t1 - t0
		rw += t2 - t1
	}
	b.ReportMetric(float64(rw)/float64(valid), "x_validate")
	b.ReportMetric(float64(valid.Microseconds())/float64(b.N), "valid_us")
}

// BenchmarkConcurrentMemory sends 32 requests of about 8 MB at once to each
// process and reports how far each one's resident memory rose above what it
// held before, as a multiple of the bodies in flight (32 × the body). The
// peak comes from /proc/<pid>/status (VmHWM), reset first through
// /proc/<pid>/clear_refs.
func BenchmarkConcurrentMemory(b *testing.B) {
	setup(b)
	const concurrent = 32
	doc := escapeHeavyBody(b, 244*8)
	total := float64(concurrent * len(doc))
	var rise [2]float64
	for i := 0; i < b.N; i++ {
		for k, p := range []*proc{procA, procB} {
			runtime.GC()
			pid := p.cmd.Process.Pid
			if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
				b.Skipf("cannot reset the peak resident size: %v", err)
			}
			before := procStatus(b, pid, "VmRSS:")
			errs := make(chan error, concurrent)
			var wg sync.WaitGroup
			for range concurrent {
				wg.Go(func() {
					req, _ := http.NewRequest(http.MethodPost, p.url+responsesPath, bytes.NewReader(doc))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-Bench-Case", "request")
					resp, err := client.Do(req)
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							err = errors.New(resp.Status)
						}
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					b.Fatalf("%s: %v", p.name, err)
				}
			}
			rise[k] = max(rise[k], float64(procStatus(b, pid, "VmHWM:")-before))
		}
	}
	b.ReportMetric(float64(len(doc))/1e6, "MB_body")
	b.ReportMetric(rise[0]/total, "A_rss_rise_x_bodies")
	b.ReportMetric(rise[1]/total, "B_rss_rise_x_bodies")
}

// procStatus reads a size line of /proc/<pid>/status, in bytes.
func procStatus(b *testing.B, pid int, field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == field {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// BenchmarkStreamInProcess is the engine work of the first BenchmarkStream
// alone, in this process, on its events (streamEvents), one per write: thread CPU per event, and as
// a multiple of parsing the same bytes without rules. It splits the
// whole-process figure into the engine and everything around it. The same
// engine work in writes of four or five events, as the proxy reads them
// from the canned upstream, is reported as ns/event_in_reads.
// BenchmarkStreamEngine runs the same events (streamEvents) through the
// engine alone, one per write, and nothing else: timed it is as noisy as
// the host, but its instruction count under callgrind is steady, which is
// how changes to the engine are weighed here:
//
//	go test -c -o wp.test ./integration/wholeprocess/
//	GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 GOGC=off valgrind --tool=callgrind \
//	    ./wp.test -test.run '^$' -test.bench 'StreamEngine$' -test.benchtime=200x
//	callgrind_annotate --inclusive=yes callgrind.out.* | grep 'Stream).Write '
func BenchmarkStreamEngine(b *testing.B) {
	run := streamEngine(b)
	sink := 0
	for b.Loop() {
		sink += run(streamEvs)
	}
	if sink == 0 {
		b.Fatal("no output")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(streamEvs)), "ns/event")
}

// streamEngine returns a function that runs one stream, written as writes,
// through BenchmarkStream's rule (field_custom_tools_to_function) alone and returns how many bytes came out.
func streamEngine(b *testing.B) func(writes [][]byte) int {
	initStreams()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	b.Cleanup(cancel)
	rules, err := transforms.Compile(ctx, []transforms.RuleConfig{{Transform: "field_custom_tools_to_function", Config: json.RawMessage(`{"names":["*"]}`)}}, transforms.ScopeProvider, "")
	if err != nil {
		b.Fatal(err)
	}
	chain := transforms.NewChain(rules)
	return func(writes [][]byte) int {
		x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{MaxCallBuffer: 8 << 20, MaxEvent: 32 << 20}, nil)
		chain.Begin(x, "")
		if _, err := x.RewriteRequest(streamBody); err != nil {
			b.Fatal(err)
		}
		s := x.NewStream()
		out := 0
		for _, w := range writes {
			_ = s.Write(w)
			out += len(s.Output())
		}
		_ = s.Close()
		out += len(s.Output())
		s.Release()
		return out
	}
}

func BenchmarkStreamInProcess(b *testing.B) {
	engineRun := streamEngine(b)
	var reads [][]byte
	for i := 0; i < len(streamEvs); {
		var r []byte
		for k := 0; k < 4+len(reads)%2 && i < len(streamEvs); k++ {
			r = append(r, streamEvs[i]...)
			i++
		}
		reads = append(reads, r)
	}
	sink := 0
	run := func(writes [][]byte) { sink += engineRun(writes) }
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var parse, engine, inReads time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := threadCPU()
		var p streambuf.Parser
		for _, ev := range streamEvs {
			_ = p.Feed(ev, func(e *streambuf.Event) error { sink += len(e.AppendTo(nil)); return nil })
		}
		t1 := threadCPU()
		run(streamEvs)
		t2 := threadCPU()
		run(reads)
		t3 := threadCPU()
		parse += t1 - t0
		engine += t2 - t1
		inReads += t3 - t2
	}
	b.ReportMetric(float64(engine.Nanoseconds())/float64(b.N*len(streamEvs)), "ns/event")
	b.ReportMetric(float64(inReads.Nanoseconds())/float64(b.N*len(streamEvs)), "ns/event_in_reads")
	b.ReportMetric(float64(engine)/float64(parse), "x_parse_only")
	_ = sink
}

// BenchmarkStreamTableInProcess puts the stream table's Responses streams
// (BenchmarkStream's events, per layout) through the engine alone, in
// reads of eight events as a proxy reads a flushing upstream: where the
// whole-process rows' added CPU per event comes from, steadier than they
// are.
func BenchmarkStreamTableInProcess(b *testing.B) {
	engineRun := streamEngine(b)
	for _, l := range tableLayouts {
		evs := responsesEvents(l)
		var reads [][]byte
		for i := 0; i < len(evs); i += 8 {
			reads = append(reads, bytes.Join(evs[i:min(i+8, len(evs))], nil))
		}
		b.Run(l, func(b *testing.B) {
			sink := 0
			for i := 0; i < b.N; i++ {
				sink += engineRun(reads)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
			_ = sink
		})
	}
}
