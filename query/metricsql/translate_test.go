package metricsql

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
)

// TestTranslateValues checks translations against numbers worked out by hand
// from testData, independently of any PromQL formulation.
func TestTranslateValues(t *testing.T) {
	st := promqltest.LoadedStorage(t, testData)
	ng := newTestEngine(t)
	cases := []struct {
		name string
		mql  string
		at   time.Duration
		want map[string]float64
	}{
		// t=0: kitchen 20, hall 15 (floor 1); attic 30, cellar 8 (floor 2).
		// floor 1: (15+20)/2; floor 2: (8+30)/2.
		{"median", `median(temp) by (floor)`, 0, map[string]float64{`{floor="1"}`: 17.5, `{floor="2"}`: 19}},
		// floor 1: 20²+15² = 625; floor 2: 30²+8² = 964.
		{"sum2", `sum2(temp) by (floor)`, 0, map[string]float64{`{floor="1"}`: 625, `{floor="2"}`: 964}},
		// t=3m: kitchen 22, hall -2 (negative: dropped), attic 33, cellar 9.
		// kitchen 22/22; attic 33/42; cellar 9/42.
		{"share", `share(temp) by (floor)`, 3 * time.Minute, map[string]float64{
			`{floor="1", room="kitchen"}`: 1,
			`{floor="2", room="attic"}`:   33.0 / 42,
			`{floor="2", room="cellar"}`:  9.0 / 42,
		}},
		// floor 1: mean 17.5, population sd 2.5; floor 2: mean 19, sd 11.
		{"zscore", `zscore(temp) by (floor)`, 0, map[string]float64{
			`{floor="1", room="kitchen"}`: 1, `{floor="1", room="hall"}`: -1,
			`{floor="2", room="attic"}`: 1, `{floor="2", room="cellar"}`: -1,
		}},
		// values 8 15 20 30, median 17.5; |dev| 9.5 2.5 2.5 12.5, median 6.
		{"mad", `mad(temp)`, 0, map[string]float64{`{}`: 6}},
		// kitchen samples at 1..10m: 21 19 22 24 23 21 20 25 26 24, max-min = 26-19.
		{"range_over_time", `range_over_time(temp{room="kitchen"}[10m])`, 10 * time.Minute, map[string]float64{`{floor="1", room="kitchen"}`: 7}},
		// kitchen samples at 1..4m: 21 19 22 24, median (21+22)/2.
		{"median_over_time", `median_over_time(temp{room="kitchen"}[4m])`, 4 * time.Minute, map[string]float64{`{floor="1", room="kitchen"}`: 21.5}},
		// t=3m: only attic (33) exceeds 22; kitchen is exactly 22.
		{"if", `temp if temp > 22`, 3 * time.Minute, map[string]float64{`{__name__="temp", floor="2", room="attic"}`: 33}},
		{"step", `step()`, 0, map[string]float64{`scalar`: 180}},
		{"or_filters", `http_requests_total{job="db" or code="500"}`, 0, map[string]float64{
			`{__name__="http_requests_total", code="200", instance="a", job="db"}`:  0,
			`{__name__="http_requests_total", code="500", instance="b", job="api"}`: 0,
		}},
		// kitchen->hall and hall->attic in one lookup; the old attic keeps its name.
		{"label_map", `label_map(temp, "room", "kitchen", "hall", "hall", "attic")`, 0, map[string]float64{
			`{__name__="temp", floor="1", room="hall"}`: 20, `{__name__="temp", floor="1", room="attic"}`: 15,
			`{__name__="temp", floor="2", room="attic"}`: 30, `{__name__="temp", floor="2", room="cellar"}`: 8,
		}},
		// A series without src keeps its dst.
		{"label_copy", `label_copy(info, "src", "dst")`, 0, map[string]float64{
			`{__name__="info", dst="x", other="1", src="x"}`: 1, `{__name__="info", dst="y", other="2", src="y"}`: 1, `{__name__="info", dst="keep", other="3"}`: 1,
		}},
		{"label_move", `label_move(info, "src", "dst")`, 0, map[string]float64{
			`{__name__="info", dst="x", other="1"}`: 1, `{__name__="info", dst="y", other="2"}`: 1, `{__name__="info", dst="keep", other="3"}`: 1,
		}},
		{"label_set_literal_dollar", `label_set(info{other="1"}, "note", "$1 each")`, 0, map[string]float64{
			`{__name__="info", note="$1 each", other="1", src="x"}`: 1,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Translate(tc.mql, testOptions())
			if err != nil {
				t.Fatalf("Translate(%q): %v", tc.mql, err)
			}
			got := map[string]float64{}
			switch v := evalInstant(t, ng, st, q, tc.at).(type) {
			case promql.Vector:
				for _, s := range v {
					got[s.Metric.String()] = s.F
				}
			case promql.Scalar:
				got["scalar"] = v.V
			default:
				t.Fatalf("%q: unexpected %T", q, v)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%q: got %v, want %v", q, got, tc.want)
			}
			for k, w := range tc.want {
				g, ok := got[k]
				if !ok || math.Abs(g-w) > 1e-12 {
					t.Fatalf("%q: %s = %v (present %v), want %v; all: %v", q, k, g, ok, w, got)
				}
			}
		})
	}
}

func TestTranslateUnsupported(t *testing.T) {
	cases := []struct {
		name, mql, construct string
	}{
		{"keep_metric_names_rate", `rate(x[5m]) keep_metric_names`, "rate() keep_metric_names"},
		{"keep_metric_names_arith", `(x + 1) keep_metric_names`, "keep_metric_names"},
		{"default", `x default 0`, "default"},
		{"prefix", `x * on(a) group_left(b) prefix "p_" y`, "group_left prefix"},
		{"group_left_star", `x * on(a) group_left(*) y`, "group_left(*)"},
		{"now", `now()`, "now()"},
		{"union", `(x, y)`, "union"},
		{"union_func", `union(x, y)`, "union"},
		{"topk_max", `topk_max(3, x)`, "topk_max()"},
		{"any", `any(x) by (a)`, "any()"},
		{"range_quantile", `range_quantile(0.5, x)`, "range_quantile()"},
		{"range_median_template", `range_median(x)`, "range_quantile()"},
		{"rollup_rate", `rollup_rate(x[5m])`, "rollup_rate()"},
		{"increase_pure", `increase_pure(x[5m])`, "increase_pure()"},
		{"lag", `lag(x[5m])`, "lag()"},
		{"zscore_over_time", `zscore_over_time(x[5m])`, "zscore_over_time()"},
		{"label_keep", `label_keep(x, "a")`, "label_keep()"},
		{"histogram_quantiles", `histogram_quantiles("phi", 0.5, 0.9, x)`, "histogram_quantiles()"},
		{"aggregate_limit", `sum(x) by (a) limit 3`, "sum(...) limit 3"},
		{"aggregate_union_args", `sum(x, y)`, "sum(x, y)"},
		{"implicit_subquery", `rate(sum(x))`, "sum(x)"},
		{"window_on_expression", `sum(x)[5m]`, "sum(x)[5m]"},
		{"offset_on_expression", `sum(x) offset 5m`, "sum(x) offset 5m"},
		{"computed_at", `x @ (end() - 3600)`, "@ end() - 3600"},
		{"or_filters_differing_names", `{__name__="a" or __name__="b"}`, `{__name__="a" or __name__="b"}`},
		{"or_filters_range_outside_rollup", `x{a="1" or b="2"}[5m]`, `x{a="1" or b="2"}[5m]`},
		{"or_filters_absent_over_time", `absent_over_time(x{a="1" or b="2"}[5m])`, "absent_over_time()"},
		{"label_map_cycle", `label_map(x, "l", "a", "b", "b", "a")`, "label_map"},
		{"label_set_odd", `label_set(x, "a")`, "label_set"},
		{"wrong_arity_rejected_by_promql", `histogram_quantile(0.9, x, "le")`, `histogram_quantile(0.9, x, "le")`},
		{"type_error_rejected_by_promql", `rate(time())`, "time()"},
		{"composite_by_name", `share(x) by (__name__)`, "share(x) by(__name__)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Translate(tc.mql, testOptions())
			if err == nil {
				t.Fatalf("Translate(%q) = %q, want an error", tc.mql, out)
			}
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Translate(%q): %v is not ErrUnsupported", tc.mql, err)
			}
			var ue *UnsupportedError
			if !errors.As(err, &ue) {
				t.Fatalf("Translate(%q): %v is not an *UnsupportedError", tc.mql, err)
			}
			if !strings.Contains(ue.Construct, tc.construct) {
				t.Fatalf("Translate(%q): construct %q, want it to name %q", tc.mql, ue.Construct, tc.construct)
			}
		})
	}
}

func TestTranslateSyntaxError(t *testing.T) {
	for _, q := range []string{`rate(x[5m]`, `x{a=~"("}`, `WITH (f(a) = a) g(x)`, ``} {
		_, err := Translate(q, testOptions())
		if err == nil || errors.Is(err, ErrUnsupported) {
			t.Errorf("Translate(%q): %v, want a parse error", q, err)
		}
	}
}

// TestTranslateOptions checks that output follows the target parser's
// configuration and the step.
func TestTranslateOptions(t *testing.T) {
	noLabelReplace := map[string]*parser.Function{}
	for k, v := range parser.Functions {
		if k != "label_replace" {
			noLabelReplace[k] = v
		}
	}
	cases := []struct {
		name    string
		mql     string
		opts    Options
		want    string // exact PromQL text, or "" when an error is wanted
		wantErr string // substring of the UnsupportedError construct
	}{
		{"zero_step_is_5m", `rate(x)`, Options{}, `rate(x[5m])`, ""},
		{"step_used", `rate(x)`, Options{Step: 30 * time.Second}, `rate(x[30s])`, ""},
		{"step_truncated_to_ms", `rate(x)`, Options{Step: 1500 * time.Microsecond}, `rate(x[1ms])`, ""},
		{"sub_ms_step", `rate(x)`, Options{Step: time.Microsecond}, `rate(x[1ms])`, ""},
		{"step_units", `x[2i]`, Options{Step: 90 * time.Second}, `x[3m]`, ""},
		{"step_func_default", `step()`, Options{}, `300`, ""},
		{"subquery_default_step", `max_over_time(x[1h:])`, Options{Step: 2 * time.Minute}, `max_over_time(x[1h:2m])`, ""},
		{"experimental_disabled_holt_winters", `holt_winters(x[1h], 0.5, 0.5)`, Options{}, "", "holt_winters()"},
		{"experimental_disabled_limitk", `limitk(2, x)`, Options{}, "", "limitk()"},
		{"experimental_disabled_start", `x - start()`, Options{}, "", "start()"},
		{"experimental_enabled_start", `x - start()`, Options{EnableExperimentalFunctions: true}, `x - start()`, ""},
		{"experimental_disabled_tlast", `tlast_over_time(x[5m])`, Options{}, "", "tlast_over_time()"},
		{"fill_disabled", `x + fill(0) y`, Options{}, "", "fill"},
		{"fill_enabled", `x + fill(0) y`, Options{EnableBinopFillModifiers: true}, `x + fill (0) y`, ""},
		{"custom_functions", `label_set(x, "a", "b")`, Options{Functions: noLabelReplace}, "", "label_set()"},
		{"keyword_metric_name", `sum{a="b"} + 1`, Options{}, `{__name__="sum",a="b"} + 1`, ""},
		{"dotted_metric_name", `{"foo.bar", a="b"} + 1`, Options{}, `{__name__="foo.bar",a="b"} + 1`, ""},
		{"at_start_is_not_a_function", `rate(x @ start())`, Options{}, `rate(x[5m] @ start())`, ""},
		{"negative_number_power", `x ^ -2`, Options{}, `x ^ (-2)`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Translate(tc.mql, tc.opts)
			if tc.wantErr != "" {
				var ue *UnsupportedError
				if !errors.As(err, &ue) || !strings.Contains(ue.Construct, tc.wantErr) {
					t.Fatalf("Translate(%q) = %q, %v; want unsupported %q", tc.mql, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Translate(%q) = %q, %v; want %q", tc.mql, got, err, tc.want)
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	opts := testOptions()
	t.Run("promql_unchanged", func(t *testing.T) {
		q := `sum by (job) (rate(http_requests_total[5m]))`
		got, translated, err := Prepare(q, opts)
		if err != nil || translated || got != q {
			t.Fatalf("Prepare(%q) = %q, %v, %v", q, got, translated, err)
		}
	})
	t.Run("metricsql_translated", func(t *testing.T) {
		got, translated, err := Prepare(`median(x) by (a)`, opts)
		if err != nil || !translated || got != `quantile by (a) (0.5, x)` {
			t.Fatalf("Prepare = %q, %v, %v", got, translated, err)
		}
	})
	t.Run("neither_gives_promql_error", func(t *testing.T) {
		_, _, err := Prepare(`rate(x[5m]`, opts)
		var pe parser.ParseErrors
		if !errors.As(err, &pe) || errors.Is(err, ErrUnsupported) {
			t.Fatalf("Prepare: %v, want only the PromQL parse error", err)
		}
	})
	t.Run("untranslatable_gives_both", func(t *testing.T) {
		_, _, err := Prepare(`now()`, opts)
		var pe parser.ParseErrors
		if !errors.As(err, &pe) || !errors.Is(err, ErrUnsupported) {
			t.Fatalf("Prepare: %v, want the PromQL error joined with ErrUnsupported", err)
		}
	})
}

func TestTranslateDeterministic(t *testing.T) {
	q := `WITH (f(x) = label_map(x, "l", "a", "b", "b", "c", "c", "d")) f(rate(m{a="1" or b="2"}))`
	first, err := Translate(q, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if got, _ := Translate(q, testOptions()); got != first {
			t.Fatalf("Translate is not deterministic: %q vs %q", got, first)
		}
	}
}

// TestMapOrder checks that label_map's replacements run readers before
// writers: for a→b, b→c, c→d the value c must be rewritten first, then b,
// then a, whatever order the pairs were written in.
func TestMapOrder(t *testing.T) {
	table := map[string]string{"a": "b", "b": "c", "c": "d", "x": "x"}
	for _, froms := range [][]string{{"a", "b", "c", "x"}, {"c", "a", "x", "b"}} {
		got, ok := mapOrder(froms, table)
		if !ok || strings.Join(got, ",") != "c,b,a" {
			t.Errorf("mapOrder(%v) = %v, %v; want [c b a]", froms, got, ok)
		}
	}
	if _, ok := mapOrder([]string{"a", "b"}, map[string]string{"a": "b", "b": "a"}); ok {
		t.Error("mapOrder accepted the cycle a→b→a")
	}
}
