package transforms

import "github.com/llmtransform/caddy-llm-transform/internal/jsonspan"

// ChatChunk is what a rule reads of a Chat stream chunk about its first
// choice (index 0), in one walk: the spans of the delta's content,
// reasoning_content and tool_calls, the choice's finish_reason (when not
// null), and the chunk's usage (when not null). A span not there is
// NoSpan.
type ChatChunk struct {
	Content, Reasoning, Calls, Finish, Usage, Choices jsonspan.Span
	// First says choice 0 is in the chunk; Others that another choice is.
	First, Others bool
}

// ReadChatChunk reads a Chat chunk's first choice in one walk.
func ReadChatChunk(d []byte) ChatChunk {
	c := ChatChunk{Content: jsonspan.NoSpan(), Reasoning: jsonspan.NoSpan(), Calls: jsonspan.NoSpan(),
		Finish: jsonspan.NoSpan(), Usage: jsonspan.NoSpan(), Choices: jsonspan.NoSpan()}
	delta := func(k jsonspan.Span, v int) int {
		e := jsonspan.SkipValue(d, v)
		switch jsonspan.KeyName(d, k) {
		case "content":
			c.Content = jsonspan.Span{Start: v, End: e}
		case "reasoning_content":
			c.Reasoning = jsonspan.Span{Start: v, End: e}
		case "tool_calls":
			c.Calls = jsonspan.Span{Start: v, End: e}
		}
		return e
	}
	jsonspan.WalkMembers(d, 0, func(k jsonspan.Span, v int) int {
		e := jsonspan.SkipValue(d, v)
		switch jsonspan.KeyName(d, k) {
		case "choices":
			c.Choices = jsonspan.Span{Start: v, End: e}
			jsonspan.EachElement(d, v, func(el jsonspan.Span) bool {
				idx := jsonspan.Lookup(d, el.Start, "index")
				if idx.Start >= 0 && string(d[idx.Start:idx.End]) != "0" {
					c.Others = true
					return true
				}
				c.First = true
				jsonspan.WalkMembers(d, el.Start, func(k2 jsonspan.Span, v2 int) int {
					switch jsonspan.KeyName(d, k2) {
					case "delta":
						if d[v2] == '{' {
							return jsonspan.WalkMembers(d, v2, delta)
						}
					case "finish_reason":
						e2 := jsonspan.SkipValue(d, v2)
						if !jsonspan.IsNull(d, jsonspan.Span{Start: v2, End: e2}) {
							c.Finish = jsonspan.Span{Start: v2, End: e2}
						}
						return e2
					}
					return jsonspan.SkipValue(d, v2)
				})
				return true
			})
		case "usage":
			if !jsonspan.IsNull(d, jsonspan.Span{Start: v, End: e}) {
				c.Usage = jsonspan.Span{Start: v, End: e}
			}
		}
		return e
	})
	return c
}
