package toolsplan

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// Tests of the name codec of tools_plan: GodeX's provider-conformance
// vectors (tool-planning-peers.md §1.3) re-expressed for our codec, which
// is order-independent and hashes instead of numbering: a name the rule
// accepts is kept; a repaired name gets "_" and six base32 characters of
// the SHA-256 of its identity when it was cut, is too short, or shares its
// repaired form with another identity. The hash suffixes below were
// computed outside Go (Python hashlib over "type\x00namespace\x00name",
// base32, lowercased), not by the code under test.

// The name rules of the presets, written out here so that the tests pin
// them too.
const (
	openAINamePattern = `^[a-zA-Z0-9_-]{1,64}$`
	kimiNamePattern   = `^[a-zA-Z_][a-zA-Z0-9_-]{2,63}$`
	geminiNamePattern = `^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$`
)

// presetNamePatterns is every preset with the name rule it must enforce.
var presetNamePatterns = []struct{ profile, pattern string }{
	{"function_only", openAINamePattern},
	{"openai_chat", openAINamePattern},
	{"deepseek", openAINamePattern},
	{"kimi", kimiNamePattern},
	{"glm", openAINamePattern},
	{"qwen", openAINamePattern},
	{"minimax", openAINamePattern},
	{"gemini", geminiNamePattern},
	{"bedrock", openAINamePattern},
}

func TestNameRuleCompile(t *testing.T) {
	for _, tc := range []struct {
		pattern  string
		maxLen   int
		min, max int
		fill     byte
	}{
		{openAINamePattern, 0, 1, 64, '_'},
		{kimiNamePattern, 0, 3, 64, '_'},
		{geminiNamePattern, 0, 1, 64, '_'},
		{openAINamePattern, 20, 1, 20, '_'},
		{`^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`, 0, 1, 64, 't'},
		{`^[a-zA-Z0-9_-]+$`, 0, 1, 1 << 30, '_'},
		{`^[a-zA-Z0-9_-]+$`, 128, 1, 128, '_'},
	} {
		r, err := compileNameRule(tc.pattern, tc.maxLen)
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		if r.min != tc.min || r.max != tc.max || r.firstFill != tc.fill {
			t.Errorf("%s max_name_length %d: min %d max %d fill %q, want %d %d %q", tc.pattern, tc.maxLen, r.min, r.max, r.firstFill, tc.min, tc.max, tc.fill)
		}
	}
}

func TestNameRuleCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		maxLen  int
		want    string
	}{
		{`^[a-z]+`, 0, `name_pattern "^[a-z]+": want the form ^[first][rest]{min,max}$, ^[rest]{min,max}$ or ^[rest]+$`},
		{`[a-z0-9_]{1,64}`, 0, `name_pattern "[a-z0-9_]{1,64}": want the form ^[first][rest]{min,max}$, ^[rest]{min,max}$ or ^[rest]+$`},
		{`^[a-z0-9_]{5,2}$`, 0, "name_pattern \"^[a-z0-9_]{5,2}$\": error parsing regexp: invalid repeat count: `{5,2}`"},
		{`^[a-z0-9_]{1,8}$`, 0, `name_pattern "^[a-z0-9_]{1,8}$" with max_name_length 0: names need room for at least 9 characters`},
		{openAINamePattern, 8, `name_pattern "^[a-zA-Z0-9_-]{1,64}$" with max_name_length 8: names need room for at least 9 characters`},
		{`^[A-Z0-9_]{1,64}$`, 0, `name_pattern "^[A-Z0-9_]{1,64}$" must allow 'a' after the first character: repaired names use it`},
		{`^[a-z0-9]{1,64}$`, 0, `name_pattern "^[a-z0-9]{1,64}$" must allow '_' after the first character: repaired names use it`},
		{`^[0-9][a-z0-9_]{1,63}$`, 0, `name_pattern "^[0-9][a-z0-9_]{1,63}$" must allow '_' or 't' as a first character`},
		{`^[z-a0-9_]{1,64}$`, 0, "name_pattern \"^[z-a0-9_]{1,64}$\": error parsing regexp: invalid character class range: `z-a`"},
	} {
		_, err := compileNameRule(tc.pattern, tc.maxLen)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: err = %v\nwant %s", tc.pattern, err, tc.want)
		}
	}
}

// codecNames encodes the function names of one request with the rule and
// returns each name's upstream name.
func codecNames(t *testing.T, pattern string, maxLen int, names []string) map[string]string {
	t.Helper()
	r, err := compileNameRule(pattern, maxLen)
	if err != nil {
		t.Fatal(err)
	}
	c := newNameCodec(r, len(names))
	for _, n := range names {
		c.add(codecKey{"function", "", n}, n)
	}
	if clash := c.resolve(); clash != nil {
		t.Fatalf("unexpected clash %+v", clash)
	}
	out := map[string]string{}
	for _, n := range names {
		out[n] = c.name(codecKey{"function", "", n})
	}
	return out
}

func TestCodecVectors(t *testing.T) {
	x57 := strings.Repeat("x", 57)
	for _, tc := range []struct {
		name    string
		pattern string
		maxLen  int
		want    map[string]string // every name of one request -> its upstream name
	}{
		// GodeX: weather_now, weather-now. The valid one keeps its name; the
		// repaired one has its repaired form to itself: no suffix.
		{"dot and hyphen", openAINamePattern, 0, map[string]string{"weather.now": "weather_now", "weather-now": "weather-now"}},
		// GodeX: weather_now, weather_now_2. Ours: the valid one keeps its
		// name, the repaired one gets the hash of its identity.
		{"dot and underscore", openAINamePattern, 0, map[string]string{"weather.now": "weather_now_nyino6", "weather_now": "weather_now"}},
		{"all three", openAINamePattern, 0, map[string]string{"weather.now": "weather_now_nyino6", "weather_now": "weather_now", "weather-now": "weather-now"}},
		// GodeX cuts 65 x to 64; ours cuts and adds the hash, so that two
		// long names sharing 64 characters stay apart.
		{"65 x", openAINamePattern, 0, map[string]string{strings.Repeat("x", 65): x57 + "_jwmtvz"}},
		{"65 and 66 x", openAINamePattern, 0, map[string]string{strings.Repeat("x", 65): x57 + "_jwmtvz", strings.Repeat("x", 66): x57 + "_ayftbm"}},
		{"64 x is valid", openAINamePattern, 0, map[string]string{strings.Repeat("x", 64): strings.Repeat("x", 64)}},
		// Empty-ish names: GodeX gives "tool"; ours repairs character by
		// character, with the first character filled.
		{"empty", openAINamePattern, 0, map[string]string{"": "_"}},
		{"dots", openAINamePattern, 0, map[string]string{"...": "___"}},
		{"dot next to a valid underscore", openAINamePattern, 0, map[string]string{".": "__i26rtu", "_": "_"}},
		{"hyphen alone is valid", openAINamePattern, 0, map[string]string{"-": "-"}},
		// One underscore per character (GodeX counts UTF-16 units: "__").
		{"emoji", openAINamePattern, 0, map[string]string{"fire🔥": "fire_"}},
		{"emoji next to its repaired form", openAINamePattern, 0, map[string]string{"fire🔥": "fire__bstwww", "fire_": "fire_"}},
		{"CJK", openAINamePattern, 0, map[string]string{"日本語": "___"}},
		{"space", openAINamePattern, 0, map[string]string{"a b": "a_b"}},
		{"max_name_length cuts and hashes", openAINamePattern, 20, map[string]string{"abcdefghijklmnopqrstuvwxy": "abcdefghijklm_c7ltdn", "abcdefghijklmnopqrst": "abcdefghijklmnopqrst"}},
		// Kimi: a letter or '_' first, at least 3 characters.
		{"kimi", kimiNamePattern, 0, map[string]string{
			"1abc": "_1abc", "-x": "_-x", ".abc": "_abc", "get": "get", "ab": "ab_mcrcz7", "x": "x_7g7wsh",
			"": "__rtmjm5", "weather.now": "weather_now", strings.Repeat("x", 65): x57 + "_jwmtvz",
		}},
		// Gemini: dots and colons are allowed after the first character.
		{"gemini", geminiNamePattern, 0, map[string]string{
			"weather.now": "weather.now", "mcp:github.search": "mcp:github.search", "1abc": "_1abc", "-a": "_-a",
			"a b": "a_b", "x": "x", ".x": "_.x",
		}},
		// A first class without '_' is filled with 't'.
		{"first class without underscore", `^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`, 0, map[string]string{"_abc": "t_abc", "1": "t1", "": "t", "ok": "ok"}},
		// Lengths count characters, not bytes.
		{"unicode letters allowed", `^[\p{L}0-9_-]{1,10}$`, 0, map[string]string{strings.Repeat("é", 11): "ééé_umtaa4", "日本語": "日本語", strings.Repeat("é", 10): strings.Repeat("é", 10)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := make([]string, 0, len(tc.want))
			for n := range tc.want {
				names = append(names, n)
			}
			got := codecNames(t, tc.pattern, tc.maxLen, names)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d names, want %d", len(got), len(tc.want))
			}
			re := regexp.MustCompile(tc.pattern)
			max := 64
			if tc.maxLen > 0 {
				max = tc.maxLen
			}
			for n, want := range tc.want {
				if got[n] != want {
					t.Errorf("%q -> %q, want %q", n, got[n], want)
				}
				if !re.MatchString(got[n]) || utf8.RuneCountInString(got[n]) > max {
					t.Errorf("%q -> %q does not satisfy %s (max %d)", n, got[n], tc.pattern, max)
				}
			}
		})
	}
}

// TestCodecVectorsThroughRule: the vectors of §1.3 as a request sees them,
// in both protocols, also where the history and tool_choice name the tools.
func TestCodecVectorsThroughRule(t *testing.T) {
	rules := tpProfile("function_only")
	tpOK(t, transforms.ProtocolResponses, rules,
		`{"model":"m","tools":[{"type":"function","name":"weather.now","parameters":{}},{"type":"function","name":"weather-now","parameters":{}}]}`,
		`{"model":"m","tools":[{"type":"function","name":"weather_now","parameters":{}},{"type":"function","name":"weather-now","parameters":{}}]}`)
	tpOK(t, transforms.ProtocolResponses, rules,
		`{"model":"m","tools":[{"type":"function","name":"weather.now","parameters":{}},{"type":"function","name":"weather_now","parameters":{}}],"tool_choice":{"type":"function","name":"weather.now"},"input":[{"type":"function_call","id":"fc_1","call_id":"c1","name":"weather.now","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"sunny"},{"type":"function_call","id":"fc_2","call_id":"c2","name":"weather_now","arguments":"{}"}]}`,
		`{"model":"m","tools":[{"type":"function","name":"weather_now_nyino6","parameters":{}},{"type":"function","name":"weather_now","parameters":{}}],"tool_choice":{"type":"function","name":"weather_now_nyino6"},"input":[{"type":"function_call","id":"fc_1","call_id":"c1","name":"weather_now_nyino6","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"sunny"},{"type":"function_call","id":"fc_2","call_id":"c2","name":"weather_now","arguments":"{}"}]}`)
	tpOK(t, transforms.ProtocolChat, rules,
		`{"model":"m","tools":[{"type":"function","function":{"name":"weather.now","parameters":{}}},{"type":"function","function":{"name":"weather_now","parameters":{}}}],"tool_choice":{"type":"function","function":{"name":"weather.now"}},"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather.now","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}]}`,
		`{"model":"m","tools":[{"type":"function","function":{"name":"weather_now_nyino6","parameters":{}}},{"type":"function","function":{"name":"weather_now","parameters":{}}}],"tool_choice":{"type":"function","function":{"name":"weather_now_nyino6"}},"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather_now_nyino6","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}]}`)
	tpOK(t, transforms.ProtocolResponses, rules,
		`{"tools":[{"type":"function","name":"`+strings.Repeat("x", 65)+`"}]}`,
		`{"tools":[{"type":"function","name":"`+strings.Repeat("x", 57)+`_jwmtvz"}]}`)
	tpOK(t, transforms.ProtocolResponses, tpProfile("kimi"),
		`{"tools":[{"type":"function","name":"1abc"},{"type":"function","name":"ab"},{"type":"function","name":"get"},{"type":"function","name":"-x"},{"type":"function","name":".abc"}]}`,
		`{"tools":[{"type":"function","name":"_1abc"},{"type":"function","name":"ab_mcrcz7"},{"type":"function","name":"get"},{"type":"function","name":"_-x"},{"type":"function","name":"_abc"}]}`)
	tpOK(t, transforms.ProtocolResponses, tpProfile("gemini"),
		`{"tools":[{"type":"function","name":"weather.now"},{"type":"function","name":"mcp:github.search"},{"type":"function","name":"1abc"},{"type":"function","name":"a b"},{"type":"function","name":"ns/tool"}]}`,
		`{"tools":[{"type":"function","name":"weather.now"},{"type":"function","name":"mcp:github.search"},{"type":"function","name":"_1abc"},{"type":"function","name":"a_b"},{"type":"function","name":"ns_tool"}]}`)
	// A function without a name cannot be encoded: 400, nothing sent.
	tpErr(t, transforms.ProtocolResponses, rules, `{"tools":[{"type":"function","name":"a"},{"type":"function","name":"","parameters":{}}]}`,
		"invalid_tool", "tools[1]", "the function tool at tools[1] has no name")
	tpErr(t, transforms.ProtocolChat, rules, `{"tools":[{"type":"function","function":{"parameters":{}}}]}`,
		"invalid_tool", "tools[0]", "the function tool at tools[0] has no name")
}

// nastyNames is a corpus of client names no provider takes as they are,
// and a few that every provider takes.
var nastyNames = []string{
	"weather.now", "weather-now", "weather_now", strings.Repeat("x", 65), strings.Repeat("y", 200),
	"...", ".", "_", "-", "1abc", "-lead", "a b c", "fire🔥", "🔥", "日本語", "naïve", "mcp:github.search",
	"ns/tool", "ab", "x", "tab\tname", `quote"name`, `back\slash`, "get", strings.Repeat("é", 70),
	strings.Repeat("A", 64), "read_file", "mcp__github__search_issues",
}

func nastyTools(chat bool, names []string) string {
	var b strings.Builder
	b.WriteString(`{"model":"m","tools":[`)
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		q, _ := json.Marshal(n)
		if chat {
			fmt.Fprintf(&b, `{"type":"function","function":{"name":%s,"parameters":{}}}`, q)
		} else {
			fmt.Fprintf(&b, `{"type":"function","name":%s,"parameters":{}}`, q)
		}
	}
	b.WriteString(`]}`)
	return b.String()
}

// upstreamNames reads the tool names of a rewritten body, in order.
func upstreamNames(t *testing.T, body []byte) []string {
	t.Helper()
	var v struct {
		Tools []struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	var names []string
	for _, tool := range v.Tools {
		if tool.Type != "function" {
			t.Fatalf("a %q tool is left: %s", tool.Type, body)
		}
		if tool.Function != nil {
			names = append(names, tool.Function.Name)
		} else {
			names = append(names, tool.Name)
		}
	}
	return names
}

// TestCodecEveryOutputMatchesProfilePattern: whatever the client sends,
// every name that reaches the upstream matches the preset's rule, no two
// tools share one, and names the rule accepts are left alone.
func TestCodecEveryOutputMatchesProfilePattern(t *testing.T) {
	for _, pp := range presetNamePatterns {
		for _, chat := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/chat=%v", pp.profile, chat), func(t *testing.T) {
				re := regexp.MustCompile(pp.pattern)
				proto := transforms.ProtocolResponses
				if chat {
					proto = transforms.ProtocolChat
				}
				out, _, err := tpRun(t, proto, tpProfile(pp.profile), nastyTools(chat, nastyNames))
				if err != nil {
					t.Fatal(err)
				}
				names := upstreamNames(t, out)
				if len(names) != len(nastyNames) {
					t.Fatalf("%d tools upstream, want %d", len(names), len(nastyNames))
				}
				seen := map[string]string{}
				for i, n := range names {
					if !re.MatchString(n) || utf8.RuneCountInString(n) > 64 {
						t.Errorf("%q -> %q does not match %s", nastyNames[i], n, pp.pattern)
					}
					if re.MatchString(nastyNames[i]) && n != nastyNames[i] {
						t.Errorf("valid name %q was changed to %q", nastyNames[i], n)
					}
					if other, dup := seen[n]; dup {
						t.Errorf("%q and %q both became %q", other, nastyNames[i], n)
					}
					seen[n] = nastyNames[i]
				}
			})
		}
	}
}

// TestCodecOrderIndependent: shuffling the tool list gives every tool the
// same upstream name.
func TestCodecOrderIndependent(t *testing.T) {
	for _, pp := range presetNamePatterns {
		t.Run(pp.profile, func(t *testing.T) {
			want := map[string]string{}
			rng := rand.New(rand.NewSource(7))
			for round := 0; round < 8; round++ {
				names := append([]string(nil), nastyNames...)
				if round > 0 {
					rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
				}
				out, _, err := tpRun(t, transforms.ProtocolResponses, tpProfile(pp.profile), nastyTools(false, names))
				if err != nil {
					t.Fatal(err)
				}
				got := upstreamNames(t, out)
				if len(got) != len(names) {
					t.Fatalf("%d tools upstream, want %d", len(got), len(names))
				}
				for i, n := range names {
					if round == 0 {
						want[n] = got[i]
					} else if got[i] != want[n] {
						t.Errorf("round %d: %q -> %q, first round gave %q", round, n, got[i], want[n])
					}
				}
			}
		})
	}
	// The codec alone, registering in different orders.
	names := []string{"weather.now", "weather_now", "weather-now", ".", "_", strings.Repeat("x", 65), "fire🔥", "fire_"}
	first := codecNames(t, openAINamePattern, 0, names)
	for i := 0; i < 10; i++ {
		rev := append([]string(nil), names...)
		rand.New(rand.NewSource(int64(i))).Shuffle(len(rev), func(a, b int) { rev[a], rev[b] = rev[b], rev[a] })
		got := codecNames(t, openAINamePattern, 0, rev)
		for _, n := range names {
			if got[n] != first[n] {
				t.Errorf("%q -> %q, want %q", n, got[n], first[n])
			}
		}
	}
}

// TestCodecHistoryOfUndeclaredTool: a history call to a tool the request
// no longer declares gets the name it had while declared, so the model
// sees one name per tool across turns.
func TestCodecHistoryOfUndeclaredTool(t *testing.T) {
	const n70 = "search.repositories.by.owner.and.topic.including.archived.forks.v2.now"
	if len(n70) != 70 {
		t.Fatal("n70 must have 70 characters")
	}
	rules := tpProfile("function_only")
	// Turn 1: all declared.
	tpOK(t, transforms.ProtocolResponses, rules,
		`{"tools":[{"type":"namespace","name":"mcp__github","tools":[{"type":"function","name":"`+n70+`"}]},{"type":"function","name":"weather.now"},{"type":"function","name":"weather_now"},{"type":"function","name":"`+n70+`"}]}`,
		`{"tools":[{"type":"function","name":"mcp__github__search_repositories_by_owner_and_topic_inclu_jsk63s"},{"type":"function","name":"weather_now_nyino6"},{"type":"function","name":"weather_now"},{"type":"function","name":"search_repositories_by_owner_and_topic_including_archived_evksja"}]}`)
	// Turn 2: only weather_now declared; the others appear in the history.
	tpOK(t, transforms.ProtocolResponses, rules,
		`{"tools":[{"type":"function","name":"weather_now"}],"input":[`+
			`{"type":"function_call","call_id":"c1","namespace":"mcp__github","name":"`+n70+`","arguments":"{}"},`+
			`{"type":"function_call","call_id":"c2","name":"weather.now","arguments":"{}"},`+
			`{"type":"function_call","call_id":"c3","name":"`+n70+`","arguments":"{}"},`+
			`{"type":"function_call_output","call_id":"c3","output":"ok"}]}`,
		`{"tools":[{"type":"function","name":"weather_now"}],"input":[`+
			`{"type":"function_call","call_id":"c1","name":"mcp__github__search_repositories_by_owner_and_topic_inclu_jsk63s","arguments":"{}"},`+
			`{"type":"function_call","call_id":"c2","name":"weather_now_nyino6","arguments":"{}"},`+
			`{"type":"function_call","call_id":"c3","name":"search_repositories_by_owner_and_topic_including_archived_evksja","arguments":"{}"},`+
			`{"type":"function_call_output","call_id":"c3","output":"ok"}]}`)
	// The same in Chat.
	tpOK(t, transforms.ProtocolChat, rules,
		`{"tools":[{"type":"function","function":{"name":"weather_now"}}],"messages":[{"role":"assistant","tool_calls":[`+
			`{"id":"c2","type":"function","function":{"name":"weather.now","arguments":"{}"}},`+
			`{"id":"c3","type":"function","function":{"name":"`+n70+`","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c3","content":"ok"}]}`,
		`{"tools":[{"type":"function","function":{"name":"weather_now"}}],"messages":[{"role":"assistant","tool_calls":[`+
			`{"id":"c2","type":"function","function":{"name":"weather_now_nyino6","arguments":"{}"}},`+
			`{"id":"c3","type":"function","function":{"name":"search_repositories_by_owner_and_topic_including_archived_evksja","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c3","content":"ok"}]}`)
}

// TestCodecConflict: two different tools that still map to one name are a
// 400 before anything goes upstream.
func TestCodecConflict(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
		proto       transforms.Protocol
		body        string
		msg         string
	}{
		{
			name:  "a function named like a flattened namespace member",
			rules: tpProfile("function_only"), proto: transforms.ProtocolResponses,
			body: `{"tools":[{"type":"function","name":"ns__x"},{"type":"namespace","name":"ns","tools":[{"type":"function","name":"x"}]}]}`,
			msg:  `tools "ns__x" and "ns.x" both map to the upstream name "ns__x" under ^[a-zA-Z0-9_-]{1,64}$; rename one of them`,
		},
		{
			name:  "a function named like a degraded built-in",
			rules: tpProfile("function_only"), proto: transforms.ProtocolResponses,
			body: `{"tools":[{"type":"local_shell"},{"type":"function","name":"local_shell","parameters":{}}]}`,
			msg:  `tools "local_shell" and "local_shell local_shell" both map to the upstream name "local_shell" under ^[a-zA-Z0-9_-]{1,64}$; rename one of them`,
		},
		{
			name:  "a custom apply_patch next to the built-in apply_patch",
			rules: tpProfile("function_only"), proto: transforms.ProtocolResponses,
			body: `{"tools":[{"type":"custom","name":"apply_patch"},{"type":"apply_patch"}]}`,
			msg:  `tools "apply_patch apply_patch" and "apply_patch" both map to the upstream name "apply_patch" under ^[a-zA-Z0-9_-]{1,64}$; rename one of them`,
		},
		{
			name:  "a valid name equal to another's hashed repair",
			rules: tpProfile("function_only"), proto: transforms.ProtocolResponses,
			body: `{"tools":[{"type":"function","name":"weather.now"},{"type":"function","name":"weather_now"},{"type":"function","name":"weather_now_nyino6"}]}`,
			msg:  `tools "weather.now" and "weather_now_nyino6" both map to the upstream name "weather_now_nyino6" under ^[a-zA-Z0-9_-]{1,64}$; rename one of them`,
		},
		{
			name:  "chat: a function named like a degraded built-in",
			rules: tpProfile("function_only"), proto: transforms.ProtocolChat,
			body: `{"tools":[{"type":"function","function":{"name":"shell"}},{"type":"shell"}]}`,
			msg:  `tools "shell" and "shell shell" both map to the upstream name "shell" under ^[a-zA-Z0-9_-]{1,64}$; rename one of them`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tpErr(t, tc.proto, tc.rules, tc.body, "tool_name_conflict", "tools", tc.msg)
		})
	}
}

// TestCodecConflictIsDeterministic: with three tools on one name the 400
// names the same pair every time: the first pair in sorted order.
func TestCodecConflictIsDeterministic(t *testing.T) {
	rules := tpRules(`{"profile":"function_only","namespace_separator":"_"}`)
	body := `{"tools":[{"type":"function","name":"x_y_z"},{"type":"namespace","name":"x","tools":[{"type":"function","name":"y_z"}]},{"type":"namespace","name":"x_y","tools":[{"type":"function","name":"z"}]}]}`
	for i := 0; i < 40; i++ {
		tpErr(t, transforms.ProtocolResponses, rules, body, "tool_name_conflict", "tools",
			`tools "x_y_z" and "x.y_z" both map to the upstream name "x_y_z" under ^[a-zA-Z0-9_-]{1,64}$; rename one of them`)
	}
}

// TestCodecRepairedFirstCharacterTakesFillLetter: with a rule whose first
// character must be a letter, a name starting with a character allowed
// nowhere is repaired with the rule's fill letter, not '_', so the name
// the upstream gets matches its rule; calls come back under the client's
// name.
func TestCodecRepairedFirstCharacterTakesFillLetter(t *testing.T) {
	const pattern = `^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`
	rules := tpRules(`{"profile":"function_only","name_pattern":"` + pattern + `"}`)
	x := tpOKValid(t, transforms.ProtocolResponses, rules,
		`{"model":"m","tools":[{"type":"function","name":".abc"},{"type":"function","name":"é"},{"type":"function","name":"_x"}]}`,
		`{"model":"m","tools":[{"type":"function","name":"tabc"},{"type":"function","name":"t"},{"type":"function","name":"t_x"}]}`)
	re := regexp.MustCompile(pattern)
	for _, n := range []string{"tabc", "t", "t_x"} {
		if !re.MatchString(n) {
			t.Errorf("%q does not match %s", n, pattern)
		}
	}
	tpDecided(t, x, ".abc", "rename", "sent as tabc: the upstream's names match "+pattern)
	tpDecided(t, x, "é", "rename", "sent as t: the upstream's names match "+pattern)
	tpResponseOK(t, x,
		`{"output":[{"type":"function_call","id":"fc_1","call_id":"c1","name":"tabc","arguments":"{}"},{"type":"function_call","id":"fc_2","call_id":"c2","name":"t","arguments":"{}"},{"type":"function_call","id":"fc_3","call_id":"c3","name":"t_x","arguments":"{}"}]}`,
		`{"output":[{"type":"function_call","id":"fc_1","call_id":"c1","name":".abc","arguments":"{}"},{"type":"function_call","id":"fc_2","call_id":"c2","name":"é","arguments":"{}"},{"type":"function_call","id":"fc_3","call_id":"c3","name":"_x","arguments":"{}"}]}`)
}
