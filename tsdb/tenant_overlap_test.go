package tsdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	ptsdb "github.com/prometheus/prometheus/tsdb"

	"github.com/tailroot/tailroot/internal/tenant"
	"github.com/tailroot/tailroot/query/fast"
)

// TestTenantViewOverlapReadsSamples: a tenant's series with out-of-order
// samples at the times of persisted ones, other values. Of two samples at
// one time the TSDB's merge keeps the one its walk meets, so the fast path
// must see the overlap through the tenant's confined view (OverlapTSDB)
// and read sample iterators as upstream does; reading the merged chunks
// answers otherwise (last_over_time 3 where upstream has 18.67 and the
// like).
func TestTenantViewOverlapReadsSamples(t *testing.T) {
	o := DefaultOptions()
	o.Dir = t.TempDir()
	o.NoLockfile = true
	o.OutOfOrderWindow = 3 * time.Hour
	db, err := Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res := tenant.NewResolver(tenant.DefaultOptions())
	ctx := tenantCtx(res, "A")
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	at := func(d time.Duration) int64 { return start.Add(d).UnixMilli() }
	ls := labels.FromStrings("__name__", "dup_total", "job", "a", tenant.DefaultLabel, "A")
	for d := time.Duration(0); d <= 2*time.Hour; d += 30 * time.Second {
		if err := appendAs(t, db, context.Background(), at(d), float64(d/time.Second), ls); err != nil {
			t.Fatal(err)
		}
	}
	pdb, release, err := db.LeaseTSDB()
	if err != nil {
		t.Fatal(err)
	}
	err = pdb.CompactHead(ptsdb.NewRangeHead(pdb.Head(), at(0), at(time.Hour)-1))
	release()
	if err != nil {
		t.Fatal(err)
	}
	for d := time.Duration(0); d < time.Hour; d += 5 * time.Minute {
		if err := appendAs(t, db, context.Background(), at(d), -1, ls); err != nil {
			t.Fatal(err)
		}
	}
	view := TenantQueryable(db)
	ng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e7, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	for _, qs := range []string{`last_over_time(dup_total[59s])`, `max_over_time(dup_total[10m])`, `sum(rate(dup_total[5m]))`, `dup_total`} {
		for _, step := range []time.Duration{5 * time.Minute, 30 * time.Second, 7 * time.Minute} {
			qStart, qEnd := start.Add(-2*time.Minute), start.Add(70*time.Minute)
			q, err := ng.NewRangeQuery(ctx, view, nil, qs, qStart, qEnd, step)
			if err != nil {
				t.Fatal(err)
			}
			want := q.Exec(ctx)
			if want.Err != nil {
				t.Fatal(want.Err)
			}
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(qs)
			if err != nil {
				t.Fatal(err)
			}
			plan, ok := fast.Compile(expr)
			if !ok {
				t.Fatalf("%s: not compiled", qs)
			}
			got, _, err := plan.Range(ctx, view, fast.DefaultOptions(), qStart, qEnd, step)
			if err != nil {
				t.Fatalf("%s step %s: %v", qs, step, err)
			}
			sameFloats(t, fmt.Sprintf("%s step %s", qs, step), got, want.Value.(promql.Matrix))
			q.Close()
		}
	}
}
