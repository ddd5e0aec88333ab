//go:build unix

package tsdb

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// freeBytes returns the bytes available to unprivileged writers on the
// filesystem of dir.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil //nolint:unconvert // field types differ by platform
}
