// Package kernel turns the agent's eBPF probes (bpf/runqlat, blockio,
// pagefault, syscalls, cuda, gil) into series: native histograms for
// latencies, counters for counts, labelled with pid, comm, cgroup and the
// container and pod the cgroup path names.
//
// In: probe maps, read at each Collect, and CUDA and slow-event ring
// buffers, read continuously. Out: collect.Series (metric names in
// agent/README.md), CUDA calls handed to an evidence sink, and slow events
// (off-CPU, run-queue, system calls) with their raw stacks handed to a
// SlowSink. Loading needs root; a probe that
// fails to load is reported once by Open's caller and left out, the others
// run. Per-process probes follow the processes a procinfo.Selector picks,
// rescanned every RescanInterval. System calls are named from
// sysnames_amd64.go, generated from linux-libc-dev's unistd_64.h by
// internal/mksysnames (go generate; a test checks the committed table).
package kernel

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"

	"github.com/tailroot/tailroot/agent/collect"
	"github.com/tailroot/tailroot/agent/procinfo"
	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/blockio"
	"github.com/tailroot/tailroot/bpf/cuda"
	"github.com/tailroot/tailroot/bpf/gil"
	"github.com/tailroot/tailroot/bpf/pagefault"
	"github.com/tailroot/tailroot/bpf/runqlat"
	"github.com/tailroot/tailroot/bpf/syscalls"
)

// Metric names (agent/README.md documents labels and units).
const (
	MetricRunQueue        = "tailroot_runqueue_delay_seconds"
	MetricProcRunQueue    = "tailroot_process_runqueue_delay_seconds"
	MetricOffCPU          = "tailroot_offcpu_seconds"
	MetricBlockLatency    = "tailroot_block_io_latency_seconds"
	MetricBlockInFlight   = "tailroot_block_io_inflight"
	MetricBlockCompleted  = "tailroot_block_io_completed_total"
	MetricBlockBytes      = "tailroot_block_io_bytes_total"
	MetricBlockErrors     = "tailroot_block_io_errors_total"
	MetricPageFaults      = "tailroot_page_faults_total"
	MetricPageFaultsKind  = "tailroot_page_faults_by_kind_total"
	MetricSyscallLatency  = "tailroot_syscall_latency_seconds"
	MetricSyscallErrors   = "tailroot_syscall_errors_total"
	MetricCUDACall        = "tailroot_cuda_call_seconds"
	MetricCUDADropped     = "tailroot_cuda_events_dropped_total"
	MetricGILWait         = "tailroot_gil_wait_seconds"
	MetricWatchedProcs    = "tailroot_agent_watched_processes"
	probeRunQueue         = "runqueue"
	probeBlockIO          = "blockio"
	probePageFault        = "pagefault"
	probeSyscalls         = "syscalls"
	probeCUDA             = "cuda"
	probeGIL              = "gil"
	defaultRescanInterval = 10 * time.Second
)

var (
	metaHist = func(help string) metadata.Metadata {
		return metadata.Metadata{Type: model.MetricTypeHistogram, Unit: "seconds", Help: help}
	}
	metaCounter = func(help string) metadata.Metadata {
		return metadata.Metadata{Type: model.MetricTypeCounter, Help: help}
	}
)

// Options choose the probes and the processes. The zero value loads no
// probe.
type Options struct {
	RunQueue  bool // runqlat: per-cgroup and per-process run-queue delay, off-CPU time
	PerCgroup bool // emit per-cgroup run-queue series
	BlockIO   bool
	PageFault bool
	Syscalls  bool
	CUDA      bool
	GIL       bool
	// CUDASymbols restricts the CUDA functions probed; empty means all.
	CUDASymbols []string
	// Selector picks the processes with per-process series and uprobes.
	Selector procinfo.Selector
	// RescanInterval is how often processes are rescanned. Zero means 10 s.
	RescanInterval time.Duration
	// Procs reads /proc; the zero value reads the host's.
	Procs procinfo.Reader
	// OnCUDACall receives every CUDA call event of a selected process, from
	// the reader goroutine of that process. Nil discards events.
	OnCUDACall func(pid uint32, ev *cuda.Event)
	// SlowEvents is the shortest off-CPU time, run-queue delay (RunQueue)
	// and system call (Syscalls) of a selected process handed to Slow with
	// its stacks. Zero or negative, or a nil Slow, captures no stacks.
	SlowEvents time.Duration
	// Slow receives slow events from one goroutine per probe.
	Slow SlowSink
	// Logger; nil discards.
	Logger *slog.Logger
}

// ProbeStatus says whether a probe runs.
type ProbeStatus struct {
	Name   string
	Loaded bool
	Err    error // why it did not load
}

// Collector reads the probes. It implements collect.Collector and
// io.Closer.
type Collector struct {
	opts Options
	log  *slog.Logger

	runq *runqlat.Probe
	bio  *blockio.Probe
	pf   *pagefault.Probe
	sys  *syscalls.Probe
	cg   *bpf.CgroupResolver

	status []ProbeStatus

	mu         sync.Mutex // guards procs and errors
	procs      map[int]*proc
	lastScan   time.Time
	probeErrs  map[string]uint64
	devNames   map[blockio.Dev]string
	readers    sync.WaitGroup
	slow       []*slowReader
	closed     bool
	lastErrMsg map[string]string
}

// proc is one selected process.
type proc struct {
	info       procinfo.Info
	labels     labels.Labels // pid, comm, container_id, pod_uid
	cuda       *cuda.Probe
	cudaTried  bool // found no CUDA library yet: retried every rescan
	gil        *gil.Probe
	gilExact   bool
	gilSkipped bool // not a Python process, or the probe failed: not retried
}

// Open loads the probes opts enables. A probe that fails to load is left
// out and reported in Status; Open itself fails only when probes were
// asked for and none loaded.
func Open(opts Options) (*Collector, error) {
	if opts.RescanInterval <= 0 {
		opts.RescanInterval = defaultRescanInterval
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Collector{
		opts: opts, log: log, procs: map[int]*proc{}, probeErrs: map[string]uint64{},
		devNames: map[blockio.Dev]string{}, lastErrMsg: map[string]string{},
	}
	note := func(name string, err error) {
		c.status = append(c.status, ProbeStatus{Name: name, Loaded: err == nil, Err: err})
	}
	var err error
	asked := 0
	slowOn := opts.Slow != nil && opts.SlowEvents > 0
	if opts.RunQueue {
		asked++
		ro := runqlat.DefaultOptions()
		if slowOn {
			ro.SlowEvents = opts.SlowEvents
		}
		c.runq, err = runqlat.Load(ro)
		note(probeRunQueue, err)
		if err == nil && opts.PerCgroup {
			if c.cg, err = bpf.NewCgroupResolver(""); err != nil {
				log.Warn("ebpf: no cgroup v2 hierarchy; per-cgroup series carry the cgroup id only", "err", err)
			}
		}
	}
	if opts.BlockIO {
		asked++
		c.bio, err = blockio.Load(blockio.DefaultOptions())
		note(probeBlockIO, err)
	}
	if opts.PageFault {
		asked++
		c.pf, err = pagefault.Load(pagefault.DefaultOptions())
		note(probePageFault, err)
	}
	if opts.Syscalls {
		asked++
		so := syscalls.DefaultOptions()
		if slowOn {
			so.SlowEvents = opts.SlowEvents
		}
		c.sys, err = syscalls.Load(so)
		note(probeSyscalls, err)
	}
	// CUDA and GIL probes attach per process, at the first rescan.
	loaded := 0
	for _, s := range c.status {
		if s.Loaded {
			loaded++
		}
	}
	if asked > 0 && loaded == 0 && !opts.CUDA && !opts.GIL {
		c.Close()
		return nil, fmt.Errorf("ebpf: no probe loaded: %w", errors.Join(statusErrs(c.status)...))
	}
	c.startSlow()
	return c, nil
}

func statusErrs(ss []ProbeStatus) []error {
	var out []error
	for _, s := range ss {
		if s.Err != nil {
			out = append(out, fmt.Errorf("%s: %w", s.Name, s.Err))
		}
	}
	return out
}

// Status reports the node-wide probes (CUDA and GIL attach per process and
// are counted in ProbeErrors).
func (c *Collector) Status() []ProbeStatus { return c.status }

// ProbeErrors returns failures per probe since Open (load failures of
// per-process probes, map read errors).
func (c *Collector) ProbeErrors() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]uint64, len(c.probeErrs))
	for k, v := range c.probeErrs {
		out[k] = v
	}
	return out
}

// Name implements collect.Collector.
func (c *Collector) Name() string { return "ebpf" }

// fail counts an error of a probe and logs it when its message changed.
// The caller holds mu.
func (c *Collector) failLocked(probe string, err error) {
	c.probeErrs[probe]++
	if msg := err.Error(); c.lastErrMsg[probe] != msg {
		c.lastErrMsg[probe] = msg
		c.log.Warn("ebpf: probe error", "probe", probe, "err", err)
	}
}

// Collect rescans processes when due and reads every probe.
func (c *Collector) Collect(_ context.Context, now time.Time, dst []collect.Series) ([]collect.Series, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return dst, errors.New("ebpf: collector closed")
	}
	if c.lastScan.IsZero() || now.Sub(c.lastScan) >= c.opts.RescanInterval {
		c.rescanLocked()
		c.lastScan = now
	}
	c.clearStacksLocked()
	t := collect.Millis(now)
	var errs []error
	for _, read := range []func(int64, []collect.Series) ([]collect.Series, error){
		c.readRunQueue, c.readBlockIO, c.readPageFaults, c.readSyscalls, c.readCUDA, c.readGIL,
	} {
		var err error
		dst, err = read(t, dst)
		if err != nil {
			errs = append(errs, err)
		}
	}
	dst = append(dst, collect.Series{
		Labels:  labels.FromStrings(model.MetricNameLabel, MetricWatchedProcs),
		Meta:    metadata.Metadata{Type: model.MetricTypeGauge, Help: "Processes the agent's selector picked for per-process series."},
		Samples: []collect.Sample{{T: t, V: float64(len(c.procs))}},
	})
	return dst, errors.Join(errs...)
}

// rescanLocked follows the selected processes: new ones are watched and
// get uprobes, gone ones are forgotten. The caller holds mu.
func (c *Collector) rescanLocked() {
	if c.opts.Selector.Empty() {
		return
	}
	infos, err := c.opts.Procs.Scan(c.opts.Selector)
	if err != nil {
		c.failLocked("procs", err)
		return
	}
	self := os.Getpid()
	seen := map[int]bool{}
	for _, in := range infos {
		if in.PID == self {
			continue // the agent's own syscalls would feed back into its series
		}
		seen[in.PID] = true
		p := c.procs[in.PID]
		if p == nil {
			p = &proc{info: in, labels: procLabels(in)}
			c.procs[in.PID] = p
			c.watchLocked(in.PID)
		}
		c.attachLocked(p)
	}
	for pid, p := range c.procs {
		if !seen[pid] {
			c.forgetLocked(pid, p)
		}
	}
}

func procLabels(in procinfo.Info) labels.Labels {
	b := labels.NewScratchBuilder(4)
	b.Add("pid", strconv.Itoa(in.PID))
	if in.Comm != "" {
		b.Add("comm", in.Comm)
	}
	if in.Container.ID != "" {
		b.Add("container_id", in.Container.ID)
	}
	if in.Container.PodUID != "" {
		b.Add("pod_uid", in.Container.PodUID)
	}
	b.Sort()
	return b.Labels()
}

func (c *Collector) watchLocked(pid int) {
	if c.runq != nil {
		if err := c.runq.Watch(pid); err != nil {
			c.failLocked(probeRunQueue, err)
		}
	}
	if c.pf != nil {
		if err := c.pf.Watch(pid); err != nil {
			c.failLocked(probePageFault, err)
		}
	}
	if c.sys != nil {
		if err := c.sys.Watch(pid); err != nil {
			c.failLocked(probeSyscalls, err)
		}
	}
}

func (c *Collector) forgetLocked(pid int, p *proc) {
	if c.runq != nil {
		_ = c.runq.Unwatch(pid)
	}
	if c.pf != nil {
		_ = c.pf.Unwatch(pid)
	}
	if c.sys != nil {
		_ = c.sys.Unwatch(pid)
		_ = c.sys.Forget(pid)
	}
	if p.cuda != nil {
		_ = p.cuda.Close()
	}
	if p.gil != nil {
		_ = p.gil.Close()
	}
	delete(c.procs, pid)
}

// attachLocked puts CUDA and GIL uprobes on a selected process once its
// libraries are mapped.
func (c *Collector) attachLocked(p *proc) {
	pid := p.info.PID
	if c.opts.CUDA && p.cuda == nil {
		libs, err := cuda.FindLibraries(pid)
		switch {
		case err != nil:
			c.failLocked(probeCUDA, err)
		case len(libs) > 0:
			pr, err := cuda.Load(cuda.Options{Paths: libs, PID: pid, Symbols: c.opts.CUDASymbols})
			if err != nil {
				c.failLocked(probeCUDA, fmt.Errorf("pid %d: %w", pid, err))
				break
			}
			p.cuda = pr
			c.log.Info("ebpf: CUDA uprobes attached", "pid", pid, "comm", p.info.Comm, "libraries", libs, "missing", pr.Missing())
			c.readers.Add(1)
			go c.readEvents(uint32(pid), pr)
		}
		p.cudaTried = true
	}
	if c.opts.GIL && p.gil == nil && !p.gilSkipped {
		p.gilSkipped = true
		path, err := gil.FindPython(pid)
		if err != nil {
			return
		}
		pr, err := gil.Load(gil.Options{Path: path, PID: pid})
		if errors.Is(err, gil.ErrNoGILSymbol) {
			return // not a Python process
		}
		if err != nil {
			c.failLocked(probeGIL, fmt.Errorf("pid %d: %w", pid, err))
			return
		}
		p.gil, p.gilExact = pr, pr.Exact()
		c.log.Info("ebpf: GIL uprobes attached", "pid", pid, "comm", p.info.Comm, "symbols", pr.Symbols(), "exact", pr.Exact())
	}
}

// readEvents hands CUDA events to the evidence sink until the probe is
// closed.
func (c *Collector) readEvents(pid uint32, pr *cuda.Probe) {
	defer c.readers.Done()
	var ev cuda.Event
	for {
		err := pr.Read(&ev)
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			c.mu.Lock()
			c.failLocked(probeCUDA, err)
			c.mu.Unlock()
			continue
		}
		if c.opts.OnCUDACall != nil {
			c.opts.OnCUDACall(pid, &ev)
		}
	}
}

// Close detaches every probe and waits for the event readers.
func (c *Collector) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	var errs []error
	for pid, p := range c.procs {
		if p.cuda != nil {
			errs = append(errs, p.cuda.Close())
		}
		if p.gil != nil {
			errs = append(errs, p.gil.Close())
		}
		delete(c.procs, pid)
	}
	for _, cl := range []interface{ Close() error }{c.runq, c.bio, c.pf, c.sys} {
		if cl != nil && !isNilProbe(cl) {
			errs = append(errs, cl.Close())
		}
	}
	c.mu.Unlock()
	c.readers.Wait()
	return errors.Join(errs...)
}

// isNilProbe reports whether an interface holds a nil probe pointer.
func isNilProbe(cl interface{ Close() error }) bool {
	switch p := cl.(type) {
	case *runqlat.Probe:
		return p == nil
	case *blockio.Probe:
		return p == nil
	case *pagefault.Probe:
		return p == nil
	case *syscalls.Probe:
		return p == nil
	}
	return false
}
