// Package fakeprovider is a fake, deliberately strict LLM provider for tests
// and the demo: it only understands JSON function tools. It is not a model
// and must never be used as a real backend.
package fakeprovider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

const (
	// DefaultPatch is the patch the provider sends when none is configured.
	// It is written the way sloppy models write patches (marker suffixes, no
	// "+" before added lines), so it only applies once the gateway has
	// normalised it to
	// "*** Begin Patch\n*** Add File: hello.txt\n+Hello from caddy-llm-transform\n*** End Patch\n".
	DefaultPatch = "*** Begin Patch ***\n*** Add File: hello.txt\nHello from caddy-llm-transform\n*** End Patch ***"

	// DefaultDeltaSize is the default size in bytes of the streamed
	// argument fragments.
	DefaultDeltaSize = 8

	// LogSize is how many request bodies Requests keeps: the most recent
	// ones. A demo that a real client talks to for hours must not grow.
	LogSize = 16

	// LogBodyLimit caps each kept body; a longer one is kept truncated.
	// Codex sends about 40 KB per turn.
	LogBodyLimit = 1 << 20

	// maxBody caps request bodies, as providers do.
	maxBody = 32 << 20

	toolName   = "apply_patch"
	msgPreface = "I'll create the file."
	msgApplied = "Patch applied."
	msgNoTool  = "No apply_patch function tool was offered, so I cannot edit files."
)

// Provider imitates a strict function-only provider (as DeepSeek or Bedrock
// are): it answers 400 "unknown variant `custom`", in OpenAI's error shape,
// to any request carrying Codex's freeform custom tools or custom tool calls,
// and otherwise follows a fixed script. Asked with an apply_patch function
// tool, it calls that tool once with {"input": Patch}; given the tool's
// output, it answers with text. Strict makes it refuse every other shape a
// function-only server does not know, and names OpenAI would refuse; Tool
// makes it call another function than apply_patch.
//
// It serves POST .../responses (Responses API, JSON or SSE) and
// POST .../chat/completions (Chat Completions, JSON or SSE), and answers
// anything else with 404. The zero value is ready to use.
type Provider struct {
	// Patch is the apply_patch text sent as the "input" argument of the
	// scripted function call. Default: DefaultPatch, a patch that only
	// applies after normalisation.
	Patch string

	// DeltaSize is the size in bytes of each streamed fragment of the
	// function call arguments. Fragments split the JSON text anywhere, even
	// inside escape sequences, but never inside a UTF-8 character.
	// Default: DefaultDeltaSize.
	DeltaSize int

	// Now stamps the replies' creation times; nil means time.Now. Tests pin
	// it to compare replies byte for byte.
	Now func() time.Time

	// Reply, if set, answers the requests that pass the strict checks in
	// place of the script, for tests that need another answer from the same
	// strict provider.
	Reply func(w http.ResponseWriter, req gjson.Result)

	// Strict makes the provider function-only in full, as a server that
	// knows nothing but function tools and validates names the way OpenAI
	// does. On top of the custom shapes it then refuses, with the texts such
	// servers answer:
	//   - every tool type but function: hosted tools (web_search,
	//     tool_search, local_shell, …) and namespace tools, at the top level
	//     and in additional_tools items ("unknown variant `web_search`,
	//     expected `function`");
	//   - function names outside ^[a-zA-Z0-9_-]{1,64}$, in definitions,
	//     history calls and tool_choice ("Invalid 'tools[3].name': string does
	//     not match pattern. …", "… string too long. Expected a string with
	//     maximum length 64, but got a string with length 70 instead.");
	//   - history items other than messages, reasoning, function calls and
	//     their outputs (local_shell_call, tool_search_call, …);
	//   - a namespace member on a tool, history item or tool_choice, as the
	//     upstream has no namespaces ("Unknown parameter: 'input[2].namespace'.");
	//   - a tool_choice that names a function the request does not declare
	//     ("Tool choice 'f' not found in 'tools' parameter.").
	// Off, the provider lets hosted tools and any names through, as the
	// demo's Codex run needs.
	Strict bool

	// Tool, if set, picks the function the script calls in place of
	// apply_patch. It is asked about each function tool the request
	// declares, in order (namespace is that of an enclosing namespace tool,
	// else ""), and the first one it accepts is called under the very name
	// and namespace the request gave it, with CallArguments. The script
	// still answers the call's output with text.
	Tool func(namespace, name string) bool

	// CallArguments are the arguments of a call to the tool Tool picked.
	// Default: "{}".
	CallArguments string

	// Thinking makes the provider a Chat-only provider in thinking mode,
	// as strict as DeepSeek V4 (DeepSeek) or Kimi K2 (Kimi) are, and
	// stricter where a gateway's mistake would go unnoticed:
	//   - only POST …/chat/completions; …/responses is a 404;
	//   - members Chat does not know are refused ("Unrecognized request
	//     argument supplied: input"), and so are models the provider does
	//     not serve (DeepSeek "Model Not Exist", Kimi a 404);
	//   - thinking is on unless thinking:{type:"disabled"}; while it is,
	//     every assistant message with tool_calls must carry
	//     reasoning_content, else DeepSeek's 400 MsgDeepSeekReasoning or
	//     Kimi's MsgKimiReasoningTmpl with code 20015;
	//   - at most one system message, and only first (MsgSystemFirst);
	//   - the tool messages right after an assistant message with
	//     tool_calls answer each of its calls, and no tool message stands
	//     anywhere else (MsgToolUnanswered, MsgToolOrphan);
	//   - messages and tool calls with members their role does not have
	//     are refused, as serde refuses unknown fields;
	//   - Kimi: a history call's id must be Kimi's functions.<name>:<n>;
	//   - tools as Strict checks them.
	// It answers with Turns; Reply still takes over when set. Refusals
	// come in the provider's error shape.
	Thinking Thinking

	// NoTools makes the provider a model without function calling, as an
	// Ollama model without tool support or a reasoning model served
	// without tools is. It refuses, on both endpoints and before any other
	// check, a request that mentions tools at all: the members tools,
	// tool_choice, parallel_tool_calls, functions and function_call, even
	// empty ("<model> does not support tools (request member 'tools')");
	// Chat messages with role tool or function and assistant messages with
	// tool_calls or function_call; Responses items other than messages and
	// reasoning, messages with another role than user, assistant, system
	// or developer, and content parts that are not text, image, file or
	// refusal. What it accepts it answers with text that counts the input
	// messages. A thinking provider ignores it.
	NoTools bool

	// Turns script a thinking provider's conversation: a request holding
	// k assistant tool-call messages gets Turns[k], streamed as the
	// providers do (reasoning_content deltas, content deltas, tool_calls
	// deltas, finish_reason, a usage-only chunk when asked for, [DONE]).
	// A request past the script is a 400 that says so.
	Turns []Turn

	mu     sync.Mutex
	served int      // requests received, for unique and predictable ids
	log    [][]byte // the last LogSize bodies, oldest first
	issued []string // tool call ids a thinking provider made, in order
}

// Requests returns copies of the last LogSize request bodies received on
// the responses and chat completions endpoints, oldest first, rejected ones
// included. Each is cut at LogBodyLimit bytes.
func (p *Provider) Requests() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([][]byte, len(p.log))
	for i, b := range p.log {
		out[i] = bytes.Clone(b)
	}
	return out
}

// record keeps a bounded copy of body and returns its 1-based arrival
// number, which makes the ids of the reply unique and predictable.
func (p *Provider) record(body []byte) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.log) == LogSize {
		// Shift rather than reslice, so the dropped body can be collected.
		copy(p.log, p.log[1:])
		p.log = p.log[:LogSize-1]
	}
	p.log = append(p.log, bytes.Clone(body[:min(len(body), LogBodyLimit)]))
	p.served++
	return p.served
}

func (p *Provider) patch() string {
	if p.Patch == "" {
		return DefaultPatch
	}
	return p.Patch
}

func (p *Provider) clock() int64 {
	if p.Now == nil {
		return time.Now().Unix()
	}
	return p.Now().Unix()
}

func (p *Provider) deltaSize() int {
	if p.DeltaSize <= 0 {
		return DefaultDeltaSize
	}
	return p.DeltaSize
}

type apiKind int

const (
	apiResponses apiKind = iota
	apiChat
)

// ServeHTTP implements http.Handler.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var api apiKind
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses"):
		api = apiResponses
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		api = apiChat
	default:
		// OpenAI's own wording for unknown routes.
		writeError(w, http.StatusNotFound, fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), "", "")
		return
	}
	if p.Thinking != "" && api != apiChat {
		(&thinkingError{status: http.StatusNotFound, message: "Not Found: " + r.Method + " " + r.URL.Path + " (this provider speaks Chat Completions only)"}).write(w, p.Thinking)
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("Request body too large: the limit is %d bytes.", maxBody), "", "request_too_large")
			return
		}
		writeError(w, http.StatusBadRequest, "could not read the request body: "+err.Error(), "", "")
		return
	}
	n := p.record(body)

	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		writeError(w, http.StatusBadRequest,
			"We could not parse the JSON body of your request. The OpenAI API expects a JSON payload.", "", "")
		return
	}
	req := gjson.ParseBytes(body)

	if p.Thinking != "" {
		switch rej := rejectThinking(req, p.Thinking); {
		case rej != nil:
			rej.write(w, p.Thinking)
		case p.Reply != nil:
			p.Reply(w, req)
		default:
			p.replyThinking(w, req, n, len(body))
		}
		return
	}
	if rej := p.rejectNoTools(req, api); rej != nil {
		writeError(w, http.StatusBadRequest, rej.message, rej.param, rej.code)
		return
	}
	reject := rejectChat
	if api == apiResponses {
		reject = rejectResponses
	}
	if rej := reject(req, p.Strict); rej != nil {
		writeError(w, http.StatusBadRequest, rej.message, rej.param, rej.code)
		return
	}
	switch {
	case p.Reply != nil:
		p.Reply(w, req)
	case api == apiResponses:
		p.replyResponses(w, req, n, len(body))
	default:
		p.replyChat(w, req, n, len(body))
	}
}

// rejection says why a strict function-only provider refuses a request.
type rejection struct {
	param   string
	message string
	code    string // "" is null
}

const (
	msgCustomTool     = "unknown variant `custom`, expected `function`"
	msgToolTmpl       = "unknown variant `%s`, expected `function`"
	msgChoiceTmpl     = "unknown variant `%s`, expected one of `none`, `auto`, `required`, `function`, `allowed_tools`"
	msgCustomItemTmpl = "unknown variant `%s`, expected one of `message`, `function_call`, `function_call_output`, `reasoning`"

	// maxNameLength is OpenAI's limit on function names.
	maxNameLength = 64
)

// unknownVariant is a serde-style refusal of a type tag at path.
func unknownVariant(path, typ string) *rejection {
	return &rejection{path, fmt.Sprintf(msgToolTmpl, typ), ""}
}

// unknownParameter is OpenAI's refusal of a member it does not know.
func unknownParameter(path string) *rejection {
	return &rejection{path, "Unknown parameter: '" + path + "'.", "unknown_parameter"}
}

// checkName applies OpenAI's rule for function names, ^[a-zA-Z0-9_-]+$ and
// at most 64 characters, to the name at path.
func checkName(name gjson.Result, path string) *rejection {
	if !name.Exists() {
		return &rejection{path, "Missing required parameter: '" + path + "'.", "missing_required_parameter"}
	}
	s := name.String()
	valid := s != ""
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			valid = false
			break
		}
	}
	if !valid {
		return &rejection{path, "Invalid '" + path + "': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", "invalid_value"}
	}
	if n := utf8.RuneCountInString(s); n > maxNameLength {
		return &rejection{path, fmt.Sprintf("Invalid '%s': string too long. Expected a string with maximum length %d, but got a string with length %d instead.", path, maxNameLength, n), "string_above_max_length"}
	}
	return nil
}

// rejectResponses finds the first part of a Responses request that a
// function-only provider does not understand; strict is Provider.Strict.
func rejectResponses(req gjson.Result, strict bool) *rejection {
	if rej := rejectResponsesTools(req.Get("tools"), "tools", strict); rej != nil {
		return rej
	}
	var rej *rejection
	input := req.Get("input")
	if input.IsArray() {
		for i, item := range input.Array() {
			path := "input[" + strconv.Itoa(i) + "]"
			switch typ := item.Get("type").String(); typ {
			case "custom_tool_call", "custom_tool_call_output":
				rej = &rejection{path + ".type", fmt.Sprintf(msgCustomItemTmpl, typ), ""}
			case "additional_tools":
				rej = rejectResponsesTools(item.Get("tools"), path+".tools", strict)
			case "function_call", "function_call_output":
				// Real Responses upstreams validate item ids by prefix, so a
				// converted custom call that kept its ctc_/ctco_ id fails.
				if id := item.Get("id"); id.Exists() && !strings.HasPrefix(id.String(), "fc") {
					rej = &rejection{path + ".id", fmt.Sprintf(
						"Invalid '%s.id': '%s'. Expected an ID that begins with 'fc'.", path, id.String()), ""}
				}
				switch {
				case rej != nil || !strict:
				case item.Get("namespace").Exists():
					rej = unknownParameter(path + ".namespace")
				case typ == "function_call":
					rej = checkName(item.Get("name"), path+".name")
				}
			case "", "message", "reasoning":
			default:
				if strict {
					rej = &rejection{path + ".type", fmt.Sprintf(msgCustomItemTmpl, typ), ""}
				}
			}
			if rej != nil {
				return rej
			}
		}
	}
	choice := req.Get("tool_choice")
	switch typ := choice.Get("type").String(); {
	case typ == "custom":
		return &rejection{"tool_choice.type", fmt.Sprintf(msgChoiceTmpl, typ), ""}
	case typ == "allowed_tools":
		for j, t := range choice.Get("tools").Array() {
			p := "tool_choice.tools[" + strconv.Itoa(j) + "]"
			switch tt := t.Get("type").String(); {
			case tt == "custom" || (strict && tt != "function"):
				return unknownVariant(p+".type", tt)
			case strict && t.Get("namespace").Exists():
				return unknownParameter(p + ".namespace")
			case strict:
				if rej := checkName(t.Get("name"), p+".name"); rej != nil {
					return rej
				}
			}
		}
	case !strict || !choice.IsObject():
	case typ != "function":
		return &rejection{"tool_choice.type", fmt.Sprintf(msgChoiceTmpl, typ), ""}
	case choice.Get("namespace").Exists():
		return unknownParameter("tool_choice.namespace")
	default:
		if rej := checkName(choice.Get("name"), "tool_choice.name"); rej != nil {
			return rej
		}
		name := choice.Get("name").String()
		if !declares(req.Get("tools"), name) {
			return &rejection{"tool_choice", "Tool choice '" + name + "' not found in 'tools' parameter.", ""}
		}
	}
	return nil
}

// declares reports a function tool named name in a Responses tools array
// of a strict provider, where every tool is a top-level function.
func declares(tools gjson.Result, name string) bool {
	for _, t := range tools.Array() {
		if t.Get("type").String() == "function" && t.Get("name").String() == name {
			return true
		}
	}
	return false
}

// rejectResponsesTools checks a Responses tools array, descending into
// namespace tools; a strict provider refuses anything but functions with
// valid names.
func rejectResponsesTools(tools gjson.Result, path string, strict bool) *rejection {
	for i, t := range tools.Array() {
		p := path + "[" + strconv.Itoa(i) + "]"
		switch typ := t.Get("type").String(); {
		case typ == "custom":
			return &rejection{p + ".type", msgCustomTool, ""}
		case strict && typ == "function":
			if t.Get("namespace").Exists() {
				return unknownParameter(p + ".namespace")
			}
			if rej := checkName(t.Get("name"), p+".name"); rej != nil {
				return rej
			}
		case strict && !t.Get("type").Exists():
			return &rejection{p + ".type", "Missing required parameter: '" + p + ".type'.", "missing_required_parameter"}
		case strict:
			return unknownVariant(p+".type", typ)
		case typ == "namespace":
			if rej := rejectResponsesTools(t.Get("tools"), p+".tools", strict); rej != nil {
				return rej
			}
		}
	}
	return nil
}

// rejectChat is rejectResponses for Chat Completions shapes.
func rejectChat(req gjson.Result, strict bool) *rejection {
	for i, t := range req.Get("tools").Array() {
		p := "tools[" + strconv.Itoa(i) + "]"
		typ := t.Get("type").String()
		if typ == "custom" {
			return &rejection{p + ".type", msgCustomTool, ""}
		}
		// A converter that retypes a tool but leaves its custom body behind
		// is caught here, as OpenAI refuses unknown parameters.
		if t.Get("custom").Exists() {
			return &rejection{p + ".custom", "Unknown parameter: '" + p + ".custom'.", ""}
		}
		if strict && typ != "function" {
			return unknownVariant(p+".type", typ)
		}
		if strict {
			if rej := checkName(t.Get("function.name"), p+".function.name"); rej != nil {
				return rej
			}
		}
	}
	for i, m := range req.Get("messages").Array() {
		for j, tc := range m.Get("tool_calls").Array() {
			p := "messages[" + strconv.Itoa(i) + "].tool_calls[" + strconv.Itoa(j) + "]"
			typ := tc.Get("type").String()
			if typ == "custom" || (strict && typ != "function") {
				return unknownVariant(p+".type", typ)
			}
			if strict {
				if rej := checkName(tc.Get("function.name"), p+".function.name"); rej != nil {
					return rej
				}
			}
		}
	}
	choice := req.Get("tool_choice")
	switch typ := choice.Get("type").String(); {
	case typ == "custom":
		return &rejection{"tool_choice.type", fmt.Sprintf(msgChoiceTmpl, typ), ""}
	case typ == "allowed_tools":
		// Chat nests the list, unlike Responses.
		for j, t := range choice.Get("allowed_tools.tools").Array() {
			p := "tool_choice.allowed_tools.tools[" + strconv.Itoa(j) + "]"
			if tt := t.Get("type").String(); tt == "custom" || (strict && tt != "function") {
				return unknownVariant(p+".type", tt)
			}
			if strict {
				if rej := checkName(t.Get("function.name"), p+".function.name"); rej != nil {
					return rej
				}
			}
		}
	case strict && choice.IsObject() && typ != "function":
		return &rejection{"tool_choice.type", fmt.Sprintf(msgChoiceTmpl, typ), ""}
	case strict && choice.IsObject():
		if rej := checkName(choice.Get("function.name"), "tool_choice.function.name"); rej != nil {
			return rej
		}
	}
	return nil
}

// writeError writes an OpenAI-shaped error; empty param and code are null.
func writeError(w http.ResponseWriter, status int, message, param, code string) {
	nullable := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	b := mustMarshal(jsonObj{{"error", jsonObj{
		{"message", message},
		{"type", typ},
		{"param", nullable(param)},
		{"code", nullable(code)},
	}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// script is what the script decided to answer.
type script struct {
	preface   string // assistant text before the call; or the whole answer
	call      bool
	name      string // the function called
	namespace string // namespace that declared it, if any
	arguments string
}

// picks reports whether the script calls the function name (in namespace):
// the one Tool accepts, else apply_patch.
func (p *Provider) picks(namespace, name string) bool {
	if p.Tool != nil {
		return p.Tool(namespace, name)
	}
	return name == toolName
}

// callTo is the scripted call of the function name in namespace.
func (p *Provider) callTo(namespace, name string) script {
	args := p.arguments()
	if p.Tool != nil {
		args = p.CallArguments
		if args == "" {
			args = "{}"
		}
	}
	return script{preface: msgPreface, call: true, name: name, namespace: namespace, arguments: args}
}

func (p *Provider) planResponses(req gjson.Result) script {
	if p.NoTools {
		return noToolsResponsesScript(req)
	}
	items := req.Get("input").Array()
	if len(items) > 0 && items[len(items)-1].Get("type").String() == "function_call_output" {
		return script{preface: msgApplied}
	}
	for _, t := range req.Get("tools").Array() {
		switch t.Get("type").String() {
		case "function":
			if name := t.Get("name").String(); p.picks("", name) {
				return p.callTo("", name)
			}
		case "namespace":
			ns := t.Get("name").String()
			for _, nt := range t.Get("tools").Array() {
				if name := nt.Get("name").String(); nt.Get("type").String() == "function" && p.picks(ns, name) {
					return p.callTo(ns, name)
				}
			}
		}
	}
	return script{preface: msgNoTool}
}

func (p *Provider) planChat(req gjson.Result) script {
	if p.NoTools {
		return noToolsChatScript(req)
	}
	msgs := req.Get("messages").Array()
	if len(msgs) > 0 && msgs[len(msgs)-1].Get("role").String() == "tool" {
		return script{preface: msgApplied}
	}
	for _, t := range req.Get("tools").Array() {
		if name := t.Get("function.name").String(); t.Get("type").String() == "function" && p.picks("", name) {
			c := p.callTo("", name)
			c.preface = ""
			return c
		}
	}
	return script{preface: msgNoTool}
}

// arguments encodes {"input": Patch} the way a model writes it, without
// Go's HTML escaping.
func (p *Provider) arguments() string { return PatchArguments(p.patch()) }

// splitBytes cuts s into pieces of about size bytes, moving each cut back
// to a UTF-8 character boundary so every piece stays valid JSON text.
func splitBytes(s string, size int) []string {
	var out []string
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 {
			_, n = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// splitWords cuts text before each space, as token streams do.
func splitWords(text string) []string {
	var out []string
	for len(text) > 0 {
		i := strings.IndexByte(text[1:], ' ')
		if i < 0 {
			out = append(out, text)
			break
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}

// estimateTokens is a crude but deterministic token estimate for usage fields.
func estimateTokens(n int) int { return (n + 3) / 4 }

func (p *Provider) replyResponses(w http.ResponseWriter, req gjson.Result, n, bodyLen int) {
	plan := p.planResponses(req)
	model := req.Get("model").String()
	created := p.clock()
	id := "resp_demo_" + strconv.Itoa(n)
	msgID := "msg_demo_" + strconv.Itoa(n)
	fcID := "fc_demo_" + strconv.Itoa(n)
	callID := "call_demo_" + strconv.Itoa(n)

	messageItem := func(status, text string) jsonObj {
		content := []any{}
		if status == "completed" {
			content = append(content, outputText(text))
		}
		return jsonObj{{"id", msgID}, {"type", "message"}, {"status", status}, {"content", content}, {"role", "assistant"}}
	}
	callItem := func(status, args string) jsonObj {
		it := jsonObj{{"id", fcID}, {"type", "function_call"}, {"status", status}, {"arguments", args}, {"call_id", callID}, {"name", plan.name}}
		if plan.namespace != "" {
			it = append(it, jsonField{"namespace", plan.namespace})
		}
		return it
	}

	output := []any{messageItem("completed", plan.preface)}
	if plan.call {
		output = append(output, callItem("completed", plan.arguments))
	}
	outTokens := estimateTokens(len(plan.preface) + len(plan.arguments))
	usage := jsonObj{
		{"input_tokens", estimateTokens(bodyLen)},
		{"input_tokens_details", jsonObj{{"cached_tokens", 0}}},
		{"output_tokens", outTokens},
		{"output_tokens_details", jsonObj{{"reasoning_tokens", 0}}},
		{"total_tokens", estimateTokens(bodyLen) + outTokens},
	}
	toolChoice := json.RawMessage(`"auto"`)
	if c := req.Get("tool_choice"); c.Exists() {
		toolChoice = json.RawMessage(c.Raw)
	}
	tools := json.RawMessage(`[]`)
	if t := req.Get("tools"); t.IsArray() {
		tools = json.RawMessage(t.Raw)
	}
	parallel := true
	if ptc := req.Get("parallel_tool_calls"); ptc.Exists() {
		parallel = ptc.Bool()
	}
	response := func(status string, output []any, usage any) jsonObj {
		var completedAt any
		if status == "completed" {
			completedAt = created
		}
		return jsonObj{
			{"id", id}, {"object", "response"}, {"created_at", created}, {"status", status},
			{"completed_at", completedAt}, {"error", nil}, {"incomplete_details", nil},
			{"model", model}, {"output", output}, {"parallel_tool_calls", parallel},
			{"tool_choice", toolChoice}, {"tools", tools}, {"usage", usage},
		}
	}

	if !req.Get("stream").Bool() {
		writeJSON(w, response("completed", output, usage))
		return
	}

	s := newSSE(w, true, req.Get("stream_options.include_obfuscation").Type != gjson.False)
	s.event("response.created", jsonField{"response", response("in_progress", []any{}, nil)})
	s.event("response.in_progress", jsonField{"response", response("in_progress", []any{}, nil)})

	text := plan.preface
	s.event("response.output_item.added", jsonField{"output_index", 0}, jsonField{"item", messageItem("in_progress", "")})
	s.event("response.content_part.added", jsonField{"item_id", msgID}, jsonField{"output_index", 0},
		jsonField{"content_index", 0}, jsonField{"part", outputText("")})
	for _, piece := range splitWords(text) {
		s.delta("response.output_text.delta", piece, jsonField{"item_id", msgID}, jsonField{"output_index", 0},
			jsonField{"content_index", 0}, jsonField{"delta", piece}, jsonField{"logprobs", []any{}})
	}
	s.event("response.output_text.done", jsonField{"item_id", msgID}, jsonField{"output_index", 0},
		jsonField{"content_index", 0}, jsonField{"text", text}, jsonField{"logprobs", []any{}})
	s.event("response.content_part.done", jsonField{"item_id", msgID}, jsonField{"output_index", 0},
		jsonField{"content_index", 0}, jsonField{"part", outputText(text)})
	s.event("response.output_item.done", jsonField{"output_index", 0}, jsonField{"item", messageItem("completed", text)})

	if plan.call {
		s.event("response.output_item.added", jsonField{"output_index", 1}, jsonField{"item", callItem("in_progress", "")})
		for _, piece := range splitBytes(plan.arguments, p.deltaSize()) {
			s.delta("response.function_call_arguments.delta", piece, jsonField{"item_id", fcID},
				jsonField{"output_index", 1}, jsonField{"delta", piece})
		}
		s.event("response.function_call_arguments.done", jsonField{"item_id", fcID}, jsonField{"output_index", 1},
			jsonField{"name", plan.name}, jsonField{"arguments", plan.arguments})
		s.event("response.output_item.done", jsonField{"output_index", 1}, jsonField{"item", callItem("completed", plan.arguments)})
	}
	s.event("response.completed", jsonField{"response", response("completed", output, usage)})
}

// writeChatCompletion writes a whole Chat answer: one choice holding msg.
func writeChatCompletion(w http.ResponseWriter, id string, created int64, model string, msg jsonObj, finish string, usage any) {
	writeJSON(w, jsonObj{
		{"id", id}, {"object", "chat.completion"}, {"created", created}, {"model", model},
		{"choices", []any{jsonObj{{"index", 0}, {"message", msg}, {"logprobs", nil}, {"finish_reason", finish}}}},
		{"usage", usage},
	})
}

// chatChunker returns what writes one chunk of a Chat stream with the
// given choices and usage. OpenAI sends "usage":null on every chunk once
// usage was asked for.
func chatChunker(s *sseWriter, req gjson.Result, id string, created int64, model string) func(choices []any, usage any) {
	includeUsage := req.Get("stream_options.include_usage").Bool()
	return func(choices []any, usage any) {
		c := jsonObj{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model}, {"choices", choices}}
		if includeUsage {
			c = append(c, jsonField{"usage", usage})
		}
		s.data(c)
	}
}

func outputText(text string) jsonObj {
	return jsonObj{{"type", "output_text"}, {"annotations", []any{}}, {"logprobs", []any{}}, {"text", text}}
}

func (p *Provider) replyChat(w http.ResponseWriter, req gjson.Result, n, bodyLen int) {
	plan := p.planChat(req)
	model := req.Get("model").String()
	created := p.clock()
	id := "chatcmpl-demo-" + strconv.Itoa(n)
	callID := "call_demo_" + strconv.Itoa(n)
	finish := "stop"
	if plan.call {
		finish = "tool_calls"
	}
	outTokens := estimateTokens(len(plan.preface) + len(plan.arguments))
	usage := jsonObj{
		{"prompt_tokens", estimateTokens(bodyLen)},
		{"completion_tokens", outTokens},
		{"total_tokens", estimateTokens(bodyLen) + outTokens},
		{"prompt_tokens_details", jsonObj{{"cached_tokens", 0}}},
	}
	// A call's first appearance names it; later stream fragments carry only
	// its index and more arguments.
	fullCall := func(args string) jsonObj {
		return jsonObj{{"id", callID}, {"type", "function"}, {"function", jsonObj{{"name", plan.name}, {"arguments", args}}}}
	}
	callDelta := func(args string) jsonObj {
		return jsonObj{{"index", 0}, {"function", jsonObj{{"arguments", args}}}}
	}

	if !req.Get("stream").Bool() {
		var content any
		var toolCalls any
		if plan.call {
			toolCalls = []any{fullCall(plan.arguments)}
		} else {
			content = plan.preface
		}
		msg := jsonObj{{"role", "assistant"}, {"content", content}, {"refusal", nil}, {"annotations", []any{}}}
		if toolCalls != nil {
			msg = append(msg, jsonField{"tool_calls", toolCalls})
		}
		writeChatCompletion(w, id, created, model, msg, finish, usage)
		return
	}

	s := newSSE(w, false, false)
	chunk := chatChunker(s, req, id, created, model)
	choice := func(delta jsonObj, finishReason any) []any {
		return []any{jsonObj{{"index", 0}, {"delta", delta}, {"logprobs", nil}, {"finish_reason", finishReason}}}
	}
	if plan.call {
		chunk(choice(jsonObj{{"role", "assistant"}, {"content", nil}, {"tool_calls", []any{append(jsonObj{{"index", 0}}, fullCall("")...)}}}, nil), nil)
		for _, piece := range splitBytes(plan.arguments, p.deltaSize()) {
			chunk(choice(jsonObj{{"tool_calls", []any{callDelta(piece)}}}, nil), nil)
		}
	} else {
		chunk(choice(jsonObj{{"role", "assistant"}, {"content", ""}, {"refusal", nil}}, nil), nil)
		for _, piece := range splitWords(plan.preface) {
			chunk(choice(jsonObj{{"content", piece}}, nil), nil)
		}
	}
	chunk(choice(jsonObj{}, finish), nil)
	if req.Get("stream_options.include_usage").Bool() {
		chunk([]any{}, usage)
	}
	s.raw("[DONE]")
}

func writeJSON(w http.ResponseWriter, v any) {
	b := append(mustMarshal(v), '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// sseWriter writes server-sent events and flushes each one, so tests see the
// stream arrive event by event as it would from a real provider.
type sseWriter struct {
	w           http.ResponseWriter
	rc          *http.ResponseController
	named       bool // Responses streams add an "event:" line; Chat streams do not
	obfuscation bool
	seq         int
	failed      bool
}

func newSSE(w http.ResponseWriter, named, obfuscation bool) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, rc: http.NewResponseController(w), named: named, obfuscation: obfuscation}
}

// event writes a Responses event with type and sequence_number first.
func (s *sseWriter) event(typ string, fields ...jsonField) {
	obj := append(jsonObj{{"type", typ}, {"sequence_number", s.seq}}, fields...)
	s.seq++
	s.write(typ, string(mustMarshal(obj)))
}

// delta is event plus the obfuscation padding real OpenAI streams add to
// delta events so that their sizes do not reveal the token lengths.
func (s *sseWriter) delta(typ, piece string, fields ...jsonField) {
	if s.obfuscation {
		fields = append(fields, jsonField{"obfuscation", padding(s.seq, len(piece))})
	}
	s.event(typ, fields...)
}

// data writes a Chat chunk.
func (s *sseWriter) data(v any) { s.write("", string(mustMarshal(v))) }

// raw writes a data line verbatim, for the [DONE] sentinel.
func (s *sseWriter) raw(line string) { s.write("", line) }

func (s *sseWriter) write(name, data string) {
	if s.failed {
		return
	}
	var b strings.Builder
	if s.named && name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: " + data + "\n\n")
	if _, err := io.WriteString(s.w, b.String()); err != nil {
		// The client went away; stop writing rather than fail noisily.
		s.failed = true
		return
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.failed = true
	}
}

// padding is deterministic filler, so that tests may compare bytes.
func padding(seq, pieceLen int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	n := 4 + (16-pieceLen%16)%16
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[(seq*7+i*13)%len(alphabet)]
	}
	return string(b)
}

// jsonObj is a JSON object that keeps its keys in order, so the replies
// read like a real provider's and stay byte-stable for tests.
type jsonObj []jsonField

type jsonField struct {
	key string
	val any
}

// MarshalJSON implements json.Marshaler.
func (o jsonObj) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.val)
		if err != nil {
			return nil, fmt.Errorf("field %s: %w", f.key, err)
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only fixed shapes and strings are marshalled here.
		panic("fakeprovider: " + err.Error())
	}
	return b
}

// Interface guards
var (
	_ http.Handler   = (*Provider)(nil)
	_ json.Marshaler = jsonObj(nil)
)
