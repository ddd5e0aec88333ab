package apptest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"
)

// promtool returns the path of Debian's promtool. `make test` installs it;
// outside CI the test is skipped when it is missing, in CI it fails.
func promtool(t *testing.T) string {
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found; `make test-deps` installs Debian's prometheus package")
		}
		t.Skip("promtool not found; run `make test-deps`")
	}
	return p
}

// TestPromtoolQueries runs promtool's query commands against tailroot, as an
// operator would against Prometheus, and checks what it prints.
func TestPromtoolQueries(t *testing.T) {
	bin := promtool(t)
	app := Start(t, t.TempDir())
	t0 := time.Now().Add(-10 * time.Minute).Truncate(time.Minute)
	var ts []prompb.TimeSeries
	for i, model := range []string{"llama-8b", "llama-70b"} {
		s := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: "vllm:num_requests_waiting"}, {Name: "model_name", Value: model}}}
		for k := range 11 {
			s.Samples = append(s.Samples, prompb.Sample{Timestamp: t0.Add(time.Duration(k) * time.Minute).UnixMilli(), Value: float64((i + 1) * k)})
		}
		ts = append(ts, s)
	}
	c := writeClient(t, app, remoteapi.WriteV1MessageType)
	if _, err := c.Store(context.Background(), compress(t, &prompb.WriteRequest{Timeseries: ts}), 0); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	at := t0.Add(10 * time.Minute)

	out := run("query", "instant", "--time", at.Format(time.RFC3339), app.URL, `sum(vllm:num_requests_waiting)`)
	if want := "{} => 30 @[" + fmt.Sprint(at.Unix()) + "]"; strings.TrimSpace(out) != want {
		t.Errorf("instant query printed %q, want %q", out, want)
	}
	out = run("query", "instant", "-o", "json", "--time", at.Format(time.RFC3339), app.URL, `vllm:num_requests_waiting{model_name="llama-70b"}`)
	if !strings.Contains(out, `"value":[`+fmt.Sprint(at.Unix())+`,"20"]`) {
		t.Errorf("instant json printed %q, want value 20", out)
	}
	out = run("query", "range", "--start", t0.Format(time.RFC3339), "--end", t0.Add(2*time.Minute).Format(time.RFC3339), "--step", "1m", app.URL, `vllm:num_requests_waiting{model_name="llama-8b"} * 10`)
	for k := range 3 {
		want := fmt.Sprintf("%d @[%d]", 10*k, t0.Add(time.Duration(k)*time.Minute).Unix())
		if !strings.Contains(out, want) {
			t.Errorf("range query output %q lacks %q", out, want)
		}
	}
	out = run("query", "labels", app.URL, "model_name")
	if strings.TrimSpace(out) != "llama-70b\nllama-8b" {
		t.Errorf("labels printed %q", out)
	}
	out = run("query", "series", "--match", `{__name__="vllm:num_requests_waiting"}`, app.URL)
	if strings.Count(out, "vllm:num_requests_waiting") != 2 {
		t.Errorf("series printed %q, want both series", out)
	}
}
