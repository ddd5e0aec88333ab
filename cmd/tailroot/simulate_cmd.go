package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/model"
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
	length := fs.Duration("length", 0, "simulated window; 0 = 2h, or with --url into a server holding data, as much of 2h as its TSDB head accepts (from its newest sample minus half a block range)")
	cluster := fs.String("cluster", "sim-incident", "value of the cluster label every series gets, also put before every instance name (sim-incident/…), so the scenario never collides with live data; empty = neither")
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
	win := *length
	if *url != "" {
		lo, err := appendableFrom(*url)
		if err != nil {
			return err
		}
		if !lo.IsZero() {
			// The head's bound moves on while live data arrives; leave it a
			// margin for the time the push takes.
			lo = lo.Add(2 * time.Minute)
			// One step less than fits: the window's start is rounded down
			// to a step.
			fit := end.Sub(lo).Truncate(step) - step
			switch {
			case win == 0 && fit < 30*step:
				return fmt.Errorf("--url %s accepts samples from %s on (its newest sample minus half a block range): a window ending at %s would be shorter than 30 steps; give a later --end", *url, lo.Format(time.RFC3339), end.Format(time.RFC3339))
			case win == 0:
				win = min(2*time.Hour, fit)
			case win > fit:
				return fmt.Errorf("--length %v: --url %s accepts samples from %s on (its newest sample minus half a block range), so a window ending at %s can be at most %v", win, *url, lo.Format(time.RFC3339), end.Format(time.RFC3339), fit)
			}
		}
	}
	if win == 0 {
		win = 2 * time.Hour
	}
	start := end.Add(-win).Truncate(step)
	sc := sim.Scenario{
		Fault: kind, Instance: *instance, Severity: *severity, Seed: *seed,
		Start: start, Length: win, FaultAt: *faultAt, FaultFor: *faultFor,
	}
	if *cluster != "" {
		sc.Labels = map[string]string{"cluster": *cluster}
		sc.InstancePrefix = *cluster + "/"
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
		st, err := inc.Push(ctx, *url)
		fmt.Fprintf(os.Stderr, "simulate: %d samples accepted, %d refused, %d unsent (%d series, %d steps from %s)\n",
			st.Accepted, st.Rejected, st.Unsent, len(inc.Series), len(inc.Times), inc.Times[0].Format(time.RFC3339))
		if err != nil {
			return err
		}
	}
	enc := json.NewEncoder(truthOut)
	enc.SetIndent("", "  ")
	return enc.Encode(inc.Truth)
}

// appendableFrom asks the server at base for the oldest time its TSDB
// head still accepts a new series' samples at: the newest sample minus
// half the block range (--storage.tsdb.min-block-duration, 2h unless the
// server says otherwise), or no earlier than the head's oldest sample.
// Zero means the head is empty and accepts any time.
func appendableFrom(base string) (time.Time, error) {
	base = strings.TrimRight(base, "/")
	client := &http.Client{Timeout: 30 * time.Second}
	var st struct {
		Data struct {
			HeadStats struct {
				NumSeries uint64 `json:"numSeries"`
				MinTime   int64  `json:"minTime"`
				MaxTime   int64  `json:"maxTime"`
			} `json:"headStats"`
		} `json:"data"`
	}
	if err := getJSON(client, base+"/api/v1/status/tsdb", &st); err != nil {
		return time.Time{}, err
	}
	h := st.Data.HeadStats
	if h.NumSeries == 0 || h.MaxTime < h.MinTime {
		return time.Time{}, nil
	}
	half := time.Hour
	var fl struct {
		Data map[string]string `json:"data"`
	}
	if err := getJSON(client, base+"/api/v1/status/flags", &fl); err == nil {
		if d, err := model.ParseDuration(fl.Data["storage.tsdb.min-block-duration"]); err == nil && d > 0 {
			half = time.Duration(d) / 2
		}
	}
	lo := time.UnixMilli(h.MaxTime).Add(-half)
	if mint := time.UnixMilli(h.MinTime); mint.After(lo) {
		lo = mint
	}
	return lo, nil
}

func getJSON(c *http.Client, u string, v any) error {
	resp, err := c.Get(u)
	if err != nil {
		return fmt.Errorf("get %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("get %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("get %s: %w", u, err)
	}
	return nil
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
