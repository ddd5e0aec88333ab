package sim

import (
	"context"
	"time"
)

// Record is one request the serving model simulated, with the very values
// it observed into the latency histograms: a request-level view of the
// same fleet. Sending these as request records (POST /api/v1/requests)
// makes record-based answers and the vLLM series tell one story: the same
// models, instances and labels, and an e2e P99 from the records that the
// histogram's P99 approximates within its bucket resolution.
type Record struct {
	// Model, Instance and Job are the labels of the vLLM series
	// (model_name, instance, job).
	Model, Instance, Job string
	// Seq numbers the requests of one instance from 0, in arrival order,
	// since the Simulator was built.
	Seq uint64
	// Arrival is when the request reached the API server. Requests of one
	// sub-step are spread evenly over it.
	Arrival time.Time
	// Frontend, Queue, Prefill and Decode are the stages in seconds:
	// TTFT = Frontend + Queue + Prefill, e2e = TTFT + Decode.
	Frontend, Queue, Prefill, Decode float64
	PromptTokens, OutputTokens       int
	CachedTokens                     int
	// FinishReason is stop, length or abort, as finished_reason.
	FinishReason string
}

// TTFT is the time to first token in seconds.
func (r *Record) TTFT() float64 { return r.Frontend + r.Queue + r.Prefill }

// E2E is the end-to-end latency in seconds.
func (r *Record) E2E() float64 { return r.TTFT() + r.Decode }

// RecordSink receives the records of the steps Run just sent, after their
// series were acknowledged. An error other than ctx's is logged and the
// records dropped; Run keeps going.
type RecordSink func(ctx context.Context, recs []Record) error

// TakeRecords returns the records simulated by Step since the last call
// and forgets them. Without Options.Records it returns nil.
func (s *Simulator) TakeRecords() []Record {
	var out []Record
	for _, in := range s.instances {
		out = append(out, in.records...)
		in.records = in.records[:0]
	}
	return out
}
