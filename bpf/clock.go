package bpf

import (
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Clock converts CLOCK_MONOTONIC nanoseconds (what bpf_ktime_get_ns returns
// and what every tailroot BPF event carries) into wall-clock time. It is the
// only place in tailroot that does this conversion.
//
// The two clocks are driven by the same timekeeper, so NTP frequency
// corrections slew both alike and their difference only changes when the
// wall clock is stepped (settimeofday, clock_settime, a leap second). Clock
// keeps that difference and Resync re-measures it; callers resync on a timer
// (every scrape, say) and get the step back so they can log it.
//
// Clock is safe for concurrent use.
type Clock struct {
	offset atomic.Int64 // ns: CLOCK_REALTIME - CLOCK_MONOTONIC
}

// clockSamples is how many (realtime, monotonic, realtime) triples one
// measurement reads; the tightest bracket wins, which removes the effect of
// being preempted between the reads.
const clockSamples = 8

// NewClock measures the offset between the clocks.
func NewClock() (*Clock, error) {
	c := &Clock{}
	if _, err := c.Resync(); err != nil {
		return nil, err
	}
	return c, nil
}

// MeasureOffset returns CLOCK_REALTIME - CLOCK_MONOTONIC in nanoseconds and
// the uncertainty of that value (half the width of the tightest realtime
// bracket around a monotonic read).
func MeasureOffset() (offset, uncertainty int64, err error) {
	best := int64(-1)
	for range clockSamples {
		var r1, m, r2 unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_REALTIME, &r1); err != nil {
			return 0, 0, fmt.Errorf("read realtime clock: %w", err)
		}
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &m); err != nil {
			return 0, 0, fmt.Errorf("read monotonic clock: %w", err)
		}
		if err := unix.ClockGettime(unix.CLOCK_REALTIME, &r2); err != nil {
			return 0, 0, fmt.Errorf("read realtime clock: %w", err)
		}
		w := r2.Nano() - r1.Nano()
		if best < 0 || w < best {
			best = w
			offset = r1.Nano() + w/2 - m.Nano()
		}
	}
	return offset, best / 2, nil
}

// Resync re-measures the offset and returns how far it moved since the last
// measurement (a wall-clock step; zero plus measurement noise otherwise).
func (c *Clock) Resync() (step time.Duration, err error) {
	off, _, err := MeasureOffset()
	if err != nil {
		return 0, err
	}
	old := c.offset.Swap(off)
	if old == 0 {
		return 0, nil
	}
	return time.Duration(off - old), nil
}

// Wall converts a CLOCK_MONOTONIC timestamp in nanoseconds to wall time.
func (c *Clock) Wall(monoNs uint64) time.Time {
	return time.Unix(0, int64(monoNs)+c.offset.Load())
}

// Offset returns the current CLOCK_REALTIME - CLOCK_MONOTONIC difference.
func (c *Clock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// MonotonicNs reads CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns.
func MonotonicNs() uint64 {
	var ts unix.Timespec
	// CLOCK_MONOTONIC cannot fail with a valid pointer.
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}
