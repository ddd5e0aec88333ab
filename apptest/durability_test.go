package apptest

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailroot/tailroot/internal/diskfull"
)

// testSeed is TAILROOT_SEED when set (to repeat a run), else the clock.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TAILROOT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TAILROOT_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (TAILROOT_SEED=%d repeats this run)", seed, seed)
	return seed
}

func ready(url string) bool {
	resp, err := http.Get(url + "/-/ready")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestDiskFullLosesNothingAcknowledged runs the real server on a small
// tmpfs under mixed ingest (remote write 1.0 and 2.0, OTLP metrics, NDJSON
// request records, evidence), fills the tmpfs with a ballast file at a
// random moment, frees it, lets writes resume by themselves, then kills
// the server with SIGKILL and restarts it: every acknowledged value must be
// back where it was written and no value of a 5xx answer may be. Twenty
// episodes on one data directory, the moments drawn from a printed seed;
// every fourth one kills the server while the disk is still full.
func TestDiskFullLosesNothingAcknowledged(t *testing.T) {
	dir := diskfull.Mount(t, 192<<20)
	rng := rand.New(rand.NewPCG(testSeed(t), 1))
	// Even episodes run without a free-space floor, so commits meet ENOSPC
	// in the WAL; odd ones with one, so most writes are refused before.
	floor := func(episode int) string {
		return "--storage.tsdb.min-free-space=" + []string{"0", "16MiB"}[episode%2]
	}
	app := Start(t, dir, floor(0))
	// What the server logs when the TSDB cuts its WAL after a failed
	// commit, when it refuses writes on low space, and when the record
	// pipeline recovers: counted to show which paths the run took.
	logMarks := []string{"WAL cut back", "until the disk has room", "records: recovered", "panic in the TSDB commit"}
	marks := make([]int, len(logMarks))
	var (
		next       atomic.Int64
		ledgers    []*ledger
		notReady   int
		refused    int
		ackedTotal int
	)
	const episodes = 20
	for iter := range episodes {
		l := newLedger()
		ledgers = append(ledgers, l)
		fillAfter := time.Duration(50+rng.IntN(400)) * time.Millisecond
		hold := time.Duration(100+rng.IntN(400)) * time.Millisecond
		killAfter := time.Duration(50+rng.IntN(300)) * time.Millisecond
		ld := startLoad(t, app.URL, iter, l, &next, rng.Uint64())
		time.Sleep(fillAfter)
		ballast, err := diskfull.Fill(dir)
		if err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(hold); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			if !ready(app.URL) {
				notReady++
			}
		}
		// Every fourth episode the server is killed while the disk is still
		// full, before it could reopen: what is on disk then must already
		// be exactly what was acknowledged.
		killFull := iter%4 == 3
		logs := app.Logs()
		if killFull {
			app.Kill(t)
			ld.halt()
		}
		if err := ballast.Free(); err != nil {
			t.Fatal(err)
		}
		if !killFull {
			deadline := time.Now().Add(20 * time.Second)
			for !ready(app.URL) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if !ready(app.URL) {
				t.Fatalf("episode %d: not ready 20 s after the disk was freed\n%s", iter, app.Logs())
			}
			time.Sleep(killAfter)
			logs = app.Logs()
			app.Kill(t)
			ld.halt()
		}
		for i, m := range logMarks {
			marks[i] += strings.Count(logs, m)
		}
		app.args[len(app.args)-1] = floor(iter + 1)
		app.KillAndRestart(t)
		ackedTotal += l.check(t, "after the disk filled, was freed and the server was killed", stored(t, app, iter), iter)
		when := fmt.Sprintf("killed %v after ready", killAfter)
		if killFull {
			when = "killed while full"
		}
		t.Logf("episode %d (fill after %v, full for %v, %s): %s", iter, fillAfter, hold, when, l.summary())
		for k := range numKinds {
			refused += l.status[k][2]
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	for iter, l := range ledgers {
		l.check(t, "after the last restart", stored(t, app, iter), iter)
	}
	if refused == 0 || notReady == 0 {
		t.Errorf("the disk filled %d times but %d writes were refused and /-/ready was not-ready %d times: the test did not reach a full disk", episodes, refused, notReady)
	}
	t.Logf("%d acknowledged values checked, %d writes answered 5xx, /-/ready not ready %d times; the server logged: %d WAL cuts after a failed commit (%d after a panic of the head chunk writer), %d refusals on low space, %d record-pipeline recoveries",
		ackedTotal, refused, notReady, marks[0], marks[3], marks[1], marks[2])
}

// TestCrashLoop kills the server with SIGKILL at random moments during
// mixed ingest and checks, after each restart, every acknowledged value; 10
// rounds, or 100 with TAILROOT_SOAK=1 (make soak).
func TestCrashLoop(t *testing.T) {
	rounds := 10
	if os.Getenv("TAILROOT_SOAK") != "" {
		rounds = 100
	}
	rng := rand.New(rand.NewPCG(testSeed(t), 2))
	app := Start(t, t.TempDir())
	var (
		next    atomic.Int64
		ledgers []*ledger
		total   int
	)
	for iter := range rounds {
		l := newLedger()
		ledgers = append(ledgers, l)
		killAfter := time.Duration(100+rng.IntN(700)) * time.Millisecond
		ld := startLoad(t, app.URL, iter, l, &next, rng.Uint64())
		time.Sleep(killAfter)
		app.Kill(t)
		ld.halt()
		app.KillAndRestart(t)
		total += l.check(t, "after kill -9", stored(t, app, iter), iter)
		if testing.Verbose() {
			t.Logf("round %d (killed after %v): %s", iter, killAfter, l.summary())
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	for iter, l := range ledgers {
		l.check(t, "after the last restart", stored(t, app, iter), iter)
	}
	if total == 0 {
		t.Fatal("nothing was acknowledged")
	}
	t.Logf("%d rounds, %d acknowledged values checked", rounds, total)
}
