package main

import (
	"flag"
	"time"
)

// blockFlags defines the TSDB block-span flags under Prometheus' names. A
// Thanos sidecar reads both from /api/v1/status/flags and uploads only
// when they are equal (local compaction off), so every 2h block reaches the
// bucket before anything could merge it away.
func blockFlags(fs *flag.FlagSet, c *serveConfig) {
	if c.db.MinBlockDuration == 0 {
		c.db.MinBlockDuration = 2 * time.Hour
	}
	fs.Var(promDuration{&c.db.MinBlockDuration}, "storage.tsdb.min-block-duration",
		"span of the head block before it is written to disk as a block")
	fs.Var(promDuration{&c.db.MaxBlockDuration}, "storage.tsdb.max-block-duration",
		"largest span local compaction merges blocks into; 0 means 10% of retention up to 31d; equal to --storage.tsdb.min-block-duration turns local compaction off (required behind a Thanos sidecar)")
}
