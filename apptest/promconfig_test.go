package apptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPrometheusConfigFileStartsUnchanged: a Prometheus 3.16 configuration
// file with external labels, rule files, remote_write, remote_read and a
// static scrape config starts tailroot as it is, every part in force
// (/api/v1/status/config, rules, targets); a file with a key tailroot
// cannot honour is refused, naming the key.
func TestPrometheusConfigFileStartsUnchanged(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yml")
	writeFile(t, rules, "groups:\n  - name: g\n    rules:\n      - record: job:up:sum\n        expr: sum by (job) (up)\n")
	self := FreeAddr(t)
	cfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfg, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
  external_labels:
    cluster: gpu-east
    replica: a
rule_files:
  - %s
scrape_configs:
  - job_name: tailroot
    static_configs:
      - targets: [%q]
remote_write:
  - url: http://127.0.0.1:1/api/v1/write
    headers:
      X-Scope-OrgID: team-a
    queue_config:
      max_shards: 2
remote_read:
  - url: http://127.0.0.1:1/api/v1/read
    read_recent: false
storage:
  tsdb:
    out_of_order_time_window: 10m
`, rules, self))
	app := &App{bin: Binary(t), DataDir: filepath.Join(dir, "data"), Addr: self}
	app.args = []string{"serve", "--listen", self, "--data-dir", app.DataDir, "--config.file", cfg}
	app.start(t)
	t.Cleanup(func() { app.Kill(t) })

	code, body := app.Get(t, "/api/v1/status/config", nil)
	for _, want := range []string{"cluster: gpu-east", "remote_write:", "X-Scope-OrgID", "remote_read:", "job_name: tailroot", rules} {
		if code != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("/api/v1/status/config lacks %q: %d %s", want, code, body)
		}
	}
	waitFor(t, 30*time.Second, "the scrape target and the recording rule", func() bool {
		v := app.InstantVector(t, `job:up:sum{job="tailroot"}`, time.Now())
		return len(v) == 1 && floatOf(t, v[0]) == 1
	})
	code, body = app.Get(t, "/api/v1/status/flags", nil)
	var flags struct {
		Data map[string]string `json:"data"`
	}
	if code != http.StatusOK || json.Unmarshal(body, &flags) != nil || flags.Data["config.file"] != cfg {
		t.Errorf("/api/v1/status/flags: %d %s", code, body)
	}

	bad := filepath.Join(dir, "bad.yml")
	writeFile(t, bad, "tracing:\n  endpoint: collector:4317\n")
	out, err := runBinary(t, "serve", "--listen", FreeAddr(t), "--data-dir", filepath.Join(dir, "data2"), "--config.file", bad)
	if err == nil || !strings.Contains(out, "tracing") {
		t.Errorf("a config with tracing started or did not name the key: %v\n%s", err, out)
	}
}

// runBinary runs the tailroot binary to completion (30 s at most) and
// returns what it printed.
func runBinary(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, Binary(t), args...).CombinedOutput()
	return string(out), err
}
