//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package evidence

// lockDir is a no-op where flock is unavailable; the caller must ensure a
// single writer per directory.
func lockDir(string) (func() error, error) { return func() error { return nil }, nil }
