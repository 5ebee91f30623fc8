package transforms

import (
	"sync"

	"github.com/llmtransform/caddy-llm-transform/internal/jsonspan"
)

// ApplyEdits builds the rewritten document in one copy. Large documents
// are built in pooled buffers: a fresh multi-megabyte allocation per request
// costs more in page faults and zeroing than the rewrite itself. For the
// last rule of a request sent on as a stream, a large document whose edits
// all have exact lengths is not built: applyEdits returns nil, which the
// rule returns as its result, and the edits are applied as the upstream
// reads the body (Exchange.RewriteRequestBody).
func (x *Exchange) ApplyEdits(doc []byte, edits []jsonspan.Edit) []byte {
	if len(edits) == 0 {
		return doc
	}
	if x.canDefer() {
		if size, exact := jsonspan.ExactSize(doc, edits); exact && size >= x.deferMin() {
			jsonspan.SortEdits(edits)
			x.deferred = &RequestBody{doc: doc, edits: edits, size: size}
			return nil
		}
	}
	out := x.buffer(jsonspan.EditedSize(doc, edits))
	return jsonspan.AppendEdits(out, doc, edits)
}

// Buffers of at least pooledMin bytes are recycled between requests.
const pooledMin = 64 << 10

var bodyPool sync.Pool // of *[]byte

func (x *Exchange) buffer(n int) []byte {
	if n < pooledMin {
		return make([]byte, 0, n)
	}
	if p, ok := bodyPool.Get().(*[]byte); ok && cap(*p) >= n {
		b := (*p)[:0]
		x.pooled = append(x.pooled, p)
		return b
	} else if ok {
		bodyPool.Put(p)
	}
	b := make([]byte, 0, n+n/8)
	x.pooled = append(x.pooled, &b)
	return b
}

// Release returns the request's large body buffers to the pool. Call it
// only when nothing reads the rewritten request body any more, i.e. after
// the upstream round trip has finished.
func (x *Exchange) Release() {
	x.releaseWalks()
	for _, p := range x.pooled {
		bodyPool.Put(p)
	}
	x.pooled = nil
}
