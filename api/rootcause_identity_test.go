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
// ranking, scores, change time and verdict (both are causalfn.RootCause).
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
	form := url.Values{"target": {target}, "candidates": cands, "start": {unix(start)}, "end": {unix(end)}, "step": {"15s"}, "max_lag": {"0"}}
	code, a := f.do(t, http.MethodPost, form)
	if code != http.StatusOK {
		t.Fatalf("endpoint: %d %s", code, a.Error)
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
	// A subquery [W:15s] evaluated at end holds the points in (end − W,
	// end] on the 15 s grid: W = end − start + 15 s gives start..end.
	w := fmt.Sprintf("[%ds:15s]", int(end.Sub(start).Seconds())+15)
	args := []string{"(" + target + ")" + w}
	for _, c := range cands {
		args = append(args, "("+c+")"+w)
	}
	db := f.handler.(*rootCause).q
	qry, err := ng.NewInstantQuery(context.Background(), db, nil, "root_cause("+strings.Join(args, ", ")+")", end)
	if err != nil {
		t.Fatal(err)
	}
	defer qry.Close()
	res := qry.Exec(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	stat := map[string]map[string]float64{}
	verdict := ""
	for _, s := range res.Value.(promql.Vector) {
		if s.Metric.Get("statistic") == "verdict" {
			verdict = s.Metric.Get("verdict")
			continue
		}
		c := s.Metric.Get("candidate")
		if stat[c] == nil {
			stat[c] = map[string]float64{}
		}
		stat[c][s.Metric.Get("statistic")] = s.F
	}
	if len(a.Data.Ranking) != len(stat) || len(stat) < 8 {
		t.Fatalf("endpoint ranks %d candidates, root_cause %d", len(a.Data.Ranking), len(stat))
	}
	for _, row := range a.Data.Ranking {
		p := stat[row.Candidate]
		if p == nil {
			t.Fatalf("root_cause has no %s", row.Candidate)
		}
		if int(p["rank"]) != row.Rank || row.Score == nil || math.Abs(p["score"]-*row.Score) > 1e-9*math.Max(1, math.Abs(p["score"])) {
			t.Errorf("%s: endpoint rank %d score %v, root_cause rank %v score %v", row.Candidate, row.Rank, *row.Score, p["rank"], p["score"])
		}
		if p["change_time"] != *a.Data.ChangeAt {
			t.Errorf("%s: change time %v vs %v", row.Candidate, p["change_time"], *a.Data.ChangeAt)
		}
	}
	if verdict == "" || verdict != a.Data.Verdict {
		t.Errorf("verdict: root_cause %q, endpoint %q", verdict, a.Data.Verdict)
	}
}
