package ingest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

// testMetrics builds one resource with a gauge, a cumulative sum, an
// explicit-bucket histogram (with an exemplar), an exponential histogram,
// a delta sum (which Prometheus refuses), and on a second resource a gauge
// point an hour in the future (which the store refuses).
func testMetrics(ts time.Time) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	ra := rm.Resource().Attributes()
	ra.PutStr("service.name", "vllm")
	ra.PutStr("service.instance.id", "gpu-node-1:8000")
	ra.PutStr("k8s.pod.name", "vllm-0")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	now := pcommon.NewTimestampFromTime(ts)

	g := ms.AppendEmpty()
	g.SetName("vllm.gpu_cache_usage")
	g.SetUnit("1")
	dp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(now)
	dp.SetDoubleValue(0.25)
	dp.Attributes().PutStr("model_name", "llama")

	s := ms.AppendEmpty()
	s.SetName("vllm.request.success")
	s.SetUnit("{request}")
	sum := s.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	sp := sum.DataPoints().AppendEmpty()
	sp.SetTimestamp(now)
	sp.SetIntValue(42)

	h := ms.AppendEmpty()
	h.SetName("http.server.request.duration")
	h.SetUnit("s")
	hist := h.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hp := hist.DataPoints().AppendEmpty()
	hp.SetTimestamp(now)
	hp.ExplicitBounds().FromRaw([]float64{0.1, 1})
	hp.BucketCounts().FromRaw([]uint64{1, 2, 3})
	hp.SetCount(6)
	hp.SetSum(5.5)
	ex := hp.Exemplars().AppendEmpty()
	ex.SetTimestamp(now)
	ex.SetDoubleValue(0.5)
	ex.SetTraceID(pcommon.TraceID{0xab, 1})
	ex.SetSpanID(pcommon.SpanID{0xcd, 1})

	e := ms.AppendEmpty()
	e.SetName("gen_ai.server.time_to_first_token")
	e.SetUnit("s")
	eh := e.SetEmptyExponentialHistogram()
	eh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	ep := eh.DataPoints().AppendEmpty()
	ep.SetTimestamp(now)
	ep.SetScale(2)
	ep.SetZeroCount(1)
	ep.Positive().SetOffset(0)
	ep.Positive().BucketCounts().FromRaw([]uint64{1, 2})
	ep.SetCount(4)
	ep.SetSum(3)

	d := ms.AppendEmpty()
	d.SetName("delta.requests")
	ds := d.SetEmptySum()
	ds.SetIsMonotonic(true)
	ds.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dd := ds.DataPoints().AppendEmpty()
	dd.SetTimestamp(now)
	dd.SetIntValue(1)

	// A second resource whose clock runs an hour ahead: its gauge point is
	// refused (it has no attributes beyond service.name, so no target_info
	// either); the first resource's series are not affected.
	rm2 := md.ResourceMetrics().AppendEmpty()
	rm2.Resource().Attributes().PutStr("service.name", "skewed")
	f := rm2.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	f.SetName("future.gauge")
	fp := f.SetEmptyGauge().DataPoints().AppendEmpty()
	fp.SetTimestamp(pcommon.NewTimestampFromTime(ts.Add(time.Hour)))
	fp.SetDoubleValue(1)
	return md
}

// TestOTLPClassicHistogramsByDefault: without ConvertHistogramsToNHCB an
// explicit-bucket histogram is stored as classic _bucket/_sum/_count
// series, as Prometheus stores it, so the usual histogram_quantile over
// rate(x_bucket[5m]) finds it.
func TestOTLPClassicHistogramsByDefault(t *testing.T) {
	db := openTestDB(t)
	h := NewOTLPMetrics(db, db.Metadata, OTLPOptions{}, nil, nil)
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	body, err := pmetricotlp.NewExportRequestFromMetrics(testMetrics(ts)).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	if w := postOTLP(t, h, "/api/v1/otlp/v1/metrics", "application/x-protobuf", true, body); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	id := []string{"job", "vllm", "instance", "gpu-node-1:8000"}
	for le, want := range map[string]float64{"0.1": 1, "1": 3, "+Inf": 6} {
		if s := one(t, db, "http_server_request_duration_seconds_bucket", append(id, "le", le)...); s.f != want || s.h != nil {
			t.Errorf("bucket le=%s: %v (histogram %v), want %v", le, s.f, s.h, want)
		}
	}
	if s := one(t, db, "http_server_request_duration_seconds_count", id...); s.f != 6 {
		t.Errorf("_count %v, want 6", s.f)
	}
	if s := one(t, db, "http_server_request_duration_seconds_sum", id...); s.f != 5.5 {
		t.Errorf("_sum %v, want 5.5", s.f)
	}
	if n := len(lastSamples(t, db, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, "http_server_request_duration_seconds"))); n != 0 {
		t.Errorf("%d native histogram series stored as well", n)
	}
}

// TestOTLPMetrics posts the metrics and reads back every series: names and
// labels as Prometheus 3 translates them, values exact, histograms native
// (with ConvertHistogramsToNHCB),
// and a 200 whose partial_success names the two refused points.
func TestOTLPMetrics(t *testing.T) {
	db := openTestDB(t)
	h := NewOTLPMetrics(db, db.Metadata, OTLPOptions{PromoteResourceAttributes: []string{"k8s.pod.name"}, ConvertHistogramsToNHCB: true}, nil, nil)
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	body, err := pmetricotlp.NewExportRequestFromMetrics(testMetrics(ts)).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	w := postOTLP(t, h, "/api/v1/otlp/v1/metrics", "application/x-protobuf", true, body)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	resp := pmetricotlp.NewExportResponse()
	if err := resp.UnmarshalProto(w.Body.Bytes()); err != nil {
		t.Fatal(err)
	}
	ps := resp.PartialSuccess()
	if ps.RejectedDataPoints() != 2 || !strings.Contains(ps.ErrorMessage(), "future_gauge") || !strings.Contains(ps.ErrorMessage(), "delta.requests") {
		t.Errorf("partial success %d %q", ps.RejectedDataPoints(), ps.ErrorMessage())
	}

	id := []string{"job", "vllm", "instance", "gpu-node-1:8000", "k8s_pod_name", "vllm-0"}
	if s := one(t, db, "vllm_gpu_cache_usage_ratio", append(id, "model_name", "llama")...); s.f != 0.25 || s.t != ts.UnixMilli() {
		t.Errorf("gauge %v at %d", s.f, s.t)
	}
	if s := one(t, db, "vllm_request_success_total", id...); s.f != 42 {
		t.Errorf("counter %v", s.f)
	}
	nhcb := one(t, db, "http_server_request_duration_seconds", id...).h
	want := &histogram.Histogram{
		Schema: histogram.CustomBucketsSchema, Count: 6, Sum: 5.5, CustomValues: []float64{0.1, 1},
		PositiveSpans: []histogram.Span{{Offset: 0, Length: 3}}, PositiveBuckets: []int64{1, 1, 1},
	}
	if nhcb == nil || !nhcb.Equals(want) {
		t.Errorf("explicit histogram as %v, want native with custom buckets %v", nhcb, want)
	}
	// OTLP exponential bucket i covers (base^i, base^(i+1)]; Prometheus
	// bucket i+1 covers the same interval, so offset 0 becomes 1.
	exp := one(t, db, "gen_ai_server_time_to_first_token_seconds", id...).h
	wantExp := &histogram.Histogram{
		Schema: 2, ZeroCount: 1, Count: 4, Sum: 3,
		PositiveSpans: []histogram.Span{{Offset: 1, Length: 2}}, PositiveBuckets: []int64{1, 1},
	}
	if exp == nil || exp.Schema != 2 || exp.Count != 4 || exp.Sum != 3 || exp.ZeroCount != 1 ||
		len(exp.PositiveSpans) != 1 || exp.PositiveSpans[0] != wantExp.PositiveSpans[0] || exp.PositiveBuckets[0] != 1 || exp.PositiveBuckets[1] != 1 {
		t.Errorf("exponential histogram as %v, want %v", exp, wantExp)
	}
	if s := one(t, db, "target_info", "job", "vllm", "instance", "gpu-node-1:8000"); s.f != 1 || s.ls.Get("k8s_pod_name") != "vllm-0" {
		t.Errorf("target_info %s = %v", s.ls, s.f)
	}
	if n := len(lastSamples(t, db, labels.MustNewMatcher(labels.MatchRegexp, model.MetricNameLabel, "delta.*|future.*"))); n != 0 {
		t.Errorf("%d refused series stored", n)
	}
	exs := exemplarsOf(t, db, "http_server_request_duration_seconds")
	if len(exs) != 1 || exs[0].Value != 0.5 || exs[0].Labels.Get("trace_id") != "ab010000000000000000000000000000" {
		t.Errorf("exemplars %v", exs)
	}
	if md := db.Metadata.Get("vllm_request_success_total", 0, 0); len(md) != 1 {
		t.Errorf("metadata %v", md)
	}

	// JSON encoding, and bodies that do not decode.
	js, _ := pmetricotlp.NewExportRequestFromMetrics(testMetrics(ts.Add(time.Second))).MarshalJSON()
	if w := postOTLP(t, h, "/api/v1/otlp/v1/metrics", "application/json", false, js); w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("JSON: %d %s", w.Code, w.Body)
	}
	if s := one(t, db, "vllm_request_success_total", id...); s.t != ts.Add(time.Second).UnixMilli() {
		t.Errorf("JSON sample not written: newest at %d", s.t)
	}
	for _, c := range []struct {
		ct   string
		body string
		code int
	}{{"application/x-protobuf", "\xff\xff", 400}, {"application/json", "[", 400}, {"text/plain", "", 415}, {"", "", 415}} {
		if w := postOTLP(t, h, "/api/v1/otlp/v1/metrics", c.ct, false, []byte(c.body)); w.Code != c.code {
			t.Errorf("%s %q: %d, want %d", c.ct, c.body, w.Code, c.code)
		}
	}
	limited := NewOTLPMetrics(db, nil, OTLPOptions{MaxDataPoints: 2}, nil, nil)
	if w := postOTLP(t, limited, "/api/v1/otlp/v1/metrics", "application/x-protobuf", false, body); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("6 points over a limit of 2: %d", w.Code)
	}
}

// TestOTLPFullyRejectedWritesNoTargetInfo: when every data point of a
// request is refused, partial_success counts them all and the resource's
// target_info is not written either.
func TestOTLPFullyRejectedWritesNoTargetInfo(t *testing.T) {
	db := openTestDB(t)
	h := NewOTLPMetrics(db, db.Metadata, OTLPOptions{}, nil, nil)
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "svc")
	rm.Resource().Attributes().PutStr("host.name", "gpu-1")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty()
	g.SetName("future.gauge")
	gp := g.SetEmptyGauge().DataPoints()
	for i := range 3 {
		p := gp.AppendEmpty()
		p.SetTimestamp(pcommon.NewTimestampFromTime(time.Now().Add(time.Hour + time.Duration(i)*time.Second)))
		p.SetDoubleValue(1)
	}
	d := ms.AppendEmpty()
	d.SetName("delta.requests")
	ds := d.SetEmptySum()
	ds.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	dp := ds.DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	dp.SetIntValue(1)
	body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	w := postOTLP(t, h, "/api/v1/otlp/v1/metrics", "application/x-protobuf", false, body)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	resp := pmetricotlp.NewExportResponse()
	if err := resp.UnmarshalProto(w.Body.Bytes()); err != nil {
		t.Fatal(err)
	}
	if got, want := resp.PartialSuccess().RejectedDataPoints(), int64(g.Gauge().DataPoints().Len()+1); got != want {
		t.Errorf("rejected_data_points %d, want %d (every point of the request): %s", got, want, resp.PartialSuccess().ErrorMessage())
	}
	if n := len(lastSamples(t, db, labels.MustNewMatcher(labels.MatchRegexp, model.MetricNameLabel, ".+"))); n != 0 {
		t.Errorf("%d series stored from a fully rejected request (target_info included)", n)
	}
}
