package fast_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"
)

// openHintDB writes native histograms whose counter reset hints differ
// between the paths a read can take: explicit CounterReset hints on
// samples that are no reset (the appender cuts a chunk, whose first sample
// the iterator hands out as unknown), real resets of the count or of one
// bucket only, a zero threshold that grows and a schema that drops (new
// chunks that are or are not resets), stale markers and the samples after
// them, float histograms (another chunk encoding), out-of-order samples
// (overlapping chunks), and several blocks plus the head, so that a merge
// of blocks and its seeks turn hints to unknown where a chunk's own
// iterator would not.
func openHintDB(t testing.TB, seed uint64) *tsdb.DB {
	t.Helper()
	o := tsdb.DefaultOptions()
	o.OutOfOrderTimeWindow = time.Hour.Milliseconds()
	db, err := tsdb.Open(t.TempDir(), nil, nil, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	r := rand.New(rand.NewPCG(seed, 17))
	start := diffStart.UnixMilli()
	const n = 480 // two hours at 15 s
	type state struct {
		job  string
		abs  []int64
		zero uint64
		sum  float64
	}
	jobs := []*state{{job: "hinted"}, {job: "resets"}, {job: "stale"}, {job: "layout"}}
	for _, s := range jobs {
		s.abs = make([]int64, 6)
	}
	write := func(from, to int) {
		app := db.AppenderV2(context.Background())
		add := func(ls labels.Labels, ts int64, h *histogram.Histogram, fh *histogram.FloatHistogram) {
			if _, err := app.Append(0, ls, 0, ts, 0, h, fh, storage.AOptions{}); err != nil {
				t.Fatalf("append %s: %v", ls, err)
			}
		}
		for i := from; i < to; i++ {
			ts := start + int64(i)*15_000
			for _, s := range jobs {
				h := &histogram.Histogram{Schema: 2, ZeroThreshold: 1e-3}
				for k := range s.abs {
					s.abs[k] += r.Int64N(4)
				}
				s.zero += uint64(r.IntN(2))
				s.sum += r.Float64() * 10
				switch s.job {
				case "hinted":
					if i%10 == 3 {
						h.CounterResetHint = histogram.CounterReset
					}
					if i%10 == 7 {
						h.CounterResetHint = histogram.NotCounterReset
					}
				case "resets":
					switch {
					case i%37 == 0:
						clear(s.abs)
						s.zero, s.sum = 0, 0
					case i%23 == 0:
						s.abs[2] = 0 // one bucket resets, the count still grows
						s.abs[5] += 50
					}
				case "stale":
					if i%41 >= 39 {
						add(labels.FromStrings("__name__", "lat_native_seconds", "job", s.job), ts,
							&histogram.Histogram{Sum: math.Float64frombits(value.StaleNaN)}, nil)
						continue
					}
				case "layout":
					if i >= 200 {
						h.ZeroThreshold = 0.01
					}
					if i >= 320 {
						h.Schema = 1
					}
				}
				h.ZeroCount = s.zero
				h.PositiveSpans = []histogram.Span{{Offset: -3, Length: 4}, {Offset: 2, Length: 2}}
				h.PositiveBuckets = make([]int64, len(s.abs))
				var prev int64
				h.Count = s.zero
				for k, v := range s.abs {
					h.PositiveBuckets[k] = v - prev
					prev = v
					h.Count += uint64(v)
				}
				h.Sum = s.sum
				add(labels.FromStrings("__name__", "lat_native_seconds", "job", s.job), ts, h, nil)
				if s.job == "hinted" {
					// The same counts as float histograms.
					add(labels.FromStrings("__name__", "ttft_seconds", "job", s.job), ts, nil, h.ToFloat(nil))
				}
			}
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// Three blocks, then the head, then out-of-order samples of one
	// series into the head's past (its chunks then overlap).
	cuts := []int{120, 200, 280, n}
	from := 0
	for k, to := range cuts {
		write(from, to)
		if k < len(cuts)-1 {
			persistDiff(t, db, start+int64(to)*15_000)
		}
		from = to
	}
	app := db.AppenderV2(context.Background())
	ls := labels.FromStrings("__name__", "lat_nhcb_seconds", "job", "ooo")
	for _, i := range []int{300, 310, 320, 330, 315, 305, 340} {
		h := &histogram.Histogram{Schema: 0, Count: uint64(i), ZeroCount: uint64(i), Sum: float64(i)}
		if _, err := app.Append(0, ls, 0, start+int64(i)*15_000, 0, h, nil, storage.AOptions{}); err != nil {
			t.Fatalf("append %s: %v", ls, err)
		}
		if i == 340 {
			if err := app.Commit(); err != nil {
				t.Fatal(err)
			}
			app = db.AppenderV2(context.Background())
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestDifferentialHints is TestDifferential over openHintDB: the chunk
// reader must see the resets upstream's merged, seeking iterators see.
func TestDifferentialHints(t *testing.T) {
	gen := func(r *rand.Rand) string {
		pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
		m := pick("lat_native_seconds", `lat_native_seconds{job="hinted"}`, `lat_native_seconds{job="resets"}`,
			`lat_native_seconds{job="stale"}`, `lat_native_seconds{job="layout"}`, "ttft_seconds", "lat_nhcb_seconds")
		rng := pick("15s", "30s", "1m", "2m", "5m", "10m", "1h")
		in := fmt.Sprintf("%s(%s[%s])", pick("rate", "increase"), m, rng)
		return pick(
			"histogram_quantile(0.9, sum by (job) ("+in+"))", "histogram_quantile(0.5, sum("+in+"))",
			"sum by (job) ("+in+")", in, "histogram_count("+in+")", "histogram_sum(sum("+in+"))",
		)
	}
	for seed := uint64(1); seed <= 2; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runDifferentialOn(t, openHintDB(t, seed), seed == 2, seed, 150, gen)
		})
	}
}
