package attribution

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestHeatTableHandWorked(t *testing.T) {
	// tenRequests, sorted S 2 3 4 5 6 7 8 10 12 20.
	// P50: h = 4.5 → 6.5. P90: h = 8.1 → 12 + 0.1·8 = 12.8.
	// P99: h = 8.91 → 12 + 0.91·8 = 19.28.
	// P50–P90 (6.5 ≤ S < 12.8): S 7 8 10 12 = requests 7 2 4 6; mean S
	// 37/4 = 9.25; queue (1+2+5+3)/4 = 2.75, prefill (3+2+3+4)/4 = 3,
	// decode (3+4+2+5)/4 = 3.5 → top decode, share 3.5/9.25.
	// P90–P99 (12.8 ≤ S < 19.28): empty.
	// ≥P99 (S ≥ 19.28): request 9 (8, 4, 8), S 20 → queue and decode tie at
	// 8; the first, queue, is top with share 0.4.
	h, err := HeatTable(tenRequests(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := h.Rows
	if len(r) != 3 || r[0].Band.String() != "P50-P90" || r[2].Band.String() != "≥P99" {
		t.Fatalf("rows %+v", r)
	}
	if r[0].Count != 4 || !approx(r[0].From, 6.5, 1e-12) || !approx(r[0].To, 12.8, 1e-12) || r[0].MeanS != 9.25 ||
		r[0].StageMean[0] != 2.75 || r[0].StageMean[1] != 3 || r[0].StageMean[2] != 3.5 ||
		r[0].TopStage != "decode" || !approx(r[0].TopShare, 3.5/9.25, 1e-15) {
		t.Errorf("P50-P90: %+v", r[0])
	}
	if r[1].Count != 0 || r[1].Top != -1 || !math.IsNaN(r[1].MeanS) {
		t.Errorf("P90-P99: %+v", r[1])
	}
	if r[2].Count != 1 || !approx(r[2].From, 19.28, 1e-12) || r[2].MeanS != 20 || r[2].Top != 0 || r[2].TopShare != 0.4 {
		t.Errorf("≥P99: %+v", r[2])
	}
	if s := (Band{0.29, 0.999}).String(); s != "P29-P99.9" {
		t.Errorf("band name %q", s)
	}
	if _, err := HeatTable(tenRequests(t), []Band{{0.9, 0.5}}); err == nil {
		t.Error("inverted band accepted")
	}
}

func TestHeatTableAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for trial := range 100 {
		n, k := 1+rng.IntN(500), 1+rng.IntN(6)
		cols := randCols(rng, n, k)
		bands := []Band{{0, 0.5}, {0.5, 0.9}, {0.9, 0.99}, {0.99, 1}, {rng.Float64() / 2, 0.5 + rng.Float64()/2}}
		h, err := HeatTable(mustRequests(t, stageNames(k), cols), bands)
		if err != nil {
			t.Fatal(err)
		}
		s := refTotals(cols)
		total := 0
		for bi, b := range bands {
			lo, hi := refQuantile(s, b.Lo), refQuantile(s, b.Hi)
			count, ms := 0, 0.0
			means := make([]float64, k)
			for r := range s {
				if s[r] >= lo && (s[r] < hi || b.Hi == 1) {
					count++
					ms += s[r]
					for j := range cols {
						means[j] += cols[j][r]
					}
				}
			}
			row := h.Rows[bi]
			if row.Count != count {
				t.Fatalf("trial %d band %v: count %d, reference %d", trial, b, row.Count, count)
			}
			if bi < 4 {
				total += count
			}
			if count == 0 {
				continue
			}
			if !approx(row.MeanS, ms/float64(count), 1e-12) {
				t.Fatalf("trial %d band %v: mean %v, reference %v", trial, b, row.MeanS, ms/float64(count))
			}
			for j := range means {
				if !approx(row.StageMean[j], means[j]/float64(count), 1e-12) || row.StageMean[j] > row.StageMean[row.Top] {
					t.Fatalf("trial %d band %v stage %d", trial, b, j)
				}
			}
		}
		// The four standard bands partition the requests.
		if total != n {
			t.Fatalf("trial %d: bands hold %d of %d requests", trial, total, n)
		}
	}
}
