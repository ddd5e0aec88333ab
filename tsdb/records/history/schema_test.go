package history

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/tsdb/records"
)

func TestFileRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	recs := genRecords(rng, 3000, 1_796_133_600_000, 3600e3)
	// Edge cases: no labels, empty request id, extreme but valid values.
	recs[0].Labels = labels.EmptyLabels()
	recs[1].RequestID = ""
	recs[2].PromptTokens, recs[2].OutputTokens = math.MaxUint32, math.MaxUint32
	meta := fileMeta{Node: "n1", Segment: "1796133600000-000001-0000abcd", PartStart: 1_796_133_600_000, PartDur: 7_200_000}
	data, err := encodeFile(recs, meta)
	if err != nil {
		t.Fatal(err)
	}
	got, gotMeta, err := decodeFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if gotMeta != meta {
		t.Fatalf("meta %+v, want %+v", gotMeta, meta)
	}
	sameRecords(t, got, recs)
	var kept, negative, traced int
	for _, r := range got {
		if len(r.ITL.Values) > 0 {
			kept++
		}
		if r.Stages[records.StageOther] < 0 {
			negative++
		}
		if !r.TraceID.IsZero() {
			traced++
		}
	}
	if kept == 0 || negative == 0 || traced == 0 || traced == len(got) {
		t.Fatalf("generator does not cover the cases: kept gaps %d, negative other %d, traced %d of %d", kept, negative, traced, len(got))
	}
	t.Logf("%d records: %d bytes (%.1f bytes/record)", len(recs), len(data), float64(len(data))/float64(len(recs)))
}

func TestDecodeFileRefuses(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	recs := genRecords(rng, 10, 0, 3600e3)
	meta := fileMeta{Node: "n1", Segment: "0-000001-00000000", PartStart: 0, PartDur: 7_200_000}
	broken := recs[3]
	broken.Stages[records.StagePrefill] += 1 // stages no longer add up to e2e
	for _, tc := range []struct {
		name string
		recs []records.Record
		meta fileMeta
		want string
	}{
		{"stages do not add up", append(append([]records.Record{}, recs...), broken), meta, "row 10"},
		{"partition misaligned", recs, fileMeta{Node: "n1", Segment: "x", PartStart: 5, PartDur: 7_200_000}, "not aligned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := encodeFile(tc.recs, tc.meta)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = decodeFile(data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("lz4 codec", func(t *testing.T) {
		// parquet-go grows an LZ4 buffer without bound on a damaged page;
		// the decoder refuses codecs the exporter never writes.
		var buf bytes.Buffer
		w := parquet.NewGenericWriter[row](&buf, parquet.Compression(&parquet.Lz4Raw),
			parquet.KeyValueMetadata(metaVersion, "1"), parquet.KeyValueMetadata(metaNode, "n1"),
			parquet.KeyValueMetadata(metaSegment, meta.Segment), parquet.KeyValueMetadata(metaPartStart, "0"),
			parquet.KeyValueMetadata(metaPartDur, "7200000"))
		if _, err := w.Write([]row{toRow(&recs[0])}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := decodeFile(buf.Bytes()); err == nil || !strings.Contains(err.Error(), "codec") {
			t.Fatalf("err %v, want a codec refusal", err)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		data, err := encodeFile(recs, meta)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 4, len(data) / 2, len(data) - 1} {
			if _, _, err := decodeFile(data[:n]); err == nil {
				t.Fatalf("%d of %d bytes decoded", n, len(data))
			}
		}
	})
}
