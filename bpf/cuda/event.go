package cuda

import (
	"encoding/binary"
	"fmt"
)

// Event is one completed CUDA API call (struct event of cuda.bpf.c).
type Event struct {
	PID      uint32 // process id
	TID      uint32 // thread id
	Symbol   Symbol // function called
	Start    uint64 // CLOCK_MONOTONIC ns at entry (bpf.Clock.Wall converts)
	Duration uint64 // ns from entry to return
	// Stream is the call's stream argument (an opaque cudaStream_t /
	// CUstream pointer; 0 is the legacy default stream) when HasStream.
	Stream    uint64
	HasStream bool
}

// EventSize is the size of struct event in bytes.
const EventSize = 40

const eventHasStream = 1

// UnmarshalBinary decodes struct event (little-endian):
//
//	0 pid u32 | 4 tid u32 | 8 sym u32 | 12 flags u32 |
//	16 start_ns u64 | 24 duration_ns u64 | 32 stream u64
func (e *Event) UnmarshalBinary(b []byte) error {
	if len(b) != EventSize {
		return fmt.Errorf("cuda event: size %d, want %d", len(b), EventSize)
	}
	le := binary.LittleEndian
	sym := le.Uint32(b[8:])
	if sym == 0 || sym >= uint32(len(symbols)) {
		return fmt.Errorf("cuda event: symbol id %d unknown", sym)
	}
	flags := le.Uint32(b[12:])
	if flags&^eventHasStream != 0 {
		return fmt.Errorf("cuda event: flags %#x unknown", flags)
	}
	*e = Event{
		PID:       le.Uint32(b),
		TID:       le.Uint32(b[4:]),
		Symbol:    Symbol(sym),
		HasStream: flags&eventHasStream != 0,
		Start:     le.Uint64(b[16:]),
		Duration:  le.Uint64(b[24:]),
		Stream:    le.Uint64(b[32:]),
	}
	return nil
}

// MarshalBinary encodes e as struct event.
func (e *Event) MarshalBinary() ([]byte, error) {
	b := make([]byte, EventSize)
	le := binary.LittleEndian
	le.PutUint32(b, e.PID)
	le.PutUint32(b[4:], e.TID)
	le.PutUint32(b[8:], uint32(e.Symbol))
	if e.HasStream {
		le.PutUint32(b[12:], eventHasStream)
	}
	le.PutUint64(b[16:], e.Start)
	le.PutUint64(b[24:], e.Duration)
	le.PutUint64(b[32:], e.Stream)
	return b, nil
}
