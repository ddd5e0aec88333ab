// Package wlogcut cuts a prometheus tsdb/wlog log back to a position: the
// segments after it are removed and the segment holding it is truncated
// there. The TSDB's write guard and the records store both use it after a
// failed write, so that the next open replays exactly the writes that were
// acknowledged and nothing of the one that was refused: wlog may have put
// some pages of a failed write in the file, and wlog itself has no way to
// take them back.
package wlogcut

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/prometheus/prometheus/tsdb/wlog"
)

// Cut removes everything written to the log in dir after offset off of
// segment seg: every later segment and the tail of seg. seg < 0 removes
// every segment. A missing directory holds nothing to cut. Shrinking never
// needs free space, so Cut works on a full disk. The truncated segment and
// the directory are fsynced: a cut that a power loss could undo would bring
// the refused write back.
func Cut(dir string, seg int, off int64) error {
	_, last, err := wlog.Segments(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list segments of %s: %w", dir, err)
	}
	var errs []error
	removed := false
	for i := last; i > seg && i >= 0; i-- {
		err := os.Remove(wlog.SegmentName(dir, i))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		removed = removed || err == nil
	}
	if seg >= 0 && seg <= last {
		if err := truncateSync(wlog.SegmentName(dir, seg), off); err != nil {
			errs = append(errs, err)
		}
	}
	if removed && len(errs) == 0 {
		if err := syncDir(dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func truncateSync(path string, off int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // removed by the log's own truncation: nothing to cut
	}
	if err != nil {
		return err
	}
	err = f.Truncate(off)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cut wal segment %s at %d: %w", path, off, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
