package pagefault

import (
	"encoding/binary"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tailroot/tailroot/bpf/internal/testutil"
)

func TestMain(m *testing.M) { testutil.MainWithLeakCheck(m) }

// TestTouchFreshPages maps fresh anonymous memory, touches n pages from
// this process and expects at least n more faults: the first write to an
// untouched anonymous page always faults (the page is not present; huge
// pages are disabled for the range so one fault cannot map 512 pages).
func TestTouchFreshPages(t *testing.T) {
	testutil.RequireRoot(t)
	p, err := Load(DefaultOptions())
	if err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer p.Close()
	pid := os.Getpid()
	if err := p.Watch(pid); err != nil {
		t.Fatal(err)
	}

	const n = 1000
	page := os.Getpagesize()
	mem, err := unix.Mmap(-1, 0, n*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := unix.Madvise(mem, unix.MADV_NOHUGEPAGE); err != nil {
		t.Fatal(err)
	}
	before, err := p.Fault(pid)
	if err != nil {
		t.Fatal(err)
	}
	w0, _ := p.Watched()
	for i := 0; i < n; i++ {
		mem[i*page] = 1
	}
	runtime.KeepAlive(mem)
	after, err := p.Fault(pid)
	if err != nil {
		t.Fatal(err)
	}
	w1, _ := p.Watched()
	d := after - before
	s0, s1 := w0[uint32(pid)], w1[uint32(pid)]
	t.Logf("touched %d pages: +%d faults (+%d writes, +%d present-page)", n, d, s1.Write-s0.Write, s1.Prot-s0.Prot)
	if d < n {
		t.Fatalf("+%d faults, want >= %d", d, n)
	}
	// Each touch was a write to a not-present page.
	if s1.Total-s0.Total < n || s1.Write-s0.Write < n {
		t.Fatalf("watched: +%d total +%d writes, want >= %d each", s1.Total-s0.Total, s1.Write-s0.Write, n)
	}
	// Only a few of them (from other goroutines) can be protection faults.
	if s1.Prot-s0.Prot > n/10 {
		t.Fatalf("+%d protection faults from first touches", s1.Prot-s0.Prot)
	}
	all, err := p.Faults()
	if err != nil {
		t.Fatal(err)
	}
	if all[uint32(pid)] < after {
		t.Fatalf("Faults()[self] = %d < %d", all[uint32(pid)], after)
	}
	if err := p.Unwatch(pid); err != nil {
		t.Fatal(err)
	}
	if w, _ := p.Watched(); len(w) != 0 {
		t.Fatalf("watched entries left after Unwatch: %v", w)
	}
}

func TestStatsUnmarshal(t *testing.T) {
	b := make([]byte, StatsSize)
	for i, v := range []uint64{10, 7, 1, 2} {
		binary.LittleEndian.PutUint64(b[i*8:], v)
	}
	var s Stats
	if err := s.UnmarshalBinary(b); err != nil || s != (Stats{Total: 10, Write: 7, Instr: 1, Prot: 2}) {
		t.Fatalf("got %+v, %v", s, err)
	}
	if err := s.UnmarshalBinary(b[:31]); err == nil {
		t.Fatal("short input accepted")
	}
}

func FuzzStatsUnmarshal(f *testing.F) {
	f.Add(make([]byte, StatsSize))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Stats
		if err := s.UnmarshalBinary(b); (err == nil) != (len(b) == StatsSize) {
			t.Fatalf("len %d: err %v", len(b), err)
		}
		if len(b) == StatsSize && s.Prot != binary.LittleEndian.Uint64(b[24:]) {
			t.Fatal("Prot not from bytes 24..31")
		}
	})
}
