package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// pendingPart is the part of an Append batch that lands in one partition,
// encoded into WAL batch payloads before the store lock is taken (their
// sequence numbers and generation are filled in under it).
type pendingPart struct {
	start    int64
	idx      []int // positions in the batch, in batch order
	payloads [][]byte
	bytes    int64
}

// Append stores recs. When it returns nil every record is in the fsynced
// WAL and survives a crash; Select sees them at once. Records may arrive
// in any time order: each goes to the partition of its own time, and
// partitions are sorted when sealed (docs/format/records.md, "Partitions").
//
// The batch is validated first and refused whole if any record is invalid
// (ErrInvalidRecord), falls in a partition already removed by retention
// (ErrOutOfRetention), or encodes to more than Options.MaxSegmentBytes.
// After a write or sync error nothing of the batch is stored: the WAL is
// cut back to the end of the newest write a sync covered, and every Append
// not acknowledged by then fails too, as does every later one until
// Recover, because the writer's page state is then unknown.
func (s *Store) Append(recs []Record) error {
	_, err := s.AppendBatch(recs, nil)
	return err
}

// AppendBatch is Append with, when meta is not nil, one byte string per
// record kept beside it in the WAL (never in segments) and handed back by
// ReplayWAL. It returns the sequence number of the batch's last WAL
// record: with Options.HoldWAL, a caller that has made its own state cover
// the batch passes it to Release.
func (s *Store) AppendBatch(recs []Record, meta [][]byte) (seq uint64, err error) {
	if len(recs) == 0 {
		return s.LastSeq(), nil
	}
	if meta != nil && len(meta) != len(recs) {
		return 0, fmt.Errorf("append: %d meta entries for %d records", len(meta), len(recs))
	}
	for i := range recs {
		if err := recs[i].Validate(); err != nil {
			return 0, fmt.Errorf("append record %d: %w", i, err)
		}
	}
	parts, err := s.frame(recs, meta)
	if err != nil {
		return 0, err
	}

	s.mu.Lock()
	wseq, last, err := s.appendLocked(recs, parts)
	l := s.wal
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if wseq == 0 {
		return last, nil // synced under the lock
	}
	if err := l.syncTo(wseq); err != nil {
		s.mu.Lock()
		if s.wal == l {
			s.fail(err)
		}
		s.mu.Unlock()
		return 0, fmt.Errorf("append: %w", err)
	}
	return last, nil
}

// frame groups the batch by partition and encodes its WAL batch payloads,
// cut at about targetEntryPayload bytes of rows so that replay memory stays
// flat.
func (s *Store) frame(recs []Record, meta [][]byte) ([]pendingPart, error) {
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
	for k := range parts {
		p := &parts[k]
		hdr := logBatch{PartStart: p.start, PartDur: s.dur, Meta: meta}
		for lo := 0; lo < len(p.idx); {
			// Rows go straight after the header; its count, the last 4
			// bytes, is set once the entry is cut.
			// A row is a few hundred bytes; the buffer grows past the
			// guess if rows are larger.
			est := min(targetEntryPayload+targetEntryPayload/4, 64+(len(p.idx)-lo)*384)
			payload := appendBatchHeader(make([]byte, 0, est), &hdr, 0)
			head := len(payload)
			hi := lo
			for hi < len(p.idx) && (hi == lo || len(payload)-head < targetEntryPayload) {
				var m []byte
				if meta != nil {
					m = meta[p.idx[hi]]
				}
				payload = appendBatchRow(payload, &recs[p.idx[hi]], meta != nil, m)
				hi++
			}
			binary.LittleEndian.PutUint32(payload[head-4:], uint32(hi-lo))
			p.payloads = append(p.payloads, payload)
			p.bytes += int64(len(payload))
			lo = hi
		}
		total += p.bytes
	}
	if total > s.opts.MaxSegmentBytes {
		return nil, fmt.Errorf("append: batch of %d records encodes to %d bytes, more than MaxSegmentBytes %d", len(recs), total, s.opts.MaxSegmentBytes)
	}
	return parts, nil
}

// appendLocked writes the batch payloads in one WAL write and updates the
// heads. Called with s.mu held. It returns the write for a group-commit
// sync (0 when it was synced here) and the last batch sequence number.
func (s *Store) appendLocked(recs []Record, parts []pendingPart) (wseq, last uint64, err error) {
	if s.closed {
		return 0, 0, ErrClosed
	}
	if s.failed != nil {
		return 0, 0, fmt.Errorf("append: store failed earlier: %w", s.failed)
	}
	for _, pp := range parts {
		if pp.start+s.dur <= s.cutoff {
			i := pp.idx[0]
			return 0, 0, fmt.Errorf("append record %d: %w: time %d, retention removed data before %d", i, ErrOutOfRetention, recs[i].Time, s.cutoff)
		}
	}
	var payloads [][]byte
	seq := s.wal.lastSeq
	for _, pp := range parts {
		p := s.partition(pp.start)
		gen := p.nextSeq
		if p.head != nil {
			gen = p.head.seq
		}
		for _, b := range pp.payloads {
			seq++
			patchBatch(b, seq, gen)
			payloads = append(payloads, b)
		}
	}
	wseq, startSeg, err := s.wal.write(payloads)
	if err != nil {
		// Some pages may have reached the file: they are cut off.
		s.fail(err)
		return 0, 0, fmt.Errorf("append: %w", err)
	}
	s.wal.noteBatch(startSeg, seq)
	var sealErrs []error
	for _, pp := range parts {
		p := s.partition(pp.start)
		if p.head == nil {
			p.head = &headGen{seq: p.nextSeq, firstSeg: startSeg}
			p.nextSeq++
		}
		h := p.head
		for _, i := range pp.idx {
			h.recs = append(h.recs, recs[i].clone())
			s.observe(recs[i].Time)
		}
		h.bytes += pp.bytes
		if h.bytes >= s.opts.MaxSegmentBytes {
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
		// The records are in the WAL; the seal is retried on the next
		// trigger or open, so the append itself succeeded.
		s.log.Error("records: seal", "err", err)
	}
	if err := s.truncateLog(); err != nil {
		s.log.Warn("records: truncate wal", "err", err)
	}
	if s.opts.SyncEveryWrite {
		if err := s.wal.syncTo(wseq); err != nil {
			s.fail(err)
			return 0, 0, fmt.Errorf("append: %w", err)
		}
		return 0, seq, nil
	}
	return wseq, seq, nil
}
