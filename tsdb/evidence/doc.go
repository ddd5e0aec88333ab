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
// (times, latency, pid, interned kind/node/comm/probe, file offset), not the
// items.
//
// # Files
//
// Dir holds one append-only file per partition of Options.PartitionDuration,
// named by the partition's start in Unix milliseconds
// (evidence-<start>.log), and a LOCK file. An item goes to the partition of
// the start of its span. A file is:
//
//	magic    8 bytes  "TREVID01"
//	record*
//
//	record:  length u32 LE (of body) | crc32c u32 LE (Castagnoli, of body) | body
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
// without parsing JSON. Reopening stops at the first record of a file whose
// length or checksum is wrong (a torn write at a crash, or corruption), cuts
// the file there, logs how many bytes were lost and counts them in Stats.
package evidence
