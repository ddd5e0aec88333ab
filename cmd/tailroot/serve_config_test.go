package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailroot/tailroot/internal/promcfg"
)

// TestStartupConfig: storage and OTLP settings of a Prometheus configuration
// file apply at start-up, a flag on the command line wins, and keys
// tailroot cannot honour are refused by name.
func TestStartupConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "prometheus.yml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`global:
  external_labels: {cluster: a}
storage:
  tsdb:
    out_of_order_time_window: 2h
    retention:
      time: 30d
  exemplars:
    max_exemplars: 7
otlp:
  promote_resource_attributes: [k8s.pod.name]
  convert_histograms_to_nhcb: true
`)
	cfg, err := promcfg.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := unsupportedConfig(cfg); err != nil {
		t.Fatalf("supported config refused: %v", err)
	}
	c, fs, err := parseServeFlags([]string{"--storage.tsdb.out-of-order-time-window=5m"})
	if err != nil {
		t.Fatal(err)
	}
	applyStartupConfig(c, fs, cfg)
	if c.db.OutOfOrderWindow != 5*time.Minute {
		t.Errorf("OOO window %v: the flag must win over the file", c.db.OutOfOrderWindow)
	}
	if c.db.Retention != 30*24*time.Hour || c.db.MaxExemplars != 7 {
		t.Errorf("retention %v, exemplars %d: want the file's 30d and 7", c.db.Retention, c.db.MaxExemplars)
	}
	if !c.otlp.ConvertHistogramsToNHCB || len(c.otlp.PromoteResourceAttributes) != 1 {
		t.Errorf("otlp options not applied: %+v", c.otlp)
	}

	write(`tracing:
  endpoint: collector:4317
storage:
  tsdb:
    retention:
      percentage: 50
otlp:
  promote_all_resource_attributes: true
  ignore_resource_attributes: [a]
`)
	cfg, err = promcfg.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = unsupportedConfig(cfg)
	for _, key := range []string{"tracing", "storage.tsdb.retention.percentage", "otlp.ignore_resource_attributes"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("unsupported %s not named: %v", key, err)
		}
	}
	write("scrape_configs:\n  - job_name: k\n    kubernetes_sd_configs: [{role: pod}]\n")
	if _, err := promcfg.Load(path, nil); err == nil || !strings.Contains(err.Error(), "kubernetes_sd_configs") {
		t.Errorf("kubernetes_sd_configs: %v", err)
	}
}
