package gil

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tailroot/tailroot/bpf/internal/testutil"
)

func TestMain(m *testing.M) { testutil.MainWithLeakCheck(m) }

func TestChooseGILSymbols(t *testing.T) {
	cases := []struct {
		name  string
		in    []string
		want  []string
		exact bool
	}{
		{"unstripped", []string{"PyEval_RestoreThread", "take_gil", "drop_gil", "PyEval_AcquireThread"}, []string{"take_gil"}, true},
		{"gcc clone", []string{"take_gil.isra.0", "PyEval_RestoreThread"}, []string{"take_gil.isra.0"}, true},
		{"stripped", []string{"PyEval_AcquireThread", "Py_Main", "PyEval_RestoreThread"}, []string{"PyEval_RestoreThread", "PyEval_AcquireThread"}, false},
		{"one fallback", []string{"PyEval_RestoreThread", "PyEval_RestoreThread"}, []string{"PyEval_RestoreThread"}, false},
		{"not python", []string{"main", "take_gilx"}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, exact := ChooseGILSymbols(c.in)
			if !slices.Equal(got, c.want) || exact != c.exact {
				t.Fatalf("got %v %v, want %v %v", got, exact, c.want, c.exact)
			}
		})
	}
}

func TestGILSymbolsNotPython(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := GILSymbols(exe); !errors.Is(err, ErrNoGILSymbol) {
		t.Fatalf("err = %v, want ErrNoGILSymbol", err)
	}
}

// interpreters returns the distinct CPython executables on this machine:
// python3 on PATH and the system one, which often differ in whether
// take_gil survived stripping.
func interpreters() []string {
	var out []string
	seen := map[string]bool{}
	cands := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append([]string{p}, cands...)
	}
	for _, c := range cands {
		// pyenv shims are shell scripts; ask the interpreter itself.
		b, err := exec.Command(c, "-c", "import sys; print(sys.executable)").Output()
		if err != nil {
			continue
		}
		real, err := filepath.EvalSymlinks(strings.TrimSpace(string(b)))
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		out = append(out, real)
	}
	return out
}

// TestGILContention runs testdata/gil_contend.py (two CPU-bound threads and
// one sleeping 0.5 ms in a loop) under every interpreter found.
//
// Checks that need no model of the scheduler:
//   - every sleeper iteration reacquires the GIL through
//     PyEval_RestoreThread (-> take_gil), so there are at least as many
//     waits as iterations, whichever function is probed;
//   - a spinner keeps the GIL until a waiter has waited the switch
//     interval (5 ms) or it hands over to the other spinner, so waits of
//     milliseconds are common (>= 10 % above 1 ms, mean >= 0.5 ms);
//   - with take_gil (exact): at most one spinner holds the GIL at a time,
//     so at every instant one thread is waiting and the waits sum to at
//     least most of the run; no more than all threads' wall time.
func TestGILContention(t *testing.T) {
	testutil.RequireRoot(t)
	pys := interpreters()
	if len(pys) == 0 {
		t.Skip("no python3 interpreter found")
	}
	for _, py := range pys {
		t.Run(filepath.Base(py), func(t *testing.T) { contend(t, py) })
	}
}

func contend(t *testing.T, py string) {
	const dur = 0.8 // seconds
	script := filepath.Join(testutil.TestdataDir(), "gil_contend.py")
	cmd := exec.Command(py, script, fmt.Sprint(dur))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "ready" {
		t.Fatalf("%s did not start: %q", py, out.Text())
	}
	pid := cmd.Process.Pid
	path, err := FindPython(pid)
	if err != nil {
		t.Fatal(err)
	}
	syms, exact, err := GILSymbols(path)
	if errors.Is(err, ErrNoGILSymbol) {
		t.Skipf("%s (%s) exposes no GIL function: %v", py, path, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: probing %v in %s (exact: %v)", py, syms, path, exact)
	p, err := Load(Options{Path: path, PID: pid})
	if err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer p.Close()

	fmt.Fprintln(stdin, "go")
	var spinWall, allWall float64
	var iters uint64
	for range 3 {
		if !out.Scan() {
			t.Fatal("workload printed too little")
		}
		f := strings.Fields(out.Text())
		wall, _ := strconv.ParseFloat(f[1], 64)
		allWall += wall
		switch f[0] {
		case "spin":
			spinWall = max(spinWall, wall)
		case "sleep":
			iters, _ = strconv.ParseUint(f[2], 10, 64)
		}
	}
	_ = stdin.Close()
	time.Sleep(10 * time.Millisecond)
	waits, err := p.Waits()
	if err != nil {
		t.Fatal(err)
	}
	h := waits[uint32(pid)]
	t.Logf("%d waits (%d over 1 ms), total %.3f s; sleeper iterations %d; spinner wall %.3f s",
		h.Count(), h.CountAbove(0.001), float64(h.SumNs)/1e9, iters, spinWall)
	if iters < 5 {
		t.Fatalf("sleeper made only %d iterations", iters)
	}
	if h.Count() < iters {
		t.Fatalf("%d GIL waits < %d sleeper iterations (each reacquires the GIL)", h.Count(), iters)
	}
	if h.CountAbove(0.001) < iters/10 || h.SumNs < h.Count()*500_000 {
		t.Fatalf("%d waits above 1 ms, mean %.0f µs: too short for spinners that keep the GIL for up to the 5 ms switch interval",
			h.CountAbove(0.001), float64(h.SumNs)/float64(h.Count())/1e3)
	}
	total := float64(h.SumNs) / 1e9
	if total > allWall+0.05 {
		t.Fatalf("waits sum %.3f s, more than all threads' wall time %.3f s", total, allWall)
	}
	if exact && total < 0.7*spinWall {
		t.Fatalf("take_gil waits sum %.3f s; with two spinners one always waits, want >= 0.7 x %.3f s", total, spinWall)
	}
}
