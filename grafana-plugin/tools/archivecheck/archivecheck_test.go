package archivecheck

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBuiltArchive checks the zip `make plugin` wrote. `make -C
// grafana-plugin validate` (part of plugin-test) builds it and names it in
// PLUGIN_ZIP; the manifest is compared with this module's Go sources.
func TestBuiltArchive(t *testing.T) {
	zipPath := os.Getenv("PLUGIN_ZIP")
	if zipPath == "" {
		t.Skip("PLUGIN_ZIP not set: `make -C grafana-plugin validate` builds the plugin zip and runs this test on it")
	}
	opts := DefaultOptions()
	opts.SourceDir = filepath.Join("..", "..") // this file is tools/archivecheck/
	probs, sum, err := CheckFile(zipPath, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range probs {
		t.Errorf("%s", p)
	}
	t.Logf("%s: plugin %s %s, %d files, backends %v, manifest lists %d Go files, source map lists %d sources",
		filepath.Base(zipPath), sum.PluginID, sum.Version, sum.Files, sum.Backends, sum.ManifestGo, sum.SourceMapSrc)
	if len(sum.Backends) != len(opts.Platforms) {
		t.Errorf("found %d backends, want %d", len(sum.Backends), len(opts.Platforms))
	}
}

// fixture is a synthetic plugin: archive members and the source folder.
type fixture struct {
	files map[string]member // archive path -> content
	src   map[string]string // source path -> content
}

const id = "acme-thing-datasource"

func goodFixture() fixture {
	src := map[string]string{
		"pkg/main.go":               "package main\n\nfunc main() {}\n",
		"pkg/plugin/plugin.go":      "package plugin\n",
		"node_modules/x/ignored.go": "package ignored\n",
	}
	var manifest strings.Builder
	for _, p := range []string{"pkg/main.go", "pkg/plugin/plugin.go"} {
		h := sha256.Sum256([]byte(src[p]))
		manifest.WriteString(hex.EncodeToString(h[:]) + ":" + p + "\n")
	}
	pj, _ := json.Marshal(map[string]any{
		"id": id, "type": "datasource", "backend": true, "executable": "gpx_thing",
		"info": map[string]any{
			"version": "1.2.3", "updated": "2026-12-01",
			"logos": map[string]string{"small": "img/logo.svg", "large": "img/logo.svg"},
		},
	})
	f := map[string]member{
		"plugin.json":                 {0o644, pj},
		"module.js":                   {0o644, []byte("define([],function(){});\n//# sourceMappingURL=module.js.map")},
		"module.js.map":               {0o644, []byte(`{"version":3,"sources":["webpack://x/./module.ts"],"mappings":""}`)},
		"README.md":                   {0o644, []byte("# Thing\n\nSee [docs](https://example.com/docs) and `[not](a-link)`.\n\n```\n[also](not-a-link)\n```\n")},
		"CHANGELOG.md":                {0o644, []byte("# Changelog\n\n## 1.2.3\n\n- first\n")},
		"LICENSE":                     {0o644, []byte("Apache License\n")},
		"img/logo.svg":                {0o644, []byte("<svg/>")},
		"go_plugin_build_manifest":    {0o644, []byte(manifest.String())},
		"gpx_thing_linux_amd64":       {0o755, elfHeader(62)},
		"gpx_thing_linux_arm64":       {0o755, elfHeader(183)},
		"gpx_thing_darwin_amd64":      {0o755, machoHeader(0x01000007)},
		"gpx_thing_darwin_arm64":      {0o755, machoHeader(0x0100000c)},
		"gpx_thing_windows_amd64.exe": {0o644, peHeader(0x8664)},
	}
	return fixture{files: f, src: src}
}

// Minimal executable headers: just the fields platformOf reads.
func elfHeader(machine uint16) []byte {
	b := make([]byte, 64)
	copy(b, "\x7fELF\x02\x01\x01")
	binary.LittleEndian.PutUint16(b[18:], machine)
	return b
}

func machoHeader(cpu uint32) []byte {
	b := make([]byte, 32)
	binary.LittleEndian.PutUint32(b, 0xfeedfacf)
	binary.LittleEndian.PutUint32(b[4:], cpu)
	return b
}

func peHeader(machine uint16) []byte {
	b := make([]byte, 0x100)
	copy(b, "MZ")
	binary.LittleEndian.PutUint32(b[0x3c:], 0x80)
	copy(b[0x80:], "PE\x00\x00")
	binary.LittleEndian.PutUint16(b[0x84:], machine)
	return b
}

// check writes the fixture's source folder and zip (members under top/)
// and runs Check.
func (fx fixture) check(t *testing.T, top string) []Problem {
	t.Helper()
	dir := t.TempDir()
	for p, c := range fx.src {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, m := range fx.files {
		h := &zip.FileHeader{Name: top + "/" + name, Method: zip.Deflate}
		h.SetMode(m.mode)
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(m.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.SourceDir = dir
	probs, _, err := Check(zr, opts)
	if err != nil {
		t.Fatal(err)
	}
	return probs
}

func TestGoodArchivePasses(t *testing.T) {
	if probs := goodFixture().check(t, id); len(probs) != 0 {
		t.Fatalf("a valid archive was refused: %v", probs)
	}
}

// TestEachRuleCatches breaks one rule at a time in a valid archive and
// expects exactly that rule to be reported.
func TestEachRuleCatches(t *testing.T) {
	setJSON := func(fx fixture, edit func(m map[string]any)) {
		var m map[string]any
		if err := json.Unmarshal(fx.files["plugin.json"].data, &m); err != nil {
			panic(err)
		}
		edit(m)
		b, _ := json.Marshal(m)
		fx.files["plugin.json"] = member{0o644, b}
	}
	info := func(m map[string]any) map[string]any { return m["info"].(map[string]any) }
	cases := []struct {
		name    string
		top     string
		breakIt func(fx fixture)
		rule    string
		want    string // in the detail
	}{
		{"top folder not the id", "thing", func(fixture) {}, "archive-top-folder", `"thing" is not the plugin id`},
		{"old style id", "thing-datasource", func(fx fixture) {
			setJSON(fx, func(m map[string]any) { m["id"] = "thing-datasource" })
		}, "plugin-id", "org-name-type"},
		{"id type differs", "acme-thing-panel", func(fx fixture) {
			setJSON(fx, func(m map[string]any) { m["id"] = "acme-thing-panel" })
		}, "plugin-id", `type is "datasource"`},
		{"version placeholder", id, func(fx fixture) {
			setJSON(fx, func(m map[string]any) { info(m)["version"] = "%VERSION%" })
		}, "plugin-version", "%VERSION%"},
		{"no LICENSE", id, func(fx fixture) { delete(fx.files, "LICENSE") }, "required-files", "LICENSE"},
		{"no CHANGELOG", id, func(fx fixture) { delete(fx.files, "CHANGELOG.md") }, "required-files", "CHANGELOG.md"},
		{"CHANGELOG without the version", id, func(fx fixture) {
			fx.files["CHANGELOG.md"] = member{0o644, []byte("# Changelog\n\n## 1.2.2\n\nmentions 1.2.3 in text only\n")}
		}, "changelog", "1.2.3"},
		{"relative link in README", id, func(fx fixture) {
			fx.files["README.md"] = member{0o644, []byte("See [contract](CONTRACT.md).\n")}
		}, "readme-links", `"CONTRACT.md"`},
		{"relative image in README", id, func(fx fixture) {
			fx.files["README.md"] = member{0o644, []byte("![shot](../docs/images/a.png)\n")}
		}, "readme-links", `"../docs/images/a.png"`},
		{"relative HTML image in README", id, func(fx fixture) {
			fx.files["README.md"] = member{0o644, []byte(`<img src="img/a.png" width="10">` + "\n")}
		}, "readme-links", `"img/a.png"`},
		{"relative reference link in README", id, func(fx fixture) {
			fx.files["README.md"] = member{0o644, []byte("[x][1]\n\n[1]: docs/x.md\n")}
		}, "readme-links", `"docs/x.md"`},
		{"source map stripped", id, func(fx fixture) { delete(fx.files, "module.js.map") }, "source-map", "module.js.map missing"},
		{"module.js without map reference", id, func(fx fixture) {
			fx.files["module.js"] = member{0o644, []byte("define([],function(){});")}
		}, "module-js", "does not reference"},
		{"no manifest", id, func(fx fixture) { delete(fx.files, "go_plugin_build_manifest") }, "go-manifest", "missing"},
		{"source changed after the manifest", id, func(fx fixture) {
			fx.src["pkg/plugin/plugin.go"] = "package plugin\n\nvar changed = 1\n"
		}, "go-manifest", "manifest hash of pkg/plugin/plugin.go"},
		{"source not in the manifest", id, func(fx fixture) {
			fx.src["pkg/plugin/extra.go"] = "package plugin\n"
		}, "go-manifest", "pkg/plugin/extra.go is not in the manifest"},
		{"manifest lists a missing file", id, func(fx fixture) { delete(fx.src, "pkg/main.go") }, "go-manifest", "lists pkg/main.go"},
		{"linux/amd64 only", id, func(fx fixture) {
			for _, n := range []string{"gpx_thing_linux_arm64", "gpx_thing_darwin_amd64", "gpx_thing_darwin_arm64", "gpx_thing_windows_amd64.exe"} {
				delete(fx.files, n)
			}
		}, "backend-executable", "gpx_thing_darwin_arm64 missing"},
		{"backend for the wrong CPU", id, func(fx fixture) {
			fx.files["gpx_thing_linux_arm64"] = member{0o755, elfHeader(62)}
		}, "backend-executable", "built for linux/amd64, want linux/arm64"},
		{"windows backend not PE", id, func(fx fixture) {
			fx.files["gpx_thing_windows_amd64.exe"] = member{0o644, elfHeader(62)}
		}, "backend-executable", "built for linux/amd64, want windows/amd64"},
		{"backend not executable", id, func(fx fixture) {
			fx.files["gpx_thing_darwin_amd64"] = member{0o644, machoHeader(0x01000007)}
		}, "backend-executable", "not executable"},
		{"missing logo", id, func(fx fixture) { delete(fx.files, "img/logo.svg") }, "logos", "img/logo.svg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fx := goodFixture()
			c.breakIt(fx)
			probs := fx.check(t, c.top)
			found := false
			for _, p := range probs {
				if p.Rule != c.rule {
					t.Errorf("unexpected problem %s", p)
				}
				if strings.Contains(p.Detail, c.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("want a %s problem mentioning %q, got %v", c.rule, c.want, probs)
			}
		})
	}
}

func TestTwoTopFolders(t *testing.T) {
	fx := goodFixture()
	// One member outside the plugin folder.
	dir := t.TempDir()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, m := range fx.files {
		w, _ := zw.Create(id + "/" + name)
		_, _ = w.Write(m.data)
	}
	w, _ := zw.Create("stray.txt")
	_, _ = w.Write([]byte("x"))
	_ = zw.Close()
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.SourceDir = dir
	probs, _, err := Check(zr, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(probs) != 1 || probs[0].Rule != "archive-top-folder" {
		t.Fatalf("want one archive-top-folder problem, got %v", probs)
	}
}

func TestPlatformOfRealBinary(t *testing.T) {
	// The test binary itself is a real executable for this platform.
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	goos, goarch := platformOf(b)
	if want := runtime.GOOS + "/" + runtime.GOARCH; goos+"/"+goarch != want {
		t.Fatalf("platformOf(test binary) = %s/%s, want %s", goos, goarch, want)
	}
}
