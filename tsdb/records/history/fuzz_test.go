package history

import (
	"math/rand/v2"
	"testing"
)

// FuzzDecodeFile feeds arbitrary bytes to the Parquet decoder, seeded with
// real files: it must return records or an error, never panic, and
// whatever it accepts must be valid records that encode and decode again
// to the same records.
func FuzzDecodeFile(f *testing.F) {
	rng := rand.New(rand.NewPCG(21, 22))
	meta := fileMeta{Node: "n", Segment: "0-000001-00000000", PartStart: 0, PartDur: 7_200_000}
	for _, n := range []int{1, 3, 40} {
		data, err := encodeFile(genRecords(rng, n, 0, 3600e3), meta)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("PAR1PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, m, err := decodeFile(data)
		if err != nil {
			return
		}
		for i := range recs {
			if err := recs[i].Validate(); err != nil {
				t.Fatalf("accepted invalid record %d: %v", i, err)
			}
		}
		if len(recs) == 0 {
			return
		}
		again, err := encodeFile(recs, m)
		if err != nil {
			t.Fatal(err)
		}
		back, m2, err := decodeFile(again)
		if err != nil || m2 != m {
			t.Fatalf("re-encoded file does not decode: %v (meta %+v vs %+v)", err, m2, m)
		}
		sameRecords(t, back, recs)
	})
}

// FuzzDecodeManifest: any accepted manifest is internally consistent, as
// the reader relies on when it indexes files by it.
func FuzzDecodeManifest(f *testing.F) {
	key := manifestKey("n", "0-000001-0000abcd")
	f.Add(key, []byte(`{"format_version":1,"node":"n","segment":"0-000001-0000abcd","partition_start":0,"partition_duration_ms":7200000,"seq":1,"min_time":5,"max_time":3600005,"records":3,"files":[{"key":"date=1970-01-01/hour=0/n-0-000001-0000abcd.parquet","min_time":5,"max_time":6,"records":2},{"key":"date=1970-01-01/hour=1/n-0-000001-0000abcd.parquet","min_time":3600005,"max_time":3600005,"records":1}]}`))
	f.Add(key, []byte(`{}`))
	f.Fuzz(func(t *testing.T, key string, data []byte) {
		m, err := decodeManifest(key, data)
		if err != nil {
			return
		}
		total := 0
		for _, fl := range m.Files {
			if fl.MinTime < m.PartStart || fl.MaxTime >= m.PartStart+m.PartDur || fl.Key != fileKey(m.Node, m.Segment, hourStart(fl.MinTime)) {
				t.Fatalf("accepted inconsistent file %+v in %+v", fl, m)
			}
			total += fl.Records
		}
		if total != m.Records || key != manifestKey(m.Node, m.Segment) {
			t.Fatalf("accepted manifest %+v under %s", m, key)
		}
	})
}
