package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grafana/grafana-plugin-sdk-go/backend"
	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/prompb"
)

// The integration tests run a real tailroot binary, built once
// on first use (or named by TAILROOT_BIN). Two servers are started on demand and shared:
// a fresh one fed fixed data through remote write, whose answers are
// deterministic and checked against golden frames, and one running the
// built-in vLLM simulator, the data a user sees after `make run`.

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current output")

var (
	tailrootBin string
	procsMu     sync.Mutex
	procs       []*exec.Cmd
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	stopAll()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// binary builds cmd/tailroot once per test process, the first time a test
// needs a server (unit tests and fuzz targets do not pay for it).
// TAILROOT_BIN, when set, names a binary to use instead.
func binary() (string, error) {
	buildOnce.Do(func() {
		if tailrootBin = os.Getenv("TAILROOT_BIN"); tailrootBin != "" {
			return
		}
		if buildDir, buildErr = os.MkdirTemp("", "tailroot-plugin-test-"); buildErr != nil {
			return
		}
		tailrootBin = filepath.Join(buildDir, "tailroot")
		cmd := exec.Command("go", "build", "-o", tailrootBin, "./cmd/tailroot")
		cmd.Dir = repoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build tailroot: %v\n%s", err, out)
		}
	})
	return tailrootBin, buildErr
}

// pluginRoot is the plugin's Go module (this file is grafana-plugin/pkg/plugin/).
func pluginRoot() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(self), "..", "..")
}

// repoRoot is the server's Go module, one folder above the plugin's.
func repoRoot() string { return filepath.Join(pluginRoot(), "..") }

func stopAll() {
	procsMu.Lock()
	defer procsMu.Unlock()
	for _, c := range procs {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	procs = nil
}

// server is one running tailroot.
type server struct {
	URL        string
	user, pass string
	logs       *bytes.Buffer
}

// startServer runs `tailroot serve` on a free port and waits for /-/ready.
// The process lives until TestMain ends.
func startServer(user, pass string, extra ...string) (*server, error) {
	bin, err := binary()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_ = l.Close()
	dataDir, err := os.MkdirTemp("", "tailroot-plugin-data-")
	if err != nil {
		return nil, err
	}
	s := &server{URL: "http://" + addr, user: user, pass: pass, logs: &bytes.Buffer{}}
	cmd := exec.Command(bin, append([]string{"serve", "--listen", addr, "--data-dir", dataDir, "--log.level", "warn"}, extra...)...)
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start tailroot: %w", err)
	}
	procsMu.Lock()
	procs = append(procs, cmd)
	procsMu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/-/ready", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, fmt.Errorf("tailroot not ready after 60s")
}

// instantValue runs an instant query directly against the server and
// returns the single float sample's value.
func (s *server) instantValue(q string, ts time.Time) (float64, error) {
	u := s.URL + "/api/v1/query?" + url.Values{"query": {q}, "time": {formatUnix(ts)}}.Encode()
	resp, err := http.Get(u)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var env struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return 0, err
	}
	if len(env.Data.Result) != 1 {
		return 0, fmt.Errorf("%d samples", len(env.Data.Result))
	}
	var f float64
	_, err = fmt.Sscan(env.Data.Result[0].Value[1].(string), &f)
	return f, err
}

// T0 is the first timestamp of the fixed data set, 2023-11-14T22:15:00Z: a
// multiple of the 15 s step, so range queries aligned to the step evaluate
// exactly on the samples.
var T0 = time.Unix(1_700_000_100, 0).UTC()

const (
	fixedStep   = 15 * time.Second
	fixedPoints = 41 // T0 … T0+10m
)

// fixedWriteRequest is the golden data set. Every value is simple enough to
// check by hand:
//
//   - vllm:num_requests_running{instance="gpu-0"} = i and {instance="gpu-1"}
//     = 2i at T0 + 15s·i;
//   - vllm:e2e_request_latency_seconds_bucket{instance="gpu-0"}, a classic
//     histogram gaining per 15 s one request ≤ 0.5 s, two in (0.5, 1] and
//     one in (1, 2]: cumulative le=0.5: i, le=1: 3i, le=2: 4i, +Inf: 4i;
//   - vllm:time_to_first_token_seconds{instance="gpu-0"}, a native
//     histogram at T0 + 15s·i with zero bucket [-0.001, 0.001] holding i,
//     (0.5, 1] holding 2i and (1, 2] holding 3i (schema 0).
func fixedWriteRequest() *prompb.WriteRequest {
	lbls := func(name string, kv ...string) []prompb.Label {
		l := []prompb.Label{{Name: "__name__", Value: name}}
		for i := 0; i < len(kv); i += 2 {
			l = append(l, prompb.Label{Name: kv[i], Value: kv[i+1]})
		}
		return l
	}
	floats := func(f func(i int) float64) []prompb.Sample {
		out := make([]prompb.Sample, fixedPoints)
		for i := range out {
			out[i] = prompb.Sample{Timestamp: T0.Add(time.Duration(i) * fixedStep).UnixMilli(), Value: f(i)}
		}
		return out
	}
	const model = "llama-8b"
	wr := &prompb.WriteRequest{}
	for _, inst := range []struct {
		name string
		mult float64
	}{{"gpu-0", 1}, {"gpu-1", 2}} {
		wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{
			Labels:  lbls("vllm:num_requests_running", "instance", inst.name, "job", "vllm", "model_name", model),
			Samples: floats(func(i int) float64 { return inst.mult * float64(i) }),
		})
	}
	for _, b := range []struct {
		le  string
		per float64
	}{{"0.5", 1}, {"1", 3}, {"2", 4}, {"+Inf", 4}} {
		wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{
			Labels:  lbls("vllm:e2e_request_latency_seconds_bucket", "instance", "gpu-0", "job", "vllm", "le", b.le, "model_name", model),
			Samples: floats(func(i int) float64 { return b.per * float64(i) }),
		})
	}
	hs := make([]prompb.Histogram, fixedPoints)
	for i := range hs {
		n := uint64(i)
		h := &histogram.Histogram{
			Schema:          0,
			ZeroThreshold:   0.001,
			ZeroCount:       n,
			Count:           6 * n,
			Sum:             7.5 * float64(n),
			PositiveSpans:   []histogram.Span{{Offset: 0, Length: 2}},
			PositiveBuckets: []int64{int64(2 * n), int64(n)}, // deltas: 2i, 3i
		}
		hs[i] = prompb.FromIntHistogram(T0.Add(time.Duration(i)*fixedStep).UnixMilli(), h)
	}
	wr.Timeseries = append(wr.Timeseries, prompb.TimeSeries{
		Labels:     lbls("vllm:time_to_first_token_seconds", "instance", "gpu-0", "job", "vllm", "model_name", model),
		Histograms: hs,
	})
	return wr
}

func (s *server) remoteWrite(wr *prompb.WriteRequest) error {
	raw, err := wr.Marshal()
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, s.URL+"/api/v1/write", bytes.NewReader(snappy.Encode(nil, raw)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return fmt.Errorf("remote write: %d %s", resp.StatusCode, b.String())
	}
	return nil
}

var (
	fixedOnce sync.Once
	fixedSrv  *server
	fixedErr  error
	simOnce   sync.Once
	simSrv    *server
	simErr    error
)

// fixedServer returns the shared server holding fixedWriteRequest's data.
func fixedServer(t *testing.T) *server {
	t.Helper()
	fixedOnce.Do(func() {
		fixedSrv, fixedErr = startServer("", "")
		if fixedErr == nil {
			fixedErr = fixedSrv.remoteWrite(fixedWriteRequest())
		}
	})
	if fixedErr != nil {
		t.Fatalf("fixed-data server: %v", fixedErr)
	}
	return fixedSrv
}

// simServer returns the shared server running the vLLM simulator, once its
// backfill is queryable.
func simServer(t *testing.T) *server {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the simulator server takes ~15 s to backfill")
	}
	simOnce.Do(func() {
		simSrv, simErr = startServer("", "", "--simulate")
		if simErr != nil {
			return
		}
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			// Backfill writes forward from an hour ago: wait until every
			// instance has most of the hour and a sample from the last minute.
			v, err := simSrv.instantValue(`count((count_over_time(vllm:kv_cache_usage_perc[1h]) >= 200) and (time() - timestamp(vllm:kv_cache_usage_perc) < 60))`, time.Now())
			if err == nil && v >= 6 {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		simErr = fmt.Errorf("simulator backfill not queryable after 90s:\n%s", simSrv.logs.String())
	})
	if simErr != nil {
		t.Fatalf("simulator server: %v", simErr)
	}
	return simSrv
}

// newTestDatasource builds a Datasource the way Grafana's instance manager
// does, from instance settings.
func newTestDatasource(t *testing.T, settings backend.DataSourceInstanceSettings) *Datasource {
	t.Helper()
	inst, err := NewDatasource(context.Background(), settings)
	if err != nil {
		t.Fatalf("NewDatasource: %v", err)
	}
	ds := inst.(*Datasource)
	t.Cleanup(ds.Dispose)
	return ds
}

// checkGolden compares resp, rendered as Grafana receives it (frames as
// data-frame JSON), with testdata/<name>.golden.json; -update rewrites it.
func checkGolden(t *testing.T, name string, resp backend.DataResponse) {
	t.Helper()
	got, err := json.MarshalIndent(resp, "", "  ")
	if err != nil {
		t.Fatalf("marshal response: %v", err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(run go test -update to accept)", path, i+1, g, w)
			}
		}
	}
}

// approx reports whether a and b agree to 1e-9 relative.
func approx(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}
