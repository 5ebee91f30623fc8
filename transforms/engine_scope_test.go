package transforms_test

import (
	"bytes"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"

	"github.com/caddyserver/caddy/v2"
)

// Test-only transforms: one limited to the provider scope, and one whose
// stream stage passes events, drops "drop" events, and aborts on "abort".
func init() {
	caddy.RegisterModule(providerOnly{})
	caddy.RegisterModule(dropTransform{})
}

type providerOnly struct{}

func (providerOnly) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("test_provider_only"), New: func() caddy.Module { return new(providerOnly) }}
}
func (providerOnly) RewriteRequest(_ *transforms.Exchange, b []byte) ([]byte, error) { return b, nil }
func (providerOnly) Scopes() transforms.Scope                                        { return transforms.ScopeProvider }

type dropTransform struct{}

func (dropTransform) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("test_stream_dropper"), New: func() caddy.Module { return new(dropTransform) }}
}
func (dropTransform) RewriteResponse(_ *transforms.Exchange, b []byte) ([]byte, error) { return b, nil }
func (dropTransform) NewStream(*transforms.Exchange) transforms.StreamTransform        { return dropStage{} }
func (dropTransform) WantsResponse(*transforms.Exchange) bool                          { return true }

type dropStage struct{}

func (dropStage) Event(ev *transforms.Event, emit transforms.Emit) error {
	switch {
	case bytes.Equal(ev.Data, []byte("drop")):
		return nil
	case bytes.Equal(ev.Data, []byte("abort")):
		return &transforms.StreamAbort{Code: "test_abort", Message: "aborted by test"}
	}
	return emit(ev)
}

func (dropStage) End(transforms.Emit) error { return nil }

func TestUnsupportedScopeFailsAtLoad(t *testing.T) {
	cfgs := []transforms.RuleConfig{{Transform: "test_provider_only"}}
	if _, err := transforms.Compile(transformtest.Context(t), cfgs, transforms.ScopeProvider, ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		scope  transforms.Scope
		prefix string
		want   string
	}{
		{transforms.ScopeGlobal, "global", "global rule 0 (test_provider_only): transform does not support the global scope"},
		{transforms.ScopeAPIKey, "api_key 1f2e3d4c5b6a", "api_key 1f2e3d4c5b6a rule 0 (test_provider_only): transform does not support the api_key scope"},
	} {
		if _, err := transforms.Compile(transformtest.Context(t), cfgs, tc.scope, tc.prefix); err == nil || err.Error() != tc.want {
			t.Errorf("err = %v, want %q", err, tc.want)
		}
	}
}

// TestStreamApplicationsAreTracked checks the engine's view of stream
// stages: a stage that only passes events has not applied, one that drops
// an event has (once), and an abort is reported by its code. The whole
// output is held: an abort ends a Chat stream with a Chat error event and
// nothing after it reaches the client.
func TestStreamApplicationsAreTracked(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		applied    bool
		streamErr  string
		want       string
	}{
		{"pass", "data: a\n\ndata: b\n\n", false, "", "data: a\n\ndata: b\n\n"},
		{"drop", "data: a\n\ndata: drop\n\ndata: drop\n\ndata: b\n\n", true, "", "data: a\n\ndata: b\n\n"},
		{"abort", "data: a\n\ndata: abort\n\ndata: b\n\n", false, "test_abort",
			"data: a\n\n" + `data: {"error":{"message":"aborted by test","type":"server_error","param":null,"code":"test_abort"}}` + "\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := transformtest.Chain(t, `[{"transform":"test_stream_dropper"}]`)
			x := transformtest.Begin(t, c, transforms.ProtocolChat, []byte(`{"model":"m"}`))
			s := x.NewStream()
			_ = s.Write([]byte(tc.body))
			_ = s.Close()
			out := string(s.Output())
			if out != tc.want {
				t.Fatalf("output = %q, want %q", out, tc.want)
			}
			if got := len(x.Applications()) == 1; got != tc.applied {
				t.Fatalf("applications = %+v", x.Applications())
			}
			if tc.applied && (x.Applications()[0].Phase != transforms.PhaseResponse || c.Rules()[0].Hits() != 1) {
				t.Fatalf("application = %+v, hits = %d", x.Applications()[0], c.Rules()[0].Hits())
			}
			if x.StreamError() != tc.streamErr {
				t.Fatalf("stream error = %q", x.StreamError())
			}
		})
	}
}

func TestDecisionsKeptOnlyWhenExplaining(t *testing.T) {
	x := transforms.NewExchange(transforms.ProtocolResponses, transforms.Limits{}, nil)
	x.Decide("a", "b", "c")
	if len(x.Decisions()) != 0 {
		t.Fatal("decisions kept without Explain")
	}
	x.Explain = true
	for range transforms.MaxDecisions + 10 {
		x.Decide("a", "b", "c")
	}
	if len(x.Decisions()) != transforms.MaxDecisions {
		t.Fatalf("kept %d decisions", len(x.Decisions()))
	}
}
