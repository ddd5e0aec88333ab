package syscalls

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/internal/testutil"
)

var sinkPID int

// BenchmarkGetpid measures what the raw_syscalls programs add to a cheap
// system call (the ebpf_exporter getpid benchmark): detached, attached with
// this process unwatched (what every other process on the node pays: two
// hash lookups), and attached with it watched (a histogram update per call).
func BenchmarkGetpid(b *testing.B) {
	loop := func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkPID = unix.Getpid()
		}
	}
	b.Run("detached", loop)

	testutil.RequireRoot(b)
	p, err := Load(DefaultOptions())
	if err != nil {
		b.Fatalf("load: %+v", err)
	}
	defer p.Close()
	b.Run("attached-unwatched", loop)
	if err := p.Watch(os.Getpid()); err != nil {
		b.Fatal(err)
	}
	defer p.Forget(os.Getpid())
	b.Run("attached-watched", loop)
}

// BenchmarkGetpidSlowEvents is BenchmarkGetpid's watched case with slow
// events on at 1 ms: getpid never reaches the threshold, so this is the
// cost of the threshold compare; "every-call" sets the threshold to 1 ns,
// so each call also walks its user stack and sends an event (read and
// discarded by a goroutine), the worst case.
func BenchmarkGetpidSlowEvents(b *testing.B) {
	testutil.RequireRoot(b)
	for _, c := range []struct {
		name string
		min  time.Duration
	}{{"below-threshold", time.Millisecond}, {"every-call", time.Nanosecond}} {
		b.Run(c.name, func(b *testing.B) {
			opts := DefaultOptions()
			opts.SlowEvents = c.min
			p, err := Load(opts)
			if err != nil {
				b.Fatalf("load: %+v", err)
			}
			defer p.Close()
			go func() {
				var ev bpf.SlowEvent
				for p.Slow().Read(&ev) == nil {
				}
			}()
			if err := p.Watch(os.Getpid()); err != nil {
				b.Fatal(err)
			}
			defer p.Forget(os.Getpid())
			b.ReportAllocs()
			for b.Loop() {
				sinkPID = unix.Getpid()
			}
		})
	}
}
