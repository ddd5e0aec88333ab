package api

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/promqltest"

	"github.com/tailroot/tailroot/query"
	"github.com/tailroot/tailroot/query/tailfn"
	"github.com/tailroot/tailroot/tsdb/records"
)

// nodeRecords draws n requests over (1000 s, 4600 s] with distinct times
// (so that requests tied on end-to-end time are ordered alike on one store
// and across stores), two models, long-tailed stages and a TTFT.
func nodeRecords(rng *rand.Rand, n int) []records.Record {
	out := make([]records.Record, n)
	step := int64(3600_000 / n)
	for i := range out {
		r := records.Record{
			Time:      4_600_000 - int64(i)*step,
			Labels:    labels.FromStrings("model_name", []string{"m", "n"}[rng.IntN(2)], "vllm_version", "0.6.3"),
			RequestID: fmt.Sprintf("r%d", i),
		}
		r.Stages[records.StageQueue] = math.Exp(rng.NormFloat64()*1.2 - 3)
		r.Stages[records.StageTokenize] = 0.001 + 0.002*rng.Float64()
		r.Stages[records.StagePrefill] = math.Exp(rng.NormFloat64()*0.6 - 2)
		r.Stages[records.StageDecode] = math.Exp(rng.NormFloat64()*0.8 - 0.5)
		r.E2E = r.Sum()
		r.TTFT = r.Stages[records.StageQueue] + r.Stages[records.StageTokenize] + r.Stages[records.StagePrefill] + 0.001
		if i%11 == 0 {
			r.TTFT = 0 // no first token reported: metric ttft leaves it out
		}
		out[i] = r
	}
	rng.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func openRecords(t testing.TB, recs []records.Record) *records.Store {
	t.Helper()
	opts := records.DefaultOptions()
	opts.Dir = t.TempDir()
	s, err := records.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if len(recs) > 0 {
		if err := s.Append(recs); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// attributionServer serves the attribution endpoints over src (and cl
// when not nil) and the shard endpoint over src, as tailroot serve does.
func attributionServer(t testing.TB, src tailfn.RecordSource, cl *tailfn.Cluster) *httptest.Server {
	t.Helper()
	reg := query.NewRegistry()
	if err := tailfn.Register(reg, src); err != nil {
		t.Fatal(err)
	}
	ng, err := query.New(query.DefaultOptions(), reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ng.Close() })
	st := promqltest.LoadedStorage(t, "load 1m\n\tunrelated 1")
	a := NewAttribution(ng, st, src, AttributionOptions{
		KernelVersion: func() string { return "test" },
		Now:           func() time.Time { return time.Unix(4600, 0) },
		Cluster:       cl,
	})
	r := mux.NewRouter()
	a.Register(r)
	r.Handle(RecordsShardPath, NewRecordsShard(tailfn.NewLocalShard(src, tailfn.DefaultShardOptions()))).Methods(http.MethodPost)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

// getJSON returns the status and decoded envelope of GET path?params.
func getJSON(t *testing.T, base, path string, params url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(base + path + "?" + params.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var env map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return resp.StatusCode, env
}

// skipKeys are the fields of an answer that may differ between one store
// and the cluster: which nodes, warnings, and what is read locally.
var skipKeys = []string{"nodes", "warnings", "generated_at", "reproducibility", "prompt_hash"}

// diffJSON lists where got differs from want: numbers to 1e-9 relative,
// everything else exactly.
func diffJSON(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v, want an object", path, got)}
		}
		var bad []string
		for k, wv := range w {
			if slices.Contains(skipKeys, k) {
				continue
			}
			gv, ok := g[k]
			if !ok {
				bad = append(bad, fmt.Sprintf("%s.%s missing", path, k))
				continue
			}
			bad = append(bad, diffJSON(path+"."+k, wv, gv)...)
		}
		for k := range g {
			if _, ok := w[k]; !ok && !slices.Contains(skipKeys, k) {
				bad = append(bad, fmt.Sprintf("%s.%s unexpected", path, k))
			}
		}
		return bad
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %v, want %v", path, got, want)}
		}
		var bad []string
		for i := range w {
			bad = append(bad, diffJSON(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return bad
	case float64:
		g, ok := got.(float64)
		if !ok || math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
			return []string{fmt.Sprintf("%s = %v, want %.17g", path, got, w)}
		}
		return nil
	default:
		if fmt.Sprint(want) != fmt.Sprint(got) {
			return []string{fmt.Sprintf("%s = %v, want %v", path, got, want)}
		}
		return nil
	}
}

// nodesField returns the answer's nodes object.
func nodesField(t *testing.T, env map[string]any) (answered, of float64, partial bool, leftOut []any) {
	t.Helper()
	data, _ := env["data"].(map[string]any)
	n, ok := data["nodes"].(map[string]any)
	if !ok {
		t.Fatalf("answer without nodes: %v", env)
	}
	answered, _ = n["answered"].(float64)
	of, _ = n["of"].(float64)
	partial, _ = n["partial"].(bool)
	leftOut, _ = n["left_out"].([]any)
	return
}

// attributionQueries are the requests that must agree between one store
// and the cluster: every method and view of /breakdown, the report, and
// /ab with each interval method that is valid at these n.
var attributionQueries = func() []struct {
	path   string
	params url.Values
} {
	type q = struct {
		path   string
		params url.Values
	}
	var out []q
	win := url.Values{"start": {"1000"}, "end": {"4600"}}
	with := func(v url.Values, kv ...string) url.Values {
		out := url.Values{}
		for k, x := range v {
			out[k] = x
		}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	for _, p := range []string{"0.5", "0.9", "0.99"} {
		for _, m := range []string{"auto", "tail_mean", "euler", "excess"} {
			out = append(out, q{"/api/v1/attribution/breakdown", with(win, "quantile", p, "method", m)})
		}
		out = append(out, q{"/api/v1/attribution/breakdown", with(win, "quantile", p, "view", "heat", "selector", `{model_name="m"}`)})
		out = append(out, q{"/api/v1/attribution/breakdown", url.Values{"start": {"2800"}, "end": {"4600"}, "quantile": {p}, "method": {"shapley"}, "baseline_offset": {"30m"}}})
		out = append(out, q{"/api/v1/attribution/report", with(win, "quantile", p, "method", "tail_mean")})
		out = append(out, q{"/api/v1/attribution/ab", with(win, "quantile", p, "a", `{model_name="m"}`, "b", `{model_name="n"}`)})
		// Metric ttft: every node's records' time to first token.
		for _, m := range []string{"auto", "euler"} {
			out = append(out, q{"/api/v1/attribution/breakdown", with(win, "quantile", p, "method", m, "metric", "ttft")})
		}
		out = append(out, q{"/api/v1/attribution/breakdown", with(win, "quantile", p, "view", "heat", "metric", "ttft")})
		out = append(out, q{"/api/v1/attribution/breakdown", url.Values{"start": {"2800"}, "end": {"4600"}, "quantile": {p}, "method": {"shapley"}, "baseline_offset": {"30m"}, "metric": {"ttft"}}})
		out = append(out, q{"/api/v1/attribution/ab", with(win, "quantile", p, "a", `{model_name="m"}`, "b", `{model_name="n"}`, "metric", "ttft")})
	}
	out = append(out,
		q{"/api/v1/attribution/report", url.Values{"window": {"30m"}}},
		q{"/api/v1/attribution/ab", with(win, "quantile", "0.5", "a", `{model_name="m"}`, "b", `{model_name="n"}`, "ci_method", "delta")},
		// Empty windows: 422 alike.
		q{"/api/v1/attribution/ab", with(win, "a", `{model_name="nope"}`, "b", `{model_name="n"}`)},
		q{"/api/v1/attribution/breakdown", with(win, "selector", `{model_name="nope"}`, "method", "euler")},
		q{"/api/v1/attribution/breakdown", url.Values{"start": {"1000"}, "end": {"2000"}, "method": {"shapley"}, "baseline_offset": {"1h"}}},
	)
	return out
}()

// TestAttributionOverNodes splits records over three tailroot servers
// (at random, and skewed: every request slower than the 95th percentile
// on one server) and requires /breakdown, /report and /ab on the first,
// which has the others as peers, to answer what one server holding every
// record answers, to 1e-9, with nodes saying 3 of 3.
func TestAttributionOverNodes(t *testing.T) {
	for _, skewed := range []bool{false, true} {
		t.Run(fmt.Sprintf("skewed=%v", skewed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, 12))
			recs := nodeRecords(rng, 6000)
			one := attributionServer(t, openRecords(t, recs), nil)
			var parts [3][]records.Record
			e2e := make([]float64, len(recs))
			for i, r := range recs {
				e2e[i] = r.E2E
			}
			slices.Sort(e2e)
			p95 := e2e[len(e2e)*95/100]
			for _, r := range recs {
				i := rng.IntN(3)
				if skewed {
					if i = rng.IntN(2); r.E2E > p95 {
						i = 2
					}
				}
				parts[i] = append(parts[i], r)
			}
			first := openRecords(t, parts[0])
			var peers []tailfn.Shard
			for _, part := range parts[1:] {
				srv := attributionServer(t, openRecords(t, part), nil)
				p, err := tailfn.NewPeerShard(srv.URL, nil)
				if err != nil {
					t.Fatal(err)
				}
				peers = append(peers, p)
			}
			cl := tailfn.NewCluster(first, peers, tailfn.DefaultClusterOptions(), tailfn.DefaultShardOptions())
			dist := attributionServer(t, first, cl)
			compared := 0
			for _, q := range attributionQueries {
				name := q.path + "?" + q.params.Encode()
				wc, want := getJSON(t, one.URL, q.path, q.params)
				gc, got := getJSON(t, dist.URL, q.path, q.params)
				if wc != gc {
					t.Errorf("%s: status %d, want %d (%v)", name, gc, wc, got["error"])
					continue
				}
				if wc != http.StatusOK {
					// Refused alike (a method invalid at this p and n).
					if want["error"] != got["error"] {
						t.Errorf("%s: error %v, want %v", name, got["error"], want["error"])
					}
					continue
				}
				compared++
				if bad := diffJSON("data", want["data"], got["data"]); len(bad) > 0 {
					t.Errorf("%s:\n%s", name, strings.Join(bad, "\n"))
				}
				// The same warnings, but for what the report reads from
				// this server alone (documented).
				var gw []any
				if ws, _ := got["warnings"].([]any); ws != nil {
					for _, w := range ws {
						if !strings.Contains(fmt.Sprint(w), "this server's records only") {
							gw = append(gw, w)
						}
					}
				}
				if w, g := fmt.Sprint(want["warnings"]), fmt.Sprint(gw); w != g && (w != "<nil>" || g != "[]") {
					t.Errorf("%s: warnings %s, want %s", name, g, w)
				}
				if a, of, partial, _ := nodesField(t, got); a != 3 || of != 3 || partial {
					t.Errorf("%s: nodes %v of %v (partial %v), want 3 of 3", name, a, of, partial)
				}
				if a, of, _, _ := nodesField(t, want); a != 1 || of != 1 {
					t.Errorf("%s: one server: nodes %v of %v, want 1 of 1", name, a, of)
				}
			}
			if compared < len(attributionQueries)*3/4 {
				t.Errorf("only %d of %d answers compared", compared, len(attributionQueries))
			}

			// Maritz–Jarrett reads more order statistics than
			// MaxCIValues here: answered by the order statistic, saying so.
			abq := url.Values{"start": {"1000"}, "end": {"4600"}, "quantile": {"0.5"}, "a": {`{model_name="m"}`}, "b": {`{model_name="n"}`}}
			_, want := getJSON(t, one.URL, "/api/v1/attribution/ab", abq)
			abq.Set("ci_method", "mj")
			code, got := getJSON(t, dist.URL, "/api/v1/attribution/ab", abq)
			if bad := diffJSON("data", want["data"], got["data"]); code != 200 || len(bad) > 0 {
				t.Errorf("ab mj: %d, differs from the order statistic:\n%s", code, strings.Join(bad, "\n"))
			}
			if w := fmt.Sprint(got["warnings"]); !strings.Contains(w, "answered with method order_statistic") {
				t.Errorf("ab mj: warnings %s, want the substitution named", w)
			}

			// local=true: the first server's records alone.
			code, env := getJSON(t, dist.URL, "/api/v1/attribution/breakdown", url.Values{"start": {"1000"}, "end": {"4600"}, "local": {"true"}})
			if a, of, _, _ := nodesField(t, env); code != 200 || a != 1 || of != 3 {
				t.Errorf("local=true: %d, nodes %v of %v, want 1 of 3", code, a, of)
			}
			if n := env["data"].(map[string]any)["requests"]; n != float64(len(parts[0])) {
				t.Errorf("local=true: %v requests, want the first server's %d", n, len(parts[0]))
			}
		})
	}
}

// TestAttributionPeerDown requires a clear 502 naming a peer that is down,
// and with partial_response=true the live nodes' answer with nodes and a
// warning naming the peer left out.
func TestAttributionPeerDown(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	recs := nodeRecords(rng, 2000)
	first, second := recs[:1000], recs[1000:]
	live := attributionServer(t, openRecords(t, second), nil)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	var peers []tailfn.Shard
	for _, u := range []string{live.URL, downURL} {
		p, err := tailfn.NewPeerShard(u, nil)
		if err != nil {
			t.Fatal(err)
		}
		peers = append(peers, p)
	}
	src := openRecords(t, first)
	dist := attributionServer(t, src, tailfn.NewCluster(src, peers, tailfn.DefaultClusterOptions(), tailfn.DefaultShardOptions()))
	both := attributionServer(t, openRecords(t, recs), nil)
	for _, q := range []struct {
		path   string
		params url.Values
	}{
		{"/api/v1/attribution/breakdown", url.Values{"start": {"1000"}, "end": {"4600"}, "view": {"heat"}}},
		{"/api/v1/attribution/report", url.Values{"window": {"1h"}}},
		{"/api/v1/attribution/ab", url.Values{"start": {"1000"}, "end": {"4600"}, "quantile": {"0.9"}, "a": {`{model_name="m"}`}, "b": {`{model_name="n"}`}}},
	} {
		code, env := getJSON(t, dist.URL, q.path, q.params)
		msg, _ := env["error"].(string)
		if code != http.StatusBadGateway || env["errorType"] != "unavailable" || !strings.Contains(msg, downURL) || !strings.Contains(msg, "partial_response=true") {
			t.Errorf("%s, peer down: %d %v %q, want 502 unavailable naming %s", q.path, code, env["errorType"], msg, downURL)
		}
		pq := url.Values{"partial_response": {"true"}}
		for k, v := range q.params {
			pq[k] = v
		}
		code, got := getJSON(t, dist.URL, q.path, pq)
		if code != http.StatusOK {
			t.Fatalf("%s, partial_response=true: %d %v", q.path, code, got["error"])
		}
		_, want := getJSON(t, both.URL, q.path, q.params)
		if bad := diffJSON("data", want["data"], got["data"]); len(bad) > 0 {
			t.Errorf("%s: partial answer differs from the live nodes':\n%s", q.path, strings.Join(bad, "\n"))
		}
		a, of, partial, left := nodesField(t, got)
		if a != 2 || of != 3 || !partial || len(left) != 1 || !strings.Contains(fmt.Sprint(left[0]), downURL) {
			t.Errorf("%s: nodes %v of %v partial %v left out %v, want 2 of 3 without %s", q.path, a, of, partial, left, downURL)
		}
		if w := fmt.Sprint(got["warnings"]); !strings.Contains(w, "partial response") || !strings.Contains(w, downURL) {
			t.Errorf("%s: warnings %s, want the partial response named", q.path, w)
		}
	}
	code, env := getJSON(t, dist.URL, "/api/v1/attribution/breakdown", url.Values{"start": {"1000"}, "end": {"4600"}, "partial_response": {"maybe"}})
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(env["error"]), "partial_response") {
		t.Errorf("partial_response=maybe: %d %v, want 400 naming the parameter", code, env["error"])
	}
}

// FuzzAttributionParamsNodes is FuzzAttributionParams on a server with a
// peer (over HTTP, holding model n's requests): every answer is a JSON
// envelope with 200, 400 or 422, never a panic or a 5xx.
func FuzzAttributionParamsNodes(f *testing.F) {
	for _, s := range []string{
		"selector=%7Bmodel_name%3D%22m%22%7D&end=300&quantile=0.8", "start=0&end=300&method=euler&view=heat",
		"method=shapley&baseline_offset=1m&end=300", "view=tokens&start=0&end=300&local=true",
		"a=%7Bmodel_name%3D%22m%22%7D&b=%7B%7D&start=0&end=300&ci_method=mj&quantile=0.5", "partial_response=1&start=0&end=300",
		"metric=ttft&start=0&end=300", "local=yes", "partial_response=",
	} {
		f.Add(s)
	}
	local := attributionRecords(f)
	var peerRecs []records.Record
	it := local.Select(f.Context(), 0, 1<<40)
	for it.Next() {
		if r := it.At(); r.Labels.Get("model_name") == "n" {
			r.RequestID = "peer-" + r.RequestID
			peerRecs = append(peerRecs, r)
		}
	}
	_ = it.Close()
	peer := attributionServer(f, openRecords(f, peerRecs), nil)
	p, err := tailfn.NewPeerShard(peer.URL, nil)
	if err != nil {
		f.Fatal(err)
	}
	srv := attributionServer(f, local, tailfn.NewCluster(local, []tailfn.Shard{p}, tailfn.DefaultClusterOptions(), tailfn.DefaultShardOptions()))
	f.Fuzz(func(t *testing.T, q string) {
		vals, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		for _, path := range []string{"/api/v1/attribution/report", "/api/v1/attribution/breakdown", "/api/v1/attribution/ab"} {
			resp, err := http.Get(srv.URL + path + "?" + vals.Encode())
			if err != nil {
				t.Fatal(err)
			}
			var env map[string]any
			derr := json.NewDecoder(resp.Body).Decode(&env)
			resp.Body.Close()
			if resp.StatusCode != 200 && resp.StatusCode != 400 && resp.StatusCode != 422 {
				t.Fatalf("%s?%s: status %d: %v", path, q, resp.StatusCode, env)
			}
			if derr != nil {
				t.Fatalf("%s?%s: body is not JSON: %v", path, q, derr)
			}
		}
	})
}
