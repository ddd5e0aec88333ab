package rwtest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/prompb"
)

// TestUpstreamAnswers: a request the upstream answers 2xx is acknowledged,
// one it answers 409 is recorded as refused and not acknowledged, and one
// it answers otherwise is neither; the sender gets the upstream's status.
func TestUpstreamAnswers(t *testing.T) {
	status := http.StatusNoContent
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
	}))
	defer up.Close()
	rec := New(up.URL)
	front := httptest.NewServer(rec)
	defer front.Close()
	send := func(ts int64) int {
		t.Helper()
		req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
			Labels:  []prompb.Label{{Name: "__name__", Value: "a"}},
			Samples: []prompb.Sample{{Timestamp: ts, Value: 1}},
		}}}
		raw, err := req.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(front.URL, "application/x-protobuf", bytes.NewReader(snappy.Encode(nil, raw)))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	key := func(ts int64) Key { return Key{Series: `{__name__="a"}`, T: ts} }

	if c := send(1); c != http.StatusNoContent {
		t.Fatalf("acknowledged write answered %d", c)
	}
	status = http.StatusConflict
	if c := send(2); c != http.StatusConflict {
		t.Fatalf("refused write answered %d, want the upstream's 409", c)
	}
	status = http.StatusServiceUnavailable
	if c := send(3); c != http.StatusServiceUnavailable {
		t.Fatalf("failed write answered %d, want the upstream's 503", c)
	}
	acks, _ := rec.Acks()
	refused := rec.Refused()
	if acks[key(1)] != 1 || len(acks) != 1 {
		t.Errorf("acks %v, want only t=1 once", acks)
	}
	if refused[key(2)] != 1 || len(refused) != 1 {
		t.Errorf("refused %v, want only t=2 once", refused)
	}
}
