package thanos

import (
	"fmt"
	"math"
	"net/url"
	"testing"
	"time"

	"github.com/tailroot/tailroot/apptest"
	th "github.com/tailroot/tailroot/apptest/internal/thanos"
)

const (
	day      = 24 * time.Hour
	res5m    = 5 * time.Minute
	res1h    = time.Hour
	dsStep   = time.Minute // raw sample interval of the downsampling test
	dsWindow = 7 * day     // range of the rate windows checked at 5m and 1h
)

// TestThanosCompactDownsampling backfills 14 days and 8 hours into a
// tailroot server behind a sidecar, lets `thanos compact` compact and
// downsample the uploaded 2h blocks, and checks histogram_quantile and
// increase at 5m and 1h resolution, through Thanos Query and through
// tailroot's own global view (a tailroot server with --store.endpoint on
// each resolution's Thanos Store), against the raw answer within the bound
// docs/functions.md derives; and tail_mean_from_accumulators over
// increase() of the downsampled accumulators through the global view
// (checkTailDownsampled).
//
// Thanos downsamples a block to 5m only when it spans at least 40h, and a
// 5m block to 1h only when it spans at least 10 days; compaction builds
// 14-day blocks only from a complete 14-day window (aligned to the epoch)
// or one followed by later blocks. The backfill therefore covers one whole
// aligned 14-day window plus 8 hours after it.
func TestThanosCompactDownsampling(t *testing.T) {
	if testing.Short() {
		t.Skip("backfills two weeks and runs thanos compact")
	}
	th.Binary(t)
	const window14 = 14 * day
	w0 := time.UnixMilli(time.Now().Add(-window14-12*time.Hour).UnixMilli() / window14.Milliseconds() * window14.Milliseconds())
	start, end := w0, w0.Add(window14+8*time.Hour)

	app := apptest.Start(t, t.TempDir(), append([]string{"--config.file", configFile(t, "a"), "--storage.tsdb.retention.time=60d"}, blockFlags...)...)
	gen := th.NewGenerator(th.Workload{Labels: map[string]string{"instance": "node-a"}, Models: []string{"llama-8b"}, Seed: 7, Step: dsStep, KeepRequests: true})
	began := time.Now()
	th.Backfill(t, []th.Target{{URL: app.URL, Gen: gen}}, start, end, 6*time.Hour)
	waitHeadCompacted(t, app)
	local := th.Blocks(t, app.DataDir)
	t.Logf("backfilled %v of samples into %d local 2h blocks in %v", end.Sub(start), len(local), time.Since(began).Round(time.Second))

	bucket := th.NewBucket(t)
	sidecar := th.Sidecar(t, app.URL, app.DataDir, bucket)
	bucket.WaitBlocks(t, local, 5*time.Minute)
	sidecar.Stop(t)

	began = time.Now()
	th.Compact(t, bucket, 10*time.Minute)
	byRes := map[int64][]th.Meta{}
	for _, m := range bucket.Blocks(t) {
		byRes[m.Thanos.Downsample.Resolution] = append(byRes[m.Thanos.Downsample.Resolution], m)
	}
	t.Logf("thanos compact in %v: %d raw, %d 5m, %d 1h blocks", time.Since(began).Round(time.Second), len(byRes[0]), len(byRes[res5m.Milliseconds()]), len(byRes[res1h.Milliseconds()]))
	for _, res := range []time.Duration{res5m, res1h} {
		covered := false
		for _, m := range byRes[res.Milliseconds()] {
			covered = covered || (m.MinTime <= start.UnixMilli() && m.MaxTime >= start.Add(window14).UnixMilli()-res.Milliseconds())
		}
		if !covered {
			t.Fatalf("no %v block covers the 14-day window %v: %+v", res, start.UTC(), byRes[res.Milliseconds()])
		}
	}

	// One Thanos Store and Query per resolution, each on a bucket holding
	// only that resolution's blocks, so that an answer cannot come from
	// another resolution; and one over the whole bucket for raw answers.
	apiFor := func(b *th.Bucket) (th.API, string) {
		store := th.Store(t, b)
		th.WaitMetric(t, store.HTTP, "thanos_bucket_store_blocks_loaded", func(v float64) bool { return int(v) == len(b.Blocks(t)) }, time.Minute)
		q := th.Query(t, []string{store.GRPC})
		q.WaitStores(t, 1, time.Minute)
		return th.API{URL: "http://" + q.HTTP}, store.GRPC
	}
	rawQ, _ := apiFor(bucket)
	// tailroot's own global view over each resolution's Thanos Store: an
	// empty local TSDB, the store as --store.endpoint, reading that
	// resolution by default (--store.max-source-resolution).
	dsQ, global := map[time.Duration]th.API{}, map[time.Duration]th.API{}
	for _, res := range []time.Duration{res5m, res1h} {
		var grpc string
		dsQ[res], grpc = apiFor(bucket.CopyBlocks(t, func(m th.Meta) bool { return m.Thanos.Downsample.Resolution == res.Milliseconds() }))
		g := apptest.Start(t, t.TempDir(), "--store.endpoint", grpc, "--store.max-source-resolution", model(res))
		global[res] = th.API{URL: g.URL}
	}
	local0 := th.API{URL: app.URL}
	raw := url.Values{"max_source_resolution": {"0s"}, "partial_response": {"false"}}
	at := func(res time.Duration) url.Values {
		return url.Values{"max_source_resolution": {model(res)}, "partial_response": {"false"}}
	}

	_, peak := gen.Requests(start, end)
	for _, ts := range []time.Time{start.Add(9 * day), start.Add(13*day + 7*time.Hour)} {
		n, _ := gen.Requests(ts.Add(-dsWindow), ts)
		// The raw blocks after compaction answer exactly as tailroot does.
		for _, q := range dsQueries(dsWindow) {
			if diff, _ := th.Diff(rawQ.Instant(t, q.expr, ts, raw), local0.Instant(t, q.expr, ts, nil), relTol); diff != "" {
				t.Errorf("raw blocks after thanos compact, %s at %v: %s", q.expr, ts.UTC(), diff)
			}
		}
		for _, res := range []time.Duration{res5m, res1h} {
			checkDownsampled(t, dsQ[res], local0, at(res), ts, dsWindow, res, n, peak)
			// The same queries through tailroot's global view, within
			// the same bound.
			checkDownsampled(t, global[res], local0, at(res), ts, dsWindow, res, n, peak)
			checkTailDownsampled(t, global[res], local0, ts, dsWindow, res, n, peak)
		}
		for _, p := range []float64{0.9, 0.99} {
			checkTailAccumulators(t, local0, gen, p, ts, dsWindow)
		}
	}
	checkDownsampledRange(t, dsQ[res5m], local0, at(res5m), gen, start.Add(2*day), start.Add(13*day), peak)
}

// checkDownsampledRange checks a range query of daily quantiles over 11
// days at 5m resolution, point by point, with the bound of
// checkDownsampled taken at its largest over the points.
func checkDownsampledRange(t *testing.T, ds, local th.API, params url.Values, gen *th.Generator, from, to time.Time, peak int) {
	t.Helper()
	const window = day
	delta := float64(peak) * float64((2*(res5m+dsStep)+2*(dsStep+dsStep))/dsStep)
	eps := 0.0
	for ts := from; !ts.After(to); ts = ts.Add(day) {
		n, _ := gen.Requests(ts.Add(-window), ts)
		eps = math.Max(eps, delta/(float64(n)-delta))
	}
	for _, q := range dsQueries(window)[1:] {
		if q.q == 0.99 {
			continue // q + ε passes 1 over one day
		}
		got := ds.Range(t, q.expr, from, to, day, params)
		lo := local.Range(t, q.quantile(q.q-eps), from, to, day, nil)
		hi := local.Range(t, q.quantile(q.q+eps), from, to, day, nil)
		if len(got.Series) != 1 || len(lo.Series) != 1 || len(hi.Series) != 1 || len(got.Series[0].Points) != 12 {
			t.Fatalf("%s over %v..%v: want one series of 12 daily points, got %d series (%d points)", q.expr, from.UTC(), to.UTC(), len(got.Series), got.Points())
		}
		worst := 0.0
		for i, p := range got.Series[0].Points {
			l, h := lo.Series[0].Points[i], hi.Series[0].Points[i]
			if p.T != l.T || p.T != h.T || p.V < l.V*(1-1e-12) || p.V > h.V*(1+1e-12) {
				t.Errorf("5m: %s at %v = %v, want within [%v, %v] (ε %.3g)", q.expr, p.T, p.V, l.V, h.V, eps)
			}
			worst = math.Max(worst, math.Max(p.V-l.V, h.V-p.V)/p.V)
		}
		t.Logf("5m range: %s, 12 daily points within ε %.3g (bounds at most %.2g relative away)", q.expr, eps, worst)
	}
}

// checkTailAccumulators checks the backfilled tail accumulators against
// the requests they were built from: tail_mean_from_accumulators over the
// window's exact counter differences (no extrapolation) counts every
// request, and its bounds bracket E[X_i | S ≥ q] computed from the requests
// themselves. Over Thanos' downsampled blocks the expression takes
// increase() instead (plain selectors of downsampled counters read window
// averages): see checkTailDownsampled.
func checkTailAccumulators(t *testing.T, api th.API, gen *th.Generator, p float64, ts time.Time, window time.Duration) {
	t.Helper()
	w := model(window)
	diff := func(name string) string {
		return fmt.Sprintf(`((%[1]s - %[1]s offset %[2]s) or %[1]s)`, name, w)
	}
	q := fmt.Sprintf(`tail_mean_from_accumulators(%g, sum by (stage, e2e_bucket) %s, sum by (e2e_bucket) %s, "all")`,
		p, diff("tailroot_tail_stage_seconds_sum"), diff("tailroot_tail_requests_total"))
	r := api.Instant(t, q, ts, nil)
	rows := map[string]float64{}
	for _, s := range r.Series {
		rows[s.Metric["stage"]+"/"+s.Metric["statistic"]] = s.Points[0].V
	}
	quant, truth, tail := gen.TailMean(p, ts.Add(-window), ts)
	total, _ := gen.Requests(ts.Add(-window), ts)
	if got := rows["e2e/requests"]; got != float64(total) {
		t.Errorf("%s at %v: %v requests, the workload drew %d", q, ts.UTC(), got, total)
	}
	for i, st := range th.Stages {
		lo, hi, est := rows[st+"/lower"], rows[st+"/upper"], rows[st+"/contribution"]
		if !(lo <= truth[i]*(1+1e-12) && truth[i] <= hi*(1+1e-12)) {
			t.Errorf("P%g tail mean of %s at %v: true %v (tail of %d requests above %v) outside the accumulators' bounds [%v, %v]", p*100, st, ts.UTC(), truth[i], tail, quant, lo, hi)
		}
		t.Logf("P%g tail mean of %s: true %.6g, accumulator estimate %.6g, bounds [%.6g, %.6g]", p*100, st, truth[i], est, lo, hi)
	}
}

// checkTailDownsampled checks tail_mean_from_accumulators over increase()
// of the downsampled accumulators through tailroot's global view (the
// server's default resolution, no max_source_resolution parameter) against
// the exact accumulators of the raw TSDB (docs/functions.md, "Downsampled
// history"). Thanos stamps a window's counter aggregate at the window's
// end, (k+1)·res − 1 ms, with the counter's value at the window's last raw
// sample, (k+1)·res − step. The window (t − R, t], R and t multiples of
// res, thus holds its first sample at t − R + res − 1 ms (counting to
// t − R + res − step) and its last at t − 1 ms (counting to t − step):
// increase() is f times the exact increment over
// J = (t − R + res − step, t − step], with one extrapolation factor f for
// every accumulator series that has samples all through the window (they
// share their sample times); a series born inside the window is
// extrapolated by less, between 1 and f. So every row equals the exact
// answer over J with all inputs scaled by f, f being the ratio of the two
// request counts, within a relative f − 1 (exactly, to 1e-9, when no
// series starts inside the window); and the request count, an increase,
// lies within the increase bound.
func checkTailDownsampled(t *testing.T, global, local th.API, ts time.Time, window, res time.Duration, n, peak int) {
	t.Helper()
	rows := func(r th.Result) map[string]float64 {
		out := map[string]float64{}
		for _, s := range r.Series {
			out[s.Metric["stage"]+"/"+s.Metric["statistic"]] = s.Points[0].V
		}
		return out
	}
	jEnd, jLen := ts.Add(-dsStep), window-res
	exact := func(p, f float64) string {
		diff := func(name string) string {
			return fmt.Sprintf(`(((%[1]s - %[1]s offset %[2]s) or %[1]s) * %.17[3]g)`, name, model(jLen), f)
		}
		return fmt.Sprintf(`tail_mean_from_accumulators(%g, sum by (stage, e2e_bucket) %s, sum by (e2e_bucket) %s, "all")`,
			p, diff("tailroot_tail_stage_seconds_sum"), diff("tailroot_tail_requests_total"))
	}
	for _, p := range []float64{0.9, 0.99} {
		inc := func(name string) string { return fmt.Sprintf("increase(%s[%s])", name, model(window)) }
		q := fmt.Sprintf(`tail_mean_from_accumulators(%g, sum by (stage, e2e_bucket) (%s), sum by (e2e_bucket) (%s), "all")`,
			p, inc("tailroot_tail_stage_seconds_sum"), inc("tailroot_tail_requests_total"))
		got := rows(global.Instant(t, q, ts, nil))
		edge := 2 * (res + dsStep)
		lo, hi := float64(n)-float64(peak)*float64(edge/dsStep), float64(n)*float64(window)/float64(window-edge)
		if g := got["e2e/requests"]; g < lo || g > hi {
			t.Errorf("%v: P%g tail accumulators: %v requests, want within [%v, %v] (true %d)", res, p*100, g, lo, hi, n)
		}
		inJ := rows(local.Instant(t, exact(p, 1), jEnd, nil))["e2e/requests"]
		f := got["e2e/requests"] / inJ
		want := rows(local.Instant(t, exact(p, f), jEnd, nil))
		if len(got) == 0 || len(got) != len(want) || !(f >= 1 && f <= float64(window)/float64(window-edge)) {
			t.Fatalf("%v: %s: %d rows, the exact answer over J has %d; extrapolation factor %v", res, q, len(got), len(want), f)
		}
		worst, tol := 0.0, math.Max(f-1, 1e-9)
		for k, w := range want {
			g, ok := got[k]
			if rel := math.Abs(g-w) / math.Max(math.Abs(w), 1e-300); !ok || rel > tol {
				t.Errorf("%v: P%g %s = %v through the global view, exact over J ×%.6g %v (relative %.2g)", res, p*100, k, g, f, w, rel)
			} else {
				worst = math.Max(worst, rel)
			}
		}
		t.Logf("%v: P%g tail accumulators via increase() over %s through tailroot's global view: %v requests (true %d, %v in J, f = %.6g); %d rows equal the exact answer over J ×f within %.2g (bound %.2g)",
			res, p*100, model(window), got["e2e/requests"], n, inJ, f, len(want), worst, tol)
	}
}

type dsQuery struct {
	expr string
	q    float64 // quantile level; 0 for the increase
	// quantile builds the same expression at another level.
	quantile func(q float64) string
}

func dsQueries(window time.Duration) []dsQuery {
	w := model(window)
	classic := func(q float64) string {
		return fmt.Sprintf(`histogram_quantile(%g, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[%s])))`, q, w)
	}
	native := func(q float64) string {
		return fmt.Sprintf(`histogram_quantile(%g, sum(rate(vllm:time_to_first_token_seconds[%s])))`, q, w)
	}
	out := []dsQuery{{expr: fmt.Sprintf(`sum(increase(vllm:request_success_total[%s]))`, w)}}
	for _, q := range []float64{0.5, 0.9, 0.99} {
		out = append(out, dsQuery{classic(q), q, classic}, dsQuery{native(q), q, native})
	}
	return out
}

// checkDownsampled checks the answers at resolution res against the raw
// ones within the bound of docs/functions.md ("Downsampled history"): both
// estimate the window from samples whose span differs from the window by
// at most res+step at each end, so they count the same requests but for at
// most Δ = peak·2(res+step)/step; quantiles then move by at most the
// quantile level shift ε = Δ/(N−Δ), and an increase lies in
// [N−Δ, N·R/(R−2(res+step))], N being the true number of requests.
func checkDownsampled(t *testing.T, ds, local th.API, params url.Values, ts time.Time, window, res time.Duration, n, peak int) {
	t.Helper()
	edge := 2 * (res + dsStep)
	delta := float64(peak) * float64(edge/dsStep)
	deltaRaw := float64(peak) * float64(2*(dsStep+dsStep)/dsStep)
	eps := (delta + deltaRaw) / (float64(n) - delta - deltaRaw)
	for _, q := range dsQueries(window) {
		got := scalar(t, ds.Instant(t, q.expr, ts, params), q.expr)
		if q.q == 0 {
			lo, hi := float64(n)-delta, float64(n)*float64(window)/float64(window-edge)
			if got < lo || got > hi {
				t.Errorf("%v: %s at %v = %v, want within [%v, %v] (true increase %d)", res, q.expr, ts.UTC(), got, lo, hi, n)
			}
			t.Logf("%v: increase over %v = %.1f, true %d (relative error %.2g, bound [%.2g, %.2g])", res, model(window), got, n, got/float64(n)-1, lo/float64(n)-1, hi/float64(n)-1)
			continue
		}
		rawAt := scalar(t, local.Instant(t, q.expr, ts, nil), q.expr)
		lo := scalar(t, local.Instant(t, q.quantile(math.Max(q.q-eps, 0)), ts, nil), q.expr)
		hi := scalar(t, local.Instant(t, q.quantile(math.Min(q.q+eps, 1)), ts, nil), q.expr)
		if got < lo*(1-1e-12) || got > hi*(1+1e-12) {
			t.Errorf("%v: %s at %v = %v, want within [%v, %v] (raw %v, ε %.3g)", res, q.expr, ts.UTC(), got, lo, hi, rawAt, eps)
		}
		t.Logf("%v: %s = %.6g, raw %.6g (relative difference %.2g; allowed [%.6g, %.6g], ε %.3g)", res, q.expr, got, rawAt, math.Abs(got-rawAt)/rawAt, lo, hi, eps)
	}
}

func scalar(t *testing.T, r th.Result, q string) float64 {
	t.Helper()
	if len(r.Series) != 1 || len(r.Series[0].Points) != 1 || r.Series[0].Points[0].H != nil {
		t.Fatalf("%s: want one float sample, got %+v", q, r.Series)
	}
	return r.Series[0].Points[0].V
}

// model formats a duration in Prometheus' syntax.
func model(d time.Duration) string {
	switch {
	case d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}
