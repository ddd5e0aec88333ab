package history

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/tsdb/records"
)

// Reader reads the exported history of one node back as records. Manifests
// are immutable, so each is fetched once and kept; a query lists the
// manifest prefix (one LIST) and reads only the files of the segments and
// hours it overlaps. Safe for concurrent use.
type Reader struct {
	bkt  Bucket
	node string

	mu    sync.Mutex
	cache map[string]manifest // by key
}

// NewReader reads the history node exported into bkt.
func NewReader(bkt Bucket, node string) (*Reader, error) {
	if err := ValidNode(node); err != nil {
		return nil, fmt.Errorf("history reader: %w", err)
	}
	return &Reader{bkt: bkt, node: node, cache: map[string]manifest{}}, nil
}

// histPart is one record partition as found in history: its segments in
// seq order.
type histPart struct {
	start int64
	segs  []manifest
}

// partitions returns, in time order, the partitions with exported segments
// overlapping [mint, maxt], leaving out the segments skip reports (held
// locally).
func (r *Reader) partitions(ctx context.Context, mint, maxt int64, skip func(manifest) bool) ([]histPart, error) {
	keys, err := r.bkt.List(ctx, manifestPrefix(r.node))
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	byStart := map[int64]*histPart{}
	for _, k := range keys {
		if !strings.HasSuffix(k, ".json") {
			continue
		}
		m, err := r.manifest(ctx, k)
		if err != nil {
			return nil, err
		}
		if m.MaxTime < mint || m.MinTime > maxt || skip(m) {
			continue
		}
		p := byStart[m.PartStart]
		if p == nil {
			p = &histPart{start: m.PartStart}
			byStart[m.PartStart] = p
		}
		p.segs = append(p.segs, m)
	}
	out := make([]histPart, 0, len(byStart))
	for _, p := range byStart {
		slices.SortFunc(p.segs, func(a, b manifest) int { return a.Seq - b.Seq })
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b histPart) int { return cmpInt64(a.start, b.start) })
	return out, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (r *Reader) manifest(ctx context.Context, key string) (manifest, error) {
	r.mu.Lock()
	m, ok := r.cache[key]
	r.mu.Unlock()
	if ok {
		return m, nil
	}
	data, err := r.bkt.Get(ctx, key)
	if err != nil {
		return manifest{}, fmt.Errorf("read history: %w", err)
	}
	if m, err = decodeManifest(key, data); err != nil {
		return manifest{}, fmt.Errorf("read history: %w", err)
	}
	if m.Node != r.node {
		return manifest{}, fmt.Errorf("read history: manifest %s is of node %q", key, m.Node)
	}
	r.mu.Lock()
	r.cache[key] = m
	r.mu.Unlock()
	return m, nil
}

// load returns the records of partition p with mint ≤ Time ≤ maxt matching
// ms, in the order the local store would return them: segments in seq
// order, each in its own (time) order, then a stable sort by time.
func (r *Reader) load(ctx context.Context, p histPart, mint, maxt int64, ms []*labels.Matcher) ([]records.Record, error) {
	var out []records.Record
	for _, m := range p.segs {
		for _, f := range m.Files {
			if f.MaxTime < mint || f.MinTime > maxt {
				continue
			}
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			data, err := r.bkt.Get(ctx, f.Key)
			if err != nil {
				return nil, fmt.Errorf("read history: %w", err)
			}
			recs, meta, err := decodeFile(data)
			if err != nil {
				return nil, fmt.Errorf("read history %s: %w", f.Key, err)
			}
			if err := checkFile(f, m, meta, recs); err != nil {
				return nil, fmt.Errorf("read history %s: %w", f.Key, err)
			}
			for i := range recs {
				rec := &recs[i]
				if rec.Time >= mint && rec.Time <= maxt && matchesAll(ms, rec.Labels) {
					out = append(out, *rec)
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b records.Record) int { return cmpInt64(a.Time, b.Time) })
	return out, nil
}

// checkFile checks a file against the manifest entry that led to it.
func checkFile(f manifestFile, m manifest, meta fileMeta, recs []records.Record) error {
	if meta.Node != m.Node || meta.Segment != m.Segment || meta.PartStart != m.PartStart || meta.PartDur != m.PartDur {
		return fmt.Errorf("file metadata %+v does not match manifest of segment %s", meta, m.Segment)
	}
	if len(recs) != f.Records || recs[0].Time != f.MinTime || recs[len(recs)-1].Time != f.MaxTime {
		return fmt.Errorf("file holds %d records, manifest says %d in [%d, %d]", len(recs), f.Records, f.MinTime, f.MaxTime)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Time < recs[i-1].Time {
			return fmt.Errorf("row %d is out of time order", i)
		}
	}
	return nil
}

func matchesAll(ms []*labels.Matcher, ls labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(ls.Get(m.Name)) {
			return false
		}
	}
	return true
}
