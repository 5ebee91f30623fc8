package preflight

import (
	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// Calls leaked as markup in a complete answer's text become calls of the
// answer before it is checked, as in a stream.

// leakResponses returns the body with each message's markup turned into
// function_call items after it, or body itself when there is none.
func (rec *record) leakResponses(x *transforms.Exchange, body []byte, out jsonspan.Span) []byte {
	if !mayOpen(body[out.Start:out.End]) {
		return body
	}
	arr := []byte{'['}
	changed := false
	n := 0
	add := func(el []byte) {
		if n > 0 {
			arr = append(arr, ',')
		}
		arr = append(arr, el...)
		n++
	}
	jsonspan.EachElement(body, out.Start, func(el jsonspan.Span) bool {
		item := body[el.Start:el.End]
		if item[0] != '{' || !jsonspan.IsString(item, jsonspan.Lookup(item, 0, "type"), "message") {
			add(item)
			return true
		}
		content := jsonspan.Lookup(item, 0, "content")
		var calls []leakedCall
		var edits []jsonspan.Edit
		if content.Start >= 0 && item[content.Start] == '[' {
			jsonspan.EachElement(item, content.Start, func(part jsonspan.Span) bool {
				t := jsonspan.Lookup(item, part.Start, "text")
				if t.Start < 0 || item[t.Start] != '"' || !mayOpen(item[t.Start:t.End]) {
					return true
				}
				text := jsonspan.Unescape(nil, item[t.Start+1:t.End-1])
				before, cs, after, found := extractMarkup(text, rec.index().paramType)
				if found {
					calls = append(calls, cs...)
					kept := append(append([]byte(nil), before...), after...)
					edits = append(edits, jsonspan.Edit{Start: t.Start, End: t.End, Repl: jsonspan.AppendString(nil, kept)})
				}
				return true
			})
		}
		if len(calls) == 0 {
			add(item)
			return true
		}
		changed = true
		x.Tally("preflight_invalid", "markup")
		x.Tally("preflight_repaired", "markup")
		add(jsonspan.Apply(item, edits))
		for _, lc := range calls {
			id := leakedID()
			c := []byte(`{"type":"function_call","id":"fc_`)
			c = append(c, id[len("call_"):]...)
			c = append(c, `","call_id":`...)
			c = jsonspan.AppendStringStr(c, id)
			c = append(c, `,"name":`...)
			c = jsonspan.AppendStringStr(c, lc.Name)
			c = append(c, `,"arguments":`...)
			c = jsonspan.AppendString(c, lc.Args)
			add(append(c, `,"status":"completed"}`...))
		}
		return true
	})
	if !changed {
		return body
	}
	return replaceSpan(body, out, append(arr, ']'))
}

// leakChat returns the body with the markup of its one choice's content
// turned into tool_calls, or body itself when there is none.
func (rec *record) leakChat(x *transforms.Exchange, body []byte, ch, msg jsonspan.Span) []byte {
	content := jsonspan.Lookup(body, msg.Start, "content")
	if content.Start < 0 || body[content.Start] != '"' || !mayOpen(body[content.Start:content.End]) {
		return body
	}
	text := jsonspan.Unescape(nil, body[content.Start+1:content.End-1])
	before, calls, after, found := extractMarkup(text, rec.index().paramType)
	if !found {
		return body
	}
	x.Tally("preflight_invalid", "markup")
	x.Tally("preflight_repaired", "markup")
	var entries []byte
	tcs := jsonspan.Lookup(body, msg.Start, "tool_calls")
	for _, lc := range calls {
		if len(entries) > 0 {
			entries = append(entries, ',')
		}
		entries = append(entries, `{"id":`...)
		entries = jsonspan.AppendStringStr(entries, leakedID())
		entries = append(entries, `,"type":"function","function":{"name":`...)
		entries = jsonspan.AppendStringStr(entries, lc.Name)
		entries = append(entries, `,"arguments":`...)
		entries = jsonspan.AppendString(entries, lc.Args)
		entries = append(entries, `}}`...)
	}
	kept := append(append([]byte(nil), before...), after...)
	repl := []byte("null")
	if len(kept) > 0 {
		repl = jsonspan.AppendString(nil, kept)
	}
	edits := []jsonspan.Edit{{Start: content.Start, End: content.End, Repl: repl}}
	if tcs.Start >= 0 && body[tcs.Start] == '[' {
		edits = append(edits, jsonspan.Edit{Start: tcs.Start, End: tcs.End, Repl: transforms.AppendToArray(body[tcs.Start:tcs.End], jsonspan.Span{Start: 0, End: tcs.End - tcs.Start}, entries)})
	} else {
		edits = append(edits, jsonspan.Edit{Start: msg.End - 1, End: msg.End - 1, Repl: append(append([]byte(`,"tool_calls":[`), entries...), ']')})
	}
	if f := jsonspan.Lookup(body, ch.Start, "finish_reason"); f.Start >= 0 && jsonspan.IsString(body, f, "stop") {
		edits = append(edits, jsonspan.Edit{Start: f.Start, End: f.End, Repl: []byte(`"tool_calls"`)})
	}
	return jsonspan.Apply(body, edits)
}
