package syscalls

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

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
