package fakeprovider

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func dsTurns() []Turn {
	return []Turn{
		{Reasoning: `Write it: "quotes" \ and 中文.`, Text: "Writing.", Calls: []Call{{"Write", `{"file_path":"/tmp/a.txt","content":"x\"y\\z ü"}`}}},
		{Reasoning: "Now run it.", Calls: []Call{{"Bash", `{"command":"cat /tmp/a.txt"}`}, {"Bash", `{"command":"wc -c /tmp/a.txt"}`}}},
		{Reasoning: "Done.", Text: "All done."},
	}
}

const dsTools = `"tools":[{"type":"function","function":{"name":"Write","parameters":{"type":"object"}}},` +
	`{"type":"function","function":{"name":"Bash","parameters":{"type":"object"}}}]`

func dsBody(messages, extra string) string {
	return `{"model":"deepseek-v4-pro","messages":[` + messages + `],` + dsTools + extra + `}`
}

// dsHist is a valid history after turn 1, its call answered.
func dsHist(reasoning string) string {
	return `{"role":"system","content":"sys"},{"role":"user","content":"go"},` +
		`{"role":"assistant","content":"Writing."` + reasoning + `,"tool_calls":[` +
		`{"id":"call_a","type":"function","function":{"name":"Write","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"call_a","content":"ok"}`
}

func dsPost(t *testing.T, d *DeepSeekChat, path, body string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(d)
	defer srv.Close()
	resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestDeepSeekChatRefuses(t *testing.T) {
	const rc = `,"reasoning_content":"` + `Write it: \"quotes\" \\ and 中文.` + `"`
	const user = `{"role":"user","content":"go"}`
	for _, tc := range []struct {
		name, path, body string
		status           int
		msg              string
	}{
		{"wrong path", "/v1/responses", dsBody(user, ""), 404, "Not Found"},
		{"unknown member", "/v1/chat/completions", dsBody(user, `,"metadata":{}`), 400, "Unrecognized request argument supplied: metadata"},
		{"unknown model", "/v1/chat/completions", strings.Replace(dsBody(user, ""), "deepseek-v4-pro", "claude-sonnet-4-6", 1), 400, "Model Not Exist"},
		{"max_tokens above the cap", "/v1/chat/completions", dsBody(user, `,"max_tokens":393217`), 400,
			"Invalid max_tokens value, the valid range of max_tokens is [1, 393216]"},
		{"max_tokens zero", "/chat/completions", dsBody(user, `,"max_tokens":0`), 400,
			"Invalid max_tokens value, the valid range of max_tokens is [1, 393216]"},
		{"legacy cap", "/chat/completions", strings.Replace(dsBody(user, `,"max_tokens":8193`), "deepseek-v4-pro", "deepseek-chat", 1), 400,
			"Invalid max_tokens value, the valid range of max_tokens is [1, 8192]"},
		{"two system messages", "/v1/chat/completions", dsBody(`{"role":"system","content":"a"},{"role":"system","content":"b"},`+user, ""), 400,
			"The system message of deepseek-v4-pro must be put on the beginning of the message sequence"},
		{"system not first", "/v1/chat/completions", dsBody(user+`,{"role":"system","content":"a"}`, ""), 400,
			"The system message of deepseek-v4-pro must be put on the beginning of the message sequence"},
		{"call unanswered", "/v1/chat/completions", dsBody(strings.TrimSuffix(dsHist(rc), `,{"role":"tool","tool_call_id":"call_a","content":"ok"}`)+`,`+user, ""), 400,
			MsgDeepSeekToolUnanswered},
		{"user between call and result", "/v1/chat/completions", dsBody(strings.Replace(dsHist(rc), `{"role":"tool"`, user+`,{"role":"tool"`, 1), ""), 400,
			MsgDeepSeekToolUnanswered},
		{"tool message without its call", "/v1/chat/completions", dsBody(user+`,{"role":"tool","tool_call_id":"call_x","content":"ok"}`, ""), 400,
			MsgDeepSeekToolOrphan},
		{"tool message answering another id", "/v1/chat/completions", dsBody(strings.Replace(dsHist(rc), `"tool_call_id":"call_a"`, `"tool_call_id":"call_b"`, 1), ""), 400,
			MsgDeepSeekToolOrphan},
		{"bad tool name", "/v1/chat/completions", strings.Replace(dsBody(user, ""), `"name":"Bash"`, `"name":"mcp.server.tool"`, 1), 400,
			"Invalid 'tools[1].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."},
		{"long tool name", "/v1/chat/completions", strings.Replace(dsBody(user, ""), `"name":"Bash"`, `"name":"`+strings.Repeat("a", 65)+`"`, 1), 400,
			"Invalid 'tools[1].function.name': string too long. Expected a string with maximum length 64, but got a string with length 65 instead."},
		{"bad name in history", "/v1/chat/completions", dsBody(strings.Replace(dsHist(rc), `"name":"Write"`, `"name":"Write file"`, 1), ""), 400,
			"Invalid 'messages[2].tool_calls[0].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."},
		{"missing reasoning", "/v1/chat/completions", dsBody(dsHist(""), ""), 400, MsgDeepSeekReasoning},
		{"null reasoning", "/v1/chat/completions", dsBody(dsHist(`,"reasoning_content":null`), ""), 400, MsgDeepSeekReasoning},
		{"missing reasoning, thinking enabled", "/v1/chat/completions", dsBody(dsHist(""), `,"thinking":{"type":"enabled"}`), 400, MsgDeepSeekReasoning},
		{"required while thinking", "/v1/chat/completions", dsBody(user, `,"tool_choice":"required"`), 400, MsgDeepSeekThinkingChoice},
		{"effort with thinking off", "/v1/chat/completions", dsBody(user, `,"thinking":{"type":"disabled"},"reasoning_effort":"high"`), 400, MsgDeepSeekEffortDisabled},
		{"image part", "/v1/chat/completions", dsBody(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:,"}}]}`, ""), 400,
			"Failed to deserialize the JSON body into the target type: messages[0].content[0]: unknown variant `image_url`, expected `text`"},
		{"unknown message member", "/v1/chat/completions", dsBody(`{"role":"user","content":"go","cache_control":{"type":"ephemeral"}}`, ""), 400,
			"Failed to deserialize the JSON body into the target type: messages[0]: unknown field `cache_control`, expected one of `role`, `content`, `name`"},
		{"anthropic tool shape", "/v1/chat/completions", `{"model":"deepseek-v4-pro","messages":[` + user + `],"tools":[{"name":"Bash","input_schema":{}}]}`, 400,
			"Failed to deserialize the JSON body into the target type: tools[0].type: unknown variant ``, expected `function`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &DeepSeekChat{Turns: dsTurns()}
			status, body := dsPost(t, d, tc.path, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if got := gjson.Get(body, "error.message").String(); got != tc.msg {
				t.Errorf("message\n got %q\nwant %q", got, tc.msg)
			}
			if got := gjson.Get(body, "error.code").String(); got != "invalid_request_error" && status == 400 {
				t.Errorf("code %q: %s", got, body)
			}
			log := d.Log()
			if len(log) != 1 || log[0].Status != tc.status || log[0].Error != tc.msg || log[0].Turn != -1 || log[0].Path != tc.path {
				t.Errorf("log %+v", log)
			}
			if len(d.Refused()) != 1 {
				t.Errorf("refused %d", len(d.Refused()))
			}
		})
	}
}

func TestDeepSeekChatAccepts(t *testing.T) {
	const rc = `,"reasoning_content":"x"`
	for _, tc := range []struct{ name, body string }{
		{"first turn, system first", dsBody(`{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"go"}]}`, `,"max_tokens":393216`)},
		{"history with reasoning", dsBody(dsHist(rc), `,"max_tokens":1`)},
		{"thinking off, no reasoning", dsBody(dsHist(""), `,"thinking":{"type":"disabled"},"tool_choice":"required"`)},
		{"auto choice while thinking", dsBody(dsHist(rc), `,"tool_choice":"auto","reasoning_effort":"max","stream":false`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &DeepSeekChat{Turns: dsTurns()}
			status, body := dsPost(t, d, "/v1/chat/completions", tc.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			if len(d.Refused()) != 0 || d.Log()[0].Status != 200 {
				t.Errorf("log %+v", d.Log())
			}
		})
	}
}

func TestDeepSeekChatExactReasoning(t *testing.T) {
	d := &DeepSeekChat{Turns: dsTurns(), ExactReasoning: true}
	if status, body := dsPost(t, d, "/v1/chat/completions", dsBody(dsHist(`,"reasoning_content":"other"`), "")); status != 400 ||
		gjson.Get(body, "error.message").String() != MsgDeepSeekReasoning {
		t.Fatalf("%d %s", status, body)
	}
	want := `,"reasoning_content":"Write it: \"quotes\" \\ and 中文."`
	if status, body := dsPost(t, d, "/v1/chat/completions", dsBody(dsHist(want), "")); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
}

// dsStream reads a Chat stream's data lines.
func dsStream(t *testing.T, body string) (chunks []gjson.Result, done bool) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q", line)
		}
		if done {
			t.Fatalf("data after [DONE]: %q", line)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		chunks = append(chunks, gjson.Parse(data))
	}
	return chunks, done
}

// TestDeepSeekChatScript: the script's turns stream as DeepSeek streams
// them, picked by the history, and the same request without stream gets
// the same message.
func TestDeepSeekChatScript(t *testing.T) {
	d := &DeepSeekChat{Turns: dsTurns(), DeltaSize: 5}
	turns := dsTurns()
	hist := []string{
		`{"role":"user","content":"go"}`,
		dsHist(`,"reasoning_content":"r"`),
		dsHist(`,"reasoning_content":"r"`) + `,{"role":"assistant","content":null,"reasoning_content":"r2","tool_calls":[` +
			`{"id":"c1","type":"function","function":{"name":"Bash","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"Bash","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c2","content":"b"},{"role":"tool","tool_call_id":"c1","content":"a"}`,
	}
	for k, h := range hist {
		status, body := dsPost(t, d, "/v1/chat/completions", dsBody(h, `,"stream":true,"stream_options":{"include_usage":true}`))
		if status != 200 {
			t.Fatalf("turn %d: %d %s", k, status, body)
		}
		chunks, done := dsStream(t, body)
		if !done {
			t.Fatalf("turn %d: no [DONE]", k)
		}
		var reasoning, text string
		var ids, names []string
		args := map[int]string{}
		var finish string
		var usage gjson.Result
		var argPieces int
		for _, c := range chunks {
			if c.Get("object").String() != "chat.completion.chunk" || c.Get("model").String() != "deepseek-v4-pro" {
				t.Fatalf("chunk %s", c.Raw)
			}
			if u := c.Get("usage"); u.IsObject() {
				usage = u
			}
			for _, ch := range c.Get("choices").Array() {
				delta := ch.Get("delta")
				reasoning += delta.Get("reasoning_content").String()
				text += delta.Get("content").String()
				for _, tc := range delta.Get("tool_calls").Array() {
					i := int(tc.Get("index").Int())
					if id := tc.Get("id").String(); id != "" {
						ids = append(ids, id)
						names = append(names, tc.Get("function.name").String())
					}
					if a := tc.Get("function.arguments").String(); a != "" {
						args[i] += a
						argPieces++
					}
				}
				if f := ch.Get("finish_reason").String(); f != "" {
					finish = f
				}
			}
		}
		want := turns[k]
		if reasoning != want.Reasoning || text != want.Text {
			t.Errorf("turn %d: reasoning %q text %q", k, reasoning, text)
		}
		if len(ids) != len(want.Calls) {
			t.Fatalf("turn %d: calls %q", k, ids)
		}
		for i, c := range want.Calls {
			if names[i] != c.Name || args[i] != c.Arguments || !strings.HasPrefix(ids[i], "call_0") || len(ids[i]) != len("call_00_")+24 {
				t.Errorf("turn %d call %d: %s %s %s", k, i, ids[i], names[i], args[i])
			}
		}
		if len(want.Calls) > 0 && argPieces <= len(want.Calls) {
			t.Errorf("turn %d: arguments in %d pieces, want small pieces", k, argPieces)
		}
		wantFinish := "stop"
		if len(want.Calls) > 0 {
			wantFinish = "tool_calls"
		}
		if finish != wantFinish {
			t.Errorf("turn %d: finish %q", k, finish)
		}
		if !usage.Get("prompt_cache_hit_tokens").Exists() || !usage.Get("prompt_cache_miss_tokens").Exists() || usage.Get("prompt_tokens").Int() == 0 {
			t.Errorf("turn %d: usage %s", k, usage.Raw)
		}

		// The same request as JSON: the same message and usage.
		status, jbody := dsPost(t, d, "/v1/chat/completions", dsBody(h, ""))
		if status != 200 {
			t.Fatalf("turn %d JSON: %d %s", k, status, jbody)
		}
		msg := gjson.Get(jbody, "choices.0.message")
		if msg.Get("reasoning_content").String() != want.Reasoning || msg.Get("content").String() != want.Text ||
			gjson.Get(jbody, "choices.0.finish_reason").String() != wantFinish {
			t.Errorf("turn %d JSON: %s", k, jbody)
		}
		var jids []string
		for _, tc := range msg.Get("tool_calls").Array() {
			jids = append(jids, tc.Get("id").String())
		}
		if !slices.Equal(jids, ids) {
			t.Errorf("turn %d: JSON ids %q, stream ids %q", k, jids, ids)
		}
		if u := gjson.Get(jbody, "usage"); u.Raw != usage.Raw {
			t.Errorf("turn %d: JSON usage %s, stream usage %s", k, u.Raw, usage.Raw)
		}
	}
	// Past the script: a 400 that says so.
	past := dsHist(`,"reasoning_content":"r"`) + `,{"role":"assistant","content":null,"reasoning_content":"r","tool_calls":[{"id":"c1","type":"function","function":{"name":"Bash","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"a"},{"role":"assistant","content":null,"reasoning_content":"r","tool_calls":[{"id":"c3","type":"function","function":{"name":"Bash","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c3","content":"a"}`
	if status, body := dsPost(t, d, "/v1/chat/completions", dsBody(past, "")); status != 400 || !strings.Contains(body, "the script has 3 turns") {
		t.Errorf("past the script: %d %s", status, body)
	}
	log := d.Log()
	if len(log) != 7 {
		t.Fatalf("log has %d requests", len(log))
	}
	for i, r := range log[:6] {
		if r.Turn != i/2 || r.Status != 200 || r.Error != "" {
			t.Errorf("log[%d] = %s", i, r)
		}
	}
	if r := log[6]; r.Turn != -1 || r.Status != 400 || !strings.Contains(r.Error, "script") {
		t.Errorf("log[6] = %s", r)
	}
}

// TestDeepSeekChatAside: a request Aside takes gets its turn, whatever
// its history, and is logged as an aside; the script goes on after it.
func TestDeepSeekChatAside(t *testing.T) {
	d := &DeepSeekChat{Turns: dsTurns(), Aside: func(req gjson.Result) (Turn, bool) {
		return Turn{Reasoning: "side", Text: "none"}, !strings.Contains(req.Get("tools").Raw, `"Write"`)
	}}
	side := `{"model":"deepseek-v4-pro","messages":[` + dsHist(`,"reasoning_content":"r"`) + `]}`
	status, body := dsPost(t, d, "/v1/chat/completions", side)
	if status != 200 || gjson.Get(body, "choices.0.message.content").String() != "none" || gjson.Get(body, "choices.0.message.reasoning_content").String() != "side" {
		t.Fatalf("aside: %d %s", status, body)
	}
	status, body = dsPost(t, d, "/v1/chat/completions", dsBody(`{"role":"user","content":"go"}`, ""))
	if status != 200 || gjson.Get(body, "choices.0.message.tool_calls.0.function.name").String() != "Write" {
		t.Fatalf("script: %d %s", status, body)
	}
	if log := d.Log(); len(log) != 2 || log[0].Turn != -2 || log[1].Turn != 0 {
		t.Errorf("log %v", log)
	}
}
