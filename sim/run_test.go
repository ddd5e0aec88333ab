package sim

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// logRecorder is a slog.Handler that keeps every record.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}

// find returns the records with message msg and their int attribute attr.
func (h *logRecorder) find(msg, attr string) (n int, vals []int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.Message != msg {
			continue
		}
		n++
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == attr {
				vals = append(vals, a.Value.Int64())
			}
			return true
		})
	}
	return n, vals
}

// checkHeaders asserts what every remote-write request must carry.
func checkHeaders(t *testing.T, r *http.Request, proto string) {
	t.Helper()
	wantCT, wantVer := "application/x-protobuf;proto="+ProtoMsgV2, "2.0.0"
	if proto == ProtoMsgV1 {
		wantCT, wantVer = "application/x-protobuf", "0.1.0"
	}
	for h, want := range map[string]string{
		"Content-Type":                      wantCT,
		"Content-Encoding":                  "snappy",
		"X-Prometheus-Remote-Write-Version": wantVer,
	} {
		if got := r.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	if r.Method != http.MethodPost || r.URL.Path != "/api/v1/write" {
		t.Errorf("request %s %s, want POST /api/v1/write", r.Method, r.URL.Path)
	}
}

func TestRunRetriesAndDeliversEveryStep(t *testing.T) {
	for _, proto := range []string{ProtoMsgV2, ProtoMsgV1} {
		t.Run(proto, func(t *testing.T) { testRun(t, proto) })
	}
}

func testRun(t *testing.T, proto string) {
	const (
		interval      = 20 * time.Millisecond
		backfillSteps = 20
		wantSteps     = 40
	)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var (
		mu       sync.Mutex
		bodies   [][]byte // every body received, in order
		statuses []int
		// timestamps of every accepted sample, per series
		seen      = map[string][]int64{}
		runningTS = map[int64]bool{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		checkHeaders(t, r, proto)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("read body: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, body)
		if len(bodies) == 1 {
			statuses = append(statuses, http.StatusServiceUnavailable)
			http.Error(w, "warming up", http.StatusServiceUnavailable)
			return
		}
		var d decoded
		if proto == ProtoMsgV1 {
			d = decodeV1(t, body)
		} else {
			d = decodeV2(t, body)
		}
		for _, s := range d.series {
			k := s.Labels.String()
			for _, x := range s.Samples {
				seen[k] = append(seen[k], x.T)
				if s.Labels.Get(model.MetricNameLabel) == "vllm:num_requests_running" {
					runningTS[x.T] = true
				}
			}
		}
		statuses = append(statuses, http.StatusNoContent)
		w.WriteHeader(http.StatusNoContent)
		if len(runningTS) >= wantSteps {
			cancel()
		}
	}))
	defer srv.Close()

	logs := &logRecorder{}
	start := time.Now().Truncate(time.Millisecond)
	o := Options{
		URL:               srv.URL,
		Interval:          interval,
		Models:            []Model{queueModel(5)},
		InstancesPerModel: 1,
		Backfill:          backfillSteps * interval,
		Start:             start,
		BatchSamples:      600, // two steps of ~260 series per request
		ProtoMsg:          proto,
		Logger:            slog.New(logs),
	}
	s := mustNew(t, o)
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatal("server never saw enough steps")
	}

	mu.Lock()
	defer mu.Unlock()
	if len(bodies) < 3 || statuses[0] != http.StatusServiceUnavailable || !bytes.Equal(bodies[0], bodies[1]) {
		t.Fatalf("the batch refused with 503 was not resent unchanged (%d requests)", len(bodies))
	}
	if n, attempts := logs.find("remote write failed, retrying", "attempt"); n != 1 || attempts[0] != 1 {
		t.Errorf("retry logged %d times (attempts %v), want once", n, attempts)
	}
	// Every series advances one Interval per sample, from the first
	// backfill step on, with no step missing or repeated.
	first := start.Add(-backfillSteps * interval).UnixMilli()
	for k, ts := range seen {
		if ts[0] != first {
			t.Fatalf("%s: first sample at %d, want %d", k, ts[0], first)
		}
		for i := 1; i < len(ts); i++ {
			if ts[i]-ts[i-1] != interval.Milliseconds() {
				t.Fatalf("%s: samples %d and %d are %dms apart", k, i-1, i, ts[i]-ts[i-1])
			}
		}
	}
	if len(seen) != s.NumSeries() {
		t.Fatalf("server saw %d series, want %d", len(seen), s.NumSeries())
	}
}

func TestRunDropsRejectedBatchLoudly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var (
		mu sync.Mutex
		n  int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == 1 {
			http.Error(w, "out of bounds", http.StatusBadRequest)
			return
		}
		if n == 3 {
			cancel()
		}
	}))
	defer srv.Close()

	logs := &logRecorder{}
	s := mustNew(t, Options{
		URL: srv.URL, Interval: 10 * time.Millisecond,
		Models: []Model{queueModel(5)}, InstancesPerModel: 1,
		Logger: slog.New(logs),
	})
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatal("Run stopped sending after a 400")
	}
	got, samples := logs.find("remote write rejected, batch dropped", "samples")
	if got != 1 || samples[0] != int64(s.NumSeries()) {
		t.Fatalf("rejection logged %d times with samples %v, want once with %d", got, samples, s.NumSeries())
	}
	if retries, _ := logs.find("remote write failed, retrying", "attempt"); retries != 0 {
		t.Fatalf("a 400 was retried %d times", retries)
	}
}

func TestRunStopsWhileServerDown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusBadGateway)
	}))
	defer srv.Close()
	logs := &logRecorder{}
	s := mustNew(t, Options{
		URL: srv.URL, Interval: 10 * time.Millisecond,
		Models: []Model{queueModel(5)}, InstancesPerModel: 1,
		Logger: slog.New(logs),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Fatalf("Run took %v to notice cancellation", d)
	}
	// Backoff 100, 200 ms: at least two retries in 500 ms, each logged.
	if n, _ := logs.find("remote write failed, retrying", "attempt"); n < 2 {
		t.Fatalf("%d retries logged, want >= 2", n)
	}
	if n, unsent := logs.find("simulator stopped with steps unsent", "steps_unsent"); n != 1 || unsent[0] < 1 {
		t.Fatalf("unsent steps not reported: %d records, %v", n, unsent)
	}
}

func TestRunNeedsURL(t *testing.T) {
	s := mustNew(t, Options{})
	if err := s.Run(context.Background()); err == nil {
		t.Fatal("Run without URL returned nil")
	}
}

// flakyTransport fails the first fails round trips as a refused connection
// would, then passes requests on.
type flakyTransport struct {
	mu    sync.Mutex
	fails int
	calls int
}

func (f *flakyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.calls++
	fail := f.calls <= f.fails
	f.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestRunRetriesConnectionErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var first []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first, _ = io.ReadAll(r.Body)
		cancel()
	}))
	defer srv.Close()
	tr := &flakyTransport{fails: 2}
	logs := &logRecorder{}
	s := mustNew(t, Options{
		URL: srv.URL, Interval: 10 * time.Millisecond,
		Models: []Model{queueModel(5)}, InstancesPerModel: 1,
		Client: &http.Client{Transport: tr}, Logger: slog.New(logs),
	})
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if first == nil {
		t.Fatal("nothing arrived after the connection came back")
	}
	if n, attempts := logs.find("remote write failed, retrying", "attempt"); n != 2 || attempts[1] != 2 {
		t.Fatalf("retries logged %d times (attempts %v), want 2", n, attempts)
	}
	// The body that finally arrived holds the first step.
	d := decodeV2(t, first)
	if len(d.series) != s.NumSeries() || len(d.series[0].Samples) != 1 {
		t.Fatalf("arrived body has %d series", len(d.series))
	}
}
