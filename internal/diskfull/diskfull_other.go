//go:build !linux

package diskfull

import (
	"errors"
	"testing"
)

// Mount skips: tmpfs is Linux only.
func Mount(t testing.TB, _ int64) string {
	t.Skip("the disk-full tests mount a tmpfs, which needs Linux")
	return ""
}

// Ballast is a file that holds all free space of its filesystem.
type Ballast struct{}

// Fill is not supported outside Linux.
func Fill(string) (*Ballast, error) { return nil, errors.New("ballast: Linux only") }

// Size is how many bytes the ballast took.
func (b *Ballast) Size() int64 { return 0 }

// Free removes the ballast.
func (b *Ballast) Free() error { return nil }
