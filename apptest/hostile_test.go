package apptest

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// hostileCase is one line of testdata/hostile/cases.jsonl.
type hostileCase struct {
	Name    string            `json:"name"`
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Params  map[string]string `json:"params"`
	Headers map[string]string `json:"headers"`
	// GenParam adds one generated parameter (a query, a selector).
	GenParam *struct {
		Name string `json:"name"`
		gen
	} `json:"gen_param"`
	Body *gen `json:"body"`
	// Want are the accepted statuses; 0 means the server closed the
	// connection without answering (a stalled client cut off).
	Want     []int  `json:"want"`
	WantBody string `json:"want_body"`
	// LimitMS is how long every request of the case may take.
	LimitMS     int  `json:"limit_ms"`
	Concurrency int  `json:"concurrency"`
	Stall       bool `json:"stall"`
	// StallHeaders sends half a request line and headers, then nothing.
	StallHeaders bool `json:"stall_headers"`
	// AbortMS makes the client give up after this long (status 0): the
	// server must then stop the work within the idle check's second.
	AbortMS int `json:"abort_ms"`
}

//go:embed testdata/hostile/cases.jsonl
var hostileCases []byte

// Limits the hostile corpus runs under: the memory cap given to the
// server, and the peak RSS (VmHWM) it must stay under over the whole
// corpus, 16 concurrent 256 MiB gzip bombs and 127 MiB snappy bodies
// included. The in-flight budget is 256 MiB, --query.max-samples 5e6
// (80 MB of points; the default 5e7 lets one query hold ~1 GB, as in
// Prometheus), and the server's own heap, head and buffers take the rest.
const (
	hostileMemLimit = "384MiB"
	hostilePeakRSS  = 1 << 30
)

// TestHostileCorpus sends every case of testdata/hostile/cases.jsonl to
// the real binary: 0 crashes, no 5xx but for 503 refusals by a limit, every
// answer within the case's limit and among its statuses, peak RSS under
// hostilePeakRSS, and after each case the server idle again within 1 s
// (goroutines back to the baseline, no query in the active query log).
func TestHostileCorpus(t *testing.T) {
	var cases []hostileCase
	for i, line := range bytes.Split(bytes.TrimSpace(hostileCases), []byte("\n")) {
		var c hostileCase
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatalf("cases.jsonl line %d: %v", i+1, err)
		}
		cases = append(cases, c)
	}
	if len(cases) < 100 {
		t.Fatalf("corpus has %d cases, want at least 100", len(cases))
	}
	t.Setenv("GOMEMLIMIT", hostileMemLimit)
	dir := t.TempDir()
	flags := []string{
		"--web.read-timeout=3s", "--web.read-header-timeout=2s",
		"--ingest.max-inflight-bytes=256MiB", "--query.timeout=10s", "--query.max-samples=5000000", "--web.enable-admin-api",
	}
	// TAILROOT_HOSTILE_FLAGS adds flags, e.g. to see the corpus fail with a
	// limit turned off (--query.max-size=0).
	flags = append(flags, strings.Fields(os.Getenv("TAILROOT_HOSTILE_FLAGS"))...)
	a := Start(t, dir, flags...)
	pid := a.cmd.Process.Pid
	baseline := a.goroutines(t)

	worst := map[string]time.Duration{}
	for _, c := range cases {
		if !t.Run(c.Name, func(t *testing.T) {
			took := runHostile(t, a, c)
			worst[c.Name] = took
			a.alive(t)
			a.waitIdle(t, baseline, dir)
		}) {
			a.alive(t)
		}
	}
	peak := vmHWM(t, pid)
	t.Logf("%d cases; peak RSS %d MiB (bound %d MiB, GOMEMLIMIT %s); goroutines at start %d", len(cases), peak>>20, hostilePeakRSS>>20, hostileMemLimit, baseline)
	if peak > hostilePeakRSS {
		t.Errorf("peak RSS %d MiB over the bound of %d MiB", peak>>20, hostilePeakRSS>>20)
	}
	names := make([]string, 0, len(worst))
	for n := range worst {
		names = append(names, n)
	}
	slices.SortFunc(names, func(x, y string) int { return int(worst[y] - worst[x]) })
	for _, n := range names[:min(5, len(names))] {
		t.Logf("slowest: %s: %s", n, worst[n].Round(time.Millisecond))
	}
}

// runHostile sends a case (Concurrency times at once) and checks each
// answer; it returns the slowest.
func runHostile(t *testing.T, a *App, c hostileCase) time.Duration {
	n := max(c.Concurrency, 1)
	limit := time.Duration(c.LimitMS) * time.Millisecond
	type answer struct {
		code       int
		body       string
		retryAfter bool
		took       time.Duration
		err        error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			var code int
			var body string
			var err error
			var ra bool
			switch {
			case c.Stall || c.StallHeaders:
				code, body, err = stalled(a.Addr, c, limit+2*time.Second)
			case c.AbortMS > 0:
				code, body, ra, err = send(t, a, c, time.Duration(c.AbortMS)*time.Millisecond)
				if err != nil {
					code, err = 0, nil // the client gave up, as it meant to
				}
			default:
				code, body, ra, err = send(t, a, c, limit+5*time.Second)
			}
			answers[i] = answer{code, body, ra, time.Since(start), err}
		}()
	}
	wg.Wait()
	var slowest time.Duration
	for i, ans := range answers {
		slowest = max(slowest, ans.took)
		if ans.err != nil && !slices.Contains(c.Want, 0) {
			t.Errorf("request %d: %.300s", i, ans.err)
			continue
		}
		if !slices.Contains(c.Want, ans.code) {
			t.Errorf("request %d: status %d, want one of %v: %.300s", i, ans.code, c.Want, ans.body)
		}
		if ans.code >= 500 && ans.code != http.StatusServiceUnavailable {
			t.Errorf("request %d: %d for a client error", i, ans.code)
		}
		if ans.code == http.StatusServiceUnavailable && (!strings.Contains(ans.body, "ingest.max-") || !ans.retryAfter) {
			t.Errorf("request %d: 503 that names no limit or has no Retry-After (%v): %.300s", i, ans.retryAfter, ans.body)
		}
		if c.WantBody != "" && ans.code != http.StatusServiceUnavailable && !strings.Contains(ans.body, c.WantBody) {
			t.Errorf("request %d: answer does not say %q: %.300s", i, c.WantBody, ans.body)
		}
		if ans.took > limit {
			t.Errorf("request %d: took %s, over the case's limit of %s", i, ans.took.Round(time.Millisecond), limit)
		}
	}
	return slowest
}

func send(t *testing.T, a *App, c hostileCase, timeout time.Duration) (code int, body string, retryAfter bool, err error) {
	params := url.Values{}
	for k, v := range c.Params {
		params.Set(k, v)
	}
	if c.GenParam != nil {
		params.Set(c.GenParam.Name, string(c.GenParam.gen.bytes(t)))
	}
	u := a.URL + c.Path
	var reqBody io.Reader
	ct := ""
	switch {
	case c.Body != nil:
		reqBody = bytes.NewReader(c.Body.bytes(t))
		if len(params) > 0 {
			u += "?" + params.Encode()
		}
	case c.Method == http.MethodPost:
		reqBody = strings.NewReader(params.Encode())
		ct = "application/x-www-form-urlencoded"
	case len(params) > 0:
		u += "?" + params.Encode()
	}
	req, err := http.NewRequest(c.Method, u, reqBody)
	if err != nil {
		return 0, "", false, err
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	// A fresh connection per request, closed after it: the idle check
	// counts the server's goroutines, and kept-alive connections hold some.
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), resp.Header.Get("Retry-After") != "", err
}

// stalled opens a connection, sends the headers (with a Content-Length it
// never sends, or only half the headers), then waits for the server to
// answer or cut it off.
func stalled(addr string, c hostileCase, wait time.Duration) (int, string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	var head strings.Builder
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\n", c.Method, c.Path, addr)
	if !c.StallHeaders {
		for k, v := range c.Headers {
			fmt.Fprintf(&head, "%s: %s\r\n", k, v)
		}
		head.WriteString("Content-Length: 100000\r\n\r\n")
	}
	if _, err := conn.Write([]byte(head.String())); err != nil {
		return 0, "", err
	}
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return -1, "", fmt.Errorf("server neither answered nor closed within %s", wait)
		}
		return 0, "", nil // closed without an answer
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), nil
}

func (a *App) alive(t *testing.T) {
	t.Helper()
	select {
	case err := <-a.done:
		a.cmd = nil
		t.Fatalf("tailroot exited: %v\n%s", err, tail(a.Logs(), 4000))
	default:
	}
}

// goroutines reads the server's goroutine count from
// /api/v1/status/runtimeinfo, over a connection closed right after.
func (a *App) goroutines(t *testing.T) int {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(a.URL + "/api/v1/status/runtimeinfo")
	if err != nil {
		t.Fatalf("runtimeinfo: %v", err)
	}
	defer resp.Body.Close()
	var env struct {
		Data struct {
			GoroutineCount int `json:"goroutineCount"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		t.Fatalf("runtimeinfo: %v", err)
	}
	return env.Data.GoroutineCount
}

// waitIdle waits up to 1 s for the goroutines to come back to the
// baseline (a few of slack for the runtime's own) and for the active query
// log to hold no query.
func (a *App) waitIdle(t *testing.T, baseline int, dataDir string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	var g int
	var active string
	for {
		g = a.goroutines(t)
		active = activeQueries(t, dataDir)
		if g <= baseline+4 && active == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("server not idle 1 s after the case: %d goroutines (baseline %d), active queries %q", g, baseline, active)
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// activeQueries returns the queries in the engine's active query log, the
// file Prometheus' tracker keeps: a JSON array padded with spaces and NULs.
func activeQueries(t *testing.T, dataDir string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, "queries", "queries.active"))
	if err != nil {
		return ""
	}
	s := strings.Trim(string(b), "\x00 \n[],")
	return s
}

func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read VmHWM: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
