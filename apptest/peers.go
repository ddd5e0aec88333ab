package apptest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

var (
	peersOnce sync.Once
	peers     map[string]string
	peersErr  error
)

// PeerBinary returns the path of a peer server built from the Go module
// proxy by shared/tools/peers/build-peers.sh (prometheus, promtool,
// victoria-metrics): the script builds them once into a cache and prints
// NAME=PATH lines. PEER_<NAME>_BIN (e.g. PEER_PROMETHEUS_BIN) overrides.
// The test skips, saying why, only when the script is not there or the
// build fails.
func PeerBinary(t testing.TB, name string) string {
	t.Helper()
	if p := os.Getenv("PEER_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) + "_BIN"); p != "" {
		return p
	}
	peersOnce.Do(func() {
		_, self, _, _ := runtime.Caller(0)
		root := filepath.Dir(filepath.Dir(self))
		script := filepath.Join(root, "..", "shared", "tools", "peers", "build-peers.sh")
		if _, err := os.Stat(script); err != nil {
			// No script here, but binaries it built earlier may be cached.
			if home, herr := os.UserHomeDir(); herr == nil {
				dir := filepath.Join(home, ".cache", "tailroot-peers", "bin")
				peers = map[string]string{
					"prometheus":       filepath.Join(dir, "prometheus-v0.316.0"),
					"promtool":         filepath.Join(dir, "promtool-v0.316.0"),
					"victoria-metrics": filepath.Join(dir, "victoria-metrics-v1.151.0"),
				}
				if _, serr := os.Stat(peers["prometheus"]); serr == nil {
					return
				}
			}
			peers, peersErr = nil, err
			return
		}
		var stderr bytes.Buffer
		cmd := exec.Command("bash", script)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			peersErr = &buildError{err: err, log: stderr.String()}
			return
		}
		peers = map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), "="); ok {
				peers[k] = v
			}
		}
	})
	if peersErr != nil {
		t.Skipf("peer binaries cannot be built here: %v", peersErr)
	}
	p, ok := peers[name]
	if !ok {
		t.Fatalf("build-peers.sh printed no %q", name)
	}
	return p
}

type buildError struct {
	err error
	log string
}

func (e *buildError) Error() string {
	log := e.log
	if len(log) > 2000 {
		log = log[len(log)-2000:]
	}
	return e.err.Error() + ": " + log
}
