package tsdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/metadata"

	"github.com/tailroot/tailroot/internal/fsutil"
)

const metadataFile = "tailroot-metadata.json"

// Bounds of the metadata store.
const (
	// maxMetadataFamilies is the most families kept; reports for further
	// families are dropped and counted (Dropped). 100,000 families is far
	// beyond what one Prometheus holds in its scrape caches.
	maxMetadataFamilies = 100_000
	// maxMetadataText bounds help and unit texts, in bytes; longer ones are
	// cut on a rune boundary.
	maxMetadataText = 4096
	// metadataFlushInterval is how often a changed store is written out.
	metadataFlushInterval = 10 * time.Second
)

// MetadataStore keeps the type, help and unit of each metric family as
// writers last reported them — one entry per family, the newest, as
// Prometheus' scrape cache keeps it. A push-only server has no scrape
// cache, so tailroot keeps what remote write and OTLP send and persists it
// beside the TSDB.
//
// Size is bounded: at most 100,000 families, help and unit at most 4 KiB
// each, so the store holds at most ~800 MiB however many help variants
// writers send (4,000 variants of one family are one entry).
//
// Persistence: Set changes memory only; the whole store is written (temp
// file, fsync, rename, directory fsync) every 10 s when it changed, and at
// Close. A crash loses at most the changes of the last 10 s: the next write
// from the same sender reports them again. Metadata is not acknowledged
// data in Prometheus either (remote write sends it with every batch or on
// an interval, and the scrape cache is memory only), and the WAL's samples
// do not depend on it.
type MetadataStore struct {
	path string

	mu       sync.RWMutex
	families map[string]metadata.Metadata
	dirty    bool
	dropped  int
	flushErr error

	stop chan struct{}
	done chan struct{}
}

func openMetadata(dir string) (*MetadataStore, error) {
	s := &MetadataStore{
		path: filepath.Join(dir, metadataFile), families: map[string]metadata.Metadata{},
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read metadata: %w", err)
	default:
		// The file keeps the /api/v1/metadata shape, a list per family;
		// files written before one entry per family hold several, the
		// newest last.
		var onDisk map[string][]metadata.Metadata
		if err := json.Unmarshal(b, &onDisk); err != nil {
			return nil, fmt.Errorf("decode metadata %s: %w", s.path, err)
		}
		for n, ms := range onDisk {
			if len(ms) > 0 && len(s.families) < maxMetadataFamilies {
				s.families[n] = ms[len(ms)-1]
			}
		}
	}
	go s.flushLoop(metadataFlushInterval)
	return s, nil
}

// Set records m as the metadata of family name. It fails only when the
// last periodic write failed, so a full disk is reported to writers rather
// than hidden until Close.
func (s *MetadataStore) Set(name string, m metadata.Metadata) error {
	if name == "" || (m.Type == "" && m.Help == "" && m.Unit == "") {
		return nil
	}
	m.Help, m.Unit = cutText(m.Help), cutText(m.Unit)
	s.mu.RLock()
	cur, known := s.families[name]
	err := s.flushErr
	s.mu.RUnlock()
	if known && cur == m {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.families[name]; !known && len(s.families) >= maxMetadataFamilies {
		s.dropped++
		return s.flushErr
	}
	s.families[name] = m
	s.dirty = true
	return s.flushErr
}

// Ready returns why the last write of the store failed, or nil: writes
// that carry metadata are refused until a later flush succeeds.
func (s *MetadataStore) Ready() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.flushErr
}

// Get returns the metadata of every family (or only metric when it is not
// empty), at most limit families, in the /api/v1/metadata shape: a list
// per family, here always its one, newest, entry, which is within every
// limitPerMetric. A non-positive limit means no limit.
func (s *MetadataStore) Get(metric string, limit, limitPerMetric int) map[string][]metadata.Metadata {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string][]metadata.Metadata{}
	names := make([]string, 0, len(s.families))
	for n := range s.families {
		if metric == "" || n == metric {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if limit > 0 && len(out) >= limit {
			break
		}
		out[n] = []metadata.Metadata{s.families[n]}
	}
	_ = limitPerMetric // one entry per family is within every positive limit
	return out
}

// Dropped is how many reports for new families were dropped because the
// store was full.
func (s *MetadataStore) Dropped() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.dropped
}

func (s *MetadataStore) flushLoop(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			_ = s.flush()
		}
	}
}

// close stops the periodic writes and writes what changed since the last.
func (s *MetadataStore) close() error {
	close(s.stop)
	<-s.done
	return s.flush()
}

// flush writes the store when it changed. The encoding happens under the
// read lock, the write outside any lock, so Set does not wait on the disk.
func (s *MetadataStore) flush() error {
	s.mu.Lock()
	if !s.dirty {
		s.mu.Unlock()
		return nil
	}
	onDisk := make(map[string][]metadata.Metadata, len(s.families))
	for n, m := range s.families {
		onDisk[n] = []metadata.Metadata{m}
	}
	s.dirty = false
	s.mu.Unlock()

	b, err := json.Marshal(onDisk)
	if err == nil {
		err = fsutil.WriteFileAtomic(filepath.Dir(s.path), filepath.Base(s.path), b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.dirty = true // try again at the next tick
		// Wrapping ErrUnavailable makes writers that carry metadata answer
		// 503 with Retry-After, as for a failed WAL write: it clears by
		// itself once a later flush succeeds.
		s.flushErr = fmt.Errorf("%w: write metadata: %w", ErrUnavailable, err)
		return s.flushErr
	}
	s.flushErr = nil
	return nil
}

// cutText bounds a help or unit text to maxMetadataText bytes on a rune
// boundary.
func cutText(s string) string {
	if len(s) <= maxMetadataText {
		return s
	}
	cut := maxMetadataText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
