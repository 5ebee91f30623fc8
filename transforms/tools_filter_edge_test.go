package transforms

import (
	"errors"
	"strings"
	"testing"
)

// TestToolsFilterRefusesRepeatedIdentityKeys: a definition that names
// itself twice would be judged by its first name and served by its last,
// which upstream JSON parsers keep, so a denied tool could pass as an
// allowed one. Such a request is refused before anything is filtered.
func TestToolsFilterRefusesRepeatedIdentityKeys(t *testing.T) {
	c := chainOf(t, `[{"transform":"tools_filter","config":{"deny":["delete_*"]}}]`)
	for _, tc := range []struct {
		proto      Protocol
		body, want string
	}{
		{ProtocolResponses, `{"model":"m","input":"hi","tools":[{"type":"function","name":"read"},{"type":"function","name":"read","name":"delete_repo"}]}`, "tools[1]"},
		{ProtocolResponses, `{"model":"m","input":"hi","tools":[{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"ok","type":"function"}]}]}`, "tools[0].tools[0]"},
		{ProtocolChat, `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"read","parameters":{},"name":"delete_repo"}}]}`, "tools[0]"},
	} {
		x := begin(t, c, tc.proto, []byte(tc.body))
		_, err := x.RewriteRequest([]byte(tc.body))
		var te *Error
		if !errors.As(err, &te) || te.Status != 400 || te.Code != "ambiguous_tool" || te.Param != tc.want {
			t.Errorf("%s: got %v, want a 400 ambiguous_tool at %s", tc.body, err, tc.want)
		}
	}
	// A rule that filters nothing by name has nothing to be fooled about.
	off := chainOf(t, `[{"transform":"tools_filter","config":{"defaults":[{"type":"function","name":"x"}]}}]`)
	body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"a","name":"b"}]}`)
	x := begin(t, off, ProtocolResponses, body)
	if _, err := x.RewriteRequest(body); err != nil {
		t.Fatalf("defaults only: %v", err)
	}
}

// TestNormalizeSchemaEnumNullAndUntypedFormat: an enum that loses its null
// to enum_to_string says nullable instead, and a format without a type is
// judged as on a string.
func TestNormalizeSchemaEnumNullAndUntypedFormat(t *testing.T) {
	gemini := chainOf(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"gemini"}}]`)
	body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"n":{"type":"integer","enum":[1,null]},"u":{"format":"uri"}}}}]}`)
	x := begin(t, gemini, ProtocolResponses, body)
	out, err := x.RewriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"n":{"type":"string","enum":["1"],"nullable":true},"u":{"description":"(format: \"uri\")"}}}}]}`)
	anthropic := chainOf(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"anthropic"}}]`)
	body = []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"h":{"format":"hostname"}},"required":["h"],"additionalProperties":false}}]}`)
	x = begin(t, anthropic, ProtocolResponses, body)
	if out, err = x.RewriteRequest(body); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"h":{"description":"(format: \"hostname\")"}},"required":["h"],"additionalProperties":false}}]}`)
}

// TestToolsFilterLegacyFunctionCallResponse: an answer in the legacy
// function_call form (to a request with functions) is judged like
// tool_calls, in JSON and in streams; a removed one leaves an answer that
// finished with stop.
func TestToolsFilterLegacyFunctionCallResponse(t *testing.T) {
	req := `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"read_file","parameters":{}}]}`
	cfg := `{"drop_undeclared_calls":true}`
	json := func(name string) string {
		return `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"function_call":{"name":"` + name + `","arguments":"{}"}},"finish_reason":"function_call"}]}`
	}
	x, _ := tfExchange(t, ProtocolChat, cfg, req)
	out, err := x.RewriteResponse([]byte(json("wipe_disk")))
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}`)
	tfCounts(t, x, 1, 0, 1)

	x, _ = tfExchange(t, ProtocolChat, cfg, req)
	if out, err = x.RewriteResponse([]byte(json("read_file"))); err != nil || string(out) != json("read_file") {
		t.Fatalf("a declared legacy call changed: %s %v", out, err)
	}
	tfCounts(t, x, 0, 0, 0)

	up := chatSSE(
		tfChunk(`{"role":"assistant","content":null,"function_call":{"name":"wipe_disk","arguments":""}}`, `null`),
		tfChunk(`{"function_call":{"arguments":"{}"}}`, `null`),
		tfChunk(`{}`, `"function_call"`),
	)
	x, _ = tfExchange(t, ProtocolChat, cfg, strings.Replace(req, `"messages"`, `"stream":true,"messages"`, 1))
	got := replay(t, x, up, 4096)
	want := chatSSE(
		tfChunk(`{"role":"assistant","content":null}`, `null`),
		tfChunk(`{}`, `null`),
		tfChunk(`{}`, `"stop"`),
	)
	if got != want {
		t.Fatalf("stream:\n got %s\nwant %s", got, want)
	}
	tfCounts(t, x, 1, 0, 1)
}

// TestNormalizeSchemaHoistsDraft3Required: "required": true on a property
// (draft-03) moves to its parent's list, which every upstream reads.
func TestNormalizeSchemaHoistsDraft3Required(t *testing.T) {
	c := chainOf(t, `[{"transform":"tools_normalize_schema","config":{}}]`)
	for _, tc := range []struct{ in, want string }{
		{`{"type":"object","properties":{"a":{"type":"string","required":true},"b":{"type":"string"}}}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"]}`},
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string","required":true}},"required":["a"]}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","b"]}`},
	} {
		body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":` + tc.in + `}]}`)
		x := begin(t, c, ProtocolResponses, body)
		out, err := x.RewriteRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		jsonEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":`+tc.want+`}]}`)
	}
}

// TestToolsFilterTwoRulesCountACallOnce: with two filter rules, the one
// nearer the upstream never saw the tool the other filtered and calls it
// undeclared; the nearer-the-client rule's reason replaces that count, so
// the call is counted once, as filtered.
func TestToolsFilterTwoRulesCountACallOnce(t *testing.T) {
	rules := `[{"transform":"tools_filter","config":{"deny":["write_file"]}},{"transform":"tools_filter","config":{"deny":["web_search"]}}]`
	c := chainOf(t, rules)
	req := tfResp(``, tfRead, tfWrite, tfWeb)
	x := begin(t, c, ProtocolResponses, []byte(req))
	if _, err := x.RewriteRequest([]byte(req)); err != nil {
		t.Fatal(err)
	}
	if _, err := x.RewriteResponse([]byte(tfResponse(tfWriteItem))); err != nil {
		t.Fatal(err)
	}
	tfCounts(t, x, 0, 1, 0)

	chatReq := tfChat(``, `{"type":"function","function":{"name":"read_file"}}`, `{"type":"function","function":{"name":"write_file"}}`)
	x = begin(t, c, ProtocolChat, []byte(chatReq))
	if _, err := x.RewriteRequest([]byte(chatReq)); err != nil {
		t.Fatal(err)
	}
	if _, err := x.RewriteResponse([]byte(tfCompletion("tool_calls", tfWriteCall))); err != nil {
		t.Fatal(err)
	}
	tfCounts(t, x, 0, 1, 0)
}

// TestNormalizeSchemaGeminiDistributesTypeKeywords: a type list that
// becomes a union under gemini takes each type's keywords into that
// type's branch, instead of losing them beside the anyOf.
func TestNormalizeSchemaGeminiDistributesTypeKeywords(t *testing.T) {
	c := chainOf(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"gemini"}}]`)
	in := `{"type":"object","properties":{"v":{"type":["string","array","null"],"items":{"type":"object","properties":{"id":{"type":"integer"}},"additionalProperties":false},"maxLength":5,"minItems":1,"description":"One or many."}}}`
	want := `{"type":"object","properties":{"v":{"anyOf":[{"type":"string","maxLength":5},{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"}}},"minItems":1}],"nullable":true,"description":"One or many."}}}`
	body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":` + in + `}]}`)
	x := begin(t, c, ProtocolResponses, body)
	out, err := x.RewriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":`+want+`}]}`)
}

// TestNormalizeSchemaStrictPropertyRefKeepsItsNullability: zod writes a
// repeated shape as a reference to the first property that has it
// ("#/properties/a"); under openai_strict the optional a becomes nullable,
// and a required b that refers to it must not.
func TestNormalizeSchemaStrictPropertyRefKeepsItsNullability(t *testing.T) {
	c := chainOf(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"openai_strict"}}]`)
	in := `{"type":"object","properties":{"a":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]},"b":{"$ref":"#/properties/a"}},"required":["b"]}`
	want := `{"type":"object","properties":{` +
		`"a":{"type":["object","null"],"properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false},` +
		`"b":{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}},` +
		`"required":["a","b"],"additionalProperties":false}`
	body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":` + in + `}]}`)
	x := begin(t, c, ProtocolResponses, body)
	out, err := x.RewriteRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":`+want+`}]}`)
}
