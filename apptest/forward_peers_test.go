package apptest

import (
	"fmt"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

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

// Start runs the process and waits until ready answers 200. A process
// that exits before it is ready is started again, twice at most, with the
// same flags (the other processes know its addresses): Thanos Receive can
// panic at start-up when its tenant pruning runs before the tenant's TSDB
// is open (a nil head in MultiTSDB.Prune), which has nothing to do with
// what the test checks.
func (p *fwProc) Start(t *testing.T) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		err := p.startOnce(t)
		if err == nil {
			return
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("%v\nstarting it again (attempt %d of 3)", err, attempt+1)
	}
}

// fwReadyClient polls readiness, bounded: a process that hangs on a
// request must not hang the test.
var fwReadyClient = &http.Client{Timeout: 2 * time.Second}

// startOnce is one try of Start: an error when the process exited before
// it was ready; a process not ready after 90 s fails the test.
func (p *fwProc) startOnce(t *testing.T) error {
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
			return fmt.Errorf("%s exited before ready: %v\n%s", p.name, err, fwTail(p.logs.String(), 4000))
		default:
		}
		if resp, err := fwReadyClient.Get(p.ready); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s not ready at %s after 90s:\n%s", p.name, p.ready, fwTail(p.logs.String(), 4000))
	return nil
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
