package apptest

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	config_util "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/storage/remote"
)

func writeClient(t *testing.T, app *App, msg remoteapi.WriteMessageType) remote.WriteClient {
	t.Helper()
	u, err := url.Parse(app.URL + "/api/v1/write")
	if err != nil {
		t.Fatal(err)
	}
	c, err := remote.NewWriteClient("test", &remote.ClientConfig{
		URL:              &config_util.URL{URL: u},
		Timeout:          model.Duration(10 * time.Second),
		HTTPClientConfig: config_util.DefaultHTTPClientConfig,
		WriteProtoMsg:    msg,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type marshaler interface{ Marshal() ([]byte, error) }

func compress(t *testing.T, m marshaler) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return snappy.Encode(nil, b)
}

// testHistogram is a native histogram with hand-checkable statistics:
// count 12 (3 zero + 9 in buckets), sum 36.5.
func testHistogram() *histogram.Histogram {
	return &histogram.Histogram{
		Schema:          0,
		ZeroThreshold:   1e-128,
		ZeroCount:       3,
		Count:           12,
		Sum:             36.5,
		PositiveSpans:   []histogram.Span{{Offset: 0, Length: 3}},
		PositiveBuckets: []int64{2, 1, 1}, // deltas: counts 2, 3, 4
	}
}

// TestRemoteWriteRoundTrip sends remote write 1.0 and 2.0 through the
// Prometheus module's own client — floats, native histograms, exemplars and
// metadata — reads every value back over the query API, then restarts the
// server (cleanly, then with SIGKILL) and reads them again.
func TestRemoteWriteRoundTrip(t *testing.T) {
	app := Start(t, t.TempDir())
	ctx := context.Background()
	t0 := time.Now().Add(-2 * time.Minute).Truncate(time.Second)
	ms := t0.UnixMilli()

	// Remote write 1.0.
	v1 := &prompb.WriteRequest{
		Timeseries: []prompb.TimeSeries{
			{
				Labels:  []prompb.Label{{Name: "__name__", Value: "rw1_requests_total"}, {Name: "model", Value: "llama-8b"}},
				Samples: []prompb.Sample{{Timestamp: ms, Value: 10}, {Timestamp: ms + 15000, Value: 25.5}},
				Exemplars: []prompb.Exemplar{{
					Labels: []prompb.Label{{Name: "trace_id", Value: "4bf92f3577b34da6a3ce929d0e0e4736"}}, Value: 0.42, Timestamp: ms + 15000,
				}},
			},
			{
				Labels:     []prompb.Label{{Name: "__name__", Value: "rw1_ttft_seconds"}, {Name: "model", Value: "llama-8b"}},
				Histograms: []prompb.Histogram{prompb.FromIntHistogram(ms, testHistogram())},
			},
		},
		Metadata: []prompb.MetricMetadata{{
			Type: prompb.MetricMetadata_COUNTER, MetricFamilyName: "rw1_requests_total", Help: "Requests served.",
		}},
	}
	c1 := writeClient(t, app, remoteapi.WriteV1MessageType)
	if _, err := c1.Store(ctx, compress(t, v1), 0); err != nil {
		t.Fatalf("remote write 1.0: %v", err)
	}

	// Remote write 2.0.
	st := writev2.NewSymbolTable()
	fh := testHistogram().ToFloat(nil)
	fh.Sum = 40.25
	v2 := &writev2.Request{
		Timeseries: []writev2.TimeSeries{
			{
				LabelsRefs: st.SymbolizeLabels(labelsOf("__name__", "rw2_queue_seconds", "model", "llama-70b"), nil),
				Samples:    []writev2.Sample{{Timestamp: ms, Value: 0.125}, {Timestamp: ms + 30000, Value: 0.375}},
				Exemplars: []writev2.Exemplar{{
					LabelsRefs: st.SymbolizeLabels(labelsOf("trace_id", "00f067aa0ba902b7"), nil), Value: 0.375, Timestamp: ms + 30000,
				}},
				Metadata: writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_GAUGE, HelpRef: st.Symbolize("Queue time."), UnitRef: st.Symbolize("seconds")},
			},
			{
				LabelsRefs: st.SymbolizeLabels(labelsOf("__name__", "rw2_itl_seconds", "model", "llama-70b"), nil),
				Histograms: []writev2.Histogram{writev2.FromIntHistogram(0, ms, testHistogram()), writev2.FromFloatHistogram(0, ms+15000, fh)},
				Metadata:   writev2.Metadata{Type: writev2.Metadata_METRIC_TYPE_HISTOGRAM, HelpRef: st.Symbolize("Inter-token latency."), UnitRef: st.Symbolize("seconds")},
			},
		},
	}
	v2.Symbols = st.Symbols()
	c2 := writeClient(t, app, remoteapi.WriteV2MessageType)
	stats, err := c2.Store(ctx, compress(t, v2), 0)
	if err != nil {
		t.Fatalf("remote write 2.0: %v", err)
	}
	if stats.Samples != 2 || stats.Histograms != 2 || stats.Exemplars != 1 {
		t.Fatalf("remote write 2.0 written stats = %+v, want 2 samples, 2 histograms, 1 exemplar", stats)
	}

	check := func(t *testing.T) {
		at := t0.Add(time.Minute)
		for _, c := range []struct {
			q    string
			want float64
		}{
			{`rw1_requests_total{model="llama-8b"}`, 25.5},
			{`rw1_requests_total @ ` + seconds(ms), 10},
			{`histogram_count(rw1_ttft_seconds)`, 12},
			{`histogram_sum(rw1_ttft_seconds)`, 36.5},
			{`rw2_queue_seconds{model="llama-70b"}`, 0.375},
			{`rw2_queue_seconds @ ` + seconds(ms), 0.125},
			{`histogram_count(rw2_itl_seconds @ ` + seconds(ms) + `)`, 12},
			{`histogram_sum(rw2_itl_seconds)`, 40.25},
			// Bucket [1,2) holds 3 observations, [2,4) holds 4 (schema 0).
			{`histogram_fraction(2, 4, rw2_itl_seconds)`, 4.0 / 12},
			{`count_over_time(rw2_queue_seconds[5m])`, 2},
		} {
			if got := app.Scalar(t, c.q, at); math.Abs(got-c.want) > 1e-12 {
				t.Errorf("%s = %v, want %v", c.q, got, c.want)
			}
		}
		// The raw native histogram comes back bucket by bucket.
		v := app.InstantVector(t, `rw1_ttft_seconds`, at)
		if len(v) != 1 || v[0].Histogram[1] == nil {
			t.Fatalf("rw1_ttft_seconds: %+v, want one histogram sample", v)
		}
		hb, _ := json.Marshal(v[0].Histogram[1])
		const wantHist = `{"buckets":[[3,"-1e-128","1e-128","3"],[0,"0.5","1","2"],[0,"1","2","3"],[0,"2","4","4"]],"count":"12","sum":"36.5"}`
		if string(hb) != wantHist {
			t.Errorf("histogram JSON = %s, want %s", hb, wantHist)
		}

		code, body := app.Get(t, "/api/v1/query_exemplars", url.Values{
			"query": {`{__name__=~"rw1_requests_total|rw2_queue_seconds"}`}, "start": {seconds(ms - 1000)}, "end": {seconds(ms + 60000)},
		})
		if code != http.StatusOK {
			t.Fatalf("query_exemplars: %d %s", code, body)
		}
		var ex struct {
			Data []struct {
				SeriesLabels map[string]string `json:"seriesLabels"`
				Exemplars    []struct {
					Labels map[string]string `json:"labels"`
					Value  string            `json:"value"`
				} `json:"exemplars"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &ex); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, s := range ex.Data {
			for _, e := range s.Exemplars {
				got[s.SeriesLabels["__name__"]] = e.Labels["trace_id"] + "=" + e.Value
			}
		}
		want := map[string]string{
			"rw1_requests_total": "4bf92f3577b34da6a3ce929d0e0e4736=0.42",
			"rw2_queue_seconds":  "00f067aa0ba902b7=0.375",
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("exemplar of %s = %q, want %q (all: %s)", k, got[k], w, body)
			}
		}
	}
	checkMetadata := func(t *testing.T) {
		// The server also reports its own derived families; check the
		// written ones one by one, byte for byte.
		for metric, want := range map[string]string{
			"rw1_requests_total": `{"status":"success","data":{"rw1_requests_total":[{"type":"counter","unit":"","help":"Requests served."}]}}`,
			"rw2_itl_seconds":    `{"status":"success","data":{"rw2_itl_seconds":[{"type":"histogram","unit":"seconds","help":"Inter-token latency."}]}}`,
			"rw2_queue_seconds":  `{"status":"success","data":{"rw2_queue_seconds":[{"type":"gauge","unit":"seconds","help":"Queue time."}]}}`,
		} {
			code, body := app.Get(t, "/api/v1/metadata", url.Values{"metric": {metric}})
			if code != http.StatusOK || string(body) != want {
				t.Errorf("metadata of %s = %d %s\nwant %s", metric, code, body, want)
			}
		}
	}

	t.Run("fresh", func(t *testing.T) { check(t); checkMetadata(t) })
	app.Restart(t)
	t.Run("after SIGTERM restart", func(t *testing.T) { check(t); checkMetadata(t) })
	app.KillAndRestart(t)
	// Exemplars live in memory only in Prometheus' TSDB, and are rebuilt
	// from the WAL on replay; samples, histograms and metadata must all be
	// there after SIGKILL.
	t.Run("after SIGKILL restart", func(t *testing.T) { check(t); checkMetadata(t) })
}

func seconds(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }
