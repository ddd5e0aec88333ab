package requests

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// Sender posts simulated requests to a tailroot server.
type Sender struct {
	// URL is the server's base URL, e.g. http://127.0.0.1:9490.
	URL string
	// Client sends; nil means a client with a 30 s timeout.
	Client *http.Client
	// Lines chooses what NDJSON lines carry.
	Lines LineOptions
	// BatchSize is the requests per POST. Zero means 500.
	BatchSize int
}

func (s *Sender) client() *http.Client {
	if s.Client != nil {
		return s.Client
	}
	return &http.Client{Timeout: 30 * time.Second}
}

func (s *Sender) batch() int {
	if s.BatchSize > 0 {
		return s.BatchSize
	}
	return 500
}

// PushNDJSON posts reqs to /api/v1/requests as gzip-compressed NDJSON.
func (s *Sender) PushNDJSON(ctx context.Context, reqs []Request) error {
	for lo := 0; lo < len(reqs); lo += s.batch() {
		hi := min(lo+s.batch(), len(reqs))
		var raw []byte
		for i := lo; i < hi; i++ {
			raw = reqs[i].AppendNDJSON(raw, s.Lines)
		}
		var body bytes.Buffer
		zw := gzip.NewWriter(&body)
		_, _ = zw.Write(raw)
		if err := zw.Close(); err != nil {
			return err
		}
		if err := s.post(ctx, "/api/v1/requests", "application/x-ndjson", body.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// PushSpans posts reqs to /v1/traces as OTLP protobuf llm_request spans
// (AppendSpans).
func (s *Sender) PushSpans(ctx context.Context, reqs []Request) error {
	for lo := 0; lo < len(reqs); lo += s.batch() {
		hi := min(lo+s.batch(), len(reqs))
		td := ptrace.NewTraces()
		AppendSpans(td, reqs[lo:hi])
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			return err
		}
		if err := s.post(ctx, "/v1/traces", "application/x-protobuf", body); err != nil {
			return err
		}
	}
	return nil
}

// StatusError is a response other than 2xx.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body) }

func (s *Sender) post(ctx context.Context, path, ct string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(s.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", ct)
	if ct == "application/x-ndjson" {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := s.client().Do(req)
	if err != nil {
		return fmt.Errorf("post %s: %w", path, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post %s: %w", path, &StatusError{Code: resp.StatusCode, Body: string(msg)})
	}
	return nil
}

// RunOptions configure Run.
type RunOptions struct {
	Options
	// URL is the server's base URL.
	URL string
	// Interval is how often finished requests are sent. Zero means 1 s.
	Interval time.Duration
	// Backfill replays this much of the past at once when Run starts, so
	// dashboards have data at once. Zero means none.
	Backfill time.Duration
	// SpanShare is the fraction of requests sent as OTLP spans; the others
	// go as NDJSON. Zero means 0.5; negative means none.
	SpanShare float64
	// Logger receives send errors; nil discards them.
	Logger *slog.Logger
}

// Run replays the trace in real time against the server at URL until ctx
// ends: requests are simulated ahead, starting Backfill ago, and each is
// sent once it has finished by the wall clock, in batches every Interval.
// When the trace ends it starts again with a new seed. A batch the server
// refuses with 4xx is logged and dropped; other failures are retried.
func Run(ctx context.Context, o RunOptions) error {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.SpanShare == 0 {
		o.SpanShare = 0.5
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Sender{URL: o.URL}
	sim := o.Options
	sim.Start = time.Now().Add(-o.Backfill)
	sim = sim.withDefaults()
	for round := 0; ; round++ {
		sim.Seed = o.Seed + uint64(round)
		reqs, err := Simulate(sim)
		if err != nil {
			return err
		}
		if len(reqs) == 0 {
			return errors.New("run: the trace has no requests")
		}
		log.Info("request simulator replaying a trace", "trace", sim.Trace, "requests", len(reqs), "from", sim.Start, "round", round)
		// Requests finish out of arrival order; send in finish order.
		order := finishOrder(reqs)
		next := 0
		t := time.NewTicker(o.Interval)
		for next < len(order) {
			now := time.Now().UnixNano()
			var nd, sp []Request
			for next < len(order) && reqs[order[next]].Finished <= now {
				r := reqs[order[next]]
				// Request i goes as a span when ⌊(i+1)·share⌋ steps up, so
				// any stretch of requests splits in the share's proportion.
				if i := float64(order[next]); math.Floor((i+1)*o.SpanShare) > math.Floor(i*o.SpanShare) {
					sp = append(sp, r)
				} else {
					nd = append(nd, r)
				}
				next++
			}
			retry(ctx, log, func() error { return s.PushNDJSON(ctx, nd) })
			retry(ctx, log, func() error { return s.PushSpans(ctx, sp) })
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
		}
		t.Stop()
		last := reqs[len(reqs)-1].Arrival
		sim.Start = time.Unix(0, last).Add(time.Second)
	}
}

// retry runs send until it succeeds, the server refuses the batch (4xx,
// logged and dropped) or ctx ends.
func retry(ctx context.Context, log *slog.Logger, send func() error) {
	for attempt := 0; ; attempt++ {
		err := send()
		var se *StatusError
		if err == nil || ctx.Err() != nil {
			return
		}
		if errors.As(err, &se) && se.Code/100 == 4 {
			log.Warn("simulated requests refused", "err", err)
			return
		}
		log.Warn("send simulated requests; retrying", "err", err, "attempt", attempt)
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt+1)*time.Second, 30*time.Second)):
		}
	}
}

func finishOrder(reqs []Request) []int {
	idx := make([]int, len(reqs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(reqs[a].Finished, reqs[b].Finished) })
	return idx
}
