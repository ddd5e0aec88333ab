package ingest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/tsdb"
)

// refusingAppendable accepts appends and fails every commit as the TSDB
// does while it refuses writes after a failed one.
type refusingAppendable struct{}

func (refusingAppendable) AppenderV2(context.Context) storage.AppenderV2 { return refusingAppender{} }

type refusingAppender struct{}

func (refusingAppender) Append(storage.SeriesRef, labels.Labels, int64, int64, float64, *histogram.Histogram, *histogram.FloatHistogram, storage.AOptions) (storage.SeriesRef, error) {
	return 1, nil
}

func (refusingAppender) Commit() error {
	return fmt.Errorf("%w: writes are refused after a failed write", tsdb.ErrUnavailable)
}
func (refusingAppender) Rollback() error { return nil }

// TestRemoteWriteUnavailable: a store that refuses writes for now gets 503
// with Retry-After, which remote-write senders retry, not 500.
func TestRemoteWriteUnavailable(t *testing.T) {
	h := NewRemoteWrite(refusingAppendable{}, nil, DefaultOptions(), nil, nil)
	wr := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "up"}},
		Samples: []prompb.Sample{{Timestamp: 1, Value: 1}},
	}}}
	b, err := wr.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(snappy.Encode(nil, b)))
	r.Header.Set("Content-Type", "application/x-protobuf")
	r.Header.Set("Content-Encoding", "snappy")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("got %d, Retry-After %q: %s; want 503 with Retry-After 1", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
}
