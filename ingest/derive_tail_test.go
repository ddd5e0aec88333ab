package ingest

import (
	"context"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/sim/requests"
	"github.com/tailroot/tailroot/tsdb"
	"github.com/tailroot/tailroot/tsdb/records"
)

// accumulatorsFromSeries rebuilds attribution.Accumulators from the tail
// series in the TSDB alone, summed over every label set.
func accumulatorsFromSeries(t testing.TB, db *tsdb.DB) *attribution.Accumulators {
	t.Helper()
	grid := attribution.DefaultGrid()
	names := make([]string, records.NumStages)
	for j := range names {
		names[j] = records.Stage(j).String()
	}
	acc := attribution.NewAccumulators(grid, names)
	bucket := func(v string) int {
		if v == "+Inf" {
			return grid.Buckets() - 1
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("e2e_bucket %q: %v", v, err)
		}
		b, ok := slices.BinarySearch(grid.Upper(), f)
		if !ok {
			t.Fatalf("e2e_bucket %q is not a bound of the default grid", v)
		}
		return b
	}
	for _, s := range lastSamples(t, db, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, SeriesTailRequests)) {
		acc.Count[bucket(s.ls.Get(LabelE2EBucket))] += s.f
	}
	for _, s := range lastSamples(t, db, labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, SeriesTailStageSum)) {
		j := slices.Index(names, s.ls.Get(LabelStage))
		if j < 0 {
			t.Fatalf("series %s: unknown stage", s.ls)
		}
		acc.Sum[j][bucket(s.ls.Get(LabelE2EBucket))] += s.f
	}
	return acc
}

// TestTailAccumulatorsBoundSimulated is the guarantee the tail series give.
// Simulated requests (the Azure code trace at twice its speed, so queueing
// builds up) go through the NDJSON decoder and the pipeline. Then
// E[stage | e2e ≥ P99] is computed twice: exactly from the stored records
// (attribution.TailMean), and from the tail series alone
// (attribution.TailMeanAccumulators).
//
// The bound implied by the grid: let b* be the grid bucket holding the
// P99's rank c = ⌈(n−1)·0.99⌉, C its count, a the requests of b* with rank
// ≥ c, and N_a, A_i the count and stage-i sum of the buckets above it.
// Every request above b* is in the tail and none below it is, so only b*'s
// share is unknown and
//
//	A_i / (N_a + C)  ≤  E[X_i | S ≥ q]  ≤  (A_i + B_i) / (N_a + a),
//
// with B_i the stage-i sum of b*; the bracket narrows with the grid's
// bucket width (19% per bucket for the default grid). The test checks
// that the records' value lies in the bracket for every stage and for the
// tail mean, and that the series hold exactly the accumulators of the
// stored records (counts equal, sums to 1e-9 relative).
func TestTailAccumulatorsBoundSimulated(t *testing.T) {
	reqs, err := requests.Simulate(requests.Options{Trace: "azure-code", Limit: 6000, Speedup: 2, Seed: 11, Start: timeNowMinus(2)})
	if err != nil {
		t.Fatal(err)
	}
	db := openTestDB(t)
	p := openTestRecords(t, db, testRecordsOptions(t.TempDir()))
	var items []Item
	var line []byte
	for i := range reqs {
		line = reqs[i].AppendNDJSON(line[:0], requests.LineOptions{})
		it, err := DecodeRequestLine(line, RequestLimits{})
		if err != nil {
			t.Fatalf("request %d: %v\n%s", i, err, line)
		}
		items = append(items, it)
		if len(items) == 1000 {
			if err := p.Append(context.Background(), "test", items); err != nil {
				t.Fatal(err)
			}
			items = items[:0]
		}
	}
	if err := p.Append(context.Background(), "test", items); err != nil {
		t.Fatal(err)
	}

	stored := selectAllRecords(t, p.Store())
	if len(stored) != len(reqs) {
		t.Fatalf("%d records stored, want %d", len(stored), len(reqs))
	}
	names := make([]string, records.NumStages)
	cols := make([][]float64, records.NumStages)
	for j := range names {
		names[j] = records.Stage(j).String()
		for i := range stored {
			cols[j] = append(cols[j], stored[i].Stages[j])
		}
	}
	recs, err := attribution.NewRequests(names, cols)
	if err != nil {
		t.Fatal(err)
	}
	exact, err := attribution.TailMean(recs, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	fromSeries := accumulatorsFromSeries(t, db)
	est, err := attribution.TailMeanAccumulators(fromSeries, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	for j, name := range names {
		x := exact.Contrib[j]
		if x < est.Lower[j]-1e-9 || x > est.Upper[j]+1e-9 {
			t.Errorf("E[%s | e2e ≥ P99] = %v from records, outside [%v, %v] from series", name, x, est.Lower[j], est.Upper[j])
		}
		t.Logf("%-10s records %8.4f  series %8.4f  bracket [%8.4f, %8.4f]", name, x, est.Contrib[j], est.Lower[j], est.Upper[j])
	}
	if exact.Target < est.TargetLower-1e-9 || exact.Target > est.TargetUpper+1e-9 {
		t.Errorf("E[e2e | e2e ≥ P99] = %v from records, outside [%v, %v] from series", exact.Target, est.TargetLower, est.TargetUpper)
	}
	if exact.Quantile < est.QuantileLower || exact.Quantile > est.QuantileUpper {
		t.Errorf("P99 %v from records outside [%v, %v] from series", exact.Quantile, est.QuantileLower, est.QuantileUpper)
	}
	t.Logf("tail mean: records %.4f, series %.4f in [%.4f, %.4f]; P99 %.4f in [%.4f, %.4f]",
		exact.Target, est.Target, est.TargetLower, est.TargetUpper, exact.Quantile, est.QuantileLower, est.QuantileUpper)
	// The bracket is informative: the tail is not spread so thinly that
	// the bound says nothing (the queue stage dominates this tail).
	if w := est.TargetUpper - est.TargetLower; !(w < 0.5*exact.Target) {
		t.Errorf("tail-mean bracket %v wide for a tail mean of %v", w, exact.Target)
	}

	want := attribution.Accumulate(recs, attribution.DefaultGrid())
	for b := range want.Count {
		if fromSeries.Count[b] != want.Count[b] {
			t.Fatalf("bucket %d: series count %v, records %v", b, fromSeries.Count[b], want.Count[b])
		}
		for j := range want.Sum {
			if d := math.Abs(fromSeries.Sum[j][b] - want.Sum[j][b]); d > 1e-9*math.Max(1, want.Sum[j][b]) {
				t.Fatalf("bucket %d stage %s: series sum %v, records %v", b, names[j], fromSeries.Sum[j][b], want.Sum[j][b])
			}
		}
	}
}
