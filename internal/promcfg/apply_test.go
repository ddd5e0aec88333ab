package promcfg

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/config"
)

func TestReloadAppliesToComponents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tailroot.yml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("global:\n  external_labels: {site: one}\n")
	h, err := NewHolder(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	h.AddApplier(Applier{Name: "first", Apply: func(c *config.Config) error {
		seen = append(seen, "first:"+c.GlobalConfig.ExternalLabels.Get("site"))
		return nil
	}})
	h.AddApplier(Applier{Name: "refuser", Apply: func(c *config.Config) error {
		seen = append(seen, "refuser:"+c.GlobalConfig.ExternalLabels.Get("site"))
		if c.GlobalConfig.ExternalLabels.Get("site") == "bad" {
			return errors.New("refused")
		}
		return nil
	}})

	write("global:\n  external_labels: {site: two}\n")
	if _, err := h.Reload(nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(seen, ","); got != "first:two,refuser:two" {
		t.Fatalf("appliers saw %s, want first:two,refuser:two", got)
	}

	// A component that refuses is named; the others and the holder move on.
	seen = nil
	write("global:\n  external_labels: {site: bad}\n")
	_, err = h.Reload(nil)
	if err == nil || !strings.Contains(err.Error(), "refuser") {
		t.Fatalf("reload error %v, want one naming the refusing component", err)
	}
	if got := h.Get().GlobalConfig.ExternalLabels.Get("site"); got != "bad" {
		t.Fatalf("holder has site %q after a partly refused reload, want bad", got)
	}
	if got := strings.Join(seen, ","); got != "first:bad,refuser:bad" {
		t.Fatalf("appliers saw %s", got)
	}

	// A file that does not load reaches no component.
	seen = nil
	write("global: [\n")
	if _, err := h.Reload(nil); err == nil {
		t.Fatal("a broken file reloaded")
	}
	if len(seen) != 0 || h.Get().GlobalConfig.ExternalLabels.Get("site") != "bad" {
		t.Fatalf("broken file reached components %v or replaced the config", seen)
	}
}
