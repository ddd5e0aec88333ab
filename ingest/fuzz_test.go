package ingest

import (
	"net/http"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

// FuzzRemoteWrite feeds arbitrary protobuf bytes, snappy-framed, to the
// handler as 1.0 and 2.0 requests. Whatever the bytes, the answer is 204 or
// 400 (never a panic, never a 5xx that would make a sender retry forever),
// and a 204 for a decodable request means every sample it carried is stored.
func FuzzRemoteWrite(f *testing.F) {
	now := time.Now().UnixMilli()
	v1, _ := (&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series1("m", "a", now, 1),
		{Labels: []prompb.Label{{Name: "__name__", Value: "h"}}, Histograms: []prompb.Histogram{prompb.FromIntHistogram(now, &histogram.Histogram{Count: 1, Sum: 1, ZeroCount: 1, ZeroThreshold: 1e-9})}},
	}}).Marshal()
	v2, _ := toV2([]prompb.TimeSeries{series1("m", "b", now, 2)}).Marshal()
	f.Add(v1, false)
	f.Add(v2, true)
	f.Add([]byte{}, true)
	f.Add([]byte{0x0a, 0x00, 0x12, 0x02, 0x08, 0x05}, true)

	db := openDB(f)
	h := newHandler(f, db, DefaultOptions())
	f.Fuzz(func(t *testing.T, body []byte, isV2 bool) {
		ct := ctV1
		if isV2 {
			ct = ctV2
		}
		rec := post(h, ct, "snappy", snappy.Encode(nil, body))
		switch rec.Code {
		case http.StatusNoContent, http.StatusBadRequest:
		default:
			t.Fatalf("status %d for %x: %s", rec.Code, body, rec.Body)
		}
		if rec.Code == http.StatusNoContent && isV2 {
			var req writev2.Request
			if err := req.Unmarshal(body); err != nil {
				t.Fatalf("204 for undecodable body %x", body)
			}
			want := 0
			for _, ts := range req.Timeseries {
				want += len(ts.Samples)
			}
			if got := rec.Header().Get(headerSamplesWritten); got != itoa(want) {
				t.Fatalf("204 wrote %s samples, request had %d", got, want)
			}
		}
	})
}

// FuzzSnappyFraming sends arbitrary bytes as the compressed body.
func FuzzSnappyFraming(f *testing.F) {
	f.Add([]byte("not snappy"))
	f.Add(snappy.Encode(nil, []byte("\x0a\x01a")))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	db := openDB(f)
	h := newHandler(f, db, Options{MaxBodyBytes: 1 << 16})
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := post(h, ctV2, "snappy", body)
		switch rec.Code {
		case http.StatusNoContent, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for %x: %s", rec.Code, body, rec.Body)
		}
	})
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
