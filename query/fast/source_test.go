package fast_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/query/fast"
)

// chunkSource serves samples, and chunks only while on says so, counting
// the chunk queriers it opens.
type chunkSource struct {
	samplesQueryable
	c      storage.ChunkQueryable
	on     bool
	opened int
}

func (s *chunkSource) ChunkQueryable() (storage.ChunkQueryable, bool) {
	if !s.on {
		return nil, false
	}
	return s, true
}

func (s *chunkSource) ChunkQuerier(mint, maxt int64) (storage.ChunkQuerier, error) {
	s.opened++
	return s.c.ChunkQuerier(mint, maxt)
}

// TestChunkSource: a queryable that is no ChunkQueryable itself (as the
// server's global view) but says it can serve chunks has them read, and
// one that says it cannot has its samples read; both answers equal the
// TSDB's own.
func TestChunkSource(t *testing.T) {
	db := openDiffDB(t, 5)
	plan := mustCompile(t, `sum by (job) (rate(req_total[5m]))`)
	start := diffStart.Add(time.Hour)
	eval := func(q storage.Queryable) parser.Value {
		m, _, err := plan.Range(context.Background(), q, fast.DefaultOptions(), start, start.Add(time.Hour), 15*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) == 0 {
			t.Fatal("no series")
		}
		return m
	}
	want := eval(db)
	src := &chunkSource{samplesQueryable: samplesQueryable{db}, c: db, on: true}
	if d := diffValues(want, eval(src), false); d != "" {
		t.Errorf("over chunks from the source:\n%s", d)
	}
	if src.opened != 1 {
		t.Errorf("chunk queriers opened %d, want 1", src.opened)
	}
	src.on, src.opened = false, 0
	if d := diffValues(want, eval(src), false); d != "" {
		t.Errorf("over the source's samples:\n%s", d)
	}
	if src.opened != 0 {
		t.Errorf("a source serving no chunks had %d chunk queriers opened", src.opened)
	}
}
