package transforms_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// Two converted calls at one output index, told apart by their item ids,
// each keep their own input.
func TestStreamCallsSharingAnOutputIndex(t *testing.T) {
	req := `{"tools":[{"type":"custom","name":"shell"}]}`
	a := transformtest.FunctionCallStream(0, 1, "fc_a", "a", "shell", `{"input":"ls"}`, 3, true)
	b := transformtest.FunctionCallStream(10, 1, "fc_b", "b", "shell", `{"input":"pwd"}`, 3, true)
	// Interleave: both headers, then the deltas of one and the other.
	up := []string{a[0], b[0]}
	for i := 1; i < len(a) || i < len(b); i++ {
		if i < len(a) {
			up = append(up, a[i])
		}
		if i < len(b) {
			up = append(up, b[i])
		}
	}
	evs := transformtest.Events(t, transformtest.StreamCase(t, wildcard, req, transformtest.SSE(up...)))
	inputs := map[string]string{}
	for _, e := range evs {
		if e["type"] == "response.output_item.done" {
			it := e["item"].(map[string]any)
			inputs[it["call_id"].(string)] = it["input"].(string)
		}
	}
	if inputs["a"] != "ls" || inputs["b"] != "pwd" {
		t.Fatalf("inputs %v", inputs)
	}
}

// A stream's memory is bounded by its largest call, not by the sum of its
// calls: a finished call's buffers are let go.
func TestFinishedCallsAreReleased(t *testing.T) {
	const calls, size = 8, 512 << 10
	x := transformtest.ExchangeAfter(t, `[{"transform":"field_custom_tools_to_function","config":{"names":["*"]}}]`, `{"tools":[{"type":"custom","name":"shell"}]}`)
	x.Limits.MaxCallBuffer = 0
	s := x.NewStream()
	args, _ := json.Marshal(map[string]string{"input": strings.Repeat("é\"x", size/4)})
	// Buffers reused from event to event grow to the largest event; what
	// must not grow is what each finished call leaves behind.
	var ms runtime.MemStats
	var heap []uint64
	for i := range calls {
		id := "c" + transformtest.Itoa(i)
		for _, ev := range transformtest.FunctionCallStream(0, i, "fc_"+id, id, "shell", string(args), len(args)/2, true) {
			if err := s.Write([]byte("data: " + ev + "\n\n")); err != nil {
				t.Fatal(err)
			}
			_ = s.Output()
		}
		// Twice: the first GC only moves pooled buffers to the pool's
		// victim cache, and whether they count would alternate.
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		heap = append(heap, ms.HeapAlloc)
	}
	if grew := int64(heap[calls-1]) - int64(heap[1]); grew > int64(len(args)) {
		t.Fatalf("the heap grew by %d bytes over %d more calls of %d bytes", grew, calls-2, len(args))
	}
	if x.Counts().Restored != calls {
		t.Fatalf("restored %d", x.Counts().Restored)
	}
}

// A streamed patch that fails the grammar is counted once, though it is
// finished for its events and again for response.completed.
func TestStreamedInvalidPatchCountedOnce(t *testing.T) {
	args := `{"input":"*** Begin Patch\n*** Frobnicate File: a\n*** End Patch"}`
	evs := transformtest.FunctionCallStream(0, 0, "fc_1", "c1", "apply_patch", args, 8, true)
	evs = append(evs, `{"type":"response.completed","sequence_number":20,"response":{"output":[{"id":"fc_1","type":"function_call","call_id":"c1","name":"apply_patch","arguments":`+transformtest.JSONString(args)+`}]}}`)
	x := transformtest.ExchangeAfter(t, wildcard, patchRequest)
	out := transformtest.Replay(t, x, transformtest.SSE(evs...), 7)
	if x.Counts().PatchInvalid != 1 || x.Counts().Restored != 1 || !strings.Contains(out, `"type":"custom_tool_call"`) {
		t.Fatalf("invalid %d, restored %d", x.Counts().PatchInvalid, x.Counts().Restored)
	}
}

// releaseSpy records that the tracker let its handler go.
type releaseSpy struct {
	transforms.PassArgs
	released *int
}

func (r *releaseSpy) Release() { *r.released++ }

type releasePolicy struct{ released int }

func (p *releasePolicy) OpenCall(_ *transforms.Exchange, up transforms.ToolID) (transforms.ToolID, transforms.CallHandler, bool) {
	return up, &releaseSpy{released: &p.released}, true
}

// The tracker releases a call's handler once the call is finished or
// dropped, in both stream flavours.
func TestTrackerReleasesHandlers(t *testing.T) {
	x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
	p := &releasePolicy{}
	st := transforms.NewCallStream(x, p)
	emit := func(*transforms.Event) error { return nil }
	for _, d := range transformtest.FunctionCallStream(0, 0, "fc_1", "c1", "f", `{"a":1}`, 3, true) {
		if err := st.Event(&transforms.Event{Data: []byte(d)}, emit); err != nil {
			t.Fatal(err)
		}
	}
	if p.released != 1 {
		t.Fatalf("responses: released %d", p.released)
	}
	x = transforms.NewExchange(transforms.ProtocolChat, transforms.Limits{}, nil)
	st = transforms.NewCallStream(x, p)
	for _, d := range []string{
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	} {
		if err := st.Event(&transforms.Event{Data: []byte(d)}, emit); err != nil {
			t.Fatal(err)
		}
	}
	if p.released != 2 {
		t.Fatalf("chat: released %d", p.released-1)
	}
}

// The deltas of a run are placed by the keys of the run's first one
// (responsesCalls.runKey): runs of a converted and a native call that take
// turns, a stray delta of a finished call and a new call under the keys of
// one that finished each go where their keys say.
func TestDeltaRunsFollowTheirCalls(t *testing.T) {
	req := `{"tools":[{"type":"custom","name":"shell"},{"type":"function","name":"native","parameters":{}}]}`
	a := transformtest.FunctionCallStream(0, 1, "fc_a", "a", "shell", `{"input":"ls -la \"x\"\nwc -l"}`, 4, true)
	n := transformtest.FunctionCallStream(0, 2, "fc_n", "n", "native", `{"q":"native \"args\" here"}`, 5, true)
	again := transformtest.FunctionCallStream(0, 1, "fc_a", "b", "shell", `{"input":"pwd"}`, 2, true)
	// Headers, then runs of two deltas from each call in turn (a has the
	// last ones), then the
	// done events; a stray delta of the finished call a; then a new call
	// under a's item id and output index.
	up := []string{a[0], n[0]}
	ad, nd := a[1:len(a)-2], n[1:len(n)-2]
	for len(ad) > 0 || len(nd) > 0 {
		k := min(2, len(ad))
		up, ad = append(up, ad[:k]...), ad[k:]
		k = min(2, len(nd))
		up, nd = append(up, nd[:k]...), nd[k:]
	}
	up = append(up, n[len(n)-2:]...)
	up = append(up, a[len(a)-2:]...)
	up = append(up, a[1]) // stray: a has finished
	up = append(up, again...)
	for i := range up {
		// Numbered in the order they are sent.
		up[i] = strings.Replace(up[i], `"sequence_number":`+gjsonSeq(up[i]), `"sequence_number":`+transformtest.Itoa(i), 1)
	}
	evs := transformtest.Events(t, transformtest.StreamCase(t, wildcard, req, transformtest.SSE(up...)))
	deltas, inputs := map[string]string{}, map[string]string{}
	var last []string // the custom deltas since the last call opened
	for _, e := range evs {
		switch e["type"] {
		case "response.output_item.added":
			last = nil
		case "response.custom_tool_call_input.delta", "response.function_call_arguments.delta":
			deltas[e["type"].(string)+" "+e["item_id"].(string)] += e["delta"].(string)
			if e["type"] == "response.custom_tool_call_input.delta" {
				last = append(last, e["delta"].(string))
			}
		case "response.output_item.done":
			it := e["item"].(map[string]any)
			if in, ok := it["input"].(string); ok {
				inputs[it["call_id"].(string)] = in
			} else {
				inputs[it["call_id"].(string)] = it["arguments"].(string)
			}
		}
	}
	want := map[string]string{
		"response.custom_tool_call_input.delta fc_a":  "ls -la \"x\"\nwc -l" + "pwd",
		"response.function_call_arguments.delta fc_n": `{"q":"native \"args\" here"}`,
	}
	if fmt.Sprint(deltas) != fmt.Sprint(want) {
		t.Errorf("deltas:\n got %q\nwant %q", deltas, want)
	}
	// b's input streams as its deltas come ({"in|pu|t"|:"|pw|d"|}), not all
	// at its end as it would were they taken for a's.
	if fmt.Sprint(last) != fmt.Sprint([]string{"pw", "d"}) {
		t.Errorf("the second call's deltas: %q", last)
	}
	wantIn := map[string]string{"a": "ls -la \"x\"\nwc -l", "n": `{"q":"native \"args\" here"}`, "b": "pwd"}
	if fmt.Sprint(inputs) != fmt.Sprint(wantIn) {
		t.Errorf("inputs:\n got %q\nwant %q", inputs, wantIn)
	}
}

// gjsonSeq returns an event's sequence_number as written.
func gjsonSeq(ev string) string {
	_, rest, _ := strings.Cut(ev, `"sequence_number":`)
	end := strings.IndexAny(rest, ",}")
	return rest[:end]
}

// Text deltas that follow a converted call need new numbers, and a native
// call's deltas pass on renumbered too: claimed from their bytes
// (Stream.claim), they come out as the general way writes them, framed
// with event lines or without, and numbered without a gap.
func TestClaimedRunsRenumbered(t *testing.T) {
	req := `{"tools":[{"type":"custom","name":"apply_patch"},{"type":"function","name":"native","parameters":{}}]}`
	patch := `{"input":"*** Begin Patch\n*** Add File: a.txt\n+\"naïve\" C:\\x\n*** End Patch"}`
	var up []string
	up = append(up, `{"type":"response.created","sequence_number":0,"response":{"id":"r","output":[]}}`)
	up = append(up, transformtest.FunctionCallStream(1, 0, "fc_p", "p", "apply_patch", patch, 3, true)...)
	text := func(d string) string {
		return `{"type":"response.output_text.delta","sequence_number":` + transformtest.Itoa(len(up)) + `,"item_id":"msg_1","output_index":1,"content_index":0,"delta":` + transformtest.JSONString(d) + `,"logprobs":[]}`
	}
	up = append(up, `{"type":"response.output_item.added","sequence_number":`+transformtest.Itoa(len(up))+`,"output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`)
	for _, d := range []string{"one ", "two ", "three", " \"four\""} {
		up = append(up, text(d))
	}
	up = append(up, transformtest.FunctionCallStream(len(up), 2, "fc_n", "n", "native", `{"q":"a \"b\" c"}`, 2, true)...)
	up = append(up, `{"type":"response.completed","sequence_number":`+transformtest.Itoa(len(up))+`,"response":{"id":"r","output":[]}}`)
	for _, framing := range []string{"named", "data only"} {
		stream := transformtest.SSE(up...)
		if framing == "data only" {
			var b strings.Builder
			for _, e := range up {
				b.WriteString("data: " + e + "\n\n")
			}
			stream = b.String()
		}
		got := transformtest.StreamCase(t, wildcard, req, stream)
		evs := transformtest.Events(t, got)
		for i, e := range evs {
			if n := e["sequence_number"].(float64); int(n) != i {
				t.Fatalf("%s: event %d numbered %v", framing, i, n)
			}
		}
		var texts, native string
		for _, e := range evs {
			switch e["type"] {
			case "response.output_text.delta":
				texts += e["delta"].(string)
			case "response.function_call_arguments.delta":
				native += e["delta"].(string)
			}
		}
		if texts != `one two three "four"` || native != `{"q":"a \"b\" c"}` {
			t.Fatalf("%s: text %q, native deltas %q", framing, texts, native)
		}
		if named := strings.Contains(got, "event: "); named != (framing == "named") {
			t.Fatalf("%s: event lines %v in\n%s", framing, named, got)
		}
	}
}

// Patches one after another in a stream each fill several arena chunks,
// while the normaliser holds the lines of the hunk it is checking across
// chunks: each comes out whole.
func TestPatchesAcrossArenaChunks(t *testing.T) {
	req := `{"tools":[{"type":"custom","name":"apply_patch"}]}`
	var up []string
	var want []string
	for i := range 4 {
		var p strings.Builder
		p.WriteString("*** Begin Patch\n*** Update File: f" + transformtest.Itoa(i) + ".go\n@@ func f() {\n")
		// Lines removed and added back unchanged: the hunk may be a
		// no-op, and the normaliser holds them, over several chunks.
		for k := range 300 {
			p.WriteString("-same \"" + transformtest.Itoa(k) + "\" ✓\n+same \"" + transformtest.Itoa(k) + "\" ✓\n")
		}
		for k := range 150 {
			p.WriteString(" keep \"" + transformtest.Itoa(k) + "\" C:\\x ✓\n-old " + transformtest.Itoa(i) + "\n+new " + transformtest.Itoa(i) + "\n")
		}
		p.WriteString("*** End Patch\n")
		args, _ := json.Marshal(map[string]string{"input": p.String()})
		want = append(want, p.String())
		id := "c" + transformtest.Itoa(i)
		up = append(up, transformtest.FunctionCallStream(len(up), i, "fc_"+id, id, "apply_patch", string(args), 7, true)...)
	}
	evs := transformtest.Events(t, transformtest.StreamCase(t, wildcard, req, transformtest.SSE(up...)))
	var got []string
	for _, e := range evs {
		if e["type"] == "response.output_item.done" {
			got = append(got, e["item"].(map[string]any)["input"].(string))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d inputs", len(got))
	}
	for i := range want {
		if got[i] != want[i] {
			k := 0
			for k < len(got[i]) && k < len(want[i]) && got[i][k] == want[i][k] {
				k++
			}
			t.Fatalf("input %d differs at %d: got %q, want %q", i, k, got[i][k:min(k+80, len(got[i]))], want[i][k:min(k+80, len(want[i]))])
		}
	}
}

// An upstream that frames some events with event lines and some without:
// the framing of the last event, claimed or not, is the one the events the
// engine builds next follow (here the error event of an oversized event),
// as they would without the claims.
func TestClaimsFollowTheUpstreamsFraming(t *testing.T) {
	req := `{"tools":[{"type":"custom","name":"shell"}]}`
	text := func(seq int) string {
		return `{"type":"response.output_text.delta","sequence_number":` + transformtest.Itoa(seq) + `,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"x"}`
	}
	stream := "data: " + `{"type":"response.created","sequence_number":0,"response":{"id":"r","output":[]}}` + "\n\n" +
		transformtest.SSE(text(1)) +
		"data: " + `{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}` + "\n\n" +
		transformtest.SSE(text(3)) + // claimed: named, like the text delta before it
		transformtest.SSE(`{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"`+strings.Repeat("y", 600)+`"}`)
	got := transformtest.ReplayAll(t, func() *transforms.Exchange {
		x := transformtest.ExchangeAfter(t, wildcard, req)
		x.Limits.MaxEvent = 400
		return x
	}, stream)
	if !strings.Contains(got, "event: error\n") {
		t.Fatalf("the error event lost the event line the upstream's last event had:\n%s", got)
	}
}
