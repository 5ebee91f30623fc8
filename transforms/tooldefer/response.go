package tooldefer

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// A search is one call of the model to the search tool: hidden from the
// client, answered by the gateway in the next round's request.
type search struct {
	callID string
	args   []byte
}

// answerSearches ranks the deferred tools for each search, returning the
// tools to load and each search's output for the model.
func (d *Defer) answerSearches(x *transforms.Exchange, rec *record, searches []search) (found []string, outputs []string) {
	if rec.index == nil {
		rec.index = indexFor(rec.deferred, rec.defs)
	}
	seen := map[string]bool{}
	for _, s := range searches {
		query := ""
		if sp := jsonspan.Lookup(s.args, 0, "query"); sp.Start >= 0 {
			query, _ = jsonspan.StringValue(s.args, sp)
		}
		hits := rec.index.search(query, d.topK)
		var b strings.Builder
		if len(hits) == 0 {
			x.Tally("defer_searches", "none")
			b.WriteString("No tool matches " + quote(query) + ". Try other keywords, or go on without a tool.")
		} else {
			x.Tally("defer_searches", "found")
			b.WriteString("Loaded ")
			b.WriteString(strconv.Itoa(len(hits)))
			b.WriteString(" tools for " + quote(query) + "; they are callable now:")
			for _, h := range hits {
				b.WriteString("\n- " + h)
				if desc := description(rec.defs[h]); desc != "" {
					b.WriteString(": " + desc)
				}
				if !seen[h] {
					seen[h] = true
					found = append(found, h)
				}
			}
		}
		x.Decide("tools_defer", "search", quote(query)+" → "+strings.Join(hits, ","))
		outputs = append(outputs, b.String())
	}
	x.TallyN("defer_tools_loaded", "search", len(found))
	return found, outputs
}

func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return `"` + s + `"`
}

// description is a tool definition's description, cut short.
func description(def []byte) string {
	obj := 0
	if fn := jsonspan.Lookup(def, 0, "function"); fn.Start >= 0 && def[fn.Start] == '{' {
		obj = fn.Start
	}
	s, _ := jsonspan.StringValue(def, jsonspan.Lookup(def, obj, "description"))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// searchTurn is the history a round adds in protocol p: the answer's
// replayable items (Responses) or its text (Chat), the searches as calls,
// and the gateway's outputs.
func searchTurn(p transforms.Protocol, name string, items [][]byte, content, reasoning []byte, searches []search, outputs []string) []byte {
	var b []byte
	if p == transforms.ProtocolChat {
		b = append(b, `{"role":"assistant","content":`...)
		if len(content) > 0 {
			b = append(append(append(b, '"'), content...), '"')
		} else {
			b = append(b, "null"...)
		}
		if len(reasoning) > 0 {
			b = append(b, `,"reasoning_content":"`...)
			b = append(append(b, reasoning...), '"')
		}
		b = append(b, `,"tool_calls":[`...)
		for i, s := range searches {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = jsonspan.AppendStringStr(b, s.callID)
			b = append(b, `,"type":"function","function":{"name":`...)
			b = jsonspan.AppendStringStr(b, name)
			b = append(b, `,"arguments":`...)
			b = jsonspan.AppendString(b, s.args)
			b = append(b, `}}`...)
		}
		b = append(b, `]}`...)
		for i, s := range searches {
			b = append(b, `,{"role":"tool","tool_call_id":`...)
			b = jsonspan.AppendStringStr(b, s.callID)
			b = append(b, `,"content":`...)
			b = jsonspan.AppendStringStr(b, outputs[i])
			b = append(b, '}')
		}
		return b
	}
	for _, it := range items {
		if !transforms.ReplayableItem(it) {
			continue
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	for i, s := range searches {
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"function_call","call_id":`...)
		b = jsonspan.AppendStringStr(b, s.callID)
		b = append(b, `,"name":`...)
		b = jsonspan.AppendStringStr(b, name)
		b = append(b, `,"arguments":`...)
		b = jsonspan.AppendString(b, s.args)
		b = append(b, `},{"type":"function_call_output","call_id":`...)
		b = jsonspan.AppendStringStr(b, s.callID)
		b = append(b, `,"output":`...)
		b = jsonspan.AppendStringStr(b, outputs[i])
		b = append(b, '}')
	}
	return b
}

// takeRound answers an answer's searches with a round; false when no round
// is left (the searches are then dropped: the client cannot run them).
func (d *Defer) takeRound(x *transforms.Exchange, rec *record, items [][]byte, content, reasoning []byte, searches []search) bool {
	if rd := rec.round; rd != nil && rd.Err != nil {
		// The answer comes again because its round failed: it ends
		// without the search, as if no round were left.
		rec.round = nil
		x.TallyN("defer_searches", "failed", len(searches))
		x.Decide("tools_defer", "search_dropped", "the search's round failed")
		return false
	}
	if !x.RoundsLeft() {
		x.TallyN("defer_searches", "no_round", len(searches))
		x.Decide("tools_defer", "search_dropped", "no round left")
		return false
	}
	found, outputs := d.answerSearches(x, rec, searches)
	body, err := rec.roundBody(found, searchTurn(rec.proto, rec.searchName, items, content, reasoning, searches, outputs))
	if err == nil {
		rec.round, err = x.StartRound(body, "search")
	}
	if err != nil {
		x.Decide("tools_defer", "search_dropped", err.Error())
		return false
	}
	return true
}

// RewriteResponse hides the searches of a complete answer and answers
// them with a round.
func (d *Defer) RewriteResponse(x *transforms.Exchange, body []byte) ([]byte, error) {
	rec := d.record(x)
	if !rec.active || !jsonspan.Valid(body) {
		return body, nil
	}
	if x.Protocol() == transforms.ProtocolChat {
		return d.chatBody(x, rec, body), nil
	}
	out := jsonspan.Lookup(body, 0, "output")
	if out.Start < 0 || body[out.Start] != '[' {
		return body, nil
	}
	var items [][]byte
	var keep []jsonspan.Span
	var searches []search
	others := 0
	jsonspan.EachElement(body, out.Start, func(el jsonspan.Span) bool {
		it := body[el.Start:el.End]
		typ, _ := jsonspan.StringValue(it, jsonspan.Lookup(it, 0, "type"))
		name, _ := jsonspan.StringValue(it, jsonspan.Lookup(it, 0, "name"))
		if typ == "function_call" && name == rec.searchName {
			id, _ := jsonspan.StringValue(it, jsonspan.Lookup(it, 0, "call_id"))
			args, _ := jsonspan.StringValue(it, jsonspan.Lookup(it, 0, "arguments"))
			searches = append(searches, search{callID: id, args: []byte(args)})
			return true
		}
		if strings.HasSuffix(typ, "_call") {
			others++
		}
		items = append(items, it)
		keep = append(keep, el)
		return true
	})
	if len(searches) == 0 {
		return body, nil
	}
	if others == 0 {
		d.takeRound(x, rec, items, nil, nil, searches)
	}
	return jsonspan.Apply(body, []jsonspan.Edit{{Start: out.Start, End: out.End, Repl: jsonspan.AppendArray(nil, body, keep)}}), nil
}

// chatBody hides the searches of a Chat answer's one choice.
func (d *Defer) chatBody(x *transforms.Exchange, rec *record, body []byte) []byte {
	choices := jsonspan.Lookup(body, 0, "choices")
	if choices.Start < 0 || body[choices.Start] != '[' {
		return body
	}
	var ch jsonspan.Span
	n := 0
	jsonspan.EachElement(body, choices.Start, func(el jsonspan.Span) bool {
		ch = el
		n++
		return true
	})
	if n != 1 || body[ch.Start] != '{' {
		return body
	}
	msg := jsonspan.Lookup(body, ch.Start, "message")
	if msg.Start < 0 || body[msg.Start] != '{' {
		return body
	}
	tcs := jsonspan.Lookup(body, msg.Start, "tool_calls")
	if tcs.Start < 0 || body[tcs.Start] != '[' {
		return body
	}
	var keep []jsonspan.Span
	var searches []search
	jsonspan.EachElement(body, tcs.Start, func(el jsonspan.Span) bool {
		fn := jsonspan.Lookup(body, el.Start, "function")
		name := ""
		if fn.Start >= 0 {
			name, _ = jsonspan.StringValue(body, jsonspan.Lookup(body, fn.Start, "name"))
		}
		if name != rec.searchName {
			keep = append(keep, el)
			return true
		}
		id, _ := jsonspan.StringValue(body, jsonspan.Lookup(body, el.Start, "id"))
		args, _ := jsonspan.StringValue(body, jsonspan.Lookup(body, fn.Start, "arguments"))
		searches = append(searches, search{callID: id, args: []byte(args)})
		return true
	})
	if len(searches) == 0 {
		return body
	}
	var content, reasoning []byte
	if sp := jsonspan.Lookup(body, msg.Start, "content"); sp.Start >= 0 && body[sp.Start] == '"' {
		content = body[sp.Start+1 : sp.End-1]
	}
	if sp := jsonspan.Lookup(body, msg.Start, "reasoning_content"); sp.Start >= 0 && body[sp.Start] == '"' {
		reasoning = body[sp.Start+1 : sp.End-1]
	}
	asked := len(keep) == 0 && d.takeRound(x, rec, nil, content, reasoning, searches)
	edits := []jsonspan.Edit{}
	if len(keep) == 0 {
		edits = append(edits, jsonspan.RemoveMember(body, tcs))
		if f := jsonspan.Lookup(body, ch.Start, "finish_reason"); !asked && jsonspan.IsString(body, f, "tool_calls") {
			edits = append(edits, jsonspan.Edit{Start: f.Start, End: f.End, Repl: []byte(`"stop"`)})
		}
	} else {
		edits = append(edits, jsonspan.Edit{Start: tcs.Start, End: tcs.End, Repl: jsonspan.AppendArray(nil, body, keep)})
	}
	return jsonspan.Apply(body, edits)
}

// isSearchAdded reports whether a Responses output_item.added event opens
// a call to the search tool.
func isSearchItem(d []byte, it jsonspan.Span, name string) bool {
	return jsonspan.IsString(d, jsonspan.Lookup(d, it.Start, "type"), "function_call") &&
		bytes.Equal(stringBytes(d, jsonspan.Lookup(d, it.Start, "name")), []byte(name))
}

func stringBytes(d []byte, sp jsonspan.Span) []byte {
	s, ok := jsonspan.StringValue(d, sp)
	if !ok {
		return nil
	}
	return []byte(s)
}
