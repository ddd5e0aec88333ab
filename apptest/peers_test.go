package apptest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/tailroot/tailroot/sim/requests"
)

// pushRequests posts reqs as NDJSON to a, in batches.
func pushRequests(t *testing.T, a *App, reqs []requests.Request) {
	t.Helper()
	for lo := 0; lo < len(reqs); lo += 1000 {
		var body []byte
		for i := lo; i < min(lo+1000, len(reqs)); i++ {
			body = reqs[i].AppendNDJSON(body, requests.LineOptions{})
		}
		if code, b := postBody(t, a, "/api/v1/requests", "application/x-ndjson", body, nil); code != http.StatusOK {
			t.Fatalf("push to %s: %d %s", a.URL, code, b)
		}
	}
}

// queryRows runs an instant query and returns its rows by label set,
// the full envelope, and the status code.
func queryRows(t *testing.T, a *App, q string, ts time.Time, extra url.Values) (map[string]float64, Response, int) {
	t.Helper()
	params := url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(ts.UnixMilli())/1000, 'f', 3, 64)}}
	for k, v := range extra {
		params[k] = v
	}
	code, body := a.Get(t, "/api/v1/query", params)
	var r Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("query %q: decode %s: %v", q, body, err)
	}
	rows := map[string]float64{}
	if r.Status != "success" {
		return rows, r, code
	}
	var d struct {
		Result []Sample `json:"result"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	for _, s := range d.Result {
		keys := make([]string, 0, len(s.Metric))
		for k, v := range s.Metric {
			keys = append(keys, k+"="+v)
		}
		slices.Sort(keys)
		rows[strings.Join(keys, ",")] = floatOf(t, s)
	}
	return rows, r, code
}

// TestPeersExactTails starts three tailroot servers holding a split of
// simulated vLLM traffic (at random, and skewed: every request slower
// than the 95th percentile on one server, which sits behind basic auth)
// and a fourth holding all of it. The first names the other two as
// peers; every distributed function must return the fourth's rows to
// 1e-9. Then one peer is killed: the query fails naming it, and with
// partial_response=true it answers with a warning naming it.
func TestPeersExactTails(t *testing.T) {
	start := time.Now().Add(-3 * time.Hour).Truncate(time.Second)
	reqs, err := requests.Simulate(requests.Options{Trace: "azure-code", Limit: 4000, Speedup: 2, Seed: 11, Start: start, Instances: 4})
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	e2e := make([]float64, len(reqs))
	for i, r := range reqs {
		last = max(last, r.Arrival)
		e2e[i] = float64(r.Finished - r.Arrival)
	}
	sorted := slices.Clone(e2e)
	slices.Sort(sorted)
	p95 := sorted[len(sorted)*95/100]
	ts := time.Unix(0, last).Add(time.Second).Truncate(time.Millisecond).Add(time.Millisecond)
	span := ts.Sub(start).Round(time.Second) + time.Minute
	half := (span / 2).Round(time.Second)
	w := fmt.Sprintf("[%ds]", int(span.Seconds()))
	now, base := fmt.Sprintf("[%ds]", int(half.Seconds())), fmt.Sprintf("[%ds] offset %ds", int(half.Seconds()), int(half.Seconds()))

	queries := []string{`tail_heat(requests` + w + `, "all")`, `tail_heat(requests` + w + `, "all", "0.5,0.9,0.95,0.99")`}
	for _, p := range []string{"0.5", "0.9", "0.99"} {
		for _, f := range []string{"tail_mean", "tail_excess", "tail_euler"} {
			queries = append(queries, fmt.Sprintf(`%s(%s, requests%s, "all")`, f, p, w))
		}
		queries = append(queries, fmt.Sprintf(`tail_shapley(%s, requests%s, requests%s, "all")`, p, now, base))
		// The default order-statistic interval, and its difference.
		queries = append(queries, fmt.Sprintf(`quantile_ci(%s, 0.95, requests%s)`, p, w),
			fmt.Sprintf(`quantile_diff_ci(%s, 0.95, requests{instance="vllm-1"}%s, requests{instance!="vllm-1"}%s)`, p, w, w))
	}
	// The other methods where 4000 requests are enough for them (the
	// bootstrap at P90 reads ~150 order statistics, under the cap of 256
	// past which the cluster answers by the order statistic instead; the
	// delta method is accepted at P50 from n = 2000).
	queries = append(queries, `tail_mean(0.99, requests{instance="vllm-1"}`+w+`, "all")`,
		`quantile_ci(0.9, 0.95, requests`+w+`, "bootstrap")`,
		`quantile_ci(0.9, 0.95, requests`+w+`, "bootstrap", "ttft")`,
		`quantile_ci(0.5, 0.95, requests`+w+`, "delta")`)
	// Methods below nominal coverage at this p and n are refused by both.
	refused := []string{`quantile_ci(0.99, 0.95, requests` + w + `, "delta")`, `quantile_ci(0.99, 0.95, requests` + w + `, "maritz_jarrett")`}

	hash, err := bcrypt.GenerateFromPassword([]byte("peer-pass"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	webCfg := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(webCfg, []byte("basic_auth_users:\n  tailroot: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	httpCfg := filepath.Join(dir, "peer-http.yml")
	if err := os.WriteFile(httpCfg, []byte("basic_auth:\n  username: tailroot\n  password: peer-pass\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	all := Start(t, filepath.Join(dir, "all"))
	pushRequests(t, all, reqs)

	for _, skewed := range []bool{false, true} {
		t.Run(map[bool]string{false: "random", true: "skewed"}[skewed], func(t *testing.T) {
			sub := t.TempDir()
			b := Start(t, filepath.Join(sub, "b"))
			c := StartAuth(t, filepath.Join(sub, "c"), "tailroot", "peer-pass", "--web.config.file", webCfg)
			a := Start(t, filepath.Join(sub, "a"), "--records.peer="+b.URL+","+c.URL, "--records.peer.http-config="+httpCfg)
			var parts [3][]requests.Request
			for i, r := range reqs {
				k := i % 3
				if skewed {
					k = i % 2
					if e2e[i] > p95 {
						k = 2
					}
				}
				parts[k] = append(parts[k], r)
			}
			for i, app := range []*App{a, b, c} {
				pushRequests(t, app, parts[i])
			}
			for _, q := range queries {
				want, wr, _ := queryRows(t, all, q, ts, nil)
				got, gr, code := queryRows(t, a, q, ts, nil)
				if wr.Status != "success" || gr.Status != "success" {
					t.Fatalf("%s: one server %s %s, cluster %d %s %s", q, wr.Status, wr.Error, code, gr.Status, gr.Error)
				}
				if len(want) == 0 {
					t.Errorf("%s: no rows on the single server", q)
				}
				var bad []string
				for k, wv := range want {
					gv, ok := got[k]
					if !ok || math.IsNaN(wv) != math.IsNaN(gv) || !math.IsNaN(wv) && math.Abs(gv-wv) > 1e-9*math.Max(1, math.Abs(wv)) {
						bad = append(bad, fmt.Sprintf("%s: %v, want %v", k, gv, wv))
					}
				}
				if len(got) != len(want) {
					bad = append(bad, fmt.Sprintf("%d rows, want %d", len(got), len(want)))
				}
				if len(bad) > 0 {
					t.Errorf("%s:\n%s", q, strings.Join(bad, "\n"))
				}
			}
			for _, q := range refused {
				_, wr, wcode := queryRows(t, all, q, ts, nil)
				_, gr, gcode := queryRows(t, a, q, ts, nil)
				if wr.Status != "error" || gr.Status != "error" || wr.Error != gr.Error || wcode != gcode || !strings.Contains(gr.Error, "is not valid at p=0.99 with n=") {
					t.Errorf("%s: one server %d %q, cluster %d %q; want the same refusal naming p and n", q, wcode, wr.Error, gcode, gr.Error)
				}
			}
			compareAttribution(t, all, a, ts, span, half)
			if skewed {
				return
			}

			// One peer down.
			c.Kill(t)
			q := `tail_mean(0.99, requests` + w + `, "requests")`
			_, r, code := queryRows(t, a, q, ts, nil)
			if code != http.StatusInternalServerError || r.Status != "error" || !strings.Contains(r.Error, c.URL) || !strings.Contains(r.Error, "partial_response=true") {
				t.Fatalf("peer down: %d %+v, want 500 naming %s", code, r, c.URL)
			}
			rows, r, code := queryRows(t, a, q, ts, url.Values{"partial_response": {"true"}})
			if code != http.StatusOK {
				t.Fatalf("partial: %d %+v", code, r)
			}
			if !slices.ContainsFunc(r.Warnings, func(s string) bool { return strings.Contains(s, c.URL) && strings.Contains(s, "2 of 3 nodes") }) {
				t.Errorf("partial answer without a warning naming %s: %q", c.URL, r.Warnings)
			}
			for _, v := range rows {
				if want := float64(len(parts[0]) + len(parts[1])); v != want {
					t.Errorf("partial answer counts %v requests, want %v (the live nodes')", v, want)
				}
			}
			if _, r, code := queryRows(t, a, q, ts, url.Values{"partial_response": {"maybe"}}); code != http.StatusBadRequest {
				t.Errorf("partial_response=maybe: %d %+v, want 400", code, r)
			}

			// The attribution endpoints fail alike, and answer alike.
			bq := url.Values{"start": {strconv.FormatInt(ts.Add(-span).Unix(), 10)}, "end": {strconv.FormatInt(ts.Unix(), 10)}}
			code, body := a.Get(t, "/api/v1/attribution/breakdown", bq)
			if code != http.StatusBadGateway || !strings.Contains(string(body), c.URL) || !strings.Contains(string(body), "partial_response=true") {
				t.Errorf("breakdown, peer down: %d %s, want 502 naming %s", code, body, c.URL)
			}
			bq.Set("partial_response", "true")
			code, body = a.Get(t, "/api/v1/attribution/breakdown", bq)
			var br struct {
				Data struct {
					Requests int `json:"requests"`
					Nodes    struct {
						Answered, Of int
						Partial      bool
					} `json:"nodes"`
				} `json:"data"`
				Warnings []string `json:"warnings"`
			}
			if err := json.Unmarshal(body, &br); err != nil || code != http.StatusOK {
				t.Fatalf("breakdown, partial: %d %s", code, body)
			}
			if n := br.Data.Nodes; n.Answered != 2 || n.Of != 3 || !n.Partial || br.Data.Requests != len(parts[0])+len(parts[1]) {
				t.Errorf("breakdown, partial: nodes %+v, %d requests; want 2 of 3 and the live nodes' %d", n, br.Data.Requests, len(parts[0])+len(parts[1]))
			}
			if !slices.ContainsFunc(br.Warnings, func(s string) bool { return strings.Contains(s, c.URL) }) {
				t.Errorf("breakdown, partial: warnings %q, want %s named", br.Warnings, c.URL)
			}
		})
	}
}

// compareAttribution requires /api/v1/attribution/breakdown (every
// method, the heat view), /ab and the report of `tailroot attribute
// --server` on the querying server a to equal those of the server holding
// every record, to 1e-9, and to cover 3 of 3 nodes.
func compareAttribution(t *testing.T, all, a *App, ts time.Time, span, half time.Duration) {
	t.Helper()
	end := strconv.FormatInt(ts.Unix(), 10)
	win := url.Values{"start": {strconv.FormatInt(ts.Add(-span).Unix(), 10)}, "end": {end}}
	with := func(kv ...string) url.Values {
		v := url.Values{}
		for k, x := range win {
			v[k] = x
		}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	type call struct {
		path   string
		params url.Values
	}
	var calls []call
	for _, p := range []string{"0.5", "0.99"} {
		for _, m := range []string{"auto", "euler", "excess"} {
			calls = append(calls, call{"/api/v1/attribution/breakdown", with("quantile", p, "method", m)})
		}
		calls = append(calls,
			call{"/api/v1/attribution/breakdown", url.Values{"start": {strconv.FormatInt(ts.Add(-half).Unix(), 10)}, "end": {end}, "quantile": {p}, "method": {"shapley"}, "baseline_offset": {fmt.Sprintf("%ds", int(half.Seconds()))}}},
			call{"/api/v1/attribution/ab", with("quantile", p, "a", `{instance="vllm-1"}`, "b", `{instance!="vllm-1"}`)})
	}
	calls = append(calls, call{"/api/v1/attribution/breakdown", with("view", "heat", "quantile", "0.9")},
		// Time to first token: every node decomposes its own records'.
		call{"/api/v1/attribution/breakdown", with("metric", "ttft", "quantile", "0.99")},
		call{"/api/v1/attribution/breakdown", with("metric", "ttft", "quantile", "0.9", "method", "euler")},
		call{"/api/v1/attribution/ab", with("metric", "ttft", "quantile", "0.9", "a", `{instance="vllm-1"}`, "b", `{instance!="vllm-1"}`)})
	decode := func(app *App, c call) map[string]any {
		t.Helper()
		code, body := app.Get(t, c.path, c.params)
		var env map[string]any
		if err := json.Unmarshal(body, &env); err != nil || code != http.StatusOK {
			t.Fatalf("%s %v on %s: %d %s", c.path, c.params, app.URL, code, body)
		}
		return env["data"].(map[string]any)
	}
	for _, c := range calls {
		want, got := decode(all, c), decode(a, c)
		if bad := jsonDiff("data", want, got); len(bad) > 0 {
			t.Errorf("%s %v:\n%s", c.path, c.params, strings.Join(bad, "\n"))
		}
		if n, _ := got["nodes"].(map[string]any); n["answered"] != 3.0 || n["of"] != 3.0 {
			t.Errorf("%s %v: nodes %v, want 3 of 3", c.path, c.params, got["nodes"])
		}
	}
	// tailroot attribute against the querying server.
	report := func(app *App) map[string]any {
		t.Helper()
		out, err := exec.Command(Binary(t), "attribute", "--server", app.URL, "--json", "--window", fmt.Sprintf("%ds", int(span.Seconds())), "--end", end, "--method", "tail-mean").CombinedOutput()
		if err != nil {
			t.Fatalf("tailroot attribute --server %s: %v\n%s", app.URL, err, out)
		}
		var rep map[string]any
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("tailroot attribute: %v\n%s", err, out)
		}
		return rep
	}
	want, got := report(all), report(a)
	if bad := jsonDiff("report", want, got); len(bad) > 0 {
		t.Errorf("tailroot attribute --server: reports differ:\n%s", strings.Join(bad, "\n"))
	}
	if n, _ := got["nodes"].(map[string]any); n["answered"] != 3.0 || n["of"] != 3.0 {
		t.Errorf("tailroot attribute: nodes %v, want 3 of 3", got["nodes"])
	}
}

// jsonDiff lists where got differs from want: numbers to 1e-9 relative,
// everything else exactly, leaving out what may differ between one
// server and several (nodes, warnings, when and where generated, the label
// summaries read locally).
func jsonDiff(path string, want, got any) []string {
	skip := []string{"nodes", "warnings", "generated_at", "reproducibility", "prompt_hash"}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v, want an object", path, got)}
		}
		var bad []string
		for k, wv := range w {
			if !slices.Contains(skip, k) {
				bad = append(bad, jsonDiff(path+"."+k, wv, g[k])...)
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
			bad = append(bad, jsonDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return bad
	case float64:
		if g, ok := got.(float64); !ok || math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
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
