package tenant

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ActiveSeriesWindow is how long a series counts as active after its last
// sample for Limits.MaxActiveSeries: Mimir's default idle timeout.
const ActiveSeriesWindow = 20 * time.Minute

// seriesSweepEvery bounds how often the active-series tracker of a tenant
// at its limit looks for series that went idle.
const seriesSweepEvery = 10 * time.Second

// limiter holds the state of one tenant's limits. Every field but l is nil
// when its limit is off.
type limiter struct {
	id      string
	l       Limits
	samples *rate.Limiter
	records *rate.Limiter
	queries chan struct{}
	now     func() time.Time

	mu        sync.Mutex
	series    map[uint64]int64 // label-set hash → last write, Unix ns
	reserved  int              // new series of appenders not yet committed
	lastSweep time.Time
}

func newLimiter(id string, l Limits, now func() time.Time) *limiter {
	lim := &limiter{id: id, l: l, now: now}
	if l.SamplesPerSecond > 0 {
		lim.samples = rate.NewLimiter(rate.Limit(l.SamplesPerSecond), burst(l.SamplesBurst, l.SamplesPerSecond))
	}
	if l.RecordsPerSecond > 0 {
		lim.records = rate.NewLimiter(rate.Limit(l.RecordsPerSecond), burst(l.RecordsBurst, l.RecordsPerSecond))
	}
	if l.MaxConcurrentQueries > 0 {
		lim.queries = make(chan struct{}, l.MaxConcurrentQueries)
	}
	if l.MaxActiveSeries > 0 {
		lim.series = map[uint64]int64{}
	}
	return lim
}

// burst is a configured burst, or one second of the rate (at least 1).
func burst(b int, perSecond float64) int {
	if b > 0 {
		return b
	}
	return max(int(perSecond), 1)
}

// Limits returns the limits in force for t.
func (t *Tenant) Limits() Limits {
	if t == nil || t.lim == nil {
		return Limits{}
	}
	return t.lim.l
}

// AllowSamples takes n samples from the tenant's samples/s budget, or
// refuses them all with a *LimitError.
func (t *Tenant) AllowSamples(n int) error {
	if t == nil || t.lim == nil {
		return nil
	}
	return t.lim.take(t.lim.samples, n, "samples_per_second", t.lim.l.SamplesPerSecond, "samples")
}

// AllowRecords takes n request records from the tenant's records/s
// budget, or refuses them all with a *LimitError.
func (t *Tenant) AllowRecords(n int) error {
	if t == nil || t.lim == nil {
		return nil
	}
	return t.lim.take(t.lim.records, n, "records_per_second", t.lim.l.RecordsPerSecond, "request records")
}

func (l *limiter) take(rl *rate.Limiter, n int, name string, value float64, what string) error {
	if rl == nil || n <= 0 {
		return nil
	}
	now := l.now()
	r := rl.ReserveN(now, n)
	if !r.OK() {
		return &LimitError{
			Tenant: l.id, Limit: name, Value: value, RetryAfter: time.Second,
			Detail: fmt.Sprintf("a write of %d %s is over the burst of %d; send smaller writes", n, what, rl.Burst()),
		}
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return &LimitError{
			Tenant: l.id, Limit: name, Value: value, RetryAfter: d,
			Detail: fmt.Sprintf("a write of %d %s would exceed the rate", n, what),
		}
	}
	return nil
}

// AcquireQuery takes one of the tenant's query slots; release gives it
// back. With every slot taken it refuses at once with a *LimitError.
func (t *Tenant) AcquireQuery() (release func(), err error) {
	if t == nil || t.lim == nil || t.lim.queries == nil {
		return func() {}, nil
	}
	select {
	case t.lim.queries <- struct{}{}:
		return func() { <-t.lim.queries }, nil
	default:
		return nil, &LimitError{
			Tenant: t.ID, Limit: "max_concurrent_queries", Value: float64(t.lim.l.MaxConcurrentQueries),
			RetryAfter: time.Second, Detail: "every query slot of the tenant is in use",
		}
	}
}

// SeriesBatch tracks the series one appender writes for the tenant's
// active-series limit: Add each series' label hash before appending it,
// then Commit after the appender committed, or Rollback.
type SeriesBatch struct {
	lim     *limiter
	touched []uint64
	fresh   map[uint64]struct{}
}

// Series starts a batch; nil (no tracking) when the limit is off.
func (t *Tenant) Series() *SeriesBatch {
	if t == nil || t.lim == nil || t.lim.series == nil {
		return nil
	}
	return &SeriesBatch{lim: t.lim}
}

// Add admits the series with label hash h, or refuses it with a
// *LimitError when it is new and the tenant has MaxActiveSeries active
// series already (counting those other writes are adding).
func (b *SeriesBatch) Add(h uint64) error {
	if b == nil {
		return nil
	}
	l := b.lim
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.series[h]; ok {
		b.touched = append(b.touched, h)
		return nil
	}
	if _, ok := b.fresh[h]; ok {
		return nil
	}
	if len(l.series)+l.reserved >= l.l.MaxActiveSeries {
		l.sweepLocked()
	}
	if len(l.series)+l.reserved >= l.l.MaxActiveSeries {
		return &LimitError{
			Tenant: l.id, Limit: "max_active_series", Value: float64(l.l.MaxActiveSeries),
			RetryAfter: time.Minute,
			Detail: fmt.Sprintf("%d series were written in the last %s; a series counts until it has had no sample for that long",
				len(l.series), ActiveSeriesWindow),
		}
	}
	if b.fresh == nil {
		b.fresh = map[uint64]struct{}{}
	}
	b.fresh[h] = struct{}{}
	l.reserved++
	return nil
}

// sweepLocked forgets series idle for ActiveSeriesWindow, at most once
// per seriesSweepEvery.
func (l *limiter) sweepLocked() {
	now := l.now()
	if now.Sub(l.lastSweep) < seriesSweepEvery {
		return
	}
	l.lastSweep = now
	cut := now.Add(-ActiveSeriesWindow).UnixNano()
	for h, last := range l.series {
		if last < cut {
			delete(l.series, h)
		}
	}
}

// Commit records the batch's series as written now.
func (b *SeriesBatch) Commit() {
	if b == nil {
		return
	}
	l := b.lim
	now := l.now().UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range b.touched {
		l.series[h] = now
	}
	for h := range b.fresh {
		l.series[h] = now
	}
	l.reserved -= len(b.fresh)
	b.fresh, b.touched = nil, nil
}

// Rollback gives back the batch's reservations.
func (b *SeriesBatch) Rollback() {
	if b == nil {
		return
	}
	b.lim.mu.Lock()
	b.lim.reserved -= len(b.fresh)
	b.lim.mu.Unlock()
	b.fresh, b.touched = nil, nil
}
