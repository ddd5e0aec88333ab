package query

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/util/annotations"
)

// testRegistry registers a planned function that recomputes count_over_time
// per series from the matrix it evaluates, so every planner result can be
// checked against the upstream engine's own count_over_time.
func testRegistry(t *testing.T) *Registry {
	r := NewRegistry()
	r.MustRegisterPlanned(&parser.Function{
		Name: "planned_count", ArgTypes: []parser.ValueType{parser.ValueTypeMatrix}, ReturnType: parser.ValueTypeVector,
	}, func(ctx context.Context, c *Call) (promql.Vector, annotations.Annotations, error) {
		m, err := c.Matrix(ctx, 0)
		if err != nil {
			return nil, nil, err
		}
		var out promql.Vector
		for _, s := range m {
			if len(s.Floats) == 0 {
				continue
			}
			out = append(out, promql.Sample{Metric: s.Metric.DropReserved(func(n string) bool { return n == model.MetricNameLabel }), T: c.T.UnixMilli(), F: float64(len(s.Floats))})
		}
		return out, nil, nil
	})
	r.MustRegisterPlanned(&parser.Function{
		Name: "planned_sum_of", ArgTypes: []parser.ValueType{parser.ValueTypeVector, parser.ValueTypeScalar}, ReturnType: parser.ValueTypeVector,
	}, func(ctx context.Context, c *Call) (promql.Vector, annotations.Annotations, error) {
		v, err := c.Vector(ctx, 0)
		if err != nil {
			return nil, nil, err
		}
		k, err := c.Scalar(ctx, 1)
		if err != nil {
			return nil, nil, err
		}
		if len(v) == 0 {
			return nil, nil, nil
		}
		sum := 0.0
		for _, s := range v {
			sum += s.F
		}
		return promql.Vector{{Metric: labels.FromStrings("k", "sum"), T: c.T.UnixMilli(), F: sum * k}}, nil, nil
	})
	if err := r.RegisterPlanned(&parser.Function{Name: "planned_count", ReturnType: parser.ValueTypeVector}, func(context.Context, *Call) (promql.Vector, annotations.Annotations, error) { return nil, nil, nil }); err == nil {
		t.Fatal("duplicate registration accepted")
	}
	return r
}

const plannerData = `
load 1m
	x{job="a", instance="1"} 1 2 3 4 5 6 7 8 9 10 _ _ _ _ _ _ _ _ _ _ 21
	x{job="a", instance="2"} 1 _ 3 _ 5 _ 7 _ 9 _ 11 12 13 14 15 16 17 18 19 20 21
	x{job="b", instance="3"} 0+1x20
`

func TestPlannerMatchesUpstream(t *testing.T) {
	st := promqltest.LoadedStorage(t, plannerData)
	ng, err := New(DefaultOptions(), testRegistry(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	ctx := context.Background()
	at := time.Unix(0, 0).Add(9 * time.Minute)
	for _, c := range []struct{ planned, upstream string }{
		{`planned_count(x[5m])`, `count_over_time(x[5m])`},
		{`max by (job) (planned_count(x[3m]))`, `max by (job) (count_over_time(x[3m]))`},
		{`sum by (job) (planned_count(x[5m])) * 2`, `sum by (job) (count_over_time(x[5m])) * 2`},
		{`planned_count(x{job="a"}[5m]) / on(instance) group_left count_over_time(x[5m])`, `count_over_time(x{job="a"}[5m]) / on(instance) group_left count_over_time(x[5m])`},
		{`planned_count(rate(x[2m])[6m:1m])`, `count_over_time(rate(x[2m])[6m:1m])`},
		{`planned_sum_of(x, 3)`, `label_replace(sum(x) * 3, "k", "sum", "", "")`},
		{`planned_sum_of(planned_count(x[5m]), 1)`, `label_replace(sum(count_over_time(x[5m])), "k", "sum", "", "")`},
		// The call's text also stands, earlier, inside a string: only the
		// call is replaced.
		{`label_replace(vector(1), "a", "planned_count(x[5m])", "", "") + on() group_right planned_count(x[5m])`, `label_replace(vector(1), "a", "planned_count(x[5m])", "", "") + on() group_right count_over_time(x[5m])`},
		{`planned_count(x[5m]) - planned_count(x[5m]) + planned_count(x[3m])`, `count_over_time(x[5m]) - count_over_time(x[5m]) + count_over_time(x[3m])`},
	} {
		t.Run(c.planned, func(t *testing.T) {
			for _, mode := range []string{"instant", "range"} {
				// run returns the result as text: a result is only valid until
				// its query is closed.
				run := func(q string) string {
					var qry promql.Query
					var err error
					if mode == "instant" {
						qry, err = ng.NewInstantQuery(ctx, st, nil, q, at)
					} else {
						qry, err = ng.NewRangeQuery(ctx, st, nil, q, time.Unix(0, 0), time.Unix(0, 0).Add(25*time.Minute), time.Minute)
					}
					if err != nil {
						t.Fatalf("%s %s: %v", mode, q, err)
					}
					defer qry.Close()
					res := qry.Exec(ctx)
					if res.Err != nil {
						t.Fatalf("%s %s: %v", mode, q, res.Err)
					}
					switch v := res.Value.(type) {
					case promql.Matrix:
						return sortedString(v)
					case promql.Vector:
						m := promql.Matrix{}
						for _, s := range v {
							m = append(m, promql.Series{Metric: s.Metric, Floats: []promql.FPoint{{T: s.T, F: s.F}}})
						}
						return sortedString(m)
					}
					t.Fatalf("unexpected %T", res.Value)
					return ""
				}
				got, want := run(c.planned), run(c.upstream)
				if want == "" {
					t.Fatalf("%s: upstream returned nothing; the case tests nothing", mode)
				}
				if got != want {
					t.Errorf("%s:\nplanned  %s\nupstream %s", mode, got, want)
				}
			}
		})
	}
}

func sortedString(m promql.Matrix) string {
	var parts []string
	for _, s := range m {
		parts = append(parts, s.String())
	}
	for i := range parts {
		for j := i + 1; j < len(parts); j++ {
			if parts[j] < parts[i] {
				parts[i], parts[j] = parts[j], parts[i]
			}
		}
	}
	return strings.Join(parts, "\n")
}

func TestPlannerErrors(t *testing.T) {
	st := promqltest.LoadedStorage(t, plannerData)
	ng, err := New(DefaultOptions(), testRegistry(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	ctx := context.Background()
	if _, err := ng.NewInstantQuery(ctx, st, nil, `max_over_time(planned_count(x[5m])[10m:1m])`, time.Unix(600, 0)); err == nil || !strings.Contains(err.Error(), "cannot be evaluated inside a subquery") {
		t.Errorf("planned call in subquery: %v", err)
	}
	if _, err := ng.NewInstantQuery(ctx, st, nil, `planned_count(x)`, time.Unix(600, 0)); err == nil || !strings.Contains(err.Error(), "expected type range vector") {
		t.Errorf("wrong argument type: %v", err)
	}
	q, err := ng.NewRangeQuery(ctx, st, nil, `planned_count(x[5m])`, time.Unix(0, 0), time.Unix(20000, 0), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res := q.Exec(ctx); res.Err == nil || !strings.Contains(res.Err.Error(), "over the limit") {
		t.Errorf("too many steps: %v", res.Err)
	}
}
