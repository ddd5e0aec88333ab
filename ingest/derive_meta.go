package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tailroot/tailroot/tsdb/records"
)

// Item flags in item meta (and in version 1 journal entries).
const (
	flagTTFT    = 1 << 0
	flagEntropy = 1 << 1
	flagGaps    = 1 << 2
)

// appendItemMeta encodes what the derived series need of an item beyond
// its record, kept beside the record in the record store's WAL (never in
// its segments) so that a replay after a crash folds the item exactly as
// the live path did (docs/format/records.md, "Item meta"):
//
//	u8 flags (1 TTFT measured, 2 entropy measured, 4 gaps follow)
//	[uvarint nGaps │ f64 LE × nGaps]
func appendItemMeta(dst []byte, it *Item) []byte {
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
	if it.Gaps != nil {
		dst = binary.AppendUvarint(dst, uint64(len(it.Gaps)))
		for _, g := range it.Gaps {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(g))
		}
	}
	return dst
}

// unmarshalItemMeta decodes item meta into it; all of src must be used.
// A record appended without meta (by a tool writing the store directly)
// replays with none: nil src leaves the flags false and Gaps nil.
func unmarshalItemMeta(src []byte, it *Item) error {
	it.HasTTFT, it.HasEntropy, it.Gaps = false, false, nil
	if src == nil {
		return nil
	}
	if len(src) == 0 {
		return errors.New("item meta: empty")
	}
	f := src[0]
	if f&^(flagTTFT|flagEntropy|flagGaps) != 0 {
		return fmt.Errorf("item meta: unknown flags %#x", f)
	}
	it.HasTTFT, it.HasEntropy = f&flagTTFT != 0, f&flagEntropy != 0
	src = src[1:]
	if f&flagGaps != 0 {
		n, k := binary.Uvarint(src)
		if k <= 0 {
			return errors.New("item meta: bad gap count varint")
		}
		src = src[k:]
		if n > uint64(len(src)/8) {
			return fmt.Errorf("item meta: %d gaps in %d bytes", n, len(src))
		}
		it.Gaps = make([]float64, n)
		for i := range it.Gaps {
			it.Gaps[i] = math.Float64frombits(binary.LittleEndian.Uint64(src))
			src = src[8:]
		}
	}
	if len(src) != 0 {
		return fmt.Errorf("item meta: %d trailing bytes", len(src))
	}
	return nil
}

// appendLimits returns how large one record-store append may be, from
// the store's MaxSegmentBytes (64 MiB by default). soft (a quarter of a
// segment, at least 256 KiB) caps a group of submissions: it is one
// append, and one fsync, unless larger than that. hard (half a segment,
// at least 512 KiB) is how large one append may grow to keep a submission
// whole, since an append must fit in one segment with its framing and
// meta; only a submission larger than that is cut into several appends.
func appendLimits(maxSegment int64) (soft, hard int) {
	if maxSegment <= 0 {
		maxSegment = records.DefaultOptions().MaxSegmentBytes
	}
	return int(max(maxSegment/4, 256<<10)), int(max(maxSegment/2, 512<<10))
}

// storeBatch is one record-store append: the records and their item meta.
type storeBatch struct {
	items []Item
	recs  []records.Record
	meta  [][]byte
	bytes int
}

// splitAppends cuts items, in order, into appends of about limit encoded
// bytes. ends holds the index after each submission's last item: a cut
// falls only between submissions, so that a failed append refuses whole
// submissions and never stores part of one, unless one submission alone
// grows an append past hard, where it is cut (an item larger than either
// goes alone). nil ends allows a cut anywhere. The meta of every append is
// encoded into buf, grown to fit once and returned for reuse once the
// appends are done (the store copies what it keeps).
func splitAppends(items []Item, limit, hard int, ends []int, buf []byte) ([]storeBatch, []byte) {
	var (
		out   []storeBatch
		cur   storeBatch
		row   []byte
		lo    int
		metas = slices.Grow(buf[:0], metaBytes(items))
	)
	flush := func(hi int) {
		cur.items = items[lo:hi]
		out = append(out, cur)
		cur, lo = storeBatch{}, hi
	}
	boundary := func(i int) bool {
		if ends == nil {
			return true
		}
		_, ok := slices.BinarySearch(ends, i)
		return ok
	}
	for i := range items {
		it := &items[i]
		row = it.Record.Marshal(row[:0])
		at := len(metas)
		metas = appendItemMeta(metas, it)
		n := len(row) + len(metas) - at + 2
		if i > lo && (cur.bytes+n > limit && boundary(i) || cur.bytes+n > hard) {
			flush(i)
		}
		cur.recs = append(cur.recs, it.Record)
		cur.meta = append(cur.meta, metas[at:len(metas):len(metas)])
		cur.bytes += n
	}
	if lo < len(items) {
		flush(len(items))
	}
	return out, metas
}

// metaBytes is the encoded size of the items' meta.
func metaBytes(items []Item) int {
	n := 0
	for i := range items {
		n++
		if g := items[i].Gaps; g != nil {
			n += binary.MaxVarintLen64 + 8*len(g)
		}
	}
	return n
}
