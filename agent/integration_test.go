package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/agent"
	"github.com/tailroot/tailroot/agent/collect"
	"github.com/tailroot/tailroot/agent/config"
	"github.com/tailroot/tailroot/agent/gpu"
	"github.com/tailroot/tailroot/agent/queue"
	"github.com/tailroot/tailroot/agent/remote"
	"github.com/tailroot/tailroot/agent/rw"
	"github.com/tailroot/tailroot/apptest"
)

func needServer(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the tailroot binary")
	}
}

func writeClient(t *testing.T, app *apptest.App) *remote.Client {
	t.Helper()
	c, err := remote.NewClient(remote.Options{URL: app.URL + "/api/v1/write", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func encode(t *testing.T, ss []collect.Series) []byte {
	t.Helper()
	var e rw.Encoder
	b, err := e.Encode(nil, ss)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(b)
}

func testHist(count uint64) *histogram.Histogram {
	return &histogram.Histogram{
		Count: count, Sum: 0.01 * float64(count), Schema: 0, ZeroThreshold: math.Ldexp(1, -128),
		PositiveSpans: []histogram.Span{{Offset: -7, Length: 1}}, PositiveBuckets: []int64{int64(count)},
		CounterResetHint: histogram.UnknownCounterReset,
	}
}

// TestDuplicateResendIsNoOp checks the premise of the queue's delivery
// guarantee against the real server: a request sent again after a lost
// acknowledgement (same series, timestamps and values) stores nothing
// twice, for float samples and native histograms, with the out-of-order
// window on (the default, 30 m) and off.
//
// Prometheus' head accepts an identical sample at the series' newest
// timestamp as a no-op. An older resent sample goes, with the window on,
// into the out-of-order head and is deduplicated when read and compacted
// (204); with the window off it is refused as out of order (400, which the
// shipper drops: the sample is already stored). Only a different value at
// the newest timestamp is a conflict (400).
func TestDuplicateResendIsNoOp(t *testing.T) {
	needServer(t)
	for _, c := range []struct {
		name         string
		flags        []string
		resendStatus int
	}{
		{"ooo-window-30m", nil, http.StatusNoContent},
		{"ooo-window-off", []string{"--storage.tsdb.out-of-order-time-window=0s"}, http.StatusBadRequest},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := apptest.Start(t, t.TempDir(), c.flags...)
			wc := writeClient(t, app)
			t0 := time.Now().Add(-time.Minute).UnixMilli()
			ss := []collect.Series{
				{
					Labels:  labels.FromStrings("__name__", "dup_test_gauge", "node", "n1"),
					Meta:    collect.Meta(model.MetricTypeGauge, "", "test"),
					Samples: []collect.Sample{{T: t0, V: 1.5}, {T: t0 + 1000, V: 2.5}},
				},
				{
					Labels:     labels.FromStrings("__name__", "dup_test_seconds", "node", "n1"),
					Meta:       collect.Meta(model.MetricTypeHistogram, "seconds", "test"),
					Histograms: []collect.HistogramSample{{T: t0, H: testHist(3)}, {T: t0 + 1000, H: testHist(5)}},
				},
			}
			body := encode(t, ss)
			for i := range 3 {
				r := wc.Write(context.Background(), body)
				want := http.StatusNoContent
				if i > 0 {
					want = c.resendStatus
				}
				if r.Status != want || r.Outcome == remote.Retry {
					t.Fatalf("send %d: status %d (%v), want %d", i+1, r.Status, r.Err, want)
				}
			}
			at := time.Now()
			if n := app.Scalar(t, `count_over_time(dup_test_gauge[1h])`, at); n != 2 {
				t.Errorf("float samples stored: %v, want 2", n)
			}
			if n := app.Scalar(t, `count_over_time(dup_test_seconds[1h])`, at); n != 2 {
				t.Errorf("histogram samples stored: %v, want 2", n)
			}
			if s := app.Scalar(t, `sum_over_time(dup_test_gauge[1h])`, at); s != 4 {
				t.Errorf("sum of stored values %v, want 1.5 + 2.5", s)
			}
			// A different value at the newest timestamp is a conflict.
			conflict := []collect.Series{{Labels: ss[0].Labels, Meta: ss[0].Meta, Samples: []collect.Sample{{T: t0 + 1000, V: 99}}}}
			r := wc.Write(context.Background(), encode(t, conflict))
			if r.Status != http.StatusBadRequest || r.Outcome != remote.Rejected {
				t.Fatalf("conflicting value: status %d outcome %v, want 400 rejected", r.Status, r.Outcome)
			}
			if v := app.Scalar(t, `max_over_time(dup_test_gauge[1h])`, at); v != 2.5 {
				t.Errorf("conflicting value overwrote the stored one: max %v", v)
			}
		})
	}
}

// TestQueueCrashResendExactlyOnce: requests are shipped, the process dies
// after the server accepted one but before the cursor moved past it, the
// queue is opened again and shipping resumes. Every sample is stored once.
func TestQueueCrashResendExactlyOnce(t *testing.T) {
	needServer(t)
	app := apptest.Start(t, t.TempDir())
	dir := t.TempDir()
	q1, err := queue.Open(dir, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Minute).UnixMilli()
	const records, perRecord = 10, 20
	for r := range records {
		var ss []collect.Series
		s := collect.Series{Labels: labels.FromStrings("__name__", "crash_test", "node", "n1"), Meta: collect.Meta(model.MetricTypeCounter, "", "")}
		for i := range perRecord {
			k := r*perRecord + i
			s.Samples = append(s.Samples, collect.Sample{T: t0 + int64(k)*10, V: float64(k)})
		}
		ss = append(ss, s)
		if err := q1.Append(encode(t, ss)); err != nil {
			t.Fatal(err)
		}
	}
	c := writeClient(t, app)
	// Deliver and acknowledge three records, then deliver the fourth and
	// "crash" before acknowledging it.
	for i := range 4 {
		rec, err := q1.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if r := c.Write(context.Background(), rec.Data); r.Outcome != remote.Delivered {
			t.Fatalf("record %d: %v", i, r.Err)
		}
		if i < 3 {
			q1.Ack(rec)
		}
	}
	// q1 is abandoned without Close, as a killed process leaves it.

	q2, err := queue.Open(dir, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q2.Close()
	if p := q2.Stats().Pending; p != records-3 {
		t.Fatalf("after restart %d pending, want %d (the unacknowledged fourth included)", p, records-3)
	}
	sh := remote.NewShipper(q2, c, remote.ShipperOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sh.Run(ctx) }()
	waitFor(t, 10*time.Second, func() bool { return q2.Stats().Pending == 0 })
	cancel()
	<-done
	at := time.Now()
	if n := app.Scalar(t, `count_over_time(crash_test[1h])`, at); n != records*perRecord {
		t.Errorf("stored %v samples, want %d exactly once", n, records*perRecord)
	}
	if s := app.Scalar(t, `sum_over_time(crash_test[1h])`, at); s != float64(records*perRecord*(records*perRecord-1)/2) {
		t.Errorf("sum of stored values %v, want %d (0+1+…+199)", s, records*perRecord*(records*perRecord-1)/2)
	}
}

func waitFor(t *testing.T, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// baseConfig is a configuration for tests: no eBPF, no GPU unless asked,
// fast flushing and retries.
func baseConfig(t *testing.T, serverURL string) config.Config {
	t.Helper()
	c, err := config.Parse([]byte(fmt.Sprintf(`
node: test-node
listen: ""
server: {url: %q, timeout: 5s}
queue: {dir: %q, flush_interval: 100ms, min_backoff: 50ms, max_backoff: 200ms}
ebpf: {enabled: false}
gpu: {enabled: false, sample_interval: 100ms, interval: 200ms}
`, serverURL, t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mockH200() *server.Server {
	srv := dgxh200.New()
	for i, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: uint32(10 * i), Memory: 20}, nvml.SUCCESS
		}
		dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 300000, nvml.SUCCESS }
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		dev.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		for _, f := range []*func() (uint64, nvml.Return){&dev.GetCurrentClocksEventReasonsFunc, &dev.GetTotalEnergyConsumptionFunc} {
			*f = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		}
		dev.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		dev.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		dev.GetPcieThroughputFunc = func(nvml.PcieUtilCounter) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
		dev.GetFieldValuesFunc = func([]nvml.FieldValue) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
		dev.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	return srv
}

// TestAgentPushesGPUAndScrape runs the agent in process with the DGX H200
// mock as GPU backend and a scrape target, against the real server.
func TestAgentPushesGPUAndScrape(t *testing.T) {
	needServer(t)
	app := apptest.Start(t, t.TempDir())
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintln(w, "# TYPE vllm:num_requests_waiting gauge")
		fmt.Fprintln(w, `vllm:num_requests_waiting{model_name="llama"} 4`)
	}))
	defer target.Close()
	cfg := baseConfig(t, app.URL)
	on := true
	cfg.GPU.Enabled = &on
	cfg.Scrape.Targets = []config.Target{{Job: "vllm", URL: target.URL + "/metrics", Interval: config.Duration(200 * time.Millisecond), Timeout: config.Duration(200 * time.Millisecond)}}
	b, err := gpu.NewNVML(mockH200())
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{Config: cfg, GPUBackend: b})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- a.Run(ctx) }()
	time.Sleep(1500 * time.Millisecond)
	waitFor(t, 10*time.Second, func() bool { return a.QueueStats().Pending == 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start).Seconds()
	at := time.Now()
	v := app.InstantVector(t, `DCGM_FI_DEV_GPU_UTIL{gpu="3"}`, at)
	if len(v) != 1 || v[0].Metric["node"] != "test-node" || v[0].Metric["modelName"] != "NVIDIA H200 141GB HBM3e" || v[0].Value[1] != "30" {
		t.Fatalf("GPU series %+v", v)
	}
	// 100 ms sampling: about 10 samples per second of running, never more;
	// a starved test machine may take fewer, so only require that the
	// sampler kept running (several samples), not its cadence.
	n := app.Scalar(t, `count_over_time(DCGM_FI_DEV_GPU_UTIL{gpu="3"}[1h])`, at)
	if n < 3 || n > elapsed*10+2 {
		t.Errorf("%v GPU samples in %.1f s, want about %.0f", n, elapsed, elapsed*10)
	}
	if pw := app.Scalar(t, `DCGM_FI_DEV_POWER_USAGE{gpu="0"}`, at); pw != 300 {
		t.Errorf("power %v W, want 300", pw)
	}
	sv := app.InstantVector(t, `vllm:num_requests_waiting`, at)
	if len(sv) != 1 || sv[0].Metric["job"] != "vllm" || sv[0].Metric["node"] != "test-node" || sv[0].Metric["instance"] != strings.TrimPrefix(target.URL, "http://") {
		t.Fatalf("scraped series %+v", sv)
	}
	if up := app.Scalar(t, `up{job="vllm"}`, at); up != 1 {
		t.Errorf("up = %v", up)
	}
}

// logLines is a slog handler that keeps messages.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	s := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
	return nil
}
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logLines) WithGroup(string) slog.Handler      { return l }
func (l *logLines) matching(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, s := range l.lines {
		if strings.Contains(strings.ToLower(s), sub) {
			out = append(out, s)
		}
	}
	return out
}

// TestDegradesWithoutNVML: GPU telemetry is on but libnvidia-ml cannot be
// loaded. The agent logs one line about it and everything else works.
func TestDegradesWithoutNVML(t *testing.T) {
	var hits atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "x 1")
	}))
	defer target.Close()
	cfg := baseConfig(t, sink.URL)
	on := true
	cfg.GPU.Enabled = &on
	cfg.GPU.LibraryPath = "/nonexistent/libnvidia-ml.so.1"
	cfg.Scrape.Targets = []config.Target{{Job: "x", URL: target.URL, Interval: config.Duration(100 * time.Millisecond), Timeout: config.Duration(100 * time.Millisecond)}}
	logs := &logLines{}
	a, err := agent.New(agent.Options{Config: cfg, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	time.Sleep(time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	gpuLines := logs.matching("gpu")
	if len(gpuLines) != 1 || !strings.Contains(gpuLines[0], "libnvidia-ml") || !strings.HasPrefix(gpuLines[0], "WARN") {
		t.Fatalf("want one warning naming libnvidia-ml, got %q", gpuLines)
	}
	if hits.Load() < 3 {
		t.Fatalf("agent pushed %d requests in a second without a GPU; scraping stopped?", hits.Load())
	}
}

func TestMain(m *testing.M) {
	if path := os.Getenv(agentConfigEnv); path != "" {
		os.Exit(agentMain(path))
	}
	os.Exit(m.Run())
}
