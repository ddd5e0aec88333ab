package api

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/sim"
	"github.com/tailroot/tailroot/tsdb"
)

// simMetadata answers discovery's type lookups from the simulator's own
// metadata, as the server's metadata store does from remote write.
type simMetadata map[string]metadata.Metadata

func (m simMetadata) Get(metric string, _, _ int) map[string][]metadata.Metadata {
	out := map[string][]metadata.Metadata{}
	for name, md := range m {
		if metric == "" || metric == name {
			out[name] = []metadata.Metadata{md}
		}
	}
	return out
}

// TestRootCauseBuiltinSimulator runs the built-in simulator as `serve
// --simulate` does (every series, native histograms, node and GPU
// covariates, a GPU throttle on fleet index 0) over several seeds and asks
// the endpoint, with discovered candidates, for the root cause of the
// faulty instance's P99 TTFT over the lead-in and the incident, at the
// steps a dashboard uses: the throttled GPU's SM clock ranks first every
// time. This is the walkthrough's question (docs/walkthrough.md).
func TestRootCauseBuiltinSimulator(t *testing.T) {
	// Seeds 14 and 19 are two where the running batch, which a throttle
	// grows, once outranked the SM clock; TAILROOT_RC_SEEDS=N runs 1..N.
	seeds := []int{1, 2, 3, 4, 14, 19}
	if s := os.Getenv("TAILROOT_RC_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("TAILROOT_RC_SEEDS=%q: %v", s, err)
		}
		seeds = seeds[:0]
		for i := 1; i <= n; i++ {
			seeds = append(seeds, i)
		}
	}
	const faulty = "llama-3-1-8b-instruct-0:8000"
	target := `histogram_quantile(0.99, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{instance="` + faulty + `"}[1m])))`
	fails := 0
	for _, seed := range seeds {
		o := sim.DefaultOptions()
		o.NativeHistograms = true
		o.Covariates = true
		o.Seed = uint64(seed) * 7919
		// The walkthrough's schedule: six minutes from minute 12 of every
		// 20, so the lead-in starts four minutes after the previous
		// incident ended, with its queues still draining.
		start := time.Unix(1_800_000_000, 0).Truncate(20 * time.Minute)
		incident := start.Add(52 * time.Minute)
		o.Start = start
		for p := start.Add(12 * time.Minute); !p.After(incident); p = p.Add(20 * time.Minute) {
			o.Faults = append(o.Faults, sim.Fault{Kind: sim.FaultGPUThrottle, Instance: 0, Start: p, Duration: 6 * time.Minute, Severity: 1})
		}
		s, err := sim.New(o)
		if err != nil {
			t.Fatal(err)
		}
		do := tsdb.DefaultOptions()
		do.Dir = t.TempDir()
		do.NoLockfile = true
		db, err := tsdb.Open(do, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		md := simMetadata{}
		end := incident.Add(8 * time.Minute)
		for ts := start; !ts.After(end); ts = ts.Add(o.Interval) {
			app := db.AppenderV2(context.Background())
			for _, x := range s.Step(ts) {
				md[simFamily(x)] = x.Metadata
				for _, p := range x.Samples {
					if _, err := app.Append(0, x.Labels, 0, p.T, p.V, nil, nil, storage.AOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				for _, h := range x.Histograms {
					if _, err := app.Append(0, x.Labels, 0, h.T, 0, h.H, nil, storage.AOptions{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := app.Commit(); err != nil {
				t.Fatal(err)
			}
		}
		ng, err := query.New(query.DefaultOptions(), query.NewRegistry(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := NewRootCauseHandler(ng, db, RootCauseOptions{Metadata: md})
		f := &rcFixture{handler: h}
		for _, step := range []string{"15s", "30s"} {
			form := url.Values{
				"target": {target},
				"start":  {unix(incident.Add(-10 * time.Minute))},
				"end":    {unix(incident.Add(6 * time.Minute))},
				"step":   {step},
				"alpha":  {"0.05"},
			}
			code, a := f.do(t, http.MethodPost, form)
			if code != http.StatusOK {
				t.Fatalf("seed %d step %s: %d %s", seed, step, code, a.Error)
			}
			rk := a.Data.Ranking
			top := "(none)"
			if len(rk) > 0 {
				top = rk[0].Candidate
			}
			msg := fmt.Sprintf("seed %d step %s: verdict %s, first %s", seed, step, a.Data.Verdict, top)
			if len(rk) == 0 || rk[0].Node != "gpu_clock" || a.Data.Verdict != "incident" {
				fails++
				for _, r := range rk[:min(3, len(rk))] {
					msg += fmt.Sprintf("\n  %d %s node %s score %v", r.Rank, r.Candidate, r.Node, *r.Score)
				}
				t.Error(msg)
			} else {
				t.Log(msg)
			}
		}
		_ = ng.Close()
		_ = db.Close()
	}
	t.Logf("%d of %d answers without the SM clock first", fails, 2*len(seeds))
}

// simFamily is the metric family of a simulated series, as remote write
// 1.0 metadata names it: a histogram's base name, a counter without _total.
func simFamily(x sim.Series) string {
	name := x.Labels.Get("__name__")
	switch x.Metadata.Type {
	case "histogram":
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			name = strings.TrimSuffix(name, suf)
		}
	case "counter":
		name = strings.TrimSuffix(name, "_total")
	}
	return name
}
