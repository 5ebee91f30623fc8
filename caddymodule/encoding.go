package caddymodule

import (
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

var (
	errTooLarge            = errors.New("body exceeds the size limit")
	errUnsupportedEncoding = errors.New("unsupported content encoding")
)

// readStart is the first buffer a body is read into; it then grows
// fourfold each time it fills. An announced length is only a claim:
// reserving it up front lets clients that announce much and send little
// hold the memory, so no buffer is ever more than four times what has
// arrived. Fourfold rather than twofold: the buffers left behind on the way
// to a large body are a third of it instead of all of it, and under a
// burst of large requests that garbage is what the memory peaks on.
const readStart = 32 << 10

// Read buffers of request bodies of at least pooledRead bytes are recycled:
// a buffer allocated per request, zeroed and grown by doubling, is garbage
// the size of the body, and collecting it costs more than the rewrite.
// Only bodies that announce their length take one, and taking one
// reserves nothing new.
const pooledRead = 64 << 10

var readPool sync.Pool // of *[]byte

// readLimited reads r to EOF, refusing more than limit bytes with
// errTooLarge. The buffer grows with what arrives, never past limit+1 (the
// byte that proves a body too large) nor past hint+1 when hint, the
// announced length, is known, so an honest body ends in an exact fit. The
// second result, when not nil, is the pooled buffer holding the body, for
// putRead once nothing reads the body any more.
func readLimited(r io.Reader, limit, hint int64) ([]byte, *[]byte, error) {
	ceil := limit + 1
	if hint >= 0 && hint < limit {
		ceil = hint + 1
	}
	var pooled *[]byte
	var b []byte
	if hint >= pooledRead && hint < limit {
		if p, ok := readPool.Get().(*[]byte); ok && int64(cap(*p)) > hint {
			pooled, b = p, (*p)[:0]
		} else if ok {
			readPool.Put(p)
		}
	}
	if pooled == nil {
		b = make([]byte, 0, min(readStart, ceil))
	}
	for {
		if len(b) == cap(b) {
			if int64(cap(b)) >= ceil {
				// More than announced (a reader that does not hold the
				// body to its length): only the limit bounds it now.
				ceil = limit + 1
			}
			grown := make([]byte, len(b), min(4*int64(cap(b)), ceil))
			copy(grown, b)
			b = grown
			putRead(pooled)
			pooled = nil
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if int64(len(b)) > limit {
			putRead(pooled)
			return nil, nil, errTooLarge
		}
		if err == io.EOF {
			if pooled == nil && hint >= pooledRead && hint < limit {
				// The pool had nothing this large: this buffer joins it
				// once the body is done with.
				pooled = &b
			}
			return b, pooled, nil
		}
		if err != nil {
			putRead(pooled)
			return nil, nil, err
		}
	}
}

// putRead returns a read buffer to the pool; nil is a no-op.
func putRead(p *[]byte) {
	if p != nil {
		readPool.Put(p)
	}
}

// newDecoder returns a reader of r decoded by the Content-Encoding enc, ""
// or "identity" meaning none; limit caps what a zstd frame may make the
// decoder reserve. Unknown encodings, and lists of several, get
// errUnsupportedEncoding.
func newDecoder(enc string, r io.Reader, limit int64) (io.ReadCloser, error) {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "", "identity":
		return io.NopCloser(r), nil
	case "gzip", "x-gzip":
		return gzip.NewReader(r)
	case "zstd":
		// One goroutine-free decoder whose window and output cannot
		// outgrow the body limit: a frame claiming more is refused, not
		// allocated.
		d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxWindow(uint64(max(limit, zstd.MinWindowSize))),
			zstd.WithDecoderMaxMemory(uint64(limit)+1))
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	}
	return nil, errUnsupportedEncoding
}

// decodeAll decodes b by the Content-Encoding enc, refusing a result over
// limit bytes with errTooLarge.
func decodeAll(enc string, r io.Reader, limit int64) ([]byte, error) {
	d, err := newDecoder(enc, r, limit)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	b, _, err := readLimited(d, limit, -1)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return nil, errTooLarge
	}
	return b, err
}

// pushDecoder decodes a body that arrives through Write, as a response
// does, with a decoder that pulls from a reader. The decoder runs in its
// own goroutine but in lockstep with the writer: Write hands it a chunk and
// returns only once the decoder has used it up and asks for more, so what
// the decoder writes to out happens while Write or Close is waiting, never
// alongside another call on the response.
type pushDecoder struct {
	in      chan []byte   // chunks for the decoder; closed at the end
	idle    chan struct{} // the decoder asks for the next chunk
	done    chan struct{} // the decoder returned, with err
	err     error
	asking  bool // the decoder waits on in
	closed  bool
	discard bool // set before in closes: output after an abandon goes nowhere
	cur     []byte
}

func newPushDecoder(enc string, limit int64, out io.Writer) *pushDecoder {
	d := &pushDecoder{in: make(chan []byte), idle: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(d.done)
		dec, err := newDecoder(enc, d, limit)
		if err == nil {
			_, err = io.Copy(gatedWriter{d, out}, dec)
			dec.Close()
		}
		d.err = err
	}()
	return d
}

// Read is the decoder's side.
func (d *pushDecoder) Read(p []byte) (int, error) {
	for len(d.cur) == 0 {
		d.idle <- struct{}{}
		b, ok := <-d.in
		if !ok {
			return 0, io.EOF
		}
		d.cur = b
	}
	n := copy(p, d.cur)
	d.cur = d.cur[n:]
	return n, nil
}

// Write feeds p to the decoder and returns once the decoder has done all it
// can with it, or with the error that ended the decoder.
func (d *pushDecoder) Write(p []byte) (int, error) {
	if err := d.wait(); err != nil {
		return 0, err
	}
	d.in <- p
	d.asking = false
	if err := d.wait(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// wait returns once the decoder asks for input, or with its end: its error,
// or errTrailingData when it stopped with input left to give.
func (d *pushDecoder) wait() error {
	if d.asking {
		return nil
	}
	select {
	case <-d.idle:
		d.asking = true
		return nil
	case <-d.done:
		if d.err != nil {
			return d.err
		}
		return errTrailingData
	}
}

var errTrailingData = errors.New("data after the end of the encoded body")

// Close ends the input and waits for the decoder; a body cut short is an
// error.
func (d *pushDecoder) Close() error {
	if d.closed {
		return d.err
	}
	d.closed = true
	select {
	case <-d.done:
		return d.err
	default:
	}
	if err := d.wait(); err != nil {
		return err
	}
	close(d.in)
	<-d.done
	return d.err
}

// abandon stops the decoder without letting it write anything more.
func (d *pushDecoder) abandon() {
	d.discard = true
	_ = d.Close()
}

type gatedWriter struct {
	d *pushDecoder
	w io.Writer
}

func (g gatedWriter) Write(p []byte) (int, error) {
	if g.d.discard {
		return len(p), nil
	}
	return g.w.Write(p)
}

// decodable reports whether newDecoder knows the Content-Encoding enc.
func decodable(enc string) bool {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "gzip", "x-gzip", "zstd":
		return true
	}
	return false
}
