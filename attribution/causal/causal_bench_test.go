package causal

import (
	"fmt"
	"testing"
)

// baroInput is two hours at 15 s (480 points): a P99 target with a level
// shift at 320 and 200 candidate series, one of which moves with it.
func baroInput() (Series, []Series) {
	r := rng(99)
	const n, m = 480, 200
	target := noise(r, n, 1)
	cands := make([]Series, m)
	for i := range cands {
		cands[i] = Series{Name: fmt.Sprintf("metric_%03d", i), Values: ar1(r, n, 0.5)}
	}
	for t := 320; t < n; t++ {
		target[t] += 4
		cands[137].Values[t] += 5
	}
	return Series{Name: "p99", Values: target}, cands
}

var sinkBARO *BAROResult

// BenchmarkBARO ranks 200 candidates × 480 points including change point
// detection on the target; the budget is 200 ms per ranking.
func BenchmarkBARO(b *testing.B) {
	target, cands := baroInput()
	b.ReportAllocs()
	for b.Loop() {
		res, err := BARO(target, cands, BAROOptions{})
		if err != nil {
			b.Fatal(err)
		}
		sinkBARO = res
	}
	if sinkBARO.Ranking[0].Name != "metric_137" {
		b.Fatalf("top candidate %q", sinkBARO.Ranking[0].Name)
	}
}

var sinkBOCPD *BOCPDResult

func BenchmarkBOCPD480(b *testing.B) {
	target, _ := baroInput()
	b.ReportAllocs()
	for b.Loop() {
		res, err := BOCPD(target, BOCPDOptions{})
		if err != nil {
			b.Fatal(err)
		}
		sinkBOCPD = res
	}
}

var sinkGranger *GrangerResult

func BenchmarkGranger480Lag8(b *testing.B) {
	y, x := grangerData(480, 5, 2, 0.4)
	b.ReportAllocs()
	for b.Loop() {
		res, err := Granger(ser("y", y...), ser("x", x...), nil, 8)
		if err != nil {
			b.Fatal(err)
		}
		sinkGranger = res
	}
}

var sinkDrift []Drift

func BenchmarkRankDrift200(b *testing.B) {
	_, cands := baroInput()
	b.ReportAllocs()
	for b.Loop() {
		res, err := RankDrift(cands, Window{0, 240}, Window{240, 480}, 10)
		if err != nil {
			b.Fatal(err)
		}
		sinkDrift = res
	}
}
