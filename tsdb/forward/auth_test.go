package forward_test

import (
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"

	"github.com/tailroot/tailroot/internal/rwtest"
)

// TestAuthAndTLS: the client settings of a remote_write entry are
// Prometheus' own (basic_auth with a password file, authorization,
// tls_config with a CA file), so receivers behind TLS and credentials get
// the samples, and a request without them is refused.
func TestAuthAndTLS(t *testing.T) {
	db, f, _ := setup(t)
	dir := t.TempDir()
	var refused atomic.Int64
	guard := func(rec *rwtest.Recorder, ok func(*http.Request) bool) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !ok(r) {
				refused.Add(1)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			rec.ServeHTTP(w, r)
		})
	}
	basic, bearer := rwtest.New(""), rwtest.New("")
	s1 := httptest.NewTLSServer(guard(basic, func(r *http.Request) bool {
		u, p, ok := r.BasicAuth()
		return ok && u == "tailroot" && p == "s3cret"
	}))
	defer s1.Close()
	s2 := httptest.NewTLSServer(guard(bearer, func(r *http.Request) bool {
		return r.Header.Get("Authorization") == "Bearer tok-123"
	}))
	defer s2.Close()
	ca := filepath.Join(dir, "ca.pem")
	pemBytes := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s1.Certificate().Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s2.Certificate().Raw})...)
	pw := filepath.Join(dir, "password")
	for p, b := range map[string][]byte{ca: pemBytes, pw: []byte("s3cret\n")} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	q := `queue_config: {batch_send_deadline: 50ms, min_backoff: 10ms, max_backoff: 50ms}`
	cfg := loadConfig(t, fmt.Sprintf(`remote_write:
  - url: %s
    basic_auth: {username: tailroot, password_file: %s}
    tls_config: {ca_file: %s}
    %s
  - url: %s
    authorization: {credentials: tok-123}
    tls_config: {ca_file: %s}
    %s
`, s1.URL, pw, ca, q, s2.URL, ca, q))
	if err := f.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	appendSeries(t, db, []labels.Labels{labels.FromStrings("__name__", "m")}, time.Now().Add(time.Second).UnixMilli(), 10, 0, metadata.Metadata{})
	waitCount(t, basic, 10, 20*time.Second)
	waitCount(t, bearer, 10, 20*time.Second)
	if n := refused.Load(); n != 0 {
		t.Fatalf("%d requests were refused for missing credentials", n)
	}
	// The guard is real: a request without credentials is refused.
	resp, err := s1.Client().Post(s1.URL, "application/x-protobuf", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || refused.Load() != 1 {
		t.Fatalf("a request without credentials got %d", resp.StatusCode)
	}
}
