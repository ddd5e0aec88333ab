package remote

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/tailroot/tailroot/agent/queue"
)

// ShipperOptions configure a Shipper. Zero values take the defaults noted.
type ShipperOptions struct {
	// MinBackoff is the first retry delay. Zero means 250 ms.
	MinBackoff time.Duration
	// MaxBackoff caps the retry delay. Zero means 30 s.
	MaxBackoff time.Duration
	// MaxRetryAfter caps how long a server's Retry-After may make the
	// shipper wait. Zero means 5 minutes.
	MaxRetryAfter time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer receives the shipper's metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// Shipper moves records from a queue to the server, one at a time.
type Shipper struct {
	q       *queue.Queue
	c       *Client
	opts    ShipperOptions
	backoff Backoff
	log     *slog.Logger
	sleep   func(ctx context.Context, d time.Duration) error

	requests  *prometheus.CounterVec
	retries   prometheus.Counter
	written   *prometheus.CounterVec
	lastSent  prometheus.Gauge
	sendTimes prometheus.Histogram
}

// NewShipper returns a shipper from q to c.
func NewShipper(q *queue.Queue, c *Client, opts ShipperOptions) *Shipper {
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 250 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	if opts.MaxRetryAfter <= 0 {
		opts.MaxRetryAfter = 5 * time.Minute
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := promauto.With(opts.Registerer)
	return &Shipper{
		q: q, c: c, opts: opts, log: log,
		backoff: Backoff{Min: opts.MinBackoff, Max: opts.MaxBackoff},
		sleep:   sleepCtx,
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_agent_remote_write_requests_total",
			Help: "Remote write attempts by outcome (delivered, rejected, retry).",
		}, []string{"outcome"}),
		retries: f.NewCounter(prometheus.CounterOpts{
			Name: "tailroot_agent_remote_write_retries_total",
			Help: "Remote write attempts that will be repeated (5xx, 429, connection errors).",
		}),
		written: f.NewCounterVec(prometheus.CounterOpts{
			Name: "tailroot_agent_remote_write_written_total",
			Help: "Samples, histograms and exemplars the server reported written.",
		}, []string{"kind"}),
		lastSent: f.NewGauge(prometheus.GaugeOpts{
			Name: "tailroot_agent_remote_write_last_delivered_timestamp_seconds",
			Help: "When the server last accepted a request.",
		}),
		sendTimes: f.NewHistogram(prometheus.HistogramOpts{
			Name:                        "tailroot_agent_remote_write_duration_seconds",
			Help:                        "Duration of remote write attempts.",
			NativeHistogramBucketFactor: 1.1,
		}),
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Run ships records until ctx is done or the queue is closed. A record in
// flight when ctx ends stays in the queue and is sent again next time. A
// queue error (a failed cursor write, say) is logged and retried after a
// backoff: the shipper stops only with ctx or the queue.
func (s *Shipper) Run(ctx context.Context) error {
	failures := 0
	for {
		err := s.next(ctx)
		switch {
		case err == nil:
			failures = 0
			continue
		case errors.Is(err, queue.ErrClosed) || ctx.Err() != nil:
			return nil
		}
		failures++
		wait := s.backoff.Delay(failures)
		s.log.Error("remote write: queue error; retrying", "err", err, "wait", wait)
		if err := s.sleep(ctx, wait); err != nil {
			return nil
		}
	}
}

func (s *Shipper) next(ctx context.Context) error {
	rec, err := s.q.Next(ctx)
	if err != nil {
		return err
	}
	return s.ship(ctx, rec)
}

// ship sends one record until it is delivered or rejected, then acks it.
func (s *Shipper) ship(ctx context.Context, rec queue.Record) error {
	for attempt := 1; ; attempt++ {
		start := time.Now()
		r := s.c.Write(ctx, rec.Data)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.sendTimes.Observe(time.Since(start).Seconds())
		s.requests.WithLabelValues(r.Outcome.String()).Inc()
		switch r.Outcome {
		case Delivered, Rejected:
			if r.Outcome == Rejected {
				s.log.Warn("remote write: server rejected data; dropping it", "status", r.Status, "err", r.Err, "record", rec.Pos.String())
			} else {
				s.lastSent.SetToCurrentTime()
				if attempt > 1 {
					s.log.Info("remote write: delivered after retries", "attempts", attempt)
				}
			}
			s.count(r)
			return s.q.Ack(rec)
		}
		s.retries.Inc()
		wait := s.backoff.Delay(attempt)
		if r.After > 0 {
			wait = min(r.After, s.opts.MaxRetryAfter)
		}
		if attempt == 1 || attempt%10 == 0 {
			s.log.Warn("remote write failed; retrying", "attempt", attempt, "status", r.Status, "err", r.Err, "wait", wait)
		}
		if err := s.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// count adds the written counts the server reported. A 400 of tailroot
// carries them too: the rest of a partly bad request was kept.
func (s *Shipper) count(r Result) {
	for kind, n := range map[string]int{"sample": r.Samples, "histogram": r.Histograms, "exemplar": r.Exemplars} {
		if n > 0 {
			s.written.WithLabelValues(kind).Add(float64(n))
		}
	}
}
