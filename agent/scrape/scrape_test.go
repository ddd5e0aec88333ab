package scrape

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"

	"github.com/tailroot/tailroot/agent/collect"
)

// A vLLM-style exposition in the Prometheus text format: a counter, a
// gauge and a classic histogram with three buckets.
const vllmText = `# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="llama"} 3
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="llama"} 1234
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{model_name="llama",le="0.1"} 5
vllm:time_to_first_token_seconds_bucket{model_name="llama",le="0.5"} 9
vllm:time_to_first_token_seconds_bucket{model_name="llama",le="+Inf"} 10
vllm:time_to_first_token_seconds_sum{model_name="llama"} 2.5
vllm:time_to_first_token_seconds_count{model_name="llama"} 10
`

// An OpenMetrics exposition with a unit, an explicit timestamp (seconds)
// and a clashing job label.
const omText = `# TYPE process_cpu_seconds counter
# UNIT process_cpu_seconds seconds
# HELP process_cpu_seconds CPU time.
process_cpu_seconds_total 12.5 1700000000.250
# TYPE inner gauge
inner{job="sidecar"} 7
# EOF
`

type target struct {
	mu     sync.Mutex
	body   string
	ct     string
	status int
	hits   int
}

func (tg *target) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.hits++
	if tg.status != 0 {
		w.WriteHeader(tg.status)
		return
	}
	w.Header().Set("Content-Type", tg.ct)
	w.Write([]byte(tg.body))
}

func (tg *target) set(body, ct string, status int) {
	tg.mu.Lock()
	tg.body, tg.ct, tg.status = body, ct, status
	tg.mu.Unlock()
}

func byName(ss []collect.Series) map[string][]collect.Series {
	out := map[string][]collect.Series{}
	for _, s := range ss {
		n := s.Labels.Get(model.MetricNameLabel)
		out[n] = append(out[n], s)
	}
	return out
}

func newScraper(t *testing.T, srv *httptest.Server, opts Options) *Scraper {
	t.Helper()
	opts.URL = srv.URL + "/metrics"
	if opts.Job == "" {
		opts.Job = "vllm"
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestScrapePrometheusText(t *testing.T) {
	tg := &target{body: vllmText, ct: "text/plain; version=0.0.4; charset=utf-8"}
	srv := httptest.NewServer(tg)
	defer srv.Close()
	s := newScraper(t, srv, Options{Labels: map[string]string{"node": "n1"}})
	now := time.UnixMilli(1_700_000_000_000)
	ss, err := s.Collect(context.Background(), now, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := byName(ss)
	// 2 plain series + 3 buckets + sum + count = 7 exposed, + 3 synthetic.
	if len(ss) != 10 {
		t.Fatalf("%d series, want 10", len(ss))
	}
	if n := len(m["vllm:time_to_first_token_seconds_bucket"]); n != 3 {
		t.Fatalf("%d bucket series, want 3", n)
	}
	g := m["vllm:num_requests_running"][0]
	host := strings.TrimPrefix(srv.URL, "http://")
	want := labels.FromStrings("__name__", "vllm:num_requests_running", "instance", host, "job", "vllm", "model_name", "llama", "node", "n1")
	if !labels.Equal(g.Labels, want) {
		t.Errorf("labels %s, want %s", g.Labels, want)
	}
	if g.Samples[0] != (collect.Sample{T: now.UnixMilli(), V: 3}) {
		t.Errorf("sample %+v", g.Samples[0])
	}
	if g.Meta.Type != model.MetricTypeGauge || !strings.HasPrefix(g.Meta.Help, "Number of requests") {
		t.Errorf("gauge metadata %+v", g.Meta)
	}
	if c := m["vllm:time_to_first_token_seconds_count"][0]; c.Meta.Type != model.MetricTypeHistogram || c.Samples[0].V != 10 {
		t.Errorf("histogram _count %+v", c)
	}
	if u := m["up"][0]; u.Samples[0].V != 1 {
		t.Errorf("up = %v", u.Samples[0].V)
	}
	if n := m["scrape_samples_scraped"][0]; n.Samples[0].V != 7 {
		t.Errorf("scrape_samples_scraped = %v, want 7", n.Samples[0].V)
	}
}

func TestScrapeOpenMetrics(t *testing.T) {
	tg := &target{body: omText, ct: "application/openmetrics-text; version=1.0.0; charset=utf-8"}
	srv := httptest.NewServer(tg)
	defer srv.Close()
	for _, honor := range []bool{false, true} {
		s := newScraper(t, srv, Options{Job: "app", HonorLabels: honor})
		ss, err := s.Collect(context.Background(), time.UnixMilli(1_800_000_000_000), nil)
		if err != nil {
			t.Fatal(err)
		}
		m := byName(ss)
		cpu := m["process_cpu_seconds_total"][0]
		// 1700000000.250 s in the exposition = 1700000000250 ms.
		if cpu.Samples[0] != (collect.Sample{T: 1_700_000_000_250, V: 12.5}) {
			t.Errorf("timestamped sample %+v", cpu.Samples[0])
		}
		if cpu.Meta.Unit != "seconds" || cpu.Meta.Type != model.MetricTypeCounter {
			t.Errorf("metadata %+v", cpu.Meta)
		}
		in := m["inner"][0].Labels
		if honor {
			if in.Get("job") != "sidecar" || in.Has("exported_job") {
				t.Errorf("honor_labels: %s", in)
			}
		} else if in.Get("job") != "app" || in.Get("exported_job") != "sidecar" {
			t.Errorf("clash: %s", in)
		}
	}
}

func TestStalenessAndDown(t *testing.T) {
	tg := &target{body: "a 1\nb 2\n", ct: "text/plain"}
	srv := httptest.NewServer(tg)
	defer srv.Close()
	s := newScraper(t, srv, Options{})
	if _, err := s.Collect(context.Background(), time.UnixMilli(1000), nil); err != nil {
		t.Fatal(err)
	}
	tg.set("a 3\n", "text/plain", 0)
	ss, err := s.Collect(context.Background(), time.UnixMilli(2000), nil)
	if err != nil {
		t.Fatal(err)
	}
	m := byName(ss)
	if b := m["b"]; len(b) != 1 || b[0].Samples[0].T != 2000 || !value.IsStaleNaN(b[0].Samples[0].V) {
		t.Fatalf("no staleness marker for b: %+v", b)
	}
	if a := m["a"]; len(a) != 1 || a[0].Samples[0].V != 3 {
		t.Fatalf("a: %+v", a)
	}

	tg.set("", "", http.StatusInternalServerError)
	ss, err = s.Collect(context.Background(), time.UnixMilli(3000), nil)
	if err == nil {
		t.Fatal("failed scrape returned no error")
	}
	m = byName(ss)
	if a := m["a"]; len(a) != 1 || !value.IsStaleNaN(a[0].Samples[0].V) {
		t.Fatalf("no staleness marker for a when down: %+v", a)
	}
	if len(m["b"]) != 0 {
		t.Fatal("b marked stale twice")
	}
	if up := m["up"][0].Samples[0]; up.V != 0 || up.T != 3000 {
		t.Fatalf("up %+v, want 0 at 3000", up)
	}
}

func TestSyntaxErrorYieldsNothing(t *testing.T) {
	tg := &target{body: "good 1\nbad{ 2\n", ct: "text/plain"}
	srv := httptest.NewServer(tg)
	defer srv.Close()
	s := newScraper(t, srv, Options{})
	ss, err := s.Collect(context.Background(), time.UnixMilli(1000), nil)
	if err == nil {
		t.Fatal("syntax error not reported")
	}
	m := byName(ss)
	if len(m["good"]) != 0 || m["up"][0].Samples[0].V != 0 {
		t.Fatalf("partial scrape kept: %v", ss)
	}
}

func TestDuplicateSeriesKeptOnce(t *testing.T) {
	tg := &target{body: "x 1\nx 2\n", ct: "text/plain"}
	srv := httptest.NewServer(tg)
	defer srv.Close()
	s := newScraper(t, srv, Options{})
	ss, _ := s.Collect(context.Background(), time.UnixMilli(1000), nil)
	if x := byName(ss)["x"]; len(x) != 1 || x[0].Samples[0].V != 1 {
		t.Fatalf("duplicates: %+v", x)
	}
}

func TestNewErrors(t *testing.T) {
	for _, o := range []Options{{URL: "http://a/m"}, {Job: "j", URL: "a:9/m"}, {Job: "j", URL: "ftp://a/m"}} {
		if _, err := New(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(vllmText), "text/plain")
	f.Add([]byte(omText), "application/openmetrics-text; version=1.0.0")
	f.Add([]byte("a{b=\"c\"} 1 2\n"), "")
	target := labels.FromStrings("job", "j", "instance", "i:1")
	f.Fuzz(func(t *testing.T, body []byte, ct string) {
		ss, err := Parse(body, ct, 1000, target, false, nil, nil)
		if err != nil {
			return
		}
		for _, s := range ss {
			if s.Labels.Get("job") != "j" || s.Labels.Get("instance") != "i:1" {
				t.Fatalf("target labels missing: %s", s.Labels)
			}
		}
	})
}
