package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// pendingPart is the part of an Append batch that lands in one partition,
// framed into WAL entries before the store lock is taken.
type pendingPart struct {
	start   int64
	idx     []int // positions in the batch, in batch order
	entries []byte
}

type pendingSync struct {
	wal *walFile
	seq uint64
}

// Append stores recs. When it returns nil every record is in a fsynced WAL
// and survives a crash; Select sees them at once. Records may arrive in any
// time order: each goes to the partition of its own time, and partitions
// are sorted when sealed (docs/format/records.md, "Partitions").
//
// The batch is validated first and refused whole if any record is invalid
// (ErrInvalidRecord), falls in a partition already removed by retention
// (ErrOutOfRetention), or encodes to more than Options.MaxSegmentBytes.
// A write error stores nothing of the batch: partitions written before the
// failing one are cut back. After a sync error some records of the batch
// may have been stored, and every later Append fails, because the state of
// the file is then unknown (Recover reloads it).
func (s *Store) Append(recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	for i := range recs {
		if err := recs[i].Validate(); err != nil {
			return fmt.Errorf("append record %d: %w", i, err)
		}
	}
	parts, err := s.frame(recs)
	if err != nil {
		return err
	}

	s.mu.Lock()
	syncs, err := s.appendLocked(recs, parts)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	for _, ps := range syncs {
		if err := ps.wal.syncTo(ps.seq); err != nil {
			s.mu.Lock()
			if s.failed == nil {
				s.failed = err
			}
			s.mu.Unlock()
			return fmt.Errorf("append: %w", err)
		}
	}
	return nil
}

// frame groups the batch by partition and encodes its WAL entries.
func (s *Store) frame(recs []Record) ([]pendingPart, error) {
	byStart := map[int64]int{}
	var parts []pendingPart
	for i := range recs {
		start := recs[i].Time - recs[i].Time%s.dur
		k, ok := byStart[start]
		if !ok {
			k = len(parts)
			byStart[start] = k
			parts = append(parts, pendingPart{start: start})
		}
		parts[k].idx = append(parts[k].idx, i)
	}
	slices.SortFunc(parts, func(a, b pendingPart) int { return cmpInt64(a.start, b.start) })
	var total int64
	var payload []byte
	for k := range parts {
		p := &parts[k]
		for lo := 0; lo < len(p.idx); {
			// Cut entries at about targetEntryPayload bytes of rows.
			var rows []byte
			hi := lo
			for hi < len(p.idx) && (hi == lo || len(rows) < targetEntryPayload) {
				rows = recs[p.idx[hi]].Marshal(rows)
				hi++
			}
			payload = binary.AppendUvarint(payload[:0], uint64(hi-lo))
			payload = append(payload, rows...)
			p.entries = appendEntry(p.entries, payload)
			lo = hi
		}
		total += int64(len(p.entries))
	}
	if total > s.opts.MaxSegmentBytes {
		return nil, fmt.Errorf("append: batch of %d records encodes to %d bytes, more than MaxSegmentBytes %d", len(recs), total, s.opts.MaxSegmentBytes)
	}
	return parts, nil
}

// appendLocked writes the framed entries and updates the heads. Called with
// s.mu held. It returns the WAL writes that still need a group-commit sync.
func (s *Store) appendLocked(recs []Record, parts []pendingPart) ([]pendingSync, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if s.failed != nil {
		return nil, fmt.Errorf("append: store failed earlier: %w", s.failed)
	}
	for _, pp := range parts {
		if pp.start+s.dur <= s.cutoff {
			i := pp.idx[0]
			return nil, fmt.Errorf("append record %d: %w: time %d, retention removed data before %d", i, ErrOutOfRetention, recs[i].Time, s.cutoff)
		}
	}
	var syncs []pendingSync
	var sealErrs []error
	// A batch spanning partitions is written one partition at a time; if
	// a later write fails, the earlier ones are cut off again (WAL and
	// head), so a refused batch leaves nothing behind. Sealing waits until
	// every partition is written, for the same reason.
	var undo []partUndo
	var full []*partition
	fail := func(err error) ([]pendingSync, error) {
		if uerr := s.undoLocked(undo); uerr != nil && s.failed == nil {
			s.failed = uerr
		}
		return nil, fmt.Errorf("append: %w", err)
	}
	for _, pp := range parts {
		p := s.partition(pp.start)
		if p.head == nil {
			name := fileName(p.start, p.nextSeq, "wal")
			w, err := createWAL(s.opts.Dir, name, walHeader{PartStart: p.start, PartDur: s.dur})
			if err != nil {
				return fail(err)
			}
			p.head = &headGen{seq: p.nextSeq, wal: w}
			p.nextSeq++
		}
		h := p.head
		before := partUndo{h: h, size: h.wal.size, n: len(h.recs)}
		seq, err := h.wal.write(pp.entries)
		if err != nil {
			return fail(err)
		}
		undo = append(undo, before)
		for _, i := range pp.idx {
			h.recs = append(h.recs, recs[i].clone())
			s.observe(recs[i].Time)
		}
		if s.opts.SyncEveryWrite {
			if err := h.wal.syncTo(seq); err != nil {
				s.failed = err
				return nil, fmt.Errorf("append: %w", err)
			}
		} else {
			syncs = append(syncs, pendingSync{h.wal, seq})
		}
		if h.wal.size >= s.opts.MaxSegmentBytes {
			full = append(full, p)
		}
	}
	for _, p := range full {
		// Sealing fsyncs the segment, which covers this write too: syncTo
		// on the closed WAL returns at once.
		if err := s.seal(p); err != nil {
			sealErrs = append(sealErrs, err)
		}
	}
	if cut := s.cutIndex(); cut > s.lastCut {
		s.lastCut = cut
		if err := s.sealDue(); err != nil {
			sealErrs = append(sealErrs, err)
		}
	}
	if err := errors.Join(sealErrs...); err != nil {
		// The records are in their WALs; the seal is retried on the next
		// trigger or open, so the append itself succeeded.
		s.log.Error("records: seal", "err", err)
	}
	return syncs, nil
}

// partUndo is where one partition's head stood before a batch wrote to it.
type partUndo struct {
	h    *headGen
	size int64
	n    int
}

// undoLocked cuts the heads in u back to where they stood: the WAL files
// truncated (and synced, so a crash cannot bring the records back) and
// the records dropped from memory. An error means the files' state is
// unknown; the caller fails the store.
func (s *Store) undoLocked(u []partUndo) error {
	var errs []error
	for i := len(u) - 1; i >= 0; i-- {
		h := u[i].h
		clear(h.recs[u[i].n:])
		h.recs = h.recs[:u[i].n]
		if err := h.wal.f.Truncate(u[i].size); err != nil {
			errs = append(errs, fmt.Errorf("truncate wal %s back: %w", h.wal.path, err))
			continue
		}
		h.wal.size = u[i].size
		if err := h.wal.f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("sync wal %s after truncating: %w", h.wal.path, err))
		}
	}
	return errors.Join(errs...)
}
