package thanos

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tailroot/tailroot/apptest"
	th "github.com/tailroot/tailroot/apptest/internal/thanos"
)

// node is one tailroot server with its sidecar.
type node struct {
	cluster string
	app     *apptest.App
	sidecar *th.Process
}

// blockFlags are what a Thanos deployment asks of a Prometheus: 2h blocks
// and no local compaction.
var blockFlags = []string{"--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=2h"}

func configFile(t *testing.T, cluster string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tailroot.yml")
	cfg := fmt.Sprintf("global:\n  scrape_interval: 15s\n  external_labels:\n    cluster: %s\n", cluster)
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitHeadCompacted waits until the head of app spans at most 1.5 block
// ranges: every older sample is in a block on disk.
func waitHeadCompacted(t *testing.T, app *apptest.App) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		lo, ok1 := th.Metric(app.URL, "prometheus_tsdb_head_min_time_seconds")
		hi, ok2 := th.Metric(app.URL, "prometheus_tsdb_head_max_time_seconds")
		if ok1 && ok2 && hi-lo <= 3*3600 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("head of %s not compacted after 5m", app.URL)
}

// query is one PromQL expression compared between Thanos Query and the
// server holding every node's data.
var queries = []string{
	`rate(vllm:request_success_total[5m])`,
	`irate(vllm:request_success_total[5m])`,
	`sum(rate(vllm:request_success_total[5m]))`,
	`sum by (cluster) (rate(vllm:request_success_total[5m]))`,
	`sum by (cluster, model_name) (increase(vllm:request_success_total[1h]))`,
	`sum(rate(vllm:request_success_total{cluster="a"}[5m]))`,
	`sum by (model_name) (rate(vllm:request_success_total{cluster=~"a|b", model_name="llama-8b"}[5m]))`,
	`topk(2, sum by (cluster, model_name) (rate(vllm:request_success_total[5m])))`,
	`resets(vllm:request_success_total[1h])`,
	`deriv(vllm:request_success_total[15m])`,
	`histogram_quantile(0.99, sum by (le, cluster) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))`,
	`histogram_quantile(0.5, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket[10m])))`,
	`histogram_quantile(0.9, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))`,
	`histogram_quantile(0.99, rate(vllm:e2e_request_latency_seconds_bucket{cluster="b"}[5m]))`,
	`sum by (cluster) (rate(vllm:e2e_request_latency_seconds_bucket{le="1"}[5m])) / sum by (cluster) (rate(vllm:e2e_request_latency_seconds_count[5m]))`,
	`sum by (cluster) (rate(vllm:e2e_request_latency_seconds_sum[5m])) / sum by (cluster) (rate(vllm:e2e_request_latency_seconds_count[5m]))`,
	`count by (cluster) (vllm:e2e_request_latency_seconds_bucket)`,
	`histogram_quantile(0.99, sum by (cluster) (rate(vllm:time_to_first_token_seconds[5m])))`,
	`histogram_quantile(0.5, sum(rate(vllm:time_to_first_token_seconds[5m])))`,
	`histogram_quantile(0.9, rate(vllm:time_to_first_token_seconds[10m]))`,
	`histogram_count(sum by (cluster) (rate(vllm:time_to_first_token_seconds[5m])))`,
	`histogram_sum(rate(vllm:time_to_first_token_seconds[5m]))`,
	`histogram_avg(sum by (cluster) (rate(vllm:time_to_first_token_seconds[5m])))`,
	`histogram_fraction(0, 0.5, sum by (cluster) (rate(vllm:time_to_first_token_seconds[5m])))`,
	`sum by (cluster) (rate(vllm:time_to_first_token_seconds[5m]))`,
	`avg by (cluster) (vllm:num_requests_running)`,
	`max by (model_name) (vllm:num_requests_running)`,
	`max_over_time(vllm:num_requests_running[30m])`,
	`avg_over_time(vllm:num_requests_running[1h])`,
	`quantile_over_time(0.9, vllm:num_requests_running[1h])`,
	`sum by (cluster) (changes(vllm:num_requests_running[30m]))`,
	`vllm:e2e_request_latency_seconds_count{cluster="b"} offset 1h`,
	`sum by (cluster, stage) (rate(tailroot_tail_stage_seconds_sum[10m]))`,
	`sum by (cluster) (rate(tailroot_tail_requests_total[10m]))`,
	`label_replace(sum by (cluster) (rate(vllm:request_success_total[5m])), "site", "$1", "cluster", "(.*)")`,
	`absent(vllm:request_success_total{cluster="z"})`,
}

// compareAll runs every query as an instant query at each of instants and
// as one range query over [start, end], against Thanos Query and the
// reference server, and fails on any difference.
func compareAll(t *testing.T, phase string, thanosQ, ref th.API, instants []time.Time, start, end time.Time) {
	t.Helper()
	var compared, points int
	var maxRel float64
	check := func(q, what string, a, b th.Result) {
		t.Helper()
		if b.Points() == 0 && q != queries[len(queries)-1] {
			t.Errorf("%s: %s %s: the reference answered nothing; the comparison would be empty", phase, what, q)
		}
		diff, rel := th.Diff(a, b, relTol)
		if rel > maxRel {
			maxRel = rel
		}
		if diff != "" {
			t.Errorf("%s: %s %s: Thanos Query vs tailroot: %s", phase, what, q, diff)
		}
		compared++
		points += b.Points()
	}
	// A store that fails must fail the query, not thin out its answer.
	strict := url.Values{"partial_response": {"false"}}
	for _, q := range queries {
		for _, ts := range instants {
			check(q, "instant@"+ts.UTC().Format(time.TimeOnly), thanosQ.Instant(t, q, ts, strict), ref.Instant(t, q, ts, nil))
		}
		check(q, "range", thanosQ.Range(t, q, start, end, 5*time.Minute, strict), ref.Range(t, q, start, end, 5*time.Minute, nil))
	}
	t.Logf("%s: %d queries, %d comparisons, %d points; largest relative difference %.3g", phase, len(queries), compared, points, maxRel)
}

// checkStatusFlags checks the flags a Thanos sidecar reads, as tailroot
// reports them: Prometheus' names, values in its duration syntax.
func checkStatusFlags(t *testing.T, baseURL string) {
	t.Helper()
	resp, err := http.Get(baseURL + "/api/v1/status/flags")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data map[string]string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"storage.tsdb.min-block-duration": "2h",
		"storage.tsdb.max-block-duration": "2h",
		"storage.tsdb.retention.time":     "15d",
		"web.enable-admin-api":            "false",
	} {
		if got := r.Data[name]; got != want {
			t.Errorf("/api/v1/status/flags %s = %q, want %q", name, got, want)
		}
	}
}

// compareLabels compares label names and values, with and without series
// selectors (the sidecar answers those through remote read or series
// calls), between Thanos Query and the reference server.
func compareLabels(t *testing.T, thanosQ, ref th.API, start, end time.Time) {
	t.Helper()
	for _, c := range []struct {
		path  string
		match []string
	}{
		{"labels", nil},
		{"labels", []string{`vllm:request_success_total{cluster="b"}`}},
		{"label/cluster/values", nil},
		{"label/model_name/values", []string{`{cluster="a"}`}},
		{"label/e2e_bucket/values", []string{`tailroot_tail_requests_total`}},
		{"label/__name__/values", nil},
	} {
		a, b := thanosQ.Labels(t, c.path, start, end, c.match...), ref.Labels(t, c.path, start, end, c.match...)
		if !slices.Equal(a, b) || len(b) == 0 {
			t.Errorf("%s %v: Thanos Query %v, tailroot %v", c.path, c.match, a, b)
		}
	}
}

// relTol allows for the PromQL engines of Thanos (prometheus v0.309) and
// tailroot (v0.316) summing in different orders; the data are identical.
const relTol = 1e-12

// TestThanosSidecarGlobalView runs two tailroot servers with different
// external labels, each behind an unchanged Thanos sidecar uploading to a
// filesystem bucket, a Thanos Store on the bucket and a Thanos Query over
// all three, and compares Thanos Query's answers with those of a third
// tailroot server that received all the data (the external label a real
// series label there). Then the nodes restart with a short retention that
// deletes their old blocks, and the same answers must come from the bucket.
func TestThanosSidecarGlobalView(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Thanos and three tailroot servers")
	}
	th.Binary(t) // skip early, with the reason, when there is no thanos
	bucket := th.NewBucket(t)
	ref := apptest.Start(t, t.TempDir())

	// Eight hours of history ending a few minutes ago, written in time
	// order: the head cuts 2h blocks as it goes, the last ~3h stay in it.
	// The last three hours arrive after the sidecars run, so some blocks
	// are cut and uploaded while they watch, as in a live deployment.
	end := time.Now().Add(-2 * time.Minute).Truncate(time.Minute)
	start := end.Add(-8 * time.Hour)
	mid := end.Add(-3 * time.Hour)
	var nodes []*node
	var targets []th.Target
	for i, cluster := range []string{"a", "b"} {
		app := apptest.Start(t, t.TempDir(), append([]string{"--config.file", configFile(t, cluster)}, blockFlags...)...)
		w := th.Workload{Labels: map[string]string{"instance": "node-" + cluster}, Models: []string{"llama-8b", "qwen-7b"}, Seed: uint64(i + 1), Step: 30 * time.Second}
		targets = append(targets, th.Target{URL: app.URL, Gen: th.NewGenerator(w)})
		// The same requests (same seed) with the external label as a
		// series label, for the reference server.
		w.Labels = map[string]string{"instance": "node-" + cluster, "cluster": cluster}
		targets = append(targets, th.Target{URL: ref.URL, Gen: th.NewGenerator(w)})
		nodes = append(nodes, &node{cluster: cluster, app: app})
	}
	th.Backfill(t, targets, start, mid, 30*time.Minute)
	for _, n := range nodes {
		waitHeadCompacted(t, n.app)
		n.sidecar = th.Sidecar(t, n.app.URL, n.app.DataDir, bucket)
		bucket.WaitBlocks(t, th.Blocks(t, n.app.DataDir), 2*time.Minute)
	}
	before := len(bucket.Blocks(t))
	th.Backfill(t, targets, mid, end, 30*time.Minute)
	for _, n := range nodes {
		waitHeadCompacted(t, n.app)
		local := th.Blocks(t, n.app.DataDir)
		if len(local) < 2 {
			t.Fatalf("node %s: %d local blocks after 8h of samples, want at least 2", n.cluster, len(local))
		}
		for _, m := range local {
			if m.Compaction.Level != 1 || m.Span() > 2*time.Hour {
				t.Fatalf("node %s: block %s level %d spans %v; want uncompacted 2h blocks", n.cluster, m.ULID, m.Compaction.Level, m.Span())
			}
		}
		// The shipper looks every 30s.
		bucket.WaitBlocks(t, local, 2*time.Minute)
	}
	if after := len(bucket.Blocks(t)); after <= before {
		t.Fatalf("no block uploaded while the sidecars ran: %d blocks before the last 3h, %d after", before, after)
	}
	// The data dir's other folders (records, evidence, queries) stay home:
	// the bucket holds blocks only.
	entries, err := os.ReadDir(bucket.Dir)
	if err != nil {
		t.Fatal(err)
	}
	checkStatusFlags(t, nodes[0].app.URL)
	uploaded := bucket.Blocks(t)
	if len(entries) != len(uploaded) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("bucket holds %v, want only the %d uploaded blocks", names, len(uploaded))
	}
	for _, m := range uploaded {
		c := m.Thanos.Labels["cluster"]
		if (c != "a" && c != "b") || m.Thanos.Source != "sidecar" {
			t.Fatalf("uploaded block %s: labels %v, source %q; want the node's external label and source sidecar", m.ULID, m.Thanos.Labels, m.Thanos.Source)
		}
	}
	store := th.Store(t, bucket)
	th.WaitMetric(t, store.HTTP, "thanos_bucket_store_blocks_loaded", func(v float64) bool { return int(v) == len(uploaded) }, time.Minute)
	query := th.Query(t, []string{nodes[0].sidecar.GRPC, nodes[1].sidecar.GRPC, store.GRPC})
	query.WaitStores(t, 3, time.Minute)

	thanosQ, refQ := th.API{URL: "http://" + query.HTTP}, th.API{URL: ref.URL}
	old := start.Add(90 * time.Minute) // in the oldest block
	instants := []time.Time{old, start.Add(4 * time.Hour), end.Add(-10 * time.Minute)}
	compareAll(t, "sidecars and store", thanosQ, refQ, instants, start.Add(time.Hour), end)
	for _, n := range nodes {
		// The sidecar read tailroot through streamed remote read (frames of
		// XOR chunks), not the sampled fallback.
		if frames, ok := th.Metric(n.sidecar.HTTP, "prometheus_store_received_frames_count"); !ok || frames == 0 {
			t.Errorf("sidecar of node %s received no streamed remote-read frames (%v, %v)", n.cluster, frames, ok)
		}
	}
	compareLabels(t, thanosQ, refQ, start, end)
	// External labels are attached on the way out (remote read, upload),
	// never written into the node's own series.
	for _, n := range nodes {
		if got := (th.API{URL: n.app.URL}).Labels(t, "labels", start, end); slices.Contains(got, "cluster") {
			t.Fatalf("node %s stores the external label in its series: labels %v", n.cluster, got)
		}
	}
	if t.Failed() {
		return
	}

	// Retention: a restart with 2h retention deletes every block but the
	// newest; the old samples are then only in the bucket.
	for _, n := range nodes {
		before := len(th.Blocks(t, n.app.DataDir))
		n.app.RestartWith(t, "--storage.tsdb.retention.time=2h")
		after := th.Blocks(t, n.app.DataDir)
		if len(after) >= before || len(after) == 0 {
			t.Fatalf("node %s: %d blocks before retention, %d after; want fewer, at least one", n.cluster, before, len(after))
		}
		for _, m := range after {
			if m.MinTime <= old.UnixMilli() {
				t.Fatalf("node %s: block %s from %v survived retention", n.cluster, m.ULID, time.UnixMilli(m.MinTime).UTC())
			}
		}
		if got := (th.API{URL: n.app.URL}).Instant(t, `count(vllm:request_success_total)`, old, nil); got.Points() != 0 {
			t.Fatalf("node %s still answers for %v after retention: %+v", n.cluster, old.UTC(), got.Series)
		}
		n.sidecar.WaitReady(t, time.Minute)
	}
	query.WaitStores(t, 3, time.Minute)
	compareAll(t, "after local retention", thanosQ, refQ, instants, start.Add(time.Hour), end)
	compareLabels(t, thanosQ, refQ, start, end)

	// A Thanos Query over the store alone gives the same answer for the old
	// instant: it is the bucket that answers, not what is left locally.
	storeOnly := th.Query(t, []string{store.GRPC})
	storeOnly.WaitStores(t, 1, time.Minute)
	q := `sum by (cluster) (rate(vllm:request_success_total[5m]))`
	a := th.API{URL: "http://" + storeOnly.HTTP}.Instant(t, q, old, url.Values{"partial_response": {"false"}})
	b := refQ.Instant(t, q, old, nil)
	if diff, _ := th.Diff(a, b, relTol); diff != "" || b.Points() != 2 {
		t.Fatalf("store alone at %v: %s (reference %d points)", old.UTC(), diff, b.Points())
	}
}
