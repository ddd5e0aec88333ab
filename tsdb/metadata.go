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

	"github.com/prometheus/prometheus/model/metadata"

	"github.com/tailroot/tailroot/internal/fsutil"
)

const metadataFile = "tailroot-metadata.json"

// MetadataStore keeps the type, help and unit of each metric family as
// writers last reported them. Prometheus keeps this in its scrape cache; a
// push-only server has no scrape cache, so tailroot keeps what remote write
// and OTLP send and persists it beside the TSDB.
//
// Writes that change nothing take a read lock only; a change is written to
// disk (temp file, fsync, rename, directory fsync) before Set returns, so an acknowledged
// write's metadata survives a crash. Changes are rare: a new family or a
// new help text.
type MetadataStore struct {
	path string

	mu       sync.RWMutex
	families map[string][]metadata.Metadata
}

func openMetadata(dir string) (*MetadataStore, error) {
	s := &MetadataStore{path: filepath.Join(dir, metadataFile), families: map[string][]metadata.Metadata{}}
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read metadata: %w", err)
	}
	if err := json.Unmarshal(b, &s.families); err != nil {
		return nil, fmt.Errorf("decode metadata %s: %w", s.path, err)
	}
	return s, nil
}

// Set records m for the family name. It returns an error only when the
// change could not be persisted.
func (s *MetadataStore) Set(name string, m metadata.Metadata) error {
	if name == "" || (m.Type == "" && m.Help == "" && m.Unit == "") {
		return nil
	}
	s.mu.RLock()
	known := slices.Contains(s.families[name], m)
	s.mu.RUnlock()
	if known {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Contains(s.families[name], m) {
		return nil
	}
	// The newest report for a family wins, as in a scrape cache; earlier
	// distinct entries stay so /api/v1/metadata shows conflicts the way
	// Prometheus shows them across targets.
	s.families[name] = append(s.families[name], m)
	return s.flushLocked()
}

// Get returns the metadata of every family (or only metric when it is not
// empty), at most limit families and limitPerMetric entries each; a
// non-positive limit means no limit.
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
		ms := s.families[n]
		// Newest first, as the most recent report is the one in force.
		rev := make([]metadata.Metadata, 0, len(ms))
		for i := len(ms) - 1; i >= 0; i-- {
			if limitPerMetric > 0 && len(rev) >= limitPerMetric {
				break
			}
			rev = append(rev, ms[i])
		}
		out[n] = rev
	}
	return out
}

func (s *MetadataStore) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushLocked()
}

func (s *MetadataStore) flushLocked() error {
	b, err := json.Marshal(s.families)
	if err != nil {
		return fmt.Errorf("encode metadata: %w", err)
	}
	if err := fsutil.WriteFileAtomic(filepath.Dir(s.path), filepath.Base(s.path), b); err != nil {
		return fmt.Errorf("write metadata: %w", err)
	}
	return nil
}
