package messagesbridge

import (
	"strconv"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// RewriteRequest implements RequestRewriter: a Messages request becomes a
// Chat Completions request sent to …/chat/completions, written in one pass
// over the body's members, one over the conversation to pair tool calls
// with their results, and one to write it.
func (t *MessagesToChat) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	if x.Protocol() != transforms.ProtocolMessages {
		return body, nil
	}
	if !jsonspan.Valid(body) {
		return nil, transforms.ErrInvalidJSON // the engine refuses what the bridge cannot read
	}
	start := jsonspan.SkipSpace(body, 0)
	if body[start] != '{' {
		return nil, transforms.BadRequest("invalid_request", "", "messages_to_chat: the request body must be a JSON object")
	}
	var f topFields
	f.reset()
	var dropped []string // members with no Chat form, for one decision each
	jsonspan.EachMember(body, start, func(m jsonspan.Member) bool {
		// A repeated key: the last one is what the upstream would have
		// read, so the last one is what is converted.
		switch key := jsonspan.KeyName(body, m.Key); key {
		case "model":
			f.model = m.Value
		case "system":
			f.system = m.Value
		case "messages":
			f.messages = m.Value
		case "tools":
			f.tools = m.Value
		case "tool_choice":
			f.choice = m.Value
		case "thinking":
			f.thinking = m.Value
		case "output_config":
			f.output = m.Value
		case "max_tokens":
			f.maxTokens = m.Value
		case "stop_sequences":
			f.stop = m.Value
		case "temperature":
			f.temperature = m.Value
		case "top_p":
			f.topP = m.Value
		case "metadata":
			f.metadata = m.Value
		case "stream":
			f.stream = m.Value
		default:
			// top_k, context_management, cache_control, container,
			// service_tier, inference_geo, mcp_servers, safeguards,
			// anthropic_version and what else Messages adds: Chat has no
			// such member, and an unknown member is a 400 at strict
			// upstreams.
			dropped = append(dropped, strings.Clone(key))
		}
		return true
	})
	for _, k := range dropped {
		x.Decide(k, "drop", "a Messages request member with no Chat Completions form")
	}

	b := &msgBuild{t: t, x: x, doc: body, reasonLeft: 8*len(body) + t.maxReasoning}
	if err := b.readParams(&f); err != nil {
		return nil, err
	}
	b.vision = t.knobs.Vision(b.model)
	if err := b.scan(f.messages); err != nil {
		return nil, err
	}
	tools, err := b.convertTools(f.tools)
	if err != nil {
		return nil, err
	}
	choice, parallel, err := b.convertChoice(f.choice, len(tools) > 0)
	if err != nil {
		return nil, err
	}
	if b.noTools {
		tools = nil
	}

	out := make([]byte, 0, len(body)+len(body)/8+256)
	out = append(out, '{')
	if f.model.Start >= 0 {
		out = append(out, `"model":`...)
		out = append(out, body[f.model.Start:f.model.End]...)
		out = append(out, ',')
	}
	out = append(out, `"messages":`...)
	if out, err = b.writeMessages(out, f.system); err != nil {
		return nil, err
	}
	if len(tools) > 0 {
		out = append(out, `,"tools":[`...)
		out = append(out, tools...)
		out = append(out, ']')
		out = append(out, choice...)
		if parallel {
			out = append(out, `,"parallel_tool_calls":false`...)
		}
	}
	for _, p := range []struct {
		name string
		v    jsonspan.Span
	}{{"temperature", f.temperature}, {"top_p", f.topP}} {
		if p.v.Start >= 0 && !jsonspan.IsNull(body, p.v) {
			out = append(out, `,"`+p.name+`":`...)
			out = append(out, body[p.v.Start:p.v.End]...)
		}
	}
	if len(b.stop) > 0 {
		out = append(out, `,"stop":`...)
		out = append(out, body[f.stop.Start:f.stop.End]...)
	}
	out = append(out, b.userMember...)
	if f.stream.Start >= 0 && !jsonspan.IsNull(body, f.stream) {
		out = append(out, `,"stream":`...)
		out = append(out, body[f.stream.Start:f.stream.End]...)
		if b.stream {
			// Usage comes in a last chunk only when asked for, and the
			// Messages stream must end with it.
			out = append(out, `,"stream_options":{"include_usage":true}`...)
		}
	}
	k := t.knobs
	if b.maxTokens > 0 {
		out = append(out, `,"`+k.MaxTokensField+`":`+strconv.Itoa(b.maxTokens)...)
	}
	switch {
	case k.StreamThinking && !b.stream:
		out = append(out, `,"enable_thinking":false`...) // refused without a stream
	case k.Effort != nil:
		n := len(out)
		out = k.Effort(out, b.effort)
		if len(out) == n && b.effort != "" && b.effort != "none" {
			// Kimi thinks by the model, not by a switch: say that the
			// client's thinking settings decided nothing here.
			x.Decide("thinking", "ignore", "the "+t.Profile+" profile has no switch for thinking at effort "+b.effort+": the model's default applies")
		}
	default:
		if b.effort != "" {
			x.Decide("thinking", "ignore", "the "+t.Profile+" profile has no thinking knob")
		}
	}
	out = append(out, b.format...)
	out = append(out, '}')

	if counting(x) {
		// Anthropic's count_tokens, which no Chat upstream has: the
		// gateway answers it from the request as every rule after this
		// one leaves it, and the path stays (nothing is sent anywhere).
		// Nothing is bridged back either: no response comes.
		x.AnswerLocally(answerCount)
		return out, nil
	}
	rec := t.record(x)
	rec.bridged = true
	// The client's own model, as it asked, even when a rule before this
	// one routed the request to another.
	switch {
	case x.Model != "":
		rec.model = x.Model
	default:
		rec.model, _ = jsonspan.StringValue(body, f.model)
	}
	rec.maxTokens = b.maxTokens
	rec.stopSequences = b.stop
	rec.stream = b.stream
	rec.thinking = b.thinking
	rec.tools = b.clientTools
	x.ReplacePathSuffix("/messages", "/chat/completions")
	return out, nil
}

// topFields are the request members the conversion reads.
type topFields struct {
	model, system, messages, tools, choice, thinking, output jsonspan.Span
	maxTokens, stop, temperature, topP, metadata, stream     jsonspan.Span
}

func (f *topFields) reset() {
	for _, s := range []*jsonspan.Span{&f.model, &f.system, &f.messages, &f.tools, &f.choice, &f.thinking, &f.output,
		&f.maxTokens, &f.stop, &f.temperature, &f.topP, &f.metadata, &f.stream} {
		*s = jsonspan.NoSpan()
	}
}

// badRequest is the 400 for a request the bridge cannot read as Messages.
func badRequest(param, format string, a ...any) *transforms.Error {
	return transforms.BadRequest("invalid_request", param, "messages_to_chat: "+format, a...)
}

// msgBuild is one request's conversion.
type msgBuild struct {
	t   *MessagesToChat
	x   *transforms.Exchange
	doc []byte

	// From the parameters.
	model      string
	vision     bool // the model reads images
	stream     bool
	thinking   bool   // the client asked for thinking
	effort     string // the effort handed to the profile's knob
	maxTokens  int
	stop       []string
	userMember []byte // the ,"user":… member, or nothing
	format     []byte // the ,"response_format":… member, or nothing
	// schemaNote is the instruction that stands in for a JSON schema the
	// upstream cannot enforce, added to the system message (escaped).
	schemaNote []byte

	// reasonLeft is how many bytes of reasoning the request's envelopes
	// may still give back: eight times the body, and one answer's
	// max_reasoning, far above what real reasoning deflates by.
	reasonLeft int

	// From the conversation scan.
	msgs []msgInfo
	// uses and results hold each tool_use and tool_result by id and the
	// message it is in: a call is sent only with its result in the next
	// message, and a result only with its call in the one before.
	uses, results map[pairKey]bool
	// loaded are the deferred tools a tool_reference in the history named.
	loaded map[string]bool

	// From the tools.
	clientTools map[string]bool
	sent        map[string]bool // tool names sent upstream
	serverTools map[string]bool // names of the server tools dropped
	noTools     bool            // tool_choice none that the upstream cannot take

	// While writing.
	blockCache bool // a content block carried cache_control
	pending    [][]byte
}

// msgInfo is one message of the conversation.
type msgInfo struct {
	role    byte // 'u'ser, 'a'ssistant, 's'ystem
	content jsonspan.Span
	// next and prev are the indexes of the nearest user or assistant
	// message after and before it (-1: none): system messages between a
	// call and its result do not part them.
	next, prev int
	// sentCalls: an assistant message with a call answered in the next
	// message, so sent.
	sentCalls bool
}

type pairKey struct {
	id  string
	msg int
}
