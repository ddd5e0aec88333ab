package main

import (
	"flag"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tailroot/tailroot/internal/promcfg"
	"github.com/tailroot/tailroot/tsdb"
	"github.com/tailroot/tailroot/tsdb/forward"
)

// addForwardFlags registers the remote-write forwarding flags, named as
// Prometheus names them.
func addForwardFlags(fs *flag.FlagSet, c *serveConfig) {
	c.forward = forward.DefaultOptions()
	fs.DurationVar(&c.forward.FlushDeadline, "storage.remote.flush-deadline", c.forward.FlushDeadline, "on shutdown, how long to wait for the remote_write queues to catch up with the WAL, and then again for them to send what they hold (a queue a reload replaces gets the second wait)")
}

// startForwarding starts the remote_write queues of the configuration in
// force over the TSDB's WAL and registers them for configuration reloads.
// The returned function stops them; call it after ingest has stopped and
// before the TSDB closes.
func startForwarding(c *serveConfig, db *tsdb.DB, cfg *promcfg.Holder, logger *slog.Logger, reg prometheus.Registerer) (func(), error) {
	o := c.forward
	o.Dir = db.Dir()
	o.HeadMaxTime = func() int64 { return db.Head().MaxTime() }
	o.Logger = logger
	o.Registerer = reg
	f, err := forward.New(o)
	if err != nil {
		return nil, err
	}
	if err := f.ApplyConfig(cfg.Get()); err != nil {
		_ = f.Close()
		return nil, err
	}
	db.SetWriteNotified(f)
	cfg.AddApplier(promcfg.Applier{Name: "remote_write", Apply: f.ApplyConfig})
	return func() {
		if err := f.Close(); err != nil {
			logger.Error("stop remote_write forwarding", "err", err)
		}
	}, nil
}
