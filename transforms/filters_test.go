package transforms_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	tt "github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// renamer is a test transform whose stage makes a new event of type
// "test.made" for every upstream "test.up" event (as a rule turns a call's
// deltas into its client's shape).
type renamer struct{}

// watcher is a test transform whose stage handles "test.made" events only
// once it saw a "test.start" event, telling the engine then; it counts the
// "test.made" events it got. Every event goes on unchanged.
type watcher struct{}

func init() {
	caddy.RegisterModule(renamer{})
	caddy.RegisterModule(watcher{})
}

func (renamer) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("test_renamer"), New: func() caddy.Module { return new(renamer) }}
}

func (watcher) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: transforms.ModuleID("test_watcher"), New: func() caddy.Module { return new(watcher) }}
}

func (*renamer) WantsResponse(*transforms.Exchange) bool { return true }
func (*renamer) RewriteResponse(_ *transforms.Exchange, b []byte) ([]byte, error) {
	return b, nil
}
func (*renamer) NewStream(*transforms.Exchange) transforms.StreamTransform { return renamerStage{} }

type renamerStage struct{}

func (renamerStage) Event(ev *transforms.Event, emit transforms.Emit) error {
	if ev.Data == nil || !bytes.Contains(ev.Data, []byte(`"type":"test.up"`)) {
		return emit(ev)
	}
	d := bytes.Replace(ev.Data, []byte(`"type":"test.up"`), []byte(`"type":"test.made"`), 1)
	return emit(&transforms.Event{Name: []byte("test.made"), Data: d})
}
func (renamerStage) End(transforms.Emit) error { return nil }

// watched is the watcher stage of the last stream, for the test to read.
var watched *watcherStage

func (*watcher) WantsResponse(*transforms.Exchange) bool { return true }
func (*watcher) RewriteResponse(_ *transforms.Exchange, b []byte) ([]byte, error) {
	return b, nil
}
func (*watcher) NewStream(x *transforms.Exchange) transforms.StreamTransform {
	watched = &watcherStage{x: x}
	return watched
}

type watcherStage struct {
	x       *transforms.Exchange
	started bool
	made    int
}

func (s *watcherStage) Handles(typ []byte) bool {
	switch string(typ) {
	case `"test.start"`:
		return true
	case `"test.made"`:
		return s.started
	}
	return false
}

func (s *watcherStage) Event(ev *transforms.Event, emit transforms.Emit) error {
	switch {
	case bytes.Contains(ev.Data, []byte(`"type":"test.start"`)):
		if !s.started {
			s.started = true
			s.x.FiltersChanged()
		}
	case bytes.Contains(ev.Data, []byte(`"type":"test.made"`)):
		s.made++
	}
	return emit(ev)
}
func (s *watcherStage) End(transforms.Emit) error { return nil }

// TestStageMadeEventsSkipStagesThatLeaveTheirType: an event a stage made
// skips the stages nearer the client whose filter leaves its type alone,
// as an upstream event does, until such a stage says (FiltersChanged) that
// it handles the type now; the client gets every event in order either
// way.
func TestStageMadeEventsSkipStagesThatLeaveTheirType(t *testing.T) {
	var evs []string
	for i := range 3 {
		evs = append(evs, `{"type":"test.up","sequence_number":`+tt.Itoa(i)+`,"n":`+tt.Itoa(i)+`}`)
	}
	evs = append(evs, `{"type":"test.start","sequence_number":3}`)
	for i := 4; i < 9; i++ {
		evs = append(evs, `{"type":"test.up","sequence_number":`+tt.Itoa(i)+`,"n":`+tt.Itoa(i)+`}`)
	}
	up := tt.SSE(evs...)
	want := strings.ReplaceAll(up, "test.up", "test.made")
	for _, n := range tt.ChunkSizes {
		x := tt.ExchangeAfter(t, `[{"transform":"test_watcher"},{"transform":"test_renamer"}]`, `{"model":"m","stream":true,"input":"x"}`)
		if got := tt.Replay(t, x, up, n); got != want {
			t.Fatalf("chunk %d: client stream:\n%s\nwant\n%s", n, got, want)
		}
		if watched.made != 5 {
			t.Fatalf("chunk %d: the watcher saw %d made events, want the 5 after it started", n, watched.made)
		}
	}
}
