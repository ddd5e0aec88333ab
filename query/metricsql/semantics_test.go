package metricsql

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
)

// testData is shared by the semantic tests: counters (one with a reset),
// gauges with negative values, and series that lack a label others have.
const testData = `
load 1m
	http_requests_total{job="api",instance="a",code="200"} 0+10x30
	http_requests_total{job="api",instance="b",code="500"} 0+3x10 0+3x20
	http_requests_total{job="db",instance="a",code="200"} 0+7x30
	temp{room="kitchen",floor="1"} 20 21 19 22 24 23 21 20 25 26 24 23 22 21 20 19 18 20 22 24 26 25 24 23 22 21 20 19 18 17 16
	temp{room="hall",floor="1"} 15 14 16 -2 -3 15 17 18 16 15 14 13 12 -1 15 16 17 18 19 20 21 22 21 20 19 18 17 16 15 14 13
	temp{room="attic",floor="2"} 30 31 32 33 34 35 34 33 32 31 30 29 28 27 26 25 24 23 22 21 20 21 22 23 24 25 26 27 28 29 30
	temp{room="cellar",floor="2"} 8 8 8 9 9 9 10 10 10 9 9 9 8 8 8 7 7 7 8 8 8 9 9 9 10 10 10 9 9 9 8
	info{src="x",other="1"} 1x30
	info{src="y",dst="old",other="2"} 1x30
	info{dst="keep",other="3"} 1x30
`

// testStep is both the range-query step and Options.Step, as the query
// front end passes the real step.
const testStep = 3 * time.Minute

var testParserOpts = parser.Options{EnableExperimentalFunctions: true, EnableBinopFillModifiers: true}

func testOptions() Options {
	return Options{EnableExperimentalFunctions: true, EnableBinopFillModifiers: true, Step: testStep}
}

func newTestEngine(t *testing.T) *promql.Engine {
	t.Helper()
	ng := promql.NewEngine(promql.EngineOpts{
		MaxSamples:               1_000_000,
		Timeout:                  10 * time.Second,
		LookbackDelta:            5 * time.Minute,
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		EnableDelayedNameRemoval: true,
		Parser:                   parser.NewParser(testParserOpts),
	})
	t.Cleanup(func() { _ = ng.Close() })
	return ng
}

// translationCase is one row of docs/metricsql.md: a MetricsQL query and a
// PromQL query, written by hand, that means the same thing.
type translationCase struct {
	name, mql, prom string
}

var translationCases = []translationCase{
	// Syntax.
	{"with_constant", `WITH (r = rate(http_requests_total[5m])) sum(r) by (job)`, `sum by (job) (rate(http_requests_total[5m]))`},
	{"with_function", `WITH (f(m, w) = avg_over_time(m[w])) f(temp, 10m)`, `avg_over_time(temp[10m])`},
	{"with_nested", `WITH (hot(x) = x > 22, h = hot(temp)) h + 0`, `(temp > 22) + 0`},
	{"missing_window_is_step", `rate(http_requests_total)`, `rate(http_requests_total[3m])`},
	{"dollar_interval_is_step", `max_over_time(temp[$__interval])`, `max_over_time(temp[3m])`},
	{"step_multiple_window", `rate(http_requests_total[5i])`, `rate(http_requests_total[15m])`},
	{"offset_without_window", `rate(http_requests_total offset 5m)`, `rate(http_requests_total[3m] offset 5m)`},
	{"negative_offset", `max_over_time(temp[3m] offset -2m) + 0`, `max_over_time(temp[3m] offset -2m)`},
	{"at_without_window", `rate(http_requests_total @ 600)`, `rate(http_requests_total[3m] @ 600)`},
	{"at_end", `max_over_time(temp @ end())`, `max_over_time(temp[3m] @ end())`},
	{"subquery_inherits_step", `max_over_time(rate(http_requests_total[5m])[10m:])`, `max_over_time(rate(http_requests_total[5m])[10m:3m])`},
	{"number_suffix", `temp > 0.02Ki`, `temp > 20.48`},
	{"unary_minus", `-temp + 0`, `-temp`},
	{"or_filters_overlapping", `http_requests_total{job="api" or code="200"}`, `http_requests_total`},
	{"or_filters_disjoint", `http_requests_total{job="db" or code="500"}`, `http_requests_total unless http_requests_total{job="api",code="200"}`},
	{"or_filters_in_rollup", `rate(http_requests_total{job="db" or code="500"}[5m])`, `rate(http_requests_total[5m]) unless rate(http_requests_total{job="api",code="200"}[5m])`},
	{"or_filters_in_aggregation", `sum(temp{floor="2" or room="hall"})`, `sum(temp unless temp{room="kitchen"})`},
	{"range_as_instant", `abs(temp[5m])`, `abs(last_over_time(temp[5m]))`},
	{"scalar_as_vector", `abs(-5)`, `vector(5)`},
	{"scalar_comparison", `time() > 600`, `vector(time()) > 600`},
	{"vector_identity", `vector(temp)`, `temp`},

	// Binary operators.
	{"if", `temp if temp > 22`, `temp > 22`},
	{"ifnot", `temp ifnot temp > 22`, `temp <= 22`},
	{"if_labelless_right", `temp if sum(temp) > 75`, `temp unless on() (sum(temp) <= 75)`},
	{"ifnot_labelless_right", `temp ifnot sum(temp) > 75`, `temp and on() (sum(temp) <= 75)`},
	{"if_scalar_right", `temp if 1`, `temp`},
	{"constant_function_operand", `temp / clamp_min(4, 0)`, `temp / 4`},
	{"keep_metric_names_filter", `(temp > 22) keep_metric_names`, `temp > 22`},

	// Rollup functions.
	{"median_over_time", `median_over_time(temp[10m])`, `quantile_over_time(0.5, temp[10m])`},
	{"range_over_time", `range_over_time(temp[10m])`, `-(min_over_time(temp[10m]) - max_over_time(temp[10m]))`},
	{"default_rollup", `default_rollup(temp[5m])`, `last_over_time(temp[5m])`},
	{"default_rollup_no_window", `default_rollup(temp)`, `last_over_time(temp[3m])`},
	{"default_rollup_keep_names", `default_rollup(temp) keep_metric_names`, `last_over_time(temp[3m])`},
	{"rate_prometheus", `rate_prometheus(http_requests_total[5m])`, `rate(http_requests_total[5m])`},
	{"increase_prometheus", `increase_prometheus(http_requests_total[5m])`, `increase(http_requests_total[5m])`},
	{"delta_prometheus", `delta_prometheus(temp[5m])`, `delta(temp[5m])`},
	{"changes_prometheus", `changes_prometheus(temp[5m])`, `changes(temp[5m])`},
	{"holt_winters", `holt_winters(temp[10m], 0.5, 0.5)`, `double_exponential_smoothing(temp[10m], 0.5, 0.5)`},
	{"tfirst_over_time", `tfirst_over_time(temp[5m])`, `ts_of_first_over_time(temp[5m])`},
	{"tlast_over_time", `tlast_over_time(temp[5m])`, `ts_of_last_over_time(temp[5m])`},
	{"timestamp_rollup", `timestamp(temp[5m])`, `ts_of_last_over_time(temp[5m])`},
	{"quantile_over_time_no_window", `quantile_over_time(0.9, temp)`, `quantile_over_time(0.9, temp[3m])`},

	// Transform functions.
	{"step", `temp * step()`, `temp * 180`},
	{"drop_empty_series", `drop_empty_series(temp > 22)`, `temp > 22`},
	{"label_set", `label_set(temp, "unit", "celsius", "floor", "")`, `label_replace(label_replace(temp, "unit", "celsius", "room", ".*"), "floor", "", "room", ".*")`},
	{"label_set_dollar", `label_set(temp, "unit", "$1")`, `label_replace(temp, "unit", "$$1", "room", ".*")`},
	{"alias", `alias(temp, "t")`, `label_replace(temp, "__name__", "t", "__name__", "temp")`},
	{"label_del", `label_del(temp, "floor")`, `label_replace(temp, "floor", "", "room", ".*")`},
	{"label_copy", `label_copy(info, "src", "dst")`, `label_replace(info, "dst", "$0", "src", ".+")`},
	{"label_move", `label_move(info, "src", "dst")`, `label_replace(label_replace(info, "dst", "$0", "src", ".+"), "src", "", "src", ".*")`},
	{"label_map_chain", `label_map(temp, "room", "kitchen", "hall", "hall", "attic")`, `label_replace(temp{room="kitchen"}, "room", "hall", "", "") or label_replace(temp{room="hall"}, "room", "attic", "", "") or temp{room!~"kitchen|hall"}`},
	{"ru_template", `ru(temp, 40)`, `clamp_min(40 - clamp_min(temp, 0), 0) / 40 * 100`},

	// Aggregations.
	{"median", `median(temp) by (floor)`, `quantile by (floor) (0.5, temp)`},
	{"sum2", `sum2(temp) by (floor)`, `sum by (floor) (temp * temp)`},
	{"share", `share(temp) by (floor)`, `(temp unless temp < 0) / ignoring(room) group_left sum without (room) (temp unless temp < 0)`},
	{"zscore", `zscore(temp) by (floor)`, `(temp - ignoring(room) group_left avg without (room) (temp)) / ignoring(room) group_left stddev without (room) (temp)`},
	{"zscore_without", `zscore(temp) without (room)`, `(temp - on(floor) group_left avg by (floor) (temp)) / on(floor) group_left stddev by (floor) (temp)`},
	{"mad", `mad(temp)`, `quantile(0.5, abs(temp - scalar(quantile(0.5, temp))))`},
	{"limitk", `limitk(2, temp) + 0`, `limitk(2, temp) + 0`},

	// Functions both dialects share pass through (with MetricsQL syntax around them).
	{"passthrough_histogram_quantile", `WITH (b = rate(http_requests_total[5m])) histogram_quantile(0.5, label_set(b, "le", "+Inf"))`, `histogram_quantile(0.5, label_replace(rate(http_requests_total[5m]), "le", "+Inf", "", ""))`},
	{"passthrough_clamp", `WITH (lo = 0) clamp(temp, lo, 25)`, `clamp(temp, 0, 25)`},
	{"passthrough_topk", `WITH (k = 2) topk(k, temp)`, `topk(2, temp)`},
	{"passthrough_count_values", `WITH (l = "v") count_values(l, temp)`, `count_values("v", temp)`},
}

func TestTranslateSemantics(t *testing.T) {
	st := promqltest.LoadedStorage(t, testData)
	ng := newTestEngine(t)
	p := parser.NewParser(testParserOpts)
	for _, tc := range translationCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Translate(tc.mql, testOptions())
			if err != nil {
				t.Fatalf("Translate(%q): %v", tc.mql, err)
			}
			if _, err := p.ParseExpr(got); err != nil {
				t.Fatalf("translation %q does not parse: %v", got, err)
			}
			// Range query over the whole data set.
			gotRange := evalRange(t, ng, st, got)
			wantRange := evalRange(t, ng, st, tc.prom)
			if len(wantRange.(promql.Matrix)) == 0 {
				t.Fatalf("reference %q returns nothing: the case checks nothing", tc.prom)
			}
			assertSameValue(t, got, gotRange, wantRange)
			// Instant queries, where topk/sort order and @/offset edges differ.
			for _, at := range []time.Duration{0, 7 * time.Minute, 15 * time.Minute, 30 * time.Minute} {
				assertSameValue(t, got, evalInstant(t, ng, st, got, at), evalInstant(t, ng, st, tc.prom, at))
			}
		})
	}
}

func evalRange(t *testing.T, ng *promql.Engine, st storage.Queryable, q string) parser.Value {
	t.Helper()
	qry, err := ng.NewRangeQuery(context.Background(), st, nil, q, time.Unix(0, 0), time.Unix(0, 0).Add(30*time.Minute), testStep)
	if err != nil {
		t.Fatalf("range query %q: %v", q, err)
	}
	// Close returns the result's memory to the engine's pools.
	t.Cleanup(qry.Close)
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("range query %q: %v", q, res.Err)
	}
	return res.Value
}

func evalInstant(t *testing.T, ng *promql.Engine, st storage.Queryable, q string, at time.Duration) parser.Value {
	t.Helper()
	qry, err := ng.NewInstantQuery(context.Background(), st, nil, q, time.Unix(0, 0).Add(at))
	if err != nil {
		t.Fatalf("instant query %q: %v", q, err)
	}
	t.Cleanup(qry.Close)
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("instant query %q at %v: %v", q, at, res.Err)
	}
	return res.Value
}

func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// assertSameValue compares two query results as sets of series: same label
// sets, same timestamps, same values (NaN equal to NaN).
func assertSameValue(t *testing.T, q string, got, want parser.Value) {
	t.Helper()
	switch w := want.(type) {
	case promql.Matrix:
		g, ok := got.(promql.Matrix)
		if !ok {
			t.Fatalf("%q: got %T, want matrix", q, got)
		}
		sortSeries(g)
		sortSeries(w)
		if len(g) != len(w) {
			t.Fatalf("%q: %d series, want %d\ngot:  %v\nwant: %v", q, len(g), len(w), g, w)
		}
		for i := range w {
			if !labels.Equal(g[i].Metric, w[i].Metric) || len(g[i].Floats) != len(w[i].Floats) {
				t.Fatalf("%q: series %d is\n%v\nwant\n%v", q, i, g[i], w[i])
			}
			for j := range w[i].Floats {
				if g[i].Floats[j].T != w[i].Floats[j].T || !sameFloat(g[i].Floats[j].F, w[i].Floats[j].F) {
					t.Fatalf("%q: series %v point %d is %v, want %v", q, w[i].Metric, j, g[i].Floats[j], w[i].Floats[j])
				}
			}
		}
	case promql.Vector:
		g, ok := got.(promql.Vector)
		if !ok {
			t.Fatalf("%q: got %T, want vector", q, got)
		}
		byLabels := func(a, b promql.Sample) int { return labels.Compare(a.Metric, b.Metric) }
		slices.SortFunc(g, byLabels)
		slices.SortFunc(w, byLabels)
		if len(g) != len(w) {
			t.Fatalf("%q: %d samples, want %d\ngot:  %v\nwant: %v", q, len(g), len(w), g, w)
		}
		for i := range w {
			if !labels.Equal(g[i].Metric, w[i].Metric) || g[i].T != w[i].T || !sameFloat(g[i].F, w[i].F) {
				t.Fatalf("%q: sample %d is %v, want %v", q, i, g[i], w[i])
			}
		}
	case promql.Scalar:
		g, ok := got.(promql.Scalar)
		if !ok || g.T != w.T || !sameFloat(g.V, w.V) {
			t.Fatalf("%q: got %v, want %v", q, got, want)
		}
	default:
		t.Fatalf("%q: unexpected result type %T", q, want)
	}
}

func sortSeries(m promql.Matrix) {
	slices.SortFunc(m, func(a, b promql.Series) int { return labels.Compare(a.Metric, b.Metric) })
}
