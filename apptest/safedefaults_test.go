package apptest

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestCORSOffByDefault: without --web.cors.origin no origin may read the
// API from a browser (Prometheus allows every origin by default); with it,
// exactly the matching ones may. The flags show in /api/v1/status/flags.
func TestCORSOffByDefault(t *testing.T) {
	allowed := func(a *App, origin string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, a.URL+"/api/v1/query?query=1", nil)
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("query: %d", resp.StatusCode)
		}
		return resp.Header.Get("Access-Control-Allow-Origin")
	}
	def := Start(t, t.TempDir())
	if got := allowed(def, "http://evil.example"); got != "" {
		t.Fatalf("default server allows origin %q", got)
	}
	_, b := def.Get(t, "/api/v1/status/flags", nil)
	var env struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{
		"web.cors.origin": "", "web.read-timeout": "5m", "web.max-connections": "512",
		"ingest.max-inflight-bytes": "512MiB", "ingest.max-concurrent": "20",
		"query.max-length": "131072", "query.max-size": "20000", "query.max-depth": "128",
		"ingest.max-label-name-length": "1024", "ingest.max-label-value-length": "4096",
	} {
		if got, ok := env.Data[flag]; !ok || got != want {
			t.Errorf("flag %s = %q (present %v), want %q", flag, got, ok, want)
		}
	}
	cors := Start(t, t.TempDir(), `--web.cors.origin=https?://grafana\.example`)
	if got := allowed(cors, "https://grafana.example"); got != "https://grafana.example" {
		t.Fatalf("configured origin: Access-Control-Allow-Origin %q", got)
	}
	if got := allowed(cors, "https://grafana.example.evil"); got != "" {
		t.Fatalf("the regexp is anchored, yet %q is allowed", got)
	}
}
