package apptest

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/tailroot/tailroot/ingest"
)

// startTokens starts the server with derived series appended before each
// push is acknowledged, so a test reads them right after posting.
func startTokens(t *testing.T, dir string, extra ...string) *App {
	t.Helper()
	return Start(t, dir, append([]string{"--records.derive-interval=0"}, extra...)...)
}

// getRecords reads every record matching the selectors over
// GET /api/v1/requests (NDJSON).
func getRecords(t testing.TB, a *App, match ...string) []ingest.RecordJSON {
	t.Helper()
	q := url.Values{"format": {"ndjson"}, "limit": {"1000000"}}
	for _, m := range match {
		q.Add("match[]", m)
	}
	code, body := a.Get(t, "/api/v1/requests", q)
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/requests: %d %s", code, body)
	}
	var out []ingest.RecordJSON
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var r ingest.RecordJSON
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("decode record %s: %v", sc.Bytes(), err)
		}
		out = append(out, r)
	}
	return out
}

// postBody posts and returns status and body.
func postBody(t testing.TB, a *App, path, ct string, body []byte, hdr http.Header) (int, []byte) {
	t.Helper()
	resp := a.Post(t, path, ct, body, hdr)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// floatOf parses the value of a float sample.
func floatOf(t testing.TB, s Sample) float64 {
	t.Helper()
	str, ok := s.Value[1].(string)
	if !ok {
		t.Fatalf("sample %v is not a float", s)
	}
	f, err := strconv.ParseFloat(str, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
