package ingest

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/klauspost/compress/snappy"

	"github.com/tailroot/tailroot/internal/inflight"
)

// TestDecodedBytesLeased: behind the in-flight limiter, a small body that
// decodes past the budget is refused before the decoded bytes are
// allocated, naming the limit, on remote write (snappy) and on the gzip
// paths (request records here; OTLP shares readBody).
func TestDecodedBytesLeased(t *testing.T) {
	db := openTestDB(t)
	lim := inflight.New(inflight.Options{MaxBytes: 1 << 20})
	rw := lim.Handler(newHandler(t, db, DefaultOptions()))
	body := snappy.Encode(nil, make([]byte, 4<<20))
	rec := post(rw, ctV1, "snappy", body)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "ingest.max-inflight-bytes=1MiB") {
		t.Fatalf("remote write, %d bytes decoding to 4 MiB under a 1 MiB budget: %d %q", len(body), rec.Code, rec.Body)
	}

	recs := openTestRecords(t, db, testRecordsOptions(t.TempDir()))
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write(bytes.Repeat([]byte(" "), 8<<20))
	_ = zw.Close()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/requests", bytes.NewReader(zb.Bytes()))
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Content-Encoding", "gzip")
	w := httptest.NewRecorder()
	lim.Handler(http.HandlerFunc(recs.ServePush)).ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "ingest.max-inflight-bytes=1MiB") {
		t.Fatalf("records, gzip decoding to 8 MiB under a 1 MiB budget: %d %q", w.Code, w.Body)
	}
	if lim.InUse() != 0 {
		t.Fatalf("%d bytes still leased", lim.InUse())
	}
}
