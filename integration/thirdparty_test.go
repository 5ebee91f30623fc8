package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// renameTool is a transform written the way a third party would write one
// for `xcaddy build --with`: outside the transforms package, on its public
// tool layer only. It renames one function on the way out and restores the
// name on the way back. Chained after field_custom_tools_to_function with
// apply_patch -> ap_fn, it is the case that needs the response onion: the
// rename must be undone before the custom call is restored.
type renameTool struct {
	// The client's name of the function.
	From string `json:"from,omitempty"`
	// The name the upstream sees.
	To string `json:"to,omitempty"`
}

func init() { caddy.RegisterModule(renameTool{}) }

func (renameTool) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("test_rename"), New: func() caddy.Module { return new(renameTool) }}
}

func (r *renameTool) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	for d.NextBlock(0) {
		opt := d.Val()
		var v string
		if !d.Args(&v) {
			return d.ArgErr()
		}
		switch opt {
		case "from":
			r.From = v
		case "to":
			r.To = v
		default:
			return d.Errf("unrecognized option %q", opt)
		}
	}
	return nil
}

func (*renameTool) PairedPhases() string { return "a renamed call must get its name back" }

func (r *renameTool) client() transforms.ToolID {
	return transforms.ToolID{Type: "function", Name: r.From}
}

func (r *renameTool) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	w := transforms.WalkTools(x, body)
	if w == nil {
		return body, nil
	}
	for i := range w.Nodes {
		n := &w.Nodes[i]
		switch {
		case n.Name != r.From:
		case n.Kind == transforms.NodeDefinition && n.Type == "function",
			n.Kind == transforms.NodeCall && (n.Type == "function_call" || n.Type == "function"),
			n.Kind == transforms.NodeChoice && n.Type == "function":
			w.Rename(n, r.To)
		}
	}
	if w.Edits() == 0 {
		return body, nil
	}
	x.Tools().Link(r, r.client(), transforms.ToolID{Type: "function", Name: r.To})
	return w.Rewrite(), nil
}

func (r *renameTool) OpenCall(x *transforms.Exchange, up transforms.ToolID) (transforms.ToolID, transforms.CallHandler, bool) {
	client, ok := x.Tools().Client(r, up)
	if !ok {
		return transforms.ToolID{}, nil, false
	}
	return client, &transforms.PassArgs{}, true
}

func (r *renameTool) WantsResponse(x *transforms.Exchange) bool {
	_, ok := x.Tools().Upstream(r, r.client())
	return ok
}

func (r *renameTool) RewriteResponse(x *transforms.Exchange, body []byte) ([]byte, error) {
	return transforms.RestoreCalls(x, r, body), nil
}

func (r *renameTool) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	if !r.WantsResponse(x) {
		return nil
	}
	return transforms.NewCallStream(x, r)
}

var (
	_ transforms.RequestRewriter  = (*renameTool)(nil)
	_ transforms.ResponseRewriter = (*renameTool)(nil)
	_ transforms.CallPolicy       = (*renameTool)(nil)
	_ transforms.PairedPhases     = (*renameTool)(nil)
	_ caddyfile.Unmarshaler       = (*renameTool)(nil)
)

const renameRules = `		rule field_custom_tools_to_function
		rule test_rename {
			from apply_patch
			to   ap_fn
		}`

// The patch the upstream sends (sloppy: no + on the added line) and what the
// client must get.
const (
	sloppyPatch = "*** Begin Patch\n*** Add File: a.txt\nhello \"é\"\n*** End Patch"
	cleanPatch  = "*** Begin Patch\n*** Add File: a.txt\n+hello \"é\"\n*** End Patch\n"
)

func jsonString(s string) string { b, _ := json.Marshal(s); return string(b) }

// renameUpstream is as strict as a function-only provider that also
// reserves the name apply_patch: it answers 400 to anything else, and
// calls ap_fn, in JSON, a Responses stream or a Chat stream.
func renameUpstream(t *testing.T) string {
	t.Helper()
	args := jsonString(`{"input":` + jsonString(sloppyPatch) + `}`)
	half := len(args) / 2
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := gjson.ParseBytes(body)
		for _, tool := range req.Get("tools").Array() {
			name := tool.Get("name").String() + tool.Get("function.name").String()
			if tool.Get("type").String() != "function" || name != "ap_fn" {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"error":{"message":"unsupported tool %s","type":"invalid_request_error","param":"tools","code":null}}`, tool.Raw)
				return
			}
		}
		stream := req.Get("stream").Bool()
		chat := strings.HasSuffix(r.URL.Path, "/chat/completions")
		switch {
		case chat && stream:
			w.Header().Set("Content-Type", "text/event-stream")
			for _, d := range []string{
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"ap_fn","arguments":""}}]},"finish_reason":null}]}`,
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":` + args[:half] + `"}}]},"finish_reason":null}]}`,
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + args[half:] + `}}]},"finish_reason":null}]}`,
				`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
				`[DONE]`,
			} {
				fmt.Fprintf(w, "data: %s\n\n", d)
				w.(http.Flusher).Flush()
			}
		case stream:
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range renameResponsesStream(args, half) {
				fmt.Fprintf(w, "event: %s\ndata: %s\n\n", gjson.Get(ev, "type").String(), ev)
				w.(http.Flusher).Flush()
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"ap_fn","arguments":%s}],"tools":%s,"tool_choice":"auto","parallel_tool_calls":true}`,
				args, req.Get("tools").Raw)
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func renameResponsesStream(args string, half int) []string {
	item := func(status, a string) string {
		return `{"id":"fc_1","type":"function_call","status":"` + status + `","call_id":"call_1","name":"ap_fn","arguments":` + a + `}`
	}
	resp := func(status, output string) string {
		return `{"id":"resp_1","object":"response","created_at":1,"status":"` + status + `","model":"m","output":[` + output + `],"tools":[{"type":"function","name":"ap_fn"}],"tool_choice":"auto","parallel_tool_calls":true}`
	}
	return []string{
		`{"type":"response.created","sequence_number":0,"response":` + resp("in_progress", "") + `}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":` + item("in_progress", `""`) + `}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":` + args[:half] + `"}`,
		`{"type":"response.function_call_arguments.delta","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"` + args[half:] + `}`,
		`{"type":"response.function_call_arguments.done","sequence_number":4,"item_id":"fc_1","output_index":0,"arguments":` + args + `}`,
		`{"type":"response.output_item.done","sequence_number":5,"output_index":0,"item":` + item("completed", args) + `}`,
		`{"type":"response.completed","sequence_number":6,"response":` + resp("completed", item("completed", args)) + `}`,
	}
}

// TestThirdPartyTransformThroughCaddy chains the outside transform with
// field_custom_tools_to_function and drives it with the official SDK, in
// JSON and in a stream: the client gets custom_tool_call apply_patch with
// the normalised patch, the upstream only ever sees the function ap_fn.
func TestThirdPartyTransformThroughCaddy(t *testing.T) {
	startGateway(t, renameRules, renameUpstream(t))
	client := sdkClient()
	params := responses.ResponseNewParams{
		Model: "m",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Create a.txt")},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfCustom("apply_patch")},
	}
	resp, err := client.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Output) != 1 || resp.Output[0].Type != "custom_tool_call" {
		t.Fatalf("output: %s", resp.RawJSON())
	}
	if c := resp.Output[0].AsCustomToolCall(); c.Name != "apply_patch" || c.Input != cleanPatch || c.CallID != "call_1" {
		t.Fatalf("call: %+v", c)
	}
	if len(resp.Tools) != 1 || resp.Tools[0].Type != "custom" || resp.Tools[0].Name != "apply_patch" {
		t.Fatalf("echoed tools: %s", gjson.Get(resp.RawJSON(), "tools").Raw)
	}

	stream := client.Responses.NewStreaming(context.Background(), params)
	var types []string
	var input strings.Builder
	var done responses.ResponseCustomToolCall
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.custom_tool_call_input.delta":
			input.WriteString(ev.AsResponseCustomToolCallInputDelta().Delta)
		case "response.output_item.done":
			done = ev.AsResponseOutputItemDone().Item.AsCustomToolCall()
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if input.String() != cleanPatch || done.Input != cleanPatch || done.Name != "apply_patch" || done.Type != "custom_tool_call" {
		t.Fatalf("stream: input %q, done %+v, events %v", input.String(), done, types)
	}
}

// TestRenameChainAtEveryChunkSize replays the upstream's answers through the
// engine, split into chunks of 1, 7 and 4096 bytes: every split gives the
// same bytes, and the client sees custom calls in JSON, in a Responses
// stream and in a Chat stream.
func TestRenameChainAtEveryChunkSize(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	var cfgs []transforms.RuleConfig
	if err := json.Unmarshal([]byte(`[{"transform":"field_custom_tools_to_function"},{"transform":"test_rename","config":{"from":"apply_patch","to":"ap_fn"}}]`), &cfgs); err != nil {
		t.Fatal(err)
	}
	rules, err := transforms.Compile(ctx, cfgs, transforms.ScopeProvider, "")
	if err != nil {
		t.Fatal(err)
	}
	chain := transforms.NewChain(rules)
	begin := func(p transforms.Protocol, req string, wantUp string) *transforms.Exchange {
		t.Helper()
		x := transforms.NewExchange(p, transforms.Limits{MaxCallBuffer: 1 << 20, MaxEvent: 1 << 20}, nil)
		chain.Begin(x, "m")
		out, err := x.RewriteRequest([]byte(req))
		if err != nil {
			t.Fatal(err)
		}
		assertJSON(t, out, wantUp)
		return x
	}
	args := jsonString(`{"input":` + jsonString(sloppyPatch) + `}`)
	half := len(args) / 2

	t.Run("responses json", func(t *testing.T) {
		x := begin(transforms.ProtocolResponses,
			`{"model":"m","tools":[{"type":"custom","name":"apply_patch"}],"tool_choice":{"type":"custom","name":"apply_patch"}}`,
			`{"model":"m","tools":[{"type":"function","name":"ap_fn","description":`+jsonString(patchUsageForTest)+`,"parameters":`+patchSchemaForTest+`,"strict":false}],"tool_choice":{"type":"function","name":"ap_fn"}}`)
		out, err := x.RewriteResponse([]byte(`{"output":[{"id":"fc_1","type":"function_call","call_id":"call_1","name":"ap_fn","arguments":` + args + `}],"tools":[],"tool_choice":{"type":"function","name":"ap_fn"}}`))
		if err != nil {
			t.Fatal(err)
		}
		assertJSON(t, out, `{"output":[{"id":"fc_1","type":"custom_tool_call","call_id":"call_1","name":"apply_patch","input":`+jsonString(cleanPatch)+`}],"tools":[{"type":"custom","name":"apply_patch"}],"tool_choice":{"type":"custom","name":"apply_patch"}}`)
		// Each rule counts its own work: the definition and the choice
		// converted twice, the call restored twice.
		if got, want := x.Counts(), (transforms.Counts{Converted: 4, Restored: 2}); got != want {
			t.Fatalf("counts %+v, want %+v", got, want)
		}
	})

	t.Run("responses stream", func(t *testing.T) {
		var up strings.Builder
		for _, ev := range renameResponsesStream(args, half) {
			fmt.Fprintf(&up, "event: %s\ndata: %s\n\n", gjson.Get(ev, "type").String(), ev)
		}
		var first string
		for _, n := range []int{1, 7, 4096} {
			x := begin(transforms.ProtocolResponses, `{"model":"m","tools":[{"type":"custom","name":"apply_patch"}]}`,
				`{"model":"m","tools":[{"type":"function","name":"ap_fn","description":`+jsonString(patchUsageForTest)+`,"parameters":`+patchSchemaForTest+`,"strict":false}]}`)
			got := replayChunks(t, x, up.String(), n)
			if first == "" {
				first = got
			} else if got != first {
				t.Fatalf("chunk size %d changed the output:\n%s\n---\n%s", n, got, first)
			}
		}
		evs := parseEvents(t, first)
		var types []string
		var input strings.Builder
		for i, ev := range evs {
			types = append(types, ev.name)
			if ev.name != gjson.Get(ev.data, "type").String() || gjson.Get(ev.data, "sequence_number").Int() != int64(i) {
				t.Fatalf("event %d: %s %s", i, ev.name, ev.data)
			}
			if ev.name == "response.custom_tool_call_input.delta" {
				input.WriteString(gjson.Get(ev.data, "delta").String())
			}
		}
		wantTypes := "response.created response.output_item.added response.custom_tool_call_input.delta response.custom_tool_call_input.done response.output_item.done response.completed"
		if strings.Join(compact(types), " ") != wantTypes {
			t.Fatalf("events %v", types)
		}
		if input.String() != cleanPatch {
			t.Fatalf("input deltas %q", input.String())
		}
		last := evs[len(evs)-1].data
		assertJSON(t, []byte(gjson.Get(last, "response").Raw),
			`{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[{"id":"fc_1","type":"custom_tool_call","status":"completed","call_id":"call_1","name":"apply_patch","input":`+jsonString(cleanPatch)+`}],"tools":[{"type":"custom","name":"apply_patch"}],"tool_choice":"auto","parallel_tool_calls":true}`)
		added := evs[1].data
		assertJSON(t, []byte(gjson.Get(added, "item").Raw), `{"id":"fc_1","type":"custom_tool_call","status":"in_progress","call_id":"call_1","name":"apply_patch","input":""}`)
	})

	t.Run("chat stream", func(t *testing.T) {
		chunk := func(delta, finish string) string {
			return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
		}
		up := chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"ap_fn","arguments":""}}]}`, "null") +
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+args[:half]+`"}}]}`, "null") +
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"`+args[half:]+`}}]}`, "null") +
			chunk(`{}`, `"tool_calls"`) + "data: [DONE]\n\n"
		var first string
		for _, n := range []int{1, 7, 4096} {
			x := begin(transforms.ProtocolChat, `{"model":"m","tools":[{"type":"custom","custom":{"name":"apply_patch"}}]}`,
				`{"model":"m","tools":[{"type":"function","function":{"name":"ap_fn","description":`+jsonString(patchUsageForTest)+`,"parameters":`+patchSchemaForTest+`,"strict":false}}]}`)
			got := replayChunks(t, x, up, n)
			if first == "" {
				first = got
			} else if got != first {
				t.Fatalf("chunk size %d changed the output", n)
			}
		}
		evs := parseEvents(t, first)
		var input strings.Builder
		var header string
		for _, ev := range evs {
			if ev.data == "[DONE]" {
				continue
			}
			for _, tc := range gjson.Get(ev.data, "choices.0.delta.tool_calls").Array() {
				if tc.Get("function").Exists() {
					t.Fatalf("client saw a function fragment: %s", ev.data)
				}
				if tc.Get("type").Exists() {
					header = tc.Raw
				}
				input.WriteString(tc.Get("custom.input").String())
			}
		}
		assertJSON(t, []byte(header), `{"index":0,"id":"call_1","type":"custom","custom":{"name":"apply_patch","input":""}}`)
		if input.String() != cleanPatch || evs[len(evs)-1].data != "[DONE]" {
			t.Fatalf("input %q, last event %q", input.String(), evs[len(evs)-1].data)
		}
	})
}

// What field_custom_tools_to_function generates for apply_patch, read from
// its own output so the expectations above stay about shapes and names.
var (
	patchUsageForTest  = "Call this function with the patch text in the `input` argument. Start with `*** Begin Patch`, end with `*** End Patch`, prefix every line of an added file with `+`, and in `*** Update File` hunks mark kept lines with a space, removed lines with `-` and added lines with `+`. Example input: \"*** Begin Patch\\n*** Add File: notes.txt\\n+first line\\n*** End Patch\\n\"."
	patchSchemaForTest = `{"type":"object","properties":{"input":{"type":"string","description":"The whole patch as plain text. The first line is exactly ` + "`*** Begin Patch`" + ` and the last line is exactly ` + "`*** End Patch`" + `. A new file is ` + "`*** Add File: <path>`" + ` followed by its lines, each starting with ` + "`+`" + `. A change is ` + "`*** Update File: <path>`" + ` (optionally followed by ` + "`*** Move to: <new path>`" + `) and hunks introduced by ` + "`@@`" + ` (optionally followed by a nearby line of code); inside a hunk, lines that stay start with a space, removed lines with ` + "`-`" + ` and added lines with ` + "`+`" + `. A removal is ` + "`*** Delete File: <path>`" + `. Do not list a line as removed and added when it does not change, and never re-create an existing file with Add File."}},"required":["input"],"additionalProperties":false}`
)

// compact drops repeats of the same event type in a row (deltas).
func compact(types []string) []string {
	var out []string
	for _, t := range types {
		if len(out) == 0 || out[len(out)-1] != t {
			out = append(out, t)
		}
	}
	return out
}

func replayChunks(t *testing.T, x *transforms.Exchange, body string, n int) string {
	t.Helper()
	s := x.NewStream()
	if s == nil {
		t.Fatal("no stream rules")
	}
	var out bytes.Buffer
	b := []byte(body)
	for len(b) > 0 {
		k := min(n, len(b))
		if err := s.Write(b[:k]); err != nil {
			t.Fatal(err)
		}
		out.Write(s.Output())
		b = b[k:]
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	out.Write(s.Output())
	return out.String()
}

type sseEvent struct{ name, data string }

func parseEvents(t *testing.T, s string) []sseEvent {
	t.Helper()
	var evs []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				evs = append(evs, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[len("data: "):]
		}
	}
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	return evs
}

func assertJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("expectation not JSON: %v\n%s", err, want)
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if !bytes.Equal(gb, wb) {
		t.Fatalf("JSON mismatch\n got: %s\nwant: %s", gb, wb)
	}
}
