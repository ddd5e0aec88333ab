package apptest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	thanospkg "github.com/tailroot/tailroot/apptest/internal/thanos"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/tailroot/tailroot/internal/rwtest"
	"github.com/tailroot/tailroot/sim/requests"
)

// fwOutage is how long the receivers are down: 30s in the normal tests,
// the 5 minutes of the issue with TAILROOT_SOAK=1 (make soak).
func fwOutage() time.Duration {
	if os.Getenv("TAILROOT_SOAK") != "" {
		return 5 * time.Minute
	}
	return 30 * time.Second
}

// fwPoint is one raw sample as a query API returns it.
type fwPoint struct {
	T int64
	V float64
}

// fwRaw runs an instant query over a range selector against a Prometheus
// HTTP API and returns the raw samples of each series, keyed by the value
// of label key.
func fwRaw(t *testing.T, base, q string, at time.Time, key string, extra url.Values) (map[string][]fwPoint, []map[string]string) {
	t.Helper()
	p := url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}}
	for k, v := range extra {
		p[k] = v
	}
	resp, err := http.Get(base + "/api/v1/query?" + p.Encode())
	if err != nil {
		t.Fatalf("query %s: %v", base, err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("query %q at %s: %d %s (%v)", q, base, resp.StatusCode, body, err)
	}
	out := map[string][]fwPoint{}
	var metrics []map[string]string
	for _, s := range r.Data.Result {
		metrics = append(metrics, s.Metric)
		for _, v := range s.Values {
			ts, _ := v[0].(float64)
			f, err := strconv.ParseFloat(v[1].(string), 64)
			if err != nil {
				t.Fatal(err)
			}
			out[s.Metric[key]] = append(out[s.Metric[key]], fwPoint{T: int64(math.Round(ts * 1000)), V: f})
		}
	}
	return out, metrics
}

// fwLatencies is the write latency of each ingest request of a phase.
type fwLatencies struct {
	mu  sync.Mutex
	d   map[string][]time.Duration
	err []error
}

func (l *fwLatencies) add(phase string, d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d[phase] = append(l.d[phase], d)
	if err != nil {
		l.err = append(l.err, fmt.Errorf("%s: %w", phase, err))
	}
}

func (l *fwLatencies) quantile(phase string, q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := append([]time.Duration(nil), l.d[phase]...)
	if len(s) == 0 {
		return 0
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(q*float64(len(s)-1))]
}

const fwSeries = 5

// TestForwardToThanosReceiveAndPrometheus forwards tailroot's ingest to a
// real Thanos Receive (remote write 1.0, tenant header) and a real
// Prometheus 3.16 (remote write 2.0) at once, stops both receivers for
// fwOutage while ingest goes on, starts them again, and then checks per
// value, through each receiver's own query API, that every sample is there
// once with its value. Each receiver sits behind a counting pass-through
// (rwtest) that records which samples were acknowledged how often, because
// a TSDB silently absorbs an identical resend; tailroot's ingest latency
// is compared before and during the outage.
func TestForwardToThanosReceiveAndPrometheus(t *testing.T) {
	thanos := thanospkg.Binary(t)
	prom := PeerBinary(t, "prometheus")
	outage := fwOutage()
	dir := t.TempDir()

	rcvHTTP, rcvGRPC, rcvRW := FreeAddr(t), FreeAddr(t), FreeAddr(t)
	rcv := fwStart(t, "thanos receive", thanos, "http://"+rcvHTTP+"/-/ready", "receive",
		"--tsdb.path="+filepath.Join(dir, "receive"), "--http-address="+rcvHTTP, "--grpc-address="+rcvGRPC,
		"--remote-write.address="+rcvRW, `--label=receive_replica="r0"`, "--log.level=warn")
	qHTTP := FreeAddr(t)
	fwStart(t, "thanos query", thanos, "http://"+qHTTP+"/-/ready", "query",
		"--http-address="+qHTTP, "--grpc-address="+FreeAddr(t), "--endpoint="+rcvGRPC, "--log.level=warn")
	promCfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promCfg, []byte("global: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := FreeAddr(t)
	pr := fwStart(t, "prometheus", prom, "http://"+promAddr+"/-/ready",
		"--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "prometheus"), "--web.listen-address="+promAddr,
		"--web.enable-remote-write-receiver",
		"--web.remote-write-receiver.accepted-protobuf-messages=prometheus.WriteRequest",
		"--web.remote-write-receiver.accepted-protobuf-messages=io.prometheus.write.v2.Request")

	thanosRec := rwtest.New("http://" + rcvRW + "/api/v1/receive")
	thanosProxy := httptest.NewServer(thanosRec)
	defer thanosProxy.Close()
	promRec := rwtest.New("http://" + promAddr + "/api/v1/write")
	promProxy := httptest.NewServer(promRec)
	defer promProxy.Close()

	queue := `queue_config: {batch_send_deadline: 200ms, min_backoff: 50ms, max_backoff: 1s, max_samples_per_send: 500}`
	cfg := fmt.Sprintf(`global:
  external_labels: {node: n1}
remote_write:
  - url: %s/api/v1/receive
    name: thanos
    headers: {THANOS-TENANT: team-a}
    send_native_histograms: true
    %s
  - url: %s/api/v1/write
    name: prometheus
    protobuf_message: io.prometheus.write.v2.Request
    send_native_histograms: true
    %s
`, thanosProxy.URL, queue, promProxy.URL, queue)
	cfgPath := filepath.Join(dir, "tailroot.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	app := Start(t, filepath.Join(dir, "tailroot"), "--config.file="+cfgPath, "--records.derive-interval=0", "--storage.remote.flush-deadline=10s")

	// The writer: every 100ms one remote write of fwSeries samples stamped
	// now, value seq*10+i, unique per sample.
	c := writeClient(t, app, remoteapi.WriteV1MessageType)
	lat := &fwLatencies{d: map[string][]time.Duration{}}
	want := map[string][]fwPoint{}
	var phaseMu sync.Mutex
	phase := "before"
	// paused holds the writer while tailroot itself restarts: each write
	// holds it for reading.
	var paused sync.RWMutex
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var last int64
		for seq := 0; ; seq++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			paused.RLock()
			// A tick held back by a pause can fire within the same
			// millisecond as the next: every request gets its own time.
			ms := max(time.Now().UnixMilli(), last+1)
			last = ms
			req := &prompb.WriteRequest{}
			for i := 0; i < fwSeries; i++ {
				req.Timeseries = append(req.Timeseries, prompb.TimeSeries{
					Labels:  []prompb.Label{{Name: "__name__", Value: "fwd_seq"}, {Name: "i", Value: strconv.Itoa(i)}},
					Samples: []prompb.Sample{{Timestamp: ms, Value: float64(seq*10 + i)}},
				})
			}
			body := compress(t, req)
			phaseMu.Lock()
			ph := phase
			phaseMu.Unlock()
			start := time.Now()
			_, err := c.Store(context.Background(), body, 0)
			paused.RUnlock()
			lat.add(ph, time.Since(start), err)
			if err == nil {
				for i := 0; i < fwSeries; i++ {
					k := strconv.Itoa(i)
					want[k] = append(want[k], fwPoint{T: ms, V: float64(seq*10 + i)})
				}
			}
		}
	}()
	setPhase := func(p string) {
		phaseMu.Lock()
		phase = p
		phaseMu.Unlock()
	}

	// Request records: their derived series (native histograms and tail
	// counters) must be forwarded too. Derived samples are stamped with each
	// request's own end time, and the forwarder sends only samples stamped
	// after it started (docs/scale-out.md), so these requests end now or
	// later (a request ending after now is counted when it is derived).
	reqs, err := requests.Simulate(requests.Options{Trace: "azure-code", Limit: 200, Speedup: 2, Seed: 7, Start: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&requests.Sender{URL: app.URL, BatchSize: 100}).PushNDJSON(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}

	// OTLP metrics: a counter and an exponential histogram.
	otlpAt := time.Now().Truncate(time.Millisecond)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "vllm")
	rm.Resource().Attributes().PutStr("service.instance.id", "gpu-node-1:8000")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	sm := ms.AppendEmpty()
	sm.SetName("vllm.request.success")
	sum := sm.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := sum.DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.NewTimestampFromTime(otlpAt))
	dp.SetIntValue(42)
	hm := ms.AppendEmpty()
	hm.SetName("gen_ai.server.time_to_first_token")
	hm.SetUnit("s")
	eh := hm.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	ep := eh.DataPoints().AppendEmpty()
	ep.SetTimestamp(pcommon.NewTimestampFromTime(otlpAt))
	ep.SetScale(2)
	ep.Positive().BucketCounts().FromRaw([]uint64{1, 2})
	ep.SetCount(3)
	ep.SetSum(2.5)
	js, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if code, resp := postBody(t, app, "/api/v1/otlp/v1/metrics", "application/json", js, nil); code != http.StatusOK {
		t.Fatalf("POST OTLP metrics: %d %s", code, resp)
	}

	time.Sleep(10 * time.Second)
	setPhase("during")
	t.Logf("stopping Thanos Receive and Prometheus for %s", outage)
	rcv.Stop(t)
	pr.Stop(t)
	time.Sleep(outage)
	rcv.Start(t)
	pr.Start(t)
	setPhase("after")
	time.Sleep(5 * time.Second)
	// A clean restart of tailroot while the writer runs up to the stop:
	// what was ingested before is sent before the exit and not again after.
	paused.Lock()
	app.Restart(t)
	paused.Unlock()
	time.Sleep(3 * time.Second)
	close(stop)
	<-done
	if len(lat.err) > 0 {
		t.Fatalf("%d ingest requests failed, first: %v", len(lat.err), lat.err[0])
	}
	n := 0
	for _, pts := range want {
		n += len(pts)
	}
	t.Logf("wrote %d samples over %d requests; tailroot's write latency before the outage p50 %s p99 %s, during p50 %s p99 %s max %s (%d requests), after p50 %s",
		n, n/fwSeries, lat.quantile("before", .5), lat.quantile("before", .99), lat.quantile("during", .5), lat.quantile("during", .99), lat.quantile("during", 1), len(lat.d["during"]), lat.quantile("after", .5))
	// The median is robust to the CPU the restarting receivers take from a
	// small machine; a queue that made ingest wait for the receiver would
	// instead hold requests for a retry backoff or the whole outage.
	if d, b := lat.quantile("during", .5), lat.quantile("before", .5); d > 2*b+2*time.Millisecond {
		t.Errorf("ingest slowed down while the receivers were down: median %s during, %s before", d, b)
	}
	if m := lat.quantile("during", 1); m > 5*time.Second {
		t.Errorf("an ingest request took %s while the receivers were down", m)
	}

	// Wait until both queues have delivered every fwd_seq sample: each
	// acknowledged, or, for Thanos Receive only, carried by a resend it
	// refused with 409 because it already held a later sample of the series
	// (rwtest.Recorder.Refused: the first send was written but its answer
	// lost). Those are checked below, per value, through Thanos Query.
	countSeq := func(r *rwtest.Recorder) (got, dup, refusedOnly int) {
		acks, _ := r.Acks()
		for k, c := range acks {
			if len(k.Series) > 0 && fwSeriesName(k.Series) == "fwd_seq" {
				got++
				if c > 1 {
					dup++
				}
			}
		}
		for k := range r.Refused() {
			if acks[k] == 0 && fwSeriesName(k.Series) == "fwd_seq" {
				refusedOnly++
			}
		}
		return got, dup, refusedOnly
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		a, _, ra := countSeq(thanosRec)
		b, _, _ := countSeq(promRec)
		if a+ra >= n && b >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2m Thanos Receive acknowledged %d (and refused as already held %d more) and Prometheus %d of %d samples", a, ra, b, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got, dup, refusedOnly := countSeq(thanosRec); got+refusedOnly != n || dup != 0 {
		t.Errorf("Thanos Receive: %d distinct samples acknowledged and %d more refused as already held (want %d in all), %d acknowledged more than once", got, refusedOnly, n, dup)
	} else if refusedOnly > 0 {
		t.Logf("Thanos Receive refused a resend of %d samples it already held (an answer lost across its restart); Thanos Query must show them", refusedOnly)
	}
	if got, dup, refusedOnly := countSeq(promRec); got != n || dup != 0 || refusedOnly != 0 {
		t.Errorf("Prometheus: %d distinct samples acknowledged (want %d), %d of them more than once, %d refused", got, n, dup, refusedOnly)
	}
	if p := promRec.Protocols(); p["v2"] == 0 || p["v1"] != 0 {
		t.Errorf("Prometheus queue protocols %v, want remote write 2.0 only", p)
	}
	// Remote write 2.0 carries metadata from the WAL: the derived series'
	// families, as tailroot's /api/v1/metadata reports them.
	if md := promRec.Metadata()["tailroot_tail_requests_total"]; md.Type != "counter" || md.Help == "" {
		t.Errorf("Prometheus queue sent metadata %+v for tailroot_tail_requests_total, want a counter with help", md)
	}
	for _, h := range thanosRec.Headers() {
		if h.Get("THANOS-TENANT") != "team-a" {
			t.Fatalf("a request to Thanos Receive lacked THANOS-TENANT: team-a: %v", h)
		}
	}

	// tailroot's own remote-storage metrics, per queue.
	_, metricsText := app.Get(t, "/metrics", nil)
	for _, m := range []string{
		`prometheus_remote_storage_samples_total{remote_name="thanos"`,
		`prometheus_remote_storage_samples_total{remote_name="prometheus"`,
		`prometheus_remote_storage_queue_highest_timestamp_seconds{remote_name="thanos"`,
		`prometheus_wal_watcher_current_segment{consumer=`,
	} {
		if !strings.Contains(string(metricsText), m) {
			t.Errorf("tailroot's /metrics lacks %s", m)
		}
	}

	// Per value, through each receiver's own query API.
	at := time.Now()
	rng := fmt.Sprintf("[%ds]", int(time.Since(time.UnixMilli(want["0"][0].T)).Seconds())+60)
	check := func(name string, got map[string][]fwPoint, metrics []map[string]string, labels map[string]string) {
		t.Helper()
		for _, m := range metrics {
			for k, v := range labels {
				if m[k] != v {
					t.Errorf("%s: series %v lacks %s=%q", name, m, k, v)
				}
			}
		}
		for i := 0; i < fwSeries; i++ {
			k := strconv.Itoa(i)
			if len(got[k]) != len(want[k]) {
				t.Errorf("%s: series i=%s has %d samples, want %d", name, k, len(got[k]), len(want[k]))
				continue
			}
			for j := range want[k] {
				if got[k][j] != want[k][j] {
					t.Errorf("%s: series i=%s sample %d is %+v, want %+v", name, k, j, got[k][j], want[k][j])
					break
				}
			}
		}
	}
	var got map[string][]fwPoint
	var metrics []map[string]string
	for deadline := time.Now().Add(time.Minute); ; {
		got, metrics = fwRaw(t, "http://"+qHTTP, `fwd_seq{tenant_id="team-a"}`+rng, at, "i", url.Values{"dedup": {"false"}})
		if len(got["0"]) == len(want["0"]) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second) // Thanos Query reconnects to the restarted Receive
	}
	check("Thanos Query over Receive", got, metrics, map[string]string{"node": "n1", "tenant_id": "team-a", "receive_replica": "r0"})
	got, metrics = fwRaw(t, "http://"+promAddr, `fwd_seq`+rng, at, "i", nil)
	check("Prometheus", got, metrics, map[string]string{"node": "n1"})

	// The series derived from request records: tailroot's own answer.
	tq := `sum(max_over_time(tailroot_tail_requests_total[1h]))`
	local := app.Scalar(t, tq, at)
	if local != float64(len(reqs)) {
		t.Fatalf("tailroot counts %v requests, want %d", local, len(reqs))
	}
	hq := `sum(histogram_count(last_over_time(tailroot_request_e2e_seconds[1h])))`
	if v := app.Scalar(t, hq, at); v != local {
		t.Fatalf("tailroot: %s = %v, want %v", hq, v, local)
	}
	for name, base := range map[string]string{"Thanos Query": "http://" + qHTTP, "Prometheus": "http://" + promAddr} {
		remote := &App{URL: base}
		if v := remote.Scalar(t, tq, at); v != local {
			t.Errorf("%s: %s = %v, tailroot says %v", name, tq, v, local)
		}
		if v := remote.Scalar(t, hq, at); v != local {
			t.Errorf("%s: %s = %v, tailroot says %v (native histograms)", name, hq, v, local)
		}
		// What came in over OTLP.
		if v := remote.Scalar(t, `last_over_time(vllm_request_success_total{job="vllm", instance="gpu-node-1:8000", node="n1"}[1h])`, at); v != 42 {
			t.Errorf("%s: OTLP counter %v, want 42", name, v)
		}
		if v := remote.Scalar(t, `histogram_count(last_over_time(gen_ai_server_time_to_first_token_seconds{job="vllm"}[1h]))`, at); v != 3 {
			t.Errorf("%s: OTLP exponential histogram count %v, want 3", name, v)
		}
	}
	if md := promRec.Metadata()["vllm_request_success_total"]; md.Type != "counter" {
		t.Errorf("Prometheus queue sent metadata %+v for the OTLP counter, want type counter", md)
	}
}

// fwSeriesName is the __name__ of a labels.String() rendering.
func fwSeriesName(s string) string {
	const p = `{__name__="`
	if len(s) < len(p) || s[:len(p)] != p {
		return ""
	}
	rest := s[len(p):]
	for i := 0; i < len(rest); i++ {
		if rest[i] == '"' {
			return rest[:i]
		}
	}
	return ""
}
