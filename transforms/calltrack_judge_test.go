package transforms

import (
	"strings"
	"testing"
)

// indexSet answers as a sorted list would, whatever order the indexes
// come in: ascending, backwards, or shuffled with repeats.
func TestIndexSetCountsBelowInAnyOrder(t *testing.T) {
	orders := map[string][]int{"ascending": {}, "backwards": {}, "shuffled": {}}
	for i := range 500 {
		orders["ascending"] = append(orders["ascending"], 2*i)
		orders["backwards"] = append(orders["backwards"], 1000-2*i)
		orders["shuffled"] = append(orders["shuffled"], (i*7919)%613)
	}
	for name, in := range orders {
		var s indexSet
		var ref []int
		for _, n := range in {
			s.add(n)
			ref = append(ref, n)
			for _, q := range []int{-1, 0, n - 1, n, n + 1, 700, 2000} {
				want := 0
				for _, r := range ref {
					if r < q {
						want++
					}
				}
				if got := s.below(q); got != want {
					t.Fatalf("%s: after %d adds, below(%d) = %d, want %d", name, len(ref), q, got, want)
				}
			}
			if !s.has(n) || s.has(-5) {
				t.Fatalf("%s: has(%d) = %v, has(-5) = %v", name, n, s.has(n), s.has(-5))
			}
		}
	}
}

// judgingPolicy restores f as f_client and drops every call to rm: an
// outside transform that both restores and judges.
type judgingPolicy struct{}

func (judgingPolicy) OpenCall(_ *Exchange, up ToolID) (ToolID, CallHandler, bool) {
	if up.Name != "f" {
		return ToolID{}, nil, false
	}
	return ToolID{Type: "function", Name: "f_client"}, &PassArgs{}, true
}

func (judgingPolicy) JudgeCall(x *Exchange, c JudgedCall) CallVerdict {
	if c.Tool.Name == "rm" {
		x.Decide(c.Tool.Display(), "drop", c.Key)
		return CallDrop
	}
	return CallKeep
}

// A policy that restores and judges: the dropped call's events go, the
// items after it close the gap, the restored call is restored at its new
// index, and the final object holds neither the dropped call nor the
// upstream's name.
func TestJudgedCallsDroppedBeforeRestoring(t *testing.T) {
	x := NewExchange(ProtocolResponses, Limits{}, nil)
	x.Explain = true
	out, err := runCalls(t, x, judgingPolicy{}, []string{
		`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_0","type":"function_call","call_id":"c0","name":"rm","arguments":""}}`,
		`{"type":"response.function_call_arguments.delta","output_index":0,"item_id":"fc_0","delta":"{}"}`,
		`{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_0","type":"function_call","call_id":"c0","name":"rm","arguments":"{}"}}`,
		`{"type":"response.output_item.added","output_index":1,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f","arguments":""}}`,
		`{"type":"response.function_call_arguments.delta","output_index":1,"item_id":"fc_1","delta":"{\"a\":1}"}`,
		`{"type":"response.function_call_arguments.done","output_index":1,"item_id":"fc_1","arguments":"{\"a\":1}"}`,
		`{"type":"response.output_item.done","output_index":1,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"}}`,
		`{"type":"response.output_text.delta","output_index":2,"item_id":"msg_2","content_index":0,"delta":"ok"}`,
		`{"type":"response.completed","response":{"id":"r","output":[{"id":"fc_0","type":"function_call","call_id":"c0","name":"rm","arguments":"{}"},{"id":"fc_1","type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"id":"msg_2","type":"message"}]}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, out, []string{
		`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f_client","arguments":""}}`,
		`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"a\":1}"}`,
		`{"type":"response.function_call_arguments.done","item_id":"fc_1","output_index":0,"arguments":"{\"a\":1}"}`,
		`{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f_client","arguments":"{\"a\":1}"}}`,
		`{"type":"response.output_text.delta","output_index":1,"item_id":"msg_2","content_index":0,"delta":"ok"}`,
		`{"type":"response.completed","response":{"id":"r","output":[{"id":"fc_1","type":"function_call","call_id":"c1","name":"f_client","arguments":"{\"a\":1}"},{"id":"msg_2","type":"message"}]}}`,
	})
	if got := x.Counts(); got != (Counts{Restored: 1}) {
		t.Fatalf("counts %+v", got)
	}
	var ds []string
	for _, d := range x.Decisions() {
		ds = append(ds, d.Tool+" "+d.Action)
	}
	if strings.Join(ds, ",") != "rm drop,f_client restore_call" {
		t.Fatalf("decisions %v", ds)
	}
}

// The same in Chat, streamed and whole: the dropped call's fragments go,
// the restored call takes index 0, and a choice whose only call was
// dropped finishes as "stop".
func TestJudgedChatCallsDroppedBeforeRestoring(t *testing.T) {
	x := NewExchange(ProtocolChat, Limits{}, nil)
	out, err := runCalls(t, x, judgingPolicy{}, []string{
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c0","type":"function","function":{"name":"rm","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"1}"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"id":"c2","type":"function","function":{"name":"rm","arguments":"{}"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":1,"delta":{},"finish_reason":"tool_calls"}]}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, out, []string{
		`{"choices":[{"index":0,"delta":{},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f_client","arguments":"{\"a\":"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":null}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`{"choices":[{"index":1,"delta":{},"finish_reason":null}]}`,
		`{"choices":[{"index":1,"delta":{},"finish_reason":"stop"}]}`,
	})

	x = NewExchange(ProtocolChat, Limits{}, nil)
	got := string(RestoreCalls(x, judgingPolicy{}, []byte(`{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c0","type":"function","function":{"name":"rm","arguments":"{}"}},{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"},{"index":1,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"rm","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`)))
	want := `{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f_client","arguments":"{}"}}]},"finish_reason":"tool_calls"},{"index":1,"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}`
	if got != want {
		t.Fatalf("body\n%s\nwant\n%s", got, want)
	}
}

// A call the upstream finishes as incomplete (cut by its output limit) is
// closed, marked incomplete, without its partial arguments, and never
// counted as restored; the final object does not hold it restored either.
func TestIncompleteCallClosedNotRestored(t *testing.T) {
	x := NewExchange(ProtocolResponses, Limits{}, nil)
	x.Explain = true
	out, err := runCalls(t, x, judgingPolicy{}, []string{
		`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f","arguments":"","status":"in_progress"}}`,
		`{"type":"response.function_call_arguments.delta","output_index":0,"item_id":"fc_1","delta":"{\"a\":"}`,
		`{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":","status":"incomplete"}}`,
		`{"type":"response.incomplete","response":{"id":"r","status":"incomplete","output":[{"id":"fc_1","type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":","status":"incomplete"}]}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, out, []string{
		`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f_client","arguments":"","status":"in_progress"}}`,
		`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"a\":"}`,
		`{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f_client","arguments":"","status":"incomplete"}}`,
		`{"type":"response.incomplete","response":{"id":"r","status":"incomplete","output":[{"id":"fc_1","type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":","status":"incomplete"}]}}`,
	})
	if got := x.Counts(); got.Restored != 0 {
		t.Fatalf("counts %+v", got)
	}
}
