// Package evidence collects the concrete events behind a latency report
// (the slowest CUDA calls of each process, the slowest events of each
// stack-capturing probe with their stacks) and pushes them to tailroot as
// JSON (agent/EVIDENCE.md is the contract).
//
// In: CUDA call events from bpf/cuda; slow events with raw stacks from
// bpf/runqlat and bpf/syscalls. Out: Evidence items, at most TopN calls for
// each of at most MaxProcesses processes per interval (Timeline) and TopN
// symbolized stacks per probe (Stacks), POSTed to {server}/api/v1/evidence.
// Memory is bounded by those products whatever the event rate; what is
// left out is counted, not queued.
package evidence

import (
	"container/heap"
	"sort"
	"sync"
	"time"

	"github.com/tailroot/tailroot/agent/symbolize"
)

// Kinds of evidence.
const (
	KindCUDATimeline = "cuda_timeline"
	KindStack        = "stack"
)

// Frame is one stack frame.
type Frame struct {
	Address  string `json:"address"` // hexadecimal, "0x7f3a…"
	Module   string `json:"module,omitempty"`
	Function string `json:"function,omitempty"`
	Offset   uint64 `json:"offset,omitempty"`
}

// FromSymbolized converts symbolized frames.
func FromSymbolized(fs []symbolize.Frame) []Frame {
	out := make([]Frame, len(fs))
	for i, f := range fs {
		out[i] = Frame{Address: hex(f.Address), Module: f.Module, Function: f.Function, Offset: f.Offset}
	}
	return out
}

// Call is one CUDA API call in a timeline.
type Call struct {
	TID      uint32    `json:"tid"`
	Symbol   string    `json:"symbol"`
	Start    time.Time `json:"start"`
	Duration float64   `json:"duration"`         // seconds
	Stream   string    `json:"stream,omitempty"` // hexadecimal stream handle; absent for calls without one
}

// Evidence is one item of the JSON contract.
type Evidence struct {
	Kind        string    `json:"kind"`
	Time        time.Time `json:"time"` // end of the interval the item covers
	Node        string    `json:"node"`
	PID         uint32    `json:"pid"`
	TID         uint32    `json:"tid,omitempty"` // stack: the thread of the event
	Comm        string    `json:"comm,omitempty"`
	ContainerID string    `json:"container_id,omitempty"`
	PodUID      string    `json:"pod_uid,omitempty"`
	Probe       string    `json:"probe,omitempty"`  // which probe found it ("cuda", "runqueue", …)
	Detail      string    `json:"detail,omitempty"` // stack: what the event was ("nanosleep" for syscalls)
	Start       time.Time `json:"start,omitzero"`   // stack: wall time the event began
	Latency     float64   `json:"latency"`          // seconds: the slowest event of the item
	Frames      []Frame   `json:"frames"`           // stack, innermost first; empty for a timeline
	Calls       []Call    `json:"calls,omitempty"`  // cuda_timeline: the kept calls by start time
	Seen        uint64    `json:"seen,omitempty"`   // cuda_timeline: calls of the process in the interval
}

// Batch is the body of one POST.
type Batch struct {
	Node     string     `json:"node"`
	Evidence []Evidence `json:"evidence"`
}

func hex(v uint64) string {
	const digits = "0123456789abcdef"
	if v == 0 {
		return "0x0"
	}
	var b [18]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = digits[v&15]
		v >>= 4
	}
	i--
	b[i] = 'x'
	i--
	b[i] = '0'
	return string(b[i:])
}

// Process describes a pid for the labels of its evidence.
type Process struct {
	Comm, ContainerID, PodUID string
}

// Timeline keeps, per process, the TopN slowest CUDA calls of the current
// interval. It is safe for concurrent use.
type Timeline struct {
	topN, maxProcs int
	// Info, when set, describes a process the first time it makes a call
	// in an interval (while it surely still exists: a short-lived process
	// may be gone by the time the interval ends). Set before the first Add.
	Info func(pid uint32) Process

	mu      sync.Mutex
	procs   map[uint32]*procCalls
	dropped uint64 // calls of processes beyond maxProcs
}

type procCalls struct {
	h    callHeap
	seen uint64
	info Process
}

// NewTimeline returns a timeline keeping topN calls for each of at most
// maxProcs processes per interval.
func NewTimeline(topN, maxProcs int) *Timeline {
	return &Timeline{topN: max(topN, 1), maxProcs: max(maxProcs, 1), procs: map[uint32]*procCalls{}}
}

// Add offers one call of process pid.
func (t *Timeline) Add(pid uint32, c Call) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.procs[pid]
	if p == nil {
		if len(t.procs) >= t.maxProcs {
			t.dropped++
			return
		}
		p = &procCalls{}
		if t.Info != nil {
			p.info = t.Info(pid)
		}
		t.procs[pid] = p
	}
	p.seen++
	if len(p.h) < t.topN {
		heap.Push(&p.h, c)
		return
	}
	if c.Duration > p.h[0].Duration {
		p.h[0] = c
		heap.Fix(&p.h, 0)
	}
}

// Drain returns one cuda_timeline item per process seen since the last
// Drain, calls sorted by start, and starts a new interval. dropped is the
// number of calls of processes left out because maxProcs was reached.
func (t *Timeline) Drain(now time.Time, node string) (items []Evidence, dropped uint64) {
	t.mu.Lock()
	procs := t.procs
	dropped = t.dropped
	t.procs, t.dropped = map[uint32]*procCalls{}, 0
	t.mu.Unlock()
	pids := make([]uint32, 0, len(procs))
	for pid := range procs {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	for _, pid := range pids {
		p := procs[pid]
		calls := []Call(p.h)
		sort.Slice(calls, func(i, j int) bool { return calls[i].Start.Before(calls[j].Start) })
		e := Evidence{Kind: KindCUDATimeline, Time: now, Node: node, PID: pid, Probe: "cuda", Calls: calls, Seen: p.seen, Frames: []Frame{}}
		for _, c := range calls {
			e.Latency = max(e.Latency, c.Duration)
		}
		e.Comm, e.ContainerID, e.PodUID = p.info.Comm, p.info.ContainerID, p.info.PodUID
		items = append(items, e)
	}
	return items, dropped
}

// callHeap is a min-heap by duration: the root is the fastest kept call,
// the one a slower newcomer replaces.
type callHeap []Call

func (h callHeap) Len() int           { return len(h) }
func (h callHeap) Less(i, j int) bool { return h[i].Duration < h[j].Duration }
func (h callHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *callHeap) Push(x any)        { *h = append(*h, x.(Call)) }
func (h *callHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
