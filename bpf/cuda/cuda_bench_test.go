package cuda

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/tailroot/tailroot/bpf/internal/testutil"
)

// BenchmarkFakeCUDACall measures what the entry and return probes add to a
// library call: cudacaller calls the stand-in cudaStreamSynchronize (which
// returns at once in bench mode) b.N times and reports its own ns per call,
// without and with the probes attached. Each probe is a trap into the
// kernel, so expect microseconds, not nanoseconds.
func BenchmarkFakeCUDACall(b *testing.B) {
	lib, caller := buildFake(b)
	run := func(b *testing.B) {
		b.ReportAllocs()
		out, err := exec.Command(caller, lib, "bench", strconv.Itoa(b.N)).Output()
		if err != nil {
			b.Fatal(err)
		}
		total, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(total/float64(b.N), "ns/call")
	}
	b.Run("detached", run)

	testutil.RequireRoot(b)
	p, err := Load(Options{Paths: []string{lib}, Symbols: []string{"cudaStreamSynchronize"}})
	if err != nil {
		b.Fatalf("load: %+v", err)
	}
	// Keep the ring buffer drained so events are not dropped.
	done := make(chan struct{})
	go func() {
		defer close(done)
		var ev Event
		for p.Read(&ev) == nil {
		}
	}()
	b.Run("attached", run)
	if err := p.Close(); err != nil {
		b.Fatal(err)
	}
	<-done
}
