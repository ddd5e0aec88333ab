package bpf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/prometheus/prometheus/model/histogram"
)

// HistSlots is the number of buckets of a BPF latency histogram
// (HIST_SLOTS in include/hist.h).
const HistSlots = 64

// HistSize is the size in bytes of struct hist as the kernel stores it.
const HistSize = (HistSlots + 1) * 8

// ZeroThreshold is the zero-bucket width of the native histograms produced
// by [Hist.Native]: 2^-128, client_golang's default, so the histograms merge
// with those of instrumented services without widening. Only an exact 0 ns
// lands in the zero bucket; the smallest populated bucket starts at 2^-30 s.
var ZeroThreshold = math.Ldexp(1, -128)

// nativeOffset is the native (schema 0, seconds) bucket index of slot 0+1
// minus one: slot s >= 1 is native bucket s - nativeOffset.
const nativeOffset = 30

// Hist is one BPF latency histogram (struct hist in include/hist.h). The BPF
// side buckets integer nanoseconds exactly into the buckets of a Prometheus
// native histogram with schema 0 over seconds:
//
//	Slots[0]           observations equal to 0 ns (the zero bucket)
//	Slots[s], s>=1     observations in (2^(s-31), 2^(s-30)] seconds,
//	                   i.e. native bucket index s-30
//
// Slots[63] also holds the (never seen in practice) values above 2^33 s.
// Counts are cumulative since the program was loaded.
type Hist struct {
	Slots [HistSlots]uint64 // observations per bucket
	SumNs uint64            // sum of all observations, nanoseconds
}

// Slot returns the bucket the BPF side puts a value of ns nanoseconds in. It
// is the reference for hist_slot() in include/hist.h and is tested against
// it with BPF_PROG_TEST_RUN.
func Slot(ns uint64) int {
	if ns == 0 {
		return 0
	}
	// j = ceil(log2(ns / 1e9)); compare in exact integer arithmetic, as
	// the BPF code does (see include/hist.h for the derivation).
	k := 63 - bits.LeadingZeros64(ns)
	var le bool
	if k >= 29 {
		le = ns <= uint64(1e9)<<(k-29)
	} else {
		le = ns<<(29-k) <= uint64(1e9)
	}
	s := k + 2
	if le {
		s = k + 1
	}
	return min(s, HistSlots-1)
}

// SlotUpperBound returns the inclusive upper bound in seconds of slot s:
// 0 for the zero bucket, 2^(s-30) otherwise.
func SlotUpperBound(s int) float64 {
	if s <= 0 {
		return 0
	}
	return math.Ldexp(1, s-nativeOffset)
}

// Count returns the number of observations.
func (h *Hist) Count() uint64 {
	var n uint64
	for _, c := range h.Slots {
		n += c
	}
	return n
}

// Add adds o's counts into h (merging threads into a process, say).
func (h *Hist) Add(o *Hist) {
	for i, c := range o.Slots {
		h.Slots[i] += c
	}
	h.SumNs += o.SumNs
}

// CountAbove returns the number of observations in buckets whose lower
// bound is at least minSeconds; every value it counts is > minSeconds.
func (h *Hist) CountAbove(minSeconds float64) uint64 {
	var n uint64
	for s := 1; s < HistSlots; s++ {
		if SlotUpperBound(s)/2 >= minSeconds {
			n += h.Slots[s]
		}
	}
	return n
}

// UnmarshalBinary decodes a struct hist in host (little-endian) byte order,
// as the kernel stores it in a map value.
func (h *Hist) UnmarshalBinary(b []byte) error {
	if len(b) != HistSize {
		return fmt.Errorf("hist: size %d, want %d", len(b), HistSize)
	}
	for i := range h.Slots {
		h.Slots[i] = binary.LittleEndian.Uint64(b[i*8:])
	}
	h.SumNs = binary.LittleEndian.Uint64(b[HistSlots*8:])
	return nil
}

// MarshalBinary encodes h as struct hist in little-endian byte order.
func (h *Hist) MarshalBinary() ([]byte, error) {
	b := make([]byte, HistSize)
	for i, c := range h.Slots {
		binary.LittleEndian.PutUint64(b[i*8:], c)
	}
	binary.LittleEndian.PutUint64(b[HistSlots*8:], h.SumNs)
	return b, nil
}

// Native converts h into a Prometheus native histogram with schema 0 whose
// observations are in seconds. The conversion is exact: slot s >= 1 is
// native positive bucket s-30 and slot 0 the zero bucket. Runs of empty
// buckets start a new span. The hint is UnknownCounterReset because BPF maps
// count from program load and an LRU map can evict and recreate an entry.
func (h *Hist) Native() *histogram.Histogram {
	nh := &histogram.Histogram{
		CounterResetHint: histogram.UnknownCounterReset,
		Schema:           0,
		ZeroThreshold:    ZeroThreshold,
		ZeroCount:        h.Slots[0],
		Count:            h.Count(),
		Sum:              float64(h.SumNs) / 1e9,
	}
	var prev int64
	next := 0 // native index the current span would continue at
	open := false
	for s := 1; s < HistSlots; s++ {
		c := h.Slots[s]
		if c == 0 {
			continue
		}
		idx := s - nativeOffset
		if open && idx == next {
			nh.PositiveSpans[len(nh.PositiveSpans)-1].Length++
		} else {
			off := int32(idx)
			if open {
				off = int32(idx - next)
			}
			nh.PositiveSpans = append(nh.PositiveSpans, histogram.Span{Offset: off, Length: 1})
			open = true
		}
		nh.PositiveBuckets = append(nh.PositiveBuckets, int64(c)-prev)
		prev = int64(c)
		next = idx + 1
	}
	return nh
}
