package ingest

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/tsdb/records"
)

// FuzzDecodeRequestLine: any line either fails with ErrBadRequestLine or
// yields a record that validates, whose stages are ≥ 0 and add up to e2e,
// and that survives the record codec unchanged.
func FuzzDecodeRequestLine(f *testing.F) {
	for _, s := range []string{
		lineA, lineB,
		`{"request_id":"x","arrival":10,"finished":11,"stages":{"tokenize":0.6,"network":0.4000000000001}}`,
		`{"trace_id":"0af7651916cd43dd8448eb211c80319c","arrival":1.5e9,"token_times":[1.5e9,1500000000.25]}`,
		`{"request_id":"x","arrival":10,"queued":12,"scheduled":11,"finished":20}`,
		`{"request_id":"x","arrival":"2023-11-14T22:13:20Z","last_token":"2023-11-14T22:13:21Z","itl":[0.5]}`,
		`{}`, `[`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		it, err := DecodeRequestLine(line, RequestLimits{MaxTokens: 1 << 12})
		if err != nil {
			return
		}
		r := &it.Record
		if err := r.Validate(); err != nil {
			t.Fatalf("accepted a record that does not validate: %v\n%s", err, line)
		}
		for j, v := range r.Stages {
			if v < 0 {
				t.Fatalf("stage %s = %v < 0\n%s", records.Stage(j), v, line)
			}
		}
		var back records.Record
		tail, err := back.Unmarshal(r.Marshal(nil))
		if err != nil || len(tail) != 0 || back.E2E != r.E2E || back.Stages != r.Stages || !labels.Equal(back.Labels, r.Labels) {
			t.Fatalf("codec round trip: %v, %+v vs %+v", err, back, *r)
		}
	})
}

// FuzzJournal: decoding arbitrary bytes never panics, stops at a good
// prefix, and every entry it returns re-encodes to a frame that decodes to
// the same bytes.
func FuzzJournal(f *testing.F) {
	it := Item{Record: records.Record{Time: 5, Labels: labels.FromStrings("a", "b"), RequestID: "r", E2E: 1}, HasTTFT: true, Gaps: []float64{0.5}}
	it.Record.Stages[records.StageOther] = 1
	frame := func(e *journalEntry) []byte {
		b := e.marshal(make([]byte, journalFrameHeader))
		putFrameHeader(b)
		return b
	}
	f.Add(frame(&journalEntry{Seq: 1, NBefore: 3, Chunks: [][]Item{{it, it}, {it}}}))
	f.Add(append(frame(&journalEntry{Seq: 1}), frame(&journalEntry{Seq: 2, Chunks: [][]Item{{it}}})...))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, good := decodeJournal(data)
		if good > len(data) || good < 0 {
			t.Fatalf("good prefix %d of %d bytes", good, len(data))
		}
		for _, e := range entries {
			enc := e.marshal(nil)
			var back journalEntry
			if err := back.unmarshal(enc); err != nil {
				t.Fatalf("re-decode: %v", err)
			}
			if !bytes.Equal(back.marshal(nil), enc) {
				t.Fatal("entry does not round-trip")
			}
		}
	})
}

func putFrameHeader(b []byte) {
	payload := b[journalFrameHeader:]
	b[0], b[1], b[2], b[3] = byte(len(payload)), byte(len(payload)>>8), byte(len(payload)>>16), byte(len(payload)>>24)
	c := crc32Castagnoli(payload)
	b[4], b[5], b[6], b[7] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
}

// FuzzCheckpoint: a checkpoint that parses restores a state that can take
// more requests and be flushed without panicking.
func FuzzCheckpoint(f *testing.F) {
	d := newDeriver(attribution.DefaultGrid(), DefaultSeriesLabels, 4)
	it, _ := DecodeRequestLine([]byte(lineA), RequestLimits{})
	d.add(&it)
	good, err := d.marshalCheckpoint(7)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Seeds with a broken checksum exercise only the checksum; fix it
		// so the JSON decoder and the checks behind it are reached too.
		if len(data) >= 4 {
			c := crc32Castagnoli(data[4:])
			data[0], data[1], data[2], data[3] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
		}
		d, _, _, err := parseCheckpoint(data, attribution.DefaultGrid(), DefaultSeriesLabels, 4)
		if err != nil {
			return
		}
		d.add(&it)
		_, _ = d.flush(nopAppender{}, 1, true)
	})
}

// FuzzTraces: any body either fails to decode or yields only items that
// validate with stages ≥ 0.
func FuzzTraces(f *testing.F) {
	pb, _ := ptraceotlp.NewExportRequestFromTraces(vllmTraces()).MarshalProto()
	f.Add(pb)
	f.Add([]byte{0x0a, 0x00})
	f.Fuzz(func(t *testing.T, body []byte) {
		req := ptraceotlp.NewExportRequest()
		if req.UnmarshalProto(body) != nil {
			return
		}
		items, _, _ := TracesToItems(req.Traces(), RequestLimits{})
		for _, it := range items {
			if err := it.Record.Validate(); err != nil {
				t.Fatalf("span became an invalid record: %v", err)
			}
			for _, v := range it.Record.Stages {
				if v < 0 {
					t.Fatalf("negative stage in %+v", it.Record)
				}
			}
		}
	})
}

// FuzzOTLPMetrics: the handler answers every body with a status and never
// panics, protobuf or JSON.
func FuzzOTLPMetrics(f *testing.F) {
	pb, _ := pmetricotlp.NewExportRequestFromMetrics(testMetrics(fuzzTime)).MarshalProto()
	js, _ := pmetricotlp.NewExportRequestFromMetrics(testMetrics(fuzzTime)).MarshalJSON()
	f.Add(pb, false)
	f.Add(js, true)
	h := NewOTLPMetrics(nopAppendable{}, nil, OTLPOptions{}, nil, nil)
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool) {
		ct := "application/x-protobuf"
		if isJSON {
			ct = "application/json"
		}
		req := httptest.NewRequest(http.MethodPost, "/api/v1/otlp/v1/metrics", bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
}

type nopAppendable struct{}

func (nopAppendable) AppenderV2(context.Context) storage.AppenderV2 { return nopAppender{} }

type nopAppender struct{}

func (nopAppender) Append(storage.SeriesRef, labels.Labels, int64, int64, float64, *histogram.Histogram, *histogram.FloatHistogram, storage.AOptions) (storage.SeriesRef, error) {
	return 1, nil
}
func (nopAppender) Commit() error   { return nil }
func (nopAppender) Rollback() error { return nil }

// FuzzItemMeta: decoding arbitrary item meta never panics, and what
// decodes re-encodes to bytes that decode to the same item (varints may
// arrive overlong; they re-encode short).
func FuzzItemMeta(f *testing.F) {
	f.Add(appendItemMeta(nil, &Item{}))
	f.Add(appendItemMeta(nil, &Item{HasTTFT: true, HasEntropy: true, Gaps: []float64{0.5, 0.25}}))
	f.Add(appendItemMeta(nil, &Item{Gaps: []float64{}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var it Item
		if err := unmarshalItemMeta(data, &it); err != nil {
			return
		}
		enc := appendItemMeta(nil, &it)
		var back Item
		if err := unmarshalItemMeta(enc, &back); err != nil {
			t.Fatalf("re-decode of %x: %v", enc, err)
		}
		if back.HasTTFT != it.HasTTFT || back.HasEntropy != it.HasEntropy || (back.Gaps == nil) != (it.Gaps == nil) ||
			!slices.EqualFunc(back.Gaps, it.Gaps, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
			t.Fatalf("meta %x decodes to %+v, re-encoded to %+v", data, it, back)
		}
	})
}
