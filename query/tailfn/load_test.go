package tailfn

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/tsdb/records"
)

// selectOnly hides SelectColumns, so Load takes the record-by-record path.
type selectOnly struct{ RecordSource }

// TestLoadColumnsMatchesSelect loads random windows of a store holding
// sealed segments, an open WAL, late records and records whose measured
// stages overlap (negative other), through SelectColumns and through
// Select, and requires the same population bit for bit.
func TestLoadColumnsMatchesSelect(t *testing.T) {
	store := openStore(t)
	rng := rand.New(rand.NewPCG(21, 22))
	const base = int64(1_700_000_000_000)
	insts := []string{"a", "b", "c", "d"}
	var batch []records.Record
	negative := 0
	for i := range 4000 {
		at := base + int64(i)*1_000
		if rng.IntN(10) == 0 {
			at = base + rng.Int64N(int64(i+1))*1_000 // late
		}
		r := records.Record{Time: at, Labels: labels.FromStrings("model_name", "m", "instance", insts[rng.IntN(len(insts))])}
		for st := range records.StageOther {
			r.Stages[st] = rng.ExpFloat64() * 0.1
		}
		r.E2E = r.Sum() * (0.9 + 0.2*rng.Float64()) // below the sum: overlap
		if err := r.FillOther(); err != nil {
			t.Fatal(err)
		}
		if r.Stages[records.StageOther] < 0 {
			negative++
		}
		r.TTFT = r.Stages[records.StageQueue] + r.Stages[records.StagePrefill]
		batch = append(batch, r)
		if len(batch) == 250 {
			if err := store.Append(batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
			if i < 3000 && rng.IntN(3) == 0 {
				if err := store.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if st := store.Stats(); st.Segments < 2 || st.HeadRecords == 0 || negative < 100 {
		t.Fatalf("store not mixed enough: %+v, %d negative", st, negative)
	}
	ctx := context.Background()
	end := time.UnixMilli(base + 4000*1_000)
	for i := range 40 {
		var ms []*labels.Matcher
		if i%2 == 1 {
			ms = append(ms, labels.MustNewMatcher(labels.MatchNotEqual, "instance", insts[i%4]))
		}
		span := time.Duration(1+rng.IntN(70)) * time.Minute
		w := WindowAt(ms, end.Add(-time.Duration(i)*time.Minute), span)
		got, err := Load(ctx, store, w, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Load(ctx, selectOnly{store}, w, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := diffPopulation(got, want); d != "" {
			t.Fatalf("window %d (%v): %s", i, w.Duration(), d)
		}
	}
}

func diffPopulation(a, b Population) string {
	if a.Requests.Len() != b.Requests.Len() || a.Clamped != b.Clamped || a.ClampedMax != b.ClampedMax {
		return fmt.Sprintf("%d requests, %d clamped (max %v) vs %d, %d (max %v)",
			a.Requests.Len(), a.Clamped, a.ClampedMax, b.Requests.Len(), b.Clamped, b.ClampedMax)
	}
	same := func(x, y []float64) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if math.Float64bits(x[i]) != math.Float64bits(y[i]) {
				return false
			}
		}
		return true
	}
	for j, name := range StageNames {
		if !same(a.Requests.Stage(j), b.Requests.Stage(j)) {
			return "stage " + name + " differs"
		}
	}
	if !same(a.Requests.Total(), b.Requests.Total()) || !same(a.TTFT, b.TTFT) {
		return "totals or TTFT differ"
	}
	return ""
}

// TestLoadColumnsClamps checks the clamping of a negative residual on a
// hand-made window: two records whose stages overlap by 0.25 s and 0.5 s
// and one that adds up.
func TestLoadColumnsClamps(t *testing.T) {
	store := openStore(t)
	mk := func(at int64, queue, decode, e2e float64) records.Record {
		r := records.Record{Time: at, Labels: labels.FromStrings("instance", "x"), E2E: e2e, TTFT: queue}
		r.Stages[records.StageQueue], r.Stages[records.StageDecode] = queue, decode
		if err := r.FillOther(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Values are binary fractions, so the residuals are exact: other =
	// 2.75 − 3 = −0.25 and 1 − 1.5 = −0.5 (clamped to 0), 2.5 − 2 = 0.5
	// (kept).
	recs := []records.Record{mk(1000, 1, 2, 2.75), mk(2000, 0.5, 1, 1), mk(3000, 1, 1, 2.5)}
	if err := store.Append(recs); err != nil {
		t.Fatal(err)
	}
	if err := store.Flush(); err != nil {
		t.Fatal(err)
	}
	pop, err := Load(context.Background(), store, Window{Mint: 0, Maxt: 10_000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := pop.Requests.Stage(int(records.StageOther))
	if pop.Clamped != 2 || pop.ClampedMax != 0.5 || len(other) != 3 || other[0] != 0 || other[1] != 0 || other[2] != 0.5 {
		t.Fatalf("clamped %d (max %v), other %v; want 2 (max 0.5), [0 0 0.5]", pop.Clamped, pop.ClampedMax, other)
	}
	// S = e2e + overlap: 3, 1.5, 2.5.
	if tot := pop.Requests.Total(); tot[0] != 3 || tot[1] != 1.5 || tot[2] != 2.5 {
		t.Fatalf("totals %v, want [3 1.5 2.5]", tot)
	}
	if pop.TTFT[0] != 1 || pop.TTFT[1] != 0.5 || pop.TTFT[2] != 1 {
		t.Fatalf("ttft %v, want [1 0.5 1]", pop.TTFT)
	}
}
