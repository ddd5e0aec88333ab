// Package syscalls measures system call latency (raw_syscalls sys_enter to
// sys_exit) per watched process and syscall number, with tp_btf programs.
package syscalls

import (
	"encoding/binary"
	"fmt"

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
}

// DefaultOptions returns the sizes used for zero fields.
func DefaultOptions() Options { return Options{MaxPIDs: 1024, MaxEntries: 16384} }

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
	if err := probe.SetMaxEntries(spec, "syscalls", opts.MaxEntries); err != nil {
		return nil, err
	}
	p := &Probe{}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("load syscalls: %w", err)
	}
	p.links, err = probe.AttachRawTP(p.objs.SysEnter, p.objs.SysExit)
	if err != nil {
		p.objs.Close()
		return nil, fmt.Errorf("syscalls: %w", err)
	}
	return p, nil
}

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
	err := probe.CloseAll(p.links, &p.objs)
	p.links = nil
	if err != nil {
		return fmt.Errorf("close syscalls: %w", err)
	}
	return nil
}
