package apptest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
)

// alertmanager starts Debian's prometheus-alertmanager on a free port with
// a null receiver and returns its base URL.
func alertmanager(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		t.Skip("prometheus-alertmanager not installed (make test-deps installs the Debian package)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "am.yml")
	writeFile(t, cfg, "route:\n  receiver: none\n  group_wait: 0s\n  group_interval: 1s\nreceivers:\n  - name: none\n")
	addr := FreeAddr(t)
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.path="+dir, "--web.listen-address="+addr, "--cluster.listen-address=")
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	u := "http://" + addr
	waitFor(t, 30*time.Second, "alertmanager ready", func() bool {
		resp, err := http.Get(u + "/-/ready")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return u
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type amAlert struct {
	Labels   map[string]string `json:"labels"`
	StartsAt time.Time         `json:"startsAt"`
	EndsAt   time.Time         `json:"endsAt"`
	Status   struct {
		State string `json:"state"`
	} `json:"status"`
}

func amAlerts(t *testing.T, am string) []amAlert {
	t.Helper()
	resp, err := http.Get(am + "/api/v2/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []amAlert
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

type apiAlert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
}

func apiAlerts(t *testing.T, a *App) []apiAlert {
	t.Helper()
	code, body := a.Get(t, "/api/v1/alerts", nil)
	if code != http.StatusOK {
		t.Fatalf("/api/v1/alerts: %d %s", code, body)
	}
	var r struct {
		Data struct {
			Alerts []apiAlert `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	return r.Data.Alerts
}

// ttftWriter pushes vllm:time_to_first_token_seconds as classic buckets, one
// sample per series per call, stamped now: n observations in the bucket
// that holds v. Two calls within one millisecond get distinct times, as
// a second sample at a series' last time with another value is refused.
type ttftWriter struct {
	bounds []float64
	counts []float64 // cumulative per bound, then +Inf
	sum    float64
	last   int64 // the time of the last push, ms
}

func (w *ttftWriter) observe(n int, v float64) {
	if w.counts == nil {
		w.counts = make([]float64, len(w.bounds)+1)
	}
	for i, b := range w.bounds {
		if v <= b {
			w.counts[i] += float64(n)
		}
	}
	w.counts[len(w.bounds)] += float64(n)
	w.sum += float64(n) * v
}

func (w *ttftWriter) push(t *testing.T, a *App, at time.Time) {
	t.Helper()
	ms := max(at.UnixMilli(), w.last+1)
	w.last = ms
	var req prompb.WriteRequest
	add := func(name string, v float64, extra ...string) {
		ls := []prompb.Label{{Name: "__name__", Value: name}, {Name: "model_name", Value: "m"}}
		for i := 0; i < len(extra); i += 2 {
			ls = append(ls, prompb.Label{Name: extra[i], Value: extra[i+1]})
		}
		req.Timeseries = append(req.Timeseries, prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Value: v, Timestamp: ms}}})
	}
	for i, b := range w.bounds {
		add("vllm:time_to_first_token_seconds_bucket", w.counts[i], "le", strconv.FormatFloat(b, 'f', -1, 64))
	}
	add("vllm:time_to_first_token_seconds_bucket", w.counts[len(w.bounds)], "le", "+Inf")
	add("vllm:time_to_first_token_seconds_count", w.counts[len(w.bounds)])
	add("vllm:time_to_first_token_seconds_sum", w.sum)
	c := writeClient(t, a, remoteapi.WriteV1MessageType)
	if _, err := c.Store(t.Context(), compress(t, &req), 0); err != nil {
		t.Fatalf("remote write: %v", err)
	}
}

// TestAlertingRuleReachesAlertmanager: a P99 TTFT alert, evaluated by
// tailroot's rules manager, reaches a real Alertmanager within two
// evaluation intervals of the data crossing the threshold, and resolves
// when the data falls back; /api/v1/rules, /api/v1/alerts and the ALERTS
// series report it as Prometheus does.
func TestAlertingRuleReachesAlertmanager(t *testing.T) {
	am := alertmanager(t)
	dir := t.TempDir()
	const interval = 2 * time.Second
	writeFile(t, filepath.Join(dir, "rules.yml"), `groups:
  - name: ttft
    rules:
      - alert: P99TTFTHigh
        expr: histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[10s]))) > 2
        labels:
          severity: page
        annotations:
          summary: "P99 TTFT {{ $value }}"
`)
	writeFile(t, filepath.Join(dir, "prometheus.yml"), fmt.Sprintf(`global:
  evaluation_interval: %s
  external_labels:
    cluster: c1
rule_files:
  - %s
alerting:
  alertmanagers:
    - static_configs:
        - targets: [%q]
`, interval, filepath.Join(dir, "rules.yml"), strings.TrimPrefix(am, "http://")))
	app := Start(t, filepath.Join(dir, "data"), "--config.file", filepath.Join(dir, "prometheus.yml"), "--rules.alert.resend-delay=1s")

	w := &ttftWriter{bounds: []float64{0.1, 0.5, 1, 2, 5, 10}}
	push := func(n int, v float64) {
		w.observe(n, v)
		w.push(t, app, time.Now())
	}
	// 15 s of fast first tokens: no alert.
	for range 15 {
		push(100, 0.3)
		time.Sleep(time.Second)
	}
	if got := apiAlerts(t, app); len(got) != 0 {
		t.Fatalf("alerts before the threshold was crossed: %+v", got)
	}
	// Every request now waits 4 s: P99 jumps above 2 s.
	crossed := time.Now()
	push(100, 4)
	var fired apiAlert
	waitFor(t, 30*time.Second, "alert firing in tailroot", func() bool {
		push(100, 4)
		time.Sleep(500 * time.Millisecond)
		for _, a := range apiAlerts(t, app) {
			if a.Labels["alertname"] == "P99TTFTHigh" && a.State == "firing" {
				fired = a
				return true
			}
		}
		return false
	})
	if lag := fired.ActiveAt.Sub(crossed); lag > 2*interval {
		t.Errorf("alert active %v after the data crossed the threshold, want ≤ 2 evaluation intervals (%v)", lag, 2*interval)
	}
	var got amAlert
	waitFor(t, 30*time.Second, "alert in Alertmanager", func() bool {
		for _, a := range amAlerts(t, am) {
			if a.Labels["alertname"] == "P99TTFTHigh" && a.Status.State == "active" {
				got = a
				return true
			}
		}
		return false
	})
	if got.Labels["severity"] != "page" || got.Labels["model_name"] != "m" || got.Labels["cluster"] != "c1" {
		t.Errorf("alertmanager got labels %v, want severity=page, model_name=m and the external label cluster=c1", got.Labels)
	}
	if v := app.Scalar(t, `ALERTS{alertname="P99TTFTHigh",alertstate="firing"}`, time.Now()); v != 1 {
		t.Errorf("ALERTS = %v, want 1", v)
	}
	code, body := app.Get(t, "/api/v1/rules", url.Values{"type": {"alert"}})
	if code != http.StatusOK || !strings.Contains(string(body), `"name":"P99TTFTHigh"`) || !strings.Contains(string(body), `"state":"firing"`) {
		t.Errorf("/api/v1/rules: %d %s", code, body)
	}
	code, body = app.Get(t, "/api/v1/alertmanagers", nil)
	if code != http.StatusOK || !strings.Contains(string(body), strings.TrimPrefix(am, "http://")) {
		t.Errorf("/api/v1/alertmanagers: %d %s", code, body)
	}

	// Fast again: once the 10 s window has no slow requests left, the
	// alert resolves in tailroot and Alertmanager.
	waitFor(t, 60*time.Second, "alert resolved in Alertmanager", func() bool {
		push(100, 0.3)
		time.Sleep(500 * time.Millisecond)
		for _, a := range amAlerts(t, am) {
			if a.Labels["alertname"] == "P99TTFTHigh" && a.Status.State == "active" && (a.EndsAt.IsZero() || a.EndsAt.After(time.Now())) {
				return false
			}
		}
		return true
	})
	for _, a := range apiAlerts(t, app) {
		if a.Labels["alertname"] == "P99TTFTHigh" {
			t.Errorf("alert still listed after resolution: %+v", a)
		}
	}
}

// TestAlertForStateSurvivesRestart: a pending alert keeps its activeAt
// across a restart, restored from ALERTS_FOR_STATE as Prometheus does.
func TestAlertForStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "rules.yml"), `groups:
  - name: pending
    rules:
      - alert: QueueLong
        expr: vllm:num_requests_waiting > 10
        for: 1h
`)
	writeFile(t, filepath.Join(dir, "prometheus.yml"), "global:\n  evaluation_interval: 1s\nrule_files: [\""+filepath.Join(dir, "rules.yml")+"\"]\n")
	app := Start(t, filepath.Join(dir, "data"), "--config.file", filepath.Join(dir, "prometheus.yml"), "--rules.alert.for-grace-period=1s")
	pushGauge := func() {
		req := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
			Labels:  []prompb.Label{{Name: "__name__", Value: "vllm:num_requests_waiting"}, {Name: "instance", Value: "i"}},
			Samples: []prompb.Sample{{Value: 50, Timestamp: time.Now().UnixMilli()}},
		}}}
		c := writeClient(t, app, remoteapi.WriteV1MessageType)
		if _, err := c.Store(t.Context(), compress(t, &req), 0); err != nil {
			t.Fatal(err)
		}
	}
	var before apiAlert
	waitFor(t, 30*time.Second, "pending alert", func() bool {
		pushGauge()
		for _, a := range apiAlerts(t, app) {
			if a.Labels["alertname"] == "QueueLong" && a.State == "pending" {
				before = a
				return true
			}
		}
		time.Sleep(300 * time.Millisecond)
		return false
	})
	time.Sleep(6 * time.Second) // pending for a while, ALERTS_FOR_STATE written each evaluation
	if n := len(app.InstantVector(t, `ALERTS_FOR_STATE{alertname="QueueLong"}`, time.Now())); n != 1 {
		t.Fatalf("ALERTS_FOR_STATE series: %d, want 1", n)
	}
	down := time.Now()
	pending := down.Sub(before.ActiveAt)
	app.Restart(t)
	up := time.Now()
	// The rules manager restores `for` state after the second evaluation
	// of a group, so the first pending state seen may not be restored yet.
	for range 4 {
		pushGauge()
		time.Sleep(time.Second)
	}
	var after apiAlert
	waitFor(t, 30*time.Second, "pending alert after restart", func() bool {
		pushGauge()
		for _, a := range apiAlerts(t, app) {
			if a.Labels["alertname"] == "QueueLong" && a.State == "pending" {
				after = a
				return true
			}
		}
		time.Sleep(300 * time.Millisecond)
		return false
	})
	// Prometheus restores the time already spent pending and shifts
	// activeAt by the downtime; a fresh alert would start pending at the
	// restart. Tolerance: one evaluation interval plus the whole seconds
	// ALERTS_FOR_STATE keeps.
	if restored := up.Sub(after.ActiveAt); restored < pending-2*time.Second {
		t.Errorf("after restart the alert has been pending %v, before it %v: the for state was not restored (activeAt %v → %v)", restored, pending, before.ActiveAt, after.ActiveAt)
	}
}

// TestRecordingRuleWithTailMean: a recording rule over tail_mean keeps the
// P99 breakdown as series equal to the function's direct answer.
func TestRecordingRuleWithTailMean(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "rules.yml"), `groups:
  - name: breakdown
    rules:
      - record: stage:tailroot_tail_mean_seconds:p99_5m
        expr: sum by (stage) (tail_mean(0.99, requests[5m]))
`)
	writeFile(t, filepath.Join(dir, "prometheus.yml"), "global:\n  evaluation_interval: 1s\nrule_files: [\""+filepath.Join(dir, "rules.yml")+"\"]\n")
	// Records pushed before the server starts evaluating would race the
	// first evaluation; the rule sees them a second later either way.
	app := Start(t, filepath.Join(dir, "data"), "--config.file", filepath.Join(dir, "prometheus.yml"))
	rng := rand.New(rand.NewPCG(7, 9))
	now := float64(time.Now().UnixMilli()) / 1000
	var lines []string
	for i := range 500 {
		arr := now - 60 + float64(i)*0.1
		q, pre, dec := rng.ExpFloat64()*0.05, 0.02+rng.ExpFloat64()*0.1, 0.2+rng.ExpFloat64()*0.5
		lines = append(lines, fmt.Sprintf(`{"request_id":"r%d","labels":{"model_name":"m"},"arrival":%.6f,"scheduled":%.6f,"first_token":%.6f,"finished":%.6f}`,
			i, arr, arr+q, arr+q+pre, arr+q+pre+dec))
	}
	code, body := postBody(t, app, "/api/v1/requests", "application/x-ndjson", []byte(strings.Join(lines, "\n")), nil)
	if code/100 != 2 {
		t.Fatalf("push records: %d %s", code, body)
	}
	// A recorded sample written after the push, and the function at the
	// same instant.
	pushed := time.Now()
	var rec []Sample
	waitFor(t, 30*time.Second, "recorded tail breakdown", func() bool {
		code, body := app.Get(t, "/api/v1/query", url.Values{"query": {"stage:tailroot_tail_mean_seconds:p99_5m[10s]"}})
		if code != http.StatusOK {
			return false
		}
		var r struct {
			Data struct {
				Result []struct {
					Metric map[string]string `json:"metric"`
					Values [][2]any          `json:"values"`
				} `json:"result"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &r) != nil || len(r.Data.Result) == 0 {
			return false
		}
		rec = rec[:0]
		for _, s := range r.Data.Result {
			last := s.Values[len(s.Values)-1]
			if ts := last[0].(float64); ts < float64(pushed.UnixMilli())/1000+1 {
				return false
			}
			rec = append(rec, Sample{Metric: s.Metric, Value: last})
		}
		return true
	})
	at := time.UnixMilli(int64(rec[0].Value[0].(float64) * 1000))
	direct := map[string]float64{}
	for _, s := range app.InstantVector(t, `sum by (stage) (tail_mean(0.99, requests[5m]))`, at) {
		direct[s.Metric["stage"]] = floatOf(t, s)
	}
	if len(direct) == 0 || len(direct) != len(rec) {
		t.Fatalf("direct answer has %d stages, recorded %d", len(direct), len(rec))
	}
	for _, s := range rec {
		want, ok := direct[s.Metric["stage"]]
		got := floatOf(t, s)
		if !ok || math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
			t.Errorf("stage %q: recorded %v, direct %v", s.Metric["stage"], got, want)
		}
	}
}

func ruleNames(t *testing.T, a *App) []string {
	t.Helper()
	code, body := a.Get(t, "/api/v1/rules", nil)
	if code != http.StatusOK {
		t.Fatalf("/api/v1/rules: %d %s", code, body)
	}
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name string `json:"name"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range r.Data.Groups {
		for _, rl := range g.Rules {
			names = append(names, rl.Name)
		}
	}
	return names
}

// TestConfigReload: POST /-/reload (with --web.enable-lifecycle) and SIGHUP
// apply a changed rule file; a broken one is refused and the rules in
// force keep running; without the flag the endpoint does not exist.
func TestConfigReload(t *testing.T) {
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yml")
	cfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, rules, "groups:\n  - name: g\n    rules:\n      - record: one\n        expr: vector(1)\n")
	writeFile(t, cfg, "global:\n  evaluation_interval: 1s\nrule_files: [\""+rules+"\"]\n")
	app := Start(t, filepath.Join(dir, "data"), "--config.file", cfg, "--web.enable-lifecycle")
	if got := strings.Join(ruleNames(t, app), ","); got != "one" {
		t.Fatalf("rules at start: %q", got)
	}
	writeFile(t, rules, "groups:\n  - name: g\n    rules:\n      - record: one\n        expr: vector(1)\n      - record: two\n        expr: vector(2)\n")
	if code, body := postBody(t, app, "/-/reload", "text/plain", nil, nil); code != http.StatusOK {
		t.Fatalf("reload: %d %s", code, body)
	}
	if got := strings.Join(ruleNames(t, app), ","); got != "one,two" {
		t.Fatalf("rules after reload: %q", got)
	}
	writeFile(t, rules, "groups:\n  - name: g\n    rules:\n      - record: three\n        expr: sum(\n")
	if code, body := postBody(t, app, "/-/reload", "text/plain", nil, nil); code != http.StatusInternalServerError || !strings.Contains(string(body), "rules.yml") {
		t.Fatalf("reload of a broken rule file: %d %s", code, body)
	}
	if got := strings.Join(ruleNames(t, app), ","); got != "one,two" {
		t.Fatalf("rules after a failed reload: %q", got)
	}
	writeFile(t, rules, "groups:\n  - name: g\n    rules:\n      - record: four\n        expr: vector(4)\n")
	if err := app.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "SIGHUP reload", func() bool { return strings.Join(ruleNames(t, app), ",") == "four" })
	waitFor(t, 10*time.Second, "recorded series", func() bool {
		v := app.InstantVector(t, "four", time.Now())
		return len(v) == 1 && floatOf(t, v[0]) == 4
	})

	plain := Start(t, filepath.Join(dir, "data2"), "--config.file", cfg)
	if code, _ := postBody(t, plain, "/-/reload", "text/plain", nil, nil); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
		t.Fatalf("/-/reload without --web.enable-lifecycle: %d", code)
	}
}
