package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grafana/regexp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/route"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/notifications"
	v1 "github.com/prometheus/prometheus/web/api/v1"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/remote"
	"github.com/tailroot/tailroot/tsdb"
)

// diffStart is the first sample time of the generated data.
var diffStart = time.Unix(1_700_000_000, 0)

// loadDiffData writes an hour of seeded, realistic series at 15 s: counters
// with resets, gauges, classic and native histograms.
func loadDiffData(t testing.TB, db storage.AppendableV2) {
	t.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	app := db.AppenderV2(context.Background())
	models := []string{"llama-8b", "llama-70b"}
	insts := []string{"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"}
	les := []string{"0.01", "0.05", "0.1", "0.5", "1", "5", "+Inf"}
	type state struct{ c float64 }
	counters := map[string]*state{}
	for step := 0; step < 240; step++ {
		ts := diffStart.Add(time.Duration(step) * 15 * time.Second).UnixMilli()
		for _, m := range models {
			for _, in := range insts {
				key := m + in
				s := counters[key]
				if s == nil {
					s = &state{}
					counters[key] = s
				}
				s.c += float64(r.IntN(20))
				if step == 120 && in == insts[1] {
					s.c = 3 // counter reset
				}
				for _, code := range []string{"200", "500"} {
					v := s.c
					if code == "500" {
						v = float64(int(s.c) / 17)
					}
					mustAppend(t, app, labels.FromStrings("__name__", "http_requests_total", "model_name", m, "instance", in, "code", code), ts, v, nil)
				}
				mustAppend(t, app, labels.FromStrings("__name__", "vllm:num_requests_running", "model_name", m, "instance", in), ts, float64(r.IntN(64)), nil)
				mustAppend(t, app, labels.FromStrings("__name__", "vllm:kv_cache_usage_perc", "model_name", m, "instance", in), ts, r.Float64(), nil)
				cum := 0.0
				for i, le := range les {
					cum += float64(r.IntN(5) * (i + 1))
					mustAppend(t, app, labels.FromStrings("__name__", "vllm:e2e_request_latency_seconds_bucket", "model_name", m, "instance", in, "le", le), ts, cum*float64(step+1), nil)
				}
				mustAppend(t, app, labels.FromStrings("__name__", "vllm:e2e_request_latency_seconds_count", "model_name", m, "instance", in), ts, cum*float64(step+1), nil)
				mustAppend(t, app, labels.FromStrings("__name__", "vllm:e2e_request_latency_seconds_sum", "model_name", m, "instance", in), ts, cum*float64(step+1)*0.7, nil)
				h := &histogram.Histogram{
					Schema: 1, ZeroThreshold: 1e-3, ZeroCount: uint64(step),
					PositiveSpans:   []histogram.Span{{Offset: -4, Length: 4}},
					PositiveBuckets: []int64{int64(step + 1), int64(r.IntN(3)), 1, -1},
				}
				var c uint64 = h.ZeroCount
				abs := int64(0)
				for _, d := range h.PositiveBuckets {
					abs += d
					c += uint64(abs)
				}
				h.Count = c
				h.Sum = float64(c) * 0.3
				mustAppend(t, app, labels.FromStrings("__name__", "ttft_seconds", "model_name", m, "instance", in), ts, 0, h)
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
}

func mustAppend(t testing.TB, app storage.AppenderV2, ls labels.Labels, ts int64, v float64, h *histogram.Histogram) {
	t.Helper()
	if _, err := app.Append(0, ls, 0, ts, v, h, nil, storage.AOptions{}); err != nil {
		t.Fatalf("append %s: %v", ls, err)
	}
}

// genQueries builds n PromQL queries from templates over the loaded series.
func genQueries(r *rand.Rand, n int) []string {
	sel := []string{
		`http_requests_total`, `http_requests_total{code="500"}`, `http_requests_total{model_name=~"llama-.*", code!="200"}`,
		`vllm:num_requests_running`, `vllm:kv_cache_usage_perc{instance="10.0.0.2:8000"}`,
		`vllm:e2e_request_latency_seconds_bucket`, `ttft_seconds`, `{__name__=~"vllm:.*", model_name="llama-8b"}`, `nonexistent_metric`,
	}
	rng := []string{"1m", "5m", "10m", "1h"}
	by := []string{"", " by (model_name)", " by (instance)", " without (instance)", " by (model_name, code)"}
	agg := []string{"sum", "avg", "max", "min", "count", "stddev", "group"}
	fn := []string{"abs", "ceil", "floor", "sqrt", "ln", "exp", "sgn", "timestamp"}
	rfn := []string{"rate", "irate", "increase", "delta", "deriv", "avg_over_time", "max_over_time", "min_over_time", "stddev_over_time", "count_over_time", "last_over_time", "changes", "resets", "present_over_time"}
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	counterSel := func() string {
		return pick([]string{`http_requests_total`, `http_requests_total{code="200"}`, `vllm:e2e_request_latency_seconds_count`})
	}
	tmpl := []func() string{
		func() string { return pick(sel) },
		func() string { return fmt.Sprintf("%s(%s[%s])", pick(rfn), counterSel(), pick(rng)) },
		func() string {
			return fmt.Sprintf("%s%s (%s(%s[%s]))", pick(agg), pick(by), pick(rfn), counterSel(), pick(rng))
		},
		func() string {
			return fmt.Sprintf("histogram_quantile(%g, sum by (le%s) (rate(vllm:e2e_request_latency_seconds_bucket[%s])))", []float64{0.5, 0.9, 0.99}[r.IntN(3)], pick([]string{"", ", model_name"}), pick(rng))
		},
		func() string {
			return fmt.Sprintf("histogram_quantile(%g, sum%s (rate(ttft_seconds[%s])))", []float64{0.5, 0.9, 0.99}[r.IntN(3)], pick([]string{"", " by (model_name)"}), pick(rng))
		},
		func() string {
			return fmt.Sprintf("histogram_%s(ttft_seconds)", pick([]string{"count", "sum", "avg", "stddev"}))
		},
		func() string { return fmt.Sprintf("%s(%s)", pick(fn), pick(sel)) },
		func() string {
			return fmt.Sprintf("topk(%d, %s)", 1+r.IntN(3), pick([]string{"vllm:num_requests_running", "rate(http_requests_total[5m])"}))
		},
		func() string { return fmt.Sprintf("quantile(%g, vllm:kv_cache_usage_perc)", r.Float64()) },
		func() string {
			return fmt.Sprintf("sum by (model_name) (rate(http_requests_total{code=\"500\"}[%s])) / ignoring(code) group_left sum by (model_name) (rate(http_requests_total[%s]))", pick(rng), pick(rng))
		},
		func() string {
			return fmt.Sprintf("vllm:num_requests_running %s %d", pick([]string{">", "<", ">=", "== bool", "!= bool"}), r.IntN(64))
		},
		func() string { return fmt.Sprintf("%s offset %s", pick(sel), pick([]string{"1m", "5m", "-1m"})) },
		func() string {
			return fmt.Sprintf("max_over_time(rate(http_requests_total[%s])[%s:%s])", pick(rng), pick([]string{"10m", "30m"}), pick([]string{"1m", "30s", ""}))
		},
		func() string {
			return `label_replace(vllm:num_requests_running, "host", "$1", "instance", "(.*):.*")`
		},
		func() string { return fmt.Sprintf("predict_linear(vllm:kv_cache_usage_perc[%s], 600)", pick(rng)) },
		func() string {
			return fmt.Sprintf("vllm:num_requests_running @ %d", diffStart.Unix()+int64(r.IntN(3600)))
		},
		func() string {
			return fmt.Sprintf("count_values(\"v\", floor(vllm:kv_cache_usage_perc * %d))", 1+r.IntN(5))
		},
		func() string { return fmt.Sprintf("absent(%s)", pick(sel)) },
		func() string { return fmt.Sprintf("scalar(sum(vllm:num_requests_running)) * %g", r.Float64()) },
		func() string { return fmt.Sprintf("time() - %d", r.IntN(100)) },
		func() string {
			return pick([]string{"sum(", "rate(x[5m]", "foo{", "1 +", "histogram_quantile(0.9)", "rate(vllm:num_requests_running[5m]", `{__name__=""}`})
		},
	}
	out := make([]string, n)
	for i := range out {
		out[i] = tmpl[r.IntN(len(tmpl))]()
	}
	return out
}

func upstreamHandler(t testing.TB, db *tsdb.DB, opts query.Options) http.Handler {
	p := parser.NewParser(parser.Options{
		EnableExperimentalFunctions: opts.ExperimentalFunctions,
		EnableBinopFillModifiers:    opts.BinopFillModifiers,
		EnableUnquotedUTF8Names:     opts.UnquotedUTF8Names,
	})
	ng := promql.NewEngine(promql.EngineOpts{
		MaxSamples: opts.MaxSamples, Timeout: opts.Timeout, LookbackDelta: opts.LookbackDelta,
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
		EnableAtModifier:         true, EnableNegativeOffset: true,
		EnableDelayedNameRemoval: opts.DelayedNameRemoval, UseStartTimestamps: true, Parser: p,
	})
	t.Cleanup(func() { _ = ng.Close() })
	cfg := config.DefaultConfig
	reg := prometheus.NewRegistry()
	a := v1.NewAPI(ng, db, db, db,
		func(context.Context) v1.ScrapePoolsRetriever { return noScrape{} },
		func(context.Context) v1.TargetRetriever { return noScrape{} },
		func(context.Context) v1.AlertmanagerRetriever { return noScrape{} },
		func() config.Config { return cfg }, nil, v1.GlobalURLOptions{},
		func(f http.HandlerFunc) http.HandlerFunc { return f }, db, db.Dir(), true, false, 0, nil,
		func(context.Context) v1.RulesRetriever { return noScrape{} }, 5e7, 10, 1<<20, false, regexp.MustCompile(".*"),
		func() (v1.RuntimeInfo, error) { return v1.RuntimeInfo{}, nil }, &v1.PrometheusVersion{},
		func() []notifications.Notification { return nil },
		func() (<-chan notifications.Notification, func(), bool) { return nil, func() {}, false },
		reg, reg, nil, false, nil, false, false, false, opts.LookbackDelta, false, false, nil, nil,
		v1.OpenAPIOptions{}, p, false, 0)
	r := route.New()
	a.Register(r.WithPrefix("/api/v1"))
	return r
}

func get(t testing.TB, h http.Handler, path string, params url.Values) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path+"?"+params.Encode(), nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b)
}

// TestDifferentialAgainstUpstreamAPI sends a few hundred generated queries
// (instant and range, valid and invalid) and the metadata endpoints to
// tailroot's API and to the upstream Prometheus web API over the same TSDB,
// and requires byte-identical responses.
func TestDifferentialAgainstUpstreamAPI(t *testing.T) {
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	o.OutOfOrderWindow = 0
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	loadDiffData(t, db)

	qopts := query.DefaultOptions()
	ng, err := query.New(qopts, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	ours := New(db, ng, Handlers{}, Options{EnableAdmin: true}, nil, prometheus.NewRegistry()).router
	// As the server wires it: queries read the global view, which without
	// stores serves the TSDB's chunks to the fast path.
	global := New(db, ng, Handlers{}, Options{EnableAdmin: true, Queryable: remote.New(db, remote.DefaultOptions())}, nil, prometheus.NewRegistry()).router
	theirs := upstreamHandler(t, db, qopts)

	r := rand.New(rand.NewPCG(7, 11))
	n := 300
	if testing.Short() {
		n = 60
	}
	compared, failed, empty := 0, 0, 0
	for i, q := range genQueries(r, n) {
		var path string
		params := url.Values{"query": {q}}
		if i%2 == 0 {
			path = "/api/v1/query"
			params.Set("time", strconv.FormatInt(diffStart.Unix()+int64(r.IntN(4000)), 10))
		} else {
			path = "/api/v1/query_range"
			start := diffStart.Unix() + int64(r.IntN(1800))
			params.Set("start", strconv.FormatInt(start, 10))
			params.Set("end", strconv.FormatInt(start+int64(r.IntN(2400)), 10))
			params.Set("step", []string{"15", "30s", "1m", "97"}[r.IntN(4)])
		}
		h := ours
		if i%4 >= 2 {
			h = global
		}
		c1, b1 := get(t, h, path, params)
		c2, b2 := get(t, theirs, path, params)
		b1, b2 = canonicalVector(t, b1), canonicalVector(t, b2)
		if c1 != c2 || b1 != b2 {
			t.Errorf("%s %s:\ntailroot %d %s\nupstream %d %s", path, params.Encode(), c1, trunc(b1), c2, trunc(b2))
		}
		switch {
		case c1 != http.StatusOK:
			failed++
		case strings.Contains(b1, `"result":[]`) || strings.Contains(b1, `"result":null`):
			empty++
		}
		compared++
	}
	// The comparison means little if most queries return nothing.
	if nonEmpty := compared - failed - empty; nonEmpty < compared*6/10 || failed == 0 {
		t.Errorf("generated queries: %d with data, %d empty, %d errors; want most with data and some errors", nonEmpty, empty, failed)
	}
	t.Logf("queries: %d with data, %d empty, %d errors", compared-failed-empty, empty, failed)
	for _, c := range []struct {
		path   string
		params url.Values
	}{
		{"/api/v1/labels", nil},
		{"/api/v1/labels", url.Values{"match[]": {`vllm:num_requests_running`}}},
		{"/api/v1/label/instance/values", nil},
		{"/api/v1/label/__name__/values", url.Values{"limit": {"2"}}},
		{"/api/v1/series", url.Values{"match[]": {`{__name__=~"vllm:.*", instance="10.0.0.1:8000"}`}}},
		{"/api/v1/series", url.Values{"match[]": {`{`}}},
		{"/api/v1/format_query", url.Values{"query": {`sum by(a)(rate(x[5m]))`}}},
		{"/api/v1/status/tsdb", nil},
		{"/api/v1/query_exemplars", url.Values{"query": {`http_requests_total`}}},
		// Prometheus rejects these; MetricsQL would accept the first, and
		// the others need --enable-feature=promql-experimental-functions.
		{"/api/v1/query", url.Values{"query": {`rate(vllm:num_requests_running)`}}},
		{"/api/v1/query_range", url.Values{"query": {`rate(vllm:num_requests_running)`}, "start": {"1"}, "end": {"100"}, "step": {"10"}}},
		{"/api/v1/query", url.Values{"query": {`info(vllm:num_requests_running)`}}},
		{"/api/v1/query", url.Values{"query": {`sort_by_label(vllm:num_requests_running, "instance")`}}},
		{"/api/v1/query", url.Values{"query": {`limitk(1, vllm:num_requests_running)`}}},
		{"/api/v1/metadata", nil},
		{"/api/v1/metadata", url.Values{"metric": {"vllm:num_requests_running"}}},
		{"/api/v1/metadata", url.Values{"limit": {"0"}}},
	} {
		c1, b1 := get(t, ours, c.path, c.params)
		c2, b2 := get(t, theirs, c.path, c.params)
		if c1 != c2 || b1 != b2 {
			t.Errorf("%s %s:\ntailroot %d %s\nupstream %d %s", c.path, c.params.Encode(), c1, trunc(b1), c2, trunc(b2))
		}
		compared++
	}
	t.Logf("compared %d requests", compared)
}

// canonicalVector sorts the elements of an instant-vector result: PromQL
// leaves their order unspecified (it follows hash-map iteration), so two
// correct engines may list them differently. Other results are compared
// byte for byte; vector bodies are compared after decoding, sorting the
// elements and re-encoding both sides the same way.
func canonicalVector(t testing.TB, body string) string {
	var env map[string]any
	if json.Unmarshal([]byte(body), &env) != nil || env["status"] != "success" {
		return body
	}
	data, _ := env["data"].(map[string]any)
	if data == nil || data["resultType"] != "vector" {
		return body
	}
	res, _ := data["result"].([]any)
	keys := make([]string, len(res))
	for i, r := range res {
		b, _ := json.Marshal(r)
		keys[i] = string(b)
	}
	slices.Sort(keys)
	data["result"] = keys
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return "canonical:" + string(out)
}

func trunc(s string) string {
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}
