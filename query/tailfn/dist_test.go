package tailfn

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"

	"github.com/tailroot/tailroot/attribution"
	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/tsdb/records"
)

// namedShard gives an in-process shard a name of its own.
type namedShard struct {
	Shard
	name string
}

func (s namedShard) Name() string { return s.name }

// downShard is a peer that never answers.
type downShard struct{ name string }

func (s downShard) Name() string { return s.name }
func (s downShard) Stats(context.Context, *ShardRequest) (*ShardResponse, error) {
	return nil, errors.New("connection refused")
}

// distQueries are the queries that must agree between one store and the
// cluster; they cover every distributed function and statistic, several
// levels, fields, methods and a label matcher.
var distQueries = func() []string {
	var qs []string
	for _, p := range []string{"0.5", "0.9", "0.99", "0.999"} {
		for _, f := range []string{"tail_mean", "tail_excess", "tail_euler"} {
			qs = append(qs, fmt.Sprintf(`%s(%s, requests[1h], "all")`, f, p))
		}
		qs = append(qs, fmt.Sprintf(`tail_shapley(%s, requests[30m], requests[30m] offset 30m, "all")`, p))
		for _, m := range []string{"bootstrap", "mj", "delta"} {
			qs = append(qs, fmt.Sprintf(`quantile_ci(%s, 0.95, requests[1h], "%s")`, p, m))
		}
		qs = append(qs, fmt.Sprintf(`quantile_ci(%s, 0.95, requests[1h])`, p))
		for _, m := range []string{"bootstrap", "mj", "delta", "order_statistic"} {
			qs = append(qs, fmt.Sprintf(`quantile_diff_ci(%s, 0.9, requests{instance="i0"}[1h], requests{instance!="i0"}[1h], "%s")`, p, m))
		}
	}
	qs = append(qs,
		`tail_mean(0.99, requests{instance="i1"}[1h], "all")`,
		`tail_euler(0.95, requests{instance=~"i[23]"}[1h], "all")`,
		`tail_heat(requests[1h], "all")`,
		`tail_heat(requests{instance!="i0"}[1h], "all", "0.25,0.5,0.75,0.9,0.99")`,
		`quantile_ci(0.9, 0.9, requests[1h], "bootstrap", "ttft")`,
		`quantile_ci(0.99, 0.95, requests[1h], "maritz_jarrett", "decode")`,
		`quantile_ci(0.5, 0.95, requests[1h], "delta", "queue")`,
		`quantile_ci(0.9, 0.8, requests[1h], "order_statistic", "ttft")`,
		`quantile_diff_ci(0.5, 0.95, requests{instance="i1"}[1h], requests{instance="i2"}[1h])`,
		`quantile_diff_ci(0.5, 0.95, requests{instance="i1"}[1h], requests{instance="nope"}[1h])`,
		`quantile_diff_ci(0.9, 0.9, requests{instance="i1"}[1h], requests[1h], "mj", "ttft")`,
		`tail_mean(0.99, requests{instance="nope"}[1h])`,
	)
	return qs
}()

// evalAll runs qs at ts and returns rows by label set, and annotations.
func evalAll(t *testing.T, ng *query.Engine, st storage.Queryable, q string, ts time.Time) (map[string]float64, []string) {
	t.Helper()
	rows, annos, err := evalErr(t, ng, st, q, ts)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return rows, annos
}

// evalErr is evalAll returning the query's error.
func evalErr(t *testing.T, ng *query.Engine, st storage.Queryable, q string, ts time.Time) (map[string]float64, []string, error) {
	t.Helper()
	ctx := context.Background()
	qr, err := ng.NewInstantQuery(ctx, st, nil, q, ts)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer qr.Close()
	res := qr.Exec(ctx)
	if res.Err != nil {
		return nil, nil, res.Err
	}
	rows := map[string]float64{}
	for _, s := range res.Value.(promql.Vector) {
		rows[s.Metric.String()] = s.F
	}
	var annos []string
	for k := range res.Warnings {
		annos = append(annos, k)
	}
	slices.Sort(annos)
	return rows, annos, nil
}

// sameRows reports the rows that differ by more than tol relative.
func sameRows(want, got map[string]float64, tol float64) []string {
	var bad []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("missing %s (want %v)", k, w))
		case math.IsNaN(w) != math.IsNaN(g) || !math.IsNaN(w) && math.Abs(g-w) > tol*math.Max(1, math.Abs(w)):
			bad = append(bad, fmt.Sprintf("%s = %.17g, want %.17g", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("unexpected %s = %v", k, g))
		}
	}
	slices.Sort(bad)
	return bad
}

// distRecords draws n records over the hour before end with distinct
// times (so that the order of records with equal end-to-end times is the
// same on one store and across stores) and, when coarse, stages on a
// 10 ms grid so that many requests tie.
func distRecords(rng *rand.Rand, n int, end int64, coarse bool) []records.Record {
	recs := randomRecords(rng, n, 0, 1)
	step := int64(time.Hour/time.Millisecond) / int64(n)
	for i := range recs {
		recs[i].Time = end - int64(i)*step
		if coarse {
			for j := range records.StageOther {
				recs[i].Stages[j] = math.Round(recs[i].Stages[j]*100) / 100
			}
			recs[i].Stages[records.StageOther] = 0
			recs[i].E2E = recs[i].Sum()
		}
		// TTFT: most records report one covering queue, tokenize and
		// prefill; some none (0); some one their stages exceed. Metric
		// ttft leaves the last two out.
		switch st := recs[i].Stages; i % 9 {
		case 0:
			recs[i].TTFT = 0
		case 1:
			recs[i].TTFT = st[records.StageQueue] + st[records.StagePrefill]
		default:
			recs[i].TTFT = st[records.StageQueue] + st[records.StageTokenize] + st[records.StagePrefill] + 0.001*float64(i%5)
		}
	}
	rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
	return recs
}

// splitRecords assigns records to 3 stores: at random, or skewed (every
// request slower than the 95th percentile on store 2, the rest at random
// on stores 0 and 1).
func splitRecords(rng *rand.Rand, recs []records.Record, skewed bool) [3][]records.Record {
	var out [3][]records.Record
	e2e := make([]float64, len(recs))
	for i, r := range recs {
		e2e[i] = r.E2E
	}
	slices.Sort(e2e)
	p95 := e2e[len(e2e)*95/100]
	for _, r := range recs {
		i := rng.IntN(3)
		if skewed {
			i = rng.IntN(2)
			if r.E2E > p95 {
				i = 2
			}
		}
		out[i] = append(out[i], r)
	}
	return out
}

func appendAll(t testing.TB, s *records.Store, recs []records.Record) {
	t.Helper()
	sorted := slices.Clone(recs)
	for len(sorted) > 0 {
		n := min(len(sorted), 5000)
		if err := s.Append(sorted[:n]); err != nil {
			t.Fatal(err)
		}
		sorted = sorted[n:]
	}
}

// TestClusterMatchesOneStore splits records over three stores (at random,
// skewed with every slow request on one store, and with coarse values that
// tie) and requires every distributed function to return, over the
// cluster, the single store's rows to 1e-9.
func TestClusterMatchesOneStore(t *testing.T) {
	const end = int64(1_700_000_000_000)
	ts := time.UnixMilli(end)
	for _, tc := range []struct {
		name           string
		n              int
		skewed, coarse bool
	}{
		{"random", 3000, false, false},
		{"skewed", 3000, true, false},
		{"ties", 2000, false, true},
		{"few", 7, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.n), 99))
			recs := distRecords(rng, tc.n, end, tc.coarse)
			all := openStore(t)
			appendAll(t, all, recs)
			parts := splitRecords(rng, recs, tc.skewed)
			var stores [3]*records.Store
			for i := range stores {
				stores[i] = openStore(t)
				appendAll(t, stores[i], parts[i])
			}
			peers := []Shard{
				namedShard{NewLocalShard(stores[1], DefaultShardOptions()), "peer-1"},
				namedShard{NewLocalShard(stores[2], DefaultShardOptions()), "peer-2"},
			}
			// Pure splitting with a small fanout (many rounds, exact keys
			// at the end), and the defaults (fetching the last values).
			one := newEngine(t, all)
			st := loadSeries(t, "")
			// MaxCIValues −1: the bootstrap and Maritz–Jarrett exactly, however
			// many order statistics they read (TestClusterCISubstitution
			// checks the capped default).
			exact := DefaultClusterOptions()
			exact.MaxCIValues = -1
			for _, opts := range []ClusterOptions{{Fanout: 15, FetchLimit: -1, MaxCIValues: -1}, exact} {
				cl := NewCluster(stores[0], peers, opts, DefaultShardOptions())
				compareAll(t, one, newEngine(t, cl), st, ts, tc.n)
			}
		})
	}
}

// compareAll runs distQueries on one store and on a cluster.
func compareAll(t *testing.T, one, dist *query.Engine, st storage.Queryable, ts time.Time, n int) {
	t.Helper()
	refused := 0
	defer func() {
		t.Logf("n=%d: %d of %d queries refused a method at their p and n", n, refused, len(distQueries))
		if n > 100 && refused > len(distQueries)/2 {
			t.Errorf("n=%d: %d of %d queries refused: too few compared", n, refused, len(distQueries))
		}
	}()
	for _, q := range distQueries {
		want, wantAnnos, wantErr := evalErr(t, one, st, q, ts)
		got, gotAnnos, gotErr := evalErr(t, dist, st, q, ts)
		if wantErr != nil || gotErr != nil {
			// A method refused at this p and n is refused on both.
			if wantErr == nil || gotErr == nil || wantErr.Error() != gotErr.Error() {
				t.Errorf("%s: error %v, want %v", q, gotErr, wantErr)
			} else if !errors.Is(gotErr, attribution.ErrInvalidMethod) {
				t.Errorf("%s: %v", q, gotErr)
			}
			refused++
			continue
		}
		if bad := sameRows(want, got, 1e-9); len(bad) > 0 {
			t.Errorf("%s: %d rows differ:\n%s", q, len(bad), strings.Join(bad, "\n"))
		}
		if !slices.Equal(wantAnnos, gotAnnos) {
			t.Errorf("%s: annotations %q, want %q", q, gotAnnos, wantAnnos)
		}
		if len(want) == 0 && !strings.Contains(q, "nope") && n > 100 {
			t.Errorf("%s: no rows", q)
		}
	}
}

// TestClusterPeerDown requires a clear error naming the peer when one is
// down, and with partial responses the answer over the other nodes with a
// warning naming it.
func TestClusterPeerDown(t *testing.T) {
	const end = int64(1_700_000_000_000)
	ts := time.UnixMilli(end)
	rng := rand.New(rand.NewPCG(5, 6))
	recs := distRecords(rng, 600, end, false)
	a, b := openStore(t), openStore(t)
	appendAll(t, a, recs[:300])
	appendAll(t, b, recs[300:])
	cl := NewCluster(a, []Shard{namedShard{NewLocalShard(b, DefaultShardOptions()), "http://peer-b"}, downShard{"http://peer-down"}},
		DefaultClusterOptions(), DefaultShardOptions())
	ng := newEngine(t, cl)
	st := loadSeries(t, "")
	ctx := context.Background()
	q := `tail_mean(0.99, requests[1h], "all")`
	qr, err := ng.NewInstantQuery(ctx, st, nil, q, ts)
	if err != nil {
		t.Fatal(err)
	}
	res := qr.Exec(ctx)
	qr.Close()
	var se promql.ErrStorage
	if res.Err == nil || !errors.As(res.Err, &se) || !strings.Contains(res.Err.Error(), "http://peer-down") || !strings.Contains(res.Err.Error(), "partial_response=true") {
		t.Fatalf("peer down: error %v, want a storage error naming http://peer-down", res.Err)
	}

	// Partial: the answer of the two live stores, and a warning.
	both := openStore(t)
	appendAll(t, both, recs)
	want, _ := evalAll(t, newEngine(t, both), st, q, ts)
	qr, err = ng.NewInstantQuery(WithPartialResponse(ctx, true), st, nil, q, ts)
	if err != nil {
		t.Fatal(err)
	}
	defer qr.Close()
	res = qr.Exec(WithPartialResponse(ctx, true))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	got := map[string]float64{}
	for _, s := range res.Value.(promql.Vector) {
		got[s.Metric.String()] = s.F
	}
	if bad := sameRows(want, got, 1e-9); len(bad) > 0 {
		t.Errorf("partial answer differs from the live nodes':\n%s", strings.Join(bad, "\n"))
	}
	found := false
	for w := range res.Warnings {
		found = found || strings.Contains(w, "partial response") && strings.Contains(w, "http://peer-down") && strings.Contains(w, "2 of 3 nodes")
	}
	if !found {
		t.Errorf("partial answer without a warning naming the peer: %v", res.Warnings)
	}
}

// countingShard counts the rounds a shard answers.
type countingShard struct {
	Shard
	rounds *int
}

func (s countingShard) Stats(ctx context.Context, req *ShardRequest) (*ShardResponse, error) {
	*s.rounds++
	return s.Shard.Stats(ctx, req)
}

// TestClusterRounds checks the round counts docs/distributed-tails.md
// gives (at most 8 search rounds with the default fanout, whatever n),
// for a small and a 100 times larger window.
func TestClusterRounds(t *testing.T) {
	const end = int64(1_700_000_000_000)
	limits := map[string]int{
		`tail_mean(0.99, requests[1h])`:                               1 + 8 + 2,
		`tail_excess(0.99, requests[1h])`:                             1 + 8 + 2,
		`tail_heat(requests[1h])`:                                     1 + 8 + 2,
		`tail_euler(0.99, requests[1h])`:                              1 + 8 + 1,
		`quantile_ci(0.5, 0.95, requests[1h], "delta")`:               1 + 8 + 3,
		`quantile_ci(0.5, 0.95, requests[1h], "bootstrap")`:           1 + 8 + 1,
		`quantile_ci(0.5, 0.95, requests[1h], "mj")`:                  1 + 8 + 1,
		`quantile_ci(0.99, 0.95, requests[1h])`:                       1 + 8 + 1,
		`tail_shapley(0.99, requests[30m], requests[30m] offset 30m)`: 2,
	}
	for _, n := range []int{400, 40000} {
		rng := rand.New(rand.NewPCG(uint64(n), 3))
		recs := distRecords(rng, n, end, false)
		a, b := openStore(t), openStore(t)
		appendAll(t, a, recs[:n/2])
		appendAll(t, b, recs[n/2:])
		rounds := 0
		cl := NewCluster(a, []Shard{countingShard{namedShard{NewLocalShard(b, DefaultShardOptions()), "peer"}, &rounds}}, DefaultClusterOptions(), DefaultShardOptions())
		ng := newEngine(t, cl)
		st := loadSeries(t, "")
		for q, limit := range limits {
			rounds = 0
			rows, _, err := evalErr(t, ng, st, q, time.UnixMilli(end))
			if errors.Is(err, attribution.ErrInvalidMethod) {
				t.Logf("n=%d: %s: refused: %v", n, q, err)
				continue
			}
			if err != nil || len(rows) == 0 {
				t.Errorf("n=%d: %s: no rows (%v)", n, q, err)
			}
			if rounds > limit || rounds < 2 {
				t.Errorf("n=%d: %s took %d rounds, want 2..%d", n, q, rounds, limit)
			}
			t.Logf("n=%d: %s: %d rounds", n, q, rounds)
		}
	}
}

// flakyShard answers ErrSnapshotChanged on its first n rounds.
type flakyShard struct {
	Shard
	left *int
}

func (s flakyShard) Stats(ctx context.Context, req *ShardRequest) (*ShardResponse, error) {
	if *s.left > 0 && req.Expect != nil {
		*s.left--
		return nil, &PeerError{Peer: s.Name(), Err: fmt.Errorf("status 409: %w", ErrSnapshotChanged)}
	}
	return s.Shard.Stats(ctx, req)
}

// TestClusterSnapshotChanged: a peer whose records changed under a lost
// snapshot makes the evaluation start over, not drop the peer; a peer that
// keeps changing fails the query (or, with partial responses, is left out
// with a warning like a peer that is down).
func TestClusterSnapshotChanged(t *testing.T) {
	const end = int64(1_700_000_000_000)
	rng := rand.New(rand.NewPCG(8, 9))
	recs := distRecords(rng, 400, end, false)
	a, b, both := openStore(t), openStore(t), openStore(t)
	appendAll(t, a, recs[:200])
	appendAll(t, b, recs[200:])
	appendAll(t, both, recs)
	st := loadSeries(t, "")
	q := `tail_mean(0.9, requests[1h], "all")`
	want, _ := evalAll(t, newEngine(t, both), st, q, time.UnixMilli(end))
	left := 2
	cl := NewCluster(a, []Shard{flakyShard{namedShard{NewLocalShard(b, DefaultShardOptions()), "peer"}, &left}}, DefaultClusterOptions(), DefaultShardOptions())
	got, annos := evalAll(t, newEngine(t, cl), st, q, time.UnixMilli(end))
	if bad := sameRows(want, got, 1e-9); len(bad) > 0 || len(annos) > 0 {
		t.Errorf("after two changed snapshots: %v, annotations %q", bad, annos)
	}
	left = 3
	ctx := context.Background()
	qr, err := newEngine(t, cl).NewInstantQuery(ctx, st, nil, q, time.UnixMilli(end))
	if err != nil {
		t.Fatal(err)
	}
	defer qr.Close()
	if res := qr.Exec(ctx); res.Err == nil || !strings.Contains(res.Err.Error(), "records changed during the query") {
		t.Errorf("three changed snapshots: error %v, want one saying the records changed", res.Err)
	}
}

// TestClusterCISubstitution: with the default cap on fetched order
// statistics, a bootstrap or Maritz–Jarrett quantile_ci over a window
// whose rank span exceeds it is answered across nodes with the
// order-statistic interval — the same rows one store gives for
// method order_statistic — and an info annotation saying so; below the
// cap it is the method asked for, exactly.
func TestClusterCISubstitution(t *testing.T) {
	const end = int64(1_700_000_000_000)
	ts := time.UnixMilli(end)
	rng := rand.New(rand.NewPCG(21, 22))
	recs := distRecords(rng, 3000, end, false)
	all, a, b := openStore(t), openStore(t), openStore(t)
	appendAll(t, all, recs)
	appendAll(t, a, recs[:1000])
	appendAll(t, b, recs[1000:])
	st := loadSeries(t, "")
	one := newEngine(t, all)
	dist := newEngine(t, NewCluster(a, []Shard{namedShard{NewLocalShard(b, DefaultShardOptions()), "peer"}}, DefaultClusterOptions(), DefaultShardOptions()))
	// Maritz–Jarrett at p = 0.5 reads ~17.5·√(3000/4) ≈ 480 ranks > 256.
	want, _ := evalAll(t, one, st, `quantile_ci(0.5, 0.95, requests[1h], "order_statistic")`, ts)
	got, annos := evalAll(t, dist, st, `quantile_ci(0.5, 0.95, requests[1h], "mj")`, ts)
	if bad := sameRows(want, got, 0); len(bad) > 0 {
		t.Errorf("substituted interval differs from one store's order_statistic:\n%s", strings.Join(bad, "\n"))
	}
	if len(annos) != 1 || !strings.Contains(annos[0], "answered with method order_statistic") || !strings.Contains(annos[0], "maritz_jarrett") {
		t.Errorf("annotations %q, want one info saying maritz_jarrett was answered with order_statistic", annos)
	}
	// The bootstrap at p = 0.5 reads ~7.7·√750 ≈ 210 ranks: under the cap, exact.
	want, _ = evalAll(t, one, st, `quantile_ci(0.5, 0.95, requests[1h], "bootstrap")`, ts)
	got, annos = evalAll(t, dist, st, `quantile_ci(0.5, 0.95, requests[1h], "bootstrap")`, ts)
	if bad := sameRows(want, got, 0); len(bad) > 0 || len(annos) > 0 {
		t.Errorf("bootstrap under the cap: %v, annotations %q", bad, annos)
	}
}
