package evidence

import (
	"container/heap"
	"errors"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tailroot/tailroot/agent/symbolize"
)

// SlowEvent is one slow event of a probe with its raw stacks, as the kernel
// collector hands it over.
type SlowEvent struct {
	Probe    string        // "offcpu", "runqueue", "syscalls"
	PID, TID uint32        // process and thread
	Comm     string        // thread name the probe saw
	Start    time.Time     // wall time the event began
	Latency  time.Duration // the event's length
	Detail   string        // what the event was, when the probe says (a system call name)
	// User and Kernel are return addresses, innermost first; nil when not
	// captured.
	User, Kernel []uint64
}

// Stacks keeps, per probe, the TopN slowest events of the current interval
// with their stacks, and symbolizes them when drained. Memory is bounded by
// TopN × MaxProbes events whatever the event rate. It is safe for
// concurrent use.
type Stacks struct {
	topN, maxProbes int
	// Info, when set, describes a process the first time one of its events
	// is kept in an interval. Set before the first Add.
	Info func(pid uint32) Process
	// Symbolizer resolves user addresses; nil leaves them unresolved.
	Symbolizer *symbolize.Symbolizer
	// Kallsyms loads the kernel symbol table at the first kernel stack
	// drained; nil leaves kernel addresses unresolved.
	Kallsyms func() (*symbolize.Kallsyms, error)

	mu      sync.Mutex
	probes  map[string]*eventHeap
	info    map[uint32]Process
	dropped uint64 // events of probes beyond maxProbes

	ksOnce sync.Once
	ks     *symbolize.Kallsyms
	ksErr  error
}

// NewStacks returns a keeper of topN events for each of at most maxProbes
// probes per interval.
func NewStacks(topN, maxProbes int) *Stacks {
	return &Stacks{
		topN: max(topN, 1), maxProbes: max(maxProbes, 1),
		probes: map[string]*eventHeap{}, info: map[uint32]Process{},
	}
}

// Keep reports whether an event of probe lasting latency would be kept now,
// so the caller reads its stacks only then. The answer may be stale by the
// time Add is called; Add decides again.
func (s *Stacks) Keep(probe string, latency time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.probes[probe]
	if h == nil {
		return len(s.probes) < s.maxProbes
	}
	return len(*h) < s.topN || latency > (*h)[0].Latency
}

// Add offers one event.
func (s *Stacks) Add(ev SlowEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.probes[ev.Probe]
	if h == nil {
		if len(s.probes) >= s.maxProbes {
			s.dropped++
			return
		}
		h = &eventHeap{}
		s.probes[ev.Probe] = h
	}
	switch {
	case len(*h) < s.topN:
		heap.Push(h, ev)
	case ev.Latency > (*h)[0].Latency:
		(*h)[0] = ev
		heap.Fix(h, 0)
	default:
		return
	}
	if _, ok := s.info[ev.PID]; !ok && s.Info != nil {
		s.info[ev.PID] = s.Info(ev.PID)
	}
}

// Drain returns one stack item per kept event, slowest first within each
// probe and probes by name, symbolized, and starts a new interval. dropped
// counts events of probes left out because maxProbes was reached.
func (s *Stacks) Drain(now time.Time, node string) (items []Evidence, dropped uint64) {
	s.mu.Lock()
	probes, info := s.probes, s.info
	dropped = s.dropped
	s.probes, s.info, s.dropped = map[string]*eventHeap{}, map[uint32]Process{}, 0
	s.mu.Unlock()
	names := make([]string, 0, len(probes))
	for p := range probes {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		evs := []SlowEvent(*probes[p])
		sort.Slice(evs, func(i, j int) bool { return evs[i].Latency > evs[j].Latency })
		for _, ev := range evs {
			in := info[ev.PID]
			comm := ev.Comm
			if comm == "" {
				comm = in.Comm
			}
			items = append(items, Evidence{
				Kind: KindStack, Time: now, Node: node, PID: ev.PID, TID: ev.TID, Comm: comm,
				ContainerID: in.ContainerID, PodUID: in.PodUID, Probe: ev.Probe, Detail: ev.Detail,
				Start: ev.Start.UTC(), Latency: ev.Latency.Seconds(), Frames: s.frames(ev),
			})
		}
	}
	return items, dropped
}

// frames symbolizes an event's stacks, kernel frames (innermost) first.
func (s *Stacks) frames(ev SlowEvent) []Frame {
	out := make([]Frame, 0, len(ev.Kernel)+len(ev.User))
	if len(ev.Kernel) > 0 {
		ks := s.kallsyms()
		probe := true // still in the tracing machinery above the traced code
		for i, a := range ev.Kernel {
			if ks == nil {
				out = append(out, Frame{Address: hex(a), Module: "[kernel]"})
				continue
			}
			f := ks.Lookup(callSite(i, a))
			if probe = probe && isTracingFrame(f.Function); probe {
				continue
			}
			out = append(out, fromResolved(a, f))
		}
	}
	if len(ev.User) > 0 {
		var fs []symbolize.Frame
		var err error
		if s.Symbolizer != nil {
			sites := make([]uint64, len(ev.User))
			for i, a := range ev.User {
				sites[i] = callSite(i, a)
			}
			fs, err = s.Symbolizer.Symbolize(int(ev.PID), sites, nil)
		}
		for i, a := range ev.User {
			if s.Symbolizer == nil || err != nil || i >= len(fs) {
				// The process is gone (or no symbolizer): addresses only.
				out = append(out, Frame{Address: hex(a)})
				continue
			}
			out = append(out, fromResolved(a, fs[i]))
		}
	}
	return out
}

// isTracingFrame reports whether a kernel function is the probe's own
// machinery (the JIT-compiled program, the tracepoint trampolines), which
// tops every stack taken in a tracepoint and says nothing about the event.
func isTracingFrame(fn string) bool {
	for _, p := range []string{"bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_"} {
		if strings.HasPrefix(fn, p) {
			return true
		}
	}
	return false
}

// callSite is the address looked up for frame i: outer frames are return
// addresses, one past the call instruction, which for a call at the very
// end of a function (a noreturn callee) lies in the next function.
func callSite(i int, a uint64) uint64 {
	if i > 0 && a > 0 {
		return a - 1
	}
	return a
}

// fromResolved reports the runtime address a with the symbol found for its
// call site.
func fromResolved(a uint64, f symbolize.Frame) Frame {
	fr := Frame{Address: hex(a), Module: f.Module, Function: f.Function}
	if f.Function != "" {
		fr.Offset = f.Offset + (a - f.Address)
	}
	return fr
}

func (s *Stacks) kallsyms() *symbolize.Kallsyms {
	if s.Kallsyms == nil {
		return nil
	}
	s.ksOnce.Do(func() { s.ks, s.ksErr = s.Kallsyms() })
	if s.ksErr != nil {
		return nil
	}
	return s.ks
}

// ReadKallsyms parses the host's /proc/kallsyms.
func ReadKallsyms() (*symbolize.Kallsyms, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	k, err := symbolize.ParseKallsyms(f)
	if err != nil {
		return nil, err
	}
	if k.Len() == 0 {
		return nil, errors.New("/proc/kallsyms shows no addresses (kptr_restrict; needs CAP_SYSLOG)")
	}
	return k, nil
}

// eventHeap is a min-heap by latency: the root is the fastest kept event,
// the one a slower newcomer replaces.
type eventHeap []SlowEvent

func (h eventHeap) Len() int           { return len(h) }
func (h eventHeap) Less(i, j int) bool { return h[i].Latency < h[j].Latency }
func (h eventHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)        { *h = append(*h, x.(SlowEvent)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
