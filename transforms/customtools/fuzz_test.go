package customtools

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// FuzzSSE feeds arbitrary bytes as an upstream stream while a converted call
// is on record. The pipeline must not panic, must give the same bytes at
// every chunk size, and must keep sequence numbers consecutive.
type sseSeed struct {
	stream string
	chat   bool
}

func sseSeeds() []sseSeed {
	var seeds []sseSeed
	add := func(stream string, chat bool) { seeds = append(seeds, sseSeed{stream, chat}) }
	add(transformtest.SSE(transformtest.FunctionCallStream(0, 0, "fc_1", "c1", "apply_patch", `{"input":"*** Begin Patch\n*** Add File: a\nx\n*** End Patch"}`, 3, true)...), false)
	add("data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"name\":\"apply_patch\",\"id\":\"i\"}}\r\n\r\ndata: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"i\",\"delta\":\"{\\\"input\\\":\\\"\\\\u00\"}\r\r", false)
	add("event: error\ndata: {\"type\":\"error\"}\n\n: ping\n\ndata: [DONE]\n\n", false)
	// Chat Completions streams.
	add(transformtest.ChatSSE(
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin"}}]},"finish_reason":null}]}`,
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" Patch\\n\"}"}}]},"finish_reason":"tool_calls"}]}`,
	), true)
	add(transformtest.ChatSSE(
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"arguments":"{\"in"}}]},"finish_reason":null},{"index":1,"delta":{"content":"x"},"finish_reason":"length"}]}`,
		`{"error":{"message":"x"}}`,
	), true)
	return seeds
}

func FuzzSSE(f *testing.F) {
	for _, sd := range sseSeeds() {
		f.Add(sd.stream, sd.chat)
	}
	f.Fuzz(func(t *testing.T, stream string, chat bool) {
		var first string
		for i, n := range transformtest.ChunkSizes {
			var x *transforms.Exchange
			if chat {
				x = transformtest.ChatExchange(t, wildcard, chatRequest)
			} else {
				x = transformtest.ExchangeAfter(t, wildcard, patchRequest)
			}
			got := transformtest.Replay(t, x, stream, n)
			if i == 0 {
				first = got
			} else if got != first {
				t.Fatalf("chunk size %d changed the output", n)
			}
			if !chat {
				if general := transformtest.ReplayClaims(t, transformtest.ExchangeAfter(t, wildcard, patchRequest), stream, n, false); general != got {
					t.Fatalf("chunk size %d: claimed deltas changed the output", n)
				}
			}
		}
	})
}

// FuzzCustomArgs sends arbitrary argument text for a converted apply_patch
// call, split into small deltas, and checks that the stream and the JSON
// path agree on the final input, and that progressive deltas add up to it
// whenever the arguments are an object with a string input.
func customArgsSeeds() []string {
	return []string{
		`{"input":"*** Begin Patch ***\n*** Add File: x\nhello\n*** End Patch ***"}`,
		`{"patch":"*** Begin Patch\n*** Delete File: a\n*** End Patch\n"}`,
		`"just a string"`, `{}`, `{"input":5}`, `not json`, `{"input":"\ud83e\udd80 \u00e9 \" \\"}`,
		`{"input":"*** Begin Patch\r\n*** Update File: a\r\n@@\r\n-a\r\n+a\r\n*** End Patch"}`,
	}
}

func FuzzCustomArgs(f *testing.F) {
	for _, s := range customArgsSeeds() {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, args string, split uint8) {
		if !utf8.ValidString(args) {
			return // arguments travel inside JSON strings, which hold only UTF-8
		}
		n := int(split%16) + 1
		up := transformtest.FunctionCallStream(0, 0, "fc_1", "c1", "apply_patch", args, n, true)
		x := transformtest.ExchangeAfter(t, `[{"transform":"field_custom_tools_to_function"}]`, patchRequest)
		out := transformtest.Replay(t, x, transformtest.SSE(up...), 7)
		evs := transformtest.Events(t, out)
		want := string(finalInput(ident{name: "apply_patch"}, []byte(args)))
		var deltas strings.Builder
		var done, item string
		for _, e := range evs {
			switch e["type"] {
			case "response.custom_tool_call_input.delta":
				deltas.WriteString(e["delta"].(string))
			case "response.custom_tool_call_input.done":
				done = e["input"].(string)
			case "response.output_item.done":
				item = e["item"].(map[string]any)["input"].(string)
			case "response.function_call_arguments.delta", "response.function_call_arguments.done":
				t.Fatalf("function event leaked: %v", e)
			}
		}
		if done != want || item != want {
			t.Fatalf("final input: done=%q item=%q want=%q", done, item, want)
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(args), &obj) == nil {
			var in string
			if json.Unmarshal(obj["input"], &in) == nil && deltas.String() != want {
				t.Fatalf("deltas %q do not add up to %q", deltas.String(), want)
			}
		}
		// The non-streaming path restores the same input.
		x2 := transformtest.ExchangeAfter(t, `[{"transform":"field_custom_tools_to_function"}]`, patchRequest)
		body := `{"output":[{"type":"function_call","call_id":"c1","name":"apply_patch","arguments":` + transformtest.JSONString(args) + `}]}`
		res, err := x2.RewriteResponse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Output []struct{ Input string } `json:"output"`
		}
		if err := json.Unmarshal(res, &r); err != nil || len(r.Output) != 1 || r.Output[0].Input != want {
			t.Fatalf("JSON path: %s (err %v)", res, err)
		}
	})
}

// FuzzWalkTools: the walk accepts exactly the objects encoding/json accepts
// and calls invalid exactly what it rejects; its nodes are values inside the
// body (objects, but for tool_choice), inner objects lie inside their node,
// and the conversion built on the walk always yields JSON.
func FuzzWalkTools(f *testing.F) {
	for _, s := range transformtest.ToolBodies() {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, body string, chat bool) {
		p := transforms.ProtocolResponses
		if chat {
			p = transforms.ProtocolChat
		}
		x := transforms.NewExchange(p, transforms.Limits{}, nil)
		w := transforms.WalkTools(x, []byte(body))
		valid := json.Valid([]byte(body))
		object := valid && strings.HasPrefix(strings.TrimLeft(body, " \t\r\n"), "{")
		if (w != nil) != object || x.Unreadable() == valid {
			t.Fatalf("walk %v, invalid %v; encoding/json valid %v", w != nil, x.Unreadable(), valid)
		}
		if w == nil {
			return
		}
		for _, n := range w.Nodes {
			if n.Start < 0 || n.End > len(body) || n.Start >= n.End || body[n.Start] != '{' && n.Kind != transforms.NodeChoice || !json.Valid([]byte(body[n.Start:n.End])) {
				t.Fatalf("node %+v is not a value of the body", n)
			}
			if n.InnerStart >= 0 && (n.InnerStart < n.Start || n.InnerEnd > n.End) {
				t.Fatalf("inner object outside its node: %+v", n)
			}
			_ = n.Where()
		}
		c := transformtest.Chain(t, wildcard)
		x = transforms.NewExchange(p, transforms.Limits{}, nil)
		c.Begin(x, "")
		out, err := x.RewriteRequest([]byte(body))
		if err == nil && !json.Valid(out) {
			t.Fatalf("conversion gave invalid JSON: %s", out)
		}
		// Built as it is read, as the handler sends it: the same bytes.
		if _, msg := transformtest.RequestBodyMismatch(t, c, p, []byte(body), true, 1, 7); msg != "" {
			t.Fatal(msg)
		}
	})
}

var updateSeeds = flag.Bool("update-seeds", false, "write the fuzz seed corpora to testdata/fuzz")

// TestSeedCorpus keeps testdata/fuzz in step with the seeds above; run with
// -update-seeds after changing them.
func TestSeedCorpus(t *testing.T) {
	files := map[string]string{}
	for i, sd := range sseSeeds() {
		files[fmt.Sprintf("testdata/fuzz/FuzzSSE/seed-%02d", i)] = fmt.Sprintf("go test fuzz v1\nstring(%q)\nbool(%v)\n", sd.stream, sd.chat)
	}
	for i, b := range transformtest.ToolBodies() {
		for j, chat := range []bool{false, true} {
			files[fmt.Sprintf("testdata/fuzz/FuzzWalkTools/seed-%02d", 2*i+j)] = fmt.Sprintf("go test fuzz v1\nstring(%q)\nbool(%v)\n", b, chat)
		}
	}
	for i, a := range customArgsSeeds() {
		files[fmt.Sprintf("testdata/fuzz/FuzzCustomArgs/seed-%02d", i)] = fmt.Sprintf("go test fuzz v1\nstring(%q)\nbyte('\\x03')\n", a)
	}
	for name, want := range files {
		if *updateSeeds {
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(name)
		if err != nil || string(got) != want {
			t.Errorf("%s is stale; run go test -run TestSeedCorpus -update-seeds", name)
		}
	}
}
