package fast

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/encoding"
	"github.com/prometheus/prometheus/tsdb/fileutil"
	"github.com/prometheus/prometheus/tsdb/index"
)

// seriesIndex reads a persisted block's series entries with a cache of
// the symbols their labels refer to. The block's own index reader looks
// each of a series' label names and values up in the symbol table anew,
// and a lookup walks up to 31 strings from the nearest indexed one: for a
// dashboard query over a day of 2-hour blocks that was most of the walk
// (13 blocks × every series × every label, twice). Consecutive series of
// a selection share nearly all their symbols (the metric name, the label
// names, the le values), so a small direct-mapped cache answers most
// lookups. The entries are decoded as the index reader decodes them
// (index.Decoder, the entry's checksum checked), from a second read-only
// mapping of the block's index file; the strings alias that mapping, as
// the reader's own do, and stay valid until close.
type seriesIndex struct {
	mf    *fileutil.MmapFile
	bs    byteSlice
	syms  *index.Symbols
	dec   index.Decoder
	cache symbolCache
}

// symbolCache is a direct-mapped cache of symbol references (a v2 index's
// references are symbol numbers): a fixed size, whatever the block's
// symbol table holds.
type symbolCache struct {
	refs [1024]uint32 // the reference + 1 held in each slot; 0 is empty
	strs [1024]string
}

type byteSlice []byte

func (b byteSlice) Len() int                    { return len(b) }
func (b byteSlice) Range(start, end int) []byte { return b[start:end] }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// openSeriesIndex maps the index of the block in dir, or returns nil
// where its format is not one whose series references are offsets/16
// (FormatV2, FormatV3): the caller then reads through the block's index
// reader.
func openSeriesIndex(dir string) (*seriesIndex, error) {
	mf, err := fileutil.OpenMmapFile(filepath.Join(dir, "index"))
	if err != nil {
		return nil, fmt.Errorf("map index: %w", err)
	}
	bs := byteSlice(mf.Bytes())
	if len(bs) < index.HeaderLen || binary.BigEndian.Uint32(bs) != index.MagicIndex {
		_ = mf.Close()
		return nil, fmt.Errorf("map index %s: not an index file", dir)
	}
	if v := int(bs[4]); v != index.FormatV2 && v != index.FormatV3 {
		_ = mf.Close()
		return nil, nil
	}
	toc, err := index.NewTOCFromByteSlice(bs)
	if err != nil {
		_ = mf.Close()
		return nil, fmt.Errorf("read index TOC: %w", err)
	}
	syms, err := index.NewSymbols(bs, int(bs[4]), int(toc.Symbols))
	if err != nil {
		_ = mf.Close()
		return nil, fmt.Errorf("read index symbols: %w", err)
	}
	si := &seriesIndex{mf: mf, bs: bs, syms: syms}
	si.dec = index.Decoder{LookupSymbol: si.lookup}
	return si, nil
}

func (si *seriesIndex) lookup(_ context.Context, ref uint32) (string, error) {
	c := &si.cache
	slot := ref & (uint32(len(c.refs)) - 1)
	if c.refs[slot] == ref+1 {
		return c.strs[slot], nil
	}
	s, err := si.syms.Lookup(ref)
	if err != nil {
		return "", err
	}
	c.refs[slot], c.strs[slot] = ref+1, s
	return s, nil
}

// series is the index reader's Series: the labels of the series ref into
// builder, its chunks into chks.
func (si *seriesIndex) series(ref storage.SeriesRef, builder *labels.ScratchBuilder, chks *[]chunks.Meta) error {
	const align = 16 // v2 series are 16-byte aligned, referenced by offset/16
	if uint64(ref) > uint64(len(si.bs))/align {
		return encoding.ErrInvalidSize
	}
	d := encoding.NewDecbufUvarintAt(si.bs, int(ref)*align, castagnoli)
	if err := d.Err(); err != nil {
		return err
	}
	builder.Reset()
	if err := si.dec.Series(d.Get(), builder, chks); err != nil {
		return fmt.Errorf("read series: %w", err)
	}
	return nil
}

func (si *seriesIndex) close() error { return si.mf.Close() }
