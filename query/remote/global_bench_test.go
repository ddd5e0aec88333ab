package remote_test

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"google.golang.org/grpc"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/builtin"
	"github.com/tailroot/tailroot/query/remote"
	"github.com/tailroot/tailroot/query/remote/storepb"
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

// tsdbStore serves a storage's series over the StoreAPI, chunks as the
// TSDB holds them (XOR, native histogram): a stand-in for a Thanos
// sidecar or Store in process, so the benchmark measures tailroot's side.
type tsdbStore struct {
	storepb.UnimplementedStoreServer
	q   storage.ChunkQueryable
	ext labels.Labels
}

func (s *tsdbStore) Series(r *storepb.SeriesRequest, srv grpc.ServerStreamingServer[storepb.SeriesResponse]) error {
	ms := make([]*labels.Matcher, 0, len(r.Matchers))
	for _, m := range r.Matchers {
		t := map[storepb.LabelMatcher_Type]labels.MatchType{
			storepb.LabelMatcher_EQ: labels.MatchEqual, storepb.LabelMatcher_NEQ: labels.MatchNotEqual,
			storepb.LabelMatcher_RE: labels.MatchRegexp, storepb.LabelMatcher_NRE: labels.MatchNotRegexp,
		}[m.Type]
		lm, err := labels.NewMatcher(t, m.Name, m.Value)
		if err != nil {
			return err
		}
		ms = append(ms, lm)
	}
	cq, err := s.q.ChunkQuerier(r.MinTime, r.MaxTime)
	if err != nil {
		return err
	}
	defer cq.Close()
	set := cq.Select(srv.Context(), true, nil, ms...)
	for set.Next() {
		cs := set.At()
		ps := &storepb.Series{}
		labels.NewBuilder(cs.Labels()).Set("cluster", s.ext.Get("cluster")).Labels().Range(func(l labels.Label) {
			ps.Labels = append(ps.Labels, &storepb.Label{Name: l.Name, Value: l.Value})
		})
		it := cs.Iterator(nil)
		for it.Next() {
			m := it.At()
			typ := storepb.Chunk_XOR
			if m.Chunk.Encoding() == chunkenc.EncHistogram {
				typ = storepb.Chunk_HISTOGRAM
			}
			ps.Chunks = append(ps.Chunks, &storepb.AggrChunk{MinTime: m.MinTime, MaxTime: m.MaxTime, Raw: &storepb.Chunk{Type: typ, Data: m.Chunk.Bytes()}})
		}
		if err := srv.Send(&storepb.SeriesResponse{Result: &storepb.SeriesResponse_Series{Series: ps}}); err != nil {
			return err
		}
	}
	return set.Err()
}

// BenchmarkGlobalQuery compares a query over the global view of two nodes
// (local TSDB + the other node through remote read over loopback HTTP, or
// through the StoreAPI over loopback gRPC)
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

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	storepb.RegisterStoreServer(gs, &tsdbStore{q: nodeB, ext: cfgB.GlobalConfig.ExternalLabels})
	go func() { _ = gs.Serve(ln) }()
	defer gs.Stop()
	sapi, err := remote.NewStoreAPI(remote.StoreAPIOptions{Address: ln.Addr().String()})
	if err != nil {
		b.Fatal(err)
	}
	defer sapi.Close()
	sopts := opts
	sopts.Stores = func() []remote.Store { return []remote.Store{sapi} }
	globalStoreAPI := remote.New(nodeA, sopts)

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
		for _, g := range []storage.Queryable{global, globalStoreAPI} {
			if s, g := run(single), run(g); s != g || s == "" {
				b.Fatalf("%s: the global answer differs from the single node's:\n%s\n%s", q.name, g, s)
			}
		}
		for _, st := range []struct {
			name string
			q    storage.Queryable
		}{{"single_node", single}, {"global_2_nodes_remote_read", global}, {"global_2_nodes_storeapi", globalStoreAPI}} {
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
