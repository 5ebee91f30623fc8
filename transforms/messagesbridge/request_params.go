package messagesbridge

import (
	"cmp"
	"strconv"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// readParams reads the members beside the conversation and the tools:
// stream, thinking and effort, the output cap, stop sequences, the user
// and the output format.
func (b *msgBuild) readParams(f *topFields) error {
	doc := b.doc
	b.model, _ = jsonspan.StringValue(doc, f.model)
	b.stream = f.stream.Start >= 0 && string(doc[f.stream.Start:f.stream.End]) == "true"

	effort := jsonspan.NoSpan()
	if v := f.output; v.Start >= 0 && !jsonspan.IsNull(doc, v) {
		if doc[v.Start] != '{' {
			return badRequest("output_config", "output_config must be an object")
		}
		b.x.Decide("output_config", "drop", "read for the effort and the format, which Chat takes in members of its own")
		var g [2]jsonspan.Span
		jsonspan.ObjectFields(doc, v.Start, []string{"effort", "format"}, g[:])
		effort = g[0]
		if err := b.readFormat(g[1]); err != nil {
			return err
		}
	}
	if err := b.readThinking(f.thinking, effort); err != nil {
		return err
	}

	k := b.t.knobs
	switch v := f.maxTokens; {
	case v.Start < 0 || jsonspan.IsNull(doc, v):
		b.maxTokens = k.MaxTokens
	default:
		n, err := strconv.ParseInt(string(doc[v.Start:v.End]), 10, 64)
		if err != nil || n < 1 {
			return badRequest("max_tokens", "max_tokens must be a positive integer")
		}
		b.maxTokens = int(min(n, 1<<31-1))
	}
	if c := k.OutputCap(b.model); c > 0 && b.maxTokens > c {
		// The upstream refuses a larger value outright.
		b.x.Decide("max_tokens", "clamp", "the model's output cap is "+strconv.Itoa(c))
		b.maxTokens = c
	}

	if v := f.stop; v.Start >= 0 && !jsonspan.IsNull(doc, v) {
		ok := doc[v.Start] == '['
		if ok {
			jsonspan.EachElement(doc, v.Start, func(e jsonspan.Span) bool {
				s, isStr := jsonspan.StringValue(doc, e)
				ok = isStr
				b.stop = append(b.stop, s)
				return ok
			})
		}
		if !ok {
			return badRequest("stop_sequences", "stop_sequences must be an array of strings")
		}
	}

	if v := f.metadata; v.Start >= 0 && doc[v.Start] == '{' {
		jsonspan.EachMember(doc, v.Start, func(m jsonspan.Member) bool {
			id, isStr := jsonspan.StringValue(doc, m.Value)
			switch {
			case !m.KeyIs(doc, "user_id"):
				b.x.Decide("metadata", "drop", "a metadata member other than user_id has no Chat form")
			case isStr && id != "" && len(id) <= maxUser:
				b.userMember = append(b.userMember, `,"user":`...)
				b.userMember = append(b.userMember, doc[m.Value.Start:m.Value.End]...)
			case isStr && id != "":
				// Claude Code's is a JSON document holding a device id:
				// too long for OpenAI's end-user ids, and no business of
				// a third-party upstream.
				b.x.Decide("metadata.user_id", "drop", "longer than "+strconv.Itoa(maxUser)+" characters")
			}
			return true
		})
	}
	return nil
}

// maxUser is the longest metadata.user_id sent on as Chat's user: OpenAI's
// end-user identifiers are at most 64 characters.
const maxUser = 64

// readThinking maps thinking (and output_config.effort) to the effort the
// profile's knob takes: the Responses efforts none, low, medium, high and
// xhigh, which every knob reads (DeepSeek's max is xhigh there).
func (b *msgBuild) readThinking(th, effort jsonspan.Span) error {
	doc := b.doc
	eff := ""
	if effort.Start >= 0 && !jsonspan.IsNull(doc, effort) {
		s, _ := jsonspan.StringValue(doc, effort)
		switch s {
		case "low", "medium", "high", "xhigh":
			eff = s
		case "max":
			eff = "xhigh"
		default:
			return badRequest("output_config.effort", "output_config.effort must be low, medium, high, xhigh or max")
		}
	}
	if th.Start < 0 || jsonspan.IsNull(doc, th) {
		// No thinking asked: the provider's default, as responses_to_chat
		// leaves it. An effort alone says how much to spend, not whether
		// to think.
		return nil
	}
	if doc[th.Start] != '{' {
		return badRequest("thinking", "thinking must be an object")
	}
	var g [2]jsonspan.Span
	jsonspan.ObjectFields(doc, th.Start, []string{"type", "budget_tokens"}, g[:])
	typ, _ := jsonspan.StringValue(doc, g[0])
	switch typ {
	case "disabled":
		b.effort = "none"
	case "adaptive":
		b.thinking = true
		// Anthropic's default effort is high.
		b.effort = cmp.Or(eff, "high")
	case "enabled":
		b.thinking = true
		if eff != "" {
			b.effort = eff
			break
		}
		budget := int64(0)
		if v := g[1]; v.Start >= 0 {
			n, err := strconv.ParseInt(string(doc[v.Start:v.End]), 10, 64)
			if err != nil || n < 0 {
				return badRequest("thinking.budget_tokens", "thinking.budget_tokens must be a non-negative integer")
			}
			budget = n
		}
		b.effort = effortOfBudget(budget)
	default:
		return badRequest("thinking.type", "thinking.type must be enabled, adaptive or disabled")
	}
	// display (summarized, omitted) only says how the client shows
	// thinking: the response side's business.
	return nil
}

// effortOfBudget buckets a thinking budget into an effort: Claude Code's
// default budget (31999, MAX_THINKING_TOKENS) is high, the smallest
// budgets Anthropic takes (1024 up) low, and past 32K the most there is.
func effortOfBudget(budget int64) string {
	switch {
	case budget < 4096:
		return "low"
	case budget < 16384:
		return "medium"
	case budget <= 32768:
		return "high"
	}
	return "xhigh"
}

// readFormat maps output_config.format: json_schema becomes Chat's
// response_format (strict: Anthropic's structured output is enforced);
// for an upstream without json_schema, json_object and the schema told in
// the system message.
func (b *msgBuild) readFormat(v jsonspan.Span) error {
	doc := b.doc
	if v.Start < 0 || jsonspan.IsNull(doc, v) {
		return nil
	}
	if doc[v.Start] != '{' {
		return badRequest("output_config.format", "output_config.format must be an object")
	}
	var g [2]jsonspan.Span
	jsonspan.ObjectFields(doc, v.Start, []string{"type", "schema"}, g[:])
	typ, _ := jsonspan.StringValue(doc, g[0])
	if typ != "json_schema" || g[1].Start < 0 || doc[g[1].Start] != '{' {
		return badRequest("output_config.format", "output_config.format must be {\"type\":\"json_schema\",\"schema\":{…}}")
	}
	schema := doc[g[1].Start:g[1].End]
	if b.t.knobs.NoJSONSchema {
		b.x.Decide("output_config.format", "degrade", "the upstream takes json_object, not json_schema: the schema is told in the system message")
		b.format = append(b.format, `,"response_format":{"type":"json_object"}`...)
		b.schemaNote = appendEscaped(append(b.schemaNote, `Answer with a JSON object that matches this JSON schema: `...), appendCompact(nil, schema))
		return nil
	}
	b.format = append(b.format, `,"response_format":{"type":"json_schema","json_schema":{"name":"response","strict":true,"schema":`...)
	b.format = append(b.format, schema...)
	b.format = append(b.format, "}}"...)
	return nil
}

// appendCompact appends the valid JSON value v without the white space
// between its tokens: how a tool call's arguments are written.
func appendCompact(dst, v []byte) []byte {
	for i := 0; i < len(v); {
		switch c := v[i]; c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			e := jsonspan.StringEnd(v, i)
			dst = append(dst, v[i:e]...)
			i = e
		default:
			// Copy the run up to the next string or white space at once.
			j := i + 1
			for j < len(v) && v[j] != '"' && v[j] != ' ' && v[j] != '\t' && v[j] != '\n' && v[j] != '\r' {
				j++
			}
			dst = append(dst, v[i:j]...)
			i = j
		}
	}
	return dst
}

// appendEscaped appends s as the inside of a JSON string literal.
func appendEscaped(dst, s []byte) []byte {
	n := len(dst)
	dst = jsonspan.AppendString(dst, s)
	copy(dst[n:], dst[n+1:len(dst)-1])
	return dst[:len(dst)-2]
}
