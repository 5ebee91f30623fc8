package transforms_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// Random and concurrent Responses streams through chains of the
// call-restoring rules (the custom tool conversion, tools_plan,
// tools_filter): a Stream's output depends neither on how the upstream's
// bytes are cut nor on other streams running at once.

// restoringChains are chains of the call-restoring rules, alone and
// combined.
var restoringChains = []string{
	`[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`,
	`[{"transform":"tools_plan","config":{"profile":"function_only"}},{"transform":"field_custom_tools_to_function"}]`,
	`[{"transform":"tools_filter","config":{"deny":["blocked"]}},{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`,
	`[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}},{"transform":"tools_filter","config":{"deny":["blocked"]}}]`,
	`[{"transform":"field_custom_tools_to_function"}]`,
	`[{"transform":"tools_plan","config":{"profile":"function_only"}}]`,
}

// mixedToolsRequest declares a custom tool with a text format, Codex's
// custom apply_patch, a native function, and a function tools_filter
// denies in restoringChains.
const mixedToolsRequest = `{"model":"m","stream":true,"tools":[{"type":"custom","name":"grammar_tool","format":{"type":"text"}},{"type":"custom","name":"apply_patch"},{"type":"function","name":"native_tool","parameters":{}},{"type":"function","name":"blocked","parameters":{}}]}`

// quoteJSON is s as a JSON string literal.
func quoteJSON(s string) string { b, _ := json.Marshal(s); return string(b) }

// streamGen writes random Responses streams of messages and function
// calls, numbered or not (noSeq), calling the tools of planBuiltinRequest
// under their upstream names (plan) or those of mixedToolsRequest, and
// unknown ones; any event may be mutated (white space, escaped keys and
// types, duplicated and extra members).
type streamGen struct {
	r     *rand.Rand
	seq   int
	noSeq bool
	plan  bool
}

func (g *streamGen) head(typ string) string {
	h := `{"type":"` + typ + `"`
	if !g.noSeq {
		h += `,"sequence_number":` + fmt.Sprint(g.seq)
	}
	g.seq++
	return h
}

func (g *streamGen) mutate(e string) string {
	r := g.r
	if r.Intn(12) == 0 {
		e = strings.Replace(e, `,"sequence_number":`, `, "sequence_number":`, 1)
	}
	if r.Intn(15) == 0 {
		e = strings.Replace(e, `{"type":`, `{ "type":`, 1)
	}
	if r.Intn(15) == 0 {
		e += " "
	}
	if r.Intn(20) == 0 {
		e = strings.Replace(e, `delta"`, `del\u0074a"`, 1)
	}
	if r.Intn(20) == 0 {
		e = strings.Replace(e, `added"`, `adde\u0064"`, 1)
	}
	if r.Intn(15) == 0 {
		e = strings.TrimSuffix(strings.TrimSpace(e), "}") + `,"delta":"zz"}`
	}
	if r.Intn(15) == 0 {
		e = strings.TrimSuffix(strings.TrimSpace(e), "}") + `,"arguments":"{\"input\":\"dup\"}"}`
	}
	if r.Intn(20) == 0 {
		e = strings.TrimSuffix(strings.TrimSpace(e), "}") + `,"type":"response.output_text.delta"}`
	}
	if r.Intn(20) == 0 {
		e = strings.TrimSuffix(strings.TrimSpace(e), "}") + `,"sequence_number":99}`
	}
	if r.Intn(25) == 0 {
		e = strings.Replace(e, `"item_id":"`, `"item_id":"x`, 1)
	}
	if r.Intn(25) == 0 {
		e = strings.Replace(e, `{"type":`, `{"item_id":"fc_0","type":`, 1)
	}
	if r.Intn(30) == 0 {
		e = strings.Replace(e, `"id":"fc_`, `"id":"fc_9","id":"fc_`, 1)
	}
	if r.Intn(30) == 0 {
		e = strings.Replace(e, `"call_id":"`, `"call_id":"c9","call_id":"`, 1)
	}
	if r.Intn(30) == 0 {
		e = strings.Replace(e, `"type":"response.`, `"type":"response.\\`, 1)
	}
	if r.Intn(40) == 0 {
		e = " " + e
	}
	if r.Intn(30) == 0 {
		e = strings.Replace(e, `,"item":{`, `,"item":{"arguments":"{}",`, 1)
	}
	if r.Intn(30) == 0 {
		e = strings.Replace(e, `,"item":{`, `, "item" : { "type" : "function_call" , `, 1)
	}
	if r.Intn(30) == 0 {
		e = strings.Replace(e, `"arguments":`, `"arguments" : `, 1)
	}
	if r.Intn(30) == 0 {
		e = strings.Replace(e, `,"output_index":`, `,"output_index":1,"output_index":`, 1)
	}
	return e
}

// randomArgs are call arguments to stream: valid, with repeated keys or
// escapes, unterminated, trailed by garbage, not an object, empty.
var randomArgs = []string{
	`{"input":"hello \"world\" \\ x"}`,
	`{"input":"*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"}`,
	`{"input":"*** Begin Patch\n*** Update File: b\n@@\n-x\n+y\n*** End Patch"}`,
	`{"input":"abc","input":"def"}`,
	`{"x":1,"input":"中文 🦀 \u00e9"}`,
	`{"input":"a\/b\u0041"}`,
	`{"input":5}`,
	`{"input":"unterminated`,
	`{"input":"x"} trailing`,
	`{"cmd":"ls"}`,
	`"just a string"`,
	`{"cmd":["ls","-la"],"env":{"TERM":"xterm","N":1}}`,
	`{"command":["bash","-lc","echo \"hi\" > a.txt"],"timeout_ms":1500}`,
	`{"commands":["go test"],"timeout_ms":1000}`,
	`{"body":"LGTM \u00e9"}`,
	`{"operation":{"type":"create_file","path":"a","diff":"+x\n"}}`,
	``,
}

func (g *streamGen) call(oi int) []string {
	r := g.r
	names := []string{"grammar_tool", "apply_patch", "native_tool", "blocked", "unknown"}
	if g.plan {
		names = []string{"local_shell", "shell", "apply_patch", planLongUp, "exec_command", "unknown"}
	}
	name := names[r.Intn(len(names))]
	args := randomArgs[r.Intn(len(randomArgs))]
	if r.Intn(4) == 0 {
		// raw args with escapes inside the JSON string
		args = strings.ReplaceAll(args, "a", `\u0061`)
	}
	id := fmt.Sprintf("fc_%d", oi)
	cid := fmt.Sprintf("call_%d", oi)
	item := func(status, a string) string {
		return `{"id":"` + id + `","type":"function_call","status":"` + status + `","arguments":` + quoteJSON(a) + `,"call_id":"` + cid + `","name":"` + name + `"}`
	}
	var evs []string
	evs = append(evs, g.head("response.output_item.added")+`,"output_index":`+fmt.Sprint(oi)+`,"item":`+item("in_progress", "")+`}`)
	// split args esc string into deltas anywhere on rune boundary
	rs := []rune(args)
	n := 1 + r.Intn(8)
	for len(rs) > 0 {
		k := min(n, len(rs))
		evs = append(evs, g.head("response.function_call_arguments.delta")+`,"item_id":"`+id+`","output_index":`+fmt.Sprint(oi)+`,"delta":`+quoteJSON(string(rs[:k]))+`,"obfuscation":"p"}`)
		rs = rs[k:]
	}
	final := args
	switch r.Intn(6) {
	case 0:
		final = args + "X"
	case 1:
		if len(args) > 2 {
			final = args[:len(args)-1]
		}
	case 2:
		final = args + `\`
	}
	if r.Intn(4) != 0 {
		evs = append(evs, g.head("response.function_call_arguments.done")+`,"item_id":"`+id+`","output_index":`+fmt.Sprint(oi)+`,"arguments":`+quoteJSON(final)+`}`)
	}
	itemArgs := final
	if r.Intn(5) == 0 {
		itemArgs = ""
	}
	if r.Intn(8) != 0 {
		evs = append(evs, g.head("response.output_item.done")+`,"output_index":`+fmt.Sprint(oi)+`,"item":`+item("completed", itemArgs)+`}`)
	}
	return evs
}

func (g *streamGen) stream() []string {
	r := g.r
	var evs []string
	evs = append(evs, g.head("response.created")+`,"response":{"id":"r","status":"in_progress","output":[],"tools":[]}}`)
	oi := 0
	for k := r.Intn(4); k >= 0; k-- {
		if r.Intn(2) == 0 {
			id := fmt.Sprintf("msg_%d", oi)
			evs = append(evs, g.head("response.output_item.added")+`,"output_index":`+fmt.Sprint(oi)+`,"item":{"id":"`+id+`","type":"message","status":"in_progress","role":"assistant","content":[]}}`)
			evs = append(evs, g.head("response.output_text.delta")+`,"item_id":"`+id+`","output_index":`+fmt.Sprint(oi)+`,"content_index":0,"delta":"hi \"x\""}`)
			evs = append(evs, g.head("response.output_item.done")+`,"output_index":`+fmt.Sprint(oi)+`,"item":{"id":"`+id+`","type":"message","status":"completed","role":"assistant","content":[]}}`)
		} else {
			evs = append(evs, g.call(oi)...)
		}
		oi++
	}
	switch r.Intn(5) {
	case 0:
	case 1:
		evs = append(evs, g.head("response.incomplete")+`,"response":{"id":"r","status":"incomplete","output":[]}}`)
	default:
		evs = append(evs, g.head("response.completed")+`,"response":{"id":"r","status":"completed","output":[]}}`)
	}
	for i := range evs {
		evs[i] = g.mutate(evs[i])
	}
	return evs
}

// frameSSE writes events as SSE in a framing picked at random: LF, CRLF,
// CR or mixed line ends, with or without event lines, with id, retry and
// comment lines, with "data:" unspaced.
func frameSSE(r *rand.Rand, evs []string) string {
	mode := r.Intn(9)
	var b strings.Builder
	for _, e := range evs {
		nl := "\n"
		switch {
		case mode == 4:
			nl = "\r\n"
		case mode == 6:
			nl = "\r"
		case mode == 7 && r.Intn(2) == 0:
			nl = "\r\n"
		}
		if mode == 8 && r.Intn(3) == 0 {
			b.WriteString(": keepalive" + nl)
		}
		if mode == 8 && r.Intn(3) == 0 {
			b.WriteString("retry: 100" + nl)
		}
		if mode != 5 {
			var v struct {
				Type string `json:"type"`
			}
			if json.Unmarshal([]byte(e), &v) == nil && v.Type != "" {
				b.WriteString("event: " + v.Type + nl)
			}
		}
		if mode == 3 && r.Intn(3) == 0 {
			b.WriteString("id: 7" + nl)
		}
		if mode == 8 && r.Intn(3) == 0 {
			b.WriteString("data:" + e + nl + nl)
		} else {
			b.WriteString("data: " + e + nl + nl)
		}
	}
	return b.String()
}

// replayChain replays in through a fresh exchange of rules after req, in
// chunks of n bytes, with decisions recorded.
func replayChain(t testing.TB, rules, req, in string, n int) (string, *transforms.Exchange) {
	x := transformtest.ExchangeAfter(t, rules, req)
	x.Explain = true
	return transformtest.Replay(t, x, in, n), x
}

// TestStreamOutputIndependentOfChunking runs mutated Responses streams
// (no sequence_number, whitespace, escaped types, duplicated members,
// CR/CRLF/data-only framing, comments) through chains of the call-restoring
// rules. Every chunking of the bytes must give the same output: an
// upstream's bytes may arrive cut anywhere.
func TestStreamOutputIndependentOfChunking(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 600; i++ {
		g := &streamGen{r: r, noSeq: r.Intn(4) == 0, plan: r.Intn(3) == 0}
		in := frameSSE(r, g.stream())
		rules := restoringChains[r.Intn(len(restoringChains))]
		req := mixedToolsRequest
		if g.plan {
			req = planBuiltinRequest
			rules = []string{planRules, `[{"transform":"tools_plan","config":{"profile":"function_only"}},{"transform":"field_custom_tools_to_function"}]`, `[{"transform":"field_custom_tools_to_function"},{"transform":"tools_plan","config":{"profile":"function_only"}}]`, `[{"transform":"tools_filter","config":{"deny":["exec_command"]}},{"transform":"tools_plan","config":{"profile":"function_only"}}]`}[r.Intn(4)]
		}
		var first string
		for k, n := range []int{4096, 1, 2, 7, 1 + r.Intn(100)} {
			out, _ := replayChain(t, rules, req, in, n)
			if k == 0 {
				first = out
			} else if out != first {
				t.Fatalf("case %d, %s: chunk size %d changed the output\n%q\n--- whole:\n%q", i, rules, n, out, first)
			}
		}
	}
}

// escapeAsUpstream escapes s as a JSON string the way an upstream might: style 0
// minimal (raw non-ASCII and even invalid bytes kept), 1 every non-ASCII
// rune and '/' escaped, 2 encoding/json.
func escapeAsUpstream(s string, style int) string {
	if style == 2 {
		return quoteJSON(s)
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		case style == 1 && c == '/':
			b.WriteString(`\/`)
		case style == 1 && c >= 0x80:
			r, n := []rune(s[i:])[0], 0
			for _, rr := range s[i:] {
				r = rr
				break
			}
			n = len(string(r))
			if r == 0xfffd && (i+3 > len(s) || s[i:i+3] != "\xef\xbf\xbd") {
				b.WriteByte(c)
				continue
			}
			if r > 0xffff {
				r -= 0x10000
				fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
			i += n - 1
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// contentPieces are the pieces a call's input is made of: escapes, raw
// and escaped non-ASCII, lone surrogates and invalid bytes.
var contentPieces = []string{"abc", " ", "\\n", "\\\"", "\\\\", "é", "中", "🦀", "\\u00e9", "\\ud83e\\udd80", "\\ud800", "\xff", "\xc3", "/", "\\/", "<>&", "\\t", "x\\u0041y"}

// customCallStream streams one call to the custom tool name (a patch when
// patch is set) whose input is up to 2000 random contentPieces, in deltas
// of random sizes escaped in one of escapeAsUpstream's styles.
func customCallStream(r *rand.Rand, name string, patch bool) string {
	var inner strings.Builder
	if patch {
		inner.WriteString(`*** Begin Patch\n*** Update File: f.go\n@@\n`)
	}
	for k := r.Intn(2000); k >= 0; k-- {
		if patch && r.Intn(6) == 0 {
			inner.WriteString([]string{`\n+`, `\n-`, `\n `, `\n@@ ctx\n `}[r.Intn(4)])
		}
		inner.WriteString(contentPieces[r.Intn(len(contentPieces))])
	}
	if patch {
		inner.WriteString(`\n*** End Patch\n`)
	}
	args := `{"input":"` + inner.String() + `"}`
	if r.Intn(5) == 0 {
		args = `{"pre":[1,{"a":"}"}],"input":"` + inner.String() + `","post":true}`
	}
	style := r.Intn(3)
	var evs []string
	add := func(s string) { evs = append(evs, s) }
	item := func(status, a string) string {
		return `{"id":"fc_1","type":"function_call","status":"` + status + `","arguments":` + a + `,"call_id":"c1","name":"` + name + `"}`
	}
	seq := 0
	h := func(typ string) string { seq++; return `{"type":"` + typ + `","sequence_number":` + fmt.Sprint(seq) }
	add(h("response.output_item.added") + `,"output_index":0,"item":` + item("in_progress", `""`) + `}`)
	b := []byte(args)
	for len(b) > 0 {
		n := min(len(b), 1+r.Intn(40))
		if r.Intn(10) == 0 {
			n = min(len(b), 1+r.Intn(5000))
		}
		add(h("response.function_call_arguments.delta") + `,"item_id":"fc_1","output_index":0,"delta":` + escapeAsUpstream(string(b[:n]), style) + `}`)
		b = b[n:]
	}
	final := escapeAsUpstream(args, style)
	switch r.Intn(5) {
	case 0:
		final = escapeAsUpstream(args, (style+1)%3)
	case 1:
		final = escapeAsUpstream(args+" ", style)
	}
	if r.Intn(3) != 0 {
		add(h("response.function_call_arguments.done") + `,"item_id":"fc_1","output_index":0,"arguments":` + final + `}`)
	}
	add(h("response.output_item.done") + `,"output_index":0,"item":` + item("completed", final) + `}`)
	add(h("response.completed") + `,"response":{"id":"r","status":"completed","output":[]}}`)
	return transformtest.SSE(evs...)
}

// TestStreamConcurrentRunsMatchSoloRuns: streams running at once share the
// decoder, escape and scratch pools; each must still produce what it
// produces alone.
func TestStreamConcurrentRunsMatchSoloRuns(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	type tc struct{ rules, in, want string }
	var cases []tc
	for i := 0; i < 24; i++ {
		patch := i%2 == 0
		name := "grammar_tool"
		if patch {
			name = "apply_patch"
		}
		in := customCallStream(r, name, patch)
		rules := restoringChains[i%4]
		want, _ := replayChain(t, rules, mixedToolsRequest, in, 97)
		cases = append(cases, tc{rules, in, want})
	}
	xs := make([][]*transforms.Exchange, len(cases))
	for i, c := range cases {
		for k := 0; k < 4; k++ {
			xs[i] = append(xs[i], transformtest.ExchangeAfter(t, c.rules, mixedToolsRequest))
		}
	}
	errs := make(chan string, len(cases)*4)
	done := make(chan struct{})
	n := 0
	for i, c := range cases {
		for k := 0; k < 4; k++ {
			n++
			go func(x *transforms.Exchange, c tc, size int) {
				defer func() { done <- struct{}{} }()
				s := x.NewStream()
				var out strings.Builder
				b := []byte(c.in)
				for len(b) > 0 {
					m := min(size, len(b))
					_ = s.Write(b[:m])
					out.Write(s.Output())
					b = b[m:]
				}
				_ = s.Close()
				out.Write(s.Output())
				s.Release()
				x.Release()
				if out.String() != c.want {
					errs <- fmt.Sprintf("case %d size %d differs", i, size)
				}
			}(xs[i][k], c, 13+k*50)
		}
	}
	for ; n > 0; n-- {
		<-done
	}
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// sizes records the length of each write.
type sizes struct {
	buf    bytes.Buffer
	writes []int
}

func (w *sizes) Write(p []byte) (int, error) {
	w.writes = append(w.writes, len(p))
	return w.buf.Write(p)
}

// A stream with a sink hands its output on as it passes 64 KiB within one
// upstream read, so a long answer read at once is never held whole; what
// the client gets, sink and Output together, is the same bytes.
func TestSpillToHandsOnOutputWithinARead(t *testing.T) {
	args := `{"input":"` + strings.Repeat(`*** line \"quoted\"\n`, 20000) + `"}`
	var evs []string
	evs = append(evs, transformtest.FunctionCallStream(0, 0, "fc_1", "c1", "apply_patch", args, 64, true)...)
	upstream := transformtest.SSE(evs...)
	want := transformtest.Replay(t, transformtest.ExchangeAfter(t, wildcard, patchRequest), upstream, len(upstream))
	if len(want) < 4*(64<<10) {
		t.Fatalf("the stream is too short to spill: %d bytes", len(want))
	}
	s := transformtest.ExchangeAfter(t, wildcard, patchRequest).NewStream()
	var sink sizes
	s.SpillTo(&sink)
	if err := s.Write([]byte(upstream)); err != nil {
		t.Fatal(err)
	}
	sink.buf.Write(s.Output())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sink.buf.Write(s.Output())
	if got := sink.buf.String(); got != want {
		t.Fatalf("spilled output differs: %d bytes, want %d", len(got), len(want))
	}
	if len(sink.writes) < 3 {
		t.Fatalf("%d writes to the sink for %d bytes", len(sink.writes), len(want))
	}
	// Each hand-off is 64 KiB plus at most the event that crossed it: the
	// largest event here is the finished item with the whole patch.
	largest := len(args) * 2
	for i, n := range sink.writes {
		if n > 64<<10+largest {
			t.Fatalf("write %d is %d bytes", i, n)
		}
	}
}

// sortedKeys rewrites each event's data with every object's keys sorted
// (encoding/json sorts map keys), so "type" no longer leads it.
func sortedKeys(t *testing.T, evs []string) []string {
	t.Helper()
	out := make([]string, len(evs))
	for i, e := range evs {
		var v any
		if err := json.Unmarshal([]byte(e), &v); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(b)
	}
	return out
}

// Events laid out with their keys sorted ("type" last but for a few) are
// read as well as OpenAI's layout: the client gets the same events, the
// converted call restored, the others as the upstream wrote them.
func TestStreamWithSortedKeysSameAsOpenAILayout(t *testing.T) {
	evs := []string{`{"type":"response.output_text.delta","sequence_number":0,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi"}`}
	evs = append(evs, transformtest.FunctionCallStream(1, 1, "fc_1", "c1", "apply_patch", `{"input":"*** Begin Patch\n*** End Patch"}`, 6, true)...)
	evs = append(evs, `{"type":"response.output_text.delta","sequence_number":`+transformtest.Itoa(len(evs))+`,"item_id":"msg_2","output_index":2,"content_index":0,"delta":"bye"}`)
	openai := transformtest.Events(t, transformtest.StreamCase(t, wildcard, patchRequest, transformtest.SSE(evs...)))
	sorted := transformtest.Events(t, transformtest.StreamCase(t, wildcard, patchRequest, transformtest.SSE(sortedKeys(t, evs)...)))
	a, _ := json.Marshal(openai)
	b, _ := json.Marshal(sorted)
	if string(a) != string(b) {
		t.Fatalf("sorted layout:\n%s\nOpenAI layout:\n%s", b, a)
	}
	// The patch's deltas come a line at a time, and it ends in a newline.
	if len(openai) != 7 || openai[1]["item"].(map[string]any)["type"] != "custom_tool_call" || transformtest.ConcatDeltas(openai, "response.custom_tool_call_input.delta") != "*** Begin Patch\n*** End Patch\n" || openai[6]["delta"] != "bye" {
		t.Fatalf("events %s", a)
	}
}
