package transforms_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	tt "github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// asker is a test transform that takes rounds: its response phase asks
// for one more round while the answer says its word ("again" by default),
// with a request that counts the rounds, and lets every answer through.
type asker struct {
	Word string `json:"word,omitempty"`
}

func init() { caddy.RegisterModule(asker{}) }

func (asker) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("test_asker"), New: func() caddy.Module { return new(asker) }}
}

// askerKey keys an asker's record by its word.
type askerKey string

func (a *asker) record(x *transforms.Exchange) *askerRecord {
	return x.Record(askerKey(a.Word), func() any { return &askerRecord{} }).(*askerRecord)
}

type askerRecord struct {
	body  []byte
	err   error
	asked map[string]bool // the answers it asked again for
}

func (a *asker) RewriteRequest(x *transforms.Exchange, b []byte) ([]byte, error) {
	rec := a.record(x)
	rec.body = b
	return b, nil
}

func (*asker) TakesRounds(*transforms.Exchange) bool   { return true }
func (*asker) WantsResponse(*transforms.Exchange) bool { return true }

func (a *asker) RewriteResponse(x *transforms.Exchange, b []byte) ([]byte, error) {
	rec := a.record(x)
	word := a.Word
	if word == "" {
		word = "again"
	}
	if strings.Contains(string(b), word) && !rec.asked[string(b)] {
		if rec.asked == nil {
			rec.asked = map[string]bool{}
		}
		rec.asked[string(b)] = true
		n := len(x.Rounds()) + 1
		_, rec.err = x.StartRound([]byte(strings.Replace(string(rec.body), `"round":0`, `"round":`+string(rune('0'+n)), 1)), "test")
	}
	return b, nil
}

func (*asker) NewStream(*transforms.Exchange) transforms.StreamTransform { return nil }

// TestRoundsRunTheRulesNearerTheUpstreamOnly: a round's request goes
// through the request phases of the rules after the one that asked (the
// field_set after it sets its field again), never through those before.
func TestRoundsRunTheRulesNearerTheUpstreamOnly(t *testing.T) {
	chain := tt.Chain(t, `[{"transform":"field_set","config":{"path":"before","value":"x"}},{"transform":"test_asker"},{"transform":"field_set","config":{"path":"after","value":"y"}}]`)
	req := `{"model":"m","round":0,"input":"hi"}`
	x := tt.Begin(t, chain, transforms.ProtocolResponses, []byte(req))
	answers := []string{`{"id":"r1","output":[{"type":"message","id":"m1","text":"again"}],"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":1}}}`,
		`{"id":"r2","output":[{"type":"message","id":"m2"}],"usage":{"input_tokens":2,"input_tokens_details":{"cached_tokens":0}}}`}
	var got []string
	out, sent, err := tt.RunJSON(t, x, []byte(req), func(b []byte) (int, string) {
		got = append(got, string(b))
		return 200, answers[len(got)-1]
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 {
		t.Fatalf("sent %d", len(sent))
	}
	tt.JSONEqual(t, sent[0], `{"model":"m","round":0,"input":"hi","before":"x","after":"y"}`)
	// The asker was handed the body after the first field_set: the round
	// carries "before" from there, and the second field_set ran again.
	tt.JSONEqual(t, sent[1], `{"model":"m","round":1,"input":"hi","before":"x","after":"y"}`)
	// One answer: the first id, both rounds' output, usage summed.
	tt.JSONEqual(t, out, `{"id":"r1","output":[{"type":"message","id":"m1","text":"again"},{"type":"message","id":"m2"}],"usage":{"input_tokens":3,"input_tokens_details":{"cached_tokens":1}}}`)
	if rs := x.Rounds(); len(rs) != 1 || rs[0].Reason != "test" || rs[0].N != 1 || rs[0].Err != nil {
		t.Fatalf("rounds %+v", rs)
	}
}

// TestRoundCaps: max_rounds bounds the rounds of a request, -1 allows
// none; the refusal is ErrNoRoundLeft.
func TestRoundCaps(t *testing.T) {
	for _, c := range []struct{ max, want int }{{0, 3}, {1, 1}, {2, 2}, {-1, 0}} {
		chain := tt.Chain(t, `[{"transform":"test_asker"}]`)
		req := `{"model":"m","round":0,"input":"hi"}`
		x := tt.Begin(t, chain, transforms.ProtocolResponses, []byte(req))
		x.Limits.MaxRounds = c.max
		k := 0
		_, sent, err := tt.RunJSON(t, x, []byte(req), func([]byte) (int, string) {
			k++
			return 200, `{"output":"again ` + strconv.Itoa(k) + `"}`
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(sent) != 1+c.want {
			t.Errorf("max_rounds %d: %d upstream requests, want %d", c.max, len(sent), 1+c.want)
		}
		rec := (&asker{}).record(x)
		if !errors.Is(rec.err, transforms.ErrNoRoundLeft) {
			t.Errorf("max_rounds %d: last ask %v, want ErrNoRoundLeft", c.max, rec.err)
		}
	}
}

// TestStartRoundOutsideAResponsePhase is refused.
func TestStartRoundOutsideAResponsePhase(t *testing.T) {
	x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
	if _, err := x.StartRound([]byte(`{}`), "x"); err == nil {
		t.Fatal("no error")
	}
}

// TestTwoRuleJSONRoundsJoinOnce: two rules that take rounds on one JSON
// answer, the one nearer the upstream first: each round's output reaches
// the client once, the usage of every round summed.
func TestTwoRuleJSONRoundsJoinOnce(t *testing.T) {
	chain := tt.Chain(t, `[{"transform":"test_asker","config":{"word":"wordA"}},{"transform":"test_asker","config":{"word":"wordB"}}]`)
	req := `{"model":"m","round":0,"input":"hi"}`
	x := tt.Begin(t, chain, transforms.ProtocolResponses, []byte(req))
	answers := []string{
		`{"id":"r1","output":[{"type":"message","id":"m1","text":"wordB"}],"usage":{"input_tokens":1}}`,
		`{"id":"r2","output":[{"type":"message","id":"m2","text":"wordA"}],"usage":{"input_tokens":2}}`,
		`{"id":"r3","output":[{"type":"message","id":"m3"}],"usage":{"input_tokens":4}}`,
	}
	n := 0
	out, sent, err := tt.RunJSON(t, x, []byte(req), func([]byte) (int, string) { n++; return 200, answers[n-1] })
	if err != nil || len(sent) != 3 {
		t.Fatalf("%v, %d requests", err, len(sent))
	}
	tt.JSONEqual(t, out, `{"id":"r1","output":[{"type":"message","id":"m1","text":"wordB"},{"type":"message","id":"m2","text":"wordA"},{"type":"message","id":"m3"}],"usage":{"input_tokens":7}}`)
}
