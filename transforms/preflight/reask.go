package preflight

import (
	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
	"strconv"
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

// reaskResponses builds a Responses re-ask from req: its input (a string
// becomes a user message) followed by the answer's items and the outputs.
func reaskResponses(req []byte, items [][]byte, outs []callOutput) ([]byte, error) {
	var add []byte
	for _, it := range items {
		if !transforms.ReplayableItem(it) {
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
	return transforms.AppendHistory(transforms.ProtocolResponses, req, add)
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

// reaskCallID names the k-th call of a Chat answer that came without an
// id (some serving stacks send none) in a re-ask's history, where the
// tool message that answers it must name it.
func reaskCallID(k int) string { return "call_pf_" + strconv.Itoa(k) }

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
	return transforms.AppendHistory(transforms.ProtocolChat, req, add)
}

func replaceSpan(doc []byte, sp jsonspan.Span, v []byte) []byte {
	out := make([]byte, 0, len(doc)-(sp.End-sp.Start)+len(v))
	out = append(out, doc[:sp.Start]...)
	out = append(out, v...)
	return append(out, doc[sp.End:]...)
}
