package toolsfilter

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/tidwall/gjson"
)

// FuzzToolsFilter sends an arbitrary request body through tools_filter,
// filtering and with function calling off, in both protocols. Nothing may
// panic; a refusal is a 400 (tool_filtered, ambiguous_tool); a valid body
// stays valid JSON;
// and with function calling off no tool member, call item or tool message
// reaches the upstream. The seed corpus is in
// testdata/fuzz/FuzzToolsFilter.
func FuzzToolsFilter(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","tools":[{"type":"web_search"},{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"delete_x"},{"type":"function","name":"read"}]}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"function","name":"read"}]},"input":[{"type":"function_call","call_id":"c","name":"read","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"x"}]},{"type":"additional_tools","tools":[{"type":"function","name":"z"}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","content":[{"type":"text","text":"hi"}],"tool_calls":[{"id":"c","type":"function","function":{"name":"read","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}],"tools":[{"type":"function","function":{"name":"read"}}],"parallel_tool_calls":true}`,
		`{"tools":[],"tool_choice":"required"}`,
	} {
		f.Add([]byte(s))
	}
	configs := []string{
		`{"deny":["web_*","mcp/delete_*"],"defaults":[{"type":"function","name":"lookup","parameters":{"type":"object","properties":{}}}]}`,
		`{"allow":["read*","type:namespace"]}`,
		`{"function_calling":"off"}`,
	}
	chains := make([]*transforms.Chain, len(configs))
	for i, c := range configs {
		chains[i] = transformtest.Chain(f, `[{"transform":"tools_filter","config":`+c+`}]`)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		valid := json.Valid(body)
		// What the gateway reads: RFC 8259, nested at most 1,000 deep.
		readable := jsonspan.Valid(body)
		for i, c := range chains {
			for _, proto := range []transforms.Protocol{transforms.ProtocolResponses, transforms.ProtocolChat} {
				x := transforms.NewExchange(proto, transforms.Limits{}, nil)
				c.Begin(x, "m")
				out, err := x.RewriteRequest(body)
				var te *transforms.Error
				switch {
				case !readable && (!errors.As(err, &te) || te.Code != "invalid_json"):
					// Fail closed: the filter never lets through what it
					// cannot read.
					t.Fatalf("config %d: an unreadable body gave %v, not invalid_json", i, err)
				case err != nil && (!errors.As(err, &te) || te.Status != 400 || (te.Code != "tool_filtered" && te.Code != "ambiguous_tool" && te.Code != "invalid_json")):
					t.Fatalf("config %d: %v", i, err)
				case readable && te != nil && te.Code == "invalid_json":
					t.Fatalf("config %d: a readable body refused as invalid_json: %s", i, te.Message)
				}
				if err != nil {
					continue
				}
				if !valid {
					continue
				}
				if !json.Valid(out) {
					t.Fatalf("config %d %s: invalid JSON out of valid JSON:\n%s\n->\n%s", i, proto, body, out)
				}
				if configs[i] != `{"function_calling":"off"}` {
					continue
				}
				var req map[string]json.RawMessage
				if json.Unmarshal(out, &req) != nil {
					continue // not an object: nothing of ours
				}
				for _, k := range toolMembers {
					if _, ok := req[k]; ok {
						t.Fatalf("%s: %s reached the upstream:\n%s", proto, k, out)
					}
				}
				// Items are read as the engine reads every object: the first
				// of repeated keys counts (gjson's rule).
				list := gjson.GetBytes(out, "input")
				if proto == transforms.ProtocolChat {
					list = gjson.GetBytes(out, "messages")
				}
				for _, it := range list.Array() {
					typ, role := it.Get("type").String(), it.Get("role").String()
					if it.Get("type").Type != gjson.String {
						typ = ""
					}
					if strings.HasSuffix(typ, "_call") || strings.HasSuffix(typ, "_output") || typ == "additional_tools" || role == "tool" || (it.Get("tool_calls").Exists() && proto == transforms.ProtocolChat) {
						t.Fatalf("%s: a tool item reached the upstream: %s\nin:  %s\nout: %s", proto, it.Raw, body, out)
					}
				}
			}
		}
	})
}
