package bpf

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func realtimeNs(t *testing.T) int64 {
	t.Helper()
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano()
}

// TestClockWallBracketed converts a CLOCK_MONOTONIC reading and checks the
// result lies between two CLOCK_REALTIME reads taken around it.
func TestClockWallBracketed(t *testing.T) {
	c, err := NewClock()
	if err != nil {
		t.Fatal(err)
	}
	_, unc, err := MeasureOffset()
	if err != nil {
		t.Fatal(err)
	}
	slack := unc + int64(50*time.Microsecond)
	for range 100 {
		before := realtimeNs(t)
		mono := MonotonicNs()
		after := realtimeNs(t)
		w := c.Wall(mono).UnixNano()
		if w < before-slack || w > after+slack {
			t.Fatalf("Wall(%d) = %d, outside realtime bracket [%d, %d] ± %d ns", mono, w, before, after, slack)
		}
	}
}

// TestClockDrift measures the offset repeatedly over a while: without a
// wall-clock step the two clocks advance together (NTP slews both), so the
// offset must stay put to within measurement noise. A moving offset would
// mean converted BPF timestamps drift against real time.
func TestClockDrift(t *testing.T) {
	c, err := NewClock()
	if err != nil {
		t.Fatal(err)
	}
	d := 300 * time.Millisecond
	if testing.Short() {
		d = 50 * time.Millisecond
	}
	deadline := time.Now().Add(d)
	var worst time.Duration
	for time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		off, _, err := MeasureOffset()
		if err != nil {
			t.Fatal(err)
		}
		drift := time.Duration(off) - c.Offset()
		if drift < 0 {
			drift = -drift
		}
		worst = max(worst, drift)
	}
	t.Logf("worst offset drift over %v: %v", d, worst)
	if worst > 100*time.Microsecond {
		t.Fatalf("offset drifted %v over %v; want < 100µs without a clock step", worst, d)
	}
	step, err := c.Resync()
	if err != nil {
		t.Fatal(err)
	}
	if step > 100*time.Microsecond || step < -100*time.Microsecond {
		t.Fatalf("Resync step %v, want ~0", step)
	}
}
