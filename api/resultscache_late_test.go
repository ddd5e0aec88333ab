package api

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/tsdb"
)

// TestResultsCacheLateWrites is the differential against the upstream web
// API with the results cache on and writes behind the cached answers:
// range queries are cached, then late samples after the data's end,
// out-of-order samples between the cached ones (into existing series and a
// new one) and at their times with other values, and deletions through /api/v1/admin/tsdb/delete_series land
// inside the cached ranges; the same ranges, and ranges shifted by whole
// steps, must then equal upstream's answer and the uncached one byte for
// byte.
func TestResultsCacheLateWrites(t *testing.T) {
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	o.OutOfOrderWindow = 3 * time.Hour
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loadDiffData(t, db)

	ours, theirs, cache, _ := cachedAPI(t, db, true)

	r := rand.New(rand.NewPCG(29, 31))
	type rangeQ struct {
		q                 string
		start, end, stepS int64
	}
	n := 60
	if testing.Short() {
		n = 20
	}
	var qs []rangeQ
	for _, q := range genQueries(r, n) {
		start := diffStart.Unix() + int64(r.IntN(3000))
		qs = append(qs, rangeQ{q, start, start + int64(300+r.IntN(2400)), []int64{15, 30, 60, 97}[r.IntN(4)]})
	}
	compared, panicked := 0, 0
	check := func(stage string, shifted bool) {
		t.Helper()
		for _, c := range qs {
			start, end := c.start, c.end
			if shifted {
				shift := int64(r.IntN(21)-10) * c.stepS
				start, end = start+shift, end+shift+c.stepS*int64(r.IntN(5))
			}
			params := url.Values{
				"query": {c.q}, "start": {strconv.FormatInt(start, 10)},
				"end": {strconv.FormatInt(end, 10)}, "step": {strconv.FormatInt(c.stepS, 10)},
			}
			c1, b1 := get(t, ours, "/api/v1/query_range", params)
			c2, b2 := get(t, theirs, "/api/v1/query_range", params)
			if c2 != http.StatusOK && strings.Contains(b2, "runtime error") {
				// A deletion whose end lies past the query's makes the
				// prometheus module's block series set panic merging its
				// trimming interval into the tombstones
				// (tombstones.Intervals.Add, index out of range): there is
				// no upstream answer to compare.
				panicked++
				continue
			}
			if c1 != c2 || b1 != b2 {
				t.Errorf("%s: %s:\ntailroot %d %s\nupstream %d %s", stage, params.Encode(), c1, trunc(b1), c2, trunc(b2))
			}
			nc := url.Values{}
			for k, v := range params {
				nc[k] = v
			}
			nc.Set("nocache", "1")
			if c3, b3 := get(t, ours, "/api/v1/query_range", nc); c3 != c1 || b3 != b1 {
				t.Errorf("%s: %s: cached answer differs from the uncached one:\ncached   %d %s\nuncached %d %s", stage, params.Encode(), c1, trunc(b1), c3, trunc(b3))
			}
			compared++
		}
	}
	check("first", false)
	check("repeat", false)

	at := func(d time.Duration) int64 { return diffStart.Add(d).UnixMilli() }
	write := func(f func(add func(ls labels.Labels, ts int64, v float64, h *histogram.Histogram))) {
		t.Helper()
		app := db.AppenderV2(context.Background())
		f(func(ls labels.Labels, ts int64, v float64, h *histogram.Histogram) { mustAppend(t, app, ls, ts, v, h) })
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	running := func(m, in string) labels.Labels {
		return labels.FromStrings("__name__", "vllm:num_requests_running", "model_name", m, "instance", in)
	}
	reqs := func(m, in, code string) labels.Labels {
		return labels.FromStrings("__name__", "http_requests_total", "model_name", m, "instance", in, "code", code)
	}
	// Late, in order: the hour after the data.
	write(func(add func(labels.Labels, int64, float64, *histogram.Histogram)) {
		for ts := at(time.Hour); ts < at(80*time.Minute); ts += 15_000 {
			add(running("llama-8b", "10.0.0.1:8000"), ts, float64(ts%97), nil)
			add(reqs("llama-8b", "10.0.0.1:8000", "200"), ts, float64(ts/1000-diffStart.Unix()), nil)
		}
	})
	check("late", false)
	check("late shifted", true)
	// Out of order, between the cached samples, into an existing series
	// and a new one.
	write(func(add func(labels.Labels, int64, float64, *histogram.Histogram)) {
		for ts := at(20 * time.Minute); ts < at(35*time.Minute); ts += 15_000 {
			add(running("llama-70b", "10.0.0.2:8000"), ts+7_000, 1000, nil)
			add(running("llama-70b", "10.0.0.9:8000"), ts, 5, nil)
			add(reqs("llama-70b", "10.0.0.9:8000", "500"), ts, float64(ts/15_000%40), nil)
		}
	})
	check("out of order", false)
	check("out of order shifted", true)
	// Out of order at the times of samples already there, with other
	// values: the head's out-of-order chunks and its in-order ones hold
	// two samples at one time.
	write(func(add func(labels.Labels, int64, float64, *histogram.Histogram)) {
		for ts := at(40 * time.Minute); ts < at(50*time.Minute); ts += 15_000 {
			add(running("llama-8b", "10.0.0.3:8000"), ts, -7, nil)
			add(reqs("llama-8b", "10.0.0.2:8000", "200"), ts, 1e6, nil)
		}
	})
	check("duplicate times", false)
	check("duplicate times shifted", true)
	// Deletions of part of the cached range, of a whole series, and of
	// everything a matcher selects from some time on.
	for _, d := range []url.Values{
		{"match[]": {`vllm:kv_cache_usage_perc{model_name="llama-8b"}`}, "start": {strconv.FormatInt(diffStart.Unix()+600, 10)}, "end": {strconv.FormatInt(diffStart.Unix()+1500, 10)}},
		{"match[]": {`http_requests_total{instance="10.0.0.3:8000", code="500"}`}},
		{"match[]": {`{__name__=~"vllm:e2e_request_latency_seconds_bucket|ttft_seconds", instance="10.0.0.1:8000"}`}, "start": {strconv.FormatInt(diffStart.Unix()+2400, 10)}},
	} {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/admin/tsdb/delete_series", strings.NewReader(d.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		ours.ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent {
			t.Fatalf("delete_series %s: %d %s", d.Encode(), rec.Code, rec.Body)
		}
		check("deleted "+d.Get("match[]"), false)
	}
	check("deleted shifted", true)
	t.Logf("compared %d range requests (%d more where upstream panicked), %d bytes cached", compared, panicked, cache.Bytes())
	if panicked > compared/4 {
		t.Errorf("upstream panicked on %d of %d requests: the deletions hide most comparisons", panicked, compared+panicked)
	}
}
