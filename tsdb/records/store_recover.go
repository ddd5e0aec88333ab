package records

import "fmt"

// Failed returns the error that makes Append refuse (a WAL write or sync
// failed, so the writer's state is unknown), or nil.
func (s *Store) Failed() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.failed
}

// fail makes Append refuse after a failed WAL write or sync, and cuts the
// WAL back to the end of the newest synced write: nothing of a refused
// batch is replayed, by Recover or by the next Open. A cut that fails is
// retried by Recover. Called with s.mu held.
func (s *Store) fail(err error) {
	if s.failed == nil {
		s.failed = err
	}
	if s.wal == nil {
		return
	}
	if cerr := s.wal.cutBack(err); cerr != nil {
		s.log.Error("records: cut the WAL back after a failed write; Recover retries", "err", cerr)
	}
}

// Recover reloads the store from its files after a failure made Append
// refuse, exactly as Open would, and accepts appends again; it does
// nothing when Append does not refuse. The WAL was cut back to the newest
// acknowledged write when the failure happened (Recover first retries that
// cut if it failed), so the reload holds no record of a refused batch. The
// caller must not append concurrently. Readers holding records of the old
// heads keep them.
func (s *Store) Recover() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.failed == nil {
		return nil
	}
	failed := s.failed
	var lastSeq uint64
	if s.wal != nil {
		if err := s.wal.cutBack(failed); err != nil {
			return fmt.Errorf("recover records store %s: %w", s.opts.Dir, err)
		}
		// Numbers handed out (or raised by AdvanceSeq) are never reused,
		// though the WAL may no longer hold the newest of them.
		lastSeq = s.wal.lastSeq
	}
	_ = s.closeFiles() // already failed and cut back; what is on disk is reloaded below
	s.parts = map[int64]*partition{}
	s.hasData, s.maxT, s.lastCut = false, 0, 0
	s.failed = nil
	if err := s.load(); err != nil {
		if s.wal != nil {
			s.wal.abandon()
			s.wal = nil
		}
		s.failed = failed
		return fmt.Errorf("recover records store %s: %w", s.opts.Dir, err)
	}
	if s.wal != nil && lastSeq > s.wal.lastSeq {
		s.wal.lastSeq = lastSeq
	}
	return nil
}
