package apptest

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestWebConfigBasicAuth: a Prometheus web config file with basic_auth_users
// protects every endpoint, exactly as it protects Prometheus.
func TestWebConfigBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(cfg, []byte("basic_auth_users:\n  grafana: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	app := StartAuth(t, filepath.Join(dir, "data"), "grafana", "s3cret", "--web.config.file", cfg)

	for _, path := range []string{"/api/v1/query?query=1", "/api/v1/write", "/metrics", "/-/ready"} {
		resp, err := http.Get(app.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without credentials: %d, want 401", path, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, app.URL+"/api/v1/query?query=1", nil)
	req.SetBasicAuth("grafana", "wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong password: %d, want 401", resp.StatusCode)
	}
	if code, body := app.Get(t, "/api/v1/query", map[string][]string{"query": {"1+1"}}); code != 200 {
		t.Errorf("with credentials: %d %s", code, body)
	}
}
