package apptest

import (
	"fmt"
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

var (
	fwPeerMu    sync.Mutex
	fwPeerPaths = map[string]string{}
)

// fwPeer returns the path of a peer binary ("thanos" or "prometheus"),
// building it with the project's peer scripts (../shared/tools/peers, which
// cache under ~/.cache/tailroot-peers/bin) when it is missing. TAILROOT_PEERS_BIN
// names a directory holding prebuilt binaries. The test is skipped, with the
// reason, only when no binary exists and no build script is found.
func fwPeer(t *testing.T, name string) string {
	t.Helper()
	fwPeerMu.Lock()
	defer fwPeerMu.Unlock()
	if p, ok := fwPeerPaths[name]; ok {
		return p
	}
	file := map[string]string{"thanos": "thanos-v0.42.5", "prometheus": "prometheus-v0.316.0"}[name]
	if file == "" {
		t.Fatalf("BUG: unknown peer %q", name)
	}
	dirs := []string{os.Getenv("TAILROOT_PEERS_BIN")}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, ".cache", "tailroot-peers", "bin"))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if p := filepath.Join(d, file); fwIsExec(p) {
			fwPeerPaths[name] = p
			return p
		}
	}
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(self))
	script := map[string]string{"thanos": "build-thanos.sh", "prometheus": "build-peers.sh"}[name]
	sp := filepath.Join(root, "..", "shared", "tools", "peers", script)
	if !fwIsExec(sp) {
		t.Skipf("%s not built (%s) and the peer build script %s is missing; run `make peers`", name, file, sp)
	}
	t.Logf("building %s with %s (minutes when cold)", name, sp)
	cmd := exec.Command(sp)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", sp, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if v, ok := strings.CutPrefix(line, name+"="); ok {
			fwPeerPaths[name] = v
		} else if name == "thanos" && strings.HasSuffix(line, file) {
			fwPeerPaths[name] = line
		}
	}
	p := fwPeerPaths[name]
	if !fwIsExec(p) {
		t.Fatalf("%s printed no %s binary:\n%s", sp, name, out)
	}
	return p
}

func fwIsExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// fwProc is a peer server started as a process; Stop and Start can be
// repeated with the same arguments (an outage and its end).
type fwProc struct {
	name  string
	bin   string
	args  []string
	ready string // URL answering 200 when the server is ready
	cmd   *exec.Cmd
	done  chan error
	logs  *syncBuffer
}

func fwStart(t *testing.T, name, bin, ready string, args ...string) *fwProc {
	t.Helper()
	p := &fwProc{name: name, bin: bin, args: args, ready: ready}
	p.Start(t)
	t.Cleanup(func() {
		p.Stop(t)
		if t.Failed() {
			t.Logf("%s output:\n%s", name, fwTail(p.logs.String(), 4000))
		}
	})
	return p
}

func (p *fwProc) Start(t *testing.T) {
	t.Helper()
	p.logs = &syncBuffer{}
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	p.done = make(chan error, 1)
	go func(c *exec.Cmd, d chan error) { d <- c.Wait() }(p.cmd, p.done)
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.cmd = nil
			t.Fatalf("%s exited before ready: %v\n%s", p.name, err, fwTail(p.logs.String(), 4000))
		default:
		}
		if resp, err := http.Get(p.ready); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not ready at %s after 90s:\n%s", p.name, p.ready, fwTail(p.logs.String(), 4000))
}

// Stop sends SIGTERM and waits for the exit (SIGKILL after 60s).
func (p *fwProc) Stop(t *testing.T) {
	t.Helper()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Logf("%s did not stop within 60s of SIGTERM; killed", p.name)
	}
	p.cmd = nil
}

func fwTail(s string, n int) string {
	if len(s) > n {
		return fmt.Sprintf("…%s", s[len(s)-n:])
	}
	return s
}
