//go:build linux

package diskfull

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size bytes on a fresh directory under t.TempDir()
// and unmounts it when the test ends. It skips the test when the process is
// not root or the kernel refuses the mount.
func Mount(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs to fill needs root; run the test as root (CI does)")
	}
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("mount tmpfs on %s: %v (needs CAP_SYS_ADMIN)", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Ballast is a file that holds all free space of its filesystem.
type Ballast struct {
	path string
	size int64
}

// Fill writes a file in dir until the filesystem is full and returns it;
// writes by anyone else then fail with ENOSPC.
func Fill(dir string) (*Ballast, error) {
	f, err := os.CreateTemp(dir, "ballast-*")
	if err != nil {
		return nil, fmt.Errorf("ballast: %w", err)
	}
	b := &Ballast{path: f.Name()}
	buf := make([]byte, 256<<10)
	for {
		n, err := f.Write(buf)
		b.size += int64(n)
		if err != nil {
			_ = f.Close()
			if errors.Is(err, syscall.ENOSPC) {
				// Smaller writes take the last partial block.
				if err := topUp(b); err != nil {
					return b, err
				}
				return b, nil
			}
			return b, fmt.Errorf("ballast: %w", err)
		}
	}
}

func topUp(b *Ballast) error {
	f, err := os.OpenFile(b.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("ballast: %w", err)
	}
	defer f.Close()
	one := make([]byte, 512)
	for {
		n, err := f.Write(one)
		b.size += int64(n)
		if err != nil {
			return nil
		}
	}
}

// Size is how many bytes the ballast took.
func (b *Ballast) Size() int64 { return b.size }

// Free removes the ballast, giving its space back.
func (b *Ballast) Free() error {
	if err := os.Remove(b.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("free ballast: %w", err)
	}
	return nil
}
