package records

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// walImage builds a WAL file image with one entry per batch and returns it
// with the offset where each entry starts.
func walImage(t testing.TB, batches [][]Record) ([]byte, []int) {
	t.Helper()
	data := walHeader{PartStart: testPart, PartDur: 7_200_000}.Marshal(nil)
	var offs []int
	for _, b := range batches {
		offs = append(offs, len(data))
		data = appendEntry(data, (&walBatch{Records: b}).Marshal(nil))
	}
	return data, offs
}

func testBatches(rng *rand.Rand, n int) ([][]Record, []Record) {
	var batches [][]Record
	var all []Record
	for i := range n {
		var b []Record
		for j := range 1 + rng.IntN(4) {
			b = append(b, randRecord(rng, testPart+int64(i*10+j), rng.IntN(80)))
		}
		batches = append(batches, b)
		all = append(all, b...)
	}
	return batches, all
}

func TestWALHeaderLayout(t *testing.T) {
	h := walHeader{PartStart: 7_200_000, PartDur: 7_200_000}
	b := h.Marshal(nil)
	want := []byte{'T', 'R', 'W', 'L', 1, 0, 0, 0, 0x00, 0xdd, 0x6d, 0, 0, 0, 0, 0, 0x00, 0xdd, 0x6d, 0, 0, 0, 0, 0}
	if len(b) != walHeaderLen || !bytes.Equal(b[:24], want) {
		t.Fatalf("header % x, want % x + crc", b, want)
	}
	var got walHeader
	if _, err := got.Unmarshal(b); err != nil || got != h {
		t.Fatalf("round trip %+v, %v", got, err)
	}
	b[9] ^= 1
	if _, err := got.Unmarshal(b); err == nil {
		t.Fatal("flipped header decoded")
	}
}

func TestReplayIntact(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	batches, all := testBatches(rng, 20)
	data, _ := walImage(t, batches)
	_, recs, good, err := replayWAL("x.wal", data)
	if err != nil || good != len(data) {
		t.Fatalf("good %d of %d, err %v", good, len(data), err)
	}
	requireSameRecords(t, recs, all)
}

func TestReplayTornTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	batches, all := testBatches(rng, 6)
	data, offs := walImage(t, batches)
	last := offs[len(offs)-1]
	acked := all[:len(all)-len(batches[len(batches)-1])]

	check := func(t *testing.T, img []byte) {
		t.Helper()
		_, recs, good, err := replayWAL("x.wal", img)
		if err != nil {
			t.Fatalf("replay: %v", err)
		}
		if good != last {
			t.Fatalf("intact prefix %d, want %d", good, last)
		}
		requireSameRecords(t, recs, acked)
	}
	t.Run("cut anywhere in the last entry", func(t *testing.T) {
		for n := last; n < len(data); n++ {
			check(t, data[:n])
		}
	})
	t.Run("zero fill after a cut", func(t *testing.T) {
		for _, n := range []int{last, last + 3, last + 8, last + 40, len(data) - 1} {
			img := append(bytes.Clone(data[:n]), make([]byte, 4096)...)
			check(t, img)
		}
	})
	t.Run("garbage after a cut", func(t *testing.T) {
		for range 50 {
			n := last + rng.IntN(len(data)-last)
			img := bytes.Clone(data[:n])
			for range rng.IntN(300) + 1 {
				img = append(img, byte(rng.Uint32()))
			}
			check(t, img)
		}
	})
	t.Run("bit flip in the last entry", func(t *testing.T) {
		// Indistinguishable from a torn write: the entry is dropped.
		for i := last; i < len(data); i++ {
			img := bytes.Clone(data)
			img[i] ^= 0x04
			check(t, img)
		}
	})
}

func TestReplayCorruptMiddle(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	batches, _ := testBatches(rng, 6)
	data, offs := walImage(t, batches)
	// Flip every byte of entry 2 (length, header crc, payload, trailer).
	for i := offs[2]; i < offs[3]; i++ {
		img := bytes.Clone(data)
		img[i] ^= 0x10
		_, _, _, err := replayWAL("/data/x.wal", img)
		var ce *CorruptionError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d: err %v, want CorruptionError", i, err)
		}
		if ce.File != "/data/x.wal" || ce.Offset != int64(offs[2]) {
			t.Fatalf("flip at %d: error names %s offset %d, want offset %d", i, ce.File, ce.Offset, offs[2])
		}
		if !strings.Contains(err.Error(), "/data/x.wal") {
			t.Fatalf("message %q lacks the file name", err)
		}
	}
}

func TestReplayRejectsForeignRecords(t *testing.T) {
	r := randRecord(rand.New(rand.NewPCG(27, 28)), testPart+7_200_000, 3) // next partition
	data, _ := walImage(t, [][]Record{{r}})
	if _, _, _, err := replayWAL("x.wal", data); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("record outside the WAL's partition: %v", err)
	}
}
