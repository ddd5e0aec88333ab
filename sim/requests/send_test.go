package requests

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// collector is a fake server that counts the requests it receives, and
// fails the first failFirst posts with 503.
type collector struct {
	mu        sync.Mutex
	lines     int
	spans     int
	posts     int
	failFirst int
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.posts++
	if c.posts <= c.failFirst {
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	switch r.URL.Path {
	case "/api/v1/requests":
		if r.Header.Get("Content-Encoding") != "gzip" {
			http.Error(w, "want gzip", http.StatusBadRequest)
			return
		}
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sc := bufio.NewScanner(zr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			c.lines++
		}
	case "/v1/traces":
		b, _ := io.ReadAll(r.Body)
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.spans += req.Traces().SpanCount()
	default:
		http.NotFound(w, r)
	}
}

func (c *collector) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines, c.spans
}

func TestSender(t *testing.T) {
	c := &collector{}
	srv := httptest.NewServer(c)
	defer srv.Close()
	reqs, err := Simulate(Options{Trace: "azure-conv", Limit: 120, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	s := &Sender{URL: srv.URL, BatchSize: 50}
	if err := s.PushNDJSON(context.Background(), reqs[:70]); err != nil {
		t.Fatal(err)
	}
	if err := s.PushSpans(context.Background(), reqs[70:]); err != nil {
		t.Fatal(err)
	}
	if lines, spans := c.counts(); lines != 70 || spans != 50 || c.posts != 3 {
		t.Errorf("%d lines, %d spans in %d posts; want 70, 50 in 3", lines, spans, c.posts)
	}
	bad := &Sender{URL: srv.URL + "/nope"}
	if err := bad.PushSpans(context.Background(), reqs[:1]); err == nil {
		t.Error("404 not reported")
	}
}

// TestRun replays a short trace whose requests have all finished (the
// backfill covers it) and retries through two 503s: every request arrives
// once, half as lines and half as spans.
func TestRun(t *testing.T) {
	c := &collector{failFirst: 2}
	srv := httptest.NewServer(c)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RunOptions{
			Options:  Options{Trace: "azure-conv", Limit: 200, Seed: 2},
			URL:      srv.URL,
			Interval: 50 * time.Millisecond,
			Backfill: time.Hour,
		})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		lines, spans := c.counts()
		if lines+spans == 200 {
			if lines != 100 || spans != 100 {
				t.Errorf("%d lines and %d spans, want 100 each", lines, spans)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: %d lines, %d spans of 200", lines, spans)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
}
