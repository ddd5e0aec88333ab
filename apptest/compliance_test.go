package apptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// rwComplianceModule is Prometheus' remote-write 2.0 receiver compliance
// suite, pinned. Its go.mod declares another module path than the one it is
// served under, so `go test module@version` is refused: it is copied out of
// the module cache and run as its own main module.
const rwComplianceModule = "github.com/prometheus/compliance/remotewrite/receiver@v0.0.0-20260806071727-67b8327a2e93"

// TestRemoteWriteCompliance runs the remote-write receiver compliance suite
// against the built binary and requires every test to pass.
func TestRemoteWriteCompliance(t *testing.T) {
	if testing.Short() {
		t.Skip("the compliance suite compiles its own module: not in -short")
	}
	out, err := exec.Command("go", "mod", "download", "-json", rwComplianceModule).Output()
	if err != nil {
		t.Skipf("compliance suite not available from the module proxy: %v", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download: %v %s", err, out)
	}
	suite := filepath.Join(t.TempDir(), "suite")
	if b, err := exec.Command("cp", "-r", mod.Dir, suite).CombinedOutput(); err != nil {
		t.Fatalf("copy suite: %v %s", err, b)
	}
	if b, err := exec.Command("chmod", "-R", "u+w", suite).CombinedOutput(); err != nil {
		t.Fatalf("chmod suite: %v %s", err, b)
	}
	app := Start(t, t.TempDir())
	cfg := filepath.Join(suite, "config.yml")
	writeFile(t, cfg, "remote_write:\n  - name: tailroot\n    url: "+app.URL+"/api/v1/write\n")

	cmd := exec.Command("go", "test", "-count=1", "-json", "./...")
	cmd.Dir = suite
	cmd.Env = append(os.Environ(), "PROMETHEUS_RW2_COMPLIANCE_CONFIG_FILE="+cfg, "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	res, runErr := cmd.Output()

	results := map[string]string{}
	output := map[string]*strings.Builder{}
	sc := bufio.NewScanner(bytes.NewReader(res))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	for sc.Scan() {
		var e struct{ Test, Action, Output string }
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Test == "" {
			continue
		}
		switch e.Action {
		case "pass", "fail", "skip":
			results[e.Test] = e.Action
		case "output":
			if output[e.Test] == nil {
				output[e.Test] = &strings.Builder{}
			}
			output[e.Test].WriteString(e.Output)
		}
	}
	// Count leaf tests: those with no subtests of their own.
	var passed, failed, skipped int
	var failures []string
	for name, r := range results {
		leaf := true
		for other := range results {
			if strings.HasPrefix(other, name+"/") {
				leaf = false
				break
			}
		}
		if !leaf {
			continue
		}
		switch r {
		case "pass":
			passed++
		case "fail":
			failed++
			failures = append(failures, name)
		case "skip":
			skipped++
		}
	}
	sort.Strings(failures)
	for _, f := range failures {
		t.Errorf("compliance test %s failed:\n%s", f, output[f])
	}
	if passed == 0 {
		t.Fatalf("compliance suite ran no test (%v):\n%s", runErr, stderr.String())
	}
	if runErr != nil && failed == 0 {
		t.Fatalf("compliance suite: %v\n%s", runErr, stderr.String())
	}
	t.Logf("remote-write receiver compliance: %d/%d passed, %d skipped", passed, passed+failed, skipped)
}
