package fast_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/fast"
)

// TestContextEnds checks that a cancelled or expired query stops with the
// upstream engine's error types, which the API maps to its error kinds.
func TestContextEnds(t *testing.T) {
	db := openDiffDB(t, 3)
	plan := mustCompile(t, `sum by (job) (rate(req_total[5m]))`)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	start := diffStart.Add(time.Hour)
	for name, tc := range map[string]struct {
		ctx  context.Context
		want any
	}{
		"cancelled": {cancelled, promql.ErrQueryCanceled("")},
		"expired":   {expired, promql.ErrQueryTimeout("")},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := plan.Range(tc.ctx, db, fast.DefaultOptions(), start, start.Add(time.Hour), 15*time.Second)
			switch tc.want.(type) {
			case promql.ErrQueryCanceled:
				var e promql.ErrQueryCanceled
				if !errors.As(err, &e) {
					t.Fatalf("err = %v (%T), want ErrQueryCanceled", err, err)
				}
			case promql.ErrQueryTimeout:
				var e promql.ErrQueryTimeout
				if !errors.As(err, &e) {
					t.Fatalf("err = %v (%T), want ErrQueryTimeout", err, err)
				}
			}
		})
	}
}

// TestMaxSamplesRefusedAsUpstream checks that a query whose upstream
// accounting reaches --query.max-samples gets upstream's own refusal: the
// fast path hands it back rather than answering what upstream refuses.
func TestMaxSamplesRefusedAsUpstream(t *testing.T) {
	db := openDiffDB(t, 4)
	start := diffStart.Add(time.Hour)
	for _, qs := range []string{
		`sum by (job) (rate(req_total[5m]))`,
		// Native histograms count as their size in 16-byte units.
		`histogram_quantile(0.9, sum by (job) (rate(lat_native_seconds[5m])))`,
	} {
		var errs []string
		for _, eng := range []string{query.EngineFast, query.EngineUpstream} {
			opts := query.DefaultOptions()
			opts.Engine = eng
			opts.MaxSamples = 500
			ng, err := query.New(opts, nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			qry, err := ng.NewRangeQuery(context.Background(), db, nil, qs, start, start.Add(time.Hour), 15*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			res := qry.Exec(context.Background())
			if res.Err == nil {
				t.Fatalf("%s: %s: no error under max-samples=500", qs, eng)
			}
			errs = append(errs, res.Err.Error())
			if eng == query.EngineFast {
				if answered, back := ng.FastPathCounts(); answered != 0 || back != 1 {
					t.Errorf("%s: fast path answered %d, handed back %d; want 0, 1", qs, answered, back)
				}
			}
			_ = ng.Close()
		}
		if errs[0] != errs[1] {
			t.Fatalf("%s: fast engine error %q, upstream %q", qs, errs[0], errs[1])
		}
	}
}

// TestNativeHistogramRemembered checks that a metric found to hold native
// histograms is sent upstream directly the next time, and answered alike.
func TestNativeHistogramRemembered(t *testing.T) {
	db := openDiffDB(t, 5)
	opts := query.DefaultOptions()
	ng, err := query.New(opts, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	start := diffStart.Add(time.Hour)
	var results []string
	for range 2 {
		qry, err := ng.NewRangeQuery(context.Background(), db, nil, `sum(irate(ttft_seconds[5m]))`, start, start.Add(time.Hour), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		res := qry.Exec(context.Background())
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		results = append(results, res.Value.String())
	}
	if answered, back := ng.FastPathCounts(); answered != 0 || back != 1 {
		t.Errorf("fast path answered %d, handed back %d; want 0 and 1 (the second query goes upstream directly)", answered, back)
	}
	if results[0] != results[1] || results[0] == "" {
		t.Errorf("answers differ or are empty: %q vs %q", results[0], results[1])
	}
}

// TestMaxSamplesWindowRefusedAsUpstream: upstream counts the samples of
// the window a range function evaluates against --query.max-samples, not
// only the points it returns, so a long window over one series is refused
// even at one step; the fast path hands back what could come near that
// and answers the rest, and each query gets upstream's error or none.
func TestMaxSamplesWindowRefusedAsUpstream(t *testing.T) {
	db := openDiffDB(t, 4)
	start := diffStart.Add(time.Hour)
	var answered, refused uint64
	for _, maxSamples := range []int{50, 200, 1000, 20000} {
		for _, qs := range []string{
			`rate(req_total{instance="10.0.0.1:9000",job="api",code="200"}[1h])`, `max_over_time(queue_depth{job="db"}[1h])`,
			`sum(rate(req_total[30m]))`, `count_over_time(req_total[1h])`, `queue_depth`, `sum by (job) (queue_depth)`,
		} {
			for _, span := range []time.Duration{0, time.Minute, 10 * time.Minute} {
				var errs [2]string
				for i, eng := range []string{query.EngineFast, query.EngineUpstream} {
					opts := query.DefaultOptions()
					opts.Engine = eng
					opts.MaxSamples = maxSamples
					ng, err := query.New(opts, nil, nil, nil)
					if err != nil {
						t.Fatal(err)
					}
					var qry promql.Query
					if span == 0 {
						qry, err = ng.NewInstantQuery(context.Background(), db, nil, qs, start)
					} else {
						qry, err = ng.NewRangeQuery(context.Background(), db, nil, qs, start, start.Add(span), 15*time.Second)
					}
					if err != nil {
						t.Fatal(err)
					}
					errs[i] = fmt.Sprint(qry.Exec(context.Background()).Err)
					if eng == query.EngineFast {
						a, b := ng.FastPathCounts()
						answered, refused = answered+a, refused+b
					}
					_ = ng.Close()
				}
				if errs[0] != errs[1] {
					t.Errorf("max-samples=%d %s over %s: fast engine error %s, upstream %s", maxSamples, qs, span, errs[0], errs[1])
				}
			}
		}
	}
	if answered == 0 || refused == 0 {
		t.Errorf("fast path answered %d and handed back %d: want some of each", answered, refused)
	}
}
