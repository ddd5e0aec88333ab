package attribution

import (
	"fmt"
	"math"
	"slices"
)

// Band is a latency band by quantile level: the requests with
// P_Lo(S) ≤ S < P_Hi(S), or P_Lo(S) ≤ S when Hi = 1 (so the top band keeps
// the maximum). Levels are in [0, 1] with Lo < Hi; quantiles are type 7.
type Band struct {
	Lo, Hi float64
}

// String renders the band as "P50-P90" or "≥P99".
func (b Band) String() string {
	// Round away float noise: 100·0.29 is 28.999999999999996.
	pct := func(p float64) float64 { return math.Round(p*1e8) / 1e6 }
	if b.Hi == 1 {
		return fmt.Sprintf("≥P%g", pct(b.Lo))
	}
	return fmt.Sprintf("P%g-P%g", pct(b.Lo), pct(b.Hi))
}

// DefaultBands returns P50–P90, P90–P99 and ≥P99.
func DefaultBands() []Band {
	return []Band{{0.5, 0.9}, {0.9, 0.99}, {0.99, 1}}
}

// HeatRow is one band of a heat table.
type HeatRow struct {
	Band Band
	// From and To are the band's edges in seconds, P_Lo(S) and P_Hi(S).
	From, To float64
	// Count is the number of requests in the band; with ties at the edges
	// it can be zero, and the means are then NaN.
	Count int
	// MeanS is the band's mean end-to-end time; StageMean[i] its mean of
	// stage i, and Σ_i StageMean[i] = MeanS.
	MeanS     float64
	StageMean []float64
	// Top is the index of the stage with the largest mean in the band (the
	// first on ties; −1 when the band is empty), TopStage its name and
	// TopShare = StageMean[Top] / MeanS (NaN when MeanS is 0).
	Top      int
	TopStage string
	TopShare float64
}

// Heat is a heat table: latency bands × stages.
type Heat struct {
	Stages []string
	Rows   []HeatRow
}

// HeatTable splits requests into latency bands and reports, per band, the
// request count, the mean S, each stage's mean and the stage contributing
// most. Bands may overlap; nil bands selects DefaultBands. The stage means
// of a band add up to its mean S exactly, so TopShare is a share of the
// band's latency. Kind is exact throughout (sample statistics).
func HeatTable(reqs Requests, bands []Band) (Heat, error) {
	if bands == nil {
		bands = DefaultBands()
	}
	if len(bands) == 0 {
		return Heat{}, fmt.Errorf("heat table: no bands")
	}
	for i, b := range bands {
		if !(b.Lo >= 0 && b.Lo < b.Hi && b.Hi <= 1) {
			return Heat{}, fmt.Errorf("heat table: band %d: levels [%v, %v] need 0 ≤ lo < hi ≤ 1", i, b.Lo, b.Hi)
		}
	}
	n := reqs.Len()
	if n == 0 {
		return Heat{}, fmt.Errorf("heat table: %w", ErrEmpty)
	}
	levels := make([]float64, 0, 2*len(bands))
	for _, b := range bands {
		levels = append(levels, b.Lo, b.Hi)
	}
	slices.Sort(levels)
	levels = slices.Compact(levels)
	qs := selectQuantiles(slices.Clone(reqs.total), levels)
	at := func(p float64) float64 { i, _ := slices.BinarySearch(levels, p); return qs[i] }

	k := reqs.K()
	rows := make([]HeatRow, len(bands))
	// One pass over S per band collects members; then one pass per stage.
	for bi, b := range bands {
		from, to := at(b.Lo), at(b.Hi)
		var idx []int
		for r, s := range reqs.total {
			if s >= from && (s < to || b.Hi == 1) {
				idx = append(idx, r)
			}
		}
		row := HeatRow{Band: b, From: from, To: to, Count: len(idx), Top: -1, StageMean: make([]float64, k)}
		if len(idx) == 0 {
			for j := range row.StageMean {
				row.StageMean[j] = math.NaN()
			}
			row.MeanS, row.TopShare = math.NaN(), math.NaN()
			rows[bi] = row
			continue
		}
		row.StageMean, row.MeanS = meansOver(reqs, idx)
		for j, m := range row.StageMean {
			if row.Top < 0 || m > row.StageMean[row.Top] {
				row.Top = j
			}
		}
		row.TopStage = reqs.stages[row.Top]
		row.TopShare = math.NaN()
		if row.MeanS > 0 {
			row.TopShare = row.StageMean[row.Top] / row.MeanS
		}
		rows[bi] = row
	}
	return Heat{Stages: reqs.stages, Rows: rows}, nil
}
