//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package fsutil

// LockDir is a no-op where flock is unavailable; the caller must ensure a
// single writer per directory.
func LockDir(string) (func() error, error) { return func() error { return nil }, nil }
