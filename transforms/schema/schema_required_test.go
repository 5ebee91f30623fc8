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
