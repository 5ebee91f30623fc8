package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// readmeBlocks returns the fenced blocks of one README section, in order,
// as (language, text) pairs.
func readmeBlocks(t *testing.T, section string) [][2]string {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "\n## `"+section+"`\n")
	if start < 0 {
		t.Fatalf("README has no section %q", section)
	}
	body := doc[start+1:]
	if end := strings.Index(body[3:], "\n## "); end >= 0 {
		body = body[:end+3]
	}
	var blocks [][2]string
	for {
		i := strings.Index(body, "\n```")
		if i < 0 {
			break
		}
		body = body[i+4:]
		nl := strings.IndexByte(body, '\n')
		lang := body[:nl]
		end := strings.Index(body[nl:], "\n```")
		blocks = append(blocks, [2]string{lang, body[nl+1 : nl+end+1]})
		body = body[nl+end+4:]
	}
	return blocks
}

// readmeRules loads a section's examples: each Caddyfile block must be
// followed by a JSON block that configures the same rule, and both must
// load.
func readmeRules(t *testing.T, section string) []transforms.RuleConfig {
	t.Helper()
	blocks := readmeBlocks(t, section)
	var rules []transforms.RuleConfig
	for i := 0; i < len(blocks); i++ {
		if blocks[i][0] != "caddyfile" {
			continue
		}
		if i+1 >= len(blocks) || blocks[i+1][0] != "json" {
			t.Fatalf("%s: Caddyfile example %d has no JSON twin", section, i)
		}
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_transform {\n" + blocks[i][1] + "}")); err != nil {
			t.Fatalf("%s: Caddyfile example:\n%s\n%v", section, blocks[i][1], err)
		}
		var fromJSON transforms.RuleConfig
		dec := json.NewDecoder(strings.NewReader(blocks[i+1][1]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fromJSON); err != nil {
			t.Fatalf("%s: JSON example:\n%s\n%v", section, blocks[i+1][1], err)
		}
		if len(h.Rules) != 1 {
			t.Fatalf("%s: the Caddyfile example holds %d rules", section, len(h.Rules))
		}
		got := h.Rules[0]
		var a, b any
		if err := json.Unmarshal(got.Config, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(fromJSON.Config, &b); err != nil {
			t.Fatal(err)
		}
		if got.Transform != fromJSON.Transform || !reflect.DeepEqual(got.Models, fromJSON.Models) || !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: the Caddyfile and JSON examples differ:\n%+v %s\n%+v %s", section, got, got.Config, fromJSON, fromJSON.Config)
		}
		rules = append(rules, fromJSON)
		i++
	}
	if len(rules) == 0 {
		t.Fatalf("%s: no examples", section)
	}
	return rules
}

// compileReadme provisions rules as Caddy would load them.
func compileReadme(t *testing.T, cfgs ...transforms.RuleConfig) *transforms.Chain {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	rules, err := transforms.Compile(ctx, cfgs, transforms.ScopeProvider, "")
	if err != nil {
		t.Fatal(err)
	}
	return transforms.NewChain(rules)
}

func runReadme(t *testing.T, c *transforms.Chain, model, team string, body string) []byte {
	t.Helper()
	x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{MaxCallBuffer: 1 << 20, MaxEvent: 1 << 20}, nil)
	repl := caddy.NewReplacer()
	if team != "" {
		repl.Set("http.request.header.X-Team", team)
	}
	x.Replacer = repl
	if !c.Begin(x, model) {
		return []byte(body)
	}
	out, err := x.RewriteRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadmeToolsFilterExamples: the README's tools_filter examples load
// in both forms and do what the text says.
func TestReadmeToolsFilterExamples(t *testing.T) {
	rules := readmeRules(t, "tools_filter")
	if len(rules) != 2 {
		t.Fatalf("want the filter example and the function-calling-off example, got %d", len(rules))
	}
	filter := compileReadme(t, rules[0])
	req := `{"model":"m","input":"hi","tools":[{"type":"web_search"},{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"delete_repo"},{"type":"function","name":"read_file"}]}]}`
	want := `{"model":"m","input":"hi","tools":[{"type":"namespace","name":"mcp","tools":[{"type":"function","name":"read_file"}]},` +
		`{"type":"function","name":"lookup_ticket","description":"Look up a support ticket.","parameters":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}}]}`
	if got := runReadme(t, filter, "m", "support", req); string(got) != want {
		t.Fatalf("support caller:\n got %s\nwant %s", got, want)
	}
	if got := runReadme(t, filter, "m", "research", req); string(got) != req {
		t.Fatalf("the research caller is not filtered: %s", got)
	}
	off := compileReadme(t, rules[1])
	offReq := `{"model":"deepseek-reasoner-1","tools":[{"type":"function","name":"f"}],"tool_choice":"auto","input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`
	wantOff := `{"model":"deepseek-reasoner-1","input":[{"type":"message","role":"assistant","content":"Called tool ` + "`f`" + ` (call c1) with:\n{}"},{"type":"message","role":"user","content":"Output of tool ` + "`f`" + ` (call c1):\nok"}]}`
	if got := runReadme(t, off, "deepseek-reasoner-1", "", offReq); string(got) != wantOff {
		t.Fatalf("function calling off:\n got %s\nwant %s", got, wantOff)
	}
	if got := runReadme(t, off, "gpt-5", "", offReq); string(got) != offReq {
		t.Fatalf("a model the rule does not name is untouched: %s", got)
	}
}

// TestReadmeToolsNormalizeSchemaExample: the README's example loads in
// both forms and strips what it says.
func TestReadmeToolsNormalizeSchemaExample(t *testing.T) {
	rules := readmeRules(t, "tools_normalize_schema")
	c := compileReadme(t, rules...)
	req := `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","strict":true,"parameters":{"type":"object","properties":{"examples":{"type":["string","null"],"examples":["a"]}},"additionalProperties":false}}]}`
	want := `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"examples":{"type":"string","nullable":true}}}}]}`
	if got := runReadme(t, c, "m", "", req); !bytes.Equal(got, []byte(want)) {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
}
