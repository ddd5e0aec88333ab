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
	"github.com/tailroot/tailroot/tsdb/records"
)

// The derived state survives restarts through two files in the state
// directory (docs/stages.md, "Crash safety"):
//
//	checkpoint.json   the whole state after journal entry Seq, written
//	                  atomically (temp file, fsync, rename, dir fsync)
//	journal           the batches since that checkpoint, one framed entry
//	                  per batch, fsynced before the batch reaches the store
//
// A journal entry holds the batch and the record store's count before it
// (NBefore). The store appends each chunk of a batch as one WAL entry, which
// a crash keeps whole or drops whole, so on recovery the records that
// reached the store are a prefix of the entry's chunks whose size is the
// growth of the store's count; exactly those are folded into the state.
const (
	checkpointFile = "checkpoint.json"
	journalFile    = "journal"

	journalFrameHeader = 8       // u32 payload length, u32 crc32c
	maxJournalPayload  = 1 << 30 // refuse absurd lengths from a corrupt frame

	checkpointVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// journalEntry is one committed batch.
type journalEntry struct {
	Seq     uint64
	NBefore int64
	Chunks  [][]Item
}

// Item flags in a journal entry.
const (
	flagTTFT    = 1 << 0
	flagEntropy = 1 << 1
	flagGaps    = 1 << 2
)

// marshal encodes the entry payload:
//
//	uvarint seq │ uvarint nBefore │ uvarint nChunks │ chunks…
//	chunk: uvarint nItems │ items…
//	item:  u8 flags │ record (records.Record.Marshal) │ [uvarint nGaps │ f64 × nGaps]
func (e *journalEntry) marshal(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, e.Seq)
	dst = binary.AppendUvarint(dst, uint64(e.NBefore))
	dst = binary.AppendUvarint(dst, uint64(len(e.Chunks)))
	for _, c := range e.Chunks {
		dst = binary.AppendUvarint(dst, uint64(len(c)))
		for i := range c {
			it := &c[i]
			var f byte
			if it.HasTTFT {
				f |= flagTTFT
			}
			if it.HasEntropy {
				f |= flagEntropy
			}
			if it.Gaps != nil {
				f |= flagGaps
			}
			dst = append(dst, f)
			dst = it.Record.Marshal(dst)
			if it.Gaps != nil {
				dst = binary.AppendUvarint(dst, uint64(len(it.Gaps)))
				for _, g := range it.Gaps {
					dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(g))
				}
			}
		}
	}
	return dst
}

func (e *journalEntry) unmarshal(src []byte) error {
	uv := func(field string) (uint64, error) {
		v, n := binary.Uvarint(src)
		if n <= 0 {
			return 0, fmt.Errorf("journal entry: bad %s varint", field)
		}
		src = src[n:]
		return v, nil
	}
	var err error
	if e.Seq, err = uv("seq"); err != nil {
		return err
	}
	nb, err := uv("nBefore")
	if err != nil {
		return err
	}
	e.NBefore = int64(nb)
	nc, err := uv("chunk count")
	if err != nil {
		return err
	}
	if nc > uint64(len(src)) {
		return fmt.Errorf("journal entry: %d chunks in %d bytes", nc, len(src))
	}
	e.Chunks = make([][]Item, 0, nc)
	for range nc {
		ni, err := uv("item count")
		if err != nil {
			return err
		}
		if ni > uint64(len(src)) {
			return fmt.Errorf("journal entry: %d items in %d bytes", ni, len(src))
		}
		chunk := make([]Item, ni)
		for i := range chunk {
			if len(src) == 0 {
				return errors.New("journal entry: truncated item")
			}
			f := src[0]
			if f&^(flagTTFT|flagEntropy|flagGaps) != 0 {
				return fmt.Errorf("journal entry: unknown item flags %#x", f)
			}
			it := &chunk[i]
			it.HasTTFT, it.HasEntropy = f&flagTTFT != 0, f&flagEntropy != 0
			if src, err = it.Record.Unmarshal(src[1:]); err != nil {
				return fmt.Errorf("journal entry: %w", err)
			}
			if f&flagGaps != 0 {
				ng, err := uv("gap count")
				if err != nil {
					return err
				}
				if ng > uint64(len(src)/8) {
					return fmt.Errorf("journal entry: %d gaps in %d bytes", ng, len(src))
				}
				it.Gaps = make([]float64, ng)
				for k := range it.Gaps {
					it.Gaps[k] = math.Float64frombits(binary.LittleEndian.Uint64(src))
					src = src[8:]
				}
			}
		}
		e.Chunks = append(e.Chunks, chunk)
	}
	if len(src) != 0 {
		return fmt.Errorf("journal entry: %d trailing bytes", len(src))
	}
	return nil
}

// journal is the append-only file of entries since the last checkpoint.
type journal struct {
	path string
	f    *os.File
	size int64
	buf  []byte
}

// openJournal reads every whole entry and truncates a torn or corrupt tail
// (a crash during the last append: that batch was never acknowledged).
func openJournal(dir string) (*journal, []journalEntry, error) {
	path := filepath.Join(dir, journalFile)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("read journal: %w", err)
	}
	entries, good := decodeJournal(data)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open journal: %w", err)
	}
	if good < len(data) {
		err := f.Truncate(int64(good))
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			_ = f.Close()
			return nil, nil, fmt.Errorf("truncate journal tail: %w", err)
		}
	}
	return &journal{path: path, f: f, size: int64(good)}, entries, nil
}

// decodeJournal returns the entries of data up to the first frame that is
// short, fails its checksum or does not decode, and the length of that
// good prefix.
func decodeJournal(data []byte) ([]journalEntry, int) {
	var out []journalEntry
	off := 0
	for len(data)-off >= journalFrameHeader {
		n := binary.LittleEndian.Uint32(data[off:])
		sum := binary.LittleEndian.Uint32(data[off+4:])
		if n > maxJournalPayload || int(n) > len(data)-off-journalFrameHeader {
			break
		}
		payload := data[off+journalFrameHeader : off+journalFrameHeader+int(n)]
		if crc32.Checksum(payload, castagnoli) != sum {
			break
		}
		var e journalEntry
		if e.unmarshal(payload) != nil {
			break
		}
		out = append(out, e)
		off += journalFrameHeader + int(n)
	}
	return out, off
}

// append writes one entry and fsyncs it.
func (j *journal) append(e *journalEntry) error {
	j.buf = append(j.buf[:0], make([]byte, journalFrameHeader)...)
	j.buf = e.marshal(j.buf)
	payload := j.buf[journalFrameHeader:]
	binary.LittleEndian.PutUint32(j.buf, uint32(len(payload)))
	binary.LittleEndian.PutUint32(j.buf[4:], crc32.Checksum(payload, castagnoli))
	if _, err := j.f.WriteAt(j.buf, j.size); err != nil {
		_ = j.f.Truncate(j.size)
		return fmt.Errorf("write journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("sync journal: %w", err)
	}
	j.size += int64(len(j.buf))
	if cap(j.buf) > 16<<20 {
		j.buf = nil // do not pin one huge batch's buffer
	}
	return nil
}

// reset empties the journal once a checkpoint covers its entries.
func (j *journal) reset() error {
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("reset journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("reset journal: %w", err)
	}
	j.size = 0
	return nil
}

func (j *journal) close() error { return j.f.Close() }

// checkpoint is the serialised derived state.
type checkpoint struct {
	Version int           `json:"version"`
	Seq     uint64        `json:"seq"`
	Grid    []float64     `json:"grid"`
	LastTs  int64         `json:"last_ts"`
	States  []*labelState `json:"states"`
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
// seq 0 when there is no checkpoint.
func loadCheckpoint(dir string, grid attribution.Grid, allow []string, maxSets int) (*deriver, uint64, error) {
	data, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return newDeriver(grid, allow, maxSets), 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read checkpoint: %w", err)
	}
	d, seq, err := parseCheckpoint(data, grid, allow, maxSets)
	if err != nil {
		return nil, 0, fmt.Errorf("checkpoint %s: %w", filepath.Join(dir, checkpointFile), err)
	}
	return d, seq, nil
}

// parseCheckpoint decodes a checkpoint. One written for another grid is
// refused: its sums would not merge with new ones.
func parseCheckpoint(data []byte, grid attribution.Grid, allow []string, maxSets int) (*deriver, uint64, error) {
	d := newDeriver(grid, allow, maxSets)
	if len(data) < 4 || crc32.Checksum(data[4:], castagnoli) != binary.LittleEndian.Uint32(data) {
		return nil, 0, errors.New("checksum mismatch")
	}
	var cp checkpoint
	if err := json.Unmarshal(data[4:], &cp); err != nil {
		return nil, 0, fmt.Errorf("decode: %w", err)
	}
	if cp.Version != checkpointVersion {
		return nil, 0, fmt.Errorf("version %d, want %d", cp.Version, checkpointVersion)
	}
	if !slices.Equal(cp.Grid, grid.Upper()) {
		return nil, 0, fmt.Errorf("written for another end-to-end grid (%d bounds, want %d)", len(cp.Grid), len(grid.Upper()))
	}
	for i, st := range cp.States {
		if st == nil {
			return nil, 0, fmt.Errorf("state %d is null", i)
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
				return nil, 0, fmt.Errorf("tail bucket %d outside the grid or empty", b)
			}
		}
		if err := st.checkHistograms(); err != nil {
			return nil, 0, fmt.Errorf("state %d: %w", i, err)
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
	return d, cp.Seq, nil
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

// recoverEntries folds the journal entries newer than seq into d and
// returns the last sequence number seen. storeCount is the record store's
// count now. It returns the number of entries whose stored prefix could not
// be determined (their records are left out of the series, not guessed).
func recoverEntries(d *deriver, entries []journalEntry, seq uint64, storeCount int64) (last uint64, unresolved int) {
	pending := make([]journalEntry, 0, len(entries))
	for _, e := range entries {
		if e.Seq > seq {
			pending = append(pending, e)
		}
	}
	last = seq
	for i := range pending {
		e := &pending[i]
		next := storeCount
		if i+1 < len(pending) {
			next = pending[i+1].NBefore
		}
		k, ok := storedPrefix(e.Chunks, next-e.NBefore)
		if !ok {
			unresolved++
			k = 0
		}
		for _, c := range e.Chunks[:k] {
			for j := range c {
				d.add(&c[j])
			}
		}
		last = e.Seq
	}
	return last, unresolved
}

// storedPrefix returns k such that the first k chunks hold exactly n items.
func storedPrefix(chunks [][]Item, n int64) (int, bool) {
	var sum int64
	if n == 0 {
		return 0, true
	}
	for k, c := range chunks {
		sum += int64(len(c))
		if sum == n {
			return k + 1, true
		}
		if sum > n {
			break
		}
	}
	return 0, false
}

// chunkBytes caps the rows of one store Append well under the record
// store's WAL entry cut (1 MiB of rows, docs/format/records.md), so each
// Append is a single WAL entry that a crash keeps or drops whole.
const chunkBytes = 512 << 10

// splitChunks groups items by record-store partition (start = Time − Time
// mod dur) in ascending order and cuts each group at chunkBytes of encoded
// rows.
func splitChunks(items []Item, dur int64) [][]Item {
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	part := func(i int) int64 { t := items[i].Record.Time; return t - t%dur }
	slices.SortStableFunc(idx, func(a, b int) int {
		pa, pb := part(a), part(b)
		switch {
		case pa < pb:
			return -1
		case pa > pb:
			return 1
		}
		return 0
	})
	var (
		out   [][]Item
		cur   []Item
		size  int
		curP  int64
		first = true
		row   []byte
	)
	for _, i := range idx {
		row = items[i].Record.Marshal(row[:0])
		p := part(i)
		if !first && (p != curP || size+len(row) > chunkBytes) {
			out = append(out, cur)
			cur, size = nil, 0
		}
		first, curP = false, p
		cur = append(cur, items[i])
		size += len(row)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func chunkRecords(c []Item) []records.Record {
	out := make([]records.Record, len(c))
	for i := range c {
		out[i] = c[i].Record
	}
	return out
}
