package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"

	"github.com/tailroot/tailroot/agent/collect"
	"github.com/tailroot/tailroot/agent/procinfo"
)

// Options configure a Collector. Zero values take the defaults noted.
type Options struct {
	// SampleInterval is the device sampling period. Zero means 100 ms.
	SampleInterval time.Duration
	// ProcessInterval is the per-process sampling period. Zero means 1 s.
	ProcessInterval time.Duration
	// Hostname is the dcgm-exporter "Hostname" label. Empty leaves it out.
	Hostname string
	// MaxBuffered bounds the samples held between collections; beyond it
	// new samples are dropped and counted. Zero means 200000.
	MaxBuffered int
	// Process describes a pid for per-process labels. Nil reads /proc.
	Process func(pid uint32) (procinfo.Info, error)
	// Logger; nil discards.
	Logger *slog.Logger
}

// Stats are the collector's counters.
type Stats struct {
	Samples uint64 // device sampling rounds
	Dropped uint64 // samples dropped on a full buffer
	Errors  uint64 // failed backend reads
	XIDs    uint64 // XID events seen
}

// Collector samples a Backend in the background and hands the buffered
// samples out on Collect. It implements collect.Collector and
// collect.Runner.
type Collector struct {
	b    Backend
	opts Options
	log  *slog.Logger

	devLabels []labels.Labels // per device, without __name__

	mu       sync.Mutex
	bufs     map[bufKey]*buffer
	buffered int
	lastXID  []uint64
	xidCount []map[uint64]uint64
	stats    Stats
	lastErr  string

	values []Value
	procs  []ProcessUsage
}

type bufKey struct {
	name string
	dev  int
	pid  uint32
	xid  uint64
}

type buffer struct {
	labels  labels.Labels
	meta    metadata.Metadata
	samples []collect.Sample
	proc    bool
}

// NewCollector returns a collector over b.
func NewCollector(b Backend, opts Options) *Collector {
	if opts.SampleInterval <= 0 {
		opts.SampleInterval = 100 * time.Millisecond
	}
	if opts.ProcessInterval <= 0 {
		opts.ProcessInterval = time.Second
	}
	if opts.MaxBuffered <= 0 {
		opts.MaxBuffered = 200000
	}
	if opts.Process == nil {
		r := procinfo.Reader{}
		opts.Process = func(pid uint32) (procinfo.Info, error) { return r.Lookup(int(pid)) }
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Collector{b: b, opts: opts, log: log, bufs: map[bufKey]*buffer{}}
	for _, d := range b.Devices() {
		c.devLabels = append(c.devLabels, deviceLabels(d, opts.Hostname))
		c.lastXID = append(c.lastXID, 0)
		c.xidCount = append(c.xidCount, map[uint64]uint64{})
	}
	return c
}

// deviceLabels are dcgm-exporter's labels: gpu, UUID, pci_bus_id, device,
// modelName, Hostname.
func deviceLabels(d Device, host string) labels.Labels {
	b := labels.NewScratchBuilder(6)
	b.Add("gpu", strconv.Itoa(d.Index))
	b.Add("UUID", d.UUID)
	b.Add("pci_bus_id", d.PCIBusID)
	if d.Minor >= 0 {
		b.Add("device", "nvidia"+strconv.Itoa(d.Minor))
	}
	b.Add("modelName", d.Model)
	b.Add("Hostname", host)
	b.Sort()
	ls := b.Labels()
	// Empty values mean "absent" in Prometheus; drop them.
	return labels.NewBuilder(ls).Del(emptyNames(ls)...).Labels()
}

func emptyNames(ls labels.Labels) []string {
	var out []string
	ls.Range(func(l labels.Label) {
		if l.Value == "" {
			out = append(out, l.Name)
		}
	})
	return out
}

// Name implements collect.Collector.
func (c *Collector) Name() string { return "gpu/" + c.b.Name() }

// Run samples devices every SampleInterval and processes every
// ProcessInterval, and waits for XID events, until ctx is done.
func (c *Collector) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.eventLoop(ctx)
	}()
	defer wg.Wait()
	tick := time.NewTicker(c.opts.SampleInterval)
	defer tick.Stop()
	var lastProcs time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-tick.C:
			c.sample(now)
			if now.Sub(lastProcs) >= c.opts.ProcessInterval {
				c.sampleProcesses(now)
				lastProcs = now
			}
		}
	}
}

func (c *Collector) eventLoop(ctx context.Context) {
	for ctx.Err() == nil {
		ev, ok, err := c.b.WaitEvent(500 * time.Millisecond)
		if err != nil {
			c.noteErr(err)
			continue
		}
		if !ok || ev.Device < 0 || ev.Device >= len(c.lastXID) {
			continue
		}
		c.log.Warn("gpu: XID error", "gpu", ev.Device, "xid", ev.XID)
		c.mu.Lock()
		c.lastXID[ev.Device] = ev.XID
		c.xidCount[ev.Device][ev.XID]++
		c.stats.XIDs++
		c.mu.Unlock()
	}
}

// noteErr counts a backend error and logs it when it differs from the
// last one, so a persistent failure logs once, not ten times a second.
func (c *Collector) noteErr(err error) {
	c.mu.Lock()
	c.stats.Errors++
	msg := err.Error()
	repeat := msg == c.lastErr
	c.lastErr = msg
	c.mu.Unlock()
	if !repeat {
		c.log.Warn("gpu: sampling failed", "err", err)
	}
}

// sample reads every device once and buffers the values at now.
func (c *Collector) sample(now time.Time) {
	t := collect.Millis(now)
	for i := range c.devLabels {
		var err error
		c.values, err = c.b.Sample(i, c.values[:0])
		if err != nil {
			c.noteErr(err)
		}
		c.mu.Lock()
		for _, v := range c.values {
			spec := fieldSpecs[v.Field]
			c.addLocked(bufKey{name: spec.name, dev: i}, i, nil, spec, t, v.V)
		}
		spec := fieldSpecs[XIDErrors]
		c.addLocked(bufKey{name: spec.name, dev: i}, i, nil, spec, t, float64(c.lastXID[i]))
		for xid, n := range c.xidCount[i] {
			extra := labels.FromStrings("err_code", strconv.FormatUint(xid, 10))
			c.addLocked(bufKey{name: metricXIDTotal, dev: i, xid: xid}, i, &extra,
				fieldSpec{metricXIDTotal, "", "XID errors seen by the agent, by XID code.", model.MetricTypeCounter}, t, float64(n))
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.stats.Samples++
	c.mu.Unlock()
}

var procSpecs = [3]fieldSpec{
	{metricProcSM, "", "SM utilization of a process on a GPU over the driver's last sampling window (in %).", model.MetricTypeGauge},
	{metricProcMem, "", "Memory-controller utilization of a process on a GPU (in %).", model.MetricTypeGauge},
	{metricProcFB, "bytes", "GPU memory used by a process.", model.MetricTypeGauge},
}

func (c *Collector) sampleProcesses(now time.Time) {
	t := collect.Millis(now)
	for i := range c.devLabels {
		var err error
		c.procs, err = c.b.Processes(i, c.procs[:0])
		if err != nil {
			c.noteErr(err)
		}
		for _, p := range c.procs {
			extra := c.procLabels(p.PID)
			c.mu.Lock()
			for k, v := range [3]float64{p.SMUtil, p.MemUtil, p.MemoryBytes} {
				if v < 0 {
					continue
				}
				c.addLocked(bufKey{name: procSpecs[k].name, dev: i, pid: p.PID}, i, &extra, procSpecs[k], t, v)
			}
			c.mu.Unlock()
		}
	}
}

// procLabels labels a GPU process with its pid, command and, when it runs
// in one, its container and pod.
func (c *Collector) procLabels(pid uint32) labels.Labels {
	b := labels.NewScratchBuilder(4)
	b.Add("pid", strconv.FormatUint(uint64(pid), 10))
	if in, err := c.opts.Process(pid); err == nil {
		if in.Comm != "" {
			b.Add("comm", in.Comm)
		}
		if in.Container.ID != "" {
			b.Add("container_id", in.Container.ID)
		}
		if in.Container.PodUID != "" {
			b.Add("pod_uid", in.Container.PodUID)
		}
	}
	b.Sort()
	return b.Labels()
}

// addLocked buffers one sample. The caller holds mu.
func (c *Collector) addLocked(k bufKey, dev int, extra *labels.Labels, spec fieldSpec, t int64, v float64) {
	if c.buffered >= c.opts.MaxBuffered {
		c.stats.Dropped++
		return
	}
	b := c.bufs[k]
	if b == nil {
		lb := labels.NewBuilder(c.devLabels[dev])
		lb.Set(model.MetricNameLabel, spec.name)
		if extra != nil {
			extra.Range(func(l labels.Label) { lb.Set(l.Name, l.Value) })
		}
		b = &buffer{
			labels: lb.Labels(),
			meta:   metadata.Metadata{Type: spec.typ, Unit: spec.unit, Help: spec.help},
			proc:   k.pid != 0,
		}
		c.bufs[k] = b
	}
	b.samples = append(b.samples, collect.Sample{T: t, V: v})
	c.buffered++
}

// Collect implements collect.Collector: it hands out everything sampled
// since the last call. Buffers of processes that reported nothing since
// the last call are forgotten.
func (c *Collector) Collect(_ context.Context, _ time.Time, dst []collect.Series) ([]collect.Series, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, b := range c.bufs {
		if len(b.samples) == 0 {
			if b.proc {
				delete(c.bufs, k)
			}
			continue
		}
		dst = append(dst, collect.Series{Labels: b.labels, Meta: b.meta, Samples: b.samples})
		b.samples = nil // handed over: the sampler must not write into it
	}
	c.buffered = 0
	return dst, nil
}

// Stats returns the counters.
func (c *Collector) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

// Open opens the named backend. Only "nvml" exists.
func Open(backend, libraryPath string) (Backend, error) {
	switch backend {
	case "nvml", "":
		b, err := OpenNVML(libraryPath)
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("%w: unknown backend %q", errors.ErrUnsupported, backend)
}
