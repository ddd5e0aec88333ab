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
