// Package pagefault counts user-mode page faults per process with a tp_btf
// program on the x86 exceptions:page_fault_user tracepoint, and splits the
// count by access kind for watched processes.
//
// The tracepoint exists on x86 only; Load fails elsewhere.
package pagefault

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/tailroot/tailroot/bpf/internal/probe"
)

// Options size the maps. Zero values take the defaults below.
type Options struct {
	// MaxProcesses bounds the per-process counts (LRU: the process that
	// faulted least recently is evicted and its count restarts). Zero
	// means 16384.
	MaxProcesses uint32
	// MaxPIDs bounds the processes watched at once. Zero means 1024.
	MaxPIDs uint32
}

// DefaultOptions returns the sizes used for zero fields.
func DefaultOptions() Options { return Options{MaxProcesses: 16384, MaxPIDs: 1024} }

// Stats is struct fault_stats of pagefault.bpf.c, counts since Watch. A
// fault can be in several of Write, Instr and Prot.
type Stats struct {
	Total uint64 // user page faults
	Write uint64 // on a write access
	Instr uint64 // on an instruction fetch
	Prot  uint64 // on a present page (protection faults, copy-on-write)
}

// StatsSize is the size of struct fault_stats in bytes.
const StatsSize = 4 * 8

// UnmarshalBinary decodes struct fault_stats (little-endian).
func (s *Stats) UnmarshalBinary(b []byte) error {
	if len(b) != StatsSize {
		return fmt.Errorf("fault_stats: size %d, want %d", len(b), StatsSize)
	}
	le := binary.LittleEndian
	s.Total, s.Write, s.Instr, s.Prot = le.Uint64(b), le.Uint64(b[8:]), le.Uint64(b[16:]), le.Uint64(b[24:])
	return nil
}

// Probe is the loaded and attached program. Close detaches it.
type Probe struct {
	objs  pagefaultObjects
	links []link.Link
}

// Load loads the program and attaches it. It needs CAP_BPF and CAP_PERFMON
// (root), a kernel with BTF, and x86.
func Load(opts Options) (*Probe, error) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "386" {
		return nil, fmt.Errorf("pagefault: exceptions:page_fault_user exists on x86 only, not %s", runtime.GOARCH)
	}
	spec, err := loadPagefault()
	if err != nil {
		return nil, fmt.Errorf("load pagefault spec: %w", err)
	}
	for name, n := range map[string]uint32{"faults": opts.MaxProcesses, "watched": opts.MaxPIDs, "watched_faults": opts.MaxPIDs} {
		if err := probe.SetMaxEntries(spec, name, n); err != nil {
			return nil, err
		}
	}
	p := &Probe{}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("load pagefault: %w", err)
	}
	p.links, err = probe.AttachRawTP(p.objs.PageFaultUser)
	if err != nil {
		p.objs.Close()
		return nil, fmt.Errorf("pagefault: %w", err)
	}
	return p, nil
}

// Watch starts the detailed counts for process pid.
func (p *Probe) Watch(pid int) error { return probe.Watch(p.objs.Watched, pid) }

// Unwatch stops the detailed counts for pid and drops them.
func (p *Probe) Unwatch(pid int) error {
	return probe.Unwatch(p.objs.Watched, pid, p.objs.WatchedFaults)
}

// Faults returns the user page fault count of every process that faulted
// since Load (or since its entry was last evicted).
func (p *Probe) Faults() (map[uint32]uint64, error) {
	out := map[uint32]uint64{}
	var k uint32
	var v uint64
	it := p.objs.Faults.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read faults: %w", err)
	}
	return out, nil
}

// Fault returns one process's count (0 when it has not faulted).
func (p *Probe) Fault(pid int) (uint64, error) {
	var v uint64
	if err := p.objs.Faults.Lookup(uint32(pid), &v); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("read faults of pid %d: %w", pid, err)
	}
	return v, nil
}

// Watched returns the detailed counts of watched processes.
func (p *Probe) Watched() (map[uint32]Stats, error) {
	out := map[uint32]Stats{}
	var k uint32
	var v Stats
	it := p.objs.WatchedFaults.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read watched faults: %w", err)
	}
	return out, nil
}

// Close detaches the program and frees the maps.
func (p *Probe) Close() error {
	err := probe.CloseAll(p.links, &p.objs)
	p.links = nil
	if err != nil {
		return fmt.Errorf("close pagefault: %w", err)
	}
	return nil
}
