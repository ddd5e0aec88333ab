package ingest

import (
	"context"
	"hash/crc32"
	"math"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tailroot/tailroot/tsdb"
	"github.com/tailroot/tailroot/tsdb/records"
)

// openTestDB opens a real TSDB in a temporary directory.
func openTestDB(t testing.TB) *tsdb.DB {
	t.Helper()
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	o.NoLockfile = true
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// testRecordsOptions derives series after every batch so tests read them
// right after Append.
func testRecordsOptions(dir string) RecordsOptions {
	o := DefaultRecordsOptions()
	o.Store.Dir = dir
	o.DeriveInterval = 0
	return o
}

func openTestRecords(t testing.TB, db *tsdb.DB, o RecordsOptions) *Records {
	t.Helper()
	p, err := NewRecords(db, db.Metadata, o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// crash abandons p as a killed process would: no flush, no checkpoint, and
// the files are closed so the directory can be reopened.
func crash(t testing.TB, p *Records) {
	t.Helper()
	if err := p.do(context.Background(), func() { p.abandoned = true }); err != nil {
		t.Fatal(err)
	}
	p.closeOnce.Do(func() {
		close(p.stop)
		<-p.done
		p.closeErr = p.closeFiles()
	})
}

// sample is the newest value of one series.
type sample struct {
	ls labels.Labels
	t  int64
	f  float64
	h  *histogram.Histogram
}

// lastSamples returns the newest sample of every series matching ms.
func lastSamples(t testing.TB, db *tsdb.DB, ms ...*labels.Matcher) []sample {
	t.Helper()
	q, err := db.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), true, nil, ms...)
	var out []sample
	var it chunkenc.Iterator
	for ss.Next() {
		s := ss.At()
		it = s.Iterator(it)
		var last sample
		last.ls = s.Labels()
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			switch vt {
			case chunkenc.ValFloat:
				last.t, last.f = it.At()
				last.h = nil
			case chunkenc.ValHistogram:
				last.t, last.h = it.AtHistogram(nil)
			default:
				t.Fatalf("series %s: unexpected value type %v", s.Labels(), vt)
			}
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		out = append(out, last)
	}
	if ss.Err() != nil {
		t.Fatal(ss.Err())
	}
	return out
}

// one returns the newest sample of the single series with these labels
// (name first, then label pairs).
func one(t testing.TB, db *tsdb.DB, name string, kv ...string) sample {
	t.Helper()
	ms := []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, name)}
	for i := 0; i+1 < len(kv); i += 2 {
		ms = append(ms, labels.MustNewMatcher(labels.MatchEqual, kv[i], kv[i+1]))
	}
	got := lastSamples(t, db, ms...)
	if len(got) != 1 {
		t.Fatalf("%s%v: %d series, want 1: %v", name, kv, len(got), got)
	}
	return got[0]
}

func exemplarsOf(t testing.TB, db *tsdb.DB, name string) []exemplar.Exemplar {
	t.Helper()
	eq, err := db.ExemplarQuerier(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := eq.Select(math.MinInt64, math.MaxInt64, []*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, model.MetricNameLabel, name)})
	if err != nil {
		t.Fatal(err)
	}
	var out []exemplar.Exemplar
	for _, r := range res {
		out = append(out, r.Exemplars...)
	}
	return out
}

func selectAllRecords(t testing.TB, s *records.Store) []records.Record {
	t.Helper()
	it := s.Select(context.Background(), math.MinInt64, math.MaxInt64)
	defer it.Close()
	var out []records.Record
	for it.Next() {
		out = append(out, it.At())
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return out
}

func approxEq(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// testItem builds a valid item with the given stages (other is filled).
func testItem(t testing.TB, ms int64, id string, ls labels.Labels, stages [records.NumStages]float64) Item {
	t.Helper()
	it := Item{Record: records.Record{Time: ms, Labels: ls, RequestID: id, Stages: stages}}
	var s float64
	for _, v := range stages[:records.StageOther] {
		s += v
	}
	it.Record.E2E = s + stages[records.StageOther]
	it.Record.Stages[records.StageOther] = 0
	if err := it.Record.FillOther(); err != nil {
		t.Fatal(err)
	}
	return it
}

var testNow = time.Now().Add(-time.Minute).UnixMilli()

// timeNowMinus returns a start time h hours ago, so simulated requests
// fall inside the TSDB's and the store's accepted range.
func timeNowMinus(h int) time.Time { return time.Now().Add(-time.Duration(h) * time.Hour) }

func crc32Castagnoli(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// fuzzTime is a fixed time an hour ago for fuzz seeds.
var fuzzTime = time.Now().Add(-time.Hour).Truncate(time.Second)
