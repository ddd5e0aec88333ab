package tailfn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/tsdb/records"
)

// nearNaN reports whether got equals want to tol relative (NaN equal to NaN).
func nearNaN(got, want, tol float64) bool {
	if math.IsNaN(want) || math.IsNaN(got) {
		return math.IsNaN(want) == math.IsNaN(got)
	}
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}

// diffDecomposition lists the fields of got that differ from want.
func diffDecomposition(want, got Decomposition) []string {
	var bad []string
	chk := func(name string, g, w float64) {
		if !nearNaN(g, w, 1e-9) {
			bad = append(bad, fmt.Sprintf("%s = %.17g, want %.17g", name, g, w))
		}
	}
	wb, gb := want.Breakdown, got.Breakdown
	if gb.Method != wb.Method || gb.Kind != wb.Kind || fmt.Sprint(gb.Stages) != fmt.Sprint(wb.Stages) {
		bad = append(bad, fmt.Sprintf("method %v kind %v stages %v, want %v %v %v", gb.Method, gb.Kind, gb.Stages, wb.Method, wb.Kind, wb.Stages))
		return bad
	}
	if got.Requests != want.Requests || got.Clamped != want.Clamped {
		bad = append(bad, fmt.Sprintf("requests %d clamped %d, want %d %d", got.Requests, got.Clamped, want.Requests, want.Clamped))
	}
	chk("quantile", gb.Quantile, wb.Quantile)
	chk("target", gb.Target, wb.Target)
	chk("residual", gb.Residual, wb.Residual)
	chk("count", gb.Count, wb.Count)
	for j, st := range wb.Stages {
		chk("contrib "+st, gb.Contrib[j], wb.Contrib[j])
	}
	if (want.Heat == nil) != (got.Heat == nil) {
		return append(bad, fmt.Sprintf("heat %v, want %v", got.Heat != nil, want.Heat != nil))
	}
	if want.Heat != nil {
		if len(got.Heat.Rows) != len(want.Heat.Rows) {
			return append(bad, fmt.Sprintf("%d heat rows, want %d", len(got.Heat.Rows), len(want.Heat.Rows)))
		}
		for i, w := range want.Heat.Rows {
			g := got.Heat.Rows[i]
			name := "heat " + w.Band.String()
			if g.Count != w.Count || g.TopStage != w.TopStage {
				bad = append(bad, fmt.Sprintf("%s: count %d top %s, want %d %s", name, g.Count, g.TopStage, w.Count, w.TopStage))
			}
			chk(name+" from", g.From, w.From)
			chk(name+" to", g.To, w.To)
			chk(name+" mean", g.MeanS, w.MeanS)
			chk(name+" top share", g.TopShare, w.TopShare)
			for j := range w.StageMean {
				chk(fmt.Sprintf("%s stage %d", name, j), g.StageMean[j], w.StageMean[j])
			}
		}
	}
	return bad
}

// TestClusterDecomposeMatchesOneStore splits records over three stores (at
// random, skewed with every slow request on one store, with ties) and
// requires Cluster.Decompose and Cluster.QuantileDiff to return what one
// store holding every record returns, to 1e-9, for every method, with the
// heat table, at several levels and selectors.
func TestClusterDecomposeMatchesOneStore(t *testing.T) {
	const end = int64(1_700_000_000_000)
	ts := time.UnixMilli(end)
	for _, tc := range []struct {
		name           string
		n              int
		skewed, coarse bool
	}{
		{"random", 3000, false, false},
		{"skewed", 3000, true, false},
		{"ties", 2000, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.n), 7))
			recs := distRecords(rng, tc.n, end, tc.coarse)
			all := openStore(t)
			appendAll(t, all, recs)
			parts := splitRecords(rng, recs, tc.skewed)
			var stores [3]*records.Store
			for i := range stores {
				stores[i] = openStore(t)
				appendAll(t, stores[i], parts[i])
			}
			peers := []Shard{
				namedShard{NewLocalShard(stores[1], DefaultShardOptions()), "peer-1"},
				namedShard{NewLocalShard(stores[2], DefaultShardOptions()), "peer-2"},
			}
			cl := NewCluster(stores[0], peers, DefaultClusterOptions(), DefaultShardOptions())
			ctx := context.Background()
			compared := 0
			defer func() {
				if compared < 2 {
					t.Errorf("only %d A/B intervals compared", compared)
				}
			}()
			i1 := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "instance", "i1")}
			for _, ms := range [][]*labels.Matcher{nil, i1} {
				win := WindowAt(ms, ts, 30*time.Minute)
				base := WindowAt(ms, ts.Add(-30*time.Minute), 30*time.Minute)
				for _, method := range DecomposeMethods {
					for _, metric := range []string{"e2e", "ttft"} {
						for _, p := range []float64{0.5, 0.9, 0.99} {
							req := DecomposeRequest{Window: win, Baseline: base, Metric: metric, P: p, Method: method, Heat: true}
							name := fmt.Sprintf("%v %s %s p=%v", ms, method, metric, p)
							want, werr := Decompose(ctx, all, SeriesFallback{}, req)
							got, gerr := cl.Decompose(ctx, SeriesFallback{}, req)
							if werr != nil || gerr != nil {
								t.Errorf("%s: error %v, want %v", name, gerr, werr)
								continue
							}
							if want.Requests < 100 {
								t.Fatalf("%s: %d requests: too few to compare", name, want.Requests)
							}
							if bad := diffDecomposition(want, got); len(bad) > 0 {
								t.Errorf("%s:\n%s", name, strings.Join(bad, "\n"))
							}
							if got.Nodes.Answered != 3 || got.Nodes.Of != 3 || got.Nodes.Partial() {
								t.Errorf("%s: nodes %+v, want 3 of 3", name, got.Nodes)
							}
							if !slices.Equal(got.Warnings, want.Warnings) {
								t.Errorf("%s: warnings %q, want %q", name, got.Warnings, want.Warnings)
							}
							if metric == "ttft" && (!slices.Equal(got.Breakdown.Stages, TTFTStageNames) || !strings.Contains(strings.Join(got.Warnings, ";"), "without a TTFT")) {
								t.Errorf("%s: stages %v, warnings %q: want the TTFT stages and the records left out said", name, got.Breakdown.Stages, got.Warnings)
							}
						}
					}
				}
				// A/B: instance i1 against the others.
				a := WindowAt(i1, ts, time.Hour)
				b := WindowAt([]*labels.Matcher{labels.MustNewMatcher(labels.MatchNotEqual, "instance", "i1")}, ts, time.Hour)
				for _, metric := range []string{"e2e", "ttft"} {
					xa, xb := fieldOf(t, all, a, metric), fieldOf(t, all, b, metric)
					// MaxCIValues −1: the bootstrap exactly (TestClusterCISubstitution
					// checks the capped default).
					exact := DefaultClusterOptions()
					exact.MaxCIValues = -1
					clx := NewCluster(stores[0], peers, exact, DefaultShardOptions())
					for _, m := range []attribution.CIMethod{attribution.CIOrderStatistic, attribution.CIBootstrap, attribution.CIMaritzJarrett} {
						for _, p := range []float64{0.5, 0.9} {
							opts := attribution.CIOptions{Method: m, Seed: BootstrapSeed}
							want, werr := attribution.QuantileDiffCI(xb, xa, p, 0.95, opts)
							got, gerr := clx.QuantileDiff(ctx, a, b, metric, p, 0.95, opts)
							name := fmt.Sprintf("ab %s %v p=%v", metric, m, p)
							if werr != nil || gerr != nil {
								// A method refused at this p and n is refused on both.
								if werr == nil || gerr == nil || werr.Error() != gerr.Error() || !errors.Is(gerr, attribution.ErrInvalidMethod) {
									t.Errorf("%s: error %v, want %v", name, gerr, werr)
								}
								continue
							}
							compared++
							if got.NA != len(xa) || got.NB != len(xb) {
								t.Errorf("%s: %d and %d requests, want %d and %d", name, got.NA, got.NB, len(xa), len(xb))
							}
							for _, c := range []struct {
								what string
								g, w float64
							}{
								{"diff", got.Interval.Estimate, want.Estimate},
								{"lower", got.Interval.Lower, want.Lower},
								{"upper", got.Interval.Upper, want.Upper},
								{"a", got.A, attribution.Quantile(xa, p)},
								{"b", got.B, attribution.Quantile(xb, p)},
							} {
								if !nearNaN(c.g, c.w, 1e-9) {
									t.Errorf("%s: %s = %.17g, want %.17g", name, c.what, c.g, c.w)
								}
							}
						}
					}
				}
			}
		})
	}
}

// fieldOf returns the end-to-end times of the window's records, or for
// metric ttft the TTFT of those that have one, as the A/B endpoint
// compares them.
func fieldOf(t *testing.T, src RecordSource, w Window, metric string) []float64 {
	t.Helper()
	pop, err := Load(context.Background(), src, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := pop.Field(metric)
	if metric == "ttft" {
		x = slices.DeleteFunc(slices.Clone(x), func(v float64) bool { return !(v > 0) })
	}
	return x
}

// TestClusterDecomposePeerDown requires Cluster.Decompose to fail naming a
// peer that is down, and with partial responses to answer from the other
// nodes with Nodes and a warning saying which peer is left out.
func TestClusterDecomposePeerDown(t *testing.T) {
	const end = int64(1_700_000_000_000)
	ts := time.UnixMilli(end)
	rng := rand.New(rand.NewPCG(8, 9))
	recs := distRecords(rng, 600, end, false)
	a, b := openStore(t), openStore(t)
	appendAll(t, a, recs[:300])
	appendAll(t, b, recs[300:])
	cl := NewCluster(a, []Shard{namedShard{NewLocalShard(b, DefaultShardOptions()), "http://peer-b"}, downShard{"http://peer-down"}},
		DefaultClusterOptions(), DefaultShardOptions())
	req := DecomposeRequest{Window: WindowAt(nil, ts, time.Hour), Metric: "e2e", P: 0.99, Method: "tail_mean", Heat: true}
	ctx := context.Background()
	_, err := cl.Decompose(ctx, SeriesFallback{}, req)
	var pe *PeerError
	if err == nil || !errors.As(err, &pe) || pe.Peer != "http://peer-down" || !strings.Contains(err.Error(), "partial_response=true") {
		t.Fatalf("peer down: error %v, want one naming http://peer-down", err)
	}
	_, err = cl.QuantileDiff(ctx, req.Window, req.Window, "e2e", 0.5, 0.95, attribution.CIOptions{Method: attribution.CIOrderStatistic})
	if err == nil || !errors.As(err, &pe) || pe.Peer != "http://peer-down" {
		t.Fatalf("ab, peer down: error %v, want one naming http://peer-down", err)
	}

	both := openStore(t)
	appendAll(t, both, recs)
	want, err := Decompose(ctx, both, SeriesFallback{}, req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := cl.Decompose(WithPartialResponse(ctx, true), SeriesFallback{}, req)
	if err != nil {
		t.Fatal(err)
	}
	if bad := diffDecomposition(want, got); len(bad) > 0 {
		t.Errorf("partial answer differs from the live nodes':\n%s", strings.Join(bad, "\n"))
	}
	if got.Nodes.Answered != 2 || got.Nodes.Of != 3 || len(got.Nodes.LeftOut) != 1 || !strings.Contains(got.Nodes.LeftOut[0], "http://peer-down") {
		t.Errorf("nodes %+v, want 2 of 3 with http://peer-down left out", got.Nodes)
	}
	if w := strings.Join(got.Warnings, "\n"); !strings.Contains(w, "partial response") || !strings.Contains(w, "2 of 3 nodes") {
		t.Errorf("warnings %q: want the partial response named", got.Warnings)
	}
}
