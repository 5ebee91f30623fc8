package toolsplan

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/llmtransform/caddy-llm-transform/internal/providers"
	"github.com/tidwall/gjson"
)

// TestToolsPlanCodexFixtureEveryPreset plans the real Codex turn-1 request
// for every preset and then streams one upstream call to each tool the
// plan degraded: the client must get each back as the item type it
// declared.
func TestToolsPlanCodexFixtureEveryPreset(t *testing.T) {
	fixture, err := os.ReadFile("../../integration/testdata/codex/codex-0.169-gpt-5.5-responses-request.json")
	if err != nil {
		t.Fatal(err)
	}
	names := providers.Names()
	// What each degraded tool of the fixture must come back as, with the
	// arguments a model would send.
	degraded := map[string]struct{ item, args string }{
		"apply_patch": {"custom_tool_call", `{"input":"*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"}`},
		"tool_search": {"tool_search_call", `{"query":"calendar tools","limit":3}`},
	}
	for _, profile := range names {
		t.Run(profile, func(t *testing.T) {
			rules := `[{"transform":"tools_plan","config":{"profile":"` + profile + `"}}]`
			x := transformtest.Begin(t, transformtest.Chain(t, rules), transforms.ProtocolResponses, fixture)
			out, err := x.RewriteRequest(fixture)
			if err != nil {
				t.Fatal(err)
			}
			p, _ := providers.Lookup(profile)
			plan := presetPlan(p)
			rule := regexp.MustCompile(plan.NamePattern)
			tools := gjson.GetBytes(out, "tools").Array()
			if len(tools) != 9 {
				t.Fatalf("%d tools reach the upstream, want the fixture's 10 less web_search:\n%s", len(tools), gjson.GetBytes(out, "tools").Raw)
			}
			upstreamName := map[string]string{}
			for i, tool := range tools {
				typ, name := tool.Get("type").String(), tool.Get("name").String()
				wantType := "function"
				if profile == "openai_chat" && name == "apply_patch" {
					wantType = "custom" // native on OpenAI Chat
				}
				if typ != wantType || !rule.MatchString(name) {
					t.Errorf("tools[%d] = %s %q, want a %s matching %s", i, typ, name, wantType, plan.NamePattern)
				}
				upstreamName[name] = name
			}
			for _, tool := range gjson.GetBytes(fixture, "tools").Array() {
				if tool.Get("type").String() == "web_search" {
					continue
				}
				if _, ok := upstreamName[tool.Get("name").String()]; !ok && tool.Get("type").String() != "tool_search" {
					t.Errorf("declared tool %s is missing upstream", tool.Get("name"))
				}
			}
			if gjson.GetBytes(out, `tools.#(name=="tool_search").parameters`).Raw != gjson.GetBytes(fixture, `tools.#(type=="tool_search").parameters`).Raw {
				t.Errorf("tool_search lost Codex's own parameters")
			}
			for tool, want := range degraded {
				if profile == "openai_chat" && tool == "apply_patch" {
					continue
				}
				args, _ := json.Marshal(want.args)
				stream := transformtest.SSE(
					`{"type":"response.created","sequence_number":0,"response":{"id":"r","status":"in_progress","output":[]}}`,
					`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"`+tool+`"}}`,
					`{"type":"response.function_call_arguments.delta","sequence_number":2,"item_id":"fc_1","output_index":0,"delta":`+string(args)+`}`,
					`{"type":"response.function_call_arguments.done","sequence_number":3,"item_id":"fc_1","output_index":0,"arguments":`+string(args)+`}`,
					`{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":`+string(args)+`,"call_id":"call_1","name":"`+tool+`"}}`,
					`{"type":"response.completed","sequence_number":5,"response":{"id":"r","status":"completed","output":[{"id":"fc_1","type":"function_call","status":"completed","arguments":`+string(args)+`,"call_id":"call_1","name":"`+tool+`"}]}}`,
				)
				got := transformtest.ReplayAll(t, func() *transforms.Exchange { return transformtest.ExchangeAfter(t, rules, string(fixture)) }, stream)
				var done, completed string
				for _, block := range strings.Split(got, "\n\n") {
					_, data, ok := strings.Cut(block, "data: ")
					if !ok {
						continue
					}
					switch gjson.Get(data, "type").String() {
					case "response.output_item.done":
						done = gjson.Get(data, "item.type").String()
					case "response.completed":
						completed = gjson.Get(data, "response.output.0.type").String()
					}
				}
				if done != want.item || completed != want.item {
					t.Errorf("%s: output_item.done item %q and response.completed output %q, want %s\n%s", tool, done, completed, want.item, got)
				}
			}
		})
	}
}
