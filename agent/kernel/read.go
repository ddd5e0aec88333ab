package kernel

import (
	"fmt"
	"strconv"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"

	"github.com/tailroot/tailroot/agent/collect"
	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/cuda"
)

// HistSeries converts a BPF histogram into one native-histogram sample,
// or reports false when the histogram is empty.
func HistSeries(name string, ls labels.Labels, md metadata.Metadata, h *bpf.Hist, t int64) (collect.Series, bool) {
	if h.Count() == 0 {
		return collect.Series{}, false
	}
	return collect.Series{
		Labels:     withName(name, ls),
		Meta:       md,
		Histograms: []collect.HistogramSample{{T: t, H: h.Native()}},
	}, true
}

// CounterSeries is one float sample of a counter or gauge.
func CounterSeries(name string, ls labels.Labels, md metadata.Metadata, v float64, t int64) collect.Series {
	return collect.Series{Labels: withName(name, ls), Meta: md, Samples: []collect.Sample{{T: t, V: v}}}
}

func withName(name string, ls labels.Labels) labels.Labels {
	b := labels.NewBuilder(ls)
	b.Set(model.MetricNameLabel, name)
	return b.Labels()
}

func with(ls labels.Labels, kv ...string) labels.Labels {
	b := labels.NewBuilder(ls)
	for i := 0; i+1 < len(kv); i += 2 {
		b.Set(kv[i], kv[i+1])
	}
	return b.Labels()
}

// CgroupLabels labels a cgroup: its path and, when the path names them,
// the container id and pod UID.
func CgroupLabels(path string) labels.Labels {
	b := labels.NewScratchBuilder(3)
	b.Add("cgroup", path)
	if ct, ok := bpf.ParseCgroupPath(path); ok {
		if ct.ID != "" {
			b.Add("container_id", ct.ID)
		}
		if ct.PodUID != "" {
			b.Add("pod_uid", ct.PodUID)
		}
	}
	b.Sort()
	return b.Labels()
}

func (c *Collector) readRunQueue(t int64, dst []collect.Series) ([]collect.Series, error) {
	if c.runq == nil {
		return dst, nil
	}
	if c.opts.PerCgroup {
		hs, err := c.runq.CgroupRunQueue()
		if err != nil {
			c.failLocked(probeRunQueue, err)
			return dst, err
		}
		md := metaHist("Scheduler run-queue delay (runnable to running) of the tasks of a cgroup.")
		for id, h := range hs {
			path := "id:" + strconv.FormatUint(id, 10)
			if c.cg != nil {
				if p, err := c.cg.Path(id); err == nil {
					path = p
				}
			}
			if s, ok := HistSeries(MetricRunQueue, CgroupLabels(path), md, &h, t); ok {
				dst = append(dst, s)
			}
		}
	}
	for _, m := range []struct {
		name, help string
		read       func() (map[uint32]bpf.Hist, error)
	}{
		{MetricProcRunQueue, "Scheduler run-queue delay of the threads of a selected process.", c.runq.PIDRunQueue},
		{MetricOffCPU, "Off-CPU time (switched out to switched in) of the threads of a selected process.", c.runq.PIDOffCPU},
	} {
		hs, err := m.read()
		if err != nil {
			c.failLocked(probeRunQueue, err)
			return dst, err
		}
		for pid, h := range hs {
			p := c.procs[int(pid)]
			if p == nil {
				continue
			}
			if s, ok := HistSeries(m.name, p.labels, metaHist(m.help), &h, t); ok {
				dst = append(dst, s)
			}
		}
	}
	return dst, nil
}

func (c *Collector) readBlockIO(t int64, dst []collect.Series) ([]collect.Series, error) {
	if c.bio == nil {
		return dst, nil
	}
	disks, err := c.bio.Disks()
	if err != nil {
		c.failLocked(probeBlockIO, err)
		return dst, err
	}
	for dev, st := range disks {
		name, ok := c.devNames[dev]
		if !ok {
			name = dev.Name()
			c.devNames[dev] = name
		}
		ls := labels.FromStrings("dev", dev.String())
		if name != "" {
			ls = with(ls, "device", name)
		}
		if s, ok := HistSeries(MetricBlockLatency, ls, metaHist("Block IO latency from issue to the device to completion."), &st.Latency, t); ok {
			dst = append(dst, s)
		}
		dst = append(dst,
			CounterSeries(MetricBlockInFlight, ls, metadata.Metadata{Type: model.MetricTypeGauge, Help: "Block requests issued and not yet completed (counted from agent start)."}, float64(max(st.InFlight, 0)), t),
			CounterSeries(MetricBlockBytes, ls, metaCounter("Bytes of completed block requests."), float64(st.Bytes), t),
			CounterSeries(MetricBlockErrors, ls, metaCounter("Block requests completed with an error."), float64(st.Errors), t),
		)
		for _, op := range []struct {
			op string
			n  uint64
		}{{"read", st.ReadOps}, {"write", st.WriteOps}, {"other", st.OtherOps}} {
			dst = append(dst, CounterSeries(MetricBlockCompleted, with(ls, "op", op.op), metaCounter("Completed block requests by operation."), float64(op.n), t))
		}
	}
	return dst, nil
}

func (c *Collector) readPageFaults(t int64, dst []collect.Series) ([]collect.Series, error) {
	if c.pf == nil || len(c.procs) == 0 {
		return dst, nil
	}
	watched, err := c.pf.Watched()
	if err != nil {
		c.failLocked(probePageFault, err)
		return dst, err
	}
	for pid, p := range c.procs {
		n, err := c.pf.Fault(pid)
		if err != nil {
			c.failLocked(probePageFault, err)
			continue
		}
		dst = append(dst, CounterSeries(MetricPageFaults, p.labels, metaCounter("User page faults of a selected process."), float64(n), t))
		if st, ok := watched[uint32(pid)]; ok {
			md := metaCounter("User page faults of a selected process by kind; a fault can be of several kinds.")
			dst = append(dst,
				CounterSeries(MetricPageFaultsKind, with(p.labels, "kind", "write"), md, float64(st.Write), t),
				CounterSeries(MetricPageFaultsKind, with(p.labels, "kind", "instruction"), md, float64(st.Instr), t),
				CounterSeries(MetricPageFaultsKind, with(p.labels, "kind", "protection"), md, float64(st.Prot), t),
			)
		}
	}
	return dst, nil
}

func (c *Collector) readSyscalls(t int64, dst []collect.Series) ([]collect.Series, error) {
	if c.sys == nil || len(c.procs) == 0 {
		return dst, nil
	}
	stats, err := c.sys.Stats()
	if err != nil {
		c.failLocked(probeSyscalls, err)
		return dst, err
	}
	for k, st := range stats {
		p := c.procs[int(k.PID)]
		if p == nil {
			continue
		}
		ls := with(p.labels, "syscall", SyscallName(k.Nr))
		if s, ok := HistSeries(MetricSyscallLatency, ls, metaHist("System call latency (entry to exit) of a selected process."), &st.Latency, t); ok {
			dst = append(dst, s)
			dst = append(dst, CounterSeries(MetricSyscallErrors, ls, metaCounter("System calls of a selected process that returned an error."), float64(st.Errors), t))
		}
	}
	return dst, nil
}

func (c *Collector) readCUDA(t int64, dst []collect.Series) ([]collect.Series, error) {
	for pid, p := range c.procs {
		if p.cuda == nil {
			continue
		}
		hs, err := p.cuda.Hists()
		if err != nil {
			c.failLocked(probeCUDA, fmt.Errorf("pid %d: %w", pid, err))
			continue
		}
		for k, h := range hs {
			if int(k.PID) != pid {
				continue
			}
			ls := with(p.labels, "symbol", cuda.Symbol(k.Symbol).String())
			if s, ok := HistSeries(MetricCUDACall, ls, metaHist("CUDA API call duration (entry to return) of a selected process."), &h, t); ok {
				dst = append(dst, s)
			}
		}
		if n, err := p.cuda.Dropped(); err == nil {
			dst = append(dst, CounterSeries(MetricCUDADropped, p.labels, metaCounter("CUDA call events lost to a full ring buffer (histograms still count them)."), float64(n), t))
		}
	}
	return dst, nil
}

func (c *Collector) readGIL(t int64, dst []collect.Series) ([]collect.Series, error) {
	for pid, p := range c.procs {
		if p.gil == nil {
			continue
		}
		hs, err := p.gil.Waits()
		if err != nil {
			c.failLocked(probeGIL, fmt.Errorf("pid %d: %w", pid, err))
			continue
		}
		mode := "fallback"
		if p.gilExact {
			mode = "exact"
		}
		if h, ok := hs[uint32(pid)]; ok {
			ls := with(p.labels, "mode", mode)
			if s, ok := HistSeries(MetricGILWait, ls, metaHist("Time a thread of a selected CPython process waited to take the GIL."), &h, t); ok {
				dst = append(dst, s)
			}
		}
	}
	return dst, nil
}
