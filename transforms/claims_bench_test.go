package transforms_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmtransform/caddy-llm-transform/transforms"
	"github.com/llmtransform/caddy-llm-transform/transforms/transformtest"
)

// BenchmarkStreamClaims weighs the engine's claims of delta runs
// (Stream.DisableClaims): BenchmarkStreamPipeline's stream through the
// engine with claims on and off by turns, in the process's CPU time, so
// that load on the host hits both alike. x_cpu_claims_off is the CPU
// without claims over the CPU with them.
func BenchmarkStreamClaims(b *testing.B) {
	body, nEvents := benchStream(10000)
	var chunks [][]byte
	for _, ch := range strings.SplitAfter(body, "\n\n") {
		chunks = append(chunks, []byte(ch))
	}
	chain := transformtest.Chain(b, `[{"transform":"field_custom_tools_to_function"}]`)
	run := func(claims bool) int {
		x := transformtest.Begin(b, chain, transforms.ProtocolResponses, []byte(patchRequest))
		if _, err := x.RewriteRequest([]byte(patchRequest)); err != nil {
			b.Fatal(err)
		}
		s := x.NewStream()
		if !claims {
			s.DisableClaims()
		}
		n := 0
		for _, ch := range chunks {
			_ = s.Write(ch)
			n += len(s.Output())
		}
		_ = s.Close()
		n += len(s.Output())
		s.Release()
		return n
	}
	if run(true) != run(false) {
		b.Fatal("claims changed the output")
	}
	var cpu [2]time.Duration // claims on, off
	for i := 0; b.Loop(); i++ {
		for _, off := range [2]int{i % 2, 1 - i%2} {
			t0 := processCPU()
			run(off == 0)
			cpu[off] += processCPU() - t0
		}
	}
	n := float64(b.N * nEvents)
	b.ReportMetric(float64(cpu[0].Nanoseconds())/n, "ns/event_claims")
	b.ReportMetric(float64(cpu[1].Nanoseconds())/n, "ns/event_no_claims")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "x_cpu_claims_off")
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
