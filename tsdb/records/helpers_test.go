package records

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

var (
	testModels    = []string{"llama-3-70b", "mistral-7b", "qwen2-72b"}
	testInstances = []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"}
	testRoutes    = []string{"/v1/chat/completions", "/v1/completions"}
)

// randLabels returns 3–5 labels drawn from small pools, as an inference
// fleet would produce.
func randLabels(rng *rand.Rand) labels.Labels {
	ss := []string{
		"model", testModels[rng.IntN(len(testModels))],
		"instance", testInstances[rng.IntN(len(testInstances))],
		"job", "vllm",
	}
	if rng.IntN(2) == 0 {
		ss = append(ss, "route", testRoutes[rng.IntN(len(testRoutes))])
	}
	if rng.IntN(3) == 0 {
		ss = append(ss, "tenant", fmt.Sprintf("t%d", rng.IntN(4)))
	}
	return labels.FromStrings(ss...)
}

// randRecord builds a valid, realistic record at time t with nITL gaps.
func randRecord(rng *rand.Rand, t int64, nITL int) Record {
	r := Record{
		Time:         t,
		Labels:       randLabels(rng),
		RequestID:    fmt.Sprintf("req-%016x", rng.Uint64()),
		PromptTokens: uint32(rng.IntN(8000)),
		OutputTokens: uint32(nITL + 1),
	}
	if rng.IntN(4) != 0 {
		for i := range r.TraceID {
			r.TraceID[i] = byte(rng.Uint32())
		}
		r.TraceID[0] |= 1
	}
	scale := [NumStages - 1]float64{0.05, 0.002, 0.3, 2.0, 0.001, 0.01}
	var s float64
	for i := range scale {
		v := rng.ExpFloat64() * scale[i]
		if rng.IntN(20) == 0 {
			v = 0
		}
		r.Stages[i] = v
		s += v
	}
	r.E2E = s + rng.ExpFloat64()*0.005
	if err := r.FillOther(); err != nil {
		panic(err)
	}
	r.TTFT = r.Stages[StageQueue] + r.Stages[StageTokenize] + r.Stages[StagePrefill]
	gaps := make([]float64, nITL)
	for i := range gaps {
		gaps[i] = 0.01 + rng.ExpFloat64()*0.01
	}
	r.ITL = SummarizeITL(gaps)
	r.PromptEntropy = rng.Float64() * 12
	return r
}

// randBitsRecord fills every float with arbitrary finite bit patterns
// (negative zero, subnormals, huge values) to check exactness of encoders
// that do not validate.
func randBitsRecord(rng *rand.Rand) Record {
	f := func() float64 {
		for {
			v := math.Float64frombits(rng.Uint64())
			switch rng.IntN(8) {
			case 0:
				v = math.Copysign(0, -1)
			case 1:
				v = math.Float64frombits(rng.Uint64() & 0x000fffffffffffff) // subnormal
			}
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				return v
			}
		}
	}
	r := Record{
		Time:         rng.Int64N(1 << 50),
		Labels:       randLabels(rng),
		RequestID:    string([]byte{byte(rng.Uint32()), 0, byte(rng.Uint32())}),
		PromptTokens: rng.Uint32(),
		OutputTokens: rng.Uint32(),
		TTFT:         f(),
	}
	if rng.IntN(2) == 0 {
		r.TraceID[15] = 1
		r.TraceID[3] = byte(rng.Uint32())
	}
	for i := range r.Stages {
		r.Stages[i] = f()
	}
	r.E2E, r.PromptEntropy = f(), f()
	it := &r.ITL
	it.Sum, it.Min, it.Max, it.P50, it.P90, it.P99 = f(), f(), f(), f(), f(), f()
	if n := rng.IntN(MaxITLValues + 1); rng.IntN(2) == 0 && n > 0 {
		it.Count = uint32(n)
		it.Values = make([]float64, n)
		for i := range it.Values {
			it.Values[i] = f()
		}
	} else {
		it.Count = rng.Uint32()
	}
	return r
}

// diffRecord compares bit for bit and names the first difference.
func diffRecord(a, b Record) string {
	fb := math.Float64bits
	switch {
	case a.Time != b.Time:
		return fmt.Sprintf("time %d vs %d", a.Time, b.Time)
	case !labels.Equal(a.Labels, b.Labels):
		return fmt.Sprintf("labels %s vs %s", a.Labels, b.Labels)
	case a.TraceID != b.TraceID:
		return fmt.Sprintf("trace id %x vs %x", a.TraceID, b.TraceID)
	case a.RequestID != b.RequestID:
		return fmt.Sprintf("request id %q vs %q", a.RequestID, b.RequestID)
	case a.PromptTokens != b.PromptTokens || a.OutputTokens != b.OutputTokens:
		return fmt.Sprintf("tokens %d/%d vs %d/%d", a.PromptTokens, a.OutputTokens, b.PromptTokens, b.OutputTokens)
	case a.ITL.Count != b.ITL.Count:
		return fmt.Sprintf("itl count %d vs %d", a.ITL.Count, b.ITL.Count)
	}
	fa := []float64{a.E2E, a.TTFT, a.PromptEntropy, a.ITL.Sum, a.ITL.Min, a.ITL.Max, a.ITL.P50, a.ITL.P90, a.ITL.P99}
	fbv := []float64{b.E2E, b.TTFT, b.PromptEntropy, b.ITL.Sum, b.ITL.Min, b.ITL.Max, b.ITL.P50, b.ITL.P90, b.ITL.P99}
	fa = append(append(fa, a.Stages[:]...), a.ITL.Values...)
	fbv = append(append(fbv, b.Stages[:]...), b.ITL.Values...)
	if len(a.ITL.Values) != len(b.ITL.Values) {
		return fmt.Sprintf("itl values %d vs %d", len(a.ITL.Values), len(b.ITL.Values))
	}
	for i := range fa {
		if fb(fa[i]) != fb(fbv[i]) {
			return fmt.Sprintf("float %d: %x vs %x", i, fb(fa[i]), fb(fbv[i]))
		}
	}
	return ""
}

func requireSameRecords(t testing.TB, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if d := diffRecord(got[i], want[i]); d != "" {
			t.Fatalf("record %d (request %q): %s", i, want[i].RequestID, d)
		}
	}
}

// sortedByTime is the reference order of Select: time, then append order.
func sortedByTime(recs []Record) []Record {
	out := slices.Clone(recs)
	slices.SortStableFunc(out, func(a, b Record) int { return cmpInt64(a.Time, b.Time) })
	return out
}
