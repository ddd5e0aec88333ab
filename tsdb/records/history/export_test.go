package history

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tailroot/tailroot/tsdb/records"
)

// t0 is 2026-11-28T00:00:00Z.
var t0 = time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC).UnixMilli()

const hour = int64(time.Hour / time.Millisecond)

// fillStore appends n records over [t0, t0+span) in two batches with a
// flush between them, so partitions get two segments each (the second
// batch lands in sealed partitions as later generations).
func fillStore(t *testing.T, s *records.Store, rng *rand.Rand, n int, span time.Duration) []records.Record {
	t.Helper()
	recs := genRecords(rng, n, t0, span)
	for _, half := range [][]records.Record{recs[:n/2], recs[n/2:]} {
		for i := 0; i < len(half); i += 5000 {
			if err := s.Append(half[i:min(i+5000, len(half))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return recs
}

// failingBucket fails every Put after the first `after`, as a process
// killed mid-export would stop writing.
type failingBucket struct {
	Bucket
	mu    sync.Mutex
	after int
	puts  int
}

var errInjected = errors.New("injected put failure")

func (b *failingBucket) Put(ctx context.Context, key string, data []byte) error {
	b.mu.Lock()
	b.puts++
	fail := b.puts > b.after
	b.mu.Unlock()
	if fail {
		return errInjected
	}
	return b.Bucket.Put(ctx, key, data)
}

// TestExportLayout checks keys, partition values and manifests against
// the records, computed here from the records' own times.
func TestExportLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	s := openStore(t, t.TempDir(), 0, nil)
	recs := fillStore(t, s, rng, 4000, 6*time.Hour)
	bkt, err := NewDirBucket(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	exp, err := NewExporter(s, bkt, ExportOptions{Node: "node.a", Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	// Before any export the history is empty and Source is the store.
	rd, _ := NewReader(bkt, "node.a")
	if got := collect(t, NewSource(s, rd, SourceOptions{}).Select(context.Background(), t0, t0+6*hour)); len(got) != len(recs) {
		t.Fatalf("source over an empty history: %d records, want %d", len(got), len(recs))
	}
	st, err := exp.ExportPending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	refs, _ := s.Segments()
	if st.Segments != len(refs) || st.Records != len(recs) {
		t.Fatalf("exported %+v, store has %d segments of %d records", st, len(refs), len(recs))
	}
	if got := testutil.ToFloat64(exp.m.records); got != float64(len(recs)) || testutil.ToFloat64(exp.m.pending) != 0 {
		t.Fatalf("metrics: %v records exported, %v pending", got, testutil.ToFloat64(exp.m.pending))
	}
	// Expected keys: for every segment, one file per UTC hour holding rows.
	want := map[string]int{}
	for _, ref := range refs {
		seg, crc, err := records.ReadSegmentFile(ref.Path)
		if err != nil {
			t.Fatal(err)
		}
		id := segmentID(ref.PartitionStart, ref.Seq, crc)
		for _, r := range seg.Records {
			tm := time.UnixMilli(r.Time).UTC()
			want[fmt.Sprintf("date=%s/hour=%d/node.a-%s.parquet", tm.Format("2006-01-02"), tm.Hour(), id)]++
		}
	}
	keys, err := bkt.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var files, manifests int
	for _, k := range keys {
		if strings.HasPrefix(k, "_manifest/node.a/") {
			manifests++
			continue
		}
		n, ok := want[k]
		if !ok {
			t.Fatalf("unexpected key %s", k)
		}
		data, _ := bkt.Get(context.Background(), k)
		got, _, err := decodeFile(data)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("%s: %d rows, want %d", k, len(got), n)
		}
		files++
	}
	if files != len(want) || manifests != len(refs) || st.Files != files {
		t.Fatalf("%d files (want %d, stats %d), %d manifests (want %d)", files, len(want), st.Files, manifests, len(refs))
	}
	// 6 hours over 3 partitions, two generations each.
	if len(refs) != 6 || files != 12 {
		t.Fatalf("%d segments, %d files; want 6 and 12", len(refs), files)
	}
}

// TestExportCrashIdempotent interrupts an export after every possible
// number of puts, restarts it with a fresh exporter and checks that the
// bucket ends with every record exactly once and no file twice.
func TestExportCrashIdempotent(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	s := openStore(t, t.TempDir(), 0, nil)
	recs := fillStore(t, s, rng, 2000, 4*time.Hour)
	refs, _ := s.Segments()
	ctx := context.Background()
	for after := 0; ; after++ {
		dir := t.TempDir()
		base, err := NewDirBucket(dir)
		if err != nil {
			t.Fatal(err)
		}
		crashing, _ := NewExporter(s, &failingBucket{Bucket: base, after: after}, ExportOptions{Node: "n"})
		_, crashErr := crashing.ExportPending(ctx)
		if p := testutil.ToFloat64(crashing.m.pending); (crashErr != nil) != (p > 0) {
			t.Fatalf("after %d puts: error %v but %v segments pending", after, crashErr, p)
		}
		for _, ref := range refs {
			if crashErr != nil && !crashing.Held(ref) {
				// Marked done only with its manifest written.
				seg, crc, _ := records.ReadSegmentFile(ref.Path)
				if ok, _ := base.Exists(ctx, manifestKey("n", segmentID(seg.PartitionStart, ref.Seq, crc))); !ok {
					t.Fatalf("after %d puts: %s not held but has no manifest", after, ref.Name)
				}
			}
		}
		restarted, _ := NewExporter(s, base, ExportOptions{Node: "n"})
		st, err := restarted.ExportPending(ctx)
		if err != nil {
			t.Fatalf("after %d puts: restart: %v", after, err)
		}
		again, err := restarted.ExportPending(ctx)
		if err != nil || again != (ExportStats{}) {
			t.Fatalf("third pass wrote %+v, %v", again, err)
		}
		fresh, _ := NewExporter(s, base, ExportOptions{Node: "n"})
		if st, err := fresh.ExportPending(ctx); err != nil || st.Segments != 0 || st.Already != len(refs) {
			t.Fatalf("pass after restart: %+v, %v", st, err)
		}
		// Read every Parquet file the way an engine globbing the bucket
		// would and count rows by request id: each exactly once.
		keys, _ := base.List(ctx, "")
		seen := map[string]int{}
		for _, k := range keys {
			if !strings.HasSuffix(k, ".parquet") {
				continue
			}
			data, _ := base.Get(ctx, k)
			got, _, err := decodeFile(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range got {
				seen[r.RequestID]++
			}
		}
		if len(seen) != len(recs) {
			t.Fatalf("after %d puts: %d distinct records in bucket, want %d", after, len(seen), len(recs))
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("after %d puts: record %s stored %d times", after, id, n)
			}
		}
		if crashErr == nil {
			if st.Segments != 0 {
				t.Fatalf("complete first pass, yet restart wrote %+v", st)
			}
			t.Logf("interrupted after 0..%d puts; every restart completed the bucket exactly", after-1)
			return
		}
		if !errors.Is(crashErr, errInjected) {
			t.Fatal(crashErr)
		}
	}
}

// TestRetentionWaitsForExport: a partition past retention stays local
// until its segments are exported, and an open WAL is sealed (and so
// exported) rather than dropped.
func TestRetentionWaitsForExport(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	dir := t.TempDir()
	var exp *Exporter
	hold := func(ref records.SegmentRef) bool { return exp == nil || exp.Held(ref) }
	s := openStore(t, dir, 24*time.Hour, hold)
	recs := genRecords(rng, 3000, t0, 6*time.Hour)
	if err := s.Append(recs); err != nil { // stays in open WALs: no flush
		t.Fatal(err)
	}
	bkt, _ := NewDirBucket(t.TempDir())
	exp, _ = NewExporter(s, bkt, ExportOptions{Node: "n"})
	now := time.UnixMilli(t0 + 60*hour)
	if err := s.ApplyRetention(now); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Records != int64(len(recs)) || st.HeadRecords != 0 {
		t.Fatalf("before export: %+v; want all %d records kept, sealed", st, len(recs))
	}
	if _, err := exp.ExportPending(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyRetention(now); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Records != 0 {
		t.Fatalf("after export: %d records left", st.Records)
	}
	rd, _ := NewReader(bkt, "n")
	got := collect(t, NewSource(s, rd, SourceOptions{}).Select(context.Background(), t0, t0+6*hour))
	want := slices.Clone(recs)
	slices.SortStableFunc(want, func(a, b records.Record) int { return cmpInt64(a.Time, b.Time) })
	sameRecords(t, got, want)
}

// TestLateRecordAfterRestart: after retention removed an exported
// partition and the store restarted (its retention cutoff is not
// persisted), a late record recreates the partition locally. Queries
// must still see the exported records of that partition, plus the new one,
// each once.
func TestLateRecordAfterRestart(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(15, 16))
	dir := t.TempDir()
	var exp *Exporter
	hold := func(ref records.SegmentRef) bool { return exp == nil || exp.Held(ref) }
	o := records.DefaultOptions()
	o.Dir, o.Retention, o.RetentionHold = dir, 24*time.Hour, hold
	s, err := records.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	recs := genRecords(rng, 500, t0, 2*time.Hour)
	if err := s.Append(recs); err != nil {
		t.Fatal(err)
	}
	bkt, _ := NewDirBucket(t.TempDir())
	exp, _ = NewExporter(s, bkt, ExportOptions{Node: "n"})
	if err := s.ApplyRetention(time.UnixMilli(t0 + 48*hour)); err != nil { // seals, held
		t.Fatal(err)
	}
	if _, err := exp.ExportPending(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyRetention(time.UnixMilli(t0 + 48*hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	exp = nil
	s = openStore(t, dir, 24*time.Hour, hold)
	late := genRecord(rng, t0+hour)
	if err := s.Append([]records.Record{late}); err != nil {
		t.Fatal(err)
	}
	rd, _ := NewReader(bkt, "n")
	src := NewSource(s, rd, SourceOptions{})
	got := collect(t, src.Select(ctx, t0, t0+2*hour))
	want := filter(append(slices.Clone(recs), late), t0, t0+2*hour, "")
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d (500 exported and 1 late)", len(got), len(want))
	}
	seen := map[string]int{}
	for _, r := range got {
		seen[r.RequestID]++
	}
	for _, r := range want {
		if seen[r.RequestID] != 1 {
			t.Fatalf("record %s seen %d times", r.RequestID, seen[r.RequestID])
		}
	}
	// Once the late record is sealed and exported too, every segment of
	// the partition is in both places and is read once.
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	exp, _ = NewExporter(s, bkt, ExportOptions{Node: "n"})
	if _, err := exp.ExportPending(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := src.SelectColumns(ctx, t0, t0+2*hour, records.ColumnE2E)
	if err != nil {
		t.Fatal(err)
	}
	if b.Len != len(want) {
		t.Fatalf("after export of the late segment: %d rows, want %d", b.Len, len(want))
	}
}
