package schema

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// Size limits (schema.go): the output budget, allocation while inlining,
// and limits per function. The budget bounds what inlining adds, so large
// schemas that need no change pass untouched.

// TestBudgetChargesNestedBytesOnce: a 100 KB schema without references, its
// bulk ten objects deep, needs no change and comes back as the same slice:
// the budget counts what inlining adds, once, not each byte once per level
// of nesting.
func TestBudgetChargesNestedBytesOnce(t *testing.T) {
	var enum strings.Builder
	for i := 0; i < 8000; i++ {
		if i > 0 {
			enum.WriteByte(',')
		}
		enum.WriteString(`"value-` + strconv.Itoa(i) + `"`)
	}
	s := `{"type":"string","enum":[` + enum.String() + `]}`
	for i := 0; i < 10; i++ {
		s = `{"type":"object","properties":{"n":` + s + `}}`
	}
	normalizeSame(t, `{}`, transforms.ProtocolResponses, fn(s))
}

// TestInlineBlowUpThroughNullableWrapIsRefused: under anthropic strict,
// where an untyped optional property is wrapped in anyOf with null, a chain
// of untyped definitions each naming the previous twice is refused with
// schema_too_large after about the budget's worth of output, under 32 MB
// allocated, instead of being expanded 2^k times.
func TestInlineBlowUpThroughNullableWrapIsRefused(t *testing.T) {
	const k = 16
	var defs strings.Builder
	defs.WriteString(`"d0":{"description":"leaf"}`)
	for i := 1; i <= k; i++ {
		p := "#/$defs/d" + strconv.Itoa(i-1)
		defs.WriteString(`,"d` + strconv.Itoa(i) + `":{"properties":{"a":{"$ref":"` + p + `"},"b":{"$ref":"` + p + `"}}}`)
	}
	params := `{"type":"object","properties":{"x":{"$ref":"#/$defs/d` + strconv.Itoa(k) + `"}},"required":["x"],"$defs":{` + defs.String() + `}}`
	c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"anthropic"}}]`)
	b := []byte(fn(params, strictOn))
	x := transformtest.Begin(t, c, transforms.ProtocolResponses, b)
	var m1, m2 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m1)
	out, err := x.RewriteRequest(b)
	runtime.ReadMemStats(&m2)
	alloc := m2.TotalAlloc - m1.TotalAlloc
	var te *transforms.Error
	if !errors.As(err, &te) || te.Code != "schema_too_large" {
		t.Errorf("want schema_too_large, got %v (%d bytes out)", err, len(out))
	}
	if alloc > 32<<20 {
		t.Errorf("a %d-byte request allocated %d MB before it was refused: the budget is not charged on the nullable path", len(b), alloc>>20)
	}
}

// TestNullableWrapAllocationIsBounded: wrapping untyped optional properties
// in anyOf with null, 170 levels above a reference into a doubling $defs
// chain, allocates under 32 MB under openai_strict with inline_refs,
// whether the request passes or is refused.
func TestNullableWrapAllocationIsBounded(t *testing.T) {
	for _, fan := range []int{12, 14} {
		var b strings.Builder
		const levels = 170
		for i := 0; i < levels; i++ {
			b.WriteString(`{"properties":{"p":`)
		}
		b.WriteString(`{"$ref":"#/$defs/e0"}`)
		for i := 0; i < levels; i++ {
			b.WriteString(`}}`)
		}
		var defs []string
		for k := 0; k < fan; k++ {
			defs = append(defs, fmt.Sprintf(`"e%d":{"properties":{"a":{"$ref":"#/$defs/e%d"},"b":{"$ref":"#/$defs/e%d"}}}`, k, k+1, k+1))
		}
		defs = append(defs, fmt.Sprintf(`"e%d":{"description":"xxxxxxxxxxxxxxxxxxxx"}`, fan))
		params := `{"type":"object","properties":{"q":` + b.String() + `},"$defs":{` + strings.Join(defs, ",") + `}}`
		body := fn(params, strictOn)
		c := transformtest.Chain(t, `[{"transform":"tools_normalize_schema","config":{"dialect":"openai_strict","inline_refs":true}}]`)
		x := transformtest.Begin(t, c, transforms.ProtocolResponses, []byte(body))
		var m1, m2 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m1)
		out, err := x.RewriteRequest([]byte(body))
		runtime.ReadMemStats(&m2)
		if alloc := m2.TotalAlloc - m1.TotalAlloc; alloc > 32<<20 {
			t.Errorf("fan %d: a %d-byte request allocated %d MB (%d bytes out, err %v)", fan, len(body), alloc>>20, len(out), err)
		}
	}
}

// doublingRefs is a parameters schema whose reference chain doubles k times
// under a dialect that inlines, with a leaf of pad bytes.
func doublingRefs(k, pad int) string {
	var defs []string
	for i := 0; i < k; i++ {
		defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object","properties":{"a":{"$ref":"#/$defs/d%d"},"b":{"$ref":"#/$defs/d%d"}}}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":"string","description":"%s"}`, k, strings.Repeat("x", pad)))
	return `{"type":"object","properties":{"r":{"$ref":"#/$defs/d0"}},"$defs":{` + strings.Join(defs, ",") + `}}`
}

// TestSizeLimitCountsPerFunction: the output limit of each function counts
// from where its own output starts: two functions that each write ~700 KB
// pass together, and an unchanged first function then a second that blows
// up is refused naming the second.
func TestSizeLimitCountsPerFunction(t *testing.T) {
	two := func(a, b string) string {
		return `{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":` + a + `},{"type":"function","name":"g","parameters":` + b + `}]}`
	}
	big := doublingRefs(12, 100) // 4096 leaves of ~140 bytes: ~700 KB inlined
	out, _, err := normalizeRecovered(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, two(big, big))
	if err != nil {
		t.Fatalf("two functions under their own limit: %v", err)
	}
	if len(out) < 1<<20 {
		t.Fatalf("the output (%d bytes) is not the sum of two large schemas: the test checks nothing", len(out))
	}
	_, _, err = normalizeRecovered(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, two(`{"type":"object","properties":{"a":{"type":"string"}}}`, doublingRefs(20, 10)))
	var e *transforms.Error
	if !errors.As(err, &e) || e.Code != "schema_too_large" || e.Param != "tools[1].parameters" {
		t.Fatalf("want schema_too_large at tools[1].parameters, got %v", err)
	}
}

// A schema nested past what the gateway's scanner reads at all (10,000
// levels, where encoding/json stops) is still schema_too_deep, the
// documented refusal, not forwarded unnormalised; an unreadable body
// elsewhere is the engine's invalid_json.
func TestSchemaPastTheScannersLimitIsTooDeep(t *testing.T) {
	deep := strings.Repeat(`{"items":`, 10000) + `{}` + strings.Repeat(`}`, 10000)
	e := nsErr(t, `{}`, transforms.ProtocolResponses, fn(deep), "schema_too_deep")
	if want := "a tool's schema nests deeper than 200 levels"; e.Message != want || e.Param != "tools" {
		t.Errorf("got %q at %q, want %q at tools", e.Message, e.Param, want)
	}
	nsErr(t, `{}`, transforms.ProtocolResponses, `{"model":"m","metadata":`+deep+`,"tools":[]}`, "invalid_json")
}

// TestInliningChargesWhatItReads: every inlined target counts its size
// against the budget even where the dialect drops most of it: references
// to a target whose bulk is its own $defs pass while they read four
// times the schema, and are refused with schema_too_large at sixteen
// (past the budget of eight), although what they write stays small.
func TestInliningChargesWhatItReads(t *testing.T) {
	params := func(k int) string {
		var props []string
		for i := 0; i < k; i++ {
			props = append(props, fmt.Sprintf(`"p%d":{"$ref":"#/$defs/t"}`, i))
		}
		return `{"type":"object","properties":{` + strings.Join(props, ",") + `},` +
			`"$defs":{"t":{"type":"string","$defs":{"pad":{"description":"` + strings.Repeat("x", 300000) + `"}}}}}`
	}
	nsExact(t, `{"dialect":"gemini"}`, fn(params(4)),
		fn(`{"type":"object","properties":{"p0":{"type":"string"},"p1":{"type":"string"},"p2":{"type":"string"},"p3":{"type":"string"}}}`))
	nsErr(t, `{"dialect":"gemini"}`, transforms.ProtocolResponses, fn(params(16)), "schema_too_large")
}
