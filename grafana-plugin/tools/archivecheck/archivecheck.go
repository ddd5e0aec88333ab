package archivecheck

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Options says what the archive must hold beyond what plugin.json says.
type Options struct {
	// SourceDir is the plugin's Go module root, whose .go files the build
	// manifest must list. Empty: the current directory.
	SourceDir string
	// Platforms are the os/arch pairs that must each have a backend
	// executable. Empty: none is required (a frontend-only plugin).
	Platforms []string
}

// DefaultOptions requires the platforms Grafana publishes plugin backends
// for: linux and darwin on amd64 and arm64, windows on amd64.
func DefaultOptions() Options {
	return Options{
		SourceDir: ".",
		Platforms: []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64"},
	}
}

// Problem is one broken rule.
type Problem struct {
	Rule   string // short name, e.g. "readme-links"
	Detail string // what was wrong, naming the file and value
}

func (p Problem) String() string { return p.Rule + ": " + p.Detail }

// Summary describes a checked archive, for the test's log.
type Summary struct {
	PluginID     string
	Version      string
	Files        int
	Backends     []string // archive paths of the executables found
	ManifestGo   int      // Go files the manifest lists
	SourceMapSrc int      // sources module.js.map lists
}

// member is one regular file of the archive, read into memory.
type member struct {
	mode fs.FileMode
	data []byte
}

// CheckFile opens the zip at name and checks it.
func CheckFile(name string, opts Options) ([]Problem, Summary, error) {
	r, err := zip.OpenReader(name)
	if err != nil {
		return nil, Summary{}, fmt.Errorf("open plugin archive: %w", err)
	}
	defer r.Close()
	return Check(&r.Reader, opts)
}

// Check checks an opened archive. The error is for failures to read it or
// the source folder; broken rules are Problems.
func Check(zr *zip.Reader, opts Options) ([]Problem, Summary, error) {
	var sum Summary
	if opts.SourceDir == "" {
		opts.SourceDir = "."
	}
	files := map[string]member{}
	tops := map[string]bool{}
	for _, f := range zr.File {
		name := strings.TrimPrefix(f.Name, "./")
		if top, _, _ := strings.Cut(name, "/"); top != "" {
			tops[top] = true
		}
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return nil, sum, fmt.Errorf("open %s in archive: %w", f.Name, err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, sum, fmt.Errorf("read %s in archive: %w", f.Name, err)
		}
		files[name] = member{mode: f.Mode(), data: data}
	}
	sum.Files = len(files)

	var probs []Problem
	add := func(rule, format string, args ...any) {
		probs = append(probs, Problem{Rule: rule, Detail: fmt.Sprintf(format, args...)})
	}

	if len(tops) != 1 {
		add("archive-top-folder", "want exactly one top folder, found %d: %s", len(tops), strings.Join(sortedKeys(tops), ", "))
		return probs, sum, nil
	}
	top := sortedKeys(tops)[0]
	get := func(rel string) (member, bool) {
		m, ok := files[top+"/"+rel]
		return m, ok
	}

	pj, ok := get("plugin.json")
	if !ok {
		add("plugin-json", "%s/plugin.json missing", top)
		return probs, sum, nil
	}
	var meta pluginJSON
	if err := json.Unmarshal(pj.data, &meta); err != nil {
		add("plugin-json", "%s/plugin.json: %v", top, err)
		return probs, sum, nil
	}
	sum.PluginID, sum.Version = meta.ID, meta.Info.Version

	// Identity.
	if top != meta.ID {
		add("archive-top-folder", "top folder %q is not the plugin id %q", top, meta.ID)
	}
	checkID(meta, add)
	if !semver.MatchString(meta.Info.Version) {
		add("plugin-version", "info.version %q is not a version (x.y.z[-pre])", meta.Info.Version)
	}
	if !isoDate.MatchString(meta.Info.Updated) {
		add("plugin-version", "info.updated %q is not a date (YYYY-MM-DD)", meta.Info.Updated)
	}

	// Backend executables.
	if meta.Backend {
		if meta.Executable == "" || strings.ContainsAny(meta.Executable, `/\`) {
			add("backend-executable", "plugin.json executable %q must be a bare file name", meta.Executable)
		} else {
			for _, p := range opts.Platforms {
				goos, goarch, _ := strings.Cut(p, "/")
				rel := meta.Executable + "_" + goos + "_" + goarch
				if goos == "windows" {
					rel += ".exe"
				}
				m, ok := get(rel)
				if !ok {
					add("backend-executable", "%s/%s missing (backend for %s)", top, rel, p)
					continue
				}
				sum.Backends = append(sum.Backends, top+"/"+rel)
				if goos != "windows" && m.mode&0o111 == 0 {
					add("backend-executable", "%s/%s is not executable (mode %v)", top, rel, m.mode)
				}
				if gotOS, gotArch := platformOf(m.data); gotOS != goos || gotArch != goarch {
					add("backend-executable", "%s/%s is built for %s/%s, want %s", top, rel, gotOS, gotArch, p)
				}
			}
		}
	} else if len(opts.Platforms) > 0 {
		add("backend-executable", "plugin.json has no \"backend\": true but backends for %s are required", strings.Join(opts.Platforms, ", "))
	}

	// Frontend and its source map.
	if js, ok := get("module.js"); !ok {
		add("module-js", "%s/module.js missing", top)
	} else if !bytes.Contains(js.data, []byte("sourceMappingURL=module.js.map")) {
		add("module-js", "%s/module.js does not reference module.js.map", top)
	}
	if sm, ok := get("module.js.map"); !ok {
		add("source-map", "%s/module.js.map missing", top)
	} else {
		var m struct {
			Sources []string `json:"sources"`
		}
		if err := json.Unmarshal(sm.data, &m); err != nil || len(m.Sources) == 0 {
			add("source-map", "%s/module.js.map is not a source map with sources (%v)", top, err)
		}
		sum.SourceMapSrc = len(m.Sources)
	}

	// Documents.
	for _, rel := range []string{"README.md", "CHANGELOG.md", "LICENSE"} {
		if m, ok := get(rel); !ok || len(bytes.TrimSpace(m.data)) == 0 {
			add("required-files", "%s/%s missing or empty", top, rel)
		}
	}
	if cl, ok := get("CHANGELOG.md"); ok && semver.MatchString(meta.Info.Version) {
		if !changelogHas(cl.data, meta.Info.Version) {
			add("changelog", "%s/CHANGELOG.md has no heading for version %s", top, meta.Info.Version)
		}
	}
	if rd, ok := get("README.md"); ok {
		for _, l := range relativeLinks(rd.data) {
			add("readme-links", "%s/README.md links to relative %q; use an absolute URL", top, l)
		}
	}
	for _, logo := range []string{meta.Info.Logos.Small, meta.Info.Logos.Large} {
		if logo == "" {
			add("logos", "plugin.json info.logos needs small and large")
		} else if _, ok := get(path.Clean(logo)); !ok {
			add("logos", "logo %s named in plugin.json is not in the archive", logo)
		}
	}
	for _, s := range meta.Info.Screenshots {
		if _, ok := get(path.Clean(s.Path)); !ok {
			add("screenshots", "screenshot %s named in plugin.json is not in the archive", s.Path)
		}
	}

	// Go build manifest.
	if meta.Backend {
		mf, ok := get("go_plugin_build_manifest")
		if !ok {
			add("go-manifest", "%s/go_plugin_build_manifest missing", top)
		} else {
			n, err := checkManifest(mf.data, opts.SourceDir, add)
			if err != nil {
				return nil, sum, err
			}
			sum.ManifestGo = n
		}
	}
	return probs, sum, nil
}

// pluginJSON is the part of plugin.json the rules look at.
type pluginJSON struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Backend    bool   `json:"backend"`
	Executable string `json:"executable"`
	Info       struct {
		Version string `json:"version"`
		Updated string `json:"updated"`
		Logos   struct {
			Small string `json:"small"`
			Large string `json:"large"`
		} `json:"logos"`
		Screenshots []struct {
			Path string `json:"path"`
		} `json:"screenshots"`
	} `json:"info"`
}

var (
	// org-name-type: lower-case words joined by dashes, at least three.
	pluginID = regexp.MustCompile(`^[a-z0-9]+-[a-z0-9]+(-[a-z0-9]+)*-(app|panel|datasource|secretsmanager)$`)
	semver   = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	isoDate  = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
)

func checkID(meta pluginJSON, add func(rule, format string, args ...any)) {
	if !pluginID.MatchString(meta.ID) {
		add("plugin-id", "id %q is not of the form org-name-type (e.g. myorg-myplugin-datasource)", meta.ID)
		return
	}
	if typ := meta.ID[strings.LastIndex(meta.ID, "-")+1:]; typ != meta.Type {
		add("plugin-id", "id %q ends in %q but plugin.json type is %q", meta.ID, typ, meta.Type)
	}
}

// changelogHas reports whether a Markdown heading names the version
// ("## 0.1.0", "## [0.1.0] - 2026-12-01", "## v0.1.0").
func changelogHas(md []byte, version string) bool {
	for line := range strings.Lines(string(md)) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "#") {
			continue
		}
		for _, w := range strings.Fields(strings.TrimLeft(line, "#")) {
			if strings.TrimPrefix(strings.Trim(w, "[]()"), "v") == version {
				return true
			}
		}
	}
	return false
}

var (
	mdLink    = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)`) // [text](target), ![alt](target)
	mdRefDef  = regexp.MustCompile(`(?m)^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(\s|$)`)
	htmlAttr  = regexp.MustCompile(`(?i)\b(?:href|src)\s*=\s*["']([^"']+)["']`)
	absoluteU = regexp.MustCompile(`^(?i)(https?:|mailto:)`)
	codeFence = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```[^\\n]*$")
	codeSpan  = regexp.MustCompile("`[^`\\n]*`")
)

// relativeLinks lists the link and image targets of a Markdown document
// that are not absolute URLs. Code blocks and spans are not links.
func relativeLinks(md []byte) []string {
	text := codeFence.ReplaceAll(md, nil)
	text = codeSpan.ReplaceAll(text, nil)
	var out []string
	for _, re := range []*regexp.Regexp{mdLink, mdRefDef, htmlAttr} {
		for _, m := range re.FindAllSubmatch(text, -1) {
			if t := string(m[1]); !absoluteU.MatchString(t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// platformOf reads the OS format and CPU from an executable's header.
// Only the formats and CPUs Go plugin backends are built for are named.
func platformOf(b []byte) (goos, goarch string) {
	le := binary.LittleEndian
	switch {
	case len(b) >= 20 && bytes.HasPrefix(b, []byte("\x7fELF")):
		switch le.Uint16(b[18:]) { // e_machine
		case 62:
			return "linux", "amd64"
		case 183:
			return "linux", "arm64"
		}
		return "linux", "unknown"
	case len(b) >= 8 && le.Uint32(b) == 0xfeedfacf: // 64-bit Mach-O, little endian
		switch le.Uint32(b[4:]) { // cputype
		case 0x01000007:
			return "darwin", "amd64"
		case 0x0100000c:
			return "darwin", "arm64"
		}
		return "darwin", "unknown"
	case len(b) >= 0x40 && bytes.HasPrefix(b, []byte("MZ")):
		off := int(le.Uint32(b[0x3c:]))
		if off < 0 || off+6 > len(b) || !bytes.Equal(b[off:off+4], []byte("PE\x00\x00")) {
			return "windows", "unknown"
		}
		switch le.Uint16(b[off+4:]) { // COFF Machine
		case 0x8664:
			return "windows", "amd64"
		case 0xaa64:
			return "windows", "arm64"
		}
		return "windows", "unknown"
	}
	return "unknown", "unknown"
}

// checkManifest compares go_plugin_build_manifest ("<sha256>:<path>" per
// line) with the Go files under dir and returns how many it lists.
func checkManifest(manifest []byte, dir string, add func(rule, format string, args ...any)) (int, error) {
	listed := map[string]string{}
	for i, line := range strings.Split(strings.TrimRight(string(manifest), "\n"), "\n") {
		sum, p, ok := strings.Cut(line, ":")
		if !ok || len(sum) != 64 || p == "" {
			add("go-manifest", "manifest line %d %q is not <sha256>:<path>", i+1, line)
			continue
		}
		listed[p] = sum
	}
	source, err := goSources(dir)
	if err != nil {
		return 0, err
	}
	for _, p := range sortedKeys(source) {
		want, ok := listed[p]
		switch {
		case !ok:
			add("go-manifest", "Go source %s is not in the manifest", p)
		case want != source[p]:
			add("go-manifest", "manifest hash of %s is %s, the source's is %s", p, want, source[p])
		}
	}
	for _, p := range sortedKeys(listed) {
		if _, ok := source[p]; !ok {
			add("go-manifest", "manifest lists %s, which is not in the source", p)
		}
	}
	return len(listed), nil
}

// goSources hashes every .go file under dir, keyed by its slash-separated
// path relative to dir, skipping a top-level node_modules.
func goSources(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() && rel == "node_modules" {
			return fs.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		h := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(h[:])
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("hash Go sources under %s: %w", dir, err)
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
