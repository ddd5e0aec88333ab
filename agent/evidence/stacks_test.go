package evidence

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tailroot/tailroot/agent/symbolize"
)

func TestStacksKeepSlowestPerProbe(t *testing.T) {
	s := NewStacks(3, 2)
	s.Info = func(pid uint32) Process { return Process{Comm: "from-proc", ContainerID: "c" + fmt.Sprint(pid)} }
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	// offcpu: 10 events of 1..10 ms offered in a scrambled order; the kept
	// ones are 10, 9, 8 ms. syscalls: 2 events. runqueue: a third probe,
	// beyond maxProbes 2, dropped.
	// Keep, worked by hand over the heap of the 3 slowest so far: true
	// while fewer than 3 are kept or the event beats the fastest kept.
	keep := map[int]bool{4: true, 9: true, 1: true, 7: true, 10: true, 2: false, 8: true, 3: false, 6: false, 5: false}
	for _, ms := range []int{4, 9, 1, 7, 10, 2, 8, 3, 6, 5} {
		lat := time.Duration(ms) * time.Millisecond
		if got := s.Keep("offcpu", lat); got != keep[ms] {
			t.Errorf("Keep(offcpu, %v) = %v, want %v", lat, got, keep[ms])
		}
		s.Add(SlowEvent{Probe: "offcpu", PID: uint32(100 + ms), TID: 7, Comm: "w", Start: base.Add(time.Duration(ms) * time.Second), Latency: lat})
	}
	if s.Keep("offcpu", 8*time.Millisecond) {
		t.Error("Keep(offcpu, 8 ms) = true with 8, 9, 10 ms kept")
	}
	s.Add(SlowEvent{Probe: "syscalls", PID: 5, Latency: time.Millisecond, Detail: "futex"})
	s.Add(SlowEvent{Probe: "syscalls", PID: 6, Latency: 2 * time.Millisecond, Detail: "read"})
	if s.Keep("runqueue", time.Hour) {
		t.Error("Keep of a third probe with maxProbes 2")
	}
	s.Add(SlowEvent{Probe: "runqueue", PID: 9, Latency: time.Second})

	items, dropped := s.Drain(base.Add(time.Minute), "n1")
	if dropped != 1 {
		t.Errorf("dropped %d, want 1 (the runqueue event)", dropped)
	}
	var got []string
	for _, it := range items {
		got = append(got, fmt.Sprintf("%s:%d:%g:%s:%s:%s", it.Probe, it.PID, it.Latency, it.Comm, it.ContainerID, it.Detail))
		if it.Kind != KindStack || it.Node != "n1" || !it.Time.Equal(base.Add(time.Minute)) || it.Frames == nil {
			t.Errorf("item %+v", it)
		}
	}
	want := "[offcpu:110:0.01:w:c110: offcpu:109:0.009:w:c109: offcpu:108:0.008:w:c108: syscalls:6:0.002:from-proc:c6:read syscalls:5:0.001:from-proc:c5:futex]"
	if fmt.Sprint(got) != want {
		t.Errorf("items\n got %v\nwant %s", got, want)
	}
	if !items[0].Start.Equal(base.Add(10 * time.Second)) {
		t.Errorf("start %v", items[0].Start)
	}
	if items, _ := s.Drain(base, "n1"); len(items) != 0 {
		t.Fatal("Drain did not start a new interval")
	}
}

// TestStackFrames symbolizes a kernel stack against a hand-written symbol
// table: the tracing frames on top are dropped, and the outer frame whose
// return address is exactly the start of the next function resolves to
// its call site (one byte before), in the caller.
func TestStackFrames(t *testing.T) {
	ks, err := symbolize.ParseKallsyms(strings.NewReader(
		"ffffffff81000000 T schedule\nffffffff81000100 T do_nanosleep\nffffffff81000200 t hrtimer_nanosleep\n" +
			"ffffffff81100000 T bpf_trace_run4\nffffffffc0025c00 t bpf_prog_67d952ef9f5ebc99_sched_switch\t[bpf]\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := NewStacks(1, 1)
	s.Kallsyms = func() (*symbolize.Kallsyms, error) { return ks, nil }
	s.Add(SlowEvent{
		Probe: "offcpu", PID: 1, Latency: time.Second,
		// The program and its trampoline top the stack and are left out.
		Kernel: []uint64{0xffffffffc0025d82, 0xffffffff811000fc, 0xffffffff81000010, 0xffffffff81000100, 0xffffffff81000234},
		User:   []uint64{0x401000, 0x401234},
	})
	items, _ := s.Drain(time.Now(), "n")
	fs := items[0].Frames
	want := []Frame{
		{Address: "0xffffffff81000010", Module: "[kernel]", Function: "schedule", Offset: 0x10},
		{Address: "0xffffffff81000100", Module: "[kernel]", Function: "schedule", Offset: 0x100},
		{Address: "0xffffffff81000234", Module: "[kernel]", Function: "hrtimer_nanosleep", Offset: 0x34},
		{Address: "0x401000"}, // no symbolizer: user addresses as they are
		{Address: "0x401234"},
	}
	if fmt.Sprint(fs) != fmt.Sprint(want) {
		t.Fatalf("frames\n got %+v\nwant %+v", fs, want)
	}
}
