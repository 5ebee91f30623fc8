package toolsfilter

import (
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// With function calling off, a request keeps its conversation but loses
// every trace of tools: a model without them refuses tool definitions,
// tool_choice, call items and tool messages alike. Calls are retold as
// the assistant's text and their outputs as the user's, so the model still
// knows what was done and what came of it. Runs of calls (or of outputs)
// become one message each, which keeps the roles alternating as strict
// chat templates want.

// toolMembers are the top-level members that only make sense with tools.
var toolMembers = []string{"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"}

// withoutTools is the request phase of function_calling off.
func (t *ToolsFilter) withoutTools(x *transforms.Exchange, body []byte) ([]byte, error) {
	var remove []jsonspan.Span
	var tools, choice, history jsonspan.Span = jsonspan.NoSpan(), jsonspan.NoSpan(), jsonspan.NoSpan()
	chat := x.Protocol() == transforms.ProtocolChat
	end := jsonspan.WalkMembers(body, 0, func(k jsonspan.Span, v int) int {
		e := jsonspan.SkipValue(body, v)
		sp := jsonspan.Span{Start: v, End: e}
		for _, n := range toolMembers {
			if jsonspan.KeyIs(body, k, n) {
				remove = append(remove, sp)
				switch n {
				case "tools":
					tools = sp
				case "tool_choice":
					choice = sp
				}
			}
		}
		if (chat && jsonspan.KeyIs(body, k, "messages")) || (!chat && jsonspan.KeyIs(body, k, "input")) {
			history = sp
		}
		return e
	})
	if end < 0 || jsonspan.SkipSpace(body, end) != len(body) {
		if !jsonspan.Valid(body) {
			return nil, transforms.ErrInvalidJSON
		}
		return body, nil
	}
	rec := t.record(x)
	rec.declared, rec.filtered = map[string]bool{}, map[string]string{}
	if tools.Start >= 0 && body[tools.Start] == '[' {
		jsonspan.EachElement(body, tools.Start, func(el jsonspan.Span) bool {
			if body[el.Start] != '{' {
				return true
			}
			id := definitionID(body, el, chat)
			rec.filtered[nameKey(id)] = reasonIncompatible
			x.Decide(id.Display(), "drop", reasonIncompatible)
			return true
		})
	}
	for i := range t.defaults {
		if _, declared := rec.filtered[nameKey(t.defaults[i].id)]; declared {
			continue // the request's own tool of that name, reported above
		}
		x.Decide(t.defaults[i].id.Display(), "skip_default", reasonIncompatible)
	}
	if err := forcedChoice(body, choice); err != nil {
		return nil, err
	}
	if legacy := jsonspan.Lookup(body, 0, "function_call"); legacy.Start >= 0 && body[legacy.Start] == '{' && chat {
		// The legacy form of a named choice.
		return nil, transforms.BadRequest("tool_filtered", "function_call",
			"function_call forces a function, but function calling is off for this request at the gateway")
	}
	var edits []jsonspan.Edit
	edits = append(edits, jsonspan.RemoveMembers(body, remove)...)
	if history.Start >= 0 && body[history.Start] == '[' {
		h := historyText{doc: body, names: map[string]string{}}
		if chat {
			edits = h.chat(edits, history)
		} else {
			edits = h.responses(edits, history)
		}
		if h.retold > 0 {
			x.Decide("history", "retell", "tool calls and outputs became plain text: function calling is off")
		}
	}
	if len(edits) == 0 {
		return body, nil
	}
	if tools.Start >= 0 || choice.Start >= 0 {
		x.MarkToolsChanged()
	}
	return x.ApplyEdits(body, edits), nil
}

// definitionID reads a tool definition's identity in either shape.
func definitionID(doc []byte, el jsonspan.Span, chat bool) transforms.ToolID {
	var f [5]jsonspan.Span
	jsonspan.ObjectFields(doc, el.Start, []string{"type", "name", "namespace", "function", "custom"}, f[:])
	var id transforms.ToolID
	id.Type, _ = jsonspan.StringValue(doc, f[0])
	id.Name, _ = jsonspan.StringValue(doc, f[1])
	id.Namespace, _ = jsonspan.StringValue(doc, f[2])
	inner := f[3]
	if id.Type == "custom" {
		inner = f[4]
	}
	if chat && inner.Start >= 0 && doc[inner.Start] == '{' {
		id.Name, _ = jsonspan.StringValue(doc, jsonspan.Lookup(doc, inner.Start, "name"))
	}
	return id
}

// forcedChoice refuses a tool_choice that demands a call: with function
// calling off none can be made, and answering without one would break the
// client's contract silently.
func forcedChoice(doc []byte, choice jsonspan.Span) error {
	if choice.Start < 0 {
		return nil
	}
	forced := jsonspan.IsString(doc, choice, "required")
	if doc[choice.Start] == '{' {
		var f [3]jsonspan.Span
		jsonspan.ObjectFields(doc, choice.Start, []string{"type", "mode", "allowed_tools"}, f[:])
		mode := f[1]
		if f[2].Start >= 0 && doc[f[2].Start] == '{' {
			mode = jsonspan.Lookup(doc, f[2].Start, "mode")
		}
		forced = !jsonspan.IsString(doc, f[0], "allowed_tools") || jsonspan.IsString(doc, mode, "required")
	}
	if forced {
		return transforms.BadRequest("tool_filtered", "tool_choice",
			"tool_choice forces a tool call, but function calling is off for this request at the gateway (every tool is incompatible)")
	}
	return nil
}

// historyText retells one request's tool history.
type historyText struct {
	doc    []byte
	names  map[string]string // call id -> tool name, for the outputs
	retold int
}

// itemFieldsText are the members of a Responses item the retelling reads.
var itemFieldsText = []string{"type", "name", "namespace", "call_id", "arguments", "input", "action", "operation", "output", "tools", "id"}

const (
	txType = iota
	txName
	txNamespace
	txCallID
	txArguments
	txInput
	txAction
	txOperation
	txOutput
	txTools
	txID
)

// responses retells the calls and outputs of a Responses input array and
// drops its additional_tools items.
func (h *historyText) responses(edits []jsonspan.Edit, arr jsonspan.Span) []jsonspan.Edit {
	doc := h.doc
	const (
		other = iota
		call
		output
		declare
	)
	var run []jsonspan.Span // items of the current run
	// pending are additional_tools items met inside a run of calls or
	// outputs: they go, and do not split the run; those after its last
	// item are removed on their own.
	var pending []jsonspan.Span
	var runKind int
	var text []byte
	var parts [][]byte // an output's non-text content (images, files)
	flush := func() {
		if len(run) == 0 {
			return
		}
		sp := jsonspan.Span{Start: run[0].Start, End: run[len(run)-1].End}
		switch runKind {
		case declare:
			edits = append(edits, jsonspan.RemoveRun(doc, sp.Start, sp.End))
		case call:
			m := append([]byte(`{"type":"message","role":"assistant","content":`), jsonspan.AppendString(nil, text)...)
			edits = append(edits, jsonspan.Edit{Start: sp.Start, End: sp.End, Repl: append(m, '}')})
		case output:
			m := []byte(`{"type":"message","role":"user","content":`)
			if len(parts) == 0 {
				m = jsonspan.AppendString(m, text)
			} else {
				m = append(m, `[{"type":"input_text","text":`...)
				m = jsonspan.AppendString(m, text)
				m = append(m, '}')
				for _, p := range parts {
					m = append(m, ',')
					m = append(m, p...)
				}
				m = append(m, ']')
			}
			edits = append(edits, jsonspan.Edit{Start: sp.Start, End: sp.End, Repl: append(m, '}')})
		}
		run, text, parts = run[:0], nil, nil
		if len(pending) > 0 {
			// The items after the run are next to each other: one run,
			// one comma.
			edits = append(edits, jsonspan.RemoveRun(doc, pending[0].Start, pending[len(pending)-1].End))
		}
		pending = pending[:0]
	}
	var f [11]jsonspan.Span
	// The calls' names first: an output may come before its call.
	jsonspan.EachObject(doc, arr.Start, itemFieldsText, f[:], func(_ jsonspan.Span, f []jsonspan.Span) bool {
		if typ, _ := jsonspan.StringValue(doc, f[txType]); strings.HasSuffix(typ, "_call") {
			if id, _ := jsonspan.StringValue(doc, f[txCallID]); id != "" {
				h.names[id] = callName(doc, f, typ)
			}
		}
		return true
	})
	jsonspan.EachElement(doc, arr.Start, func(el jsonspan.Span) bool {
		kind := other
		if doc[el.Start] == '{' {
			jsonspan.ObjectFields(doc, el.Start, itemFieldsText, f[:])
			typ, _ := jsonspan.StringValue(doc, f[txType])
			switch {
			case typ == "additional_tools":
				kind = declare
			case strings.HasSuffix(typ, "_call"):
				kind = call
			case strings.HasSuffix(typ, "_output"):
				kind = output
			}
		}
		if kind == declare && (runKind == call || runKind == output) && len(run) > 0 {
			pending = append(pending, el)
			return true
		}
		if kind != runKind || kind == other {
			flush()
		}
		if kind == runKind {
			pending = pending[:0] // inside the run's span now
		}
		runKind = kind
		if kind == other {
			return true
		}
		run = append(run, el)
		if len(text) > 0 {
			text = append(text, "\n\n"...)
		}
		switch kind {
		case call:
			h.retold++
			text = h.callText(text, f[:], el)
		case output:
			h.retold++
			text, parts = h.outputText(text, parts, f[:])
		}
		return true
	})
	flush()
	return edits
}

// callText appends the retelling of one Responses call item.
func (h *historyText) callText(text []byte, f []jsonspan.Span, el jsonspan.Span) []byte {
	doc := h.doc
	typ, _ := jsonspan.StringValue(doc, f[txType])
	name := callName(doc, f, typ)
	id, _ := jsonspan.StringValue(doc, f[txCallID])
	if id != "" {
		h.names[id] = name
	}
	body := jsonspan.NoSpan()
	for _, k := range []int{txArguments, txInput, txAction, txOperation} {
		if f[k].Start >= 0 {
			body = f[k]
			break
		}
	}
	text = h.describe(text, "Called tool ", name, id, " with:\n", body)
	if out := f[txOutput]; out.Start >= 0 && !jsonspan.IsNull(doc, out) {
		// A call the upstream ran itself (mcp_call) carries its result.
		text = append(text, "\nResult:\n"...)
		if doc[out.Start] == '"' {
			text = jsonspan.Unescape(text, doc[out.Start+1:out.End-1])
		} else {
			text = append(text, doc[out.Start:out.End]...)
		}
	}
	return text
}

// callName names a Responses call item for the retelling: namespace/name,
// or its type for a built-in call.
func callName(doc []byte, f []jsonspan.Span, typ string) string {
	name, _ := jsonspan.StringValue(doc, f[txName])
	if ns, _ := jsonspan.StringValue(doc, f[txNamespace]); ns != "" && name != "" {
		name = ns + "/" + name
	}
	if name == "" {
		name = strings.TrimSuffix(typ, "_call")
	}
	return name
}

// outputText appends the retelling of one Responses output item; content
// parts that are not text are kept for the user message.
func (h *historyText) outputText(text []byte, parts [][]byte, f []jsonspan.Span) ([]byte, [][]byte) {
	doc := h.doc
	id, _ := jsonspan.StringValue(doc, f[txCallID])
	if typ, _ := jsonspan.StringValue(doc, f[txType]); id == "" && typ == "local_shell_call_output" {
		// It names its call by id, which holds the call's call_id.
		id, _ = jsonspan.StringValue(doc, f[txID])
	}
	name := h.names[id]
	if name == "" {
		typ, _ := jsonspan.StringValue(doc, f[txType])
		name = strings.TrimSuffix(strings.TrimSuffix(typ, "_output"), "_call")
	}
	out := f[txOutput]
	if out.Start < 0 {
		out = f[txTools] // a tool_search_output: the tools it loaded
	}
	if out.Start >= 0 && doc[out.Start] == '[' && f[txTools].Start != out.Start {
		// Content parts: text is retold, images and files go along.
		text = h.describe(text, "Output of tool ", name, id, ":\n", jsonspan.NoSpan())
		texts := 0 // parts apart by a line break
		jsonspan.EachElement(doc, out.Start, func(p jsonspan.Span) bool {
			var g [2]jsonspan.Span
			if doc[p.Start] != '{' {
				return true
			}
			jsonspan.ObjectFields(doc, p.Start, []string{"type", "text"}, g[:])
			if g[1].Start >= 0 && doc[g[1].Start] == '"' {
				if texts > 0 {
					text = append(text, '\n')
				}
				texts++
				text = jsonspan.Unescape(text, doc[g[1].Start+1:g[1].End-1])
				return true
			}
			parts = append(parts, doc[p.Start:p.End])
			return true
		})
		return text, parts
	}
	if out.Start >= 0 && doc[out.Start] == '{' {
		var g [2]jsonspan.Span
		jsonspan.ObjectFields(doc, out.Start, []string{"type", "image_url"}, g[:])
		if jsonspan.IsString(doc, g[0], "computer_screenshot") && g[1].Start >= 0 {
			// A screenshot stays an image the model can look at.
			img := append([]byte(`{"type":"input_image","image_url":`), doc[g[1].Start:g[1].End]...)
			return h.describe(text, "Output of tool ", name, id, ":\n", jsonspan.NoSpan()), append(parts, append(img, '}'))
		}
	}
	return h.describe(text, "Output of tool ", name, id, ":\n", out), parts
}

// describe appends "<lead>`name` (call id)<sep><value>", the value
// unescaped when it is a string and as JSON otherwise.
func (h *historyText) describe(text []byte, lead, name, id, sep string, v jsonspan.Span) []byte {
	text = append(text, lead...)
	text = append(text, '`')
	text = append(text, name...)
	text = append(text, '`')
	if id != "" {
		text = append(text, " (call "...)
		text = append(text, id...)
		text = append(text, ')')
	}
	text = append(text, sep...)
	switch {
	case v.Start < 0:
	case h.doc[v.Start] == '"':
		text = jsonspan.Unescape(text, h.doc[v.Start+1:v.End-1])
	default:
		text = append(text, h.doc[v.Start:v.End]...)
	}
	return text
}

// chat retells the tool calls of Chat assistant messages in their text and
// turns each run of tool messages into one user message.
func (h *historyText) chat(edits []jsonspan.Edit, arr jsonspan.Span) []jsonspan.Edit {
	doc := h.doc
	var run []jsonspan.Span
	var text []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		m := append([]byte(`{"role":"user","content":`), jsonspan.AppendString(nil, text)...)
		edits = append(edits, jsonspan.Edit{Start: run[0].Start, End: run[len(run)-1].End, Repl: append(m, '}')})
		run, text = run[:0], nil
	}
	var f [6]jsonspan.Span
	jsonspan.EachElement(doc, arr.Start, func(el jsonspan.Span) bool {
		if doc[el.Start] != '{' {
			flush()
			return true
		}
		jsonspan.ObjectFields(doc, el.Start, []string{"role", "tool_calls", "function_call", "tool_call_id", "name", "content"}, f[:])
		switch {
		case jsonspan.IsString(doc, f[0], "tool") || jsonspan.IsString(doc, f[0], "function"):
			h.retold++
			id, _ := jsonspan.StringValue(doc, f[3])
			name := h.names[id]
			if name == "" {
				name, _ = jsonspan.StringValue(doc, f[4])
			}
			if len(text) > 0 {
				text = append(text, "\n\n"...)
			}
			text = h.chatContent(h.describe(text, "Output of tool ", name, id, ":\n", jsonspan.NoSpan()), f[5])
			run = append(run, el)
		case f[1].Start >= 0 || f[2].Start >= 0:
			flush()
			edits = append(edits, jsonspan.Edit{Start: el.Start, End: el.End, Repl: h.assistant(el, f[1], f[2], f[5])})
			// (null or empty calls only lose their members: the content
			// stays as it was.)
		default:
			flush()
		}
		return true
	})
	flush()
	return edits
}

// assistant rewrites a Chat assistant message with its calls told in its
// content.
func (h *historyText) assistant(el, calls, legacy, content jsonspan.Span) []byte {
	doc := h.doc
	var told []byte
	tell := func(call jsonspan.Span, id string) {
		var g [2]jsonspan.Span
		jsonspan.ObjectFields(doc, call.Start, []string{"name", "arguments"}, g[:])
		if g[1].Start < 0 {
			g[1] = jsonspan.Lookup(doc, call.Start, "input") // a custom call
		}
		name, _ := jsonspan.StringValue(doc, g[0])
		if id != "" {
			h.names[id] = name
		}
		if len(told) > 0 {
			told = append(told, "\n\n"...)
		}
		h.retold++
		told = h.describe(told, "Called tool ", name, id, " with:\n", g[1])
	}
	if calls.Start >= 0 && doc[calls.Start] == '[' {
		jsonspan.EachElement(doc, calls.Start, func(c jsonspan.Span) bool {
			if doc[c.Start] != '{' {
				return true
			}
			var g [4]jsonspan.Span
			jsonspan.ObjectFields(doc, c.Start, []string{"id", "type", "function", "custom"}, g[:])
			id, _ := jsonspan.StringValue(doc, g[0])
			inner := g[2]
			if jsonspan.IsString(doc, g[1], "custom") {
				inner = g[3]
			}
			if inner.Start >= 0 && doc[inner.Start] == '{' {
				tell(inner, id)
			}
			return true
		})
	}
	if legacy.Start >= 0 && doc[legacy.Start] == '{' {
		tell(legacy, "")
	}
	ow := jsonspan.NewObj(nil)
	wrote := false
	writeContent := func() {
		wrote = true
		if len(told) == 0 {
			// Members that held no call (null, []) go; the text stays.
			if content.Start >= 0 {
				ow.Key("content")
				ow.B = append(ow.B, doc[content.Start:content.End]...)
			}
			return
		}
		ow.Key("content")
		switch {
		case content.Start >= 0 && doc[content.Start] == '[':
			// Content parts: the calls join as one more text part.
			inner := doc[content.Start+1 : content.End-1]
			ow.B = append(ow.B, '[')
			ow.B = append(ow.B, inner...)
			if len(strings.TrimSpace(string(inner))) > 0 {
				ow.B = append(ow.B, ',')
			}
			ow.B = append(ow.B, `{"type":"text","text":`...)
			ow.B = jsonspan.AppendString(ow.B, told)
			ow.B = append(ow.B, "}]"...)
		case content.Start >= 0 && doc[content.Start] == '"' && content.End-content.Start > 2:
			s := jsonspan.Unescape(nil, doc[content.Start+1:content.End-1])
			ow.B = jsonspan.AppendString(ow.B, append(append(s, "\n\n"...), told...))
		default:
			ow.B = jsonspan.AppendString(ow.B, told)
		}
	}
	jsonspan.EachMember(doc, el.Start, func(m jsonspan.Member) bool {
		switch {
		case m.KeyIs(doc, "tool_calls"), m.KeyIs(doc, "function_call"):
		case m.KeyIs(doc, "content"):
			if !wrote {
				writeContent()
			}
		default:
			ow.Raw(doc, m)
		}
		return true
	})
	if !wrote {
		writeContent()
	}
	return ow.Close()
}

// chatContent appends a Chat tool message's content: a string, or the
// text of its parts.
func (h *historyText) chatContent(text []byte, content jsonspan.Span) []byte {
	doc := h.doc
	switch {
	case content.Start < 0:
	case doc[content.Start] == '"':
		text = jsonspan.Unescape(text, doc[content.Start+1:content.End-1])
	case doc[content.Start] == '[':
		texts := 0
		jsonspan.EachElement(doc, content.Start, func(p jsonspan.Span) bool {
			if doc[p.Start] == '{' {
				if v := jsonspan.Lookup(doc, p.Start, "text"); v.Start >= 0 && doc[v.Start] == '"' {
					if texts > 0 {
						text = append(text, '\n')
					}
					texts++
					text = jsonspan.Unescape(text, doc[v.Start+1:v.End-1])
				}
			}
			return true
		})
	default:
		text = append(text, doc[content.Start:content.End]...)
	}
	return text
}
