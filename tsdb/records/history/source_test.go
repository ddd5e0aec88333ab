package history

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/tailfn"
	"github.com/tailroot/tailroot/tsdb/records"
)

func newEngine(t testing.TB, src tailfn.RecordSource) *query.Engine {
	t.Helper()
	reg := query.NewRegistry()
	if err := tailfn.Register(reg, src); err != nil {
		t.Fatal(err)
	}
	ng, err := query.New(query.DefaultOptions(), reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ng.Close() })
	return ng
}

var noSeries = storage.QueryableFunc(func(int64, int64) (storage.Querier, error) { return storage.NoopQuerier(), nil })

// evalRows evaluates expr at ts and indexes the result by stage/statistic.
func evalRows(t *testing.T, ng *query.Engine, expr string, ts int64) map[string]float64 {
	t.Helper()
	q, err := ng.NewInstantQuery(context.Background(), noSeries, nil, expr, time.UnixMilli(ts))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", expr, res.Err)
	}
	out := map[string]float64{}
	for _, s := range res.Value.(promql.Vector) {
		out[s.Metric.Get("stage")+"/"+s.Metric.Get("statistic")] = s.F
	}
	return out
}

// naiveTailMean is E[stage | S ≥ q] computed here from the records: stages
// with a negative residual clamped to 0 as tailfn does, S their sum, q the
// type-7 quantile of S from a full sort.
func naiveTailMean(recs []records.Record, p float64) ([records.NumStages]float64, int) {
	xs := make([][records.NumStages]float64, len(recs))
	tot := make([]float64, len(recs))
	for i, r := range recs {
		xs[i] = r.Stages
		xs[i][records.StageOther] = math.Max(0, xs[i][records.StageOther])
		for _, v := range xs[i] {
			tot[i] += v
		}
	}
	sorted := slices.Clone(tot)
	slices.Sort(sorted)
	h := float64(len(sorted)-1) * p
	l := int(h)
	q := sorted[l]
	if l+1 < len(sorted) {
		q += (h - float64(l)) * (sorted[l+1] - sorted[l])
	}
	var sum [records.NumStages]float64
	n := 0
	for i := range tot {
		if tot[i] >= q {
			n++
			for j := range sum {
				sum[j] += xs[i][j]
			}
		}
	}
	for j := range sum {
		sum[j] /= float64(n)
	}
	return sum, n
}

func filter(recs []records.Record, mint, maxt int64, model string) []records.Record {
	var out []records.Record
	for _, r := range recs {
		if r.Time >= mint && r.Time <= maxt && (model == "" || r.Labels.Get("model_name") == model) {
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b records.Record) int { return cmpInt64(a.Time, b.Time) })
	return out
}

// TestAnswersPastRetention is the history's promise: after local
// retention drops a window, tail_mean over it (and Select, SelectColumns)
// answers exactly what the store answered before, from Parquet.
func TestAnswersPastRetention(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bucket func(t *testing.T) Bucket
	}{
		{"dir", func(t *testing.T) Bucket {
			b, err := NewDirBucket(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return b
		}},
		{"s3", func(t *testing.T) Bucket { return newFakeS3(t, "history", "fleet/records") }},
	} {
		t.Run(tc.name, func(t *testing.T) { testAnswersPastRetention(t, tc.bucket(t)) })
	}
}

func testAnswersPastRetention(t *testing.T, bkt Bucket) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 12))
	var exp *Exporter
	s := openStore(t, t.TempDir(), 24*time.Hour, func(ref records.SegmentRef) bool { return exp == nil || exp.Held(ref) })
	recs := fillStore(t, s, rng, 20000, 72*time.Hour)
	exp, _ = NewExporter(s, bkt, ExportOptions{Node: "n1"})
	rd, _ := NewReader(bkt, "n1")
	src := NewSource(s, rd, SourceOptions{})
	ngLocal, ngSrc := newEngine(t, s), newEngine(t, src)

	type window struct {
		name       string
		mint, maxt int64
		model      string
	}
	windows := []window{
		{"expired", t0 + 10*hour, t0 + 16*hour - 1, "llama-3-70b"},
		{"straddling", t0 + 40*hour + 123, t0 + 56*hour - 1, ""},
		{"local", t0 + 60*hour, t0 + 66*hour - 1, "mistral-7b"},
		{"all", t0, t0 + 72*hour, ""},
	}
	expr := func(w window) string {
		sel := "requests"
		if w.model != "" {
			sel += fmt.Sprintf(`{model_name=%q}`, w.model)
		}
		return fmt.Sprintf("tail_mean(0.99, %s[%dms])", sel, w.maxt-w.mint+1)
	}
	type answer struct {
		rows  map[string]float64
		recs  []records.Record
		batch *records.ColumnBatch
	}
	ask := func(ng *query.Engine, from interface {
		tailfn.ColumnSource
	}, w window,
	) answer {
		var ms []*labels.Matcher
		if w.model != "" {
			ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, "model_name", w.model))
		}
		b, err := from.SelectColumns(ctx, w.mint, w.maxt, records.ColumnAll, ms...)
		if err != nil {
			t.Fatal(err)
		}
		return answer{evalRows(t, ng, expr(w), w.maxt), collect(t, from.Select(ctx, w.mint, w.maxt, ms...)), b}
	}
	before := map[string]answer{}
	for _, w := range windows {
		before[w.name] = ask(ngLocal, s, w)
	}

	if _, err := exp.ExportPending(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(t0 + 72*hour)
	if err := s.ApplyRetention(now); err != nil {
		t.Fatal(err)
	}
	// Partitions ending at or before now−24h = t0+48h are gone locally.
	if got := collect(t, s.Select(ctx, t0, t0+48*hour-1)); len(got) != 0 {
		t.Fatalf("local store still holds %d records before the cutoff", len(got))
	}
	if st := s.Stats(); st.Records == 0 || st.Records == int64(len(recs)) {
		t.Fatalf("retention left %d of %d records", st.Records, len(recs))
	}

	for _, w := range windows {
		t.Run(w.name, func(t *testing.T) {
			want := filter(recs, w.mint, w.maxt, w.model)
			b := before[w.name]
			sameRecords(t, b.recs, want) // the store itself, as a reference
			after := ask(ngSrc, src, w)
			sameRecords(t, after.recs, want)
			sameBatch(t, after.batch, b.batch)
			if len(after.rows) != 2*records.NumStages+2 && len(after.rows) < records.NumStages {
				t.Fatalf("tail_mean rows %v", after.rows)
			}
			mean, n := naiveTailMean(want, 0.99)
			for k, v := range b.rows {
				if after.rows[k] != v {
					t.Errorf("%s: %s = %v after retention, %v before", expr(w), k, after.rows[k], v)
				}
			}
			for j, stage := range tailfn.StageNames {
				got, ok := after.rows[stage+"/contribution"]
				if !ok || math.Abs(got-mean[j]) > 1e-9 {
					t.Errorf("%s: %s contribution %v, naive %v", expr(w), stage, got, mean[j])
				}
			}
			t.Logf("%d records, %d in the tail, from history: %v", len(want), n, w.mint < t0+48*hour)
		})
	}

	// With the store's retention given, a window retention cannot have
	// touched is answered without listing the bucket; the others still
	// read history, with the same records.
	cb := &countingBucket{Bucket: bkt}
	rd2, _ := NewReader(cb, "n1")
	fast := NewSource(s, rd2, SourceOptions{Retention: 24 * time.Hour, Now: func() time.Time { return now }})
	for _, w := range windows {
		before := cb.lists
		var ms []*labels.Matcher
		if w.model != "" {
			ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, "model_name", w.model))
		}
		sameRecords(t, collect(t, fast.Select(ctx, w.mint, w.maxt, ms...)), filter(recs, w.mint, w.maxt, w.model))
		if listed := cb.lists > before; listed != (w.name != "local") {
			t.Errorf("window %s: bucket listed %v", w.name, listed)
		}
	}
}

type countingBucket struct {
	Bucket
	lists int
}

func (b *countingBucket) List(ctx context.Context, prefix string) ([]string, error) {
	b.lists++
	return b.Bucket.List(ctx, prefix)
}

// sameBatch compares two batches row by row: every column bit for bit and
// the labels of each row by value (label-set ids are the batch's own).
func sameBatch(t *testing.T, got, want *records.ColumnBatch) {
	t.Helper()
	if got.Len != want.Len || !slices.Equal(got.Time, want.Time) {
		t.Fatalf("batch: %d rows, want %d (or times differ)", got.Len, want.Len)
	}
	bits := func(x []float64) []uint64 {
		return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
	}
	for st := range records.NumStages {
		if !slices.Equal(bits(got.Stages[st]), bits(want.Stages[st])) {
			t.Fatalf("batch: stage %d differs", st)
		}
	}
	for name, c := range map[string][2][]float64{"e2e": {got.E2E, want.E2E}, "ttft": {got.TTFT, want.TTFT}, "entropy": {got.PromptEntropy, want.PromptEntropy}} {
		if !slices.Equal(bits(c[0]), bits(c[1])) {
			t.Fatalf("batch: %s differs", name)
		}
	}
	if !slices.Equal(got.PromptTokens, want.PromptTokens) || !slices.Equal(got.OutputTokens, want.OutputTokens) {
		t.Fatal("batch: token counts differ")
	}
	for i := range got.Len {
		if !labels.Equal(got.Labels(i), want.Labels(i)) {
			t.Fatalf("batch row %d: labels %s, want %s", i, got.Labels(i), want.Labels(i))
		}
	}
}
