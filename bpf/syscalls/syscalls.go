// Package syscalls measures system call latency (raw_syscalls sys_enter to
// sys_exit) per watched process and syscall number, with tp_btf programs.
//
// With Options.SlowEvents set, calls of watched processes that last at
// least that long are also sent one by one with the user stack of the
// call site (read them with [Probe.Slow]).
package syscalls

import (
	"encoding/binary"
	"fmt"
	"io"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/internal/probe"
)

// Options size the maps. Zero values take the defaults below.
type Options struct {
	// MaxPIDs bounds the processes watched at once. Zero means 1024.
	MaxPIDs uint32
	// MaxEntries bounds the (process, syscall) histograms; calls that
	// would need another one are not counted. Zero means 16384.
	MaxEntries uint32
	// SlowEvents is the shortest call of a watched process sent as a
	// slow event with its user stack. Zero or negative sends none.
	SlowEvents time.Duration
	// MaxStacks bounds the distinct stacks held between
	// SlowReader.ClearStacks calls. Zero means 4096 (2 MiB of map).
	MaxStacks uint32
	// RingBufferBytes is the slow event ring buffer size: a power of two
	// and a multiple of the page size. Zero means 256 KiB (4096 events).
	RingBufferBytes uint32
}

// DefaultOptions returns the sizes used for zero fields; slow events are
// off.
func DefaultOptions() Options {
	return Options{MaxPIDs: 1024, MaxEntries: 16384, MaxStacks: 4096, RingBufferBytes: 256 << 10}
}

// Key identifies one histogram: struct sys_key of syscalls.bpf.c.
type Key struct {
	PID uint32 // process id
	Nr  uint32 // system call number of the architecture (x86-64: 0 read, 35 nanosleep, 39 getpid)
}

// Stats is struct sys_stats of syscalls.bpf.c, cumulative since Watch.
type Stats struct {
	Latency bpf.Hist // sys_enter to sys_exit
	Errors  uint64   // calls that returned an error (-4095..-1)
}

// StatsSize is the size of struct sys_stats in bytes.
const StatsSize = bpf.HistSize + 8

// UnmarshalBinary decodes struct sys_stats (little-endian).
func (s *Stats) UnmarshalBinary(b []byte) error {
	if len(b) != StatsSize {
		return fmt.Errorf("sys_stats: size %d, want %d", len(b), StatsSize)
	}
	if err := s.Latency.UnmarshalBinary(b[:bpf.HistSize]); err != nil {
		return err
	}
	s.Errors = binary.LittleEndian.Uint64(b[bpf.HistSize:])
	return nil
}

// Probe is the loaded and attached program. Close detaches it.
type Probe struct {
	objs  syscallsObjects
	links []link.Link
	slow  *bpf.SlowReader
}

// Load loads the programs and attaches them to raw_syscalls sys_enter and
// sys_exit. It needs CAP_BPF and CAP_PERFMON (root) and a kernel with BTF.
func Load(opts Options) (*Probe, error) {
	spec, err := loadSyscalls()
	if err != nil {
		return nil, fmt.Errorf("load syscalls spec: %w", err)
	}
	if err := probe.SetMaxEntries(spec, "watched", opts.MaxPIDs); err != nil {
		return nil, err
	}
	for name, n := range map[string]uint32{"syscalls": opts.MaxEntries, "stacks": opts.MaxStacks, "slow_events": opts.RingBufferBytes} {
		if err := probe.SetMaxEntries(spec, name, n); err != nil {
			return nil, err
		}
	}
	if err := probe.SetSlowThreshold(spec, opts.SlowEvents); err != nil {
		return nil, err
	}
	p := &Probe{}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("load syscalls: %w", err)
	}
	if opts.SlowEvents > 0 {
		if p.slow, err = bpf.NewSlowReader(p.objs.SlowEvents, p.objs.Stacks, p.objs.SlowDropped); err != nil {
			p.objs.Close()
			return nil, fmt.Errorf("syscalls: %w", err)
		}
	}
	p.links, err = probe.AttachRawTP(p.objs.SysEnter, p.objs.SysExit)
	if err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("syscalls: %w", err)
	}
	return p, nil
}

// Slow returns the reader of slow calls and their user stacks, or nil when
// Options.SlowEvents was not set. Kind: bpf.SlowSyscall, Detail the number.
func (p *Probe) Slow() *bpf.SlowReader { return p.slow }

// Watch starts measuring process pid's system calls.
func (p *Probe) Watch(pid int) error { return probe.Watch(p.objs.Watched, pid) }

// Unwatch stops measuring pid; a call in progress may still be recorded
// when it returns. Its histograms stay until Forget.
func (p *Probe) Unwatch(pid int) error { return probe.Unwatch(p.objs.Watched, pid) }

// Forget drops the histograms of pid (after it exited, say).
func (p *Probe) Forget(pid int) error {
	var keys []Key
	var k Key
	var v Stats
	it := p.objs.Syscalls.Iterate()
	for it.Next(&k, &v) {
		if k.PID == uint32(pid) {
			keys = append(keys, k)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("forget pid %d: %w", pid, err)
	}
	for _, k := range keys {
		if err := p.objs.Syscalls.Delete(k); err != nil {
			return fmt.Errorf("forget pid %d syscall %d: %w", pid, k.Nr, err)
		}
	}
	return nil
}

// Stats returns every (process, syscall) histogram.
func (p *Probe) Stats() (map[Key]Stats, error) {
	out := map[Key]Stats{}
	var k Key
	var v Stats
	it := p.objs.Syscalls.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read syscalls: %w", err)
	}
	return out, nil
}

// Close detaches the programs and frees the maps.
func (p *Probe) Close() error {
	closers := []io.Closer{&p.objs}
	if p.slow != nil {
		closers = append([]io.Closer{p.slow}, closers...)
	}
	err := probe.CloseAll(p.links, closers...)
	p.links = nil
	if err != nil {
		return fmt.Errorf("close syscalls: %w", err)
	}
	return nil
}
