package cuda

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tailroot/tailroot/bpf"
	"github.com/tailroot/tailroot/bpf/internal/testutil"
)

func TestMain(m *testing.M) { testutil.MainWithLeakCheck(m) }

// buildFake builds the stand-in library (named like the real runtime so
// FindLibraries recognises it) and the caller program.
func buildFake(tb testing.TB) (lib, caller string) {
	tb.Helper()
	dir := tb.TempDir()
	lib = testutil.BuildC(tb, dir, "libcudart.so.12", []string{"fakecuda.c"}, "-shared", "-fPIC")
	caller = testutil.BuildC(tb, dir, "cudacaller", []string{"cudacaller.c"}, "-ldl")
	return lib, caller
}

// call is one line of cudacaller's output: the caller's own view.
type call struct {
	name     string
	tid      uint32
	start    uint64 // CLOCK_MONOTONIC ns before the call
	dur      uint64 // ns
	stream   uint64
	realtime int64 // CLOCK_REALTIME ns before the call
}

func parseCall(t *testing.T, line string) call {
	f := strings.Fields(line)
	if len(f) != 6 {
		t.Fatalf("caller line %q: want 6 fields", line)
	}
	u := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("caller line %q: %v", line, err)
		}
		return v
	}
	return call{f[0], uint32(u(f[1])), u(f[2]), u(f[3]), u(f[4]), int64(u(f[5]))}
}

// nominal is fakecuda.c's sleep per function.
var nominal = map[string]time.Duration{
	"cudaLaunchKernel": 2 * time.Millisecond, "cudaGraphLaunch": 2 * time.Millisecond,
	"cudaStreamSynchronize": 5 * time.Millisecond, "cudaDeviceSynchronize": 5 * time.Millisecond,
	"cudaMemcpy": 3 * time.Millisecond, "cudaMemcpyAsync": 3 * time.Millisecond,
	"cuLaunchKernel": 2 * time.Millisecond, "cuStreamSynchronize": 5 * time.Millisecond,
}

func absDiff(a, b int64) time.Duration {
	if a > b {
		return time.Duration(a - b)
	}
	return time.Duration(b - a)
}

// TestFakeCUDALatencies runs a program that calls every function of the
// stand-in library, timing each call itself, and checks each probe event
// against the caller's numbers: same function, thread and stream argument
// (read from registers and, for the launches, the stack), start and
// duration within 1 ms, and a wall-clock start (bpf.Clock) within 1 ms of
// the caller's CLOCK_REALTIME reading.
func TestFakeCUDALatencies(t *testing.T) {
	testutil.RequireRoot(t)
	lib, caller := buildFake(t)
	p, err := Load(Options{Paths: []string{lib}})
	if err != nil {
		t.Fatalf("load: %+v", err)
	}
	defer p.Close()
	if m := p.Missing(); !slices.Equal(m, []string{"cuGraphLaunch"}) {
		t.Fatalf("Missing = %v, want [cuGraphLaunch] (absent from fakecuda.c)", m)
	}
	if a := p.Attached(); len(a) != 8 {
		t.Fatalf("Attached = %v, want 8 symbols", a)
	}
	clock, err := bpf.NewClock()
	if err != nil {
		t.Fatal(err)
	}

	const rounds = 3
	cmd := exec.Command(caller, lib, "calls", strconv.Itoa(rounds))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "ready" {
		t.Fatalf("caller did not start: %q", out.Text())
	}
	libs, err := FindLibraries(pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) != 1 {
		t.Fatalf("FindLibraries = %v, want the one fake libcudart", libs)
	}
	if a, b := mustStat(t, libs[0]), mustStat(t, lib); !os.SameFile(a, b) {
		t.Fatalf("FindLibraries found %s, not %s", libs[0], lib)
	}
	fmt.Fprintln(stdin, "go")
	var calls []call
	for out.Scan() {
		calls = append(calls, parseCall(t, out.Text()))
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(calls) != rounds*8 {
		t.Fatalf("caller made %d calls, want %d", len(calls), rounds*8)
	}

	var evs []Event
	p.SetDeadline(time.Now().Add(5 * time.Second))
	for len(evs) < len(calls) {
		var ev Event
		if err := p.Read(&ev); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("got %d events for pid %d, want %d", len(evs), pid, len(calls))
			}
			t.Fatal(err)
		}
		if ev.PID == uint32(pid) {
			evs = append(evs, ev)
		}
	}

	var worstStart, worstDur, worstWall time.Duration
	for i, c := range calls {
		ev := evs[i]
		if ev.Symbol.String() != c.name || ev.TID != c.tid {
			t.Fatalf("event %d: %s tid %d, caller says %s tid %d", i, ev.Symbol, ev.TID, c.name, c.tid)
		}
		ds, dd := absDiff(int64(ev.Start), int64(c.start)), absDiff(int64(ev.Duration), int64(c.dur))
		dw := absDiff(clock.Wall(ev.Start).UnixNano(), c.realtime)
		worstStart, worstDur, worstWall = max(worstStart, ds), max(worstDur, dd), max(worstWall, dw)
		if ds > time.Millisecond || dd > time.Millisecond || dw > time.Millisecond {
			t.Errorf("%s #%d: probe start %d dur %v, caller start %d dur %v (wall off by %v)",
				c.name, i, ev.Start, time.Duration(ev.Duration), c.start, time.Duration(c.dur), dw)
		}
		if time.Duration(ev.Duration) < nominal[c.name] {
			t.Errorf("%s: probe duration %v shorter than the %v the function sleeps", c.name, time.Duration(ev.Duration), nominal[c.name])
		}
		s, _ := ParseSymbol(c.name)
		if ev.HasStream != s.HasStream() || (ev.HasStream && ev.Stream != c.stream) {
			t.Errorf("%s: stream %#x (has %v), caller passed %#x", c.name, ev.Stream, ev.HasStream, c.stream)
		}
	}
	t.Logf("%d calls: worst |start diff| %v, |duration diff| %v, |wall diff| %v", len(calls), worstStart, worstDur, worstWall)

	hists, err := p.Hists()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range DefaultSymbols() {
		s, _ := ParseSymbol(name)
		h := hists[HistKey{PID: uint32(pid), Symbol: uint32(s)}]
		var want uint64
		var n uint64
		for _, c := range calls {
			if c.name == name {
				want += c.dur
				n++
			}
		}
		if h.Count() != n {
			t.Errorf("%s: histogram count %d, want %d", name, h.Count(), n)
		}
		if absDiff(int64(h.SumNs), int64(want)) > time.Duration(n)*time.Millisecond {
			t.Errorf("%s: histogram sum %v, caller's total %v", name, time.Duration(h.SumNs), time.Duration(want))
		}
	}
	if d, err := p.Dropped(); err != nil || d != 0 {
		t.Fatalf("dropped %d, %v", d, err)
	}
}

func mustStat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

func TestLoadOptionErrors(t *testing.T) {
	if _, err := Load(Options{Paths: []string{"/x"}, Symbols: []string{"cudaMalloc"}}); err == nil || !strings.Contains(err.Error(), "cudaMalloc") {
		t.Fatalf("unknown symbol: err = %v", err)
	}
	if _, err := Load(Options{}); err == nil {
		t.Fatal("no paths accepted")
	}
}

// TestLoadNoSymbols probes a library with none of the functions: an error,
// not a silent probe of nothing.
func TestLoadNoSymbols(t *testing.T) {
	testutil.RequireRoot(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(Options{Paths: []string{exe}}); err == nil || !strings.Contains(err.Error(), "none of 9 symbols") {
		t.Fatalf("err = %v, want none of 9 symbols found", err)
	}
}
