package tooldefer

import (
	"fmt"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// record is what one request keeps for its answer and its rounds.
type record struct {
	active     bool
	proto      transforms.Protocol
	searchName string
	out        []byte            // the request as the rule sent it on
	last       []byte            // the last round's request
	defs       map[string][]byte // the deferred tools' definitions, by name
	deferred   []string          // their names, in the request's order
	loaded     map[string]bool   // the deferred tools a round loaded
	index      *bm25             // over the deferred tools, built at the first search
	round      *transforms.Round // the last round asked for
}

// RewriteRequest defers the request's function tools past the threshold:
// the upstream gets every other tool, the functions the history calls or
// tool_choice names, and the search tool.
func (d *Defer) RewriteRequest(x *transforms.Exchange, body []byte) ([]byte, error) {
	rec := d.record(x)
	// A rule nearer the client may take rounds: this phase then runs
	// again, on the request that round sends. What a search of this
	// exchange loaded stays loaded; the rest is worked out afresh.
	rerun := rec.active
	rec.active, rec.deferred, rec.defs, rec.index, rec.last = false, nil, nil, nil, nil
	w := transforms.WalkTools(x, body)
	if x.Unreadable() {
		return nil, transforms.ErrInvalidJSON
	}
	tools := w.Top("tools")
	if tools.Start < 0 || body[tools.Start] != '[' {
		return body, nil
	}
	used := map[string]bool{}
	declared := map[string]bool{}
	count := 0
	for i := range w.Nodes {
		n := &w.Nodes[i]
		switch n.Kind {
		case transforms.NodeDefinition:
			if n.Type == "namespace" {
				continue // its tools count, not the namespace
			}
			count++
			if n.Type == "tool_search" || n.Name == "ToolSearch" {
				x.Decide("tools_defer", "client_search", "the client brings its own tool search")
				return body, nil
			}
			if n.Parent() < 0 && n.Name != "" {
				declared[n.Name] = true
			}
		case transforms.NodeCall, transforms.NodeChoice:
			if n.Name != "" {
				used[n.Name] = true
			}
		}
	}
	if !d.Always && count <= d.threshold {
		return body, nil
	}
	for n := range rec.loaded {
		used[n] = true
	}
	rec.searchName = "tool_search"
	if declared[rec.searchName] {
		rec.searchName = "gateway_tool_search"
	}
	rec.defs = map[string][]byte{}
	list := []byte{'['}
	kept, fromHistory := 0, 0
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if n.Kind != transforms.NodeDefinition || n.Parent() >= 0 || w.Lists()[n.List()] != "tools" {
			continue
		}
		def := body[n.Start:n.End]
		if n.Type == "function" && n.Name != "" && !used[n.Name] {
			if _, dup := rec.defs[n.Name]; !dup {
				rec.defs[n.Name] = def
				rec.deferred = append(rec.deferred, n.Name)
			}
			continue
		}
		if n.Type == "function" && used[n.Name] {
			fromHistory++
		}
		if kept > 0 {
			list = append(list, ',')
		}
		list = append(list, def...)
		kept++
	}
	if len(rec.deferred) == 0 {
		return body, nil
	}
	if kept > 0 {
		list = append(list, ',')
	}
	var names []string
	if d.ListNames {
		names = rec.deferred
	}
	list = appendSearchTool(list, x.Protocol(), rec.searchName, searchDescription(len(rec.deferred), names))
	list = append(list, ']')
	rec.out = jsonspan.Apply(body, []jsonspan.Edit{{Start: tools.Start, End: tools.End, Repl: list}})
	rec.active, rec.proto = true, x.Protocol()
	x.MarkToolsChanged()
	if !rerun {
		x.TallyN("defer_tools_loaded", "history", fromHistory)
		x.Decide("tools_defer", "defer", fmt.Sprintf("%d of %d tools deferred behind %s", len(rec.deferred), count, rec.searchName))
	}
	return rec.out, nil
}

// appendSearchTool appends the search tool's definition in protocol p.
func appendSearchTool(dst []byte, p transforms.Protocol, name, description string) []byte {
	params := `{"type":"object","properties":{"query":{"type":"string","description":"Keywords for the capability you need."}},"required":["query"],"additionalProperties":false}`
	if p == transforms.ProtocolChat {
		dst = append(dst, `{"type":"function","function":{"name":`...)
		dst = jsonspan.AppendStringStr(dst, name)
		dst = append(dst, `,"description":`...)
		dst = jsonspan.AppendStringStr(dst, description)
		dst = append(dst, `,"parameters":`...)
		dst = append(dst, params...)
		return append(dst, `}}`...)
	}
	dst = append(dst, `{"type":"function","name":`...)
	dst = jsonspan.AppendStringStr(dst, name)
	dst = append(dst, `,"description":`...)
	dst = jsonspan.AppendStringStr(dst, description)
	dst = append(dst, `,"parameters":`...)
	dst = append(dst, params...)
	return append(dst, `,"strict":false}`...)
}

// roundBody is the next round's request: the last one sent, with the
// tools found loaded and the answer's turn (items) in its history.
func (rec *record) roundBody(found []string, items []byte) ([]byte, error) {
	base := rec.last
	if base == nil {
		base = rec.out
	}
	var defs []byte
	for _, n := range found {
		if rec.loaded[n] {
			continue
		}
		if rec.loaded == nil {
			rec.loaded = map[string]bool{}
		}
		rec.loaded[n] = true
		if len(defs) > 0 {
			defs = append(defs, ',')
		}
		defs = append(defs, rec.defs[n]...)
	}
	if len(defs) > 0 {
		tools := jsonspan.Lookup(base, 0, "tools")
		base = transforms.AppendToArray(base, tools, defs)
	}
	body, err := transforms.AppendHistory(rec.proto, base, items)
	if err == nil {
		rec.last = body
	}
	return body, err
}
