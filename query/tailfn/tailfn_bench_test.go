package tailfn

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/tsdb/records"
)

var benchSink any

// BenchmarkTailDecomposition1h100 is tail_mean(0.99, requests[1h]) over
// one hour of 100 instances, ≈1M requests (100k with -short), stored in a
// real records.Store (sealed zstd segments). It reports the whole function
// path and its two parts: selecting and decoding the records into columns
// (load), and the statistics on the columns (statistics).
func BenchmarkTailDecomposition1h100(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	const hour = int64(time.Hour / time.Millisecond)
	opts := records.DefaultOptions()
	opts.Dir = b.TempDir()
	store, err := records.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	insts := make([]labels.Labels, 100)
	for i := range insts {
		insts[i] = labels.FromStrings("model_name", "llama", "instance", fmt.Sprintf("gpu-%02d", i))
	}
	batch := make([]records.Record, 0, 10_000)
	for i := range n {
		r := records.Record{Time: 1 + int64(i)*hour/int64(n), Labels: insts[i%100], RequestID: fmt.Sprint(i)}
		r.Stages[records.StageQueue] = math.Exp(rng.NormFloat64()*1.2 - 3)
		r.Stages[records.StageTokenize] = 0.002 * rng.Float64()
		r.Stages[records.StagePrefill] = math.Exp(rng.NormFloat64()*0.5 - 2)
		r.Stages[records.StageDecode] = math.Exp(rng.NormFloat64()*0.6 + 0.5)
		r.Stages[records.StageDetokenize] = 0.001 * rng.Float64()
		r.Stages[records.StageNetwork] = 0.005 * rng.ExpFloat64()
		r.E2E = r.Sum()
		batch = append(batch, r)
		if len(batch) == cap(batch) || i == n-1 {
			if err := store.Append(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := store.Flush(); err != nil {
		b.Fatal(err)
	}
	ng := newEngine(b, store)
	st := loadSeriesTB(b)
	at := time.UnixMilli(hour)
	ctx := context.Background()
	w := WindowAt(nil, at, time.Hour)

	b.Run("query", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			q, err := ng.NewInstantQuery(ctx, st, nil, `tail_mean(0.99, requests[1h])`, at)
			if err != nil {
				b.Fatal(err)
			}
			res := q.Exec(ctx)
			if res.Err != nil {
				b.Fatal(res.Err)
			}
			benchSink = res.Value
			q.Close()
		}
		b.ReportMetric(float64(n), "requests")
	})
	b.Run("load", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			pop, err := Load(ctx, store, w, nil)
			if err != nil {
				b.Fatal(err)
			}
			if pop.Requests.Len() != n {
				b.Fatalf("loaded %d records, want %d", pop.Requests.Len(), n)
			}
			benchSink = pop
		}
	})
	pop, err := Load(ctx, store, w, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("statistics", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bd, err := attribution.TailMean(pop.Requests, 0.99)
			if err != nil {
				b.Fatal(err)
			}
			benchSink = bd
		}
	})
}
