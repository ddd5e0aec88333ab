package tailfn

import (
	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/tsdb/records"
)

// TokenLatencyEdges are the inter-token latency edges (seconds) of the
// token heat map: a gap v is in [edges[j], edges[j+1]).
var TokenLatencyEdges = []float64{0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1, 10}

// TokenHeat counts inter-token gaps by output token position and latency
// from the records that kept their gaps (records.MaxITLValues or fewer).
// Positions are bucketed by attribution.TokenPositionBucket, as the
// derived tailroot_token_latency_seconds series are: row k holds 1-based
// positions (PositionEdges[k], PositionEdges[k+1]], the gap before token p
// counting at p. Add it as the Visit of a Load.
type TokenHeat struct {
	// PositionEdges are the bounds of the rows: 0, then each bucket's
	// upper bound, up to the bucket of the last position a record keeps.
	PositionEdges []float64
	// Counts[k][j] counts gaps in position row k and latency column j.
	Counts [][]float64
	// SummaryOnly counts records that kept only an ITL summary; Outside
	// the gaps whose latency is outside TokenLatencyEdges.
	SummaryOnly, Outside int
}

// NewTokenHeat returns an empty heat map.
func NewTokenHeat() *TokenHeat {
	rows := attribution.TokenPositionBucket(records.MaxITLValues+1) + 1
	h := &TokenHeat{PositionEdges: []float64{0}, Counts: make([][]float64, rows)}
	for k := range rows {
		h.PositionEdges = append(h.PositionEdges, attribution.TokenPositionBound(k))
		h.Counts[k] = make([]float64, len(TokenLatencyEdges)-1)
	}
	return h
}

// Visit adds r's gaps.
func (h *TokenHeat) Visit(r *records.Record) {
	if r.ITL.Count > 0 && r.ITL.Values == nil {
		h.SummaryOnly++
		return
	}
	for i, v := range r.ITL.Values {
		// Gap i separates tokens i+1 and i+2 (1-based): it is token i+2's
		// latency.
		k := min(attribution.TokenPositionBucket(i+2), len(h.Counts)-1)
		j := latencyColumn(v)
		if j < 0 {
			h.Outside++
			continue
		}
		h.Counts[k][j]++
	}
}

// latencyColumn returns j with TokenLatencyEdges[j] ≤ v < TokenLatencyEdges[j+1], or −1.
func latencyColumn(v float64) int {
	for j := 0; j+1 < len(TokenLatencyEdges); j++ {
		if v >= TokenLatencyEdges[j] && v < TokenLatencyEdges[j+1] {
			return j
		}
	}
	return -1
}
