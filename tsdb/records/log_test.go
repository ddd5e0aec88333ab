package records

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/tsdb/wlog"
)

// seedLogBatches are batch payloads with and without meta, one and several
// records.
func seedLogBatches() [][]byte {
	rng := rand.New(rand.NewPCG(81, 82))
	var out [][]byte
	for i, n := range []int{1, 3} {
		b := logBatch{Seq: uint64(7 + i), Gen: 2, PartStart: t0, PartDur: partDur.Milliseconds()}
		for j := range n {
			b.Records = append(b.Records, randRecord(rng, t0+int64(j), 2+j))
		}
		out = append(out, b.Marshal(nil))
		b.Meta = make([][]byte, n)
		for j := range b.Meta {
			b.Meta[j] = bytes.Repeat([]byte{byte(j)}, j*3)
		}
		out = append(out, b.Marshal(nil))
	}
	return out
}

// FuzzLogBatch decodes WAL batch payloads: no panic, and what decodes
// re-encodes to bytes that decode to the same batch.
func FuzzLogBatch(f *testing.F) {
	for _, s := range seedLogBatches() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var b logBatch
		if _, err := b.Unmarshal(data); err != nil {
			return
		}
		var b2 logBatch
		if tail, err := b2.Unmarshal(b.Marshal(nil)); err != nil || len(tail) != 0 {
			t.Fatalf("re-decode: %v, %d bytes left", err, len(tail))
		}
		if b2.Seq != b.Seq || b2.Gen != b.Gen || b2.PartStart != b.PartStart || b2.PartDur != b.PartDur || len(b2.Meta) != len(b.Meta) {
			t.Fatalf("header %+v, re-decoded %+v", b, b2)
		}
		for i := range b.Meta {
			if !bytes.Equal(b.Meta[i], b2.Meta[i]) {
				t.Fatalf("meta %d: %q, re-decoded %q", i, b.Meta[i], b2.Meta[i])
			}
		}
		requireSameRecords(t, b2.Records, b.Records)
	})
}

// TestLogBatchLayout pins the fixed-width head of a batch payload against
// docs/format/records.md: type, seq u64 LE, generation u32 LE, then
// uvarint start and duration, flags, count u32 LE.
func TestLogBatchLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(83, 84))
	r := randRecord(rng, t0, 1)
	b := logBatch{Seq: 0x0102030405060708, Gen: 0x0a0b0c0d, PartStart: t0, PartDur: 600_000, Records: []Record{r}, Meta: [][]byte{[]byte("m")}}
	got := b.Marshal(nil)
	want := []byte{1, 8, 7, 6, 5, 4, 3, 2, 1, 0x0d, 0x0c, 0x0b, 0x0a}
	want = appendUvarintTest(want, uint64(t0))
	want = appendUvarintTest(want, 600_000)
	want = append(want, 1, 1, 0, 0, 0) // flags: meta; one record (u32 LE)
	want = r.Marshal(want)
	want = append(want, 1, 'm')
	if !bytes.Equal(got, want) {
		t.Fatalf("batch payload\n got %x\nwant %x", got, want)
	}
	if d := appendDrop(nil, 300); !bytes.Equal(d, []byte{2, 0xac, 0x02}) {
		t.Fatalf("drop payload %x", d)
	}
}

func appendUvarintTest(dst []byte, v uint64) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// TestHoldWALReplay: with HoldWAL, every batch after the last Release comes
// back from ReplayWAL with its meta, through seals, a Flush and a crash;
// sequence numbers keep growing across reopen even when every segment
// before the newest was truncated.
func TestHoldWALReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(85, 86))
	dir := t.TempDir()
	hold := func(o *Options) { o.HoldWAL = true; o.MaxSegmentBytes = 16 << 10 }
	s := openTest(t, dir, hold)
	type sent struct {
		seq  uint64
		recs []Record
		meta [][]byte
	}
	var all []sent
	appendOne := func(i int) {
		t.Helper()
		recs := []Record{randRecord(rng, t0+int64(i)*1000, 5), randRecord(rng, t0+tenMin+int64(i), 5)}
		meta := [][]byte{[]byte(fmt.Sprintf("a%d", i)), []byte(fmt.Sprintf("b%d", i))}
		seq, err := s.AppendBatch(recs, meta)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, sent{seq, recs, meta})
	}
	for i := range 40 {
		appendOne(i)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	released := all[19].seq
	if err := s.Release(released); err != nil {
		t.Fatal(err)
	}
	for i := 40; i < 50; i++ {
		appendOne(i)
	}
	crash(s)
	s = openTest(t, dir, hold)
	replayed := map[string][]byte{}
	var last uint64
	err := s.ReplayWAL(released, func(b LoggedBatch) error {
		if b.Seq <= last || b.Seq <= released {
			return fmt.Errorf("batch %d after %d (released %d)", b.Seq, last, released)
		}
		last = b.Seq
		for i := range b.Records {
			replayed[b.Records[i].RequestID] = b.Meta[i]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all[20:] {
		for i, r := range a.recs {
			if m, ok := replayed[r.RequestID]; !ok || !bytes.Equal(m, a.meta[i]) {
				t.Fatalf("batch %d record %d: replayed meta %q (%v), want %q", a.seq, i, m, ok, a.meta[i])
			}
		}
	}
	if last != all[len(all)-1].seq || s.LastSeq() != last {
		t.Fatalf("last replayed %d, LastSeq %d, want %d", last, s.LastSeq(), all[len(all)-1].seq)
	}
	var want []Record
	for _, a := range all {
		want = append(want, a.recs...)
	}
	requireSameRecords(t, selectAll(t, s, 0, 1<<62), sortedByTime(want))

	// Release everything and seal: only the newest segment with a batch is
	// left, and a reopen continues the sequence.
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(s.LastSeq()); err != nil {
		t.Fatal(err)
	}
	lastSeq := s.LastSeq()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 { // each reopen creates a segment; none holds a batch
		s = openTest(t, dir, hold)
		if err := s.Release(s.LastSeq()); err != nil {
			t.Fatal(err)
		}
		if got := s.LastSeq(); got != lastSeq {
			t.Fatalf("LastSeq %d after reopen, want %d", got, lastSeq)
		}
		s.Close()
	}
	s = openTest(t, dir, hold)
	defer s.Close()
	seq, err := s.AppendBatch([]Record{randRecord(rng, t0+5, 1)}, nil)
	if err != nil || seq != lastSeq+1 {
		t.Fatalf("append after reopen: seq %d, %v; want %d", seq, err, lastSeq+1)
	}
}

// TestWALTruncatedWhenSealed: without HoldWAL the log keeps only segments
// that hold open heads' batches (and the newest batch).
func TestWALTruncatedWhenSealed(t *testing.T) {
	rng := rand.New(rand.NewPCG(87, 88))
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	defer s.Close()
	for i := range 3 {
		if err := s.Append([]Record{randRecord(rng, t0+int64(i), 3)}); err != nil {
			t.Fatal(err)
		}
		// Cut a segment after each batch, as a full one would be, and let
		// the store see it as it sees the cuts its own writes make.
		s.mu.Lock()
		k, err := s.wal.w.NextSegmentSync()
		s.wal.cur = k
		s.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	segs := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, walDirName, "*"))
		return len(m)
	}
	if n := segs(); n != 4 {
		t.Fatalf("%d segments before the seal, want 4", n)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	// Nothing in the log is needed: one new segment holding the mark of
	// the newest sequence number is left.
	if n := segs(); n != 1 {
		t.Fatalf("%d segments after the seal, want 1", n)
	}
	first, _, err := wlog.Segments(filepath.Join(dir, walDirName))
	if err != nil || first != 4 {
		t.Fatalf("first segment %d (%v), want 4", first, err)
	}
	// A new open head keeps its segment; sealing it empties the log again.
	seq := s.LastSeq()
	if err := s.Append([]Record{randRecord(rng, t0+9, 3)}); err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyRetention(time.Now()); err != nil { // no retention: a no-op
		t.Fatal(err)
	}
	if n := segs(); n != 1 || s.LastSeq() != seq+1 {
		t.Fatalf("%d segments, LastSeq %d with a head open; want 1 and %d", n, s.LastSeq(), seq+1)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if first, last, err := wlog.Segments(filepath.Join(dir, walDirName)); err != nil || first != 5 || last != 5 {
		t.Fatalf("segments [%d, %d] (%v) after the second seal, want [5, 5]", first, last, err)
	}
}

// TestRetentionDropSurvivesReplay: a partition removed by retention while
// its head was open does not come back from the WAL on reopen.
func TestRetentionDropSurvivesReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(89, 90))
	dir := t.TempDir()
	ret := func(o *Options) { o.Retention = 15 * time.Minute }
	s := openTest(t, dir, ret)
	old := randRecord(rng, t0+1, 2)
	keep := randRecord(rng, t0+3*tenMin+1, 2)
	if err := s.Append([]Record{old}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append([]Record{keep}); err != nil {
		t.Fatal(err)
	}
	if err := s.ApplyRetention(time.UnixMilli(t0 + 3*tenMin + 2)); err != nil {
		t.Fatal(err)
	}
	crash(s)
	s = openTest(t, dir, ret)
	defer s.Close()
	requireSameRecords(t, selectAll(t, s, 0, 1<<62), []Record{keep})
	if _, err := os.Stat(filepath.Join(dir, walDirName)); err != nil {
		t.Fatal(err)
	}
}
