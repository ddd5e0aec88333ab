// Command buildmanifest writes go_plugin_build_manifest, the list of sha256
// hashes of every Go source file of the plugin that Grafana's plugin
// validator compares with the submitted source. It calls the plugin SDK's
// own generator (the one its mage build targets run) so that the file is
// byte for byte what the SDK's tooling would write; run it from the
// plugin's module root:
//
//	go run ./tools/buildmanifest -o dist/go_plugin_build_manifest
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/grafana/grafana-plugin-sdk-go/build/utils"
)

func main() {
	out := flag.String("o", "dist/go_plugin_build_manifest", "manifest file to write")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "buildmanifest:", err)
		os.Exit(1)
	}
}

func write(out string) error {
	// The SDK walks the working directory: it must be the module root.
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("run from the plugin's module root (no go.mod here): %w", err)
	}
	manifest, err := utils.GenerateManifest()
	if err != nil {
		return fmt.Errorf("hash Go sources: %w", err)
	}
	if manifest == "" {
		return fmt.Errorf("no Go sources found under %s", mustAbs("."))
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("create output folder: %w", err)
	}
	if err := os.WriteFile(out, []byte(manifest), 0o644); err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	return nil
}

func mustAbs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
