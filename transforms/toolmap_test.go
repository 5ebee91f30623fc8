package transforms

import "testing"

func TestToolMapLinksPerRuleAndOrigin(t *testing.T) {
	var m ToolMap
	first, second := new(int), new(int)
	custom := ToolID{Type: "custom", Name: "apply_patch"}
	fn := ToolID{Type: "function", Name: "apply_patch"}
	renamed := ToolID{Type: "function", Name: "ap_fn"}
	m.Link(first, custom, fn)
	m.Link(second, fn, renamed)
	if got, ok := m.Client(second, renamed); !ok || got != fn {
		t.Fatalf("second rule's client side = %v %v", got, ok)
	}
	if _, ok := m.Client(first, renamed); ok {
		t.Fatal("a rule sees another rule's link as its own")
	}
	if got, ok := m.Upstream(first, custom); !ok || got != fn {
		t.Fatalf("first rule's upstream side = %v %v", got, ok)
	}
	if got := m.Origin(renamed); got != custom {
		t.Fatalf("origin of ap_fn = %v", got)
	}
	if got := m.Origin(ToolID{Type: "function", Name: "other"}); got.Name != "other" {
		t.Fatalf("origin of an unlinked tool = %v", got)
	}
	if m.Len() != 2 {
		t.Fatalf("links = %d", m.Len())
	}
}

// abandonPolicy claims every call and remembers why its calls were dropped.
type abandonPolicy struct{ reasons []string }

type abandonArgs struct {
	PassArgs
	p *abandonPolicy
}

func (a *abandonArgs) Abandon(reason string) { a.p.reasons = append(a.p.reasons, reason) }

func (p *abandonPolicy) OpenCall(_ *Exchange, up ToolID) (ToolID, CallHandler, bool) {
	return ToolID{Type: "function", Name: up.Name + "_client"}, &abandonArgs{p: p}, true
}

// TestTrackerReportsAbandonedCalls: an upstream error in the middle of a
// call drops it, tells its handler, and swallows its later events; a
// finished call gets the client's name.
func TestTrackerReportsAbandonedCalls(t *testing.T) {
	x := NewExchange(ProtocolResponses, Limits{}, nil)
	p := &abandonPolicy{}
	st := NewCallStream(x, p)
	var out []string
	emit := func(ev *Event) error { out = append(out, string(ev.Data)); return nil }
	for _, d := range []string{
		`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f","arguments":""}}`,
		`{"type":"response.function_call_arguments.delta","output_index":0,"item_id":"fc_1","delta":"{\"a\":"}`,
		`{"type":"error","code":"server_error","message":"boom"}`,
		`{"type":"response.function_call_arguments.delta","output_index":0,"item_id":"fc_1","delta":"1}"}`,
	} {
		if err := st.Event(&Event{Data: []byte(d)}, emit); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`{"type":"response.output_item.added","output_index":0,"item":{"id":"fc_1","type":"function_call","call_id":"c1","name":"f_client","arguments":""}}`,
		`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"a\":"}`,
		`{"type":"error","code":"server_error","message":"boom"}`,
	}
	if len(out) != len(want) {
		t.Fatalf("events:\n%q", out)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("event %d:\n%s\nwant\n%s", i, out[i], want[i])
		}
	}
	if len(p.reasons) != 1 || p.reasons[0] != "upstream error event" {
		t.Fatalf("abandoned: %q", p.reasons)
	}
}
