package transforms

import (
	"os"
	"testing"
)

func TestToolsPlanSmoke(t *testing.T) {
	rules := `[{"transform":"tools_plan","config":{"profile":"function_only"}}]`
	req := `{"model":"gpt-5.5","tools":[{"type":"custom","name":"apply_patch"},{"type":"local_shell"},{"type":"namespace","name":"mcp__github","description":"gh","tools":[{"type":"function","name":"weather.now.for.a.very.long.dotted.name.that.goes.over.sixty.four.chars","parameters":{}}]},{"type":"web_search"},{"type":"tool_search","execution":"client","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}],"tool_choice":"auto","input":[{"type":"local_shell_call","id":"lsh_1","call_id":"c1","status":"completed","action":{"type":"exec","command":["ls"],"env":{}}},{"type":"local_shell_call_output","id":"x","call_id":"c1","output":"a\nb"}]}`
	c := chainOf(t, rules)
	x := begin(t, c, ProtocolResponses, []byte(req))
	out, err := x.RewriteRequest([]byte(req))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", out)
	fx, _ := os.ReadFile("../../shared/fixtures/codex-0.169-gpt-5.5-responses-request.json")
	x = begin(t, c, ProtocolResponses, fx)
	out, err = x.RewriteRequest(fx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d -> %d", len(fx), len(out))
}
