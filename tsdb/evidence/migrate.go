package evidence

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/prometheus/prometheus/tsdb/wlog"
	"github.com/prometheus/prometheus/util/compression"

	"github.com/tailroot/tailroot/internal/fsutil"
)

// Version 1 stores kept each partition in one file, evidence-<start>.log:
// the magic "TREVID01", then records framed by length u32 LE and crc32c
// u32 LE of the body (docs/format/evidence.md). Open converts such a file
// once: it reads the records up to the first bad one, logs their bodies
// unchanged into a new partition directory under a temporary name,
// fsyncs it, renames it into place and only then removes the old file. A
// crash before the rename leaves the old file and a temporary directory
// (removed and redone); after it, the directory is complete and the old
// file only waits to be removed.

// readV1 returns the record bodies of a version 1 partition file and how
// many bytes after the last good record it had to ignore.
func readV1(path string) (bodies [][]byte, lost int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("evidence store: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	magic := make([]byte, len(fileMagic))
	n, err := io.ReadFull(r, magic)
	switch {
	case err == nil && string(magic) != fileMagic:
		return nil, 0, fmt.Errorf("evidence store: %s: not an evidence file (magic %q)", path, magic)
	case err != nil && string(magic[:n]) != fileMagic[:n]:
		return nil, 0, fmt.Errorf("evidence store: %s: not an evidence file (magic %q)", path, magic[:n])
	case err != nil:
		// Created, then a crash before the magic was complete: empty.
		return nil, 0, nil
	}
	off := int64(len(fileMagic))
	for {
		hdr, err := r.Peek(frameHeader)
		if len(hdr) == 0 && errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			break
		}
		size := int(uint32(hdr[0]) | uint32(hdr[1])<<8 | uint32(hdr[2])<<16 | uint32(hdr[3])<<24)
		if size > maxRecordBody {
			break
		}
		buf := make([]byte, frameHeader+size)
		if _, err := io.ReadFull(r, buf); err != nil {
			break
		}
		if _, _, _, err := decodeRecord(buf); err != nil {
			break
		}
		off += int64(len(buf))
		bodies = append(bodies, buf[frameHeader:])
	}
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, 0, fmt.Errorf("evidence store: %s: %w", path, err)
	}
	return bodies, end - off, nil
}

// migrateV1 converts the version 1 file of the partition at start into a
// partition directory and removes the file.
func (s *Store) migrateV1(start int64) error {
	path := filepath.Join(s.opts.Dir, partFileV1(start))
	final := filepath.Join(s.opts.Dir, partName(start))
	tmp := final + tmpSuffix
	bodies, lost, err := readV1(path)
	if err != nil {
		return err
	}
	if _, err := os.Stat(final); err == nil {
		// Renamed into place before a crash: the directory is complete.
		s.log.Info("evidence store: removing a converted version 1 file", "file", path)
		return errors.Join(os.Remove(path), fsutil.SyncDir(s.opts.Dir))
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("evidence store: %w", err)
	}
	w, err := wlog.NewSize(nil, nil, tmp, segmentBytes, compression.None)
	if err != nil {
		return fmt.Errorf("evidence store: convert %s: %w", path, err)
	}
	if len(bodies) > 0 {
		if err := w.Log(bodies...); err != nil {
			_ = w.Close()
			return fmt.Errorf("evidence store: convert %s: %w", path, err)
		}
	}
	// Close pads the last page and fsyncs the segment.
	if err := w.Close(); err != nil {
		return fmt.Errorf("evidence store: convert %s: %w", path, err)
	}
	if err := fsutil.SyncDir(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("evidence store: convert %s: %w", path, err)
	}
	if err := fsutil.SyncDir(s.opts.Dir); err != nil {
		return err
	}
	if lost > 0 {
		s.log.Warn("evidence store: a version 1 file ended in a bad record; converted what came before it", "file", path, "bytes_lost", lost)
		s.stats.CorruptBytes += lost
	}
	s.log.Info("evidence store: converted a version 1 partition file", "file", path, "items", len(bodies))
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("evidence store: %w", err)
	}
	return fsutil.SyncDir(s.opts.Dir)
}
