package inflight

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLeaseBudget(t *testing.T) {
	l := New(Options{MaxBytes: 100})
	a, b := &Lease{l: l}, &Lease{l: l}
	if err := a.Grow(60); err != nil {
		t.Fatal(err)
	}
	var e *Error
	if err := b.Grow(50); !errors.As(err, &e) || e.Status != http.StatusServiceUnavailable || e.Limit != "ingest.max-inflight-bytes" {
		t.Fatalf("b.Grow(50) with 60 of 100 used = %v, want 503", err)
	}
	if err := b.Grow(101); !errors.As(err, &e) || e.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("b.Grow(101) = %v, want 413: it can never fit", err)
	}
	if err := b.Grow(40); err != nil {
		t.Fatal(err)
	}
	if got := l.InUse(); got != 100 {
		t.Fatalf("in use %d, want 100", got)
	}
	a.release()
	b.release()
	if got := l.InUse(); got != 0 {
		t.Fatalf("in use %d after release, want 0", got)
	}
	var nilLease *Lease
	if err := nilLease.Grow(1 << 40); err != nil {
		t.Fatal("a nil lease refused")
	}
}

// TestReadAllGzipBomb decodes 256 MiB of zeros from a ~250 KB gzip body
// under a 16 MiB budget: the read is refused, and what it allocated stays
// near the budget, not near the bomb.
func TestReadAllGzipBomb(t *testing.T) {
	var zb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zb, gzip.BestCompression)
	chunk := make([]byte, 1<<20)
	for range 256 {
		_, _ = zw.Write(chunk)
	}
	_ = zw.Close()
	l := New(Options{MaxBytes: 16 << 20})
	lease := &Lease{l: l}
	zr, err := gzip.NewReader(bytes.NewReader(zb.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = ReadAll(zr, lease, 1<<30)
	runtime.ReadMemStats(&after)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("bomb of %d bytes read under a 16 MiB budget: err = %v", zb.Len(), err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 40<<20 {
		t.Fatalf("allocated %d MiB for a refused read under a 16 MiB budget", alloc>>20)
	}
	if lease.held > 16<<20 {
		t.Fatalf("lease holds %d bytes, over its budget", lease.held)
	}
	// Within the limit it reads everything, and only says it is over the
	// limit by returning limit+1 bytes.
	out, err := ReadAll(strings.NewReader("hello world"), nil, 5)
	if err != nil || string(out) != "hello " {
		t.Fatalf("ReadAll over the limit = %q, %v", out, err)
	}
	out, err = ReadAll(strings.NewReader("hello"), nil, 5)
	if err != nil || string(out) != "hello" {
		t.Fatalf("ReadAll at the limit = %q, %v", out, err)
	}
}

func TestHandlerConcurrency(t *testing.T) {
	l := New(Options{MaxConcurrent: 1, MaxWait: 50 * time.Millisecond, MaxBytes: 1 << 20})
	entered, unblock := make(chan struct{}), make(chan struct{})
	h := l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			Refuse(w, err)
			return
		}
		if r.URL.Path == "/block" {
			close(entered)
			<-unblock
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/block", strings.NewReader("x")))
	}()
	<-entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x")))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "ingest.max-concurrent=1") {
		t.Fatalf("second request while the only slot is taken: %d %q %q", rec.Code, rec.Header(), rec.Body)
	}
	close(unblock)
	wg.Wait()
	if l.InUse() != 0 {
		t.Fatalf("%d bytes still leased after both requests", l.InUse())
	}
	// A body over the whole budget is refused with 413 while it is read.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(make([]byte, 2<<20))))
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "ingest.max-inflight-bytes=1MiB") {
		t.Fatalf("2 MiB body under a 1 MiB budget: %d %q", rec.Code, rec.Body)
	}
}
