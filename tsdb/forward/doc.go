// Package forward sends everything tailroot stores — series written through
// remote write, OTLP metrics and the series derived from request records — to
// the remote_write endpoints of the Prometheus configuration file (Thanos
// Receive, Mimir, another Prometheus).
//
// It is the prometheus module's own remote storage (storage/remote): one
// queue manager per remote_write entry, each with a WAL watcher that tails
// the embedded TSDB's write-ahead log (<data-dir>/wal), exactly as
// Prometheus forwards what it scrapes. There is no second copy of the data
// and no queue of tailroot's own: the WAL is the disk-backed buffer, the
// queue manager's shards (queue_config.capacity × max_shards samples) are the
// bounded memory buffer, and an append never waits for a receiver — the
// watcher reads the WAL after the append has committed.
//
// In: Options, the *config.Config in force (remote_write, external labels)
// and the TSDB's write notifications (Notify). Out: remote-write requests
// (1.0 or 2.0, as protobuf_message says) and the prometheus_remote_storage_*
// and prometheus_wal_watcher_* metrics on the given registerer.
//
// What holds, and where the bounds are (docs/scale-out.md, "Forwarding with
// remote_write", says the same for operators):
//
//   - Start point. A watcher starts at the wall clock: it reads the existing
//     WAL for series records only and forwards samples whose timestamp is
//     after the moment it started, and the TSDB starts a fresh segment on
//     every open. A restart therefore never re-sends what the previous
//     process sent. Close first lets the watcher read the WAL
//     to its end (bounded by Options.DrainTimeout) and then gives the queues
//     Options.FlushDeadline to deliver what they hold, so a clean stop with a
//     reachable receiver skips nothing; samples still unsent when the process
//     is killed, or still queued when a stop gives up on an unreachable
//     receiver, are not sent after the restart.
//   - Samples stamped before the watcher started are never forwarded, even
//     when they are ingested later (an agent's backlog flushed after a
//     restart, a backfill), and out-of-order samples go to the TSDB's
//     write-behind log (wbl), which no watcher reads. Both are Prometheus'
//     own rules.
//   - Outage length. Head compaction truncates the WAL without asking the
//     watchers: the lower two thirds of the segments go, which at rates that
//     fill many 128 MiB segments per 2h keeps about the last hour. A receiver
//     outage is therefore always survived for about one hour and, depending
//     on where it falls between two compactions (every 2h), for up to three;
//     longer at low rates (TestOutageBoundIsWALTruncation). Past that the
//     watcher finds its next segment deleted, restarts at the newest segment
//     and the current time, and the samples in between are not forwarded
//     (they stay in tailroot).
package forward
