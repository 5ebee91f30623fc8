package messagesbridge

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/internal/providers"
	"github.com/llmtransform/caddy-llm-transform/internal/reasonenv"
)

// billingPrefix starts the attribution line Claude Code puts first in the
// system prompt. It changes per conversation (and per request in SDK
// mode), so sent on it would move the start of every prompt and no
// upstream's prefix cache would ever hit.
const billingPrefix = "x-anthropic-billing-header:"

const billingReason = "the billing attribution line changes per conversation and would defeat the upstream's prefix cache"

// afterLine is what follows the first line of esc, a JSON string's
// inside as escaped (the line ends at an escaped newline), nil when it is
// one line.
func afterLine(esc []byte) []byte {
	for i := 0; i+1 < len(esc); i++ {
		if esc[i] == '\\' {
			if esc[i+1] == 'n' {
				return esc[i+2:]
			}
			i++ // the escaped character is no line end
		}
	}
	return nil
}

// Field names read from each message and each content block.
var (
	messageFields = []string{"role", "content"}
	blockFields   = []string{"type", "text", "id", "tool_use_id", "name", "input", "content", "thinking", "signature", "is_error", "source", "cache_control", "title"}
	// resultFields are those of a tool_result's content blocks: a
	// tool_reference's tool_name last.
	resultFields = append(blockFields[:len(blockFields):len(blockFields)], "tool_name")
)

// Indexes into blockFields.
const (
	bType = iota
	bText
	bID
	bToolUseID
	bName
	bInput
	bContent
	bThinking
	bSignature
	bIsError
	bSource
	bCache
	bTitle
	nBlockFields
)

func msgWhere(i int) string { return "messages[" + strconv.Itoa(i) + "]" }

func blockWhere(i, k int) string { return msgWhere(i) + ".content[" + strconv.Itoa(k) + "]" }

// scan reads the conversation once: it checks its shape, finds which
// tool_use and tool_result blocks pair up, and which deferred tools a
// tool_reference loaded.
func (b *msgBuild) scan(ms jsonspan.Span) error {
	doc := b.doc
	if ms.Start < 0 || doc[ms.Start] != '[' {
		return badRequest("messages", "messages must be an array of messages")
	}
	b.uses, b.results, b.loaded = map[pairKey]bool{}, map[pairKey]bool{}, map[string]bool{}
	var err error
	var f [2]jsonspan.Span
	var g [nBlockFields]jsonspan.Span
	jsonspan.WalkElements(doc, ms.Start, func(v int) int {
		i := len(b.msgs)
		if doc[v] != '{' {
			err = badRequest(msgWhere(i), "%s is not a message object", msgWhere(i))
			return jsonspan.StopWalk
		}
		end := jsonspan.ObjectFieldsEnd(doc, v, messageFields, f[:])
		m := msgInfo{content: f[1], next: -1, prev: -1}
		switch role, _ := jsonspan.StringValue(doc, f[0]); role {
		case "user", "assistant", "system":
			m.role = role[0]
		default:
			err = badRequest(msgWhere(i)+".role", "%s.role must be user, assistant or system", msgWhere(i))
			return jsonspan.StopWalk
		}
		c := f[1]
		if c.Start < 0 || (doc[c.Start] != '"' && doc[c.Start] != '[') {
			err = badRequest(msgWhere(i)+".content", "%s.content must be a string or an array of content blocks", msgWhere(i))
			return jsonspan.StopWalk
		}
		b.msgs = append(b.msgs, m)
		if doc[c.Start] == '"' {
			return end
		}
		k := -1
		jsonspan.WalkElements(doc, c.Start, func(bv int) int {
			k++
			if doc[bv] != '{' {
				err = badRequest(blockWhere(i, k), "%s is not a content block object", blockWhere(i, k))
				return jsonspan.StopWalk
			}
			be := jsonspan.ObjectFieldsEnd(doc, bv, blockFields, g[:])
			typ, ok := jsonspan.StringValue(doc, g[bType])
			if !ok {
				err = badRequest(blockWhere(i, k)+".type", "%s has no type", blockWhere(i, k))
				return jsonspan.StopWalk
			}
			switch {
			case typ == "tool_use" && m.role == 'a':
				if id, ok := jsonspan.StringValue(doc, g[bID]); ok && id != "" {
					b.uses[pairKey{id, i}] = true
				}
			case typ == "tool_result" && m.role == 'u':
				if id, ok := jsonspan.StringValue(doc, g[bToolUseID]); ok && id != "" {
					b.results[pairKey{id, i}] = true
				}
				if tc := g[bContent]; tc.Start >= 0 && doc[tc.Start] == '[' {
					var r [2]jsonspan.Span
					jsonspan.EachObject(doc, tc.Start, []string{"type", "tool_name"}, r[:], func(_ jsonspan.Span, r []jsonspan.Span) bool {
						if name, ok := jsonspan.StringValue(doc, r[1]); ok && jsonspan.IsString(doc, r[0], "tool_reference") {
							b.loaded[name] = true
						}
						return true
					})
				}
			}
			return be
		})
		if err != nil {
			return jsonspan.StopWalk
		}
		return end
	})
	if err != nil {
		return err
	}
	last := -1
	for i := range b.msgs {
		b.msgs[i].prev = last
		if b.msgs[i].role != 's' {
			last = i
		}
	}
	last = -1
	for i := len(b.msgs) - 1; i >= 0; i-- {
		b.msgs[i].next = last
		if b.msgs[i].role != 's' {
			last = i
		}
	}
	for k := range b.uses {
		if b.results[pairKey{k.id, b.msgs[k.msg].next}] {
			b.msgs[k.msg].sentCalls = true
		}
	}
	return nil
}

// writer is the messages array being written.
type writer struct {
	out []byte
	// calls and results already written, by id and message: a repeated
	// id is sent once.
	written map[pairKey]bool
}

func (w *writer) sep() {
	if w.out[len(w.out)-1] != '[' {
		w.out = append(w.out, ',')
	}
}

// writeMessages writes the messages array: one leading system message from
// system and the system messages before the conversation, then the
// conversation.
func (b *msgBuild) writeMessages(out []byte, system jsonspan.Span) ([]byte, error) {
	doc := b.doc
	var sys []byte // escaped, joined
	join := func(dst, text []byte) []byte {
		if len(dst) > 0 && len(text) > 0 {
			dst = append(dst, `\n\n`...)
		}
		return append(dst, text...)
	}
	switch {
	case system.Start < 0 || jsonspan.IsNull(doc, system):
	case doc[system.Start] == '"':
		text := inner(doc, system)
		if bytes.HasPrefix(text, []byte(billingPrefix)) {
			// A system string whose first line is the billing line
			// (the SDKs' form of it).
			b.x.Decide("system", "drop_line", billingReason)
			text = afterLine(text)
		}
		sys = append(sys, text...)
	case doc[system.Start] == '[':
		var err error
		k := -1
		var g [nBlockFields]jsonspan.Span
		jsonspan.EachObject(doc, system.Start, blockFields, g[:], func(_ jsonspan.Span, g []jsonspan.Span) bool {
			k++
			if g[bCache].Start >= 0 {
				b.blockCache = true
			}
			if !jsonspan.IsString(doc, g[bType], "text") || g[bText].Start < 0 || doc[g[bText].Start] != '"' {
				err = badRequest("system["+strconv.Itoa(k)+"]", "system blocks must be text blocks")
				return false
			}
			text := inner(doc, g[bText])
			if bytes.HasPrefix(text, []byte(billingPrefix)) {
				b.x.Decide("system["+strconv.Itoa(k)+"]", "drop", billingReason)
				return true
			}
			sys = join(sys, text)
			return true
		})
		if err != nil {
			return nil, err
		}
	default:
		return nil, badRequest("system", "system must be a string or an array of text blocks")
	}
	first := 0
	for first < len(b.msgs) && b.msgs[first].role == 's' {
		sys = join(sys, b.systemText(first))
		first++
	}
	sys = join(sys, b.schemaNote)

	w := &writer{out: append(out, '['), written: map[pairKey]bool{}}
	if len(sys) > 0 {
		w.out = append(w.out, `{"role":"system","content":"`...)
		w.out = append(w.out, sys...)
		w.out = append(w.out, `"}`...)
	}
	for i := first; i < len(b.msgs); i++ {
		var err error
		switch b.msgs[i].role {
		case 's':
			if text := b.systemText(i); len(b.pending) > 0 || b.awaiting(i) {
				// Between a call and its result: Chat wants the tool
				// messages right after the call.
				b.pending = append(b.pending, text)
			} else {
				b.note(w, text)
			}
		case 'a':
			err = b.assistant(w, i)
		default:
			err = b.user(w, i)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, n := range b.pending {
		b.note(w, n)
	}
	b.pending = nil
	if b.blockCache {
		b.x.Decide("cache_control", "drop", "Chat upstreams cache prefixes on their own and refuse cache_control")
	}
	return append(w.out, ']'), nil
}

// awaiting reports whether system message i comes between an assistant
// message whose calls were sent and the user message with their results.
func (b *msgBuild) awaiting(i int) bool {
	p := b.msgs[i].prev
	return p >= 0 && b.msgs[p].sentCalls
}

// note writes a system message after the conversation began, as the
// system_messages option says.
func (b *msgBuild) note(w *writer, text []byte) {
	if len(text) == 0 {
		return
	}
	w.sep()
	if b.t.SystemMessages == "system" {
		w.out = append(w.out, `{"role":"system","content":"`...)
		w.out = append(w.out, text...)
		w.out = append(w.out, `"}`...)
		return
	}
	// Marked so the model tells it from what the user wrote.
	w.out = append(w.out, `{"role":"user","content":"<system>\n`...)
	w.out = append(w.out, text...)
	w.out = append(w.out, `\n</system>"}`...)
}

// systemText is the text of system message i, escaped.
func (b *msgBuild) systemText(i int) []byte {
	return b.texts(b.msgs[i].content, "system message")
}

// texts joins the text blocks of content (a string or blocks), escaped;
// other blocks are dropped with a decision.
func (b *msgBuild) texts(c jsonspan.Span, what string) []byte {
	doc := b.doc
	if c.Start < 0 {
		return nil
	}
	if doc[c.Start] == '"' {
		return inner(doc, c)
	}
	var out []byte
	var g [nBlockFields]jsonspan.Span
	jsonspan.EachObject(doc, c.Start, blockFields, g[:], func(_ jsonspan.Span, g []jsonspan.Span) bool {
		if g[bCache].Start >= 0 {
			b.blockCache = true
		}
		if !jsonspan.IsString(doc, g[bType], "text") || g[bText].Start < 0 || doc[g[bText].Start] != '"' {
			typ, _ := jsonspan.StringValue(doc, g[bType])
			b.x.Decide(what, "drop", "a "+typ+" block in a "+what+": only its text goes upstream")
			return true
		}
		if len(out) > 0 {
			out = append(out, `\n\n`...)
		}
		out = append(out, inner(doc, g[bText])...)
		return true
	})
	return out
}

// serverBlock reports whether a block type is a server tool's, run by
// Anthropic: a Chat upstream runs none and has no form for them.
func serverBlock(typ string) bool {
	return typ == "server_tool_use" || typ == "mcp_tool_use" || typ == "container_upload" ||
		(strings.HasSuffix(typ, "_tool_result") && typ != "tool_result")
}

// assistant writes assistant message i: its text, its reasoning as the
// profile wants it, and the calls that were answered, as one message.
func (b *msgBuild) assistant(w *writer, i int) error {
	doc := b.doc
	m := b.msgs[i]
	var text, reasoning, calls []byte
	hasReason := false
	var notes [][]byte
	if doc[m.content.Start] == '"' {
		text = inner(doc, m.content)
	} else {
		var err error
		k := -1
		var g [nBlockFields]jsonspan.Span
		jsonspan.EachObject(doc, m.content.Start, blockFields, g[:], func(_ jsonspan.Span, g []jsonspan.Span) bool {
			k++
			if g[bCache].Start >= 0 {
				b.blockCache = true
			}
			typ, _ := jsonspan.StringValue(doc, g[bType])
			switch {
			case typ == "text":
				if len(text) > 0 {
					text = append(text, `\n\n`...)
				}
				text = append(text, inner(doc, g[bText])...)
			case typ == "thinking":
				if b.t.knobs.Reasoning == providers.ReasoningStrip {
					return true
				}
				if r, ok := b.thinkingText(blockWhere(i, k), g); ok {
					if hasReason {
						reasoning = append(reasoning, `\n`...)
					}
					reasoning = append(reasoning, r...)
					hasReason = true
				}
			case typ == "redacted_thinking":
				b.x.Decide(blockWhere(i, k), "drop", "redacted thinking is Anthropic's own: no other upstream reads it")
			case typ == "tool_use":
				id, _ := jsonspan.StringValue(doc, g[bID])
				switch key := (pairKey{id, i}); {
				case !b.results[pairKey{id, m.next}]:
					b.x.Decide(blockWhere(i, k), "drop", "a tool_use without its tool_result in the next message: Chat refuses calls nobody answered")
				case w.written[key]:
					b.x.Decide(blockWhere(i, k), "drop", "a second tool_use with the same id")
				default:
					w.written[key] = true
					calls, err = b.appendCall(calls, g, blockWhere(i, k))
				}
			case typ == "mid_conv_system":
				notes = append(notes, b.texts(g[bContent], "mid_conv_system block"))
			case serverBlock(typ):
				b.x.Decide(blockWhere(i, k), "drop", "a "+typ+" block: server tools are Anthropic's, and a Chat upstream runs none")
			case typ == "image", typ == "document", typ == "search_result":
				b.x.Decide(blockWhere(i, k), "drop", "Chat assistant messages hold text only")
			default:
				err = unsupportedBlock(blockWhere(i, k), typ)
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	if len(text) > 0 || len(calls) > 0 {
		w.sep()
		w.out = append(w.out, `{"role":"assistant","content":"`...)
		w.out = append(w.out, text...)
		w.out = append(w.out, '"')
		// The thinking providers refuse a tool-call turn of a thinking
		// conversation without reasoning_content (DeepSeek, Kimi): when
		// there is none to give back, an empty one.
		switch b.t.knobs.Reasoning {
		case providers.ReasoningReplay:
			if hasReason || len(calls) > 0 {
				w.out = append(w.out, `,"reasoning_content":"`...)
				w.out = append(append(w.out, reasoning...), '"')
			}
		case providers.ReasoningToolCalls:
			if len(calls) > 0 {
				w.out = append(w.out, `,"reasoning_content":"`...)
				w.out = append(append(w.out, reasoning...), '"')
			}
		}
		if len(calls) > 0 {
			w.out = append(w.out, `,"tool_calls":[`...)
			w.out = append(w.out, calls...)
			w.out = append(w.out, ']')
		}
		w.out = append(w.out, '}')
	}
	if len(calls) > 0 {
		b.pending = append(b.pending, notes...) // after the tool messages
		return nil
	}
	for _, n := range notes {
		b.note(w, n)
	}
	return nil
}

// appendCall appends a tool_use block as a Chat tool call: arguments are
// the compact JSON of its input.
func (b *msgBuild) appendCall(calls []byte, g []jsonspan.Span, where string) ([]byte, error) {
	doc := b.doc
	if g[bName].Start < 0 || doc[g[bName].Start] != '"' {
		return nil, badRequest(where+".name", "%s has no tool name", where)
	}
	if len(calls) > 0 {
		calls = append(calls, ',')
	}
	calls = append(calls, `{"id":`...)
	calls = append(calls, doc[g[bID].Start:g[bID].End]...)
	calls = append(calls, `,"type":"function","function":{"name":`...)
	calls = append(calls, doc[g[bName].Start:g[bName].End]...)
	calls = append(calls, `,"arguments":"`...)
	if in := g[bInput]; in.Start >= 0 && !jsonspan.IsNull(doc, in) {
		calls = appendEscaped(calls, appendCompact(nil, doc[in.Start:in.End]))
	} else {
		calls = append(calls, `{}`...)
	}
	return append(calls, `"}}`...), nil
}

// thinkingText returns the reasoning a thinking block gives back, escaped.
// A signature the gateway sealed carries the text (Claude Code may clear
// the block's thinking but keeps the signature); any other signature
// (Anthropic's, after a model switch) is never sent anywhere, and the
// block's own text stands in. The gateway's marks that seal nothing (a
// cut block, the placeholder of content_block_start) give nothing back:
// the block's text is then a part of the reasoning, which sent on would
// pass for the whole.
func (b *msgBuild) thinkingText(where string, g []jsonspan.Span) ([]byte, bool) {
	doc := b.doc
	sig, _ := jsonspan.StringValue(doc, g[bSignature])
	switch {
	case strings.HasPrefix(sig, reasonenv.Prefix):
	case gatewayMark(sig):
		b.x.Decide(where, "drop", "thinking the gateway marked as not whole (cut at max_reasoning or by a failed stream): never sent back as the whole")
		return nil, false
	default:
		if g[bThinking].Start < 0 || doc[g[bThinking].Start] != '"' {
			return nil, false
		}
		text := inner(doc, g[bThinking])
		return text, len(text) > 0
	}
	// The envelope holds the text as JSON escaped it, up to six bytes
	// for one; max_reasoning counts decoded bytes. The request's budget
	// bounds what all its envelopes inflate to: a deflated envelope of
	// kilobytes can hold megabytes.
	limit := 6*min(b.t.maxReasoning, b.reasonLeft) + 64
	p, text, ok := reasonenv.Open(sig, limit)
	switch {
	case !ok:
		b.x.Decide(where, "drop", "a thinking signature that does not open: damaged, past max_reasoning, or past what the request's envelopes may hold")
		return nil, false
	case p != b.t.Profile:
		b.x.Decide(where, "drop", "thinking from another provider ("+p+") is not sent to this one")
		return nil, false
	case len(text) > b.t.maxReasoning:
		// The response side seals no more than max_reasoning.
		b.x.Decide(where, "drop", "a thinking signature holding more than max_reasoning")
		return nil, false
	case len(text) > b.reasonLeft:
		b.x.Decide(where, "drop", "past what the request's envelopes may hold")
		return nil, false
	}
	b.reasonLeft -= len(text)
	return appendEscaped(nil, []byte(text)), text != ""
}

// gatewayMark reports whether sig is one of the gateway's signatures that
// hold no text: "llmt.pending" or an envelope of another version
// ("llmt1." …, the cut mark).
func gatewayMark(sig string) bool {
	rest, ok := strings.CutPrefix(sig, "llmt")
	if !ok {
		return false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	return strings.HasPrefix(rest[i:], ".")
}

// user writes user message i: the tool messages of its results first, in
// order, then the images they returned, the system notes waiting for
// them, the user's own content, and its trailing system blocks.
func (b *msgBuild) user(w *writer, i int) error {
	doc := b.doc
	m := b.msgs[i]
	var c userContent
	var notes [][]byte
	var toolImages userContent // what the turn's tool results showed
	if doc[m.content.Start] == '"' {
		c.addText(inner(doc, m.content))
	} else {
		var err error
		k := -1
		var g [nBlockFields]jsonspan.Span
		jsonspan.EachObject(doc, m.content.Start, blockFields, g[:], func(el jsonspan.Span, g []jsonspan.Span) bool {
			k++
			if g[bCache].Start >= 0 {
				b.blockCache = true
			}
			where := func() string { return blockWhere(i, k) } // for the rare decision or error
			typ, _ := jsonspan.StringValue(doc, g[bType])
			switch {
			case typ == "text":
				c.addText(inner(doc, g[bText]))
			case typ == "image":
				err = b.image(&c, nil, g[bSource], where())
			case typ == "document", typ == "search_result":
				var t []byte
				if t, err = b.documentText(g, where()); err == nil {
					c.addText(t)
				}
			case typ == "tool_result":
				id, _ := jsonspan.StringValue(doc, g[bToolUseID])
				switch key := (pairKey{id, i}); {
				case !b.uses[pairKey{id, m.prev}]:
					b.x.Decide(where(), "drop", "a tool_result without its tool_use in the message before: Chat refuses it")
				case w.written[key]:
					b.x.Decide(where(), "drop", "a second tool_result for the same tool_use")
				default:
					w.written[key] = true
					err = b.toolMessage(w, &toolImages, g, where())
				}
			case typ == "mid_conv_system":
				notes = append(notes, b.texts(g[bContent], "mid_conv_system block"))
			case typ == "thinking", typ == "redacted_thinking", typ == "tool_use", serverBlock(typ):
				b.x.Decide(where(), "drop", "a "+typ+" block has no place in a Chat user message")
			default:
				err = unsupportedBlock(where(), typ)
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	// A tool message holds text only: the images follow, as the user's,
	// after the last tool message of the turn.
	toolImages.write(w)
	for _, n := range b.pending {
		b.note(w, n)
	}
	b.pending = b.pending[:0]
	c.write(w)
	for _, n := range notes {
		b.note(w, n)
	}
	return nil
}

// userContent gathers a user message's own content: as one string while
// it is all text, and as Chat parts for when it holds images.
type userContent struct {
	text, parts []byte
	images      bool
	n           int
}

func (c *userContent) sep() []byte {
	c.n++
	if len(c.parts) > 0 {
		c.parts = append(c.parts, ',')
	}
	return c.parts
}

// write writes the user message holding c, if it holds anything: as a
// string when it is all text, which every upstream takes (a text-only one
// may refuse parts).
func (c *userContent) write(w *writer) {
	if c.n == 0 {
		return
	}
	w.sep()
	w.out = append(w.out, `{"role":"user","content":`...)
	if c.images {
		w.out = append(w.out, '[')
		w.out = append(w.out, c.parts...)
		w.out = append(w.out, ']')
	} else {
		w.out = append(w.out, '"')
		w.out = append(w.out, c.text...)
		w.out = append(w.out, '"')
	}
	w.out = append(w.out, '}')
}

func (c *userContent) addText(t []byte) {
	if len(c.text) > 0 {
		// Blocks are apart to the model: joined, they stay apart.
		c.text = append(c.text, `\n\n`...)
	}
	c.text = append(c.text, t...)
	c.parts = append(c.sep(), `{"type":"text","text":"`...)
	c.parts = append(append(c.parts, t...), `"}`...)
}

// toolMessage writes the tool message of a tool_result block and adds the
// images it returned to images, each told from which tool it came.
func (b *msgBuild) toolMessage(w *writer, images *userContent, g []jsonspan.Span, where string) error {
	doc := b.doc
	id := g[bToolUseID]
	var text []byte
	if e := g[bIsError]; e.Start >= 0 && string(doc[e.Start:e.End]) == "true" {
		// Chat has no error flag: the model reads it in the text.
		text = append(text, "Error: "...)
	}
	body := len(text)
	addText := func(t []byte) {
		if len(text) > body {
			text = append(text, `\n\n`...)
		}
		text = append(text, t...)
	}
	c := g[bContent]
	switch {
	case c.Start < 0 || jsonspan.IsNull(doc, c):
	case doc[c.Start] == '"':
		addText(inner(doc, c))
	case doc[c.Start] == '[':
		var err error
		k := -1
		var h [nBlockFields + 1]jsonspan.Span
		jsonspan.EachObject(doc, c.Start, resultFields, h[:], func(_ jsonspan.Span, h []jsonspan.Span) bool {
			k++
			pw := func() string { return where + ".content[" + strconv.Itoa(k) + "]" }
			if h[bCache].Start >= 0 {
				b.blockCache = true
			}
			typ, _ := jsonspan.StringValue(doc, h[bType])
			switch typ {
			case "text":
				addText(inner(doc, h[bText]))
			case "image":
				err = b.image(images, inner(doc, id), h[bSource], pw())
			case "tool_reference":
				// The deferred tool it names is sent from this request on
				// (convertTools); the model learns it in words.
				t := append([]byte("Tool "), inner(doc, h[nBlockFields])...)
				addText(append(t, " is now available."...))
			case "document", "search_result":
				var t []byte
				if t, err = b.documentText(h, pw()); err == nil {
					addText(t)
				}
			default:
				err = unsupportedBlock(pw(), typ)
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	default:
		return badRequest(where+".content", "%s.content must be a string or an array of content blocks", where)
	}
	w.sep()
	w.out = append(w.out, `{"role":"tool","tool_call_id":`...)
	w.out = append(w.out, doc[id.Start:id.End]...)
	w.out = append(w.out, `,"content":"`...)
	w.out = append(w.out, text...)
	w.out = append(w.out, `"}`...)
	return nil
}

// Why an image or a document is left out, in its placeholder, its
// decision and the 400 of unsupported_content reject.
const (
	noVision      = "the model cannot read images"
	noImageURL    = "the upstream takes images as base64 data, not by URL"
	noFileImage   = "an image of Anthropic's Files API cannot be sent to a Chat Completions upstream"
	noDocumentPDF = "a Chat Completions upstream cannot read PDF or file documents"
)

// image adds an image block to c: a Chat image_url part where the model
// reads it, else a short text saying it was left out, so that the model
// knows there was one (or a 400, as unsupported_content says). tool, when
// set, is the escaped id of the call whose result showed the image.
func (b *msgBuild) image(c *userContent, tool []byte, src jsonspan.Span, where string) error {
	doc := b.doc
	if src.Start < 0 || doc[src.Start] != '{' {
		return badRequest(where+".source", "%s has no source object", where)
	}
	var s [4]jsonspan.Span
	jsonspan.ObjectFields(doc, src.Start, []string{"type", "media_type", "data", "url"}, s[:])
	isStr := func(sp jsonspan.Span) bool { return sp.Start >= 0 && doc[sp.Start] == '"' }
	why := ""
	// A malformed source is refused whatever the model reads.
	switch typ, _ := jsonspan.StringValue(doc, s[0]); {
	case typ == "base64" && isStr(s[1]) && isStr(s[2]):
	case typ == "url" && isStr(s[3]):
		if b.t.knobs.NoImageURLs {
			// The gateway fetches nothing on a client's behalf.
			why = noImageURL
		}
	case typ == "file":
		why = noFileImage
	default:
		return badRequest(where+".source", "%s.source must be base64 data with its media_type, a url, or a file", where)
	}
	if !b.vision {
		why = noVision
	}
	if why != "" {
		if err := b.omit(where, "an image", why); err != nil {
			return err
		}
		t := append([]byte(nil), "[image"...)
		if tool != nil {
			t = append(append(t, " from tool "...), tool...)
		}
		c.addText(append(append(append(t, " omitted: "...), why...), ']'))
		return nil
	}
	if tool != nil {
		c.addText(append(append([]byte("[image from tool "), tool...), ']'))
	}
	dst := c.sep()
	c.images = true
	if jsonspan.IsString(doc, s[0], "url") {
		dst = append(dst, `{"type":"image_url","image_url":{"url":`...)
		dst = append(dst, doc[s[3].Start:s[3].End]...)
		c.parts = append(dst, "}}"...)
		return nil
	}
	// Copied as escaped: a data URL of megabytes is never decoded.
	dst = append(dst, `{"type":"image_url","image_url":{"url":"data:`...)
	dst = append(dst, inner(doc, s[1])...)
	dst = append(dst, ";base64,"...)
	dst = append(dst, inner(doc, s[2])...)
	c.parts = append(dst, `"}}`...)
	return nil
}

// omit is the decision to leave out what the upstream cannot take (what,
// for why), or its 400 under unsupported_content reject.
func (b *msgBuild) omit(where, what, why string) error {
	if b.t.UnsupportedContent == "reject" {
		return transforms.BadRequest("unsupported_content", where,
			"messages_to_chat: %s is %s, and %s", where, what, why)
	}
	b.x.Decide(where, "placeholder", why)
	return nil
}

// documentText is the text of a document block with a text source (or
// content blocks), or of a search_result. A PDF, or a document by URL or
// file, no Chat upstream reads (Chat Completions has no file part most
// upstreams take, and the gateway extracts no PDF text): it becomes a
// short text saying so, or a 400, as unsupported_content says.
func (b *msgBuild) documentText(g []jsonspan.Span, where string) ([]byte, error) {
	doc := b.doc
	var out []byte
	if t := g[bTitle]; t.Start >= 0 && doc[t.Start] == '"' {
		out = append(append(out, inner(doc, t)...), `\n\n`...)
	}
	if jsonspan.IsString(doc, g[bType], "search_result") {
		return append(out, b.texts(g[bContent], "search_result")...), nil
	}
	src := g[bSource]
	if src.Start < 0 || doc[src.Start] != '{' {
		return nil, badRequest(where+".source", "%s has no source object", where)
	}
	var s [3]jsonspan.Span
	jsonspan.ObjectFields(doc, src.Start, []string{"type", "data", "content"}, s[:])
	switch typ, _ := jsonspan.StringValue(doc, s[0]); {
	case typ == "text" && s[1].Start >= 0 && doc[s[1].Start] == '"':
		return append(out, inner(doc, s[1])...), nil
	case typ == "content":
		return append(out, b.texts(s[2], "document")...), nil
	case typ == "base64", typ == "url", typ == "file":
		if err := b.omit(where, "a document", noDocumentPDF); err != nil {
			return nil, err
		}
		return append(out, "[document omitted: "+noDocumentPDF+"]"...), nil
	}
	return nil, badRequest(where+".source", "%s.source must be text, content, base64, url or file", where)
}

func unsupportedBlock(where, typ string) error {
	return transforms.BadRequest("unsupported_content", where+".type",
		"messages_to_chat: %s has the content block type %q, which has no Chat Completions form", where, typ)
}

// inner is the inside of the JSON string literal at sp, as escaped: text
// moves from one JSON string to another without being decoded.
func inner(doc []byte, sp jsonspan.Span) []byte {
	if sp.Start < 0 || sp.End-sp.Start < 2 || doc[sp.Start] != '"' {
		return nil
	}
	return doc[sp.Start+1 : sp.End-1]
}
