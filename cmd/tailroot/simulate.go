package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/tailroot/tailroot/sim"
)

// runSimulator feeds the server at url with the built-in vLLM workload: an
// hour of history first, so dashboards have something to show at once, then
// live samples every 15 s.
func runSimulator(ctx context.Context, url string, logger *slog.Logger) error {
	o := sim.DefaultOptions()
	o.URL = url
	o.Backfill = time.Hour
	o.Start = time.Now().Add(-o.Backfill)
	o.NativeHistograms = true
	// Node and GPU covariates (run-queue delay, page faults, SM clocks, …)
	// so the kernel and GPU dashboards have data without an agent.
	o.Covariates = true
	o.Logger = logger
	s, err := sim.New(o)
	if err != nil {
		return err
	}
	logger.Info("simulator started", "series", s.NumSeries(), "models", len(o.Models), "instances_per_model", o.InstancesPerModel, "backfill", o.Backfill)
	return s.Run(ctx)
}
