package customtools

import (
	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// Chat Completions shapes of field_custom_tools_to_function's request side.
// Chat nests the tool under a key named after its type
// ({"type":"custom","custom":{…}}) and correlates calls by their id, which
// is kept; tool messages need no change. The response side is the call
// tracker's.

// chatDefinition rewrites {"type":"custom","custom":{name,description,format}}
// into {"type":"function","function":{name,description,parameters,strict}}.
func (p *customPlan) chatDefinition(n *transforms.ToolNode) []byte {
	doc := p.w.Doc
	w := jsonspan.NewObj(nil)
	jsonspan.Retype(&w, doc, n.Span(), "function", func(w *jsonspan.ObjWriter, m jsonspan.Member) bool {
		switch {
		case m.KeyIs(doc, "custom") && doc[m.Value.Start] == '{':
			w.Key("function")
			w.B = p.functionBody(w.B, m.Value, n.Name, false)
		case m.KeyIs(doc, "function"):
			// a stray function object would clash with the one we write
		default:
			return false
		}
		return true
	})
	return w.Close()
}

// chatHistoryCall turns a custom entry of an assistant message's
// tool_calls into a function call with its input wrapped once.
func (p *customPlan) chatHistoryCall(dst []byte, n *transforms.ToolNode) []byte {
	doc := p.w.Doc
	w := jsonspan.NewObj(dst)
	jsonspan.Retype(&w, doc, n.Span(), "function", func(w *jsonspan.ObjWriter, m jsonspan.Member) bool {
		if !m.KeyIs(doc, "custom") || doc[m.Value.Start] != '{' {
			return false
		}
		w.Key("function")
		fw := jsonspan.NewObj(w.B)
		input := jsonspan.NoSpan()
		jsonspan.EachMember(doc, m.Value.Start, func(c jsonspan.Member) bool {
			if c.KeyIs(doc, "input") {
				input = c.Value
			} else {
				fw.Raw(doc, c)
			}
			return true
		})
		wrapInput(&fw, doc, input, p.sized)
		w.B = fw.Close()
		return true
	})
	return w.Close()
}
