package fakeprovider

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// demoTestTime makes created_at stable so that replies can be compared byte for byte.
var demoTestTime = time.Unix(1760000000, 0)

func newTestDemo() *Provider {
	return &Provider{Now: func() time.Time { return demoTestTime }}
}

func demoDo(t *testing.T, d *Provider, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	d.ServeHTTP(rec, req)
	return rec
}

func demoErrorBody(message, param string) string {
	p := "null"
	if param != "" {
		p = strconv.Quote(param)
	}
	return `{"error":{"message":` + strconv.Quote(message) + `,"type":"invalid_request_error","param":` + p + `,"code":null}}` + "\n"
}

const (
	wantCustomTool   = "unknown variant `custom`, expected `function`"
	wantCustomChoice = "unknown variant `custom`, expected one of `none`, `auto`, `required`, `function`, `allowed_tools`"
)

func TestProviderRejectsCustomShapes(t *testing.T) {
	const fn = `{"type":"function","name":"exec_command","parameters":{"type":"object"}}`
	const custom = `{"type":"custom","name":"apply_patch","format":{"type":"text"}}`
	for _, tc := range []struct {
		name, path, body, param, message string
	}{
		{
			name:    "responses top-level custom tool",
			path:    "/v1/responses",
			body:    `{"model":"m","input":"hi","tools":[` + fn + `,` + fn + `,{"type":"web_search"},` + custom + `]}`,
			param:   "tools[3].type",
			message: wantCustomTool,
		},
		{
			name:    "responses custom tool in namespace",
			path:    "/v1/responses",
			body:    `{"model":"m","input":"hi","tools":[` + fn + `,{"type":"namespace","name":"functions","description":"d","tools":[` + fn + `,` + custom + `]}]}`,
			param:   "tools[1].tools[1].type",
			message: wantCustomTool,
		},
		{
			name:    "responses custom tool in additional_tools item",
			path:    "/v1/responses",
			body:    `{"model":"m","input":[{"type":"message","role":"user","content":"hi"},{"type":"additional_tools","role":"developer","tools":[` + custom + `]}]}`,
			param:   "input[1].tools[0].type",
			message: wantCustomTool,
		},
		{
			name:    "responses namespace inside additional_tools item",
			path:    "/v1/responses",
			body:    `{"model":"m","input":[{"type":"additional_tools","role":"developer","tools":[{"type":"namespace","name":"n","tools":[` + custom + `]}]}]}`,
			param:   "input[0].tools[0].tools[0].type",
			message: wantCustomTool,
		},
		{
			name:    "responses custom_tool_call item",
			path:    "/v1/responses",
			body:    `{"model":"m","input":[{"type":"message","role":"user","content":"hi"},{"type":"custom_tool_call","call_id":"call_1","name":"apply_patch","input":"x"}]}`,
			param:   "input[1].type",
			message: "unknown variant `custom_tool_call`, expected one of `message`, `function_call`, `function_call_output`, `reasoning`",
		},
		{
			name:    "responses custom_tool_call_output item",
			path:    "/v1/responses",
			body:    `{"model":"m","input":[{"type":"custom_tool_call_output","call_id":"call_1","output":"ok"}]}`,
			param:   "input[0].type",
			message: "unknown variant `custom_tool_call_output`, expected one of `message`, `function_call`, `function_call_output`, `reasoning`",
		},
		{
			name:    "responses function_call with ctc_ id",
			path:    "/v1/responses",
			body:    `{"model":"m","input":[{"type":"message","role":"user","content":"hi"},{"type":"function_call","id":"ctc_1","call_id":"call_1","name":"apply_patch","arguments":"{}"}]}`,
			param:   "input[1].id",
			message: "Invalid 'input[1].id': 'ctc_1'. Expected an ID that begins with 'fc'.",
		},
		{
			name:    "responses function_call_output with ctco_ id",
			path:    "/v1/responses",
			body:    `{"model":"m","input":[{"type":"function_call","call_id":"call_1","name":"apply_patch","arguments":"{}"},{"type":"function_call_output","id":"ctco_01","call_id":"call_1","output":"ok"}]}`,
			param:   "input[1].id",
			message: "Invalid 'input[1].id': 'ctco_01'. Expected an ID that begins with 'fc'.",
		},
		{
			name:    "responses tool_choice custom",
			path:    "/v1/responses",
			body:    `{"model":"m","input":"hi","tool_choice":{"type":"custom","name":"apply_patch"}}`,
			param:   "tool_choice.type",
			message: wantCustomChoice,
		},
		{
			name:    "responses tool_choice allowed_tools with custom",
			path:    "/v1/responses",
			body:    `{"model":"m","input":"hi","tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"f"},{"type":"custom","name":"apply_patch"}]}}`,
			param:   "tool_choice.tools[1].type",
			message: wantCustomTool,
		},
		{
			name:    "chat custom tool",
			path:    "/v1/chat/completions",
			body:    `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"custom","custom":{"name":"apply_patch"}}]}`,
			param:   "tools[1].type",
			message: wantCustomTool,
		},
		{
			name:    "chat function tool that kept its custom body",
			path:    "/v1/chat/completions",
			body:    `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"exec","parameters":{"type":"object"}}},{"type":"function","function":{"name":"apply_patch"},"custom":{"name":"apply_patch"}}]}`,
			param:   "tools[1].custom",
			message: "Unknown parameter: 'tools[1].custom'.",
		},
		{
			name:    "chat custom tool call in history",
			path:    "/v1/chat/completions",
			body:    `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"custom","custom":{"name":"apply_patch","input":"x"}}]}]}`,
			param:   "messages[1].tool_calls[1].type",
			message: wantCustomTool,
		},
		{
			name:    "chat tool_choice custom",
			path:    "/v1/chat/completions",
			body:    `{"model":"m","messages":[],"tool_choice":{"type":"custom","custom":{"name":"apply_patch"}}}`,
			param:   "tool_choice.type",
			message: wantCustomChoice,
		},
		{
			name:    "chat tool_choice allowed_tools nested custom",
			path:    "/v1/chat/completions",
			body:    `{"model":"m","messages":[],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"custom","custom":{"name":"apply_patch"}}]}}}`,
			param:   "tool_choice.allowed_tools.tools[0].type",
			message: wantCustomTool,
		},
		{
			name:    "invalid JSON",
			path:    "/v1/responses",
			body:    `{"model":`,
			message: "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload.",
		},
		{
			name:    "JSON that is not an object",
			path:    "/v1/chat/completions",
			body:    `[]`,
			message: "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload.",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDemo()
			rec := demoDo(t, d, http.MethodPost, tc.path, tc.body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400; body %s", rec.Code, rec.Body)
			}
			if got, want := rec.Body.String(), demoErrorBody(tc.message, tc.param); got != want {
				t.Errorf("body:\n got %s\nwant %s", got, want)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if reqs := d.Requests(); len(reqs) != 1 || string(reqs[0]) != tc.body {
				t.Errorf("recorded %q, want the one body", reqs)
			}
		})
	}
}

func TestProviderAcceptsFunctionOnlyShapes(t *testing.T) {
	for _, tc := range []struct{ name, path, body string }{
		{"hosted tools pass", "/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"web_search"},{"type":"tool_search","execution":"client"},{"type":"local_shell"}]}`},
		{"fc ids and missing ids", "/v1/responses", `{"model":"m","input":[{"type":"function_call","id":"fc_1","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call","call_id":"d","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"x"}]}`},
		{"function tool_choice", "/v1/responses", `{"model":"m","input":"hi","tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"f"}]}}`},
		{"chat function tools", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := demoDo(t, newTestDemo(), http.MethodPost, tc.path, tc.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status = %d, want 200; body %s", rec.Code, rec.Body)
			}
		})
	}
}

func TestProviderNotFound(t *testing.T) {
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/v1/models"},
		{http.MethodPost, "/v1/embeddings"},
		{http.MethodGet, "/v1/responses"},
		{http.MethodPost, "/v1/responses/compact"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			d := newTestDemo()
			rec := demoDo(t, d, tc.method, tc.path, "")
			if rec.Code != http.StatusNotFound {
				t.Fatalf("status = %d, want 404", rec.Code)
			}
			want := demoErrorBody(fmt.Sprintf("Invalid URL (%s %s)", tc.method, tc.path), "")
			if got := rec.Body.String(); got != want {
				t.Errorf("body:\n got %s\nwant %s", got, want)
			}
			if n := len(d.Requests()); n != 0 {
				t.Errorf("recorded %d requests, want 0", n)
			}
		})
	}
}

func TestProviderBodyTooLarge(t *testing.T) {
	d := newTestDemo()
	rec := demoDo(t, d, http.MethodPost, "/v1/responses", strings.Repeat(" ", maxBody+1))
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status = %d, want 413", rec.Code)
	}
	want := `{"error":{"message":"Request body too large: the limit is 33554432 bytes.","type":"invalid_request_error","param":null,"code":"request_too_large"}}` + "\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("body:\n got %s\nwant %s", got, want)
	}
	if n := len(d.Requests()); n != 0 {
		t.Errorf("recorded %d requests, want 0", n)
	}
}

const demoApplyPatchTool = `{"type":"function","name":"apply_patch","description":"d","parameters":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}}`

func TestProviderResponsesJSON(t *testing.T) {
	const wantArgs = `{"input":"*** Begin Patch ***\nHello\n*** End Patch ***"}`
	for _, tc := range []struct {
		name, body, wantOutput, wantEcho string
	}{
		{
			name:       "function tool called",
			body:       `{"model":"gpt-5.5","input":[{"type":"message","role":"user","content":"Create hello.txt"}],"tools":[` + demoApplyPatchTool + `],"tool_choice":"auto","parallel_tool_calls":false}`,
			wantOutput: `[{"id":"msg_demo_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"I'll create the file."}],"role":"assistant"},{"id":"fc_demo_1","type":"function_call","status":"completed","arguments":` + strconv.Quote(wantArgs) + `,"call_id":"call_demo_1","name":"apply_patch"}]`,
			wantEcho:   `"parallel_tool_calls":false,"tool_choice":"auto","tools":[` + demoApplyPatchTool + `]`,
		},
		{
			name:       "function tool in namespace called with namespace",
			body:       `{"model":"gpt-5.5","input":"hi","tools":[{"type":"namespace","name":"functions","tools":[` + demoApplyPatchTool + `]}]}`,
			wantOutput: `[{"id":"msg_demo_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"I'll create the file."}],"role":"assistant"},{"id":"fc_demo_1","type":"function_call","status":"completed","arguments":` + strconv.Quote(wantArgs) + `,"call_id":"call_demo_1","name":"apply_patch","namespace":"functions"}]`,
			wantEcho:   `"parallel_tool_calls":true,"tool_choice":"auto","tools":[{"type":"namespace","name":"functions","tools":[` + demoApplyPatchTool + `]}]`,
		},
		{
			name:       "tool output answered with text",
			body:       `{"model":"gpt-5.5","input":[{"type":"function_call","call_id":"c","name":"apply_patch","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}],"tools":[` + demoApplyPatchTool + `]}`,
			wantOutput: `[{"id":"msg_demo_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Patch applied."}],"role":"assistant"}]`,
			wantEcho:   `"parallel_tool_calls":true,"tool_choice":"auto","tools":[` + demoApplyPatchTool + `]`,
		},
		{
			name:       "no apply_patch tool",
			body:       `{"model":"gpt-5.5","input":"hi","tools":[{"type":"function","name":"exec_command"}]}`,
			wantOutput: `[{"id":"msg_demo_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"No apply_patch function tool was offered, so I cannot edit files."}],"role":"assistant"}]`,
			wantEcho:   `"parallel_tool_calls":true,"tool_choice":"auto","tools":[{"type":"function","name":"exec_command"}]`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDemo()
			d.Patch = "*** Begin Patch ***\nHello\n*** End Patch ***"
			rec := demoDo(t, d, http.MethodPost, "/v1/responses", tc.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status = %d; body %s", rec.Code, rec.Body)
			}
			var out struct {
				Output json.RawMessage
				Usage  struct {
					OutputTokens int `json:"output_tokens"`
				}
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatal(err)
			}
			in := estimateTokens(len(tc.body))
			want := `{"id":"resp_demo_1","object":"response","created_at":1760000000,"status":"completed","completed_at":1760000000,` +
				`"error":null,"incomplete_details":null,"model":"gpt-5.5","output":` + tc.wantOutput + `,` + tc.wantEcho +
				fmt.Sprintf(`,"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}`,
					in, out.Usage.OutputTokens, in+out.Usage.OutputTokens) + "\n"
			if got := rec.Body.String(); got != want {
				t.Errorf("body:\n got %s\nwant %s", got, want)
			}
			if out.Usage.OutputTokens <= 0 {
				t.Errorf("output_tokens = %d", out.Usage.OutputTokens)
			}
		})
	}
}

type sseFrame struct{ event, data string }

// parseSSE splits a stream into frames and fails on anything but "event:"
// and "data:" lines, so framing mistakes show up.
func parseSSE(t *testing.T, stream string) []sseFrame {
	t.Helper()
	if !strings.HasSuffix(stream, "\n\n") {
		t.Fatalf("stream does not end with a blank line: %q", stream)
	}
	var frames []sseFrame
	for raw := range strings.SplitSeq(strings.TrimSuffix(stream, "\n\n"), "\n\n") {
		var f sseFrame
		for line := range strings.SplitSeq(raw, "\n") {
			switch {
			case strings.HasPrefix(line, "event: ") && f.event == "" && f.data == "":
				f.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && f.data == "":
				f.data = strings.TrimPrefix(line, "data: ")
			default:
				t.Fatalf("unexpected line %q in frame %q", line, raw)
			}
		}
		frames = append(frames, f)
	}
	return frames
}

type demoEvent struct {
	Type           string `json:"type"`
	SequenceNumber *int   `json:"sequence_number"`
	OutputIndex    *int   `json:"output_index"`
	ItemID         string `json:"item_id"`
	Delta          string `json:"delta"`
	Arguments      string `json:"arguments"`
	Name           string `json:"name"`
	Text           string `json:"text"`
	Obfuscation    *string
	Item           *struct {
		ID, Type, Status, Arguments, Name string
		CallID                            string `json:"call_id"`
	}
	Response *struct {
		Status string
		Output []json.RawMessage
		Usage  json.RawMessage
		Tools  json.RawMessage
	}
}

func TestProviderResponsesStreamEvents(t *testing.T) {
	wantTypes := []string{
		"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added",
		// function_call_arguments.delta events are inserted here
		"response.function_call_arguments.done", "response.output_item.done",
		"response.completed",
	}
	for _, tc := range []struct {
		name      string
		patch     string
		deltaSize int
		deltas    int
	}{
		// {"input":"…"} around the 95 escaped bytes of DefaultPatch is 107 bytes.
		{"default patch default size", "", 0, 14},
		{"one byte deltas", "*** Begin Patch\n*** End Patch\n", 1, 44},
		{"split inside escapes", "a\"b\\c\n", 3, 7},
		{"multibyte characters stay whole", "é€😀é€😀", 3, 10},
		{"single delta", "x", 1000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDemo()
			d.Patch, d.DeltaSize = tc.patch, tc.deltaSize
			patch := d.patch()
			rec := demoDo(t, d, http.MethodPost, "/v1/responses",
				`{"model":"gpt-5.5","stream":true,"input":"Create hello.txt","tools":[`+demoApplyPatchTool+`]}`)
			if rec.Code != http.StatusOK {
				t.Fatalf("status = %d; body %s", rec.Code, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
				t.Errorf("Content-Type = %q", ct)
			}
			if !rec.Flushed {
				t.Error("stream was never flushed")
			}
			frames := parseSSE(t, rec.Body.String())

			var types []string
			var args, text strings.Builder
			var events []demoEvent
			for i, f := range frames {
				var ev demoEvent
				if err := json.Unmarshal([]byte(f.data), &ev); err != nil {
					t.Fatalf("frame %d: %v: %s", i, err, f.data)
				}
				if ev.Type != f.event {
					t.Errorf("frame %d: event %q but data.type %q", i, f.event, ev.Type)
				}
				if ev.SequenceNumber == nil || *ev.SequenceNumber != i {
					t.Errorf("frame %d: sequence_number %v, want %d", i, ev.SequenceNumber, i)
				}
				isDelta := strings.HasSuffix(ev.Type, ".delta")
				if isDelta != (ev.Obfuscation != nil) {
					t.Errorf("frame %d (%s): obfuscation present = %v", i, ev.Type, ev.Obfuscation != nil)
				}
				switch ev.Type {
				case "response.function_call_arguments.delta":
					args.WriteString(ev.Delta)
					if ev.ItemID != "fc_demo_1" || *ev.OutputIndex != 1 {
						t.Errorf("frame %d: item_id %q output_index %d", i, ev.ItemID, *ev.OutputIndex)
					}
					if len(ev.Delta) > max(d.deltaSize(), 4) {
						t.Errorf("frame %d: delta %q longer than %d bytes", i, ev.Delta, d.deltaSize())
					}
					continue
				case "response.output_text.delta":
					text.WriteString(ev.Delta)
				}
				types = append(types, ev.Type)
				events = append(events, ev)
			}
			if !reflect.DeepEqual(types, wantTypes) {
				t.Errorf("event types:\n got %q\nwant %q", types, wantTypes)
			}
			if got := len(frames) - len(types); got != tc.deltas {
				t.Errorf("%d argument deltas, want %d", got, tc.deltas)
			}
			if text.String() != msgPreface {
				t.Errorf("text deltas = %q", text.String())
			}
			var decoded map[string]string
			if err := json.Unmarshal([]byte(args.String()), &decoded); err != nil {
				t.Fatalf("argument deltas %q: %v", args.String(), err)
			}
			if !reflect.DeepEqual(decoded, map[string]string{"input": patch}) {
				t.Errorf("arguments decode to %q, want input %q", decoded, patch)
			}

			added, argsDone, itemDone, completed := events[11], events[12], events[13], events[14]
			if it := added.Item; it == nil || it.ID != "fc_demo_1" || it.Status != "in_progress" || it.Arguments != "" ||
				it.CallID != "call_demo_1" || it.Name != "apply_patch" || *added.OutputIndex != 1 {
				t.Errorf("call output_item.added = %+v", added.Item)
			}
			if argsDone.Arguments != args.String() || argsDone.Name != "apply_patch" || argsDone.ItemID != "fc_demo_1" {
				t.Errorf("arguments.done = %+v", argsDone)
			}
			if it := itemDone.Item; it == nil || it.Status != "completed" || it.Arguments != args.String() || it.CallID != "call_demo_1" {
				t.Errorf("call output_item.done = %+v", itemDone.Item)
			}
			if r := completed.Response; r == nil || r.Status != "completed" || len(r.Output) != 2 ||
				string(r.Tools) != "["+demoApplyPatchTool+"]" || string(r.Usage) == "null" {
				t.Errorf("response.completed = %+v", completed.Response)
			}
		})
	}
}

func TestSplitDemoBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		size int
		want []string
	}{
		{"", 8, nil},
		{"abcdefgh", 8, []string{"abcdefgh"}},
		{`{"input":"a\nb"}`, 5, []string{`{"inp`, `ut":"`, `a\nb"`, `}`}},
		{`"\u00e9"`, 3, []string{`"\u`, `00e`, `9"`}},
		{"aé", 2, []string{"a", "é"}},
		{"😀b", 2, []string{"😀", "b"}},
	} {
		if got := splitBytes(tc.in, tc.size); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitBytes(%q, %d) = %q, want %q", tc.in, tc.size, got, tc.want)
		}
	}
}

// TestProviderResponsesStreamBytes pins a whole stream byte for byte.
func TestProviderResponsesStreamBytes(t *testing.T) {
	body := `{"model":"m","stream":true,"stream_options":{"include_obfuscation":false},"input":[{"type":"function_call","call_id":"c","name":"apply_patch","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}]}`
	rec := demoDo(t, newTestDemo(), http.MethodPost, "/v1/responses", body)
	in := estimateTokens(len(body))
	const head = `"id":"resp_demo_1","object":"response","created_at":1760000000,`
	const tail = `"error":null,"incomplete_details":null,"model":"m",`
	const echo = `"parallel_tool_calls":true,"tool_choice":"auto","tools":[]`
	const msg = `"id":"msg_demo_1","type":"message"`
	const part = `"item_id":"msg_demo_1","output_index":0,"content_index":0`
	const final = `{"type":"output_text","annotations":[],"logprobs":[],"text":"Patch applied."}`
	want := "" +
		"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{" + head + `"status":"in_progress","completed_at":null,` + tail + `"output":[],` + echo + `,"usage":null}}` + "\n\n" +
		"event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":{" + head + `"status":"in_progress","completed_at":null,` + tail + `"output":[],` + echo + `,"usage":null}}` + "\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":2,\"output_index\":0,\"item\":{" + msg + `,"status":"in_progress","content":[],"role":"assistant"}}` + "\n\n" +
		"event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":3," + part + `,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}` + "\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":4," + part + `,"delta":"Patch","logprobs":[]}` + "\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":5," + part + `,"delta":" applied.","logprobs":[]}` + "\n\n" +
		"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"sequence_number\":6," + part + `,"text":"Patch applied.","logprobs":[]}` + "\n\n" +
		"event: response.content_part.done\ndata: {\"type\":\"response.content_part.done\",\"sequence_number\":7," + part + `,"part":` + final + "}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":8,\"output_index\":0,\"item\":{" + msg + `,"status":"completed","content":[` + final + `],"role":"assistant"}}` + "\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":9,\"response\":{" + head + `"status":"completed","completed_at":1760000000,` + tail +
		`"output":[{` + msg + `,"status":"completed","content":[` + final + `],"role":"assistant"}],` + echo +
		fmt.Sprintf(`,"usage":{"input_tokens":%d,"input_tokens_details":{"cached_tokens":0},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}}}`, in, in+4) + "\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("stream:\n got %s\nwant %s", got, want)
	}
}

func TestProviderChat(t *testing.T) {
	const tools = `"tools":[{"type":"function","function":{"name":"apply_patch","parameters":{"type":"object"}}}]`
	const user = `"messages":[{"role":"user","content":"Create hello.txt"}]`
	args := (&Provider{}).arguments()
	chunkHead := `{"id":"chatcmpl-demo-1","object":"chat.completion.chunk","created":1760000000,"model":"m","choices":`
	choice := func(delta, finish string) string {
		return `[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]`
	}
	callChunks := func(withUsage bool) []string {
		u := ""
		if withUsage {
			u = `,"usage":null`
		}
		out := []string{chunkHead + choice(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_demo_1","type":"function","function":{"name":"apply_patch","arguments":""}}]}`, "null") + u + "}"}
		for _, p := range splitBytes(args, DefaultDeltaSize) {
			out = append(out, chunkHead+choice(`{"tool_calls":[{"index":0,"function":{"arguments":`+strconv.Quote(p)+`}}]}`, "null")+u+"}")
		}
		return append(out, chunkHead+choice(`{}`, `"tool_calls"`)+u+"}")
	}
	for _, tc := range []struct {
		name, body string
		want       []string // data payloads for streams, or the JSON body
		usage      bool
	}{
		{
			name: "stream tool call without usage",
			body: `{"model":"m","stream":true,` + user + `,` + tools + `}`,
			want: append(callChunks(false), "[DONE]"),
		},
		{
			name:  "stream tool call with usage",
			body:  `{"model":"m","stream":true,"stream_options":{"include_usage":true},` + user + `,` + tools + `}`,
			want:  append(callChunks(true), "USAGE", "[DONE]"),
			usage: true,
		},
		{
			name: "stream text after tool result",
			body: `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c","content":"ok"}],` + tools + `}`,
			want: []string{
				chunkHead + choice(`{"role":"assistant","content":"","refusal":null}`, "null") + "}",
				chunkHead + choice(`{"content":"Patch"}`, "null") + "}",
				chunkHead + choice(`{"content":" applied."}`, "null") + "}",
				chunkHead + choice(`{}`, `"stop"`) + "}",
				"[DONE]",
			},
		},
		{
			name: "json tool call",
			body: `{"model":"m",` + user + `,` + tools + `}`,
			want: []string{`{"id":"chatcmpl-demo-1","object":"chat.completion","created":1760000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"annotations":[],"tool_calls":[{"id":"call_demo_1","type":"function","function":{"name":"apply_patch","arguments":` + strconv.Quote(args) + `}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":USAGE}`},
		},
		{
			name: "json without apply_patch",
			body: `{"model":"m",` + user + `}`,
			want: []string{`{"id":"chatcmpl-demo-1","object":"chat.completion","created":1760000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"No apply_patch function tool was offered, so I cannot edit files.","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":USAGE}`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := demoDo(t, newTestDemo(), http.MethodPost, "/v1/chat/completions", tc.body)
			if rec.Code != http.StatusOK {
				t.Fatalf("status = %d; body %s", rec.Code, rec.Body)
			}
			var got []string
			if strings.Contains(tc.body, `"stream":true`) {
				for _, f := range parseSSE(t, rec.Body.String()) {
					if f.event != "" {
						t.Errorf("chat stream has an event line %q", f.event)
					}
					got = append(got, f.data)
				}
			} else {
				got = []string{strings.TrimSuffix(rec.Body.String(), "\n")}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d payloads, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i := range got {
				want := tc.want[i]
				if strings.Contains(want, "USAGE") {
					// Usage depends on the body length; check its shape, then pin it.
					var u struct {
						Usage struct {
							Prompt     int `json:"prompt_tokens"`
							Completion int `json:"completion_tokens"`
						}
					}
					if err := json.Unmarshal([]byte(got[i]), &u); err != nil {
						t.Fatal(err)
					}
					if u.Usage.Prompt != estimateTokens(len(tc.body)) || u.Usage.Completion <= 0 {
						t.Errorf("usage = %+v", u.Usage)
					}
					usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0}}`,
						u.Usage.Prompt, u.Usage.Completion, u.Usage.Prompt+u.Usage.Completion)
					if want == "USAGE" {
						want = chunkHead + `[],"usage":` + usage + "}"
					} else {
						want = strings.Replace(want, "USAGE", usage, 1)
					}
				}
				if got[i] != want {
					t.Errorf("payload %d:\n got %s\nwant %s", i, got[i], want)
				}
			}
		})
	}
}

func TestProviderRequestsAreCopies(t *testing.T) {
	d := newTestDemo()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			demoDo(t, d, http.MethodPost, "/v1/responses", fmt.Sprintf(`{"model":"m%d","input":"hi"}`, i))
		})
	}
	wg.Wait()
	reqs := d.Requests()
	if len(reqs) != 8 {
		t.Fatalf("%d requests, want 8", len(reqs))
	}
	reqs[0][0] = 'X'
	if d.Requests()[0][0] != '{' {
		t.Error("Requests returned the recorder's own slices")
	}
}

// TestProviderLogIsBounded sends more and larger bodies than the log keeps:
// only the last LogSize remain, each cut at LogBodyLimit, while reply ids
// keep counting every request.
func TestProviderLogIsBounded(t *testing.T) {
	d := newTestDemo()
	big := `{"model":"big","input":"` + strings.Repeat("x", LogBodyLimit) + `"}`
	demoDo(t, d, http.MethodPost, "/v1/responses", big)
	for i := range LogSize + 4 {
		rec := demoDo(t, d, http.MethodPost, "/v1/responses", fmt.Sprintf(`{"model":"m%d","input":"hi"}`, i))
		if want := fmt.Sprintf(`"id":"resp_demo_%d"`, i+2); !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("reply %d lacks %s: %s", i, want, rec.Body)
		}
	}
	reqs := d.Requests()
	if len(reqs) != LogSize {
		t.Fatalf("%d bodies kept, want %d", len(reqs), LogSize)
	}
	if got, want := string(reqs[0]), `{"model":"m4","input":"hi"}`; got != want {
		t.Errorf("oldest kept = %s, want %s", got, want)
	}
	if got, want := string(reqs[LogSize-1]), fmt.Sprintf(`{"model":"m%d","input":"hi"}`, LogSize+3); got != want {
		t.Errorf("newest kept = %s, want %s", got, want)
	}

	d = newTestDemo()
	demoDo(t, d, http.MethodPost, "/v1/responses", big)
	if got := d.Requests()[0]; len(got) != LogBodyLimit || string(got) != big[:LogBodyLimit] {
		t.Errorf("kept %d bytes of a %d-byte body, want its first %d", len(got), len(big), LogBodyLimit)
	}
}

// TestProviderReply checks a Reply hook answers instead of the script only
// after the strict checks passed.
func TestProviderReply(t *testing.T) {
	d := newTestDemo()
	d.Reply = func(w http.ResponseWriter, req gjson.Result) {
		_, _ = io.WriteString(w, "reply for "+req.Get("model").String())
	}
	rec := demoDo(t, d, http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[]}`)
	if rec.Code != http.StatusOK || rec.Body.String() != "reply for m" {
		t.Errorf("accepted request: %d %s", rec.Code, rec.Body)
	}
	rec = demoDo(t, d, http.MethodPost, "/v1/chat/completions", `{"model":"m","tools":[{"type":"custom","custom":{"name":"x"}}]}`)
	if want := demoErrorBody(wantCustomTool, "tools[0].type"); rec.Code != http.StatusBadRequest || rec.Body.String() != want {
		t.Errorf("rejected request: %d %s, want 400 %s", rec.Code, rec.Body, want)
	}
}

// strictErrorBody is demoErrorBody with an error code.
func strictErrorBody(message, param, code string) string {
	c := "null"
	if code != "" {
		c = strconv.Quote(code)
	}
	return `{"error":{"message":` + strconv.Quote(message) + `,"type":"invalid_request_error","param":` + strconv.Quote(param) + `,"code":` + c + `}}` + "\n"
}

// dotted70 is a 70-character MCP-style name with dots.
const dotted70 = "weather.now.for.a.very.long.dotted.name.that.goes.over.sixty.four.char"

func TestStrictProviderRejects(t *testing.T) {
	const fn = `{"type":"function","name":"exec_command","parameters":{"type":"object"}}`
	long := strings.Repeat("a", 70)
	patternMsg := func(p string) string {
		return "Invalid '" + p + "': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
	}
	longMsg := func(p string, n int) string {
		return fmt.Sprintf("Invalid '%s': string too long. Expected a string with maximum length 64, but got a string with length %d instead.", p, n)
	}
	for _, tc := range []struct {
		name, path, body, param, message, code string
	}{
		{"web_search", "/v1/responses",
			`{"model":"m","input":"hi","tools":[` + fn + `,` + fn + `,` + fn + `,{"type":"web_search"}]}`,
			"tools[3].type", "unknown variant `web_search`, expected `function`", ""},
		{"client tool_search", "/v1/responses",
			`{"model":"m","input":"hi","tools":[{"type":"tool_search","execution":"client"}]}`,
			"tools[0].type", "unknown variant `tool_search`, expected `function`", ""},
		{"namespace tool", "/v1/responses",
			`{"model":"m","input":"hi","tools":[{"type":"namespace","name":"n","tools":[` + fn + `]}]}`,
			"tools[0].type", "unknown variant `namespace`, expected `function`", ""},
		{"local_shell in additional_tools", "/v1/responses",
			`{"model":"m","input":[{"type":"additional_tools","tools":[` + fn + `,{"type":"local_shell"}]}]}`,
			"input[0].tools[1].type", "unknown variant `local_shell`, expected `function`", ""},
		{"tool without a type", "/v1/responses",
			`{"model":"m","input":"hi","tools":[{"name":"f"}]}`,
			"tools[0].type", "Missing required parameter: 'tools[0].type'.", "missing_required_parameter"},
		{"dotted name", "/v1/responses",
			`{"model":"m","input":"hi","tools":[` + fn + `,` + fn + `,` + fn + `,{"type":"function","name":"a.b"}]}`,
			"tools[3].name", patternMsg("tools[3].name"), "invalid_value"},
		{"70-character dotted name fails the pattern first", "/v1/responses",
			`{"model":"m","input":"hi","tools":[{"type":"function","name":"` + dotted70 + `"}]}`,
			"tools[0].name", patternMsg("tools[0].name"), "invalid_value"},
		{"70-character name", "/v1/responses",
			`{"model":"m","input":"hi","tools":[` + fn + `,` + fn + `,` + fn + `,{"type":"function","name":"` + long + `"}]}`,
			"tools[3].name", longMsg("tools[3].name", 70), "string_above_max_length"},
		{"empty name", "/v1/responses",
			`{"model":"m","input":"hi","tools":[{"type":"function","name":""}]}`,
			"tools[0].name", patternMsg("tools[0].name"), "invalid_value"},
		{"missing name", "/v1/responses",
			`{"model":"m","input":"hi","tools":[{"type":"function"}]}`,
			"tools[0].name", "Missing required parameter: 'tools[0].name'.", "missing_required_parameter"},
		{"namespace member on a function", "/v1/responses",
			`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","namespace":"n"}]}`,
			"tools[0].namespace", "Unknown parameter: 'tools[0].namespace'.", "unknown_parameter"},
		{"local_shell_call item", "/v1/responses",
			`{"model":"m","input":[{"type":"message","role":"user","content":"hi"},{"type":"local_shell_call","call_id":"c","action":{"type":"exec","command":["ls"]}}]}`,
			"input[1].type", "unknown variant `local_shell_call`, expected one of `message`, `function_call`, `function_call_output`, `reasoning`", ""},
		{"tool_search_call item", "/v1/responses",
			`{"model":"m","input":[{"type":"tool_search_call","call_id":"c","arguments":{}}]}`,
			"input[0].type", "unknown variant `tool_search_call`, expected one of `message`, `function_call`, `function_call_output`, `reasoning`", ""},
		{"namespace on a history call", "/v1/responses",
			`{"model":"m","input":[{"type":"message","role":"user","content":"hi"},{"type":"function_call","call_id":"c","namespace":"n","name":"f","arguments":"{}"}]}`,
			"input[1].namespace", "Unknown parameter: 'input[1].namespace'.", "unknown_parameter"},
		{"namespace on a history output", "/v1/responses",
			`{"model":"m","input":[{"type":"function_call_output","call_id":"c","namespace":"n","output":"x"}]}`,
			"input[0].namespace", "Unknown parameter: 'input[0].namespace'.", "unknown_parameter"},
		{"long name on a history call", "/v1/responses",
			`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"` + long + `","arguments":"{}"}]}`,
			"input[0].name", longMsg("input[0].name", 70), "string_above_max_length"},
		{"tool_choice of a hosted tool", "/v1/responses",
			`{"model":"m","input":"hi","tools":[` + fn + `],"tool_choice":{"type":"web_search"}}`,
			"tool_choice.type", "unknown variant `web_search`, expected one of `none`, `auto`, `required`, `function`, `allowed_tools`", ""},
		{"tool_choice of an undeclared function", "/v1/responses",
			`{"model":"m","input":"hi","tools":[` + fn + `],"tool_choice":{"type":"function","name":"apply_patch"}}`,
			"tool_choice", "Tool choice 'apply_patch' not found in 'tools' parameter.", ""},
		{"tool_choice with a namespace", "/v1/responses",
			`{"model":"m","input":"hi","tools":[` + fn + `],"tool_choice":{"type":"function","namespace":"n","name":"exec_command"}}`,
			"tool_choice.namespace", "Unknown parameter: 'tool_choice.namespace'.", "unknown_parameter"},
		{"allowed_tools with a hosted tool", "/v1/responses",
			`{"model":"m","input":"hi","tools":[` + fn + `],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"exec_command"},{"type":"web_search"}]}}`,
			"tool_choice.tools[1].type", "unknown variant `web_search`, expected `function`", ""},
		{"chat hosted tool", "/v1/chat/completions",
			`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f"}},{"type":"web_search"}]}`,
			"tools[1].type", "unknown variant `web_search`, expected `function`", ""},
		{"chat dotted name", "/v1/chat/completions",
			`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"a.b"}}]}`,
			"tools[0].function.name", patternMsg("tools[0].function.name"), "invalid_value"},
		{"chat long name in history", "/v1/chat/completions",
			`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"` + long + `","arguments":"{}"}}]}]}`,
			"messages[0].tool_calls[0].function.name", longMsg("messages[0].tool_calls[0].function.name", 70), "string_above_max_length"},
		{"chat tool_choice dotted name", "/v1/chat/completions",
			`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"a.b"}}}`,
			"tool_choice.function.name", patternMsg("tool_choice.function.name"), "invalid_value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lax := newTestDemo()
			if rec := demoDo(t, lax, http.MethodPost, tc.path, tc.body); rec.Code != http.StatusOK {
				t.Errorf("without Strict: %d %s, want 200", rec.Code, rec.Body)
			}
			d := newTestDemo()
			d.Strict = true
			rec := demoDo(t, d, http.MethodPost, tc.path, tc.body)
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400; body %s", rec.Code, rec.Body)
			}
			if got, want := rec.Body.String(), strictErrorBody(tc.message, tc.param, tc.code); got != want {
				t.Errorf("body:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestStrictProviderAccepts(t *testing.T) {
	for _, tc := range []struct{ name, path, body string }{
		{"functions, history and a declared choice", "/v1/responses", `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"message","role":"user","content":"hi"},{"type":"reasoning","summary":[]},{"type":"function_call","id":"fc_1","call_id":"c","name":"mcp__x__get-thing_2","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"x"},{"type":"additional_tools","tools":[{"type":"function","name":"g"}]}],"tools":[{"type":"function","name":"f"},{"type":"function","name":"` + strings.Repeat("a", 64) + `"}],"tool_choice":{"type":"function","name":"f"}}`},
		{"string choices", "/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":"required"}`},
		{"allowed_tools", "/v1/responses", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"f"}]}}`},
		{"chat", "/v1/chat/completions", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newTestDemo()
			d.Strict = true
			if rec := demoDo(t, d, http.MethodPost, tc.path, tc.body); rec.Code != http.StatusOK {
				t.Fatalf("status = %d, want 200; body %s", rec.Code, rec.Body)
			}
		})
	}
}

// TestProviderToolPicker: with Tool set, the script calls the tool it
// picks, under the name (and namespace) the request declared, in every
// reply shape, and answers its output with text.
func TestProviderToolPicker(t *testing.T) {
	var asked []string
	d := newTestDemo()
	d.Tool = func(ns, name string) bool {
		asked = append(asked, ns+"/"+name)
		return strings.HasPrefix(name, "mcp")
	}
	d.CallArguments = `{"city":"Oslo"}`
	body := `{"model":"m","input":"hi","tools":[{"type":"function","name":"apply_patch"},{"type":"namespace","name":"ns","tools":[{"type":"function","name":"mcp_x"}]},{"type":"function","name":"mcp_y"}]}`
	rec := demoDo(t, d, http.MethodPost, "/v1/responses", body)
	call := gjson.Get(rec.Body.String(), `output.#(type=="function_call")`)
	if call.Get("name").String() != "mcp_x" || call.Get("namespace").String() != "ns" || call.Get("arguments").String() != `{"city":"Oslo"}` {
		t.Fatalf("call = %s", call.Raw)
	}
	if want := []string{"/apply_patch", "ns/mcp_x"}; !reflect.DeepEqual(asked, want) {
		t.Errorf("asked about %q, want %q", asked, want)
	}

	// Streamed: the added, done and completed items and the arguments.done
	// event all carry the picked name.
	rec = demoDo(t, d, http.MethodPost, "/v1/responses", strings.Replace(body, `"input":"hi"`, `"input":"hi","stream":true`, 1))
	var names []string
	var args strings.Builder
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		ev := gjson.Parse(data)
		switch ev.Get("type").String() {
		case "response.output_item.added", "response.output_item.done":
			if it := ev.Get("item"); it.Get("type").String() == "function_call" {
				names = append(names, it.Get("namespace").String()+"/"+it.Get("name").String())
			}
		case "response.function_call_arguments.delta":
			args.WriteString(ev.Get("delta").String())
		case "response.function_call_arguments.done":
			names = append(names, ev.Get("name").String())
		case "response.completed":
			it := ev.Get(`response.output.#(type=="function_call")`)
			names = append(names, it.Get("namespace").String()+"/"+it.Get("name").String())
		}
	}
	if want := []string{"ns/mcp_x", "mcp_x", "ns/mcp_x", "ns/mcp_x"}; !reflect.DeepEqual(names, want) || args.String() != d.CallArguments {
		t.Errorf("streamed names %q, args %q", names, args.String())
	}

	// Chat, and the default arguments.
	d.CallArguments = ""
	rec = demoDo(t, d, http.MethodPost, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"apply_patch"}},{"type":"function","function":{"name":"mcp_z"}}]}`)
	tc := gjson.Get(rec.Body.String(), "choices.0.message.tool_calls.0.function")
	if tc.Get("name").String() != "mcp_z" || tc.Get("arguments").String() != "{}" {
		t.Errorf("chat call = %s", rec.Body)
	}

	// The output of the call is answered with text.
	rec = demoDo(t, d, http.MethodPost, "/v1/responses", `{"model":"m","input":[{"type":"function_call","call_id":"c","name":"mcp_x","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"x"}],"tools":[{"type":"function","name":"mcp_x"}]}`)
	if gjson.Get(rec.Body.String(), `output.#(type=="function_call")`).Exists() {
		t.Errorf("called again after the output: %s", rec.Body)
	}
}
