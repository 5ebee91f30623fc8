package fakeprovider

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestInOrder: the hook answers by arrival, not by the history's
// tool-call turns, so a re-ask and the client's next request, which hold
// as many tool-call turns, get different answers; the checks still run
// first, and a request past the script is refused.
func TestInOrder(t *testing.T) {
	const ds = "deepseek-v4-pro"
	p := &Provider{Thinking: DeepSeek}
	turns := []Turn{
		{Reasoning: "bad", Calls: []Call{{"exec_command", `{"cmd":["ls"]}`}}},
		{Reasoning: "good", Calls: []Call{{"exec_command", `{"cmd":"ls"}`}}},
	}
	reply, answered := p.InOrder(turns)
	p.Reply = reply
	hist := `{"role":"user","content":"go"},{"role":"assistant","content":null,"reasoning_content":"r","tool_calls":[` +
		`{"id":"x","type":"function","function":{"name":"exec_command","arguments":"{}"}}]},{"role":"tool","tool_call_id":"x","content":"ok"}`
	var args []string
	for range 2 {
		rec := demoDo(t, p, http.MethodPost, "/v1/chat/completions", thinkBody(ds, hist, ""))
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		args = append(args, gjson.Get(rec.Body.String(), "choices.0.message.tool_calls.0.function.arguments").String())
	}
	if args[0] != turns[0].Calls[0].Arguments || args[1] != turns[1].Calls[0].Arguments {
		t.Errorf("answers %q, want the script's in order", args)
	}
	if ids := p.CallIDs(); len(ids) != 2 || ids[0] == ids[1] || !strings.HasPrefix(ids[0], "call_00_") {
		t.Errorf("call ids %q", ids)
	}
	// Refused by the checks: not an answer.
	if rec := demoDo(t, p, http.MethodPost, "/v1/chat/completions", thinkBody(ds, `{"role":"developer","content":"x"}`, "")); rec.Code != http.StatusBadRequest {
		t.Errorf("developer role: %d", rec.Code)
	}
	rec := demoDo(t, p, http.MethodPost, "/v1/chat/completions", thinkBody(ds, hist, ""))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "the script has 2 answers and this is request 3") {
		t.Errorf("past the script: %d %s", rec.Code, rec.Body)
	}
	if answered() != 2 {
		t.Errorf("answered %d, want 2", answered())
	}
}

// TestReplyTurnKimiIDs: Kimi's ids count the calls the history holds.
func TestReplyTurnKimiIDs(t *testing.T) {
	p := &Provider{Thinking: Kimi}
	p.Reply = func(w http.ResponseWriter, req gjson.Result) {
		p.ReplyTurn(w, req, Turn{Reasoning: "r", Calls: []Call{{"apply_patch", `{"input":""}`}}})
	}
	rec := demoDo(t, p, http.MethodPost, "/v1/chat/completions",
		thinkBody("kimi-k2.6", historyMsgs(`,"reasoning_content":"r"`, "functions.exec_command:0", "functions.exec_command:1"), ""))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if ids := p.CallIDs(); len(ids) != 1 || ids[0] != "functions.apply_patch:2" {
		t.Errorf("call ids %q, want functions.apply_patch:2", ids)
	}
}
