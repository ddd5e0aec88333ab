package thanos

import (
	"net"
	"net/http"
	"testing"
)

// TestLaunchMovesOffATakenAddress starts a Thanos Store on an HTTP address
// another listener holds, as a parallel test's process can take one that
// FreeAddr found free: the store exits, launch starts it again on fresh
// addresses, and it is ready there.
func TestLaunchMovesOffATakenAddress(t *testing.T) {
	Binary(t)
	bucket := NewBucket(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().String()
	p := &Process{HTTP: taken, GRPC: FreeAddr(t)}
	launch(t, p, "store", []string{
		"store", "--objstore.config-file=" + bucket.Config, "--data-dir=" + t.TempDir(),
		"--http-address=" + p.HTTP, "--grpc-address=" + p.GRPC,
	})
	if p.HTTP == taken {
		t.Fatalf("store still on the taken address %s", taken)
	}
	resp, err := http.Get("http://" + p.HTTP + "/-/ready")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("store on %s: /-/ready %d", p.HTTP, resp.StatusCode)
	}
}
