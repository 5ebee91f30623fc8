package streambuf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
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

// BenchmarkParserEvents feeds a Responses stream the way upstreams flush
// it: one event per Feed call, or a few events per call. The callback does
// almost nothing, so ns/event is the parser's own per-event cost.
func BenchmarkParserEvents(b *testing.B) {
	stream := responsesStream(1000)
	var evs [][]byte
	for rest := stream; len(rest) > 0; {
		n := bytes.Index(rest, []byte("\n\n")) + 2
		evs = append(evs, rest[:n])
		rest = rest[n:]
	}
	for _, per := range []int{1, 4} {
		var chunks [][]byte
		for i := 0; i < len(evs); i += per {
			j := min(i+per, len(evs))
			chunks = append(chunks, stream[len(bytes.Join(evs[:i], nil)):len(bytes.Join(evs[:j], nil))])
		}
		b.Run(fmt.Sprintf("events-per-feed=%d", per), func(b *testing.B) {
			var p Parser
			var n, size int
			fn := func(e *Event) error {
				n++
				size += len(e.Data) + len(e.Name)
				return nil
			}
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				for _, c := range chunks {
					if err := p.Feed(c, fn); err != nil {
						b.Fatal(err)
					}
				}
			}
			if n != b.N*len(evs) {
				b.Fatalf("%d events, want %d", n, b.N*len(evs))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/event")
		})
	}
}

// denseArgs returns function call arguments whose "input" is a patch with
// quotes, backslashes and non-ASCII text on every line, so that the JSON
// text holds an escape or a multi-byte character every few bytes.
func denseArgs(n int) []byte {
	var patch strings.Builder
	patch.WriteString("*** Begin Patch\n*** Update File: internal/fmt/quote.go\n")
	lines := []string{
		"@@ func quote(s string) string {\n",
		"-\treturn \"\\\"\" + strings.ReplaceAll(s, `\\`, \"\\\\\\\\\") + \"\\\"\"\n",
		"+\treturn fmt.Sprintf(\"%q → «%s»\\n\", s, \"é\\tü\")\n",
		"+\t// «Grüße» — \"naïve\" C:\\path\\to\\file → ✓ 🦀\n",
		" \tre := regexp.MustCompile(`\\\\[\"\\\\/bfnrt]|\\\\u[0-9a-f]{4}`)\n",
	}
	for i := range n {
		patch.WriteString(lines[i%len(lines)])
	}
	patch.WriteString("*** End Patch\n")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]string{"input": patch.String()}); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// BenchmarkArgsDecoderDense decodes escape-dense arguments in 12-byte
// fragments, the shape of argument deltas carrying code, and reports the
// cost per fragment.
func BenchmarkArgsDecoderDense(b *testing.B) {
	args := denseArgs(400)
	const frag = 12
	frags := (len(args) + frag - 1) / frag
	b.Run("Write", func(b *testing.B) {
		var d ArgsDecoder
		var text []byte
		b.SetBytes(int64(len(args)))
		b.ReportAllocs()
		for b.Loop() {
			d.Reset()
			text = text[:0]
			for i := 0; i < len(args); i += frag {
				dec, err := d.Write(args[i:min(i+frag, len(args))])
				if err != nil {
					b.Fatal(err)
				}
				text = append(text, dec...) // the caller's copy
			}
		}
		if want, ok := jsonInput(args); !ok || string(text) != want || !d.InputComplete() {
			b.Fatal("decoded text differs from encoding/json")
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*frags), "ns/frag")
	})
	// AppendWrite decodes straight into the caller's buffer.
	b.Run("AppendWrite", func(b *testing.B) {
		var d ArgsDecoder
		var text []byte
		b.SetBytes(int64(len(args)))
		b.ReportAllocs()
		for b.Loop() {
			d.Reset()
			text = text[:0]
			for i := 0; i < len(args); i += frag {
				var err error
				if text, err = d.AppendWrite(text, args[i:min(i+frag, len(args))]); err != nil {
					b.Fatal(err)
				}
			}
		}
		if want, ok := jsonInput(args); !ok || string(text) != want || !d.InputComplete() {
			b.Fatal("decoded text differs from encoding/json")
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*frags), "ns/frag")
	})
}
