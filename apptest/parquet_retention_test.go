package apptest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestParquetPastRetention: the real binary first holds 800 requests
// from 8 h ago locally and answers tail_mean over their hour; restarted
// with --records.retention=3h, a Parquet history and a 1 s checkpoint
// (--records.checkpoint-interval, which applies retention), it exports the
// partition, drops it from the local store (its files disappear from the
// records directory), and still answers the same query from the Parquet
// files: the same rows, and a tail mean equal to the one computed here
// from the pushed values.
func TestParquetPastRetention(t *testing.T) {
	dir := t.TempDir()
	hist := filepath.Join(t.TempDir(), "history")
	app := startTokens(t, dir)

	rng := rand.New(rand.NewPCG(51, 52))
	now := time.Now()
	old := now.Add(-8 * time.Hour).Truncate(time.Second)
	var body strings.Builder
	e2e := make([]float64, 0, 800)
	for i := range 800 {
		a := float64(old.Unix()) + float64(i)*2 // 800 requests over 1600 s
		d := math.Round((0.05+rng.ExpFloat64())*1000) / 1000
		e2e = append(e2e, d)
		fmt.Fprintf(&body, `{"request_id":"old-%d","labels":{"model_name":"m"},"arrival":%.3f,"finished":%.3f,"stages":{"queue":%.6f,"prefill":%.6f}}`+"\n",
			i, a, a+d, d/4, d/3)
	}
	for _, b := range []string{body.String(), fmt.Sprintf(`{"request_id":"now","arrival":%d,"finished":%d}`+"\n", now.Unix()-1, now.Unix())} {
		resp := app.Post(t, "/api/v1/requests", "application/x-ndjson", []byte(b), nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("push: %d", resp.StatusCode)
		}
	}
	// The hour after the first arrival holds every old request (the last
	// ends by old + 1598 s + a few seconds).
	ts := old.Add(time.Hour)
	q := `tail_mean(0.9, requests{model_name="m"}[1h], "all")`
	local, lr, code := queryRows(t, app, q, ts, nil)
	if code != http.StatusOK || len(local) == 0 {
		t.Fatalf("local answer: %d %+v", code, lr)
	}

	// Independently: E[S | S ≥ P90(S)], type-7 P90 of the pushed e2e.
	s := slices.Clone(e2e)
	slices.Sort(s)
	h := float64(len(s)-1) * 0.9
	l := int(h)
	q90 := s[l] + (h-float64(l))*(s[l+1]-s[l])
	var sum float64
	var n int
	for _, v := range s {
		if v >= q90 {
			sum += v
			n++
		}
	}
	want := sum / float64(n)
	checkTarget := func(what string, rows map[string]float64) {
		t.Helper()
		found := false
		for k, v := range rows {
			if strings.Contains(k, "statistic=target") && strings.Contains(k, "stage=e2e") {
				found = true
				if math.Abs(v-want) > 1e-6*want {
					t.Errorf("%s: tail mean %v, want %v from the pushed values", what, v, want)
				}
			}
		}
		if !found {
			t.Errorf("%s: no e2e target row in %v", what, rows)
		}
	}
	checkTarget("local", local)
	app.Stop(t)

	// Restart with 3 h retention and the Parquet history.
	part := old.UnixMilli() / (2 * 3600 * 1000) * (2 * 3600 * 1000)
	prefix := strconv.FormatInt(part, 10) + "-"
	app = startTokens(t, dir, "--records.retention=3h", "--records.checkpoint-interval=1s",
		"--records.parquet.dir", hist, "--records.parquet.node", "n1", "--records.parquet.export-interval", "1s")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if !hasPrefixFile(t, filepath.Join(dir, "records"), prefix) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition %d still in the local store after 60 s\n%s", part, app.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := countFiles(t, hist, ".parquet"); n == 0 {
		t.Fatalf("partition dropped locally but no Parquet file under %s", hist)
	}
	fromHistory, hr, code := queryRows(t, app, q, ts, nil)
	if code != http.StatusOK {
		t.Fatalf("answer past retention: %d %+v", code, hr)
	}
	if len(fromHistory) != len(local) {
		t.Fatalf("past retention %d rows, locally %d:\n%v\n%v", len(fromHistory), len(local), fromHistory, local)
	}
	for k, v := range local {
		if g, ok := fromHistory[k]; !ok || math.Abs(g-v) > 1e-12*math.Max(1, math.Abs(v)) {
			t.Errorf("%s: %v from Parquet, %v locally", k, g, v)
		}
	}
	checkTarget("past retention", fromHistory)
	t.Logf("tail mean %v over %d requests from the Parquet history after the local partition was dropped", want, len(e2e))
}

func hasPrefixFile(t *testing.T, dir, prefix string) bool {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			return true
		}
	}
	return false
}
