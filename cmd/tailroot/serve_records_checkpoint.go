package main

import "flag"

// addRecordsCheckpointFlag exposes how often the records pipeline
// checkpoints its derived state and applies --records.retention. The
// default (1m) suits production; a shorter one lets a test see a window
// leave local retention, and be answered from the Parquet history, within
// seconds.
func addRecordsCheckpointFlag(fs *flag.FlagSet, c *serveConfig) {
	fs.DurationVar(&c.records.CheckpointInterval, "records.checkpoint-interval", c.records.CheckpointInterval,
		"how often the records pipeline checkpoints its derived state and applies --records.retention; 0 means 1m")
}
