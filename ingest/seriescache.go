package ingest

import (
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
)

// seriesCache maps the raw label pairs of an incoming series to the sorted,
// validated labels.Labels built for it and the storage reference the head
// returned. A hit skips label allocation, validation and the head's hash
// lookup; a miss costs one map insert. A stale reference (the head dropped
// the series) is harmless: the appender falls back to the labels.
//
// Keys are 64-bit hashes of the raw pairs; a hit is confirmed by comparing
// the cached labels with the raw pairs, so a hash collision costs a rebuild,
// never a wrong series.
//
// Memory is bounded by two generations: when the current map reaches half
// the capacity it becomes the previous one, and entries found there move
// back. Series unseen for a whole generation are forgotten.
type seriesCache struct {
	shards [cacheShards]cacheShard
}

const cacheShards = 16

type cacheShard struct {
	mu        sync.Mutex
	cur, prev map[uint64]cacheEntry
	max       int
}

type cacheEntry struct {
	ls  labels.Labels
	ref storage.SeriesRef
}

func newSeriesCache(size int) *seriesCache {
	if size <= 0 {
		return nil
	}
	c := &seriesCache{}
	per := max(size/cacheShards/2, 16)
	for i := range c.shards {
		c.shards[i] = cacheShard{cur: map[uint64]cacheEntry{}, prev: map[uint64]cacheEntry{}, max: per}
	}
	return c
}

func (c *seriesCache) get(h uint64) (cacheEntry, bool) {
	s := &c.shards[h%cacheShards]
	s.mu.Lock()
	e, ok := s.cur[h]
	if !ok {
		if e, ok = s.prev[h]; ok {
			s.putLocked(h, e)
		}
	}
	s.mu.Unlock()
	return e, ok
}

func (c *seriesCache) put(h uint64, e cacheEntry) {
	s := &c.shards[h%cacheShards]
	s.mu.Lock()
	s.putLocked(h, e)
	s.mu.Unlock()
}

func (s *cacheShard) putLocked(h uint64, e cacheEntry) {
	if len(s.cur) >= s.max {
		s.prev = s.cur
		s.cur = make(map[uint64]cacheEntry, s.max)
	}
	s.cur[h] = e
}

// mix folds the hash of one label name or value into a series key. Keys
// only pick a cache slot — a hit is confirmed by comparing the labels — so
// the fold needs to spread bits well, not resist attacks.
func mix(h, x uint64) uint64 {
	h ^= x
	h *= 0x9e3779b97f4a7c15
	return h ^ (h >> 29)
}

// seriesKeyBytes returns the cache key of raw label pairs.
func seriesKeyBytes(pairs [][2][]byte) uint64 {
	h := uint64(len(pairs))
	for _, p := range pairs {
		h = mix(h, xxhash.Sum64(p[0]))
		h = mix(h, xxhash.Sum64(p[1]))
	}
	return h
}

// seriesKeyRefs returns the cache key of symbolized label pairs, from the
// per-request hashes of the symbols (each symbol is hashed once per request,
// however many series use it). It equals seriesKeyBytes of the same pairs.
func seriesKeyRefs(refs []uint32, symHash []uint64) uint64 {
	h := uint64(len(refs) / 2)
	for _, r := range refs {
		h = mix(h, symHash[r])
	}
	return h
}
