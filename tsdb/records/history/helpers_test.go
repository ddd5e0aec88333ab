package history

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/tsdb/records"
)

// genRecord builds a valid record at t: exponential stage times with a
// heavy decode tail, a negative residual now and then (overlapping
// stages), trace ids on most, kept gaps on short generations and only the
// summary on long ones.
func genRecord(rng *rand.Rand, t int64) records.Record {
	models := []string{"llama-3-70b", "mistral-7b", "qwen2-72b"}
	ls := []string{"model_name", models[rng.IntN(len(models))], "instance", fmt.Sprintf("gpu-%d", rng.IntN(4))}
	if rng.IntN(3) == 0 {
		ls = append(ls, "route", "/v1/chat/completions")
	}
	r := records.Record{
		Time:         t,
		Labels:       labels.FromStrings(ls...),
		RequestID:    fmt.Sprintf("req-%016x", rng.Uint64()),
		PromptTokens: uint32(rng.IntN(8000)),
	}
	if rng.IntN(4) != 0 {
		for i := range r.TraceID {
			r.TraceID[i] = byte(rng.Uint32())
		}
		r.TraceID[0] |= 1
	}
	scale := [records.NumStages - 1]float64{0.05, 0.002, 0.3, 1.0, 0.001, 0.01}
	var s float64
	for i := range scale {
		v := rng.ExpFloat64() * scale[i]
		if i == int(records.StageDecode) && rng.IntN(50) == 0 {
			v *= 20
		}
		r.Stages[i] = v
		s += v
	}
	r.E2E = s + rng.ExpFloat64()*0.005
	if rng.IntN(10) == 0 {
		r.E2E = s - 0.001*rng.Float64() // overlapping stages
		if r.E2E < 0 {
			r.E2E = s
		}
	}
	if err := r.FillOther(); err != nil {
		panic(err)
	}
	r.TTFT = r.Stages[records.StageQueue] + r.Stages[records.StagePrefill]
	n := rng.IntN(3) * rng.IntN(100)
	gaps := make([]float64, n)
	for i := range gaps {
		gaps[i] = 0.01 + rng.ExpFloat64()*0.01
	}
	r.ITL = records.SummarizeITL(gaps)
	r.OutputTokens = uint32(n + 1)
	r.PromptEntropy = rng.Float64() * 12
	return r
}

// genRecords spreads n records uniformly over [from, from+span).
func genRecords(rng *rand.Rand, n int, from int64, span time.Duration) []records.Record {
	out := make([]records.Record, n)
	for i := range out {
		out[i] = genRecord(rng, from+rng.Int64N(span.Milliseconds()))
	}
	return out
}

func openStore(t testing.TB, dir string, retention time.Duration, hold func(records.SegmentRef) bool) *records.Store {
	t.Helper()
	o := records.DefaultOptions()
	o.Dir = dir
	o.Retention = retention
	o.RetentionHold = hold
	s, err := records.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// sameRecords compares two record lists field by field, floats bit for
// bit (reflect.DeepEqual on the structs; labels compared as labels).
func sameRecords(t *testing.T, got, want []records.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !labels.Equal(g.Labels, w.Labels) {
			t.Fatalf("record %d: labels %s, want %s", i, g.Labels, w.Labels)
		}
		g.Labels, w.Labels = labels.EmptyLabels(), labels.EmptyLabels()
		if len(g.ITL.Values) == 0 && len(w.ITL.Values) == 0 {
			g.ITL.Values, w.ITL.Values = nil, nil
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("record %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func collect(t *testing.T, it records.RecordIterator) []records.Record {
	t.Helper()
	defer it.Close()
	var out []records.Record
	for it.Next() {
		out = append(out, it.At())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
