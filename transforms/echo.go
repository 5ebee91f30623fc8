package transforms

import (
	"bytes"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// Responses objects echo the request's tools and tool_choice. When a rule
// changed them on the way out, the client must still get back what it sent,
// whatever the chain did: the engine keeps the client's own values and puts
// them back once, after every response rule has run, instead of each rule
// splicing in whatever it happened to see.

type echoSnap struct {
	tools, choice []byte // spans of the client's body; nil when absent
	taken         bool
	needed        bool // a rule changed tools or tool_choice
}

// snapshotEcho keeps the client's tools and tool_choice when a tool walk
// passes over the client's own body: the walk has found them already, so
// keeping them costs nothing.
func (x *Exchange) snapshotEcho(body []byte, tools, choice jsonspan.Span) {
	if x.echo.taken || x.client != ProtocolResponses || !jsonspan.SameSlice(body, x.orig) {
		return
	}
	x.echo.taken = true
	if tools.Start >= 0 {
		x.echo.tools = body[tools.Start:tools.End]
	}
	if choice.Start >= 0 {
		x.echo.choice = body[choice.Start:choice.End]
	}
}

// takeEcho settles the snapshot when the request phase ends. It finds the
// client's values when no tool walk saw the client's body (an earlier rule
// had changed it): one extra pass, only then. It copies them, so nothing
// of the response phase holds on to the client's body, which can go once
// the rewritten one has replaced it.
func (x *Exchange) takeEcho() {
	defer func() { x.orig = nil }()
	if !x.echo.needed || x.client != ProtocolResponses {
		x.echo.tools, x.echo.choice = nil, nil
		return
	}
	if !x.echo.taken {
		var f [2]jsonspan.Span
		jsonspan.ObjectFields(x.orig, 0, []string{"tools", "tool_choice"}, f[:])
		x.echo.taken = true
		if f[0].Start >= 0 {
			x.echo.tools = x.orig[f[0].Start:f[0].End]
		}
		if f[1].Start >= 0 {
			x.echo.choice = x.orig[f[1].Start:f[1].End]
		}
	}
	x.echo.tools = bytes.Clone(x.echo.tools)
	x.echo.choice = bytes.Clone(x.echo.choice)
}

func (x *Exchange) echoes() bool {
	return x.echo.needed && x.client == ProtocolResponses && (x.echo.tools != nil || x.echo.choice != nil)
}

// echoEdits puts the client's values into the response object at obj.
func (x *Exchange) echoEdits(doc []byte, obj int) []jsonspan.Edit {
	var f [2]jsonspan.Span
	jsonspan.ObjectFields(doc, obj, []string{"tools", "tool_choice"}, f[:])
	var edits []jsonspan.Edit
	if x.echo.tools != nil && f[0].Start >= 0 && !bytes.Equal(doc[f[0].Start:f[0].End], x.echo.tools) {
		edits = append(edits, jsonspan.Edit{Start: f[0].Start, End: f[0].End, Repl: x.echo.tools})
	}
	if x.echo.choice != nil && f[1].Start >= 0 && !bytes.Equal(doc[f[1].Start:f[1].End], x.echo.choice) {
		edits = append(edits, jsonspan.Edit{Start: f[1].Start, End: f[1].End, Repl: x.echo.choice})
	}
	return edits
}

// restoreEcho is the last step of a JSON response.
func (x *Exchange) restoreEcho(body []byte) []byte {
	if !x.echoes() || !jsonspan.Valid(body) {
		return body
	}
	return x.ApplyEdits(body, x.echoEdits(body, jsonspan.SkipSpace(body, 0)))
}

// isLifecycle reports whether typ is the type of an event that carries the
// response object.
func isLifecycle(d []byte, typ jsonspan.Span) bool {
	if typ.Start < 0 {
		return false
	}
	// A switch on the literal, as the stream asks it of every event.
	switch string(d[typ.Start:typ.End]) {
	case `"response.created"`, `"response.in_progress"`, `"response.queued"`,
		`"response.completed"`, `"response.failed"`, `"response.incomplete"`:
		return true
	}
	return false
}

// echoEvent restores the response object of a lifecycle event, the last
// step of a Responses stream; nil means nothing changed.
func (x *Exchange) echoEvent(d []byte) []byte {
	resp := jsonspan.Lookup(d, 0, "response")
	if resp.Start < 0 || d[resp.Start] != '{' {
		return nil
	}
	edits := x.echoEdits(d, resp.Start)
	if len(edits) == 0 {
		return nil
	}
	return jsonspan.Apply(d, edits)
}
