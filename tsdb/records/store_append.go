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
// After a write or sync error some records of the batch may have been
// stored; a sync error also fails every later Append, because the state of
// the file is then unknown.
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
	for _, pp := range parts {
		p := s.partition(pp.start)
		if p.head == nil {
			name := fileName(p.start, p.nextSeq, "wal")
			w, err := createWAL(s.opts.Dir, name, walHeader{PartStart: p.start, PartDur: s.dur})
			if err != nil {
				return nil, fmt.Errorf("append: %w", err)
			}
			p.head = &headGen{seq: p.nextSeq, wal: w}
			p.nextSeq++
		}
		h := p.head
		seq, err := h.wal.write(pp.entries)
		if err != nil {
			return nil, fmt.Errorf("append: %w", err)
		}
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
			// Sealing fsyncs the segment, which covers this write too:
			// syncTo on the closed WAL returns at once.
			if err := s.seal(p); err != nil {
				sealErrs = append(sealErrs, err)
			}
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
