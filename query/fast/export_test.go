package fast

import (
	"context"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
)

// BlockWalkUsed reports whether a chunk read of ms over [mint, maxt]
// from q goes block by block (blockWalk) rather than through the merge.
func BlockWalkUsed(q storage.ChunkQueryable, mint, maxt int64, ms ...*labels.Matcher) (bool, error) {
	w, err := openBlockWalk(context.Background(), q, &storage.SelectHints{Start: mint, End: maxt}, ms)
	if w == nil || err != nil {
		return false, err
	}
	w.close()
	return true, nil
}
