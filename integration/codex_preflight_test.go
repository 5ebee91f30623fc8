//go:build unix

package integration

// tools_preflight with the real Codex CLI: Codex (gpt-5.5, Responses only)
// runs a task through Caddy against a strict Chat-only thinking provider
// (responses_to_chat) whose first exec_command call does not match the
// schema Codex declared. tools_preflight holds the call back, asks the
// model again in a hidden gateway round, and hands Codex the repaired call
// only; Codex runs it, applies a patch and ends the turn.

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// preflightReasoning is what the provider thinks on each of its answers:
// the one with the invalid call, the re-ask's, the patch's, the last.
var preflightReasoning = [4]string{
	"Read README.md first; the command goes in \"cmd\". 中文 \\ ok",
	"The gateway says cmd must be a string, not a list:\n\tsend the command line as one string.",
	"README.md says to greet. Now write hello.txt with apply_patch.",
	"The patch applied. Report back.",
}

// preflightCase is an invalid first exec_command call and what the
// gateway's tool message must say about it.
type preflightCase struct {
	badArgs string   // the call's arguments, as the model makes them
	explain []string // in the re-ask's tool message
	marker  string   // of explain, what no other message may carry
}

var (
	// preflightSchema fails exec_command's schema: cmd is a list where
	// Codex declares a string. The arguments are valid JSON, so no cheap
	// repair applies: only the model can fix them.
	preflightSchema = preflightCase{
		badArgs: `{"cmd":["cat","README.md"]}`,
		explain: []string{
			"The arguments of the call to tool 'exec_command' do not match the tool's parameters schema (1 problem):",
			"- at /cmd (schema /properties/cmd/type): expected string, but got array",
			"Call 'exec_command' again with corrected arguments.",
		},
		marker: "/properties/cmd/type",
	}

	// preflightTruncated are arguments cut off, though the answer ended
	// with finish_reason tool_calls: not JSON, and no cheap repair
	// completes them.
	preflightTruncated = preflightCase{
		badArgs: `{"cmd":"cat README.md","yield_time_ms":`,
		explain: []string{
			"The arguments of the call to tool 'exec_command' are not valid JSON (at byte ",
			"Call 'exec_command' again with its arguments as one JSON object.",
		},
		marker: "are not valid JSON",
	}
)

const (
	// preflightGoodArgs are the re-ask's answer.
	preflightGoodArgs = `{"cmd":"cat README.md"}`

	preflightPrompt = "Read README.md, then create hello.txt as README.md asks."
)

// preflightRules puts tools_preflight first, where it sees the tools as
// Codex declared them and the calls as Codex will get them, in front of
// the canonical bridge rules.
func preflightRules(th fakeprovider.Thinking) string {
	return `		rule tools_preflight
` + bridgeRules(string(th), bridgeModels[th])
}

// preflightAnswers are the provider's answers in the order the requests
// come: the invalid call, the re-ask's repaired call, the patch, the
// final answer.
func preflightAnswers(badArgs string) []fakeprovider.Turn {
	return []fakeprovider.Turn{
		{Reasoning: preflightReasoning[0], Calls: []fakeprovider.Call{{Name: "exec_command", Arguments: badArgs}}},
		{Reasoning: preflightReasoning[1], Calls: []fakeprovider.Call{{Name: "exec_command", Arguments: preflightGoodArgs}}},
		{Reasoning: preflightReasoning[2], Calls: []fakeprovider.Call{{Name: "apply_patch", Arguments: fakeprovider.PatchArguments(bridgePatch)}}},
		{Reasoning: preflightReasoning[3], Text: bridgeAnswer},
	}
}

func TestCodexPreflightDeepSeek(t *testing.T) {
	runCodexPreflight(t, fakeprovider.DeepSeek, preflightSchema)
}

func TestCodexPreflightKimi(t *testing.T) { runCodexPreflight(t, fakeprovider.Kimi, preflightSchema) }

func TestCodexPreflightTruncatedJSON(t *testing.T) {
	runCodexPreflight(t, fakeprovider.DeepSeek, preflightTruncated)
}

// runCodexPreflight runs the task with Codex through tools_preflight and
// the canonical bridge rules in front of the thinking provider th.
//
// Codex sends three requests; the provider gets four, the second being
// the gateway's re-ask: Codex's first request with the invalid call (as
// the model made it, with its reasoning) and a tool message that says what
// is wrong appended. Codex's stream holds the repaired call only, and its
// next requests hold only that call and its output. hello.txt holds the
// exact bytes, Codex prints the final answer, and every request the
// provider got passed its checks.
func runCodexPreflight(t *testing.T, th fakeprovider.Thinking, c preflightCase) {
	codexBinary(t)
	answers := preflightAnswers(c.badArgs)
	up := &fakeprovider.Provider{Thinking: th}
	reply, answered := up.InOrder(answers)
	up.Reply = reply
	rec := &headerRecorder{next: up}
	startGateway(t, preflightRules(th), serveUpstream(t, rec))
	tap, base := streamTap(t)

	workdir := t.TempDir()
	if err := os.WriteFile(filepath.Join(workdir, "README.md"), []byte(bridgeReadme), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runCodex(t, base, workdir, preflightPrompt)
	reqs := up.Requests()
	ids := up.CallIDs()
	if err != nil {
		t.Fatalf("codex failed: %v\nprovider requests: %d, calls %q\nstdout:\n%s\nstderr:\n%s", err, len(reqs), ids, stdout, stderr)
	}
	got, err := os.ReadFile(filepath.Join(workdir, "hello.txt"))
	if err != nil {
		t.Fatalf("codex created no hello.txt: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	if string(got) != bridgeHello {
		t.Errorf("hello.txt = %q, want %q", got, bridgeHello)
	}
	if !strings.Contains(stdout, bridgeAnswer) {
		t.Errorf("codex did not print the final answer\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}

	// Four requests, each answered: none was refused by the strict
	// provider's checks (a refusal never reaches the script).
	if len(reqs) != len(answers) || answered() != len(answers) {
		t.Fatalf("the provider received %d requests and answered %d, want %d (invalid call, re-ask, apply_patch, answer)", len(reqs), answered(), len(answers))
	}
	for _, r := range rec.requests() {
		if r.URL.Path != "/v1/chat/completions" {
			t.Errorf("upstream path %s", r.URL.Path)
		}
	}
	if len(ids) != 3 {
		t.Fatalf("the provider made calls %q, want 3 (invalid exec_command, repaired exec_command, apply_patch)", ids)
	}
	bad, good, patch := ids[0], ids[1], ids[2]
	if bad == good || good == patch || bad == patch {
		t.Errorf("call ids %q are not distinct", ids)
	}
	if th == fakeprovider.Kimi {
		// Kimi numbers a call by the calls its conversation holds: the
		// re-ask holds the invalid one, Codex's next request only the
		// repaired one.
		if want := []string{"functions.exec_command:0", "functions.exec_command:1", "functions.apply_patch:1"}; strings.Join(ids, " ") != strings.Join(want, " ") {
			t.Errorf("Kimi call ids %q, want %q", ids, want)
		}
	} else {
		for _, id := range ids {
			if !deepSeekCallID.MatchString(id) {
				t.Errorf("DeepSeek call id %q", id)
			}
		}
	}

	bodies := make([]gjson.Result, len(reqs))
	for k, raw := range reqs {
		bodies[k] = gjson.ParseBytes(raw)
		assertBridgedRequest(t, k+1, th, bodies[k])
		if n := len(bodies[k].Get("messages.0.content").String()); n < 10000 {
			t.Errorf("request %d: the system message has %d bytes, not Codex's instructions", k+1, n)
		}
	}

	// Request 1 is Codex's first: the prompt, no history.
	first := bodies[0].Get("messages").Array()
	if calls := toolCallMessages(first); len(calls) != 0 {
		t.Errorf("request 1 holds %d assistant tool-call messages", len(calls))
	}
	if last := first[len(first)-1]; last.Get("role").String() != "user" || !strings.Contains(last.Raw, "Read README.md, then create hello.txt") {
		t.Errorf("request 1 ends in %s, want Codex's prompt", last.Raw)
	}

	// Request 2 is the re-ask: request 1 as it was, then the model's turn
	// with the invalid call as made and its reasoning, then the tool
	// message that says what is wrong.
	assertReask(t, th, c, bodies[0], bodies[1], bad)

	// Requests 3 and 4 are Codex's: the repaired call and its output only.
	escapedArgs := strings.Trim(mustJSON(c.badArgs), `"`)
	for k := 2; k < 4; k++ {
		body, raw := bodies[k], string(reqs[k])
		if strings.Contains(raw, bad) || strings.Contains(raw, c.marker) || strings.Contains(raw, escapedArgs) {
			t.Errorf("request %d carries the invalid call or the gateway's explanation", k+1)
		}
		msgs := body.Get("messages").Array()
		at := toolCallMessages(msgs)
		if len(at) != k-1 {
			t.Errorf("request %d: %d assistant tool-call messages, want %d", k+1, len(at), k-1)
			continue
		}
		// The assistant messages of Codex's history: the repaired call,
		// then the patch.
		want := []struct {
			id, name, args, reasoning string
		}{
			{good, "exec_command", preflightGoodArgs, preflightReasoning[0]},
			{patch, "apply_patch", answers[2].Calls[0].Arguments, preflightReasoning[2]},
		}
		for j, i := range at {
			m := msgs[i]
			// The reasoning replayed with the repaired call is the
			// reasoning Codex got with it: the first answer's (the
			// re-ask's reasoning item is hidden, as all of its items
			// but the calls).
			if rc := m.Get("reasoning_content"); rc.Type != gjson.String || rc.String() != want[j].reasoning {
				t.Errorf("request %d: assistant message %d carries reasoning_content %s, want %q", k+1, i, rc.Raw, want[j].reasoning)
			}
			tcs := m.Get("tool_calls").Array()
			if len(tcs) != 1 || tcs[0].Get("id").String() != want[j].id || tcs[0].Get("function.name").String() != want[j].name {
				t.Errorf("request %d: assistant message %d calls %s, want one %s call %s", k+1, i, m.Get("tool_calls").Raw, want[j].name, want[j].id)
				continue
			}
			assertSameArguments(t, tcs[0].Get("function.arguments").String(), want[j].args)
			if i+1 >= len(msgs) || msgs[i+1].Get("role").String() != "tool" || msgs[i+1].Get("tool_call_id").String() != want[j].id {
				t.Errorf("request %d: no tool message for %s right after message %d", k+1, want[j].id, i)
			}
		}
		// What Codex ran reached the provider: cat prints README.md.
		if out := msgs[at[0]+1].Get("content").String(); !strings.Contains(out, "Please greet in hello.txt.") {
			t.Errorf("request %d: exec_command output %q", k+1, out)
		}
		if k == 3 {
			if out := msgs[at[1]+1].Get("content").String(); !strings.Contains(out, "hello.txt") {
				t.Errorf("request 4: apply_patch output %q", out)
			}
		}
	}

	// What Codex itself got and sent: the invalid call never reached it.
	sent, streams := tap.exchanges()
	if len(sent) != 3 || len(streams) != 3 {
		t.Fatalf("Codex sent %d requests and got %d answers, want 3 each", len(sent), len(streams))
	}
	for k, s := range streams {
		if strings.Contains(s, bad) || strings.Contains(s, c.marker) || strings.Contains(s, escapedArgs) {
			t.Errorf("Codex's answer %d carries the invalid call or the gateway's explanation", k+1)
		}
		evs := parseEvents(t, s)
		terminal := assertResponsesGrammar(t, asFunctionEvents(evs))
		if terminal.Get("type").String() != "response.completed" {
			t.Errorf("Codex's answer %d ends in %s", k+1, terminal.Raw)
		}
		if k == 0 {
			// The first answer: the first answer's reasoning, then the
			// repaired call, and nothing of the re-ask's text.
			out := terminal.Get("response.output").Array()
			var calls []gjson.Result
			for _, it := range out {
				if it.Get("type").String() == "function_call" {
					calls = append(calls, it)
				}
			}
			if len(calls) != 1 || calls[0].Get("call_id").String() != good || calls[0].Get("name").String() != "exec_command" ||
				calls[0].Get("arguments").String() != preflightGoodArgs {
				t.Errorf("Codex's first answer has the calls %s, want only the repaired exec_command %s", terminal.Get("response.output").Raw, good)
			}
			if len(out) != 2 || out[0].Get("type").String() != "reasoning" || out[0].Get("content.0.text").String() != preflightReasoning[0] ||
				out[1].Get("type").String() != "function_call" {
				t.Errorf("Codex's first answer is %s, want the first answer's reasoning and the repaired call", terminal.Get("response.output").Raw)
			}
			if strings.Contains(s, preflightReasoning[1][:20]) {
				t.Errorf("Codex's first answer shows the re-ask's reasoning")
			}
			// One answer for two upstream requests: its usage is the sum
			// of both.
			assertSummedUsage(t, terminal.Get("response.usage"), reqs[0], reqs[1])
		}
	}
	for k := 1; k < 3; k++ {
		input := gjson.GetBytes(sent[k], "input").Array()
		var callIDs, outIDs []string
		for _, it := range input {
			switch it.Get("type").String() {
			case "function_call", "custom_tool_call":
				callIDs = append(callIDs, it.Get("call_id").String())
			case "function_call_output", "custom_tool_call_output":
				outIDs = append(outIDs, it.Get("call_id").String())
			}
		}
		want := []string{good, patch}[:k]
		if strings.Join(callIDs, " ") != strings.Join(want, " ") || strings.Join(outIDs, " ") != strings.Join(want, " ") {
			t.Errorf("Codex's request %d holds calls %q and outputs %q, want %q each", k+1, callIDs, outIDs, want)
		}
		if bytes.Contains(sent[k], []byte(bad)) {
			t.Errorf("Codex's request %d names the invalid call %s", k+1, bad)
		}
	}
}

// assertReask checks the gateway's re-ask: the first request's members and
// messages unchanged, then the model's turn as it made it and the tool
// message that explains its invalid call, naming the schema path.
func assertReask(t *testing.T, th fakeprovider.Thinking, c preflightCase, first, reask gjson.Result, bad string) {
	t.Helper()
	for _, member := range []string{"model", "tools", "tool_choice", "parallel_tool_calls", "stream", "stream_options", "max_tokens", "thinking", "reasoning_effort"} {
		if a, b := first.Get(member).Raw, reask.Get(member).Raw; a != b {
			t.Errorf("re-ask: %s is %s, the first request's %s", member, b, a)
		}
	}
	m1, m2 := first.Get("messages").Array(), reask.Get("messages").Array()
	if len(m2) != len(m1)+2 {
		t.Fatalf("re-ask has %d messages, want the first request's %d and 2 more:\n%s", len(m2), len(m1), reask.Get("messages").Raw)
	}
	for i := range m1 {
		if m1[i].Raw != m2[i].Raw {
			t.Errorf("re-ask message %d is %.300s, the first request's %.300s", i, m2[i].Raw, m1[i].Raw)
		}
	}
	turn, tool := m2[len(m1)], m2[len(m1)+1]
	if turn.Get("role").String() != "assistant" {
		t.Fatalf("re-ask message %d is %s, want the model's turn", len(m1), turn.Raw)
	}
	// A thinking provider wants the turn's reasoning back with its calls.
	if rc := turn.Get("reasoning_content"); rc.Type != gjson.String || rc.String() != preflightReasoning[0] {
		t.Errorf("re-ask: the model's turn carries reasoning_content %s, want %q (%s)", rc.Raw, preflightReasoning[0], th)
	}
	tcs := turn.Get("tool_calls").Array()
	if len(tcs) != 1 || tcs[0].Get("id").String() != bad || tcs[0].Get("type").String() != "function" ||
		tcs[0].Get("function.name").String() != "exec_command" {
		t.Fatalf("re-ask: the model's turn calls %s, want the one exec_command call %s", turn.Get("tool_calls").Raw, bad)
	}
	if args := tcs[0].Get("function.arguments").String(); args != c.badArgs {
		t.Errorf("re-ask: the call's arguments are %q, want them as the model made them, %q", args, c.badArgs)
	}
	if tool.Get("role").String() != "tool" || tool.Get("tool_call_id").String() != bad {
		t.Fatalf("re-ask message %d is %s, want the tool message for %s", len(m1)+1, tool.Raw, bad)
	}
	text := tool.Get("content").String()
	for _, want := range c.explain {
		if !strings.Contains(text, want) {
			t.Errorf("re-ask: the tool message %q does not say %q", text, want)
		}
	}
}

// asFunctionEvents renames the custom_tool_call_input events of a
// custom call (Codex's apply_patch) to the function_call_arguments events
// assertResponsesGrammar knows: the grammar is the same, input only while
// the call is open.
func asFunctionEvents(evs []sseEvent) []sseEvent {
	out := make([]sseEvent, len(evs))
	for i, ev := range evs {
		for _, kind := range []string{"delta", "done"} {
			from, to := "response.custom_tool_call_input."+kind, "response.function_call_arguments."+kind
			if ev.name == from {
				ev.name = to
				ev.data = strings.Replace(ev.data, `"type":"`+from+`"`, `"type":"`+to+`"`, 1)
			}
		}
		out[i] = ev
	}
	return out
}

// assertSummedUsage checks the usage of an answer joined from the
// provider's answers to the upstream bodies: each member the sum of what
// the provider reported for each.
func assertSummedUsage(t *testing.T, usage gjson.Result, bodies ...[]byte) {
	t.Helper()
	var prompt, cached int
	for _, b := range bodies {
		prompt += fakeprovider.PromptTokens(len(b))
		cached += fakeprovider.CacheHitTokens(len(b))
	}
	if usage.Get("input_tokens").Int() != int64(prompt) || usage.Get("input_tokens_details.cached_tokens").Int() != int64(cached) ||
		usage.Get("output_tokens").Int() <= 0 ||
		usage.Get("total_tokens").Int() != usage.Get("input_tokens").Int()+usage.Get("output_tokens").Int() {
		t.Errorf("usage %s, want input_tokens %d with cached_tokens %d, the sum of %d answers", usage.Raw, prompt, cached, len(bodies))
	}
}

// toolCallMessages returns the indexes of the assistant messages with
// tool calls.
func toolCallMessages(msgs []gjson.Result) []int {
	var at []int
	for i, m := range msgs {
		if m.Get("role").String() == "assistant" && len(m.Get("tool_calls").Array()) > 0 {
			at = append(at, i)
		}
	}
	return at
}

// responseTap is a reverse proxy to the gateway that keeps what Codex
// sent and what it got back.
type responseTap struct {
	mu      sync.Mutex
	sent    [][]byte
	answers []*bytes.Buffer
}

// streamTap starts a responseTap and returns it with its base URL.
func streamTap(t *testing.T) (*responseTap, string) {
	t.Helper()
	gw, err := url.Parse(gatewayURL)
	if err != nil {
		t.Fatal(err)
	}
	tap := &responseTap{}
	proxy := httputil.NewSingleHostReverseProxy(gw)
	proxy.FlushInterval = -1
	proxy.ModifyResponse = func(resp *http.Response) error {
		buf := new(bytes.Buffer)
		tap.mu.Lock()
		tap.answers = append(tap.answers, buf)
		tap.mu.Unlock()
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(resp.Body, lockedWriter{&tap.mu, buf}), resp.Body}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tap.mu.Lock()
		tap.sent = append(tap.sent, body)
		tap.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return tap, srv.URL + "/v1"
}

// exchanges returns Codex's request bodies and the answers it got, in
// order.
func (tap *responseTap) exchanges() (sent [][]byte, answers []string) {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	for _, b := range tap.answers {
		answers = append(answers, b.String())
	}
	return append([][]byte(nil), tap.sent...), answers
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}
