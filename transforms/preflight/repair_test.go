package preflight

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestRepairJSON(t *testing.T) {
	cases := []struct {
		name  string
		raw   string
		want  string // exact repaired text; "" when not repairable
		fixes []string
	}{
		{"fence json", "```json\n{\"a\":1}\n```", `{"a":1}`, []string{"code_fence"}},
		{"fence bare", "```\n{\"a\":1}\n```", `{"a":1}`, []string{"code_fence"}},
		{"fence upper, spaces around", "  \n```JSON\n  {\"a\": [1, 2]}  \n```\n ", `{"a": [1, 2]}`, []string{"code_fence"}},
		{"fence one line", "```{\"a\":1}```", `{"a":1}`, []string{"code_fence"}},
		{"fence one line with info", "```json {\"a\":1} ```", `{"a":1}`, []string{"code_fence"}},
		{"trailing comma object", `{"a":1,}`, `{"a":1}`, []string{"trailing_comma"}},
		{"trailing comma newline", "{\"a\":1,\n  }", "{\"a\":1\n  }", []string{"trailing_comma"}},
		{"trailing commas nested", `{"a":[1,2,],"b":{"c":3,},}`, `{"a":[1,2],"b":{"c":3}}`, []string{"trailing_comma"}},
		{"commas in strings untouched", `{"a":",}","b":",]","c":[1,],}`, `{"a":",}","b":",]","c":[1]}`, []string{"trailing_comma"}},
		{"escaped quote in string", `{"a":"x\",}\\",}`, `{"a":"x\",}\\"}`, []string{"trailing_comma"}},
		{"fence and trailing comma", "```json\n{\"a\":{\"b\":[true,],},}\n```", `{"a":{"b":[true]}}`, []string{"code_fence", "trailing_comma"}},
		{"bom", "\ufeff{\"a\":1}", `{"a":1}`, []string{"bom"}},
		{"bom fence comma", "\ufeff```json\n{\"a\":1,}\n```", `{"a":1}`, []string{"bom", "code_fence", "trailing_comma"}},

		{"empty", "", "", nil},
		{"spaces", " \n\t", "", nil},
		{"empty fence", "```\n```", "", nil},
		{"truncated object", `{"a":1,`, "", nil},
		{"truncated string", `{"a":"abc`, "", nil},
		{"truncated after comma fix", `{"a":[1,],`, "", nil},
		{"unterminated string with comma", `{"a":",}`, "", nil},
		{"array", `[1,2,]`, "", nil},
		{"fence with prose", "Here:\n```json\n{\"a\":1}\n```", "", nil},
		{"fence with prose after", "```json\n{\"a\":1}\n```\nDone.", "", nil},
		{"prose", "call the tool", "", nil},
		{"extra brace", `{"a":1}}`, "", nil},
		{"double comma", `{"a":[1,,]}`, "", nil},
		{"single quotes", `{'a':1}`, "", nil},
		{"string in fence", "```\n\"x\"\n```", "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, fixes, ok := repairJSON([]byte(c.raw))
			if ok != (c.want != "") {
				t.Fatalf("ok = %v, want %v (got %q)", ok, !ok, got)
			}
			if !ok {
				if got != nil || fixes != nil {
					t.Fatalf("not repaired, but got %q %v", got, fixes)
				}
				return
			}
			if string(got) != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
			if !reflect.DeepEqual(fixes, c.fixes) {
				t.Fatalf("fixes %v, want %v", fixes, c.fixes)
			}
			var v map[string]any
			if err := json.Unmarshal(got, &v); err != nil {
				t.Fatalf("repaired text does not parse: %v", err)
			}
		})
	}
}

func TestRepairJSONAllocs(t *testing.T) {
	for _, c := range []struct {
		raw    string
		allocs float64
	}{
		{"not json at all", 0},
		{`{"a":"unterminated`, 0},
		{"```json\n{\"a\":1}\n```", 0},
		{`{"a":[1,2,],}`, 1},
	} {
		raw := []byte(c.raw)
		if n := testing.AllocsPerRun(100, func() { repairJSON(raw) }); n != c.allocs {
			t.Errorf("%q: %v allocations, want %v", c.raw, n, c.allocs)
		}
	}
}

// TestRepairJSONFixListsShared checks that the shared lists cannot be
// grown in place by a caller's append.
func TestRepairJSONFixListsShared(t *testing.T) {
	_, fixes, _ := repairJSON([]byte(`{"a":1,}`))
	_ = append(fixes, "x")
	_, again, _ := repairJSON([]byte(`{"a":1,}`))
	if !reflect.DeepEqual(again, []string{"trailing_comma"}) {
		t.Fatalf("fix list changed: %v", again)
	}
}

func TestRepairJSONLinear(t *testing.T) {
	// Many commas each followed by long white space, and many strings: a
	// rescan per comma or per string would take seconds here.
	var b strings.Builder
	b.WriteString(`{"a":[`)
	for range 20000 {
		b.WriteString(`",}",` + strings.Repeat(" ", 50))
	}
	b.WriteString(`1,]}`)
	got, fixes, ok := repairJSON([]byte(b.String()))
	if !ok || !reflect.DeepEqual(fixes, []string{"trailing_comma"}) || !json.Valid(got) {
		t.Fatalf("ok=%v fixes=%v", ok, fixes)
	}
}

func TestNameIndex(t *testing.T) {
	ix := newNameIndex([]string{"get_weather", "read_file", "Bash", "web-search", "mcp__github__create_issue", "Größe"})
	cases := []struct {
		name, want string
	}{
		{"GetWeather", "get_weather"},
		{"get-weather", "get_weather"},
		{"GET_WEATHER", "get_weather"},
		{"get weather", "get_weather"},
		{"  get_weather  ", "get_weather"},
		{"functions.get_weather:0", "get_weather"},
		{"functions.get_weather:12", "get_weather"},
		{"Functions.GetWeather", "get_weather"},
		{"get_weather:3", "get_weather"},
		{"default_api:read_file", "read_file"},
		{"default_api.read_file", "read_file"},
		{"read_file<|tool_call_end|>", "read_file"},
		{"read_file <｜tool▁call▁end｜>", "read_file"},
		{"bash", "Bash"},
		{"BASH", "Bash"},
		{"web_search", "web-search"},
		{"webSearch", "web-search"},
		{"mcp.github.create_issue", "mcp__github__create_issue"},
		{"GRÖßE", "Größe"},

		// No match.
		{"get_weather", ""}, // declared: nothing to repair
		{"Bash", ""},
		{"unknown", ""},
		{"", ""},
		{"<|tool_call_end|>", ""},
		{"___", ""},
		{"get_weather:x", ""},
		{"get_weather_now", ""},
		{"functions.", ""},
	}
	for _, c := range cases {
		got, ok := ix.match(c.name)
		if ok != (c.want != "") || got != c.want {
			t.Errorf("match(%q) = %q, %v; want %q", c.name, got, ok, c.want)
		}
	}
}

func TestNameIndexAmbiguous(t *testing.T) {
	ix := newNameIndex([]string{"read_file", "readFile", "write_file", "write_file"})
	for _, n := range []string{"READFILE", "read-file", "ReadFile", "functions.read_file:0"} {
		if got, ok := ix.match(n); ok {
			t.Errorf("match(%q) = %q, want no match: two tools read the same", n, got)
		}
	}
	// A name declared twice is still one tool.
	if got, ok := ix.match("WriteFile"); !ok || got != "write_file" {
		t.Errorf("match(WriteFile) = %q, %v", got, ok)
	}
	var nilIx *nameIndex
	if _, ok := nilIx.match("x"); ok {
		t.Error("nil index matched")
	}
}

func TestNameIndexAllocs(t *testing.T) {
	ix := newNameIndex([]string{"get_weather", "read_file"})
	if n := testing.AllocsPerRun(100, func() { ix.match("functions.GetWeather:0") }); n != 0 {
		t.Errorf("match allocates %v times", n)
	}
}
