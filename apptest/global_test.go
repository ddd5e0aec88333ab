package apptest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	thanospkg "github.com/tailroot/tailroot/apptest/internal/thanos"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
)

// proc is a peer process (Thanos) killed when the test ends.
type proc struct {
	cmd  *exec.Cmd
	logs *syncBuffer
}

func startProc(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), logs: &syncBuffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(p.kill)
	return p
}

func (p *proc) kill() {
	if p.cmd.Process != nil && p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// globalData is what the two nodes hold: node "a" and node "b" each have
// two instances of a latency gauge, a run-queue gauge, a GPU gauge, a
// native histogram and tail accumulators (stage sums and request counts
// per end-to-end bucket). byNode adds the node label to every series, for
// the server that holds the union as a single node.
type globalData struct {
	t0    time.Time
	steps int
	nodes map[string][]prompb.TimeSeries
}

const globalStep = 15 * time.Second

func newGlobalData(t0 time.Time, steps int) *globalData {
	d := &globalData{t0: t0, steps: steps, nodes: map[string][]prompb.TimeSeries{}}
	rng := rand.New(rand.NewPCG(7, 10))
	ts := func(i int) int64 { return t0.Add(time.Duration(i) * globalStep).UnixMilli() }
	series := func(name string, kv ...string) prompb.TimeSeries {
		s := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: name}}}
		for i := 0; i+1 < len(kv); i += 2 {
			s.Labels = append(s.Labels, prompb.Label{Name: kv[i], Value: kv[i+1]})
		}
		return s
	}
	// The outcome follows node b's instance b-1 run queue two steps late,
	// and it (and that run queue) steps up at 2/3 of the window: granger
	// and root_cause both have something to find.
	change := steps * 2 / 3
	runq := map[string][]float64{}
	for _, node := range []string{"a", "b"} {
		for k := 1; k <= 2; k++ {
			inst := fmt.Sprintf("%s-%d", node, k)
			r := make([]float64, steps)
			for i := range r {
				r[i] = 0.01 + 0.005*rng.Float64()
				if inst == "b-1" && i >= change {
					r[i] += 0.03
				}
			}
			runq[inst] = r
		}
	}
	for _, node := range []string{"a", "b"} {
		var out []prompb.TimeSeries
		for k := 1; k <= 2; k++ {
			inst := fmt.Sprintf("%s-%d", node, k)
			lat := series("lat_seconds", "instance", inst)
			rq := series("runq_seconds", "instance", inst)
			gpu := series("gpu_util", "instance", inst)
			hist := series("ttft_seconds", "instance", inst)
			for i := 0; i < steps; i++ {
				v := 0.2 + 0.05*rng.NormFloat64()
				if i >= 2 {
					v += 4 * runq["b-1"][i-2]
				}
				lat.Samples = append(lat.Samples, prompb.Sample{Timestamp: ts(i), Value: v})
				rq.Samples = append(rq.Samples, prompb.Sample{Timestamp: ts(i), Value: runq[inst][i]})
				gpu.Samples = append(gpu.Samples, prompb.Sample{Timestamp: ts(i), Value: 0.5 + 0.4*rng.Float64()})
				// Bucket deltas 2n, n, k, -k are counts 2n, 3n, 3n+k, 3n
				// (n = i+1): every bucket grows, as a counter must.
				n := uint64(i + 1)
				h := &histogram.Histogram{
					Schema: 0, ZeroThreshold: 0.001, ZeroCount: n,
					Count:           n + 2*n + 3*n + 3*n + uint64(k) + 3*n,
					Sum:             3.5 * float64(n) * float64(k),
					PositiveSpans:   []histogram.Span{{Offset: -3, Length: 4}},
					PositiveBuckets: []int64{int64(2 * n), int64(n), int64(k), int64(-k)},
				}
				hist.Histograms = append(hist.Histograms, prompb.FromIntHistogram(ts(i), h))
			}
			out = append(out, lat, rq, gpu, hist)
		}
		// Tail accumulators: counters per (stage, e2e_bucket).
		for _, b := range []string{"0.5", "1", "2", "4", "+Inf"} {
			cnt := series("acc_requests_total", "model_name", "m", "e2e_bucket", b)
			var c float64
			stageSeries := map[string]*prompb.TimeSeries{}
			sums := map[string]float64{}
			for _, st := range []string{"queue", "prefill", "decode"} {
				s := series("acc_stage_seconds_sum", "model_name", "m", "stage", st, "e2e_bucket", b)
				stageSeries[st] = &s
			}
			for i := 0; i < steps; i++ {
				n := float64(rng.IntN(5))
				c += n
				cnt.Samples = append(cnt.Samples, prompb.Sample{Timestamp: ts(i), Value: c})
				for _, st := range []string{"queue", "prefill", "decode"} {
					sums[st] += n * rng.Float64()
					stageSeries[st].Samples = append(stageSeries[st].Samples, prompb.Sample{Timestamp: ts(i), Value: sums[st]})
				}
			}
			out = append(out, cnt, *stageSeries["queue"], *stageSeries["prefill"], *stageSeries["decode"])
		}
		d.nodes[node] = out
	}
	return d
}

// byNode returns node's series with cluster="<node>" added, as a server
// holding everything sees them.
func (d *globalData) byNode(node string) []prompb.TimeSeries {
	var out []prompb.TimeSeries
	for _, s := range d.nodes[node] {
		s.Labels = append(slices.Clone(s.Labels), prompb.Label{Name: "cluster", Value: node})
		out = append(out, s)
	}
	return out
}

func (d *globalData) end() time.Time { return d.t0.Add(time.Duration(d.steps-1) * globalStep) }

// globalQueries are compared between the global view and the single node
// holding the union: plain PromQL (instant and range) and tailroot's
// functions.
func globalQueries() (promql, functions []string) {
	promql = []string{
		`lat_seconds`,
		`sum(lat_seconds)`,
		`sum by (cluster) (lat_seconds)`,
		`avg by (cluster) (runq_seconds)`,
		`max(gpu_util)`,
		`count by (cluster) (gpu_util)`,
		`quantile(0.9, lat_seconds)`,
		`topk(2, runq_seconds)`,
		`rate(acc_requests_total[5m])`,
		`sum by (e2e_bucket) (increase(acc_requests_total[10m]))`,
		`sum by (cluster, stage) (rate(acc_stage_seconds_sum[5m]))`,
		`sum(rate(acc_stage_seconds_sum[5m])) / sum(rate(acc_requests_total[5m]))`,
		`histogram_quantile(0.99, sum(rate(ttft_seconds[5m])))`,
		`histogram_quantile(0.5, sum by (cluster) (rate(ttft_seconds[5m])))`,
		`histogram_count(sum(rate(ttft_seconds[5m])))`,
		`histogram_sum(sum by (cluster) (increase(ttft_seconds[10m])))`,
		`histogram_avg(sum(rate(ttft_seconds[5m])))`,
		`histogram_fraction(0, 1, sum(rate(ttft_seconds[5m])))`,
		`avg_over_time(lat_seconds[10m])`,
		`max_over_time(runq_seconds{cluster="b"}[10m])`,
		`lat_seconds{cluster="a", instance="a-2"}`,
		`sum by (cluster) (lat_seconds) / ignoring(cluster) group_left sum(lat_seconds)`,
		`count(count by (cluster) (lat_seconds))`,
		`deriv(acc_requests_total{e2e_bucket="1"}[10m])`,
		`stddev_over_time(gpu_util{cluster="a"}[15m])`,
	}
	functions = []string{
		`tail_mean_from_accumulators(0.99, sum by (model_name, stage, e2e_bucket) (increase(acc_stage_seconds_sum[30m])), sum by (model_name, e2e_bucket) (increase(acc_requests_total[30m])), "all")`,
		`tail_mean_from_accumulators(0.9, sum by (cluster, model_name, stage, e2e_bucket) (increase(acc_stage_seconds_sum[30m])), sum by (cluster, model_name, e2e_bucket) (increase(acc_requests_total[30m])))`,
		`granger(avg(lat_seconds)[30m:15s], avg by (cluster, instance) (runq_seconds)[30m:15s], 3)`,
		`root_cause(avg(lat_seconds)[40m:15s], avg by (cluster, instance) (runq_seconds)[40m:15s], avg by (cluster, instance) (gpu_util)[40m:15s])`,
	}
	return promql, functions
}

type promResult struct {
	body     string
	warnings []string
	infos    []string
	// values maps each series' labels to its values (floats, or a
	// histogram's JSON).
	values map[string][]string
}

func queryResult(t *testing.T, a *App, path string, params url.Values) promResult {
	t.Helper()
	code, body := a.Get(t, path, params)
	var r Response
	if err := json.Unmarshal(body, &r); err != nil || code != 200 || r.Status != "success" {
		t.Fatalf("%s %v: %d %s", path, params, code, body)
	}
	var d struct {
		Result []struct {
			Metric     map[string]string `json:"metric"`
			Value      []any             `json:"value"`
			Values     [][]any           `json:"values"`
			Histogram  []any             `json:"histogram"`
			Histograms [][]any           `json:"histograms"`
		} `json:"result"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatalf("%s: decode %s: %v", path, r.Data, err)
	}
	out := promResult{body: string(body), warnings: r.Warnings, infos: r.Infos, values: map[string][]string{}}
	for _, s := range d.Result {
		keys := make([]string, 0, len(s.Metric))
		for k, v := range s.Metric {
			keys = append(keys, k+"="+strconv.Quote(v))
		}
		slices.Sort(keys)
		k := "{" + strings.Join(keys, ",") + "}"
		var vals []string
		add := func(p []any) {
			b, _ := json.Marshal(p)
			vals = append(vals, string(b))
		}
		if s.Value != nil {
			add(s.Value)
		}
		if s.Histogram != nil {
			add(s.Histogram)
		}
		for _, p := range s.Values {
			add(p)
		}
		for _, p := range s.Histograms {
			add(p)
		}
		out.values[k] = vals
	}
	return out
}

// sameResult compares two results series by series, numbers within a
// relative 1e-9 (sums in another order differ in the last bits).
func sameResult(got, want promResult) error {
	if len(want.values) == 0 {
		return fmt.Errorf("the single-node answer is empty: %s", want.body)
	}
	if len(got.values) != len(want.values) {
		return fmt.Errorf("%d series, want %d\n got: %s\nwant: %s", len(got.values), len(want.values), got.body, want.body)
	}
	for k, wv := range want.values {
		gv, ok := got.values[k]
		if !ok {
			return fmt.Errorf("series %s missing\n got: %s", k, got.body)
		}
		if len(gv) != len(wv) {
			return fmt.Errorf("series %s: %d points, want %d", k, len(gv), len(wv))
		}
		for i := range wv {
			if err := sameJSONNumbers(gv[i], wv[i]); err != nil {
				return fmt.Errorf("series %s point %d: %v", k, i, err)
			}
		}
	}
	return nil
}

// sameJSONNumbers compares two JSON values whose leaves are numbers or
// numeric strings with a relative tolerance of 1e-9.
func sameJSONNumbers(a, b string) error {
	var x, y any
	_ = json.Unmarshal([]byte(a), &x)
	_ = json.Unmarshal([]byte(b), &y)
	if !closeJSON(x, y) {
		return fmt.Errorf("%s, want %s", a, b)
	}
	return nil
}

func closeJSON(x, y any) bool {
	switch xv := x.(type) {
	case []any:
		yv, ok := y.([]any)
		if !ok || len(xv) != len(yv) {
			return false
		}
		for i := range xv {
			if !closeJSON(xv[i], yv[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		yv, ok := y.(map[string]any)
		if !ok || len(xv) != len(yv) {
			return false
		}
		for k := range xv {
			if !closeJSON(xv[k], yv[k]) {
				return false
			}
		}
		return true
	case string:
		ys, ok := y.(string)
		if !ok {
			return false
		}
		fx, ex := strconv.ParseFloat(xv, 64)
		fy, ey := strconv.ParseFloat(ys, 64)
		if ex != nil || ey != nil {
			return xv == ys
		}
		return closeFloat(fx, fy)
	case float64:
		yf, ok := y.(float64)
		return ok && closeFloat(xv, yf)
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

func closeFloat(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	if a == b {
		return true
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

// compareGlobal runs every query on the global node and on the union node
// and requires equal answers; each answer of the global node must name the
// stores it read in its infos.
func compareGlobal(t *testing.T, global, union *App, d *globalData, stores []string) {
	t.Helper()
	promql, functions := globalQueries()
	at := d.end()
	n := 0
	for _, q := range append(slices.Clone(promql), functions...) {
		p := url.Values{"query": {q}, "time": {seconds(at.UnixMilli())}}
		got, want := queryResult(t, global, "/api/v1/query", p), queryResult(t, union, "/api/v1/query", p)
		if err := sameResult(got, want); err != nil {
			t.Errorf("instant %s: %v", q, err)
		}
		if slices.Contains(functions, q) {
			t.Logf("%.40s…: %d series", q, len(want.values))
		}
		for _, s := range stores {
			if !slices.ContainsFunc(got.infos, func(i string) bool { return strings.Contains(i, "store "+s+" answered") }) {
				t.Errorf("instant %s: infos %q do not name store %s", q, got.infos, s)
			}
		}
		n++
	}
	for _, q := range promql[:12] {
		p := url.Values{"query": {q}, "start": {seconds(at.Add(-20 * time.Minute).UnixMilli())}, "end": {seconds(at.UnixMilli())}, "step": {"60"}}
		got, want := queryResult(t, global, "/api/v1/query_range", p), queryResult(t, union, "/api/v1/query_range", p)
		if err := sameResult(got, want); err != nil {
			t.Errorf("range %s: %v", q, err)
		}
		n++
	}
	// A tailroot function as a range query: one evaluation per step.
	q := functions[0]
	p := url.Values{"query": {q}, "start": {seconds(at.Add(-4 * time.Minute).UnixMilli())}, "end": {seconds(at.UnixMilli())}, "step": {"60"}}
	if err := sameResult(queryResult(t, global, "/api/v1/query_range", p), queryResult(t, union, "/api/v1/query_range", p)); err != nil {
		t.Errorf("range %s: %v", q, err)
	}
	t.Logf("%d queries equal between the global view and the single node holding the union", n+1)
}

func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGlobalView: two tailroot nodes with external labels cluster="a" and
// cluster="b" each hold half of the data; a third holds the union (with the
// node label on every series). Node a reads node b through remote read
// (remote_read in its config file); node b reads a real Thanos Query over
// a Thanos sidecar per node through --store.endpoint — so node b also sees
// its own data twice, which must merge into one copy. PromQL and
// tailroot's functions give the union's answers on both, and a store that
// is down gives a partial answer with a warning naming it.
func TestGlobalView(t *testing.T) {
	thanos := thanospkg.Binary(t)
	t0 := time.Now().Add(-65 * time.Minute).Truncate(globalStep)
	d := newGlobalData(t0, 240)

	union := Start(t, t.TempDir())
	writeSeries(t, union, append(d.byNode("a"), d.byNode("b")...))

	queryGRPC := FreeAddr(t)
	dirB := t.TempDir()
	cfgB := writeConfig(t, t.TempDir(), "global:\n  external_labels:\n    cluster: b\n")
	nodeB := Start(t, dirB, "--config.file", cfgB, "--store.endpoint", queryGRPC)
	writeSeries(t, nodeB, d.nodes["b"])

	dirA := t.TempDir()
	cfgA := writeConfig(t, t.TempDir(), fmt.Sprintf(`global:
  external_labels:
    cluster: a
remote_read:
  - name: node-b
    url: %s/api/v1/read
    read_recent: true
    filter_external_labels: false
`, nodeB.URL))
	nodeA := Start(t, dirA, "--config.file", cfgA)
	writeSeries(t, nodeA, d.nodes["a"])

	t.Run("remote read", func(t *testing.T) {
		compareGlobal(t, nodeA, union, d, []string{"node-b"})
	})

	t.Run("replicas", func(t *testing.T) {
		// Node b's data in two replicas (external labels cluster=b and
		// replica=r1|r2), read by remote read from a node holding node a's
		// data with --query.replica-label=replica: the replicas count once.
		var rr strings.Builder
		for _, r := range []string{"r1", "r2"} {
			cfg := writeConfig(t, t.TempDir(), "global:\n  external_labels:\n    cluster: b\n    replica: "+r+"\n")
			rep := Start(t, t.TempDir(), "--config.file", cfg)
			writeSeries(t, rep, d.nodes["b"])
			fmt.Fprintf(&rr, "  - {name: %s, url: %s/api/v1/read, read_recent: true, filter_external_labels: false}\n", r, rep.URL)
		}
		cfg := writeConfig(t, t.TempDir(), "global:\n  external_labels:\n    cluster: a\nremote_read:\n"+rr.String())
		g := Start(t, t.TempDir(), "--config.file", cfg, "--query.replica-label", "replica")
		writeSeries(t, g, d.nodes["a"])
		compareGlobal(t, g, union, d, []string{"r1", "r2"})
	})

	var sidecars []string
	for _, n := range []struct {
		app *App
		dir string
	}{{nodeA, dirA}, {nodeB, dirB}} {
		grpcAddr := FreeAddr(t)
		startProc(t, thanos, "sidecar", "--prometheus.url", n.app.URL, "--tsdb.path", n.dir,
			"--grpc-address", grpcAddr, "--http-address", FreeAddr(t))
		sidecars = append(sidecars, grpcAddr)
	}
	query := startProc(t, thanos, "query", "--grpc-address", queryGRPC, "--http-address", FreeAddr(t),
		"--endpoint", sidecars[0], "--endpoint", sidecars[1])
	// Thanos Query finds its endpoints within seconds; wait until node b
	// sees both nodes' series through it.
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := queryResult(t, nodeB, "/api/v1/query", url.Values{"query": {`count(count by (cluster) (lat_seconds))`}, "time": {seconds(d.end().UnixMilli())}})
		if v := r.values["{}"]; len(v) == 1 && strings.Contains(v[0], `"2"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node b does not see both nodes through Thanos Query: %s\nquery logs:\n%s", r.body, query.logs.String())
		}
		time.Sleep(500 * time.Millisecond)
	}

	t.Run("thanos storeapi", func(t *testing.T) {
		compareGlobal(t, nodeB, union, d, []string{queryGRPC})
		// Series and label lookups stay local: the Thanos sidecar serves its
		// StoreAPI from them, and node b's sidecar must not re-export what
		// node b reads from Thanos Query (which would also loop).
		_, body := nodeB.Get(t, "/api/v1/label/instance/values", nil)
		if !strings.Contains(string(body), `"data":["b-1","b-2"]`) {
			t.Errorf("instance values, want node b's own: %s", body)
		}
		_, body = nodeB.Get(t, "/api/v1/series", url.Values{"match[]": {"lat_seconds"}})
		var r Response
		var series []map[string]string
		if err := json.Unmarshal(body, &r); err != nil || json.Unmarshal(r.Data, &series) != nil || len(series) != 2 || series[0]["cluster"] != "" {
			t.Errorf("series of lat_seconds, want node b's own 2 without external labels: %s", body)
		}
	})

	t.Run("store down", func(t *testing.T) {
		query.kill()
		at := seconds(d.end().UnixMilli())
		q := `count by (cluster) (lat_seconds)`
		r := queryResult(t, nodeB, "/api/v1/query", url.Values{"query": {q}, "time": {at}})
		if !slices.ContainsFunc(r.warnings, func(w string) bool { return strings.Contains(w, "store "+queryGRPC+" failed") }) {
			t.Errorf("no warning names the failed store %s: %s", queryGRPC, r.body)
		}
		if len(r.values) != 1 || r.values[`{cluster="b"}`] == nil {
			t.Errorf("partial answer should hold node b's local series only: %s", r.body)
		}
		// The same query without partial response is an error naming it.
		code, body := nodeB.Get(t, "/api/v1/query", url.Values{"query": {q}, "time": {at}, "partial_response": {"false"}})
		if code != 422 || !strings.Contains(string(body), `"errorType":"execution"`) || !strings.Contains(string(body), queryGRPC) {
			t.Errorf("partial_response=false with a store down: %d %s", code, body)
		}
		// A tailroot function reports the failure as well.
		fn := `granger(avg(lat_seconds)[30m:15s], avg by (cluster, instance) (runq_seconds)[30m:15s], 3)`
		r = queryResult(t, nodeB, "/api/v1/query", url.Values{"query": {fn}, "time": {at}})
		if !slices.ContainsFunc(r.warnings, func(w string) bool { return strings.Contains(w, "store "+queryGRPC+" failed") }) {
			t.Errorf("granger with a store down: no warning names it: %s", r.body)
		}
		// The failure is counted per store in tailroot's own metrics.
		_, metrics := nodeB.Get(t, "/metrics", nil)
		if !strings.Contains(string(metrics), `tailroot_remote_store_requests_total{call="select",outcome="failed",store="`+queryGRPC+`"}`) {
			t.Errorf("no failed-request metric for store %s", queryGRPC)
		}
		// Remote read of a node that is down.
		nodeB.Kill(t)
		r = queryResult(t, nodeA, "/api/v1/query", url.Values{"query": {q}, "time": {at}})
		if !slices.ContainsFunc(r.warnings, func(w string) bool { return strings.Contains(w, "store node-b failed") }) {
			t.Errorf("no warning names the failed remote_read node-b: %s", r.body)
		}
		if len(r.values) != 1 || r.values[`{cluster="a"}`] == nil {
			t.Errorf("partial answer should hold node a's local series only: %s", r.body)
		}
	})
}
