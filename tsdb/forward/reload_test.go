package forward_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"

	"github.com/tailroot/tailroot/internal/rwtest"
)

// TestApplyConfigReload: a reload that changes the external labels and adds
// an endpoint restarts the queues with the new labels; one that removes an
// endpoint stops sending to it.
func TestApplyConfigReload(t *testing.T) {
	db, f, _ := setup(t)
	recA, recB := rwtest.New(""), rwtest.New("")
	srvA, srvB := httptest.NewServer(recA), httptest.NewServer(recB)
	defer srvA.Close()
	defer srvB.Close()
	q := `queue_config: {batch_send_deadline: 50ms, min_backoff: 10ms, max_backoff: 50ms}`
	cfg := func(ext string, urls ...string) string {
		s := fmt.Sprintf("global:\n  external_labels: {site: %s}\nremote_write:\n", ext)
		for _, u := range urls {
			s += fmt.Sprintf("  - url: %s\n    %s\n", u, q)
		}
		return s
	}
	series := []labels.Labels{labels.FromStrings("__name__", "m", "i", "1")}
	// A restarted queue re-reads the WAL segment in progress and sends what
	// is stamped after its start: let every sample written so far be in the
	// past before a reload, and stamp new ones after it.
	var last int64
	apply := func(y string) {
		t.Helper()
		time.Sleep(time.Until(time.UnixMilli(last + 50)))
		if err := f.ApplyConfig(loadConfig(t, y)); err != nil {
			t.Fatal(err)
		}
	}
	write := func(base float64) {
		t.Helper()
		t0 := time.Now().Add(200 * time.Millisecond).UnixMilli()
		appendSeries(t, db, series, t0, 10, base, metadata.Metadata{})
		last = t0 + 900
	}
	siteOf := func(rec *rwtest.Recorder) map[string]int {
		acks, _ := rec.Acks()
		n := map[string]int{}
		for k := range acks {
			ls, err := parseSeries(k.Series)
			if err != nil {
				t.Fatal(err)
			}
			n[ls.Get("site")]++
		}
		return n
	}

	apply(cfg("one", srvA.URL))
	write(0)
	waitCount(t, recA, 10, 20*time.Second)

	apply(cfg("two", srvA.URL, srvB.URL))
	write(100)
	waitCount(t, recA, 20, 20*time.Second)
	waitCount(t, recB, 10, 20*time.Second)
	if got := siteOf(recA); got["one"] != 10 || got["two"] != 10 {
		t.Fatalf("endpoint A got samples by site %v, want one:10 two:10", got)
	}
	if got := siteOf(recB); got["two"] != 10 || len(got) != 1 {
		t.Fatalf("endpoint B got samples by site %v, want two:10", got)
	}

	apply(cfg("two", srvB.URL))
	write(200)
	waitCount(t, recB, 20, 20*time.Second)
	time.Sleep(300 * time.Millisecond)
	if got := recA.Count(); got != 20 {
		t.Fatalf("endpoint A removed from the config still got samples: %d, want 20", got)
	}

	// A refused reload leaves the queues in force running and tracked.
	time.Sleep(time.Until(time.UnixMilli(last + 50)))
	err := f.ApplyConfig(loadConfig(t, cfg("two", srvB.URL, srvB.URL)))
	if err == nil || !strings.Contains(err.Error(), "duplicate") {
		t.Fatalf("duplicate remote_write entries: error %v, want one saying duplicate", err)
	}
	// Tracked, it is woken at once; an orphan would wait for its watcher's
	// own 15s read timeout.
	write(300)
	waitCount(t, recB, 30, 5*time.Second)
}

// TestCloseDrainsWithoutWaitingForDroppedSamples: when relabelling drops
// the newest samples, a stop still ends as soon as the queue is idle (not
// after the drain timeout), and the kept samples appended just before it
// are delivered.
func TestCloseDrainsWithoutWaitingForDroppedSamples(t *testing.T) {
	db, f, _ := setupWith(t, 30*time.Second, 0)
	rec := rwtest.New("")
	srv := httptest.NewServer(rec)
	defer srv.Close()
	if err := f.ApplyConfig(loadConfig(t, `remote_write:
  - url: `+srv.URL+`
    write_relabel_configs: [{source_labels: [__name__], regex: dropped, action: drop}]
`)); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(time.Second).UnixMilli()
	appendSeries(t, db, []labels.Labels{labels.FromStrings("__name__", "kept")}, t0, 20, 0, metadata.Metadata{})
	appendSeries(t, db, []labels.Labels{labels.FromStrings("__name__", "dropped")}, t0+10_000, 20, 0, metadata.Metadata{})
	start := time.Now()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("Close took %s", took)
	// Waiting for the dropped samples would take the drain timeout (30s);
	// waiting for the pending batch, its deadline (the default 5s). The stop
	// sends the batch itself.
	if took > 4*time.Second {
		t.Fatalf("Close took %s; it waited for samples relabelling dropped or for the batch deadline", took)
	}
	if got := rec.Count(); got != 20 {
		t.Fatalf("receiver has %d samples after Close, want the 20 kept ones", got)
	}
}
