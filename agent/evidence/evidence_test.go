package evidence

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailroot/tailroot/agent/symbolize"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestTimelineKeepsSlowest(t *testing.T) {
	tl := NewTimeline(5, 10)
	tl.Info = func(pid uint32) Process { return Process{Comm: "python3"} }
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	// 100 calls of 1..100 ms, offered in random order; call i starts at
	// base + i s, so the kept ones (96..100 ms) come out in that order.
	for _, i := range rand.Perm(100) {
		d := i + 1
		tl.Add(42, Call{TID: 7, Symbol: "cudaStreamSynchronize", Start: base.Add(time.Duration(d) * time.Second), Duration: float64(d) / 1000})
	}
	items, dropped := tl.Drain(base.Add(time.Hour), "n1")
	if dropped != 0 || len(items) != 1 {
		t.Fatalf("%d items, %d dropped", len(items), dropped)
	}
	e := items[0]
	if e.Seen != 100 || e.Latency != 0.1 || e.Comm != "python3" || e.Kind != KindCUDATimeline || len(e.Calls) != 5 {
		t.Fatalf("item %+v", e)
	}
	for j, c := range e.Calls {
		if want := float64(96+j) / 1000; c.Duration != want {
			t.Errorf("call %d: duration %v, want %v", j, c.Duration, want)
		}
	}
	if items, _ := tl.Drain(base, "n1"); len(items) != 0 {
		t.Fatal("Drain did not start a new interval")
	}
}

func TestTimelineBoundsProcesses(t *testing.T) {
	tl := NewTimeline(2, 2)
	for pid := uint32(1); pid <= 4; pid++ {
		for range 3 {
			tl.Add(pid, Call{Duration: 0.001})
		}
	}
	items, dropped := tl.Drain(time.Now(), "n")
	// Processes 1 and 2 are kept with 2 calls each; the 6 calls of 3 and 4
	// are counted as dropped.
	if len(items) != 2 || dropped != 6 || len(items[0].Calls) != 2 || items[1].Seen != 3 {
		t.Fatalf("items %+v, dropped %d", items, dropped)
	}
}

func goldenBatch() Batch {
	at := time.Date(2025, 3, 1, 12, 0, 10, 0, time.UTC)
	return Batch{Node: "gpu-node-7", Evidence: []Evidence{
		{
			Kind: KindCUDATimeline, Time: at, Node: "gpu-node-7", PID: 4242, Comm: "python3",
			ContainerID: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", PodUID: "6b1f2c3d-1111-2222-3333-444455556666",
			Probe: "cuda", Latency: 0.0123, Seen: 1800, Frames: []Frame{},
			Calls: []Call{
				{TID: 4250, Symbol: "cudaLaunchKernel", Start: at.Add(-3 * time.Second), Duration: 0.0004, Stream: "0x7f3a10000000"},
				{TID: 4250, Symbol: "cudaDeviceSynchronize", Start: at.Add(-2 * time.Second), Duration: 0.0123},
			},
		},
		{
			Kind: KindStack, Time: at, Node: "gpu-node-7", PID: 4242, TID: 4250, Comm: "python3", Probe: "syscalls", Detail: "futex",
			Start: at.Add(-6500 * time.Millisecond), Latency: 0.0051,
			Frames: FromSymbolized([]symbolize.Frame{
				{Address: 0x7f3a2b3c4d5e, Module: "/usr/lib/x86_64-linux-gnu/libc.so.6", Function: "__futex_abstimed_wait_common", Offset: 0x3e},
				{Address: 0x55d0c0ffee00, Module: "/usr/bin/python3.11"},
			}),
		},
	}}
}

func TestGoldenJSON(t *testing.T) {
	got, err := json.MarshalIndent(goldenBatch(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	const path = "testdata/batch.golden.json"
	if *update {
		os.WriteFile(path, got, 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("JSON contract changed; if intended, update EVIDENCE.md and run with -update\ngot:\n%s", got)
	}
}

func TestClientPost(t *testing.T) {
	var got Batch
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // retried once
			return
		}
		if r.Header.Get("Content-Type") != "application/json" || r.Method != http.MethodPost {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &got)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL + "/api/v1/evidence"}
	want := goldenBatch()
	if err := c.Post(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	if hits.Load() != 2 {
		t.Fatalf("%d requests, want 2", hits.Load())
	}
	if len(got.Evidence) != 2 || got.Evidence[0].Calls[1].Symbol != "cudaDeviceSynchronize" ||
		got.Evidence[1].Frames[0].Address != "0x7f3a2b3c4d5e" || !got.Evidence[0].Time.Equal(want.Evidence[0].Time) {
		t.Fatalf("server decoded %+v", got)
	}
}

func TestClientNotServed(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	c := &Client{URL: srv.URL + "/api/v1/evidence"}
	if err := c.Post(context.Background(), goldenBatch()); !errors.Is(err, ErrNotServed) {
		t.Fatalf("404: %v, want ErrNotServed", err)
	}
	var hits atomic.Int32
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "bad evidence", http.StatusBadRequest)
	}))
	defer bad.Close()
	c.URL = bad.URL
	if err := c.Post(context.Background(), goldenBatch()); err == nil || hits.Load() != 1 {
		t.Fatalf("400: %v after %d requests, want an error after 1", err, hits.Load())
	}
	if err := c.Post(context.Background(), Batch{}); err != nil || hits.Load() != 1 {
		t.Fatal("empty batch was sent")
	}
}

func TestHex(t *testing.T) {
	for v, want := range map[uint64]string{0: "0x0", 1: "0x1", 0xdeadbeef: "0xdeadbeef", 1<<64 - 1: "0xffffffffffffffff"} {
		if got := hex(v); got != want {
			t.Errorf("hex(%d) = %s, want %s", v, got, want)
		}
	}
}
