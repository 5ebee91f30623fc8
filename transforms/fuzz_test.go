package transforms

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
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
	add(sse(fnCallStream(0, 0, "fc_1", "c1", "apply_patch", `{"input":"*** Begin Patch\n*** Add File: a\nx\n*** End Patch"}`, 3, true)...), false)
	add("data: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"name\":\"apply_patch\",\"id\":\"i\"}}\r\n\r\ndata: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"i\",\"delta\":\"{\\\"input\\\":\\\"\\\\u00\"}\r\r", false)
	add("event: error\ndata: {\"type\":\"error\"}\n\n: ping\n\ndata: [DONE]\n\n", false)
	// Chat Completions streams.
	add(chatSSE(
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin"}}]},"finish_reason":null}]}`,
		chunkHead+`{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" Patch\\n\"}"}}]},"finish_reason":"tool_calls"}]}`,
	), true)
	add(chatSSE(
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
		for i, n := range chunkSizes {
			var x *Exchange
			if chat {
				x = chatExchange(t, wildcard, chatRequest)
			} else {
				x = exchangeAfter(t, wildcard, patchRequest)
			}
			got := replay(t, x, stream, n)
			if i == 0 {
				first = got
			} else if got != first {
				t.Fatalf("chunk size %d changed the output", n)
			}
			if !chat {
				if general := replayClaims(t, exchangeAfter(t, wildcard, patchRequest), stream, n, false); general != got {
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
		up := fnCallStream(0, 0, "fc_1", "c1", "apply_patch", args, n, true)
		x := exchangeAfter(t, `[{"transform":"field_custom_tools_to_function"}]`, patchRequest)
		out := replay(t, x, sse(up...), 7)
		evs := events(t, out)
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
		x2 := exchangeAfter(t, `[{"transform":"field_custom_tools_to_function"}]`, patchRequest)
		body := `{"output":[{"type":"function_call","call_id":"c1","name":"apply_patch","arguments":` + jstr(args) + `}]}`
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

// walkSeeds are request bodies of both protocols with every kind of tool
// node, nesting and escapes.
func walkSeeds() []string {
	return []string{
		`{"tool_choice":{"type":"allowed_tools","tools":[{"type":"custom","name":"a"}]},"tools":[{"name":"ns","tools":[{"type":"custom","name":"a"}],"type":"namespace"}],"input":[{"type":"additional_tools","tools":[{"type":"custom","name":"b"}]},{"type":"custom_tool_call","call_id":"c","name":"a","input":"x"},{"type":"custom_tool_call_output","call_id":"c"}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"custom","custom":{"name":"a","input":"x"}}]},{"role":"tool","tool_call_id":"c"}],"tools":[{"type":"custom","custom":{"name":"a"}}],"tool_choice":{"type":"custom","custom":{"name":"a"}}}`,
		`{"tools":[{"type":"namespace","name":"n","tools":[{"type":"namespace","name":"m","tools":[{"type":"custom","name":"\u0061"}]}]}],"tools":[]}`,
		`{"tools":[{"tools":[{"type":"custom","name":"a"}],"type":"function","name":"f"}],"input":"plain"}`,
	}
}

// FuzzWalkTools: the walk accepts exactly the objects encoding/json accepts
// and calls invalid exactly what it rejects; its nodes are values inside the
// body (objects, but for tool_choice), inner objects lie inside their node,
// and the conversion built on the walk always yields JSON.
func FuzzWalkTools(f *testing.F) {
	for _, s := range walkSeeds() {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, body string, chat bool) {
		p := ProtocolResponses
		if chat {
			p = ProtocolChat
		}
		x := NewExchange(p, Limits{}, nil)
		w := WalkTools(x, []byte(body))
		valid := json.Valid([]byte(body))
		object := valid && strings.HasPrefix(strings.TrimLeft(body, " \t\r\n"), "{")
		if (w != nil) != object || x.Invalid == valid {
			t.Fatalf("walk %v, invalid %v; encoding/json valid %v", w != nil, x.Invalid, valid)
		}
		if w == nil {
			return
		}
		for _, n := range w.Nodes {
			if n.Start < 0 || n.End > len(body) || n.Start >= n.End || body[n.Start] != '{' && n.Kind != NodeChoice || !json.Valid([]byte(body[n.Start:n.End])) {
				t.Fatalf("node %+v is not a value of the body", n)
			}
			if n.InnerStart >= 0 && (n.InnerStart < n.Start || n.InnerEnd > n.End) {
				t.Fatalf("inner object outside its node: %+v", n)
			}
			_ = n.Where()
		}
		c := chainOf(t, wildcard)
		x = NewExchange(p, Limits{}, nil)
		c.Begin(x, "")
		out, err := x.RewriteRequest([]byte(body))
		if err == nil && !json.Valid(out) {
			t.Fatalf("conversion gave invalid JSON: %s", out)
		}
		// Built as it is read, as the handler sends it: the same bytes.
		if _, msg := requestBodyMismatch(t, c, p, []byte(body), true, 1, 7); msg != "" {
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
	for i, b := range walkSeeds() {
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
