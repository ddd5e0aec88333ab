package kernel

import (
	"errors"
	"os"
	"sync/atomic"
	"time"

	"github.com/tailroot/tailroot/agent/evidence"
	"github.com/tailroot/tailroot/bpf"
)

// SlowSink receives the slow events of the run-queue and syscall probes.
// evidence.Stacks implements it.
type SlowSink interface {
	// Keep reports whether an event of probe lasting latency would be
	// kept; only then are its stacks read from the kernel.
	Keep(probe string, latency time.Duration) bool
	// Add hands over one event with its raw stacks.
	Add(ev evidence.SlowEvent)
}

// SlowStats counts what the slow-event readers lost.
type SlowStats struct {
	// Dropped is events the kernel could not send: its ring buffer was
	// full (summed over probes, since load).
	Dropped uint64
	// StacksLost is stacks of kept events that could not be read: not
	// captured (map bucket taken, map full) or cleared before being read.
	StacksLost uint64
}

// slowReader pairs a probe's reader with its counters.
type slowReader struct {
	r    *bpf.SlowReader
	lost atomic.Uint64
}

// startSlow starts one reader goroutine per probe with slow events. The
// caller holds no lock; Close stops them.
func (c *Collector) startSlow() {
	if c.opts.Slow == nil || c.opts.SlowEvents <= 0 {
		return
	}
	clock, err := bpf.NewClock()
	if err != nil {
		c.log.Warn("ebpf: no clock; slow-event stacks disabled", "err", err)
		return
	}
	for _, r := range []*bpf.SlowReader{c.runqSlow(), c.sysSlow()} {
		if r == nil {
			continue
		}
		sr := &slowReader{r: r}
		c.slow = append(c.slow, sr)
		c.readers.Add(1)
		go c.readSlow(sr, clock)
	}
}

func (c *Collector) runqSlow() *bpf.SlowReader {
	if c.runq == nil {
		return nil
	}
	return c.runq.Slow()
}

func (c *Collector) sysSlow() *bpf.SlowReader {
	if c.sys == nil {
		return nil
	}
	return c.sys.Slow()
}

// readSlow hands slow events to the sink until the probe is closed. Stacks
// are read only for events the sink would keep: a map lookup per stack is
// a system call, and most events are not among an interval's slowest.
func (c *Collector) readSlow(sr *slowReader, clock *bpf.Clock) {
	defer c.readers.Done()
	var ev bpf.SlowEvent
	for {
		err := sr.r.Read(&ev)
		if errors.Is(err, os.ErrClosed) {
			return
		}
		if err != nil {
			c.mu.Lock()
			c.failLocked("stacks", err)
			c.mu.Unlock()
			continue
		}
		probe := ev.Kind.String()
		lat := time.Duration(ev.Duration)
		if !c.opts.Slow.Keep(probe, lat) {
			continue
		}
		out := evidence.SlowEvent{
			Probe: probe, PID: ev.PID, TID: ev.TID, Comm: ev.Comm,
			Start: clock.Wall(ev.Start), Latency: lat,
		}
		if ev.Kind == bpf.SlowSyscall {
			out.Detail = SyscallName(ev.Detail)
		}
		out.User = c.stack(sr, ev.UserStack)
		out.Kernel = c.stack(sr, ev.KernelStack)
		c.opts.Slow.Add(out)
	}
}

// stack reads one stack; a capture that failed in the kernel (other than
// "not captured" or "no user stack", as for kernel threads) or a stack
// cleared before it was read counts as lost.
func (c *Collector) stack(sr *slowReader, id int32) []uint64 {
	const efault = -14
	if id == bpf.NoStack || id == efault {
		return nil
	}
	if id < 0 {
		sr.lost.Add(1)
		return nil
	}
	s, err := sr.r.Stack(id, nil)
	if err != nil {
		sr.lost.Add(1)
		return nil
	}
	return s
}

// clearStacksLocked empties the probes' stack maps, so stacks not seen
// since the last collection make room for new ones. Events still in a ring
// buffer lose theirs (counted in StacksLost). The caller holds mu.
func (c *Collector) clearStacksLocked() {
	for _, sr := range c.slow {
		if _, err := sr.r.ClearStacks(); err != nil {
			c.failLocked("stacks", err)
		}
	}
}

// SlowStats returns the slow-event loss counters.
func (c *Collector) SlowStats() SlowStats {
	var st SlowStats
	c.mu.Lock()
	readers := c.slow
	c.mu.Unlock()
	for _, sr := range readers {
		if d, err := sr.r.Dropped(); err == nil {
			st.Dropped += d
		}
		st.StacksLost += sr.lost.Load()
	}
	return st
}
