package bpf

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoCgroup2 is returned when no cgroup v2 hierarchy is mounted.
var ErrNoCgroup2 = errors.New("no cgroup2 mount")

// ErrUnknownCgroup is returned by CgroupResolver.Path when no directory of
// the hierarchy has the id (the cgroup was removed, or the id is not from
// the v2 hierarchy).
var ErrUnknownCgroup = errors.New("unknown cgroup id")

// Cgroup2Mount returns where the cgroup v2 hierarchy is mounted, read from
// /proc/self/mountinfo: /sys/fs/cgroup on unified hosts,
// /sys/fs/cgroup/unified on hybrid ones.
func Cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("open mountinfo: %w", err)
	}
	defer f.Close()
	return FindCgroup2Mount(f)
}

// FindCgroup2Mount returns the mount point of the first cgroup2 file system
// in a mountinfo listing (proc(5) format: fields, " - ", fstype, source,
// options). Octal escapes in the mount point (\040 for a space) are decoded.
func FindCgroup2Mount(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fstype, _, _ := strings.Cut(post, " ")
		if fstype != "cgroup2" {
			continue
		}
		fields := strings.Fields(pre)
		if len(fields) < 5 {
			return "", fmt.Errorf("mountinfo: cgroup2 line has %d fields before separator, want >= 5: %q", len(fields), line)
		}
		return unescapeMountPath(fields[4]), nil
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read mountinfo: %w", err)
	}
	return "", ErrNoCgroup2
}

// unescapeMountPath decodes the \ooo octal escapes the kernel writes for
// space, tab, newline and backslash in mountinfo paths.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) && isOctal(s[i+1:i+4]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(s string) bool {
	if len(s) != 3 || s[0] > '3' {
		return false
	}
	for i := range 3 {
		if s[i] < '0' || s[i] > '7' {
			return false
		}
	}
	return true
}

// CgroupResolver maps cgroup ids (what bpf_get_current_cgroup_id and
// task->cgroups->dfl_cgrp->kn->id report) to paths relative to the cgroup v2
// root. On 64-bit kernels a cgroup's id is the inode number of its directory
// in cgroup2fs, so the resolver walks the hierarchy and indexes directories
// by inode. Unknown ids trigger a re-walk, at most once per MinRewalk.
//
// CgroupResolver is safe for concurrent use.
type CgroupResolver struct {
	root string
	// MinRewalk bounds how often a miss re-walks the hierarchy; zero
	// means every miss does.
	MinRewalk time.Duration

	mu       sync.Mutex
	paths    map[uint64]string
	lastWalk time.Time
}

// NewCgroupResolver returns a resolver for the hierarchy mounted at root; an
// empty root means the host's cgroup2 mount (Cgroup2Mount).
func NewCgroupResolver(root string) (*CgroupResolver, error) {
	if root == "" {
		var err error
		if root, err = Cgroup2Mount(); err != nil {
			return nil, err
		}
	}
	return &CgroupResolver{root: root, MinRewalk: time.Second, paths: map[uint64]string{}}, nil
}

// Root returns the mount point the resolver walks.
func (r *CgroupResolver) Root() string { return r.root }

// Path returns the cgroup path of id relative to the cgroup2 root, with a
// leading slash ("/" for the root cgroup, "/kubepods.slice/..." below it).
func (r *CgroupResolver) Path(id uint64) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.paths[id]; ok {
		return p, nil
	}
	if !r.lastWalk.IsZero() && time.Since(r.lastWalk) < r.MinRewalk {
		return "", fmt.Errorf("cgroup id %d: %w", id, ErrUnknownCgroup)
	}
	if err := r.walkLocked(); err != nil {
		return "", err
	}
	if p, ok := r.paths[id]; ok {
		return p, nil
	}
	return "", fmt.Errorf("cgroup id %d: %w", id, ErrUnknownCgroup)
}

// walkLocked rebuilds the id → path index. Directories that vanish during
// the walk are skipped.
func (r *CgroupResolver) walkLocked() error {
	paths := make(map[uint64]string, len(r.paths))
	err := filepath.WalkDir(r.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("stat %s: no inode number", p)
		}
		rel, err := filepath.Rel(r.root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			paths[st.Ino] = "/"
		} else {
			paths[st.Ino] = "/" + filepath.ToSlash(rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk cgroup hierarchy %s: %w", r.root, err)
	}
	r.paths = paths
	r.lastWalk = time.Now()
	return nil
}

// CgroupID returns the id of the cgroup directory dir (its inode number).
func CgroupID(dir string) (uint64, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return 0, fmt.Errorf("cgroup id: %w", err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("cgroup id of %s: no inode number", dir)
	}
	return st.Ino, nil
}
