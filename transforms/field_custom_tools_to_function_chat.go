package transforms

// Chat Completions shapes of field_custom_tools_to_function's request side.
// Chat nests the tool under a key named after its type
// ({"type":"custom","custom":{…}}) and correlates calls by their id, which
// is kept; tool messages need no change. The response side is the call
// tracker's.

// chatDefinition rewrites {"type":"custom","custom":{name,description,format}}
// into {"type":"function","function":{name,description,parameters,strict}}.
func (p *customPlan) chatDefinition(n *ToolNode) []byte {
	doc := p.w.Doc
	w := newObj(nil)
	retype(&w, doc, span{n.Start, n.End}, "function", func(w *objWriter, m member) bool {
		switch {
		case m.keyIs(doc, "custom") && doc[m.value.start] == '{':
			w.key("function")
			w.b = p.functionBody(w.b, m.value, n.Name, false)
		case m.keyIs(doc, "function"):
			// a stray function object would clash with the one we write
		default:
			return false
		}
		return true
	})
	return w.close()
}

// chatHistoryCall turns a custom entry of an assistant message's
// tool_calls into a function call with its input wrapped once.
func (p *customPlan) chatHistoryCall(n *ToolNode) []byte {
	doc := p.w.Doc
	w := newObj(make([]byte, 0, n.End-n.Start+64))
	retype(&w, doc, span{n.Start, n.End}, "function", func(w *objWriter, m member) bool {
		if !m.keyIs(doc, "custom") || doc[m.value.start] != '{' {
			return false
		}
		w.key("function")
		fw := newObj(w.b)
		input := span{-1, -1}
		eachMember(doc, m.value.start, func(c member) bool {
			if c.keyIs(doc, "input") {
				input = c.value
			} else {
				fw.raw(doc, c)
			}
			return true
		})
		wrapInput(&fw, doc, input)
		w.b = fw.close()
		return true
	})
	return w.close()
}
