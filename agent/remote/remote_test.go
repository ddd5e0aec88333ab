package remote

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tailroot/tailroot/agent/queue"
	"github.com/tailroot/tailroot/agent/rw"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		status int
		want   Outcome
	}{
		{200, Delivered},
		{204, Delivered},
		{400, Rejected},
		{401, Rejected},
		{404, Rejected},
		{413, Rejected},
		{415, Rejected},
		{408, Retry},
		{429, Retry},
		{500, Retry},
		{502, Retry},
		{503, Retry},
		{302, Retry},
	} {
		if got := Classify(c.status); got != c.want {
			t.Errorf("Classify(%d) = %v, want %v", c.status, got, c.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{" 120 ", 2 * time.Minute},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{"Sat, 01 Mar 2025 12:00:30 GMT", 30 * time.Second},
		{"Sat, 01 Mar 2025 11:59:00 GMT", 0}, // in the past
	} {
		if got := RetryAfter(c.v, now); got != c.want {
			t.Errorf("RetryAfter(%q) = %v, want %v", c.v, got, c.want)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	lo := Backoff{Min: 250 * time.Millisecond, Max: 30 * time.Second, Rand: func() float64 { return 0 }}
	hi := lo
	hi.Rand = func() float64 { return 1 }
	// Attempt n waits between d/2 and d with d = min(30s, 250ms·2^(n-1)):
	// n=1: 125-250ms; n=5: d=4s, 2-4s; n=8: d=32s capped to 30s, 15-30s.
	for _, c := range []struct {
		n      int
		lo, hi time.Duration
	}{
		{1, 125 * time.Millisecond, 250 * time.Millisecond},
		{5, 2 * time.Second, 4 * time.Second},
		{8, 15 * time.Second, 30 * time.Second},
		{50, 15 * time.Second, 30 * time.Second},
	} {
		if got := lo.Delay(c.n); got != c.lo {
			t.Errorf("Delay(%d) low end = %v, want %v", c.n, got, c.lo)
		}
		if got := hi.Delay(c.n); got != c.hi {
			t.Errorf("Delay(%d) high end = %v, want %v", c.n, got, c.hi)
		}
	}
}

// script answers requests with a fixed list of statuses and records bodies.
type script struct {
	mu       sync.Mutex
	statuses []int
	headers  []http.Header
	bodies   [][]byte
	reqHdrs  []http.Header
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	i := len(s.bodies)
	s.bodies = append(s.bodies, b)
	s.reqHdrs = append(s.reqHdrs, r.Header.Clone())
	status := http.StatusNoContent
	if i < len(s.statuses) {
		status = s.statuses[i]
		for k, v := range s.headers[i] {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(status)
	if status >= 300 {
		io.WriteString(w, "scripted failure")
	}
}

func newShipper(t *testing.T, url string) (*Shipper, *queue.Queue, *[]time.Duration) {
	t.Helper()
	q, err := queue.Open(t.TempDir(), queue.Options{Fsync: queue.FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	c, err := NewClient(Options{URL: url, Timeout: 5 * time.Second, Headers: map[string]string{"X-Scope-OrgID": "team-a"}})
	if err != nil {
		t.Fatal(err)
	}
	s := NewShipper(q, c, ShipperOptions{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	waits := &[]time.Duration{}
	s.sleep = func(ctx context.Context, d time.Duration) error {
		*waits = append(*waits, d)
		return ctx.Err()
	}
	return s, q, waits
}

func runUntilDrained(t *testing.T, s *Shipper, q *queue.Queue) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for q.Stats().Pending > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p := q.Stats().Pending; p != 0 {
		t.Fatalf("%d records still pending", p)
	}
}

func TestShipperRetriesThenDelivers(t *testing.T) {
	sc := &script{
		statuses: []int{503, 500, 429},
		headers:  []http.Header{{"Retry-After": {"3"}}, {}, {"Retry-After": {"1"}}},
	}
	srv := httptest.NewServer(sc)
	defer srv.Close()
	s, q, waits := newShipper(t, srv.URL)
	q.Append([]byte("first"))
	q.Append([]byte("second"))
	runUntilDrained(t, s, q)

	// 503 + Retry-After 3 s, then 500 without it (backoff attempt 2:
	// d = 200ms, wait in [100ms, 200ms]), then 429 + Retry-After 1 s.
	if len(*waits) != 3 || (*waits)[0] != 3*time.Second || (*waits)[2] != time.Second ||
		(*waits)[1] < 100*time.Millisecond || (*waits)[1] > 200*time.Millisecond {
		t.Fatalf("waits %v, want [3s, 100-200ms, 1s]", *waits)
	}
	want := []string{"first", "first", "first", "first", "second"}
	if len(sc.bodies) != len(want) {
		t.Fatalf("%d requests, want %d", len(sc.bodies), len(want))
	}
	for i, w := range want {
		if string(sc.bodies[i]) != w {
			t.Errorf("request %d carried %q, want %q", i, sc.bodies[i], w)
		}
	}
	h := sc.reqHdrs[0]
	if h.Get("Content-Type") != rw.ContentType || h.Get("Content-Encoding") != "snappy" ||
		h.Get("X-Prometheus-Remote-Write-Version") != "2.0.0" || h.Get("X-Scope-OrgID") != "team-a" {
		t.Errorf("request headers %v", h)
	}
}

func TestShipperDropsRejected(t *testing.T) {
	sc := &script{statuses: []int{400, 413}, headers: []http.Header{{}, {}}}
	srv := httptest.NewServer(sc)
	defer srv.Close()
	s, q, waits := newShipper(t, srv.URL)
	for _, r := range []string{"bad", "huge", "good"} {
		q.Append([]byte(r))
	}
	runUntilDrained(t, s, q)
	if len(*waits) != 0 {
		t.Fatalf("rejected data was retried: waits %v", *waits)
	}
	if len(sc.bodies) != 3 || !bytes.Equal(sc.bodies[2], []byte("good")) {
		t.Fatalf("bodies %q", sc.bodies)
	}
}

func TestShipperConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens any more
	s, q, waits := newShipper(t, url)
	q.Append([]byte("x"))
	ctx, cancel := context.WithCancel(context.Background())
	s.sleep = func(ctx context.Context, d time.Duration) error {
		*waits = append(*waits, d)
		if len(*waits) == 6 {
			cancel()
		}
		return ctx.Err()
	}
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	// Attempts 1..6: d = 100, 200, 400, 800, 1000 (cap), 1000 ms; each wait
	// in [d/2, d].
	caps := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range *waits {
		d := caps[i] * time.Millisecond
		if w < d/2 || w > d {
			t.Errorf("wait %d = %v, want within [%v, %v]", i+1, w, d/2, d)
		}
	}
	if q.Stats().Pending != 1 {
		t.Fatal("undelivered record was acknowledged")
	}
}

func TestNewClientErrors(t *testing.T) {
	for _, u := range []string{"", "tailroot:9490", "ftp://x"} {
		if _, err := NewClient(Options{URL: u}); err == nil {
			t.Errorf("url %q accepted", u)
		}
	}
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"", "5", "Sat, 01 Mar 2025 12:00:30 GMT", "-1", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		if d := RetryAfter(s, now); d < 0 {
			t.Fatalf("negative delay %v for %q", d, s)
		}
	})
}
