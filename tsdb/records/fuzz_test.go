package records

import (
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// Fuzz targets for every decoder. Seed corpora live in testdata/fuzz/<name>/
// and are rewritten with: go test -run TestWriteFuzzCorpus -gen-corpus

var genCorpus = flag.Bool("gen-corpus", false, "rewrite the seed corpora under testdata/fuzz")

func seedRecords() [][]byte {
	rng := rand.New(rand.NewPCG(61, 62))
	var out [][]byte
	for i := range 6 {
		var r Record
		if i%2 == 0 {
			r = randRecord(rng, t0+int64(i), []int{0, 3, 64, 200}[i%4])
		} else {
			r = randBitsRecord(rng)
		}
		out = append(out, r.Marshal(nil))
	}
	return out
}

func seedBatches() [][]byte {
	rng := rand.New(rand.NewPCG(63, 64))
	var out [][]byte
	for _, n := range []int{0, 1, 3} {
		b := walBatch{}
		for j := range n {
			b.Records = append(b.Records, randRecord(rng, testPart+int64(j), j*10))
		}
		out = append(out, b.Marshal(nil))
	}
	return out
}

func seedWALs(t testing.TB) [][]byte {
	rng := rand.New(rand.NewPCG(65, 66))
	batches, _ := testBatches(rng, 3)
	full, offs := walImage(t, batches)
	empty, _ := walImage(t, nil)
	return [][]byte{empty, full, full[:offs[2]+11], append(full[:offs[1]:offs[1]], make([]byte, 32)...)}
}

func seedSegments() [][]byte {
	rng := rand.New(rand.NewPCG(67, 68))
	var out [][]byte
	for _, n := range []int{1, 3, 9} {
		seg := randSegment(rng, n, n == 3)
		out = append(out, seg.Marshal(nil))
	}
	return out
}

func FuzzRecordUnmarshal(f *testing.F) {
	for _, s := range seedRecords() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Record
		tail, err := r.Unmarshal(data)
		if err != nil {
			return
		}
		if len(tail) > len(data) {
			t.Fatalf("tail %d longer than input %d", len(tail), len(data))
		}
		enc := r.Marshal(nil)
		var r2 Record
		tail2, err := r2.Unmarshal(enc)
		if err != nil || len(tail2) != 0 {
			t.Fatalf("re-decode: %v, %d bytes left", err, len(tail2))
		}
		if d := diffRecord(r, r2); d != "" {
			t.Fatalf("decode-encode-decode changed the record: %s", d)
		}
	})
}

func FuzzWALBatch(f *testing.F) {
	for _, s := range seedBatches() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var b walBatch
		if _, err := b.Unmarshal(data); err != nil {
			return
		}
		var b2 walBatch
		if tail, err := b2.Unmarshal(b.Marshal(nil)); err != nil || len(tail) != 0 {
			t.Fatalf("re-decode: %v, %d bytes left", err, len(tail))
		}
		requireSameRecords(t, b2.Records, b.Records)
	})
}

// FuzzWALReplay feeds whole WAL images to replay. Whatever the bytes, replay
// must not panic, and when it succeeds its intact prefix must replay to the
// same records with nothing torn.
func FuzzWALReplay(f *testing.F) {
	for _, s := range seedWALs(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, recs, good, err := replayWAL("fuzz.wal", data)
		if err != nil {
			return
		}
		if good < walHeaderLen || good > len(data) {
			t.Fatalf("intact prefix %d of %d bytes", good, len(data))
		}
		_, recs2, good2, err := replayWAL("fuzz.wal", data[:good])
		if err != nil || good2 != good {
			t.Fatalf("replaying the intact prefix: %v, prefix %d of %d", err, good2, good)
		}
		requireSameRecords(t, recs2, recs)
	})
}

// FuzzSegment decodes whole segment files. The target rewrites the trailing
// checksum so that mutations reach the decoder behind it.
func FuzzSegment(f *testing.F) {
	for _, s := range seedSegments() {
		f.Add(s)
	}
	dec := newDecoder(4 << 20)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= segHeaderLen+segTrailerLen {
			comp := int(binary.LittleEndian.Uint32(data[48:52]))
			if end := segHeaderLen + comp; comp >= 0 && end+segTrailerLen <= len(data) {
				binary.LittleEndian.PutUint32(data[end:], crc32.Checksum(data[:end], castagnoli))
			}
		}
		c, h, _, err := decodeSegment(data, dec, 4<<20)
		if err != nil {
			return
		}
		seg := Segment{PartitionStart: h.PartStart, PartitionDuration: h.PartDur}
		for k := range c.n {
			seg.Records = append(seg.Records, c.row(k))
		}
		var again Segment
		if _, err := again.Unmarshal(seg.Marshal(nil)); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		requireSameRecords(t, again.Records, seg.Records)
	})
}

// FuzzSegmentBody decodes raw (decompressed) bodies directly, since random
// mutations of a zstd frame rarely decompress.
func FuzzSegmentBody(f *testing.F) {
	for _, s := range seedSegments() {
		h, _ := readSegmentHeader(s)
		raw, err := zstdDecoder().DecodeAll(s[segHeaderLen:segHeaderLen+int(h.CompLen)], make([]byte, 0, h.RawLen))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw, h.Count, h.MinT, h.MaxT)
	}
	f.Fuzz(func(t *testing.T, raw []byte, count uint32, mint, maxt int64) {
		h := segmentHeader{PartStart: testPart, PartDur: 7_200_000, MinT: mint, MaxT: maxt, Count: count, RawLen: uint32(len(raw))}
		if count == 0 || uint64(count)*minRowBytes > uint64(len(raw)) {
			return // readSegmentHeader rejects these before the body is read
		}
		c, err := decodeBody(raw, &h)
		if err != nil {
			return
		}
		for k := range c.n {
			r := c.row(k)
			if r.Time < mint || r.Time > maxt || (k > 0 && r.Time < c.times[k-1]) {
				t.Fatalf("row %d time %d outside [%d, %d] or out of order", k, r.Time, mint, maxt)
			}
		}
	})
}

// TestWriteFuzzCorpus writes the seeds above as committed corpus files.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*genCorpus {
		t.Skip("run with -gen-corpus to rewrite testdata/fuzz")
	}
	write := func(target string, seeds [][]string) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, args := range seeds {
			body := "go test fuzz v1\n"
			for _, a := range args {
				body += a + "\n"
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	one := func(bs [][]byte) [][]string {
		var out [][]string
		for _, b := range bs {
			out = append(out, []string{fmt.Sprintf("[]byte(%q)", b)})
		}
		return out
	}
	write("FuzzRecordUnmarshal", one(seedRecords()))
	write("FuzzWALBatch", one(seedBatches()))
	write("FuzzWALReplay", one(seedWALs(t)))
	write("FuzzLogBatch", one(seedLogBatches()))
	write("FuzzSegment", one(seedSegments()))
	var bodies [][]string
	for _, s := range seedSegments() {
		h, _ := readSegmentHeader(s)
		raw, err := zstdDecoder().DecodeAll(s[segHeaderLen:segHeaderLen+int(h.CompLen)], make([]byte, 0, h.RawLen))
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, []string{
			fmt.Sprintf("[]byte(%q)", raw), fmt.Sprintf("uint32(%d)", h.Count),
			fmt.Sprintf("int64(%d)", h.MinT), fmt.Sprintf("int64(%d)", h.MaxT),
		})
	}
	write("FuzzSegmentBody", bodies)
}
