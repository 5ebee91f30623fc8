package preflight_test

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	tt "github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	_ "github.com/llmtransform/caddy-llm-transform/transforms/messagesbridge"
)

// A Messages client (Claude Code) behind messages_to_chat: tools_preflight
// stands after the bridge, on Chat, and the client gets one message.
func TestMessagesClientBehindBridgeSeesOneMessage(t *testing.T) {
	const chain = `[{"transform":"messages_to_chat","config":{"profile":"deepseek"}},{"transform":"tools_preflight"}]`
	req := `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"read a.txt"}],` +
		`"tools":[{"name":"read_file","input_schema":` + readFileSchema + `}]}`
	for _, n := range tt.ChunkSizes {
		up, _ := script(chatAnswer("1", "Reading.", "call_1", badArgs, chatUsage1), chatAnswer("2", "Sorry.", "call_2", goodArgs, chatUsage2))
		x := tt.Begin(t, tt.Chain(t, chain), transforms.ProtocolMessages, []byte(req))
		out, sent := tt.RunStream(t, x, []byte(req), up, n)
		if len(sent) != 2 {
			t.Fatalf("upstream got %d requests, want 2", len(sent))
		}
		assertChatReaskAfterBridge(t, sent[1])
		var names, starts, stops []string
		var input strings.Builder
		for _, block := range strings.Split(strings.TrimSpace(out), "\n\n") {
			lines := strings.SplitN(block, "\n", 2)
			if len(lines) != 2 {
				t.Fatalf("block %q", block)
			}
			name := strings.TrimPrefix(lines[0], "event: ")
			data := gjson.Parse(strings.TrimPrefix(lines[1], "data: "))
			names = append(names, name)
			switch name {
			case "content_block_start":
				starts = append(starts, data.Get("index").String()+":"+data.Get("content_block.type").String()+":"+data.Get("content_block.id").String())
			case "content_block_delta":
				if data.Get("delta.type").String() == "input_json_delta" {
					input.WriteString(data.Get("delta.partial_json").String())
				}
			case "message_delta":
				stops = append(stops, data.Get("delta.stop_reason").String())
				if got := data.Get("usage.output_tokens").Int(); got != 30 {
					t.Errorf("message_delta usage.output_tokens = %d, want 30 (both answers)", got)
				}
			}
		}
		count := func(s string) int {
			k := 0
			for _, n := range names {
				if n == s {
					k++
				}
			}
			return k
		}
		if count("message_start") != 1 || count("message_stop") != 1 || count("message_delta") != 1 {
			t.Fatalf("chunk %d: events %v\n%s", n, names, out)
		}
		if strings.Join(starts, ",") != "0:text:,1:tool_use:call_2" {
			t.Errorf("chunk %d: blocks %v", n, starts)
		}
		if input.String() != goodArgs {
			t.Errorf("tool input %q, want %q", input.String(), goodArgs)
		}
		if strings.Join(stops, ",") != "tool_use" || strings.Contains(out, "Sorry.") || strings.Contains(out, "call_1") {
			t.Errorf("chunk %d: stop %v\n%s", n, stops, out)
		}
	}
}

func assertChatReaskAfterBridge(t *testing.T, req []byte) {
	t.Helper()
	msgs := gjson.GetBytes(req, "messages").Array()
	last := msgs[len(msgs)-1]
	if last.Get("role").String() != "tool" || last.Get("tool_call_id").String() != "call_1" ||
		!strings.Contains(last.Get("content").String(), "at /limit (schema /properties/limit/type)") {
		t.Errorf("re-ask = %s", gjson.GetBytes(req, "messages").Raw)
	}
	call := msgs[len(msgs)-2]
	if call.Get("role").String() != "assistant" || call.Get("tool_calls.0.function.arguments").String() != badArgs {
		t.Errorf("re-ask assistant turn = %s", call.Raw)
	}
}
