package records

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
)

var columnsSink any

// benchHourStore stores one hour of 100 instances, n requests, sealed into
// segments, the shape of a one-hour tail query over a fleet.
func benchHourStore(b *testing.B, n int) *Store {
	o := DefaultOptions()
	o.Dir = b.TempDir()
	s, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	const hour = int64(time.Hour / time.Millisecond)
	rng := rand.New(rand.NewPCG(1, 2))
	insts := make([]labels.Labels, 100)
	for i := range insts {
		insts[i] = labels.FromStrings("model_name", "llama", "instance", fmt.Sprintf("gpu-%02d", i))
	}
	batch := make([]Record, 0, 10_000)
	for i := range n {
		r := Record{Time: 1 + int64(i)*hour/int64(n), Labels: insts[i%100], RequestID: fmt.Sprint(i)}
		r.Stages[StageQueue] = math.Exp(rng.NormFloat64()*1.2 - 3)
		r.Stages[StageTokenize] = 0.002 * rng.Float64()
		r.Stages[StagePrefill] = math.Exp(rng.NormFloat64()*0.5 - 2)
		r.Stages[StageDecode] = math.Exp(rng.NormFloat64()*0.6 + 0.5)
		r.Stages[StageDetokenize] = 0.001 * rng.Float64()
		r.Stages[StageNetwork] = 0.005 * rng.ExpFloat64()
		r.E2E = r.Sum()
		r.TTFT = r.Stages[StageQueue] + r.Stages[StageTokenize] + r.Stages[StagePrefill]
		r.PromptTokens, r.OutputTokens = uint32(rng.IntN(8000)), uint32(rng.IntN(1000))
		batch = append(batch, r)
		if len(batch) == cap(batch) || i == n-1 {
			if err := s.Append(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := s.Flush(); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkSelectColumns reads the stage and TTFT columns of ≈1M records
// (100k with -short) two ways: impl=select iterates Select and appends the
// fields to columns (what a caller of Select must do), impl=columns calls
// SelectColumns. Compare with benchstat -col /impl.
func BenchmarkSelectColumns(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	s := benchHourStore(b, n)
	defer s.Close()
	const want = ColumnStages | ColumnTTFT
	const half = int64(30 * time.Minute / time.Millisecond)
	sels := []struct {
		name       string
		mint, maxt int64
		ms         []*labels.Matcher
	}{
		{"all", 0, math.MaxInt64, nil},
		{"half-hour", half / 2, half/2 + half, nil},
		{"one-instance", 0, math.MaxInt64, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "instance", "gpu-07")}},
	}
	ctx := context.Background()
	for _, sel := range sels {
		b.Run("impl=select/sel="+sel.name, func(b *testing.B) {
			b.ReportAllocs()
			rows := 0
			for b.Loop() {
				var out ColumnBatch
				it := s.Select(ctx, sel.mint, sel.maxt, sel.ms...)
				for it.Next() {
					r := it.At()
					for st := range r.Stages {
						out.Stages[st] = append(out.Stages[st], r.Stages[st])
					}
					out.TTFT = append(out.TTFT, r.TTFT)
					out.Len++
				}
				if err := it.Err(); err != nil {
					b.Fatal(err)
				}
				it.Close()
				rows += out.Len
				columnsSink = &out
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "records/s")
		})
		b.Run("impl=columns/sel="+sel.name, func(b *testing.B) {
			b.ReportAllocs()
			rows := 0
			for b.Loop() {
				out, err := s.SelectColumns(ctx, sel.mint, sel.maxt, want, sel.ms...)
				if err != nil {
					b.Fatal(err)
				}
				rows += out.Len
				columnsSink = out
			}
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
