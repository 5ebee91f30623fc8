package fakeprovider

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/tidwall/gjson"
)

// noToolsMembers are the top-level members through which a request asks
// for function calling, in the order a no-tools provider looks for them.
// Presence is enough, even with an empty or null value: a gateway that
// serves such a model should leave them out, not blank them.
var noToolsMembers = []string{"tools", "tool_choice", "parallel_tool_calls", "functions", "function_call"}

// Responses roles and content part types a model without tools still
// understands; anything else is a tool shape or an error of the converter.
var (
	noToolsRoles     = []string{"user", "assistant", "system", "developer"}
	noToolsPartTypes = []string{"input_text", "output_text", "input_image", "input_file", "refusal"}
)

// rejectNoTools finds the first part of a request that asks a model without
// function calling to take part in a tool exchange; nil when the provider
// has tools, or the request does not ask for them.
func (p *Provider) rejectNoTools(req gjson.Result, api apiKind) *rejection {
	if !p.NoTools {
		return nil
	}
	for _, m := range noToolsMembers {
		if req.Get(m).Exists() {
			return noToolsRefusal(req, m, "request member '"+m+"'")
		}
	}
	if api == apiChat {
		return rejectNoToolsChat(req)
	}
	return rejectNoToolsResponses(req)
}

// noToolsRefusal words a refusal the way Ollama does ("<model> does not
// support tools"), adding what gave the tools away, since a test wants to
// know which part of the request a gateway forgot to strip.
func noToolsRefusal(req gjson.Result, param, what string) *rejection {
	model := req.Get("model").String()
	if model == "" {
		model = "this model"
	}
	return &rejection{param, model + " does not support tools (" + what + ")", ""}
}

func rejectNoToolsChat(req gjson.Result) *rejection {
	for i, m := range req.Get("messages").Array() {
		path := "messages[" + strconv.Itoa(i) + "]"
		role := m.Get("role").String()
		if role == "tool" || role == "function" {
			return noToolsRefusal(req, path+".role", path+" has role '"+role+"'")
		}
		if role != "assistant" {
			continue
		}
		for _, member := range []string{"tool_calls", "function_call"} {
			if m.Get(member).Exists() {
				return noToolsRefusal(req, path+"."+member, path+" carries '"+member+"'")
			}
		}
	}
	return nil
}

func rejectNoToolsResponses(req gjson.Result) *rejection {
	input := req.Get("input")
	if !input.IsArray() {
		return nil
	}
	for i, item := range input.Array() {
		path := "input[" + strconv.Itoa(i) + "]"
		switch typ := item.Get("type").String(); typ {
		case "reasoning":
		case "", "message":
			if rej := rejectNoToolsMessage(item, path); rej != nil {
				return rej
			}
		default:
			return noToolsRefusal(req, path+".type", path+" is a '"+typ+"' item")
		}
	}
	return nil
}

// rejectNoToolsMessage checks a Responses message item: a converter that
// turns a tool result into a message with role "tool", or keeps a
// tool_result part, would otherwise slip past the item type check.
func rejectNoToolsMessage(item gjson.Result, path string) *rejection {
	role := item.Get("role")
	if !role.Exists() {
		return &rejection{path + ".role", "Missing required parameter: '" + path + ".role'.", "missing_required_parameter"}
	}
	if !slices.Contains(noToolsRoles, role.String()) {
		return invalidValue(path+".role", role.String(), noToolsRoles)
	}
	content := item.Get("content")
	if !content.IsArray() {
		return nil
	}
	for j, part := range content.Array() {
		p := path + ".content[" + strconv.Itoa(j) + "].type"
		typ := part.Get("type")
		if !typ.Exists() {
			return &rejection{p, "Missing required parameter: '" + p + "'.", "missing_required_parameter"}
		}
		if !slices.Contains(noToolsPartTypes, typ.String()) {
			return invalidValue(p, typ.String(), noToolsPartTypes)
		}
	}
	return nil
}

// invalidValue is OpenAI's refusal of a value outside an enumeration.
func invalidValue(param, got string, supported []string) *rejection {
	list := ""
	for i, s := range supported {
		switch {
		case i == 0:
		case i == len(supported)-1:
			list += ", and "
		default:
			list += ", "
		}
		list += "'" + s + "'"
	}
	return &rejection{param, "Invalid value: '" + got + "'. Supported values are: " + list + ".", "invalid_value"}
}

// noToolsText is a no-tools provider's whole answer. It counts what it
// read so a test can tell the request reached the model intact.
func noToolsText(messages int) string {
	noun := "messages"
	if messages == 1 {
		noun = "message"
	}
	return fmt.Sprintf("I cannot call tools, so here is plain text: I read %d input %s.", messages, noun)
}

// noToolsResponsesScript is the answer to a Responses request: a string input is
// one message, and only message items count in an array.
func noToolsResponsesScript(req gjson.Result) script {
	input := req.Get("input")
	n := 0
	switch {
	case input.Type == gjson.String:
		n = 1
	case input.IsArray():
		for _, item := range input.Array() {
			if typ := item.Get("type").String(); typ == "" || typ == "message" {
				n++
			}
		}
	}
	return script{preface: noToolsText(n)}
}

func noToolsChatScript(req gjson.Result) script {
	return script{preface: noToolsText(len(req.Get("messages").Array()))}
}
