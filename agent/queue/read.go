package queue

import (
	"context"
	"encoding/binary"
	"errors"
	"os"
)

// Next returns the oldest unacknowledged record, waiting until there is
// one. Until Ack moves past it, Next returns the same record again, so the
// consumer can retry it; after a restart the queue starts from it.
func (q *Queue) Next(ctx context.Context) (Record, error) {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return Record{}, ErrClosed
		}
		rec, ok, err := q.peekLocked()
		q.mu.Unlock()
		if err != nil || ok {
			return rec, err
		}
		select {
		case <-ctx.Done():
			return Record{}, ctx.Err()
		case _, open := <-q.notify:
			if !open {
				return Record{}, ErrClosed
			}
		}
	}
}

// peekLocked reads the record at the cursor. ok is false when the queue
// holds no unacknowledged record. Sealed segments read through are
// deleted; a corrupt record skips the rest of its segment.
func (q *Queue) peekLocked() (Record, bool, error) {
	for {
		i := q.segIndex(q.cursor.Segment)
		if i < 0 {
			return Record{}, false, errors.New("BUG: queue cursor " + q.cursor.String() + " names no segment")
		}
		s := q.segs[i]
		newest := i == len(q.segs)-1
		if q.cursor.Offset >= s.size {
			if newest {
				return Record{}, false, nil
			}
			if err := q.advanceSegment(); err != nil {
				return Record{}, false, err
			}
			continue
		}
		hdr, err := q.readAt(s.seq, q.cursor.Offset, recordHdrSize)
		if err == nil {
			n := int64(binary.LittleEndian.Uint32(hdr[:4]))
			if n > q.opts.SegmentBytes || q.cursor.Offset+recordHdrSize+n > s.size {
				err = ErrBadCRC
			} else {
				var b []byte
				if b, err = q.readAt(s.seq, q.cursor.Offset, recordHdrSize+int(n)); err == nil {
					var payload []byte
					if payload, _, err = DecodeRecord(b, uint32(q.opts.SegmentBytes)); err == nil {
						return Record{
							Data: payload,
							Pos:  q.cursor,
							end:  Position{Segment: s.seq, Offset: q.cursor.Offset + recordHdrSize + n},
							idx:  q.curIdx,
						}, true, nil
					}
				}
			}
		}
		if !errors.Is(err, ErrBadCRC) && !errors.Is(err, ErrShortRecord) {
			return Record{}, false, err
		}
		lost := max(s.records-q.curIdx, 1)
		q.stats.CorruptRecords += uint64(lost)
		q.log.Error("queue: unreadable record; skipping the rest of its segment",
			"segment", s.seq, "offset", q.cursor.Offset, "records_lost", lost, "err", err)
		if newest {
			// Seal the damaged segment so the skip below has a successor.
			if err := q.roll(); err != nil {
				return Record{}, false, err
			}
		}
		if err := q.advanceSegment(); err != nil {
			return Record{}, false, err
		}
	}
}

// advanceSegment moves the cursor to the start of the segment after its
// current one, persists it and deletes the segment left behind.
func (q *Queue) advanceSegment() error {
	i := q.segIndex(q.cursor.Segment)
	old := q.segs[i]
	next := q.segs[i+1]
	q.cursor, q.curIdx = Position{Segment: next.seq, Offset: segmentHdrSize}, 0
	if err := q.writeCursor(); err != nil {
		return err
	}
	q.segs = append(q.segs[:i], q.segs[i+1:]...)
	q.closeReader(old.seq)
	if err := os.Remove(q.segPath(old.seq)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Ack records that rec was delivered (or deliberately
// dropped) and persists the cursor past it. Acknowledging a record that
// is no longer at the cursor (its segment was dropped while it was being
// sent) does nothing.
func (q *Queue) Ack(rec Record) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return ErrClosed
	}
	if rec.Pos != q.cursor {
		return nil
	}
	q.cursor, q.curIdx = rec.end, rec.idx+1
	q.stats.Acked++
	i := q.segIndex(q.cursor.Segment)
	if i >= 0 && i < len(q.segs)-1 && q.cursor.Offset >= q.segs[i].size {
		return q.advanceSegment()
	}
	return q.writeCursor()
}
