package apptest

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tailroot/tailroot/api"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/builtin"
	"github.com/tailroot/tailroot/tsdb"
)

// TestDocsRunnerCatchesBrokenExamples shows the docs-examples test failing
// on broken examples: the lagged_correlation example docs/causal.md had
// (a binary operator between range vectors), a query with a typo, a query
// whose shown result is empty, a curl that gets a 404 and one that gets a
// 400, and a fence without a language; the fixed example passes.
func TestDocsRunnerCatchesBrokenExamples(t *testing.T) {
	o := tsdb.DefaultOptions()
	o.Dir = t.TempDir()
	db, err := tsdb.Open(o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	funcs, err := builtin.Registry(nil)
	if err != nil {
		t.Fatal(err)
	}
	ng, err := query.New(query.DefaultOptions(), funcs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ng.Close()
	srv := httptest.NewServer(api.New(db, ng, api.Handlers{}, api.Options{}, nil, prometheus.NewRegistry()).Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	doc := "intro\n\n```promql\n" +
		"lagged_correlation(avg(vllm:inter_token_latency_seconds_sum)[1h:15s] / avg(vllm:inter_token_latency_seconds_count)[1h:15s],\n" +
		"                   DCGM_FI_DEV_SM_CLOCK[1h:15s], 10)\n" +
		"sum(rate(vllm:request_success_total[5m])\n" +
		"```\n\n```promql\nvector(1)   # shown with a result\n→ {} 1\nabsent_over_time(up[1m]) == 2\n→ {} 1\n```\n\n" +
		"<!-- docs-test: skip needs a Thanos deployment -->\n```sh\ncurl -s localhost:9490/no/such/path\n```\n"
	blocks, err := docBlocks("bad.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 || blocks[2].skip != "needs a Thanos deployment" {
		t.Fatalf("blocks %+v", blocks)
	}
	qs := append(promqlQueries(blocks[0].body), promqlQueries(blocks[1].body)...)
	if len(qs) != 4 || qs[0].wantResult || !qs[2].wantResult || !qs[3].wantResult {
		t.Fatalf("queries %+v", qs)
	}
	for i, want := range []string{
		"binary expression must contain only scalar and instant vector types",
		"unclosed left parenthesis",
		"",
		"the doc shows a result, the query returned none",
	} {
		err := runPromQL(ctx, srv.URL, qs[i])
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v, want success", qs[i].expr, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: error %v, want one with %q", qs[i].expr, err, want)
		}
	}
	fixed := docQuery{expr: "lagged_correlation((avg(rate(vllm:inter_token_latency_seconds_sum[1m])) / avg(rate(vllm:inter_token_latency_seconds_count[1m])))[1h:15s],\n  avg(DCGM_FI_DEV_SM_CLOCK)[1h:15s], 10)"}
	// It parses; on this empty server it then finds no series (422).
	if err := runPromQL(ctx, srv.URL, fixed); err == nil || !strings.Contains(err.Error(), "status 422") {
		t.Errorf("the fixed example: %v, want it parsed and run (422: no series here)", err)
	}

	for body, want := range map[string]string{
		"curl -s localhost:9490/no/such/path":                                                      "404",
		"curl -s 127.0.0.1:9490/api/v1/query --data-urlencode 'query=sum('":                        "400",
		"curl -s 127.0.0.1:9490/api/v1/query --data-urlencode 'query=vector(1)' | grep -q success": "",
	} {
		err := runShell(ctx, srv.URL, body)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want success", body, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: error %v, want one naming %s", body, err, want)
		}
	}
	if _, err := docBlocks("bad.md", "```\nsum(up)\n```\n"); err == nil || !strings.Contains(err.Error(), "without a language") {
		t.Errorf("a fence without a language: %v", err)
	}
}
