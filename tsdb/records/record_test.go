package records

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

func TestStageNames(t *testing.T) {
	want := "queue tokenize prefill decode detokenize network other"
	var got []string
	for s := range Stage(NumStages) {
		got = append(got, s.String())
	}
	if g := strings.Join(got, " "); g != want {
		t.Fatalf("stages %q, want %q", g, want)
	}
}

func TestSummarizeITL(t *testing.T) {
	near := func(t *testing.T, name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	t.Run("one to ten", func(t *testing.T) {
		// Type 7: h = 9p. p50: x[4]+0.5(x[5]-x[4]) = 5.5;
		// p90: h = 8.1 → 9 + 0.1 = 9.1; p99: h = 8.91 → 9.91.
		gaps := []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5}
		it := SummarizeITL(gaps)
		if it.Count != 10 || it.Sum != 55 || it.Min != 1 || it.Max != 10 {
			t.Fatalf("count/sum/min/max = %d/%v/%v/%v, want 10/55/1/10", it.Count, it.Sum, it.Min, it.Max)
		}
		near(t, "p50", it.P50, 5.5)
		near(t, "p90", it.P90, 9.1)
		near(t, "p99", it.P99, 9.91)
		if len(it.Values) != 10 || it.Values[0] != 10 || it.Values[9] != 5 {
			t.Fatalf("values %v, want the gaps in token order", it.Values)
		}
	})
	t.Run("four gaps", func(t *testing.T) {
		// Sorted 0.01 0.02 0.03 0.05, h = 3p. p50: 0.02+0.5·0.01 = 0.025;
		// p90: h = 2.7 → 0.03+0.7·0.02 = 0.044; p99: h = 2.97 → 0.0494.
		it := SummarizeITL([]float64{0.02, 0.01, 0.05, 0.03})
		near(t, "p50", it.P50, 0.025)
		near(t, "p90", it.P90, 0.044)
		near(t, "p99", it.P99, 0.0494)
		near(t, "sum", it.Sum, 0.11)
	})
	t.Run("long generation keeps summary only", func(t *testing.T) {
		gaps := make([]float64, 200)
		for i := range gaps {
			gaps[i] = float64(i + 1) // 1…200
		}
		it := SummarizeITL(gaps)
		// h = 199p. p50: x[99]+0.5 = 100.5; p90: h = 179.1 → 180.1;
		// p99: h = 197.01 → 198.01. Sum = 200·201/2 = 20100.
		if it.Values != nil || it.Count != 200 || it.Sum != 20100 {
			t.Fatalf("values %d, count %d, sum %v", len(it.Values), it.Count, it.Sum)
		}
		near(t, "p50", it.P50, 100.5)
		near(t, "p90", it.P90, 180.1)
		near(t, "p99", it.P99, 198.01)
	})
	t.Run("empty", func(t *testing.T) {
		if it := SummarizeITL(nil); it.Count != 0 || it.Values != nil || it.Max != 0 {
			t.Fatalf("got %+v", it)
		}
	})
}

func TestFillOther(t *testing.T) {
	// 0.1 + 0.2 = 0.30000000000000004 in float64, so other must be
	// slightly negative for the stages to add back to 0.3 exactly.
	r := Record{E2E: 0.3}
	r.Stages[StageQueue], r.Stages[StagePrefill] = 0.1, 0.2
	if err := r.FillOther(); err != nil {
		t.Fatal(err)
	}
	if r.Sum() != 0.3 || r.Stages[StageOther] >= 0 {
		t.Fatalf("other %v, sum %v", r.Stages[StageOther], r.Sum())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 100000 {
		var r Record
		var s float64
		for j := range NumStages - 1 {
			r.Stages[j] = rng.ExpFloat64() * math.Pow(10, float64(rng.IntN(9)-6))
			s += r.Stages[j]
		}
		r.E2E = s * (0.5 + rng.Float64())
		if err := r.FillOther(); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if r.Sum() != r.E2E {
			t.Fatalf("case %d: sum %v != e2e %v", i, r.Sum(), r.E2E)
		}
		// The nudge is a few ulps of e2e at most.
		if d := math.Abs(r.Stages[StageOther] - (r.E2E - s)); d > 4*ulp(r.E2E) {
			t.Fatalf("case %d: other moved %v from the residual", i, d)
		}
	}
	// A rounding tie: no residual reaches this e2e exactly, so e2e moves
	// by one ulp to a sum the stages reach.
	tie := Record{E2E: 0.331907}
	tie.Stages[StageQueue] = 0.07023599999999999
	if err := tie.FillOther(); err != nil {
		t.Fatalf("tie: %v", err)
	}
	if tie.Sum() != tie.E2E || math.Abs(tie.E2E-0.331907) > ulp(0.331907) {
		t.Fatalf("tie: sum %v, e2e %v (was 0.331907)", tie.Sum(), tie.E2E)
	}
	// Ties are common for stages computed from nanosecond timestamps: the
	// invariant holds for every one of them.
	for i := range 100000 {
		var r Record
		arrival := int64(1_764_000_000_000_000_000) + rng.Int64N(1e15)
		t1 := arrival + rng.Int64N(1e8)
		t2 := t1 + rng.Int64N(3e8)
		end := t2 + rng.Int64N(2e9)
		r.Stages[StageQueue] = float64(t1-arrival) / 1e9
		r.Stages[StagePrefill] = float64(t2-t1) / 1e9
		r.E2E = float64(end-arrival) / 1e9
		want := r.E2E
		if err := r.FillOther(); err != nil {
			t.Fatalf("ns case %d: %v", i, err)
		}
		if r.Sum() != r.E2E || math.Abs(r.E2E-want) > ulp(want) {
			t.Fatalf("ns case %d: sum %v, e2e %v (was %v)", i, r.Sum(), r.E2E, want)
		}
	}
	bad := Record{E2E: math.Inf(1)}
	if err := bad.FillOther(); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("FillOther with infinite e2e: %v", err)
	}
}

func ulp(x float64) float64 { return math.Nextafter(math.Abs(x), math.Inf(1)) - math.Abs(x) }

func TestValidate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	base := func() Record { return randRecord(rng, 1_700_000_000_000, 10) }
	cases := []struct {
		name, want string
		mut        func(r *Record)
	}{
		{"negative time", "time -1", func(r *Record) { r.Time = -1 }},
		{"empty label value", `label "model" has an empty value`, func(r *Record) {
			r.Labels = labels.New(labels.Label{Name: "model", Value: ""})
		}},
		{"unsorted labels", `"a" not after "b"`, func(r *Record) { r.Labels = unsortedLabels("b", "1", "a", "2") }},
		{"duplicate labels", `"a" not after "a"`, func(r *Record) { r.Labels = unsortedLabels("a", "1", "a", "2") }},
		{"nan stage", "stage prefill = NaN", func(r *Record) { r.Stages[StagePrefill] = math.NaN() }},
		{"negative stage", "stage decode = -1", func(r *Record) { r.Stages[StageDecode] = -1 }},
		{"sum off by one ulp", "stages sum to", func(r *Record) { r.E2E = math.Nextafter(r.E2E, 10) }},
		{"infinite ttft", "ttft = +Inf", func(r *Record) { r.TTFT = math.Inf(1) }},
		{"negative entropy", "prompt entropy = -0.5", func(r *Record) { r.PromptEntropy = -0.5 }},
		{"itl values vs count", "itl has 10 values for count 11", func(r *Record) { r.ITL.Count = 11 }},
		{"itl quantiles", "itl quantiles out of order", func(r *Record) { r.ITL.P50 = r.ITL.Max + 1 }},
		{"itl summary without gaps", "itl summary set for zero gaps", func(r *Record) {
			r.ITL = ITL{Sum: 1}
		}},
		{"long request id", "request id of 1025 bytes", func(r *Record) { r.RequestID = strings.Repeat("x", 1025) }},
	}
	if r := base(); r.Validate() != nil {
		t.Fatalf("base record invalid: %v", r.Validate())
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := base()
			c.mut(&r)
			err := r.Validate()
			if !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v, want ErrInvalidRecord mentioning %q", err, c.want)
			}
		})
	}
	t.Run("negative other is allowed", func(t *testing.T) {
		r := base()
		r.Stages[StageOther] = 0
		r.E2E = r.Sum() * 0.9
		if err := r.FillOther(); err != nil {
			t.Fatal(err)
		}
		if r.Stages[StageOther] >= 0 || r.Validate() != nil {
			t.Fatalf("other %v, validate %v", r.Stages[StageOther], r.Validate())
		}
	})
}

// unsortedLabels builds labels in the given order, as a buggy caller could.
func unsortedLabels(ss ...string) labels.Labels {
	b := labels.NewScratchBuilder(len(ss) / 2)
	for i := 0; i < len(ss); i += 2 {
		b.Add(ss[i], ss[i+1])
	}
	return b.Labels()
}

func TestRecordRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var buf []byte
	var want []Record
	for i := range 2000 {
		var r Record
		if i%2 == 0 {
			r = randBitsRecord(rng)
		} else {
			r = randRecord(rng, rng.Int64N(1<<45), rng.IntN(200))
		}
		want = append(want, r)
		one := r.Marshal(nil)
		var got Record
		tail, err := got.Unmarshal(one)
		if err != nil || len(tail) != 0 {
			t.Fatalf("record %d: err %v, %d bytes left", i, err, len(tail))
		}
		if d := diffRecord(got, r); d != "" {
			t.Fatalf("record %d: %s", i, d)
		}
		buf = r.Marshal(buf)
	}
	// Back-to-back rows decode one after another through the tail.
	rest := buf
	for i := range want {
		var got Record
		var err error
		if rest, err = got.Unmarshal(rest); err != nil {
			t.Fatalf("stream record %d: %v", i, err)
		}
		if d := diffRecord(got, want[i]); d != "" {
			t.Fatalf("stream record %d: %s", i, d)
		}
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left after the stream", len(rest))
	}
}

func TestRecordUnmarshalRejects(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	r := randRecord(rng, 1_700_000_000_000, 5)
	r.TraceID = TraceID{1}
	full := r.Marshal(nil)
	for n := range len(full) {
		var got Record
		if _, err := got.Unmarshal(full[:n]); err == nil {
			t.Fatalf("prefix of %d/%d bytes decoded", n, len(full))
		}
	}
	// Hand-built rows: time 5, one label, then a bad piece.
	head := []byte{10, 1, 1, 'a', 1, 'x'}
	cases := map[string][]byte{
		"unknown flag":        append(append([]byte{}, head...), 0x02),
		"zero traced id":      append(append(append([]byte{}, head...), 0x01), make([]byte, 16)...),
		"unsorted labels":     {10, 2, 1, 'b', 1, 'x', 1, 'a', 1, 'y', 0},
		"duplicate labels":    {10, 2, 1, 'a', 1, 'x', 1, 'a', 1, 'y', 0},
		"empty label value":   {10, 1, 1, 'a', 0, 0},
		"negative time":       {1, 0, 0},
		"huge label count":    {10, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"overlong request id": append(append(append([]byte{}, head...), 0), 0xff, 0xff, 0x03, 'r'),
	}
	for name, b := range cases {
		var got Record
		if _, err := got.Unmarshal(b); err == nil {
			t.Errorf("%s: decoded %x", name, b)
		}
	}
}
