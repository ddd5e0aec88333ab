package apptest

import (
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	telemetrygenOnce sync.Once
	telemetrygenPath string
	telemetrygenErr  error
)

// telemetrygen builds the OpenTelemetry collector-contrib load generator
// once per test process. It is a `tool` dependency in go.mod, so the build
// uses the module's pinned version (fetched through the Go module proxy on
// first use, then from the module cache). TELEMETRYGEN_BIN, when set, names
// a binary to use instead.
func telemetrygen(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TELEMETRYGEN_BIN"); p != "" {
		return p
	}
	telemetrygenOnce.Do(func() {
		dir, err := os.MkdirTemp("", "telemetrygen-")
		if err != nil {
			telemetrygenErr = err
			return
		}
		telemetrygenPath = filepath.Join(dir, "telemetrygen")
		_, self, _, _ := runtime.Caller(0)
		cmd := exec.Command("go", "build", "-o", telemetrygenPath, "github.com/open-telemetry/opentelemetry-collector-contrib/cmd/telemetrygen")
		cmd.Dir = filepath.Dir(filepath.Dir(self))
		if out, err := cmd.CombinedOutput(); err != nil {
			telemetrygenErr = err
			telemetrygenPath = string(out)
		}
	})
	if telemetrygenErr != nil {
		t.Fatalf("build telemetrygen: %v\n%s", telemetrygenErr, telemetrygenPath)
	}
	return telemetrygenPath
}

func runTelemetrygen(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(telemetrygen(t), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("telemetrygen %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestTokensTelemetrygen sends traces and metrics to the running binary
// with telemetrygen over OTLP/HTTP. Its traces are a CLIENT parent and a
// SERVER child per trace; with GenAI attributes the child is an LLM request
// (e2e = the span duration, 250 ms) and the client span is ignored, so 25
// traces make 25 records. Its Sum metric counts 0, 1, … (the last of 5
// points is 4) and its first histogram point has 10 observations summing
// to 3940.
func TestTokensTelemetrygen(t *testing.T) {
	app := startTokens(t, t.TempDir())
	common := []string{"--otlp-http", "--otlp-endpoint", app.Addr, "--otlp-insecure", "--rate", "0", "--service", "tg-svc"}
	runTelemetrygen(t, append([]string{"traces"}, append(common,
		"--traces", "25", "--child-spans", "1", "--span-duration", "250ms",
		"--otlp-attributes", `service.instance.id="tg-1"`,
		"--telemetry-attributes", `gen_ai.operation.name="chat"`,
		"--telemetry-attributes", `gen_ai.request.model="tg-model"`,
		"--telemetry-attributes", `gen_ai.usage.input_tokens=100`)...)...)

	recs := getRecords(t, app, `{job="tg-svc"}`)
	if len(recs) != 25 {
		t.Fatalf("%d records from 25 telemetrygen traces", len(recs))
	}
	traces := map[string]bool{}
	for _, r := range recs {
		if r.E2E != 0.25 || r.Stages.Other != 0.25 || r.PromptTokens != 100 || r.Labels["model_name"] != "tg-model" || r.Labels["instance"] != "tg-1" {
			t.Fatalf("record %+v", r)
		}
		if b, err := hex.DecodeString(r.TraceID); err != nil || len(b) != 16 {
			t.Fatalf("trace id %q", r.TraceID)
		}
		traces[r.TraceID] = true
	}
	if len(traces) != 25 {
		t.Errorf("%d distinct trace ids, want 25", len(traces))
	}
	at := time.Now()
	if v := app.Scalar(t, `sum(tailroot_tail_requests_total{job="tg-svc", model_name="tg-model"})`, at); v != 25 {
		t.Errorf("tail requests %v, want 25", v)
	}

	// Points of one series must be at least a millisecond apart (the TSDB
	// refuses a second value at the same timestamp): --rate 20 spaces them
	// 50 ms apart.
	metrics := []string{"--otlp-http", "--otlp-endpoint", app.Addr, "--otlp-insecure", "--rate", "20", "--service", "tg-svc", "--otlp-http-url-path", "/api/v1/otlp/v1/metrics"}
	runTelemetrygen(t, append([]string{"metrics"}, append(metrics, "--metrics", "5", "--metric-type", "Sum", "--otlp-metric-name", "tg_requests")...)...)
	runTelemetrygen(t, append([]string{"metrics"}, append(metrics, "--metrics", "1", "--metric-type", "Histogram", "--otlp-metric-name", "tg_latency")...)...)
	runTelemetrygen(t, append([]string{"metrics"}, append(metrics, "--metrics", "1", "--metric-type", "ExponentialHistogram", "--otlp-metric-name", "tg_expo")...)...)
	at = time.Now()
	if v := app.Scalar(t, `tg_requests_total{job="tg-svc"}`, at); v != 4 {
		t.Errorf("tg_requests_total %v, want 4", v)
	}
	// Explicit-bucket histograms are classic series, as in Prometheus.
	if v := app.Scalar(t, `tg_latency_count{job="tg-svc"}`, at); v != 10 {
		t.Errorf("histogram count %v, want 10", v)
	}
	if v := app.Scalar(t, `tg_latency_sum{job="tg-svc"}`, at); v != 3940 {
		t.Errorf("histogram sum %v, want 3940", v)
	}
	if v := app.Scalar(t, `max(tg_latency_bucket{job="tg-svc",le="+Inf"})`, at); v != 10 {
		t.Errorf("+Inf bucket %v, want 10", v)
	}
	if v := app.Scalar(t, `histogram_count(tg_expo{job="tg-svc"})`, at); !(v >= 10 && v < 30) {
		t.Errorf("exponential histogram count %v, want 10–29 observations", v)
	}
}
