package bpf

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Mapping is one line of /proc/PID/maps.
type Mapping struct {
	Start, End uint64 // virtual address range [Start, End)
	Perms      string // "r-xp" and the like
	Offset     uint64 // file offset of Start, bytes
	Inode      uint64 // 0 for anonymous mappings
	Path       string // file path, pseudo name ("[heap]") or ""; may end in " (deleted)"
}

// ParseMaps parses the proc(5) /proc/PID/maps format:
//
//	7f12a0000000-7f12a0021000 r-xp 00000000 fd:01 1314 /usr/lib/libcuda.so.1
//
// The path is everything after the inode, so paths containing spaces survive.
func ParseMaps(r io.Reader) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		m, err := parseMapsLine(sc.Text())
		if err != nil {
			return out, fmt.Errorf("maps line %d: %w", n, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read maps: %w", err)
	}
	return out, nil
}

func parseMapsLine(line string) (Mapping, error) {
	var m Mapping
	rest := line
	var f [5]string
	for i := range f {
		rest = strings.TrimLeft(rest, " ")
		var ok bool
		f[i], rest, ok = strings.Cut(rest, " ")
		if f[i] == "" || (!ok && i < 4) {
			return m, fmt.Errorf("want 5 fields before the path: %q", line)
		}
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return m, fmt.Errorf("address range %q: no dash", f[0])
	}
	var err error
	if m.Start, err = strconv.ParseUint(lo, 16, 64); err != nil {
		return m, fmt.Errorf("address range start %q: %w", lo, err)
	}
	if m.End, err = strconv.ParseUint(hi, 16, 64); err != nil {
		return m, fmt.Errorf("address range end %q: %w", hi, err)
	}
	if m.End < m.Start {
		return m, fmt.Errorf("address range %q: end before start", f[0])
	}
	if len(f[1]) != 4 {
		return m, fmt.Errorf("perms %q: want 4 characters", f[1])
	}
	m.Perms = f[1]
	if m.Offset, err = strconv.ParseUint(f[2], 16, 64); err != nil {
		return m, fmt.Errorf("offset %q: %w", f[2], err)
	}
	if m.Inode, err = strconv.ParseUint(f[4], 10, 64); err != nil {
		return m, fmt.Errorf("inode %q: %w", f[4], err)
	}
	m.Path = strings.TrimLeft(rest, " ")
	return m, nil
}

// MappedFiles returns the distinct file paths mapped into process pid for
// which match returns true, in address order. The paths are as the process
// sees them (its mount namespace); use ProcRootPath to open them from the
// host.
func MappedFiles(pid int, match func(path string) bool) ([]string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, fmt.Errorf("open maps of pid %d: %w", pid, err)
	}
	defer f.Close()
	maps, err := ParseMaps(f)
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	var out []string
	seen := map[string]bool{}
	for _, m := range maps {
		if m.Inode == 0 || !strings.HasPrefix(m.Path, "/") || seen[m.Path] || !match(m.Path) {
			continue
		}
		seen[m.Path] = true
		out = append(out, m.Path)
	}
	return out, nil
}

// ProcRootPath returns a host path for a file as process pid sees it
// (/proc/PID/root/...), which reaches into the process's mount namespace,
// so libraries inside containers can be probed from the host.
func ProcRootPath(pid int, path string) string {
	return filepath.Join(fmt.Sprintf("/proc/%d/root", pid), path)
}

// LibraryBase returns the file name of path up to ".so" ("libcuda" for
// "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05"), or "" when the name
// has no ".so".
func LibraryBase(path string) string {
	name := filepath.Base(path)
	if i := strings.Index(name, ".so"); i > 0 && (len(name) == i+3 || name[i+3] == '.') {
		return name[:i]
	}
	return ""
}
