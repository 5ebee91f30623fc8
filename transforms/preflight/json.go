package preflight

import (
	"bytes"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// RewriteResponse checks the calls of a complete answer. A body with
// nothing to change is returned as it came.
func (p *Preflight) RewriteResponse(x *transforms.Exchange, body []byte) ([]byte, error) {
	rec := p.record(x)
	if rec.body == nil {
		return body, nil
	}
	var out []byte
	var err error
	if x.Protocol() == transforms.ProtocolChat {
		out, err = p.chatBody(x, rec, body)
	} else {
		out, err = p.responsesBody(x, rec, body)
	}
	return out, err
}

// responsesBody checks a Responses answer's output items.
func (p *Preflight) responsesBody(x *transforms.Exchange, rec *record, body []byte) ([]byte, error) {
	orig := body
	out := jsonspan.Lookup(body, 0, "output")
	if out.Start < 0 || body[out.Start] != '[' {
		return body, nil
	}
	a := p.beginAnswer(x, rec)
	leaked := body
	if p.markup(x) {
		if leaked = rec.leakResponses(x, body, out); !jsonspan.SameSlice(leaked, body) {
			body = leaked
			out = jsonspan.Lookup(body, 0, "output")
		}
	}
	// Only a completed answer is asked again: one cut at its limit would
	// be cut again, a failed one has nothing to mend.
	st := jsonspan.Lookup(body, 0, "status")
	incomplete := st.Start >= 0 && !jsonspan.IsString(body, st, "completed")
	type item struct {
		el   jsonspan.Span
		v    *verdict
		call bool
	}
	var items []item
	// One walk of the output: a call item's fields are read while its end
	// is found.
	jsonspan.WalkElements(body, out.Start, func(at int) int {
		if body[at] != '{' || !isCallItem(body, at) {
			e := jsonspan.SkipValue(body, at)
			items = append(items, item{el: jsonspan.Span{Start: at, End: e}})
			return e
		}
		f, e := callFieldsEnd(body, at)
		it := item{el: jsonspan.Span{Start: at, End: e}}
		switch f.typ {
		case "function_call":
			v := a.judge(f.ns, f.name, f.args)
			it.v, it.call = &v, true
		case "custom_tool_call":
			v := a.judge(f.ns, f.name, nil)
			it.v, it.call = &v, true
		}
		items = append(items, it)
		return e
	})
	changed := a.repair || !jsonspan.SameSlice(leaked, orig)
	for _, it := range items {
		if it.v != nil && (it.v.changed || it.v.dup || !it.v.valid()) {
			changed = true
		}
	}
	if !changed || !jsonspan.Valid(orig) {
		// Nothing to change, or a malformed body: the walks read what
		// they could of it, and nothing is built on that.
		return orig, nil
	}
	// A re-ask for the invalid calls, when one may still be taken.
	asked := false
	ids := true // a re-ask answers each call by its id
	for _, it := range items {
		if it.call && callFields(body, it.el.Start).callID == "" {
			ids = false
		}
	}
	if a.invalid > 0 && a.reaskable && !incomplete && ids {
		var hist [][]byte
		var outs []callOutput
		for _, it := range items {
			if it.v != nil && it.v.dup {
				continue
			}
			el := body[it.el.Start:it.el.End]
			hist = append(hist, el)
			if it.call {
				f := callFields(body, it.el.Start)
				text := validNote
				if !it.v.valid() {
					text = it.v.message
				}
				outs = append(outs, callOutput{callID: f.callID, custom: f.typ == "custom_tool_call", text: text})
			}
		}
		if req, err := reaskResponses(rec.reaskBase(), hist, outs); err == nil {
			asked = a.reask(req)
		} else {
			x.Decide("preflight", "no_reask", err.Error())
		}
	}
	// What the client sees of this answer.
	arr := []byte{'['}
	n := 0
	for _, it := range items {
		el := body[it.el.Start:it.el.End]
		switch {
		case !it.call && a.repair:
			continue // a re-ask's text is not shown again
		case it.v != nil && it.v.dup:
			continue
		case it.v != nil && !it.v.valid():
			if asked {
				continue
			}
			a.outcome(it.v)
			switch p.onFailure {
			case failDrop:
				continue
			case failError:
				return nil, invalidError(it.v)
			}
		case it.v != nil && it.v.changed:
			el = rewriteItem(el, it.v)
		}
		if n > 0 {
			arr = append(arr, ',')
		}
		arr = append(arr, el...)
		n++
	}
	arr = append(arr, ']')
	return replaceSpan(body, out, arr), nil
}

// fields are what a call item says about itself.
type fields struct {
	typ, ns, name, callID string
	args                  []byte // decoded
}

func callFields(doc []byte, at int) fields {
	var sp [5]jsonspan.Span
	jsonspan.ObjectFields(doc, at, callFieldNames, sp[:])
	return readCallFields(doc, sp)
}

// callFieldsEnd is callFields that also returns the index just past the
// item (negative when it is malformed), in the same walk.
func callFieldsEnd(doc []byte, at int) (fields, int) {
	var sp [5]jsonspan.Span
	end := jsonspan.ObjectFieldsEnd(doc, at, callFieldNames, sp[:])
	return readCallFields(doc, sp), end
}

var callFieldNames = []string{"type", "namespace", "name", "call_id", "arguments"}

func readCallFields(doc []byte, sp [5]jsonspan.Span) fields {
	var f fields
	f.typ, _ = jsonspan.StringValue(doc, sp[0])
	f.ns, _ = jsonspan.StringValue(doc, sp[1])
	f.name, _ = jsonspan.StringValue(doc, sp[2])
	f.callID, _ = jsonspan.StringValue(doc, sp[3])
	if a := sp[4]; a.Start >= 0 && doc[a.Start] == '"' {
		f.args = jsonspan.Unescape(nil, doc[a.Start+1:a.End-1])
	}
	return f
}

// rewriteItem gives a call item the repaired name and arguments.
func rewriteItem(el []byte, v *verdict) []byte {
	w := jsonspan.NewObj(nil)
	jsonspan.EachMember(el, 0, func(m jsonspan.Member) bool {
		switch {
		case m.KeyIs(el, "name"):
			w.Key("name")
			w.B = jsonspan.AppendStringStr(w.B, v.name)
		case m.KeyIs(el, "arguments"):
			w.Key("arguments")
			w.B = jsonspan.AppendString(w.B, v.args)
		default:
			w.Raw(el, m)
		}
		return true
	})
	return w.Close()
}

// chatBody checks the calls of a Chat answer's one choice.
func (p *Preflight) chatBody(x *transforms.Exchange, rec *record, body []byte) ([]byte, error) {
	cp, ok := parseChat(body)
	if !ok {
		return body, nil // not one choice with a message: not checked
	}
	orig := body
	if !p.markup(x) {
		// Markup is not looked for.
	} else if body = rec.leakChat(x, body, cp.ch, cp.msg); !jsonspan.SameSlice(body, orig) {
		if cp, ok = parseChat(body); !ok {
			return orig, nil
		}
	}
	ch, msg, tcs := cp.ch, cp.msg, cp.tcs
	a := p.beginAnswer(x, rec)
	if tcs.Start < 0 || body[tcs.Start] != '[' {
		if !a.repair {
			return body, nil
		}
		return hideChatText(body, ch, msg, nil), nil
	}
	type call struct {
		el jsonspan.Span
		c  chatCall
		v  verdict
	}
	var calls []call
	for _, e := range cp.entries {
		c := call{el: e.el}
		if f := e.f; f.Call {
			id, _ := jsonspan.StringValue(f.ID, jsonspan.Span{Start: 0, End: len(f.ID)})
			args := jsonspan.Unescape(nil, f.Args)
			c.c = chatCall{id: id, name: f.Name, args: args}
			if f.Custom {
				// A custom tool's call: its name is checked, not its input.
				c.c.args = nil
				c.v = a.judge("", f.Name, nil)
			} else {
				c.v = a.judge("", f.Name, args)
			}
		}
		calls = append(calls, c)
	}
	mf := [3]jsonspan.Span{tcs, cp.content, cp.reasoning}
	changed := a.repair || !jsonspan.SameSlice(body, orig)
	for _, c := range calls {
		if c.v.changed || c.v.dup || !c.v.valid() {
			changed = true
		}
	}
	if !changed || !jsonspan.Valid(orig) {
		// Nothing to change, or a malformed body: the walks read what
		// they could of it, and nothing is built on that.
		return orig, nil
	}
	finish := jsonspan.Lookup(body, ch.Start, "finish_reason")
	asked := false
	if a.invalid > 0 && a.reaskable && !jsonspan.IsString(body, finish, "length") {
		turn := chatTurn{}
		if sp := mf[1]; sp.Start >= 0 && body[sp.Start] == '"' {
			turn.content = body[sp.Start:sp.End]
		}
		if sp := mf[2]; sp.Start >= 0 && body[sp.Start] == '"' {
			turn.reasoning = body[sp.Start:sp.End]
		}
		var outs []callOutput
		for k, c := range calls {
			if c.v.dup {
				continue
			}
			cc := c.c
			if cc.id == "" {
				cc.id = reaskCallID(k)
			}
			turn.calls = append(turn.calls, cc)
			text := validNote
			if !c.v.valid() {
				text = c.v.message
			}
			outs = append(outs, callOutput{callID: cc.id, text: text})
		}
		if req, err := reaskChat(rec.reaskBase(), turn, outs); err == nil {
			asked = a.reask(req)
		} else {
			x.Decide("preflight", "no_reask", err.Error())
		}
	}
	arr := []byte{'['}
	n := 0
	for _, c := range calls {
		el := body[c.el.Start:c.el.End]
		switch {
		case c.v.dup:
			continue
		case !c.v.valid():
			if asked {
				continue
			}
			a.outcome(&c.v)
			switch p.onFailure {
			case failDrop:
				continue
			case failError:
				return nil, invalidError(&c.v)
			}
		case c.v.changed:
			el = rewriteChatCall(el, &c.v)
		}
		if n > 0 {
			arr = append(arr, ',')
		}
		arr = append(arr, el...)
		n++
	}
	arr = append(arr, ']')
	if a.repair {
		return hideChatText(body, ch, msg, arr), nil
	}
	out := replaceSpan(body, tcs, arr)
	if n == 0 && !asked {
		// No call is left: the answer ends as a plain one.
		if f := jsonspan.Lookup(out, jsonspan.Lookup(out, 0, "choices").Start+1, "finish_reason"); f.Start >= 0 {
			out = replaceSpan(out, f, []byte(`"stop"`))
		}
	}
	return out, nil
}

// hideChatText returns a re-ask's answer as the client sees it: its calls
// (calls, a JSON array, or none) without the text around them.
func hideChatText(body []byte, ch, msg jsonspan.Span, calls []byte) []byte {
	w := jsonspan.NewObj(nil)
	jsonspan.EachMember(body, msg.Start, func(m jsonspan.Member) bool {
		switch {
		case m.KeyIs(body, "content"):
			w.Key("content")
			w.B = append(w.B, "null"...)
		case m.KeyIs(body, "reasoning_content"), m.KeyIs(body, "reasoning"):
		case m.KeyIs(body, "tool_calls"):
			if calls != nil && !bytes.Equal(calls, []byte("[]")) {
				w.Key("tool_calls")
				w.B = append(w.B, calls...)
			}
		default:
			w.Raw(body, m)
		}
		return true
	})
	return replaceSpan(body, msg, w.Close())
}

// rewriteChatCall gives a tool_calls entry the repaired name and
// arguments.
func rewriteChatCall(el []byte, v *verdict) []byte {
	w := jsonspan.NewObj(nil)
	jsonspan.EachMember(el, 0, func(m jsonspan.Member) bool {
		if m.KeyIs(el, "custom") && el[m.Value.Start] == '{' {
			// A custom call: its name only; the input is freeform.
			w.Key("custom")
			obj := el[m.Value.Start:m.Value.End]
			cw := jsonspan.NewObj(nil)
			jsonspan.EachMember(obj, 0, func(cm jsonspan.Member) bool {
				if cm.KeyIs(obj, "name") {
					cw.Key("name")
					cw.B = jsonspan.AppendStringStr(cw.B, v.name)
				} else {
					cw.Raw(obj, cm)
				}
				return true
			})
			w.B = append(w.B, cw.Close()...)
			return true
		}
		if m.KeyIs(el, "function") {
			w.Key("function")
			w.B = append(w.B, rewriteItem(el[m.Value.Start:m.Value.End], v)...)
			return true
		}
		w.Raw(el, m)
		return true
	})
	return w.Close()
}

// chatParse is what a Chat answer's check reads of it, in one walk that
// crosses each call's arguments once.
type chatParse struct {
	ch, msg, tcs, content, reasoning jsonspan.Span
	entries                          []chatEntry
}

type chatEntry struct {
	el jsonspan.Span
	f  transforms.ChatFragment
}

// parseChat reads the one choice of a Chat answer; false when there is
// not exactly one choice with a message object (n > 1 is not checked).
func parseChat(body []byte) (chatParse, bool) {
	cp := chatParse{ch: jsonspan.NoSpan(), msg: jsonspan.NoSpan(), tcs: jsonspan.NoSpan(),
		content: jsonspan.NoSpan(), reasoning: jsonspan.NoSpan()}
	n := 0
	msgFn := func(k jsonspan.Span, v int) int {
		switch jsonspan.KeyName(body, k) {
		case "tool_calls":
			if body[v] != '[' {
				break
			}
			end := jsonspan.WalkElements(body, v, func(at int) int {
				if body[at] != '{' {
					return jsonspan.SkipValue(body, at)
				}
				f, e := transforms.ReadChatFragment(body, at)
				if e > at {
					cp.entries = append(cp.entries, chatEntry{el: jsonspan.Span{Start: at, End: e}, f: f})
				}
				return e
			})
			cp.tcs = jsonspan.Span{Start: v, End: end}
			return end
		case "content":
			e := jsonspan.SkipValue(body, v)
			cp.content = jsonspan.Span{Start: v, End: e}
			return e
		case "reasoning_content":
			e := jsonspan.SkipValue(body, v)
			cp.reasoning = jsonspan.Span{Start: v, End: e}
			return e
		}
		return jsonspan.SkipValue(body, v)
	}
	choiceFn := func(k jsonspan.Span, v int) int {
		if jsonspan.KeyName(body, k) == "message" && body[v] == '{' {
			e := jsonspan.WalkMembers(body, v, msgFn)
			cp.msg = jsonspan.Span{Start: v, End: e}
			return e
		}
		return jsonspan.SkipValue(body, v)
	}
	end := jsonspan.WalkMembers(body, 0, func(k jsonspan.Span, v int) int {
		if jsonspan.KeyName(body, k) != "choices" || body[v] != '[' {
			return jsonspan.SkipValue(body, v)
		}
		return jsonspan.WalkElements(body, v, func(at int) int {
			n++
			if n > 1 || body[at] != '{' {
				return jsonspan.SkipValue(body, at)
			}
			e := jsonspan.WalkMembers(body, at, choiceFn)
			cp.ch = jsonspan.Span{Start: at, End: e}
			return e
		})
	})
	if end < 0 || n != 1 || cp.msg.Start < 0 || cp.msg.End < 0 {
		return cp, false
	}
	return cp, true
}

// isCallItem reports whether the output item at doc[at] is a function or
// custom tool call: its type, read first (it leads the item), spares a
// message's text a second crossing.
func isCallItem(doc []byte, at int) bool {
	t := jsonspan.Lookup(doc, at, "type")
	return jsonspan.IsString(doc, t, "function_call") || jsonspan.IsString(doc, t, "custom_tool_call")
}
