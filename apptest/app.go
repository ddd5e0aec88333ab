package apptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// Binary builds cmd/tailroot once per test process and returns its path.
// TAILROOT_BIN, when set, names a binary to use instead.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TAILROOT_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tailroot-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "tailroot")
		_, self, _, _ := runtime.Caller(0)
		root := filepath.Dir(filepath.Dir(self))
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/tailroot")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// App is one running tailroot process.
type App struct {
	URL     string
	Addr    string
	DataDir string
	bin     string
	args    []string
	cmd     *exec.Cmd
	logs    *syncBuffer
	done    chan error
	// User and Password, when set, are sent as basic auth on every request.
	User, Password string
}

// FreeAddr returns a loopback address with a port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// Start runs `tailroot serve` on a fresh port over dataDir and waits until
// it is ready. The process is killed when the test ends.
func Start(t testing.TB, dataDir string, extra ...string) *App {
	t.Helper()
	return StartAuth(t, dataDir, "", "", extra...)
}

// StartAuth is Start for a server that requires basic auth (set up through
// --web.config.file in extra).
func StartAuth(t testing.TB, dataDir, user, password string, extra ...string) *App {
	t.Helper()
	a := &App{bin: Binary(t), DataDir: dataDir, Addr: FreeAddr(t), User: user, Password: password}
	a.args = append([]string{"serve", "--listen", a.Addr, "--data-dir", dataDir}, extra...)
	a.start(t)
	t.Cleanup(func() { a.Kill(t) })
	return a
}

func (a *App) start(t testing.TB) {
	t.Helper()
	a.URL = "http://" + a.Addr
	a.logs = &syncBuffer{}
	a.cmd = exec.Command(a.bin, a.args...)
	a.cmd.Stdout = a.logs
	a.cmd.Stderr = a.logs
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start tailroot: %v", err)
	}
	a.done = make(chan error, 1)
	go func(c *exec.Cmd, done chan error) { done <- c.Wait() }(a.cmd, a.done)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-a.done:
			a.cmd = nil
			t.Fatalf("tailroot exited before ready: %v\n%s", err, a.logs.String())
		default:
		}
		req, _ := http.NewRequest(http.MethodGet, a.URL+"/-/ready", nil)
		a.auth(req)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("tailroot not ready after 60s:\n%s", a.logs.String())
}

// Restart stops the process with SIGTERM and starts it again with the same
// flags and data directory.
func (a *App) Restart(t testing.TB) {
	t.Helper()
	a.Stop(t)
	a.start(t)
}

// RestartWith stops the process with SIGTERM and starts it again on the
// same address and data directory with extra flags appended; a repeated
// flag takes its last value, so extra overrides what Start was given.
func (a *App) RestartWith(t testing.TB, extra ...string) {
	t.Helper()
	a.Stop(t)
	a.args = append(a.args, extra...)
	a.start(t)
}

// Stop sends SIGTERM and waits for a clean exit.
func (a *App) Stop(t testing.TB) {
	t.Helper()
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-a.done:
		if err != nil {
			t.Fatalf("tailroot did not exit cleanly on SIGTERM: %v\n%s", err, a.logs.String())
		}
	case <-time.After(60 * time.Second):
		_ = a.cmd.Process.Kill()
		t.Fatalf("tailroot did not exit within 60s of SIGTERM\n%s", a.logs.String())
	}
	a.cmd = nil
}

// Kill sends SIGKILL: the process gets no chance to flush anything.
func (a *App) Kill(t testing.TB) {
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Kill()
	<-a.done
	a.cmd = nil
}

// KillAndRestart kills the process with SIGKILL and starts it again.
func (a *App) KillAndRestart(t testing.TB) {
	t.Helper()
	a.Kill(t)
	a.start(t)
}

// Logs returns what the process printed so far.
func (a *App) Logs() string { return a.logs.String() }

// Get fetches path with query parameters and returns status and body.
func (a *App) Get(t testing.TB, path string, params url.Values) (int, []byte) {
	t.Helper()
	u := a.URL + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.auth(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", u, err)
	}
	return resp.StatusCode, b
}

// Post sends a body and returns the response.
func (a *App) Post(t testing.TB, path, contentType string, body []byte, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, a.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		req.Header[k] = v
	}
	a.auth(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

// Response is the Prometheus API envelope.
type Response struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
	Infos     []string        `json:"infos"`
}

// Sample is one element of a vector result.
type Sample struct {
	Metric    map[string]string `json:"metric"`
	Value     [2]any            `json:"value"`
	Histogram [2]any            `json:"histogram"`
}

// InstantVector runs an instant query at ts and returns the samples.
func (a *App) InstantVector(t testing.TB, q string, ts time.Time) []Sample {
	t.Helper()
	code, body := a.Get(t, "/api/v1/query", url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(ts.UnixMilli())/1000, 'f', 3, 64)}})
	var r Response
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("query %q: decode %s: %v", q, body, err)
	}
	if code != http.StatusOK || r.Status != "success" {
		t.Fatalf("query %q: %d %s", q, code, body)
	}
	var d struct {
		ResultType string   `json:"resultType"`
		Result     []Sample `json:"result"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatalf("query %q: decode data %s: %v", q, r.Data, err)
	}
	if d.ResultType != "vector" {
		t.Fatalf("query %q: result type %s, want vector", q, d.ResultType)
	}
	return d.Result
}

// Scalar runs an instant query whose result is one sample and returns its
// float value.
func (a *App) Scalar(t testing.TB, q string, ts time.Time) float64 {
	t.Helper()
	v := a.InstantVector(t, q, ts)
	if len(v) != 1 {
		t.Fatalf("query %q: %d samples, want 1: %+v", q, len(v), v)
	}
	s, ok := v[0].Value[1].(string)
	if !ok {
		t.Fatalf("query %q: value %v is not a float sample", q, v[0].Value)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("query %q: value %q: %v", q, s, err)
	}
	return f
}

func (a *App) auth(req *http.Request) {
	if a.User != "" {
		req.SetBasicAuth(a.User, a.Password)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
