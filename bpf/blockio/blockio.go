// Package blockio measures block IO latency (block_rq_issue to
// block_rq_complete) per disk, with completion counts by operation, bytes,
// errors and the number of requests in flight, using tp_btf programs.
package blockio

import (
	"encoding/binary"
	"fmt"

	"github.com/cilium/ebpf/link"

	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/internal/probe"
)

// Options size the maps. Zero values take the defaults below.
type Options struct {
	// MaxDisks bounds the disks with statistics; requests to further disks
	// are not counted. Zero means 256.
	MaxDisks uint32
	// MaxInFlight bounds the requests tracked between issue and
	// completion (LRU; an evicted request is not counted). Zero means 16384.
	MaxInFlight uint32
}

// DefaultOptions returns the sizes used for zero fields.
func DefaultOptions() Options { return Options{MaxDisks: 256, MaxInFlight: 16384} }

// DiskStats is struct disk_stats of blockio.bpf.c: cumulative since Load,
// except InFlight.
type DiskStats struct {
	Latency  bpf.Hist // issue to completion
	ReadOps  uint64   // completed reads
	WriteOps uint64   // completed writes
	OtherOps uint64   // completed flushes, discards and other operations
	Bytes    uint64   // bytes completed
	Errors   uint64   // completions with an error status
	// InFlight is requests issued and not yet completed. It counts only
	// requests issued after Load, so it starts at 0.
	InFlight int64
}

// DiskStatsSize is the size of struct disk_stats in bytes.
const DiskStatsSize = bpf.HistSize + 6*8

// UnmarshalBinary decodes struct disk_stats (little-endian).
func (s *DiskStats) UnmarshalBinary(b []byte) error {
	if len(b) != DiskStatsSize {
		return fmt.Errorf("disk_stats: size %d, want %d", len(b), DiskStatsSize)
	}
	if err := s.Latency.UnmarshalBinary(b[:bpf.HistSize]); err != nil {
		return err
	}
	f := b[bpf.HistSize:]
	le := binary.LittleEndian
	s.ReadOps, s.WriteOps, s.OtherOps = le.Uint64(f), le.Uint64(f[8:]), le.Uint64(f[16:])
	s.Bytes, s.Errors, s.InFlight = le.Uint64(f[24:]), le.Uint64(f[32:]), int64(le.Uint64(f[40:]))
	return nil
}

// Probe is the loaded and attached program. Close detaches it.
type Probe struct {
	objs  blockioObjects
	links []link.Link
}

// Load loads the programs and attaches them to the block tracepoints. It
// needs CAP_BPF and CAP_PERFMON (root) and a kernel with BTF.
func Load(opts Options) (*Probe, error) {
	spec, err := loadBlockio()
	if err != nil {
		return nil, fmt.Errorf("load blockio spec: %w", err)
	}
	if err := probe.SetMaxEntries(spec, "disks", opts.MaxDisks); err != nil {
		return nil, err
	}
	if err := probe.SetMaxEntries(spec, "inflight_reqs", opts.MaxInFlight); err != nil {
		return nil, err
	}
	p := &Probe{}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		return nil, fmt.Errorf("load blockio: %w", err)
	}
	p.links, err = probe.AttachRawTP(p.objs.BlockRqIssue, p.objs.BlockRqComplete)
	if err != nil {
		p.objs.Close()
		return nil, fmt.Errorf("blockio: %w", err)
	}
	return p, nil
}

// Disks returns the statistics of every disk that completed a request.
func (p *Probe) Disks() (map[Dev]DiskStats, error) {
	out := map[Dev]DiskStats{}
	var k uint32
	var v DiskStats
	it := p.objs.Disks.Iterate()
	for it.Next(&k, &v) {
		out[Dev(k)] = v
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read disks: %w", err)
	}
	return out, nil
}

// Close detaches the programs and frees the maps.
func (p *Probe) Close() error {
	err := probe.CloseAll(p.links, &p.objs)
	p.links = nil
	if err != nil {
		return fmt.Errorf("close blockio: %w", err)
	}
	return nil
}
