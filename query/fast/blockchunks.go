package fast

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"

	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/fileutil"
)

// blockChunks reads a persisted block's chunks where they lie, from a
// second read-only mapping of its segment files. The block's own chunk
// reader hands each chunk out as an object from a pool that nothing returns
// it to, so every chunk a query reads was an allocation (a 24-hour
// dashboard query over 2,000 series reads about 90,000 chunks, and the
// allocations and their collection were a tenth of its time). The bytes
// are found as the reader finds them (tsdb/docs/format/chunks.md: a
// segment's 8-byte header, then per chunk a uvarint length, the encoding
// byte, the data and a CRC32 of encoding and data, which is checked), and
// stay valid until close.
type blockChunks struct {
	files []*fileutil.MmapFile
	segs  [][]byte
}

// errChunkRef is returned for a chunk reference outside the block's
// segment files.
var errChunkRef = errors.New("chunk reference out of range")

// openBlockChunks maps the segment files of the block in dir, in the
// order of their sequence numbers, as the block's chunk reader does.
func openBlockChunks(dir string) (*blockChunks, error) {
	cdir := filepath.Join(dir, "chunks")
	ents, err := os.ReadDir(cdir)
	if err != nil {
		return nil, fmt.Errorf("list chunk segments: %w", err)
	}
	bc := &blockChunks{}
	for _, e := range ents {
		if _, err := strconv.ParseUint(e.Name(), 10, 64); err != nil {
			continue // as the reader: only numbered files are segments
		}
		mf, err := fileutil.OpenMmapFile(filepath.Join(cdir, e.Name()))
		if err != nil {
			bc.close()
			return nil, fmt.Errorf("map chunk segment: %w", err)
		}
		bc.files = append(bc.files, mf)
		b := mf.Bytes()
		if len(b) < chunks.SegmentHeaderSize || binary.BigEndian.Uint32(b) != chunks.MagicChunks || b[chunks.MagicChunksSize] != 1 {
			bc.close()
			return nil, fmt.Errorf("chunk segment %s: not a version 1 segment", e.Name())
		}
		bc.segs = append(bc.segs, b)
	}
	return bc, nil
}

// chunk returns the encoding and data of the chunk at ref, after checking
// its CRC32.
func (bc *blockChunks) chunk(ref chunks.ChunkRef) (chunkenc.Encoding, []byte, error) {
	seq, off := chunks.BlockChunkRef(ref).Unpack()
	if seq >= len(bc.segs) || off < chunks.SegmentHeaderSize || off >= len(bc.segs[seq]) {
		return 0, nil, fmt.Errorf("%w: segment %d offset %d", errChunkRef, seq, off)
	}
	b := bc.segs[seq][off:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) || uint64(k)+1+n+crc32.Size > uint64(len(b)) {
		return 0, nil, fmt.Errorf("%w: chunk at segment %d offset %d runs past its end", errChunkRef, seq, off)
	}
	encAndData := b[k : k+1+int(n)]
	sum := b[k+1+int(n) : k+1+int(n)+crc32.Size]
	if got := crc32.Checksum(encAndData, castagnoli); got != binary.BigEndian.Uint32(sum) {
		return 0, nil, fmt.Errorf("chunk at segment %d offset %d: checksum mismatch: expected %x, actual %x", seq, off, binary.BigEndian.Uint32(sum), got)
	}
	return chunkenc.Encoding(encAndData[0]), encAndData[1:], nil
}

func (bc *blockChunks) close() {
	for _, f := range bc.files {
		_ = f.Close()
	}
	bc.files, bc.segs = nil, nil
}
