package apptest

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
)

// TestTenancyResultsCache runs the real binary with tenancy and its default
// results cache. Tenants A and B write the same series (same labels)
// with different values, all older than the cache's freshness window, and
// the same query_range is asked as A, as B, as A and as B again: each
// answer holds only the asking tenant's value, while /metrics shows the
// repeats were cache hits — so the cache served them, keyed per tenant.
// Were the cache keyed on the query alone, B's first ask would be a hit
// answered with A's values.
func TestTenancyResultsCache(t *testing.T) {
	app := Start(t, t.TempDir(), "--tenancy.enabled", "--tenancy.config.file", tenancyConfigFile(t),
		"--records.derive-interval", "0")
	alice := tenantClient{url: app.URL, tenant: "A", user: "alice", pass: "alice-pw"}
	bob := tenantClient{url: app.URL, tenant: "B", user: "bob", pass: "bob-pw"}

	now := time.Now().Truncate(time.Minute)
	// Within an hour of each other: after A's write the head still takes
	// B's samples of the same age as in-order appends.
	first, last := now.Add(-90*time.Minute), now.Add(-40*time.Minute)
	write := func(c tenantClient, v float64) {
		t.Helper()
		var samples []prompb.Sample
		for ts := first; !ts.After(last); ts = ts.Add(5 * time.Minute) {
			samples = append(samples, prompb.Sample{Timestamp: ts.UnixMilli(), Value: v})
		}
		wr := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
			Labels:  []prompb.Label{{Name: "__name__", Value: "tc_probe"}, {Name: "job", Value: "shared"}},
			Samples: samples,
		}}}
		b, err := wr.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		code, _, body := c.do(t, http.MethodPost, "/api/v1/write", nil, "application/x-protobuf", snappy.Encode(nil, b), rw1Header)
		if code/100 != 2 {
			t.Fatalf("remote write as %s: %d %s", c.tenant, code, body)
		}
	}
	write(alice, 1000)
	write(bob, 2)

	params := url.Values{
		"query": {`max_over_time(tc_probe[10m])`},
		"start": {strconv.FormatInt(first.Unix(), 10)},
		"end":   {strconv.FormatInt(last.Unix(), 10)},
		"step":  {"60"},
	}
	// values returns the distinct values of the one series answered, and
	// how many steps it has.
	values := func(c tenantClient) (map[float64]bool, int) {
		t.Helper()
		var data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		}
		decodeDataTB(t, c.mustGet(t, "/api/v1/query_range", params), &data)
		if len(data.Result) != 1 {
			t.Fatalf("as %s: %d series, want 1: %+v", c.tenant, len(data.Result), data.Result)
		}
		if _, ok := data.Result[0].Metric["tenant_id"]; ok {
			t.Errorf("as %s: the tenant label shows: %v", c.tenant, data.Result[0].Metric)
		}
		seen := map[float64]bool{}
		for _, v := range data.Result[0].Values {
			f, err := strconv.ParseFloat(v[1].(string), 64)
			if err != nil {
				t.Fatal(err)
			}
			seen[f] = true
		}
		return seen, len(data.Result[0].Values)
	}
	// 50 minutes at a 60 s step, every step within 10m of a sample.
	const steps = 51
	for i, tc := range []struct {
		c    tenantClient
		want float64
		hits float64
	}{
		{alice, 1000, 0}, // a miss, cached under A
		{bob, 2, 0},      // a miss: B has nothing cached
		{alice, 1000, 1}, // A's cached answer
		{bob, 2, 2},      // B's cached answer
	} {
		seen, n := values(tc.c)
		if len(seen) != 1 || !seen[tc.want] || n != steps {
			t.Errorf("ask %d as %s: values %v over %d steps, want only %v over %d", i+1, tc.c.tenant, seen, n, tc.want, steps)
		}
		if h := cacheMetric(t, app, "hits_total"); h != tc.hits {
			t.Errorf("after ask %d (as %s): cache hits %v, want %v", i+1, tc.c.tenant, h, tc.hits)
		}
	}
	if m := cacheMetric(t, app, "misses_total"); m != 2 {
		t.Errorf("cache misses %v, want 2 (the first ask of each tenant)", m)
	}
	if e := cacheMetric(t, app, "entries"); e != 2 {
		t.Errorf("cache entries %v, want 2 (one per tenant)", e)
	}
}
