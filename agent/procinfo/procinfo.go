// Package procinfo reads what the agent labels a process with: its
// command name and its cgroup v2 path, and through bpf.ParseCgroupPath the
// container and pod it runs in. It also decides which processes are
// selected for per-process series.
//
// In: a /proc tree (the host's, or a fixture in tests). Out: Info values
// and the selected pids. Everything here is pure file reading; nothing
// needs root beyond reading other users' /proc entries.
package procinfo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/tailroot/tailroot/bpf"
)

// Info describes one process.
type Info struct {
	PID       int
	Comm      string        // /proc/PID/comm
	Cgroup    string        // cgroup v2 path, "/" for the root; "" when unknown
	Container bpf.Container // from the cgroup path
}

// ErrNoCgroup2 is returned by ParseCgroupFile when the file has no cgroup
// v2 ("0::") line.
var ErrNoCgroup2 = errors.New("no cgroup v2 entry")

// ParseCgroupFile returns the cgroup v2 path from the content of
// /proc/PID/cgroup: the line "0::<path>" (hybrid hosts also list v1
// hierarchies, which are ignored).
func ParseCgroupFile(b []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 1024), 1<<16)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			if !strings.HasPrefix(p, "/") {
				return "", fmt.Errorf("cgroup v2 path %q does not start with /", p)
			}
			return p, nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read cgroup file: %w", err)
	}
	return "", ErrNoCgroup2
}

// Reader reads process information from a /proc tree.
type Reader struct {
	// Root is the /proc mount; empty means "/proc".
	Root string
}

func (r Reader) root() string {
	if r.Root == "" {
		return "/proc"
	}
	return r.Root
}

// Lookup reads process pid. A process without a cgroup v2 entry gets an
// empty Cgroup; a missing process is an error matching os.ErrNotExist.
func (r Reader) Lookup(pid int) (Info, error) {
	dir := filepath.Join(r.root(), strconv.Itoa(pid))
	comm, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		return Info{}, fmt.Errorf("process %d: %w", pid, err)
	}
	in := Info{PID: pid, Comm: strings.TrimSuffix(string(comm), "\n")}
	cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
	if err != nil {
		return in, nil
	}
	if p, err := ParseCgroupFile(cg); err == nil {
		in.Cgroup = p
		in.Container, _ = bpf.ParseCgroupPath(p)
	}
	return in, nil
}

// PIDs lists the process ids under the /proc tree (not threads).
func (r Reader) PIDs() ([]int, error) {
	ents, err := os.ReadDir(r.root())
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 && e.IsDir() {
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out, nil
}

// Selector chooses processes for per-process series: any matching rule
// selects. The zero Selector selects nothing.
type Selector struct {
	Comm    []*regexp.Regexp // matched against the whole comm
	PIDs    []int
	Cgroups []string // cgroup path prefixes, matched at path-element boundaries
}

// Empty reports whether the selector has no rules.
func (s Selector) Empty() bool { return len(s.Comm) == 0 && len(s.PIDs) == 0 && len(s.Cgroups) == 0 }

// Match reports whether in is selected.
func (s Selector) Match(in Info) bool {
	for _, p := range s.PIDs {
		if p == in.PID {
			return true
		}
	}
	for _, re := range s.Comm {
		if re.MatchString(in.Comm) {
			return true
		}
	}
	if in.Cgroup != "" {
		for _, g := range s.Cgroups {
			g = strings.TrimSuffix(g, "/")
			if in.Cgroup == g || strings.HasPrefix(in.Cgroup, g+"/") || g == "" {
				return true
			}
		}
	}
	return false
}

// Scan returns the selected processes, in pid order. Processes that exit
// during the scan are skipped.
func (r Reader) Scan(s Selector) ([]Info, error) {
	if s.Empty() {
		return nil, nil
	}
	pids, err := r.PIDs()
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, pid := range pids {
		in, err := r.Lookup(pid)
		if err != nil {
			continue
		}
		if s.Match(in) {
			out = append(out, in)
		}
	}
	return out, nil
}
