package tailfn_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/promqltest"

	"github.com/tailroot/tailroot/api"
	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/tailfn"
	"github.com/tailroot/tailroot/tsdb/records"
)

// memSource is a RecordSource over a slice in time order.
type memSource []records.Record

type memIter struct {
	recs []records.Record
	i    int
}

func (m memSource) Select(_ context.Context, mint, maxt int64, ms ...*labels.Matcher) records.RecordIterator {
	var out []records.Record
	for _, r := range m {
		ok := r.Time >= mint && r.Time <= maxt
		for _, mt := range ms {
			ok = ok && mt.Matches(r.Labels.Get(mt.Name))
		}
		if ok {
			out = append(out, r)
		}
	}
	return &memIter{recs: out, i: -1}
}

func (it *memIter) Next() bool         { it.i++; return it.i < len(it.recs) }
func (it *memIter) At() records.Record { return it.recs[it.i] }
func (it *memIter) Err() error         { return nil }
func (it *memIter) Close() error       { return nil }

// BenchmarkDistributedBytes evaluates each distributed function over three
// nodes (this one and two peers over HTTP, each holding a third of the
// records) and reports the body bytes exchanged with the peers per query:
// for every function but tail_shapley they do not grow with n (the
// bootstrap and Maritz–Jarrett intervals fetch their √n rank span up to
// ClusterOptions.MaxCIValues values, then answer by the order statistic).
// A method refused at its p and n (attribution.ErrInvalidMethod) is
// skipped.
func BenchmarkDistributedBytes(b *testing.B) {
	const end = int64(1_700_000_000_000)
	queries := []struct{ name, q string }{
		{"tail_mean", `tail_mean(0.99, requests[1h], "all")`},
		{"tail_excess", `tail_excess(0.99, requests[1h], "all")`},
		{"tail_euler", `tail_euler(0.99, requests[1h], "all")`},
		{"tail_heat", `tail_heat(requests[1h], "all")`},
		{"quantile_ci_order_statistic", `quantile_ci(0.99, 0.95, requests[1h])`},
		{"quantile_ci_delta_p50", `quantile_ci(0.5, 0.95, requests[1h], "delta")`},
		{"quantile_ci_mj_p50", `quantile_ci(0.5, 0.95, requests[1h], "mj")`},
		{"quantile_ci_bootstrap_p50", `quantile_ci(0.5, 0.95, requests[1h], "bootstrap")`},
		{"quantile_diff_ci_order_statistic", `quantile_diff_ci(0.99, 0.95, requests{instance="a"}[1h], requests{instance="b"}[1h])`},
		{"quantile_diff_ci_bootstrap_p50", `quantile_diff_ci(0.5, 0.95, requests{instance="a"}[1h], requests{instance="b"}[1h], "bootstrap")`},
		{"tail_shapley", `tail_shapley(0.99, requests[30m], requests[30m] offset 30m)`},
	}
	for _, n := range []int{1_000, 10_000, 100_000} {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		var parts [3]memSource
		step := int64(time.Hour/time.Millisecond) / int64(n)
		for i := range n {
			r := records.Record{Time: end - int64(n-1-i)*step, Labels: labels.FromStrings("instance", string(rune('a'+i%2)), "model_name", "m")}
			for j := range records.StageOther {
				r.Stages[j] = math.Exp(rng.NormFloat64()) * 0.1
			}
			r.E2E = r.Sum()
			r.TTFT = r.Stages[records.StageQueue] + r.Stages[records.StagePrefill]
			k := rng.IntN(3)
			parts[k] = append(parts[k], r)
		}
		var peers []tailfn.Shard
		var clients []*tailfn.PeerShard
		for _, part := range parts[1:] {
			srv := httptest.NewServer(api.NewRecordsShard(tailfn.NewLocalShard(part, tailfn.DefaultShardOptions())))
			b.Cleanup(srv.Close)
			p, err := tailfn.NewPeerShard(srv.URL, srv.Client())
			if err != nil {
				b.Fatal(err)
			}
			peers = append(peers, p)
			clients = append(clients, p)
		}
		st := promqltest.LoadedStorage(b, "")
		// split: the search always splits down to one key, the bound of
		// docs/distributed-tails.md; default: it fetches the last ≤ 64
		// values, which small windows reach in fewer rounds.
		for _, mode := range []string{"split", "default"} {
			opts := tailfn.DefaultClusterOptions()
			if mode == "split" {
				opts.FetchLimit = -1
			}
			cl := tailfn.NewCluster(parts[0], peers, opts, tailfn.DefaultShardOptions())
			reg := query.NewRegistry()
			if err := tailfn.Register(reg, cl); err != nil {
				b.Fatal(err)
			}
			ng, err := query.New(query.DefaultOptions(), reg, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = ng.Close() })
			for _, q := range queries {
				b.Run(fmt.Sprintf("%s/mode=%s/n=%d", q.name, mode, n), func(b *testing.B) {
					b.ReportAllocs()
					var before, roundsBefore int64
					for _, c := range clients {
						s, r := c.BytesExchanged()
						before += s + r
						roundsBefore += c.Rounds()
					}
					ctx := context.Background()
					for b.Loop() {
						qr, err := ng.NewInstantQuery(ctx, st, nil, q.q, time.UnixMilli(end))
						if err != nil {
							b.Fatal(err)
						}
						res := qr.Exec(ctx)
						if errors.Is(res.Err, attribution.ErrInvalidMethod) {
							b.Skipf("refused: %v", res.Err)
						}
						if res.Err != nil {
							b.Fatal(res.Err)
						}
						if len(res.Value.(promql.Vector)) == 0 {
							b.Fatal("no rows")
						}
						qr.Close()
					}
					var after, roundsAfter int64
					for _, c := range clients {
						s, r := c.BytesExchanged()
						after += s + r
						roundsAfter += c.Rounds()
					}
					b.ReportMetric(float64(after-before)/float64(b.N), "bytes/query")
					b.ReportMetric(float64(roundsAfter-roundsBefore)/float64(b.N)/float64(len(clients)), "rounds/query")
				})
			}
		}
	}
}

// BenchmarkDistributedAttributionBytes is BenchmarkDistributedBytes for
// the attribution endpoints' entry points (Cluster.Decompose with the heat
// table, Cluster.QuantileDiff): the body bytes exchanged with two HTTP
// peers per call do not grow with n.
func BenchmarkDistributedAttributionBytes(b *testing.B) {
	const end = int64(1_700_000_000_000)
	for _, n := range []int{1_000, 10_000, 100_000} {
		rng := rand.New(rand.NewPCG(uint64(n), 2))
		var parts [3]memSource
		step := int64(time.Hour/time.Millisecond) / int64(n)
		for i := range n {
			r := records.Record{Time: end - int64(n-1-i)*step, Labels: labels.FromStrings("instance", string(rune('a'+i%2)), "model_name", "m")}
			for j := range records.StageOther {
				r.Stages[j] = math.Exp(rng.NormFloat64()) * 0.1
			}
			r.E2E = r.Sum()
			k := rng.IntN(3)
			parts[k] = append(parts[k], r)
		}
		var peers []tailfn.Shard
		var clients []*tailfn.PeerShard
		for _, part := range parts[1:] {
			srv := httptest.NewServer(api.NewRecordsShard(tailfn.NewLocalShard(part, tailfn.DefaultShardOptions())))
			b.Cleanup(srv.Close)
			p, err := tailfn.NewPeerShard(srv.URL, srv.Client())
			if err != nil {
				b.Fatal(err)
			}
			peers = append(peers, p)
			clients = append(clients, p)
		}
		cl := tailfn.NewCluster(parts[0], peers, tailfn.DefaultClusterOptions(), tailfn.DefaultShardOptions())
		win := tailfn.WindowAt(nil, time.UnixMilli(end), time.Hour)
		ia := tailfn.WindowAt([]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "instance", "a")}, time.UnixMilli(end), time.Hour)
		ib := tailfn.WindowAt([]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "instance", "b")}, time.UnixMilli(end), time.Hour)
		calls := []struct {
			name string
			f    func(context.Context) error
		}{}
		for _, m := range []string{"tail_mean", "euler", "excess"} {
			calls = append(calls, struct {
				name string
				f    func(context.Context) error
			}{"decompose_" + m + "_heat", func(ctx context.Context) error {
				_, err := cl.Decompose(ctx, tailfn.SeriesFallback{}, tailfn.DecomposeRequest{Window: win, Metric: "e2e", P: 0.99, Method: m, Heat: true})
				return err
			}})
		}
		calls = append(calls, struct {
			name string
			f    func(context.Context) error
		}{"quantile_diff_order_statistic", func(ctx context.Context) error {
			_, err := cl.QuantileDiff(ctx, ia, ib, "e2e", 0.99, 0.95, attribution.CIOptions{Method: attribution.CIOrderStatistic})
			return err
		}})
		for _, c := range calls {
			b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
				b.ReportAllocs()
				var before int64
				for _, p := range clients {
					s, r := p.BytesExchanged()
					before += s + r
				}
				ctx := context.Background()
				for b.Loop() {
					if err := c.f(ctx); err != nil {
						b.Fatal(err)
					}
				}
				var after int64
				for _, p := range clients {
					s, r := p.BytesExchanged()
					after += s + r
				}
				b.ReportMetric(float64(after-before)/float64(b.N), "bytes/query")
			})
		}
	}
}
