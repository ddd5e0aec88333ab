// Package evidence stores the evidence node agents push beside their series:
// stacks of the slowest events of each probe, and timelines of the slowest
// CUDA calls of each process (agent/EVIDENCE.md is the JSON contract).
// Reports ask for "what was slow, and where" over a time window; this is
// where they find it.
//
// In: batches of JSON items, checked by ParseBatch (one error per bad item,
// naming it) and kept by Store.Append. Out: Store.Select, the items whose
// time span overlaps a window, filtered by kind, node, pid, comm and probe,
// in time order or slowest first, as the canonical JSON of each item.
//
// Invariants: Append returns after its items are written and fsynced; a
// crash loses no item whose Append returned. Items older than the
// retention are never returned, and their partition files are deleted once
// every item in them is older. Memory holds a small index entry per item
// (times, latency, pid, interned kind/node/comm/probe, segment and offset),
// not the items.
//
// # Files
//
// Dir holds one directory per partition of Options.PartitionDuration,
// named by the partition's start in Unix milliseconds (evidence-<start>),
// and a LOCK file. An item goes to the partition of the start of its span.
// A partition directory is a prometheus tsdb/wlog log (the format the
// records WAL and the derive journal use): segments 00000000, 00000001, …
// of 32 KiB pages, each record split into fragments with a type byte, a
// length and a CRC32C. One record is one item:
//
//	body:    version    u8 = 1
//	         from       varint   span start, Unix ns
//	         to         varint   span end, Unix ns
//	         latency    u64 LE   float64 bits, seconds
//	         pid        uvarint
//	         kind       uvarint length + bytes
//	         node       uvarint length + bytes
//	         comm       uvarint length + bytes
//	         probe      uvarint length + bytes
//	         item       the rest: the item's canonical JSON
//
// The header repeats what queries filter on, so Open rebuilds the index
// without parsing JSON, reading each segment once with wlog's reader. wlog
// reads only from the start and does not say where it put a record, so
// the index keeps each record's segment and offset (the end of the record
// before it, found on Open from the reader's offset and on Append by
// walking what was just written), and Select reads an item back there
// with a small reader of wlog's page framing that checks the fragments'
// checksums. Each process opens a partition's writer on its first Append
// to it, which starts a new segment; Append fsyncs the segments it wrote
// (wlog itself fsyncs only when it cuts one, asynchronously).
//
// Reopening stops at the first record of a partition that is torn, fails
// its checksum or does not decode (a torn write at a crash, or
// corruption): the segment is cut there, later segments are removed, and
// the bytes lost (not counting the zeros wlog pads pages with) are logged
// and counted in Stats.
//
// Version 1 stores kept a partition in one file, evidence-<start>.log:
// "TREVID01", then the same bodies framed by length u32 LE and crc32c u32
// LE. Open converts each such file once, through evidence-<start>.tmp
// renamed into place, and removes it (migrate.go). docs/format/evidence.md
// has the details.
package evidence
