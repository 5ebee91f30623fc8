package schema

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// These tests check the arguments a model sends for a rewritten schema
// come back in the tool's own: in JSON bodies and in streams, in both
// protocols. The arguments and what the client must get are written out
// by hand.

// rtTool is one function of a round trip: its parameters, and the
// arguments the upstream's call carries.
type rtTool struct {
	name, params, args string
}

// rtRequest is a request declaring the tools, strict or not.
func rtRequest(proto transforms.Protocol, strict string, tools []rtTool) string {
	var list []string
	for _, tl := range tools {
		params := ""
		if tl.params != "" {
			params = `,"parameters":` + tl.params
		}
		if proto == transforms.ProtocolChat {
			list = append(list, `{"type":"function","function":{"name":`+transformtest.JSONString(tl.name)+strict+params+`}}`)
		} else {
			list = append(list, `{"type":"function","name":`+transformtest.JSONString(tl.name)+strict+params+`}`)
		}
	}
	if proto == transforms.ProtocolChat {
		return `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[` + strings.Join(list, ",") + `]}`
	}
	return `{"model":"m","input":"hi","tools":[` + strings.Join(list, ",") + `]}`
}

// rtJSON is an upstream JSON answer calling every tool with its args.
func rtJSON(proto transforms.Protocol, tools []rtTool) string {
	var calls []string
	for i, tl := range tools {
		id := transformtest.Itoa(i)
		if proto == transforms.ProtocolChat {
			calls = append(calls, `{"id":"call_`+id+`","type":"function","function":{"name":`+transformtest.JSONString(tl.name)+`,"arguments":`+transformtest.JSONString(tl.args)+`}}`)
		} else {
			calls = append(calls, `{"type":"function_call","id":"fc_`+id+`","call_id":"call_`+id+`","name":`+transformtest.JSONString(tl.name)+`,"arguments":`+transformtest.JSONString(tl.args)+`,"status":"completed"}`)
		}
	}
	if proto == transforms.ProtocolChat {
		return `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` + strings.Join(calls, ",") + `]},"finish_reason":"tool_calls"}]}`
	}
	return `{"id":"r","object":"response","status":"completed","model":"m","output":[` + strings.Join(calls, ",") + `]}`
}

// rtSSE is the same answer as a stream, the arguments in pieces of n runes.
func rtSSE(proto transforms.Protocol, tools []rtTool, n int) string {
	if proto == transforms.ProtocolChat {
		var chunks []string
		for i, tl := range tools {
			id := transformtest.Itoa(i)
			chunks = append(chunks, `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":`+id+`,"id":"call_`+id+`","type":"function","function":{"name":`+transformtest.JSONString(tl.name)+`,"arguments":""}}]}}]}`)
			rs := []rune(tl.args)
			for len(rs) > 0 {
				k := min(n, len(rs))
				chunks = append(chunks, `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":`+id+`,"function":{"arguments":`+transformtest.JSONString(string(rs[:k]))+`}}]}}]}`)
				rs = rs[k:]
			}
		}
		chunks = append(chunks, `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`)
		return transformtest.ChatSSE(chunks...)
	}
	evs := []string{`{"type":"response.created","sequence_number":0,"response":{"id":"r","object":"response","status":"in_progress","output":[]}}`}
	seq := 1
	var items []string
	for i, tl := range tools {
		id := transformtest.Itoa(i)
		call := transformtest.FunctionCallStream(seq, i, "fc_"+id, "call_"+id, tl.name, tl.args, n, true)
		evs = append(evs, call...)
		seq += len(call)
		items = append(items, `{"id":"fc_`+id+`","type":"function_call","status":"completed","arguments":`+transformtest.JSONString(tl.args)+`,"call_id":"call_`+id+`","name":`+transformtest.JSONString(tl.name)+`}`)
	}
	evs = append(evs, `{"type":"response.completed","sequence_number":`+transformtest.Itoa(seq)+`,"response":{"id":"r","object":"response","status":"completed","output":[`+strings.Join(items, ",")+`]}}`)
	return transformtest.SSE(evs...)
}

// rtArgs reads every call's arguments from what the client gets, by call
// id; from a stream, what a client accumulating the deltas gets, which
// must equal the done event's and the final object's.
func rtArgs(t *testing.T, proto transforms.Protocol, out string, stream bool) map[string]string {
	t.Helper()
	got := map[string]string{}
	switch {
	case !stream && proto == transforms.ProtocolChat:
		var b struct {
			Choices []struct {
				Message struct {
					ToolCalls []struct {
						ID       string `json:"id"`
						Function struct{ Arguments string }
					} `json:"tool_calls"`
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &b); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for _, c := range b.Choices[0].Message.ToolCalls {
			got[c.ID] = c.Function.Arguments
		}
	case !stream:
		var b struct {
			Output []struct {
				CallID    string `json:"call_id"`
				Arguments string
			}
		}
		if err := json.Unmarshal([]byte(out), &b); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		for _, it := range b.Output {
			got[it.CallID] = it.Arguments
		}
	case proto == transforms.ProtocolChat:
		chunks, _ := transformtest.ChatChunks(t, out)
		text := transformtest.CallText(chunks)
		ids := map[string]string{}
		for _, c := range chunks {
			chs, _ := c["choices"].([]any)
			for _, ch := range chs {
				delta, _ := ch.(map[string]any)["delta"].(map[string]any)
				tcs, _ := delta["tool_calls"].([]any)
				for _, tc := range tcs {
					e := tc.(map[string]any)
					if id, ok := e["id"].(string); ok {
						ids["0/"+transformtest.Itoa(int(e["index"].(float64)))] = id
					}
				}
			}
		}
		for k, id := range ids {
			got[id] = text[k]
		}
	default:
		evs := transformtest.Events(t, out)
		deltas := map[string]string{}
		byItem := map[string]string{}
		for _, e := range evs {
			switch e["type"] {
			case "response.output_item.added":
				it := e["item"].(map[string]any)
				byItem[it["id"].(string)] = it["call_id"].(string)
			case "response.function_call_arguments.delta":
				deltas[byItem[e["item_id"].(string)]] += e["delta"].(string)
			case "response.function_call_arguments.done":
				if a := e["arguments"].(string); a != deltas[byItem[e["item_id"].(string)]] {
					t.Errorf("done event %q, deltas %q", a, deltas[byItem[e["item_id"].(string)]])
				}
			case "response.output_item.done":
				it := e["item"].(map[string]any)
				got[it["call_id"].(string)] = it["arguments"].(string)
			case "response.completed":
				for _, o := range e["response"].(map[string]any)["output"].([]any) {
					it := o.(map[string]any)
					if it["arguments"] != got[it["call_id"].(string)] {
						t.Errorf("response.completed holds %v for %v, output_item.done %q", it["arguments"], it["call_id"], got[it["call_id"].(string)])
					}
				}
			}
		}
		for id, a := range deltas {
			if got[id] != a {
				t.Errorf("%s: deltas %q, item %q", id, a, got[id])
			}
		}
	}
	return got
}

// roundTrip sends the tools through one rule with config, then the
// upstream's calls back, as JSON and as a stream in both protocols, and
// returns what the client got for each call (call id → arguments), the
// same every way or the test fails.
func roundTrip(t *testing.T, config, strict string, tools []rtTool) (map[string]string, *transforms.Exchange) {
	t.Helper()
	rules := `[{"transform":"tools_normalize_schema","config":` + config + `}]`
	var first map[string]string
	var firstX *transforms.Exchange
	for _, proto := range []transforms.Protocol{transforms.ProtocolResponses, transforms.ProtocolChat} {
		req := rtRequest(proto, strict, tools)
		fresh := func() *transforms.Exchange {
			if proto == transforms.ProtocolChat {
				return transformtest.ChatExchange(t, rules, req)
			}
			return transformtest.ExchangeAfter(t, rules, req)
		}
		x := fresh()
		out, err := x.RewriteResponse([]byte(rtJSON(proto, tools)))
		if err != nil {
			t.Fatal(err)
		}
		got := rtArgs(t, proto, string(out), false)
		stream := transformtest.ReplayAll(t, fresh, rtSSE(proto, tools, 3))
		if s := rtArgs(t, proto, stream, true); !sameArgs(s, got) {
			t.Fatalf("%s: the stream gave %v, JSON %v", proto, s, got)
		}
		if first == nil {
			first, firstX = got, x
		} else if !sameArgs(first, got) {
			t.Fatalf("Chat gave %v, Responses %v", got, first)
		}
	}
	return first, firstX
}

func sameArgs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// wantArgs checks the client's arguments against the expected ones, in
// call order.
func wantArgs(t *testing.T, got map[string]string, want ...string) {
	t.Helper()
	for i, w := range want {
		if g := got["call_"+transformtest.Itoa(i)]; g != w {
			t.Errorf("call %d: got %s, want %s", i, g, w)
		}
	}
}

const strictOnMember = `,"strict":true`

func TestStrictNullsForOptionalMembersAreRemoved(t *testing.T) {
	params := `{"type":"object","properties":{"q":{"type":"string"},"group":{"type":"string"},"limit":{"type":["integer","null"]},"opt":{"type":"object","properties":{"deep":{"type":"string"}}}},"required":["q"]}`
	got, x := roundTrip(t, `{"dialect":"openai_strict"}`, strictOnMember, []rtTool{
		// What a strict model sends: every member, null for those it
		// was not asked for; limit takes null in the tool's own schema.
		{"chart", params, `{"q":"x","group":null,"limit":null,"opt":{"deep":null}}`},
		{"chart", params, `{"q":"x","group":"g","limit":3,"opt":null}`},
	})
	wantArgs(t, got, `{"q":"x","limit":null,"opt":{}}`, `{"q":"x","group":"g","limit":3}`)
	if c := x.Counts(); c.ArgsUnrestored != (transforms.UnrestoredArgs{}) {
		t.Errorf("counted failures: %+v", c.ArgsUnrestored)
	}
}

func TestStrictNullsKeptWithoutStrict(t *testing.T) {
	params := `{"type":"object","properties":{"q":{"type":"string"},"group":{"type":"string"}},"required":["q"]}`
	got, _ := roundTrip(t, `{"dialect":"openai_strict"}`, "", []rtTool{{"chart", params, `{"q":"x","group":null}`}})
	wantArgs(t, got, `{"q":"x","group":null}`)
}

func TestGeminiIntegerEnumsComeBackAsNumbers(t *testing.T) {
	params := `{"type":"object","properties":{"size":{"type":"integer","enum":[10,20]},"ratio":{"enum":[0.5,1.5]},"flag":{"const":true},"name":{"type":"string","enum":["10"]}}}`
	got, _ := roundTrip(t, `{"dialect":"gemini"}`, "", []rtTool{{"pick", params, `{"size":"10","ratio":"1.5","flag":"true","name":"10"}`}})
	wantArgs(t, got, `{"size":10,"ratio":1.5,"flag":true,"name":"10"}`)
}

func TestGeminiMapsAndUntypedValuesTravelAsJSONText(t *testing.T) {
	params := `{"type":"object","properties":{"env":{"type":"object","additionalProperties":{"type":"string"}},"meta":{},"list":{"type":"array","items":{}}}}`
	out, _ := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(params))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{`+
		`"env":{"type":"string","description":"(write a JSON object whose values follow {\"type\":\"string\"} as JSON text)"},`+
		`"meta":{"type":"string","description":"(write any JSON value as JSON text)"},`+
		`"list":{"type":"array","items":{"type":"string","description":"(write any JSON value as JSON text)"}}}}`))
	validatorAccepts(t, "gemini", out)
	got, x := roundTrip(t, `{"dialect":"gemini"}`, "", []rtTool{
		{"run", params, `{"env":"{\"A\":\"1\"}","meta":"[1,{\"x\":null}]","list":["2","\"s\"","plain"]}`},
		// A model that writes the map itself is taken at its word.
		{"run", params, `{"env":{"A":"1"}}`},
		// Not JSON where a map was asked for: left alone, counted.
		{"run", params, `{"env":"A=1"}`},
	})
	wantArgs(t, got, `{"env":{"A":"1"},"meta":[1,{"x":null}],"list":[2,"s","plain"]}`, `{"env":{"A":"1"}}`, `{"env":"A=1"}`)
	if c := x.Counts().ArgsUnrestored; c.JSONText != 1 {
		t.Errorf("want one json_text failure, got %+v", c)
	}
}

func TestKimiReservedPropertyNamesComeBack(t *testing.T) {
	params := `{"type":"object","properties":{"additionalProperties":{"type":"boolean"},"required":{"type":"array","items":{"type":"string"}},"x":{"type":"string"}},"required":["required"]}`
	out, _ := nsOK(t, `{"dialect":"kimi"}`, transforms.ProtocolResponses, fn(params))
	transformtest.JSONEqual(t, out, fn(`{"type":"object","properties":{"additionalProperties_":{"type":"boolean"},"required_":{"type":"array","items":{"type":"string"}},"x":{"type":"string"}},"required":["required_"]}`))
	validatorAccepts(t, "kimi", out)
	got, _ := roundTrip(t, `{"dialect":"kimi"}`, "", []rtTool{{"cfg", params, `{"required_":["a"],"additionalProperties_":true,"x":"y"}`}})
	wantArgs(t, got, `{"required":["a"],"additionalProperties":true,"x":"y"}`)
}

func TestSchemaAsJSONTextFallbackRoundTrip(t *testing.T) {
	params := `{"type":"object","properties":{"root":{"$ref":"#/$defs/Node"}},"$defs":{"Node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/Node"}}}}}}`
	out, x := nsOK(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(params))
	validatorAccepts(t, "gemini", out)
	if !hasDecision(x, "f", "schema_as_json_text") {
		t.Errorf("no decision: %+v", x.Decisions())
	}
	got, _ := roundTrip(t, `{"dialect":"gemini"}`, "", []rtTool{{"tree", params, `{"json":"{\"root\":{\"kids\":[{\"kids\":[]}]}}"}`}})
	wantArgs(t, got, `{"root":{"kids":[{"kids":[]}]}}`)
	// Rejected on request.
	nsErr(t, `{"dialect":"gemini","unsupported":"reject"}`, transforms.ProtocolResponses, fn(params), "schema_ref_cycle")
}

func TestArgumentsThatAreNotJSONPassCounted(t *testing.T) {
	params := `{"type":"object","properties":{"q":{"type":"string"},"group":{"type":"string"}},"required":["q"]}`
	got, x := roundTrip(t, `{"dialect":"openai_strict"}`, strictOnMember, []rtTool{{"chart", params, `{"q":"x","group":nul`}})
	wantArgs(t, got, `{"q":"x","group":nul`)
	if c := x.Counts().ArgsUnrestored; c.InvalidJSON != 1 {
		t.Errorf("want one invalid_json, got %+v", c)
	}
}

// TestOnlyCallsThatNeedRestoringWait: a call to a tool whose arguments
// come back unchanged streams delta by delta; one that needs restoring
// is held until its arguments are complete.
func TestOnlyCallsThatNeedRestoringWait(t *testing.T) {
	req := rtRequest(transforms.ProtocolResponses, strictOnMember, []rtTool{
		{"plain", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, ""},
		{"opt", `{"type":"object","properties":{"a":{"type":"string"}}}`, ""},
	})
	x := transformtest.ExchangeAfter(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"openai_strict"}}]`, req)
	up := rtSSE(transforms.ProtocolResponses, []rtTool{{"plain", "", `{"a":"hello"}`}, {"opt", "", `{"a":null}`}}, 2)
	evs := transformtest.Events(t, transformtest.Replay(t, x, up, 64))
	var plain, opt []string
	for _, e := range evs {
		if e["type"] == "response.function_call_arguments.delta" {
			if e["item_id"] == "fc_0" {
				plain = append(plain, e["delta"].(string))
			} else {
				opt = append(opt, e["delta"].(string))
			}
		}
	}
	if len(plain) != 7 || strings.Join(plain, "") != `{"a":"hello"}` {
		t.Errorf("the plain call must stream as it came: %q", plain)
	}
	if len(opt) != 1 || opt[0] != `{}` {
		t.Errorf("the restored call comes whole, once complete: %q", opt)
	}
}

// TestRestorationOutlivesTheRequestBody: the handler lends the request's
// buffer to the next request once the body is sent; what the response
// phase needs (property names, renames, enum values) must be the rule's
// own, not views of that buffer.
func TestRestorationOutlivesTheRequestBody(t *testing.T) {
	params := `{"type":"object","properties":{"additionalProperties":{"type":"string"},"size":{"type":"integer","enum":[10,20]},"opt":{"type":"string"}},"required":["size"]}`
	for _, d := range []struct{ dialect, strict, args, want string }{
		{"kimi", "", `{"additionalProperties_":"v"}`, `{"additionalProperties":"v"}`},
		{"gemini", "", `{"size":"10"}`, `{"size":10}`},
		{"openai_strict", strictOnMember, `{"additionalProperties":"v","size":10,"opt":null}`, `{"additionalProperties":"v","size":10}`},
	} {
		body := []byte(rtRequest(transforms.ProtocolResponses, d.strict, []rtTool{{"f", params, ""}}))
		x := transformtest.Begin(t, transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"`+d.dialect+`"}}]`), transforms.ProtocolResponses, body)
		if _, err := x.RewriteRequest(body); err != nil {
			t.Fatal(err)
		}
		for i := range body {
			body[i] = 'x' // the buffer, reused
		}
		out, err := x.RewriteResponse([]byte(rtJSON(transforms.ProtocolResponses, []rtTool{{"f", "", d.args}})))
		if err != nil {
			t.Fatal(err)
		}
		if got := rtArgs(t, transforms.ProtocolResponses, string(out), false)["call_0"]; got != d.want {
			t.Errorf("%s: got %s, want %s", d.dialect, got, d.want)
		}
	}
}
