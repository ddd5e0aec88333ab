package thanos

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Version is the Thanos release the tests run against.
const Version = "v0.42.5"

var (
	binOnce sync.Once
	binPath string
	binSkip string
)

// repoRoot is the tailroot checkout this file lives in.
func repoRoot() string {
	_, self, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(self), "..", "..", ".."))
}

// buildScript finds tools/peers/build-thanos.sh of the shared directory:
// $TAILROOT_SHARED_DIR, or shared/ beside the checkout (as CI lays it out),
// or one level further up (a worktree inside a folder beside shared/).
func buildScript() string {
	var dirs []string
	if d := os.Getenv("TAILROOT_SHARED_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	root := repoRoot()
	dirs = append(dirs, filepath.Join(root, "..", "shared"), filepath.Join(root, "..", "..", "shared"))
	for _, d := range dirs {
		p := filepath.Join(d, "tools", "peers", "build-thanos.sh")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// Binary returns the path of the thanos binary: $THANOS_BIN when set,
// otherwise what the shared build script prints (it builds Thanos from the
// Go module proxy once and caches it), or that cache when the script is not
// there. Every test that starts Thanos gets it here. The test is skipped, saying why,
// only when no binary can be had: no script, or the build failed.
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if p := os.Getenv("THANOS_BIN"); p != "" {
			binPath = p
			return
		}
		script := buildScript()
		if script == "" {
			// No script here, but a binary it built earlier may be cached.
			if home, err := os.UserHomeDir(); err == nil {
				if p := filepath.Join(home, ".cache", "tailroot-peers", "bin", "thanos-"+Version); isExec(p) {
					binPath = p
					return
				}
			}
			binSkip = "thanos binary unavailable: no tools/peers/build-thanos.sh in $TAILROOT_SHARED_DIR or shared/ beside the checkout, and THANOS_BIN is unset"
			return
		}
		cmd := exec.Command("bash", script)
		cmd.Env = append(os.Environ(), "THANOS_VERSION="+Version)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			binSkip = fmt.Sprintf("thanos %s could not be built by %s: %v\n%s", Version, script, err, tail(stderr.String(), 4000))
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		binPath = strings.TrimSpace(lines[len(lines)-1])
	})
	if binSkip != "" {
		t.Skip(binSkip)
	}
	return binPath
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
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

// Process is one running Thanos component.
type Process struct {
	Name string
	// HTTP is the component's HTTP address (host:port); GRPC its StoreAPI
	// address, empty for components that serve none.
	HTTP, GRPC string
	args       []string
	cmd        *exec.Cmd
	logs       *syncBuffer
	done       chan error
}

// start runs the thanos binary with p's arguments and kills it when the
// test ends, printing its log when the test failed.
func start(t testing.TB, p *Process) *Process {
	t.Helper()
	p.run(t, Binary(t))
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s log:\n%s", p.Name, tail(p.logs.String(), 8000))
		}
	})
	return p
}

func (p *Process) run(t testing.TB, bin string) {
	t.Helper()
	p.logs = &syncBuffer{}
	p.cmd = exec.Command(bin, p.args...)
	p.cmd.Stdout = p.logs
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.Name, err)
	}
	p.done = make(chan error, 1)
	go func(c *exec.Cmd, done chan error) { done <- c.Wait() }(p.cmd, p.done)
}

// Logs returns what the process printed so far.
func (p *Process) Logs() string { return p.logs.String() }

// Kill stops the process with SIGKILL; it is a no-op when it already ended.
func (p *Process) Kill() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}

// Stop sends SIGTERM and waits up to 30 s for the process to end.
func (p *Process) Stop(t testing.TB) {
	t.Helper()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("%s did not stop within 30s of SIGTERM", p.Name)
	}
	p.cmd = nil
}

// WaitReady polls the component's /-/ready until it answers 200.
func (p *Process) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	if err := p.waitReady(timeout); err != nil {
		t.Fatal(err)
	}
}

// readyClient polls /-/ready.
var readyClient = &http.Client{Timeout: 2 * time.Second}

// waitReady is WaitReady's poll: an error when the process exits first
// (p.cmd is then nil) or is not ready within timeout.
func (p *Process) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.cmd = nil
			return fmt.Errorf("%s exited before ready: %v\n%s", p.Name, err, tail(p.logs.String(), 8000))
		default:
		}
		// A bounded poll: what holds the address may not be the
		// component and may never answer.
		resp, err := readyClient.Get("http://" + p.HTTP + "/-/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %v:\n%s", p.Name, timeout, tail(p.logs.String(), 8000))
}

// Wait waits for a process that ends by itself (compact without --wait)
// and fails the test when it exits non-zero or outlives timeout.
func (p *Process) Wait(t testing.TB, timeout time.Duration) {
	t.Helper()
	select {
	case err := <-p.done:
		p.cmd = nil
		if err != nil {
			t.Fatalf("%s failed: %v\n%s", p.Name, err, tail(p.logs.String(), 8000))
		}
	case <-time.After(timeout):
		t.Fatalf("%s still running after %v:\n%s", p.Name, timeout, tail(p.logs.String(), 8000))
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(b)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
