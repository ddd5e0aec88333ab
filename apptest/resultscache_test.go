package apptest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
)

// TestResultsCacheLateWrite runs the real binary with its default results
// cache: a range query is answered, repeated (a hit, seen on /metrics),
// then an agent's late remote write lands inside the cached range (out of
// order, 20 minutes behind the series' newest sample), and the same query
// must show it — as an uncached query (nocache=1) does.
func TestResultsCacheLateWrite(t *testing.T) {
	app := Start(t, t.TempDir())
	ctx := context.Background()
	c := writeClient(t, app, remoteapi.WriteV1MessageType)
	now := time.Now().Truncate(time.Minute)
	first, last := now.Add(-2*time.Hour), now.Add(-40*time.Minute)
	var samples []prompb.Sample
	for ts := first; !ts.After(last); ts = ts.Add(15 * time.Second) {
		samples = append(samples, prompb.Sample{Timestamp: ts.UnixMilli(), Value: 1})
	}
	write := func(s []prompb.Sample) {
		t.Helper()
		req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
			Labels:  []prompb.Label{{Name: "__name__", Value: "cache_probe"}, {Name: "model", Value: "m"}},
			Samples: s,
		}}}
		if _, err := c.Store(ctx, compress(t, req), 0); err != nil {
			t.Fatalf("remote write: %v", err)
		}
	}
	write(samples)

	params := url.Values{
		"query": {`max_over_time(cache_probe[1m])`},
		"start": {strconv.FormatInt(first.Unix(), 10)},
		"end":   {strconv.FormatInt(now.Add(-20*time.Minute).Unix(), 10)},
		"step":  {"60"},
	}
	maxValue := func(extra url.Values) float64 {
		t.Helper()
		p := url.Values{}
		for k, v := range params {
			p[k] = v
		}
		for k, v := range extra {
			p[k] = v
		}
		code, body := app.Get(t, "/api/v1/query_range", p)
		var r Response
		if err := json.Unmarshal(body, &r); err != nil || code != http.StatusOK || r.Status != "success" {
			t.Fatalf("query_range: %d %s", code, body)
		}
		var data struct {
			Result []struct {
				Values [][2]any `json:"values"`
			} `json:"result"`
		}
		if err := json.Unmarshal(r.Data, &data); err != nil || len(data.Result) != 1 {
			t.Fatalf("query_range: %s", r.Data)
		}
		m := 0.0
		for _, v := range data.Result[0].Values {
			f, err := strconv.ParseFloat(v[1].(string), 64)
			if err != nil {
				t.Fatal(err)
			}
			m = max(m, f)
		}
		return m
	}
	if m := maxValue(nil); m != 1 {
		t.Fatalf("before the late write: max %v, want 1", m)
	}
	if m := maxValue(nil); m != 1 {
		t.Fatalf("repeat: max %v, want 1", m)
	}
	if h := cacheMetric(t, app, "hits_total"); h != 1 {
		t.Fatalf("tailroot_query_results_cache_hits_total %v after the repeat, want 1", h)
	}

	// The late write: 60 minutes ago, between two existing samples.
	write([]prompb.Sample{{Timestamp: now.Add(-60*time.Minute + 7*time.Second).UnixMilli(), Value: 1000}})
	if m := maxValue(nil); m != 1000 {
		t.Errorf("after the late write: max %v, want 1000 (the cached answer was served)", m)
	}
	if m := maxValue(url.Values{"nocache": {"1"}}); m != 1000 {
		t.Errorf("uncached after the late write: max %v, want 1000", m)
	}
	if p := cacheMetric(t, app, "partial_hits_total"); p != 1 {
		t.Errorf("partial hits %v, want 1 (steps before the late write still cached)", p)
	}
	if n := cacheMetric(t, app, "invalidations_total"); n < 1 {
		t.Errorf("invalidations %v, want ≥ 1", n)
	}
}

// cacheMetric reads tailroot_query_results_cache_<name> from /metrics.
func cacheMetric(t *testing.T, app *App, name string) float64 {
	t.Helper()
	_, body := app.Get(t, "/metrics", nil)
	m := regexp.MustCompile(`(?m)^tailroot_query_results_cache_` + name + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("tailroot_query_results_cache_%s not on /metrics", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
