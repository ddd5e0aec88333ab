// Package queue is the agent's disk-backed, bounded FIFO of remote-write
// requests. It survives agent restarts and crashes: what Append returned
// nil for (and, with FsyncAlways, what was synced) is sent after a restart
// unless the byte bound forced it out, and the read cursor only moves once
// the server has answered.
//
// In: opaque records (the agent stores snappy remote-write 2.0 bodies).
// Out: the same records, in append order, through Next; Ack persists the
// cursor past a record. Delivery is at least once: a crash between the
// server's answer and the cursor write resends the record. tailroot's TSDB
// accepts an identical resent sample (same series, timestamp and value) as
// a no-op, which makes the end result exactly once.
//
// # On-disk layout
//
// A directory holds segment files and one cursor file:
//
//	00000000000000000001.seg   segments, numbered in append order
//	00000000000000000002.seg
//	cursor                     where the next unacknowledged record starts
//
// A segment starts with an 8-byte header and holds records back to back:
//
//	segment header (8 bytes)
//	┌──────────────┬──────────┬──────────────┐
//	│ magic "TRQS" │ version 1│ reserved 0 ×3│
//	└──────────────┴──────────┴──────────────┘
//	record
//	┌─────────────────┬──────────────────────────────┬───────────────┐
//	│ length u32 (LE) │ CRC-32C(length ‖ payload) u32│ payload bytes │
//	└─────────────────┴──────────────────────────────┴───────────────┘
//
// The cursor file is 28 bytes, replaced atomically (write to cursor.tmp,
// fsync, rename, fsync the directory):
//
//	┌──────────────┬───────────┬────────────┬──────────────┬─────────────────────┐
//	│ magic "TRQC" │ version 1 │ reserved ×3│ segment u64  │ offset u64 │ CRC-32C│
//	└──────────────┴───────────┴────────────┴──────────────┴────────────┴────────┘
//	(CRC-32C of the first 24 bytes, u32; all integers little-endian)
//
// # Recovery
//
// Open checks the newest segment record by record and truncates it at the
// first record that is short or fails its CRC: that is a write torn by a
// crash (it was never acknowledged to the caller with FsyncAlways). A bad
// record in an older segment is bit rot: reading logs it, counts the rest
// of that segment as lost (Stats.CorruptRecords counts the bad record) and
// goes on with the next segment. A missing or unreadable cursor starts at
// the oldest segment, so records may be resent, never skipped.
//
// # Bound
//
// Options.MaxBytes bounds the sum of segment sizes. An Append that would
// exceed it first deletes the oldest segments, whole, acknowledged or not;
// every unacknowledged record deleted this way is counted in
// Stats.DroppedRecords and DroppedBytes and logged. The newest data is
// kept because it is what an operator looks at when the server returns.
// A record being sent when its segment is dropped may still be delivered
// and is counted as dropped all the same.
package queue
