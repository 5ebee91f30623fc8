package toolsplan

import (
	"slices"
	"strconv"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// --- history -------------------------------------------------------------------

// writeHistory rewrites the history's calls and outputs of tools the plan
// renamed, flattened or degraded, in both protocols.
func (p *toolPlan) writeHistory() {
	w := p.w
	doc := w.Doc
	p.dropHostedCalls()
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind != transforms.NodeCall && n.Kind != transforms.NodeOutput {
			continue
		}
		if w.Protocol == transforms.ProtocolChat {
			if n.Kind == transforms.NodeCall && n.Type == "function" && n.Name != "" {
				if up := p.codec.name(p.historyKey("", n.Name)); up != "" && up != n.Name {
					w.Rename(n, up)
				}
			}
			continue
		}
		switch {
		case n.Type == "function_call" || (n.Type == "function_call_output" && n.Name != ""):
			if n.Name == "" {
				continue
			}
			up := p.codec.name(p.historyKey(n.Namespace, n.Name))
			flat := n.Namespace != "" && p.t.Namespaces == "flatten"
			if up == "" || (up == n.Name && !flat) {
				continue
			}
			w.ReplaceMeasured(n, func(dst []byte) []byte {
				ow := jsonspan.NewObj(dst)
				jsonspan.EachMember(doc, n.Start, func(m jsonspan.Member) bool {
					switch {
					case m.KeyIs(doc, "name"):
						ow.Key("name")
						ow.B = jsonspan.AppendStringStr(ow.B, up)
					case m.KeyIs(doc, "namespace") && flat:
					default:
						ow.Raw(doc, m)
					}
					return true
				})
				return ow.Close()
			})
		default:
			b := transforms.BuiltinOfItem(n.Type)
			if b == "" || p.t.action(b) != actDegrade {
				continue
			}
			d, aliased := p.aliased[b]
			switch {
			case n.Kind == transforms.NodeCall && aliased:
				up, custom := p.codec.name(d), p.convertedCustom(d)
				w.ReplaceMeasured(n, func(dst []byte) []byte { return aliasedHistoryCall(dst, doc, n, b, up, custom) })
			case n.Kind == transforms.NodeCall:
				up := p.codec.name(codecKey{b, "", b})
				w.ReplaceMeasured(n, func(dst []byte) []byte { return builtinHistoryCall(dst, doc, n, b, up) })
			default:
				w.ReplaceMeasured(n, func(dst []byte) []byte { return builtinHistoryOutput(dst, doc, n) })
			}
		}
	}
}

// hostedTool is the hosted tool type a history item of a hosted call
// belongs to (web_search_call -> web_search), or "".
func hostedTool(itemType string) string {
	switch itemType {
	case "web_search_call", "file_search_call", "image_generation_call", "code_interpreter_call", "mcp_call":
		return itemType[:len(itemType)-len("_call")]
	}
	return ""
}

// dropHostedCalls removes history items of hosted tools the upstream does
// not run (a web search from a turn on another provider): it would refuse
// them. Consecutive items go in one edit with one comma, so neighbouring
// removals never overlap.
func (p *toolPlan) dropHostedCalls() {
	w := p.w
	if w.Protocol != transforms.ProtocolResponses {
		return
	}
	doc := w.Doc
	var run []*transforms.ToolNode
	flush := func() {
		if len(run) == 0 {
			return
		}
		e := jsonspan.RemoveRun(doc, run[0].Start, run[len(run)-1].End)
		w.Edit(e.Start, e.End, nil, false)
		run = run[:0]
	}
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind != transforms.NodeCall && n.Kind != transforms.NodeOutput {
			continue
		}
		h := hostedTool(n.Type)
		if h == "" || p.t.action(h) == actNative {
			flush()
			continue
		}
		if len(run) > 0 && run[len(run)-1].Index()+1 != n.Index() {
			flush()
		}
		p.x.Decide(h, "drop", "a "+n.Type+" in the history: the upstream has no "+h+" tool")
		run = append(run, n)
	}
	flush()
}

// builtinHistoryCall writes a built-in call item as the function call the
// upstream saw for it: same call_id, the item's arguments as JSON text, no
// id (the upstream wants fc_ ids on function items).
func builtinHistoryCall(dst, doc []byte, n *transforms.ToolNode, typ, name string) []byte {
	return historyFunctionCall(dst, doc, n, name, builtinArgs(doc, n, typ))
}

// aliasedHistoryCall writes a call item of a built-in the request does not
// declare as a call to the declared tool of its name, under that tool's
// upstream name. A custom tool (converted to a function taking "input")
// gets the call as its input text: an apply_patch operation as the patch
// Codex's apply_patch takes, any other built-in's arguments as JSON text.
// A function gets the built-in's arguments.
func aliasedHistoryCall(dst, doc []byte, n *transforms.ToolNode, typ, name string, custom bool) []byte {
	args := builtinArgs(doc, n, typ)
	if custom {
		text := args
		if typ == "apply_patch" {
			if patch := operationPatch(doc, jsonspan.Lookup(doc, n.Start, "operation")); patch != nil {
				text = patch
			}
		}
		args = jsonspan.AppendString([]byte(`{"input":`), text)
		args = append(args, '}')
	}
	return historyFunctionCall(dst, doc, n, name, args)
}

// historyFunctionCall writes a function_call item for the call item n:
// its call_id and a status the upstream takes, name and args as given.
func historyFunctionCall(dst, doc []byte, n *transforms.ToolNode, name string, args []byte) []byte {
	var f [2]jsonspan.Span
	jsonspan.ObjectFields(doc, n.Start, []string{"call_id", "status"}, f[:])
	ow := jsonspan.NewObj(dst)
	ow.Key("type")
	ow.B = append(ow.B, `"function_call"`...)
	ow.Key("call_id")
	ow.B = jsonspan.AppendRawOr(ow.B, doc, f[0], `""`)
	ow.Key("name")
	ow.B = jsonspan.AppendStringStr(ow.B, name)
	ow.Key("arguments")
	ow.B = jsonspan.AppendString(ow.B, args)
	if s, ok := jsonspan.StringValue(doc, f[1]); ok && (s == "completed" || s == "in_progress" || s == "incomplete") {
		ow.Key("status")
		ow.B = append(ow.B, doc[f[1].Start:f[1].End]...)
	}
	return ow.Close()
}

// builtinArgs is what a built-in call item held, as the arguments of the
// function that stands in for the built-in (builtinSchema). Members the
// client sent as null are left out, and so is an integer field that is not
// a positive integer: the Responses items make those fields nullable, the
// stand-in functions declare them as integers or strings, and an upstream
// may hold the history's arguments to that schema.
func builtinArgs(doc []byte, n *transforms.ToolNode, typ string) []byte {
	var f [3]jsonspan.Span
	jsonspan.ObjectFields(doc, n.Start, []string{"action", "operation", "arguments"}, f[:])
	switch typ {
	case "local_shell", "shell":
		return presentMembers(nil, doc, f[0], "type")
	case "apply_patch":
		args := append([]byte(`{"operation":`), presentMembers(nil, doc, f[1], "")...)
		return append(args, '}')
	case "computer":
		args := append([]byte(`{"action":`), presentMembers(nil, doc, f[0], "")...)
		return append(args, '}')
	case "tool_search":
		if a := f[2]; a.Start >= 0 && doc[a.Start] == '"' {
			s, _ := jsonspan.StringValue(doc, a)
			return []byte(s)
		}
		return jsonspan.AppendRawOr(nil, doc, f[2], "{}")
	}
	return nil
}

// integerArgs are the members of built-in arguments that the stand-in
// functions declare as integers of at least 1.
var integerArgs = []string{"timeout_ms", "max_output_length"}

// presentMembers writes the object at sp without its null members, the
// member named skip, and integer members (integerArgs) that are not
// positive integers; {} when sp is not an object.
func presentMembers(dst, doc []byte, sp jsonspan.Span, skip string) []byte {
	if sp.Start < 0 || doc[sp.Start] != '{' {
		return append(dst, "{}"...)
	}
	ow := jsonspan.NewObj(dst)
	jsonspan.EachMember(doc, sp.Start, func(m jsonspan.Member) bool {
		v := doc[m.Value.Start:m.Value.End]
		switch {
		case string(v) == "null", skip != "" && m.KeyIs(doc, skip):
		case slices.ContainsFunc(integerArgs, func(k string) bool { return m.KeyIs(doc, k) }) && !isInteger(v):
		default:
			ow.Raw(doc, m)
		}
		return true
	})
	return ow.Close()
}

// operationPatch writes an apply_patch operation as the patch text of
// Codex's apply_patch (the same V4A hunks inside its envelope), or nil
// when the operation is not one of the three with a path.
func operationPatch(doc []byte, op jsonspan.Span) []byte {
	if op.Start < 0 || doc[op.Start] != '{' {
		return nil
	}
	var f [3]jsonspan.Span
	jsonspan.ObjectFields(doc, op.Start, []string{"type", "path", "diff"}, f[:])
	typ, _ := jsonspan.StringValue(doc, f[0])
	path, _ := jsonspan.StringValue(doc, f[1])
	diff, _ := jsonspan.StringValue(doc, f[2])
	if path == "" || strings.ContainsAny(path, "\r\n") {
		return nil
	}
	b := []byte("*** Begin Patch\n")
	switch typ {
	case "create_file":
		b = append(b, "*** Add File: "+path+"\n"...)
	case "update_file":
		b = append(b, "*** Update File: "+path+"\n"...)
	case "delete_file":
		b = append(b, "*** Delete File: "+path+"\n"...)
		diff = ""
	default:
		return nil
	}
	b = append(b, diff...)
	if diff != "" && !strings.HasSuffix(diff, "\n") {
		b = append(b, '\n')
	}
	return append(b, "*** End Patch\n"...)
}

// builtinHistoryOutput writes a built-in call's output as a
// function_call_output: text for shell outputs, the image of a screenshot,
// the loaded definitions of a tool search as JSON text, the status when
// the output is missing or null.
func builtinHistoryOutput(dst, doc []byte, n *transforms.ToolNode) []byte {
	var f [4]jsonspan.Span
	jsonspan.ObjectFields(doc, n.Start, []string{"call_id", "output", "tools", "status"}, f[:])
	ow := jsonspan.NewObj(dst)
	ow.Key("type")
	ow.B = append(ow.B, `"function_call_output"`...)
	ow.Key("call_id")
	ow.B = jsonspan.AppendRawOr(ow.B, doc, f[0], `""`)
	ow.Key("output")
	out := f[1]
	if out.Start >= 0 && string(doc[out.Start:out.End]) == "null" {
		out = jsonspan.NoSpan() // an apply_patch_call_output without one: its status says how it went
	}
	switch {
	case n.Type == "tool_search_output":
		ow.B = jsonspan.AppendString(ow.B, jsonspan.AppendRawOr(nil, doc, f[2], "[]"))
	case out.Start >= 0 && doc[out.Start] == '"':
		ow.B = append(ow.B, doc[out.Start:out.End]...)
	case n.Type == "shell_call_output" && out.Start >= 0 && doc[out.Start] == '[':
		ow.B = jsonspan.AppendString(ow.B, shellOutputText(doc, out))
	case n.Type == "computer_call_output" && out.Start >= 0 && doc[out.Start] == '{':
		url := jsonspan.Lookup(doc, out.Start, "image_url")
		if url.Start >= 0 {
			ow.B = append(ow.B, `[{"type":"input_image","image_url":`...)
			ow.B = append(ow.B, doc[url.Start:url.End]...)
			ow.B = append(ow.B, `}]`...)
		} else {
			ow.B = jsonspan.AppendString(ow.B, doc[out.Start:out.End])
		}
	case out.Start >= 0:
		ow.B = jsonspan.AppendString(ow.B, doc[out.Start:out.End])
	default:
		s, _ := jsonspan.StringValue(doc, f[3])
		ow.B = jsonspan.AppendStringStr(ow.B, s)
	}
	return ow.Close()
}

// shellOutputText renders shell_call_output chunks as text a model reads:
// the outcome, then stdout and stderr.
func shellOutputText(doc []byte, out jsonspan.Span) []byte {
	var b []byte
	jsonspan.EachElement(doc, out.Start, func(el jsonspan.Span) bool {
		if doc[el.Start] != '{' {
			return true
		}
		var f [3]jsonspan.Span
		jsonspan.ObjectFields(doc, el.Start, []string{"stdout", "stderr", "outcome"}, f[:])
		if len(b) > 0 {
			b = append(b, '\n')
		}
		if o := f[2]; o.Start >= 0 && doc[o.Start] == '{' {
			typ, _ := jsonspan.StringValue(doc, jsonspan.Lookup(doc, o.Start, "type"))
			if code := jsonspan.Lookup(doc, o.Start, "exit_code"); typ == "exit" && code.Start >= 0 {
				b = append(b, "[exit "...)
				b = append(b, doc[code.Start:code.End]...)
				b = append(b, "]\n"...)
			} else if typ != "" {
				b = append(b, "["+typ+"]\n"...)
			}
		}
		stdout, _ := jsonspan.StringValue(doc, f[0])
		stderr, _ := jsonspan.StringValue(doc, f[1])
		b = append(b, "stdout:\n"+stdout+"\nstderr:\n"+stderr...)
		return true
	})
	return b
}

// --- degraded schemas ------------------------------------------------------------

// builtinSchema is the description and parameters of the function that
// stands in for a built-in tool. Our own wording; closed schemas, so a
// model's call either fits the item or falls back to a function call.
func builtinSchema(typ string) (string, []byte) {
	switch typ {
	case "local_shell":
		return "Run a program on the user's machine and get its output. Give the program and its arguments as separate strings (argv); nothing is parsed by a shell.",
			[]byte(`{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"},"minItems":1,"description":"The program and its arguments, one string each."},"env":{"type":"object","additionalProperties":{"type":"string"},"description":"Environment variables to set."},"timeout_ms":{"type":"integer","minimum":1,"description":"How long to let it run, in milliseconds."},"user":{"type":"string","description":"The user to run it as."},"working_directory":{"type":"string","description":"The directory to run it in."}},"required":["command"],"additionalProperties":false}`)
	case "shell":
		return "Run shell commands on the user's machine, one after another, and get their output. Commands must not wait for input.",
			[]byte(`{"type":"object","properties":{"commands":{"type":"array","items":{"type":"string"},"minItems":1,"description":"The shell commands to run, in order."},"timeout_ms":{"type":"integer","minimum":1,"description":"How long to let them run, in milliseconds."},"max_output_length":{"type":"integer","minimum":1,"description":"The most output characters to return."}},"required":["commands"],"additionalProperties":false}`)
	case "apply_patch":
		return "Create, change or delete one file. For create_file and update_file, diff holds the change in unified diff form (hunks starting with @@, lines prefixed with space, - or +).",
			[]byte(`{"type":"object","properties":{"operation":{"oneOf":[` +
				`{"type":"object","properties":{"type":{"type":"string","enum":["create_file"]},"path":{"type":"string","minLength":1},"diff":{"type":"string","minLength":1}},"required":["type","path","diff"],"additionalProperties":false},` +
				`{"type":"object","properties":{"type":{"type":"string","enum":["update_file"]},"path":{"type":"string","minLength":1},"diff":{"type":"string","minLength":1}},"required":["type","path","diff"],"additionalProperties":false},` +
				`{"type":"object","properties":{"type":{"type":"string","enum":["delete_file"]},"path":{"type":"string","minLength":1}},"required":["type","path"],"additionalProperties":false}]}},"required":["operation"],"additionalProperties":false}`)
	case "computer":
		return "Act on the user's screen: one action per call, such as {\"type\":\"click\",\"x\":10,\"y\":20,\"button\":\"left\"}, {\"type\":\"type\",\"text\":\"hello\"}, {\"type\":\"keypress\",\"keys\":[\"ENTER\"]}, {\"type\":\"scroll\",\"x\":0,\"y\":0,\"scroll_x\":0,\"scroll_y\":300} or {\"type\":\"screenshot\"}.",
			[]byte(`{"type":"object","properties":{"action":{"type":"object","properties":{"type":{"type":"string","description":"click, double_click, drag, keypress, move, screenshot, scroll, type or wait."}},"required":["type"],"description":"The action and its fields."}},"required":["action"],"additionalProperties":false}`)
	case "tool_search":
		return "Search the tools available to you and load the ones that fit, by a short query.",
			[]byte(`{"type":"object","properties":{"query":{"type":"string","description":"What the tool should do."},"limit":{"type":"integer","minimum":1,"description":"The most tools to load."}},"required":["query"],"additionalProperties":false}`)
	}
	return "", []byte(`{"type":"object"}`)
}

// --- response side ---------------------------------------------------------------

// WantsResponse implements ResponseRewriter.
func (t *ToolsPlan) WantsResponse(x *transforms.Exchange) bool {
	return t.record(x).linked > 0 || (t.custom != nil && t.custom.WantsResponse(x))
}

// RewriteResponse implements ResponseRewriter: this plan's calls first,
// then the custom calls of its shared conversion (the onion within the
// rule).
func (t *ToolsPlan) RewriteResponse(x *transforms.Exchange, body []byte) ([]byte, error) {
	if t.record(x).linked > 0 {
		body = transforms.RestoreCalls(x, t, body)
	}
	if t.custom != nil && t.custom.WantsResponse(x) {
		return t.custom.RewriteResponse(x, body)
	}
	return body, nil
}

// NewStream implements ResponseRewriter.
func (t *ToolsPlan) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	var own, custom transforms.StreamTransform
	if t.record(x).linked > 0 {
		own = transforms.NewCallStream(x, t)
	}
	if t.custom != nil {
		custom = t.custom.NewStream(x)
	}
	switch {
	case own == nil:
		return custom
	case custom == nil:
		return own
	}
	s := &stagedStream{first: own, then: custom}
	s.next = func(ev *transforms.Event) error { return s.then.Event(ev, s.emit) }
	return s
}

// stagedStream runs two stream stages of one rule, the first nearer the
// upstream.
type stagedStream struct {
	first, then transforms.StreamTransform
	emit, next  transforms.Emit
}

func (s *stagedStream) Event(ev *transforms.Event, emit transforms.Emit) error {
	s.emit = emit
	return s.first.Event(ev, s.next)
}

func (s *stagedStream) End(emit transforms.Emit) error {
	s.emit = emit
	if err := s.first.End(s.next); err != nil {
		return err
	}
	return s.then.End(emit)
}

// OpenCall implements CallPolicy: a function call under a name the plan
// gave comes back as the client's tool.
func (t *ToolsPlan) OpenCall(x *transforms.Exchange, up transforms.ToolID) (transforms.ToolID, transforms.CallHandler, bool) {
	client, ok := x.Tools().Client(t, transforms.ToolID{Type: "function", Namespace: up.Namespace, Name: up.Name})
	if !ok && up.Namespace == "" {
		return transforms.ToolID{}, nil, false
	}
	if !ok {
		if client, ok = x.Tools().Client(t, transforms.ToolID{Type: "function", Name: up.Name}); !ok {
			return transforms.ToolID{}, nil, false
		}
	}
	var args transforms.PassArgs // held to the exchange's max_call_buffer
	if client.Type == "function" {
		if t.custom != nil {
			if _, converted := x.Tools().Client(t.custom, client); converted {
				return client, &relayArgs{args}, true
			}
		}
		return client, &args, true
	}
	return client, &builtinCall{PassArgs: args, typ: client.Type, x: x, rec: t.record(x)}, true
}

// relayArgs passes a converted custom tool's call on to the rule's custom
// stage, which restores and counts it.
type relayArgs struct{ transforms.PassArgs }

// RelaysCall implements transforms.CallRelayer.
func (*relayArgs) RelaysCall() {}

// builtinCall restores a degraded built-in tool's call as its item.
type builtinCall struct {
	transforms.PassArgs
	typ string
	x   *transforms.Exchange
	rec *planRecord
}

// BuildItem implements ItemBuilder.
func (b *builtinCall) BuildItem(dst, raw []byte, ref transforms.CallRef) ([]byte, bool) {
	args := trimSpace(raw)
	if len(args) == 0 || args[0] != '{' || !jsonspan.Valid(args) {
		return nil, false
	}
	id := ref.ItemID
	if id == "" {
		id = ref.CallID
	}
	status := ref.Status
	if status == "" {
		status = "completed"
	}
	head := func(typ string) jsonspan.ObjWriter {
		ow := jsonspan.NewObj(dst)
		ow.Key("type")
		ow.B = jsonspan.AppendStringStr(ow.B, typ)
		ow.Key("id")
		ow.B = jsonspan.AppendStringStr(ow.B, id)
		ow.Key("call_id")
		ow.B = jsonspan.AppendStringStr(ow.B, ref.CallID)
		ow.Key("status")
		ow.B = jsonspan.AppendStringStr(ow.B, status)
		return ow
	}
	switch b.typ {
	case "local_shell":
		var f [6]jsonspan.Span
		jsonspan.ObjectFields(args, 0, []string{"command", "cmd", "env", "timeout_ms", "user", "working_directory"}, f[:])
		cmd := f[0]
		if !stringArray(args, cmd, 1) {
			cmd = f[1]
		}
		if !stringArray(args, cmd, 1) {
			return nil, false
		}
		ow := head("local_shell_call")
		ow.Key("action")
		a := jsonspan.NewObj(ow.B)
		a.Key("type")
		a.B = append(a.B, `"exec"`...)
		a.Key("command")
		a.B = append(a.B, args[cmd.Start:cmd.End]...)
		a.Key("env")
		a.B = stringMap(a.B, args, f[2])
		if v := f[3]; v.Start >= 0 && isInteger(args[v.Start:v.End]) {
			a.Key("timeout_ms")
			a.B = append(a.B, args[v.Start:v.End]...)
		}
		for k, name := range []string{"user", "working_directory"} {
			if v := f[4+k]; v.Start >= 0 && args[v.Start] == '"' {
				a.Key(name)
				a.B = append(a.B, args[v.Start:v.End]...)
			}
		}
		ow.B = a.Close()
		return ow.Close(), true
	case "shell":
		var f [3]jsonspan.Span
		jsonspan.ObjectFields(args, 0, []string{"commands", "timeout_ms", "max_output_length"}, f[:])
		if !stringArray(args, f[0], 1) {
			return nil, false
		}
		ow := head("shell_call")
		ow.Key("action")
		a := jsonspan.NewObj(ow.B)
		a.Key("commands")
		a.B = append(a.B, args[f[0].Start:f[0].End]...)
		for k, name := range []string{"timeout_ms", "max_output_length"} {
			a.Key(name)
			if v := f[1+k]; v.Start >= 0 && isInteger(args[v.Start:v.End]) {
				a.B = append(a.B, args[v.Start:v.End]...)
			} else {
				a.B = append(a.B, "null"...)
			}
		}
		ow.B = a.Close()
		ow.Key("environment")
		if b.rec.shellEnv != nil {
			ow.B = append(ow.B, b.rec.shellEnv...)
		} else {
			ow.B = append(ow.B, `{"type":"local"}`...)
		}
		return ow.Close(), true
	case "apply_patch":
		op := jsonspan.Lookup(args, 0, "operation")
		if op.Start < 0 || args[op.Start] != '{' {
			return nil, false
		}
		var f [3]jsonspan.Span
		jsonspan.ObjectFields(args, op.Start, []string{"type", "path", "diff"}, f[:])
		typ, _ := jsonspan.StringValue(args, f[0])
		path, _ := jsonspan.StringValue(args, f[1])
		if path == "" {
			return nil, false
		}
		ow := head("apply_patch_call")
		ow.Key("operation")
		o := jsonspan.NewObj(ow.B)
		o.Key("type")
		o.B = jsonspan.AppendStringStr(o.B, typ)
		o.Key("path")
		o.B = append(o.B, args[f[1].Start:f[1].End]...)
		switch typ {
		case "create_file", "update_file":
			if f[2].Start < 0 || args[f[2].Start] != '"' {
				return nil, false
			}
			o.Key("diff")
			o.B = append(o.B, args[f[2].Start:f[2].End]...)
		case "delete_file":
		default:
			return nil, false
		}
		ow.B = o.Close()
		return ow.Close(), true
	case "computer":
		act := jsonspan.Lookup(args, 0, "action")
		if act.Start < 0 || args[act.Start] != '{' {
			return nil, false
		}
		if s, ok := jsonspan.StringValue(args, jsonspan.Lookup(args, act.Start, "type")); !ok || s == "" {
			return nil, false
		}
		ow := head("computer_call")
		ow.Key("action")
		ow.B = append(ow.B, args[act.Start:act.End]...)
		ow.Key("pending_safety_checks")
		ow.B = append(ow.B, "[]"...)
		return ow.Close(), true
	case "tool_search":
		ow := head("tool_search_call")
		ow.Key("execution")
		ow.B = append(ow.B, `"client"`...)
		ow.Key("arguments")
		ow.B = append(ow.B, args...)
		return ow.Close(), true
	}
	return nil, false
}

func trimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	for j > i && (b[j-1] == ' ' || b[j-1] == '\t' || b[j-1] == '\n' || b[j-1] == '\r') {
		j--
	}
	return b[i:j]
}

// stringArray reports an array of at least min strings at sp.
func stringArray(doc []byte, sp jsonspan.Span, min int) bool {
	if sp.Start < 0 || doc[sp.Start] != '[' {
		return false
	}
	n, ok := 0, true
	jsonspan.EachElement(doc, sp.Start, func(el jsonspan.Span) bool {
		n++
		ok = doc[el.Start] == '"'
		return ok
	})
	return ok && n >= min
}

// stringMap writes the string members of the object at sp ({} when there
// is none): an environment holds strings only.
func stringMap(dst, doc []byte, sp jsonspan.Span) []byte {
	ow := jsonspan.NewObj(dst)
	if sp.Start >= 0 && doc[sp.Start] == '{' {
		jsonspan.EachMember(doc, sp.Start, func(m jsonspan.Member) bool {
			if doc[m.Value.Start] == '"' {
				ow.Raw(doc, m)
			}
			return true
		})
	}
	return ow.Close()
}

func isInteger(b []byte) bool {
	n, err := strconv.ParseInt(string(b), 10, 64)
	return err == nil && n >= 1
}
