package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestShippedRules: every rule file in docs/rules passes `tailroot check
// rules`, and the plain-PromQL ones pass promtool's check and unit tests.
func TestShippedRules(t *testing.T) {
	files, err := filepath.Glob("../../docs/rules/*.rules.yml")
	if err != nil || len(files) < 2 {
		t.Fatalf("rule files: %v %v", files, err)
	}
	var out bytes.Buffer
	if err := checkCommand(append([]string{"rules"}, files...), &out); err != nil {
		t.Fatalf("tailroot check rules: %v\n%s", err, out.String())
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (make test-deps installs Debian's prometheus package)")
	}
	for _, args := range [][]string{
		{"check", "rules", "llm-serving.rules.yml"},
		{"test", "rules", "llm-serving.rules.test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "../../docs/rules"
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
}

// TestCheckRulesRefusesBadFiles: a rule that does not parse, or calls a
// function nobody has, fails the check with the file named.
func TestCheckRulesRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("groups:\n  - name: g\n    rules:\n      - record: r\n        expr: no_such_function(up)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := checkCommand([]string{"rules", bad}, &out); err == nil {
		t.Fatalf("bad rule file accepted:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "no_such_function") || !strings.Contains(out.String(), bad) {
		t.Errorf("output does not name the file and the problem:\n%s", out.String())
	}
}
