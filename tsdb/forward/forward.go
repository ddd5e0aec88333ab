package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/storage/remote"
	"go.yaml.in/yaml/v2"
)

// Options configures the forwarder. Every field says what its zero value
// means; start from DefaultOptions.
type Options struct {
	// Dir is the TSDB data directory; the WAL watchers read Dir/wal.
	// Required.
	Dir string
	// FlushDeadline is how long Close waits for the queues to deliver the
	// samples they already hold before dropping them. Zero or negative means
	// one minute, Prometheus' --storage.remote.flush-deadline default.
	FlushDeadline time.Duration
	// DrainTimeout is how long Close waits for the watchers to read the WAL
	// to its end (and for a full queue to make room) before the queues are
	// stopped. Zero
	// means FlushDeadline; negative means no wait (Prometheus' behaviour).
	DrainTimeout time.Duration
	// HeadMaxTime returns the newest timestamp in the TSDB's head; Close
	// has nothing to drain while it is older than the queues' start, and is
	// done early once every queue has sent a sample that new. Nil means no
	// drain wait.
	HeadMaxTime func() int64
	// NotifyInterval is how often the watchers are woken even without a
	// write: a commit that lands while a watcher is still reading has its
	// notification skipped, and Prometheus' watcher then waits up to 15s
	// before it looks again. Zero means one second; negative means never.
	NotifyInterval time.Duration
	// Logger receives the queue managers' logs; nil discards them.
	Logger *slog.Logger
	// Registerer receives the prometheus_remote_storage_* and
	// prometheus_wal_watcher_* metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// DefaultOptions returns a one minute flush deadline and a drain bounded by
// it, as Prometheus' defaults, and a one second wake-up.
func DefaultOptions() Options {
	return Options{FlushDeadline: time.Minute, NotifyInterval: time.Second}
}

// Forwarder is the set of remote-write queues of the configuration in
// force. It implements wlog.WriteNotified so the TSDB can wake its watchers
// after each commit (tsdb.DB.SetWriteNotified).
type Forwarder struct {
	opts    Options
	storage *remote.Storage
	reg     *capture
	logger  *slog.Logger

	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	queues int
	closed bool
	// appliedMs is when the queues were last (re)configured: their watchers
	// forward only samples stamped after it, so Close waits for no older one.
	appliedMs int64
	// minCapacity is the smallest queue_config.capacity (samples per
	// shard) of the queues in force.
	minCapacity int
}

// New starts a forwarder with no queues; ApplyConfig starts them.
func New(opts Options) (*Forwarder, error) {
	if opts.Dir == "" {
		return nil, errors.New("forward: data dir is empty")
	}
	if opts.FlushDeadline <= 0 {
		opts.FlushDeadline = time.Minute
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = opts.FlushDeadline
	}
	if opts.NotifyInterval == 0 {
		opts.NotifyInterval = time.Second
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// No scrape manager: Prometheus sends RW 1.0 metadata from its scrape
	// cache, which a push-only server has none of (the queue then sends no
	// metadata); RW 2.0 queues send the metadata records of the WAL. The
	// start-time callback only serves remote read.
	startTime := func() (int64, error) { return math.MaxInt64, nil }
	reg := &capture{next: opts.Registerer}
	st := remote.NewStorage(logger, reg, startTime, opts.Dir, opts.FlushDeadline, nil, false)
	f := &Forwarder{opts: opts, storage: st, reg: reg, logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
	go f.wake()
	return f, nil
}

func (f *Forwarder) wake() {
	defer close(f.done)
	if f.opts.NotifyInterval < 0 {
		return
	}
	tick := time.NewTicker(f.opts.NotifyInterval)
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
			f.storage.Notify()
		}
	}
}

// ApplyConfig starts, replaces or stops queues so that they match the
// remote_write section and external labels of c. A queue whose entry and
// the external labels are unchanged keeps running (its client is swapped
// for new credentials). It is what a configuration reload calls; on error
// the queues already in force keep running.
func (f *Forwarder) ApplyConfig(c *config.Config) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("forward: apply config after close")
	}
	if err := validate(c); err != nil {
		return err
	}
	// Only the write side: remote_read is served elsewhere, and its errors
	// must not stop forwarding.
	wc := *c
	wc.RemoteReadConfigs = nil
	if err := f.storage.ApplyConfig(&wc); err != nil {
		return fmt.Errorf("apply remote_write config: %w", err)
	}
	f.queues = len(c.RemoteWriteConfigs)
	f.appliedMs = time.Now().UnixMilli()
	f.minCapacity = math.MaxInt
	for _, rw := range c.RemoteWriteConfigs {
		f.minCapacity = min(f.minCapacity, rw.QueueConfig.Capacity)
		// Prometheus' default, but tailroot's latency series are native
		// histograms: say so rather than drop them quietly.
		if !rw.SendNativeHistograms {
			f.logger.Warn("remote_write entry does not set send_native_histograms: true; native histograms (tailroot's latency and derived series) are not forwarded to it", "url", rw.URL.Redacted(), "name", rw.Name)
		}
	}
	if f.queues > 0 {
		f.logger.Info("forwarding to remote_write endpoints", "queues", f.queues, "external_labels", c.GlobalConfig.ExternalLabels.String())
	}
	return nil
}

// validate refuses what the remote storage would refuse half-way through
// applying it (a duplicate entry, a client that cannot be built), which
// would leave a running queue it no longer tracks: Prometheus checks a
// configuration before it applies it, and so does a reload here.
func validate(c *config.Config) error {
	seen := map[string]int{}
	for i, rw := range c.RemoteWriteConfigs {
		b, err := yaml.Marshal(rw)
		if err != nil {
			return fmt.Errorf("remote_write[%d] %s: %w", i, rw.URL.Redacted(), err)
		}
		if j, dup := seen[string(b)]; dup {
			return fmt.Errorf("remote_write[%d] %s duplicates remote_write[%d]; duplicate entries are not allowed", i, rw.URL.Redacted(), j)
		}
		seen[string(b)] = i
		if _, err := remote.NewWriteClient("validate", &remote.ClientConfig{
			URL:              rw.URL,
			WriteProtoMsg:    rw.ProtobufMessage,
			Timeout:          rw.RemoteTimeout,
			HTTPClientConfig: rw.HTTPClientConfig,
			SigV4Config:      rw.SigV4Config,
			AzureADConfig:    rw.AzureADConfig,
			GoogleIAMConfig:  rw.GoogleIAMConfig,
			Headers:          rw.Headers,
			RetryOnRateLimit: rw.QueueConfig.RetryOnRateLimit,
			RoundRobinDNS:    rw.RoundRobinDNS,
		}); err != nil {
			return fmt.Errorf("remote_write[%d] %s: %w", i, rw.URL.Redacted(), err)
		}
	}
	return nil
}

// Notify wakes the WAL watchers; the TSDB calls it after every commit. It
// never blocks.
func (f *Forwarder) Notify() { f.storage.Notify() }

// LowestSentTimestamp is the oldest of the queues' newest sent timestamps
// (milliseconds); 0 when no queue runs.
func (f *Forwarder) LowestSentTimestamp() int64 { return f.storage.LowestSentTimestamp() }

// Close lets the watchers catch up with the WAL (up to DrainTimeout), then
// stops the queues, which deliver what they hold for up to FlushDeadline.
// Callers stop appending first.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	queues, since := f.queues, f.appliedMs
	f.mu.Unlock()
	if queues > 0 && f.opts.HeadMaxTime != nil && f.opts.DrainTimeout > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), f.opts.DrainTimeout)
		if err := f.drain(ctx, since); err != nil {
			f.logger.Warn("remote_write queues did not catch up before stopping; unsent samples stay in the local TSDB only", "err", err, "lowest_sent_ms", f.LowestSentTimestamp(), "head_max_ms", f.opts.HeadMaxTime())
		}
		cancel()
	}
	close(f.stop)
	<-f.done
	if err := f.storage.Close(); err != nil {
		return fmt.Errorf("close remote storage: %w", err)
	}
	return nil
}

// drain returns once the watchers have read the WAL to its end and the
// queues hold nothing unsent, or every queue has sent a sample from the
// same second as the head's newest one (the queues keep their newest sent
// timestamp in whole seconds); samples older than since are skipped by the
// watchers and not waited for. A queue whose receiver is down keeps samples
// pending, so drain then runs until ctx ends.
func (f *Forwarder) drain(ctx context.Context, since int64) error {
	for {
		maxT := f.opts.HeadMaxTime()
		if maxT <= since {
			return nil
		}
		if f.LowestSentTimestamp() >= maxT-maxT%1000 {
			// The newest second went out; let the watchers read the rest of
			// that second's records, which the queues' stop then sends.
			f.Notify()
			select {
			case <-ctx.Done():
			case <-time.After(drainWindow):
			}
			return nil
		}
		idle, err := f.idle(ctx)
		if err != nil {
			return err
		}
		if idle {
			return nil
		}
	}
}

// idle wakes the watchers throughout drainWindow (a watcher that was not
// yet waiting misses a notification) and reports whether, over it, none of
// them read a record or waited for room in a full queue, with fewer samples
// pending than one shard holds, so none can be full: the WAL has been read
// to its end, and the queues' stop sends what they hold without waiting for
// the batch deadline. Idleness, not timestamps, says a queue is done, since
// relabelling may have dropped the newest samples.
func (f *Forwarder) idle(ctx context.Context) (bool, error) {
	read := func() (float64, float64, float64, error) {
		r, err1 := f.reg.sum("prometheus_wal_watcher_records_read_total")
		q, err2 := f.reg.sum("prometheus_remote_storage_enqueue_retries_total")
		p1, err3 := f.reg.sum("prometheus_remote_storage_samples_pending")
		p2, err4 := f.reg.sum("prometheus_remote_storage_histograms_pending")
		return r, q, p1 + p2, errors.Join(err1, err2, err3, err4)
	}
	r0, q0, _, err := read()
	if err != nil {
		return false, fmt.Errorf("read queue metrics: %w", err)
	}
	tick := time.NewTicker(drainWindow / 10)
	defer tick.Stop()
	end := time.After(drainWindow)
	for waiting := true; waiting; {
		f.Notify()
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("drain: %w", ctx.Err())
		case <-end:
			waiting = false
		case <-tick.C:
		}
	}
	r1, q1, pending, err := read()
	if err != nil {
		return false, fmt.Errorf("read queue metrics: %w", err)
	}
	f.mu.Lock()
	capacity := f.minCapacity
	f.mu.Unlock()
	return r1 == r0 && q1 == q0 && pending < float64(capacity), nil
}

// drainWindow is how long a drain watches the queues for activity; a
// notified watcher reads what remains of a segment in well under it.
const drainWindow = 250 * time.Millisecond
