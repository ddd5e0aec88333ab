package fast

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/tsdb/index"
)

// TestBlockChunks reads every chunk of a block in place and through the
// block's chunk reader, which must agree byte for byte; a flipped byte is a
// checksum mismatch, and references outside the segments are errors.
func TestBlockChunks(t *testing.T) {
	b, ir := seriesIndexBlock(t, 3000)
	cr, err := b.Chunks()
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	bc, err := openBlockChunks(b.Dir())
	if err != nil {
		t.Fatal(err)
	}
	defer bc.close()

	k, v := index.AllPostingsKey()
	p, err := ir.Postings(t.Context(), k, v)
	if err != nil {
		t.Fatal(err)
	}
	var (
		bl    labels.ScratchBuilder
		metas []chunks.Meta
		n     int
		last  chunks.ChunkRef
	)
	for p.Next() {
		if err := ir.Series(p.At(), &bl, &metas); err != nil {
			t.Fatal(err)
		}
		for _, m := range metas {
			enc, data, err := bc.chunk(m.Ref)
			if err != nil {
				t.Fatalf("chunk %d: %v", m.Ref, err)
			}
			want, _, err := cr.ChunkOrIterable(m)
			if err != nil {
				t.Fatal(err)
			}
			if enc != want.Encoding() || !slices.Equal(data, want.Bytes()) {
				t.Fatalf("chunk %d: %v % x, want %v % x", m.Ref, enc, data, want.Encoding(), want.Bytes())
			}
			n++
			last = m.Ref
		}
	}
	if n != 3000 {
		t.Fatalf("%d chunks, want 3000", n)
	}

	// A copy of the segment with one data byte of the last chunk flipped.
	seq, off := chunks.BlockChunkRef(last).Unpack()
	seg := slices.Clone(bc.segs[seq])
	seg[off+3] ^= 0x40
	bad := &blockChunks{segs: [][]byte{seg}}
	ref := chunks.ChunkRef(chunks.NewBlockChunkRef(0, uint64(off)))
	if _, _, err := bad.chunk(ref); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("flipped byte: %v", err)
	}
	for _, r := range []chunks.ChunkRef{
		chunks.ChunkRef(chunks.NewBlockChunkRef(1, uint64(off))),        // no such segment
		chunks.ChunkRef(chunks.NewBlockChunkRef(0, 2)),                  // in the header
		chunks.ChunkRef(chunks.NewBlockChunkRef(0, uint64(len(seg)))),   // past the end
		chunks.ChunkRef(chunks.NewBlockChunkRef(0, uint64(len(seg)-3))), // runs past the end
	} {
		if _, _, err := bad.chunk(r); !errors.Is(err, errChunkRef) {
			t.Fatalf("ref %x: %v, want errChunkRef", r, err)
		}
	}
}
