package fast

import "github.com/prometheus/prometheus/storage"

// ChunkSource is implemented by a queryable that can serve chunks only
// some of the time: the global view reads the local TSDB's chunks while
// no remote store is in force, and merges samples from the stores
// otherwise. ChunkQueryable returns the chunk queryable to read instead of
// the sample querier, or false for "read samples". The answer holds for one
// evaluation: a queryable whose stores change between the call and the
// reads answers that evaluation as it was when it started.
type ChunkSource interface {
	ChunkQueryable() (storage.ChunkQueryable, bool)
}

// chunkQueryable says where the evaluator reads chunks from: a
// ChunkSource's answer, else q itself where it serves chunks.
func chunkQueryable(q storage.Queryable) (storage.ChunkQueryable, bool) {
	if s, ok := q.(ChunkSource); ok {
		return s.ChunkQueryable()
	}
	c, ok := q.(storage.ChunkQueryable)
	return c, ok
}
