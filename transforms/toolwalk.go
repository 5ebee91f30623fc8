package transforms

import "strconv"

// NodeKind says what a tool node of a request is.
type NodeKind uint8

const (
	// NodeDefinition is a tool definition: top level, inside a namespace at
	// any depth, or inside an additional_tools history item.
	NodeDefinition NodeKind = iota + 1
	// NodeCall is a tool call in the history: a Responses *_call item, or
	// an entry of a Chat assistant message's tool_calls.
	NodeCall
	// NodeOutput is a call's result in the history: a Responses *_output
	// item, or a Chat tool message.
	NodeOutput
	// NodeChoice is tool_choice, or one entry of its allowed_tools.
	NodeChoice
)

// ToolNode is one tool-shaped object of a request body.
type ToolNode struct {
	Kind NodeKind
	// Type is the object's wire type: a definition's or choice's tool type
	// ("function", "custom", "namespace", "allowed_tools", …), a Responses
	// history item's type ("custom_tool_call", "function_call_output", …),
	// or a Chat tool_calls entry's type. Chat tool messages have "tool".
	Type string
	// Namespace is the node's own namespace or, for a definition inside a
	// namespace tool, the enclosing one's name.
	Namespace string
	// Name is the tool's name, read from the flat or the nested shape.
	Name string
	// CallID correlates calls and outputs (Chat: the entry's id, the tool
	// message's tool_call_id).
	CallID string
	// Start and End delimit the node's object in the body.
	Start, End int
	// InnerStart and InnerEnd delimit the nested object of Chat's shapes
	// ({"type":"function","function":{…}}); both are -1 for flat shapes.
	InnerStart, InnerEnd int
	// Allowed marks a choice entry inside allowed_tools.
	Allowed bool

	where  string // location of definitions and choices, formatted once
	item   int    // index of the history item or message, for the rest
	entry  int    // index in a message's tool_calls
	nested bool   // the node is inside a namespace or additional_tools
}

// Where names the node's location for messages, e.g. "tools[3]",
// "input[12]" or "messages[4].tool_calls[0]".
func (n *ToolNode) Where() string {
	switch {
	case n.where != "":
		return n.where
	case n.Kind == NodeCall && n.entry >= 0:
		return "messages[" + strconv.Itoa(n.item) + "].tool_calls[" + strconv.Itoa(n.entry) + "]"
	case n.Type == "tool":
		return "messages[" + strconv.Itoa(n.item) + "]"
	}
	return "input[" + strconv.Itoa(n.item) + "]"
}

// ToolWalk is one rule's view of the tools in a request body: its nodes in
// document order, and the edits the rule plans on them. A rule first looks
// at every node and plans, then Rewrite builds the new body in one copy, so
// a rule that rejects the request has changed nothing.
type ToolWalk struct {
	// Doc is the body walked.
	Doc []byte
	// Protocol is the body's protocol.
	Protocol Protocol
	// Nodes are the body's tool nodes, in document order. A namespace
	// definition comes before the definitions it holds.
	Nodes []ToolNode

	x     *Exchange
	edits []edit
	tools span // top-level "tools" and "tool_choice" values
	echo  bool // an edit touched a definition or tool_choice
}

// WalkTools validates body and collects its tool nodes in the same single
// pass. It returns nil, and marks the exchange's body as not JSON, when the
// walk finds the body malformed; it returns nil too for protocols it does
// not know.
func WalkTools(x *Exchange, body []byte) *ToolWalk {
	p := x.Protocol()
	if p != ProtocolResponses && p != ProtocolChat {
		return nil
	}
	w := &ToolWalk{Doc: body, Protocol: p, x: x, tools: span{-1, -1}}
	choice := span{-1, -1}
	end := walkMembers(body, 0, func(k span, v int) int {
		switch {
		case keyIs(body, k, "tools"):
			e := w.definitions(v, "", "tools", false)
			w.tools = span{v, e}
			return e
		case keyIs(body, k, "input") && p == ProtocolResponses:
			return w.items(v)
		case keyIs(body, k, "messages") && p == ProtocolChat:
			return w.messages(v)
		case keyIs(body, k, "tool_choice"):
			e := skipValue(body, v)
			choice = span{v, e}
			return e
		}
		return skipValue(body, v)
	})
	if end < 0 || skipSpace(body, end) != len(body) {
		x.Invalid = true
		return nil
	}
	if choice.start >= 0 {
		w.choices(choice)
	}
	x.snapshotEcho(body, w.tools, choice)
	return w
}

// definitions collects the tool definitions of the array at start,
// recursing into namespaces; enclosing is the namespace inherited by
// definitions that name none. It returns the end of the value, or -1.
func (w *ToolWalk) definitions(start int, enclosing, where string, nested bool) int {
	doc := w.Doc
	if start >= len(doc) || doc[start] != '[' {
		return skipValue(doc, start) // not a list of tools: nothing of ours
	}
	var f [4]span
	const (
		fType = iota
		fName
		fNamespace
		fTools
	)
	i := -1
	return eachObject(doc, start, definitionFields, f[:], func(el span, f []span) bool {
		i++
		path := where + "[" + strconv.Itoa(i) + "]"
		n := ToolNode{Kind: NodeDefinition, Start: el.start, End: el.end, InnerStart: -1, InnerEnd: -1, where: path, nested: nested}
		n.Type, _ = stringValue(doc, f[fType])
		n.Name, _ = stringValue(doc, f[fName])
		n.Namespace, _ = stringValue(doc, f[fNamespace])
		if w.Protocol == ProtocolChat && (n.Type == "function" || n.Type == "custom") {
			// Chat nests the tool under a key named after its type.
			if inner := lookup(doc, el.start, n.Type); inner.start >= 0 && doc[inner.start] == '{' {
				n.InnerStart, n.InnerEnd = inner.start, inner.end
				n.Name, _ = stringValue(doc, lookup(doc, inner.start, "name"))
			}
		}
		if n.Namespace == "" {
			n.Namespace = enclosing
		}
		w.Nodes = append(w.Nodes, n)
		if n.Type == "namespace" && f[fTools].start >= 0 {
			return w.definitions(f[fTools].start, n.Name, path+".tools", true) >= 0
		}
		return true
	})
}

var definitionFields = []string{"type", "name", "namespace", "tools"}

// itemFields are the members of a Responses history item the walk reads.
var itemFields = []string{"type", "name", "namespace", "call_id", "tools"}

// items collects the calls, outputs and additional_tools definitions of a
// Responses input array, scanning each item once.
func (w *ToolWalk) items(start int) int {
	doc := w.Doc
	if start >= len(doc) || doc[start] != '[' {
		return skipValue(doc, start) // a plain string prompt
	}
	var f [5]span
	i := -1
	return eachObject(doc, start, itemFields, f[:], func(el span, f []span) bool {
		i++
		typ := f[0]
		if typ.start < 0 || doc[typ.start] != '"' {
			return true
		}
		t := doc[typ.start+1 : typ.end-1]
		var kind NodeKind
		switch {
		case string(t) == "message" || string(t) == "reasoning":
			return true
		case string(t) == "additional_tools":
			if f[4].start >= 0 {
				return w.definitions(f[4].start, "", "input["+strconv.Itoa(i)+"].tools", true) >= 0
			}
			return true
		case hasSuffix(t, "_output"):
			kind = NodeOutput
		case hasSuffix(t, "_call"):
			kind = NodeCall
		default:
			return true
		}
		n := ToolNode{Kind: kind, Start: el.start, End: el.end, InnerStart: -1, InnerEnd: -1, item: i, entry: -1}
		n.Type, _ = stringValue(doc, typ)
		n.Name, _ = stringValue(doc, f[1])
		n.Namespace, _ = stringValue(doc, f[2])
		n.CallID, _ = stringValue(doc, f[3])
		w.Nodes = append(w.Nodes, n)
		return true
	})
}

func hasSuffix(b []byte, s string) bool {
	return len(b) >= len(s) && string(b[len(b)-len(s):]) == s
}

var (
	messageFields  = []string{"role", "tool_calls", "tool_call_id"}
	toolCallFields = []string{"type", "id", "custom", "function"}
)

// messages collects the calls of Chat assistant messages and the tool
// messages that answer them.
func (w *ToolWalk) messages(start int) int {
	doc := w.Doc
	if start >= len(doc) || doc[start] != '[' {
		return skipValue(doc, start)
	}
	var f [3]span
	i := -1
	return eachObject(doc, start, messageFields, f[:], func(el span, f []span) bool {
		i++
		if isString(doc, f[0], "tool") {
			n := ToolNode{Kind: NodeOutput, Type: "tool", Start: el.start, End: el.end, InnerStart: -1, InnerEnd: -1, item: i, entry: -1}
			n.CallID, _ = stringValue(doc, f[2])
			w.Nodes = append(w.Nodes, n)
			return true
		}
		if f[1].start < 0 || doc[f[1].start] != '[' {
			return true
		}
		var g [4]span
		j := -1
		return eachObject(doc, f[1].start, toolCallFields, g[:], func(el span, g []span) bool {
			j++
			n := ToolNode{Kind: NodeCall, Start: el.start, End: el.end, InnerStart: -1, InnerEnd: -1, item: i, entry: j}
			n.Type, _ = stringValue(doc, g[0])
			n.CallID, _ = stringValue(doc, g[1])
			inner := span{-1, -1}
			switch n.Type {
			case "custom":
				inner = g[2]
			case "function":
				inner = g[3]
			}
			if inner.start >= 0 && doc[inner.start] == '{' {
				n.InnerStart, n.InnerEnd = inner.start, inner.end
				n.Name, _ = stringValue(doc, lookup(doc, inner.start, "name"))
			}
			w.Nodes = append(w.Nodes, n)
			return true
		}) >= 0
	})
}

// choices collects tool_choice and, for allowed_tools, its entries. A
// string choice ("auto", "required", "none") is a node with an empty Type.
func (w *ToolWalk) choices(sp span) {
	doc := w.Doc
	n := ToolNode{Kind: NodeChoice, Start: sp.start, End: sp.end, InnerStart: -1, InnerEnd: -1, where: "tool_choice"}
	if doc[sp.start] != '{' {
		w.Nodes = append(w.Nodes, n)
		return
	}
	w.choiceNames(&n)
	w.Nodes = append(w.Nodes, n)
	if n.Type != "allowed_tools" {
		return
	}
	tools := lookup(doc, sp.start, "tools")
	where := "tool_choice.tools"
	if inner := lookup(doc, sp.start, "allowed_tools"); inner.start >= 0 && doc[inner.start] == '{' {
		// Chat nests the list: {"type":"allowed_tools","allowed_tools":{"mode","tools"}}.
		tools = lookup(doc, inner.start, "tools")
		where = "tool_choice.allowed_tools.tools"
	}
	if tools.start < 0 || doc[tools.start] != '[' {
		return
	}
	i := -1
	eachElement(doc, tools.start, func(el span) bool {
		i++
		if doc[el.start] != '{' {
			return true
		}
		e := ToolNode{Kind: NodeChoice, Start: el.start, End: el.end, InnerStart: -1, InnerEnd: -1, Allowed: true,
			where: where + "[" + strconv.Itoa(i) + "]"}
		w.choiceNames(&e)
		w.Nodes = append(w.Nodes, e)
		return true
	})
}

// choiceNames reads a selector's type, name and namespace, flat or nested
// under a key named after the type.
func (w *ToolWalk) choiceNames(n *ToolNode) {
	doc := w.Doc
	var f [3]span
	objectFields(doc, n.Start, []string{"type", "name", "namespace"}, f[:])
	n.Type, _ = stringValue(doc, f[0])
	n.Name, _ = stringValue(doc, f[1])
	n.Namespace, _ = stringValue(doc, f[2])
	if n.Type == "" || n.Type == "allowed_tools" {
		return
	}
	if inner := lookup(doc, n.Start, n.Type); inner.start >= 0 && doc[inner.start] == '{' {
		n.InnerStart, n.InnerEnd = inner.start, inner.end
		var g [2]span
		objectFields(doc, inner.start, []string{"name", "namespace"}, g[:])
		if n.Name == "" {
			n.Name, _ = stringValue(doc, g[0])
		}
		if n.Namespace == "" {
			n.Namespace, _ = stringValue(doc, g[1])
		}
	}
}

// Replace plans the replacement of a node's whole object with repl.
// Replacements must not overlap: a rule that rewrites a namespace does not
// also rewrite the definitions inside it.
func (w *ToolWalk) Replace(n *ToolNode, repl []byte) {
	w.edits = append(w.edits, edit{n.Start, n.End, repl})
	if n.Kind == NodeDefinition || n.Kind == NodeChoice {
		w.echo = true
	}
}

// Rename plans a new name for a node: only the bytes of its name change,
// in the flat shape or in Chat's nested object. It reports false when the
// node has no name member to change.
func (w *ToolWalk) Rename(n *ToolNode, name string) bool {
	obj := n.Start
	if n.InnerStart >= 0 {
		obj = n.InnerStart
	}
	v := lookup(w.Doc, obj, "name")
	if v.start < 0 || w.Doc[v.start] != '"' {
		return false
	}
	w.Edit(v.start, v.end, appendJSONString(nil, name), n.Kind == NodeDefinition || n.Kind == NodeChoice)
	return true
}

// Edit plans a replacement of any byte range of the body. changesTools says
// whether it changes the tools or tool_choice the client declared, which
// the engine then restores where responses echo them.
func (w *ToolWalk) Edit(start, end int, repl []byte, changesTools bool) {
	w.edits = append(w.edits, edit{start, end, repl})
	w.echo = w.echo || changesTools
}

// Edits is the number of edits planned so far.
func (w *ToolWalk) Edits() int { return len(w.edits) }

// Rewrite returns the body with the planned edits applied, or the body
// itself when there are none.
func (w *ToolWalk) Rewrite() []byte {
	if len(w.edits) == 0 {
		return w.Doc
	}
	if w.echo {
		w.x.echo.needed = true
	}
	return w.x.applyEdits(w.Doc, w.edits)
}
