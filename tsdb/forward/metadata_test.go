package forward_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/internal/rwtest"
)

// TestMetadata: a remote write 2.0 queue sends each series' metadata from
// the WAL; a 1.0 queue, whose metadata Prometheus takes from scrape targets,
// sends none and keeps running (its metadata watcher ticks every 50ms here).
func TestMetadata(t *testing.T) {
	db, f, _ := setup(t)
	r1, r2 := rwtest.New(""), rwtest.New("")
	s1, s2 := httptest.NewServer(r1), httptest.NewServer(r2)
	defer s1.Close()
	defer s2.Close()
	q := `queue_config: {batch_send_deadline: 50ms, min_backoff: 10ms, max_backoff: 50ms}`
	cfg := loadConfig(t, fmt.Sprintf(`remote_write:
  - url: %s
    %s
    metadata_config: {send: true, send_interval: 50ms}
  - url: %s
    protobuf_message: io.prometheus.write.v2.Request
    %s
`, s1.URL, q, s2.URL, q))
	if err := f.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	md := metadata.Metadata{Type: model.MetricTypeCounter, Help: "Requests served.", Unit: "requests"}
	series := []labels.Labels{labels.FromStrings("__name__", "served_requests_total", "i", "1")}
	appendSeries(t, db, series, time.Now().Add(time.Second).UnixMilli(), 5, 0, md)
	waitCount(t, r1, 5, 20*time.Second)
	waitCount(t, r2, 5, 20*time.Second)
	time.Sleep(300 * time.Millisecond)
	want := rwtest.Metadata{Type: "counter", Help: "Requests served.", Unit: "requests"}
	if got := r2.Metadata()["served_requests_total"]; got != want {
		t.Errorf("remote write 2.0 metadata %+v, want %+v", got, want)
	}
	if got := r1.Metadata(); len(got) != 0 {
		t.Errorf("remote write 1.0 sent metadata %+v; tailroot has no scrape cache to send it from", got)
	}
}

// TestExemplars: with send_exemplars, exemplars stored with the samples
// are forwarded over both protocols.
func TestExemplars(t *testing.T) {
	db, f, _ := setup(t)
	r1, r2 := rwtest.New(""), rwtest.New("")
	s1, s2 := httptest.NewServer(r1), httptest.NewServer(r2)
	defer s1.Close()
	defer s2.Close()
	q := `queue_config: {batch_send_deadline: 50ms, min_backoff: 10ms, max_backoff: 50ms}`
	cfg := loadConfig(t, fmt.Sprintf(`remote_write:
  - url: %s
    send_exemplars: true
    %s
  - url: %s
    protobuf_message: io.prometheus.write.v2.Request
    send_exemplars: true
    %s
`, s1.URL, q, s2.URL, q))
	if err := f.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	ls := labels.FromStrings("__name__", "ttft_seconds", "i", "1")
	t0 := time.Now().Add(time.Second).UnixMilli()
	want := map[rwtest.Key]float64{}
	for i := 0; i < 5; i++ {
		ts := t0 + int64(i)*100
		app := db.AppenderV2(context.Background())
		ex := []exemplar.Exemplar{{Labels: labels.FromStrings("trace_id", fmt.Sprintf("%032x", i+1)), Value: 0.25 + float64(i), Ts: ts, HasTs: true}}
		if _, err := app.Append(0, ls, 0, ts, float64(i), nil, nil, storage.AOptions{Exemplars: ex}); err != nil {
			t.Fatal(err)
		}
		if err := app.Commit(); err != nil {
			t.Fatal(err)
		}
		want[rwtest.Key{Series: ls.String(), T: ts}] = 0.25 + float64(i)
	}
	waitCount(t, r1, 5, 20*time.Second)
	waitCount(t, r2, 5, 20*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for name, r := range map[string]*rwtest.Recorder{"v1": r1, "v2": r2} {
		for len(r.Exemplars()) < len(want) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		got := r.Exemplars()
		if len(got) != len(want) {
			t.Fatalf("%s: %d exemplars forwarded, want %d: %v", name, len(got), len(want), got)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: exemplar at %v = %v, want %v", name, k, got[k], v)
			}
		}
	}
}
