package tsdb

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/internal/tenant"
)

// BenchmarkTenantAppend appends one sample to each of 1000 existing
// series per commit, directly and through TenantAppendable (which stamps
// the label and looks the series up by labels instead of a ref), with and
// without an active-series limit.
func BenchmarkTenantAppend(b *testing.B) {
	sets := make([]labels.Labels, 1000)
	for i := range sets {
		sets[i] = labels.FromStrings("__name__", "bench_metric", "instance", "host-"+strconv.Itoa(i%50), "series", strconv.Itoa(i))
	}
	cfg, err := tenant.ParseConfig([]byte("limits:\n  max_active_series: 100000\n"))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		wrap   bool
		limits *tenant.Config
	}{{"direct", false, nil}, {"tenant", true, nil}, {"tenant+series-limit", true, cfg}} {
		b.Run(tc.name, func(b *testing.B) {
			db := openTenantDB(b)
			o := tenant.DefaultOptions()
			o.Config = tc.limits
			ctx := tenant.NewContext(context.Background(), tenant.NewResolver(o).Tenant("A"))
			var app storage.AppendableV2 = db
			if tc.wrap {
				app = TenantAppendable(db)
			} else {
				ctx = context.Background()
			}
			refs := make([]storage.SeriesRef, len(sets))
			b.ReportAllocs()
			b.ResetTimer()
			for n := 0; b.Loop(); n++ {
				a := app.AppenderV2(ctx)
				for i, ls := range sets {
					ref, err := a.Append(refs[i], ls, 0, int64(n+1)*1000, float64(n), nil, nil, storage.AOptions{})
					if err != nil {
						b.Fatal(err)
					}
					refs[i] = ref
				}
				if err := a.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(sets)), "ns/sample")
		})
	}
}
