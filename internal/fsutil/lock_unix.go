//go:build linux || darwin || freebsd || netbsd || openbsd

package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// LockDir takes an exclusive advisory lock on dir/LOCK so two processes
// never write the same store. The kernel drops the lock when the process
// dies, so a crash never leaves the directory locked.
func LockDir(dir string) (unlock func() error, err error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: held by another process: %w", f.Name(), err)
	}
	return f.Close, nil
}
