package chatbridge

import (
	"slices"
	"strconv"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// RewriteRequest implements RequestRewriter: a Responses request becomes
// a Chat Completions request, written in one pass over the body's members
// and one over its input items.
func (t *ResponsesToChat) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	if x.Protocol() != transforms.ProtocolResponses {
		return body, nil
	}
	start := jsonspan.SkipSpace(body, 0)
	if !jsonspan.Valid(body) {
		return nil, transforms.ErrInvalidJSON // the engine refuses what the bridge cannot read
	}
	if start >= len(body) || body[start] != '{' {
		return body, nil // not a request: the upstream answers it
	}
	b := &chatBuild{t: t, x: x, doc: body, input: jsonspan.NoSpan(), tools: jsonspan.NoSpan(), choice: jsonspan.NoSpan(),
		reasonLeft: 8*len(body) + t.maxReasoning}
	var fields struct{ model, instructions, maxOut, effort, format, verbosity, stream jsonspan.Span }
	fields.model, fields.instructions, fields.maxOut = jsonspan.NoSpan(), jsonspan.NoSpan(), jsonspan.NoSpan()
	fields.effort, fields.format, fields.verbosity, fields.stream = jsonspan.NoSpan(), jsonspan.NoSpan(), jsonspan.NoSpan(), jsonspan.NoSpan()
	var pass []jsonspan.Member // members that keep their name and value
	var echo [len(echoFields)]jsonspan.Span
	for i := range echo {
		echo[i] = jsonspan.NoSpan()
	}
	var err error
	jsonspan.EachMember(body, start, func(m jsonspan.Member) bool {
		key, _ := jsonspan.StringValue(body, m.Key)
		v := m.Value
		if i := slices.IndexFunc(echoFields[:], func(f echoField) bool { return f.name == key }); i >= 0 && echo[i].Start < 0 && !jsonspan.IsNull(body, v) {
			echo[i] = v
		}
		switch key {
		case "model":
			fields.model = v
		case "instructions":
			fields.instructions = v
		case "input":
			b.input = v
		case "tools":
			b.tools = v
		case "tool_choice":
			b.choice = v
		case "max_output_tokens":
			fields.maxOut = v
		case "stream":
			fields.stream = v
			pass = append(pass, m)
		case "reasoning":
			if body[v.Start] == '{' {
				fields.effort = jsonspan.Lookup(body, v.Start, "effort")
			}
		case "text":
			if body[v.Start] == '{' {
				fields.format = jsonspan.Lookup(body, v.Start, "format")
				fields.verbosity = jsonspan.Lookup(body, v.Start, "verbosity")
			}
		case "temperature", "top_p", "parallel_tool_calls", "user", "seed", "stop", "frequency_penalty", "presence_penalty", "logit_bias", "top_logprobs":
			pass = append(pass, m)
		case "previous_response_id", "conversation":
			if !jsonspan.IsNull(body, v) {
				err = bridgeError("unsupported_parameter", key, "%s is not supported: the gateway keeps no state between requests; send the whole conversation in input", key)
				return false
			}
		case "background":
			if string(body[v.Start:v.End]) == "true" {
				err = bridgeError("unsupported_parameter", key, "background responses are not supported: the gateway keeps no state between requests")
				return false
			}
		}
		// store, include, prompt_cache_key, client_metadata, service_tier,
		// metadata, truncation, max_tool_calls and the rest are
		// Responses-only and go.
		return true
	})
	if err != nil {
		return nil, err
	}

	out := make([]byte, 0, len(body)+len(body)/8+256)
	out = append(out, '{')
	if fields.model.Start >= 0 {
		out = append(out, `"model":`...)
		out = append(out, body[fields.model.Start:fields.model.End]...)
		out = append(out, ',')
	}
	out = append(out, `"messages":`...)
	if out, err = b.messages(out, fields.instructions); err != nil {
		return nil, err
	}
	toolsAt := len(out)
	if b.tools.Start >= 0 || len(b.extraTools) > 0 {
		if out, err = b.writeTools(out); err != nil {
			return nil, err
		}
	}
	if b.choice.Start >= 0 && len(out) == toolsAt {
		// Chat refuses a tool_choice without tools.
		x.Decide("tool_choice", "drop", "no tools are sent")
	} else if b.choice.Start >= 0 {
		if out, err = b.writeChoice(out); err != nil {
			return nil, err
		}
	}
	for _, m := range pass {
		out = append(out, ',')
		out = append(out, body[m.Key.Start:m.Key.End]...)
		out = append(out, ':')
		out = append(out, body[m.Value.Start:m.Value.End]...)
	}
	if fields.stream.Start >= 0 && string(body[fields.stream.Start:fields.stream.End]) == "true" {
		// Usage comes in a last chunk only when asked for; Codex needs it.
		out = append(out, `,"stream_options":{"include_usage":true}`...)
	}
	k := t.knobs
	switch {
	case fields.maxOut.Start >= 0 && !jsonspan.IsNull(body, fields.maxOut):
		out = append(out, `,"`+k.MaxTokensField+`":`...)
		out = append(out, body[fields.maxOut.Start:fields.maxOut.End]...)
	case k.MaxTokens > 0:
		out = append(out, `,"`+k.MaxTokensField+`":`+strconv.Itoa(k.MaxTokens)...)
	}
	stream := fields.stream.Start >= 0 && string(body[fields.stream.Start:fields.stream.End]) == "true"
	effort, _ := jsonspan.StringValue(body, fields.effort)
	switch {
	case k.StreamThinking && !stream:
		out = append(out, `,"enable_thinking":false`...) // refused without a stream
	case k.Effort != nil:
		out = k.Effort(out, effort)
	}
	if fields.format.Start >= 0 && body[fields.format.Start] == '{' {
		out = appendResponseFormat(out, body, fields.format)
	}
	if fields.verbosity.Start >= 0 && k.Verbosity && !jsonspan.IsNull(body, fields.verbosity) {
		out = append(out, `,"verbosity":`...)
		out = append(out, body[fields.verbosity.Start:fields.verbosity.End]...)
	}
	out = append(out, '}')

	rec := t.record(x)
	rec.bridged = true
	rec.id = newID()
	rec.echo = appendEcho(nil, body, echo[:])
	// The client's own model, as it asked, even when a rule before this
	// one routed the request to another.
	switch m := jsonspan.LastMember(x.ClientBody(), "model"); {
	case x.Model != "":
		rec.model = jsonspan.AppendStringStr(nil, x.Model)
	case m.Start >= 0:
		rec.model = append([]byte(nil), x.ClientBody()[m.Start:m.End]...)
	case fields.model.Start >= 0:
		rec.model = append([]byte(nil), body[fields.model.Start:fields.model.End]...)
	}
	x.ReplacePathSuffix("/responses", "/chat/completions")
	return out, nil
}

// appendResponseFormat maps text.format: json_schema and json_object
// become response_format; text is Chat's default.
func appendResponseFormat(out, doc []byte, f jsonspan.Span) []byte {
	typ, _ := jsonspan.StringValue(doc, jsonspan.Lookup(doc, f.Start, "type"))
	switch typ {
	case "json_object":
		return append(out, `,"response_format":{"type":"json_object"}`...)
	case "json_schema":
		out = append(out, `,"response_format":{"type":"json_schema","json_schema":`...)
		w := jsonspan.NewObj(out)
		jsonspan.EachMember(doc, f.Start, func(m jsonspan.Member) bool {
			if !m.KeyIs(doc, "type") {
				w.Raw(doc, m)
			}
			return true
		})
		return append(w.Close(), '}')
	}
	return out
}

// chatBuild is one request's conversion.
type chatBuild struct {
	// reasonLeft is how many bytes of reasoning the request's envelopes
	// may still open to: a deflated envelope of kilobytes can hold
	// megabytes, and a request may carry any number of them.
	reasonLeft int

	t                    *ResponsesToChat
	x                    *transforms.Exchange
	doc                  []byte
	input, tools, choice jsonspan.Span
	extraTools           []jsonspan.Span // function tools from additional_tools items

	// The assistant message being gathered: text, reasoning and calls
	// that Chat wants in one message.
	asText      strings.Builder
	asReasoning strings.Builder
	hasReason   bool
	asCalls     []byte
	asIDs       []string // the calls' ids, whose tool messages follow
	asOpen      bool
	refs        itemRefs
	// runOf numbers the run of calls each call id was gathered in, so an
	// output finds out in one lookup whether it answers the run being
	// gathered; asRun is that run's number, from 1.
	runOf map[string]int
	asRun int
}

// itemRefs is what the first pass over the input learns of calls.
type itemRefs struct {
	calls   map[string]bool
	outputs map[string]jsonspan.Span // each call's output item, the first
}

// messages writes the messages array: one leading system message from the
// instructions and leading system/developer messages, then the
// conversation.
func (b *chatBuild) messages(out []byte, instructions jsonspan.Span) ([]byte, error) {
	doc := b.doc
	var system []string
	if s, ok := jsonspan.StringValue(doc, instructions); ok && s != "" {
		system = append(system, s)
	}
	out = append(out, '[')
	var conv []byte
	var err error
	switch {
	case b.input.Start < 0:
	case doc[b.input.Start] == '"':
		conv = append(conv, `{"role":"user","content":`...)
		conv = append(conv, doc[b.input.Start:b.input.End]...)
		conv = append(conv, '}')
	case doc[b.input.Start] == '[':
		b.refs = b.scanRefs()
		b.runOf, b.asRun = map[string]int{}, 1
		conv, system, err = b.items(conv, system, b.refs)
		if err != nil {
			return nil, err
		}
	}
	if len(system) > 0 {
		out = append(out, `{"role":"system","content":`...)
		out = jsonspan.AppendStringStr(out, strings.Join(system, "\n\n"))
		out = append(out, '}')
		if len(conv) > 0 {
			out = append(out, ',')
		}
	}
	out = append(out, conv...)
	return append(out, ']'), nil
}

// scanRefs collects the call ids of calls and of outputs, so calls without
// an output and outputs without a call can be left out: Chat refuses both.
func (b *chatBuild) scanRefs() itemRefs {
	doc := b.doc
	r := itemRefs{calls: map[string]bool{}, outputs: map[string]jsonspan.Span{}}
	var f [2]jsonspan.Span
	jsonspan.EachObject(doc, b.input.Start, []string{"type", "call_id"}, f[:], func(el jsonspan.Span, f []jsonspan.Span) bool {
		id, _ := jsonspan.StringValue(doc, f[1])
		switch {
		case jsonspan.IsString(doc, f[0], "function_call"):
			r.calls[id] = true
		case jsonspan.IsString(doc, f[0], "function_call_output"):
			if _, seen := r.outputs[id]; !seen {
				r.outputs[id] = el
			}
		}
		return true
	})
	return r
}

// items converts the input items.
func (b *chatBuild) items(conv []byte, system []string, refs itemRefs) ([]byte, []string, error) {
	doc := b.doc
	leading := true
	var err error
	i := -1
	var f [8]jsonspan.Span
	names := []string{"type", "role", "content", "call_id", "name", "arguments", "namespace", "output"}
	jsonspan.EachObject(doc, b.input.Start, names, f[:], func(el jsonspan.Span, f []jsonspan.Span) bool {
		i++
		where := "input[" + strconv.Itoa(i) + "]"
		typ, _ := jsonspan.StringValue(doc, f[0])
		if typ == "" && f[1].Start >= 0 {
			typ = "message" // an EasyInputMessage has no type
		}
		switch typ {
		case "message":
			role, _ := jsonspan.StringValue(doc, f[1])
			text, parts := b.content(doc, f[2])
			switch {
			case role == "system" || role == "developer":
				if leading || role == "system" || b.t.Developer == "system" {
					// One system message, never a second one later.
					system = append(system, text)
					return true
				}
				conv = b.flush(conv)
				conv = b.userText(conv, text)
			case role == "assistant":
				leading = false
				if len(b.asCalls) > 0 {
					conv = b.flush(conv)
				}
				b.asOpen = true
				if b.asText.Len() > 0 && text != "" {
					b.asText.WriteString("\n\n")
				}
				b.asText.WriteString(text)
			default: // user
				leading = false
				conv = b.flush(conv)
				conv = b.sep(conv)
				conv = append(conv, `{"role":"user","content":`...)
				if parts != nil {
					conv = append(conv, parts...)
				} else {
					conv = jsonspan.AppendStringStr(conv, text)
				}
				conv = append(conv, '}')
			}
		case "reasoning":
			leading = false
			if text, ok := b.reasoningText(el); ok {
				// Reasoning between calls of one turn stays with them;
				// after text alone it starts the next message.
				if b.asOpen && b.asText.Len() > 0 && len(b.asCalls) == 0 {
					conv = b.flush(conv)
				}
				if b.hasReason {
					b.asReasoning.WriteByte('\n')
				}
				b.asReasoning.WriteString(text)
				b.hasReason, b.asOpen = true, true
			}
		case "function_call":
			leading = false
			id, _ := jsonspan.StringValue(doc, f[3])
			if _, answered := refs.outputs[id]; !answered {
				b.x.Decide(where, "drop", "a function_call without its output: Chat refuses tool calls nobody answered")
				return true
			}
			if _, seen := b.runOf[id]; seen {
				// Its one output answers the first: a copy would be
				// answered again, every copy with the whole output.
				b.x.Decide(where, "drop", "a second function_call with the same call_id")
				return true
			}
			b.runOf[id] = b.asRun
			b.asIDs = append(b.asIDs, id)
			name, _ := jsonspan.StringValue(doc, f[4])
			if ns, _ := jsonspan.StringValue(doc, f[6]); ns != "" {
				name = ns + "__" + name
			}
			if len(b.asCalls) > 0 {
				b.asCalls = append(b.asCalls, ',')
			}
			b.asCalls = append(b.asCalls, `{"id":`...)
			b.asCalls = jsonspan.AppendStringStr(b.asCalls, id)
			b.asCalls = append(b.asCalls, `,"type":"function","function":{"name":`...)
			b.asCalls = jsonspan.AppendStringStr(b.asCalls, name)
			b.asCalls = append(b.asCalls, `,"arguments":`...)
			if a := f[5]; a.Start >= 0 && doc[a.Start] == '"' && a.End-a.Start > 2 {
				b.asCalls = append(b.asCalls, doc[a.Start:a.End]...)
			} else {
				b.asCalls = append(b.asCalls, `"{}"`...)
			}
			b.asCalls = append(b.asCalls, "}}"...)
			b.asOpen = true
		case "function_call_output":
			// Written right after the assistant message with its call,
			// wherever the client put it: Chat wants each tool message to
			// answer the message just before it.
			id, _ := jsonspan.StringValue(doc, f[3])
			switch {
			case !refs.calls[id]:
				b.x.Decide(where, "drop", "a function_call_output without its call")
			case refs.outputs[id] != el:
				b.x.Decide(where, "drop", "a second output for the same call")
			case b.runOf[id] == b.asRun:
				// The first answer ends the run of calls it belongs to.
				conv = b.flush(conv)
			}
		case "additional_tools":
			tools := jsonspan.Lookup(doc, el.Start, "tools")
			if tools.Start >= 0 && doc[tools.Start] == '[' {
				jsonspan.EachElement(doc, tools.Start, func(t jsonspan.Span) bool {
					b.extraTools = append(b.extraTools, t)
					return true
				})
			}
		case "agent_message":
			leading = false
			text, _ := b.content(doc, f[2])
			conv = b.flush(conv)
			conv = b.userText(conv, "[agent message] "+text)
		case "item_reference":
			// The client believes the server stored its earlier items
			// (store defaults to true); a gateway that keeps nothing
			// between requests cannot look them up.
			err = bridgeError("item_reference_unsupported", where, "%s is an item_reference: responses_to_chat keeps no state between requests, so the items it names cannot be looked up; send the items themselves by setting store to false (the Vercel AI SDK: providerOptions.openai.store = false)", where)
			return false
		case "web_search_call", "compaction":
			b.x.Decide(where, "drop", "a "+typ+" item has no Chat form")
		case "custom_tool_call", "custom_tool_call_output", "local_shell_call", "local_shell_call_output", "shell_call", "shell_call_output",
			"apply_patch_call", "apply_patch_call_output", "computer_call", "computer_call_output", "tool_search_call", "tool_search_output", "mcp_call":
			err = bridgeError("unsupported_input_item", where, "%s is a %s item: only function calls reach a Chat upstream; put tools_plan before responses_to_chat to turn it into a function call", where, typ)
			return false
		default:
			err = bridgeError("unsupported_input_item", where, "%s has the item type %q, which responses_to_chat cannot send to a Chat upstream", where, typ)
			return false
		}
		return true
	})
	if err != nil {
		return nil, nil, err
	}
	return b.flush(conv), system, nil
}

func (b *chatBuild) sep(conv []byte) []byte {
	if len(conv) > 0 {
		conv = append(conv, ',')
	}
	return conv
}

func (b *chatBuild) userText(conv []byte, text string) []byte {
	conv = b.sep(conv)
	conv = append(conv, `{"role":"user","content":`...)
	conv = jsonspan.AppendStringStr(conv, text)
	return append(conv, '}')
}

// flush writes the assistant message gathered so far, with reasoning per
// the profile.
func (b *chatBuild) flush(conv []byte) []byte {
	if !b.asOpen {
		return conv
	}
	calls := len(b.asCalls) > 0
	if b.asText.Len() == 0 && !calls {
		// Reasoning alone, with nothing it led to: nothing to attach it to.
		b.reset()
		return conv
	}
	conv = b.sep(conv)
	conv = append(conv, `{"role":"assistant","content":`...)
	conv = jsonspan.AppendStringStr(conv, b.asText.String())
	switch b.t.knobs.Reasoning {
	case "replay":
		if b.hasReason || calls {
			conv = append(conv, `,"reasoning_content":`...)
			conv = jsonspan.AppendStringStr(conv, b.asReasoning.String())
		}
	case "tool_calls":
		if calls {
			conv = append(conv, `,"reasoning_content":`...)
			conv = jsonspan.AppendStringStr(conv, b.asReasoning.String())
		}
	}
	if calls {
		conv = append(conv, `,"tool_calls":[`...)
		conv = append(conv, b.asCalls...)
		conv = append(conv, ']')
	}
	conv = append(conv, '}')
	var images []byte
	for _, id := range b.asIDs {
		conv, images = b.toolMessage(conv, images, id)
	}
	if images != nil {
		// A tool message holds text only: the images follow, as the
		// user's, after the last tool message of the turn.
		conv = append(conv, `,{"role":"user","content":[{"type":"text","text":"The images the tool calls returned:"},`...)
		conv = append(conv, images...)
		conv = append(conv, "]}"...)
	}
	b.reset()
	return conv
}

// toolMessage writes the tool message answering call id, from its output
// item, and adds the images it returned to images.
func (b *chatBuild) toolMessage(conv, images []byte, id string) ([]byte, []byte) {
	doc := b.doc
	el := b.refs.outputs[id]
	out := jsonspan.Lookup(doc, el.Start, "output")
	conv = b.sep(conv)
	conv = append(conv, `{"role":"tool","tool_call_id":`...)
	conv = jsonspan.AppendStringStr(conv, id)
	conv = append(conv, `,"content":`...)
	switch {
	case out.Start >= 0 && doc[out.Start] == '"':
		conv = append(conv, doc[out.Start:out.End]...)
	default:
		text, _, imgs := b.contentImages(doc, out)
		conv = jsonspan.AppendStringStr(conv, text)
		if imgs != nil {
			if images != nil {
				images = append(images, ',')
			}
			images = append(images, imgs...)
		}
	}
	return append(conv, '}'), images
}

func (b *chatBuild) reset() {
	b.asText.Reset()
	b.asReasoning.Reset()
	b.hasReason, b.asOpen = false, false
	b.asCalls = b.asCalls[:0]
	b.asIDs = b.asIDs[:0]
	b.asRun++
}

// reasoningText returns the text of a reasoning item this bridge made for
// the same provider. Reasoning from another provider, or OpenAI's sealed
// reasoning, never goes upstream.
func (b *chatBuild) reasoningText(el jsonspan.Span) (string, bool) {
	doc := b.doc
	var f [3]jsonspan.Span
	jsonspan.ObjectFields(doc, el.Start, []string{"encrypted_content", "content", "summary"}, f[:])
	switch env, _ := jsonspan.StringValue(doc, f[0]); {
	case strings.HasPrefix(env, envelopePrefix):
		// The text travels in the envelope, whatever else of the item
		// the client kept.
		p, text, ok := openEnvelope(env, 6*min(b.t.maxReasoning, b.reasonLeft)+64)
		switch {
		case !ok && b.reasonLeft < b.t.maxReasoning:
			b.x.Decide("reasoning", "drop", "past what the request's envelopes may hold")
			return "", false
		case !ok || p != b.t.Profile:
			b.x.Decide("reasoning", "drop", "reasoning that did not come from this provider through the gateway")
			return "", false
		case len(text) > b.reasonLeft:
			b.x.Decide("reasoning", "drop", "past what the request's envelopes may hold")
			return "", false
		}
		b.reasonLeft -= len(text)
		return text, true
	case env == b.t.envelope:
		// An envelope of an earlier version: the text is in the item.
	case env == b.t.envelopeCut:
		b.x.Decide("reasoning", "drop", "reasoning the gateway cut at max_reasoning: sent on, its part would pass for the whole")
		return "", false
	default:
		b.x.Decide("reasoning", "drop", "reasoning that did not come from this provider through the gateway")
		return "", false
	}
	var parts []string
	for _, list := range []jsonspan.Span{f[1], f[2]} {
		if list.Start < 0 || doc[list.Start] != '[' {
			continue
		}
		jsonspan.EachElement(doc, list.Start, func(p jsonspan.Span) bool {
			if s, ok := jsonspan.StringValue(doc, jsonspan.Lookup(doc, p.Start, "text")); ok {
				parts = append(parts, s)
			}
			return true
		})
		if len(parts) > 0 {
			break // the content, else the summary
		}
	}
	return strings.Join(parts, ""), true
}

// content reads a message's content: its text, and, when it holds images,
// the Chat parts array.
func (b *chatBuild) content(doc []byte, c jsonspan.Span) (string, []byte) {
	text, parts, _ := b.contentImages(doc, c)
	return text, parts
}

// contentImages is content, and the image parts alone.
func (b *chatBuild) contentImages(doc []byte, c jsonspan.Span) (string, []byte, []byte) {
	if c.Start < 0 {
		return "", nil, nil
	}
	if doc[c.Start] == '"' {
		s, _ := jsonspan.StringValue(doc, c)
		return s, nil, nil
	}
	if doc[c.Start] != '[' {
		return "", nil, nil
	}
	var text strings.Builder
	var parts, imgs []byte
	images := false
	jsonspan.EachElement(doc, c.Start, func(p jsonspan.Span) bool {
		var g [5]jsonspan.Span
		jsonspan.ObjectFields(doc, p.Start, []string{"type", "text", "image_url", "detail", "refusal"}, g[:])
		typ, _ := jsonspan.StringValue(doc, g[0])
		if typ == "refusal" {
			g[1] = g[4]
		}
		if len(parts) > 0 {
			parts = append(parts, ',')
		}
		switch typ {
		case "input_image":
			images = true
			at := len(parts)
			parts = append(parts, `{"type":"image_url","image_url":{"url":`...)
			parts = jsonspan.AppendRawOr(parts, doc, g[2], `""`)
			if g[3].Start >= 0 {
				parts = append(parts, `,"detail":`...)
				parts = append(parts, doc[g[3].Start:g[3].End]...)
			}
			parts = append(parts, "}}"...)
			if len(imgs) > 0 {
				imgs = append(imgs, ',')
			}
			imgs = append(imgs, parts[at:]...)
		case "input_file", "file":
			b.x.Decide("content", "drop", "a file part: Chat upstreams take text and images only")
			if len(parts) > 0 && parts[len(parts)-1] == ',' {
				parts = parts[:len(parts)-1]
			}
			return true
		default: // input_text, output_text, refusal, text
			s, _ := jsonspan.StringValue(doc, g[1])
			if text.Len() > 0 {
				// Parts are separate blocks to the model: strict
				// providers take one string, so they are joined apart.
				text.WriteString("\n\n")
			}
			text.WriteString(s)
			parts = append(parts, `{"type":"text","text":`...)
			parts = jsonspan.AppendStringStr(parts, s)
			parts = append(parts, '}')
		}
		return true
	})
	if !images {
		return text.String(), nil, nil
	}
	return text.String(), append(append([]byte{'['}, parts...), ']'), imgs
}

// writeTools writes the function tools in Chat's nested shape.
func (b *chatBuild) writeTools(out []byte) ([]byte, error) {
	doc := b.doc
	var list []jsonspan.Span
	where := map[int]string{}
	if b.tools.Start >= 0 && doc[b.tools.Start] == '[' {
		i := -1
		jsonspan.EachElement(doc, b.tools.Start, func(t jsonspan.Span) bool {
			i++
			where[len(list)] = "tools[" + strconv.Itoa(i) + "]"
			list = append(list, t)
			return true
		})
	}
	for _, t := range b.extraTools {
		where[len(list)] = "input.additional_tools"
		list = append(list, t)
	}
	if len(list) == 0 {
		return out, nil
	}
	out = append(out, `,"tools":[`...)
	for i, t := range list {
		if doc[t.Start] != '{' {
			continue
		}
		typ, _ := jsonspan.StringValue(doc, jsonspan.Lookup(doc, t.Start, "type"))
		if typ != "function" {
			return nil, bridgeError("unsupported_tool", where[i], "%s is a %q tool: only function tools reach a Chat upstream; put tools_plan before responses_to_chat to degrade or drop it", where[i], typ)
		}
		if out[len(out)-1] != '[' {
			out = append(out, ',')
		}
		out = append(out, `{"type":"function","function":`...)
		w := jsonspan.NewObj(out)
		params := false
		jsonspan.EachMember(doc, t.Start, func(m jsonspan.Member) bool {
			switch {
			case m.KeyIs(doc, "type"), m.KeyIs(doc, "defer_loading"), m.KeyIs(doc, "allowed_callers"), m.KeyIs(doc, "output_schema"):
			case m.KeyIs(doc, "parameters"):
				params = true
				w.Raw(doc, m)
			default:
				w.Raw(doc, m)
			}
			return true
		})
		if !params {
			w.Key("parameters")
			w.B = append(w.B, `{"type":"object","properties":{}}`...)
		}
		out = append(w.Close(), '}')
	}
	return append(out, ']'), nil
}

// writeChoice writes tool_choice in Chat's nested shape.
func (b *chatBuild) writeChoice(out []byte) ([]byte, error) {
	doc := b.doc
	c := b.choice
	if doc[c.Start] == '"' {
		out = append(out, `,"tool_choice":`...)
		return append(out, doc[c.Start:c.End]...), nil
	}
	if doc[c.Start] != '{' {
		return out, nil
	}
	named := func(dst []byte, sel jsonspan.Span) ([]byte, error) {
		var f [3]jsonspan.Span
		jsonspan.ObjectFields(doc, sel.Start, []string{"type", "name", "namespace"}, f[:])
		typ, _ := jsonspan.StringValue(doc, f[0])
		name, _ := jsonspan.StringValue(doc, f[1])
		if typ != "function" || name == "" {
			return nil, bridgeError("unsupported_tool_choice", "tool_choice", "tool_choice names a %q tool: only function tools reach a Chat upstream", typ)
		}
		if ns, _ := jsonspan.StringValue(doc, f[2]); ns != "" {
			name = ns + "__" + name
		}
		dst = append(dst, `{"type":"function","function":{"name":`...)
		dst = jsonspan.AppendStringStr(dst, name)
		return append(dst, "}}"...), nil
	}
	typ, _ := jsonspan.StringValue(doc, jsonspan.Lookup(doc, c.Start, "type"))
	out = append(out, `,"tool_choice":`...)
	if typ != "allowed_tools" {
		return named(out, c)
	}
	mode := "auto"
	if m, ok := jsonspan.StringValue(doc, jsonspan.Lookup(doc, c.Start, "mode")); ok {
		mode = m
	}
	out = append(out, `{"type":"allowed_tools","allowed_tools":{"mode":`...)
	out = jsonspan.AppendStringStr(out, mode)
	out = append(out, `,"tools":[`...)
	var err error
	first := true
	if tools := jsonspan.Lookup(doc, c.Start, "tools"); tools.Start >= 0 && doc[tools.Start] == '[' {
		jsonspan.EachElement(doc, tools.Start, func(sel jsonspan.Span) bool {
			if !first {
				out = append(out, ',')
			}
			first = false
			out, err = named(out, sel)
			return err == nil
		})
	}
	if err != nil {
		return nil, err
	}
	return append(out, "]}}"...), nil
}

// echoField is a member of the request that every Response object the
// bridge writes echoes: the client's value, or, for the members openai-go's
// responses.Response requires, the value OpenAI reports when none was sent
// ("" for an optional member written only when sent).
type echoField struct{ name, absent string }

var echoFields = [...]echoField{
	{"instructions", "null"},
	{"metadata", "{}"},
	{"parallel_tool_calls", "true"},
	{"temperature", "1"},
	{"tool_choice", `"auto"`},
	{"tools", "[]"},
	{"top_p", "1"},
	{"max_output_tokens", ""},
	{"max_tool_calls", ""},
	{"reasoning", ""},
	{"text", ""},
	{"truncation", ""},
	{"store", ""},
	{"user", ""},
	{"safety_identifier", ""},
	{"prompt_cache_key", ""},
	{"service_tier", ""},
	{"top_logprobs", ""},
}

// appendEcho writes the echoed members, each after a comma, once per
// request: every Response object of the exchange ends with them.
func appendEcho(dst, body []byte, spans []jsonspan.Span) []byte {
	for i, f := range echoFields {
		v := spans[i]
		if v.Start < 0 && f.absent == "" {
			continue
		}
		dst = append(dst, `,"`+f.name+`":`...)
		if v.Start < 0 {
			dst = append(dst, f.absent...)
		} else {
			dst = append(dst, body[v.Start:v.End]...)
		}
	}
	// A member openai-go requires of every Response: the access program
	// OpenAI reports for ordinary requests.
	return append(dst, `,"access_programs":{"cyber":"standard"}`...)
}
