package forward_test

import (
	"fmt"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"

	"github.com/tailroot/tailroot/internal/rwtest"
	"github.com/tailroot/tailroot/tsdb"
	"github.com/tailroot/tailroot/tsdb/forward"
)

func rwConfig(url, extra string) string {
	return fmt.Sprintf(`
global:
  external_labels: {replica: a}
remote_write:
  - url: %s
    queue_config: {batch_send_deadline: 50ms, max_samples_per_send: 50, min_backoff: 20ms, max_backoff: 200ms, capacity: 100, max_shards: 2}
%s`, url, extra)
}

// external is want with the external label replica="a" added.
func external(t *testing.T, sent map[rwtest.Key]float64) map[rwtest.Key]float64 {
	t.Helper()
	out := map[rwtest.Key]float64{}
	for k, v := range sent {
		ls, err := parseSeries(k.Series)
		if err != nil {
			t.Fatal(err)
		}
		out[rwtest.Key{Series: withLabel(ls, "replica", "a").String(), T: k.T}] = v
	}
	return out
}

// TestOutageLosesNothing: while the receiver answers 503, commits take as
// long as they did before (the queue reads the WAL after the commit), and
// once it is back every sample arrives exactly once.
func TestOutageLosesNothing(t *testing.T) {
	db, f, _ := setup(t)
	rec := rwtest.New("")
	srv := httptest.NewServer(rec)
	defer srv.Close()
	if err := f.ApplyConfig(loadConfig(t, rwConfig(srv.URL, ""))); err != nil {
		t.Fatal(err)
	}
	series := []labels.Labels{
		labels.FromStrings("__name__", "a", "i", "1"),
		labels.FromStrings("__name__", "a", "i", "2"),
		labels.FromStrings("__name__", "b", "i", "1"),
	}
	t0 := time.Now().Add(time.Second).UnixMilli()
	commits := func(from, n int) ([]time.Duration, map[rwtest.Key]float64) {
		var lat []time.Duration
		all := map[rwtest.Key]float64{}
		for i := 0; i < n; i++ {
			start := time.Now()
			for k, v := range appendSeries(t, db, series, t0+int64(from+i)*100, 1, float64(from+i), metadata.Metadata{}) {
				all[k] = v
			}
			lat = append(lat, time.Since(start))
		}
		return lat, all
	}
	before, sent := commits(0, 100)
	waitCount(t, rec, 300, 20*time.Second)

	rec.Down.Store(true)
	// 2000 samples while down: far more than the queues hold in memory
	// (capacity 100 × 2 shards), so most of them wait in the WAL.
	during, sentDown := commits(100, 700)
	time.Sleep(time.Second) // let the queues retry against the closed door
	rec.Down.Store(false)
	for k, v := range sentDown {
		sent[k] = v
	}
	waitCount(t, rec, len(sent), 60*time.Second)
	checkExactlyOnce(t, rec, external(t, sent))

	p := func(d []time.Duration, q float64) time.Duration {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[int(q*float64(len(s)-1))]
	}
	t.Logf("commit latency before the outage p50 %s p99 %s max %s; during p50 %s p99 %s max %s",
		p(before, .5), p(before, .99), p(before, 1), p(during, .5), p(during, .99), p(during, 1))
	// A queue that made appends wait would hold the commits until the
	// receiver came back, which happens only after they all returned; the
	// bound only catches a commit stalled on a retry backoff, with room for
	// a loaded machine.
	if p(during, 1) > 2*time.Second {
		t.Fatalf("a commit took %s while the receiver was down", p(during, 1))
	}
}

// TestRestartNeitherResendsNorSkips: a clean stop sends everything, and the
// next process does not send it again although it is still in the WAL.
func TestRestartNeitherResendsNorSkips(t *testing.T) {
	dir := t.TempDir()
	rec := rwtest.New("")
	srv := httptest.NewServer(rec)
	defer srv.Close()
	series := []labels.Labels{labels.FromStrings("__name__", "a", "i", "1"), labels.FromStrings("__name__", "a", "i", "2")}
	sent := map[rwtest.Key]float64{}
	next := int64(0) // past the last run's samples: a run's are up to 3.9 s ahead
	for run := 0; run < 3; run++ {
		o := tsdb.DefaultOptions()
		o.Dir = dir
		o.NoLockfile = true
		db, err := tsdb.Open(o, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		fo := forward.DefaultOptions()
		fo.Dir = dir
		fo.FlushDeadline = 5 * time.Second
		fo.HeadMaxTime = func() int64 { return db.Head().MaxTime() }
		fo.Registerer = prometheus.NewRegistry()
		f, err := forward.New(fo)
		if err != nil {
			t.Fatal(err)
		}
		db.SetWriteNotified(f)
		if err := f.ApplyConfig(loadConfig(t, rwConfig(srv.URL, ""))); err != nil {
			t.Fatal(err)
		}
		// A run after a quick one would otherwise reuse a timestamp of the
		// previous run's (when their starts differ by a multiple of the
		// 100 ms step) with another value, which the TSDB refuses.
		t0 := max(time.Now().Add(200*time.Millisecond).UnixMilli(), next)
		next = t0 + 40*100
		// Commits up to the moment of the stop: nothing waits for the
		// receiver before Close.
		for k, v := range appendSeries(t, db, series, t0, 40, float64(run)*100, metadata.Metadata{}) {
			sent[k] = v
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		// Everything of this run was acknowledged before Close returned.
		if got, want := rec.Count(), len(sent); got != want {
			t.Fatalf("run %d: receiver has %d samples after a clean stop, want %d", run, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(sent) != 3*80 {
		t.Fatalf("BUG: %d samples sent, want %d", len(sent), 3*80)
	}
	checkExactlyOnce(t, rec, external(t, sent))
}
