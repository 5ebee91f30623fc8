package wholeprocess

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// BenchmarkSchemaRequest has a pair of processes of its own, in front of an
// upstream of its own that keeps the body of a request marked X-Bench-Check
// so the benchmark can read what arrived: A a plain reverse_proxy, B the
// same route behind tools_normalize_schema for Gemini. Both are sent a
// Responses request declaring 300 MCP-style function tools (schemaToolsBody)
// and answered with tinyJSON.
var (
	schemaOnce    sync.Once
	schemaErr     error
	procSchemaA   *proc
	procSchemaB   *proc
	schemaUp      *httptest.Server
	schemaDoc     []byte
	schemaTools   int
	schemaGotMu   sync.Mutex
	schemaGotBody []byte // the last X-Bench-Check request's body
)

// setupSchema builds the request and starts the upstream and both
// processes once; TestMain's stopAll stops the processes.
func setupSchema(b *testing.B) {
	b.Helper()
	schemaOnce.Do(func() {
		schemaDoc, schemaTools = schemaToolsBody()
		if !json.Valid(schemaDoc) {
			schemaErr = fmt.Errorf("the generated request is not JSON")
			return
		}
		schemaUp = httptest.NewServer(http.HandlerFunc(serveSchemaUpstream))
		procSchemaA, procSchemaB, schemaErr = startPair("schemaA", "schemaB", schemaUp, `		rule tools_normalize_schema {
			dialect gemini
		}
`)
	})
	if schemaErr != nil {
		b.Fatal(schemaErr)
	}
}

// serveSchemaUpstream reads the request, keeps it when asked to, and
// answers with the small JSON response.
func serveSchemaUpstream(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Bench-Check") != "" {
		body, _ := io.ReadAll(r.Body)
		schemaGotMu.Lock()
		schemaGotBody = body
		schemaGotMu.Unlock()
	} else {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(tinyJSON)
}

// schemaUpstreamBody sends doc to p marked X-Bench-Check and returns the
// body the upstream got, failing unless the client got tinyJSON back.
func schemaUpstreamBody(b *testing.B, p *proc, doc []byte) []byte {
	b.Helper()
	schemaGotMu.Lock()
	schemaGotBody = nil
	schemaGotMu.Unlock()
	resp := post(b, p, responsesPath, "schema", doc, "X-Bench-Check")
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(out, tinyJSON) {
		b.Fatalf("%s: the client got %.300q (%v), want the upstream's answer", p.name, out, err)
	}
	schemaGotMu.Lock()
	defer schemaGotMu.Unlock()
	if schemaGotBody == nil {
		b.Fatalf("%s: the upstream got no request", p.name)
	}
	return schemaGotBody
}

// checkGemini checks the body B sent upstream: the 300 tools, in order and
// named as declared, and in no tool's parameters a key the Gemini dialect
// strips or inlines (additionalProperties, $ref, $defs, definitions,
// $schema, default), an integer enum or a type list; the input as sent.
// The generated schemas have no property named like one of those keywords,
// so every key counts.
func checkGemini(b *testing.B, doc, got []byte) {
	b.Helper()
	tools := gjson.GetBytes(got, "tools").Array()
	sent := gjson.GetBytes(doc, "tools").Array()
	if len(tools) != schemaTools || len(sent) != schemaTools {
		b.Fatalf("B: the upstream got %d tools, want %d", len(tools), schemaTools)
	}
	banned := map[string]bool{"additionalProperties": true, "$ref": true, "$defs": true, "definitions": true, "$schema": true, "default": true}
	var walk func(path string, v gjson.Result)
	walk = func(path string, v gjson.Result) {
		switch {
		case v.IsObject():
			v.ForEach(func(k, e gjson.Result) bool {
				if banned[k.String()] {
					b.Fatalf("B: %s still has %q: %.300s", path, k.String(), v.Raw)
				}
				if k.String() == "type" && e.IsArray() {
					b.Fatalf("B: %s has a type list: %.300s", path, v.Raw)
				}
				if k.String() == "enum" {
					for _, x := range e.Array() {
						if x.Type != gjson.String {
							b.Fatalf("B: %s has an enum value that is not a string: %.300s", path, v.Raw)
						}
					}
				}
				walk(path+"."+k.String(), e)
				return true
			})
		case v.IsArray():
			for i, e := range v.Array() {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	for i, t := range tools {
		name := t.Get("name").String()
		if name != sent[i].Get("name").String() || t.Get("type").String() != "function" {
			b.Fatalf("B: tool %d is %s %q, want function %q", i, t.Get("type").String(), name, sent[i].Get("name").String())
		}
		params := t.Get("parameters")
		if !params.IsObject() || params.Get("type").String() != "object" {
			b.Fatalf("B: %s has parameters %.200s", name, params.Raw)
		}
		walk(name, params)
	}
	if gjson.GetBytes(got, "input").Raw != gjson.GetBytes(doc, "input").Raw {
		b.Fatal("B: the input changed on its way upstream")
	}
}

// BenchmarkSchemaRequest: the CPU of a Responses request declaring 300
// MCP-style function tools (30 servers, nested objects, arrays of objects,
// string and integer enums, anyOf with null, $ref into $defs, maps,
// formats, defaults) whose schemas B rewrites for Gemini with
// tools_normalize_schema, against A forwarding it untouched, both answered
// with a small JSON response. The requests alternate A and B in
// LLMT_WP_ROUNDS rounds (at least and by default 5), as the stream table
// does: x_median, x_min and x_max are the rounds' ratios of B's CPU to A's,
// x_passthrough_cpu the ratio over all of them; valid_passes_added is B's
// added CPU in gjson.ValidBytes passes over the same body, timed in the
// same loop (thread CPU). Before measuring, the body A sends upstream must
// be the client's byte for byte, and B's must hold the 300 tools with no
// additionalProperties, $ref or $defs left in their parameters.
//
//	go test -run '^$' -bench '^BenchmarkSchemaRequest$' -benchtime=200x ./integration/wholeprocess/
func BenchmarkSchemaRequest(b *testing.B) {
	setupSchema(b)
	pa, pb, doc := procSchemaA, procSchemaB, schemaDoc
	if got := schemaUpstreamBody(b, pa, doc); !bytes.Equal(got, doc) {
		b.Fatalf("A: the upstream got %d bytes that are not the client's %d", len(got), len(doc))
	}
	got := schemaUpstreamBody(b, pb, doc)
	if bytes.Equal(got, doc) {
		b.Fatal("B: the body went upstream unchanged")
	}
	checkGemini(b, doc, got)
	upKB := float64(len(got)) / 1e3

	one := func(p *proc) {
		if out := fetch(b, p, responsesPath, "schema", doc); !bytes.Equal(out, tinyJSON) {
			b.Fatalf("%s: the client got %.300q", p.name, out)
		}
	}
	b.StopTimer()
	for i := 0; i < warmRounds; i++ {
		one(pa)
		one(pb)
	}
	profile(b, "schema", pa, pb, one)

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n := tableRounds()
	per := max(1, (b.N+n-1)/n)
	ratios, cpuA, cpuB, valid := alternateRequests(b, pa, pb, one, doc, n, per)
	reqs := float64(n * per)
	slices.Sort(ratios)
	perValid := float64(valid) / reqs
	b.ReportMetric(ratios[len(ratios)/2], "x_median")
	b.ReportMetric(ratios[0], "x_min")
	b.ReportMetric(ratios[len(ratios)-1], "x_max")
	b.ReportMetric(float64(cpuB)/float64(cpuA), "x_passthrough_cpu")
	b.ReportMetric(float64(cpuA)/1e3/reqs, "A_cpu_us/request")
	b.ReportMetric(float64(cpuB)/1e3/reqs, "B_cpu_us/request")
	b.ReportMetric(float64(cpuB-cpuA)/1e3/reqs, "added_us/request")
	b.ReportMetric(float64(cpuB-cpuA)/reqs/perValid, "valid_passes_added")
	b.ReportMetric(perValid/1e3, "valid_us")
	b.ReportMetric(float64(len(doc))/1e3, "body_kB")
	b.ReportMetric(upKB, "upstream_kB")
	b.ReportMetric(float64(schemaTools), "tools")
	b.ReportMetric(float64(n), "rounds")
}

// The 30 MCP servers of schemaToolsBody and the things their tools act on.
var schemaServers = []struct {
	name  string
	nouns []string
}{
	{"playwright", []string{"browser_page", "browser_tab", "element", "screenshot", "network_request"}},
	{"github", []string{"issue", "pull_request", "branch", "file_contents", "review_comment"}},
	{"notion", []string{"page", "database", "block_children", "comment", "database_query"}},
	{"linear", []string{"issue", "project", "cycle", "team_member"}},
	{"jira", []string{"ticket", "sprint", "worklog", "transition", "board"}},
	{"slack", []string{"channel_message", "thread_reply", "reaction", "user_profile"}},
	{"postgres", []string{"query", "table_schema", "index", "migration"}},
	{"filesystem", []string{"file", "directory", "file_info", "search_result"}},
	{"sentry", []string{"issue_event", "release", "alert_rule", "project_stat"}},
	{"stripe", []string{"customer", "invoice", "payment_intent", "subscription", "refund"}},
	{"gitlab", []string{"merge_request", "pipeline", "job_log", "snippet"}},
	{"google_drive", []string{"document", "folder", "permission", "revision"}},
	{"google_calendar", []string{"event", "calendar", "attendee", "free_busy"}},
	{"gmail", []string{"message", "draft", "label", "filter"}},
	{"confluence", []string{"page", "space", "attachment", "page_label"}},
	{"figma", []string{"file_node", "component", "comment", "image_export"}},
	{"kubernetes", []string{"pod", "deployment", "service", "config_map", "pod_log"}},
	{"docker", []string{"container", "image", "volume", "network"}},
	{"aws", []string{"s3_object", "lambda_function", "cloudwatch_log", "ec2_instance"}},
	{"cloudflare", []string{"dns_record", "worker_script", "kv_namespace", "zone_setting"}},
	{"datadog", []string{"monitor", "dashboard", "metric_series", "incident"}},
	{"pagerduty", []string{"incident", "on_call", "escalation_policy", "service"}},
	{"hubspot", []string{"contact", "deal", "company", "engagement"}},
	{"salesforce", []string{"record", "soql_query", "opportunity", "case"}},
	{"airtable", []string{"record", "base_schema", "view", "field"}},
	{"asana", []string{"task", "project_section", "story", "portfolio"}},
	{"zendesk", []string{"ticket", "macro", "organization", "satisfaction_rating"}},
	{"vercel", []string{"deployment", "domain", "env_variable", "build_log"}},
	{"supabase", []string{"edge_function", "storage_bucket", "auth_user", "sql_snippet"}},
	{"memory", []string{"entity", "relation", "observation", "graph_node"}},
}

var schemaVerbs = []string{"create", "get", "list", "update", "delete", "search", "batch_get", "archive", "export", "sync", "watch", "duplicate"}

// Sentences the descriptions are made of; {noun} is the thing the tool acts
// on, {server} its server.
var schemaSentences = []string{
	"Returns the {noun} as JSON, with every field the {server} API exposes.",
	"Use this when the user refers to a {noun} by its title rather than its ID.",
	"Results are paginated: pass the `cursor` from the previous response to get the next page.",
	"Requires the \"write\" scope on the {server} token; read-only tokens get a 403.",
	"Fields that are not set keep their current value.",
	"Dates are ISO 8601 (e.g. \"2025-01-31T12:00:00Z\"); times without a zone are UTC.",
	"Prefer the search tool for fuzzy matches — this one needs an exact identifier.",
	"The call is idempotent: repeating it with the same arguments changes nothing.",
	"Large results are truncated to 100 items; narrow the query with filters.",
	"Archived {noun} items are excluded unless include_archived is true.",
	"Rate limited to 60 requests a minute per workspace.",
	"Markdown is accepted in text fields and converted to {server}'s rich text.",
	"On success the tool returns the new {noun}'s URL and ID.",
	"Do not use this for bulk changes; call it once per {noun}.",
	"Unknown fields are rejected with a validation error naming them.",
}

// schemaDefs are the definitions a tool's references may point at, each
// with the others it refers to; none refers back.
var schemaDefs = []struct {
	name, body string
	uses       []string
}{
	{"User", `{"type":"object","properties":{"id":{"type":"string","format":"uuid","description":"The user's ID."},"login":{"type":"string","description":"Login name, without the leading @."},"email":{"anyOf":[{"type":"string","format":"email"},{"type":"null"}],"default":null}},"required":["id"],"additionalProperties":false}`, nil},
	{"RichText", `{"type":"object","properties":{"type":{"type":"string","enum":["text","mention","equation"],"default":"text"},"text":{"type":"object","properties":{"content":{"type":"string","maxLength":2000},"link":{"anyOf":[{"type":"object","properties":{"url":{"type":"string","format":"uri"}},"required":["url"]},{"type":"null"}]}},"required":["content"],"additionalProperties":false},"annotations":{"$ref":"#/$defs/Annotations"}},"required":["type"],"additionalProperties":false}`, []string{"Annotations"}},
	{"Annotations", `{"type":"object","properties":{"bold":{"type":"boolean","default":false},"italic":{"type":"boolean","default":false},"code":{"type":"boolean","default":false},"color":{"type":"string","enum":["default","gray","brown","red","blue"],"default":"default"}},"additionalProperties":false}`, nil},
	{"Condition", `{"type":"object","properties":{"equals":{"type":["string","number","boolean"]},"contains":{"type":"string"},"before":{"type":"string","format":"date-time"},"is_empty":{"type":"boolean","const":true}},"additionalProperties":false,"description":"Exactly one operator."}`, nil},
	{"Filter", `{"type":"object","properties":{"property":{"type":"string","description":"Name or ID of the property to filter on."},"condition":{"$ref":"#/$defs/Condition"}},"required":["property","condition"],"additionalProperties":false}`, []string{"Condition"}},
	{"Sort", `{"type":"object","properties":{"property":{"type":"string"},"direction":{"type":"string","enum":["ascending","descending"],"default":"ascending"}},"required":["property"],"additionalProperties":false}`, nil},
	{"Label", `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":50},"color":{"type":"string","pattern":"^[0-9a-fA-F]{6}$","description":"Hex colour without the #."},"description":{"type":["string","null"]}},"required":["name"],"additionalProperties":false}`, nil},
	{"Resource", `{"type":"object","properties":{"cpu":{"type":"string","pattern":"^[0-9]+m?$","examples":["500m","2"]},"memory":{"type":"string","pattern":"^[0-9]+(Mi|Gi)$"}},"additionalProperties":false}`, nil},
	{"Container", `{"type":"object","properties":{"name":{"type":"string"},"image":{"type":"string","description":"Image reference, e.g. \"nginx:1.27\"."},"env":{"type":"object","additionalProperties":{"type":"string"},"propertyNames":{"pattern":"^[A-Z_][A-Z0-9_]*$"}},"limits":{"$ref":"#/$defs/Resource"},"ports":{"type":"array","items":{"type":"integer","minimum":1,"maximum":65535}}},"required":["name","image"],"additionalProperties":false}`, []string{"Resource"}},
	{"Money", `{"type":"object","properties":{"amount":{"type":"integer","minimum":0,"description":"In the currency's smallest unit (cents)."},"currency":{"type":"string","enum":["usd","eur","gbp","jpy"],"default":"usd"}},"required":["amount","currency"],"additionalProperties":false}`, nil},
}

// schemaToolsBody builds, deterministically, a Responses request declaring
// 300 function tools as MCP clients send them: ten for each of 30 servers,
// named server__verb_noun, with descriptions of 50–300 characters and 3–15
// properties of varied shapes, roots written as zod (additionalProperties
// false, $schema), pydantic (titles, $defs) or plainly. It returns the
// body and the number of tools.
func schemaToolsBody() ([]byte, int) {
	r := rand.New(rand.NewPCG(2025, 300))
	var tools []string
	for si, s := range schemaServers {
		for ti := 0; ti < 10; ti++ {
			verb := schemaVerbs[(si+ti)%len(schemaVerbs)] // ten verbs in a row: names unique per server
			noun := s.nouns[(ti*7+si)%len(s.nouns)]
			name := s.name + "__" + verb + "_" + noun
			desc := schemaDescription(r, 50, 300, fmt.Sprintf("%s a %s in %s.", strings.ToUpper(verb[:1])+strings.ReplaceAll(verb[1:], "_", " "), strings.ReplaceAll(noun, "_", " "), s.name), noun, s.name)
			params := schemaParams(r, name, noun, s.name, (si*10+ti)%3)
			tools = append(tools, `{"type":"function","name":`+jsonString(name)+`,"description":`+jsonString(desc)+`,"parameters":`+params+`,"strict":false}`)
		}
	}
	doc := `{"model":"gemini-2.5-pro","instructions":"You are a helpful assistant with access to the user's tools. Call them when they help.","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Find the open issues labelled \"bug\" in the repo and file a summary page in Notion."}]}],"tools":[` +
		strings.Join(tools, ",") + `],"tool_choice":"auto","parallel_tool_calls":true,"store":false,"stream":false,"max_output_tokens":4096}`
	return []byte(doc), len(tools)
}

// schemaDescription writes a description of lo to hi characters (bytes)
// that starts with first.
func schemaDescription(r *rand.Rand, lo, hi int, first, noun, server string) string {
	want := lo + r.IntN(hi-lo+1)
	d := first
	for len(d) < want {
		d += " " + strings.NewReplacer("{noun}", strings.ReplaceAll(noun, "_", " "), "{server}", server).Replace(schemaSentences[r.IntN(len(schemaSentences))])
	}
	if len(d) > hi { // end with the last whole sentence, or else the last whole word
		if i := strings.LastIndex(d[:hi], ". "); i+1 >= lo {
			return d[:i+1]
		}
	}
	for len(d) > hi {
		d = strings.TrimRight(d[:strings.LastIndexByte(d[:len(d)-1], ' ')], ".,;:—-` ") + "."
	}
	return d
}

// schemaProp is one kind of property: its possible names, and its schema
// given a description, or the definition it refers to.
type schemaProp struct {
	names  []string
	schema func(r *rand.Rand, desc string) string
	def    string // or a reference to this definition
	array  bool   // as the items of an array
}

var schemaProps = []schemaProp{
	{names: []string{"query", "title", "body", "message", "path", "selector", "owner", "repo", "text", "name"}, schema: func(r *rand.Rand, d string) string {
		return `{"type":"string","description":` + d + `}`
	}},
	{names: []string{"url", "since", "due_at", "email", "id", "page_id", "created_after"}, schema: func(r *rand.Rand, d string) string {
		f := []string{"uri", "date-time", "email", "uuid", "date", "date-time"}[r.IntN(6)]
		return `{"type":"string","format":"` + f + `","description":` + d + `}`
	}},
	{names: []string{"slug", "branch", "ref", "key", "sha"}, schema: func(r *rand.Rand, d string) string {
		return `{"type":"string","pattern":"^[A-Za-z0-9._/-]+$","minLength":1,"maxLength":255,"description":` + d + `}`
	}},
	{names: []string{"state", "sort", "order", "mode", "visibility", "wait_until", "format"}, schema: func(r *rand.Rand, d string) string {
		sets := [][]string{{"open", "closed", "all"}, {"created", "updated", "comments"}, {"asc", "desc"}, {"load", "domcontentloaded", "networkidle", "commit"}, {"public", "private", "internal"}, {"markdown", "html", "plain"}}
		set := sets[r.IntN(len(sets))]
		return `{"type":"string","enum":["` + strings.Join(set, `","`) + `"],"default":"` + set[0] + `","description":` + d + `}`
	}},
	{names: []string{"priority", "level", "severity", "depth"}, schema: func(r *rand.Rand, d string) string {
		return `{"type":"integer","enum":[0,1,2,3,4],"description":` + d + `}`
	}},
	{names: []string{"limit", "per_page", "page", "timeout_ms", "max_results", "offset"}, schema: func(r *rand.Rand, d string) string {
		hi := []int{100, 1000, 60000}[r.IntN(3)]
		return fmt.Sprintf(`{"type":"integer","minimum":1,"maximum":%d,"default":%d,"description":%s}`, hi, min(30, hi), d)
	}},
	{names: []string{"threshold", "temperature", "ratio", "x", "y"}, schema: func(r *rand.Rand, d string) string {
		return `{"type":"number","minimum":0,"exclusiveMaximum":1,"description":` + d + `}`
	}},
	{names: []string{"include_archived", "dry_run", "full_page", "draft", "recursive", "notify"}, schema: func(r *rand.Rand, d string) string {
		return `{"type":"boolean","default":false,"description":` + d + `}`
	}},
	{names: []string{"labels", "assignees", "paths", "tags", "fields", "scopes"}, schema: func(r *rand.Rand, d string) string {
		return `{"type":"array","items":{"type":"string","minLength":1},"maxItems":50,"uniqueItems":true,"description":` + d + `}`
	}},
	{names: []string{"files", "reviewers", "line_items", "attendees", "cookies"}, schema: func(r *rand.Rand, d string) string {
		return `{"type":"array","items":{"type":"object","properties":{"path":{"type":"string","description":"Path relative to the root."},"content":{"type":"string"},"mode":{"type":"string","enum":["100644","100755"],"default":"100644"}},"required":["path","content"],"additionalProperties":false},"minItems":1,"description":` + d + `}`
	}},
	{names: []string{"viewport", "position", "author", "options", "range", "schedule"}, schema: func(r *rand.Rand, d string) string {
		if r.IntN(3) > 0 {
			return `{"type":"object","properties":{"width":{"type":"integer","minimum":1,"default":1280},"height":{"type":"integer","minimum":1,"default":720}},"required":["width","height"],"description":` + d + `}`
		}
		return `{"type":"object","properties":{"start":{"type":"string","format":"date-time"},"end":{"type":"string","format":"date-time"},"recurrence":{"type":"object","properties":{"freq":{"type":"string","enum":["daily","weekly","monthly"]},"interval":{"type":"integer","minimum":1,"default":1}},"required":["freq"],"additionalProperties":false}},"required":["start"],"additionalProperties":false,"description":` + d + `}`
	}},
	{names: []string{"parent_id", "cursor", "milestone", "due_date", "assignee", "description"}, schema: func(r *rand.Rand, d string) string {
		if r.IntN(2) == 0 {
			return `{"anyOf":[{"type":"string"},{"type":"null"}],"default":null,"description":` + d + `}`
		}
		return `{"anyOf":[{"type":"integer","minimum":0},{"type":"null"}],"default":null,"title":"Value","description":` + d + `}`
	}},
	{names: []string{"note", "body_html", "reason", "timezone"}, schema: func(r *rand.Rand, d string) string {
		return `{"type":["string","null"],"description":` + d + `}`
	}},
	{names: []string{"headers", "metadata", "env", "properties", "variables"}, schema: func(r *rand.Rand, d string) string {
		if r.IntN(3) == 0 {
			return `{"type":"object","additionalProperties":{"type":"object","properties":{"value":{"type":"string"},"secret":{"type":"boolean","default":false}},"required":["value"]},"description":` + d + `}`
		}
		return `{"type":"object","additionalProperties":{"type":"string","maxLength":500},"propertyNames":{"maxLength":40},"description":` + d + `}`
	}},
	// References to a definition, alone or as the items of an array.
	{names: []string{"filter"}, def: "Filter"},
	{names: []string{"assignee_user", "author_user"}, def: "User"},
	{names: []string{"amount", "price"}, def: "Money"},
	{names: []string{"container", "sidecar"}, def: "Container"},
	{names: []string{"sort"}, def: "Sort"},
	{names: []string{"filters"}, def: "Filter", array: true},
	{names: []string{"rich_text", "title_text"}, def: "RichText", array: true},
	{names: []string{"labels_to_add", "new_labels"}, def: "Label", array: true},
	{names: []string{"sorts"}, def: "Sort", array: true},
	{names: []string{"owners", "members"}, def: "User", array: true},
}

// schemaParams builds one tool's parameters: 3–15 properties, about half
// required, in the root style given (0 zod, 1 pydantic, 2 plain).
func schemaParams(r *rand.Rand, tool, noun, server string, style int) string {
	refs := r.IntN(5) < 2 // two tools in five may refer to definitions
	used := map[string]bool{}
	defs := map[string]bool{}
	defsKey := "$defs"
	if style == 2 && r.IntN(2) == 0 {
		defsKey = "definitions"
	}
	var use func(def string)
	use = func(def string) {
		if defs[def] {
			return
		}
		defs[def] = true
		for _, d := range schemaDefs {
			if d.name == def {
				for _, u := range d.uses {
					use(u)
				}
			}
		}
	}
	ref := func(def string) string { use(def); return "#/" + defsKey + "/" + def }
	var props, required []string
	var first string // a zod tool refers to its first property's schema again
	n := 3 + r.IntN(13)
	for len(props) < n {
		k := schemaProps[r.IntN(len(schemaProps))]
		name := k.names[r.IntN(len(k.names))]
		if used[name] || k.def != "" && !refs {
			continue
		}
		used[name] = true
		d := jsonString(schemaDescription(r, 15, 90, "The "+strings.ReplaceAll(name, "_", " ")+" of the "+strings.ReplaceAll(noun, "_", " ")+".", noun, server))
		var s string
		switch {
		case k.def == "":
			s = k.schema(r, d)
		case k.array:
			s = `{"type":"array","items":{"$ref":` + jsonString(ref(k.def)) + `},"maxItems":100,"description":` + d + `}`
		default:
			s = `{"$ref":` + jsonString(ref(k.def)) + `,"description":` + d + `}`
		}
		if r.IntN(4) == 0 { // a property without a description
			s = strings.Replace(s, `,"description":`+d, "", 1)
		}
		if style == 1 {
			s = `{"title":` + jsonString(strings.ToUpper(name[:1])+strings.ReplaceAll(name[1:], "_", " ")) + `,` + s[1:]
		}
		props = append(props, jsonString(name)+":"+s)
		if first == "" {
			first = name
		} else if style == 0 && len(props) == 4 && r.IntN(3) == 0 {
			// zod-to-json-schema writes a schema seen before as a
			// reference to where it first appeared.
			used[name+"_again"] = true
			props = append(props, jsonString(name+"_again")+`:{"$ref":"#/properties/`+first+`"}`)
		}
		if r.IntN(2) == 0 || len(required) == 0 {
			required = append(required, jsonString(name))
		}
	}
	var p strings.Builder
	p.WriteString(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(required, ",") + `]`)
	if len(defs) > 0 {
		names := make([]string, 0, len(defs))
		for _, d := range schemaDefs {
			if defs[d.name] {
				body := d.body
				if defsKey != "$defs" {
					body = strings.ReplaceAll(body, "#/$defs/", "#/"+defsKey+"/")
				}
				names = append(names, jsonString(d.name)+":"+body)
			}
		}
		p.WriteString(`,"` + defsKey + `":{` + strings.Join(names, ",") + `}`)
	}
	switch style {
	case 0:
		p.WriteString(`,"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"`)
	case 1:
		p.WriteString(`,"title":` + jsonString(strings.ReplaceAll(tool, "__", "_")+"_arguments"))
	}
	p.WriteString(`}`)
	return p.String()
}

// alternateRequests measures n rounds of per request pairs, A and B taking
// turns, with the baseline gjson.ValidBytes pass of doc riding along with
// each pair (its thread CPU kept out of the processes' figures): each
// round's ratio of B's CPU to A's, both processes' CPU, and the passes'
// time. The timer runs only over the rounds.
func alternateRequests(b *testing.B, pa, pb *proc, one func(*proc), doc []byte, n, per int) (ratios []float64, cpuA, cpuB int64, valid time.Duration) {
	ratios = make([]float64, 0, n)
	b.ResetTimer()
	b.StartTimer()
	for round := 0; round < n; round++ {
		a0, b0 := pa.procCPU(b), pb.procCPU(b)
		for i := 0; i < per; i++ {
			first, second := pa, pb
			if (round*per+i)%2 == 1 {
				first, second = second, first
			}
			one(first)
			one(second)
			t0 := threadCPU()
			if !gjson.ValidBytes(doc) {
				b.Fatal("invalid")
			}
			valid += threadCPU() - t0
		}
		da, db := pa.procCPU(b)-a0, pb.procCPU(b)-b0
		cpuA += da
		cpuB += db
		ratios = append(ratios, float64(db)/float64(da))
	}
	b.StopTimer()
	return ratios, cpuA, cpuB, valid
}
