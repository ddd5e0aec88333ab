package ingest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/tsdb"
)

const (
	ctV1 = "application/x-protobuf;proto=prometheus.WriteRequest"
	ctV2 = "application/x-protobuf;proto=io.prometheus.write.v2.Request"
)

func openDB(t testing.TB) *tsdb.DB {
	t.Helper()
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	o.OutOfOrderWindow = 0
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func newHandler(t testing.TB, db *tsdb.DB, opts Options) *RemoteWrite {
	return NewRemoteWrite(db, db.Metadata, opts, nil, prometheus.NewRegistry())
}

func post(h http.Handler, ct, enc string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	if enc != "" {
		req.Header.Set("Content-Encoding", enc)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func encode(t testing.TB, m interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return snappy.Encode(nil, b)
}

// count returns the float samples of series matching name in [mint, maxt].
func count(t testing.TB, db *tsdb.DB, name string) map[string][]float64 {
	t.Helper()
	q, err := db.Querier(0, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ss := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchEqual, "__name__", name))
	out := map[string][]float64{}
	for ss.Next() {
		s := ss.At()
		it := s.Iterator(nil)
		for it.Next() != 0 {
			_, v := it.At()
			out[s.Labels().String()] = append(out[s.Labels().String()], v)
		}
	}
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func series1(name, inst string, ms int64, v float64) prompb.TimeSeries {
	return prompb.TimeSeries{
		Labels:  []prompb.Label{{Name: "__name__", Value: name}, {Name: "instance", Value: inst}},
		Samples: []prompb.Sample{{Timestamp: ms, Value: v}},
	}
}

func TestRejectsBadInput(t *testing.T) {
	db := openDB(t)
	h := newHandler(t, db, Options{MaxBodyBytes: 1 << 10, MaxSeriesPerRequest: 3})
	now := time.Now().UnixMilli()
	good := encode(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series1("m", "a", now, 1)}})
	big := make([]prompb.TimeSeries, 0, 4)
	for i := range 4 {
		big = append(big, series1("m", string(rune('a'+i)), now, 1))
	}
	for _, c := range []struct {
		name, ct, enc string
		body          []byte
		code          int
		msg           string
	}{
		{"not snappy", ctV1, "snappy", []byte("this is not snappy"), 400, "decode snappy body"},
		{"snappy but not protobuf", ctV2, "snappy", snappy.Encode(nil, []byte{0xff, 0xff, 0xff, 0xff}), 400, "decode remote write 2.0 request"},
		{"truncated protobuf", ctV2, "", snappy.Encode(nil, []byte("\x0a\x10abc")), 400, "decode remote write 2.0 request"},
		{"unknown content type", "application/json", "", good, 415, "content type"},
		{"unknown proto", "application/x-protobuf;proto=foo.Bar", "", good, 415, "content type"},
		{"gzip encoding", ctV1, "gzip", good, 415, `content encoding "gzip"`},
		{"body over limit", ctV1, "", bytes.Repeat([]byte{1}, 2<<10), 413, "over the limit of 1024 bytes"},
		{"too many series", ctV1, "", encode(t, &prompb.WriteRequest{Timeseries: big}), 413, "4 series, over the limit of 3"},
		{"no content type: a cross-site browser POST", "", "", good, 415, "no Content-Type"},
		{"1.0 body with the 2.0 content type", ctV2, "", good, 400, "1.0 WriteRequest sent with the 2.0 content type"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := post(h, c.ct, c.enc, c.body)
			if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.msg) {
				t.Fatalf("got %d %q, want %d containing %q", rec.Code, rec.Body.String(), c.code, c.msg)
			}
		})
	}
	if got := count(t, db, "m"); len(got) != 0 {
		t.Fatalf("rejected requests wrote %v", got)
	}
	if rec := post(h, ctV1, "", good); rec.Code != http.StatusNoContent {
		t.Fatalf("good request after bad ones: %d %s", rec.Code, rec.Body)
	}
}

// TestPartialWriteKeepsGoodSeries: a request mixing good samples, an
// out-of-order sample, a sample too far in the future and an invalid series
// gets 400 naming each problem, and every good sample is stored.
func TestPartialWriteKeepsGoodSeries(t *testing.T) {
	for _, version := range []string{"1.0", "2.0"} {
		t.Run(version, func(t *testing.T) {
			db := openDB(t)
			h := newHandler(t, db, DefaultOptions())
			now := time.Now().UnixMilli()
			// Establish a newer sample so that a later, older one is out of order.
			first := []prompb.TimeSeries{series1("m", "ooo", now, 1)}
			second := []prompb.TimeSeries{
				series1("m", "good1", now, 2),
				series1("m", "ooo", now-60_000, 3),
				series1("m", "future", now+int64(time.Hour/time.Millisecond), 4),
				{Labels: []prompb.Label{{Name: "instance", Value: "noname"}}, Samples: []prompb.Sample{{Timestamp: now, Value: 5}}},
				series1("m", "good2", now, 6),
			}
			send := func(ts []prompb.TimeSeries) *httptest.ResponseRecorder {
				if version == "1.0" {
					return post(h, ctV1, "snappy", encode(t, &prompb.WriteRequest{Timeseries: ts}))
				}
				return post(h, ctV2, "snappy", encode(t, toV2(ts)))
			}
			if rec := send(first); rec.Code != http.StatusNoContent {
				t.Fatalf("first write: %d %s", rec.Code, rec.Body)
			}
			rec := send(second)
			body := rec.Body.String()
			if rec.Code != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", rec.Code, body)
			}
			for _, want := range []string{"3 rejected", "out of order", `instance="ooo"`, "ahead of the server clock", `instance="future"`, "no metric name"} {
				if !strings.Contains(body, want) {
					t.Errorf("response %q does not mention %q", body, want)
				}
			}
			if version == "2.0" && rec.Header().Get(headerSamplesWritten) != "2" {
				t.Errorf("%s = %q, want 2", headerSamplesWritten, rec.Header().Get(headerSamplesWritten))
			}
			got := count(t, db, "m")
			want := map[string][]float64{
				`{__name__="m", instance="good1"}`: {2},
				`{__name__="m", instance="good2"}`: {6},
				`{__name__="m", instance="ooo"}`:   {1},
			}
			if len(got) != len(want) {
				t.Fatalf("stored %v, want %v", got, want)
			}
			for k, v := range want {
				if len(got[k]) != 1 || got[k][0] != v[0] {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

// TestSeriesCacheSurvivesHeadGC: a cached reference whose series the head
// dropped must not lose samples.
func TestSeriesCacheSurvivesHeadGC(t *testing.T) {
	db := openDB(t)
	h := newHandler(t, db, DefaultOptions())
	now := time.Now().UnixMilli()
	w := func(v float64, ts int64) {
		rec := post(h, ctV1, "", encode(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series1("m", "a", ts, v)}}))
		if rec.Code != http.StatusNoContent {
			t.Fatalf("write: %d %s", rec.Code, rec.Body)
		}
	}
	w(1, now-1000)
	if err := db.Delete(context.Background(), 0, now+1, labels.MustNewMatcher(labels.MatchEqual, "__name__", "m")); err != nil {
		t.Fatal(err)
	}
	w(2, now)
	got := count(t, db, "m")
	if v := got[`{__name__="m", instance="a"}`]; len(v) != 1 || v[0] != 2 {
		t.Fatalf("after delete and rewrite got %v, want [2]", got)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	db := openDB(t)
	h := newHandler(t, db, DefaultOptions())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/write", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", rec.Code)
	}
}

// toV2 converts a 1.0 request to 2.0 with a symbol table.
func toV2(ts []prompb.TimeSeries) *writev2.Request {
	st := writev2.NewSymbolTable()
	out := &writev2.Request{}
	for _, s := range ts {
		var b labels.ScratchBuilder
		for _, l := range s.Labels {
			b.Add(l.Name, l.Value)
		}
		b.Sort()
		v2 := writev2.TimeSeries{LabelsRefs: st.SymbolizeLabels(b.Labels(), nil)}
		for _, smp := range s.Samples {
			v2.Samples = append(v2.Samples, writev2.Sample{Timestamp: smp.Timestamp, Value: smp.Value})
		}
		out.Timeseries = append(out.Timeseries, v2)
	}
	out.Symbols = st.Symbols()
	return out
}

var _ storage.AppendableV2 = (*tsdb.DB)(nil)

func TestReadBodyClosesNothingTwice(t *testing.T) {
	// Reusing pooled buffers must not leak one request's bytes into another:
	// send a large then a small request and check the small one decodes.
	db := openDB(t)
	h := newHandler(t, db, DefaultOptions())
	now := time.Now().UnixMilli()
	var big []prompb.TimeSeries
	for i := range 500 {
		big = append(big, series1("big", strings.Repeat("x", 50)+string(rune('a'+i%26))+string(rune('a'+i/26)), now, float64(i)))
	}
	if rec := post(h, ctV1, "", encode(t, &prompb.WriteRequest{Timeseries: big})); rec.Code != 204 {
		t.Fatalf("big: %d %s", rec.Code, rec.Body)
	}
	if rec := post(h, ctV1, "", encode(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series1("small", "a", now, 7)}})); rec.Code != 204 {
		t.Fatalf("small: %d %s", rec.Code, rec.Body)
	}
	got := count(t, db, "small")
	if len(got) != 1 {
		t.Fatalf("small: %v", got)
	}
	_ = io.Discard
}

// TestExemplarsWithoutSamplesRefused: a 2.0 series with exemplars but no
// sample is refused with 400 naming it, as Prometheus does, not dropped
// with 204; the other series of the request are written.
func TestExemplarsWithoutSamplesRefused(t *testing.T) {
	db := openDB(t)
	h := newHandler(t, db, DefaultOptions())
	now := time.Now().UnixMilli()
	req := toV2([]prompb.TimeSeries{series1("m", "good", now, 1), {Labels: []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "instance", Value: "exonly"}}}})
	st := writev2.NewSymbolTable()
	for _, s := range req.Symbols {
		st.Symbolize(s)
	}
	req.Timeseries[1].Exemplars = []writev2.Exemplar{{LabelsRefs: st.SymbolizeLabels(labels.FromStrings("trace_id", "abc"), nil), Value: 2, Timestamp: now}}
	req.Symbols = st.Symbols()
	rec := post(h, ctV2, "snappy", encode(t, req))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `instance="exonly"`) || !strings.Contains(rec.Body.String(), "no samples") {
		t.Fatalf("exemplar-only series: %d %s", rec.Code, rec.Body)
	}
	if got := count(t, db, "m"); len(got) != 1 || got[`{__name__="m", instance="good"}`][0] != 1 {
		t.Fatalf("stored %v, want only the good series", got)
	}
}

// TestInRequestConflicts sends one request with the same series and
// timestamp twice: with another value it is a 400 naming the conflict and
// the first value is kept, as across requests; with the same value it is
// an idempotent repeat and 204.
func TestInRequestConflicts(t *testing.T) {
	db := openDB(t)
	h := newHandler(t, db, DefaultOptions())
	now := time.Now().UnixMilli()
	conflict := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		series1("c", "a", now, 1), series1("c", "a", now, 2), series1("c", "b", now, 5),
	}}
	rec := post(h, ctV1, "", encode(t, conflict))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "duplicate sample for timestamp") {
		t.Fatalf("conflicting entries: %d %q", rec.Code, rec.Body)
	}
	within := series1("c", "d", now, 3)
	within.Samples = append(within.Samples, prompb.Sample{Timestamp: now, Value: 4})
	rec = post(h, ctV1, "", encode(t, &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{within}}))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "the request has 3 and 4") {
		t.Fatalf("conflicting samples in one entry: %d %q", rec.Code, rec.Body)
	}
	same := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{series1("c", "e", now, 7), series1("c", "e", now, 7)}}
	if rec := post(h, ctV1, "", encode(t, same)); rec.Code != http.StatusNoContent {
		t.Fatalf("identical repeat: %d %q", rec.Code, rec.Body)
	}
	got := count(t, db, "c")
	want := map[string][]float64{
		`{__name__="c", instance="a"}`: {1}, `{__name__="c", instance="b"}`: {5},
		`{__name__="c", instance="d"}`: {3}, `{__name__="c", instance="e"}`: {7},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
}
