package preflight_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	tt "github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// Property and fuzz tests of the client's side of tools_preflight's rounds:
// whatever the upstream answers (text, reasoning, calls valid, invalid or
// repairable, repeats, custom calls; cut streams, failed rounds, answers
// at their length limit) and whatever the rule's options and the
// request's max_rounds, the client gets one well-formed answer in its
// protocol's stream grammar, without a re-ask's hidden text, with only the
// calls it should get.
//
// A case is a script: the rule's options, the exchange's MaxRounds, the
// chunk size the stream is fed in, and up to four upstream answers, the
// n-th for the n-th request. The generator draws every choice from a
// grChooser: math/rand for the seeded property tests, the fuzzer's bytes
// for the fuzz targets (one byte a choice, 0 the simplest). A recorded
// case's choices are its bytes, so a failing case shrinks byte by byte and
// is kept as a seed under testdata/fuzz.
//
// grExpectFor is a model of the rule's rounds: which answers the client's
// rules are handed, how many requests go upstream, which calls reach the
// client and whether the answer ends in the rule's error. The grCheck
// functions compare the client's bytes with it and with the grammar.

// ---- choices ----

type grChooser interface{ intn(n int) int }

// grBytes replays choices from bytes: byte i is choice i (mod n); past the
// end every choice is 0.
type grBytes struct {
	b []byte
	i int
}

func (c *grBytes) intn(n int) int {
	if n > 256 {
		panic("grBytes: a choice of more than 256")
	}
	if n <= 1 || c.i >= len(c.b) {
		return 0
	}
	v := int(c.b[c.i])
	c.i++
	return v % n
}

// grRecorder draws choices from a PRNG and records them as bytes that
// grBytes replays to the same case.
type grRecorder struct {
	r *rand.Rand
	b []byte
}

func (c *grRecorder) intn(n int) int {
	if n > 256 {
		panic("grRecorder: a choice of more than 256")
	}
	if n <= 1 {
		return 0
	}
	v := c.r.IntN(n)
	c.b = append(c.b, byte(v))
	return v
}

// ---- the request's tools ----

const (
	grReadSchema = `{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"],"additionalProperties":false}`
	grListSchema = `{"type":"object","properties":{"dir":{"type":"string"},"depth":{"type":"integer","minimum":0}},"required":["dir"]}`
)

func grRequest(chat, stream bool) []byte {
	s := strconv.FormatBool(stream)
	if chat {
		opts := ""
		if stream {
			opts = `"stream_options":{"include_usage":true},`
		}
		return []byte(`{"model":"m","stream":` + s + `,` + opts + `"messages":[{"role":"user","content":"do the work"}],"tools":[` +
			`{"type":"function","function":{"name":"read_file","parameters":` + grReadSchema + `}},` +
			`{"type":"function","function":{"name":"list_dir","parameters":` + grListSchema + `}},` +
			`{"type":"custom","custom":{"name":"apply_patch"}}]}`)
	}
	return []byte(`{"model":"m","stream":` + s + `,"input":"do the work","tools":[` +
		`{"type":"function","name":"read_file","parameters":` + grReadSchema + `},` +
		`{"type":"function","name":"list_dir","parameters":` + grListSchema + `},` +
		`{"type":"custom","name":"apply_patch","description":"patch files"}]}`)
}

// grSchemas validates calls independently of the rule.
var grSchemas = func() map[string]*jsonschema.Schema {
	out := map[string]*jsonschema.Schema{}
	for name, s := range map[string]string{"read_file": grReadSchema, "list_dir": grListSchema} {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
		if err != nil {
			panic(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("mem:///"+name+".json", doc); err != nil {
			panic(err)
		}
		out[name] = c.MustCompile("mem:///" + name + ".json")
	}
	return out
}()

// grValidCall reports whether a call the client got is one its tools
// accept as it stands: a declared custom tool, or a declared function
// with arguments that are one JSON value matching its schema.
func grValidCall(custom bool, name, args string) bool {
	if custom {
		return name == "apply_patch"
	}
	sch := grSchemas[name]
	if sch == nil {
		return false
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err != nil {
		return false
	}
	return sch.Validate(inst) == nil
}

// grCanonical is the rule's canonical form of arguments (members sorted,
// numbers as written).
func grCanonical(args string) string {
	d := json.NewDecoder(strings.NewReader(args))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return args
	}
	b, err := json.Marshal(v)
	if err != nil {
		return args
	}
	return string(b)
}

// ---- cases ----

type grKind uint8

const (
	grMessage    grKind = iota
	grReasoning         // Chat: reasoning_content deltas
	grValid             // a declared function, arguments valid
	grWrongType         // arguments failing the schema: a wrong type, an extra member, below minimum
	grMissing           // arguments missing a required member (or empty)
	grBadJSON           // arguments that are no JSON object and no cheap repair makes one
	grRepaired          // valid arguments in a ```json fence or with a trailing comma
	grNameCase          // a declared function's name off by case or separators, arguments valid
	grUnknown           // a tool the request did not declare
	grRepeat            // an earlier call of the script again, laid out anew
	grCustom            // the declared custom tool
	grCustomCase        // the declared custom tool, its name off by case
	grKinds
)

var grKindName = [grKinds]string{"message", "reasoning", "valid", "wrong_type", "missing", "bad_json", "repaired", "case", "unknown", "repeat", "custom", "custom_case"}

// grKindWeight weighs the kinds; message first so that choice 0 is text.
var grKindWeight = [grKinds]int{4, 2, 4, 3, 2, 2, 1, 1, 2, 2, 1, 1}

type grItem struct {
	kind   grKind
	custom bool   // a custom tool's call
	name   string // the tool name as the model wrote it
	args   string // a function's arguments or a custom call's input, as written
	valid  bool   // valid once the rule's cheap repairs applied
	canon  string // a valid function call's tool and canonical arguments (dedup)
	pieces []string
}

func (it *grItem) call() bool { return it.kind >= grValid }

type grAnswer struct {
	items      []grItem
	status     int  // the round's upstream status (the first answer's is 200)
	end        int  // 0 completed / stop|tool_calls; 1 incomplete / length; 2 failed (Responses)
	inProgress bool // Responses: a response.in_progress after response.created
	cut        int  // -1: whole; else a raw choice: the stream keeps cut % len(events) events
	usage      [4]int
}

type grScript struct {
	chat       bool
	maxRepairs int
	onFailure  string
	dedup      bool
	maxRounds  int // Limits.MaxRounds: 0 the default (3), -1 none
	chunk      int
	answers    []grAnswer
}

var grChunks = [...]int{4096, 64, 7, 3, 64, 4096, 7, 1}

func grGen(c grChooser, chat bool) *grScript {
	g := &grScript{chat: chat}
	g.maxRepairs = [...]int{1, 2, 0, 1, 2}[c.intn(5)]
	g.onFailure = [...]string{"pass", "drop", "error"}[c.intn(3)]
	g.dedup = c.intn(4) != 3
	g.maxRounds = [...]int{0, 1, 2, 3, 0, -1}[c.intn(6)]
	g.chunk = grChunks[c.intn(len(grChunks))]
	n := 1 + c.intn(4)
	var calls []grItem // the script's function calls so far, for repeats
	for a := 0; a < n; a++ {
		ans := grAnswer{status: 200, cut: -1}
		if a > 0 {
			switch c.intn(10) {
			case 8:
				ans.status = 500
			case 9:
				ans.status = 429
			}
		}
		var k int
		if a == 0 {
			k = 1 + c.intn(4) // the answer a round would repair
		} else {
			k = c.intn(5)
		}
		for i := 0; i < k; i++ {
			it := grGenItem(c, chat, a, i, calls)
			if it.call() && !it.custom {
				calls = append(calls, it)
			}
			ans.items = append(ans.items, it)
		}
		switch v := c.intn(8); {
		case v == 6:
			ans.end = 1
		case v == 7 && !chat:
			ans.end = 2
		}
		ans.inProgress = c.intn(2) == 1
		if c.intn(6) == 5 {
			ans.cut = c.intn(256)
		}
		in := 1 + c.intn(200)
		out := c.intn(100)
		ans.usage = [4]int{in, c.intn(in + 1), out, c.intn(out + 1)}
		g.answers = append(g.answers, ans)
	}
	return g
}

func grPickKind(c grChooser) grKind {
	total := 0
	for _, w := range grKindWeight {
		total += w
	}
	v := c.intn(total)
	for k, w := range grKindWeight {
		if v < w {
			return grKind(k)
		}
		v -= w
	}
	return grMessage
}

// grValidArgs returns a declared function and valid arguments for it,
// members in either order, compact or spaced.
func grValidArgs(c grChooser, tag string) (tool, args string) {
	var m [][2]string
	if c.intn(2) == 0 {
		tool = "read_file"
		m = append(m, [2]string{"path", strconv.Quote("p-" + tag + ".txt")})
		if c.intn(2) == 1 {
			m = append(m, [2]string{"limit", strconv.Itoa(c.intn(100))})
		}
	} else {
		tool = "list_dir"
		m = append(m, [2]string{"dir", strconv.Quote("d-" + tag)})
		if c.intn(2) == 1 {
			m = append(m, [2]string{"depth", strconv.Itoa(c.intn(5))})
		}
	}
	if c.intn(2) == 1 && len(m) == 2 {
		m[0], m[1] = m[1], m[0]
	}
	sep, colon := ",", ":"
	if c.intn(2) == 1 {
		sep, colon = ", ", ": "
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, kv := range m {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(strconv.Quote(kv[0]) + colon + kv[1])
	}
	b.WriteByte('}')
	return tool, b.String()
}

func grGenItem(c grChooser, chat bool, a, i int, earlier []grItem) grItem {
	kind := grPickKind(c)
	if kind == grRepeat && len(earlier) == 0 {
		kind = grValid
	}
	tag := fmt.Sprintf("a%d-i%d", a, i)
	it := grItem{kind: kind}
	np := c.intn(4)
	switch kind {
	case grMessage, grReasoning:
		prefix := "txt-"
		if kind == grReasoning {
			prefix = "rsn-"
		}
		for d := 0; d < np; d++ {
			s := fmt.Sprintf("%s%s-d%d ", prefix, tag, d)
			if c.intn(3) == 0 {
				s += "\"é\"\n"
			}
			it.pieces = append(it.pieces, s)
		}
		return it
	case grValid:
		it.name, it.args = grValidArgs(c, tag)
		it.valid, it.canon = true, it.name+"\x00"+grCanonical(it.args)
	case grWrongType:
		if c.intn(2) == 0 {
			it.name = "read_file"
			it.args = [...]string{`{"path":"p-` + tag + `.txt","limit":"ten"}`, `{"path":7}`, `{"path":"p-` + tag + `","extra":true}`}[c.intn(3)]
		} else {
			it.name = "list_dir"
			it.args = [...]string{`{"dir":["d-` + tag + `"]}`, `{"dir":"d","depth":-1}`, `{"dir":"d","depth":1.5}`}[c.intn(3)]
		}
	case grMissing:
		switch c.intn(4) {
		case 0:
			it.name, it.args = "read_file", `{"limit":3}`
		case 1:
			it.name, it.args = "read_file", `{}`
		case 2:
			it.name, it.args = "read_file", ``
		default:
			it.name, it.args = "list_dir", `{"depth":2}`
		}
	case grBadJSON:
		it.name = [...]string{"read_file", "list_dir"}[c.intn(2)]
		it.args = [...]string{`{"path":"p-` + tag + `.txt"`, `{path:"x"}`, `{"path":"x"}}`, `"just text"`, `[1,2]`, `{"path":"x" "limit":1}`}[c.intn(6)]
	case grRepaired:
		var valid string
		it.name, valid = grValidArgs(c, tag)
		switch c.intn(3) {
		case 0:
			it.args = "```json\n" + valid + "\n```"
		case 1:
			it.args = "```\n" + valid + "\n```"
		default:
			it.args = valid[:len(valid)-1] + ",}"
		}
		it.valid, it.canon = true, it.name+"\x00"+grCanonical(valid)
	case grNameCase:
		var tool string
		tool, it.args = grValidArgs(c, tag)
		if tool == "read_file" {
			it.name = [...]string{"Read_File", "READ_FILE", "read-file", "functions.read_file", "ReadFile"}[c.intn(5)]
		} else {
			it.name = [...]string{"List_Dir", "LIST-DIR", "listDir"}[c.intn(3)]
		}
		it.valid, it.canon = true, tool+"\x00"+grCanonical(it.args)
	case grUnknown:
		it.name = [...]string{"write_file", "run_shell"}[c.intn(2)]
		it.args = `{"x":1}`
	case grRepeat:
		e := earlier[c.intn(len(earlier))]
		it.name, it.args, it.valid, it.canon = e.name, e.args, e.valid, e.canon
		var m map[string]any
		if json.Unmarshal([]byte(e.args), &m) == nil && m != nil && c.intn(2) == 1 {
			b, _ := json.MarshalIndent(m, "", " ")
			it.args = string(b)
		}
	case grCustom, grCustomCase:
		it.custom, it.valid = true, true
		it.name = "apply_patch"
		if kind == grCustomCase {
			it.name = "Apply_Patch"
		}
		it.args = "*** Begin Patch\n*** Add File: f-" + tag + "\n+\"x\"\n*** End Patch\n"
	}
	it.pieces = grSplit(it.args, np)
	return it
}

// grSplit cuts s into n pieces at rune boundaries (fewer when s is short).
func grSplit(s string, n int) []string {
	rs := []rune(s)
	if n == 0 || len(rs) == 0 {
		return nil
	}
	var out []string
	size := (len(rs) + n - 1) / n
	for len(rs) > 0 {
		k := min(size, len(rs))
		out = append(out, string(rs[:k]))
		rs = rs[k:]
	}
	return out
}

func (g *grScript) String() string {
	var b strings.Builder
	proto := "responses"
	if g.chat {
		proto = "chat"
	}
	fmt.Fprintf(&b, "%s: max_repairs %d, on_failure %s, dedup %v, MaxRounds %d, chunk %d\n", proto, g.maxRepairs, g.onFailure, g.dedup, g.maxRounds, g.chunk)
	for a, ans := range g.answers {
		end := [...]string{"completed", "incomplete", "failed"}[ans.end]
		if g.chat {
			end = [...]string{"stop/tool_calls", "length", ""}[ans.end]
		}
		cut := ""
		if ans.cut >= 0 {
			cut = fmt.Sprintf(", cut %d", ans.cut)
		}
		fmt.Fprintf(&b, "  answer %d: status %d, %s%s, usage %v\n", a, ans.status, end, cut, ans.usage)
		for i, it := range ans.items {
			switch {
			case it.call():
				fmt.Fprintf(&b, "    %d %s %s(%q) in %d pieces\n", i, grKindName[it.kind], it.name, it.args, len(it.pieces))
			default:
				fmt.Fprintf(&b, "    %d %s in %d pieces\n", i, grKindName[it.kind], len(it.pieces))
			}
		}
	}
	return b.String()
}

// ---- rendering the upstream's answers ----

// grRendered is one answer as the upstream sends it.
type grRendered struct {
	evs     []string // the stream's events, whole, [DONE] included
	endAt   int      // the terminal event (Responses), the finish chunk (Chat)
	usageAt int      // the event with the usage
	judgeAt []int    // per item: the event at which its call is complete (-1: not a call)
	doneAt  []int    // per item (Responses): its output_item.done
	items   []string // per item (Responses): the item, done
	textAt  [][]int  // per item (Chat): the chunk of each piece
	json    string   // the non-streaming answer
	prefix  int      // the events the stream sends, after the cut
}

func (r *grRendered) stream() string { return strings.Join(r.evs[:r.prefix], "") }
func (r *grRendered) endSeen() bool  { return r.endAt < r.prefix }
func (r *grRendered) complete() bool { return r.prefix == len(r.evs) }

func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func grResponsesUsage(u [4]int) string {
	return fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":%d},"total_tokens":%d}`,
		u[0], u[1], u[2], u[3], u[0]+u[2])
}

func grChatUsage(u [4]int) string {
	return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d},"completion_tokens_details":{"reasoning_tokens":%d}}`,
		u[0], u[2], u[0]+u[2], u[1], u[3])
}

func grRenderResponses(g *grScript, a int) *grRendered {
	ans := &g.answers[a]
	r := &grRendered{}
	seq := 0
	add := func(typ, rest string) int {
		r.evs = append(r.evs, "event: "+typ+"\ndata: {\"type\":\""+typ+"\",\"sequence_number\":"+strconv.Itoa(seq)+rest+"\n\n")
		seq++
		return len(r.evs) - 1
	}
	status := [...]string{"completed", "incomplete", "failed"}[ans.end]
	resp := func(status, output, usage string) string {
		s := `{"id":"resp_a` + strconv.Itoa(a) + `","object":"response","created_at":1,"status":"` + status + `","model":"m","output":` + output + `,"usage":` + usage
		switch status {
		case "incomplete":
			s += `,"incomplete_details":{"reason":"max_output_tokens"}`
		case "failed":
			s += `,"error":{"code":"server_error","message":"the model failed"}`
		}
		return s + "}"
	}
	add("response.created", `,"response":`+resp("in_progress", "[]", "null")+`}`)
	if ans.inProgress {
		add("response.in_progress", `,"response":`+resp("in_progress", "[]", "null")+`}`)
	}
	var done []string
	for i, it := range ans.items {
		o := `,"output_index":` + strconv.Itoa(i)
		var item string
		judge := -1
		switch {
		case it.kind == grMessage:
			id := js(fmt.Sprintf("msg_a%d_%d", a, i))
			text := js(strings.Join(it.pieces, ""))
			add("response.output_item.added", o+`,"item":{"id":`+id+`,"type":"message","status":"in_progress","role":"assistant","content":[]}}`)
			add("response.content_part.added", `,"item_id":`+id+o+`,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`)
			for _, p := range it.pieces {
				add("response.output_text.delta", `,"item_id":`+id+o+`,"content_index":0,"delta":`+js(p)+`,"logprobs":[]}`)
			}
			add("response.output_text.done", `,"item_id":`+id+o+`,"content_index":0,"text":`+text+`,"logprobs":[]}`)
			add("response.content_part.done", `,"item_id":`+id+o+`,"content_index":0,"part":{"type":"output_text","text":`+text+`,"annotations":[]}}`)
			item = `{"id":` + id + `,"type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":` + text + `,"annotations":[]}]}`
		case it.kind == grReasoning:
			id := js(fmt.Sprintf("rs_a%d_%d", a, i))
			text := js(strings.Join(it.pieces, ""))
			add("response.output_item.added", o+`,"item":{"id":`+id+`,"type":"reasoning","summary":[]}}`)
			add("response.reasoning_summary_part.added", `,"item_id":`+id+o+`,"summary_index":0,"part":{"type":"summary_text","text":""}}`)
			for _, p := range it.pieces {
				add("response.reasoning_summary_text.delta", `,"item_id":`+id+o+`,"summary_index":0,"delta":`+js(p)+`}`)
			}
			add("response.reasoning_summary_text.done", `,"item_id":`+id+o+`,"summary_index":0,"text":`+text+`}`)
			add("response.reasoning_summary_part.done", `,"item_id":`+id+o+`,"summary_index":0,"part":{"type":"summary_text","text":`+text+`}}`)
			item = `{"id":` + id + `,"type":"reasoning","summary":[{"type":"summary_text","text":` + text + `}],"encrypted_content":"enc-a` + strconv.Itoa(a) + `-` + strconv.Itoa(i) + `"}`
		case it.custom:
			id := js(fmt.Sprintf("ctc_a%d_%d", a, i))
			cid := js(fmt.Sprintf("call_a%d_%d", a, i))
			add("response.output_item.added", o+`,"item":{"id":`+id+`,"type":"custom_tool_call","status":"in_progress","call_id":`+cid+`,"name":`+js(it.name)+`,"input":""}}`)
			for _, p := range it.pieces {
				add("response.custom_tool_call_input.delta", `,"item_id":`+id+o+`,"delta":`+js(p)+`}`)
			}
			add("response.custom_tool_call_input.done", `,"item_id":`+id+o+`,"input":`+js(it.args)+`}`)
			item = `{"id":` + id + `,"type":"custom_tool_call","status":"completed","call_id":` + cid + `,"name":` + js(it.name) + `,"input":` + js(it.args) + `}`
		default:
			id := js(fmt.Sprintf("fc_a%d_%d", a, i))
			cid := js(fmt.Sprintf("call_a%d_%d", a, i))
			add("response.output_item.added", o+`,"item":{"id":`+id+`,"type":"function_call","status":"in_progress","arguments":"","call_id":`+cid+`,"name":`+js(it.name)+`}}`)
			for _, p := range it.pieces {
				add("response.function_call_arguments.delta", `,"item_id":`+id+o+`,"delta":`+js(p)+`}`)
			}
			add("response.function_call_arguments.done", `,"item_id":`+id+o+`,"arguments":`+js(it.args)+`}`)
			item = `{"id":` + id + `,"type":"function_call","status":"completed","arguments":` + js(it.args) + `,"call_id":` + cid + `,"name":` + js(it.name) + `}`
		}
		at := add("response.output_item.done", o+`,"item":`+item+`}`)
		if it.call() {
			judge = at
		}
		r.judgeAt = append(r.judgeAt, judge)
		r.doneAt = append(r.doneAt, at)
		r.items = append(r.items, item)
		done = append(done, item)
	}
	output := "[" + strings.Join(done, ",") + "]"
	typ := "response." + status
	r.endAt = add(typ, `,"response":`+resp(status, output, grResponsesUsage(ans.usage))+`}`)
	r.usageAt = r.endAt
	r.json = resp(status, output, grResponsesUsage(ans.usage))
	return r
}

func grRenderChat(g *grScript, a int) *grRendered {
	ans := &g.answers[a]
	r := &grRendered{}
	head := `{"id":"chatcmpl-a` + strconv.Itoa(a) + `","object":"chat.completion.chunk","created":1,"model":"m",`
	add := func(s string) int {
		r.evs = append(r.evs, "data: "+s+"\n\n")
		return len(r.evs) - 1
	}
	chunk := func(delta, finish string) string {
		return head + `"choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`
	}
	add(chunk(`{"role":"assistant","content":""}`, "null"))
	open := -1
	k := 0
	var text, thought strings.Builder
	var calls []string
	for i, it := range ans.items {
		r.judgeAt = append(r.judgeAt, -1)
		r.textAt = append(r.textAt, nil)
		switch {
		case it.kind == grMessage || it.kind == grReasoning:
			key := "content"
			if it.kind == grReasoning {
				key = "reasoning_content"
			}
			for _, p := range it.pieces {
				r.textAt[i] = append(r.textAt[i], add(chunk(`{"`+key+`":`+js(p)+`}`, "null")))
				if it.kind == grMessage {
					text.WriteString(p)
				} else {
					thought.WriteString(p)
				}
			}
		default:
			cid := js(fmt.Sprintf("call_a%d_%d", a, i))
			first := ""
			if len(it.pieces) == 0 {
				first = it.args
			}
			var at int
			if it.custom {
				at = add(chunk(`{"tool_calls":[{"index":`+strconv.Itoa(k)+`,"id":`+cid+`,"type":"custom","custom":{"name":`+js(it.name)+`,"input":`+js(first)+`}}]}`, "null"))
				for _, p := range it.pieces {
					add(chunk(`{"tool_calls":[{"index":`+strconv.Itoa(k)+`,"custom":{"input":`+js(p)+`}}]}`, "null"))
				}
				calls = append(calls, `{"id":`+cid+`,"type":"custom","custom":{"name":`+js(it.name)+`,"input":`+js(it.args)+`}}`)
			} else {
				at = add(chunk(`{"tool_calls":[{"index":`+strconv.Itoa(k)+`,"id":`+cid+`,"type":"function","function":{"name":`+js(it.name)+`,"arguments":`+js(first)+`}}]}`, "null"))
				for _, p := range it.pieces {
					add(chunk(`{"tool_calls":[{"index":`+strconv.Itoa(k)+`,"function":{"arguments":`+js(p)+`}}]}`, "null"))
				}
				calls = append(calls, `{"id":`+cid+`,"type":"function","function":{"name":`+js(it.name)+`,"arguments":`+js(it.args)+`}}`)
			}
			if open >= 0 {
				r.judgeAt[open] = at
			}
			open = i
			k++
		}
	}
	finish := "stop"
	if k > 0 {
		finish = "tool_calls"
	}
	if ans.end == 1 {
		finish = "length"
	}
	r.endAt = add(chunk(`{}`, js(finish)))
	if open >= 0 {
		r.judgeAt[open] = r.endAt
	}
	r.usageAt = add(head + `"choices":[],"usage":` + grChatUsage(ans.usage) + `}`)
	add("[DONE]")
	msg := `{"role":"assistant","content":`
	if text.Len() > 0 {
		msg += js(text.String())
	} else {
		msg += "null"
	}
	if thought.Len() > 0 {
		msg += `,"reasoning_content":` + js(thought.String())
	}
	if len(calls) > 0 {
		msg += `,"tool_calls":[` + strings.Join(calls, ",") + `]`
	}
	msg += "}"
	r.json = `{"id":"chatcmpl-a` + strconv.Itoa(a) + `","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":` + msg + `,"finish_reason":` + js(finish) + `}],"usage":` + grChatUsage(ans.usage) + `}`
	return r
}

func grRender(g *grScript) []*grRendered {
	var out []*grRendered
	for a := range g.answers {
		var r *grRendered
		if g.chat {
			r = grRenderChat(g, a)
		} else {
			r = grRenderResponses(g, a)
		}
		r.prefix = len(r.evs)
		if c := g.answers[a].cut; c >= 0 {
			r.prefix = c % len(r.evs)
		}
		out = append(out, r)
	}
	return out
}

// ---- the model ----

type grExpect struct {
	requests    int
	fed         []int // the answers handed to the client's rules, in order
	lastFed     int
	failedRound bool // the last request failed
	// reaskCut: the last answer fed is a re-ask's answer that ended
	// before its end event (its stream empty or cut); the calls it was
	// for were settled as after a failed round, and the answer that
	// asked ends the client's.
	reaskCut    bool
	settledFrom int             // the answer whose invalid calls were settled per on_failure (-1: none)
	errExpected bool            // the answer ends in the rule's error (on_failure error)
	visible     map[string]bool // the call ids the client gets
	items       map[string]grItem
}

// ended reports whether the client's answer should end in its end event
// (Responses: a terminal event; Chat: a finish): the last answer fed
// ended, or it is a re-ask's cut before its end and the answer that asked
// ends the client's.
func (e *grExpect) ended(rs []*grRendered) bool {
	return rs[e.lastFed].endSeen() || e.reaskCut
}

// whole reports whether the client's Chat answer should end in its usage
// and [DONE]: the last answer fed is whole, or it is a re-ask's cut
// before its end and the answer that asked was whole.
func (e *grExpect) whole(rs []*grRendered) bool {
	if e.reaskCut {
		return rs[e.fed[len(e.fed)-2]].complete()
	}
	return rs[e.lastFed].complete()
}

func (g *grScript) effMaxRounds() int {
	switch {
	case g.maxRounds == 0:
		return transforms.DefaultMaxRounds
	case g.maxRounds < 0:
		return 0
	}
	return g.maxRounds
}

// grExpectFor runs the model: an answer's calls are judged once complete
// (Responses: at their output_item.done; Chat: once the next call starts
// or the choice finishes); a valid call reaches the client unless it
// repeats a valid call of the answers before (dedup); the invalid calls
// of an answer whose end came are asked for again while the rule has
// repairs and the request rounds left (only after a completed answer:
// not after an incomplete, failed or length-cut one, in streams and JSON
// alike), else settled per on_failure. A re-ask that fails, or whose
// answer ends before its end event (an empty stream, a stream cut before
// response.completed or the Chat finish), settles the calls it was for
// per on_failure as well (seed empty-round-settles-asked-calls); the
// invalid calls of an answer cut before its end are never handed on.
// JSON answers are never cut.
func grExpectFor(g *grScript, rs []*grRendered, isJSON bool) *grExpect {
	e := &grExpect{requests: 1, settledFrom: -1, visible: map[string]bool{}, items: map[string]grItem{}}
	seen := map[string]bool{}
	rounds := 0
	var pending []string
	asker := -1 // the answer pending's calls are of
	settle := func(from int, inv []string) {
		if len(inv) > 0 {
			e.settledFrom = from
		}
		for _, id := range inv {
			switch g.onFailure {
			case "pass":
				e.visible[id] = true
			case "error":
				e.errExpected = true
				return
			}
		}
	}
	for k := 0; ; k++ {
		if k > 0 && (k >= len(g.answers) || g.answers[k].status != 200) {
			e.failedRound = true
			settle(asker, pending)
			return e
		}
		e.fed = append(e.fed, k)
		e.lastFed = k
		r := rs[k]
		prefix := r.prefix
		if isJSON {
			prefix = len(r.evs)
		}
		var inv []string
		for i, it := range g.answers[k].items {
			if !it.call() || r.judgeAt[i] >= prefix {
				continue
			}
			id := fmt.Sprintf("call_a%d_%d", k, i)
			e.items[id] = it
			if !it.valid {
				inv = append(inv, id)
				continue
			}
			if g.dedup && it.canon != "" {
				if seen[it.canon] {
					continue
				}
				seen[it.canon] = true
			}
			e.visible[id] = true
		}
		if r.endAt >= prefix {
			// Cut before its end: its own invalid calls are never
			// handed on; a re-ask's answer settles the calls it was
			// for.
			if k > 0 {
				e.reaskCut = true
				settle(asker, pending)
			}
			return e
		}
		// Only a completed answer is asked again (a Responses JSON
		// answer whose status is not "completed" too).
		reaskable := g.answers[k].end == 0
		if len(inv) > 0 && reaskable && rounds < g.maxRepairs && rounds < g.effMaxRounds() {
			rounds++
			e.requests++
			pending, asker = inv, k
			continue
		}
		settle(k, inv)
		return e
	}
}

// grUsageSum is the usage the client's terminal event should carry: every
// answer fed whose usage the rules saw, summed member by member.
func grUsageSum(g *grScript, rs []*grRendered, e *grExpect, isJSON bool) any {
	var sum map[string]any
	for _, k := range e.fed {
		if !isJSON && rs[k].usageAt >= rs[k].prefix {
			continue
		}
		u := grResponsesUsage(g.answers[k].usage)
		if g.chat {
			u = grChatUsage(g.answers[k].usage)
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(u), &m)
		sum = grAddUsage(sum, m)
	}
	if sum == nil {
		return nil
	}
	return sum
}

func grAddUsage(a, b map[string]any) map[string]any {
	if a == nil {
		return b
	}
	for k, v := range b {
		switch v := v.(type) {
		case float64:
			x, _ := a[k].(float64)
			a[k] = x + v
		case map[string]any:
			x, _ := a[k].(map[string]any)
			a[k] = grAddUsage(x, v)
		default:
			a[k] = v
		}
	}
	return a
}

// ---- running a case ----

// grChains are the rule's compiled chains, by options.
type grChains map[string]*transforms.Chain

func grKey(maxRepairs int, onFailure string, dedup bool) string {
	return fmt.Sprintf("%d/%s/%v", maxRepairs, onFailure, dedup)
}

func newGrChains(tb testing.TB) grChains {
	c := grChains{}
	for mr := 0; mr <= 2; mr++ {
		for _, of := range []string{"pass", "drop", "error"} {
			for _, dd := range []bool{true, false} {
				c[grKey(mr, of, dd)] = tt.Chain(tb, fmt.Sprintf(`[{"transform":"tools_preflight","config":{"max_repairs":%d,"on_failure":%q,"dedup":%v}}]`, mr, of, dd))
			}
		}
	}
	return c
}

func (g *grScript) proto() transforms.Protocol {
	if g.chat {
		return transforms.ProtocolChat
	}
	return transforms.ProtocolResponses
}

// grUpstream answers the n-th request with the n-th answer of the script:
// its stream (cut) or JSON body, or its error status; past the script,
// 500.
func grUpstream(g *grScript, rs []*grRendered, isJSON bool) tt.Upstream {
	n := 0
	return func([]byte) (int, string) {
		k := n
		n++
		if k >= len(g.answers) {
			return 500, `{"error":{"message":"no more answers"}}`
		}
		if s := g.answers[k].status; s != 200 {
			return s, `{"error":{"message":"try again later"}}`
		}
		if isJSON {
			return 200, rs[k].json
		}
		return 200, rs[k].stream()
	}
}

// grRun runs a case as a stream and as JSON and returns what is wrong,
// each problem led by its invariant's tag in brackets.
func grRun(tb testing.TB, chains grChains, g *grScript, rs []*grRendered) []string {
	chain := chains[grKey(g.maxRepairs, g.onFailure, g.dedup)]

	req := grRequest(g.chat, true)
	x := tt.Begin(tb, chain, g.proto(), req)
	x.Limits.MaxRounds = g.maxRounds
	out, sent := tt.RunStream(tb, x, req, grUpstream(g, rs, false), g.chunk)
	e := grExpectFor(g, rs, false)
	var probs []string
	if g.chat {
		probs = grCheckChatStream(g, rs, e, out, len(sent))
	} else {
		probs = grCheckResponsesStream(g, rs, e, out, len(sent))
	}
	for i := range probs {
		probs[i] = "stream " + probs[i]
	}

	jreq := grRequest(g.chat, false)
	jx := tt.Begin(tb, chain, g.proto(), jreq)
	jx.Limits.MaxRounds = g.maxRounds
	jout, jsent, jerr := tt.RunJSON(tb, jx, jreq, grUpstream(g, rs, true))
	je := grExpectFor(g, rs, true)
	for _, p := range grCheckJSON(g, rs, je, jout, jerr, len(jsent)) {
		probs = append(probs, "json "+p)
	}
	return probs
}

// ---- checks ----

type grProblems []string

func (p *grProblems) add(tag, format string, args ...any) {
	*p = append(*p, "["+tag+"] "+fmt.Sprintf(format, args...))
}

// grTag is a problem's invariant: its tag and whether it is the stream's
// or the JSON answer's.
func grTag(p string) string {
	i := strings.Index(p, "]")
	if i < 0 {
		return p
	}
	return p[:i+1]
}

type grBlock struct {
	name, data string
	obj        map[string]any
}

func grParseSSE(out string, probs *grProblems) []grBlock {
	if out == "" {
		return nil
	}
	if !strings.HasSuffix(out, "\n\n") {
		probs.add("sse", "the stream does not end with a blank line: %q", out[max(0, len(out)-80):])
	}
	var blocks []grBlock
	for _, blk := range strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n") {
		var b grBlock
		data := false
		for _, line := range strings.Split(blk, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				b.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				if data {
					b.data += "\n"
				}
				b.data += line[len("data: "):]
				data = true
			default:
				probs.add("sse", "a line that is no event or data line: %q", line)
			}
		}
		if !data {
			probs.add("sse", "a block without data: %q", blk)
			continue
		}
		if b.data != "[DONE]" {
			if err := json.Unmarshal([]byte(b.data), &b.obj); err != nil || b.obj == nil {
				probs.add("sse", "data that is no JSON object: %q", b.data)
				continue
			}
		}
		blocks = append(blocks, b)
	}
	return blocks
}

func grCallAnswer(callID string) int {
	var a, i int
	if _, err := fmt.Sscanf(callID, "call_a%d_%d", &a, &i); err != nil {
		return -1
	}
	return a
}

type grCall struct {
	callID       string
	custom       bool
	name, args   string
	typeMismatch string
}

// grCheckCalls checks the calls the client got: each once, valid unless
// on_failure pass let the last answer's invalid call through, no valid
// call twice when dedup is on, and exactly the calls the model says.
func grCheckCalls(g *grScript, e *grExpect, calls []grCall, probs *grProblems) {
	ids := map[string]bool{}
	keys := map[string]string{}
	for _, c := range calls {
		if c.typeMismatch != "" {
			probs.add("call-type", "call %s: %s", c.callID, c.typeMismatch)
		}
		if ids[c.callID] {
			probs.add("call-twice", "call %s reaches the client twice", c.callID)
		}
		ids[c.callID] = true
		a := grCallAnswer(c.callID)
		valid := grValidCall(c.custom, c.name, c.args)
		switch {
		case valid:
		case !c.custom && c.name == "apply_patch":
			probs.add("custom-as-function", "the custom call %s reaches the client as a function call: %s(%q)", c.callID, c.name, c.args)
			continue
		case c.custom && c.name != "apply_patch" && strings.EqualFold(strings.ReplaceAll(c.name, "_", ""), "applypatch"):
			probs.add("custom-name-unrepaired", "the custom call %s reaches the client under the name %q, the model's, not the declared one", c.callID, c.name)
			continue
		}
		if !valid && !(g.onFailure == "pass" && a == e.settledFrom) {
			probs.add("invalid-call", "the client got the invalid call %s %s(%q) (custom %v; on_failure %s; its answer %d, the answer settled %d, the last answer fed %d)",
				c.callID, c.name, c.args, c.custom, g.onFailure, a, e.settledFrom, e.lastFed)
		}
		if it, ok := e.items[c.callID]; ok {
			grCheckContent(c, it, probs)
		}
		if valid && !c.custom && g.dedup {
			k := c.name + "\x00" + grCanonical(c.args)
			if prev, ok := keys[k]; ok {
				probs.add("dedup", "call %s repeats call %s: %s(%s)", c.callID, prev, c.name, c.args)
			}
			keys[k] = c.callID
		}
	}
	var lost, extra []string
	for id := range e.visible {
		if !ids[id] {
			lost = append(lost, id)
		}
	}
	for id := range ids {
		if !e.visible[id] {
			extra = append(extra, id)
		}
	}
	sort.Strings(lost)
	sort.Strings(extra)
	if len(lost) > 0 {
		probs.add("call-lost", "calls the client should get and did not: %v", lost)
	}
	if len(extra) > 0 {
		probs.add("call-extra", "calls the client should not get: %v", extra)
	}
}

// grCheckContent checks that a call carries what the model wrote: a
// valid call the tool it meant and its arguments (as the repairs left
// them, compared canonically), a passed invalid call its exact text.
func grCheckContent(c grCall, it grItem, probs *grProblems) {
	switch {
	case it.custom:
		if !c.custom || c.args != it.args || it.valid && c.name != "apply_patch" || !it.valid && c.name != it.name {
			probs.add("call-content", "call %s: custom %v %s(%q), the model wrote %s(%q)", c.callID, c.custom, c.name, c.args, it.name, it.args)
		}
	case it.valid:
		tool, args, _ := strings.Cut(it.canon, "\x00")
		if c.custom || c.name != tool || grCanonical(c.args) != args {
			probs.add("call-content", "call %s: %s(%q), want %s(%s)", c.callID, c.name, c.args, tool, args)
		}
	default:
		if c.custom || c.name != it.name || c.args != it.args {
			probs.add("call-content", "passed call %s: %s(%q), the model wrote %s(%q)", c.callID, c.name, c.args, it.name, it.args)
		}
	}
}

func grCheckRequests(g *grScript, e *grExpect, sent int, probs *grProblems) {
	if bound := 1 + min(g.maxRepairs, g.effMaxRounds()); sent > bound {
		probs.add("request-bound", "the upstream got %d requests, more than 1 + min(max_repairs %d, max_rounds %d)", sent, g.maxRepairs, g.effMaxRounds())
	}
	if sent != e.requests {
		probs.add("requests", "the upstream got %d requests, the model says %d", sent, e.requests)
	}
}

func grCheckHidden(g *grScript, out string, probs *grProblems) {
	for a := 1; a < len(g.answers); a++ {
		for _, m := range []string{"msg_a%d_", "rs_a%d_", "txt-a%d-", "rsn-a%d-", "enc-a%d-"} {
			if s := fmt.Sprintf(m, a); strings.Contains(out, s) {
				probs.add("hidden", "the client sees %q of re-ask answer %d", s, a)
			}
		}
	}
}

func grJSONEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var x, y any
	_ = json.Unmarshal(ja, &x)
	_ = json.Unmarshal(jb, &y)
	return reflect.DeepEqual(x, y)
}

func grCompact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func grCheckResponsesStream(g *grScript, rs []*grRendered, e *grExpect, out string, sent int) []string {
	var probs grProblems
	blocks := grParseSSE(out, &probs)
	var evs []map[string]any
	var types []string
	for i, b := range blocks {
		if b.obj == nil {
			probs.add("sse", "block %d is %q", i, b.data)
			continue
		}
		typ, _ := b.obj["type"].(string)
		if b.name != "" && b.name != typ {
			probs.add("sse", "event %d is named %q, its type is %q", i, b.name, typ)
		}
		if n, ok := b.obj["sequence_number"].(float64); !ok || int(n) != len(evs) {
			probs.add("seq", "event %d (%s) has sequence_number %v", len(evs), typ, b.obj["sequence_number"])
		}
		evs = append(evs, b.obj)
		types = append(types, typ)
	}
	grCheckRequests(g, e, sent, &probs)
	grCheckHidden(g, out, &probs)

	// One lifecycle.
	count := func(typ string) (n int) {
		for _, t := range types {
			if t == typ {
				n++
			}
		}
		return n
	}
	if rs[0].prefix > 0 {
		if len(types) == 0 || types[0] != "response.created" {
			probs.add("created", "the first event is not response.created: %v", types)
		}
		if n := count("response.created"); n != 1 {
			probs.add("created", "%d response.created events", n)
		}
	} else if len(evs) > 0 {
		probs.add("created", "the first answer was cut before its first event, yet the client got %v", types)
	}
	if n := count("response.in_progress"); n > 1 {
		probs.add("lifecycle", "%d response.in_progress events", n)
	}
	var terminals, errs []int
	for i, t := range types {
		switch t {
		case "response.completed", "response.incomplete", "response.failed":
			terminals = append(terminals, i)
		case "error":
			errs = append(errs, i)
		}
	}
	if len(terminals) > 1 {
		probs.add("terminal-count", "%d terminal events: %v", len(terminals), terminals)
	}
	for _, i := range terminals {
		if i != len(evs)-1 {
			probs.add("after-terminal", "terminal event %d (%s) is followed by %v", i, types[i], types[i+1:])
		}
	}
	if len(errs) > 1 {
		probs.add("error-count", "%d error events", len(errs))
	}
	for _, i := range errs {
		if i != len(evs)-1 {
			probs.add("error-last", "error event %d is followed by %v", i, types[i+1:])
		}
		if evs[i]["code"] != "tool_call_invalid" {
			probs.add("error-code", "error event %s", grCompact(evs[i]))
		}
	}
	if (len(errs) > 0) != e.errExpected {
		probs.add("error", "error event %v, the model says %v (last answer fed %d, failed round %v)", len(errs) > 0, e.errExpected, e.lastFed, e.failedRound)
	}
	if !e.errExpected && e.ended(rs) && len(terminals) != 1 {
		probs.add("terminal-missing", "the last answer fed (%d) ended, the client got %d terminal events (failed round %v, re-ask cut %v)", e.lastFed, len(terminals), e.failedRound, e.reaskCut)
	}

	// Dense output indexes; items added once, done once.
	type citem struct {
		id   string
		open bool
		// the index its added event gave, when not its place: the
		// problem is the added event's alone if every later event of the
		// item has its place (index-added-only), else index-added.
		badAdded     *float64
		contradicted bool
		at           int
	}
	var items []*citem
	ids := map[string]bool{}
	var done []any
	for i, ev := range evs {
		o, has := ev["output_index"].(float64)
		k := int(o)
		switch types[i] {
		case "response.output_item.added":
			it, _ := ev["item"].(map[string]any)
			id, _ := it["id"].(string)
			c := &citem{id: id, open: true, at: i}
			if !has || k != len(items) {
				c.badAdded = &o
				if !has {
					probs.add("index-added", "event %d adds item %s without an output_index", i, id)
				}
			}
			if ids[id] {
				probs.add("item-twice", "item %s added twice", id)
			}
			ids[id] = true
			items = append(items, c)
		case "response.output_item.done":
			it, _ := ev["item"].(map[string]any)
			id, _ := it["id"].(string)
			switch {
			case !has || k < 0 || k >= len(items):
				probs.add("index-done", "event %d: item %s done at output_index %v, of no item added", i, id, ev["output_index"])
			case !items[k].open:
				probs.add("index-done", "event %d: item %s done at output_index %d, done already or never open", i, id, k)
			case items[k].id != id:
				probs.add("index-done", "event %d: item %s done at output_index %d, where %s was added", i, id, k, items[k].id)
			default:
				items[k].open = false
				done = append(done, ev["item"])
			}
			for j, it := range items {
				if it.id == id && (!has || k != j) {
					it.contradicted = true
				}
			}
		case "response.completed", "response.incomplete", "response.failed":
			for _, it := range items {
				if it.open {
					probs.add("open-at-terminal", "item %s is open at the terminal event", it.id)
				}
			}
		default:
			if id, ok := ev["item_id"].(string); ok {
				for j, it := range items {
					if it.id == id && (!has || k != j) {
						it.contradicted = true
					}
				}
			}
			if has && (k < 0 || k >= len(items) || !items[k].open) {
				probs.add("index-ref", "event %d (%s) has output_index %d, of no open item", i, types[i], k)
			}
		}
	}

	for j, it := range items {
		switch {
		case it.badAdded == nil:
		case it.contradicted:
			probs.add("index-added", "event %d adds item %s at output_index %v, want %d; its later events disagree too", it.at, it.id, *it.badAdded, j)
		default:
			probs.add("index-added-only", "event %d adds item %s at output_index %v, want %d; its later events have %d", it.at, it.id, *it.badAdded, j, j)
		}
	}

	// The terminal's output, id and usage.
	if len(terminals) == 1 {
		resp, _ := evs[terminals[0]]["response"].(map[string]any)
		outItems, _ := resp["output"].([]any)
		if len(outItems) != len(done) || len(done) > 0 && !grJSONEqual(outItems, done) {
			probs.add("terminal-output", "the terminal's output is not the items done:\n   output %s\n   done   %s", grCompact(outItems), grCompact(done))
		}
		if resp["id"] != "resp_a0" {
			probs.add("terminal-id", "the terminal's response.id is %v", resp["id"])
		}
		if want := grUsageSum(g, rs, e, false); !grJSONEqual(resp["usage"], want) {
			probs.add("usage", "the terminal's usage is %s, want %s (answers fed %v)", grCompact(resp["usage"]), grCompact(want), e.fed)
		}
	}

	// The first answer's text items, each as it came; no other.
	text, calls := grSplitItems(done)
	var want []string
	for i, it := range g.answers[0].items {
		if (it.kind == grMessage || it.kind == grReasoning) && rs[0].doneAt[i] < rs[0].prefix {
			var v any
			_ = json.Unmarshal([]byte(rs[0].items[i]), &v)
			want = append(want, grCompact(v))
		}
	}
	if strings.Join(text, "\n") != strings.Join(want, "\n") {
		probs.add("text", "the client's text items differ from the first answer's:\n   got  %v\n   want %v", text, want)
	}
	grCheckCalls(g, e, calls, &probs)
	return probs
}

func grCheckChatStream(g *grScript, rs []*grRendered, e *grExpect, out string, sent int) []string {
	var probs grProblems
	blocks := grParseSSE(out, &probs)
	grCheckRequests(g, e, sent, &probs)
	grCheckHidden(g, out, &probs)
	var dones, errs []int
	for i, b := range blocks {
		if b.name != "" {
			probs.add("sse", "block %d has an event line %q", i, b.name)
		}
		switch {
		case b.data == "[DONE]":
			dones = append(dones, i)
		case b.obj["error"] != nil:
			errs = append(errs, i)
		}
	}
	if len(dones) > 1 {
		probs.add("done-count", "%d [DONE]", len(dones))
	}
	for _, i := range dones {
		if i != len(blocks)-1 {
			probs.add("after-done", "[DONE] at %d of %d blocks", i, len(blocks))
		}
	}
	if !e.errExpected && e.whole(rs) && len(dones) != 1 {
		probs.add("done-missing", "the last answer fed (%d) is whole, the client got %d [DONE] (failed round %v, re-ask cut %v)", e.lastFed, len(dones), e.failedRound, e.reaskCut)
	}
	if len(errs) > 1 {
		probs.add("error-count", "%d error chunks", len(errs))
	}
	for _, i := range errs {
		if i != len(blocks)-1 {
			probs.add("error-last", "error chunk %d of %d blocks", i, len(blocks))
		}
		if ev, _ := blocks[i].obj["error"].(map[string]any); ev["code"] != "tool_call_invalid" {
			probs.add("error-code", "error chunk %s", blocks[i].data)
		}
	}
	if (len(errs) > 0) != e.errExpected {
		probs.add("error", "error chunk %v, the model says %v (last answer fed %d, failed round %v)", len(errs) > 0, e.errExpected, e.lastFed, e.failedRound)
	}

	type ccall struct {
		grCall
		index int
	}
	var calls []*ccall
	byIndex := map[int]*ccall{}
	roles, finishes, usages := 0, 0, 0
	finish := ""
	finishAt := -1
	var text, thought strings.Builder
	for i, b := range blocks {
		if b.obj == nil || b.obj["error"] != nil {
			continue
		}
		if b.obj["id"] != "chatcmpl-a0" {
			probs.add("id", "chunk %d has id %v", i, b.obj["id"])
		}
		if u, ok := b.obj["usage"]; ok && u != nil {
			usages++
			if want := grUsageSum(g, rs, e, false); !grJSONEqual(u, want) {
				probs.add("usage", "the usage chunk says %s, want %s (answers fed %v)", grCompact(u), grCompact(want), e.fed)
			}
			if finishAt < 0 && e.ended(rs) {
				probs.add("usage-order", "the usage chunk %d comes before the finish", i)
			}
		}
		chs, _ := b.obj["choices"].([]any)
		for _, ch := range chs {
			chm, _ := ch.(map[string]any)
			delta, _ := chm["delta"].(map[string]any)
			if _, ok := delta["role"]; ok {
				roles++
				if i != 0 {
					probs.add("role", "chunk %d carries the role", i)
				}
			}
			content, _ := delta["content"].(string)
			reasoning, _ := delta["reasoning_content"].(string)
			text.WriteString(content)
			thought.WriteString(reasoning)
			tcs, _ := delta["tool_calls"].([]any)
			if finishAt >= 0 && (content != "" || reasoning != "" || len(tcs) > 0) {
				probs.add("after-finish", "chunk %d carries text or calls after the finish", i)
			}
			for _, tc := range tcs {
				e, _ := tc.(map[string]any)
				idxf, ok := e["index"].(float64)
				if !ok {
					probs.add("call-index", "chunk %d: a tool_calls entry without an index", i)
					continue
				}
				idx := int(idxf)
				c := byIndex[idx]
				id, hasID := e["id"].(string)
				if c == nil {
					if idx != len(calls) {
						probs.add("call-index", "chunk %d: call index %d appears after %d calls", i, idx, len(calls))
					}
					if !hasID {
						probs.add("call-id", "chunk %d: call index %d first appears without an id", i, idx)
					}
					c = &ccall{index: idx}
					c.callID = id
					calls = append(calls, c)
					byIndex[idx] = c
				} else if hasID {
					probs.add("call-id", "chunk %d: call index %d gets an id again (%s)", i, idx, id)
				}
				typ, _ := e["type"].(string)
				if fn, ok := e["function"].(map[string]any); ok {
					if n, ok := fn["name"].(string); ok {
						c.name += n
					}
					a, _ := fn["arguments"].(string)
					c.args += a
					if typ == "custom" {
						c.typeMismatch = "type custom with a function member"
					}
				}
				if cu, ok := e["custom"].(map[string]any); ok {
					c.custom = true
					if n, ok := cu["name"].(string); ok {
						c.name += n
					}
					a, _ := cu["input"].(string)
					c.args += a
				}
			}
			if fr, ok := chm["finish_reason"].(string); ok {
				finishes++
				finish, finishAt = fr, i
			}
		}
	}
	if roles > 1 {
		probs.add("role", "%d chunks carry the role", roles)
	}
	if finishes > 1 {
		probs.add("finish-count", "%d finish reasons", finishes)
	}
	if !e.errExpected && e.ended(rs) && finishes != 1 {
		probs.add("finish-missing", "the last answer fed (%d) finished, the client got %d finish reasons (failed round %v, re-ask cut %v)", e.lastFed, finishes, e.failedRound, e.reaskCut)
	}
	if usages > 1 {
		probs.add("usage-count", "%d usage chunks", usages)
	}
	if !e.errExpected && e.whole(rs) && usages != 1 {
		probs.add("usage-missing", "the last answer fed (%d) is whole, the client got %d usage chunks (failed round %v, re-ask cut %v)", e.lastFed, usages, e.failedRound, e.reaskCut)
	}
	switch {
	case finish == "tool_calls" && len(calls) == 0:
		probs.add("finish-reason", "finish_reason tool_calls, and the client got no call")
	case finishes > 0 && len(calls) > 0 && finish != "tool_calls" && finish != "length":
		probs.add("finish-reason", "finish_reason %s, and the client got %d calls", finish, len(calls))
	}

	// The first answer's text as it came.
	var wantText, wantThought strings.Builder
	for i, it := range g.answers[0].items {
		for j, p := range it.pieces {
			if it.kind == grMessage && rs[0].textAt[i][j] < rs[0].prefix {
				wantText.WriteString(p)
			}
			if it.kind == grReasoning && rs[0].textAt[i][j] < rs[0].prefix {
				wantThought.WriteString(p)
			}
		}
	}
	if text.String() != wantText.String() {
		probs.add("text", "the client's content is %q, want %q", text.String(), wantText.String())
	}
	if thought.String() != wantThought.String() {
		probs.add("text", "the client's reasoning is %q, want %q", thought.String(), wantThought.String())
	}
	var cs []grCall
	for _, c := range calls {
		cs = append(cs, c.grCall)
	}
	grCheckCalls(g, e, cs, &probs)
	return probs
}

func grCheckJSON(g *grScript, rs []*grRendered, e *grExpect, out []byte, err error, sent int) []string {
	var probs grProblems
	grCheckRequests(g, e, sent, &probs)
	if err != nil {
		var te *transforms.Error
		switch {
		case !errors.As(err, &te):
			probs.add("error", "the rules failed: %v", err)
		case te.Code != "tool_call_invalid" || te.Status != 502:
			probs.add("error-code", "error %d %s: %s", te.Status, te.Code, te.Message)
		}
		if !e.errExpected {
			probs.add("error", "error %v, the model expects none (last answer fed %d)", err, e.lastFed)
		}
		return probs
	}
	if e.errExpected {
		probs.add("error", "no error, the model expects one (last answer fed %d, failed round %v)", e.lastFed, e.failedRound)
	}
	grCheckHidden(g, string(out), &probs)
	var body map[string]any
	if json.Unmarshal(out, &body) != nil {
		probs.add("json", "the client's body is no JSON object: %s", out)
		return probs
	}
	if want := grUsageSum(g, rs, e, true); !grJSONEqual(body["usage"], want) {
		probs.add("usage", "usage %s, want %s (answers fed %v)", grCompact(body["usage"]), grCompact(want), e.fed)
	}
	var calls []grCall
	if g.chat {
		if body["id"] != "chatcmpl-a0" {
			probs.add("id", "id %v", body["id"])
		}
		chs, _ := body["choices"].([]any)
		if len(chs) != 1 {
			probs.add("choices", "%d choices", len(chs))
			return probs
		}
		ch, _ := chs[0].(map[string]any)
		msg, _ := ch["message"].(map[string]any)
		var wantText, wantThought strings.Builder
		for _, it := range g.answers[0].items {
			for _, p := range it.pieces {
				switch it.kind {
				case grMessage:
					wantText.WriteString(p)
				case grReasoning:
					wantThought.WriteString(p)
				}
			}
		}
		if content, _ := msg["content"].(string); content != wantText.String() {
			probs.add("text", "content %q, want %q", content, wantText.String())
		}
		if thought, _ := msg["reasoning_content"].(string); thought != wantThought.String() {
			probs.add("text-reasoning", "reasoning_content %q, want %q", thought, wantThought.String())
		}
		tcs, _ := msg["tool_calls"].([]any)
		for _, tc := range tcs {
			m, _ := tc.(map[string]any)
			c := grCall{}
			c.callID, _ = m["id"].(string)
			typ, _ := m["type"].(string)
			if fn, ok := m["function"].(map[string]any); ok {
				c.name, _ = fn["name"].(string)
				c.args, _ = fn["arguments"].(string)
				if typ != "function" {
					c.typeMismatch = "a function member in a call of type " + typ
				}
			}
			if cu, ok := m["custom"].(map[string]any); ok {
				c.custom = true
				c.name, _ = cu["name"].(string)
				c.args, _ = cu["input"].(string)
			}
			calls = append(calls, c)
		}
		switch fr, _ := ch["finish_reason"].(string); {
		case fr == "tool_calls" && len(calls) == 0:
			probs.add("finish-reason", "finish_reason tool_calls, and no call")
		case len(calls) > 0 && fr != "tool_calls" && fr != "length":
			probs.add("finish-reason", "finish_reason %s with %d calls", fr, len(calls))
		}
	} else {
		if body["id"] != "resp_a0" {
			probs.add("id", "id %v", body["id"])
		}
		output, _ := body["output"].([]any)
		text, itemCalls := grSplitItems(output)
		calls = append(calls, itemCalls...)
		var want []string
		for i, it := range g.answers[0].items {
			if it.kind == grMessage || it.kind == grReasoning {
				var v any
				_ = json.Unmarshal([]byte(rs[0].items[i]), &v)
				want = append(want, grCompact(v))
			}
		}
		if strings.Join(text, "\n") != strings.Join(want, "\n") {
			probs.add("text", "text items differ from the first answer's:\n   got  %v\n   want %v", text, want)
		}
	}
	grCheckCalls(g, e, calls, &probs)
	return probs
}

// ---- known bugs ----

// grKnownBugs are engine or rule bugs this file found, each with the
// class of cases it shows in and the invariants it breaks there. Those
// problems are set aside (counted, and a fuzz case that has nothing else
// is skipped naming the bug); every other invariant of the case is still
// checked. Once a bug is fixed, delete its entry: its seeds under
// testdata/fuzz/Fuzz*Rounds/bug-* then hold it fixed.
var grKnownBugs = []struct {
	name string
	// class tells the cases the bug shows in, given the model of the
	// stream's run or of the JSON run.
	class func(g *grScript, rs []*grRendered, e *grExpect) bool
	tags  []string // "stream [tag]" or "json [tag]"
}{
	// Fixed, their seeds under testdata/fuzz/Fuzz*Rounds/bug-* hold them:
	// output_item.added's index when renumbering; a failed round's passed
	// calls taken for a new round; a Chat finish tool_calls without a
	// call, after a failed or cut round and after a re-ask; a Chat custom
	// call with a repaired name, stream and JSON; a joined Chat JSON
	// answer's reasoning; a Chat stream's calls passed after an empty
	// re-ask stream numbered twice.
}

func grFilterKnown(g *grScript, rs []*grRendered, probs []string) (rest []string, bugs []string) {
	if len(grKnownBugs) == 0 {
		return probs, nil
	}
	models := map[string]*grExpect{"stream": grExpectFor(g, rs, false), "json": grExpectFor(g, rs, true)}
	hit := map[string]bool{}
	for _, p := range probs {
		known := ""
		for _, b := range grKnownBugs {
			for _, t := range b.tags {
				run, _, _ := strings.Cut(t, " ")
				if known == "" && grTag(p) == t && b.class(g, rs, models[run]) {
					known = b.name
				}
			}
		}
		if known == "" {
			rest = append(rest, p)
		} else if !hit[known] {
			hit[known] = true
			bugs = append(bugs, known)
		}
	}
	return rest, bugs
}

// ---- shrinking ----

// grShrink makes a failing case's bytes smaller while its problems (those
// of no known bug unless raw) keep the tag want: bytes cut, then zeroed,
// then lowered.
func grShrink(tb testing.TB, chains grChains, chat bool, data []byte, want string, raw bool) []byte {
	fails := func(b []byte) bool {
		g := grGen(&grBytes{b: b}, chat)
		rs := grRender(g)
		probs := grRun(tb, chains, g, rs)
		if !raw {
			probs, _ = grFilterKnown(g, rs, probs)
		}
		for _, p := range probs {
			if grTag(p) == want {
				return true
			}
		}
		return false
	}
	data = bytes.Clone(data)
	for changed := true; changed; {
		changed = false
		for n := len(data) / 2; n >= 1; n /= 2 {
			for i := 0; i+n <= len(data); {
				c := append(bytes.Clone(data[:i]), data[i+n:]...)
				if fails(c) {
					data, changed = c, true
				} else {
					i += n
				}
			}
		}
		for i := range data {
			for _, v := range []byte{0, data[i] / 2, data[i] - 1} {
				if v >= data[i] {
					continue
				}
				c := bytes.Clone(data)
				c[i] = v
				if fails(c) {
					data, changed = c, true
					break
				}
			}
		}
	}
	for len(data) > 0 && data[len(data)-1] == 0 {
		data = data[:len(data)-1]
	}
	return data
}

// ---- the tests ----

// grStats counts what the cases exercised.
type grStats struct {
	cases, rounds, failedRounds, reaskCut, cut, errs int
	bugs                                             map[string]int
}

func (s *grStats) note(g *grScript, rs []*grRendered) {
	e := grExpectFor(g, rs, false)
	s.cases++
	if e.requests > 1 {
		s.rounds++
	}
	if e.failedRound {
		s.failedRounds++
	}
	if e.reaskCut {
		s.reaskCut++
	}
	for _, k := range e.fed {
		if !rs[k].complete() {
			s.cut++
			break
		}
	}
	if e.errExpected {
		s.errs++
	}
}

func grProperty(t *testing.T, chat bool, n int) {
	chains := newGrChains(t)
	st := grStats{bugs: map[string]int{}}
	failed := 0
	for i := range n {
		rec := &grRecorder{r: rand.New(rand.NewPCG(20261202, uint64(i)))}
		g := grGen(rec, chat)
		rs := grRender(g)
		st.note(g, rs)
		probs, bugs := grFilterKnown(g, rs, grRun(t, chains, g, rs))
		for _, b := range bugs {
			st.bugs[b]++
		}
		if len(probs) == 0 {
			continue
		}
		small := grShrink(t, chains, chat, rec.b, grTag(probs[0]), false)
		sg := grGen(&grBytes{b: small}, chat)
		srs := grRender(sg)
		sprobs, _ := grFilterKnown(sg, srs, grRun(t, chains, sg, srs))
		t.Errorf("case %d:\n%s%s\nshrunk to the seed %q:\n%s%s", i, g, strings.Join(probs, "\n"), small, sg, strings.Join(sprobs, "\n"))
		if failed++; failed == 3 {
			t.FailNow()
		}
	}
	t.Logf("%d cases: %d took rounds, %d had a round fail, %d had a re-ask's answer end before its end event, %d had an answer cut, %d ended in the rule's error", st.cases, st.rounds, st.failedRounds, st.reaskCut, st.cut, st.errs)
	for b, k := range st.bugs {
		t.Logf("known bug %q: %d cases (its invariants set aside there)", b, k)
	}
}

func grCases(t *testing.T) int {
	if testing.Short() {
		return 300
	}
	return 1200
}

func TestResponsesRoundsGrammar(t *testing.T) { grProperty(t, false, grCases(t)) }

func TestChatRoundsGrammar(t *testing.T) { grProperty(t, true, grCases(t)) }

func grFuzz(f *testing.F, chat bool) {
	chains := newGrChains(f)
	for i := range 16 {
		rec := &grRecorder{r: rand.New(rand.NewPCG(7, uint64(i)))}
		grGen(rec, chat)
		f.Add(rec.b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g := grGen(&grBytes{b: data}, chat)
		rs := grRender(g)
		probs, bugs := grFilterKnown(g, rs, grRun(t, chains, g, rs))
		if len(probs) > 0 {
			t.Fatalf("%s%s", g, strings.Join(probs, "\n"))
		}
		if len(bugs) > 0 {
			t.Skipf("known bug: %s\n%s", strings.Join(bugs, "; "), g)
		}
	})
}

func FuzzResponsesRounds(f *testing.F) { grFuzz(f, false) }

func FuzzChatRounds(f *testing.F) { grFuzz(f, true) }

// grSplitItems reads Responses output items: the text items (messages
// and reasoning, compacted) and the calls, each in order.
func grSplitItems(items []any) (text []string, calls []grCall) {
	for _, o := range items {
		it, _ := o.(map[string]any)
		switch it["type"] {
		case "message", "reasoning":
			text = append(text, grCompact(it))
		case "function_call", "custom_tool_call":
			c := grCall{custom: it["type"] == "custom_tool_call"}
			c.callID, _ = it["call_id"].(string)
			c.name, _ = it["name"].(string)
			if c.custom {
				c.args, _ = it["input"].(string)
			} else {
				c.args, _ = it["arguments"].(string)
			}
			calls = append(calls, c)
		}
	}
	return text, calls
}
