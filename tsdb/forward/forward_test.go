package forward_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/internal/rwtest"
	"github.com/tailroot/tailroot/tsdb"
	"github.com/tailroot/tailroot/tsdb/forward"
)

// setup opens a TSDB and a forwarder over its WAL, wired as serve wires them.
func setup(t testing.TB) (*tsdb.DB, *forward.Forwarder, *prometheus.Registry) {
	t.Helper()
	return setupWith(t, 5*time.Second, 0)
}

// setupWith is setup with the given flush deadline and drain timeout.
func setupWith(t testing.TB, flush, drain time.Duration) (*tsdb.DB, *forward.Forwarder, *prometheus.Registry) {
	t.Helper()
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	o.NoLockfile = true
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	fo := forward.DefaultOptions()
	fo.Dir = db.Dir()
	fo.FlushDeadline = flush
	fo.DrainTimeout = drain
	fo.HeadMaxTime = func() int64 { return db.Head().MaxTime() }
	fo.Registerer = reg
	f, err := forward.New(fo)
	if err != nil {
		t.Fatal(err)
	}
	db.SetWriteNotified(f)
	t.Cleanup(func() {
		_ = f.Close()
		_ = db.Close()
	})
	return db, f, reg
}

func loadConfig(t testing.TB, yaml string) *config.Config {
	t.Helper()
	c, err := config.Load(yaml, nil)
	if err != nil {
		t.Fatalf("load config: %v\n%s", err, yaml)
	}
	return c
}

// appendSeries appends n samples to each series j, value base+1e6*j+i at
// t0+100i ms, one commit per i, and returns the samples keyed as the
// recorder keys them. Values are unique per sample when bases differ by
// at least n.
func appendSeries(t *testing.T, db *tsdb.DB, series []labels.Labels, t0 int64, n int, base float64, md metadata.Metadata) map[rwtest.Key]float64 {
	t.Helper()
	want := map[rwtest.Key]float64{}
	for i := 0; i < n; i++ {
		app := db.AppenderV2(context.Background())
		for j, ls := range series {
			ts := t0 + int64(i)*100
			v := base + 1e6*float64(j) + float64(i)
			if _, err := app.Append(0, ls, 0, ts, v, nil, nil, storage.AOptions{Metadata: md, MetricFamilyName: ls.Get("__name__")}); err != nil {
				t.Fatal(err)
			}
			want[rwtest.Key{Series: ls.String(), T: ts}] = v
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return want
}

func waitCount(t *testing.T, r *rwtest.Recorder, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for r.Count() < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := r.Count(); got < n {
		t.Fatalf("receiver has %d of %d samples after %s", got, n, within)
	}
}

// withLabel is ls with name=value added (as external labels are added:
// only where ls lacks name).
func withLabel(ls labels.Labels, name, value string) labels.Labels {
	b := labels.NewBuilder(ls)
	if ls.Get(name) == "" {
		b.Set(name, value)
	}
	return b.Labels()
}

func TestForwardEverySampleWithExternalLabelsRelabelAndHeaders(t *testing.T) {
	db, f, reg := setup(t)
	rec := rwtest.New("")
	srv := httptest.NewServer(rec)
	defer srv.Close()
	cfg := loadConfig(t, fmt.Sprintf(`
global:
  external_labels: {cluster: eu1, replica: a}
remote_write:
  - url: %s/api/v1/write
    name: recv
    headers: {THANOS-TENANT: team-a}
    queue_config: {batch_send_deadline: 50ms, max_samples_per_send: 7, min_backoff: 10ms, max_backoff: 50ms}
    write_relabel_configs:
      - source_labels: [__name__]
        regex: dropped_.*
        action: drop
`, srv.URL))
	if err := f.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	series := []labels.Labels{
		labels.FromStrings("__name__", "tok_latency_seconds", "model", "m1"),
		labels.FromStrings("__name__", "tok_latency_seconds", "model", "m2", "cluster", "own"),
		labels.FromStrings("__name__", "dropped_series", "model", "m1"),
	}
	// The watcher forwards samples stamped after it started; stamp ahead.
	t0 := time.Now().Add(time.Second).UnixMilli()
	sent := appendSeries(t, db, series, t0, 50, 0, metadata.Metadata{})
	want := map[rwtest.Key]float64{}
	for k, v := range sent {
		ls, err := parseSeries(k.Series)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(ls.Get("__name__"), "dropped_") {
			continue
		}
		ext := withLabel(withLabel(ls, "cluster", "eu1"), "replica", "a")
		want[rwtest.Key{Series: ext.String(), T: k.T}] = v
	}
	if len(want) != 100 {
		t.Fatalf("BUG: want %d samples, expected 100", len(want))
	}
	start := time.Now()
	waitCount(t, rec, len(want), 20*time.Second)
	t.Logf("all %d samples arrived %s after the last commit", len(want), time.Since(start))
	checkExactlyOnce(t, rec, want)
	for _, h := range rec.Headers() {
		if got := h.Get("THANOS-TENANT"); got != "team-a" {
			t.Fatalf("THANOS-TENANT header %q, want team-a", got)
		}
	}
	if got := testutil.ToFloat64(mustCounter(t, reg, "prometheus_remote_storage_samples_total")); got < 100 {
		t.Errorf("prometheus_remote_storage_samples_total = %v, want ≥ 100", got)
	}
}

func parseSeries(s string) (labels.Labels, error) {
	// labels.String is {__name__="x", a="b"}; the test series have no
	// commas or quotes inside values.
	s = strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
	var kv []string
	for _, p := range strings.Split(s, ", ") {
		n, v, ok := strings.Cut(p, "=")
		if !ok {
			return labels.EmptyLabels(), fmt.Errorf("bad pair %q", p)
		}
		kv = append(kv, n, strings.Trim(v, `"`))
	}
	return labels.FromStrings(kv...), nil
}

// checkExactlyOnce fails unless the receiver acknowledged exactly the
// wanted samples, each once and with its value.
func checkExactlyOnce(t *testing.T, rec *rwtest.Recorder, want map[rwtest.Key]float64) {
	t.Helper()
	acks, vals := rec.Acks()
	var missing, dup, wrong, extra int
	for k, v := range want {
		switch n := acks[k]; {
		case n == 0:
			missing++
		case n > 1:
			dup++
		case vals[k] != v:
			wrong++
		}
	}
	for k := range acks {
		if _, ok := want[k]; !ok {
			extra++
			if extra <= 3 {
				t.Logf("unexpected sample %v", k)
			}
		}
	}
	if missing+dup+wrong+extra > 0 {
		t.Fatalf("of %d samples: %d missing, %d acknowledged more than once, %d with a wrong value, %d unexpected", len(want), missing, dup, wrong, extra)
	}
}

func mustCounter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	found := false
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		found = true
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	if !found {
		t.Fatalf("metric %s is not registered", name)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "sum"})
	c.Add(sum)
	return c
}
