package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailroot/tailroot/agent/config"
)

func loadArgs(t *testing.T, args ...string) (config.Config, error) {
	t.Helper()
	f, err := parseFlags(args, io.Discard)
	if err != nil {
		return config.Config{}, err
	}
	return load(f)
}

func TestFlagsOverrideFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.yaml")
	os.WriteFile(path, []byte("node: from-file\nserver: {url: 'http://file:9490'}\nqueue: {dir: /file/q}\ngpu: {enabled: true}\n"), 0o644)
	c, err := loadArgs(t, "--config", path, "--server.url", "http://flag:9490", "--node", "from-flag",
		"--gpu", "false", "--web.listen-address", "off", "--scrape", "vllm=http://127.0.0.1:8000/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if c.Node != "from-flag" || c.Server.URL != "http://flag:9490" || c.Queue.Dir != "/file/q" || c.GPU.On() || c.Listen != "" {
		t.Fatalf("config %+v", c)
	}
	// The evidence URL follows the server given by flag.
	if c.Evidence.URL != "http://flag:9490/api/v1/evidence" {
		t.Errorf("evidence url %q", c.Evidence.URL)
	}
	if len(c.Scrape.Targets) != 1 || c.Scrape.Targets[0].Job != "vllm" || c.Scrape.Targets[0].Interval.D() != c.Scrape.Interval.D() {
		t.Errorf("scrape targets %+v", c.Scrape.Targets)
	}
}

func TestFlagErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--gpu", "maybe"},
		{"--scrape", "no-equals-sign"},
		{"--scrape", "job=not a url"},
		{"--server.url", "tailroot:9490"},
		{"--config", "/nonexistent/agent.yaml"},
		{"stray"},
	} {
		if _, err := loadArgs(t, args...); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

func TestPrintConfig(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"--print-config", "--node", "n9"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(out.Bytes())
	if err != nil {
		t.Fatalf("printed configuration does not parse back: %v\n%s", err, out.String())
	}
	if c.Node != "n9" || !strings.Contains(out.String(), "max_bytes: 1073741824") {
		t.Fatalf("printed:\n%s", out.String())
	}
	// Every on/off switch shows the value in force, never null.
	if strings.Contains(out.String(), "null") || c.EBPF.Enabled == nil || !*c.EBPF.Enabled || c.GPU.Enabled == nil || !*c.GPU.Enabled {
		t.Fatalf("unset switches printed as null or off:\n%s", out.String())
	}
}
