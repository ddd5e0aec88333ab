package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/tailroot/tailroot/sim"
)

// simulateCommand runs `tailroot simulate`: it generates one incident
// scenario (sim.Scenario), pushes it to a server by remote write (--url) or
// writes it as OpenMetrics text (--out), and prints the ground truth as
// JSON.
func simulateCommand(args []string) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	scenario := fs.String("scenario", "", "fault to inject: one of the names --list prints, or none")
	list := fs.Bool("list", false, "list the scenarios and exit")
	url := fs.String("url", "", "base URL of a tailroot server (or any remote-write receiver) to push to, e.g. http://127.0.0.1:9490")
	out := fs.String("out", "", "write the series as OpenMetrics text to this file (- for standard output) instead of pushing; `promtool tsdb create-blocks-from openmetrics` reads it")
	seed := fs.Uint64("seed", 1, "random seed: the same seed and flags give the same series")
	instance := fs.Int("instance", 0, "index of the faulty instance (0 or 1 with the default fleet)")
	severity := fs.Float64("severity", 1, "fault severity: a factor m becomes 1 + (m−1)·severity")
	length := fs.Duration("length", 2*time.Hour, "simulated window")
	faultAt := fs.Duration("fault-at", 0, "fault start as an offset into the window; 0 = 65% of it")
	faultFor := fs.Duration("fault-for", 0, "fault duration; 0 = to the end of the window")
	endFlag := fs.String("end", "now", "end of the window: now or an RFC 3339 time")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up pushing after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	if *list {
		return listScenarios(os.Stdout)
	}
	kind := sim.FaultKind(*scenario)
	switch *scenario {
	case "":
		return errors.New("--scenario is required (see --list)")
	case "none":
		kind = ""
	default:
		if _, ok := sim.Info(kind); !ok {
			return fmt.Errorf("--scenario %q: unknown (see --list)", *scenario)
		}
	}
	if (*url == "") == (*out == "") {
		return errors.New("give exactly one of --url and --out")
	}
	const step = 15 * time.Second
	end := time.Now()
	if *endFlag != "now" {
		t, err := time.Parse(time.RFC3339, *endFlag)
		if err != nil {
			return fmt.Errorf("--end %q: want now or an RFC 3339 time", *endFlag)
		}
		end = t
	}
	start := end.Add(-*length).Truncate(step)
	sc := sim.Scenario{
		Fault: kind, Instance: *instance, Severity: *severity, Seed: *seed,
		Start: start, Length: *length, FaultAt: *faultAt, FaultFor: *faultFor,
	}
	inc, err := sc.Generate()
	if err != nil {
		return err
	}
	truthOut := io.Writer(os.Stdout)
	if *out != "" {
		w := io.Writer(os.Stdout)
		if *out != "-" {
			f, err := os.Create(*out)
			if err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			defer f.Close()
			w = f
		} else {
			truthOut = os.Stderr
		}
		if err := inc.WriteOpenMetrics(w); err != nil {
			return err
		}
		if f, ok := w.(*os.File); ok && f != os.Stdout {
			if err := f.Close(); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
		}
	} else {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		if err := inc.Push(ctx, *url); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(truthOut)
	enc.SetIndent("", "  ")
	return enc.Encode(inc.Truth)
}

func listScenarios(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\troot cause\tlengthens\tdescription")
	for _, k := range sim.FaultKinds() {
		fi, _ := sim.Info(k)
		fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", k, fi.RootMetric, fi.Stages, fi.Description)
	}
	fmt.Fprintln(tw, "none\t-\t[]\ta quiet window")
	return tw.Flush()
}
