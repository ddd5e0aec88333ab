package remote_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	config_util "github.com/prometheus/common/config"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	promremote "github.com/prometheus/prometheus/storage/remote"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/builtin"
	"github.com/tailroot/tailroot/query/remote"
)

// benchLoad is one node's data in promqltest's load syntax: 100 counters and
// tail accumulators (3 stages × 8 buckets), 1 h at 15 s; cluster is added
// as a label when the node holds everybody's data.
func benchLoad(node string, withCluster bool) string {
	var b strings.Builder
	b.WriteString("load 15s\n")
	cl := ""
	if withCluster {
		cl = fmt.Sprintf(`, cluster="%s"`, node)
	}
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, "\trequests_total{instance=\"%s-%d\"%s} %d+%dx240\n", node, i, cl, i, i%7+1)
	}
	for j, le := range []string{"0.25", "0.5", "1", "2", "4", "8", "16", "+Inf"} {
		fmt.Fprintf(&b, "\tacc_requests_total{model_name=\"m\", e2e_bucket=\"%s\"%s} 0+%dx240\n", le, cl, 8-j)
		for k, st := range []string{"queue", "prefill", "decode"} {
			fmt.Fprintf(&b, "\tacc_stage_seconds_sum{model_name=\"m\", stage=\"%s\", e2e_bucket=\"%s\"%s} 0+%dx240\n", st, le, cl, (8-j)*(k+1))
		}
	}
	return b.String()
}

// BenchmarkGlobalQuery compares a query over the global view of two nodes
// (local TSDB + the other node through remote read over loopback HTTP)
// with the same query on one node holding all data. The ratio of the two
// is reported in docs/benchmarks.md.
func BenchmarkGlobalQuery(b *testing.B) {
	single := promqltest.LoadedStorage(b, benchLoad("a", true)+benchLoad("b", true)[len("load 15s\n"):])
	nodeA := promqltest.LoadedStorage(b, benchLoad("a", false))
	nodeB := promqltest.LoadedStorage(b, benchLoad("b", false))

	cfgB := config.DefaultConfig
	cfgB.GlobalConfig.ExternalLabels = labels.FromStrings("cluster", "b")
	srv := httptest.NewServer(promremote.NewReadHandler(nil, nil, nodeB, func() config.Config { return cfgB }, 5e7, 10, 1<<20))
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/api/v1/read")
	cfgA := config.DefaultConfig
	cfgA.GlobalConfig.ExternalLabels = labels.FromStrings("cluster", "a")
	rr := config.DefaultRemoteReadConfig
	rr.Name, rr.URL, rr.ReadRecent, rr.FilterExternalLabels = "node-b", &config_util.URL{URL: u}, true, false
	cfgA.RemoteReadConfigs = []*config.RemoteReadConfig{&rr}
	stores, err := remote.RemoteReadStores(&cfgA, nil)
	if err != nil {
		b.Fatal(err)
	}
	opts := remote.DefaultOptions()
	opts.ExternalLabels = func() labels.Labels { return cfgA.GlobalConfig.ExternalLabels }
	opts.Stores = func() []remote.Store { return stores }
	global := remote.New(nodeA, opts)

	reg, err := builtin.Registry(nil)
	if err != nil {
		b.Fatal(err)
	}
	ng, err := query.New(query.DefaultOptions(), reg, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	end := time.Unix(0, 0).Add(time.Hour)
	for _, q := range []struct{ name, expr string }{
		{"rate_by_cluster_range_1h", `sum by (cluster) (rate(requests_total[5m]))`},
		{"tail_mean_from_accumulators", `tail_mean_from_accumulators(0.99, sum by (model_name, stage, e2e_bucket) (increase(acc_stage_seconds_sum[30m])), sum by (model_name, e2e_bucket) (increase(acc_requests_total[30m])))`},
	} {
		// The two answers must agree before their speed means anything.
		run := func(st storage.Queryable) string {
			var qry promql.Query
			var err error
			if strings.HasPrefix(q.name, "rate") {
				qry, err = ng.NewRangeQuery(context.Background(), st, nil, q.expr, end.Add(-time.Hour), end, time.Minute)
			} else {
				qry, err = ng.NewInstantQuery(context.Background(), st, nil, q.expr, end)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer qry.Close()
			res := qry.Exec(context.Background())
			if res.Err != nil {
				b.Fatal(res.Err)
			}
			for _, w := range res.Warnings {
				if !errors.Is(w, annotations.PromQLInfo) {
					b.Fatalf("%s: %v", q.name, w)
				}
			}
			return res.Value.String()
		}
		if s, g := run(single), run(global); s != g || s == "" {
			b.Fatalf("%s: the global answer differs from the single node's:\n%s\n%s", q.name, g, s)
		}
		for _, st := range []struct {
			name string
			q    storage.Queryable
		}{{"single_node", single}, {"global_2_nodes", global}} {
			b.Run("query="+q.name+"/store="+st.name, func(b *testing.B) {
				b.ReportAllocs()
				var n int
				for b.Loop() {
					var qry promql.Query
					var err error
					if strings.HasPrefix(q.name, "rate") {
						qry, err = ng.NewRangeQuery(context.Background(), st.q, nil, q.expr, end.Add(-time.Hour), end, time.Minute)
					} else {
						qry, err = ng.NewInstantQuery(context.Background(), st.q, nil, q.expr, end)
					}
					if err != nil {
						b.Fatal(err)
					}
					res := qry.Exec(context.Background())
					if res.Err != nil {
						b.Fatal(res.Err)
					}
					switch v := res.Value.(type) {
					case promql.Matrix:
						n = len(v)
					case promql.Vector:
						n = len(v)
					}
					qry.Close()
				}
				if n == 0 {
					b.Fatal("empty result")
				}
			})
		}
	}
}
