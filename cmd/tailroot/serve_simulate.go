package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tailroot/tailroot/sim"
	simrequests "github.com/tailroot/tailroot/sim/requests"
)

// simulateOptions are the --simulate.* flags: the built-in fleet's history
// and its scheduled incident.
type simulateOptions struct {
	backfill time.Duration
	// The incident: kind ("none" = off) on fleet instance index, starting
	// at offset into every period of length every (aligned to the Unix
	// epoch, so 1h means minute offset of every UTC hour) and lasting dur.
	incident      string
	instance      int
	every, offset time.Duration
	dur           time.Duration
	severity      float64
}

// simulateFlags defines the --simulate.* flags.
func simulateFlags(fs *flag.FlagSet, c *serveConfig) {
	s := &c.sim
	fs.DurationVar(&s.backfill, "simulate.backfill", time.Hour, "with --simulate: history sent at the first start, so dashboards have data at once (a restart sends only the gap since the last step stored)")
	fs.StringVar(&s.incident, "simulate.incident", string(sim.FaultGPUThrottle), "with --simulate: the scheduled incident, one of `tailroot simulate --list`'s scenarios, or none")
	fs.IntVar(&s.instance, "simulate.incident-instance", 0, "with --simulate: fleet index of the instance the incident hits (0 = llama-3-1-8b-instruct-0:8000)")
	fs.DurationVar(&s.every, "simulate.incident-every", time.Hour, "with --simulate: the incident recurs with this period, aligned to the Unix epoch (1h = every UTC hour)")
	fs.DurationVar(&s.offset, "simulate.incident-at", 40*time.Minute, "with --simulate: the incident starts this far into each period (40m = at minute 40 of every hour)")
	fs.DurationVar(&s.dur, "simulate.incident-for", 10*time.Minute, "with --simulate: how long each incident lasts")
	fs.Float64Var(&s.severity, "simulate.incident-severity", 1, "with --simulate: incident severity (see tailroot simulate --severity)")
}

// validate checks the flags when --simulate is on.
func (s *simulateOptions) validate(on bool) error {
	if !on {
		return nil
	}
	if s.backfill < 0 {
		return fmt.Errorf("--simulate.backfill %v must be >= 0", s.backfill)
	}
	if s.incident == "none" {
		return nil
	}
	if _, ok := sim.Info(sim.FaultKind(s.incident)); !ok {
		return fmt.Errorf("--simulate.incident %q: unknown (see tailroot simulate --list)", s.incident)
	}
	if s.every <= 0 || s.dur <= 0 || s.offset < 0 {
		return fmt.Errorf("--simulate.incident-every %v and --simulate.incident-for %v must be > 0, --simulate.incident-at %v >= 0", s.every, s.dur, s.offset)
	}
	if s.offset+s.dur > s.every {
		return fmt.Errorf("--simulate.incident-at %v plus --simulate.incident-for %v must fit in --simulate.incident-every %v", s.offset, s.dur, s.every)
	}
	return nil
}

// faults lays out the incident schedule from from to to.
func (s *simulateOptions) faults(from, to time.Time) []sim.Fault {
	if s.incident == "none" {
		return nil
	}
	var out []sim.Fault
	p := time.Unix(0, 0).Add(from.Sub(time.Unix(0, 0)).Truncate(s.every))
	for ; p.Before(to); p = p.Add(s.every) {
		out = append(out, sim.Fault{
			Kind: sim.FaultKind(s.incident), Instance: s.instance,
			Start: p.Add(s.offset), Duration: s.dur, Severity: s.severity,
		})
	}
	return out
}

// cursorFile holds the time of the newest simulator step the server
// acknowledged, series and records both.
const cursorFile = "simulator.cursor"

// startSimulator runs the built-in workload against the server at url
// until ctx ends. It logs and returns at once; errors are logged.
func startSimulator(ctx context.Context, c *serveConfig, url string, logger *slog.Logger) {
	go func() {
		log := logger.With("component", "sim")
		if err := runSimulator(ctx, c, url, log); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("simulator stopped", "err", err)
		}
	}()
}

// runSimulator feeds the server at url with the built-in vLLM fleet: its
// series by remote write and, from the very same simulated requests, one
// request record each (POST /api/v1/requests), so the series and the
// records describe one world. The first start sends --simulate.backfill of
// history; each acknowledged step is written to <data-dir>/simulator.cursor
// and a restart resumes after it, sending only the gap. A cursor older than
// the backfill window is ignored (the gap would be too long to replay) and
// the history starts afresh at the backfill.
func runSimulator(ctx context.Context, c *serveConfig, url string, logger *slog.Logger) error {
	so := &c.sim
	o := sim.DefaultOptions()
	o.URL = url
	o.Backfill = so.backfill
	now := time.Now()
	o.Start = now.Truncate(o.Interval)
	o.NativeHistograms = true
	// Node and GPU covariates (run-queue delay, page faults, SM clocks, …)
	// so the kernel and GPU dashboards have data without an agent.
	o.Covariates = true
	o.Logger = logger
	o.Records = true
	o.Seed = uint64(now.UnixNano())
	sender := &simrequests.Sender{URL: url}
	o.RecordSink = func(ctx context.Context, recs []sim.Record) error {
		return sender.PushNDJSON(ctx, toRequests(recs))
	}
	path := filepath.Join(c.dataDir, cursorFile)
	if t, ok := readCursor(path); ok && now.Sub(t) < so.backfill && !t.After(now) {
		o.Resume = t
		logger.Info("simulator resuming after the last stored step", "cursor", t, "gap", now.Sub(t).Round(time.Second))
	}
	o.Sent = func(t time.Time) {
		if err := writeCursor(path, t); err != nil {
			logger.Warn("simulator cursor not saved; a restart will replay", "err", err)
		}
	}
	from := o.Start.Add(-o.Backfill)
	if !o.Resume.IsZero() {
		from = o.Resume
	}
	// The schedule covers 30 days; a longer run goes quiet after it.
	o.Faults = so.faults(from.Add(-so.every), now.Add(30*24*time.Hour))
	s, err := sim.New(o)
	if err != nil {
		return err
	}
	logger.Info("simulator started", "series", s.NumSeries(), "models", len(o.Models), "instances_per_model", o.InstancesPerModel,
		"backfill", o.Backfill, "incident", so.incident, "incident_every", so.every, "incident_at", so.offset, "incident_for", so.dur)
	return s.Run(ctx)
}

func readCursor(path string) (time.Time, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	return t, err == nil
}

// writeCursor replaces the cursor atomically, so a crash leaves the old or
// the new one, never a torn file.
func writeCursor(path string, t time.Time) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(t.UTC().Format(time.RFC3339Nano)+"\n"), 0o644); err != nil {
		return fmt.Errorf("write cursor: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write cursor: %w", err)
	}
	return nil
}

// toRequests turns simulated requests into request records: arrival, then
// the frontend (as tokenize), queue, prefill and decode back to back, so
// the record's TTFT and e2e are what the series' histograms observed (to
// the nanosecond). The request id names the instance, the arrival and the
// sequence number, so it is unique across the fleet and across restarts.
func toRequests(recs []sim.Record) []simrequests.Request {
	out := make([]simrequests.Request, len(recs))
	for i := range recs {
		r := &recs[i]
		ns := func(sec float64) int64 { return int64(sec * 1e9) }
		arr := r.Arrival.UnixNano()
		q := arr + ns(r.Frontend)
		sch := q + ns(r.Queue)
		ft := sch + ns(r.Prefill)
		lt := ft + ns(r.Decode)
		id := fmt.Sprintf("sim-%s-%d-%d", strings.TrimSuffix(r.Instance, ":8000"), arr, r.Seq)
		h := fnv.New128a()
		h.Write([]byte(id))
		var tid [16]byte
		copy(tid[:], h.Sum(nil))
		// The frontend goes as the tokenize stage, a microsecond short so
		// that float rounding never makes the stages exceed e2e (the
		// rest lands in other).
		tok := max(0, float64((q-arr)/1000-1)/1e6)
		out[i] = simrequests.Request{
			ID: id, TraceID: tid, Model: r.Model, Instance: r.Instance, Job: r.Job,
			Arrival: arr, Queued: q, Scheduled: sch, FirstToken: ft, LastToken: lt, Finished: lt,
			Tokenize: tok, PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens, CachedTokens: r.CachedTokens,
		}
	}
	return out
}
