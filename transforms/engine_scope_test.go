package transforms

import (
	"bytes"
	"testing"

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
	return caddy.ModuleInfo{ID: ModuleID("test_provider_only"), New: func() caddy.Module { return new(providerOnly) }}
}
func (providerOnly) RewriteRequest(_ *Exchange, b []byte) ([]byte, error) { return b, nil }
func (providerOnly) Scopes() Scope                                        { return ScopeProvider }

type dropTransform struct{}

func (dropTransform) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: ModuleID("test_stream_dropper"), New: func() caddy.Module { return new(dropTransform) }}
}
func (dropTransform) RewriteResponse(_ *Exchange, b []byte) ([]byte, error) { return b, nil }
func (dropTransform) NewStream(*Exchange) StreamTransform                   { return dropStage{} }
func (dropTransform) WantsResponse(*Exchange) bool                          { return true }

type dropStage struct{}

func (dropStage) Event(ev *Event, emit Emit) error {
	switch {
	case bytes.Equal(ev.Data, []byte("drop")):
		return nil
	case bytes.Equal(ev.Data, []byte("abort")):
		return &StreamAbort{Code: "test_abort", Message: "aborted by test"}
	}
	return emit(ev)
}

func (dropStage) End(Emit) error { return nil }

func TestUnsupportedScopeFailsAtLoad(t *testing.T) {
	cfgs := []RuleConfig{{Transform: "test_provider_only"}}
	if _, err := Compile(testContext(t), cfgs, ScopeProvider, ""); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		scope  Scope
		prefix string
		want   string
	}{
		{ScopeGlobal, "global", "global rule 0 (test_provider_only): transform does not support the global scope"},
		{ScopeAPIKey, "api_key 1f2e3d4c5b6a", "api_key 1f2e3d4c5b6a rule 0 (test_provider_only): transform does not support the api_key scope"},
	} {
		if _, err := Compile(testContext(t), cfgs, tc.scope, tc.prefix); err == nil || err.Error() != tc.want {
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
			c := chainOf(t, `[{"transform":"test_stream_dropper"}]`)
			x := begin(t, c, ProtocolChat, []byte(`{"model":"m"}`))
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
			if tc.applied && (x.Applications()[0].Phase != PhaseResponse || c.Rules()[0].Hits() != 1) {
				t.Fatalf("application = %+v, hits = %d", x.Applications()[0], c.Rules()[0].Hits())
			}
			if x.StreamError() != tc.streamErr {
				t.Fatalf("stream error = %q", x.StreamError())
			}
		})
	}
}

func TestDecisionsKeptOnlyWhenExplaining(t *testing.T) {
	x := NewExchange(ProtocolResponses, Limits{}, nil)
	x.Decide("a", "b", "c")
	if len(x.Decisions()) != 0 {
		t.Fatal("decisions kept without Explain")
	}
	x.Explain = true
	for range maxDecisions + 10 {
		x.Decide("a", "b", "c")
	}
	if len(x.Decisions()) != maxDecisions {
		t.Fatalf("kept %d decisions", len(x.Decisions()))
	}
}
