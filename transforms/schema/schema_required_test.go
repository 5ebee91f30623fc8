package schema

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// required (schema.go): draft-03 required flags hoisted to the parent's
// list, unknown and repeated names dropped, long lists matched through
// sets.

// TestNormalizeSchemaHoistsDraft3Required: "required": true on a property
// (draft-03) moves to its parent's list, which every upstream reads.
func TestNormalizeSchemaHoistsDraft3Required(t *testing.T) {
	c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{}}]`)
	for _, tc := range []struct{ in, want string }{
		{`{"type":"object","properties":{"a":{"type":"string","required":true},"b":{"type":"string"}}}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"]}`},
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string","required":true}},"required":["a"]}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","b"]}`},
	} {
		body := []byte(`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":` + tc.in + `}]}`)
		x := transformtest.Begin(t, c, transforms.ProtocolResponses, body)
		out, err := x.RewriteRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		transformtest.JSONEqual(t, out, `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":`+tc.want+`}]}`)
	}
}

// TestLongNameListsMatchThroughSets: past 16 names, required and properties
// are matched through a set: openai_strict keeps the bytes of a required
// list that names every property in another order, and permissive drops
// unknown and repeated names from a long list.
func TestLongNameListsMatchThroughSets(t *testing.T) {
	var props, rev, long, kept []string
	for i := 0; i < 20; i++ {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"string"}`, i))
		rev = append(rev, fmt.Sprintf(`"p%d"`, 19-i))
		long = append(long, fmt.Sprintf(`"p%d"`, i), fmt.Sprintf(`"p%d"`, i), fmt.Sprintf(`"q%d"`, i))
		kept = append(kept, fmt.Sprintf(`"p%d"`, i))
	}
	strict := `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(rev, ",") + `],"additionalProperties":false}`
	body := fn(strict, strictOn)
	out, _, err := normalizeRecovered(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses, body)
	if err != nil || string(out) != body {
		t.Fatalf("want the body unchanged, got %v\n%s", err, out)
	}
	out, _, err = normalizeRecovered(t, `{"dialect":"permissive"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{`+strings.Join(props, ",")+`},"required":[`+strings.Join(long, ",")+`]}`))
	transformtest.Accepted(t, out, err, fn(`{"type":"object","properties":{`+strings.Join(props, ",")+`},"required":[`+strings.Join(kept, ",")+`]}`))
}

// TestLongRequiredListKeepsBytes: 40000 properties, all required, need no
// change and keep their bytes. That filtering required grows linearly is
// BenchmarkSchemaScaling's to measure: a test does not time.
func TestLongRequiredListKeepsBytes(t *testing.T) {
	schema := func(n int) string {
		var props, req strings.Builder
		for i := 0; i < n; i++ {
			if i > 0 {
				props.WriteByte(',')
				req.WriteByte(',')
			}
			props.WriteString(`"p` + strconv.Itoa(i) + `":{"type":"string"}`)
			req.WriteString(`"p` + strconv.Itoa(i) + `"`)
		}
		return fn(`{"type":"object","properties":{` + props.String() + `},"required":[` + req.String() + `]}`)
	}
	// The scaling itself is measured by BenchmarkSchemaScaling: here,
	// 40000 properties, all required, keep their bytes.
	body := schema(40000)
	if out := normalizeLarge(t, `{}`, body); string(out) != body {
		t.Errorf("a schema needing no change was rewritten")
	}
}

// nsExact fails unless the request comes back as exactly want, byte for
// byte: repeated keys, which JSONEqual would fold, are part of what is
// pinned.
func nsExact(t *testing.T, config, body, want string) {
	t.Helper()
	out, _, err := normalizeRecovered(t, config, transforms.ProtocolResponses, body)
	if err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	if string(out) != want {
		t.Errorf("\n got: %s\nwant: %s", out, want)
	}
}

// TestDraft3HoistingPastSixteenNames: draft-03 flags on 19 of 20
// properties (one repeated as a key) join a list that already names two
// of them, an unknown name and a repeat: once the names outgrow a scan
// they are matched through a set, and the list comes out the same, each
// property once, in the list's order and then the properties'.
func TestDraft3HoistingPastSixteenNames(t *testing.T) {
	var in, out strings.Builder
	for i := 0; i < 20; i++ {
		flag := `,"required":true`
		if i == 7 {
			flag = ""
		}
		fmt.Fprintf(&in, `"p%d":{"type":"string"%s},`, i, flag)
		fmt.Fprintf(&out, `"p%d":{"type":"string"},`, i)
	}
	in.WriteString(`"p5":{"type":"string","required":true}`)
	out.WriteString(`"p5":{"type":"string"}`)
	nsExact(t, `{}`,
		fn(`{"type":"object","properties":{`+in.String()+`},"required":["p19","p3","q","p3"]}`),
		fn(`{"type":"object","properties":{`+out.String()+`},"required":["p19","p3","p0","p1","p2","p4","p5","p6","p8","p9","p10","p11","p12","p13","p14","p15","p16","p17","p18"]}`))
}

// TestStrictHoistedRequiredIsWrittenInFull: under openai_strict, a list
// that names every property only once the draft-03 flag is hoisted into it
// is written with the hoisted name, not kept as its bytes (which lack it
// and which strict mode refuses).
func TestStrictHoistedRequiredIsWrittenInFull(t *testing.T) {
	nsExact(t, `{"dialect":"openai_strict"}`,
		fn(`{"type":"object","properties":{"a":{"type":"string","required":true},"b":{"type":"string"}},"required":["b"],"additionalProperties":false}`, strictOn),
		fn(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","b"],"additionalProperties":false}`, strictOn))
	out, _ := nsOK(t, `{"dialect":"openai_strict"}`, transforms.ProtocolResponses,
		fn(`{"type":"object","properties":{"a":{"type":"string","required":true},"b":{"type":"string"}},"required":["b"],"additionalProperties":false}`, strictOn))
	validatorAccepts(t, "openai_strict", out)
}

// TestRepeatedRequiredWritesTheFirstList: a required key repeated is
// filtered once, by the first list: every repeat that is not kept as it
// is writes that list again.
func TestRepeatedRequiredWritesTheFirstList(t *testing.T) {
	for _, tc := range []struct{ config, in, want, extra string }{
		// Filtered, then the same list at each repeat, whatever it holds.
		{`{}`, `{"type":"object","properties":{"a":{}},"required":["a","zz"],"required":"odd","required":["b"]}`,
			`{"type":"object","properties":{"a":{}},"required":["a"],"required":["a"],"required":["a"]}`, ""},
		// The first list kept as it is; a null repeat gets what it lists.
		{`{}`, `{"type":"object","properties":{"a":{}},"required":["a"],"required":null}`,
			`{"type":"object","properties":{"a":{}},"required":["a"],"required":["a"]}`, ""},
		// Every property in another order keeps its bytes; the null repeat
		// gets every property.
		{`{"dialect":"openai_strict"}`, `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b","a"],"required":null,"additionalProperties":false}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["b","a"],"required":["a","b"],"additionalProperties":false}`, strictOn},
		// Nothing required: no list at all.
		{`{}`, `{"type":"object","properties":{"a":{}},"required":["zz"],"required":["yy"]}`,
			`{"type":"object","properties":{"a":{}}}`, ""},
	} {
		nsExact(t, tc.config, fn(tc.in, tc.extra), fn(tc.want, tc.extra))
	}
}
