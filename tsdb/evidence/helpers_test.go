package evidence

import (
	"encoding/json"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// stackItem is a stack of pid whose event began at start and lasted lat.
func stackItem(node string, pid uint32, comm string, start time.Time, lat float64) Item {
	return Item{
		Kind: KindStack, Time: start.Add(10 * time.Second).Truncate(10 * time.Second), Node: node, PID: pid, TID: pid,
		Comm: comm, Probe: "offcpu", Start: start, Latency: lat,
		Frames: []Frame{
			{Address: "0xffffffff81a0b2c3", Module: "[kernel]", Function: "schedule", Offset: 0x33},
			{Address: "0x55d0c0ffee10", Module: "/usr/bin/slowpath", Function: "slow_path_sleep", Offset: 0x1d},
			{Address: "0x55d0c0ffef00"},
		},
	}
}

// timelineItem has calls at the given offsets from base, 10 ms each.
func timelineItem(node string, pid uint32, base time.Time, offs ...time.Duration) Item {
	it := Item{Kind: KindCUDATimeline, Time: base.Add(10 * time.Second), Node: node, PID: pid, Comm: "python3", Probe: "cuda", Frames: []Frame{}, Seen: 100}
	for _, o := range offs {
		it.Calls = append(it.Calls, Call{TID: pid + 1, Symbol: "cudaStreamSynchronize", Start: base.Add(o), Duration: 0.01, Stream: "0x0"})
		it.Latency = 0.01
	}
	return it
}

func openStore(t testing.TB, dir string, now *time.Time, retention time.Duration) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, Retention: retention, PartitionDuration: time.Hour, Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func decodeItems(t testing.TB, r Result) []Item {
	t.Helper()
	out := make([]Item, len(r.Items))
	for i, raw := range r.Items {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			t.Fatalf("item %d: %v: %s", i, err, raw)
		}
	}
	return out
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
