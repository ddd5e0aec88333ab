package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestHelpExitsZero runs every command with --help in the built binary:
// asking for help is not an error.
func TestHelpExitsZero(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tailroot")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, cmd := range []string{"serve", "attribute", "simulate", "eval-rca"} {
		for _, h := range []string{"-h", "--help"} {
			c := exec.Command(bin, cmd, h)
			c.Env = os.Environ()
			out, err := c.CombinedOutput()
			if err != nil {
				t.Errorf("tailroot %s %s: %v\n%s", cmd, h, err, out)
			}
			if len(out) == 0 {
				t.Errorf("tailroot %s %s printed nothing", cmd, h)
			}
		}
	}
}
