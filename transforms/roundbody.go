package transforms

import (
	"bytes"
	"errors"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Helpers for the request of a round: the request the answer came for,
// with the answer's turn and the gateway's tool outputs appended to its
// history.

// AppendHistory returns req, a request body in protocol p, with items
// (JSON values separated by commas) appended to its history: Responses'
// input (a string input becomes a user message first; none becomes a
// list) or Chat's messages.
func AppendHistory(p Protocol, req, items []byte) ([]byte, error) {
	if len(items) == 0 {
		return req, nil
	}
	switch p {
	case ProtocolChat:
		msgs := jsonspan.Lookup(req, 0, "messages")
		if msgs.Start < 0 || req[msgs.Start] != '[' {
			return nil, errors.New("the request has no messages list")
		}
		return AppendToArray(req, msgs, items), nil
	case ProtocolResponses:
		in := jsonspan.Lookup(req, 0, "input")
		switch {
		case in.Start < 0:
			return insertMember(req, "input", append(append([]byte{'['}, items...), ']'))
		case req[in.Start] == '"':
			v := []byte(`[{"role":"user","content":`)
			v = append(v, req[in.Start:in.End]...)
			v = append(v, '}', ',')
			v = append(v, items...)
			v = append(v, ']')
			return jsonspan.Apply(req, []jsonspan.Edit{{Start: in.Start, End: in.End, Repl: v}}), nil
		case req[in.Start] == '[':
			return AppendToArray(req, in, items), nil
		}
		return nil, errors.New("the request's input is neither a string nor a list")
	}
	return nil, errors.New("no history in the " + p.String() + " protocol")
}

// AppendToArray returns doc with elems (JSON values separated by commas)
// appended to the array at arr.
func AppendToArray(doc []byte, arr jsonspan.Span, elems []byte) []byte {
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

// ReplayableItem reports whether a Responses output item can go back to
// the upstream as input in a round's history: the assistant's messages,
// its calls, and reasoning the upstream can read back (encrypted_content;
// a reasoning item that only names a stored response would not be found).
func ReplayableItem(item []byte) bool {
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
