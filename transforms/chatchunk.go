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
	c, _, _ := readChatChunk(d, nil)
	return c
}

// ChatChunkReader reads the chunks of one stream as ReadChatChunk does,
// but walks the members before "choices" only when they differ from the
// last chunk's: providers repeat them (id, object, created, model,
// fingerprint) byte for byte in every chunk. The zero value is ready.
type ChatChunkReader struct {
	head  []byte        // the members before "choices" of the last chunk walked whole
	usage jsonspan.Span // the usage among them, or NoSpan
}

// Read reads a Chat chunk's first choice.
func (r *ChatChunkReader) Read(d []byte) ChatChunk {
	if h := len(r.head); h > 0 && len(d) > h && string(d[:h]) == string(r.head) {
		c, _, _ := readChatChunk(d, r)
		return c
	}
	c, choices, usage := readChatChunk(d, nil)
	if choices > 0 {
		r.head, r.usage = append(r.head[:0], d[:choices]...), usage
	}
	return c
}

// readChatChunk reads d in one walk, from its start, or, with from, from
// after the head from holds (d starts with it). It also returns where the
// "choices" key starts (-1 when not found) and the usage before it.
func readChatChunk(d []byte, from *ChatChunkReader) (ChatChunk, int, jsonspan.Span) {
	c := ChatChunk{Content: jsonspan.NoSpan(), Reasoning: jsonspan.NoSpan(), Calls: jsonspan.NoSpan(),
		Finish: jsonspan.NoSpan(), Usage: jsonspan.NoSpan(), Choices: jsonspan.NoSpan()}
	// One choice's spans, kept when the choice turns out to be index 0
	// (its index may come after its delta).
	var content, reasoning, calls, finish jsonspan.Span
	delta := func(k jsonspan.Span, v int) int {
		e := jsonspan.SkipValue(d, v)
		switch jsonspan.KeyName(d, k) {
		case "content":
			content = jsonspan.Span{Start: v, End: e}
		case "reasoning_content":
			reasoning = jsonspan.Span{Start: v, End: e}
		case "tool_calls":
			calls = jsonspan.Span{Start: v, End: e}
		}
		return e
	}
	choice := func(at int) int {
		if d[at] != '{' {
			return jsonspan.SkipValue(d, at)
		}
		content, reasoning, calls, finish = jsonspan.NoSpan(), jsonspan.NoSpan(), jsonspan.NoSpan(), jsonspan.NoSpan()
		first := true
		end := jsonspan.WalkMembers(d, at, func(k jsonspan.Span, v int) int {
			switch jsonspan.KeyName(d, k) {
			case "index":
				e := jsonspan.SkipValue(d, v)
				first = e > v && string(d[v:e]) == "0"
				return e
			case "delta":
				if d[v] == '{' {
					return jsonspan.WalkMembers(d, v, delta)
				}
			case "finish_reason":
				e := jsonspan.SkipValue(d, v)
				if e > v && !jsonspan.IsNull(d, jsonspan.Span{Start: v, End: e}) {
					finish = jsonspan.Span{Start: v, End: e}
				}
				return e
			}
			return jsonspan.SkipValue(d, v)
		})
		if !first {
			c.Others = true
			return end
		}
		c.First = true
		c.Content, c.Reasoning, c.Calls, c.Finish = content, reasoning, calls, finish
		return end
	}
	choicesKey, headUsage := -1, jsonspan.NoSpan()
	member := func(k jsonspan.Span, v int) int {
		switch jsonspan.KeyName(d, k) {
		case "choices":
			if choicesKey < 0 {
				choicesKey = k.Start
			}
			e := -1
			if d[v] == '[' {
				e = jsonspan.WalkElements(d, v, choice)
			} else {
				e = jsonspan.SkipValue(d, v)
			}
			if e > v {
				c.Choices = jsonspan.Span{Start: v, End: e}
			}
			return e
		case "usage":
			e := jsonspan.SkipValue(d, v)
			if e > v && !jsonspan.IsNull(d, jsonspan.Span{Start: v, End: e}) {
				c.Usage = jsonspan.Span{Start: v, End: e}
				if choicesKey < 0 {
					headUsage = c.Usage
				}
			}
			return e
		}
		return jsonspan.SkipValue(d, v)
	}
	if from != nil {
		c.Usage = from.usage
		jsonspan.WalkMembersAt(d, jsonspan.SkipSpace(d, len(from.head)), member)
	} else {
		jsonspan.WalkMembers(d, 0, member)
	}
	return c, choicesKey, headUsage
}
