package operate

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/llmtransform/caddy-llm-transform/caddymodule"
)

// genConfig is config A or B of the reload test, in JSON as operators push
// it through the admin API. A converts apply_patch and tags requests
// gen=A; B converts only exec, so apply_patch passes through, and tags
// gen=B. The handler carries an @id, as PATCH users would give it. A long
// grace period, as production configs should set, lets stopping servers
// finish what they accepted, however slowly a loaded machine runs.
func genConfig(gen, up string) string {
	names := `["apply_patch"]`
	if gen == "B" {
		names = `["exec"]`
	}
	return `{
	"admin": {"listen": "` + adminAddr + `"},
	"apps": {
		"llm_transform": {"rules": [{"transform": "field_set", "config": {"path": "gen", "value": "` + gen + `"}}]},
		"http": {"http_port": 9180, "https_port": 9543, "grace_period": 60000000000, "servers": {"gw": {
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

// heldUpstream is a function-only Responses upstream whose streams stop
// after their first text event until the test releases them: the test
// decides when a stream lives through a reload, not the clock. Each text
// delta names the "gen" field of the request, which config A or B set.
type heldUpstream struct {
	// arrived receives, from each stream that reached the upstream and sent
	// its first event, the channel whose closing releases it.
	arrived chan chan struct{}
	// stop, once closed, releases every stream, held or still to come, so
	// a failed test does not leave them waiting.
	stop chan struct{}

	mu      sync.Mutex
	markers map[string]bool
}

func (u *heldUpstream) saw(marker string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.markers[marker]
}

func (u *heldUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := gjson.ParseBytes(body)
	u.mu.Lock()
	u.markers[req.Get("input").String()] = true
	u.mu.Unlock()

	args, _ := json.Marshal(map[string]string{"input": patch})
	argsJSON, _ := json.Marshal(string(args))
	item := `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"apply_patch","arguments":` + string(argsJSON) + `,"status":"completed"}`
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	seq := 0
	send := func(typ, data string) {
		fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, data)
		seq++
		_ = rc.Flush()
	}
	text := `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"gen=` + req.Get("gen").String() + `;"`
	send("response.created", `"response":{"id":"r","status":"in_progress","output":[]}`)
	send("response.output_text.delta", text)
	release := make(chan struct{})
	select {
	case u.arrived <- release:
		select {
		case <-release:
		case <-u.stop:
		case <-r.Context().Done():
			return
		}
	case <-u.stop:
	case <-r.Context().Done():
		return
	}
	for range streamTexts - 1 {
		send("response.output_text.delta", text)
	}
	send("response.output_item.added", `"output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"apply_patch","arguments":"","status":"in_progress"}`)
	send("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":1,"delta":`+string(argsJSON))
	send("response.function_call_arguments.done", `"item_id":"fc_1","output_index":1,"arguments":`+string(argsJSON))
	send("response.output_item.done", `"output_index":1,"item":`+item)
	send("response.completed", `"response":{"id":"r","status":"completed","output":[`+item+`]}`)
}

// patch is the held upstream's apply_patch input, already clean.
const patch = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"

// streamTexts is the number of text deltas in each held stream.
const streamTexts = 12

// TestReloadUnderLoad holds streams open at the upstream while POST /load
// calls alternate configs A and B, and only then lets them finish. Every
// stream must complete, unbroken, on the rules of the config it started
// on: the gen the upstream saw, the explain header and the shape of the
// tool call must all name that config.
//
// Each round starts streamsPerRound streams, waits until all of them are
// held at the upstream, lands reloadsPerRound reloads (an odd number, so
// the next round starts on the other config), then releases them. Nothing
// waits on the clock except the deadline that turns a hang into a failure.
func TestReloadUnderLoad(t *testing.T) {
	const (
		rounds          = 10
		streamsPerRound = 2
		reloadsPerRound = 3
		deadline        = 60 * time.Second
	)
	u := &heldUpstream{arrived: make(chan chan struct{}), stop: make(chan struct{}), markers: map[string]bool{}}
	up := startUpstream(t, u)
	newTester(t).InitServer(genConfig("A", up), "json")

	explain := map[string]string{
		"A": "applied=provider/field_custom_tools_to_function@request,global/field_set@request; converted=1; restored=0; decisions=convert_definition:apply_patch,set_field:gen",
		"B": "applied=global/field_set@request; converted=0; restored=0; decisions=set_field:gen",
	}
	other := map[string]string{"A": "B", "B": "A"}

	var (
		retries atomic.Int64
		wg      sync.WaitGroup
	)
	errs := make(chan error, rounds*streamsPerRound+1)
	timeout := time.After(deadline)
	gen := "A"
rounds:
	for round := range rounds {
		for k := range streamsPerRound {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := runStream(u, round*streamsPerRound+k, gen, explain[gen], &retries); err != nil {
					errs <- err
				}
			}()
		}
		var held []chan struct{}
		for range streamsPerRound {
			select {
			case release := <-u.arrived:
				held = append(held, release)
			case err := <-errs:
				errs <- err
				break rounds
			case <-timeout:
				errs <- fmt.Errorf("round %d: only %d of %d streams reached the upstream within %v", round, len(held), streamsPerRound, deadline)
				break rounds
			}
		}
		for range reloadsPerRound {
			gen = other[gen]
			if err := reload(genConfig(gen, up)); err != nil {
				errs <- fmt.Errorf("round %d: %v", round, err)
				break rounds
			}
		}
		for _, release := range held {
			close(release)
		}
	}
	// After a failure, streams may still be held or on their way.
	close(u.stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d requests closed unserved by a stopping server and retried", retries.Load())
}

// reload replaces the config through POST /load; it returns once the new
// config is running.
func reload(cfg string) error {
	code, body, err := adminSend(http.MethodPost, "/load", "application/json", cfg)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("%d %s", code, body)
	}
	if err != nil {
		return fmt.Errorf("POST /load: %v", err)
	}
	return nil
}

// runStream sends one streamed request and checks it against config gen,
// which was running when it was sent and must serve it to the end. It runs
// in its own goroutine, so it reports failures instead of stopping the test.
//
// One failure is not the module's and is retried: Go's http.Server, once
// Shutdown has begun, closes a connection whose request it has just read
// without serving it, and a server stopping after an earlier reload may
// still accept a connection or two on the shared listener. Such a request
// never reaches a handler, so the retry is allowed only if the upstream
// never saw it.
func runStream(u *heldUpstream, i int, gen, explain string, retries *atomic.Int64) error {
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
	events, err := parseSSE(string(raw))
	if err != nil {
		return fmt.Errorf("stream %d: %v", i, err)
	}
	if len(events) == 0 {
		return fmt.Errorf("stream %d: no events", i)
	}
	var kinds string
	var texts int
	for _, ev := range events {
		switch ev.Get("type").String() {
		case "response.output_text.delta":
			texts++
			if d := ev.Get("delta").String(); d != "gen="+gen+";" {
				return fmt.Errorf("stream %d started on %s, upstream saw %q", i, gen, d)
			}
		case "response.output_item.done":
			kinds += ev.Get("item.type").String() + ":" + ev.Get("item.input").String()
		}
	}
	if last := events[len(events)-1].Get("type").String(); texts != streamTexts || last != "response.completed" {
		return fmt.Errorf("stream %d incomplete: %d texts, last event %s", i, texts, last)
	}
	wantKinds := map[string]string{"A": "custom_tool_call:" + patch, "B": "function_call:"}[gen]
	if got := resp.Header.Get(caddymodule.ExplainHeader); got != explain || kinds != wantKinds {
		return fmt.Errorf("stream %d on %s: explain %q, items %q", i, gen, got, kinds)
	}
	return nil
}
