package transforms

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
)

// FuzzNormalizeSchema sends an arbitrary parameters schema through every
// dialect, in both protocols. Nothing may panic; a refusal must be a 400
// with one of the schema codes; and what goes upstream must be valid JSON
// whose schema the dialect's validator accepts, whenever the schema was a
// JSON object. The seed corpus is in testdata/fuzz/FuzzNormalizeSchema.
func FuzzNormalizeSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":["string","null"],"enum":[1,null]}},"required":null}`,
		`{"$defs":{"n":{"type":"object","properties":{"c":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`,
		`{"type":"object","properties":{"$ref":{"const":true},"format":{"format":"uri"}},"additionalProperties":{"type":"integer","minimum":3}}`,
		`{"anyOf":[{"type":"object"},{"type":"null"}],"description":"x"}`,
		`{"type":"array","items":[{"type":"object","properties":{"x":{"type":[]}}}],"prefixItems":[true]}`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	dialects := []string{"permissive", "openai_strict", "anthropic", "gemini", "kimi"}
	chains := make([]*Chain, len(dialects))
	for i, d := range dialects {
		chains[i] = chainOf(f, `[{"transform":"tools_normalize_schema","config":{"dialect":"`+d+`"}}]`)
	}
	f.Fuzz(func(t *testing.T, schema []byte, strict bool) {
		if !json.Valid(schema) {
			return
		}
		s := strings.TrimSpace(string(schema))
		// Only a schema made of schemas can be held to the dialects: a
		// string where a schema belongs is the client's error, and goes
		// to the upstream for it to say so.
		isObject := strings.HasPrefix(s, "{") && !strings.Contains(strings.Join(fakeprovider.CheckSchema("permissive", schema, nil), "\n"), "is not a schema") && knownTypes(s) && !repeatsKeys(s)
		flag := "false"
		if strict {
			flag = "true"
		}
		bodies := map[Protocol]string{
			ProtocolResponses: `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":` + flag + `,"parameters":` + s + `}]}`,
			ProtocolChat:      `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f","strict":` + flag + `,"parameters":` + s + `}}]}`,
		}
		for i, d := range dialects {
			for proto, body := range bodies {
				x := NewExchange(proto, Limits{}, nil)
				chains[i].Begin(x, "m")
				out, err := x.RewriteRequest([]byte(body))
				if err != nil {
					var te *Error
					if !errors.As(err, &te) || te.Status != 400 || !strings.HasPrefix(te.Code, "schema_") {
						t.Fatalf("%s: %v", d, err)
					}
					continue
				}
				if !json.Valid(out) {
					t.Fatalf("%s %s: invalid JSON out:\n%s", d, proto, out)
				}
				if !isObject {
					continue
				}
				tools := corpusTools(t, out, proto)
				if len(tools) != 1 {
					t.Fatalf("%s: %d tools", d, len(tools))
				}
				if problems := fakeprovider.CheckToolSchema(d, 0, "f", tools[0].Parameters, tools[0].Strict); len(problems) > 0 {
					t.Fatalf("%s %s strict=%v: the upstream refuses\n  %s\nin:  %s\nout: %s", d, proto, strict, strings.Join(problems, "\n  "), s, tools[0].Parameters)
				}
			}
		}
	})
}

// typeName finds the type names a schema writes.
var typeName = regexp.MustCompile(`"type"\s*:\s*"([^"\\]*)"`)

// knownTypes reports whether every type a schema names is one of JSON
// Schema's: a schema typed "0" is the client's error, which no dialect
// is asked to make sense of.
func knownTypes(s string) bool {
	for _, m := range typeName.FindAllStringSubmatch(s, -1) {
		switch m[1] {
		case "string", "number", "integer", "boolean", "object", "array", "null", "":
		default:
			return false
		}
	}
	return true
}

// repeatsKeys reports whether an object of the document repeats a key:
// which one counts is the parser's choice, and no dialect is asked to
// guess it.
func repeatsKeys(s string) bool {
	dec := json.NewDecoder(strings.NewReader(s))
	type frame struct {
		obj  bool
		key  bool // the next string token is a key
		seen map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.obj {
					top.key = true // the value is done once it closes
				}
				stack = append(stack, &frame{obj: v == '{', key: v == '{', seen: map[string]bool{}})
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.obj && top.key {
				if top.seen[v] {
					return true
				}
				top.seen[v] = true
				top.key = false
				continue
			}
			if top != nil && top.obj {
				top.key = true
			}
		default:
			if top != nil && top.obj {
				top.key = true
			}
		}
	}
}

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
	chains := make([]*Chain, len(configs))
	for i, c := range configs {
		chains[i] = chainOf(f, `[{"transform":"tools_filter","config":`+c+`}]`)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		valid := json.Valid(body)
		for i, c := range chains {
			for _, proto := range []Protocol{ProtocolResponses, ProtocolChat} {
				x := NewExchange(proto, Limits{}, nil)
				c.Begin(x, "m")
				out, err := x.RewriteRequest(body)
				if err != nil {
					var te *Error
					if !errors.As(err, &te) || te.Status != 400 || (te.Code != "tool_filtered" && te.Code != "ambiguous_tool") {
						t.Fatalf("config %d: %v", i, err)
					}
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
				if proto == ProtocolChat {
					list = gjson.GetBytes(out, "messages")
				}
				for _, it := range list.Array() {
					typ, role := it.Get("type").String(), it.Get("role").String()
					if it.Get("type").Type != gjson.String {
						typ = ""
					}
					if strings.HasSuffix(typ, "_call") || strings.HasSuffix(typ, "_output") || typ == "additional_tools" || role == "tool" || (it.Get("tool_calls").Exists() && proto == ProtocolChat) {
						t.Fatalf("%s: a tool item reached the upstream: %s\nin:  %s\nout: %s", proto, it.Raw, body, out)
					}
				}
			}
		}
	})
}
