package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPluginJSONID keeps the backend's ID and plugin.json in step, and the
// id used before the org-name-type rename resolvable as an alias (the
// migration the README describes depends on it).
func TestPluginJSONID(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(pluginRoot(), "src", "plugin.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pj struct {
		ID         string   `json:"id"`
		AliasIDs   []string `json:"aliasIDs"`
		Executable string   `json:"executable"`
	}
	if err := json.Unmarshal(b, &pj); err != nil {
		t.Fatalf("plugin.json: %v", err)
	}
	if pj.ID != ID {
		t.Errorf("plugin.json id %q, backend ID %q", pj.ID, ID)
	}
	if !slices.Contains(pj.AliasIDs, "tailroot-datasource") {
		t.Errorf("plugin.json aliasIDs %v lacks the old id tailroot-datasource", pj.AliasIDs)
	}
	if pj.Executable != "gpx_tailroot" {
		t.Errorf("plugin.json executable %q, the Makefile builds gpx_tailroot_<os>_<arch>", pj.Executable)
	}
}
