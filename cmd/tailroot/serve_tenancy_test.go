package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTenancyFlags(t *testing.T) {
	c, _, err := parseServeFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.tenancy.enabled || c.tenancy.resolver != nil || slices.Contains(c.records.SeriesLabels, "tenant_id") {
		t.Fatalf("tenancy is on by default: enabled=%v", c.tenancy.enabled)
	}

	cfg := filepath.Join(t.TempDir(), "t.yml")
	if err := os.WriteFile(cfg, []byte("limits:\n  max_concurrent_queries: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, err = parseServeFlags([]string{"--tenancy.enabled", "--tenancy.label", "org", "--tenancy.header", "X-Org", "--tenancy.config.file", cfg})
	if err != nil {
		t.Fatal(err)
	}
	r := c.tenancy.resolver
	if r == nil || r.Label() != "org" || r.Header() != "X-Org" || r.Tenant("a").Limits().MaxConcurrentQueries != 3 {
		t.Fatalf("resolver %+v", r)
	}
	if !slices.Contains(c.records.SeriesLabels, "org") {
		t.Errorf("derived series labels %v lack the tenant label", c.records.SeriesLabels)
	}

	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--tenancy.config.file", cfg}, "--tenancy.enabled is not"},
		{[]string{"--tenancy.enabled", "--tenancy.label", "__tenant"}, "reserved"},
		{[]string{"--tenancy.enabled", "--tenancy.label", "a-b"}, "want [a-zA-Z_]"},
		{[]string{"--tenancy.enabled", "--tenancy.header", ""}, "--tenancy.header is empty"},
		{[]string{"--tenancy.enabled", "--tenancy.config.file", filepath.Join(t.TempDir(), "missing.yml")}, "read tenancy config"},
	} {
		if _, _, err := parseServeFlags(tc.args); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.says)
		}
	}
}
