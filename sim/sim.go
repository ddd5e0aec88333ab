package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
)

// Series is one series with its samples, oldest first. Step returns exactly
// one sample per series: a float sample, or for a native histogram one
// histogram sample.
type Series struct {
	Labels     labels.Labels
	Metadata   metadata.Metadata
	Samples    []Sample
	Histograms []HistogramSample
}

// Sample is a float sample; T is in milliseconds since the Unix epoch.
type Sample struct {
	T int64
	V float64
}

// HistogramSample is a native histogram sample; T is in milliseconds since
// the Unix epoch. H is not shared with the Simulator.
type HistogramSample struct {
	T int64
	H *histogram.Histogram
}

// Simulator generates the series of a fleet of vLLM servers. It is not safe
// for concurrent use.
type Simulator struct {
	opts      Options
	instances []*instance
	outputs   [][]output // per instance, in emission order
	nFloat    int
	nHist     int
	last      time.Time
}

// output is one thing an instance emits: a float value, a classic histogram
// (len(bounds)+1 bucket series, then _sum, then _count) or a native histogram.
type output struct {
	fam    *family
	val    *float64
	hist   *classicHist
	native bool
	lbls   []labels.Labels
}

// New validates opts, fills its zero fields and builds the fleet.
func New(opts Options) (*Simulator, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Simulator{opts: o}
	for mi := range o.Models {
		m := &o.Models[mi]
		for i := range o.InstancesPerModel {
			idx := len(s.instances)
			in := newInstance(m, o.Seed, idx, o.Noise, o.NativeHistograms)
			inst := fmt.Sprintf("%s-%d:8000", slug(m.Name), i)
			in.label, in.keep = inst, o.Records
			base := labels.FromStrings(
				labelEngine, "0",
				labelInstance, inst,
				labelJob, "vllm",
				labelModel, m.Name,
			)
			for _, f := range o.Faults {
				if f.Instance == idx {
					in.faults = append(in.faults, f)
				}
			}
			if o.Covariates || len(o.Faults) > 0 {
				in.host = newHost(o.Seed, idx, m, o.NativeHistograms)
			}
			s.instances = append(s.instances, in)
			outs := s.buildOutputs(in, base)
			if o.Covariates {
				outs = append(outs, s.hostOutputs(in.host, inst, m.Name)...)
			}
			s.outputs = append(s.outputs, outs)
		}
	}
	return s, nil
}

// slug turns a served model name into a host-name-like string:
// "meta-llama/Llama-3.1-8B-Instruct" → "llama-3-1-8b-instruct".
func slug(name string) string {
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

func (s *Simulator) buildOutputs(in *instance, base labels.Labels) []output {
	var outs []output
	withName := func(name string, extra ...string) labels.Labels {
		b := labels.NewBuilder(base)
		b.Set(model.MetricNameLabel, name)
		for i := 0; i+1 < len(extra); i += 2 {
			b.Set(extra[i], extra[i+1])
		}
		return b.Labels()
	}
	value := func(f *family, v *float64, extra ...string) {
		outs = append(outs, output{fam: f, val: v, lbls: []labels.Labels{withName(f.name, extra...)}})
		s.nFloat++
	}
	hist := func(f *family, h *classicHist) {
		var ls []labels.Labels
		for _, b := range h.bounds {
			ls = append(ls, withName(f.name+"_bucket", labels.BucketLabel, labels.FormatOpenMetricsFloat(b)))
		}
		ls = append(ls,
			withName(f.name+"_bucket", labels.BucketLabel, "+Inf"),
			withName(f.name+"_sum"),
			withName(f.name+"_count"))
		outs = append(outs, output{fam: f, hist: h, lbls: ls})
		s.nFloat += len(ls)
		if h.native != nil {
			outs = append(outs, output{fam: f, hist: h, native: true, lbls: []labels.Labels{withName(f.name)}})
			s.nHist++
		}
	}
	o := &s.opts

	value(famRunning, &in.running)
	value(famWaiting, &in.waiting)
	value(famKVUsage, &in.kvUsage)
	value(famPrefixQueries, &in.prefixQueries)
	value(famPrefixHits, &in.prefixHits)
	value(famPreemptions, &in.preemptions)
	value(famPromptTokens, &in.promptTokens)
	value(famGenTokens, &in.genTokens)
	for i, r := range finishReasons {
		value(famSuccess, &in.success[i], labelReason, r)
	}
	if o.DeprecatedMetrics {
		value(famGPUCacheUsage, &in.kvUsage)
		value(famGPUPrefixQueries, &in.prefixQueries)
		value(famGPUPrefixHits, &in.prefixHits)
	}
	hist(famReqPromptTokens, in.reqPromptTokens)
	hist(famReqGenTokens, in.reqGenTokens)
	hist(famReqMaxTokens, in.reqMaxTokens)
	hist(famIterTokens, in.iterTokens)
	hist(famTTFT, in.ttft)
	hist(famITL, in.itl)
	if o.DeprecatedMetrics {
		// vLLM observes the same values into both names.
		hist(famTPOT, in.itl)
	}
	hist(famReqTPOT, in.reqTPOT)
	hist(famE2E, in.e2e)
	hist(famQueue, in.queue)
	hist(famInference, in.inference)
	hist(famPrefill, in.prefill)
	hist(famDecode, in.decode)
	return outs
}

// hostOutputs are the covariate series of one instance's node: the agent's
// under job="tailroot-agent", the GPU's under job="dcgm-exporter" with
// dcgm-exporter's gpu and modelName labels. Both carry the instance and
// model_name labels of the vLLM server they serve, as a relabelling rule
// joining node and server would give them.
func (s *Simulator) hostOutputs(h *host, inst, modelName string) []output {
	agent := labels.FromStrings(labelInstance, inst, labelJob, "tailroot-agent", labelModel, modelName)
	dcgm := labels.FromStrings("gpu", "0", labelInstance, inst, labelJob, "dcgm-exporter",
		"modelName", "NVIDIA H100 80GB HBM3", labelModel, modelName)
	var outs []output
	named := func(base labels.Labels, name string, extra ...string) labels.Labels {
		b := labels.NewBuilder(base)
		b.Set(model.MetricNameLabel, name)
		for i := 0; i+1 < len(extra); i += 2 {
			b.Set(extra[i], extra[i+1])
		}
		return b.Labels()
	}
	value := func(base labels.Labels, f *family, v *float64) {
		outs = append(outs, output{fam: f, val: v, lbls: []labels.Labels{named(base, f.name)}})
		s.nFloat++
	}
	hist := func(f *family, h *classicHist) {
		var ls []labels.Labels
		for _, b := range h.bounds {
			ls = append(ls, named(agent, f.name+"_bucket", labels.BucketLabel, labels.FormatOpenMetricsFloat(b)))
		}
		ls = append(ls,
			named(agent, f.name+"_bucket", labels.BucketLabel, "+Inf"),
			named(agent, f.name+"_sum"),
			named(agent, f.name+"_count"))
		outs = append(outs, output{fam: f, hist: h, lbls: ls})
		s.nFloat += len(ls)
		if h.native != nil {
			outs = append(outs, output{fam: f, hist: h, native: true, lbls: []labels.Labels{named(agent, f.name)}})
			s.nHist++
		}
	}
	hist(famRunqueue, h.runqueue)
	hist(famGILWait, h.gilWait)
	hist(famBlockIO, h.blockIO)
	hist(famCUDACall, h.cudaCall)
	value(agent, famPageFaults, &h.pageFaults)
	value(dcgm, famSMClock, &h.smClock)
	value(dcgm, famMemClock, &h.memClock)
	value(dcgm, famGPUUtil, &h.util)
	value(dcgm, famPower, &h.power)
	value(dcgm, famFBUsed, &h.fbUsed)
	return outs
}

// NumSeries returns how many series each Step returns.
func (s *Simulator) NumSeries() int { return s.nFloat + s.nHist }

// Step advances the fleet to time t and returns every series' value at t,
// always the same series in the same order, so the results of successive
// steps can be merged by index. The span since the previous Step (one
// Interval before t for the first) is simulated in sub-steps of at most
// Interval. A t not after the previous one advances nothing and returns the
// unchanged values stamped t.
func (s *Simulator) Step(t time.Time) []Series {
	prev := s.last
	if prev.IsZero() {
		prev = t.Add(-s.opts.Interval)
	}
	for prev.Before(t) {
		end := prev.Add(s.opts.Interval)
		if end.After(t) {
			end = t
		}
		dt := end.Sub(prev).Seconds()
		mid := prev.Add(end.Sub(prev) / 2)
		for _, in := range s.instances {
			in.advance(mid, dt, &s.opts)
		}
		prev = end
	}
	if t.After(s.last) {
		s.last = t
	}
	return s.snapshot(t.UnixMilli())
}

func (s *Simulator) snapshot(ts int64) []Series {
	out := make([]Series, 0, s.NumSeries())
	floats := make([]Sample, s.nFloat)
	var hists []HistogramSample
	if s.nHist > 0 {
		hists = make([]HistogramSample, s.nHist)
	}
	addF := func(o *output, i int, v float64) {
		floats[0] = Sample{T: ts, V: v}
		out = append(out, Series{Labels: o.lbls[i], Metadata: o.fam.meta, Samples: floats[:1:1]})
		floats = floats[1:]
	}
	for _, outs := range s.outputs {
		for k := range outs {
			o := &outs[k]
			switch {
			case o.val != nil:
				addF(o, 0, *o.val)
			case o.native:
				hists[0] = HistogramSample{T: ts, H: o.hist.native.snapshot()}
				out = append(out, Series{Labels: o.lbls[0], Metadata: o.fam.meta, Histograms: hists[:1:1]})
				hists = hists[1:]
			default:
				var cum uint64
				for i, c := range o.hist.counts {
					cum += c
					addF(o, i, float64(cum))
				}
				addF(o, len(o.hist.counts), o.hist.sum)
				addF(o, len(o.hist.counts)+1, float64(o.hist.count))
			}
		}
	}
	return out
}

// familyName returns the metric family a series belongs to, for remote
// write 1.0 metadata: the histogram base name for _bucket/_sum/_count, the
// name without _total for counters (as an OpenMetrics scrape reports it).
func familyName(name string, md metadata.Metadata) string {
	switch md.Type {
	case model.MetricTypeHistogram:
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if strings.HasSuffix(name, suf) {
				return strings.TrimSuffix(name, suf)
			}
		}
	case model.MetricTypeCounter:
		return strings.TrimSuffix(name, "_total")
	}
	return name
}
