package transforms

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

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

	// The rest is packed: a long history has thousands of nodes.
	walk           *ToolWalk // definitions and choices: the walk, for locations
	converted      bool      // a rewrite of it is planned: counted once
	input, typ, id span32    // Responses items: the values of "input", "type" and "id"
	parent         int32     // definitions: the enclosing namespace's node, or -1
	root           int32     // definitions outside a namespace, allowed choices: their list, in walk.roots
	item           int32     // index in its list: the item, message, definition or choice
	entry          int32     // index in a message's tool_calls
	next           int32     // definitions: the index of the next sibling's node
}

// span32 is a span of a body, packed; bodies are far below 2 GiB.
type span32 struct{ start, end int32 }

func pack(sp jsonspan.Span) span32 { return span32{int32(sp.Start), int32(sp.End)} }

func (s span32) span() jsonspan.Span { return jsonspan.Span{Start: int(s.start), End: int(s.end)} }

// Where names the node's location for messages, e.g. "tools[3]",
// "input[12]" or "messages[4].tool_calls[0]".
func (n *ToolNode) Where() string {
	item := strconv.Itoa(int(n.item))
	switch {
	case n.Kind == NodeChoice && !n.Allowed:
		return "tool_choice"
	case n.Kind == NodeChoice:
		return n.walk.roots[n.root] + "[" + item + "]"
	case n.Kind == NodeDefinition && n.parent >= 0:
		// Formatted on demand: eagerly, nested namespaces would cost the
		// square of their depth.
		return n.walk.Nodes[n.parent].Where() + ".tools[" + item + "]"
	case n.Kind == NodeDefinition:
		return n.walk.roots[n.root] + "[" + item + "]"
	case n.Kind == NodeCall && n.entry >= 0:
		return "messages[" + item + "].tool_calls[" + strconv.Itoa(int(n.entry)) + "]"
	case n.Type == "tool":
		return "messages[" + item + "]"
	}
	return "input[" + item + "]"
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
	// Nodes are the body's tool nodes: definitions, calls and outputs in
	// document order (a namespace definition before the definitions it
	// holds), then tool_choice and its allowed_tools entries.
	Nodes []ToolNode

	x     *Exchange
	edits []jsonspan.Edit
	// scratch is where measure writes a replacement.
	scratch []byte
	names   map[string]string // the walk's type and tool names, each allocated once
	roots   []string          // the lists nodes sit in, by ToolNode.root
	// rootSpans are the arrays of the definition lists in roots ("tools",
	// additional_tools items' lists), by the same index; other lists
	// have none.
	rootSpans []jsonspan.Span
	echo      bool // an edit touched a definition or tool_choice
	converted int  // the nodes the rule's edits convert
	// top are the values of the top-level members that hold or steer
	// tools, by the top* constants, found in the walk's one pass so rules
	// that remove them need no second one.
	top [topMembers]jsonspan.Span
	// ambiguous is where the first definition or list is that repeats a
	// key naming tools; "" when none does.
	ambiguous string
	inputs    int // top-level input (or messages) members seen
}

// Repeated returns where the first definition is that repeats a key
// naming it (type, name or namespace, name inside Chat's function object,
// or a namespace's tools), or the top-level tools member when it repeats. Rules read the first of such keys and upstreams the last, so a rule
// that lets tools through by name must refuse it.
func (w *ToolWalk) Repeated() (where string, ok bool) {
	return w.ambiguous, w.ambiguous != ""
}

// nodePool recycles node lists: a long history has thousands of nodes, and
// a list grown per request is garbage the size of a fair part of the body.
var nodePool sync.Pool // of *[]ToolNode

// releaseWalks recycles the node lists of the walks a rule made. The
// engine calls it when the rule's RewriteRequest has returned: a walk is
// valid only until then.
func (x *Exchange) releaseWalks() {
	for _, w := range x.walks {
		if cap(w.Nodes) > 0 && cap(w.Nodes) <= maxPooledNodes {
			clear(w.Nodes)
			nodes := w.Nodes[:0]
			nodePool.Put(&nodes)
		}
		w.Nodes = nil
	}
	x.walks = x.walks[:0]
}

// maxPooledNodes keeps a freak body's node list out of the pool.
const maxPooledNodes = 1 << 16

// WalkTools validates body and collects its tool nodes in the same single
// pass. The walk and its nodes are valid until the calling rule's
// RewriteRequest returns. It returns nil, and marks the exchange's body as not JSON, when the
// walk finds the body malformed; it returns nil too for a body that is not
// an object and for protocols it does not know.
func WalkTools(x *Exchange, body []byte) *ToolWalk {
	p := x.Protocol()
	if p != ProtocolResponses && p != ProtocolChat {
		return nil
	}
	w := &ToolWalk{Doc: body, Protocol: p, x: x}
	for i := range w.top {
		w.top[i] = jsonspan.NoSpan()
	}
	if pooled, ok := nodePool.Get().(*[]ToolNode); ok {
		w.Nodes = (*pooled)[:0]
	}
	x.walks = append(x.walks, w)
	choice := jsonspan.NoSpan()
	end := jsonspan.WalkMembers(body, 0, func(k jsonspan.Span, v int) int {
		switch {
		case jsonspan.KeyIs(body, k, "tools"):
			if w.top[topTools].Start >= 0 {
				// Two lists: rules would judge one and upstreams keep the
				// other.
				w.ambiguousAt("tools")
			}
			e := w.definitions(v, -1, "tools")
			w.top[topTools] = jsonspan.Span{Start: v, End: e}
			return e
		case jsonspan.KeyIs(body, k, "input") && p == ProtocolResponses:
			if w.inputs++; w.inputs > 1 {
				w.ambiguousAt("input") // which history, and which additional_tools?
			}
			return w.items(v)
		case jsonspan.KeyIs(body, k, "messages") && p == ProtocolChat:
			if w.inputs++; w.inputs > 1 {
				w.ambiguousAt("messages")
			}
			return w.messages(v)
		case jsonspan.KeyIs(body, k, "tool_choice"):
			e := jsonspan.SkipValue(body, v)
			choice = jsonspan.Span{Start: v, End: e}
			w.top[topChoice] = choice
			return e
		case jsonspan.KeyIs(body, k, "parallel_tool_calls"):
			return w.topMember(topParallel, v)
		case jsonspan.KeyIs(body, k, "functions") && p == ProtocolChat:
			return w.topMember(topFunctions, v)
		case jsonspan.KeyIs(body, k, "function_call") && p == ProtocolChat:
			return w.topMember(topFunctionCall, v)
		}
		return jsonspan.SkipValue(body, v)
	})
	if end < 0 || jsonspan.SkipSpace(body, end) != len(body) {
		// A valid body that is not an object has no tools; anything else
		// is not JSON and goes upstream as it came.
		if !jsonspan.Valid(body) {
			x.invalid = true
		}
		return nil
	}
	if choice.Start >= 0 {
		w.choices(choice)
	}
	x.snapshotEcho(body, w.top[topTools], choice)
	return w
}

// definitions collects the tool definitions of the array at start,
// recursing into namespaces: parent is the node of the enclosing namespace,
// or -1 for a list named root ("tools", "input[3].tools"). It returns the
// end of the value, or -1.
//
// Each definition is scanned once, whatever its key order: a "tools" array
// is walked as definitions when the walk reaches it, before the "type"
// that says whether it belongs to a namespace may be known, and its nodes
// are dropped again when it does not. Scanning a namespace's tools first
// and walking them again afterwards would cost the depth of the nesting
// times the size of the body.
func (w *ToolWalk) definitions(start int, parent int32, root string) int {
	r := w.rootIndex(root)
	doc := w.Doc
	if start >= len(doc) || doc[start] != '[' {
		return jsonspan.SkipValue(doc, start) // not a list of tools: nothing of ours
	}
	i := -1
	end := jsonspan.WalkElements(doc, start, func(v int) int {
		i++
		if doc[v] != '{' {
			return jsonspan.SkipValue(doc, v)
		}
		at := len(w.Nodes)
		w.Nodes = append(w.Nodes, ToolNode{Kind: NodeDefinition, Start: v, InnerStart: -1, InnerEnd: -1,
			walk: w, parent: parent, root: r, item: int32(i)})
		typ, name, ns, fn, custom := jsonspan.NoSpan(), jsonspan.NoSpan(), jsonspan.NoSpan(), jsonspan.NoSpan(), jsonspan.NoSpan()
		children := -1 // where this definition's tools begin in w.Nodes
		toolsKeys := 0
		// Chat's nested object: its name is read, and a repeated one
		// seen, in the same walk that crosses it.
		var fnName, customName jsonspan.Span = jsonspan.NoSpan(), jsonspan.NoSpan()
		var fnNames, customNames int
		nested := func(mv int, name *jsonspan.Span, names *int) int {
			return jsonspan.WalkMembers(doc, mv, func(k jsonspan.Span, iv int) int {
				e := jsonspan.SkipValue(doc, iv)
				if jsonspan.KeyIs(doc, k, "name") {
					if *names++; *names == 1 {
						*name = jsonspan.Span{Start: iv, End: e}
					}
				}
				return e
			})
		}
		end := jsonspan.WalkMembers(doc, v, func(k jsonspan.Span, mv int) int {
			var field *jsonspan.Span
			isTools := jsonspan.KeyIs(doc, k, "tools")
			if isTools {
				if toolsKeys++; toolsKeys == 2 {
					w.ambiguousAt(w.Nodes[at].Where()) // a second list of tools: which one counts?
				}
			}
			switch {
			case isTools && children < 0 && mv < len(doc) && doc[mv] == '[':
				children = len(w.Nodes)
				return w.definitions(mv, int32(at), "")
			case isTools:
			case jsonspan.KeyIs(doc, k, "type"):
				field = &typ
			case jsonspan.KeyIs(doc, k, "name"):
				field = &name
			case jsonspan.KeyIs(doc, k, "namespace"):
				field = &ns
			case jsonspan.KeyIs(doc, k, "function"):
				field = &fn
			case jsonspan.KeyIs(doc, k, "custom"):
				field = &custom
			}
			var e int
			switch {
			case w.Protocol == ProtocolChat && field == &fn && fn.Start < 0 && mv < len(doc) && doc[mv] == '{':
				e = nested(mv, &fnName, &fnNames)
			case w.Protocol == ProtocolChat && field == &custom && custom.Start < 0 && mv < len(doc) && doc[mv] == '{':
				e = nested(mv, &customName, &customNames)
			default:
				e = jsonspan.SkipValue(doc, mv)
			}
			if e < 0 {
				return e
			}
			if field != nil && field.Start < 0 {
				*field = jsonspan.Span{Start: mv, End: e}
			} else if field != nil {
				// The first of two keys is ours, the last the upstream's:
				// a rule that decides by the tool's identity must know.
				w.ambiguousAt(w.Nodes[at].Where())
			}
			return e
		})
		if end < 0 {
			return end
		}
		n := &w.Nodes[at]
		n.End = end
		n.Type = w.str(doc, typ)
		n.Name = w.str(doc, name)
		n.Namespace = w.str(doc, ns)
		if w.Protocol == ProtocolChat {
			// Chat nests the tool under a key named after its type.
			inner, name, names := jsonspan.NoSpan(), jsonspan.NoSpan(), 0
			switch n.Type {
			case "function", "":
				// Servers that take a tool without a type (vLLM, Ollama)
				// read it as a function.
				inner, name, names = fn, fnName, fnNames
			case "custom":
				inner, name, names = custom, customName, customNames
			}
			if inner.Start >= 0 && doc[inner.Start] == '{' {
				n.InnerStart, n.InnerEnd = inner.Start, inner.End
				n.Name = w.str(doc, name)
				if names > 1 {
					w.ambiguousAt(w.Nodes[at].Where())
				}
			}
		}
		switch {
		case children < 0:
		case n.Type != "namespace":
			w.Nodes = w.Nodes[:children]

		default:
			// The tools of a namespace that name no namespace of their own
			// are in this one.
			for j := children; j < len(w.Nodes); j = int(w.Nodes[j].next) {
				if w.Nodes[j].Namespace == "" {
					w.Nodes[j].Namespace = n.Name
				}
			}
		}
		n = &w.Nodes[at]
		n.next = int32(len(w.Nodes))
		return end
	})
	if parent < 0 && end >= 0 {
		for len(w.rootSpans) <= int(r) {
			w.rootSpans = append(w.rootSpans, jsonspan.NoSpan())
		}
		w.rootSpans[r] = jsonspan.Span{Start: start, End: end}
	}
	return end
}

// ListSpan returns the array of the list Lists()[list] when it is a
// definition list ("tools", or an additional_tools item's), or NoSpan.
func (w *ToolWalk) ListSpan(list int) jsonspan.Span {
	if list >= 0 && list < len(w.rootSpans) {
		return w.rootSpans[list]
	}
	return jsonspan.NoSpan()
}

// itemFields are the members of a Responses history item the walk reads,
// at the positions of the constants below.
var itemFields = []string{"type", "name", "namespace", "call_id", "tools", "input", "id"}

const (
	itemType = iota
	itemName
	itemNamespace
	itemCallID
	itemTools
	itemInput
	itemID
)

// items collects the calls, outputs and additional_tools definitions of a
// Responses input array, scanning each item once.
func (w *ToolWalk) items(start int) int {
	doc := w.Doc
	if start >= len(doc) || doc[start] != '[' {
		return jsonspan.SkipValue(doc, start) // a plain string prompt
	}
	var f [7]jsonspan.Span
	i := -1
	return jsonspan.EachObject(doc, start, itemFields, f[:], func(el jsonspan.Span, f []jsonspan.Span) bool {
		i++
		typ := f[itemType]
		if typ.Start < 0 || doc[typ.Start] != '"' {
			return true
		}
		t := doc[typ.Start+1 : typ.End-1]
		if bytes.IndexByte(t, '\\') >= 0 {
			// "additional\u005ftools" is additional_tools to the upstream.
			t = jsonspan.Unescape(nil, t)
		}
		var kind NodeKind
		switch {
		case string(t) == "message" || string(t) == "reasoning":
			return true
		case string(t) == "additional_tools":
			tools := 0
			jsonspan.EachMember(doc, el.Start, func(m jsonspan.Member) bool {
				if m.KeyIs(doc, "tools") {
					tools++
				}
				return true
			})
			if tools > 1 {
				w.ambiguousAt("input[" + strconv.Itoa(i) + "]")
			}
			if f[itemTools].Start >= 0 {
				return w.definitions(f[itemTools].Start, -1, "input["+strconv.Itoa(i)+"].tools") >= 0
			}
			return true
		case hasSuffix(t, "_output"):
			kind = NodeOutput
		case hasSuffix(t, "_call"):
			kind = NodeCall
		default:
			return true
		}
		n := ToolNode{Kind: kind, Start: el.Start, End: el.End, InnerStart: -1, InnerEnd: -1, item: int32(i), entry: -1}
		n.Type = w.str(doc, typ)
		n.Name = w.str(doc, f[itemName])
		n.Namespace = w.str(doc, f[itemNamespace])
		n.CallID, _ = jsonspan.StringValue(doc, f[itemCallID])
		n.input, n.typ, n.id = pack(f[itemInput]), pack(typ), pack(f[itemID])
		w.Nodes = append(w.Nodes, n)
		return true
	})
}

func hasSuffix(b []byte, s string) bool {
	return len(b) >= len(s) && string(b[len(b)-len(s):]) == s
}

// The members of a Chat message and of a tool_calls entry the walk reads,
// at the positions of the constants below.
var (
	messageFields  = []string{"role", "tool_calls", "tool_call_id"}
	toolCallFields = []string{"type", "id", "custom", "function"}
)

const (
	msgRole = iota
	msgToolCalls
	msgToolCallID
)

const (
	callType = iota
	callID
	callCustom
	callFunction
)

// messages collects the calls of Chat assistant messages and the tool
// messages that answer them.
func (w *ToolWalk) messages(start int) int {
	doc := w.Doc
	if start >= len(doc) || doc[start] != '[' {
		return jsonspan.SkipValue(doc, start)
	}
	var f [3]jsonspan.Span
	i := -1
	return jsonspan.EachObject(doc, start, messageFields, f[:], func(el jsonspan.Span, f []jsonspan.Span) bool {
		i++
		if jsonspan.IsString(doc, f[msgRole], "tool") {
			n := ToolNode{Kind: NodeOutput, Type: "tool", Start: el.Start, End: el.End, InnerStart: -1, InnerEnd: -1, item: int32(i), entry: -1}
			n.CallID, _ = jsonspan.StringValue(doc, f[msgToolCallID])
			w.Nodes = append(w.Nodes, n)
			return true
		}
		if f[msgToolCalls].Start < 0 || doc[f[msgToolCalls].Start] != '[' {
			return true
		}
		var g [4]jsonspan.Span
		j := -1
		return jsonspan.EachObject(doc, f[msgToolCalls].Start, toolCallFields, g[:], func(el jsonspan.Span, g []jsonspan.Span) bool {
			j++
			n := ToolNode{Kind: NodeCall, Start: el.Start, End: el.End, InnerStart: -1, InnerEnd: -1, item: int32(i), entry: int32(j)}
			n.Type = w.str(doc, g[callType])
			n.CallID, _ = jsonspan.StringValue(doc, g[callID])
			inner := jsonspan.NoSpan()
			switch n.Type {
			case "custom":
				inner = g[callCustom]
			case "function":
				inner = g[callFunction]
			}
			if inner.Start >= 0 && doc[inner.Start] == '{' {
				n.InnerStart, n.InnerEnd = inner.Start, inner.End
				n.Name = w.str(doc, jsonspan.Lookup(doc, inner.Start, "name"))
			}
			w.Nodes = append(w.Nodes, n)
			return true
		}) >= 0
	})
}

// choices collects tool_choice and, for allowed_tools, its entries. A
// string choice ("auto", "required", "none") is a node with an empty Type.
func (w *ToolWalk) choices(sp jsonspan.Span) {
	doc := w.Doc
	n := ToolNode{Kind: NodeChoice, Start: sp.Start, End: sp.End, InnerStart: -1, InnerEnd: -1, walk: w}
	if doc[sp.Start] != '{' {
		w.Nodes = append(w.Nodes, n)
		return
	}
	w.choiceNames(&n)
	w.Nodes = append(w.Nodes, n)
	if n.Type != "allowed_tools" {
		return
	}
	tools := jsonspan.Lookup(doc, sp.Start, "tools")
	where := "tool_choice.tools"
	if inner := jsonspan.Lookup(doc, sp.Start, "allowed_tools"); inner.Start >= 0 && doc[inner.Start] == '{' {
		// Chat nests the list: {"type":"allowed_tools","allowed_tools":{"mode","tools"}}.
		tools = jsonspan.Lookup(doc, inner.Start, "tools")
		where = "tool_choice.allowed_tools.tools"
	}
	if tools.Start < 0 || doc[tools.Start] != '[' {
		return
	}
	i := -1
	jsonspan.EachElement(doc, tools.Start, func(el jsonspan.Span) bool {
		i++
		if doc[el.Start] != '{' {
			return true
		}
		e := ToolNode{Kind: NodeChoice, Start: el.Start, End: el.End, InnerStart: -1, InnerEnd: -1, Allowed: true,
			walk: w, root: w.rootIndex(where), item: int32(i)}
		w.choiceNames(&e)
		w.Nodes = append(w.Nodes, e)
		return true
	})
}

// choiceNames reads a selector's type, name and namespace, flat or nested
// under a key named after the type.
func (w *ToolWalk) choiceNames(n *ToolNode) {
	doc := w.Doc
	var f [3]jsonspan.Span
	jsonspan.ObjectFields(doc, n.Start, []string{"type", "name", "namespace"}, f[:])
	n.Type = w.str(doc, f[0])
	n.Name = w.str(doc, f[1])
	n.Namespace = w.str(doc, f[2])
	if n.Type == "" || n.Type == "allowed_tools" {
		return
	}
	if inner := jsonspan.Lookup(doc, n.Start, n.Type); inner.Start >= 0 && doc[inner.Start] == '{' {
		n.InnerStart, n.InnerEnd = inner.Start, inner.End
		var g [2]jsonspan.Span
		jsonspan.ObjectFields(doc, inner.Start, []string{"name", "namespace"}, g[:])
		if n.Name == "" {
			n.Name = w.str(doc, g[0])
		}
		if n.Namespace == "" {
			n.Namespace = w.str(doc, g[1])
		}
	}
}

// Replace plans the replacement of a node's whole object with repl.
// Replacements must not overlap: a rule that rewrites a namespace does not
// also rewrite the definitions inside it.
func (w *ToolWalk) Replace(n *ToolNode, repl []byte) {
	w.convert(n)
	w.edits = append(w.edits, jsonspan.Edit{Start: n.Start, End: n.End, Repl: repl})
	if n.Kind == NodeDefinition || n.Kind == NodeChoice {
		w.echo = true
	}
}

// ReplaceWith is Replace for a large replacement: write appends it to the
// new body as the body is built, so it is written once, in place; size is
// its expected length. write runs during Rewrite and may read the walk.
// A body with such an edit is built whole: see ReplaceWithExact.
func (w *ToolWalk) ReplaceWith(n *ToolNode, size int, write func(dst []byte) []byte) {
	w.replaceWith(n, size, false, write)
}

// ReplaceWithExact is ReplaceWith where size is the exact length write
// appends. A large body whose edits all have exact lengths is not built by
// the last rule but as the upstream reads it (Exchange.RewriteRequestBody),
// its length announced first: write then runs on the transport's
// goroutine, until the exchange is released, and may read the walk and
// what the rule planned but change nothing.
func (w *ToolWalk) ReplaceWithExact(n *ToolNode, size int, write func(dst []byte) []byte) {
	w.replaceWith(n, size, true, write)
}

func (w *ToolWalk) replaceWith(n *ToolNode, size int, exact bool, write func(dst []byte) []byte) {
	w.convert(n)
	w.edits = append(w.edits, jsonspan.Edit{Start: n.Start, End: n.End, Write: write, Size: size, Exact: exact})
	if n.Kind == NodeDefinition || n.Kind == NodeChoice {
		w.echo = true
	}
}

// Measure returns the length write appends, writing into a buffer the
// walk reuses.
func (w *ToolWalk) Measure(write func(dst []byte) []byte) int {
	w.scratch = write(w.scratch[:0])
	return len(w.scratch)
}

// ReplaceMeasured is ReplaceWithExact for a replacement whose length is
// not known beforehand: write runs once more, now, to measure it. For a
// replacement that is small next to the body, the second write costs less
// than building the whole body.
func (w *ToolWalk) ReplaceMeasured(n *ToolNode, write func(dst []byte) []byte) {
	w.replaceWith(n, w.Measure(write), true, write)
}

// Rename plans a new name for a node: only the bytes of its name change,
// in the flat shape or in Chat's nested object. It reports false when the
// node has no name member to change.
func (w *ToolWalk) Rename(n *ToolNode, name string) bool {
	obj := n.Start
	if n.InnerStart >= 0 {
		obj = n.InnerStart
	}
	v := jsonspan.Lookup(w.Doc, obj, "name")
	if v.Start < 0 || w.Doc[v.Start] != '"' {
		return false
	}
	w.EditNode(n, v.Start, v.End, jsonspan.AppendStringStr(nil, name))
	return true
}

// EditNode plans a replacement of a byte range inside node n's object
// (its type, one member), for a rule that converts the node but leaves
// the rest as it is.
func (w *ToolWalk) EditNode(n *ToolNode, start, end int, repl []byte) {
	w.convert(n)
	w.Edit(start, end, repl, n.Kind == NodeDefinition || n.Kind == NodeChoice)
}

// MarkConverted records that the rule converts node n by an edit that is
// not the node's own: a rule that writes whole lists of definitions
// (tools_plan) marks each definition it changes, so it is counted as the
// node edits are.
func (w *ToolWalk) MarkConverted(n *ToolNode) { w.convert(n) }

// convert counts n among the definitions, calls, outputs and choices the
// rule converts (Counts.Converted), once however many edits it takes.
// The count is the exchange's once the rule's body is rewritten.
func (w *ToolWalk) convert(n *ToolNode) {
	if !n.converted {
		n.converted = true
		w.converted++
	}
}

// Edit plans a replacement of any byte range of the body. changesTools says
// whether it changes the tools or tool_choice the client declared, which
// the engine then restores where responses echo them.
func (w *ToolWalk) Edit(start, end int, repl []byte, changesTools bool) {
	w.edits = append(w.edits, jsonspan.Edit{Start: start, End: end, Repl: repl})
	w.echo = w.echo || changesTools
}

// Edits is the number of edits planned so far.
func (w *ToolWalk) Edits() int { return len(w.edits) }

// Rewrite returns the body with the planned edits applied, or the body
// itself when there are none. A rule returns its result as it is: for the
// last rule of a request that is sent on as a stream, it is nil, and the
// edits are applied as the body is read (Exchange.RewriteRequestBody).
func (w *ToolWalk) Rewrite() []byte {
	if len(w.edits) == 0 {
		return w.Doc
	}
	if w.echo {
		w.x.echo.needed = true
	}
	w.x.counts.Converted += w.converted
	w.converted = 0
	return w.x.ApplyEdits(w.Doc, w.edits)
}

// The top-level members a walk records, by their index in ToolWalk.top.
const (
	topTools = iota
	topChoice
	topParallel
	topFunctions    // Chat's legacy functions list
	topFunctionCall // and its choice
	topMembers
)

// topNames are the members' keys, by the same index.
var topNames = [topMembers]string{"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"}

// topMember records a top-level member's value and returns its end.
func (w *ToolWalk) topMember(i int, v int) int {
	e := jsonspan.SkipValue(w.Doc, v)
	w.top[i] = jsonspan.Span{Start: v, End: e}
	return e
}

// ambiguousAt records the first place a key naming tools repeats. A
// repeat inside something that turns out to hold no tools counts too: a
// body that spells one thing twice is refused rather than guessed at.
func (w *ToolWalk) ambiguousAt(where string) {
	if w.ambiguous == "" {
		w.ambiguous = where
	}
}

// rootIndex returns the index of a list's name in w.roots, adding it.
// Lists come one after another in the walk, so only the last is reused: a
// search of them all would cost the square of a body's additional_tools
// items.
func (w *ToolWalk) rootIndex(name string) int32 {
	if n := len(w.roots); n == 0 || w.roots[n-1] != name {
		w.roots = append(w.roots, name)
	}
	return int32(len(w.roots) - 1)
}

// str is the string at sp, allocated once per distinct value: a history
// repeats a few types and tool names thousands of times.
func (w *ToolWalk) str(doc []byte, sp jsonspan.Span) string {
	if sp.Start < 0 || sp.End-sp.Start < 2 || doc[sp.Start] != '"' {
		return ""
	}
	raw := doc[sp.Start+1 : sp.End-1]
	if v, ok := w.names[string(raw)]; ok {
		return v
	}
	v, _ := jsonspan.StringValue(doc, sp)
	if len(w.names) < maxInterned {
		if w.names == nil {
			w.names = make(map[string]string, 16)
		}
		w.names[string(raw)] = v
	}
	return v
}

// maxInterned bounds the names a walk keeps: a body of distinct names gains
// nothing from interning and must not grow a map as large as itself.
const maxInterned = 1024

// Span is the node's object in the body: Start to End.
func (n *ToolNode) Span() jsonspan.Span { return jsonspan.Span{Start: n.Start, End: n.End} }

// Parent is the index in ToolWalk.Nodes of the namespace definition that
// holds a definition, or -1 for one outside any namespace.
func (n *ToolNode) Parent() int { return int(n.parent) }

// List is the index in ToolWalk.Lists of the list a definition outside
// any namespace, or an allowed_tools choice entry, sits in.
func (n *ToolNode) List() int { return int(n.root) }

// Next is, for a definition, the index in ToolWalk.Nodes of its next
// sibling: the nodes between are the definitions a namespace holds.
func (n *ToolNode) Next() int { return int(n.next) }

// Index is the node's position in its array: the history item or Chat
// message, the definition in its list, or the allowed_tools entry.
func (n *ToolNode) Index() int { return int(n.item) }

// InputSpan, TypeSpan and IDSpan are a Responses history item's "input",
// "type" and "id" values, or NoSpan.
func (n *ToolNode) InputSpan() jsonspan.Span { return n.input.span() }

// TypeSpan: see InputSpan.
func (n *ToolNode) TypeSpan() jsonspan.Span { return n.typ.span() }

// IDSpan: see InputSpan.
func (n *ToolNode) IDSpan() jsonspan.Span { return n.id.span() }

// Lists are the names of the lists the walk's definitions and
// allowed_tools entries sit in ("tools", "input[3].tools",
// "tool_choice.tools"), by ToolNode.List.
func (w *ToolWalk) Lists() []string { return w.roots }

// Top returns the value of a top-level member that holds or steers tools
// ("tools", "tool_choice", "parallel_tool_calls", and Chat's legacy
// "functions" and "function_call"), or NoSpan when the body has none.
func (w *ToolWalk) Top(key string) jsonspan.Span {
	if i := slices.Index(topNames[:], key); i >= 0 {
		return w.top[i]
	}
	return jsonspan.NoSpan()
}

// RemoveTopMembers plans the removal of the named top-level members
// (see Top) that are present; neighbours go as one run, so no two
// removals claim the same comma.
func (w *ToolWalk) RemoveTopMembers(names ...string) {
	var vals []jsonspan.Span
	for i, n := range topNames {
		if w.top[i].Start >= 0 && slices.Contains(names, n) {
			vals = append(vals, w.top[i])
		}
	}
	slices.SortFunc(vals, func(a, b jsonspan.Span) int { return a.Start - b.Start })
	for _, e := range jsonspan.RemoveMembers(w.Doc, vals) {
		w.Edit(e.Start, e.End, nil, true)
	}
}

// BuiltinOfItem returns the built-in tool type of a Responses history
// item type (local_shell_call_output -> local_shell), or "".
func BuiltinOfItem(itemType string) string {
	base := strings.TrimSuffix(strings.TrimSuffix(itemType, "_output"), "_call")
	switch base {
	case "local_shell", "shell", "apply_patch", "tool_search", "computer":
		return base
	}
	return ""
}
