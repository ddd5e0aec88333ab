package tailfn

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb/records"
)

type failingQueryable struct{ err error }

func (f failingQueryable) Querier(int64, int64) (storage.Querier, error) { return nil, f.err }

// TestDecomposeFallback: without records, method auto answers from the
// accumulators through an engine that has none of tailfn's functions
// registered (they are called in Go), says when nothing answers, and
// passes a failing storage on as that failure, not as "no requests".
func TestDecomposeFallback(t *testing.T) {
	ng, err := query.New(query.DefaultOptions(), query.NewRegistry(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	// Over (0, 10m]: bucket (0, 1] gains 100 requests with 10 s of queue
	// and 20 s of decode, bucket (1, +Inf) 10 requests with 50 s and 30 s.
	st := promqltest.LoadedStorage(t, `
load 1m
	acc_sum{stage="queue", e2e_bucket="1"} 0+1x10
	acc_sum{stage="decode", e2e_bucket="1"} 0+2x10
	acc_sum{stage="queue", e2e_bucket="+Inf"} 0+5x10
	acc_sum{stage="decode", e2e_bucket="+Inf"} 0+3x10
	acc_count{e2e_bucket="1"} 0+10x10
	acc_count{e2e_bucket="+Inf"} 0+1x10
`)
	fb := SeriesFallback{Engine: ng, Queryable: st, AccumulatorSums: "acc_sum", AccumulatorCounts: "acc_count", StageHistograms: "hist"}
	win := WindowAt(nil, time.Unix(600, 0), 10*time.Minute)
	ctx := context.Background()

	// P(S > 1) = 10/110 ≈ 0.091, so at p = 0.95 the tail is inside the
	// overflow bucket: its stage means are 5 s of queue and 3 s of decode.
	d, err := Decompose(ctx, nil, fb, DecomposeRequest{Window: win, Metric: "e2e", P: 0.95, Method: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Breakdown.Method.String() != "tail_mean_accumulators" || d.Requests != 110 {
		t.Fatalf("method %s, %d requests; want tail_mean_accumulators over 110", d.Breakdown.Method, d.Requests)
	}
	want := map[string]float64{"queue": 5, "decode": 3}
	for j, s := range d.Breakdown.Stages {
		if w := want[s]; math.Abs(d.Breakdown.Contrib[j]-w) > 1e-9 {
			t.Errorf("stage %s: %v, want %v", s, d.Breakdown.Contrib[j], w)
		}
	}

	empty := WindowAt([]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "model_name", "none")}, time.Unix(600, 0), 10*time.Minute)
	if _, err := Decompose(ctx, nil, fb, DecomposeRequest{Window: empty, Metric: "e2e", P: 0.95, Method: "auto"}); !errors.Is(err, ErrNoRequests) {
		t.Errorf("no series: %v, want ErrNoRequests", err)
	}
	if _, err := Decompose(ctx, nil, fb, DecomposeRequest{Window: win, Metric: "e2e", P: 0.95, Method: "tail_mean"}); !errors.Is(err, ErrNoRequests) {
		t.Errorf("tail_mean without records: %v, want ErrNoRequests", err)
	}

	broken := errors.New("disk on fire")
	fb.Queryable = failingQueryable{broken}
	_, err = Decompose(ctx, nil, fb, DecomposeRequest{Window: win, Metric: "e2e", P: 0.95, Method: "auto"})
	if err == nil || errors.Is(err, ErrNoRequests) || !errors.Is(err, broken) {
		t.Errorf("failing storage: %v, want the storage's error", err)
	}
}

// TestTokenHeatBuckets: the heat map puts each gap in the row of its
// token's position bucket, the same as the derived series: gap 0 is token
// 2, in (1, 2]; gaps 1 and 2 are tokens 3 and 4, in (2, 4]; gap 63, token
// 65, is in (64, 128].
func TestTokenHeatBuckets(t *testing.T) {
	h := NewTokenHeat()
	gaps := make([]float64, records.MaxITLValues)
	for i := range gaps {
		gaps[i] = 0.001
	}
	gaps[0], gaps[1], gaps[2] = 0.004, 0.03, 20
	h.Visit(&records.Record{ITL: records.ITL{Count: uint32(len(gaps)), Values: gaps}})
	h.Visit(&records.Record{ITL: records.ITL{Count: 100}})
	wantEdges := []float64{0, 1, 2, 4, 8, 16, 32, 64, 128}
	if len(h.PositionEdges) != len(wantEdges) {
		t.Fatalf("edges %v, want %v", h.PositionEdges, wantEdges)
	}
	for i, e := range wantEdges {
		if h.PositionEdges[i] != e {
			t.Fatalf("edges %v, want %v", h.PositionEdges, wantEdges)
		}
	}
	if h.Counts[1][0] != 1 || h.Counts[2][3] != 1 || h.Outside != 1 || h.SummaryOnly != 1 {
		t.Errorf("counts %v outside %d summary-only %d", h.Counts, h.Outside, h.SummaryOnly)
	}
	// Rows (4,8] … (64,128] hold 4, 8, 16, 32 and 1 gaps at 1 ms.
	for k, n := range map[int]float64{3: 4, 4: 8, 5: 16, 6: 32, 7: 1} {
		if h.Counts[k][0] != n {
			t.Errorf("row %d: %v gaps in [0, 5ms), want %v", k, h.Counts[k][0], n)
		}
	}
}
