package evidence

import (
	"time"

	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/cuda"
)

// CallFromEvent converts a bpf/cuda event; clock turns its CLOCK_MONOTONIC
// start into wall time.
func CallFromEvent(ev *cuda.Event, clock *bpf.Clock) Call {
	c := Call{
		TID:      ev.TID,
		Symbol:   ev.Symbol.String(),
		Start:    clock.Wall(ev.Start).UTC(),
		Duration: time.Duration(ev.Duration).Seconds(),
	}
	if ev.HasStream {
		c.Stream = hex(ev.Stream)
	}
	return c
}
