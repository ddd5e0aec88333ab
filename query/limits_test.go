package query

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"

	"github.com/tailroot/tailroot/query/qlimit"
)

func TestEngineLimits(t *testing.T) {
	st := promqltest.LoadedStorage(t, `
load 1m
  x{a="1"} 1 2 3
`)
	// The WITH cases need the MetricsQL front end, which is opt-in.
	eo := DefaultOptions()
	eo.MetricsQL = true
	ng, err := New(eo, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	var nested strings.Builder
	nested.WriteString("WITH (a0 = x")
	for i := 1; i <= 22; i++ {
		fmt.Fprintf(&nested, ", a%d = a%d + a%d", i, i-1, i-1)
	}
	nested.WriteString(") a22")

	for _, tc := range []struct {
		name, q, limit string
	}{
		{"22 nested WITH templates", nested.String(), "query.max-size"},
		{"40 KB a+a+…", strings.Repeat("a+", 20000) + "a", "query.max-size"},
		{"500-deep chain", strings.Repeat("x+", 500) + "x", "query.max-depth"},
		{"over the length", "x" + strings.Repeat(" ", 200<<10), "query.max-length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, rng := range []bool{false, true} {
				var err error
				if rng {
					_, err = ng.NewRangeQuery(context.Background(), st, nil, tc.q, time.Unix(0, 0), time.Unix(120, 0), time.Minute)
				} else {
					_, err = ng.NewInstantQuery(context.Background(), st, nil, tc.q, time.Unix(120, 0))
				}
				var le *qlimit.Error
				if !errors.As(err, &le) || le.Limit != tc.limit {
					t.Fatalf("range=%v: err = %v, want a refusal by %s", rng, err, tc.limit)
				}
			}
		})
	}

	// A MetricsQL query within the limits still runs, and its info quotes
	// the translation, capped.
	q := "WITH (a0 = x"
	for i := 1; i <= 8; i++ {
		q += fmt.Sprintf(", a%d = a%d + a%d", i, i-1, i-1)
	}
	q += ") a8"
	qry, err := ng.NewInstantQuery(context.Background(), st, nil, q, time.Unix(120, 0))
	if err != nil {
		t.Fatal(err)
	}
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	v := res.Value.(promql.Vector)
	if len(v) != 1 || v[0].F != 256*3 {
		t.Fatalf("got %v, want x summed 256 times = 768", v)
	}
	infos := fmt.Sprint(res.Warnings.AsErrors())
	if !strings.Contains(infos, "bytes in all)") || len(infos) > maxInfoQuery+200 {
		t.Fatalf("info not capped (%d bytes): %.300s", len(infos), infos)
	}
}

func TestSubqueryStepsLimit(t *testing.T) {
	st := promqltest.LoadedStorage(t, "load 1m\n  x 1 2 3\n")
	o := DefaultOptions()
	o.MaxSamples = 1000
	o.MetricsQL = true
	ng, err := New(o, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	for _, tc := range []struct {
		q       string
		rangeQ  bool
		refused bool
	}{
		{"sum_over_time(vector(1)[1d:1ms])", false, true},
		{"sum_over_time(x[16h:1m])", false, false}, // 960 steps
		{"sum_over_time(x[17h:1m])", false, true},  // 1020 steps
		{"sum_over_time(x[10h:1m])", true, true},   // 600 steps + a 10 h range = 1200
		{"max_over_time(sum_over_time(x[5h:1m])[5h:1m])", false, false},
		{"max_over_time(sum_over_time(x[10h:1m])[10h:1m])", false, true}, // the inner one spans 20 h
		{"sum_over_time(x[1000h])", false, false},                        // a range selector holds samples, not steps
		{"WITH (v = vector(1)) sum_over_time(v[1d:1ms])", false, true},   // the MetricsQL translation too
	} {
		var err error
		if tc.rangeQ {
			_, err = ng.NewRangeQuery(context.Background(), st, nil, tc.q, time.Unix(0, 0), time.Unix(36000, 0), time.Minute)
		} else {
			_, err = ng.NewInstantQuery(context.Background(), st, nil, tc.q, time.Unix(120, 0))
		}
		var le *qlimit.Error
		if got := errors.As(err, &le) && le.Limit == "query.max-samples"; got != tc.refused {
			t.Errorf("%s (range %v): err = %v, want refused %v", tc.q, tc.rangeQ, err, tc.refused)
		}
	}
}
