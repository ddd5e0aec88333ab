// Package agent is tailroot-agent: it runs the collectors (eBPF probes,
// GPU telemetry, scrapes), batches what they produce, writes each batch to
// a disk queue as one remote-write 2.0 request and ships the queue to
// tailroot.
//
// In: a config.Config. Out: remote-write requests to {server}/api/v1/write,
// evidence to {server}/api/v1/evidence, and the agent's own metrics on
// Handler. Invariants: a batch is in the queue before its samples are
// dropped from memory, so what the agent collected survives a server
// outage and an agent restart (a crash loses at most one flush interval);
// requests leave the queue in order; parts that cannot run here (no GPU, no
// BTF, not root) are logged once and skipped, the rest runs.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/agent/collect"
	"github.com/tailroot/tailroot/agent/config"
	"github.com/tailroot/tailroot/agent/evidence"
	"github.com/tailroot/tailroot/agent/gpu"
	"github.com/tailroot/tailroot/agent/kernel"
	"github.com/tailroot/tailroot/agent/procinfo"
	"github.com/tailroot/tailroot/agent/queue"
	"github.com/tailroot/tailroot/agent/remote"
	"github.com/tailroot/tailroot/agent/rw"
	"github.com/tailroot/tailroot/agent/scrape"
	"github.com/tailroot/tailroot/agent/symbolize"
	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/cuda"
)

// Scheduled is a collector with its collection interval.
type Scheduled struct {
	Collector collect.Collector
	Interval  time.Duration
}

// Options configure an Agent. Config is required; the rest may be zero.
type Options struct {
	Config config.Config
	// Logger; nil discards.
	Logger *slog.Logger
	// Registry receives the agent's own metrics; nil means a new one.
	Registry *prometheus.Registry
	// Extra collectors run besides the configured ones.
	Extra []Scheduled
	// GPUBackend replaces the configured GPU backend (go-nvml mocks in
	// tests). Nil opens the configured one.
	GPUBackend gpu.Backend
}

// Agent is one running tailroot-agent.
type Agent struct {
	cfg  config.Config
	log  *slog.Logger
	reg  *prometheus.Registry
	m    *metrics
	q    *queue.Queue
	ship *remote.Shipper
	// http is the client of every push to the server (remote write, evidence).
	http *http.Client

	sched   []Scheduled
	runners []collect.Runner
	closers []func() error

	kern     *kernel.Collector
	gpuColl  *gpu.Collector
	timeline *evidence.Timeline
	stacks   *evidence.Stacks
	evClient *evidence.Client
	procs    procinfo.Reader

	mu    sync.Mutex // guards batch and enc
	batch *collect.Batch
	enc   rw.Encoder
	body  []byte
}

// New opens the queue and every configured collector. Collectors that
// cannot run on this node are logged once and left out.
func New(opts Options) (*Agent, error) {
	cfg := opts.Config
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	a := &Agent{cfg: cfg, log: log, reg: reg}
	fsync, err := queue.ParseFsyncPolicy(cfg.Queue.Fsync)
	if err != nil {
		return nil, err
	}
	a.q, err = queue.Open(cfg.Queue.Dir, queue.Options{
		MaxBytes: int64(cfg.Queue.MaxBytes), SegmentBytes: int64(cfg.Queue.SegmentBytes),
		Fsync: fsync, FsyncInterval: cfg.Queue.FsyncInterval.D(), Logger: log,
	})
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, a.q.Close)
	if st := a.q.Stats(); st.Pending > 0 {
		log.Info("queue: resuming with unsent requests from a previous run", "records", st.Pending, "bytes", st.PendingBytes)
	}
	httpClient, err := cfg.Server.HTTPClient()
	if err != nil {
		a.q.Close()
		return nil, err
	}
	a.http = httpClient
	client, err := remote.NewClient(remote.Options{
		URL:     strings.TrimSuffix(cfg.Server.URL, "/") + "/api/v1/write",
		Timeout: cfg.Server.Timeout.D(), Headers: cfg.Server.Headers,
		Username: cfg.Server.Username, Password: password(cfg.Server.PasswordFile, log),
		HTTP: httpClient,
	})
	if err != nil {
		a.q.Close()
		return nil, err
	}
	a.ship = remote.NewShipper(a.q, client, remote.ShipperOptions{
		MinBackoff: cfg.Queue.MinBackoff.D(), MaxBackoff: cfg.Queue.MaxBackoff.D(),
		MaxRetryAfter: cfg.Queue.MaxRetryAfter.D(), Logger: log, Registerer: reg,
	})
	ext := map[string]string{"node": cfg.Node}
	for k, v := range cfg.ExternalLabels {
		ext[k] = v
	}
	a.batch = collect.NewBatch(labels.FromMap(ext))
	a.m = newMetrics(reg, a)

	for _, t := range cfg.Scrape.Targets {
		s, err := scrape.New(scrape.Options{Job: t.Job, URL: t.URL, Timeout: t.Timeout.D(), Labels: t.Labels, HonorLabels: t.HonorLabels})
		if err != nil {
			a.closeAll()
			return nil, err
		}
		a.sched = append(a.sched, Scheduled{Collector: s, Interval: t.Interval.D()})
	}
	a.openGPU(opts.GPUBackend)
	a.openEBPF()
	a.sched = append(a.sched, opts.Extra...)
	return a, nil
}

func password(file string, log *slog.Logger) string {
	if file == "" {
		return ""
	}
	b, err := readFile(file)
	if err != nil {
		log.Error("server.password_file unreadable; sending no password", "file", file, "err", err)
		return ""
	}
	return strings.TrimSpace(string(b))
}

// openGPU opens the GPU backend. Without one it logs a single line and
// the agent runs on.
func (a *Agent) openGPU(b gpu.Backend) {
	if !a.cfg.GPU.On() {
		return
	}
	if b == nil {
		var err error
		b, err = gpu.Open(a.cfg.GPU.Backend, a.cfg.GPU.LibraryPath)
		if err != nil {
			a.log.Warn("gpu: telemetry disabled: "+err.Error(), "backend", a.cfg.GPU.Backend)
			return
		}
	}
	c := gpu.NewCollector(b, gpu.Options{
		SampleInterval: a.cfg.GPU.SampleInterval.D(), ProcessInterval: a.cfg.GPU.ProcessInterval.D(),
		Hostname: a.cfg.Node, Logger: a.log,
	})
	a.gpuColl = c
	a.sched = append(a.sched, Scheduled{Collector: c, Interval: a.cfg.GPU.Interval.D()})
	a.runners = append(a.runners, c)
	a.closers = append(a.closers, b.Close)
	a.log.Info("gpu: sampling", "backend", b.Name(), "devices", len(b.Devices()), "interval", a.cfg.GPU.SampleInterval.D())
}

// openEBPF loads the configured probes; each that fails is logged once.
func (a *Agent) openEBPF() {
	e := a.cfg.EBPF
	if !e.On() {
		return
	}
	sel := procinfo.Selector{Comm: a.cfg.Procs.CommRegexps(), PIDs: a.cfg.Procs.PIDs, Cgroups: a.cfg.Procs.Cgroups}
	opts := kernel.Options{
		RunQueue: e.RunQueue.On(), PerCgroup: e.PerCgroup(), BlockIO: e.BlockIO.On(), PageFault: e.PageFault.On(),
		Syscalls: e.Syscalls.On(), CUDA: e.CUDA.On(), GIL: e.GIL.On(), CUDASymbols: e.CUDA.Symbols,
		Selector: sel, RescanInterval: a.cfg.Procs.RescanInterval.D(), Logger: a.log,
	}
	if a.cfg.Evidence.On() {
		a.evClient = &evidence.Client{URL: a.cfg.Evidence.URL, Headers: a.cfg.Server.Headers, HTTP: a.http}
		if opts.CUDA {
			clock, err := bpf.NewClock()
			if err == nil {
				a.timeline = evidence.NewTimeline(a.cfg.Evidence.TopN, a.cfg.Evidence.MaxProcesses)
				a.timeline.Info = a.processInfo
				opts.OnCUDACall = func(pid uint32, ev *cuda.Event) { a.timeline.Add(pid, evidence.CallFromEvent(ev, clock)) }
			} else {
				a.log.Warn("evidence: no clock; CUDA timelines disabled", "err", err)
			}
		}
		if minLat := a.cfg.Evidence.StackMinLatency.D(); minLat > 0 && (opts.RunQueue || opts.Syscalls) {
			// One heap per probe: offcpu, runqueue, syscalls.
			a.stacks = evidence.NewStacks(a.cfg.Evidence.TopN, 3)
			a.stacks.Info = a.processInfo
			a.stacks.Symbolizer = &symbolize.Symbolizer{}
			a.stacks.Kallsyms = func() (*symbolize.Kallsyms, error) {
				k, err := evidence.ReadKallsyms()
				if err != nil {
					a.log.Warn("evidence: kernel frames stay unsymbolized", "err", err)
				}
				return k, err
			}
			opts.SlowEvents, opts.Slow = minLat, a.stacks
		}
	}
	k, err := kernel.Open(opts)
	if err != nil {
		a.log.Warn("ebpf: kernel probes disabled: "+err.Error(), "hint", "needs root and a kernel with BTF")
		a.timeline, a.stacks = nil, nil
		return
	}
	for _, s := range k.Status() {
		if s.Loaded {
			a.log.Info("ebpf: probe loaded", "probe", s.Name)
		} else {
			a.log.Warn("ebpf: probe not loaded", "probe", s.Name, "err", s.Err)
		}
	}
	if sel.Empty() && (opts.CUDA || opts.GIL) {
		a.log.Info("ebpf: no processes selected (processes.comm/pids/cgroups); per-process series, CUDA and GIL probes are off")
	}
	a.kern = k
	a.sched = append(a.sched, Scheduled{Collector: k, Interval: e.Interval.D()})
	a.closers = append(a.closers, k.Close)
}

// Handler serves the agent's own metrics at /metrics and a liveness
// check at /-/healthy.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	return mux
}

// QueueStats returns the queue's counters.
func (a *Agent) QueueStats() queue.Stats { return a.q.Stats() }

// Run collects and ships until ctx is done, then stops the collectors
// (letting a collection in progress finish), writes the last batch to the
// queue and closes everything. The queue keeps what was not yet sent.
func (a *Agent) Run(ctx context.Context) error {
	defer a.closeAll()
	shipCtx, stopShip := context.WithCancel(context.Background())
	shipDone := make(chan error, 1)
	go func() { shipDone <- a.ship.Run(shipCtx) }()

	runCtx, stopRunners := context.WithCancel(context.Background())
	var runners sync.WaitGroup
	for _, r := range a.runners {
		runners.Add(1)
		go func() {
			defer runners.Done()
			if err := r.Run(runCtx); err != nil {
				a.log.Error("collector background work failed", "err", err)
			}
		}()
	}

	stop := make(chan struct{})
	var colls sync.WaitGroup
	for _, s := range a.sched {
		colls.Add(1)
		go func() {
			defer colls.Done()
			a.collectLoop(stop, s)
		}()
	}
	colls.Add(1)
	go func() {
		defer colls.Done()
		a.flushLoop(stop)
	}()
	if a.timeline != nil || a.stacks != nil {
		colls.Add(1)
		go func() {
			defer colls.Done()
			a.evidenceLoop(stop)
		}()
	}

	<-ctx.Done()
	close(stop)
	colls.Wait()
	stopRunners()
	runners.Wait()
	ferr := a.flush()
	stopShip()
	serr := <-shipDone
	return errors.Join(ferr, serr)
}

// collectLoop runs one collector: once at start, then every interval. A
// collection in progress when stop closes is finished and kept.
func (a *Agent) collectLoop(stop <-chan struct{}, s Scheduled) {
	name := s.Collector.Name()
	var buf []collect.Series
	tick := time.NewTicker(s.Interval)
	defer tick.Stop()
	lastErr := ""
	for {
		start := time.Now()
		var err error
		// Collections are bounded by their own timeouts, not by shutdown,
		// so a scrape that reached the target is never half-recorded.
		buf, err = s.Collector.Collect(context.Background(), start, buf[:0])
		a.m.observeCollection(name, time.Since(start), len(buf), err)
		if err != nil {
			if msg := err.Error(); msg != lastErr {
				a.log.Warn("collection failed", "collector", name, "err", err)
				lastErr = msg
			}
		} else if lastErr != "" {
			a.log.Info("collection recovered", "collector", name)
			lastErr = ""
		}
		a.add(buf)
		clear(buf)
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// add puts series into the batch, flushing early when it is full.
func (a *Agent) add(ss []collect.Series) {
	a.mu.Lock()
	a.batch.Add(ss)
	full := a.batch.Samples() >= a.cfg.Queue.MaxSamplesPerRequest
	a.mu.Unlock()
	if full {
		if err := a.flush(); err != nil {
			a.log.Error("flush failed", "err", err)
		}
	}
}

func (a *Agent) flushLoop(stop <-chan struct{}) {
	tick := time.NewTicker(a.cfg.Queue.FlushInterval.D())
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if err := a.flush(); err != nil {
				a.log.Error("flush failed", "err", err)
			}
		}
	}
}

// flush encodes the batch as one remote-write request and appends it to
// the queue, splitting it when it does not fit in a segment.
func (a *Agent) flush() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.batch.Samples() == 0 {
		return nil
	}
	n := a.batch.Samples()
	err := a.appendSeries(a.batch.Series())
	a.batch.Reset()
	if err != nil {
		a.m.lostSamples.Add(float64(n))
		return fmt.Errorf("write batch of %d samples to the queue: %w", n, err)
	}
	a.m.queuedSamples.Add(float64(n))
	return nil
}

func (a *Agent) appendSeries(ss []collect.Series) error {
	var err error
	a.body, err = a.enc.Encode(a.body, ss)
	if err != nil {
		return err
	}
	err = a.q.Append(a.body)
	if errors.Is(err, queue.ErrTooLarge) && len(ss) > 1 {
		h := len(ss) / 2
		return errors.Join(a.appendSeries(ss[:h]), a.appendSeries(ss[h:]))
	}
	return err
}

// evidenceLoop pushes the CUDA timelines and the stacks of slow events
// every evidence interval. A server without the endpoint is logged once.
func (a *Agent) evidenceLoop(stop <-chan struct{}) {
	tick := time.NewTicker(a.cfg.Evidence.Interval.D())
	defer tick.Stop()
	warned := false
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			items := a.drainEvidence(now.UTC())
			if len(items) == 0 {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Evidence.Interval.D())
			err := a.evClient.Post(ctx, evidence.Batch{Node: a.cfg.Node, Evidence: items})
			cancel()
			if err != nil {
				a.m.evidence.WithLabelValues("failed").Add(float64(len(items)))
				if !warned || !errors.Is(err, evidence.ErrNotServed) {
					a.log.Warn("evidence: push failed", "err", err)
					warned = true
				}
				continue
			}
			a.m.evidence.WithLabelValues("sent").Add(float64(len(items)))
		}
	}
}

// drainEvidence ends the interval of the timeline and the stack keeper.
func (a *Agent) drainEvidence(now time.Time) []evidence.Evidence {
	var items []evidence.Evidence
	if a.timeline != nil {
		var dropped uint64
		items, dropped = a.timeline.Drain(now, a.cfg.Node)
		a.m.evidenceDropped.Add(float64(dropped))
	}
	if a.stacks != nil {
		st, _ := a.stacks.Drain(now, a.cfg.Node) // at most 3 probes: none dropped
		items = append(items, st...)
	}
	return items
}

func (a *Agent) processInfo(pid uint32) evidence.Process {
	in, err := a.procs.Lookup(int(pid))
	if err != nil {
		return evidence.Process{}
	}
	return evidence.Process{Comm: in.Comm, ContainerID: in.Container.ID, PodUID: in.Container.PodUID}
}

func (a *Agent) closeAll() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		if err := a.closers[i](); err != nil {
			a.log.Warn("close", "err", err)
		}
	}
	a.closers = nil
}

// Close releases what New opened, for an Agent that is not Run (Run
// closes everything itself).
func (a *Agent) Close() { a.closeAll() }
