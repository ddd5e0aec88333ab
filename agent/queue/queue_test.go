package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func open(t *testing.T, dir string, opts Options) *Queue {
	t.Helper()
	q, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// payload returns a 100-byte record whose content names i.
func payload(i int) []byte {
	b := bytes.Repeat([]byte{'.'}, 100)
	copy(b, fmt.Sprintf("record %04d", i))
	return b
}

func next(t *testing.T, q *Queue) Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := q.Next(ctx)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	return r
}

func wantRecord(t *testing.T, r Record, i int) {
	t.Helper()
	if !bytes.Equal(r.Data, payload(i)) {
		t.Fatalf("got record %q, want %q", r.Data[:11], payload(i)[:11])
	}
}

func empty(t *testing.T, q *Queue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if r, err := q.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want an empty queue, got %q, %v", r.Data, err)
	}
}

func TestAppendNextAck(t *testing.T) {
	for _, p := range []FsyncPolicy{FsyncAlways, FsyncInterval, FsyncNever} {
		t.Run(p.String(), func(t *testing.T) {
			dir := t.TempDir()
			q := open(t, dir, Options{Fsync: p, FsyncInterval: 5 * time.Millisecond})
			for i := range 5 {
				if err := q.Append(payload(i)); err != nil {
					t.Fatal(err)
				}
			}
			r := next(t, q)
			wantRecord(t, r, 0)
			// Without Ack, Next returns the same record.
			wantRecord(t, next(t, q), 0)
			if err := q.Ack(r); err != nil {
				t.Fatal(err)
			}
			r = next(t, q)
			wantRecord(t, r, 1)
			if err := q.Ack(r); err != nil {
				t.Fatal(err)
			}
			st := q.Stats()
			if st.Pending != 3 || st.Appended != 5 || st.Acked != 2 || st.PendingBytes != 3*108 {
				t.Fatalf("stats %+v, want 3 pending (324 bytes), 5 appended, 2 acked", st)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			// Reopen: the cursor survived, the rest is still there.
			q = open(t, dir, Options{Fsync: p})
			if st := q.Stats(); st.Pending != 3 {
				t.Fatalf("after reopen: %d pending, want 3", st.Pending)
			}
			for i := 2; i < 5; i++ {
				r := next(t, q)
				wantRecord(t, r, i)
				if err := q.Ack(r); err != nil {
					t.Fatal(err)
				}
			}
			empty(t, q)
		})
	}
}

// TestCrashWithoutClose abandons a queue (no Close, no Ack for the record
// in flight) and opens the directory again, as a restarted agent would.
func TestCrashWithoutClose(t *testing.T) {
	dir := t.TempDir()
	q1, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := q1.Append(payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		r := next(t, q1)
		wantRecord(t, r, i)
		if err := q1.Ack(r); err != nil {
			t.Fatal(err)
		}
	}
	wantRecord(t, next(t, q1), 2) // sent, never acknowledged: "crash"

	q2 := open(t, dir, Options{})
	for i := 2; i < 5; i++ {
		r := next(t, q2)
		wantRecord(t, r, i)
		if err := q2.Ack(r); err != nil {
			t.Fatal(err)
		}
	}
	empty(t, q2)
	q1.closeFiles()
}

func TestTornTailTruncated(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, Options{})
	for i := range 3 {
		if err := q.Append(payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	q.Close()
	// A crash in the middle of the fourth write: its header and 30 of its
	// 100 payload bytes reached the file.
	seg := filepath.Join(dir, fmt.Sprintf("%020d.seg", 1))
	torn := AppendRecord(nil, payload(3))[:38]
	f, err := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(torn)
	f.Close()

	q = open(t, dir, Options{})
	st := q.Stats()
	// 8-byte segment header + 3 × (8 + 100) = 332 bytes kept, 38 cut.
	if st.TruncatedBytes != 38 || st.Bytes != 332 || st.Pending != 3 {
		t.Fatalf("stats %+v, want 38 truncated, 332 bytes, 3 pending", st)
	}
	if err := q.Append(payload(3)); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		r := next(t, q)
		wantRecord(t, r, i)
		q.Ack(r)
	}
	empty(t, q)
}

// Segment geometry used below: SegmentBytes 1024 holds the 8-byte header and
// 9 records of 108 bytes (8 + 9×108 = 980; a tenth would make 1088 > 1024).
var small = Options{SegmentBytes: 1024, MaxBytes: 2048}

func TestBoundedDropOldest(t *testing.T) {
	q := open(t, t.TempDir(), small)
	for i := range 20 {
		if err := q.Append(payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Worked by hand: records 0-8 fill segment 1 (980 bytes), 9-17 segment
	// 2 (980). Record 18 rolls to segment 3 (8 bytes): 980+980+8+108 =
	// 2076 > 2048, so segment 1 and its 9 unsent records (9 × 108 = 972
	// bytes) go. Record 19 joins segment 3: 980 + 8 + 2×108 = 1204 bytes.
	st := q.Stats()
	if st.DroppedRecords != 9 || st.DroppedBytes != 972 || st.Pending != 11 || st.Bytes != 1204 || st.Segments != 2 {
		t.Fatalf("stats %+v, want 9 dropped (972 bytes), 11 pending, 1204 bytes in 2 segments", st)
	}
	for i := 9; i < 20; i++ {
		r := next(t, q)
		wantRecord(t, r, i)
		if err := q.Ack(r); err != nil {
			t.Fatal(err)
		}
	}
	empty(t, q)
	if st := q.Stats(); st.Segments != 1 || st.Bytes != 8+2*108 {
		t.Fatalf("read-through segments not deleted: %+v", st)
	}
}

func TestDropWhileSending(t *testing.T) {
	q := open(t, t.TempDir(), small)
	for i := range 18 {
		q.Append(payload(i))
	}
	for i := range 3 {
		r := next(t, q)
		wantRecord(t, r, i)
		q.Ack(r)
	}
	inFlight := next(t, q)
	wantRecord(t, inFlight, 3)
	q.Append(payload(18)) // drops segment 1: records 3..8 were unsent
	if st := q.Stats(); st.DroppedRecords != 6 || st.DroppedBytes != 6*108 {
		t.Fatalf("stats %+v, want 6 dropped (648 bytes)", st)
	}
	// The late Ack of the dropped record must not move the cursor back.
	if err := q.Ack(inFlight); err != nil {
		t.Fatal(err)
	}
	wantRecord(t, next(t, q), 9)
}

func TestCorruptRecordSkipsSegment(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, small)
	for i := range 12 {
		q.Append(payload(i))
	}
	q.Close()
	// Flip a payload byte of record 1 in sealed segment 1: it starts at
	// 8 + 108 = 116, its payload at 124.
	seg := filepath.Join(dir, fmt.Sprintf("%020d.seg", 1))
	b, _ := os.ReadFile(seg)
	b[124+50] ^= 0xff
	os.WriteFile(seg, b, 0o640)

	q = open(t, dir, small)
	r := next(t, q)
	wantRecord(t, r, 0)
	q.Ack(r)
	// Records 1..8 of segment 1 are lost with it; reading goes on at 9.
	r = next(t, q)
	wantRecord(t, r, 9)
	if st := q.Stats(); st.CorruptRecords != 8 {
		t.Fatalf("corrupt records %d, want 8", st.CorruptRecords)
	}
}

func TestBadCursorStartsAtOldest(t *testing.T) {
	dir := t.TempDir()
	q := open(t, dir, Options{})
	for i := range 3 {
		q.Append(payload(i))
	}
	r := next(t, q)
	q.Ack(r)
	q.Close()
	os.WriteFile(filepath.Join(dir, "cursor"), []byte("garbage"), 0o640)
	q = open(t, dir, Options{})
	wantRecord(t, next(t, q), 0) // resend rather than skip
}

func TestNextWaitsAndClose(t *testing.T) {
	q := open(t, t.TempDir(), Options{})
	got := make(chan Record, 1)
	go func() {
		r, err := q.Next(context.Background())
		if err == nil {
			got <- r
		}
	}()
	time.Sleep(10 * time.Millisecond)
	q.Append(payload(7))
	select {
	case r := <-got:
		wantRecord(t, r, 7)
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not wake on Append")
	}
	errc := make(chan error, 1)
	go func() {
		r, _ := q.Next(context.Background())
		q.Ack(r)
		_, err := q.Next(context.Background())
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	q.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	if err := q.Append(payload(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
}

func TestOptionErrors(t *testing.T) {
	for name, o := range map[string]Options{
		"max below two segments": {SegmentBytes: 1 << 20, MaxBytes: 1 << 20},
		"tiny segment":           {SegmentBytes: 10, MaxBytes: 100},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Open(t.TempDir(), o); err == nil {
				t.Fatal("no error")
			}
		})
	}
	q := open(t, t.TempDir(), small)
	if err := q.Append(make([]byte, 1100)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized record: %v", err)
	}
	if _, err := ParseFsyncPolicy("sometimes"); err == nil {
		t.Fatal("bad fsync policy accepted")
	}
}

func TestCursorRoundTrip(t *testing.T) {
	p := Position{Segment: 42, Offset: 1234}
	b := MarshalCursor(p)
	got, err := UnmarshalCursor(b)
	if err != nil || got != p {
		t.Fatalf("round trip: %v %v", got, err)
	}
	b[10] ^= 1
	if _, err := UnmarshalCursor(b); err == nil {
		t.Fatal("flipped bit not detected")
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add(AppendRecord(nil, []byte("hello")))
	f.Add(AppendRecord(nil, nil))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, tail, err := DecodeRecord(b, 1<<20)
		if err != nil {
			return
		}
		re := AppendRecord(nil, p)
		if !bytes.Equal(re, b[:len(b)-len(tail)]) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func FuzzUnmarshalCursor(f *testing.F) {
	f.Add(MarshalCursor(Position{Segment: 1, Offset: 8}))
	f.Add([]byte("TRQC"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := UnmarshalCursor(b)
		if err != nil {
			return
		}
		if !bytes.Equal(MarshalCursor(p), b) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// FuzzOpenSegment opens a queue over an arbitrary segment file: it must not
// panic, and whatever it returns must be records that pass their CRC.
func FuzzOpenSegment(f *testing.F) {
	good := append(segmentHeader(), AppendRecord(nil, []byte("abc"))...)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte("TRQS"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.seg", 1)), b, 0o640)
		q, err := Open(dir, Options{Fsync: FsyncNever, SegmentBytes: 1 << 16, MaxBytes: 1 << 17})
		if err != nil {
			return
		}
		defer q.Close()
		for range 100 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			r, err := q.Next(ctx)
			cancel()
			if err != nil {
				return
			}
			framed := AppendRecord(nil, r.Data)
			if _, _, err := DecodeRecord(framed, 1<<16); err != nil {
				t.Fatal(err)
			}
			q.Ack(r)
		}
	})
}
