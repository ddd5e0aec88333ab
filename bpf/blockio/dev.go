package blockio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Dev is a disk's device number in the kernel's internal encoding
// (major << 20 | minor), as the BPF program reports it.
type Dev uint32

// MakeDev builds a Dev from major and minor numbers.
func MakeDev(major, minor uint32) Dev { return Dev(major<<20 | minor&(1<<20-1)) }

// DevFromStat converts a user-space dev_t (stat's st_dev) to a Dev.
func DevFromStat(stDev uint64) Dev { return MakeDev(unix.Major(stDev), unix.Minor(stDev)) }

// Major returns the major number.
func (d Dev) Major() uint32 { return uint32(d) >> 20 }

// Minor returns the minor number.
func (d Dev) Minor() uint32 { return uint32(d) & (1<<20 - 1) }

// String returns "major:minor".
func (d Dev) String() string { return fmt.Sprintf("%d:%d", d.Major(), d.Minor()) }

// sysfsBlock is /sys/dev/block; a variable so tests can point it at a copy.
var sysfsBlock = "/sys/dev/block"

// ErrNotBlockDevice is returned by WholeDisk for device numbers that are
// not block devices (overlayfs, tmpfs and other anonymous devices).
var ErrNotBlockDevice = errors.New("not a block device")

// WholeDisk returns the disk a device belongs to: d itself for a disk, the
// parent disk for a partition (the BPF program counts a partition's
// requests under its disk).
func WholeDisk(d Dev) (Dev, error) {
	dir := filepath.Join(sysfsBlock, d.String())
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return 0, fmt.Errorf("device %s: %w", d, ErrNotBlockDevice)
	}
	if _, err := os.Stat(filepath.Join(resolved, "partition")); err != nil {
		return d, nil
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(resolved), "dev"))
	if err != nil {
		return 0, fmt.Errorf("parent disk of %s: %w", d, err)
	}
	return ParseDev(strings.TrimSpace(string(b)))
}

// ParseDev parses "major:minor".
func ParseDev(s string) (Dev, error) {
	ma, mi, ok := strings.Cut(s, ":")
	if !ok {
		return 0, fmt.Errorf("device %q: want major:minor", s)
	}
	major, err := strconv.ParseUint(ma, 10, 12)
	if err != nil {
		return 0, fmt.Errorf("device %q major: %w", s, err)
	}
	minor, err := strconv.ParseUint(mi, 10, 20)
	if err != nil {
		return 0, fmt.Errorf("device %q minor: %w", s, err)
	}
	return MakeDev(uint32(major), uint32(minor)), nil
}

// Name returns the kernel's name for the disk ("nvme0n1", "vda") from
// sysfs, or "" when it is unknown.
func (d Dev) Name() string {
	b, err := os.ReadFile(filepath.Join(sysfsBlock, d.String(), "uevent"))
	if err != nil {
		return ""
	}
	return ParseUeventDevname(b)
}

// ParseUeventDevname returns DEVNAME from a sysfs uevent file.
func ParseUeventDevname(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "DEVNAME="); ok {
			return v
		}
	}
	return ""
}
