package history

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// manifest says a segment is completely exported and where its rows are;
// docs/format/records-parquet.md, "Manifest".
type manifest struct {
	FormatVersion int            `json:"format_version"`
	Node          string         `json:"node"`
	Segment       string         `json:"segment"`
	PartStart     int64          `json:"partition_start"`
	PartDur       int64          `json:"partition_duration_ms"`
	Seq           int            `json:"seq"`
	MinTime       int64          `json:"min_time"`
	MaxTime       int64          `json:"max_time"`
	Records       int            `json:"records"`
	Files         []manifestFile `json:"files"`
}

type manifestFile struct {
	Key     string `json:"key"`
	MinTime int64  `json:"min_time"`
	MaxTime int64  `json:"max_time"`
	Records int    `json:"records"`
}

var nodeRE = regexp.MustCompile(`^[A-Za-z0-9._]{1,128}$`)

// ValidNode reports whether node can name an exporting server: letters,
// digits, '.' and '_', at most 128, so it splits neither keys nor ids.
func ValidNode(node string) error {
	if !nodeRE.MatchString(node) {
		return fmt.Errorf("history node %q: want 1 to 128 of [A-Za-z0-9._]", node)
	}
	return nil
}

// segmentID is "<start>-<seq>-<crc>".
func segmentID(start int64, seq int, crc uint32) string {
	return fmt.Sprintf("%d-%06d-%08x", start, seq, crc)
}

func manifestPrefix(node string) string { return "_manifest/" + node + "/" }

func manifestKey(node, seg string) string { return manifestPrefix(node) + seg + ".json" }

// hourStart is the start of the UTC hour holding t (Unix ms).
func hourStart(t int64) int64 { return t - ((t%hourMs)+hourMs)%hourMs }

const hourMs = int64(time.Hour / time.Millisecond)

// fileKey is "date=YYYY-MM-DD/hour=HH/<node>-<segment>.parquet" for the UTC
// hour starting at hour (Unix ms).
func fileKey(node, seg string, hour int64) string {
	t := time.UnixMilli(hour).UTC()
	return fmt.Sprintf("date=%s/hour=%d/%s-%s.parquet", t.Format(time.DateOnly), t.Hour(), node, seg)
}

// decodeManifest parses and checks a manifest read from key, so that a
// reader trusts nothing it would later index with.
func decodeManifest(key string, data []byte) (manifest, error) {
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return manifest{}, fmt.Errorf("manifest %s: %w", key, err)
	}
	bad := func(format string, args ...any) (manifest, error) {
		return manifest{}, fmt.Errorf("manifest %s: "+format, append([]any{key}, args...)...)
	}
	if m.FormatVersion != FormatVersion {
		return bad("format_version %d, want %d", m.FormatVersion, FormatVersion)
	}
	if err := ValidNode(m.Node); err != nil {
		return bad("%v", err)
	}
	if m.PartDur <= 0 || m.PartStart < 0 || m.PartStart%m.PartDur != 0 || m.Seq < 0 {
		return bad("partition %d/%d ms, seq %d", m.PartStart, m.PartDur, m.Seq)
	}
	parts := strings.Split(m.Segment, "-")
	if len(parts) != 3 || parts[0] != strconv.FormatInt(m.PartStart, 10) || len(parts[2]) != 8 {
		return bad("segment %q does not match partition %d", m.Segment, m.PartStart)
	}
	if seq, err := strconv.Atoi(parts[1]); err != nil || seq != m.Seq {
		return bad("segment %q does not match seq %d", m.Segment, m.Seq)
	}
	if want := manifestKey(m.Node, m.Segment); key != want {
		return bad("is stored under %s, its content says %s", key, want)
	}
	if m.Records <= 0 || len(m.Files) == 0 || m.MinTime > m.MaxTime ||
		m.MinTime < m.PartStart || m.MaxTime >= m.PartStart+m.PartDur {
		return bad("records %d, files %d, times [%d, %d] outside partition", m.Records, len(m.Files), m.MinTime, m.MaxTime)
	}
	total := 0
	prev := int64(-1)
	for i, f := range m.Files {
		h := hourStart(f.MinTime)
		if f.Records <= 0 || f.MinTime > f.MaxTime || hourStart(f.MaxTime) != h || h <= prev ||
			f.MinTime < m.MinTime || f.MaxTime > m.MaxTime || f.Key != fileKey(m.Node, m.Segment, h) || path.Clean(f.Key) != f.Key {
			return bad("file %d (%s) is inconsistent", i, f.Key)
		}
		prev = h
		total += f.Records
	}
	if total != m.Records {
		return bad("files hold %d records, manifest says %d", total, m.Records)
	}
	return m, nil
}
