package preflight

import (
	"bytes"
	"errors"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// A re-ask is the request the answer came for, with the answer's turn and
// one output per call appended to its history: for an invalid call what
// was wrong, for a valid one that it stands. The model then makes the
// invalid calls again; the rules nearer the upstream convert the history
// as they convert any client's.

// callOutput is the output a re-ask gives one call.
type callOutput struct {
	callID string
	custom bool // a custom tool's call: its output item differs
	text   string
}

// appendOutputs appends the outputs of a Responses re-ask.
func appendResponsesOutputs(dst []byte, outs []callOutput) []byte {
	for i, o := range outs {
		if i > 0 {
			dst = append(dst, ',')
		}
		if o.custom {
			dst = append(dst, `{"type":"custom_tool_call_output","call_id":`...)
		} else {
			dst = append(dst, `{"type":"function_call_output","call_id":`...)
		}
		dst = jsonspan.AppendStringStr(dst, o.callID)
		dst = append(dst, `,"output":`...)
		dst = jsonspan.AppendStringStr(dst, o.text)
		dst = append(dst, '}')
	}
	return dst
}

// historyItem reports whether an output item of the answer goes into a
// re-ask's input: the assistant's messages, its calls, and reasoning the
// upstream can read back (encrypted_content; a reasoning item that only
// names a stored response would not be found).
func historyItem(item []byte) bool {
	typ, _ := jsonspan.StringValue(item, jsonspan.Lookup(item, 0, "type"))
	switch typ {
	case "message", "function_call", "custom_tool_call":
		return true
	case "reasoning":
		ec := jsonspan.Lookup(item, 0, "encrypted_content")
		return ec.Start >= 0 && !jsonspan.IsNull(item, ec)
	}
	return false
}

// reaskResponses builds a Responses re-ask from req: its input (a string
// becomes a user message) followed by the answer's items and the outputs.
func reaskResponses(req []byte, items [][]byte, outs []callOutput) ([]byte, error) {
	var add []byte
	for _, it := range items {
		if !historyItem(it) {
			continue
		}
		if len(add) > 0 {
			add = append(add, ',')
		}
		add = append(add, it...)
	}
	if len(outs) > 0 {
		if len(add) > 0 {
			add = append(add, ',')
		}
		add = appendResponsesOutputs(add, outs)
	}
	in := jsonspan.Lookup(req, 0, "input")
	switch {
	case in.Start < 0:
		return insertMember(req, "input", append(append([]byte{'['}, add...), ']'))
	case req[in.Start] == '"':
		v := []byte(`[{"role":"user","content":`)
		v = append(v, req[in.Start:in.End]...)
		v = append(v, '}', ',')
		v = append(v, add...)
		v = append(v, ']')
		return replaceSpan(req, in, v), nil
	case req[in.Start] == '[':
		return appendToArray(req, in, add), nil
	}
	return nil, errors.New("the request's input is neither a string nor a list")
}

// chatTurn is the assistant's turn of a Chat answer, for a re-ask.
type chatTurn struct {
	content, reasoning []byte // JSON string literals, or nil
	calls              []chatCall
}

type chatCall struct {
	id, name string
	args     []byte
}

// reaskChat builds a Chat re-ask from req: its messages followed by the
// assistant's turn and one tool message per call.
func reaskChat(req []byte, turn chatTurn, outs []callOutput) ([]byte, error) {
	add := []byte(`{"role":"assistant","content":`)
	if turn.content != nil {
		add = append(add, turn.content...)
	} else {
		add = append(add, "null"...)
	}
	if turn.reasoning != nil {
		add = append(add, `,"reasoning_content":`...)
		add = append(add, turn.reasoning...)
	}
	add = append(add, `,"tool_calls":[`...)
	for i, c := range turn.calls {
		if i > 0 {
			add = append(add, ',')
		}
		add = append(add, `{"id":`...)
		add = jsonspan.AppendStringStr(add, c.id)
		add = append(add, `,"type":"function","function":{"name":`...)
		add = jsonspan.AppendStringStr(add, c.name)
		add = append(add, `,"arguments":`...)
		add = jsonspan.AppendString(add, c.args)
		add = append(add, `}}`...)
	}
	add = append(add, `]}`...)
	for _, o := range outs {
		add = append(add, `,{"role":"tool","tool_call_id":`...)
		add = jsonspan.AppendStringStr(add, o.callID)
		add = append(add, `,"content":`...)
		add = jsonspan.AppendStringStr(add, o.text)
		add = append(add, '}')
	}
	msgs := jsonspan.Lookup(req, 0, "messages")
	if msgs.Start < 0 || req[msgs.Start] != '[' {
		return nil, errors.New("the request has no messages list")
	}
	return appendToArray(req, msgs, add), nil
}

// appendToArray returns doc with elems (comma-separated JSON values)
// appended to the array at arr.
func appendToArray(doc []byte, arr jsonspan.Span, elems []byte) []byte {
	if len(elems) == 0 {
		return doc
	}
	end := arr.End - 1 // the closing bracket
	empty := jsonspan.SkipSpace(doc, arr.Start+1) == end
	out := make([]byte, 0, len(doc)+len(elems)+1)
	out = append(out, doc[:end]...)
	if !empty {
		out = append(out, ',')
	}
	out = append(out, elems...)
	return append(out, doc[end:]...)
}

func replaceSpan(doc []byte, sp jsonspan.Span, v []byte) []byte {
	out := make([]byte, 0, len(doc)-(sp.End-sp.Start)+len(v))
	out = append(out, doc[:sp.Start]...)
	out = append(out, v...)
	return append(out, doc[sp.End:]...)
}

// insertMember adds a member to the top-level object doc.
func insertMember(doc []byte, name string, v []byte) ([]byte, error) {
	t := bytes.TrimRight(doc, " \t\r\n")
	if len(t) < 2 || t[len(t)-1] != '}' {
		return nil, errors.New("the request is not a JSON object")
	}
	end := len(t) - 1
	empty := jsonspan.SkipSpace(doc, bytes.IndexByte(doc, '{')+1) == end
	out := append([]byte(nil), doc[:end]...)
	if !empty {
		out = append(out, ',')
	}
	out = jsonspan.AppendStringStr(out, name)
	out = append(out, ':')
	out = append(out, v...)
	return append(out, doc[end:]...), nil
}
