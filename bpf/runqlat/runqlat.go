// Package runqlat measures scheduler run-queue delay (time from a thread
// becoming runnable to getting a CPU) per cgroup and per watched process,
// and off-CPU time (switch-out to switch-in) per watched process, with
// tp_btf programs on sched_wakeup, sched_wakeup_new and sched_switch.
//
// Histograms are cumulative from Load and come out as [bpf.Hist] (native
// histogram buckets in seconds, see [bpf.Hist.Native]).
//
// With Options.SlowEvents set, the off-CPU times and run-queue delays of
// watched threads that last at least that long are also sent one by one,
// with the user and kernel stacks the thread had when it was switched out
// (read them with [Probe.Slow]).
package runqlat

import (
	"fmt"
	"io"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/internal/probe"
)

// Options size the maps. Zero values take the defaults below.
type Options struct {
	// MaxPIDs bounds the processes watched at once (Watch fails beyond
	// it). Zero means 1024.
	MaxPIDs uint32
	// MaxCgroups bounds the per-cgroup histograms; the least recently
	// updated cgroup is evicted beyond it (its counts restart). Zero
	// means 4096.
	MaxCgroups uint32
	// SlowEvents is the shortest off-CPU time or run-queue delay of a
	// watched thread sent as a slow event with stacks. Zero or negative
	// sends none and walks no stacks (each switch-out of a watched thread
	// costs two stack walks when on).
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
	return Options{MaxPIDs: 1024, MaxCgroups: 4096, MaxStacks: 4096, RingBufferBytes: 256 << 10}
}

// Probe is the loaded and attached program. Close detaches it.
type Probe struct {
	objs  runqlatObjects
	links []link.Link
	slow  *bpf.SlowReader
}

// Load loads the programs and attaches them to the scheduler tracepoints.
// It needs CAP_BPF and CAP_PERFMON (root) and a kernel with BTF.
func Load(opts Options) (*Probe, error) {
	spec, err := loadRunqlat()
	if err != nil {
		return nil, fmt.Errorf("load runqlat spec: %w", err)
	}
	for name, n := range map[string]uint32{
		"watched": opts.MaxPIDs, "pid_runq": opts.MaxPIDs, "pid_offcpu": opts.MaxPIDs,
		"cgroup_runq": opts.MaxCgroups, "stacks": opts.MaxStacks, "slow_events": opts.RingBufferBytes,
	} {
		if err := probe.SetMaxEntries(spec, name, n); err != nil {
			return nil, err
		}
	}
	if err := probe.SetSlowThreshold(spec, opts.SlowEvents); err != nil {
		return nil, err
	}
	p := &Probe{}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("load runqlat: %w", err)
	}
	if opts.SlowEvents > 0 {
		if p.slow, err = bpf.NewSlowReader(p.objs.SlowEvents, p.objs.Stacks, p.objs.SlowDropped); err != nil {
			p.objs.Close()
			return nil, fmt.Errorf("runqlat: %w", err)
		}
	}
	p.links, err = probe.AttachRawTP(p.objs.SchedWakeup, p.objs.SchedWakeupNew, p.objs.SchedSwitch)
	if err != nil {
		_ = p.Close()
		return nil, fmt.Errorf("runqlat: %w", err)
	}
	return p, nil
}

// Slow returns the reader of slow events and their stacks, or nil when
// Options.SlowEvents was not set. Kinds: bpf.SlowOffCPU, bpf.SlowRunQueue.
func (p *Probe) Slow() *bpf.SlowReader { return p.slow }

// Watch starts per-process histograms for pid (a process id; all its
// threads count).
func (p *Probe) Watch(pid int) error { return probe.Watch(p.objs.Watched, pid) }

// Unwatch stops watching pid and drops its histograms.
func (p *Probe) Unwatch(pid int) error {
	return probe.Unwatch(p.objs.Watched, pid, p.objs.PidRunq, p.objs.PidOffcpu)
}

// CgroupRunQueue returns run-queue delay histograms keyed by cgroup v2 id
// (resolve with [bpf.CgroupResolver]).
func (p *Probe) CgroupRunQueue() (map[uint64]bpf.Hist, error) {
	return probe.Hists[uint64](p.objs.CgroupRunq)
}

// PIDRunQueue returns run-queue delay histograms of watched processes.
func (p *Probe) PIDRunQueue() (map[uint32]bpf.Hist, error) {
	return probe.Hists[uint32](p.objs.PidRunq)
}

// PIDOffCPU returns off-CPU time histograms of watched processes.
func (p *Probe) PIDOffCPU() (map[uint32]bpf.Hist, error) {
	return probe.Hists[uint32](p.objs.PidOffcpu)
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
		return fmt.Errorf("close runqlat: %w", err)
	}
	return nil
}
