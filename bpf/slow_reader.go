package bpf

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
)

// SlowReader reads the slow events of a loaded program (the slow_events
// ring buffer of include/slow.h) and the stacks they refer to. The maps
// belong to the program: Close closes the reader only.
//
// Read is for one goroutine; Stack, ClearStacks and Dropped may be called
// from others.
type SlowReader struct {
	rd      *ringbuf.Reader
	rec     ringbuf.Record // reused by Read
	stacks  *ebpf.Map
	dropped *ebpf.Map

	closeOnce sync.Once
	closeErr  error
}

// NewSlowReader opens a reader over a program's slow_events ring buffer,
// stacks map and slow_dropped counter.
func NewSlowReader(events, stacks, dropped *ebpf.Map) (*SlowReader, error) {
	rd, err := ringbuf.NewReader(events)
	if err != nil {
		return nil, fmt.Errorf("open slow event ring buffer: %w", err)
	}
	return &SlowReader{rd: rd, stacks: stacks, dropped: dropped}, nil
}

// Read blocks until the next event and decodes it into ev. After Close it
// returns an error matching os.ErrClosed; past a deadline set with
// SetDeadline, one matching os.ErrDeadlineExceeded.
func (r *SlowReader) Read(ev *SlowEvent) error {
	if err := r.rd.ReadInto(&r.rec); err != nil {
		return fmt.Errorf("read slow event: %w", err)
	}
	return ev.UnmarshalBinary(r.rec.RawSample)
}

// SetDeadline makes Read return once t has passed; the zero time waits for
// ever.
func (r *SlowReader) SetDeadline(t time.Time) { r.rd.SetDeadline(t) }

// ErrStackGone is returned by Stack for an id no longer in the stack map
// (emptied by ClearStacks after the event was captured).
var ErrStackGone = errors.New("stack no longer in the stack map")

// Stack appends the return addresses of stack id, innermost first, to dst.
// A negative id (not captured, or the capture failed) appends nothing and
// returns no error; the caller reads the reason from the id.
func (r *SlowReader) Stack(id int32, dst []uint64) ([]uint64, error) {
	if id < 0 {
		return dst, nil
	}
	var v [SlowStackDepth]uint64
	if err := r.stacks.Lookup(uint32(id), &v); err != nil {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return dst, fmt.Errorf("stack %d: %w", id, ErrStackGone)
		}
		return dst, fmt.Errorf("read stack %d: %w", id, err)
	}
	return append(dst, TrimStack(v[:])...), nil
}

// ClearStacks empties the stack map and returns how many stacks it held.
// The kernel never removes a stack, so without this the map fills and new
// stacks are lost (-EEXIST, -ENOMEM); events still in the ring buffer whose
// stacks were cleared read ErrStackGone.
func (r *SlowReader) ClearStacks() (int, error) {
	var ids []uint32
	var next uint32
	var key any // nil: the first key
	for {
		if err := r.stacks.NextKey(key, &next); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				break
			}
			return 0, fmt.Errorf("list stacks: %w", err)
		}
		ids = append(ids, next)
		key = next
	}
	n := 0
	for _, id := range ids {
		err := r.stacks.Delete(id)
		if err == nil {
			n++
		} else if !errors.Is(err, ebpf.ErrKeyNotExist) {
			return n, fmt.Errorf("delete stack %d: %w", id, err)
		}
	}
	return n, nil
}

// Dropped returns how many events were lost to a full ring buffer since
// the program was loaded.
func (r *SlowReader) Dropped() (uint64, error) {
	var n uint64
	if err := r.dropped.Lookup(uint32(0), &n); err != nil {
		return 0, fmt.Errorf("read slow event drop count: %w", err)
	}
	return n, nil
}

// Close unblocks Read and releases the ring buffer reader. It may be called
// while Read blocks, and more than once.
func (r *SlowReader) Close() error {
	r.closeOnce.Do(func() {
		if err := r.rd.Close(); err != nil {
			r.closeErr = fmt.Errorf("close slow event reader: %w", err)
		}
	})
	return r.closeErr
}
