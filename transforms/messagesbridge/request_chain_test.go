package messagesbridge

import (
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	// Chained after the bridge in tests, as in the canonical pipeline.
	_ "github.com/llmtransform/caddy-llm-transform/transforms/toolsplan"
)

// TestMessagesToChatLongToolNameThroughToolsPlan is §14 scenario 7: an MCP
// tool name of 90 characters passes the bridge as the client wrote it,
// and tools_plan after it gives it a name DeepSeek takes, in the
// definition, the call and the choice alike (the response side restores
// it through the engine's tool map).
func TestMessagesToChatLongToolNameThroughToolsPlan(t *testing.T) {
	const long = "mcp__a_very_verbose_servera_very_verbose_server__fetch_everythingfetch_everythingfetch_eve"
	// tools_plan's rule: cut to 57, then _ and six base32 characters of
	// the SHA-256 of the tool's identity.
	const short = "mcp__a_very_verbose_servera_very_verbose_server__fetch_ev_ib2uns"
	if len(long) != 90 || len(short) != 64 {
		t.Fatal("the names are not 90 and 64 characters long")
	}
	// Thinking off: DeepSeek V4 takes no named choice while thinking.
	body := rqBody(`,"thinking":{"type":"disabled"},"tools":[{"name":"`+long+`","description":"Fetch.","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"`+long+`"}`,
		rqUserList, `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_m","name":"`+long+`","input":{"q":1}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_m","content":"done"}]}`)

	// The bridge alone keeps the name.
	out, _, err := rqRun(t, rqRules(rqDeepSeek), body)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, `"name":"`+long+`"`) != 3 {
		t.Fatalf("the bridge changed the name: %s", out)
	}

	out, x, err := rqRun(t, `[{"transform":"messages_to_chat","config":{"profile":"deepseek"}},{"transform":"tools_plan","config":{"profile":"deepseek"}}]`, body)
	if err != nil {
		t.Fatal(err)
	}
	transformtest.Accepted(t, []byte(out), nil, rqChat(`,"tools":[{"type":"function","function":{"name":"`+short+`","description":"Fetch.","parameters":{"type":"object"}}}],`+
		`"tool_choice":{"type":"function","function":{"name":"`+short+`"}}`+rqMax+`,"thinking":{"type":"disabled"}`,
		rqChatList, `{"role":"assistant","content":"","reasoning_content":"","tool_calls":[{"id":"toolu_m","type":"function","function":{"name":"`+short+`","arguments":"{\"q\":1}"}}]}`,
		`{"role":"tool","tool_call_id":"toolu_m","content":"done"}`))
	if x.UpstreamPath() != "/v1/chat/completions" {
		t.Errorf("path %q", x.UpstreamPath())
	}
}
