package resultscache

import (
	"container/list"
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/prometheus/promql/parser"
)

// Options configures a Cache. Every field says what its zero value means;
// start from DefaultOptions.
type Options struct {
	// MaxBytes bounds the estimated memory of all cached extents; the least
	// recently used queries are evicted above it. Zero or negative means
	// 256 MiB.
	MaxBytes int64
	// MaxEntryBytes bounds one query's cached extents: a larger result is
	// answered but not kept, so one wide query cannot empty the cache of
	// every dashboard panel. Zero or negative means MaxBytes/4.
	MaxEntryBytes int64
	// MaxFreshness: steps later than now − MaxFreshness are never cached
	// (Cortex' max_cache_freshness). Recent data is still arriving — scrape
	// lag, remote-write batching, agents flushing their disk queues — and
	// the newest steps of a dashboard change on every refresh anyway. Zero
	// means 10 minutes; negative caches up to now (tests).
	MaxFreshness time.Duration
	// Parser parses queries to decide whether they are cacheable; it must
	// know every function the wrapped engine accepts (a query it cannot
	// parse is passed through uncached). Nil means upstream PromQL's
	// parser without experimental features.
	Parser parser.Parser
	// KeyFrom adds what a request's context changes about its answer to
	// the cache key (the tenant, when tenancy is on). Nil adds nothing.
	KeyFrom func(context.Context) string
	// Bypass, when it returns true, passes every query through uncached:
	// while the queryable reads remote stores, whose writes the cache is
	// not told about. Nil means never.
	Bypass func() bool
	// StartTime returns the oldest sample time the storage holds; the cache
	// is emptied whenever it changes, since retention (by time or size)
	// removes the oldest blocks without a write the cache sees. Nil means
	// it is not checked.
	StartTime func() (int64, error)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Registerer receives the cache's metrics; nil registers nothing.
	Registerer prometheus.Registerer
}

// DefaultOptions is what `tailroot serve` caches with.
func DefaultOptions() Options {
	return Options{MaxBytes: 256 << 20, MaxFreshness: 10 * time.Minute}
}

// Cache keeps the results of range queries as step-aligned extents per
// query, and answers a range from the extents it has plus evaluations of
// only the missing parts. It is safe for concurrent use.
type Cache struct {
	opts Options

	mu       sync.Mutex
	entries  map[string]*entry
	lru      list.List // of *entry; front is the most recently used
	bytes    int64
	inflight map[*pending]struct{}
	start    int64 // last StartTime seen
	started  bool

	// highWater is at least the last step time of every cached or
	// in-flight extent: a write after it changes nothing cached, which
	// keeps the append path's call lock-free for in-order data.
	highWater atomic.Int64

	m metrics
}

// entry holds one query's (one key's) extents: non-overlapping, sorted by
// start, never adjacent (adjacent ones are merged).
type entry struct {
	key     string
	elem    *list.Element
	extents []*extent
	bytes   int64
}

// pending is a query between reading the cache and storing what it
// computed; an invalidation during that time lowers invalidFrom so that
// nothing computed from the old data is stored.
type pending struct {
	invalidFrom int64 // steps at or after it must not be stored
}

type metrics struct {
	hits, partial, misses, bypassed prometheus.Counter
	evictions, invalidations        prometheus.Counter
	stepsServed, stepsComputed      prometheus.Counter
	bytes, entries                  prometheus.Gauge
}

// New returns an empty cache.
func New(opts Options) *Cache {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 256 << 20
	}
	if opts.MaxEntryBytes <= 0 {
		opts.MaxEntryBytes = opts.MaxBytes / 4
	}
	if opts.MaxFreshness == 0 {
		opts.MaxFreshness = 10 * time.Minute
	}
	if opts.MaxFreshness < 0 {
		opts.MaxFreshness = 0
	}
	if opts.Parser == nil {
		opts.Parser = parser.NewParser(parser.Options{})
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Cache{opts: opts, entries: map[string]*entry{}, inflight: map[*pending]struct{}{}}
	c.highWater.Store(math.MinInt64)
	f := promauto.With(opts.Registerer)
	const ns = "tailroot_query_results_cache_"
	c.m = metrics{
		hits:          f.NewCounter(prometheus.CounterOpts{Name: ns + "hits_total", Help: "Range queries answered entirely from cached extents."}),
		partial:       f.NewCounter(prometheus.CounterOpts{Name: ns + "partial_hits_total", Help: "Range queries answered partly from cached extents, the missing steps evaluated."}),
		misses:        f.NewCounter(prometheus.CounterOpts{Name: ns + "misses_total", Help: "Cacheable range queries with no cached step."}),
		bypassed:      f.NewCounter(prometheus.CounterOpts{Name: ns + "bypassed_total", Help: "Range queries passed through uncached: not cacheable, asked not to be (Cache-Control: no-store, nocache=1, stats), or remote stores in force."}),
		evictions:     f.NewCounter(prometheus.CounterOpts{Name: ns + "evictions_total", Help: "Queries' extents evicted to stay under the size bound."}),
		invalidations: f.NewCounter(prometheus.CounterOpts{Name: ns + "invalidations_total", Help: "Writes, deletes or retention runs that removed cached steps."}),
		stepsServed:   f.NewCounter(prometheus.CounterOpts{Name: ns + "steps_served_total", Help: "Steps of range queries answered from the cache."}),
		stepsComputed: f.NewCounter(prometheus.CounterOpts{Name: ns + "steps_computed_total", Help: "Steps of cacheable range queries that were evaluated."}),
		bytes:         f.NewGauge(prometheus.GaugeOpts{Name: ns + "bytes", Help: "Estimated bytes of the cached extents."}),
		entries:       f.NewGauge(prometheus.GaugeOpts{Name: ns + "entries", Help: "Queries with cached extents."}),
	}
	return c
}

// Invalidate tells the cache that samples at or after minT were written or
// deleted: every cached step at or after minT is dropped, and queries in
// flight do not store such steps. The TSDB calls it after every commit with
// the lowest sample time of the commit. A step at time ts reads only
// samples at or before ts (cacheable refuses negative offsets and @), so
// steps before minT keep their answers.
func (c *Cache) Invalidate(minT int64) {
	if minT > c.highWater.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invalidateLocked(minT)
}

func (c *Cache) invalidateLocked(minT int64) {
	for p := range c.inflight {
		p.invalidFrom = min(p.invalidFrom, minT)
	}
	removed := false
	for _, e := range c.entries {
		kept := e.extents[:0]
		var bytes int64
		for _, x := range e.extents {
			switch {
			case x.end < minT:
				kept = append(kept, x)
				bytes += x.bytes
			case x.start < minT:
				removed = true
				t := x.crop(x.start, minT-1)
				kept = append(kept, t)
				bytes += t.bytes
			default:
				removed = true
			}
		}
		clear(e.extents[len(kept):])
		e.extents = kept
		c.bytes += bytes - e.bytes
		e.bytes = bytes
		if len(e.extents) == 0 {
			c.removeLocked(e)
		}
	}
	if removed {
		c.m.invalidations.Inc()
	}
	c.m.bytes.Set(float64(c.bytes))
}

// Reset drops everything cached (a configuration reload that may change
// answers: external labels, remote stores).
func (c *Cache) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.invalidateLocked(math.MinInt64)
}

// checkStartLocked empties the cache when the storage's oldest sample time
// moved: retention removed blocks, or a write older than everything held
// arrived.
func (c *Cache) checkStartLocked() {
	if c.opts.StartTime == nil {
		return
	}
	st, err := c.opts.StartTime()
	if err != nil {
		return
	}
	if c.started && st != c.start {
		c.invalidateLocked(math.MinInt64)
	}
	c.start, c.started = st, true
}

func (c *Cache) removeLocked(e *entry) {
	c.lru.Remove(e.elem)
	delete(c.entries, e.key)
	c.bytes -= e.bytes
	c.m.entries.Set(float64(len(c.entries)))
}

// lookup returns the extents cached for key that overlap [start, end] and
// registers a pending store. The extents are immutable; the caller may
// read them without the lock.
func (c *Cache) lookup(key string, start, end, storeEnd int64) ([]*extent, *pending) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checkStartLocked()
	p := &pending{invalidFrom: math.MaxInt64}
	c.inflight[p] = struct{}{}
	if storeEnd > c.highWater.Load() {
		c.highWater.Store(storeEnd)
	}
	e := c.entries[key]
	if e == nil {
		return nil, p
	}
	c.lru.MoveToFront(e.elem)
	var out []*extent
	for _, x := range e.extents {
		if x.end >= start && x.start <= end {
			out = append(out, x)
		}
	}
	return out, p
}

// done ends a pending store without storing.
func (c *Cache) done(p *pending) {
	c.mu.Lock()
	delete(c.inflight, p)
	c.mu.Unlock()
}

// store adds x to key's extents, merging it with the ones it overlaps or
// touches (x's steps win where they overlap: they are at least as new),
// unless an invalidation during the query cut it, then evicts least
// recently used queries above the size bound.
func (c *Cache) store(key string, step int64, x *extent, p *pending) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.inflight, p)
	c.checkStartLocked()
	if p.invalidFrom <= x.end {
		if p.invalidFrom <= x.start {
			return
		}
		x = x.crop(x.start, p.invalidFrom-1)
	}
	if x.empty() {
		return
	}
	e := c.entries[key]
	if e == nil {
		e = &entry{key: key}
		e.elem = c.lru.PushFront(e)
		c.entries[key] = e
		c.m.entries.Set(float64(len(c.entries)))
	} else {
		c.lru.MoveToFront(e.elem)
	}
	var before, after []*extent
	parts := []*extent{}
	for _, o := range e.extents {
		switch {
		case o.end+step < x.start:
			before = append(before, o)
		case o.start > x.end+step:
			after = append(after, o)
		default:
			if o.start < x.start {
				parts = append(parts, o.crop(o.start, x.start-step))
			}
			if o.end > x.end {
				parts = append(parts, o.crop(x.end+step, o.end))
			}
		}
	}
	parts = append(parts, x)
	merged := concat(parts, step)
	exts := make([]*extent, 0, len(before)+1+len(after))
	exts = append(exts, before...)
	exts = append(exts, merged)
	exts = append(exts, after...)
	var bytes int64
	for _, o := range exts {
		bytes += o.bytes
	}
	if bytes > c.opts.MaxEntryBytes {
		// Keep what was there rather than nothing: the entry's old
		// extents still answer their steps.
		if len(e.extents) == 0 {
			c.removeLocked(e)
		}
		return
	}
	c.bytes += bytes - e.bytes
	e.extents, e.bytes = exts, bytes
	for c.bytes > c.opts.MaxBytes {
		last := c.lru.Back().Value.(*entry)
		c.removeLocked(last)
		c.m.evictions.Inc()
	}
	c.m.bytes.Set(float64(c.bytes))
}

// Bytes is the estimated size of everything cached.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Len is the number of queries with cached extents.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
