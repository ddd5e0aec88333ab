package main

import (
	"errors"
	"flag"

	"github.com/tailroot/tailroot/ingest"
	"github.com/tailroot/tailroot/tsdb"
)

// minFreeFlag is a size flag where 0 disables the check (the library's
// negative).
type minFreeFlag struct{ v *int64 }

func (f minFreeFlag) String() string {
	if f.v == nil || *f.v < 0 {
		return "0B"
	}
	return bytesFlag(f).String()
}

func (f minFreeFlag) Set(s string) error {
	if err := bytesFlag(f).Set(s); err != nil {
		return err
	}
	if *f.v == 0 {
		*f.v = -1
	}
	return nil
}

// addDurabilityFlags registers the flags of what happens after a failed
// write (see tsdb/guard.go).
func addDurabilityFlags(fs *flag.FlagSet, c *serveConfig) {
	fs.Var(minFreeFlag{&c.db.MinFreeBytes}, "storage.tsdb.min-free-space",
		"refuse writes (503, not ready) while the data directory's filesystem has less free space, so the WAL never meets a full disk; 0 disables")
}

// probes returns the readiness and health checks of /-/ready and
// /-/healthy: not ready while the TSDB or the request-record pipeline
// refuses writes after a failed one, unhealthy while the TSDB cannot serve.
func probes(db *tsdb.DB, recs *ingest.Records) (ready, healthy func() error) {
	ready = func() error { return errors.Join(db.Ready(), recs.Ready()) }
	return ready, db.Healthy
}
