package records

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// seedColumnBodies are raw segment bodies with the header fields the fuzz
// target needs: realistic rows and rows of arbitrary float bits.
type columnSeed struct {
	raw                    []byte
	count                  uint32
	mint, maxt, qmin, qmax int64
	want                   uint32
	msel                   uint8
}

func seedColumnBodies(tb testing.TB) []columnSeed {
	rng := rand.New(rand.NewPCG(93, 94))
	var out []columnSeed
	for i, n := range []int{1, 5, 17} {
		seg := randSegment(rng, n, i == 1)
		raw, h, _, err := decompressSegment(seg.Marshal(nil), zstdDecoder(), maxRawBody, nil)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, columnSeed{raw, h.Count, h.MinT, h.MaxT, h.MinT + 7_200*int64(i), h.MaxT, uint32(ColumnAll), uint8(i)})
	}
	return out
}

// FuzzSegmentColumns runs the column read path on raw segment bodies. It
// must never panic, and on every body the full decoder accepts it must
// return exactly the full decoder's rows in [qmin, qmax] that pass the
// drawn matcher, bit for bit.
func FuzzSegmentColumns(f *testing.F) {
	for _, s := range seedColumnBodies(f) {
		f.Add(s.raw, s.count, s.mint, s.maxt, s.qmin, s.qmax, s.want, s.msel)
	}
	f.Fuzz(func(t *testing.T, raw []byte, count uint32, mint, maxt, qmin, qmax int64, want uint32, msel uint8) {
		h := segmentHeader{PartStart: testPart, PartDur: 7_200_000, MinT: mint, MaxT: maxt, Count: count, RawLen: uint32(len(raw))}
		if count == 0 || uint64(count)*minRowBytes > uint64(len(raw)) {
			return // readSegmentHeader rejects these before the body is read
		}
		var ms []*labels.Matcher
		if k := int(msel) % (len(testMatchers) + 1); k < len(testMatchers) {
			ms = []*labels.Matcher{testMatchers[k]}
		}
		cols := Columns(want) & ColumnAll
		b, err := selectBody(raw, &h, qmin, qmax, cols, ms)
		c, ferr := decodeBody(raw, &h)
		if ferr != nil {
			return // the column path may accept what it does not read
		}
		if err != nil {
			t.Fatalf("full decoder accepts the body, column path: %v", err)
		}
		requireColumnsEqual(t, b, bodyRows(c, qmin, qmax, ms), cols)
	})
}

// TestWriteColumnsFuzzCorpus writes the seeds above as committed corpus
// files (go test -run TestWriteColumnsFuzzCorpus -gen-corpus).
func TestWriteColumnsFuzzCorpus(t *testing.T) {
	if !*genCorpus {
		t.Skip("run with -gen-corpus to rewrite testdata/fuzz")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzSegmentColumns")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range seedColumnBodies(t) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nuint32(%d)\nint64(%d)\nint64(%d)\nint64(%d)\nint64(%d)\nuint32(%d)\nbyte(%d)\n",
			s.raw, s.count, s.mint, s.maxt, s.qmin, s.qmax, s.want, s.msel)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
