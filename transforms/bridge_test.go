package transforms_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// testBridge is just enough of a protocol bridge to prove that the engine
// carries one: a Responses request with a string input becomes a Chat
// request, and the Chat answer becomes Responses again, in JSON and as a
// stream. With reverse set it bridges the other way, Chat to Responses.
type testBridge struct {
	Reverse bool `json:"reverse,omitempty"`
}

// protocolProbe records the protocol it is handed in each phase.
type protocolProbe struct{}

type probeKey struct{}

type probeSeen struct{ request, response []transforms.Protocol }

func init() {
	caddy.RegisterModule(testBridge{})
	caddy.RegisterModule(protocolProbe{})
}

func (testBridge) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("test_bridge"), New: func() caddy.Module { return new(testBridge) }}
}

func (b *testBridge) from() transforms.Protocol {
	if b.Reverse {
		return transforms.ProtocolChat
	}
	return transforms.ProtocolResponses
}

func (b *testBridge) to() transforms.Protocol {
	if b.Reverse {
		return transforms.ProtocolResponses
	}
	return transforms.ProtocolChat
}

func (b *testBridge) BridgedProtocol(in transforms.Protocol) transforms.Protocol {
	if in == b.from() {
		return b.to()
	}
	return in
}

func str(doc []byte, key string) string {
	s, _ := jsonspan.StringValue(doc, jsonspan.Lookup(doc, 0, key))
	return s
}

func (b *testBridge) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	if x.Protocol() != b.from() {
		return body, nil
	}
	sp := jsonspan.Lookup(body, 0, "stream")
	stream := sp.Start >= 0 && string(body[sp.Start:sp.End]) == "true"
	out := []byte(`{"model":`)
	out = jsonspan.AppendStringStr(out, str(body, "model"))
	if b.Reverse {
		msgs := jsonspan.Lookup(body, 0, "messages")
		var text string
		jsonspan.EachElement(body, msgs.Start, func(el jsonspan.Span) bool {
			text, _ = jsonspan.StringValue(body, jsonspan.Lookup(body, el.Start, "content"))
			return true
		})
		out = append(out, `,"input":`...)
		out = jsonspan.AppendStringStr(out, text)
		x.ReplacePathSuffix("/chat/completions", "/responses")
	} else {
		out = append(out, `,"messages":[{"role":"user","content":`...)
		out = jsonspan.AppendStringStr(out, str(body, "input"))
		out = append(out, `}]`...)
		x.ReplacePathSuffix("/responses", "/chat/completions")
	}
	return append(out, fmt.Sprintf(`,"stream":%v}`, stream)...), nil
}

func (b *testBridge) WantsResponse(x *transforms.Exchange) bool { return x.Protocol() == b.to() }

func (b *testBridge) RewriteResponse(x *transforms.Exchange, body []byte) ([]byte, error) {
	if b.Reverse {
		return body, nil // only its stream is exercised
	}
	choices := jsonspan.Lookup(body, 0, "choices")
	var text string
	jsonspan.EachElement(body, choices.Start, func(el jsonspan.Span) bool {
		msg := jsonspan.Lookup(body, el.Start, "message")
		text, _ = jsonspan.StringValue(body, jsonspan.Lookup(body, msg.Start, "content"))
		return false
	})
	out := []byte(`{"id":`)
	out = jsonspan.AppendStringStr(out, str(body, "id"))
	out = append(out, `,"object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":`...)
	out = jsonspan.AppendStringStr(out, text)
	return append(out, `}]}]}`...), nil
}

func (b *testBridge) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	if b.Reverse {
		return &chatFromResponses{}
	}
	return &responsesFromChat{}
}

// responsesFromChat writes Responses events for a Chat stream, with the
// placeholder sequence number and no event names: the engine frames them
// for the client.
type responsesFromChat struct {
	id      string
	text    strings.Builder
	started bool
}

func (s *responsesFromChat) emit(emit transforms.Emit, format string, args ...any) error {
	return emit(&transforms.Event{Data: fmt.Appendf(nil, format, args...)})
}

func (s *responsesFromChat) Event(ev *transforms.Event, emit transforms.Emit) error {
	d := ev.Data
	if string(d) == "[DONE]" {
		full := string(jsonspan.AppendStringStr(nil, s.text.String()))
		item := `{"id":"msg_` + s.id + `","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":` + full + `}]}`
		for _, e := range []string{
			`{"type":"response.output_text.done","sequence_number":0,"item_id":"msg_` + s.id + `","output_index":0,"content_index":0,"text":` + full + `}`,
			`{"type":"response.content_part.done","sequence_number":0,"item_id":"msg_` + s.id + `","output_index":0,"content_index":0,"part":{"type":"output_text","text":` + full + `}}`,
			`{"type":"response.output_item.done","sequence_number":0,"output_index":0,"item":` + item + `}`,
			`{"type":"response.completed","sequence_number":0,"response":{"id":"` + s.id + `","object":"response","status":"completed","output":[` + item + `]}}`,
		} {
			if err := s.emit(emit, "%s", e); err != nil {
				return err
			}
		}
		return nil
	}
	if len(d) == 0 || d[0] != '{' {
		return emit(ev) // comments and keep-alives pass as they are
	}
	if !s.started {
		s.started, s.id = true, str(d, "id")
		for _, e := range []string{
			`{"type":"response.created","sequence_number":0,"response":{"id":"` + s.id + `","object":"response","status":"in_progress","output":[]}}`,
			`{"type":"response.output_item.added","sequence_number":0,"output_index":0,"item":{"id":"msg_` + s.id + `","type":"message","role":"assistant","status":"in_progress","content":[]}}`,
			`{"type":"response.content_part.added","sequence_number":0,"item_id":"msg_` + s.id + `","output_index":0,"content_index":0,"part":{"type":"output_text","text":""}}`,
		} {
			if err := s.emit(emit, "%s", e); err != nil {
				return err
			}
		}
	}
	choices := jsonspan.Lookup(d, 0, "choices")
	var err error
	jsonspan.EachElement(d, choices.Start, func(el jsonspan.Span) bool {
		delta := jsonspan.Lookup(d, el.Start, "delta")
		if c, ok := jsonspan.StringValue(d, jsonspan.Lookup(d, delta.Start, "content")); ok && c != "" {
			s.text.WriteString(c)
			err = s.emit(emit, `{"type":"response.output_text.delta","sequence_number":0,"item_id":"msg_%s","output_index":0,"content_index":0,"delta":%s}`,
				s.id, jsonspan.AppendStringStr(nil, c))
		}
		return err == nil
	})
	return err
}

func (s *responsesFromChat) End(transforms.Emit) error { return nil }

// chatFromResponses writes Chat chunks for a Responses stream; the engine
// drops the event names and ends the stream with [DONE].
type chatFromResponses struct{}

func (chatFromResponses) Event(ev *transforms.Event, emit transforms.Emit) error {
	switch t := str(ev.Data, "type"); t {
	case "response.output_text.delta":
		return emit(&transforms.Event{Name: ev.Name, Data: fmt.Appendf(nil, `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":%s},"finish_reason":null}]}`,
			jsonspan.AppendStringStr(nil, str(ev.Data, "delta")))})
	case "response.completed":
		return emit(&transforms.Event{Name: ev.Name, Data: []byte(`{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)})
	}
	return nil
}

func (chatFromResponses) End(transforms.Emit) error { return nil }

func (protocolProbe) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("test_protocol_probe"), New: func() caddy.Module { return new(protocolProbe) }}
}

func probe(x *transforms.Exchange) *probeSeen {
	return x.Record(probeKey{}, func() any { return &probeSeen{} }).(*probeSeen)
}

func (protocolProbe) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	probe(x).request = append(probe(x).request, x.Protocol())
	return body, nil
}
func (protocolProbe) WantsResponse(x *transforms.Exchange) bool { return true }
func (protocolProbe) RewriteResponse(x *transforms.Exchange, body []byte) ([]byte, error) {
	probe(x).response = append(probe(x).response, x.Protocol())
	return body, nil
}
func (protocolProbe) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	probe(x).response = append(probe(x).response, x.Protocol())
	return nil
}

func bridged(t *testing.T, rules string, client transforms.Protocol, path, body string) *transforms.Exchange {
	t.Helper()
	x := transforms.NewExchange(client, transforms.Limits{MaxCallBuffer: 1 << 20, MaxEvent: 1 << 20}, nil)
	transformtest.Chain(t, rules).Begin(x, "m")
	x.SetUpstreamPath(path)
	if _, err := x.RewriteRequest([]byte(body)); err != nil {
		t.Fatal(err)
	}
	return x
}

// TestBridgeChangesProtocolPathAndFraming runs a Responses client over a
// Chat upstream: rules after the bridge see Chat both ways, the path keeps
// its prefix, and the Chat stream reaches the client as named Responses
// events with gap-free sequence numbers, at every chunk size.
func TestBridgeChangesProtocolPathAndFraming(t *testing.T) {
	rules := `[{"transform":"test_protocol_probe"},{"transform":"test_bridge"},{"transform":"test_protocol_probe"}]`
	req := `{"model":"m","input":"Say hello","stream":true}`
	x := bridged(t, rules, transforms.ProtocolResponses, "/openai/v1/responses", req)
	if x.ClientProtocol() != transforms.ProtocolResponses || x.UpstreamProtocol() != transforms.ProtocolChat {
		t.Fatalf("client %s, upstream %s", x.ClientProtocol(), x.UpstreamProtocol())
	}
	if x.UpstreamPath() != "/openai/v1/chat/completions" {
		t.Fatalf("path %q", x.UpstreamPath())
	}
	if got := fmt.Sprint(probe(x).request); got != "[responses chat_completions]" {
		t.Fatalf("request protocols by position: %s", got)
	}
	chunk := func(delta string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
	}
	upstream := chunk(`{"role":"assistant","content":""}`) + ": keep-alive\n\n" + chunk(`{"content":"Hel"}`) + chunk(`{"content":"lo \"you\""}`) + "data: [DONE]\n\n"
	const text = `Hello \"you\"`
	const want = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"c1\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_c1\",\"type\":\"message\",\"role\":\"assistant\",\"status\":\"in_progress\",\"content\":[]}}\n\n" +
		"event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":2,\"item_id\":\"msg_c1\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\"}}\n\n" +
		": keep-alive\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":3,\"item_id\":\"msg_c1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hel\"}\n\n" +
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":4,\"item_id\":\"msg_c1\",\"output_index\":0,\"content_index\":0,\"delta\":\"lo \\\"you\\\"\"}\n\n" +
		"event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"sequence_number\":5,\"item_id\":\"msg_c1\",\"output_index\":0,\"content_index\":0,\"text\":\"" + text + "\"}\n\n" +
		"event: response.content_part.done\ndata: {\"type\":\"response.content_part.done\",\"sequence_number\":6,\"item_id\":\"msg_c1\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"" + text + "\"}}\n\n" +
		"event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"sequence_number\":7,\"output_index\":0,\"item\":{\"id\":\"msg_c1\",\"type\":\"message\",\"role\":\"assistant\",\"status\":\"completed\",\"content\":[{\"type\":\"output_text\",\"text\":\"" + text + "\"}]}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":8,\"response\":{\"id\":\"c1\",\"object\":\"response\",\"status\":\"completed\",\"output\":[{\"id\":\"msg_c1\",\"type\":\"message\",\"role\":\"assistant\",\"status\":\"completed\",\"content\":[{\"type\":\"output_text\",\"text\":\"" + text + "\"}]}]}}\n\n"
	for _, n := range []int{1, 7, 4096} {
		x := bridged(t, rules, transforms.ProtocolResponses, "/v1/responses", req)
		if got := transformtest.Replay(t, x, upstream, n); got != want {
			t.Fatalf("chunk size %d:\n%s\n--- want\n%s", n, got, want)
		}
		// The probe after the bridge saw the Chat side; the one before it,
		// which runs last on the way back, the client's.
		if got := fmt.Sprint(probe(x).response); got != "[chat_completions responses]" {
			t.Fatalf("response protocols, upstream side first: %s", got)
		}
	}

	x = bridged(t, rules, transforms.ProtocolResponses, "/v1/responses", `{"model":"m","input":"Say hello"}`)
	out, err := x.RewriteResponse([]byte(`{"id":"c2","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	transformtest.JSONEqual(t, out, `{"id":"c2","object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi"}]}]}`)
}

// TestBridgedAbortTakesTheClientsShape: a rule on the Chat side of the
// bridge ends the stream, and the Responses client gets a Responses error
// event that continues the sequence.
func TestBridgedAbortTakesTheClientsShape(t *testing.T) {
	x := bridged(t, `[{"transform":"test_bridge"},{"transform":"test_stream_dropper"}]`, transforms.ProtocolResponses, "/v1/responses", `{"model":"m","input":"x"}`)
	upstream := `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"a"}}]}` + "\n\ndata: abort\n\n" + `data: {"id":"c1","choices":[{"index":0,"delta":{"content":"b"}}]}` + "\n\n"
	got := transformtest.Replay(t, x, upstream, 7)
	wantEnd := "event: error\ndata: {\"type\":\"error\",\"sequence_number\":4,\"code\":\"test_abort\",\"message\":\"aborted by test\",\"param\":null}\n\n"
	if !strings.HasSuffix(got, wantEnd) || strings.Count(got, "event: ") != 5 || strings.Contains(got, `"b"`) {
		t.Fatalf("got:\n%s", got)
	}
	if x.StreamError() != "test_abort" {
		t.Fatalf("stream error %q", x.StreamError())
	}
}

// TestReverseBridgeWritesChatFraming: a Chat client over a Responses
// upstream gets data-only chunks and the [DONE] its SDK waits for.
func TestReverseBridgeWritesChatFraming(t *testing.T) {
	x := bridged(t, `[{"transform":"test_bridge","config":{"reverse":true}}]`, transforms.ProtocolChat, "/v1/chat/completions",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	if x.UpstreamPath() != "/v1/responses" || x.UpstreamProtocol() != transforms.ProtocolResponses {
		t.Fatalf("path %q, upstream %s", x.UpstreamPath(), x.UpstreamProtocol())
	}
	upstream := transformtest.SSE(`{"type":"response.created","sequence_number":0,"response":{}}`,
		`{"type":"response.output_text.delta","sequence_number":1,"delta":"Hi"}`,
		`{"type":"response.completed","sequence_number":2,"response":{}}`)
	const want = "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: [DONE]\n\n"
	for _, n := range []int{1, 7, 4096} {
		x := bridged(t, `[{"transform":"test_bridge","config":{"reverse":true}}]`, transforms.ProtocolChat, "/v1/chat/completions",
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}`)
		if got := transformtest.Replay(t, x, upstream, n); got != want {
			t.Fatalf("chunk size %d:\n%q", n, got)
		}
	}
}

// TestLoneBridgePhaseIsRefused: half a bridge would answer the client in
// the upstream's protocol.
func TestLoneBridgePhaseIsRefused(t *testing.T) {
	var cfgs []transforms.RuleConfig
	cfgs = append(cfgs, transforms.RuleConfig{Transform: "test_bridge", Phase: "request"})
	if _, err := transforms.Compile(transformtest.Context(t), cfgs, transforms.ScopeProvider, ""); err == nil || !strings.Contains(err.Error(), "a protocol bridge needs both phases") {
		t.Fatalf("err = %v", err)
	}
}
