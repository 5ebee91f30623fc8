package jsonspan

import (
	"bytes"
	"sync"
	"unsafe"
)

// AppendGrow is append that doubles a full buffer: a buffer that grows by
// many small pieces to a large size allocates about twice its final size,
// not the five times append's quarter steps cost.
func AppendGrow(b, add []byte) []byte {
	if cap(b)-len(b) < len(add) {
		nb := make([]byte, len(b), max(2*cap(b), len(b)+len(add), 512))
		copy(nb, b)
		b = nb
	}
	return append(b, add...)
}

// bufPool recycles growing buffers: every streamed call grows some to the
// size of its arguments, and a stream of many calls would otherwise leave
// that much garbage behind each one.
var bufPool sync.Pool // of *[]byte

// MaxPooled keeps a freak buffer out of the pools: a buffer larger than
// this is left to the garbage collector.
const MaxPooled = 1 << 20

// AppendPooled is AppendGrow on a buffer taken from a pool when b is nil.
// Give it back with PutPooled.
func AppendPooled(b, add []byte) []byte {
	if b == nil {
		if p, ok := bufPool.Get().(*[]byte); ok {
			b = (*p)[:0]
		}
	}
	return AppendGrow(b, add)
}

// PutPooled gives a buffer AppendPooled grew back to the pool; nothing may
// use it after.
func PutPooled(b []byte) {
	if b != nil && cap(b) <= MaxPooled {
		b = b[:0]
		bufPool.Put(&b)
	}
}

// AppendRawOr appends doc's bytes at sp, or or when sp is NoSpan.
func AppendRawOr(dst, doc []byte, sp Span, or string) []byte {
	if sp.Start < 0 {
		return append(dst, or...)
	}
	return append(dst, doc[sp.Start:sp.End]...)
}

// KeyName is a member's key as a string for a switch: the bytes
// themselves, unescaped only when they hold an escape. The string shares
// d's memory unless unescaped: it must not outlive d or be kept.
func KeyName(d []byte, k Span) string {
	raw := d[k.Start+1 : k.End-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		return string(Unescape(nil, raw))
	}
	return UnsafeString(raw)
}

// UnsafeString is b as a string without a copy: b must not change while
// the string is in use.
func UnsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
