package streambuf

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

var sink []byte

// BenchmarkParser parses a 10k-event Responses stream and writes every
// event back out (the passthrough path), reporting the cost relative to
// bytes.Clone of the same input measured in the same run.
func BenchmarkParser(b *testing.B) {
	stream := responsesStream(10000)
	for _, bc := range []struct {
		name  string
		chunk int
	}{{"chunk=4096", 4096}, {"chunk=32768", 32 << 10}, {"whole", len(stream)}} {
		b.Run(bc.name, func(b *testing.B) {
			var p Parser
			out := make([]byte, 0, len(stream))
			fn := func(e *Event) error {
				out = e.AppendTo(out)
				return nil
			}
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				out = out[:0]
				for i := 0; i < len(stream); i += bc.chunk {
					if err := p.Feed(stream[i:min(i+bc.chunk, len(stream))], fn); err != nil {
						b.Fatal(err)
					}
				}
			}
			if !bytes.Equal(out, stream) {
				b.Fatal("output differs from input")
			}
			perOp := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(perOp)/float64(cloneTime(stream, b.N)), "x-clone")
		})
	}
}

// cloneTime measures bytes.Clone of s, the baseline for plain passthrough.
func cloneTime(s []byte, n int) time.Duration {
	n = max(n, 10)
	start := time.Now()
	for range n {
		sink = bytes.Clone(s)
	}
	return time.Since(start) / time.Duration(n)
}

// BenchmarkArgsDecoder decodes apply_patch arguments arriving in 24-byte
// fragments (the size of typical argument deltas) and reports the cost
// relative to encoding/json.Unmarshal of the complete arguments.
func BenchmarkArgsDecoder(b *testing.B) {
	args := patchArgs(400)
	for _, bc := range []struct {
		name string
		frag int
	}{{"frag=24", 24}, {"whole", len(args)}} {
		b.Run(bc.name, func(b *testing.B) {
			var d ArgsDecoder
			b.SetBytes(int64(len(args)))
			b.ReportAllocs()
			for b.Loop() {
				d.Reset()
				for i := 0; i < len(args); i += bc.frag {
					if _, err := d.Write(args[i:min(i+bc.frag, len(args))]); err != nil {
						b.Fatal(err)
					}
				}
			}
			if !d.InputComplete() {
				b.Fatal("input not complete")
			}
			perOp := b.Elapsed() / time.Duration(b.N)
			n := max(b.N, 10)
			var v struct {
				Input string `json:"input"`
			}
			start := time.Now()
			for range n {
				if err := json.Unmarshal(args, &v); err != nil {
					b.Fatal(err)
				}
			}
			base := time.Since(start) / time.Duration(n)
			b.ReportMetric(float64(perOp)/float64(base), "x-unmarshal")
		})
	}
}
