package ingest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/tailroot/tailroot/attribution"
)

// The derived state survives restarts through the record store's WAL and
// one file in the state directory (docs/stages.md, "Crash safety"):
//
//	checkpoint.json   the whole state after the record store's WAL batch
//	                  Seq, written atomically (temp file, fsync, rename,
//	                  dir fsync)
//
// Each batch goes to the store once, with the per-request inputs of the
// derived series its records do not keep (item meta, derive_meta.go) beside
// them in the same WAL record, so the batch is durable in one fsync. The
// store holds every WAL batch after the checkpoint's Seq (Options.HoldWAL)
// and hands them back on restart (ReplayWAL): a WAL record is whole or
// absent after a crash, so exactly the stored records are folded into the
// state. The checkpoint releases the batches it covers.
const (
	checkpointFile = "checkpoint.json"

	// checkpointVersion 2 counts record-store WAL batches; version 1
	// counted entries of the journal that version 1 kept beside it
	// (derive_journal_v1.go), read once to migrate.
	checkpointVersion   = 2
	checkpointVersionV1 = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkpoint is the serialised derived state.
type checkpoint struct {
	Version int `json:"version"`
	// Seq is the last record-store WAL batch the state counts (version 2),
	// or the last version 1 journal entry.
	Seq    uint64        `json:"seq"`
	Grid   []float64     `json:"grid"`
	LastTs int64         `json:"last_ts"`
	States []*labelState `json:"states"`
	// Overflow is the index in States of the overflow set, or −1.
	Overflow int `json:"overflow"`
}

// marshalCheckpoint encodes the state as a u32 crc32c of the JSON that
// follows it. Floats survive exactly: encoding/json writes the shortest
// decimal that parses back to the same float64.
func (d *deriver) marshalCheckpoint(seq uint64) ([]byte, error) {
	cp := checkpoint{Version: checkpointVersion, Seq: seq, Grid: d.grid.Upper(), LastTs: d.maxClock(), States: d.order, Overflow: -1}
	if d.overflow != nil {
		cp.Overflow = slices.Index(d.order, d.overflow)
	}
	body, err := json.Marshal(&cp)
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	out := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(body)), crc32.Checksum(body, castagnoli))
	return append(out, body...), nil
}

// loadCheckpoint restores a deriver from dir, or returns a fresh one and
// seq 0 when there is no checkpoint. version is the checkpoint's, or
// checkpointVersion when there is none.
func loadCheckpoint(dir string, grid attribution.Grid, allow []string, maxSets int) (d *deriver, seq uint64, version int, err error) {
	data, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return newDeriver(grid, allow, maxSets), 0, checkpointVersion, nil
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read checkpoint: %w", err)
	}
	d, seq, version, err = parseCheckpoint(data, grid, allow, maxSets)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("checkpoint %s: %w", filepath.Join(dir, checkpointFile), err)
	}
	return d, seq, version, nil
}

// parseCheckpoint decodes a checkpoint. One written for another grid is
// refused: its sums would not merge with new ones.
func parseCheckpoint(data []byte, grid attribution.Grid, allow []string, maxSets int) (*deriver, uint64, int, error) {
	d := newDeriver(grid, allow, maxSets)
	if len(data) < 4 || crc32.Checksum(data[4:], castagnoli) != binary.LittleEndian.Uint32(data) {
		return nil, 0, 0, errors.New("checksum mismatch")
	}
	var cp checkpoint
	if err := json.Unmarshal(data[4:], &cp); err != nil {
		return nil, 0, 0, fmt.Errorf("decode: %w", err)
	}
	if cp.Version != checkpointVersion && cp.Version != checkpointVersionV1 {
		return nil, 0, 0, fmt.Errorf("version %d, want %d (or %d, migrated)", cp.Version, checkpointVersion, checkpointVersionV1)
	}
	if !slices.Equal(cp.Grid, grid.Upper()) {
		return nil, 0, 0, fmt.Errorf("written for another end-to-end grid (%d bounds, want %d)", len(cp.Grid), len(grid.Upper()))
	}
	for i, st := range cp.States {
		if st == nil {
			return nil, 0, 0, fmt.Errorf("state %d is null", i)
		}
		if st.Clock == 0 {
			// Written before label sets had clocks: every series was
			// stamped at or before the global last stamp.
			st.Clock = cp.LastTs
		}
		if st.Tail == nil {
			st.Tail = map[int]*tailCell{}
		}
		for b, c := range st.Tail {
			if b < 0 || b >= grid.Buckets() || c == nil {
				return nil, 0, 0, fmt.Errorf("tail bucket %d outside the grid or empty", b)
			}
		}
		if err := st.checkHistograms(); err != nil {
			return nil, 0, 0, fmt.Errorf("state %d: %w", i, err)
		}
		if i == cp.Overflow {
			d.overflow = st
			d.states[string([]byte{0xfe})] = st
			d.order = append(d.order, st)
			continue
		}
		key := make([]byte, 0, 64)
		st.Labels.Range(func(l labels.Label) {
			key = append(append(append(append(key, l.Name...), 0xff), l.Value...), 0xff)
		})
		d.states[string(key)] = st
		d.order = append(d.order, st)
	}
	d.markAllDirty()
	return d, cp.Seq, cp.Version, nil
}

// checkHistograms refuses histograms whose bucket range would overflow the
// int32 bucket index.
func (st *labelState) checkHistograms() error {
	hs := []*nhist{&st.E2E, &st.Entropy}
	for j := range st.Stage {
		hs = append(hs, &st.Stage[j])
	}
	for k := range st.Tokens {
		for _, h := range st.Tokens[k] {
			if h != nil {
				hs = append(hs, h)
			}
		}
	}
	for _, h := range hs {
		if int64(h.Offset)+int64(len(h.Counts)) > math.MaxInt32 || h.Offset < -1<<20 {
			return fmt.Errorf("histogram buckets from %d (%d of them) out of range", h.Offset, len(h.Counts))
		}
	}
	return nil
}
