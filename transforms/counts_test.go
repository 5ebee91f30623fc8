package transforms

import (
	"errors"
	"testing"
)

// zeroPassPolicy claims every call with the zero PassArgs, as an outside
// transform would.
type zeroPassPolicy struct{}

func (zeroPassPolicy) OpenCall(_ *Exchange, up ToolID) (ToolID, CallHandler, bool) {
	return ToolID{Type: "function", Name: up.Name + "_client"}, &PassArgs{}, true
}

// runCalls feeds the upstream events to a call stream of x and returns
// what came out and the error that ended it.
func runCalls(t *testing.T, x *Exchange, p CallPolicy, events []string) ([]string, error) {
	t.Helper()
	st := NewCallStream(x, p)
	var out []string
	emit := func(ev *Event) error { out = append(out, string(ev.Data)); return nil }
	for _, d := range events {
		if err := st.Event(&Event{Data: []byte(d)}, emit); err != nil {
			return out, err
		}
	}
	return out, st.End(emit)
}

func sameEvents(t *testing.T, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events:\n%q\nwant\n%q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d:\n%s\nwant\n%s", i, got[i], want[i])
		}
	}
}

// PassArgs{} holds a call to the exchange's max_call_buffer: the call
// tracker ends the stream with max_call_buffer_exceeded once the call's
// arguments outgrow it, in both stream flavours. An exchange without one
// holds the call whole.
func TestZeroPassArgsTakesTheExchangeLimit(t *testing.T) {
	limits := Limits{MaxCallBuffer: 8}
	wantAbort := `max_call_buffer_exceeded: the arguments of tool call "f_client" exceed the gateway's max_call_buffer of 8 bytes`
	aborted := func(t *testing.T, err error) {
		t.Helper()
		var a *StreamAbort
		if !errors.As(err, &a) || a.Code+": "+a.Message != wantAbort {
			t.Fatalf("error %v, want %s", err, wantAbort)
		}
	}

	responses := []string{
		`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f","arguments":""}}`,
		`{"type":"response.function_call_arguments.delta","output_index":0,"item_id":"fc_1","delta":"{\"a\":"}`,
		`{"type":"response.function_call_arguments.delta","output_index":0,"item_id":"fc_1","delta":"\"xyz\"}"}`,
		`{"type":"response.function_call_arguments.done","output_index":0,"item_id":"fc_1","arguments":"{\"a\":\"xyz\"}"}`,
		`{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":\"xyz\"}"}}`,
	}
	t.Run("responses", func(t *testing.T) {
		x := NewExchange(ProtocolResponses, limits, nil)
		out, err := runCalls(t, x, zeroPassPolicy{}, responses)
		aborted(t, err)
		sameEvents(t, out, []string{
			`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f_client","arguments":""}}`,
			`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"a\":"}`,
		})
		if got := x.Counts(); got != (Counts{}) {
			t.Fatalf("counts %+v", got)
		}
	})
	t.Run("responses without limit", func(t *testing.T) {
		x := NewExchange(ProtocolResponses, Limits{}, nil)
		out, err := runCalls(t, x, zeroPassPolicy{}, responses)
		if err != nil {
			t.Fatal(err)
		}
		sameEvents(t, out, []string{
			`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f_client","arguments":""}}`,
			`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"a\":"}`,
			`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"\"xyz\"}"}`,
			`{"type":"response.function_call_arguments.done","item_id":"fc_1","output_index":0,"arguments":"{\"a\":\"xyz\"}"}`,
			`{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f_client","arguments":"{\"a\":\"xyz\"}"}}`,
		})
		if got := x.Counts(); got != (Counts{Restored: 1}) {
			t.Fatalf("counts %+v", got)
		}
	})
	t.Run("chat", func(t *testing.T) {
		x := NewExchange(ProtocolChat, limits, nil)
		out, err := runCalls(t, x, zeroPassPolicy{}, []string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"xyz\"}"}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		})
		aborted(t, err)
		sameEvents(t, out, []string{
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f_client","arguments":"{\"a\":"}}]},"finish_reason":null}]}`,
		})
	})
}

// Unexpected calls are counted once per call key across rules, under the
// reason of the rule nearer the client, and each is a decision.
func TestCountUnexpectedCall(t *testing.T) {
	x := NewExchange(ProtocolResponses, Limits{}, nil)
	x.Explain = true
	f := ToolID{Type: "function", Name: "f"}
	x.CountUnexpectedCall(f, "c1", "undeclared", false)
	x.CountUnexpectedCall(f, "c1", "filtered by tools_filter", true)
	x.CountUnexpectedCall(ToolID{Type: "local_shell"}, "", "undeclared", false)
	x.CountPatchInvalid()
	if got, want := x.Counts(), (Counts{PatchInvalid: 1, UndeclaredCalls: 1, FilteredCalls: 1, DroppedCalls: 1}); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	want := []Decision{
		{Tool: "f", Action: "pass_unexpected_call", Reason: "undeclared"},
		{Tool: "f", Action: "drop_unexpected_call", Reason: "filtered by tools_filter"},
		{Tool: "local_shell", Action: "pass_unexpected_call", Reason: "undeclared"},
	}
	got := x.Decisions()
	if len(got) != len(want) {
		t.Fatalf("decisions %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("decision %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
