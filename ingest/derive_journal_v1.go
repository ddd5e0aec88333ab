package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
)

// The version 1 derive journal: releases before the record store's WAL
// carried the derived state's inputs kept a second log in the state
// directory,
//
//	checkpoint.json   (version 1) the state after journal entry Seq
//	journal           the batches since that checkpoint, one framed entry
//	                  per batch, fsynced before the batch reached the store
//
// A journal entry holds the batch and the record store's count before it
// (NBefore). The store appended each chunk of a batch as one WAL entry,
// which a crash keeps whole or drops whole, so the records that reached
// the store are a prefix of the entry's chunks whose size is the growth of
// the store's count. NewRecords reads such a journal once (migrateV1 in
// requests.go), folds exactly those records into the state, writes a
// version 2 checkpoint and removes the journal; nothing writes one any
// more. docs/format/derive-journal.md keeps the layout.
const (
	journalFile = "journal"

	journalFrameHeader = 8       // u32 payload length, u32 crc32c
	maxJournalPayload  = 1 << 30 // refuse absurd lengths from a corrupt frame
)

// journalEntry is one batch of a version 1 journal.
type journalEntry struct {
	Seq     uint64
	NBefore int64
	Chunks  [][]Item
}

// marshal encodes the entry payload (tests write version 1 journals with
// it):
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

// readJournalV1 returns the whole entries of the version 1 journal in dir
// (a torn or corrupt tail ends them: that batch was never acknowledged),
// and whether the file exists.
func readJournalV1(dir string) ([]journalEntry, bool, error) {
	data, err := os.ReadFile(filepath.Join(dir, journalFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read version 1 journal: %w", err)
	}
	entries, _ := decodeJournal(data)
	return entries, true, nil
}
