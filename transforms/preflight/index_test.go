package preflight

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/llmtransform/caddy-llm-transform/transforms"
)

// TestToolIndexKeptAcrossRequests: two requests that declare the same
// tools share one index, built from the cache's own copy (the first
// request's buffer may be reused at once); other tools, or the same bytes
// in another protocol, get their own.
func TestToolIndexKeptAcrossRequests(t *testing.T) {
	req := []byte(`{"model":"m","input":"x","tools":[{"type":"function","name":"idx_test_read","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]}`)
	a := readTools(req, transforms.ProtocolResponses)
	for i := range req {
		req[i] = ' ' // the request's buffer, reused
	}
	req2 := []byte(`{"input":"y","model":"m","tools":[{"type":"function","name":"idx_test_read","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]}`)
	b := readTools(req2, transforms.ProtocolResponses)
	if a != b {
		t.Fatal("the same tools were indexed twice")
	}
	if probs, ok, err := a.schemas.check("idx_test_read", []byte(`{"path":"a"}`)); !ok || err != nil || probs != nil {
		t.Fatalf("valid call: %v %v %v", probs, ok, err)
	}
	if probs, ok, _ := a.schemas.check("idx_test_read", []byte(`{}`)); !ok || len(probs) != 1 || probs[0].SchemaPath != "/required" {
		t.Fatalf("a call without path: %+v", probs)
	}
	if c := readTools(req2, transforms.ProtocolChat); c == a {
		t.Fatal("a Chat request shares a Responses request's index")
	}
	other := []byte(`{"tools":[{"type":"function","name":"idx_test_write","parameters":{"type":"object"}}]}`)
	if c := readTools(other, transforms.ProtocolResponses); c == a || c.kinds["idx_test_write"] != kindFunction {
		t.Fatal("other tools did not get their own index")
	}
	if none := readTools([]byte(`{"input":"z"}`), transforms.ProtocolResponses); len(none.kinds) != 0 {
		t.Fatalf("a request without tools has an index of %d", len(none.kinds))
	}
}

// TestToolIndexSharedConcurrently: requests checking calls against one
// cached index at once (run under -race in CI).
func TestToolIndexSharedConcurrently(t *testing.T) {
	req := []byte(`{"tools":[{"type":"function","name":"idx_test_conc","parameters":{"type":"object","properties":{"n":{"type":"integer","minimum":1}},"required":["n"]}}]}`)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ix := readTools(req, transforms.ProtocolResponses)
			for range 50 {
				if probs, ok, err := ix.schemas.check("idx_test_conc", []byte(`{"n":2}`)); !ok || err != nil || probs != nil {
					t.Errorf("goroutine %d: valid call: %v %v %v", i, probs, ok, err)
					return
				}
				if probs, ok, _ := ix.schemas.check("idx_test_conc", []byte(`{"n":0}`)); !ok || len(probs) != 1 {
					t.Errorf("goroutine %d: n 0: %+v", i, probs)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestToolIndexCacheStaysInItsBudget: past the budget about half the
// cache goes, and the array just read is kept.
func TestToolIndexCacheStaysInItsBudget(t *testing.T) {
	budget := maxIndexBytes
	maxIndexBytes = 4 << 10
	defer func() { maxIndexBytes = budget }()
	var last *toolIndex
	var lastTools []byte
	for i := range 40 {
		req := []byte(`{"tools":[{"type":"function","name":"idx_budget_` + strings.Repeat("x", 40) + strconv.Itoa(i) + `","parameters":{"type":"object"}}]}`)
		last = readTools(req, transforms.ProtocolResponses)
		lastTools = req[len(`{"tools":`) : len(req)-1]
		indexCache.Lock()
		n := indexCache.bytes
		indexCache.Unlock()
		if n > maxIndexBytes {
			t.Fatalf("after %d arrays the cache holds %d bytes, over its %d", i+1, n, maxIndexBytes)
		}
	}
	indexCache.Lock()
	kept := indexCache.m[transforms.ProtocolResponses][string(lastTools)]
	indexCache.Unlock()
	if kept != last {
		t.Fatal("the array just read is not in the cache")
	}
}
