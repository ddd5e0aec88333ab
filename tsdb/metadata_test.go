package tsdb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/metadata"
)

func TestMetadataLatestPerFamily(t *testing.T) {
	dir := t.TempDir()
	s, err := openMetadata(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4000 {
		if err := s.Set("http_requests", metadata.Metadata{Type: model.MetricTypeCounter, Help: fmt.Sprintf("variant %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Set("long", metadata.Metadata{Type: model.MetricTypeGauge, Help: strings.Repeat("é", 5000)}); err != nil {
		t.Fatal(err)
	}
	got := s.Get("", -1, -1)
	if len(got["http_requests"]) != 1 || got["http_requests"][0].Help != "variant 3999" {
		t.Fatalf("http_requests: %v, want only the newest variant", got["http_requests"])
	}
	if h := got["long"][0].Help; len(h) > maxMetadataText || !strings.HasPrefix(h, "éé") || len(h)%2 != 0 {
		t.Fatalf("long help kept as %d bytes", len(h))
	}
	// Nothing was written per change: the file appears only at a flush.
	path := filepath.Join(dir, metadataFile)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("metadata file written before a flush: %v", err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 16<<10 {
		t.Fatalf("file is %d bytes for 2 families", st.Size())
	}
	s2, err := openMetadata(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.close()
	if m := s2.Get("http_requests", 0, 0)["http_requests"]; len(m) != 1 || m[0].Help != "variant 3999" {
		t.Fatalf("after reopening: %v", m)
	}
}

// TestMetadataOldFormat reads a file written when every variant was kept:
// the newest (last) one is the family's entry.
func TestMetadataOldFormat(t *testing.T) {
	dir := t.TempDir()
	old := `{"m":[{"type":"counter","help":"old","unit":""},{"type":"counter","help":"new","unit":""}]}`
	if err := os.WriteFile(filepath.Join(dir, metadataFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := openMetadata(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if m := s.Get("m", 0, 0)["m"]; len(m) != 1 || m[0].Help != "new" {
		t.Fatalf("got %v", m)
	}
}

func TestMetadataBounded(t *testing.T) {
	s, err := openMetadata(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for i := range maxMetadataFamilies + 10 {
		_ = s.Set(fmt.Sprintf("f%d", i), metadata.Metadata{Type: model.MetricTypeGauge})
	}
	if n := len(s.Get("", 0, 0)); n != maxMetadataFamilies {
		t.Fatalf("%d families kept, want the bound %d", n, maxMetadataFamilies)
	}
	if s.Dropped() != 10 {
		t.Fatalf("dropped %d, want 10", s.Dropped())
	}
}

// BenchmarkMetadataSetNewHelp is the case: every Set a new help
// text. It used to rewrite and fsync the whole file each time.
func BenchmarkMetadataSetNewHelp(b *testing.B) {
	s, err := openMetadata(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	for i := range 4000 {
		_ = s.Set(fmt.Sprintf("f%d", i), metadata.Metadata{Type: model.MetricTypeGauge, Help: "h"})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if err := s.Set("f1", metadata.Metadata{Type: model.MetricTypeGauge, Help: fmt.Sprintf("help %d", i)}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMetadataWriteFailureIsUnavailable makes the metadata file
// unwritable (a directory sits where the new file is renamed to, which
// stops root too): Set and Ready report ErrUnavailable, so writers answer
// 503 with Retry-After and readiness is false, until a flush succeeds.
func TestMetadataWriteFailureIsUnavailable(t *testing.T) {
	dir := t.TempDir()
	s, err := openMetadata(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	m := metadata.Metadata{Type: model.MetricTypeGauge, Help: "h"}
	if err := s.Set("a", m); err != nil {
		t.Fatal(err)
	}
	block := filepath.Join(dir, metadataFile)
	if err := os.MkdirAll(filepath.Join(block, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.flush(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("flush onto a directory: %v, want ErrUnavailable", err)
	}
	if err := s.Set("b", m); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Set after a failed flush: %v, want ErrUnavailable", err)
	}
	if err := s.Ready(); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Ready after a failed flush: %v", err)
	}
	if err := os.RemoveAll(block); err != nil {
		t.Fatal(err)
	}
	if err := s.flush(); err != nil {
		t.Fatalf("flush once writable: %v", err)
	}
	if err := s.Ready(); err != nil {
		t.Errorf("Ready after a good flush: %v", err)
	}
	if err := s.Set("c", m); err != nil {
		t.Errorf("Set after a good flush: %v", err)
	}
}
