package bpf

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// SlowKind says what a SlowEvent measured (SLOW_* in include/slow.h).
type SlowKind uint32

// Kinds of slow events.
const (
	// SlowOffCPU is a watched thread's switch-out to its next switch-in
	// (blocked plus waiting for a CPU); the stacks are where it stopped.
	SlowOffCPU SlowKind = 1
	// SlowRunQueue is a watched thread's wait from runnable to running;
	// the stacks are where it last stopped (preempted, or blocked before
	// the wakeup that made it runnable).
	SlowRunQueue SlowKind = 2
	// SlowSyscall is a system call, sys_enter to sys_exit; Detail is its
	// number and the user stack is the call site.
	SlowSyscall SlowKind = 3
)

func (k SlowKind) String() string {
	switch k {
	case SlowOffCPU:
		return "offcpu"
	case SlowRunQueue:
		return "runqueue"
	case SlowSyscall:
		return "syscalls"
	}
	return fmt.Sprintf("SlowKind(%d)", uint32(k))
}

// SlowStackDepth is the most frames a captured stack holds
// (SLOW_STACK_DEPTH); deeper stacks are cut at the outermost end.
const SlowStackDepth = 64

// NoStack is the stack id of a stack that was not captured. Other negative
// ids are the -errno bpf_get_stackid returned: -14 (EFAULT) no user stack
// (a kernel thread), -17 (EEXIST) the map bucket held another stack, -12
// (ENOMEM) no room.
const NoStack = -1

// SlowEvent is struct slow_event of include/slow.h: one event at least as
// long as the probe's threshold, with the ids of its stacks in the probe's
// stack map (SlowReader.Stack reads them).
type SlowEvent struct {
	PID, TID    uint32
	Kind        SlowKind
	Detail      uint32 // SlowSyscall: system call number of the architecture
	Start       uint64 // CLOCK_MONOTONIC ns (Clock.Wall converts)
	Duration    uint64 // ns
	UserStack   int32  // stack id, or negative (NoStack, -errno)
	KernelStack int32  // stack id, or negative (NoStack, -errno)
	Comm        string // thread name at the end of the event
}

// SlowEventSize is the size of struct slow_event in bytes.
const SlowEventSize = 56

// UnmarshalBinary decodes struct slow_event (little-endian):
//
//	0 pid u32 | 4 tid u32 | 8 start_ns u64 | 16 duration_ns u64 |
//	24 user_stack s32 | 28 kern_stack s32 | 32 kind u32 | 36 detail u32 |
//	40 comm [16]byte, NUL-padded
func (e *SlowEvent) UnmarshalBinary(b []byte) error {
	if len(b) != SlowEventSize {
		return fmt.Errorf("slow event: size %d, want %d", len(b), SlowEventSize)
	}
	le := binary.LittleEndian
	kind := SlowKind(le.Uint32(b[32:]))
	if kind < SlowOffCPU || kind > SlowSyscall {
		return fmt.Errorf("slow event: kind %d unknown", uint32(kind))
	}
	comm := b[40:56]
	if i := bytes.IndexByte(comm, 0); i >= 0 {
		comm = comm[:i]
	}
	*e = SlowEvent{
		PID:         le.Uint32(b),
		TID:         le.Uint32(b[4:]),
		Start:       le.Uint64(b[8:]),
		Duration:    le.Uint64(b[16:]),
		UserStack:   int32(le.Uint32(b[24:])),
		KernelStack: int32(le.Uint32(b[28:])),
		Kind:        kind,
		Detail:      le.Uint32(b[36:]),
		Comm:        string(comm),
	}
	return nil
}

// MarshalBinary encodes e as struct slow_event; a Comm longer than 15
// bytes is cut, as the kernel cuts thread names.
func (e *SlowEvent) MarshalBinary() ([]byte, error) {
	b := make([]byte, SlowEventSize)
	le := binary.LittleEndian
	le.PutUint32(b, e.PID)
	le.PutUint32(b[4:], e.TID)
	le.PutUint64(b[8:], e.Start)
	le.PutUint64(b[16:], e.Duration)
	le.PutUint32(b[24:], uint32(e.UserStack))
	le.PutUint32(b[28:], uint32(e.KernelStack))
	le.PutUint32(b[32:], uint32(e.Kind))
	le.PutUint32(b[36:], e.Detail)
	copy(b[40:55], e.Comm)
	return b, nil
}

// TrimStack drops the zero padding of a stack map value: the frames end at
// the first zero address.
func TrimStack(frames []uint64) []uint64 {
	for i, a := range frames {
		if a == 0 {
			return frames[:i]
		}
	}
	return frames
}
