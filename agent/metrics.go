package agent

import (
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var readFile = os.ReadFile

// metrics are the agent's own series, served on Handler.
type metrics struct {
	collections     *prometheus.CounterVec
	collectErrors   *prometheus.CounterVec
	collectDuration *prometheus.HistogramVec
	collectSeries   *prometheus.GaugeVec
	queuedSamples   prometheus.Counter
	lostSamples     prometheus.Counter
	evidence        *prometheus.CounterVec
	evidenceDropped prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, a *Agent) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		collections: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_agent_collections_total", Help: "Collections run, by collector.",
		}, []string{"collector"}),
		collectErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_agent_collection_errors_total", Help: "Collections that failed (fully or partly), by collector.",
		}, []string{"collector"}),
		collectDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tailroot_agent_collection_duration_seconds", Help: "Time one collection took.",
			NativeHistogramBucketFactor: 1.1, Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"collector"}),
		collectSeries: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tailroot_agent_collection_series", Help: "Series returned by the last collection.",
		}, []string{"collector"}),
		queuedSamples: f.NewCounter(prometheus.CounterOpts{
			Name: "tailroot_agent_queued_samples_total", Help: "Samples and histograms written to the disk queue.",
		}),
		lostSamples: f.NewCounter(prometheus.CounterOpts{
			Name: "tailroot_agent_lost_samples_total", Help: "Samples that could not be written to the disk queue (disk error, oversized series).",
		}),
		evidence: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_agent_evidence_items_total", Help: "Evidence items pushed, by outcome.",
		}, []string{"outcome"}),
		evidenceDropped: f.NewCounter(prometheus.CounterOpts{
			Name: "tailroot_agent_evidence_calls_dropped_total", Help: "CUDA calls left out of timelines because too many processes made calls in one interval.",
		}),
	}
	q := a.q
	gauge := func(name, help string, fn func() float64) {
		f.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn)
	}
	counter := func(name, help string, fn func() float64) {
		f.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn)
	}
	gauge("tailroot_agent_queue_bytes", "Size of the disk queue's segment files.", func() float64 { return float64(q.Stats().Bytes) })
	gauge("tailroot_agent_queue_segments", "Segment files in the disk queue.", func() float64 { return float64(q.Stats().Segments) })
	gauge("tailroot_agent_queue_pending_requests", "Remote-write requests in the queue not yet acknowledged by the server (queue depth).", func() float64 { return float64(q.Stats().Pending) })
	gauge("tailroot_agent_queue_pending_bytes", "Bytes of those requests.", func() float64 { return float64(q.Stats().PendingBytes) })
	counter("tailroot_agent_queue_dropped_requests_total", "Unsent requests deleted because the queue reached queue.max_bytes.", func() float64 { return float64(q.Stats().DroppedRecords) })
	counter("tailroot_agent_queue_dropped_bytes_total", "Bytes of those requests.", func() float64 { return float64(q.Stats().DroppedBytes) })
	counter("tailroot_agent_queue_corrupt_requests_total", "Requests lost to on-disk corruption.", func() float64 { return float64(q.Stats().CorruptRecords) })
	reg.MustRegister(&probeCollector{a: a})
	return m
}

func (m *metrics) observeCollection(name string, d time.Duration, series int, err error) {
	m.collections.WithLabelValues(name).Inc()
	m.collectDuration.WithLabelValues(name).Observe(d.Seconds())
	m.collectSeries.WithLabelValues(name).Set(float64(series))
	if err != nil {
		m.collectErrors.WithLabelValues(name).Inc()
	}
}

// probeCollector exports the state of the eBPF probes and the GPU
// sampler, read when /metrics is scraped.
type probeCollector struct{ a *Agent }

var (
	descProbeLoaded = prometheus.NewDesc("tailroot_agent_probe_loaded", "1 when the eBPF probe is attached.", []string{"probe"}, nil)
	descProbeErrors = prometheus.NewDesc("tailroot_agent_probe_errors_total", "eBPF probe failures (per-process attach failures, map read errors).", []string{"probe"}, nil)
	descGPUDropped  = prometheus.NewDesc("tailroot_agent_gpu_samples_dropped_total", "GPU samples dropped because the buffer between collections was full.", nil, nil)
	descGPUErrors   = prometheus.NewDesc("tailroot_agent_gpu_errors_total", "Failed GPU backend reads.", nil, nil)
	descSlowDropped = prometheus.NewDesc("tailroot_agent_slow_events_dropped_total", "Slow events (with stacks) the kernel could not send because the ring buffer was full.", nil, nil)
	descStacksLost  = prometheus.NewDesc("tailroot_agent_evidence_stacks_lost_total", "Stacks of kept slow events that could not be read (not captured, or cleared before being read).", nil, nil)
)

func (p *probeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descProbeLoaded
	ch <- descProbeErrors
	ch <- descGPUDropped
	ch <- descGPUErrors
	ch <- descSlowDropped
	ch <- descStacksLost
}

func (p *probeCollector) Collect(ch chan<- prometheus.Metric) {
	if k := p.a.kern; k != nil {
		for _, s := range k.Status() {
			v := 0.0
			if s.Loaded {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descProbeLoaded, prometheus.GaugeValue, v, s.Name)
		}
		for name, n := range k.ProbeErrors() {
			ch <- prometheus.MustNewConstMetric(descProbeErrors, prometheus.CounterValue, float64(n), name)
		}
		if p.a.stacks != nil {
			st := k.SlowStats()
			ch <- prometheus.MustNewConstMetric(descSlowDropped, prometheus.CounterValue, float64(st.Dropped))
			ch <- prometheus.MustNewConstMetric(descStacksLost, prometheus.CounterValue, float64(st.StacksLost))
		}
	}
	if g := p.a.gpuColl; g != nil {
		st := g.Stats()
		ch <- prometheus.MustNewConstMetric(descGPUDropped, prometheus.CounterValue, float64(st.Dropped))
		ch <- prometheus.MustNewConstMetric(descGPUErrors, prometheus.CounterValue, float64(st.Errors))
	}
}
