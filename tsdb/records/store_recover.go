package records

import "fmt"

// Failed returns the error that makes Append refuse (a WAL write or sync
// failed, so what reached the disk is unknown), or nil.
func (s *Store) Failed() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.failed
}

// Recover reloads the store from its files after a failure made Append
// refuse, exactly as Open would (a torn last WAL record is cut off), and
// accepts appends again; it does nothing when Append does not refuse. The
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
	_ = s.closeFiles() // already failed; what is on disk is reloaded below
	s.parts = map[int64]*partition{}
	s.hasData, s.maxT, s.lastCut = false, 0, 0
	failed := s.failed
	s.failed = nil
	if err := s.load(); err != nil {
		if s.wal != nil {
			s.wal.abandon()
			s.wal = nil
		}
		s.failed = failed
		return fmt.Errorf("recover records store %s: %w", s.opts.Dir, err)
	}
	return nil
}
