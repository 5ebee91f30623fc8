package transforms

import (
	"fmt"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// The byte-test reading of an argument event agrees with the general walk
// on every event laid out the OpenAI way, and leaves every other layout to
// the walk.
func TestOpenAIArgsAgreesWithTheWalk(t *testing.T) {
	s := &responsesCalls{}
	for _, tc := range []struct {
		d  string
		ok bool
	}{
		{`{"type":"response.function_call_arguments.delta","sequence_number":12,"item_id":"fc_1","output_index":3,"delta":"a \"quoted\" \\\\ b","obfuscation":"x"}`, true},
		{`{"type":"response.function_call_arguments.delta","sequence_number":1,"item_id":"fc_1","output_index":0,"delta":"\\"}`, true},
		{`{"type":"response.function_call_arguments.delta","sequence_number":1,"output_index":0,"item_id":"fc_1","delta":"x"}`, false},
		{`{"type":"response.function_call_arguments.delta","sequence_number":1,"item_id":"f\u0063_1","output_index":0,"delta":"x"}`, false},
		{`{"type":"response.function_call_arguments.delta", "sequence_number":1,"item_id":"fc_1","output_index":0,"delta":"x"}`, false},
		{`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"x"}`, false},
	} {
		d := []byte(tc.d)
		var fast eventRefs
		ok := openAIArgs(d, valueDelta, &fast)
		if ok != tc.ok {
			t.Fatalf("%s: fast path %v", tc.d, ok)
		}
		if !ok {
			// The walk still reads it.
			var r eventRefs
			if s.refs(d, deltaEventFields, valueDelta, &r); r.value.Start < 0 {
				t.Fatalf("%s: the walk found no delta", tc.d)
			}
			continue
		}
		var f [4]jsonspan.Span // sequence_number, item_id, output_index, delta
		jsonspan.ObjectFields(d, 0, deltaEventFields, f[:])
		id, _ := jsonspan.StringValue(d, f[1])
		if string(fast.itemID) != id || string(fast.outputIndex) != string(d[f[2].Start:f[2].End]) || fast.valueSpan(d) != f[3] || string(fast.seq) != string(d[f[0].Start:f[0].End]) {
			t.Fatalf("%s: fast %+v, walk %v", tc.d, fast, f)
		}
	}
}

// TestStreamedArgsMatchesTheString: a done event's arguments are taken as
// the ones streamed exactly when its string is the streamed deltas as
// escaped, without the string's end being searched for first.
func TestStreamedArgsMatchesTheString(t *testing.T) {
	const head = `{"type":"response.function_call_arguments.done","sequence_number":9,"item_id":"fc_1","output_index":1,"arguments":`
	for _, tc := range []struct {
		value, esc string
		want       bool
	}{
		{`"{\"input\":\"a \\\"b\\\" c\"}"`, `{\"input\":\"a \\\"b\\\" c\"}`, true},
		{`""`, ``, true},
		{`"{\"input\":\"a\"}x"`, `{\"input\":\"a\"}`, false}, // the string goes on
		{`"{\"input\":\"a\""`, `{\"input\":\"a\"}`, false},   // shorter than what streamed
		{`"{\"input\":\"a\"}"`, `{\"input\":\"b\"}`, false},
	} {
		d := []byte(head + tc.value + `}`)
		var r eventRefs
		if !openAIArgs(d, valueArguments, &r) {
			t.Fatalf("%s: not read the fast way", d)
		}
		if got := r.streamedArgs(d, []byte(tc.esc)); got != tc.want {
			t.Errorf("%s against %s: %v, want %v", tc.value, tc.esc, got, tc.want)
		}
		// Whatever it says, the span it leaves is the walk's.
		var f [4]jsonspan.Span
		jsonspan.ObjectFields(d, 0, doneEventFields, f[:])
		if sp := r.valueSpan(d); sp != f[3] {
			t.Errorf("%s: span %v, walk %v", tc.value, sp, f[3])
		}
	}
}

// TestHandlesCoversEvent: every type the tracker's Event acts on is one
// it says it handles, so the engine may skip it for the others.
func TestHandlesCoversEvent(t *testing.T) {
	x := NewExchange(ProtocolResponses, Limits{}, nil)
	s := newResponsesCalls(x, nil)
	for _, typ := range []string{
		"response.output_text.delta", "response.reasoning_summary_text.delta", "response.content_part.added",
		"response.output_text.done", "response.custom_tool_call_input.delta", "response.mcp_call.in_progress",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
		"response.output_item.done", "response.completed", "response.created", "response.in_progress",
		"response.queued", "response.failed", "response.incomplete", "error",
	} {
		d := []byte(`{"type":"` + typ + `","sequence_number":3,"item_id":"fc_1","output_index":0,"delta":"x","response":{"id":"r","output":[]},"item":{"id":"fc_1","type":"message"}}`)
		ev := &Event{Data: d}
		var got []*Event
		err := s.Event(ev, func(e *Event) error { got = append(got, e); return nil })
		untouched := err == nil && len(got) == 1 && got[0] == ev && !s.failed
		if !s.Handles([]byte(`"`+typ+`"`)) && !untouched {
			t.Errorf("%s: not handled, but Event did not pass it on untouched", typ)
		}
		s.failed = false
	}
	for _, typ := range []string{"response.output_item.added", "response.function_call_arguments.delta", "response.completed", "error"} {
		if !s.Handles([]byte(`"` + typ + `"`)) {
			t.Errorf("%s: not handled", typ)
		}
	}
}

// TestSeqOfAbsent: an event without a sequence_number gives none to the
// events built from it, rather than an empty one that breaks their JSON.
func TestSeqOfAbsent(t *testing.T) {
	for _, d := range []string{
		`{"type":"response.output_item.done","output_index":1,"item":{}}`,
		`{"output_index":1,"type":"response.output_item.done"}`,
	} {
		if seq := seqOf([]byte(d)); seq != nil {
			t.Errorf("%s: sequence_number %q, want none", d, seq)
		}
	}
	if seq := seqOf([]byte(`{"type":"x","sequence_number":7,"a":1}`)); string(seq) != "7" {
		t.Errorf("sequence_number %q, want 7", seq)
	}
}

// TestTrackedKindOf holds the word-at-a-time classification to a plain
// switch, on every type it knows and on types that share a length and the
// last eight bytes with one, or only one of the two.
func TestTrackedKindOf(t *testing.T) {
	want := map[string]trackedKind{
		`"response.output_item.added"`:             itemAddedKind,
		`"response.function_call_arguments.delta"`: argsDeltaKind,
		`"response.function_call_arguments.done"`:  argsDoneKind,
		`"response.output_item.done"`:              itemDoneKind,
		`"response.completed"`:                     lifecycleKind,
		`"response.created"`:                       lifecycleKind,
		`"response.in_progress"`:                   lifecycleKind,
		`"response.queued"`:                        lifecycleKind,
		`"response.failed"`:                        terminalKind,
		`"response.incomplete"`:                    terminalKind,
		`"error"`:                                  errorKind,
	}
	types := []string{`""`, `"`, ``, `"errors"`, `"Error"`, `"response.output_text.delta"`, `"response.output_text.done"`,
		`"response.outputXitem.added"`, `"response.function_call_argumentsXdelta"`, `"xesponse.function_call_arguments.done"`,
		`"response.queuex"`, `"response.failex"`, `"response.output_item.done`, `response.output_item.done"`}
	for typ := range want {
		types = append(types, typ)
	}
	for _, typ := range types {
		if got := trackedKindOf([]byte(typ)); got != want[typ] {
			t.Errorf("trackedKindOf(%s) = %v, want %v", typ, got, want[typ])
		}
	}
}

// A finished item read knowing the arguments its deltas carried reads as it
// does without, whether they match, differ or come in another member.
func TestReadItemKnowingItsArguments(t *testing.T) {
	known := []byte(`{\"input\":\"a \\\"b\\\" \\\\ é\"}`)
	item := func(members string) []byte {
		return []byte(`{"type":"response.output_item.done","sequence_number":9,"output_index":1,"item":{` + members + `}}`)
	}
	for i, d := range [][]byte{
		item(`"id":"fc_1","type":"function_call","arguments":"` + string(known) + `","call_id":"c1","name":"shell"`),
		item(`"arguments":"` + string(known) + `","id":"fc_1","call_id":"c1"`),
		item(`"id":"fc_1","arguments":"` + string(known) + `x","call_id":"c1"`),
		item(`"id":"fc_1","arguments":"` + string(known[:len(known)-2]) + `","call_id":"c1"`),
		item(`"id":"fc_1","input":"` + string(known) + `","call_id":"c1","arguments":"{}"`),
		item(`"id":"fc_1","arguments":"` + string(known) + `","arguments":"` + string(known) + `","call_id":"c1"`),
		item(`"id":"fc_1","arguments":"` + string(known) + `"`),
		item(`"id":"fc_1","arguments":"` + string(known) + `",`),
		item(`"id":"fc_1","arguments":"` + string(known)),
	} {
		want, got := readItem(d, nil), readItem(d, known)
		if i < 2 && (want.item.Start < 0 || want.args.End-want.args.Start != len(known)+2 || want.callID != "c1") {
			t.Fatalf("%s: read as %+v", d, want)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s:\nknowing  %+v\nreading  %+v", d, got, want)
		}
	}
}
