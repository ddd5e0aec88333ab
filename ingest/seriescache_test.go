package ingest

import (
	"testing"

	"github.com/cespare/xxhash/v2"
)

// The 1.0 and 2.0 paths compute keys differently; a series must get the
// same key either way, and different label sets different keys.
func TestSeriesKeysAgree(t *testing.T) {
	syms := []string{"", "__name__", "m", "instance", "a", "b"}
	symHash := make([]uint64, len(syms))
	for i, s := range syms {
		symHash[i] = xxhash.Sum64String(s)
	}
	refs := []uint32{1, 2, 3, 4}
	pairs := [][2][]byte{{[]byte("__name__"), []byte("m")}, {[]byte("instance"), []byte("a")}}
	if seriesKeyRefs(refs, symHash) != seriesKeyBytes(pairs) {
		t.Fatal("keys of the same pairs differ between 1.0 and 2.0")
	}
	other := []uint32{1, 2, 3, 5}
	swapped := []uint32{3, 4, 1, 2}
	nameValueSwap := []uint32{2, 1, 4, 3}
	for _, r := range [][]uint32{other, swapped, nameValueSwap, {1, 2}} {
		if seriesKeyRefs(r, symHash) == seriesKeyRefs(refs, symHash) {
			t.Errorf("refs %v collide with %v", r, refs)
		}
	}
	c := newSeriesCache(64)
	c.put(1, cacheEntry{ref: 7})
	for i := uint64(2); i < 200; i++ {
		c.put(i*cacheShards+1, cacheEntry{ref: 1})
	}
	if _, ok := c.get(1); ok {
		t.Error("cache kept an entry past two generations of its shard")
	}
}
