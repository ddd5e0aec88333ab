package apptest

import (
	"bytes"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tailroot/tailroot/sim/requests"
)

// TestTokensCrash kills the server with SIGKILL while four clients push
// request records, restarts it, and checks that every acknowledged request
// is stored once, and that the derived counters count exactly the stored
// records (none lost, none twice).
func TestTokensCrash(t *testing.T) {
	app := startTokens(t, t.TempDir())
	reqs, err := requests.Simulate(requests.Options{Trace: "azure-conv", Limit: 8000, Seed: 8, Start: time.Now().Add(-3 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	client := &http.Client{Timeout: 5 * time.Second}
	push := func(part []requests.Request) {
		defer wg.Done()
		for lo := 0; lo < len(part); lo += 40 {
			select {
			case <-stop:
				return
			default:
			}
			batch := part[lo:min(lo+40, len(part))]
			var body []byte
			for i := range batch {
				body = batch[i].AppendNDJSON(body, requests.LineOptions{})
			}
			resp, err := client.Post(app.URL+"/api/v1/requests", "application/x-ndjson", bytes.NewReader(body))
			if err != nil {
				return // the server died
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return
			}
			mu.Lock()
			for i := range batch {
				acked[batch[i].ID] = true
			}
			mu.Unlock()
		}
	}
	const pushers = 4
	wg.Add(pushers)
	for k := range pushers {
		go push(reqs[k*len(reqs)/pushers : (k+1)*len(reqs)/pushers])
	}
	// Kill once a good part of the traffic is in, mid-stream.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 3000 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	app.Kill(t)
	close(stop)
	wg.Wait()
	if len(acked) < 3000 {
		t.Fatalf("only %d requests acknowledged before the kill", len(acked))
	}
	app.KillAndRestart(t)

	recs := getRecords(t, app)
	seen := map[string]int{}
	for _, r := range recs {
		seen[r.RequestID]++
	}
	missing := 0
	for id := range acked {
		switch seen[id] {
		case 0:
			missing++
		case 1:
		default:
			t.Errorf("acknowledged request %s stored %d times", id, seen[id])
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged requests missing after kill -9 and restart", missing, len(acked))
	}
	at := time.Now()
	for _, q := range []string{`sum(tailroot_tail_requests_total)`, `sum(histogram_count(tailroot_request_e2e_seconds))`} {
		if got := app.Scalar(t, q, at); got != float64(len(recs)) {
			t.Errorf("%s = %v, but %d records are stored", q, got, len(recs))
		}
	}
	t.Logf("%d acknowledged, %d stored (the rest were in flight)", len(acked), len(recs))
}
