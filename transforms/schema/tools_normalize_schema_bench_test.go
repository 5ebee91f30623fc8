package schema

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// scalingCases are request shapes whose cost a client multiplies, each
// built at n: one object of n keywords, properties or references.
var scalingCases = []struct {
	name string
	body func(n int) string
}{
	// draft03: n properties each marked "required": true (draft-03),
	// hoisted to the parent's list.
	{"draft03", func(n int) string {
		var props strings.Builder
		for i := range n {
			fmt.Fprintf(&props, `,"p%d":{"type":"string","required":true}`, i)
		}
		return fn(`{"type":"object","properties":{`+props.String()[1:]+`}}`, strictOn)
	}},
	// required: a closed object whose required names every property, in
	// the reverse order.
	{"required", func(n int) string {
		var props, req strings.Builder
		for i := range n {
			fmt.Fprintf(&props, `,"p%d":{"type":"string"}`, i)
			fmt.Fprintf(&req, `,"p%d"`, n-1-i)
		}
		return fn(`{"type":"object","properties":{`+props.String()[1:]+`},"required":[`+req.String()[1:]+`],"additionalProperties":false}`, strictOn)
	}},
	// ref: a $ref with n keywords beside it into a target of n keywords,
	// half of them the siblings' (a property reference, which
	// openai_strict inlines too).
	{"ref", func(n int) string {
		var sib, tgt strings.Builder
		for i := range n {
			fmt.Fprintf(&sib, `,"x-%d":1`, i)
			fmt.Fprintf(&tgt, `,"x-%d":2`, i+n/2)
		}
		return fn(`{"type":"object","properties":{"t":{"type":"string"`+tgt.String()+`},"r":{"$ref":"#/properties/t"`+sib.String()+`}}}`, strictOn)
	}},
	// arrayrefs: n references, each into another element of an array of
	// n schemas.
	{"arrayrefs", func(n int) string {
		var props, defs strings.Builder
		for i := range n {
			fmt.Fprintf(&props, `,"p%d":{"$ref":"#/$defs/l/%d"}`, i, i)
			defs.WriteString(`,{"type":"string"}`)
		}
		return fn(`{"type":"object","properties":{`+props.String()[1:]+`},"$defs":{"l":[`+defs.String()[1:]+`]}}`, strictOn)
	}},
	// dropped: n references to one target whose bulk (its own $defs of n
	// entries) inlining drops: work that writes nothing.
	{"dropped", func(n int) string {
		var props, defs strings.Builder
		for i := range n {
			fmt.Fprintf(&props, `,"p%d":{"$ref":"#/$defs/t"}`, i)
			fmt.Fprintf(&defs, `,"u%d":{}`, i)
		}
		return fn(`{"type":"object","properties":{`+props.String()[1:]+`},"$defs":{"t":{"type":"string","$defs":{`+defs.String()[1:]+`}}}}`, strictOn)
	}},
	// typelist: a type list of n types, string last, beside n pattern
	// keywords (repeated keys): the union's branches each pick their
	// keywords.
	{"typelist", func(n int) string {
		var types, pats strings.Builder
		for range n {
			types.WriteString(`"boolean",`)
			pats.WriteString(`,"pattern":"a"`)
		}
		return fn(`{"type":"object","properties":{"p":{"type":[`+types.String()+`"string"]`+pats.String()+`}}}`, strictOn)
	}},
	// dupkeys: one property repeating type, enum and required n times
	// beside a first required of n names.
	{"dupkeys", func(n int) string {
		var req, dups strings.Builder
		for i := range n {
			fmt.Fprintf(&req, `,"q%d"`, i)
			dups.WriteString(`,"type":"object","enum":[{},null],"required":["q"]`)
		}
		return fn(`{"type":"object","properties":{"p":{"properties":{"a":{}},"required":[`+req.String()[1:]+`]`+dups.String()+`}}}`, strictOn)
	}},
}

// BenchmarkNormalizeSchemaScaling runs every scaling case through every
// dialect, strict, at n and 2n, and reports the ratio of the best of seven
// runs of each as x_<case>_<dialect>: about 2 is linear, 4 quadratic, and
// a doubling may cost at most about 2.5. A case may be refused
// (schema_too_large) as long as the refusal scales too.
func BenchmarkNormalizeSchemaScaling(b *testing.B) {
	const n = 20000
	dialects := []string{"permissive", "openai_strict", "anthropic", "gemini", "kimi"}
	chains := make([]*transforms.Chain, len(dialects))
	for i, d := range dialects {
		chains[i] = transformtest.Chain(b, `[{"transform":"tools_normalize_schema","config":{"dialect":"`+d+`"}}]`)
	}
	once := func(c *transforms.Chain, body []byte) time.Duration {
		runtime.GC() // each run starts from the same heap
		t0 := time.Now()
		x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
		c.Begin(x, "m")
		_, err := x.RewriteRequest(body)
		var te *transforms.Error
		if err != nil && !(errors.As(err, &te) && te.Code == "schema_too_large") {
			b.Fatalf("rewrite: %v", err)
		}
		return time.Since(t0)
	}
	// ratio takes the best of seven runs at each size, the two sizes in
	// turn so that both meet the same load.
	ratio := func(c *transforms.Chain, small, large []byte) float64 {
		bs, bl := time.Duration(1<<62), time.Duration(1<<62)
		for range 7 {
			bs = min(bs, once(c, small))
			bl = min(bl, once(c, large))
		}
		return float64(bl) / float64(bs)
	}
	small, large := make([][]byte, len(scalingCases)), make([][]byte, len(scalingCases))
	for i, sc := range scalingCases {
		small[i], large[i] = []byte(sc.body(n)), []byte(sc.body(2*n))
	}
	ratios := map[string]float64{}
	for b.Loop() {
		for di, d := range dialects {
			for i, sc := range scalingCases {
				ratios["x_"+sc.name+"_"+d] = ratio(chains[di], small[i], large[i])
			}
		}
	}
	for k, r := range ratios {
		b.ReportMetric(r, k)
	}
}
