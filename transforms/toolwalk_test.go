package transforms

import (
	"fmt"
	"strings"
	"testing"
)

// describe renders the nodes of a walk, one per line: kind, type,
// namespace/name, call id, location and the node's bytes.
func describe(w *ToolWalk) string {
	kinds := map[NodeKind]string{NodeDefinition: "def", NodeCall: "call", NodeOutput: "output", NodeChoice: "choice"}
	var b strings.Builder
	for i := range w.Nodes {
		n := &w.Nodes[i]
		inner := ""
		if n.InnerStart >= 0 {
			inner = " inner=" + string(w.Doc[n.InnerStart:n.InnerEnd])
		}
		id := ""
		if n.CallID != "" {
			id = " " + n.CallID
		}
		fmt.Fprintf(&b, "%s %s %s/%s%s @%s allowed=%v%s | %s\n", kinds[n.Kind], n.Type, n.Namespace, n.Name, id, n.Where(), n.Allowed, inner, w.Doc[n.Start:n.End])
	}
	return b.String()
}

func walk(t *testing.T, p Protocol, body string) *ToolWalk {
	t.Helper()
	x := NewExchange(p, Limits{}, nil)
	w := WalkTools(x, []byte(body))
	if w == nil {
		t.Fatalf("walk failed on %s", body)
	}
	return w
}

func TestWalkToolsResponses(t *testing.T) {
	body := `{"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"custom","name":"a"},"x"]},` +
		`"tools":[{"name":"ns","tools":[{"type":"custom","name":"a"},{"tools":[],"type":"function","name":"f","namespace":"own"}],"type":"namespace"},{"type":"web_search"}],` +
		`"input":[{"type":"message","role":"user","content":"hi"},{"type":"reasoning","summary":[]},` +
		`{"type":"additional_tools","tools":[{"type":"custom","name":"late"}]},` +
		`{"type":"custom_tool_call","call_id":"c1","name":"a","namespace":"ns","input":"x"},{"type":"custom_tool_call_output","call_id":"c1","output":"ok"},` +
		`{"type":"local_shell_call","call_id":"c2","action":{}},{"type":"tool_search_output","call_id":"c3"}]}`
	want := `choice allowed_tools / @tool_choice allowed=false | {"type":"allowed_tools","mode":"auto","tools":[{"type":"custom","name":"a"},"x"]}
choice custom /a @tool_choice.tools[0] allowed=true | {"type":"custom","name":"a"}
def namespace /ns @tools[0] allowed=false | {"name":"ns","tools":[{"type":"custom","name":"a"},{"tools":[],"type":"function","name":"f","namespace":"own"}],"type":"namespace"}
def custom ns/a @tools[0].tools[0] allowed=false | {"type":"custom","name":"a"}
def function own/f @tools[0].tools[1] allowed=false | {"tools":[],"type":"function","name":"f","namespace":"own"}
def web_search / @tools[1] allowed=false | {"type":"web_search"}
def custom /late @input[2].tools[0] allowed=false | {"type":"custom","name":"late"}
call custom_tool_call ns/a c1 @input[3] allowed=false | {"type":"custom_tool_call","call_id":"c1","name":"a","namespace":"ns","input":"x"}
output custom_tool_call_output / c1 @input[4] allowed=false | {"type":"custom_tool_call_output","call_id":"c1","output":"ok"}
call local_shell_call / c2 @input[5] allowed=false | {"type":"local_shell_call","call_id":"c2","action":{}}
output tool_search_output / c3 @input[6] allowed=false | {"type":"tool_search_output","call_id":"c3"}
`
	// tool_choice is collected after the walk, so it comes last.
	got := describe(walk(t, ProtocolResponses, body))
	lines := strings.Split(strings.TrimSuffix(want, "\n"), "\n")
	want = strings.Join(append(lines[2:], lines[:2]...), "\n") + "\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestWalkToolsChat(t *testing.T) {
	body := `{"messages":[{"role":"system","content":"s"},` +
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"custom","custom":{"name":"a","input":"x"}},{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"ok"}],` +
		`"tools":[{"type":"custom","custom":{"name":"a"}},{"type":"function","function":{"name":"f"}}],` +
		`"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"f"}}]}}}`
	want := `call custom /a c1 @messages[1].tool_calls[0] allowed=false inner={"name":"a","input":"x"} | {"id":"c1","type":"custom","custom":{"name":"a","input":"x"}}
call function /f c2 @messages[1].tool_calls[1] allowed=false inner={"name":"f","arguments":"{}"} | {"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}
output tool / c1 @messages[2] allowed=false | {"role":"tool","tool_call_id":"c1","content":"ok"}
def custom /a @tools[0] allowed=false inner={"name":"a"} | {"type":"custom","custom":{"name":"a"}}
def function /f @tools[1] allowed=false inner={"name":"f"} | {"type":"function","function":{"name":"f"}}
choice allowed_tools / @tool_choice allowed=false | {"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[{"type":"function","function":{"name":"f"}}]}}
choice function /f @tool_choice.allowed_tools.tools[0] allowed=true inner={"name":"f"} | {"type":"function","function":{"name":"f"}}
`
	if got := describe(walk(t, ProtocolChat, body)); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// Rename changes only the bytes of a name, flat or nested; the walk refuses
// malformed bodies and marks them as not JSON.
func TestWalkToolsRenameAndInvalid(t *testing.T) {
	x := NewExchange(ProtocolChat, Limits{}, nil)
	body := `{"tools":[{"type":"function","function":{"name" : "f","parameters":{}}}], "x":1}`
	w := WalkTools(x, []byte(body))
	if !w.Rename(&w.Nodes[0], "g\"h") {
		t.Fatal("no name to rename")
	}
	if got := string(w.Rewrite()); got != `{"tools":[{"type":"function","function":{"name" : "g\"h","parameters":{}}}], "x":1}` {
		t.Fatalf("renamed: %s", got)
	}
	if WalkTools(x, []byte(`{"tools":[}`)) != nil || !x.Unreadable() {
		t.Fatal("a malformed body was walked")
	}
}
