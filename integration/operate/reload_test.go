package operate

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmtransform/caddy-llm-transform/caddymodule"
)

// genConfig is config A or B of the reload test, in JSON as operators push
// it through the admin API. A converts apply_patch and tags requests
// gen=A; B converts only exec, so apply_patch passes through, and tags
// gen=B. The handler carries an @id, as PATCH users would give it. A 10 s
// grace period, as production configs should set, lets stopping servers
// finish what they accepted.
func genConfig(gen, up string) string {
	names := `["apply_patch"]`
	if gen == "B" {
		names = `["exec"]`
	}
	return `{
	"admin": {"listen": "` + adminAddr + `"},
	"apps": {
		"llm_transform": {"rules": [{"transform": "field_set", "config": {"path": "gen", "value": "` + gen + `"}}]},
		"http": {"http_port": 9180, "https_port": 9543, "grace_period": 10000000000, "servers": {"gw": {
			"listen": [":9180"],
			"automatic_https": {"disable": true},
			"routes": [{"handle": [
				{"handler": "llm_transform", "@id": "llm_rules", "explain": true,
				 "rules": [{"transform": "field_custom_tools_to_function", "config": {"names": ` + names + `}}]},
				{"handler": "reverse_proxy", "upstreams": [{"dial": "` + up + `"}]}
			]}]
		}}},
		"pki": {"certificate_authorities": {"local": {"install_trust": false}}}
	}
}`
}

// TestReloadUnderLoad runs 20 slow streams while 30 POST /load calls
// alternate configs A and B. Every stream must complete, unbroken, on the
// rules of the config it started on: the gen the upstream saw, the explain
// header and the shape of the tool call must all name the same config.
func TestReloadUnderLoad(t *testing.T) {
	const (
		streams = 20
		reloads = 30
		texts   = 12
	)
	u := &fakeUpstream{textEvents: texts, delay: 40 * time.Millisecond}
	up := startUpstream(t, u)
	newTester(t).InitServer(genConfig("A", up), "json")

	explainA := "applied=provider/field_custom_tools_to_function@request,global/field_set@request; converted=1; restored=0; decisions=convert_definition:apply_patch,set_field:gen"
	explainB := "applied=global/field_set@request; converted=0; restored=0; decisions=set_field:gen"

	var (
		loadsDone atomic.Int64
		overlaps  atomic.Int64
		retries   atomic.Int64
		gens      sync.Map
		wg        sync.WaitGroup
	)
	reloadErr := make(chan error, 1)
	go func() {
		defer close(reloadErr)
		for i := range reloads {
			gen := "B"
			if i%2 == 1 {
				gen = "A"
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+adminAddr+"/load", strings.NewReader(genConfig(gen, up)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := fresh.Do(req)
			if err != nil {
				reloadErr <- err
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				reloadErr <- fmt.Errorf("reload %d: %d %s", i, resp.StatusCode, b)
				return
			}
			loadsDone.Add(1)
			time.Sleep(30 * time.Millisecond)
		}
	}()

	errs := make(chan error, streams)
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			before := loadsDone.Load()
			err := runStream(t, u, i, explainA, explainB, &gens, &retries)
			if loadsDone.Load() > before {
				overlaps.Add(1)
			}
			if err != nil {
				errs <- err
			}
		}()
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := <-reloadErr; err != nil {
		t.Fatal(err)
	}
	t.Logf("%d requests closed unserved by a stopping server and retried", retries.Load())
	if n := loadsDone.Load(); n != reloads {
		t.Fatalf("%d reloads done", n)
	}
	_, sawA := gens.Load("A")
	_, sawB := gens.Load("B")
	// Streams last ~0.5 s and start 50 ms apart while a reload lands every
	// ~40 ms: nearly all of them must have lived through one.
	if !sawA || !sawB || overlaps.Load() < streams/2 {
		t.Fatalf("streams saw A: %v, B: %v; %d of %d lived through a reload", sawA, sawB, overlaps.Load(), streams)
	}
}

// runStream sends one streamed request and checks it against the config
// it was served by.
//
// One failure is not the module's and is retried: Go's http.Server, once
// Shutdown has begun, closes a connection whose request it has just read
// without serving it, and during a reload the old server may still accept
// a connection or two on the shared listener. Such a request never reaches
// a handler, so the retry is allowed only if the upstream never saw it.
func runStream(t *testing.T, u *fakeUpstream, i int, explainA, explainB string, gens *sync.Map, retries *atomic.Int64) error {
	var resp *http.Response
	for attempt := 0; ; attempt++ {
		marker := fmt.Sprintf("stream-%d-attempt-%d", i, attempt)
		req, _ := http.NewRequest(http.MethodPost, gatewayURL+"/v1/responses",
			strings.NewReader(`{"model":"m","stream":true,"input":"`+marker+`","tools":[{"type":"custom","name":"apply_patch"}]}`))
		req.Header.Set("Content-Type", "application/json")
		var err error
		if resp, err = fresh.Do(req); err == nil {
			break
		}
		if u.saw(marker) || attempt == 2 {
			return fmt.Errorf("stream %d: %v", i, err)
		}
		retries.Add(1)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("stream %d cut: %v after %d bytes", i, err, len(raw))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stream %d: status %d: %s", i, resp.StatusCode, raw)
	}
	events := sseEvents(t, string(raw))
	var gen, kinds string
	var texts int
	for _, ev := range events {
		switch ev.Get("type").String() {
		case "response.output_text.delta":
			texts++
			g := strings.TrimSuffix(strings.TrimPrefix(ev.Get("delta").String(), "gen="), ";")
			if gen != "" && g != gen {
				return fmt.Errorf("stream %d: upstream saw gen %q and %q", i, gen, g)
			}
			gen = g
		case "response.output_item.done":
			kinds += ev.Get("item.type").String() + ":" + ev.Get("item.input").String()
		}
	}
	last := events[len(events)-1].Get("type").String()
	if texts != 12 || last != "response.completed" {
		return fmt.Errorf("stream %d incomplete: %d texts, last event %s", i, texts, last)
	}
	gens.Store(gen, true)
	explain := resp.Header.Get(caddymodule.ExplainHeader)
	switch gen {
	case "A":
		if explain != explainA || kinds != "custom_tool_call:"+patch {
			return fmt.Errorf("stream %d on A: explain %q, items %q", i, explain, kinds)
		}
	case "B":
		if explain != explainB || kinds != "function_call:" {
			return fmt.Errorf("stream %d on B: explain %q, items %q", i, explain, kinds)
		}
	default:
		return fmt.Errorf("stream %d: upstream saw gen %q", i, gen)
	}
	return nil
}
