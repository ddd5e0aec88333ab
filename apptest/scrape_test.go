package apptest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// promServer is a real Prometheus 3.16 process.
type promServer struct {
	URL  string
	cmd  *exec.Cmd
	logs *syncBuffer
}

func startPrometheus(t *testing.T, config string, extra ...string) *promServer {
	t.Helper()
	bin := PeerBinary(t, "prometheus")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	writeFile(t, cfg, config)
	addr := FreeAddr(t)
	args := append([]string{"--config.file=" + cfg, "--storage.tsdb.path=" + filepath.Join(dir, "data"), "--web.listen-address=" + addr}, extra...)
	p := &promServer{URL: "http://" + addr, cmd: exec.Command(bin, args...), logs: &syncBuffer{}}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() })
	waitFor(t, 60*time.Second, "prometheus ready", func() bool {
		resp, err := http.Get(p.URL + "/-/ready")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// vector runs an instant query against any Prometheus-API server.
func vector(t *testing.T, base, q string, ts time.Time) []Sample {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?" + url.Values{"query": {q}, "time": {fmt.Sprintf("%.3f", float64(ts.UnixMilli())/1000)}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []Sample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("%s query %q: %v %s", base, q, err, r.Error)
	}
	return r.Data.Result
}

// byMetric keys samples by their label set.
func byMetric(ss []Sample) map[string]Sample {
	out := map[string]Sample{}
	for _, s := range ss {
		keys := make([]string, 0, len(s.Metric))
		for k, v := range s.Metric {
			keys = append(keys, k+"="+v)
		}
		sort.Strings(keys)
		out[strings.Join(keys, ",")] = s
	}
	return out
}

// TestScrapeMatchesPrometheus: tailroot and a real Prometheus 3.16 scrape
// the same targets through file service discovery — a captured vLLM and
// dcgm-exporter exposition (OpenMetrics), an endpoint with a native
// histogram (protobuf exposition) and tailroot's own /metrics — and store
// the same series with the same values and metadata.
func TestScrapeMatchesPrometheus(t *testing.T) {
	expo, err := os.ReadFile("testdata/scrape/vllm-dcgm.om")
	if err != nil {
		t.Fatal(err)
	}
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
		_, _ = w.Write(expo)
	}))
	defer stub.Close()
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "vllm:e2e_native_seconds", Help: "End-to-end latency, native histogram.",
		NativeHistogramBucketFactor: 1.1, NativeHistogramZeroThreshold: 1e-6,
	})
	reg.MustRegister(h)
	for i := range 200 {
		h.Observe(0.05 * float64(i%37+1))
	}
	native := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer native.Close()

	dir := t.TempDir()
	// tailroot's own address is known before it starts: FreeAddr.
	self := FreeAddr(t)
	targets := filepath.Join(dir, "targets.json")
	writeFile(t, targets, fmt.Sprintf(`[{"targets":[%q,%q],"labels":{"cluster":"c"}},{"targets":[%q],"labels":{"role":"tailroot"}}]`,
		strings.TrimPrefix(stub.URL, "http://"), strings.TrimPrefix(native.URL, "http://"), self))
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: llm
    scrape_native_histograms: true
    file_sd_configs:
      - files: [%q]
        refresh_interval: 1s
`, targets)
	cfgPath := filepath.Join(dir, "tailroot.yml")
	writeFile(t, cfgPath, config)
	tr := &App{bin: Binary(t), DataDir: filepath.Join(dir, "data"), Addr: self}
	tr.args = []string{"serve", "--listen", self, "--data-dir", tr.DataDir, "--config.file", cfgPath}
	tr.start(t)
	t.Cleanup(func() { tr.Kill(t) })
	prom := startPrometheus(t, config)

	for _, base := range []string{tr.URL, prom.URL} {
		waitFor(t, 60*time.Second, base+" scraping all targets", func() bool {
			v := vector(t, base, `count_over_time(up{job="llm"}[1m]) >= 3`, time.Now())
			return len(v) == 3
		})
	}
	now := time.Now()
	stubSel := fmt.Sprintf(`{job="llm",instance=~%q,__name__!~"scrape_.*"}`, strings.TrimPrefix(stub.URL, "http://")+"|"+strings.TrimPrefix(native.URL, "http://"))
	got, want := byMetric(vector(t, tr.URL, stubSel, now)), byMetric(vector(t, prom.URL, stubSel, now))
	if len(want) < 250 {
		t.Fatalf("prometheus stored only %d series from the stubs", len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("tailroot lacks %s", k)
			continue
		}
		if w.Value[1] != g.Value[1] || !reflect.DeepEqual(w.Histogram[1], g.Histogram[1]) {
			t.Errorf("%s: tailroot %v %v, prometheus %v %v", k, g.Value[1], g.Histogram[1], w.Value[1], w.Histogram[1])
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("tailroot has %s, prometheus does not", k)
		}
	}
	if nh := vector(t, tr.URL, `vllm:e2e_native_seconds`, now); len(nh) != 1 || nh[0].Histogram[1] == nil {
		t.Errorf("native histogram not stored as one: %+v", nh)
	}

	// tailroot's own /metrics: same families, up in both.
	selfSel := fmt.Sprintf(`group by (__name__) ({job="llm",instance=%q,__name__=~"go_.*|process_.*|prometheus_tsdb_.*|up"})`, self)
	waitFor(t, 20*time.Second, "same families from tailroot's own /metrics", func() bool {
		at := time.Now()
		a, b := byMetric(vector(t, tr.URL, selfSel, at)), byMetric(vector(t, prom.URL, selfSel, at))
		return len(a) > 20 && reflect.DeepEqual(keys(a), keys(b))
	})

	// Metadata of scraped families, as Prometheus reports it.
	type md struct{ Type, Help, Unit string }
	meta := func(base, metric string) []md {
		resp, err := http.Get(base + "/api/v1/metadata?metric=" + url.QueryEscape(metric))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Data map[string][]md `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			t.Fatal(err)
		}
		return r.Data[metric]
	}
	for _, m := range []string{"vllm:time_to_first_token_seconds", "DCGM_FI_DEV_GPU_UTIL", "vllm:prompt_tokens"} {
		if g, w := meta(tr.URL, m), meta(prom.URL, m); len(w) == 0 || !reflect.DeepEqual(g, w) {
			t.Errorf("metadata of %s: tailroot %+v, prometheus %+v", m, g, w)
		}
	}

	// /api/v1/targets lists the three targets, up.
	code, body := tr.Get(t, "/api/v1/targets", nil)
	if code != http.StatusOK || strings.Count(string(body), `"health":"up"`) != 3 {
		t.Errorf("/api/v1/targets: %d %s", code, body)
	}
}

func keys(m map[string]Sample) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
