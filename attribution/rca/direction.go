package rca

import (
	"fmt"
	"strings"

	"github.com/tailroot/tailroot/attribution/causal"
)

// Direction is the harmful direction of a target's change: the way a
// latency, an error rate or a queue moves in an incident, or a throughput
// moves when the service degrades. A change the other way is an
// improvement, not an incident.
type Direction string

// Directions.
const (
	// DirectionUp: a rise is harmful (latency, errors, queues, pressure,
	// utilisation).
	DirectionUp Direction = "up"
	// DirectionDown: a fall is harmful (throughput: tokens or requests
	// per second).
	DirectionDown Direction = "down"
	// DirectionBoth: either way is an incident (a target the rules do not
	// recognise).
	DirectionBoth Direction = "both"
)

// ParseDirection reads "up", "down" or "both" ("" is DirectionBoth's
// absence: the caller infers it). Errors wrap causal.ErrArgument.
func ParseDirection(s string) (Direction, error) {
	switch d := Direction(strings.ToLower(strings.TrimSpace(s))); d {
	case "", DirectionUp, DirectionDown, DirectionBoth:
		return d, nil
	}
	return "", fmt.Errorf("direction %q: want up, down or both: %w", s, causal.ErrArgument)
}

// sign is +1 for up, −1 for down, 0 for both.
func (d Direction) sign() float64 {
	switch d {
	case DirectionUp:
		return 1
	case DirectionDown:
		return -1
	}
	return 0
}

// harmful reports whether a change of sign shift is in the harmful
// direction (any change for DirectionBoth).
func (d Direction) harmful(shift float64) bool {
	s := d.sign()
	return s == 0 || shift*s > 0
}

// Words that decide a target's harmful direction, checked in this order
// on the lowercased metric name, unit and help text.
var (
	// Failures count up whatever else the name says
	// (vllm:request_failure_total is a counter like the throughputs).
	dirFailure = []string{"error", "fail", "timeout", "reject", "abort", "drop", "preempt", "evict", "throttl", "violation"}
	// Throughputs: a fall is the harm.
	dirThroughput = []string{"per_second", "per second", "throughput", "goodput", "tokens_total", "tokens/s", "tokens per second", "success_total", "completed"}
	// Latencies, queues, pressure and utilisation: a rise is the harm.
	dirRise = []string{"seconds", "latency", "duration", "delay", "ttft", "tpot", "time_to_first_token", "time_per_output_token", "inter_token", "wait", "queue", "pending", "pressure", "util", "usage", "saturation", "backlog"}
)

// HarmfulDirection infers a target's harmful direction from its metric
// name and, when known, the family's unit and help text (metadata):
//
//   - errors, failures, timeouts, rejections, drops, preemptions,
//     evictions, throttling → up;
//   - throughput — "per_second", tokens or successes counted
//     (`…tokens_total`, `…success_total`, as rates), "throughput" → down;
//   - time (`_seconds`, unit seconds), latency, duration, delay, TTFT,
//     ITL, TPOT, waiting, queues, pressure, utilisation, usage → up;
//   - anything else (a clock, a temperature, an unknown name) → both.
//
// A histogram's _bucket/_sum/_count suffix does not matter: the words are
// searched anywhere in the name.
func HarmfulDirection(metric, unit, help string) Direction {
	name := strings.ToLower(metric)
	for _, text := range []string{name, strings.ToLower(unit), strings.ToLower(help)} {
		if text == "" {
			continue
		}
		switch {
		case containsAny(text, dirFailure):
			return DirectionUp
		case containsAny(text, dirThroughput):
			return DirectionDown
		case containsAny(text, dirRise):
			return DirectionUp
		}
	}
	return DirectionBoth
}

func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}
