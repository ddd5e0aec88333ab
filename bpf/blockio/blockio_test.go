package blockio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/internal/testutil"
)

func TestMain(m *testing.M) { testutil.MainWithLeakCheck(m) }

// blockDir finds a writable directory on a filesystem backed by a block
// device (the test's TempDir first; overlayfs and tmpfs are not) and
// returns it with the whole disk it lives on.
func blockDir(t *testing.T) (string, Dev) {
	t.Helper()
	cands := []string{t.TempDir(), "/var/tmp"}
	if wd, err := os.Getwd(); err == nil {
		cands = append(cands, wd)
	}
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fs := strings.Fields(sc.Text()); len(fs) > 4 {
				cands = append(cands, fs[4])
			}
		}
		f.Close()
	}
	for _, c := range cands {
		var st syscall.Stat_t
		if err := syscall.Stat(c, &st); err != nil {
			continue
		}
		disk, err := WholeDisk(DevFromStat(st.Dev))
		if err != nil {
			continue
		}
		dir, err := os.MkdirTemp(c, "tailroot-blockio-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		return dir, disk
	}
	t.Skip("no writable filesystem on a block device found (all overlay/tmpfs?)")
	return "", 0
}

// diskstat reads /sys/dev/block/M:m/stat: reads completed, writes
// completed and in-flight requests (fields 1, 5 and 9), the kernel's own
// accounting of the same requests.
func diskstat(t *testing.T, d Dev) (reads, writes, inflight uint64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/dev/block", d.String(), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 9 {
		t.Fatalf("stat %q: want >= 9 fields", b)
	}
	num := func(i int) uint64 {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			t.Fatalf("stat field %d %q: %v", i+1, f[i], err)
		}
		return v
	}
	return num(0), num(4), num(8)
}

func TestBlockIOWriteFsyncAndDirectRead(t *testing.T) {
	testutil.RequireRoot(t)
	dir, disk := blockDir(t)
	p, err := Load(DefaultOptions())
	if err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer p.Close()

	before, err := p.Disks()
	if err != nil {
		t.Fatal(err)
	}
	r0, w0, _ := diskstat(t, disk)

	const size = 4 << 20
	path := filepath.Join(dir, "data")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte("tailroot"), size/8)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()

	// O_DIRECT bypasses the page cache, so this read must reach the disk.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatalf("open O_DIRECT: %v", err)
	}
	buf, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	n, rerr := unix.Read(fd, buf)
	unix.Close(fd)
	unix.Munmap(buf)
	if rerr != nil || n != 1<<20 {
		t.Fatalf("direct read: %d, %v", n, rerr)
	}

	after, err := p.Disks()
	if err != nil {
		t.Fatal(err)
	}
	r1, w1, _ := diskstat(t, disk)
	b, a := before[disk], after[disk]
	dReads, dWrites := a.ReadOps-b.ReadOps, a.WriteOps-b.WriteOps
	dBytes := a.Bytes - b.Bytes
	dLat := a.Latency.Count() - b.Latency.Count()
	t.Logf("disk %s (%s): +%d reads +%d writes +%d other, +%d bytes, +%d latencies (mean %.3f ms), in flight %d; diskstats +%d reads +%d writes",
		disk, disk.Name(), dReads, dWrites, a.OtherOps-b.OtherOps, dBytes, dLat,
		float64(a.Latency.SumNs-b.Latency.SumNs)/float64(max(dLat, 1))/1e6, a.InFlight, r1-r0, w1-w0)

	if dWrites == 0 || dReads == 0 {
		t.Fatalf("disk %s: +%d writes +%d reads, want both > 0 after write+fsync and an O_DIRECT read", disk, dWrites, dReads)
	}
	// 4 MiB written and synced plus 1 MiB read directly.
	if dBytes < size+1<<20 {
		t.Fatalf("disk %s: %d bytes completed, want >= %d", disk, dBytes, size+1<<20)
	}
	if dLat != a.ReadOps+a.WriteOps+a.OtherOps-(b.ReadOps+b.WriteOps+b.OtherOps) {
		t.Fatalf("latency samples %d != completions", dLat)
	}
	// The kernel's accounting of the same disk saw the same requests, up
	// to requests completing between the two snapshots.
	near := func(name string, bpfN, kernelN uint64) {
		if d := int64(bpfN) - int64(kernelN); d > 8+int64(kernelN)/10 || d < -8-int64(kernelN)/10 {
			t.Errorf("%s: BPF %d vs diskstats %d", name, bpfN, kernelN)
		}
	}
	near("reads", dReads, r1-r0)
	near("writes", dWrites, w1-w0)
	if a.InFlight < 0 || a.InFlight > 1024 {
		t.Fatalf("in flight %d after the IO finished", a.InFlight)
	}
	if mean := float64(a.Latency.SumNs-b.Latency.SumNs) / float64(dLat); mean <= 0 || mean > 10e9 {
		t.Fatalf("mean latency %.0f ns implausible", mean)
	}
}

func TestDevEncoding(t *testing.T) {
	d := MakeDev(259, 3) // nvme0n1p3 on many machines
	if d.Major() != 259 || d.Minor() != 3 || d.String() != "259:3" || uint32(d) != 259<<20|3 {
		t.Fatalf("MakeDev(259,3) = %#x %s", uint32(d), d)
	}
	// glibc dev_t for 8:17 is 0x811; for 259:65536 the minor's high bits
	// go to bits 20..31: (65536&^0xff)<<12 | 259<<8.
	if got := DevFromStat(0x811); got != MakeDev(8, 17) {
		t.Fatalf("DevFromStat(8:17) = %s", got)
	}
	if got := DevFromStat(uint64(65536&^0xff)<<12 | 259<<8); got != MakeDev(259, 65536) {
		t.Fatalf("DevFromStat(259:65536) = %s", got)
	}
	for _, s := range []string{"8", "a:1", "8:x", "4096:0", "8:1048576"} {
		if _, err := ParseDev(s); err == nil {
			t.Errorf("ParseDev(%q) accepted", s)
		}
	}
	if d, err := ParseDev("8:16"); err != nil || d != MakeDev(8, 16) {
		t.Fatalf("ParseDev(8:16) = %s, %v", d, err)
	}
}

// TestWholeDiskSysfs builds a fake /sys/dev/block with a disk and a
// partition laid out as the kernel does (partition directory inside the
// disk's, with a "partition" file).
func TestWholeDiskSysfs(t *testing.T) {
	root := t.TempDir()
	diskDir := filepath.Join(root, "devices", "sda")
	partDir := filepath.Join(diskDir, "sda1")
	if err := os.MkdirAll(partDir, 0o755); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(diskDir, "dev"), []byte("8:0\n"), 0o644))
	must(os.WriteFile(filepath.Join(diskDir, "uevent"), []byte("MAJOR=8\nMINOR=0\nDEVNAME=sda\nDEVTYPE=disk\n"), 0o644))
	must(os.WriteFile(filepath.Join(partDir, "dev"), []byte("8:1\n"), 0o644))
	must(os.WriteFile(filepath.Join(partDir, "partition"), []byte("1\n"), 0o644))
	bl := filepath.Join(root, "block")
	must(os.Mkdir(bl, 0o755))
	must(os.Symlink(diskDir, filepath.Join(bl, "8:0")))
	must(os.Symlink(partDir, filepath.Join(bl, "8:1")))
	old := sysfsBlock
	sysfsBlock = bl
	defer func() { sysfsBlock = old }()

	if d, err := WholeDisk(MakeDev(8, 1)); err != nil || d != MakeDev(8, 0) {
		t.Fatalf("WholeDisk(8:1) = %s, %v", d, err)
	}
	if d, err := WholeDisk(MakeDev(8, 0)); err != nil || d != MakeDev(8, 0) {
		t.Fatalf("WholeDisk(8:0) = %s, %v", d, err)
	}
	if _, err := WholeDisk(MakeDev(0, 45)); !errors.Is(err, ErrNotBlockDevice) {
		t.Fatalf("WholeDisk(0:45) err = %v", err)
	}
	if n := MakeDev(8, 0).Name(); n != "sda" {
		t.Fatalf("Name = %q", n)
	}
}

func TestDiskStatsUnmarshal(t *testing.T) {
	var h bpf.Hist
	h.Slots[20], h.SumNs = 7, 7_000_000
	hb, _ := h.MarshalBinary()
	b := append(hb, make([]byte, 48)...)
	for i, v := range []uint64{1, 2, 3, 4096, 5, uint64(1<<64 - 2)} { // in flight -2
		for j := range 8 {
			b[bpf.HistSize+i*8+j] = byte(v >> (8 * j))
		}
	}
	var s DiskStats
	if err := s.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	want := DiskStats{Latency: h, ReadOps: 1, WriteOps: 2, OtherOps: 3, Bytes: 4096, Errors: 5, InFlight: -2}
	if s != want {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
	if err := s.UnmarshalBinary(b[1:]); err == nil {
		t.Fatal("short input accepted")
	}
}

func FuzzDiskStatsUnmarshal(f *testing.F) {
	f.Add(make([]byte, DiskStatsSize))
	f.Add([]byte("short"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s DiskStats
		if err := s.UnmarshalBinary(b); err != nil {
			if len(b) == DiskStatsSize {
				t.Fatalf("right-sized input rejected: %v", err)
			}
			return
		}
		if len(b) != DiskStatsSize || uint64(s.InFlight) != binary.LittleEndian.Uint64(b[DiskStatsSize-8:]) ||
			s.Latency.Slots[0] != binary.LittleEndian.Uint64(b) {
			t.Fatalf("decoded %+v from %d bytes", s, len(b))
		}
	})
}

func FuzzParseDev(f *testing.F) {
	f.Add("8:0")
	f.Add("259:65536")
	f.Add(":")
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDev(s)
		if err != nil {
			return
		}
		if back, err := ParseDev(d.String()); err != nil || back != d {
			t.Fatalf("%q -> %s -> %s, %v", s, d, back, err)
		}
	})
}

func FuzzParseUeventDevname(f *testing.F) {
	f.Add([]byte("MAJOR=259\nMINOR=0\nDEVNAME=nvme0n1\nDEVTYPE=disk\n"))
	f.Add([]byte("DEVNAME="))
	f.Fuzz(func(t *testing.T, b []byte) {
		name := ParseUeventDevname(b)
		if name != "" && !bytes.Contains(b, []byte("DEVNAME="+name)) {
			t.Fatalf("name %q not in input", name)
		}
	})
}
