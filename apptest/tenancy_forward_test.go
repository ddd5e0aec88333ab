package apptest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailroot/tailroot/internal/rwtest"
)

// TestTenancyForwardPerTenant forwards a multi-tenant server's writes to
// one receiver per tenant, configured only with Prometheus' remote_write
// (docs/tenancy.md): each entry keeps its tenant's series, drops the
// tenant label and sends the tenant header, as a Thanos Receive or Mimir
// behind it expects. Each receiver gets its tenant's series, all of them
// and nothing else, and every request it gets names its tenant.
func TestTenancyForwardPerTenant(t *testing.T) {
	recs := map[string]*rwtest.Recorder{"A": rwtest.New(""), "B": rwtest.New("")}
	var cfg strings.Builder
	cfg.WriteString("remote_write:\n")
	for _, id := range []string{"A", "B"} {
		srv := httptest.NewServer(recs[id])
		t.Cleanup(srv.Close)
		fmt.Fprintf(&cfg, `  - url: %s/api/v1/write
    name: tenant-%s
    headers: {THANOS-TENANT: %s}
    queue_config: {batch_send_deadline: 100ms}
    write_relabel_configs:
      - {source_labels: [tenant_id], regex: %s, action: keep}
      - {regex: tenant_id, action: labeldrop}
`, srv.URL, id, id, id)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tailroot.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	app := Start(t, filepath.Join(dir, "data"), "--tenancy.enabled", "--config.file", cfgPath)
	// Sample times after the queues started: a WAL watcher skips older ones.
	ts := time.Now()
	data := map[string]tenantData{"A": {mark: "secreta", ts: ts, value: 1000}, "B": {mark: "secretb", ts: ts, value: 2}}
	for id, d := range data {
		c := tenantClient{url: app.URL, tenant: id}
		if code, _, b := c.do(t, http.MethodPost, "/api/v1/write", nil, "application/x-protobuf", rw1Body(t, d), rw1Header); code != http.StatusNoContent {
			t.Fatalf("write as %s: %d %s", id, code, b)
		}
	}
	// rw1Body holds 4 series per tenant.
	deadline := time.Now().Add(20 * time.Second)
	for recs["A"].Count() < 4 || recs["B"].Count() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("forwarded after 20s: A %v, B %v\n%s", recs["A"].Series(), recs["B"].Series(), app.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // anything else queued arrives too
	for id, d := range data {
		want := fmt.Sprintf("{__name__=%q, job=\"x\"}\n{__name__=\"tq_metric\", job=\"%s-job\"}\n{__name__=\"tq_metric\", job=\"shared\"}\n{__name__=\"tq_spoof\", job=\"%s-spoof\"}",
			d.mark+"_rw1_total", d.mark, d.mark)
		if got := strings.Join(recs[id].Series(), "\n"); got != want {
			t.Errorf("receiver of %s got\n%s\nwant\n%s", id, got, want)
		}
		_, vals := recs[id].Acks()
		if v := vals[rwtest.Key{Series: `{__name__="tq_metric", job="shared"}`, T: ts.UnixMilli()}]; v != d.value {
			t.Errorf("receiver of %s: the shared series is %g, want %s's %g", id, v, id, d.value)
		}
		for _, h := range recs[id].Headers() {
			if h.Get("THANOS-TENANT") != id {
				t.Errorf("receiver of %s got a request for tenant %q", id, h.Get("THANOS-TENANT"))
			}
		}
	}
}
