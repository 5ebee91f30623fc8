package schema

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/llmtransform/caddy-llm-transform/internal/fakeprovider"
	"github.com/llmtransform/caddy-llm-transform/internal/schemaargs"
)

// FuzzNormalizeSchema sends an arbitrary parameters schema through every
// dialect, in both protocols. Nothing may panic; a refusal must be a 400
// with one of the schema codes; and what goes upstream must be valid JSON
// whose schema the dialect's validator accepts, whenever the schema was a
// JSON object; and arguments generated from the schema, shaped as a model
// bound to the rewritten one writes them, must come back as generated.
// The seed corpus is in testdata/fuzz/FuzzNormalizeSchema.
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
	chains := make([]*transforms.Chain, len(dialects))
	for i, d := range dialects {
		chains[i] = transformtest.Chain(f, `[{"transform":"tools_normalize_schema","config":{"dialect":"`+d+`"}}]`)
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
		bodies := map[transforms.Protocol]string{
			transforms.ProtocolResponses: `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":` + flag + `,"parameters":` + s + `}]}`,
			transforms.ProtocolChat:      `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f","strict":` + flag + `,"parameters":` + s + `}}]}`,
		}
		for i, d := range dialects {
			for proto, body := range bodies {
				x := transforms.NewExchange(proto, transforms.Limits{}, nil)
				chains[i].Begin(x, "m")
				out, err := x.RewriteRequest([]byte(body))
				if err != nil {
					var te *transforms.Error
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
				var calls []rtTool
				var want []string
				for _, full := range []bool{false, true} {
					if args, ok := schemaargs.Generate(schema, full); ok {
						if shaped, ok := modelArgs(t, schema, tools[0].Parameters, args); ok {
							calls = append(calls, rtTool{name: "f", args: string(shaped)})
							want = append(want, string(args))
						}
					}
				}
				if len(calls) == 0 {
					continue
				}
				back, err := x.RewriteResponse([]byte(rtJSON(proto, calls)))
				if err != nil {
					t.Fatal(err)
				}
				got := rtArgs(t, proto, string(back), false)
				for k, w := range want {
					if g := got["call_"+transformtest.Itoa(k)]; !sameButNulls(g, w) {
						t.Fatalf("%s %s strict=%v: generated %s, sent as %s, the client got %s\nin:  %s\nout: %s", d, proto, strict, w, calls[k].args, g, s, tools[0].Parameters)
					}
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
