package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/causalfn"
	"github.com/tailroot/tailroot/sim"
)

// TestRootCauseEndpointMatchesPromQL: on the same incident and the same
// grid, /api/v1/attribution/rootcause and root_cause(…) give the same
// ranking, scores, change time, verdict, direction and reason code (both are
// causalfn.RootCause) — with the harmful direction inferred from the
// target's name (up: a throttle raises TTFT, an incident), and given as
// the endpoint's direction parameter or, to root_cause, as the target's
// direction label: down (the rise is an improvement: no incident) and
// both (an incident again).
func TestRootCauseEndpointMatchesPromQL(t *testing.T) {
	f := newRCFixture(t, sim.FaultGPUThrottle)
	tr := f.inc.Truth
	start := tr.WindowStart.Add(time.Minute).Truncate(15 * time.Second)
	end := tr.WindowEnd.Truncate(15 * time.Second)
	target := f.inc.ModelMean("vllm:time_to_first_token_seconds").Query
	cands := []string{
		`avg by (instance) (DCGM_FI_DEV_SM_CLOCK)`,
		`avg by (instance) (vllm:num_requests_running)`,
		`sum by (instance) (rate(tailroot_page_faults_total[1m]))`,
		rcMeanQuery("vllm:request_queue_time_seconds"),
		rcMeanQuery("vllm:request_prefill_time_seconds"),
	}
	r := query.NewRegistry()
	if err := causalfn.Register(r); err != nil {
		t.Fatal(err)
	}
	ng, err := query.New(query.DefaultOptions(), r, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ng.Close() })
	db := f.handler.(*rootCause).q
	for _, c := range []struct{ direction, wantDir, wantVerdict string }{
		{"", "up", "incident"},
		{"down", "down", "no incident"},
		{"both", "both", "incident"},
	} {
		form := url.Values{"target": {target}, "candidates": cands, "start": {unix(start)}, "end": {unix(end)}, "step": {"15s"}, "max_lag": {"0"}}
		promTarget := target
		if c.direction != "" {
			form.Set("direction", c.direction)
			promTarget = fmt.Sprintf(`label_replace(%s, "direction", %q, "", "")`, target, c.direction)
		}
		code, a := f.do(t, http.MethodPost, form)
		if code != http.StatusOK {
			t.Fatalf("direction %q: endpoint: %d %s", c.direction, code, a.Error)
		}
		// A subquery [W:15s] evaluated at end holds the points in (end − W,
		// end] on the 15 s grid: W = end − start + 15 s gives start..end.
		w := fmt.Sprintf("[%ds:15s]", int(end.Sub(start).Seconds())+15)
		args := []string{"(" + promTarget + ")" + w}
		for _, c := range cands {
			args = append(args, "("+c+")"+w)
		}
		qry, err := ng.NewInstantQuery(context.Background(), db, nil, "root_cause("+strings.Join(args, ", ")+")", end)
		if err != nil {
			t.Fatal(err)
		}
		res := qry.Exec(context.Background())
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		stat := map[string]map[string]float64{}
		var verdict, dir, reason string
		for _, s := range res.Value.(promql.Vector) {
			if s.Metric.Get("statistic") == "verdict" {
				verdict, dir, reason = s.Metric.Get("verdict"), s.Metric.Get("direction"), s.Metric.Get("reason")
				continue
			}
			c := s.Metric.Get("candidate")
			if stat[c] == nil {
				stat[c] = map[string]float64{}
			}
			stat[c][s.Metric.Get("statistic")] = s.F
		}
		qry.Close()
		if len(a.Data.Ranking) != len(stat) || len(stat) < 8 {
			t.Fatalf("direction %q: endpoint ranks %d candidates, root_cause %d", c.direction, len(a.Data.Ranking), len(stat))
		}
		for _, row := range a.Data.Ranking {
			p := stat[row.Candidate]
			if p == nil {
				t.Fatalf("direction %q: root_cause has no %s", c.direction, row.Candidate)
			}
			if int(p["rank"]) != row.Rank || row.Score == nil || math.Abs(p["score"]-*row.Score) > 1e-9*math.Max(1, math.Abs(p["score"])) {
				t.Errorf("direction %q: %s: endpoint rank %d score %v, root_cause rank %v score %v", c.direction, row.Candidate, row.Rank, *row.Score, p["rank"], p["score"])
			}
			if p["change_time"] != *a.Data.ChangeAt {
				t.Errorf("direction %q: %s: change time %v vs %v", c.direction, row.Candidate, p["change_time"], *a.Data.ChangeAt)
			}
		}
		if verdict != a.Data.Verdict || dir != a.Data.Direction || reason != a.Data.VerdictWhy {
			t.Errorf("direction %q: root_cause %q/%q/%q, endpoint %q/%q/%q", c.direction, verdict, dir, reason, a.Data.Verdict, a.Data.Direction, a.Data.VerdictWhy)
		}
		if verdict != c.wantVerdict || dir != c.wantDir {
			t.Errorf("direction %q: verdict %q direction %q (%s), want %q %q", c.direction, verdict, dir, a.Data.VerdictReason, c.wantVerdict, c.wantDir)
		}
		if c.wantVerdict == "no incident" && (reason != "improved" || !strings.Contains(a.Data.VerdictReason, "improved")) {
			t.Errorf("direction %q: reason %q / %q does not say the target improved", c.direction, reason, a.Data.VerdictReason)
		}
	}
}
