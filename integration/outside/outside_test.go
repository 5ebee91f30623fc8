// Package outside builds Caddy the way the docs tell an outside author to,
// with xcaddy from this checkout and the example transform module in
// examples/tooldeny, and drives the binary over HTTP.
package outside

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// TestOutsideTransformBuiltWithXcaddy builds Caddy with
//
//	xcaddy build <caddy version> --output <tmp>/caddy \
//		--with github.com/llmtransform/caddy-llm-transform@v0.0.0=<repo root> \
//		--with example.com/tooldeny@v0.0.0=<repo root>/examples/tooldeny
//
// and runs it in front of a strict mock upstream, with the outside
// transform tool_deny chained with field_custom_tools_to_function in both
// orders. In either order the upstream gets exactly the same body: the
// denied tools gone, the custom apply_patch declared as a function; the
// upstream's apply_patch function call reaches the client as a
// custom_tool_call, in JSON and in a stream; the rule's decisions reach the
// explain header; and a tool_choice forcing a denied tool is a 400 that
// never reaches the upstream.
//
// It compiles Caddy: about 20 s with a warm build cache, about 5 minutes
// on two cores with a cold one; -short skips it. It builds with $XCADDY
// when that is set; else, under CI=true, with the xcaddy version xcaddy.sh
// pins, installed into a temporary GOBIN; else with the xcaddy on PATH or
// in $GOPATH/bin, and skips when there is none.
func TestOutsideTransformBuiltWithXcaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy with xcaddy")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(root, "examples", "tooldeny")
	caddyVersion, xcaddyVersion := pinnedVersions(t, root)
	xcaddy := findXcaddy(t, xcaddyVersion)
	watchSources(t, root)

	// Build, within the test's deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	if d, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), d.Add(-time.Minute))
	}
	defer cancel()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "caddy")
	build := exec.CommandContext(ctx, xcaddy, "build", caddyVersion,
		"--output", bin,
		"--with", "github.com/llmtransform/caddy-llm-transform@v0.0.0="+root,
		"--with", "example.com/tooldeny@v0.0.0="+example)
	build.Dir = tmp
	start := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			t.Fatalf("xcaddy build did not finish in %s (a cold build cache takes minutes; raise -timeout):\n%s", time.Since(start).Round(time.Second), tail(out))
		}
		t.Fatalf("xcaddy build: %v\n%s", err, tail(out))
	}
	t.Logf("xcaddy build took %s", time.Since(start).Round(100*time.Millisecond))

	up := newUpstream(t)
	gateway := runCaddy(t, bin, tmp, caddyfile(up.addr))

	for _, route := range []string{"deny-first", "custom-first"} {
		url := gateway + "/" + route + "/v1/responses"
		t.Run(route+"/json", func(t *testing.T) {
			status, header, body := post(t, url, clientRequest(false, `"auto"`))
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			// The rule's decisions reach the explain header.
			explained := header.Get("X-LLM-Transform-Explain")
			for _, d := range []string{"remove:exec_command", "remove:browser", "remove:web_search"} {
				if !strings.Contains(explained, d) {
					t.Errorf("explain header lacks %s: %s", d, explained)
				}
			}
			transformtest.JSONEqual(t, up.take(t, route), upstreamRequest(false))
			transformtest.NoDuplicateKeys(t, body)
			transformtest.JSONEqual(t, body, `{
				"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "gpt-5.5",
				"output": [{"id": "fc_1", "type": "custom_tool_call", "status": "completed", "call_id": "call_1",
				            "name": "apply_patch", "input": `+transformtest.JSONString(patch)+`}],
				"tools": `+clientTools+`,
				"tool_choice": "auto", "parallel_tool_calls": false
			}`)
		})
		t.Run(route+"/stream", func(t *testing.T) {
			status, header, body := post(t, url, clientRequest(true, `"auto"`))
			if status != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, %s: %s", status, header.Get("Content-Type"), body)
			}
			transformtest.JSONEqual(t, up.take(t, route), upstreamRequest(true))
			evs := transformtest.Events(t, string(body))
			var types []string
			for _, ev := range evs {
				if typ := ev["type"].(string); len(types) == 0 || types[len(types)-1] != typ {
					types = append(types, typ)
				}
			}
			if got := strings.Join(types, " "); got != "response.created response.output_item.added response.custom_tool_call_input.delta response.custom_tool_call_input.done response.output_item.done response.completed" {
				t.Fatalf("events: %s\n%s", got, body)
			}
			if got := transformtest.ConcatDeltas(evs, "response.custom_tool_call_input.delta"); got != patch {
				t.Fatalf("input deltas %q", got)
			}
			call := `{"id": "fc_1", "type": "custom_tool_call", "status": "completed", "call_id": "call_1", "name": "apply_patch", "input": ` + transformtest.JSONString(patch) + `}`
			done, _ := json.Marshal(evs[len(evs)-2]["item"])
			transformtest.JSONEqual(t, done, call)
			completed, _ := json.Marshal(evs[len(evs)-1]["response"])
			transformtest.JSONEqual(t, completed, `{
				"id": "resp_1", "object": "response", "created_at": 1, "status": "completed", "model": "gpt-5.5",
				"output": [`+call+`], "tools": `+clientTools+`, "tool_choice": "auto", "parallel_tool_calls": false
			}`)
		})
		t.Run(route+"/denied_choice", func(t *testing.T) {
			status, _, body := post(t, url, clientRequest(false, `{"type":"function","name":"exec_command"}`))
			if status != http.StatusBadRequest {
				t.Fatalf("status %d: %s", status, body)
			}
			transformtest.JSONEqual(t, body, `{"error": {
				"message": "tool_choice forces exec_command, which the gateway does not offer (name matches \"exec_*\")",
				"type": "invalid_request_error", "param": "tool_choice", "code": "tool_denied"}}`)
			up.none(t, route)
		})
	}
}

// TestExampleModule runs go vet and the tests of examples/tooldeny, a
// module of its own that go test ./... here does not reach, so that a
// change of the exported API that breaks it fails here.
func TestExampleModule(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles another module")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "tooldeny"))
	if err != nil {
		t.Fatal(err)
	}
	watchSources(t, filepath.Dir(filepath.Dir(dir)))
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-count=1", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in examples/tooldeny: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// The two rules, as a Caddyfile's llm_transform block holds them.
const (
	denyRule = `rule tool_deny {
				tools exec_* web_search
				namespaces browser
			}`
	customRule = `rule field_custom_tools_to_function {
				names apply_patch
			}`
)

// caddyfile is the gateway's config: one route per order of the two rules,
// each in front of the upstream at upstream.
func caddyfile(upstream string) func(port int) string {
	return func(port int) string {
		return fmt.Sprintf(`{
	admin off
	auto_https off
	persist_config off
}

http://127.0.0.1:%[1]d {
	bind 127.0.0.1
	route /deny-first/* {
		llm_transform {
			explain
			%[2]s
			%[3]s
		}
		reverse_proxy %[4]s
	}
	route /custom-first/* {
		llm_transform {
			explain
			%[3]s
			%[2]s
		}
		reverse_proxy %[4]s
	}
}
`, port, denyRule, customRule, upstream)
	}
}

// What the client sends: Codex's apply_patch as a custom tool, and tools
// the rule denies by name (exec_command, web_search) and by namespace
// (browser).
const clientTools = `[
	{"type": "custom", "name": "apply_patch", "description": "Edit files.",
	 "format": {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}},
	{"type": "function", "name": "exec_command", "description": "Run a command.",
	 "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
	{"type": "namespace", "name": "browser", "description": "A web browser.",
	 "tools": [{"type": "function", "name": "open", "parameters": {"type": "object", "properties": {"url": {"type": "string"}}}}]},
	{"type": "function", "name": "read_file", "description": "Read a file.",
	 "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
	{"type": "web_search"}
]`

// clientRequest is compact, as SDKs send it.
func clientRequest(stream bool, choice string) string {
	var b bytes.Buffer
	_ = json.Compact(&b, []byte(`{"model": "gpt-5.5", "stream": `+fmt.Sprint(stream)+`, "input": "Create hello.txt",
		"tools": `+clientTools+`, "tool_choice": `+choice+`, "parallel_tool_calls": false}`))
	return b.String()
}

// What the upstream must get, written out by hand: field_custom_tools_to_function
// declares apply_patch as a function with its schema and usage, tool_deny
// removes exec_command, the browser namespace and web_search.
func upstreamRequest(stream bool) string {
	return `{"model": "gpt-5.5", "stream": ` + fmt.Sprint(stream) + `, "input": "Create hello.txt",
		"tools": [
			{"type": "function", "name": "apply_patch", "description": ` + transformtest.JSONString("Edit files.\n\n"+patchUsage) + `,
			 "parameters": ` + patchSchema + `, "strict": false},
			{"type": "function", "name": "read_file", "description": "Read a file.",
			 "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}
		],
		"tool_choice": "auto", "parallel_tool_calls": false}`
}

// field_custom_tools_to_function's text for apply_patch.
const (
	patchUsage  = "Call this function with the patch text in the `input` argument. Start with `*** Begin Patch`, end with `*** End Patch`, prefix every line of an added file with `+`, and in `*** Update File` hunks mark kept lines with a space, removed lines with `-` and added lines with `+`. Example input: \"*** Begin Patch\\n*** Add File: notes.txt\\n+first line\\n*** End Patch\\n\"."
	patchSchema = `{"type":"object","properties":{"input":{"type":"string","description":"The whole patch as plain text. The first line is exactly ` + "`*** Begin Patch`" + ` and the last line is exactly ` + "`*** End Patch`" + `. A new file is ` + "`*** Add File: <path>`" + ` followed by its lines, each starting with ` + "`+`" + `. A change is ` + "`*** Update File: <path>`" + ` (optionally followed by ` + "`*** Move to: <new path>`" + `) and hunks introduced by ` + "`@@`" + ` (optionally followed by a nearby line of code); inside a hunk, lines that stay start with a space, removed lines with ` + "`-`" + ` and added lines with ` + "`+`" + `. A removal is ` + "`*** Delete File: <path>`" + `. Do not list a line as removed and added when it does not change, and never re-create an existing file with Add File."}},"required":["input"],"additionalProperties":false}`
)

// The patch the upstream's call carries, already in Codex's grammar.
const patch = "*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** End Patch\n"

// upstream is a strict function-only provider: it refuses any tool that
// is not a function, and any tool the rule should have removed, with a
// 400; it records each request body by route and answers with a call of
// the function apply_patch.
type upstream struct {
	addr string
	mu   sync.Mutex
	got  map[string][][]byte
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{got: map[string][][]byte{}}
	args := `{"input":` + transformtest.JSONString(patch) + `}`
	item := func(status, args string) string {
		return `{"id":"fc_1","type":"function_call","status":"` + status + `","call_id":"call_1","name":"apply_patch","arguments":` + transformtest.JSONString(args) + `}`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		route, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		u.mu.Lock()
		u.got[route] = append(u.got[route], body)
		u.mu.Unlock()
		var req struct {
			Stream bool
			Tools  []struct{ Type, Name string }
		}
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/v1/responses") || json.Unmarshal(body, &req) != nil {
			http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		for _, tool := range req.Tools {
			if tool.Type != "function" || strings.HasPrefix(tool.Name, "exec_") {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"error":{"message":"unsupported tool %s %s","type":"invalid_request_error","param":"tools","code":null}}`, tool.Type, tool.Name)
				return
			}
		}
		// Responses objects echo the tools.
		var echo struct {
			Tools json.RawMessage `json:"tools"`
		}
		_ = json.Unmarshal(body, &echo)
		resp := func(status, output string) string {
			return `{"id":"resp_1","object":"response","created_at":1,"status":"` + status + `","model":"gpt-5.5","output":[` + output + `],"tools":` + string(echo.Tools) + `,"tool_choice":"auto","parallel_tool_calls":false}`
		}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, resp("completed", item("completed", args)))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		evs := []string{`{"type":"response.created","sequence_number":0,"response":` + resp("in_progress", "") + `}`}
		evs = append(evs, transformtest.FunctionCallStream(1, 0, "fc_1", "call_1", "apply_patch", args, 9, true)...)
		evs = append(evs, `{"type":"response.completed","sequence_number":`+fmt.Sprint(len(evs))+`,"response":`+resp("completed", item("completed", args))+`}`)
		for _, ev := range evs {
			io.WriteString(w, transformtest.SSE(ev))
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	u.addr = strings.TrimPrefix(srv.URL, "http://")
	return u
}

// take returns the one request body the route sent since the last take.
func (u *upstream) take(t *testing.T, route string) []byte {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	got := u.got[route]
	if len(got) != 1 {
		t.Fatalf("the upstream got %d requests on %s", len(got), route)
	}
	delete(u.got, route)
	return got[0]
}

func (u *upstream) none(t *testing.T, route string) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if got := u.got[route]; len(got) != 0 {
		t.Fatalf("the upstream got %s", got[0])
	}
}

func post(t *testing.T, url, body string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// runCaddy starts the binary on a free loopback port with the Caddyfile
// config makes for it, waits until it answers, and stops it when the test
// ends. It returns the gateway's base URL.
func runCaddy(t *testing.T, bin, dir string, config func(port int) string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	file := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(file, []byte(config(port)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", file, "--adapter", "caddyfile")
	cmd.Dir = dir
	// Caddy's data and config directories, in the test's.
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("caddy's log:\n%s", logs.String())
		}
	})

	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := http.Get(base + "/")
		if err == nil {
			resp.Body.Close()
			return base
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("caddy exited: %v\n%s", err, logs.String())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("caddy did not answer on %s within 30s: %v\n%s", base, err, logs.String())
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pinnedVersions reads the Caddy and xcaddy versions xcaddy.sh builds
// with, so the test builds as the repository does.
func pinnedVersions(t *testing.T, root string) (caddy, xcaddy string) {
	t.Helper()
	sh, err := os.ReadFile(filepath.Join(root, "xcaddy.sh"))
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		m := regexp.MustCompile(name + `="\$\{` + name + `:-(v[^}"]+)\}"`).FindSubmatch(sh)
		if m == nil {
			t.Fatalf("xcaddy.sh sets no default %s", name)
		}
		return string(m[1])
	}
	return read("CADDY_VERSION"), read("XCADDY_VERSION")
}

// findXcaddy returns the xcaddy to build with: $XCADDY; under CI=true, the
// pinned version installed into a temporary GOBIN; else one on PATH or in
// $GOPATH/bin, or the test skips.
func findXcaddy(t *testing.T, version string) string {
	t.Helper()
	if p := os.Getenv("XCADDY"); p != "" {
		return p
	}
	if os.Getenv("CI") == "true" {
		gobin := t.TempDir()
		cmd := exec.Command("go", "install", "github.com/caddyserver/xcaddy/cmd/xcaddy@"+version)
		cmd.Env = append(os.Environ(), "GOBIN="+gobin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go install xcaddy@%s: %v\n%s", version, err, out)
		}
		return filepath.Join(gobin, "xcaddy")
	}
	if p, err := exec.LookPath("xcaddy"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "xcaddy")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skipf("no xcaddy: go install github.com/caddyserver/xcaddy/cmd/xcaddy@%s, or set XCADDY or CI=true", version)
	return ""
}

// watchSources reads every file the binary is built from, so that go
// test's result cache, which only sees what the test process itself opens,
// runs the test again when one of them changes.
func watchSources(t *testing.T, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata"):
			return filepath.SkipDir
		case d.IsDir():
			return nil
		case strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go"), d.Name() == "go.mod", d.Name() == "go.sum", d.Name() == "xcaddy.sh":
			_, err := os.ReadFile(p)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// tail is the end of a long build log.
func tail(b []byte) []byte {
	if len(b) > 8000 {
		return append([]byte("…"), b[len(b)-8000:]...)
	}
	return b
}
