package messagesbridge

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/llmtransform/caddy-llm-transform/transforms"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
	"github.com/llmtransform/caddy-llm-transform/internal/providers"
)

var toolFields = []string{"type", "name", "description", "input_schema", "strict", "defer_loading", "cache_control"}

// serverToolPrefixes are the typed tools Anthropic defines, by the start of
// their dated type: Anthropic runs them, or Claude knows their schema, and
// a Chat upstream has neither.
var serverToolPrefixes = []string{"web_search_", "web_fetch_", "code_execution_", "bash_", "text_editor_", "memory_", "tool_search_tool_", "computer_", "mcp_toolset"}

// convertTools returns the Chat function tools, comma-separated: client
// tools as functions, deferred ones once a tool_reference loaded them;
// server tools are dropped (or refused, as server_tools says).
func (b *msgBuild) convertTools(ts jsonspan.Span) ([]byte, error) {
	doc := b.doc
	b.clientTools, b.sent, b.serverTools = map[string]bool{}, map[string]bool{}, map[string]bool{}
	if ts.Start < 0 || jsonspan.IsNull(doc, ts) {
		return nil, nil
	}
	if doc[ts.Start] != '[' {
		return nil, badRequest("tools", "tools must be an array")
	}
	var out []byte
	var err error
	i := -1
	var f [7]jsonspan.Span
	jsonspan.WalkElements(doc, ts.Start, func(v int) int {
		i++
		where := "tools[" + strconv.Itoa(i) + "]"
		if doc[v] != '{' {
			err = badRequest(where, "%s is not a tool object", where)
			return jsonspan.StopWalk
		}
		end := jsonspan.ObjectFieldsEnd(doc, v, toolFields, f[:])
		typ, _ := jsonspan.StringValue(doc, f[0])
		name, _ := jsonspan.StringValue(doc, f[1])
		if f[6].Start >= 0 {
			b.blockCache = true
		}
		switch {
		case typ == "" || typ == "custom":
			if name == "" {
				err = badRequest(where+".name", "%s has no name", where)
				return jsonspan.StopWalk
			}
			b.clientTools[name] = true
			if d := f[5]; d.Start >= 0 && string(doc[d.Start:d.End]) == "true" && !b.loaded[name] {
				// Claude Code's tool search: the tool is offered once a
				// search result (a tool_reference) named it.
				b.x.Decide(name, "defer", "a deferred tool no tool_reference has loaded yet")
				return end
			}
			if b.sent[name] {
				err = transforms.BadRequest("tool_name_conflict", where+".name", "messages_to_chat: two tools are named %q", name)
				return jsonspan.StopWalk
			}
			b.sent[name] = true
			if len(out) > 0 {
				out = append(out, ',')
			}
			// defer_loading, cache_control, eager_input_streaming,
			// input_examples and allowed_callers have no Chat form.
			out = append(out, `{"type":"function","function":{"name":`...)
			out = append(out, doc[f[1].Start:f[1].End]...)
			if d := f[2]; d.Start >= 0 && doc[d.Start] == '"' {
				out = append(out, `,"description":`...)
				out = append(out, doc[d.Start:d.End]...)
			}
			out = append(out, `,"parameters":`...)
			out = jsonspan.AppendRawOr(out, doc, f[3], `{"type":"object","properties":{}}`)
			if s := f[4]; s.Start >= 0 && !jsonspan.IsNull(doc, s) {
				out = append(out, `,"strict":`...)
				out = append(out, doc[s.Start:s.End]...)
			}
			out = append(out, "}}"...)
		case slices.ContainsFunc(serverToolPrefixes, func(p string) bool { return strings.HasPrefix(typ, p) }):
			if b.t.ServerTools == "reject" {
				// The client would rather hear now than get answers
				// made without the tool it declared.
				err = transforms.BadRequest("unsupported_tool", where+".type",
					"messages_to_chat: %s is the server tool %q (%s), which runs at Anthropic: a Chat Completions upstream has no such tool", where, cmp.Or(name, typ), typ)
				return jsonspan.StopWalk
			}
			b.serverTools[name] = true
			b.x.Decide(cmp.Or(name, typ), "drop", "the "+typ+" server tool runs at Anthropic: a Chat upstream has no such tool")
		default:
			err = transforms.BadRequest("unsupported_tool", where+".type", "messages_to_chat: %s has the tool type %q, which has no Chat Completions form", where, typ)
			return jsonspan.StopWalk
		}
		return end
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// convertChoice returns the Chat tool_choice member (with its leading
// comma) and whether parallel calls are off. haveTools: some tool is sent.
func (b *msgBuild) convertChoice(c jsonspan.Span, haveTools bool) ([]byte, bool, error) {
	doc := b.doc
	if c.Start < 0 || jsonspan.IsNull(doc, c) {
		return nil, false, nil
	}
	if doc[c.Start] != '{' {
		return nil, false, badRequest("tool_choice", "tool_choice must be an object")
	}
	var f [3]jsonspan.Span
	jsonspan.ObjectFields(doc, c.Start, []string{"type", "name", "disable_parallel_tool_use"}, f[:])
	typ, _ := jsonspan.StringValue(doc, f[0])
	parallelOff := f[2].Start >= 0 && string(doc[f[2].Start:f[2].End]) == "true"
	var mode string
	switch typ {
	case "auto":
		mode = providers.ChoiceAuto
	case "any":
		mode = providers.ChoiceRequired
	case "tool":
		mode = providers.ChoiceNamed
	case "none":
		mode = providers.ChoiceNone
	default:
		return nil, false, badRequest("tool_choice.type", "tool_choice.type must be auto, any, tool or none")
	}
	name, _ := jsonspan.StringValue(doc, f[1])
	if mode == providers.ChoiceNamed && !b.sent[name] {
		why := "it names a tool not sent upstream"
		if b.serverTools[name] {
			why = "it names the " + name + " server tool, which was dropped"
		}
		b.x.Decide("tool_choice", "degrade", why+": auto")
		mode = providers.ChoiceAuto
	}
	if !haveTools {
		// Chat refuses a tool_choice without tools.
		b.x.Decide("tool_choice", "drop", "no tools are sent")
		return nil, false, nil
	}
	k := b.t.knobs
	modes := k.ToolChoice
	if b.thinkingOn() {
		modes = k.ThinkingToolChoice
	}
	if !slices.Contains(modes, mode) {
		switch {
		case mode == providers.ChoiceNone:
			// Without tools no call can come, which is what none asks.
			b.x.Decide("tool_choice", "degrade", "the upstream takes no tool_choice none: no tools are sent")
			b.noTools = true
			return nil, false, nil
		case slices.Contains(modes, providers.ChoiceAuto):
			b.x.Decide("tool_choice", "degrade", "the upstream takes no forced tool_choice here (thinking: "+strconv.FormatBool(b.thinkingOn())+"): auto")
			mode = providers.ChoiceAuto
		default:
			b.x.Decide("tool_choice", "drop", "the upstream takes no such tool_choice")
			mode = ""
		}
	}
	var out []byte
	switch mode {
	case providers.ChoiceNamed:
		out = append(out, `,"tool_choice":{"type":"function","function":{"name":`...)
		out = append(out, doc[f[1].Start:f[1].End]...)
		out = append(out, "}}"...)
	case "":
	default:
		out = append(out, `,"tool_choice":"`+mode+`"`...)
	}
	return out, parallelOff, nil
}

// thinkingOn reports whether the upstream thinks on this request: the
// client asked, or the model always does, or it does unless switched off
// and the request did not; never on a non-streaming call to an upstream
// that thinks on streams only (the bridge switches it off).
func (b *msgBuild) thinkingOn() bool {
	k := b.t.knobs
	match := func(globs []string) bool {
		return slices.ContainsFunc(globs, func(g string) bool { return transforms.GlobMatch(g, b.model) })
	}
	switch {
	case k.StreamThinking && !b.stream:
		return false
	case b.thinking, match(k.ThinkingModels):
		return true
	case b.effort == "none":
		return false
	}
	return match(k.DefaultThinkingModels)
}
