package transformtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// fixture is the path of a file of this package's testdata, wherever the
// calling test runs.
func fixture(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", name)
}

// NoDuplicateKeys fails on an object with a key twice, which JSONEqual
// cannot see (the last one wins when decoding).
func NoDuplicateKeys(t testing.TB, b []byte) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		object bool
		keys   map[string]bool
		key    bool // the next string is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &frame{object: true, keys: map[string]bool{}, key: true})
				continue
			case '[':
				stack = append(stack, &frame{})
				continue
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].object {
					stack[len(stack)-1].key = true
				}
				continue
			}
		case string:
			if top != nil && top.object && top.key {
				if top.keys[v] {
					t.Fatalf("key %q twice in one object: %s", v, b)
				}
				top.keys[v] = true
				top.key = false
				continue
			}
		}
		if top != nil && top.object {
			top.key = true
		}
	}
}

// Rejected wants a 400 with code and no body for the upstream.
func Rejected(t testing.TB, out []byte, err error, code string) *transforms.Error {
	t.Helper()
	var e *transforms.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a 400 %s, got err %v and body %s", code, err, out)
	}
	if e.Status != 400 || e.Code != code {
		t.Fatalf("want 400 %s, got %d %s: %s", code, e.Status, e.Code, e.Message)
	}
	if out != nil {
		t.Fatalf("the upstream would receive a body: %s", out)
	}
	return e
}

// Accepted wants no error and out equal to want as JSON, with no key twice.
func Accepted(t testing.TB, out []byte, err error, want string) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
	NoDuplicateKeys(t, out)
	JSONEqual(t, out, want)
}

// RequestBodyMismatch rewrites body through RewriteRequest and through
// RewriteRequestBody, each on a fresh exchange of c, and says how the
// second differs ("" when it does not): the outcome, the rules applied,
// the announced length, Bytes, and the bytes read in reads of each size
// given (a body over 1 MiB skips reads of one byte). With deferAll every
// rewrite of the last rule is left unbuilt, whatever its size.
func RequestBodyMismatch(t testing.TB, c *transforms.Chain, p transforms.Protocol, body []byte, deferAll bool, reads ...int) (deferred bool, msg string) {
	t.Helper()
	limits := transforms.Limits{MaxCallBuffer: 1 << 20, MaxEvent: 1 << 24}
	if deferAll {
		limits.DeferMin = -1
	}
	bind := func() *transforms.Exchange {
		x := transforms.NewExchange(p, limits, nil)
		c.Begin(x, gjson.GetBytes(body, "model").String())
		return x
	}
	x := bind()
	want, err := x.RewriteRequest(body)
	y := bind()
	rb, errB := y.RewriteRequestBody(body)
	if (err == nil) != (errB == nil) {
		return false, fmt.Sprintf("RewriteRequest: %v, RewriteRequestBody: %v", err, errB)
	}
	if err != nil {
		return false, ""
	}
	defer y.Release()
	if a, b := len(x.Applied()), len(y.Applied()); a != b {
		return rb.Deferred(), fmt.Sprintf("%d rules applied, RewriteRequest applied %d", b, a)
	}
	if rb.Len() != len(want) {
		return rb.Deferred(), fmt.Sprintf("deferred %v: Len() = %d, RewriteRequest's body is %d bytes", rb.Deferred(), rb.Len(), len(want))
	}
	if !bytes.Equal(rb.Bytes(), want) {
		return rb.Deferred(), "Bytes() differs from RewriteRequest's body"
	}
	if len(reads) == 0 {
		reads = []int{32 << 10}
	}
	for _, n := range reads {
		if n == 1 && len(want) > 1<<20 {
			continue
		}
		got, err := io.ReadAll(&chunked{r: rb.NewReader(), n: n})
		if err != nil || !bytes.Equal(got, want) {
			return rb.Deferred(), fmt.Sprintf("deferred %v, reads of %d: %d bytes, %v; want the %d bytes of RewriteRequest\nread: %.300s\nwant: %.300s",
				rb.Deferred(), n, len(got), err, len(want), got, want)
		}
	}
	return rb.Deferred(), ""
}

// chunked reads r at most n bytes at a time, as a transport's buffer does.
type chunked struct {
	r io.Reader
	n int
}

func (c *chunked) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// SDKResponse parses a restored body as the openai-go SDK does.
func SDKResponse(t testing.TB, body []byte) responses.Response {
	t.Helper()
	var r responses.Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("SDK cannot parse the response: %v\n%s", err, body)
	}
	return r
}

// SDKEvents parses every data payload of a restored Responses stream as the
// SDK's event union, and checks the sequence numbers run 0, 1, 2… .
func SDKEvents(t testing.TB, stream string) []responses.ResponseStreamEventUnion {
	t.Helper()
	Events(t, stream) // gap-free sequence_number
	var out []responses.ResponseStreamEventUnion
	for _, block := range strings.Split(strings.TrimSuffix(stream, "\n\n"), "\n\n") {
		var name string
		for _, line := range strings.Split(block, "\n") {
			if n, ok := strings.CutPrefix(line, "event: "); ok {
				name = n
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				var ev responses.ResponseStreamEventUnion
				if err := json.Unmarshal([]byte(d), &ev); err != nil {
					t.Fatalf("SDK cannot parse event %s: %v", d, err)
				}
				if name != "" && name != ev.Type {
					t.Fatalf("event line %q for a %q payload", name, ev.Type)
				}
				out = append(out, ev)
			}
		}
	}
	return out
}

// CallText concatenates, per choice and tool index, custom inputs and
// function arguments as a client accumulating the stream would.
func CallText(chunks []map[string]any) map[string]string {
	out := map[string]string{}
	for _, c := range chunks {
		chs, _ := c["choices"].([]any)
		for _, ch := range chs {
			chm := ch.(map[string]any)
			delta, _ := chm["delta"].(map[string]any)
			tcs, _ := delta["tool_calls"].([]any)
			for _, tc := range tcs {
				e := tc.(map[string]any)
				key := Itoa(int(chm["index"].(float64))) + "/" + Itoa(int(e["index"].(float64)))
				if cu, ok := e["custom"].(map[string]any); ok {
					if n, ok := cu["name"].(string); ok {
						out[key+"/name"] = "custom:" + n
					}
					out[key] += cu["input"].(string)
				}
				if fn, ok := e["function"].(map[string]any); ok {
					if n, ok := fn["name"].(string); ok {
						out[key+"/name"] = "function:" + n
					}
					if a, ok := fn["arguments"].(string); ok {
						out[key] += a
					}
				}
			}
		}
	}
	return out
}

// CodexLikeRequest builds a Responses request around the real Codex turn-1
// body, with history items appended until it reaches size bytes: messages,
// encrypted reasoning, apply_patch custom calls and their outputs, and
// exec_command function calls with long outputs. Items keep Codex's key
// order (type first).
func CodexLikeRequest(tb testing.TB, size int) ([]byte, int) {
	tb.Helper()
	raw, err := os.ReadFile(fixture("codex-request.json"))
	if err != nil {
		tb.Fatal(err)
	}
	compact := gjson.ParseBytes(raw).Get("@ugly").Raw
	inputEnd := gjson.Get(compact, "input").Index + len(gjson.Get(compact, "input").Raw) - 1 // the closing ]
	patch := JSONString("*** Begin Patch\n*** Update File: src/app.py\n@@ def greet():\n-print(\"Hi\")\n+print(\"Hello, world! é 🦀\")\n*** End Patch\n")
	output := JSONString(strings.Repeat("Chunk ID: 1\nOutput:\nREADME.md\nsrc/app.py \"quoted\" \\ path\n", 40))
	var hist strings.Builder
	items := 0
	for i := 0; len(compact)+hist.Len() < size; i++ {
		id := fmt.Sprintf("call_%d", i)
		fmt.Fprintf(&hist, `,{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Working on step %s"}]}`, id)
		fmt.Fprintf(&hist, `,{"type":"reasoning","summary":[],"encrypted_content":"%s"}`, strings.Repeat("gAAAAB", 200))
		fmt.Fprintf(&hist, `,{"type":"custom_tool_call","id":"ctc_%s","status":"completed","call_id":"%s","name":"apply_patch","input":%s}`, id, id, patch)
		fmt.Fprintf(&hist, `,{"type":"custom_tool_call_output","id":"ctco_%s","call_id":"%s","output":"Success. Updated the following files:\nM src/app.py\n"}`, id, id)
		fmt.Fprintf(&hist, `,{"type":"function_call","call_id":"%sx","name":"exec_command","arguments":"{\"cmd\":\"ls -la\"}"}`, id)
		fmt.Fprintf(&hist, `,{"type":"function_call_output","call_id":"%sx","output":%s}`, id, output)
		items += 6
	}
	doc := []byte(compact[:inputEnd] + hist.String() + compact[inputEnd:])
	if !json.Valid(doc) {
		tb.Fatal("generated request is not JSON")
	}
	return doc, items
}

// MCPHeavyRequest is the real Codex turn-1 request with 300 MCP-style tools
// added: 30 namespaces of 10 functions with dotted names and schemas the
// size MCP servers send, so planning flattens, renames and hashes.
func MCPHeavyRequest(tb testing.TB) []byte {
	tb.Helper()
	doc, _ := CodexLikeRequest(tb, 0)
	tools := gjson.GetBytes(doc, "tools")
	var b strings.Builder
	for s := 0; s < 30; s++ {
		fmt.Fprintf(&b, `,{"type":"namespace","name":"mcp__server_%d","description":"Tools of MCP server %d.","tools":[`, s, s)
		for f := 0; f < 10; f++ {
			if f > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"type":"function","name":"repo.issues.v%d.list_comments_for_a_pull_request_review_%d","description":"Lists comments \"quoted\" for a review — page by page.","strict":false,`+
				`"parameters":{"type":"object","properties":{"owner":{"type":"string","description":"The account owner."},"repo":{"type":"string"},"pull_number":{"type":"integer"},"per_page":{"type":"integer","minimum":1,"maximum":100},"state":{"type":"string","enum":["open","closed","all"]}},"required":["owner","repo","pull_number"],"additionalProperties":false}}`, s, f)
		}
		b.WriteString(`]}`)
	}
	end := tools.Index + len(tools.Raw) - 1
	return []byte(string(doc[:end]) + b.String() + string(doc[end:]))
}

// CodexRequest is a real Codex CLI 0.169 first-turn Responses request
// (gpt-5.5, its ten tools, apply_patch among them as a custom tool).
func CodexRequest(tb testing.TB) []byte {
	tb.Helper()
	raw, err := os.ReadFile(fixture("codex-request.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// ToolBodies are small request bodies of both protocols with every kind
// of tool node the walk knows (definitions in namespaces and
// additional_tools, calls, outputs, choices, allowed_tools), nesting,
// escapes and repeated keys: seeds for a transform's fuzz targets.
func ToolBodies() []string {
	return []string{
		`{"tool_choice":{"type":"allowed_tools","tools":[{"type":"custom","name":"a"}]},"tools":[{"name":"ns","tools":[{"type":"custom","name":"a"}],"type":"namespace"}],"input":[{"type":"additional_tools","tools":[{"type":"custom","name":"b"}]},{"type":"custom_tool_call","call_id":"c","name":"a","input":"x"},{"type":"custom_tool_call_output","call_id":"c"}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"custom","custom":{"name":"a","input":"x"}}]},{"role":"tool","tool_call_id":"c"}],"tools":[{"type":"custom","custom":{"name":"a"}}],"tool_choice":{"type":"custom","custom":{"name":"a"}}}`,
		`{"tools":[{"type":"namespace","name":"n","tools":[{"type":"namespace","name":"m","tools":[{"type":"custom","name":"\u0061"}]}]}],"tools":[]}`,
		`{"tools":[{"tools":[{"type":"custom","name":"a"}],"type":"function","name":"f"}],"input":"plain"}`,
	}
}

// Doubling returns how much longer the work setup(2n) returns takes than
// that of setup(n), each the best of a few runs from the same heap: about 2
// for work linear in n, 4 for quadratic. setup builds the inputs, outside
// the timing, and returns the work to time, which must be repeatable.
// Scaling benchmarks report the ratio as a metric; they never fail on it,
// as timings vary with the host.
func Doubling(n int, setup func(n int) func()) float64 {
	best := func(run func()) time.Duration {
		d := time.Duration(1 << 62)
		for range 5 {
			runtime.GC()
			t0 := time.Now()
			run()
			d = min(d, time.Since(t0))
		}
		return d
	}
	small := best(setup(n))
	return float64(best(setup(2*n))) / float64(small)
}

// MissingRequired lists the members openai-go marks api:"required" that a
// Response object lacks (null counts as present): on the object, and on
// its usage when there is one. A strict client's generated types expect
// them all.
func MissingRequired(obj []byte) []string {
	var missing []string
	var check func(raw json.RawMessage, typ reflect.Type, path string)
	check = func(raw json.RawMessage, typ reflect.Type, path string) {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m == nil {
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			if f.Tag.Get("api") != "required" {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			v, ok := m[name]
			if !ok {
				missing = append(missing, path+name)
				continue
			}
			// Usage and its details are plain structs: their members
			// are checked too.
			if f.Type.Kind() == reflect.Struct && strings.HasPrefix(f.Type.Name(), "ResponseUsage") {
				check(v, f.Type, path+name+".")
			}
		}
		if u, ok := m["usage"]; ok && typ == reflect.TypeFor[responses.Response]() {
			check(u, reflect.TypeFor[responses.ResponseUsage](), "usage.")
		}
	}
	check(obj, reflect.TypeFor[responses.Response](), "")
	return missing
}
