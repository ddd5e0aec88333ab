package apptest

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	remoteapi "github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tailroot/tailroot/internal/rwtest"
)

// TestForwardAfterKill measures what a crash costs the receiver: tailroot is
// killed (SIGKILL) while it forwards to a real Prometheus, and started
// again. Samples it had acknowledged but not yet sent are not forwarded
// after the restart (docs/scale-out.md); the test checks that those are
// only the newest ones — a few batch deadlines (here 200ms each), at most 3s, before
// the kill — and that nothing is sent twice.
func TestForwardAfterKill(t *testing.T) {
	prom := PeerBinary(t, "prometheus")
	dir := t.TempDir()
	promCfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(promCfg, []byte("global: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := FreeAddr(t)
	fwStart(t, "prometheus", prom, "http://"+promAddr+"/-/ready",
		"--config.file="+promCfg, "--storage.tsdb.path="+filepath.Join(dir, "prometheus"), "--web.listen-address="+promAddr,
		"--web.enable-remote-write-receiver")
	rec := rwtest.New("http://" + promAddr + "/api/v1/write")
	proxy := httptest.NewServer(rec)
	defer proxy.Close()
	cfgPath := filepath.Join(dir, "tailroot.yml")
	cfg := fmt.Sprintf("remote_write:\n  - url: %s/api/v1/write\n    queue_config: {batch_send_deadline: 200ms}\n", proxy.URL)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	app := Start(t, filepath.Join(dir, "tailroot"), "--config.file="+cfgPath)

	written := map[int64]float64{}
	write := func(seq int) {
		ms := time.Now().UnixMilli()
		req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
			Labels:  []prompb.Label{{Name: "__name__", Value: "fwd_kill"}},
			Samples: []prompb.Sample{{Timestamp: ms, Value: float64(seq)}},
		}}}
		if _, err := writeClient(t, app, remoteapi.WriteV1MessageType).Store(context.Background(), compress(t, req), 0); err != nil {
			t.Fatalf("write %d: %v", seq, err)
		}
		written[ms] = float64(seq)
	}
	seq := 0
	for ; seq < 50; seq++ {
		write(seq)
		time.Sleep(50 * time.Millisecond)
	}
	killedAt := time.Now()
	app.KillAndRestart(t)
	for end := seq + 30; seq < end; seq++ {
		write(seq)
		time.Sleep(50 * time.Millisecond)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		acks, _ := rec.Acks()
		n := 0
		for k := range acks {
			if k.T > killedAt.UnixMilli() {
				n++
			}
		}
		if n == 30 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	acks, vals := rec.Acks()
	var lost []int64
	for ms, v := range written {
		k := rwtest.Key{Series: `{__name__="fwd_kill"}`, T: ms}
		switch n := acks[k]; {
		case n == 0:
			lost = append(lost, ms)
		case n > 1:
			t.Errorf("sample at %d acknowledged %d times", ms, n)
		case vals[k] != v:
			t.Errorf("sample at %d has value %v, want %v", ms, vals[k], v)
		}
	}
	for _, ms := range lost {
		if ms > killedAt.UnixMilli() {
			t.Errorf("sample at %d, written after the restart, was not forwarded", ms)
		}
		if age := killedAt.Sub(time.UnixMilli(ms)); age > 3*time.Second {
			t.Errorf("sample written %s before the kill was lost; only the unsent tail should be", age)
		}
	}
	t.Logf("of %d samples, %d were lost to the kill (acknowledged by tailroot, not yet sent); none sent twice", len(written), len(lost))
}
