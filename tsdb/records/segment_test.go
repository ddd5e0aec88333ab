package records

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

const testPart = int64(7_200_000) * 236_000 // a 2h-aligned start near 2023

func randSegment(rng *rand.Rand, n int, bits bool) Segment {
	s := Segment{PartitionStart: testPart, PartitionDuration: 7_200_000}
	for range n {
		var r Record
		if bits {
			r = randBitsRecord(rng)
		} else {
			r = randRecord(rng, 0, rng.IntN(100))
		}
		// Out of order, with ties, inside the partition.
		r.Time = testPart + rng.Int64N(1000)*7_200
		s.Records = append(s.Records, r)
	}
	return s
}

func TestSegmentRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 2, 3, 7, 8, 9, 100, 2000} {
		for _, bits := range []bool{false, true} {
			seg := randSegment(rng, n, bits)
			data := seg.Marshal([]byte("prefix"))
			if !bytes.HasPrefix(data, []byte("prefix")) {
				t.Fatal("Marshal did not append to dst")
			}
			var got Segment
			tail, err := got.Unmarshal(append(data[len("prefix"):], "tail"...))
			if err != nil {
				t.Fatalf("n=%d: %v", n, err)
			}
			if string(tail) != "tail" {
				t.Fatalf("n=%d: tail %q", n, tail)
			}
			if got.PartitionStart != seg.PartitionStart || got.PartitionDuration != seg.PartitionDuration {
				t.Fatalf("partition %d/%d", got.PartitionStart, got.PartitionDuration)
			}
			requireSameRecords(t, got.Records, sortedByTime(seg.Records))
		}
	}
}

func TestSegmentHeaderLayout(t *testing.T) {
	seg := Segment{PartitionStart: 7_200_000, PartitionDuration: 7_200_000, Records: []Record{
		{Time: 7_200_005, E2E: 0}, {Time: 7_200_001},
	}}
	data := seg.Marshal(nil)
	le := binary.LittleEndian
	if string(data[:4]) != "TRSG" || data[4] != 1 || data[5] != 1 {
		t.Fatalf("magic/version/codec % x", data[:6])
	}
	if le.Uint64(data[8:]) != 7_200_000 || le.Uint64(data[16:]) != 7_200_000 ||
		le.Uint64(data[24:]) != 7_200_001 || le.Uint64(data[32:]) != 7_200_005 || le.Uint32(data[40:]) != 2 {
		t.Fatalf("header % x", data[:52])
	}
	if comp := le.Uint32(data[48:]); len(data) != 52+int(comp)+4 {
		t.Fatalf("file %d bytes, compressed length %d", len(data), comp)
	}
	if crc := crc32.Checksum(data[:len(data)-4], crc32.MakeTable(crc32.Castagnoli)); crc != le.Uint32(data[len(data)-4:]) {
		t.Fatal("trailer is not crc32c of header and body")
	}
}

// TestSegmentColumnBytes checks column encodings against bytes worked out by
// hand from the format spec.
func TestSegmentColumnBytes(t *testing.T) {
	// 1.0 = 0x3FF0000000000000, 2.0 = 0x4000000000000000: plane 0 holds
	// the top bytes 3F 40, plane 1 F0 00, the rest zero.
	got := appendShuffled(nil, []float64{1, 2})
	want := []byte{0x3f, 0x40, 0xf0, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(got, want) {
		t.Fatalf("shuffled % x, want % x", got, want)
	}
	if shuffledAt(got, 2, 1) != 2 {
		t.Fatal("shuffledAt(1) != 2")
	}

	// Times 100 105 110 120 → varint 100, 5, dod 0, dod 5; zig-zag
	// doubles them: C8 01, 0A, 00, 0A.
	recs := []Record{{Time: 100}, {Time: 105}, {Time: 110}, {Time: 120}}
	recs[1].Labels = labels.FromStrings("a", "x")
	recs[2].TraceID = TraceID{0: 9}
	body := encodeBody(recs, []int{0, 1, 2, 3})
	// symbols: 2 ("a", "x"); sets: 2 ({} and {a="x"}).
	wantHead := []byte{2, 1, 'a', 1, 'x', 2, 0, 1, 0, 1}
	if !bytes.HasPrefix(body, wantHead) {
		t.Fatalf("tables % x, want % x", body[:len(wantHead)], wantHead)
	}
	cols := body[len(wantHead):]
	wantCols := [][]byte{
		{0xc8, 0x01, 0x0a, 0x00, 0x0a},                 // time
		{0, 1, 0, 0},                                   // label set ids
		append([]byte{0b0100, 9}, make([]byte, 15)...), // bitmap: row 2; then its id
		{0, 0, 0, 0},                                   // four empty request ids
	}
	for i, w := range wantCols {
		if int(cols[0]) != len(w) || !bytes.Equal(cols[1:1+len(w)], w) {
			t.Fatalf("column %d: % x, want length %d then % x", i, cols[:min(len(cols), 1+len(w))], len(w), w)
		}
		cols = cols[1+len(w):]
	}
}

// fixCRC rewrites a segment's trailer so a deliberate edit reaches the
// decoder behind the checksum.
func fixCRC(data []byte) {
	binary.LittleEndian.PutUint32(data[len(data)-4:], crc32.Checksum(data[:len(data)-4], castagnoli))
}

func TestSegmentRejects(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	seg := randSegment(rng, 50, false)
	good := seg.Marshal(nil)
	t.Run("every flipped byte", func(t *testing.T) {
		for i := range good {
			bad := bytes.Clone(good)
			bad[i] ^= 0x20
			var s Segment
			if _, err := s.Unmarshal(bad); err == nil {
				t.Fatalf("flip at %d decoded", i)
			}
		}
	})
	t.Run("every truncation", func(t *testing.T) {
		for n := 0; n < len(good); n += 7 {
			var s Segment
			if _, err := s.Unmarshal(good[:n]); err == nil {
				t.Fatalf("%d-byte prefix decoded", n)
			}
		}
	})
	edits := []struct {
		name, want string
		edit       func(b []byte)
	}{
		{"count too large for body", "records in a", func(b []byte) { binary.LittleEndian.PutUint32(b[40:], 1<<30) }},
		{"count one more", "", func(b []byte) { binary.LittleEndian.PutUint32(b[40:], binary.LittleEndian.Uint32(b[40:])+1) }},
		{"max time outside partition", "outside partition", func(b []byte) {
			binary.LittleEndian.PutUint64(b[32:], uint64(testPart+7_200_000))
		}},
		{"min time wrong", "header says", func(b []byte) {
			binary.LittleEndian.PutUint64(b[24:], binary.LittleEndian.Uint64(b[24:])-1)
		}},
		{"raw length wrong", "header says", func(b []byte) {
			binary.LittleEndian.PutUint32(b[44:], binary.LittleEndian.Uint32(b[44:])+1)
		}},
		{"unknown codec", "unsupported", func(b []byte) { b[5] = 2 }},
		{"unaligned partition", "bad partition start", func(b []byte) { binary.LittleEndian.PutUint64(b[8:], uint64(testPart+1)) }},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			bad := bytes.Clone(good)
			e.edit(bad)
			fixCRC(bad)
			var s Segment
			_, err := s.Unmarshal(bad)
			if err == nil || !strings.Contains(err.Error(), e.want) {
				t.Fatalf("Unmarshal = %v, want error mentioning %q", err, e.want)
			}
		})
	}
}

func TestSegmentCompresses(t *testing.T) {
	// Realistic records must compress well below their row encoding; the
	// benchmark reports exact numbers, this guards against a regression
	// that stores raw columns.
	rng := rand.New(rand.NewPCG(15, 16))
	seg := Segment{PartitionStart: testPart, PartitionDuration: 7_200_000}
	var rows int
	for i := range 5000 {
		r := randRecord(rng, testPart+int64(i)*5, 200)
		rows += len(r.Marshal(nil))
		seg.Records = append(seg.Records, r)
	}
	data := seg.Marshal(nil)
	if ratio := float64(len(data)) / float64(rows); ratio > 0.8 || math.IsNaN(ratio) {
		t.Fatalf("segment %d bytes for %d bytes of rows (ratio %.2f)", len(data), rows, ratio)
	}
	t.Logf("segment %.1f bytes/record, rows %.1f bytes/record", float64(len(data))/5000, float64(rows)/5000)
}
